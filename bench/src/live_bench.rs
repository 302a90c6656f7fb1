//! Live monitoring with the release `udamon` binary, side by side for the sampled access
//! sources available without a PMU (`tick`, `cpuclock`):
//!
//! 1. the target's slowdown and the monitor's CPU share, by alternating monitored (ON) and
//!    unmonitored (OFF) windows on a long-running target pinned to CPU 1 (the monitor runs on
//!    CPU 0), once cache-resident and once memory-bound; each ON window is compared with the
//!    mean of its OFF neighbours, and OFF windows with theirs to show the noise;
//! 2. the monitor's peak memory for a 1 GiB and an 8 GiB resident target;
//! 3. the accuracy of the pattern workloads of the vaddr tests (`patterns.c`), read from the
//!    records that `udamon record -- CMD` wrote;
//! 4. a real program (python3): how many recovered addresses fall inside mapped memory.
//!
//! Every monitor run is a child process measured with `wait4` (CPU time, peak RSS). Workloads
//! are compiled with `cc -O2` into a temporary directory.
//! Run: `cargo build --release -p udamon && cargo run --release -p udamon-bench --bin live-bench`,
//! followed by section names (`overhead`, `memory`, `accuracy`, `python`) to run only those;
//! `--call-stacks` adds to section 1 runs of each source that record call stacks, interleaved
//! with the others.

mod cc;

use cc::build;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};
use udamon_record::RecordReader;
use udamon_record::model::{EventKind, Frame, Snapshot};

const MIB: u64 = 1 << 20;
/// Length of one ON or OFF window. This VM's speed drifts by a few percent within seconds when
/// its host is busy: many short windows, each compared with its neighbours, average that out
/// better than a few long ones.
const WINDOW: Duration = Duration::from_secs(2);
/// ON windows per source.
const ROUNDS: usize = 15;
/// The overhead targets' memory: 1 MiB stays in the caches, so that the target is CPU-bound
/// and its throughput steady enough to show a fraction of a percent; 256 MiB is far beyond
/// the 32 MiB L3, so that it is memory-bound like most monitored services, and noisier.
const OVERHEAD_TARGETS: [(u64, &str); 2] = [(1, "cache-resident"), (256, "memory-bound")];
const SOURCES: [&str; 2] = ["tick", "cpuclock"];
/// Section 1's runs with call stacks (`live-bench --call-stacks`): `SOURCE --call-stacks`.
const WITH_CALL_STACKS: [&str; 2] = ["tick --call-stacks", "cpuclock --call-stacks"];

const PYTHON_SCRIPT: &str = "
import random
d = {i: str(i) for i in range(2_000_000)}
l = list(range(2_000_000))
random.seed(1)
t = 0
for _ in range(3):
    for k in random.sample(l, 1_000_000):
        t += len(d[k])
print(t)
";

/// Makes `cmd`'s process run on `cpu` only.
fn pin(cmd: &mut Command, cpu: usize) -> &mut Command {
    // SAFETY: sched_setaffinity on the calling (new) process with a set we own; it allocates
    // nothing, so it is safe between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

fn nr_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What `wait4` says about a finished monitor run.
struct Usage {
    wall_s: f64,
    cpu_s: f64,
    max_rss_kib: u64,
}

/// Runs `udamon ARGS` (pinned to CPU 0 when there is another CPU for the target) to its end.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its rusage"
)]
fn run_udamon(udamon: &Path, args: &[&str], log: &Path) -> Usage {
    let mut cmd = Command::new(udamon);
    cmd.args(args)
        .stdout(Stdio::null())
        .stderr(File::create(log).expect("create the monitor's log"));
    if nr_cpus() > 1 {
        pin(&mut cmd, 0);
    }
    let start = Instant::now();
    let child = cmd.spawn().expect("run udamon");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with pointers to locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall_s = start.elapsed().as_secs_f64();
    assert!(
        pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "udamon {} failed: {}",
        args.join(" "),
        std::fs::read_to_string(log).unwrap_or_default()
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        wall_s,
        cpu_s: secs(usage.ru_utime) + secs(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss as u64,
    }
}

/// A running `membound` target and its progress counter.
struct Target {
    child: Child,
    counter: File,
}

impl Target {
    /// Starts `membound MIB` on CPU 1 and waits until all its memory is written.
    fn start(membound: &Path, mib: u64, dir: &Path) -> Target {
        let path = dir.join(format!("counter-{mib}"));
        let mut cmd = Command::new(membound);
        cmd.arg(mib.to_string()).arg(&path);
        if nr_cpus() > 1 {
            pin(&mut cmd, 1);
        }
        let child = cmd.spawn().expect("start the membound target");
        let deadline = Instant::now() + Duration::from_secs(120);
        let counter = loop {
            if let Ok(f) = File::open(&path) {
                break f;
            }
            assert!(Instant::now() < deadline, "membound did not start");
            sleep(Duration::from_millis(10));
        };
        let t = Target { child, counter };
        while t.progress() == 0 {
            assert!(
                Instant::now() < deadline,
                "membound {mib} did not finish writing its memory within 2 minutes"
            );
            sleep(Duration::from_millis(20));
        }
        t
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Blocks of 4096 accesses done so far.
    fn progress(&self) -> u64 {
        let mut b = [0u8; 8];
        match self.counter.read_at(&mut b, 0) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }

    /// The target's CPU time so far (the scheduler's run time, in ns).
    fn runtime_ns(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/schedstat", self.pid()))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .expect("the run time in /proc/PID/schedstat")
    }

    /// The target's resident memory in MiB, from /proc.
    fn rss_mib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read the target's status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .expect("VmRSS in /proc/PID/status")
            / 1024
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `SourceStats` counters of a record, its header's source name, and its snapshots.
struct Record {
    source: String,
    start_unix_ns: u64,
    snaps: Vec<Snapshot>,
    counters: BTreeMap<String, u64>,
}

fn read_record(path: &Path) -> Record {
    let reader = RecordReader::open(path).expect("open the record");
    let header = reader.header();
    let mut rec = Record {
        source: header.access_source.name.clone(),
        start_unix_ns: header.start_time_unix_ns,
        snaps: Vec::new(),
        counters: BTreeMap::new(),
    };
    for frame in reader {
        match frame {
            Frame::Snapshot(s) => rec.snaps.push(s),
            Frame::Event(e) => {
                if let EventKind::SourceStats { counters } = e.kind {
                    rec.counters = counters;
                }
            }
        }
    }
    rec
}

impl Record {
    fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
}

/// Mean and sample standard deviation.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var.sqrt())
}

fn pct_list(v: &[f64]) -> String {
    let s: Vec<String> = v.iter().map(|x| format!("{:+.1}", x * 100.0)).collect();
    s.join(", ")
}

/// One window of the overhead run: which source monitored it (None: OFF), the target's
/// throughput per wall second and per second of its own CPU time, and the monitor's usage.
struct Window {
    source: Option<&'static str>,
    wall_rate: f64,
    cpu_rate: f64,
    usage: Option<Usage>,
    samples_per_s: f64,
}

/// For each window `i` of `at`, `1 - rate(i) / mean(rate(i - d), rate(i + d))`: its slowdown
/// against the windows `d` before and after it.
fn slowdowns(w: &[Window], at: &[usize], d: usize, rate: fn(&Window) -> f64) -> Vec<f64> {
    at.iter()
        .map(|&i| 1.0 - rate(&w[i]) / ((rate(&w[i - d]) + rate(&w[i + d])) / 2.0))
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `runs`: the monitor runs to compare, each a source and maybe `--call-stacks`.
fn overhead(
    udamon: &Path,
    membound: &Path,
    dir: &Path,
    (mib, kind): (u64, &str),
    runs: &[&'static str],
) {
    println!("### Target slowdown and monitor CPU: {kind} target\n");
    let target = Target::start(membound, mib, dir);
    sleep(Duration::from_secs(2));
    let pid = target.pid().to_string();
    let secs = format!("{}s", WINDOW.as_secs());
    let out = dir.join("on.data");
    let log = dir.join("on.log");
    let mut windows = Vec::new();
    // (blocks per wall second, blocks per second of the target's CPU time)
    let measure = |f: &mut dyn FnMut()| {
        let (c0, r0, t0) = (target.progress(), target.runtime_ns(), Instant::now());
        f();
        let blocks = (target.progress() - c0) as f64;
        let cpu_s = (target.runtime_ns() - r0) as f64 / 1e9;
        (blocks / t0.elapsed().as_secs_f64(), blocks / cpu_s)
    };
    let off = |windows: &mut Vec<Window>| {
        let (wall_rate, cpu_rate) = measure(&mut || sleep(WINDOW));
        windows.push(Window {
            source: None,
            wall_rate,
            cpu_rate,
            usage: None,
            samples_per_s: 0.0,
        });
    };
    for _ in 0..ROUNDS {
        for &run in runs {
            off(&mut windows);
            let mut usage = None;
            let mut words = run.split(' ');
            let source = words.next().expect("a source");
            let mut args = vec![
                "record",
                "--pid",
                &pid,
                "--access-source",
                source,
                "--duration",
                &secs,
                "-o",
                out.to_str().expect("a UTF-8 temp path"),
            ];
            args.extend(words);
            let (wall_rate, cpu_rate) =
                measure(&mut || usage = Some(run_udamon(udamon, &args, &log)));
            let rec = read_record(&out);
            assert_eq!(rec.source, source, "the record's source");
            let usage = usage.expect("measured");
            windows.push(Window {
                source: Some(run),
                wall_rate,
                cpu_rate,
                samples_per_s: rec.counter("samples") as f64 / usage.wall_s,
                usage: Some(usage),
            });
        }
    }
    off(&mut windows);
    drop(target);

    let by_cpu: fn(&Window) -> f64 = |w| w.cpu_rate;
    let by_wall: fn(&Window) -> f64 = |w| w.wall_rate;
    // OFF vs OFF: each OFF window against its OFF neighbours two windows away.
    let inner_off: Vec<usize> = (2..windows.len().saturating_sub(2))
        .filter(|&i| windows[i].source.is_none())
        .collect();
    let noise = slowdowns(&windows, &inner_off, 2, by_cpu);
    let noise_wall = slowdowns(&windows, &inner_off, 2, by_wall);
    let (noise_mean, noise_sd) = mean_sd(&noise);
    println!(
        "Target: `membound {mib}` (random 8-byte read-modify-writes over {mib} MiB) \
         pinned to CPU 1, monitor on CPU 0; {} s windows, {ROUNDS} ON windows per source, every \
         ON window between two OFF ones; slowdown = 1 - ON / mean(OFF before, OFF after). \
         Throughput is counted per second of the target's own CPU time (schedstat run time, \
         which includes the sampling interrupts' time), so that other processes sharing CPU 1 \
         do not count as overhead; the last column is per wall-clock second.\n",
        WINDOW.as_secs()
    );
    println!(
        "| source | slowdown, mean ± sd | median | per ON window (%) | per wall second, mean | samples/s | monitor CPU, share of one core | monitor peak RSS |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|---:|");
    let mut summary = Vec::new();
    for &source in runs {
        let on: Vec<usize> = (1..windows.len() - 1)
            .filter(|&i| windows[i].source == Some(source))
            .collect();
        let slow = slowdowns(&windows, &on, 1, by_cpu);
        let wall = slowdowns(&windows, &on, 1, by_wall);
        let (m, sd) = mean_sd(&slow);
        let usages: Vec<&Usage> = on
            .iter()
            .map(|&i| windows[i].usage.as_ref().expect("ON"))
            .collect();
        let cpu = usages.iter().map(|u| u.cpu_s).sum::<f64>()
            / usages.iter().map(|u| u.wall_s).sum::<f64>();
        let rss = usages.iter().map(|u| u.max_rss_kib).max().unwrap_or(0);
        let sps = on.iter().map(|&i| windows[i].samples_per_s).sum::<f64>() / on.len() as f64;
        println!(
            "| {source} | {:+.2} % ± {:.2} | {:+.2} % | {} | {:+.2} % | {sps:.0} | {:.2} % | {:.1} MiB |",
            m * 100.0,
            sd * 100.0,
            median(&slow) * 100.0,
            pct_list(&slow),
            mean_sd(&wall).0 * 100.0,
            cpu * 100.0,
            rss as f64 / 1024.0
        );
        summary.push((source, m, sd / (slow.len() as f64).sqrt(), cpu));
    }
    println!("| pmu | not measurable here: this VM has no PMU | | | | | | |");
    println!(
        "| OFF vs OFF (noise) | {:+.2} % ± {:.2} | {:+.2} % | {} | {:+.2} % | | | |",
        noise_mean * 100.0,
        noise_sd * 100.0,
        median(&noise) * 100.0,
        pct_list(&noise),
        mean_sd(&noise_wall).0 * 100.0,
    );
    println!("\nGoals:");
    for (source, m, se, cpu) in summary {
        let goal = if source.starts_with("tick") { 0.5 } else { 2.0 };
        println!(
            "- {source}: slowdown {:+.2} % ± {:.2} (standard error; goal ≤ {goal} %); monitor {:.2} % of one core (goal ≤ 1 %)",
            m * 100.0,
            se * 100.0,
            cpu * 100.0
        );
    }
    println!();
}

fn memory(udamon: &Path, membound: &Path, dir: &Path) {
    println!("## 2. Monitor memory against target size\n");
    println!("| target | target RSS | source | monitor peak RSS |");
    println!("|---:|---:|---|---:|");
    let out = dir.join("mem.data");
    let log = dir.join("mem.log");
    let mut peak: BTreeMap<(&str, u64), u64> = BTreeMap::new();
    for mib in [1024u64, 8192] {
        let target = Target::start(membound, mib, dir);
        let pid = target.pid().to_string();
        let rss = target.rss_mib();
        for source in SOURCES {
            let args = [
                "record",
                "--pid",
                &pid,
                "--access-source",
                source,
                "--duration",
                "5s",
                "-o",
                out.to_str().expect("a UTF-8 temp path"),
            ];
            let u = run_udamon(udamon, &args, &log);
            println!(
                "| {} GiB | {rss} MiB | {source} | {:.1} MiB |",
                mib / 1024,
                u.max_rss_kib as f64 / 1024.0
            );
            peak.insert((source, mib), u.max_rss_kib);
        }
        // Free the target's memory before the next one.
        drop(target);
    }
    println!(
        "\nRatios (8 GiB / 1 GiB target; 1.0 = independent of the target's size; goal ≤ 32 MiB):"
    );
    for source in SOURCES {
        println!(
            "- {source}: {:.2}",
            peak[&(source, 8192)] as f64 / peak[&(source, 1024)] as f64
        );
    }
    println!();
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, in ns: turns the record's wall-clock start into the
/// monotonic time the pattern workloads report.
fn realtime_minus_monotonic_ns() -> i128 {
    let now = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the timespec we own.
        assert_eq!(unsafe { libc::clock_gettime(clock, &mut ts) }, 0);
        ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
    };
    now(libc::CLOCK_REALTIME) - now(libc::CLOCK_MONOTONIC)
}

/// One snapshot's regions of the first target: (start, end, nr_accesses).
type Regions = Vec<(u64, u64, u32)>;

/// A pattern run: its areas and timeline (monotonic ns) and the record's snapshots during it,
/// as (start, end) monotonic ns with the first target's regions.
struct Pattern {
    areas: BTreeMap<String, (u64, u64)>,
    phases_ns: Vec<u64>,
    aggr_ns: u64,
    snaps: Vec<(u64, u64, Regions)>,
}

fn run_pattern(udamon: &Path, patterns: &Path, source: &str, args: &[&str], dir: &Path) -> Pattern {
    let rec_path = dir.join("pattern.data");
    let report = dir.join("pattern.report");
    let mut argv = vec![
        "record",
        "--access-source",
        source,
        "-o",
        rec_path.to_str().expect("a UTF-8 temp path"),
        "--",
        patterns.to_str().expect("a UTF-8 temp path"),
        args[0],
        "-o",
        report.to_str().expect("a UTF-8 temp path"),
    ];
    argv.extend_from_slice(&args[1..]);
    run_udamon(udamon, &argv, &dir.join("pattern.log"));
    let rec = read_record(&rec_path);
    let text = std::fs::read_to_string(&report).expect("the pattern's report");
    let mut areas = BTreeMap::new();
    let (mut start, mut end, mut phases_ns) = (0, 0, Vec::new());
    let hex = |s: &str| u64::from_str_radix(s, 16).expect("a hex address");
    let num = |s: &str| s.parse::<u64>().expect("a time");
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "area" => {
                areas.insert(f[1].to_string(), (hex(f[2]), hex(f[3])));
            }
            "start" => start = num(f[1]),
            "end" => end = num(f[1]),
            "phase" => phases_ns.push(num(f[2])),
            _ => panic!("unexpected line in the pattern's report: {line}"),
        }
    }
    let base = (rec.start_unix_ns as i128 - realtime_minus_monotonic_ns()) as u64;
    let aggr_ns = rec.snaps.first().map_or(0, |s| s.aggr_us * 1000);
    let snaps = rec
        .snaps
        .iter()
        .map(|s| {
            let regions = s.targets[0]
                .regions
                .iter()
                .map(|r| (r.start, r.end, r.nr_accesses))
                .collect();
            (base + s.start_ns, base + s.end_ns, regions)
        })
        .filter(|(s, e, _)| *s >= start && *e <= end)
        .collect();
    Pattern {
        areas,
        phases_ns,
        aggr_ns,
        snaps,
    }
}

impl Pattern {
    fn area(&self, name: &str) -> (u64, u64) {
        self.areas[name]
    }
}

fn overlap((s, e): (u64, u64), (a, b): (u64, u64)) -> u64 {
    e.min(b).saturating_sub(s.max(a))
}

fn accessed_in(regions: &[(u64, u64, u32)], area: (u64, u64)) -> u64 {
    regions
        .iter()
        .filter(|r| r.2 > 0)
        .map(|r| overlap((r.0, r.1), area))
        .sum()
}

fn mean_accesses_in(regions: &[(u64, u64, u32)], area: (u64, u64)) -> f64 {
    let sum: f64 = regions
        .iter()
        .map(|r| overlap((r.0, r.1), area) as f64 * r.2 as f64)
        .sum();
    sum / (area.1 - area.0) as f64
}

fn median_wss_mib(p: &Pattern) -> f64 {
    let mut wss: Vec<u64> = p
        .snaps
        .iter()
        .map(|s| s.2.iter().filter(|r| r.2 > 0).map(|r| r.1 - r.0).sum())
        .collect();
    wss.sort_unstable();
    wss.get(wss.len() / 2).copied().unwrap_or(0) as f64 / MIB as f64
}

fn accuracy(udamon: &Path, patterns: &Path, dir: &Path) {
    println!(
        "## 3. Accuracy on the test workloads (`udamon record --access-source S -- patterns ...`)\n"
    );
    println!(
        "| source | never-touched not accessed: snapshots | never-touched not accessed: byte-snapshots | hot rank (mean nr_accesses hot / warm / cold) | stairs median WSS | stairs steps seen within 2 aggregations | zigzag median WSS |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|");
    for source in SOURCES {
        let st = run_pattern(udamon, patterns, source, &["static", "-t", "20"], dir);
        let (hot, warm, cold) = (st.area("hot"), st.area("warm"), st.area("cold"));
        let n = st.snaps.len();
        let clean = st
            .snaps
            .iter()
            .filter(|s| accessed_in(&s.2, cold) == 0)
            .count();
        let accessed_bytes: u64 = st.snaps.iter().map(|s| accessed_in(&s.2, cold)).sum();
        let byte_share = 1.0 - accessed_bytes as f64 / ((cold.1 - cold.0) as f64 * n as f64);
        let mean = |area| {
            st.snaps
                .iter()
                .map(|s| mean_accesses_in(&s.2, area))
                .sum::<f64>()
                / n as f64
        };
        let (h, w, c) = (mean(hot), mean(warm), mean(cold));
        let rank = 1 + [w, c].iter().filter(|&&x| x >= h).count();

        let stairs = run_pattern(udamon, patterns, source, &["stairs", "-p", "1.5"], dir);
        let steps = stairs.phases_ns.len().saturating_sub(1);
        let seen = (1..stairs.phases_ns.len())
            .filter(|&i| {
                let t = stairs.phases_ns[i];
                let step = stairs.area(&format!("step{i}"));
                stairs.snaps.iter().find(|s| s.0 >= t).is_some_and(|s| {
                    s.1 <= t + 2 * stairs.aggr_ns && accessed_in(&s.2, step) * 2 >= step.1 - step.0
                })
            })
            .count();
        let zigzag = run_pattern(
            udamon,
            patterns,
            source,
            &["zigzag", "-p", "1.5", "-t", "6"],
            dir,
        );
        println!(
            "| {source} | {:.1} % ({clean} of {n}) | {:.3} % | {rank} of 3 ({h:.2} / {w:.2} / {c:.3}) | {:.1} MiB | {seen} of {steps} | {:.1} MiB |",
            clean as f64 / n as f64 * 100.0,
            byte_share * 100.0,
            median_wss_mib(&stairs),
            median_wss_mib(&zigzag),
        );
    }
    println!(
        "\nGoals: never-touched memory not accessed in ≥ 99 % of snapshots; hot ranks 1; \
         stairs 9-11 MiB; zigzag 90-110 MiB; every step seen within two aggregations.\n"
    );
}

fn python(udamon: &Path, dir: &Path) {
    println!("## 4. A real program: python3 building and reading a 2 M-key dict\n");
    // The real interpreter, not a version manager's shell shim in front of it.
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for this part");
    let exe = String::from_utf8(exe.stdout).expect("a UTF-8 path");
    let exe = exe.trim();
    println!(
        "| source | samples | recovered (share of samples) | stack refs | inside mapped memory | inside monitored regions |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for source in SOURCES {
        let rec_path = dir.join("python.data");
        let args = [
            "record",
            "--access-source",
            source,
            "-o",
            rec_path.to_str().expect("a UTF-8 temp path"),
            "--",
            exe,
            "-c",
            PYTHON_SCRIPT,
        ];
        run_udamon(udamon, &args, &dir.join("python.log"));
        let rec = read_record(&rec_path);
        let (samples, recovered) = (rec.counter("samples"), rec.counter("recovered"));
        let share = |n: u64, of: u64| n as f64 / of.max(1) as f64 * 100.0;
        println!(
            "| {source} | {samples} | {recovered} ({:.1} %) | {} | {:.2} % | {:.2} % |",
            share(recovered, samples),
            rec.counter("stack"),
            share(recovered - rec.counter("outside_mapped"), recovered),
            share(recovered - rec.counter("outside_regions"), recovered),
        );
    }
    println!();
}

fn main() {
    let exe = std::env::current_exe().expect("own path");
    let udamon: PathBuf = exe.with_file_name("udamon");
    assert!(
        udamon.exists(),
        "build it first: cargo build --release -p udamon"
    );
    // SAFETY: geteuid cannot fail.
    assert!(
        unsafe { libc::geteuid() } == 0,
        "run as root: the tick source needs root or CAP_PERFMON"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let membound = build(
        &root.join("workloads/membound.c"),
        &["-O2"],
        dir.path(),
        "membound",
    );
    let patterns = build(
        &root.join("../crates/linux/tests/workload/patterns.c"),
        &["-O2"],
        dir.path(),
        "patterns",
    );
    println!(
        "# Live monitoring (release build, {} CPUs, sources at their defaults)\n",
        nr_cpus()
    );
    // Sections named on the command line; none: every section.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let call_stacks = args.iter().any(|a| a == "--call-stacks");
    let sections: Vec<&String> = args.iter().filter(|a| *a != "--call-stacks").collect();
    let wanted = |section: &str| sections.is_empty() || sections.iter().any(|a| *a == section);
    if wanted("overhead") {
        println!("## 1. Target slowdown and monitor CPU, alternating OFF/ON windows\n");
        let mut runs = SOURCES.to_vec();
        if call_stacks {
            runs.extend(WITH_CALL_STACKS);
        }
        for target in OVERHEAD_TARGETS {
            overhead(&udamon, &membound, dir.path(), target, &runs);
        }
    }
    if wanted("memory") {
        memory(&udamon, &membound, dir.path());
    }
    if wanted("accuracy") {
        accuracy(&udamon, &patterns, dir.path());
    }
    if wanted("python") {
        python(&udamon, dir.path());
    }
}
