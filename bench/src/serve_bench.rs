//! `udamon serve` benchmarks, against the release build of udamon (`cargo build --release`).
//!
//! - `cost`: 20 busy processes (bench/workloads/membound.c) run alone, then served by
//!   `udamon serve --match`, then alone again. Prints the targets' throughput served against
//!   alone, the monitor's CPU (percent of one core) and memory, and how long a scrape of
//!   `/metrics` takes at 20 targets.
//! - `soak`: `udamon serve --idle` keeps 20 simulated targets (bench/workloads/soak.cfg, ten
//!   minutes each, in virtual time) coming and going until every one of the 20 slots has served
//!   an hour of simulated time (`--hours`), and samples the monitor's resident memory all along:
//!   flat memory is the goal.
//!
//! usage: serve-bench cost [--targets N] [--seconds S]
//!        serve-bench soak [--hours H] [--slots N]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod cc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    match args.first().map(String::as_str) {
        Some("cost") => cost(flag("--targets", 20) as usize, flag("--seconds", 20)),
        Some("soak") => soak(flag("--hours", 1), flag("--slots", 20) as usize),
        _ => {
            eprintln!(
                "usage: serve-bench cost [--targets N] [--seconds S] | soak [--hours H] [--slots N]"
            );
            std::process::exit(2);
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn udamon() -> PathBuf {
    let bin = repo().join("target/release/udamon");
    assert!(
        bin.exists(),
        "build the release udamon first: cargo build --release -p udamon"
    );
    bin
}

/// A running `udamon serve`, killed when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
    control: PathBuf,
}

impl Serve {
    fn start(dir: &Path, args: &[&str]) -> Serve {
        let control = dir.join("ctl.sock");
        let mut child = Command::new(udamon())
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--control"])
            .arg(&control)
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("udamon serve starts");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("udamon serve says where it serves")
                .unwrap();
            if let Some(rest) = line.split("http://").nth(1) {
                break rest.split('/').next().unwrap().parse().unwrap();
            }
        };
        // Keep reading its log, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Serve {
            child,
            addr,
            control,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One scrape of /metrics: its time and the body.
    fn scrape(&self) -> (Duration, String) {
        let start = Instant::now();
        let mut s = TcpStream::connect(self.addr).unwrap();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        (start.elapsed(), text)
    }

    fn ctl(&self, args: &[&str]) -> String {
        let out = Command::new(udamon())
            .arg("ctl")
            .arg("--control")
            .arg(&self.control)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "udamon ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: signalling our own child: a clean stop, then a wait.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// A `/proc/PID/status` field in KiB (VmRSS, VmHWM).
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Busy targets, each counting its progress in a file of its own.
struct Targets {
    children: Vec<Child>,
    counters: Vec<PathBuf>,
}

impl Targets {
    fn start(dir: &Path, n: usize, name: &str) -> Targets {
        let src = repo().join("bench/workloads/membound.c");
        let bin = cc::build(&src, &["-O2"], dir, name);
        let mut children = Vec::new();
        let mut counters = Vec::new();
        for i in 0..n {
            let counter = dir.join(format!("counter-{i}"));
            children.push(Command::new(&bin).arg("16").arg(&counter).spawn().unwrap());
            counters.push(counter);
        }
        // Until every target has written its memory once.
        let deadline = Instant::now() + Duration::from_secs(60);
        let targets = Targets { children, counters };
        while targets.progress() == 0 || targets.counters.iter().any(|c| count(c) == 0) {
            assert!(Instant::now() < deadline, "the targets never started");
            std::thread::sleep(Duration::from_millis(100));
        }
        targets
    }

    fn progress(&self) -> u64 {
        self.counters.iter().map(|c| count(c)).sum()
    }

    /// Blocks of work per second over `seconds`.
    fn rate(&self, seconds: u64) -> f64 {
        let (c0, t0) = (self.progress(), Instant::now());
        std::thread::sleep(Duration::from_secs(seconds));
        (self.progress() - c0) as f64 / t0.elapsed().as_secs_f64()
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn count(path: &Path) -> u64 {
    std::fs::read(path)
        .ok()
        .and_then(|b| {
            b.get(..8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The exporter alone: rendering `n` targets' series, as a scrape does, without the HTTP
/// round trip and the scheduling of a loaded machine. Returns the median in milliseconds.
fn render_ms(n: usize) -> f64 {
    let exporter = udamon_exporter::Exporter::new();
    let mut source = std::collections::BTreeMap::new();
    for name in [
        "samples",
        "recovered",
        "lost",
        "dropped_clobbered",
        "dropped_no_operand",
    ] {
        source.insert(name.to_string(), 1000);
    }
    let obs = udamon_exporter::Observation {
        window_seconds: 0.2,
        regions: 100,
        monitored_bytes: 1 << 30,
        working_set_bytes: vec![1 << 26, 1 << 27, 1 << 28],
        bandwidth_bytes_per_second: 1e9,
        idle_seconds: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        resident_bytes: Some(1 << 29),
        source,
        ..Default::default()
    };
    for i in 0..n {
        let labels = udamon_exporter::TargetLabels {
            pid: (1000 + i).to_string(),
            comm: "membound".to_string(),
            cgroup: "/system.slice/bench.service".to_string(),
        };
        exporter.update(&labels, &obs);
    }
    let mut times: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(exporter.render());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    percentile(&times, 0.5)
}

fn cost(n: usize, seconds: u64) {
    let dir = tempfile::tempdir().unwrap();
    // A name of its own, so that --match takes these targets and nothing else.
    let name = format!("sbench{}", std::process::id() % 100_000);
    let targets = Targets::start(dir.path(), n, &name);
    println!("# serve-bench cost: {n} membound targets of 16 MiB, {seconds} s per phase");
    println!(
        "render of {n} targets   median {:.3} ms (the exporter alone, machine idle)",
        render_ms(n)
    );
    let alone1 = targets.rate(seconds);
    let serve = Serve::start(dir.path(), &["--match", &format!("^{name}$")]);
    // Until every target is served, then a warm-up: attaching and naming code cost once.
    let deadline = Instant::now() + Duration::from_secs(120);
    while serve.ctl(&["targets"]).lines().count() < n {
        assert!(Instant::now() < deadline, "serve never took every target");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(5));
    let cpu0 = cpu_seconds(serve.pid());
    let t0 = Instant::now();
    let (c0, w0) = (targets.progress(), Instant::now());
    let mut scrapes = Vec::new();
    let mut series = 0;
    while t0.elapsed() < Duration::from_secs(seconds) {
        let (took, body) = serve.scrape();
        scrapes.push(took.as_secs_f64() * 1e3);
        series = body
            .lines()
            .filter(|l| l.starts_with("udamon_working_set_bytes{"))
            .count();
        std::thread::sleep(Duration::from_millis(250));
    }
    let served = (targets.progress() - c0) as f64 / w0.elapsed().as_secs_f64();
    let cpu = (cpu_seconds(serve.pid()) - cpu0) / t0.elapsed().as_secs_f64() * 100.0;
    let (rss, hwm) = (
        status_kib(serve.pid(), "VmRSS"),
        status_kib(serve.pid(), "VmHWM"),
    );
    drop(serve);
    let alone2 = targets.rate(seconds);
    let alone = (alone1 + alone2) / 2.0;
    scrapes.sort_by(f64::total_cmp);
    println!("targets alone          {alone1:.0} / {alone2:.0} blocks/s (before / after)");
    println!(
        "targets served         {served:.0} blocks/s: {:.3} of alone ({:+.2} %)",
        served / alone,
        (served / alone - 1.0) * 100.0
    );
    println!("monitor CPU            {cpu:.2} % of one core (goal <= 2 %)");
    println!(
        "monitor memory         {:.1} MiB resident, {:.1} MiB peak (goal <= 64 MiB)",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    println!(
        "scrape of /metrics     median {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} scrapes, {series} working-set series (goal <= 10 ms)",
        percentile(&scrapes, 0.5),
        percentile(&scrapes, 0.99),
        percentile(&scrapes, 1.0),
        scrapes.len()
    );
}

fn soak(hours: u64, slots: usize) {
    let dir = tempfile::tempdir().unwrap();
    let workload = repo().join("bench/workloads/soak.cfg");
    let workload = workload.to_str().unwrap();
    // Ten simulated minutes per target.
    let runs = (hours * 6) as usize * slots;
    println!(
        "# serve-bench soak: {slots} slots, {runs} simulated targets of 10 min ({hours} h per slot), in virtual time"
    );
    let serve = Serve::start(dir.path(), &["--idle", "--rescan", "100ms"]);
    let start = Instant::now();
    let mut started = 0;
    let mut rss = Vec::new();
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    while started < runs || serve.ctl(&["targets"]).lines().count() > 0 {
        let running = serve.ctl(&["targets"]).lines().count();
        for _ in running..slots {
            if started < runs {
                serve.ctl(&["add", "--sim", workload, "--fast"]);
                started += 1;
            }
        }
        if last_sample.elapsed() >= Duration::from_millis(500) {
            last_sample = Instant::now();
            rss.push((
                start.elapsed().as_secs_f64(),
                status_kib(serve.pid(), "VmRSS"),
                started,
            ));
        }
        let _ = serve.scrape();
        std::thread::sleep(Duration::from_millis(50));
    }
    let hwm = status_kib(serve.pid(), "VmHWM");
    let third = rss.len() / 3;
    let mean = |s: &[(f64, u64, usize)]| {
        s.iter().map(|x| x.1 as f64).sum::<f64>() / s.len().max(1) as f64 / 1024.0
    };
    for (t, kib, n) in rss.iter().step_by((rss.len() / 12).max(1)) {
        println!(
            "t {t:6.1} s  targets started {n:5}  resident {:.1} MiB",
            *kib as f64 / 1024.0
        );
    }
    let (first, last) = (mean(&rss[..third]), mean(&rss[rss.len() - third..]));
    println!(
        "resident memory        first third {first:.1} MiB, last third {last:.1} MiB: ratio {:.2}; peak {:.1} MiB",
        last / first,
        hwm as f64 / 1024.0
    );
    println!(
        "simulated              {runs} targets, {:.1} h of target time in {:.1} s",
        runs as f64 / 6.0,
        start.elapsed().as_secs_f64()
    );
}
