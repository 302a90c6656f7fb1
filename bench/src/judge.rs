//! The kernel as judge: udamon's working sets on live programs against the page-table accessed
//! bits of the same processes over the same intervals (see `truth.rs` for how each is read).
//!
//! For each program (or phase of one): start it, wait for its warm-up, run the release `udamon
//! record --pid` on it, and meanwhile take truth intervals at each horizon (clear_refs, sleep
//! that long, smaps: by default four of 2 s, three of 10 s and one of 30 s), then a stretch of
//! 10 s without them (the control: clearing the accessed bits makes the next touch of every
//! page slower, which moves where samples land). Then judge each interval against udamon's
//! working set over a horizon of the interval's length at the snapshot that ends it (what
//! `report wss --horizon` says), and print per program and horizon the medians of truth,
//! udamon, their ratio, the estimate's interval and whether it said it was settled, DAMON's
//! count (whole regions), the control, the top mappings, whether udamon's hottest mapping is
//! the truth's, the bytes udamon calls accessed that are not resident, and the regions whose
//! counts do not rest on samples; markdown summary tables at the end.
//!
//! Run (as root for `tick`): `cargo build --release -p udamon && cargo run --release -p
//! udamon-bench --bin judge -- [--source tick|cpuclock] [--horizons 2,10,30] [--keep DIR]
//! [--regions N] [PROGRAM...]`, programs: patterns-O2 patterns-O0 pointer-chase threads python-slices
//! stress-ng-write64 stress-ng-read64 memcached redis sqlite3 postgres mariadb jvm-parallel
//! jvm-g1 node-map go-map (default: all). stress-ng, memcached, Redis, PostgreSQL, MariaDB and
//! sysbench are installed with apt-get when missing; the JVM, Node.js and Go programs need
//! java/javac, node and go (built offline into `target/judge-workloads`). memcached, Redis,
//! sqlite3, PostgreSQL, MariaDB and the map programs run two phases each (a narrow and a wide
//! working set), reported apart. With `--keep DIR` the records and
//! each interval's truth (`PROGRAM-truth.json`) stay in DIR; `--rejudge DIR` judges them again
//! with this build. `--regions N` records at N regions (both bounds): past a program's page
//! count, one region a page, as seed 000 monitors memcached.
//!
//! Honest error: per program, phase and horizon, and in total, how often udamon's stated
//! interval holds the kernel's figure, and how often an estimate udamon calls settled is within
//! ±25 % of it.

mod cc;
mod truth;

use cc::build;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::{JoinHandle, sleep};
use std::time::{Duration, Instant};
use truth::{
    Judged, TruthInterval, judge, label, read_record, realtime_ns, take_interval, udamon_bytes,
};

/// The truth intervals of one phase: (horizon in seconds, how many), in order.
const PLAN: [(u64, usize); 3] = [(2, 4), (10, 3), (30, 1)];
/// The undisturbed stretch after a phase's truth intervals (as long as the longest horizon),
/// and the interval before it in which the target touches its pages again. Clearing the
/// accessed bits moves where samples land (the next touch of every page stalls, so samples
/// find first touches, each on a page of its own): udamon's working set in this stretch is
/// what it says when nothing disturbs the program.
const CONTROL: Duration = Duration::from_secs(30);
const RECOVER: Duration = Duration::from_secs(2);
/// After the control stretch, before the next phase begins: the control point that ends the
/// stretch is read at the snapshot ending within half a window of it, which must not hold the
/// next phase's first touches (a wide phase touches hundreds of MiB in that time).
const SWITCH_MARGIN: Duration = Duration::from_secs(1);
/// The monitor's own warm-up before the first truth interval: its regions adapt, and its
/// estimates gather the samples they rest on (`report wss` skips the first 20 windows, 8 s).
const MONITOR_WARM_UP: Duration = Duration::from_secs(10);

const MIB: f64 = (1u64 << 20) as f64;
const PROGRAMS: [&str; 16] = [
    "patterns-O2",
    "patterns-O0",
    "pointer-chase",
    "threads",
    "python-slices",
    "stress-ng-write64",
    "stress-ng-read64",
    "memcached",
    "redis",
    "sqlite3",
    "postgres",
    "mariadb",
    "jvm-parallel",
    "jvm-g1",
    "node-map",
    "go-map",
];
/// How long udamon gets to attach before the first truth interval, and a phase's load to settle
/// before its intervals.
const SETTLE: Duration = Duration::from_secs(1);
/// Memcached's load: 1,000,000 keys of 100-byte values; the narrow phase reads the first 10,000.
const MC_KEYS: u64 = 1_000_000;
const MC_NARROW: u64 = 10_000;
const MC_VALUE: usize = 100;
/// The narrow phase's warm-up, before monitoring starts.
const MC_WARM_UP: Duration = Duration::from_secs(5);
/// Keys per multi-get request and sets per write of the load.
const MC_BATCH: u64 = 100;
/// sqlite3's in-memory table: rows of 200-byte blobs (about 220 MiB); the narrow phase reads
/// the first 20,000 (about 4.5 MiB), the wide one scans them all.
const SQL_ROWS: u64 = 1_000_000;
const SQL_NARROW: u64 = 20_000;

struct Args {
    source: String,
    /// Judge the records and truth kept in this directory by an earlier `--keep` run again,
    /// with this build's reports, instead of running the programs.
    rejudge: Option<PathBuf>,
    /// The horizons judged, seconds (a subset of [`PLAN`]'s).
    horizons: Vec<u64>,
    keep: Option<PathBuf>,
    /// Both region bounds of the record, where given (page granularity: more regions than the
    /// programs have pages); the source's own bounds otherwise.
    regions: Option<u32>,
    programs: Vec<String>,
}

impl Args {
    /// The truth intervals of a phase.
    fn plan(&self) -> impl Iterator<Item = Duration> + '_ {
        PLAN.iter()
            .filter(|(h, _)| self.horizons.contains(h))
            .flat_map(|&(h, n)| std::iter::repeat_n(Duration::from_secs(h), n))
    }

    /// How long a phase takes: its truth intervals, the recovery and the control.
    fn phase_length(&self) -> Duration {
        SETTLE + self.plan().sum::<Duration>() + RECOVER + CONTROL + SWITCH_MARGIN
    }
}

/// Says what went wrong and how to call the judge, then exits (2, or 0 when asked for help).
fn usage(problem: Option<&str>) -> ! {
    let text = format!(
        "usage: judge [--source tick|cpuclock] [--horizons 2,10,30] [--keep DIR | --rejudge DIR] \
         [--regions N] [PROGRAM...]\nprograms: {}",
        PROGRAMS.join(" ")
    );
    match problem {
        None => {
            println!("{text}");
            std::process::exit(0)
        }
        Some(problem) => {
            eprintln!("judge: {problem}\n{text}");
            std::process::exit(2)
        }
    }
}

fn parse_args() -> Args {
    let mut args = Args {
        source: "tick".into(),
        rejudge: None,
        horizons: PLAN.iter().map(|p| p.0).collect(),
        keep: None,
        regions: None,
        programs: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--source" => {
                args.source = it
                    .next()
                    .unwrap_or_else(|| usage(Some("--source needs tick or cpuclock")))
            }
            "--horizons" => {
                let list = it
                    .next()
                    .unwrap_or_else(|| usage(Some("--horizons needs a list, e.g. 2,10,30")));
                args.horizons = list
                    .split(',')
                    .map(|h| {
                        h.parse()
                            .ok()
                            .filter(|h| PLAN.iter().any(|p| p.0 == *h))
                            .unwrap_or_else(|| {
                                usage(Some(&format!("--horizons: {h}: one of 2, 10, 30")))
                            })
                    })
                    .collect();
            }
            "--keep" => {
                args.keep = Some(
                    it.next()
                        .unwrap_or_else(|| usage(Some("--keep needs a directory")))
                        .into(),
                )
            }
            "--rejudge" => {
                args.rejudge = Some(
                    it.next()
                        .unwrap_or_else(|| usage(Some("--rejudge needs a directory")))
                        .into(),
                )
            }
            "--regions" => {
                args.regions = Some(
                    it.next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| usage(Some("--regions needs a count, e.g. 1000000"))),
                )
            }
            "-h" | "--help" => usage(None),
            p if PROGRAMS.contains(&p) => args.programs.push(a),
            _ => usage(Some(&format!("unknown argument {a}"))),
        }
    }
    if args.programs.is_empty() {
        args.programs = PROGRAMS
            .iter()
            // Re-judging a directory: the programs it kept.
            .filter(|p| {
                args.rejudge
                    .as_ref()
                    .is_none_or(|dir| dir.join(format!("{p}-truth.json")).exists())
            })
            .map(|p| p.to_string())
            .collect();
    }
    args
}

fn installed(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs Debian package `pkg` (providing command `cmd`) unless `cmd` is there; the reason
/// when it cannot.
fn ensure(cmd: &str, pkg: &str) -> Result<(), String> {
    if installed(cmd) {
        return Ok(());
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // Empty package lists (as in fresh containers) make the first install fail.
    let installed_now =
        apt(&["install", "-y", pkg]) || (apt(&["update"]) && apt(&["install", "-y", pkg]));
    if !installed_now {
        return Err(format!("apt-get install -y {pkg} failed"));
    }
    if installed(cmd) {
        Ok(())
    } else {
        Err(format!("{cmd} still missing after installing {pkg}"))
    }
}

/// Runs `cmd` (`what`, in errors) to its end: its standard output, trimmed, or what it said on
/// standard error when it failed.
fn stdout_of(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A program under test; killed (with everything it started) when dropped.
struct Target {
    children: Vec<Child>,
    /// The processes udamon monitors and truth is taken on.
    pids: Vec<u32>,
    /// Phases of the run, in order; each gets the horizon.
    phases: Vec<&'static str>,
    /// The phase the load generator should be in, and the flag that stops it.
    phase: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    load: Option<JoinHandle<()>>,
    /// A directory of the program's, removed once it has ended.
    scratch: Option<PathBuf>,
}

impl Target {
    fn single(child: Child) -> Target {
        let pids = vec![child.id()];
        Target {
            children: vec![child],
            pids,
            phases: vec![""],
            phase: Arc::default(),
            stop: Arc::default(),
            load: None,
            scratch: None,
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(load) = self.load.take() {
            let _ = load.join();
        }
        for c in &mut self.children {
            // stress-ng passes SIGTERM on to its workers, which SIGKILL would orphan.
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        for c in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(5);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Starts `cmd` with its stdout piped and waits (at most `limit`) for a line starting with
/// `ready`; the rest of its output is read and dropped so that it never blocks on a full pipe.
fn start_ready(cmd: &mut Command, ready: &'static str, limit: Duration) -> Result<Child, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let out = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with(ready) {
                let _ = tx.send(());
            }
        }
    });
    match rx.recv_timeout(limit) {
        Ok(()) => Ok(child),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("{cmd:?} did not print {ready:?} within {limit:?}"))
        }
    }
}

/// All descendants of `pid`, from `/proc/PID/task/*/children`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for k in kids.split_whitespace().filter_map(|k| k.parse().ok()) {
                out.push(k);
                todo.push(k);
            }
        }
    }
    out
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Where the programs are built, where their sources are, and how long they run.
struct Env {
    dir: PathBuf,
    workloads: PathBuf,
    /// Where the JVM, Node.js and Go programs are built, with Go's caches: kept between runs.
    runtimes: PathBuf,
    /// Long enough for udamon's whole run of one phase, plus warm-up and margin.
    run_secs: u64,
}

impl Env {
    fn start(&self, program: &str, run: Duration) -> Result<Target, String> {
        let secs = self.run_secs.to_string();
        let limit = Duration::from_secs(120);
        match program {
            "patterns-O2" | "patterns-O0" => {
                let src = self
                    .workloads
                    .join("../../crates/linux/tests/workload/patterns.c");
                let opt = &program["patterns-".len()..];
                let exe = build(&src, &[&format!("-{opt}")], &self.dir, program);
                // "start" is printed when the memory is written and the pattern begins.
                let child = start_ready(
                    Command::new(exe).args(["static", "-t", &secs]),
                    "start",
                    limit,
                )?;
                Ok(Target::single(child))
            }
            "pointer-chase" | "threads" => {
                let name = program.replace('-', "_");
                let src = self.workloads.join(format!("{name}.c"));
                let exe = build(&src, &["-O2", "-pthread"], &self.dir, &name);
                let child = start_ready(Command::new(exe).arg(&secs), "ready", limit)?;
                Ok(Target::single(child))
            }
            "python-slices" => {
                // The real interpreter, not a version manager's shell shim in front of it.
                let out = Command::new("python3")
                    .args(["-c", "import sys; print(sys.executable)"])
                    .output()
                    .map_err(|e| format!("no python3: {e}"))?;
                let exe = String::from_utf8_lossy(&out.stdout).trim().to_string();
                let script = self.workloads.join("python_slices.py");
                let child = start_ready(Command::new(exe).arg(script).arg(&secs), "ready", limit)?;
                Ok(Target::single(child))
            }
            "stress-ng-write64" | "stress-ng-read64" => {
                ensure("stress-ng", "stress-ng")?;
                let method = &program["stress-ng-".len()..];
                let child = Command::new("stress-ng")
                    .args(["--vm", "1", "--vm-bytes", "256M", "--vm-keep"])
                    // Without it read64 only ever reads the shared zero page: nothing resident,
                    // nothing for the accessed bits to judge.
                    .arg("--vm-populate")
                    .args(["--vm-method", method, "--timeout", &format!("{secs}s")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("cannot start stress-ng: {e}"))?;
                let mut t = Target::single(child);
                // The worker (a descendant) holds the 256 MiB once it has written them.
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    sleep(Duration::from_millis(500));
                    let worker = descendants(t.pids[0])
                        .into_iter()
                        .max_by_key(|&p| rss_kib(p))
                        .filter(|&p| rss_kib(p) >= 250 * 1024);
                    if let Some(w) = worker {
                        t.pids = vec![w];
                        // Past the first write of its memory.
                        sleep(Duration::from_secs(2));
                        return Ok(t);
                    }
                    if Instant::now() > deadline {
                        return Err("no stress-ng worker with 256 MiB resident within 30 s".into());
                    }
                }
            }
            "memcached" => self.memcached(run),
            "redis" => redis(run),
            "sqlite3" => sqlite(run),
            "postgres" => postgres(run),
            "mariadb" => mariadb(run),
            "jvm-parallel" | "jvm-g1" | "node-map" | "go-map" => self.map_program(program, &secs),
            _ => unreachable!("programs are checked when parsing the arguments"),
        }
    }

    fn memcached(&self, limit: Duration) -> Result<Target, String> {
        ensure("memcached", "memcached")?;
        let port = free_port()?;
        let mut cmd = Command::new("memcached");
        cmd.args([
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-m",
            "1024",
            "-U",
            "0",
        ]);
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            // memcached refuses to run as root unless told which user to be.
            cmd.args(["-u", "root"]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start memcached: {e}"))?;
        kv_server(child, port, &MEMCACHED, limit)
    }
}

impl Env {
    /// A managed runtime's program holding a large map (see its source in `workloads/`), which
    /// reads its phase from stdin.
    fn map_program(&self, program: &str, secs: &str) -> Result<Target, String> {
        std::fs::create_dir_all(&self.runtimes)
            .map_err(|e| format!("{}: {e}", self.runtimes.display()))?;
        let run = |cmd: &mut Command, what: &str| stdout_of(cmd, what).map(drop);
        let mut cmd = match program {
            "jvm-parallel" | "jvm-g1" => {
                run(
                    Command::new("javac")
                        .arg("-d")
                        .arg(&self.runtimes)
                        .arg(self.workloads.join("JudgeMap.java")),
                    "javac",
                )?;
                let gc = if program == "jvm-g1" {
                    "-XX:+UseG1GC"
                } else {
                    "-XX:+UseParallelGC"
                };
                let mut cmd = Command::new("java");
                cmd.arg("-cp")
                    .arg(&self.runtimes)
                    .args(["-Xms2g", "-Xmx2g", gc, "JudgeMap"]);
                cmd
            }
            "node-map" => {
                let mut cmd = Command::new("node");
                cmd.arg("--max-old-space-size=4096")
                    .arg(self.workloads.join("node_map.js"));
                cmd
            }
            _ => {
                let exe = self.runtimes.join("go_map");
                // Offline, and never a toolchain download: the standard library only.
                run(
                    Command::new("go")
                        .arg("build")
                        .arg("-o")
                        .arg(&exe)
                        .arg(self.workloads.join("go_map.go"))
                        .env("GOCACHE", self.runtimes.join("gocache"))
                        .env("GOPATH", self.runtimes.join("gopath"))
                        .env("GOFLAGS", "-mod=mod")
                        .env("GOPROXY", "off")
                        .env("GOTOOLCHAIN", "local"),
                    "go build",
                )?;
                Command::new(exe)
            }
        };
        let mut child = start_ready(
            cmd.arg(secs).stdin(Stdio::piped()),
            "ready",
            Duration::from_secs(120),
        )?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut t = Target::single(child);
        t.phases = vec!["narrow", "wide"];
        let (phase, stop) = (t.phase.clone(), t.stop.clone());
        t.load = Some(std::thread::spawn(move || {
            let mut current = 0;
            while !stop.load(Ordering::Relaxed) {
                let wanted = phase.load(Ordering::Relaxed).min(1);
                if wanted != current {
                    if let Err(e) = writeln!(stdin, "{}", ["narrow", "wide"][wanted]) {
                        eprintln!("phase change failed: {e}");
                        return;
                    }
                    current = wanted;
                }
                sleep(Duration::from_millis(50));
            }
        }));
        Ok(t)
    }
}

/// The sqlite3 shell on an in-memory database, answering one query at a time: sums over the
/// first rows in the narrow phase, over all in the wide one.
fn sqlite(limit: Duration) -> Result<Target, String> {
    if !installed("sqlite3") {
        return Err("no sqlite3 shell (optional: apt-get install sqlite3)".into());
    }
    let mut child = Command::new("sqlite3")
        .arg(":memory:")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start sqlite3: {e}"))?;
    let mut input = child.stdin.take().expect("piped");
    let mut output = BufReader::new(child.stdout.take().expect("piped"));
    let mut t = Target::single(child);
    let start = Instant::now();
    let mut line = String::new();
    let mut query = move |q: &str, line: &mut String| -> std::io::Result<()> {
        input.write_all(q.as_bytes())?;
        input.flush()?;
        line.clear();
        if output.read_line(line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    };
    query(
        &format!(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
             WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {SQL_ROWS})
             INSERT INTO t SELECT x, randomblob(200) FROM c;
             SELECT count(*) FROM t;\n"
        ),
        &mut line,
    )
    .map_err(|e| format!("filling sqlite3's table: {e}"))?;
    println!(
        "sqlite3: {} rows in {:.1} s",
        line.trim(),
        start.elapsed().as_secs_f64()
    );
    t.phases = vec!["narrow", "wide"];
    let (phase, stop) = (t.phase.clone(), t.stop.clone());
    t.load = Some(std::thread::spawn(move || {
        let start = Instant::now();
        while !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
            let rows = [SQL_NARROW, SQL_ROWS][phase.load(Ordering::Relaxed).min(1)];
            // sum(length(v)) reads every row's record, so every page of the range.
            let q = format!("SELECT sum(length(v)) FROM t WHERE id <= {rows};\n");
            if let Err(e) = query(&q, &mut line) {
                eprintln!("sqlite3 load stopped: {e}");
                return;
            }
        }
    }));
    Ok(t)
}

/// PostgreSQL's accounts: `pgbench -i -s 20`, 2,000,000 rows (about 300 MiB with the index).
const PG_SCALE: u64 = 20;
const PG_ROWS: u64 = 100_000 * PG_SCALE;
/// The narrow phase reads the first tenth of the accounts, the wide one all of them.
const PG_NARROW: u64 = PG_ROWS / 10;
/// The unprivileged user PostgreSQL runs as (it refuses root): nobody.
const PG_UID: u32 = 65534;

/// The first of `/usr/lib/postgresql/*/bin` that has `initdb`.
fn postgres_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// Runs `psql -c SQL` on the cluster whose socket is in `sock`.
fn psql(sock: &Path, sql: &str) -> Result<String, String> {
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-At", "-U", "postgres", "-h"])
        .arg(sock)
        .args(["-d", "postgres", "-c", sql]);
    stdout_of(&mut cmd, &format!("psql -c {sql:?}"))
}

/// A new cluster in `scratch` (nobody's), its server started as nobody with its socket there.
fn start_pg_server(bin: &Path, scratch: &Path) -> Result<std::process::Child, String> {
    let data = scratch.join("data");
    let as_nobody = |cmd: &mut Command| -> Result<(), String> {
        use std::os::unix::process::CommandExt;
        cmd.uid(PG_UID).gid(PG_UID).env("LC_ALL", "C");
        Ok(())
    };
    let mut initdb = Command::new(bin.join("initdb"));
    as_nobody(&mut initdb)?;
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "-A", "trust", "--no-sync", "--locale=C"]);
    stdout_of(&mut initdb, "initdb")?;
    let mut server = Command::new(bin.join("postgres"));
    as_nobody(&mut server)?;
    server
        .arg("-D")
        .arg(&data)
        .arg("-k")
        .arg(scratch)
        .args(["-c", "listen_addresses=", "-c", "shared_buffers=512MB"])
        .args(["-c", "fsync=off", "-c", "max_connections=20"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start postgres: {e}"))
}

/// pgbench's accounts loaded into the cluster whose socket is in `scratch`, and prewarmed
/// into its shared buffers, with the phase table the clients' script reads.
fn load_pg_accounts(scratch: &Path) -> Result<(), String> {
    let start = Instant::now();
    let mut init = Command::new("pgbench");
    init.args([
        "-i",
        "-q",
        "-s",
        &PG_SCALE.to_string(),
        "-U",
        "postgres",
        "-h",
    ])
    .arg(scratch)
    .arg("postgres");
    stdout_of(&mut init, "pgbench -i")?;
    psql(
        scratch,
        &format!(
            "CREATE EXTENSION pg_prewarm; \
             SELECT pg_prewarm('pgbench_accounts'), pg_prewarm('pgbench_accounts_pkey'); \
             CREATE TABLE judge_phase(hi bigint); \
             INSERT INTO judge_phase VALUES ({PG_NARROW});"
        ),
    )?;
    println!(
        "postgres: {PG_ROWS} accounts loaded and prewarmed in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// PostgreSQL from Debian's packages: a cluster in a scratch directory, run as nobody, whose
/// pgbench accounts sit in shared buffers (pg_prewarm); two pgbench clients read one account
/// per transaction (`pgbench --select-only`'s query), among the first `PG_NARROW` (narrow) or
/// among all (wide). The judged processes are the two backends, which share the buffer pool.
fn postgres(limit: Duration) -> Result<Target, String> {
    ensure("psql", "postgresql-client")?;
    if postgres_bin().is_none() || !installed("pgbench") {
        ensure("pgbench", "postgresql")?;
    }
    let bin = postgres_bin().ok_or("no /usr/lib/postgresql/*/bin/initdb")?;
    let scratch = std::env::temp_dir().join(format!("udamon-judge-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let path = std::ffi::CString::new(scratch.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: a valid path; the directory is ours.
    if unsafe { libc::chown(path.as_ptr(), PG_UID, PG_UID) } != 0 {
        return Err(format!("cannot give {} to nobody", scratch.display()));
    }
    let server = start_pg_server(&bin, &scratch)?;
    let mut t = Target::single(server);
    t.scratch = Some(scratch.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while psql(&scratch, "SELECT 1").is_err() {
        if Instant::now() > deadline {
            return Err("postgres did not answer within 30 s".into());
        }
        sleep(Duration::from_millis(200));
    }
    load_pg_accounts(&scratch)?;
    let script = scratch.join("judge.sql");
    std::fs::write(
        &script,
        "SELECT hi FROM judge_phase \\gset\n\
         \\set aid random(1, :hi)\n\
         SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n",
    )
    .map_err(|e| e.to_string())?;
    let clients = Command::new("pgbench")
        .args([
            "-n",
            "-c",
            "2",
            "-j",
            "1",
            "-T",
            &limit.as_secs().to_string(),
        ])
        .arg("-f")
        .arg(&script)
        .args(["-U", "postgres", "-h"])
        .arg(&scratch)
        .arg("postgres")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start pgbench: {e}"))?;
    // pgbench first, so that it ends before the server's smart shutdown waits for it.
    t.children.insert(0, clients);
    let deadline = Instant::now() + Duration::from_secs(30);
    t.pids = loop {
        let pids: Vec<u32> = psql(
            &scratch,
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' ORDER BY pid",
        )?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
        if pids.len() == 2 {
            break pids;
        }
        if Instant::now() > deadline {
            return Err(format!("pgbench's two backends did not appear: {pids:?}"));
        }
        sleep(Duration::from_millis(200));
    };
    t.phases = vec!["narrow", "wide"];
    let (phase, stop) = (t.phase.clone(), t.stop.clone());
    t.load = Some(std::thread::spawn(move || {
        let mut current = 0;
        while !stop.load(Ordering::Relaxed) {
            let wanted = phase.load(Ordering::Relaxed);
            if wanted != current {
                let set = format!("UPDATE judge_phase SET hi = {PG_ROWS}");
                if let Err(e) = psql(&scratch, &set) {
                    eprintln!("postgres phase change failed: {e}");
                }
                current = wanted;
            }
            sleep(Duration::from_millis(50));
        }
    }));
    // The clients' first reads, and the backends' own caches, settle.
    sleep(Duration::from_secs(3));
    Ok(t)
}

/// MariaDB's table: sysbench's `sbtest1` of this many rows (about 240 MiB in InnoDB); the
/// narrow phase's point selects read the first [`MARIADB_NARROW`].
const MARIADB_ROWS: u64 = 1_000_000;
const MARIADB_NARROW: u64 = 10_000;

/// Runs `mariadb -e SQL` as root on the server whose socket is `sock`.
fn mariadb_sql(sock: &Path, sql: &str) -> Result<String, String> {
    let mut cmd = Command::new("mariadb");
    cmd.args(["--no-defaults", "-u", "root", "-N", "-S"])
        .arg(sock)
        .args(["-e", sql]);
    stdout_of(&mut cmd, &format!("mariadb -e {sql:?}"))
}

/// sysbench against the server whose socket is `sock`, on a table of `rows` rows.
fn sysbench(sock: &Path, test: &str, rows: u64) -> Command {
    let mut cmd = Command::new("sysbench");
    cmd.arg(test)
        .args([
            "--db-driver=mysql",
            "--mysql-user=root",
            "--mysql-db=sbtest",
        ])
        .arg(format!("--mysql-socket={}", sock.display()))
        .args(["--tables=1", &format!("--table-size={rows}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Debian's MariaDB (InnoDB, a thread per connection and its own background threads) with
/// sysbench's table in a 512 MiB buffer pool, read by two sysbench clients' point selects:
/// among the first [`MARIADB_NARROW`] rows in the narrow phase, among all in the wide one.
fn mariadb(limit: Duration) -> Result<Target, String> {
    ensure("mariadbd", "mariadb-server")?;
    ensure("sysbench", "sysbench")?;
    let scratch = std::env::temp_dir().join(format!("udamon-judge-maria-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let (data, sock) = (scratch.join("data"), scratch.join("sock"));
    let mut install = Command::new("mariadb-install-db");
    install
        .args(["--no-defaults", "--user=root", "--skip-test-db"])
        .arg(format!("--datadir={}", data.display()));
    stdout_of(&mut install, "mariadb-install-db")?;
    let server = Command::new("mariadbd")
        .args(["--no-defaults", "--user=root", "--skip-networking"])
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--socket={}", sock.display()))
        .arg(format!("--pid-file={}", scratch.join("pid").display()))
        .args([
            "--innodb-buffer-pool-size=512M",
            "--innodb-flush-log-at-trx-commit=0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start mariadbd: {e}"))?;
    let mut t = Target::single(server);
    t.scratch = Some(scratch);
    let deadline = Instant::now() + Duration::from_secs(30);
    while mariadb_sql(&sock, "SELECT 1").is_err() {
        if Instant::now() > deadline {
            return Err("mariadbd did not answer within 30 s".into());
        }
        sleep(Duration::from_millis(200));
    }
    let start = Instant::now();
    mariadb_sql(&sock, "CREATE DATABASE sbtest")?;
    let prepared = sysbench(&sock, "oltp_point_select", MARIADB_ROWS)
        .arg("prepare")
        .status()
        .map_err(|e| format!("cannot run sysbench: {e}"))?;
    if !prepared.success() {
        return Err("sysbench prepare failed".into());
    }
    // Every row through the buffer pool before the narrow phase, as a server that has run.
    let rows = mariadb_sql(&sock, "SELECT COUNT(*), SUM(LENGTH(c)) FROM sbtest.sbtest1")?;
    println!(
        "mariadb: {MARIADB_ROWS} rows loaded in {:.1} s ({rows})",
        start.elapsed().as_secs_f64()
    );
    t.phases = vec!["narrow", "wide"];
    let (phase, stop) = (t.phase.clone(), t.stop.clone());
    t.load = Some(std::thread::spawn(move || {
        let run = |rows: u64| {
            sysbench(&sock, "oltp_point_select", rows)
                .args(["--threads=2", &format!("--time={}", limit.as_secs())])
                .arg("run")
                .spawn()
        };
        let mut current = 0;
        let mut clients = run(MARIADB_NARROW);
        while !stop.load(Ordering::Relaxed) {
            let wanted = phase.load(Ordering::Relaxed);
            if wanted != current {
                if let Ok(c) = &mut clients {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                clients = run(MARIADB_ROWS);
                current = wanted;
            }
            sleep(Duration::from_millis(50));
        }
        match clients {
            Ok(mut c) => {
                let _ = c.kill();
                let _ = c.wait();
            }
            Err(e) => eprintln!("mariadb load did not start: {e}"),
        }
    }));
    // The clients' first reads settle.
    sleep(Duration::from_secs(3));
    Ok(t)
}

/// A free loopback port: the kernel picks one, which is closed again for the server.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// A connection to the server `what` starting on loopback `port`, once it listens (10 s at
/// most); no read on it waits forever, whatever the server does.
fn connect(port: u16, what: &str) -> Result<TcpStream, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let conn = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(c) => break c,
            Err(e) if Instant::now() > deadline => {
                return Err(format!("{what} did not listen on port {port}: {e}"));
            }
            Err(_) => sleep(Duration::from_millis(100)),
        }
    };
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    Ok(conn)
}

/// Redis (Debian's `redis-server`: one thread serving, jemalloc, a hash table of pointers to
/// its values) holding [`MC_KEYS`] keys of [`MC_VALUE`]-byte values, read with `MGET`s of random
/// keys: among the first [`MC_NARROW`] in the narrow phase, among all in the wide one.
fn redis(limit: Duration) -> Result<Target, String> {
    ensure("redis-server", "redis-server")?;
    let port = free_port()?;
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        // Memory only: no snapshot or log written in the middle of a phase.
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server: {e}"))?;
    kv_server(child, port, &REDIS, limit)
}

/// A key-value server's protocol, as far as the judge's load speaks it.
struct KvProtocol {
    name: &'static str,
    /// Sets every key; the number of keys the server then says it holds.
    load: fn(&mut TcpStream) -> std::io::Result<u64>,
    /// Appends the request that reads a batch of keys.
    get: fn(&mut Vec<u8>, &[String]),
    /// Reads the answer to one such request.
    answer: fn(&mut BufReader<TcpStream>) -> std::io::Result<()>,
}

const MEMCACHED: KvProtocol = KvProtocol {
    name: "memcached",
    load: mc_load,
    get: mc_get,
    answer: mc_answer,
};

const REDIS: KvProtocol = KvProtocol {
    name: "redis",
    load: redis_load,
    get: redis_get,
    answer: redis_answer,
};

/// The server `child` listening on loopback `port`, loaded with [`MC_KEYS`] keys and read by
/// batches of random keys, phase by phase ([`kv_gets`]).
fn kv_server(
    child: Child,
    port: u16,
    protocol: &'static KvProtocol,
    limit: Duration,
) -> Result<Target, String> {
    let mut t = Target::single(child);
    let mut conn = connect(port, protocol.name)?;
    let start = Instant::now();
    let items =
        (protocol.load)(&mut conn).map_err(|e| format!("loading {}: {e}", protocol.name))?;
    println!(
        "{}: {items} keys loaded in {:.1} s",
        protocol.name,
        start.elapsed().as_secs_f64()
    );
    t.phases = vec!["narrow", "wide"];
    let (phase, stop) = (t.phase.clone(), t.stop.clone());
    // Never longer than the whole run, whatever happens to the main thread.
    t.load = Some(std::thread::spawn(move || {
        if let Err(e) = kv_gets(conn, protocol, &phase, &stop, limit) {
            eprintln!("{} load stopped: {e}", protocol.name);
        }
    }));
    // After the load both servers grow their hash tables and move every item over (memcached
    // in a background thread, Redis a step with each operation), which touches all of them:
    // not part of either phase.
    sleep(MC_WARM_UP);
    Ok(t)
}

/// Batches of [`MC_BATCH`] random keys, among the first [`MC_NARROW`] in phase 0 and among all
/// in phase 1, until `stop` or `limit`.
fn kv_gets(
    mut conn: TcpStream,
    protocol: &KvProtocol,
    phase: &AtomicUsize,
    stop: &AtomicBool,
    limit: Duration,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let start = Instant::now();
    let (mut rng, mut req) = (0x9E3779B97F4A7C15u64, Vec::new());
    while !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
        let keys = if phase.load(Ordering::Relaxed) == 0 {
            MC_NARROW
        } else {
            MC_KEYS
        };
        let batch: Vec<String> = (0..MC_BATCH).map(|_| random_key(&mut rng, keys)).collect();
        req.clear();
        (protocol.get)(&mut req, &batch);
        conn.write_all(&req)?;
        (protocol.answer)(&mut reader)?;
    }
    Ok(())
}

/// One request in Redis's protocol (RESP): an array of bulk strings.
fn resp(buf: &mut Vec<u8>, words: &[&[u8]]) {
    let _ = write!(buf, "*{}\r\n", words.len());
    for w in words {
        let _ = write!(buf, "${}\r\n", w.len());
        buf.extend_from_slice(w);
        buf.extend_from_slice(b"\r\n");
    }
}

/// Sets every key (`MSET`s of [`MC_BATCH`]), then reads the key count (`DBSIZE`).
fn redis_load(conn: &mut TcpStream) -> std::io::Result<u64> {
    let value = vec![b'v'; MC_VALUE];
    let mut reader = BufReader::new(conn.try_clone()?);
    let (mut buf, mut line) = (Vec::new(), String::new());
    for batch in 0..MC_KEYS / MC_BATCH {
        buf.clear();
        let keys: Vec<String> = (batch * MC_BATCH..(batch + 1) * MC_BATCH)
            .map(mc_key)
            .collect();
        let mut words: Vec<&[u8]> = vec![b"MSET"];
        for k in &keys {
            words.push(k.as_bytes());
            words.push(&value);
        }
        resp(&mut buf, &words);
        conn.write_all(&buf)?;
        line.clear();
        reader.read_line(&mut line)?;
        if line != "+OK\r\n" {
            return Err(std::io::Error::other(format!("MSET answered {line:?}")));
        }
    }
    buf.clear();
    resp(&mut buf, &[b"DBSIZE"]);
    conn.write_all(&buf)?;
    line.clear();
    reader.read_line(&mut line)?;
    line.trim()
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("DBSIZE answered {line:?}")))
}

/// An `MGET` of `keys`.
fn redis_get(req: &mut Vec<u8>, keys: &[String]) {
    let mut words: Vec<&[u8]> = vec![b"MGET"];
    words.extend(keys.iter().map(|k| k.as_bytes()));
    resp(req, &words);
}

/// Reads an `MGET`'s answer: [`MC_BATCH`] values of [`MC_VALUE`] bytes.
fn redis_answer(reader: &mut BufReader<TcpStream>) -> std::io::Result<()> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line != format!("*{MC_BATCH}\r\n") {
        return Err(std::io::Error::other(format!("MGET answered {line:?}")));
    }
    let mut value = [0u8; MC_VALUE + 2];
    for _ in 0..MC_BATCH {
        line.clear();
        reader.read_line(&mut line)?;
        if line != format!("${MC_VALUE}\r\n") {
            return Err(std::io::Error::other(format!("MGET gave {line:?}")));
        }
        reader.read_exact(&mut value)?;
    }
    Ok(())
}

fn mc_key(i: u64) -> String {
    format!("key:{i:07}")
}

/// One of the first `keys` keys, drawn by the xorshift generator `state`.
fn random_key(state: &mut u64, keys: u64) -> String {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    mc_key(*state % keys)
}

/// Sets every key with `noreply` (pipelined: memcached answers nothing), then reads the item
/// count, which also waits for the sets to be processed.
fn mc_load(conn: &mut TcpStream) -> std::io::Result<u64> {
    let value = vec![b'v'; MC_VALUE];
    let mut buf = Vec::new();
    for batch in 0..MC_KEYS / MC_BATCH {
        buf.clear();
        for i in batch * MC_BATCH..(batch + 1) * MC_BATCH {
            write!(buf, "set {} 0 0 {MC_VALUE} noreply\r\n", mc_key(i))?;
            buf.extend_from_slice(&value);
            buf.extend_from_slice(b"\r\n");
        }
        conn.write_all(&buf)?;
    }
    conn.write_all(b"stats\r\n")?;
    let mut items = 0;
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(n) = line.strip_prefix("STAT curr_items ") {
            items = n.trim().parse().unwrap_or(0);
        }
        if line == "END\r\n" {
            return Ok(items);
        }
    }
}

/// A multi-get of `keys`.
fn mc_get(req: &mut Vec<u8>, keys: &[String]) {
    req.extend_from_slice(b"get");
    for k in keys {
        req.push(b' ');
        req.extend_from_slice(k.as_bytes());
    }
    req.extend_from_slice(b"\r\n");
}

/// Reads a multi-get's answer: a value a key found, then `END`.
fn mc_answer(reader: &mut BufReader<TcpStream>) -> std::io::Result<()> {
    let (mut line, mut value) = (String::new(), [0u8; MC_VALUE + 2]);
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "END\r\n" {
            return Ok(());
        }
        if !line.starts_with("VALUE ") {
            return Err(std::io::Error::other(format!("unexpected {line:?}")));
        }
        reader.read_exact(&mut value)?;
    }
}

/// A program's judged intervals (with their phase) and udamon's working set in the control
/// stretches (phase, horizon, bytes).
struct Measured {
    judged: Vec<(&'static str, TruthInterval, Judged)>,
    control: Vec<(&'static str, u64, u64)>,
}

/// Runs `udamon record --pid` on `target` for all its phases while taking truth intervals, then
/// judges them.
fn measure(
    args: &Args,
    udamon: &Path,
    dir: &Path,
    program: &str,
    target: &Target,
) -> Result<Measured, String> {
    let rec_path = dir.join(format!("{program}-{}.data", args.source));
    let log = dir.join(format!("{program}-{}.log", args.source));
    let mut mon = Command::new(udamon);
    mon.arg("record");
    for pid in &target.pids {
        mon.args(["--pid", &pid.to_string()]);
    }
    // Stopped with SIGINT once the truth is taken; the duration only bounds a run gone wrong.
    let most = args.phase_length() * target.phases.len() as u32 * 2 + Duration::from_secs(60);
    let mut mon = mon
        .args(["--access-source", &args.source])
        .args(args.regions.iter().flat_map(|n| {
            let n = n.to_string();
            [
                "--min-regions".to_string(),
                n.clone(),
                "--max-regions".to_string(),
                n,
            ]
        }))
        .args(["--duration", &format!("{}s", most.as_secs())])
        .arg("-o")
        .arg(&rec_path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot run udamon: {e}"))?;
    let mut control = Vec::new();
    let mut truth = || -> Result<Vec<(&'static str, TruthInterval)>, String> {
        let mut intervals = Vec::new();
        sleep(MONITOR_WARM_UP);
        // A monitor that refused its arguments is known now, not after every phase has run.
        if mon.try_wait().map_err(|e| e.to_string())?.is_some() {
            return Err("udamon stopped early".into());
        }
        for (i, &phase) in target.phases.iter().enumerate() {
            target.phase.store(i, Ordering::Relaxed);
            if i > 0 {
                sleep(SETTLE);
            }
            for len in args.plan() {
                let t = take_interval(&target.pids, len)
                    .map_err(|e| format!("truth for {:?}: {e}", target.pids))?;
                intervals.push((phase, t));
            }
            // The accessed bits were cleared last at the start of the last interval: time for
            // the target to touch its pages again before the control begins.
            sleep(RECOVER);
            let start = Instant::now();
            for h in &args.horizons {
                // Control points at each multiple of the horizon that ends in the stretch.
                let horizon = Duration::from_secs(*h);
                let mut end = horizon;
                while end <= CONTROL {
                    control.push((phase, *h, start + end, horizon));
                    end += horizon.max(Duration::from_secs(6));
                }
            }
            sleep(CONTROL);
            if i + 1 < target.phases.len() {
                sleep(SWITCH_MARGIN);
            }
        }
        Ok(intervals)
    };
    // udamon is stopped and waited for even when the truth failed (say, the target died).
    let intervals = truth();
    // Wall-clock ends of the control points.
    let now_real = realtime_ns();
    let now = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(mon.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = mon.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = mon.kill();
            let _ = mon.wait();
            return Err("udamon did not stop within 60 s of SIGINT".into());
        }
        sleep(Duration::from_millis(100));
    };
    if !status.success() {
        return Err(format!(
            "udamon failed: {}",
            std::fs::read_to_string(&log).unwrap_or_default().trim()
        ));
    }
    let intervals = intervals?;
    if let Some(keep) = &args.keep {
        keep_truth(&keep.join(format!("{program}-truth.json")), &intervals);
    }
    let rec = read_record(&rec_path).map_err(|e| format!("reading the record: {e}"))?;
    Ok(Measured {
        judged: intervals
            .into_iter()
            .filter_map(|(phase, t)| {
                let j = judge(&t, &rec)?;
                Some((phase, t, j))
            })
            .collect(),
        control: control
            .into_iter()
            .filter_map(|(phase, h, end, horizon)| {
                let end_ns = now_real - now.duration_since(end).as_nanos() as u64;
                let bytes = udamon_bytes(&rec, &target.pids, end_ns, horizon.as_nanos() as u64)?;
                Some((phase, h, bytes))
            })
            .collect(),
    })
}

/// The phases a truth file names.
const PHASES: [&str; 3] = ["", "narrow", "wide"];

/// Judges a record and its truth kept by an earlier run (`--keep`) again; no control.
fn rejudge(dir: &Path, program: &str, source: &str) -> Result<Measured, String> {
    let truth_path = dir.join(format!("{program}-truth.json"));
    let text = std::fs::read_to_string(&truth_path)
        .map_err(|e| format!("skipped: {}: {e}", truth_path.display()))?;
    let kept: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", truth_path.display()))?;
    let rec = read_record(&dir.join(format!("{program}-{source}.data")))
        .map_err(|e| format!("reading the record: {e}"))?;
    let mut judged = Vec::new();
    for i in kept.as_array().into_iter().flatten() {
        let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
        let phase = PHASES
            .into_iter()
            .find(|p| Some(*p) == i["phase"].as_str())
            .unwrap_or("");
        let mut processes: Vec<(u32, Vec<truth::Mapping>)> = Vec::new();
        for m in i["mappings"].as_array().into_iter().flatten() {
            let pid = n(m, "pid") as u32;
            if processes.last().is_none_or(|p| p.0 != pid) {
                processes.push((pid, Vec::new()));
            }
            processes
                .last_mut()
                .expect("pushed")
                .1
                .push(truth::Mapping {
                    start: n(m, "start"),
                    end: n(m, "end"),
                    perms: m["perms"].as_str().unwrap_or("").into(),
                    name: m["name"].as_str().unwrap_or("").into(),
                    rss_bytes: n(m, "rss_bytes"),
                    referenced_bytes: n(m, "referenced_bytes"),
                });
        }
        let t = TruthInterval {
            start_ns: n(i, "start_ns"),
            end_ns: n(i, "end_ns"),
            processes,
        };
        if let Some(j) = judge(&t, &rec) {
            judged.push((phase, t, j));
        }
    }
    Ok(Measured {
        judged,
        control: Vec::new(),
    })
}

/// Writes each interval's truth as JSON, for analysis beside the kept record.
fn keep_truth(path: &Path, intervals: &[(&str, TruthInterval)]) {
    let mut out = String::from("[\n");
    for (i, (phase, t)) in intervals.iter().enumerate() {
        let maps: Vec<String> = t
            .mappings()
            .map(|(pid, m)| {
                format!(
                    "{{\"pid\":{pid},\"start\":{},\"end\":{},\"perms\":{:?},\"name\":{:?},\"rss_bytes\":{},\"referenced_bytes\":{}}}",
                    m.start, m.end, m.perms, m.name, m.rss_bytes, m.referenced_bytes
                )
            })
            .collect();
        out.push_str(&format!(
            "{{\"phase\":{phase:?},\"start_ns\":{},\"end_ns\":{},\"mappings\":[{}]}}{}\n",
            t.start_ns,
            t.end_ns,
            maps.join(","),
            if i + 1 < intervals.len() { "," } else { "" }
        ));
    }
    out.push_str("]\n");
    if let Err(e) = std::fs::write(path, out) {
        eprintln!("judge: cannot keep the truth in {}: {e}", path.display());
    }
}

/// The median; of an even number of values, the mean of the middle two.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn truth_per_udamon(truth: u64, udamon: u64) -> String {
    if udamon == 0 {
        "udamon 0".into()
    } else {
        format!("{:.2}", truth as f64 / udamon as f64)
    }
}

/// The horizon, in whole seconds, that an interval judged.
fn horizon_s(t: &TruthInterval) -> u64 {
    ((t.end_ns - t.start_ns) as f64 / 1e9).round() as u64
}

/// Whether udamon's stated interval holds the kernel's figure.
fn covers(j: &Judged) -> bool {
    (j.low..=j.high).contains(&j.truth)
}

/// Whether udamon's estimate is within ±25 % of the kernel's figure: what "settled" promises.
fn within_quarter(j: &Judged) -> bool {
    j.udamon.abs_diff(j.truth) as f64 <= 0.25 * j.truth as f64
}

/// "k/n (p %)", or "0/0" when there is nothing to count.
fn share(k: usize, n: usize) -> String {
    if n == 0 {
        "0/0".into()
    } else {
        format!("{k}/{n} ({:.0} %)", 100.0 * k as f64 / n as f64)
    }
}

/// One line of the summary table.
struct Summary {
    name: String,
    horizon_s: u64,
    n: usize,
    truth_mib: f64,
    udamon_mib: f64,
    ratio: f64,
    /// The median interval's ends over the truth, and how many intervals were settled.
    low_ratio: f64,
    high_ratio: f64,
    settled: usize,
    /// Intervals whose stated interval holds the truth, and settled ones within ±25 % of it.
    covered: usize,
    settled_right: usize,
    /// Intervals whose truth lies above udamon's interval (the rest of the uncovered, below).
    above: usize,
    /// DAMON's count over the truth.
    whole_ratio: f64,
    /// udamon's median without clear_refs, MiB.
    control_mib: Option<f64>,
    top_truth: String,
    hottest: String,
    not_resident_mib: f64,
    sampled_zero: usize,
    accessed_unsampled: usize,
}

/// Prints one program's (or phase's) judged intervals of one horizon and returns its summary.
fn report(
    name: &str,
    horizon_s: u64,
    judged: &[(&TruthInterval, &Judged)],
    control: &[u64],
) -> Summary {
    let n = judged.len();
    let m = |f: &dyn Fn(&Judged) -> f64| median(judged.iter().map(|(_, j)| f(j)).collect());
    let truth = m(&|j| j.truth as f64 / MIB);
    let udamon = m(&|j| j.udamon as f64 / MIB);
    let ratio = m(&|j| j.udamon as f64 / j.truth.max(1) as f64);
    let control_mib =
        (!control.is_empty()).then(|| median(control.iter().map(|&b| b as f64 / MIB).collect()));
    let settled = judged.iter().filter(|(_, j)| j.settled).count();
    let covered = judged.iter().filter(|(_, j)| covers(j)).count();
    let above = judged.iter().filter(|(_, j)| j.truth > j.high).count();
    // Misses by a hair: a high end that stops short of a truth it is next to.
    let near_above = judged
        .iter()
        .filter(|(_, j)| j.truth > j.high && j.truth as f64 <= 1.05 * j.high as f64)
        .count();
    let settled_right = judged
        .iter()
        .filter(|(_, j)| j.settled && within_quarter(j))
        .count();
    println!("### {name}, {horizon_s} s\n");
    println!(
        "{n} intervals; median truth {truth:.1} MiB, udamon {udamon:.1} MiB (code {:.1} MiB), \
         udamon/truth {ratio:.2} (interval {:.2}-{:.2}, settled in {settled} of {n}; inside the \
         mappings {:.2}); whole regions {:.2}; without clear_refs {}. Truth inside udamon's \
         interval: {} (above it {above}, {near_above} of them within 5 % of its high end; below \
         it {}); settled and within ±25 %: {}\n",
        m(&|j| j.code as f64 / MIB),
        m(&|j| j.low as f64 / j.truth.max(1) as f64),
        m(&|j| j.high as f64 / j.truth.max(1) as f64),
        m(&|j| j.udamon.saturating_sub(j.outside_mappings) as f64 / j.truth.max(1) as f64),
        m(&|j| j.whole_regions as f64 / j.truth.max(1) as f64),
        control_mib.map_or("-".into(), |c| format!("{c:.1} MiB")),
        share(covered, n),
        n - covered - above,
        share(settled_right, settled),
    );
    // Mappings by label, summed over the intervals (the layout may change between them).
    let mut by_mapping: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut beyond_rss: BTreeMap<String, u64> = BTreeMap::new();
    for (t, j) in judged {
        for ((_, m), &(tr, ud)) in t.mappings().zip(&j.per_mapping) {
            let e = by_mapping.entry(label(m)).or_default();
            e.0 += tr;
            e.1 += ud;
            *beyond_rss.entry(label(m)).or_default() += ud.saturating_sub(m.rss_bytes);
        }
    }
    let mut top: Vec<(String, (u64, u64))> = by_mapping.into_iter().collect();
    top.sort_by_key(|(_, (tr, ud))| std::cmp::Reverse(*tr.max(ud)));
    println!(
        "| mapping (top 5 by truth or udamon) | truth, mean MiB / interval | udamon, mean MiB / interval | truth/udamon |"
    );
    println!("|---|---:|---:|---:|");
    for (label, (tr, ud)) in top.iter().take(5) {
        println!(
            "| {label} | {:.1} | {:.1} | {} |",
            *tr as f64 / MIB / n as f64,
            *ud as f64 / MIB / n as f64,
            truth_per_udamon(*tr, *ud)
        );
    }
    let agree = |f: fn(&Judged) -> Option<usize>| {
        judged
            .iter()
            .filter(|(_, j)| j.is_truth_hottest(f(j)))
            .count()
    };
    let (by_weight, by_samples) = (
        agree(|j| j.hottest_by_weight),
        agree(|j| j.hottest_by_samples),
    );
    let max_mib =
        |f: fn(&Judged) -> u64| judged.iter().map(|(_, j)| f(j)).max().unwrap_or(0) as f64 / MIB;
    let (not_resident, outside) = (max_mib(|j| j.not_resident), max_mib(|j| j.outside_mappings));
    let sampled_zero: usize = judged.iter().map(|(_, j)| j.sampled_zero).sum();
    let accessed_unsampled: usize = judged.iter().map(|(_, j)| j.accessed_unsampled).sum();
    let snaps: usize = judged.iter().map(|(_, j)| j.nr_snapshots).sum();
    println!(
        "\nudamon's hottest mapping is the truth's largest (or within 5 % of it): {by_weight} of {n} \
         intervals by bytes x nr_accesses, {by_samples} of {n} by raw samples. Accessed but not \
         resident: {not_resident:.1} MiB at most per interval ({outside:.1} MiB outside every \
         mapping). Regions with samples but nr_accesses 0: {sampled_zero}; with nr_accesses \
         but no sample: {accessed_unsampled} (in {snaps} snapshots).\n"
    );
    Summary {
        name: name.to_string(),
        horizon_s,
        n,
        truth_mib: truth,
        udamon_mib: udamon,
        ratio,
        low_ratio: m(&|j| j.low as f64 / j.truth.max(1) as f64),
        high_ratio: m(&|j| j.high as f64 / j.truth.max(1) as f64),
        settled,
        covered,
        settled_right,
        above,
        whole_ratio: m(&|j| j.whole_regions as f64 / j.truth.max(1) as f64),
        control_mib,
        top_truth: top
            .first()
            .map(|(l, (tr, ud))| {
                // Permissions and name, without the addresses.
                let name = l.split_once(' ').map_or(l.as_str(), |x| x.1);
                format!("{name}: {}", truth_per_udamon(*tr, *ud))
            })
            .unwrap_or_default(),
        hottest: format!("{by_weight}/{n}, {by_samples}/{n}"),
        not_resident_mib: not_resident,
        sampled_zero,
        accessed_unsampled,
    }
}

fn main() {
    let args = parse_args();
    let exe = std::env::current_exe().expect("own path");
    let udamon = exe.with_file_name("udamon");
    assert!(
        udamon.exists(),
        "build it first: cargo build --release -p udamon"
    );
    // SAFETY: geteuid cannot fail.
    if args.source == "tick" && args.rejudge.is_none() && unsafe { libc::geteuid() } != 0 {
        eprintln!("judge: the tick source needs root; use --source cpuclock");
        std::process::exit(2);
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = args
        .keep
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("the output directory");
    let env = Env {
        dir: dir.clone(),
        workloads: Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads"),
        // target/release/judge: beside target/release.
        runtimes: exe
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .join("judge-workloads"),
        // Two phases at most, and margin; the programs' own clocks start before the warm-up.
        run_secs: 2 * args.phase_length().as_secs() + 120,
    };
    println!(
        "# Kernel as judge: udamon (--access-source {}) against clear_refs + smaps Referenced, horizons {:?} s\n",
        args.source, args.horizons
    );
    let mut summaries = Vec::new();
    let mut wide_narrow = Vec::new();
    for program in &args.programs {
        let measured = match &args.rejudge {
            Some(kept) => rejudge(kept, program, &args.source),
            None => env
                .start(program, Duration::from_secs(env.run_secs))
                .map_err(|why| format!("skipped: {why}"))
                .and_then(|target| {
                    measure(&args, &udamon, &dir, program, &target)
                        .map_err(|why| format!("failed: {why}"))
                }),
        };
        let Measured { judged, control } = match measured {
            Ok(m) => m,
            Err(why) => {
                println!("{program}: {why}\n");
                continue;
            }
        };
        // Medians per (phase, horizon), for the wide/narrow contrast.
        let mut medians = BTreeMap::new();
        let mut groups: Vec<(&str, u64)> = Vec::new();
        for (phase, t, _) in &judged {
            let key = (*phase, horizon_s(t));
            if !groups.contains(&key) {
                groups.push(key);
            }
        }
        for (phase, h) in groups {
            let of_group: Vec<(&TruthInterval, &Judged)> = judged
                .iter()
                .filter(|(p, t, _)| *p == phase && horizon_s(t) == h)
                .map(|(_, t, j)| (t, j))
                .collect();
            let name = if phase.is_empty() {
                program.clone()
            } else {
                format!("{program} {phase}")
            };
            let of_control: Vec<u64> = control
                .iter()
                .filter(|c| c.0 == phase && c.1 == h)
                .map(|c| c.2)
                .collect();
            let s = report(&name, h, &of_group, &of_control);
            medians.insert((phase, h), (s.truth_mib, s.udamon_mib));
            summaries.push(s);
        }
        for h in &args.horizons {
            if let (Some(n), Some(w)) = (medians.get(&("narrow", *h)), medians.get(&("wide", *h))) {
                let line = format!(
                    "{program}, {h} s: wide/narrow working set: truth {:.2}, udamon {:.2}",
                    w.0 / n.0,
                    w.1 / n.1
                );
                println!("{line}\n");
                wide_narrow.push(line);
            }
        }
    }
    for h in &args.horizons {
        println!(
            "## Summary, {h} s horizon (--access-source {})\n",
            args.source
        );
        println!(
            "| program | intervals | truth MiB | udamon MiB | udamon/truth | interval /truth | settled | truth in interval | settled and within ±25 % | whole regions /truth | udamon without clear_refs: MiB, /truth | truth's top mapping: truth/udamon | udamon's hottest = truth's (by weight, by samples) | accessed, not resident (max MiB) | sampled, nr_accesses 0 | nr_accesses, no sample |"
        );
        println!("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|");
        for s in summaries.iter().filter(|s| s.horizon_s == *h) {
            println!(
                "| {} | {} | {:.1} | {:.1} | {:.2} | {:.2}-{:.2} | {}/{} | {} | {} | {:.2} | {} | {} | {} | {:.1} | {} | {} |",
                s.name,
                s.n,
                s.truth_mib,
                s.udamon_mib,
                s.ratio,
                s.low_ratio,
                s.high_ratio,
                s.settled,
                s.n,
                share(s.covered, s.n),
                share(s.settled_right, s.settled),
                s.whole_ratio,
                s.control_mib
                    .map_or("-".into(), |c| format!("{c:.1}, {:.2}", c / s.truth_mib)),
                s.top_truth,
                s.hottest,
                s.not_resident_mib,
                s.sampled_zero,
                s.accessed_unsampled
            );
        }
        println!();
    }
    for line in wide_narrow {
        println!("{line}\n");
    }
    honest_error(&args, &summaries);
}

/// The honest-error table: per program (or phase), the median udamon/truth at each horizon,
/// how many intervals udamon's stated interval held the truth in, and how many of those it
/// called settled were within ±25 %; totals per horizon and over all.
fn honest_error(args: &Args, summaries: &[Summary]) {
    println!(
        "## Honest error (--access-source {}): udamon/truth; truth in udamon's interval; settled and within ±25 %\n",
        args.source
    );
    let mut head = String::from("| program |");
    let mut rule = String::from("|---|");
    for h in &args.horizons {
        head.push_str(&format!(
            " {h} s: udamon/truth | {h} s: in interval | {h} s: settled, right |"
        ));
        rule.push_str("---:|---:|---:|");
    }
    println!(
        "{head} all: in interval | all: truth above, below it | all: settled, right |\n{rule}---:|---:|---:|"
    );
    let mut names: Vec<&str> = Vec::new();
    for s in summaries {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    // (covered, n, settled right, settled, above) summed over some summaries.
    let total = |of: &mut dyn Iterator<Item = &Summary>| {
        of.fold((0, 0, 0, 0, 0), |t, s| {
            (
                t.0 + s.covered,
                t.1 + s.n,
                t.2 + s.settled_right,
                t.3 + s.settled,
                t.4 + s.above,
            )
        })
    };
    let all = |t: (usize, usize, usize, usize, usize)| {
        format!(
            "{} | {}, {} | {}",
            share(t.0, t.1),
            t.4,
            t.1 - t.0 - t.4,
            share(t.2, t.3)
        )
    };
    for name in names {
        let mut line = format!("| {name} |");
        for h in &args.horizons {
            match summaries
                .iter()
                .find(|s| s.name == name && s.horizon_s == *h)
            {
                Some(s) => line.push_str(&format!(
                    " {:.2} | {} | {} |",
                    s.ratio,
                    share(s.covered, s.n),
                    share(s.settled_right, s.settled)
                )),
                None => line.push_str(" - | - | - |"),
            }
        }
        let t = total(&mut summaries.iter().filter(|s| s.name == name));
        println!("{line} {} |", all(t));
    }
    let mut line = String::from("| **all** |");
    for h in &args.horizons {
        let t = total(&mut summaries.iter().filter(|s| s.horizon_s == *h));
        line.push_str(&format!(" - | {} | {} |", share(t.0, t.1), share(t.2, t.3)));
    }
    println!("{line} {} |\n", all(total(&mut summaries.iter())));
}
