//! `udamon serve` benchmarks, against the release build of udamon (`cargo build --release`).
//!
//! - `cost`: 20 busy processes (bench/workloads/membound.c) run alone, then served by
//!   `udamon serve --match`, then alone again. Prints the targets' throughput served against
//!   alone, the monitor's CPU (percent of one core) and memory, and how long a scrape of
//!   `/metrics` takes at 20 targets.
//! - `fleet`: a host's population: 1,000 idle `sleep` processes and 10 busy membound ones,
//!   all served by one `udamon serve --match`. Prints the monitor's CPU, memory, threads and
//!   scrape times, the series a scrape holds, and the busy targets' working sets over one
//!   window and over 10 s against `udamon record --pid` of each of them alone. `--pods N`
//!   (root, a cgroup2 mount) spreads the idle ones over N cgroups named as the kubelet names
//!   containers' (a Kubernetes node's 50 pods), so that every series carries pod labels.
//!
//! `cost` and `fleet` take `--baseline PATH`: another build of udamon (main's, say) served the
//! same targets first, in the same run, and each line shows this build's ratio to it.
//!
//! - `soak`: `udamon serve --idle` keeps 20 simulated targets (bench/workloads/soak.cfg, ten
//!   minutes each, in virtual time) coming and going until every one of the 20 slots has served
//!   an hour of simulated time (`--hours`), and samples the monitor's resident memory all along:
//!   flat memory is the goal.
//!
//! - `startup`: 20 busy processes of 64 MiB (membound) starting at once under a fresh
//!   `udamon serve --match`: how long from their start until `udamon ctl targets` lists them
//!   all, until the metrics count them (`udamon_targets`) and until each has series of its
//!   own, and the monitor's resident memory (its peak, VmHWM) meanwhile and 30 s on. Takes
//!   `--baseline PATH` too.
//!
//! usage: serve-bench cost [--targets N] [--seconds S] [--baseline PATH]
//!        serve-bench fleet [--idle N] [--busy N] [--pods N] [--seconds S] [--baseline PATH]
//!        serve-bench soak [--hours H] [--slots N]
//!        serve-bench startup [--targets N] [--mib M] [--access-source S] [--baseline PATH]

use std::collections::BTreeMap;
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
    let baseline = args
        .iter()
        .position(|a| a == "--baseline")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    match args.first().map(String::as_str) {
        Some("cost") => cost(
            flag("--targets", 20) as usize,
            flag("--seconds", 20),
            baseline,
        ),
        Some("fleet") => fleet(
            flag("--idle", 1000) as usize,
            flag("--busy", 10) as usize,
            flag("--pods", 0) as usize,
            flag("--seconds", 30),
            baseline,
        ),
        Some("soak") => soak(flag("--hours", 1), flag("--slots", 20) as usize),
        Some("startup") => startup(
            flag("--targets", 20) as usize,
            flag("--mib", 64),
            args.iter()
                .position(|a| a == "--access-source")
                .and_then(|i| args.get(i + 1))
                .map_or("auto", String::as_str),
            baseline,
        ),
        _ => {
            eprintln!(
                "usage: serve-bench cost [--targets N] [--seconds S] [--baseline PATH] | fleet [--idle N] [--busy N] [--pods N] [--seconds S] [--baseline PATH] | soak [--hours H] [--slots N] | startup [--targets N] [--mib M] [--access-source S] [--baseline PATH]"
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

/// The binaries to compare: `--baseline PATH` (an older build, say main's) first, then this
/// build's.
fn builds(baseline: Option<&str>) -> Vec<(&'static str, PathBuf)> {
    let mut builds = Vec::new();
    if let Some(path) = baseline {
        let path = PathBuf::from(path);
        assert!(path.exists(), "--baseline {}: no such file", path.display());
        builds.push(("baseline", path));
    }
    builds.push(("this build", udamon()));
    builds
}

/// A running `udamon serve`, killed when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
    control: PathBuf,
    bin: PathBuf,
}

impl Serve {
    fn start(dir: &Path, args: &[&str]) -> Serve {
        Serve::start_with(&udamon(), dir, args)
    }

    fn start_with(bin: &Path, dir: &Path, args: &[&str]) -> Serve {
        let control = dir.join("ctl.sock");
        let _ = std::fs::remove_file(&control);
        let mut child = Command::new(bin)
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
            bin: bin.to_path_buf(),
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
        self.try_ctl(args)
            .unwrap_or_else(|e| panic!("udamon ctl {args:?}: {e}"))
    }

    /// `udamon ctl ARGS`, or its error: a serve busy taking in a thousand targets may not
    /// answer within ctl's timeout.
    fn try_ctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.bin)
            .arg("ctl")
            .arg("--control")
            .arg(&self.control)
            .args(args)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
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

/// A `/proc/PID/status` field's number: VmRSS and VmHWM in KiB, Threads.
fn status_field(pid: u32, key: &str) -> u64 {
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
    /// `n` targets of `mib` MiB each, under the command name `name`.
    fn start(dir: &Path, n: usize, mib: u64, name: &str) -> Targets {
        let src = repo().join("bench/workloads/membound.c");
        let bin = cc::build(&src, &["-O2"], dir, name);
        let mut children = Vec::new();
        let mut counters = Vec::new();
        for i in 0..n {
            let counter = dir.join(format!("counter-{i}"));
            children.push(
                Command::new(&bin)
                    .arg(mib.to_string())
                    .arg(&counter)
                    .spawn()
                    .unwrap(),
            );
            counters.push(counter);
        }
        // Until every target has written its memory once.
        let deadline = Instant::now() + Duration::from_secs(60);
        let targets = Targets { children, counters };
        while n > 0 && (targets.progress() == 0 || targets.counters.iter().any(|c| count(c) == 0)) {
            assert!(Instant::now() < deadline, "the targets never started");
            std::thread::sleep(Duration::from_millis(100));
        }
        targets
    }

    fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
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
            pod: Default::default(),
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

/// What one served phase measured.
struct Phase {
    /// Seconds from serve's start until it served every target.
    took_in: f64,
    cpu_percent: f64,
    /// Resident memory when the measurement started and when it ended.
    rss_start_mib: f64,
    rss_mib: f64,
    hwm_mib: f64,
    threads: u64,
    /// Scrape times, sorted (ms).
    scrapes: Vec<f64>,
    /// Lines of the last scrape's body that are samples.
    series: usize,
    /// Each busy target's median `udamon_working_set_bytes` over the scrapes at each horizon
    /// of [`COMPARED`], by pid (absent: never exported).
    working_sets: Vec<BTreeMap<u32, f64>>,
    /// Busy targets' throughput while served (blocks/s).
    served_rate: f64,
}

/// Serves `targets` (matched by `pattern`, `expected` processes in all) with `bin` for
/// `seconds`, scraping every `scrape_every`, after a warm-up.
fn serve_phase(
    bin: &Path,
    dir: &Path,
    pattern: &str,
    expected: usize,
    busy: &Targets,
    seconds: u64,
    scrape_every: Duration,
) -> Phase {
    let started = Instant::now();
    let serve = Serve::start_with(bin, dir, &["--match", pattern]);
    // Until every target is served, then a warm-up: attaching and naming code cost once.
    let deadline = Instant::now() + Duration::from_secs(600);
    let served = || serve.try_ctl(&["targets"]).map_or(0, |t| t.lines().count());
    while served() < expected {
        assert!(Instant::now() < deadline, "serve never took every target");
        std::thread::sleep(Duration::from_millis(500));
    }
    let took_in = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(10));
    let cpu0 = cpu_seconds(serve.pid());
    let rss_start_mib = status_field(serve.pid(), "VmRSS") as f64 / 1024.0;
    let t0 = Instant::now();
    let c0 = busy.progress();
    let mut scrapes = Vec::new();
    let mut series = 0;
    let mut seen: Vec<BTreeMap<u32, Vec<f64>>> = vec![BTreeMap::new(); COMPARED.len()];
    let pids = busy.pids();
    while t0.elapsed() < Duration::from_secs(seconds) {
        let (took, body) = serve.scrape();
        scrapes.push(took.as_secs_f64() * 1e3);
        series = body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        for (seen, (horizon, _)) in seen.iter_mut().zip(COMPARED) {
            for (pid, bytes) in served_working_sets(&body, horizon) {
                if pids.contains(&pid) {
                    seen.entry(pid).or_default().push(bytes);
                }
            }
        }
        std::thread::sleep(scrape_every);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let served_rate = (busy.progress() - c0) as f64 / elapsed;
    let cpu_percent = (cpu_seconds(serve.pid()) - cpu0) / elapsed * 100.0;
    let phase = Phase {
        took_in,
        cpu_percent,
        rss_start_mib,
        rss_mib: status_field(serve.pid(), "VmRSS") as f64 / 1024.0,
        hwm_mib: status_field(serve.pid(), "VmHWM") as f64 / 1024.0,
        threads: status_field(serve.pid(), "Threads"),
        scrapes: {
            scrapes.sort_by(f64::total_cmp);
            scrapes
        },
        series,
        working_sets: seen
            .into_iter()
            .map(|seen| {
                seen.into_iter()
                    .map(|(pid, mut v)| {
                        v.sort_by(f64::total_cmp);
                        (pid, percentile(&v, 0.5))
                    })
                    .collect()
            })
            .collect(),
        served_rate,
    };
    drop(serve);
    phase
}

/// The working-set horizons compared between serve and `record --pid`: the metrics' label, and
/// `report wss --horizon`'s argument for it.
const COMPARED: [(&str, &str); 2] = [("window", "0"), ("10s", "10s")];

/// Every `udamon_working_set_bytes{..., horizon=HORIZON}` sample of a scrape, by pid.
fn served_working_sets(body: &str, horizon: &str) -> Vec<(u32, f64)> {
    let label = |line: &str, name: &str| -> Option<String> {
        let at = line.find(&format!("{name}=\""))? + name.len() + 2;
        Some(line[at..].split('"').next()?.to_string())
    };
    body.lines()
        .filter(|l| l.starts_with("udamon_working_set_bytes{"))
        .filter(|l| label(l, "horizon").as_deref() == Some(horizon))
        .filter_map(|l| {
            let pid = label(l, "pid")?.parse().ok()?;
            let value = l.rsplit(' ').next()?.parse().ok()?;
            Some((pid, value))
        })
        .collect()
}

/// Each of `pids` recorded alone by this build (`udamon record --pid`, all at once, each with
/// regions of its own as serve gives them) for `seconds`: its median working set per snapshot
/// at each horizon of [`COMPARED`] (`report wss --horizon`), by pid.
fn recorded_working_sets(dir: &Path, pids: &[u32], seconds: u64) -> Vec<BTreeMap<u32, f64>> {
    let record = |pid: u32| {
        let out = dir.join(format!("busy-{pid}.data"));
        let child = Command::new(udamon())
            .arg("record")
            .arg("-o")
            .arg(&out)
            .args([
                "--pid",
                &pid.to_string(),
                "--duration",
                &format!("{seconds}s"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        (pid, out, child)
    };
    let records: Vec<(u32, PathBuf)> = pids
        .iter()
        .map(|&pid| record(pid))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|(pid, out, mut child)| {
            assert!(
                child.wait().unwrap().success(),
                "udamon record --pid failed"
            );
            (pid, out)
        })
        .collect();
    COMPARED
        .iter()
        .map(|(_, horizon)| {
            records
                .iter()
                .map(|(pid, out)| (*pid, median_working_set(out, horizon)))
                .collect()
        })
        .collect()
}

/// The median working set per snapshot of a record over `horizon` (`report wss`).
fn median_working_set(record: &Path, horizon: &str) -> f64 {
    let report = Command::new(udamon())
        .args(["report", "wss", "--json", "--exclude_samples", "5"])
        .args(["--horizon", horizon])
        .arg(record)
        .output()
        .unwrap();
    assert!(report.status.success(), "udamon report wss failed");
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    json["distributions"][0]["percentiles"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["percentile"].as_f64() == Some(50.0)))
        .and_then(|p| p["value"].as_f64())
        .expect("report wss --json gives the median")
}

fn mib(bytes: f64) -> f64 {
    bytes / 1048576.0
}

/// The median, least and most of some values, in MiB.
fn spread(values: &[f64]) -> String {
    if values.is_empty() {
        return "none exported".into();
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    format!(
        "{:.1} MiB (min {:.1}, max {:.1})",
        mib(percentile(&v, 0.5)),
        mib(v[0]),
        mib(v[v.len() - 1])
    )
}

/// Prints the phases side by side, each build's row with its ratio to the first.
fn print_phases(phases: &[(&str, Phase)]) {
    let row = |name: &str, unit: &str, value: &dyn Fn(&Phase) -> f64| {
        let mut line = format!("{name:<28}");
        let first = value(&phases[0].1);
        for (i, (_, p)) in phases.iter().enumerate() {
            let v = value(p);
            line.push_str(&format!("{:>14}", format!("{v:.2}{unit}")));
            if i > 0 && first > 0.0 {
                line.push_str(&format!("  ({:.3}x)", v / first));
            }
        }
        println!("{line}");
    };
    let mut head = format!("{:<28}", "");
    for (label, _) in phases {
        head.push_str(&format!("{label:>14}"));
    }
    println!("{head}");
    row("serving every target took", " s", &|p| p.took_in);
    row("monitor CPU", " %", &|p| p.cpu_percent);
    row("monitor memory at start", " MiB", &|p| p.rss_start_mib);
    row("monitor memory at end", " MiB", &|p| p.rss_mib);
    row("monitor memory (peak)", " MiB", &|p| p.hwm_mib);
    row("monitor threads", "", &|p| p.threads as f64);
    row("scrape median", " ms", &|p| percentile(&p.scrapes, 0.5));
    row("scrape p99", " ms", &|p| percentile(&p.scrapes, 0.99));
    row("scrape max", " ms", &|p| percentile(&p.scrapes, 1.0));
    row("series in a scrape", "", &|p| p.series as f64);
    // The busy targets' speed while served: a phase on a machine busier than the other's
    // gives them less CPU, so fewer samples and smaller working sets per window.
    row("busy targets' blocks", "/s", &|p| p.served_rate);
}

fn cost(n: usize, seconds: u64, baseline: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    // A name of its own, so that --match takes these targets and nothing else.
    let name = format!("sbench{}", std::process::id() % 100_000);
    let targets = Targets::start(dir.path(), n, 16, &name);
    println!("# serve-bench cost: {n} membound targets of 16 MiB, {seconds} s per phase");
    println!(
        "render of {n} targets   median {:.3} ms (the exporter alone, machine idle)",
        render_ms(n)
    );
    let alone1 = targets.rate(seconds);
    let phases: Vec<(&str, Phase)> = builds(baseline)
        .into_iter()
        .map(|(label, bin)| {
            let phase = serve_phase(
                &bin,
                dir.path(),
                &format!("^{name}$"),
                n,
                &targets,
                seconds,
                Duration::from_millis(250),
            );
            (label, phase)
        })
        .collect();
    let alone2 = targets.rate(seconds);
    let alone = (alone1 + alone2) / 2.0;
    println!("targets alone          {alone1:.0} / {alone2:.0} blocks/s (before / after)");
    for (label, p) in &phases {
        println!(
            "targets served ({label}) {:.0} blocks/s: {:.3} of alone ({:+.2} %)",
            p.served_rate,
            p.served_rate / alone,
            (p.served_rate / alone - 1.0) * 100.0
        );
    }
    print_phases(&phases);
}

/// `sleep` processes under a command name of their own, killed when dropped.
/// Idle processes, spread over the cgroups of `pods` (none: left where they are).
struct Sleepers {
    children: Vec<Child>,
    pods: Option<PodCgroups>,
}

impl Sleepers {
    fn start(dir: &Path, n: usize, name: &str, pods: Option<PodCgroups>) -> Sleepers {
        let sleep = ["/bin/sleep", "/usr/bin/sleep"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("sleep(1)");
        // A symlink, not a copy: the command name is the link's.
        let link = dir.join(name);
        std::os::unix::fs::symlink(sleep, &link).unwrap();
        let children: Vec<Child> = (0..n)
            .map(|_| Command::new(&link).arg("100000").spawn().unwrap())
            .collect();
        if let Some(pods) = &pods {
            for (i, c) in children.iter().enumerate() {
                let cgroup = &pods.containers[i % pods.containers.len()];
                std::fs::write(cgroup.join("cgroup.procs"), c.id().to_string()).unwrap();
            }
        }
        Sleepers { children, pods }
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(pods) = &self.pods {
            pods.remove();
        }
    }
}

/// Container cgroups named as the kubelet's systemd driver names them (burstable pods,
/// containerd), under a cgroup of the bench's own below the cgroup2 mount.
struct PodCgroups {
    root: PathBuf,
    containers: Vec<PathBuf>,
}

impl PodCgroups {
    fn create(n: usize, tag: u32) -> PodCgroups {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = mountinfo
            .lines()
            .find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let mount = left.split_whitespace().nth(4)?;
                (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(mount))
            })
            .expect("--pods needs a cgroup2 mount");
        let root = mount.join(format!("serve-bench-{tag}"));
        let containers = (0..n)
            .map(|i| {
                let uid = format!("{i:08x}_0000_4000_8000_{tag:012x}");
                let dir = root.join(format!(
                    "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{:064x}.scope",
                    i + 1
                ));
                std::fs::create_dir_all(&dir).expect("--pods needs root");
                dir
            })
            .collect();
        PodCgroups { root, containers }
    }

    /// Removes the cgroups, deepest first, once the kernel sees them empty.
    fn remove(&self) {
        for dir in &self.containers {
            for d in dir.ancestors().take_while(|d| d.starts_with(&self.root)) {
                let deadline = Instant::now() + Duration::from_secs(10);
                while std::fs::remove_dir(d).is_err()
                    && d.exists()
                    && d.read_dir().is_ok_and(|mut e| {
                        // Only empty of child cgroups: another pod's branch shares the parent.
                        !e.any(|x| x.is_ok_and(|x| x.path().is_dir()))
                    })
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
}

fn fleet(idle: usize, busy: usize, pods: usize, seconds: u64, baseline: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let tag = std::process::id() % 100_000;
    let (idle_name, busy_name) = (format!("sbidle{tag}"), format!("sbbusy{tag}"));
    let cgroups = (pods > 0).then(|| PodCgroups::create(pods, tag));
    let _sleepers = Sleepers::start(dir.path(), idle, &idle_name, cgroups);
    let targets = Targets::start(dir.path(), busy, 16, &busy_name);
    let placed = if pods > 0 {
        format!(" (the idle ones in {pods} pods' container cgroups)")
    } else {
        String::new()
    };
    println!(
        "# serve-bench fleet: {idle} idle sleep processes{placed} + {busy} membound targets of 16 MiB, served by --match; {seconds} s measured after a 10 s warm-up"
    );
    let pattern = format!("^({idle_name}|{busy_name})$");
    let phases: Vec<(&str, Phase)> = builds(baseline)
        .into_iter()
        .map(|(label, bin)| {
            let phase = serve_phase(
                &bin,
                dir.path(),
                &pattern,
                idle + busy,
                &targets,
                seconds,
                Duration::from_secs(1),
            );
            (label, phase)
        })
        .collect();
    print_phases(&phases);
    if busy == 0 {
        return;
    }
    let recorded = recorded_working_sets(dir.path(), &targets.pids(), seconds);
    println!(
        "busy targets' working set (median per window; each touches all of its 16 MiB every window):"
    );
    for (i, (horizon, _)) in COMPARED.iter().enumerate() {
        println!("  horizon {horizon}:");
        for (label, p) in &phases {
            let v: Vec<f64> = p.working_sets[i].values().copied().collect();
            println!(
                "    served ({label}): {} over {} of {busy} targets",
                spread(&v),
                v.len()
            );
        }
        let v: Vec<f64> = recorded[i].values().copied().collect();
        println!(
            "    udamon record --pid, each alone (this build): {}",
            spread(&v)
        );
    }
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
                status_field(serve.pid(), "VmRSS"),
                started,
            ));
        }
        let _ = serve.scrape();
        std::thread::sleep(Duration::from_millis(50));
    }
    let hwm = status_field(serve.pid(), "VmHWM");
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

/// A fresh serve taking in `n` busy targets that start at once (found while they write their
/// memory, in libc's code): when each view of them is complete, counted from their start, the
/// monitor's memory (peak when the last view completed, peak and resident 30 s after their
/// start) and its CPU time until then.
fn startup(n: usize, mib: u64, source: &str, baseline: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("sstart{}", std::process::id() % 100_000);
    println!(
        "# serve-bench startup: {n} membound targets of {mib} MiB starting at once under a fresh \
         serve --match --rescan 200ms --access-source {source}"
    );
    println!(
        "{:<12} {:>8} {:>12} {:>11} {:>11} {:>14} {:>13} {:>8}",
        "build",
        "ctl (s)",
        "counted (s)",
        "series (s)",
        "peak (MiB)",
        "peak by 30 s",
        "RSS at 30 s",
        "CPU (s)"
    );
    for (label, bin) in builds(baseline) {
        let serve = Serve::start_with(
            &bin,
            dir.path(),
            &[
                "--match",
                &format!("^{name}$"),
                "--rescan",
                "200ms",
                "--access-source",
                source,
            ],
        );
        let start = Instant::now();
        // Returns once every target has written its memory.
        let targets = Targets::start(dir.path(), n, mib, &name);
        let pids: Vec<String> = targets.pids().iter().map(u32::to_string).collect();
        let since = |t: Option<Instant>| t.map_or(f64::NAN, |t| (t - start).as_secs_f64());
        let (mut listed, mut counted, mut series) = (None, None, None);
        let deadline = start + Duration::from_secs(120);
        while series.is_none() || listed.is_none() || counted.is_none() {
            if Instant::now() > deadline {
                println!("{label}: not every view complete after 120 s");
                break;
            }
            let now = Instant::now();
            if listed.is_none()
                && serve
                    .try_ctl(&["targets"])
                    .is_ok_and(|t| pids.iter().all(|p| t.contains(p.as_str())))
            {
                listed = Some(now);
            }
            let body = serve.scrape().1;
            let served = body
                .lines()
                .find_map(|l| l.strip_prefix("udamon_targets "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            if counted.is_none() && served as usize >= n {
                counted = Some(now);
            }
            let with_series = served_working_sets(&body, "window").len();
            if series.is_none() && with_series >= n {
                series = Some(now);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let peak = status_field(serve.pid(), "VmHWM") as f64 / 1024.0;
        let cpu = cpu_seconds(serve.pid());
        std::thread::sleep(Duration::from_secs(30).saturating_sub(start.elapsed()));
        let later = status_field(serve.pid(), "VmHWM") as f64 / 1024.0;
        let rss = status_field(serve.pid(), "VmRSS") as f64 / 1024.0;
        println!(
            "{label:<12} {:>8.1} {:>12.1} {:>11.1} {peak:>11.1} {later:>14.1} {rss:>13.1} {cpu:>8.2}",
            since(listed),
            since(counted),
            since(series)
        );
        drop(targets);
        drop(serve);
    }
}
