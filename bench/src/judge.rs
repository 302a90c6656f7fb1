//! The kernel as judge: udamon's working sets on live programs against the page-table accessed
//! bits of the same process over the same intervals (see `truth.rs` for how each is read).
//!
//! For each program: start it, wait for its warm-up, run the release `udamon record --pid` on
//! it for the horizon, and meanwhile take consecutive truth intervals (clear_refs, sleep,
//! smaps), then as many intervals again without them (the control: clearing the accessed bits
//! makes the next touch of every page slower, which moves where samples land). Then judge each
//! interval against the record, and print per program the medians of truth, udamon, their
//! ratio and udamon's in the control intervals, the top mappings, whether udamon's hottest mapping is the
//! truth's, the bytes udamon calls accessed that are not even resident, and the regions with
//! samples but no accesses; a markdown summary table at the end.
//!
//! Run (as root for `tick`): `cargo build --release -p udamon && cargo run --release -p
//! udamon-bench --bin judge -- [--source tick|cpuclock] [--horizon SECS] [--interval SECS]
//! [--keep DIR] [PROGRAM...]`, programs: patterns-O2 patterns-O0 pointer-chase threads
//! python-slices stress-ng-write64 stress-ng-read64 memcached sqlite3 (default: all).
//! stress-ng and memcached are installed with apt-get when missing. memcached and sqlite3 run
//! two phases each (a narrow and a wide working set), reported apart.

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

const MIB: f64 = (1u64 << 20) as f64;
const PROGRAMS: [&str; 9] = [
    "patterns-O2",
    "patterns-O0",
    "pointer-chase",
    "threads",
    "python-slices",
    "stress-ng-write64",
    "stress-ng-read64",
    "memcached",
    "sqlite3",
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
    horizon: Duration,
    interval: Duration,
    keep: Option<PathBuf>,
    programs: Vec<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        source: "tick".into(),
        horizon: Duration::from_secs(20),
        interval: Duration::from_secs(2),
        keep: None,
        programs: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    let secs = |v: Option<String>, flag: &str| -> Duration {
        let v = v.unwrap_or_else(|| panic!("{flag} needs a value"));
        Duration::from_secs_f64(
            v.parse()
                .unwrap_or_else(|_| panic!("{flag} {v}: not seconds")),
        )
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--source" => args.source = it.next().expect("--source tick|cpuclock"),
            "--horizon" => args.horizon = secs(it.next(), "--horizon"),
            "--interval" => args.interval = secs(it.next(), "--interval"),
            "--keep" => args.keep = Some(it.next().expect("--keep DIR").into()),
            p if PROGRAMS.contains(&p) => args.programs.push(a),
            _ => panic!("unknown argument {a}; programs: {}", PROGRAMS.join(" ")),
        }
    }
    if args.programs.is_empty() {
        args.programs = PROGRAMS.iter().map(|p| p.to_string()).collect();
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

/// A program under test; killed (with everything it started) when dropped.
struct Target {
    children: Vec<Child>,
    /// The process udamon monitors and truth is taken on.
    pid: u32,
    /// Phases of the run, in order; each gets the horizon.
    phases: Vec<&'static str>,
    /// The phase the load generator should be in, and the flag that stops it.
    phase: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    load: Option<JoinHandle<()>>,
}

impl Target {
    fn single(child: Child) -> Target {
        let pid = child.id();
        Target {
            children: vec![child],
            pid,
            phases: vec![""],
            phase: Arc::default(),
            stop: Arc::default(),
            load: None,
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
    /// Long enough for udamon's whole run of one phase, plus warm-up and margin.
    run_secs: u64,
}

impl Env {
    fn start(&self, program: &str, horizon: Duration) -> Result<Target, String> {
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
                    let worker = descendants(t.pid)
                        .into_iter()
                        .max_by_key(|&p| rss_kib(p))
                        .filter(|&p| rss_kib(p) >= 250 * 1024);
                    if let Some(w) = worker {
                        t.pid = w;
                        // Past the first write of its memory.
                        sleep(Duration::from_secs(2));
                        return Ok(t);
                    }
                    if Instant::now() > deadline {
                        return Err("no stress-ng worker with 256 MiB resident within 30 s".into());
                    }
                }
            }
            "memcached" => self.memcached(horizon),
            "sqlite3" => sqlite(horizon),
            _ => unreachable!("programs are checked when parsing the arguments"),
        }
    }

    fn memcached(&self, horizon: Duration) -> Result<Target, String> {
        ensure("memcached", "memcached")?;
        // A free loopback port: the kernel picks one, which is closed again for memcached.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
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
        let mut t = Target::single(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut conn = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(c) => break c,
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("memcached did not listen on port {port}: {e}"));
                }
                Err(_) => sleep(Duration::from_millis(100)),
            }
        };
        // No read waits forever, whatever memcached does.
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        let items = mc_load(&mut conn).map_err(|e| format!("loading memcached: {e}"))?;
        println!(
            "memcached: {items} items loaded in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        t.phases = vec!["narrow", "wide"];
        let (phase, stop) = (t.phase.clone(), t.stop.clone());
        // Never longer than the whole run, whatever happens to the main thread.
        let limit = horizon * 2 + Duration::from_secs(60);
        t.load = Some(std::thread::spawn(move || {
            if let Err(e) = mc_gets(conn, &phase, &stop, limit) {
                eprintln!("memcached load stopped: {e}");
            }
        }));
        // After the load memcached grows its hash table and moves every item over in a
        // background thread, which touches all of them: not part of either phase.
        sleep(MC_WARM_UP);
        Ok(t)
    }
}

/// The sqlite3 shell on an in-memory database, answering one query at a time: sums over the
/// first rows in the narrow phase, over all in the wide one.
fn sqlite(horizon: Duration) -> Result<Target, String> {
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
    let limit = horizon * 2 + Duration::from_secs(60);
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

fn mc_key(i: u64) -> String {
    format!("key:{i:07}")
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

/// Multi-gets of random keys, among the first `MC_NARROW` in phase 0 and among all in phase 1,
/// until `stop` or `limit`.
fn mc_gets(
    mut conn: TcpStream,
    phase: &AtomicUsize,
    stop: &AtomicBool,
    limit: Duration,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let start = Instant::now();
    let (mut rng, mut req, mut line) = (0x9E3779B97F4A7C15u64, String::new(), String::new());
    let mut value = vec![0u8; MC_VALUE + 2];
    while !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
        let keys = if phase.load(Ordering::Relaxed) == 0 {
            MC_NARROW
        } else {
            MC_KEYS
        };
        req.clear();
        req.push_str("get");
        for _ in 0..MC_BATCH {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            req.push(' ');
            req.push_str(&mc_key(rng % keys));
        }
        req.push_str("\r\n");
        conn.write_all(req.as_bytes())?;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if line == "END\r\n" {
                break;
            }
            if !line.starts_with("VALUE ") {
                return Err(std::io::Error::other(format!("unexpected {line:?}")));
            }
            reader.read_exact(&mut value)?;
        }
    }
    Ok(())
}

/// Runs `udamon record --pid` on `target` for all its phases while taking truth intervals;
/// returns the judged intervals with their phase (those without a snapshot inside are left out).
/// A program's judged intervals, and udamon's working set in the control intervals, by phase.
struct Measured {
    judged: Vec<(&'static str, TruthInterval, Judged)>,
    control: Vec<(&'static str, u64)>,
}

fn measure(
    args: &Args,
    udamon: &Path,
    dir: &Path,
    program: &str,
    target: &Target,
) -> Result<Measured, String> {
    // Judged intervals, one to recover, control intervals.
    let per_phase = SETTLE + args.horizon * 2 + args.interval;
    let duration = per_phase * target.phases.len() as u32 + SETTLE;
    let rec_path = dir.join(format!("{program}-{}.data", args.source));
    let log = dir.join(format!("{program}-{}.log", args.source));
    let mut mon = Command::new(udamon)
        .args(["record", "--pid", &target.pid.to_string()])
        .args(["--access-source", &args.source])
        .args(["--duration", &format!("{}ms", duration.as_millis())])
        .arg("-o")
        .arg(&rec_path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot run udamon: {e}"))?;
    // Wall-clock bounds of the control intervals.
    let mut control = Vec::new();
    let mut truth = || -> Result<Vec<(&'static str, TruthInterval)>, String> {
        let mut intervals = Vec::new();
        sleep(SETTLE);
        for (i, &phase) in target.phases.iter().enumerate() {
            target.phase.store(i, Ordering::Relaxed);
            if i > 0 {
                sleep(SETTLE);
            }
            let end = Instant::now() + args.horizon;
            let mut n = 0;
            while Instant::now() + args.interval <= end {
                let t = take_interval(target.pid, args.interval)
                    .map_err(|e| format!("truth for pid {}: {e}", target.pid))?;
                intervals.push((phase, t));
                n += 1;
            }
            // The accessed bits were cleared last at the start of the last interval: one
            // interval for the target to touch its pages again before the control begins.
            sleep(args.interval);
            for _ in 1..n {
                let start_ns = realtime_ns();
                sleep(args.interval);
                control.push((phase, start_ns, realtime_ns()));
            }
        }
        Ok(intervals)
    };
    // udamon is waited for even when the truth failed (say, the target died).
    let intervals = truth();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = mon.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = mon.kill();
            let _ = mon.wait();
            return Err("udamon did not stop within 60 s of its duration".into());
        }
        sleep(Duration::from_millis(100));
    };
    if !status.success() {
        return Err(format!(
            "udamon failed: {}",
            std::fs::read_to_string(&log).unwrap_or_default().trim()
        ));
    }
    let rec = read_record(&rec_path).map_err(|e| format!("reading the record: {e}"))?;
    Ok(Measured {
        judged: intervals?
            .into_iter()
            .filter_map(|(phase, t)| {
                let j = judge(&t, &rec)?;
                Some((phase, t, j))
            })
            .collect(),
        control: control
            .into_iter()
            .filter_map(|(phase, start, end)| Some((phase, udamon_bytes(&rec, start, end)?)))
            .collect(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn truth_per_udamon(truth: u64, udamon: u64) -> String {
    if udamon == 0 {
        "udamon 0".into()
    } else {
        format!("{:.2}", truth as f64 / udamon as f64)
    }
}

/// One line of the summary table.
struct Summary {
    name: String,
    n: usize,
    truth_mib: f64,
    udamon_mib: f64,
    ratio: f64,
    /// udamon's median in the control intervals, without clear_refs.
    control_mib: f64,
    top_truth: String,
    hottest: String,
    not_resident_mib: f64,
    sampled_zero: usize,
}

/// Prints one program's (or phase's) judged intervals and returns its summary line.
fn report(name: &str, judged: &[(&TruthInterval, &Judged)], control: &[u64]) -> Summary {
    let n = judged.len();
    let truth = median(judged.iter().map(|(_, j)| j.truth as f64 / MIB).collect());
    let udamon = median(judged.iter().map(|(_, j)| j.udamon as f64 / MIB).collect());
    let ratio = median(
        judged
            .iter()
            .map(|(_, j)| j.udamon as f64 / j.truth.max(1) as f64)
            .collect(),
    );
    let control_mib = median(control.iter().map(|&b| b as f64 / MIB).collect());
    println!("### {name}\n");
    println!(
        "{n} intervals; median truth {truth:.1} MiB, udamon {udamon:.1} MiB, udamon/truth {ratio:.2}; \
         without clear_refs ({} intervals) udamon {control_mib:.1} MiB\n",
        control.len()
    );
    // Mappings by label, summed over the intervals (the layout may change between them).
    let mut by_mapping: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut beyond_rss: BTreeMap<String, u64> = BTreeMap::new();
    for (t, j) in judged {
        for (m, &(tr, ud)) in t.mappings.iter().zip(&j.per_mapping) {
            let e = by_mapping.entry(label(m)).or_default();
            e.0 += tr;
            e.1 += ud;
            *beyond_rss.entry(label(m)).or_default() += ud.saturating_sub(m.rss_bytes);
        }
    }
    let most_beyond_rss = beyond_rss
        .into_iter()
        .filter(|b| b.1 > 0)
        .max_by_key(|b| b.1)
        .map_or("none".into(), |(l, b)| {
            format!("{l}, {:.1} MiB per interval", b as f64 / MIB / n as f64)
        });
    let mut top: Vec<(String, (u64, u64))> = by_mapping.into_iter().collect();
    top.sort_by_key(|(_, (tr, _))| std::cmp::Reverse(*tr));
    println!(
        "| mapping (top 3 by truth) | truth, mean MiB / interval | udamon, mean MiB / interval | truth/udamon |"
    );
    println!("|---|---:|---:|---:|");
    for (label, (tr, ud)) in top.iter().take(3) {
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
    // Where udamon's samples pile up most often: the reason when it is not the truth's hottest.
    let mut favourite: BTreeMap<String, usize> = BTreeMap::new();
    for (t, j) in judged {
        if let Some(i) = j.hottest_by_samples {
            *favourite.entry(label(&t.mappings[i])).or_default() += 1;
        }
    }
    let favourite = favourite
        .into_iter()
        .max_by_key(|f| f.1)
        .map_or("none".into(), |(l, k)| format!("{l} ({k} of {n})"));
    let sampled_zero: usize = judged.iter().map(|(_, j)| j.sampled_zero).sum();
    let snaps: usize = judged.iter().map(|(_, j)| j.nr_snapshots).sum();
    println!(
        "\nudamon's hottest mapping is the truth's largest (or within 5 % of it): {by_weight} of {n} intervals by \
         bytes x nr_accesses, {by_samples} of {n} by raw samples (most samples most often in {favourite}). Accessed but \
         not resident: {not_resident:.1} MiB at most per interval ({outside:.1} MiB at most \
         outside every mapping; most beyond the Rss of {most_beyond_rss}). Regions with samples but nr_accesses 0: \
         {sampled_zero} (in {snaps} snapshots).\n"
    );
    Summary {
        name: name.to_string(),
        n,
        truth_mib: truth,
        udamon_mib: udamon,
        ratio,
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
    if args.source == "tick" && unsafe { libc::geteuid() } != 0 {
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
        // Warm-up after start is not counted: the programs' own clocks start before it.
        run_secs: 2 * (args.horizon * 2 + args.interval + SETTLE * 2).as_secs() + 60,
    };
    println!(
        "# Kernel as judge: udamon (--access-source {}) against clear_refs + smaps Referenced, {:.0} s intervals, {:.0} s per program\n",
        args.source,
        args.interval.as_secs_f64(),
        args.horizon.as_secs_f64()
    );
    let mut summaries = Vec::new();
    let mut wide_narrow = Vec::new();
    for program in &args.programs {
        let target = match env.start(program, args.horizon) {
            Ok(t) => t,
            Err(why) => {
                println!("{program}: skipped: {why}\n");
                continue;
            }
        };
        let Measured { judged, control } = match measure(&args, &udamon, &dir, program, &target) {
            Ok(m) => m,
            Err(why) => {
                println!("{program}: failed: {why}\n");
                continue;
            }
        };
        drop(target);
        let mut medians = BTreeMap::new();
        let phases: Vec<&str> = judged.iter().map(|j| j.0).collect();
        let mut seen = Vec::new();
        for phase in phases {
            if seen.contains(&phase) {
                continue;
            }
            seen.push(phase);
            let of_phase: Vec<(&TruthInterval, &Judged)> = judged
                .iter()
                .filter(|j| j.0 == phase)
                .map(|j| (&j.1, &j.2))
                .collect();
            let name = if phase.is_empty() {
                program.clone()
            } else {
                format!("{program} {phase}")
            };
            let of_control: Vec<u64> = control
                .iter()
                .filter(|c| c.0 == phase)
                .map(|c| c.1)
                .collect();
            let s = report(&name, &of_phase, &of_control);
            medians.insert(phase, (s.truth_mib, s.udamon_mib));
            summaries.push(s);
        }
        if let (Some(n), Some(w)) = (medians.get("narrow"), medians.get("wide")) {
            let line = format!(
                "{program}: wide/narrow working set: truth {:.2}, udamon {:.2}",
                w.0 / n.0,
                w.1 / n.1
            );
            println!("{line}\n");
            wide_narrow.push(line);
        }
    }
    println!("## Summary (--access-source {})\n", args.source);
    println!(
        "| program | intervals | truth MiB (median) | udamon MiB (median) | udamon/truth (median) | udamon without clear_refs: MiB, /truth | truth's top mapping: truth/udamon | udamon's hottest = truth's (by weight, by samples) | accessed, not resident (max MiB) | sampled, nr_accesses 0 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|---:|---:|");
    for s in &summaries {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {:.1}, {:.2} | {} | {} | {:.1} | {} |",
            s.name,
            s.n,
            s.truth_mib,
            s.udamon_mib,
            s.ratio,
            s.control_mib,
            s.control_mib / s.truth_mib,
            s.top_truth,
            s.hottest,
            s.not_resident_mib,
            s.sampled_zero
        );
    }
    for line in wide_narrow {
        println!("\n{line}");
    }
}
