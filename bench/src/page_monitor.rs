//! Monitors a running process at page granularity with the scheduler-tick source, as the seed
//! (000, the perf-event access check RFC) monitors memcached with `--monitoring_nr_regions_range`
//! at the page count, and measures what it costs and how right it is (bench/page_granularity.sh
//! runs it beside memcached and `kv-load`):
//!
//! - the CPU of each sampling interval (this thread's CPU time around one `Context::step`: the
//!   perf rings drained, the samples counted, and at a window's end the aggregation), the
//!   windows' apart from the others, and the process's CPU over the run;
//! - the memory: peak resident size less what it was before the regions were made, per region;
//! - the working set over 10 s against the kernel's accessed bits, by
//!   `/work/shared/tools/referenced PID 10` (or the `REFERENCED` command) run back to back from
//!   the warm-up on: each time it ends, the 10 s working set of the window that ends then.
//!
//! The tick source samples each CPU the target keeps busy at 250 Hz: a few hundred samples a
//! second, each one page, whatever the regions. With one region a page, a region is a page that
//! was sampled, and the working set can count no more pages than were sampled.
//!
//! `page-monitor PID SECONDS [pages|default]`: `default` keeps the tick source's own region
//! bounds (20 to 60), to compare. One markdown table row on stdout, progress on stderr.

mod cpu;

use cpu::thread_cpu_ns;
use std::ops::ControlFlow;
use std::process::{Child, Command, Stdio};
use std::time::Instant;
use udamon_core::{Attrs, Context, NoCallbacks, PAGE_SIZE, REGION_BYTES};
use udamon_linux::perf::{AccessSource, SamplerConfig};
use udamon_linux::vaddr::{self, monotonic_us};

/// Seconds of monitoring before the first comparison with the kernel's accessed bits.
const WARM_UP_S: f64 = 12.0;

const HORIZON_US: u64 = 10_000_000;

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn process_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The kernel's referenced bytes from the tool's last line ("  123.4 MiB  total referenced ...").
fn referenced_bytes(child: Child) -> Option<u64> {
    let out = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("total referenced"))?;
    let mib: f64 = line.split_whitespace().next()?.parse().ok()?;
    Some((mib * 1024.0 * 1024.0) as u64)
}

fn spawn_referenced(pid: u32) -> Child {
    let tool =
        std::env::var("REFERENCED").unwrap_or_else(|_| "/work/shared/tools/referenced".to_string());
    Command::new(tool)
        .args([pid.to_string(), (HORIZON_US / 1_000_000).to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the referenced tool")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(pid), Some(seconds)) = (
        args.get(1).and_then(|a| a.parse::<u32>().ok()),
        args.get(2).and_then(|a| a.parse::<f64>().ok()),
    ) else {
        eprintln!("usage: page-monitor PID SECONDS [pages|default]");
        std::process::exit(2)
    };
    let pages = args.get(3).is_none_or(|a| a == "pages");
    let config = SamplerConfig {
        source: AccessSource::Tick,
        ..SamplerConfig::default()
    };
    let (mut ops, mut clock) = vaddr::attach(&[pid], &config).unwrap_or_else(|e| {
        eprintln!("page-monitor: {e}");
        std::process::exit(1)
    });
    let events = ops.event_log();
    let defaults = vaddr::sampled_attrs(&AccessSource::Tick);
    let rss_before_kib = status_kib("VmRSS:");
    let mut ctx = Context::new(defaults, 29).expect("the tick source's attributes");
    ctx.set_start_time_us(monotonic_us());
    for t in ops.targets() {
        ctx.add_target(t);
    }
    ctx.start(&mut ops).expect("start");
    let monitored = ctx.targets()[0].total_size();
    if pages {
        // One region a page of what is monitored: the next window splits the regions so.
        let n = (monitored / PAGE_SIZE) as u32;
        let attrs = Attrs {
            min_nr_regions: n,
            max_nr_regions: n,
            ..defaults
        };
        ctx.set_attrs(attrs).expect("page granularity");
        eprintln!(
            "page-monitor: {} MiB monitored, {n} regions (up to {} MiB at {REGION_BYTES} bytes \
             each)",
            monitored >> 20,
            attrs.region_memory_bytes() >> 20
        );
    }
    let started = Instant::now();
    let cpu_started = process_cpu_s();
    let samples_started = ops.stats().samples;
    let mut interval_ns = Vec::new();
    let mut window_ns = Vec::new();
    let mut referenced: Option<Child> = None;
    let mut comparisons: Vec<(u64, u64)> = Vec::new();
    let mut regions_seen = 0;
    while started.elapsed().as_secs_f64() < seconds {
        let t0 = thread_cpu_ns();
        let flow = ctx
            .step(&mut ops, &mut clock, &mut NoCallbacks)
            .expect("monitoring");
        let ns = thread_cpu_ns() - t0;
        if let ControlFlow::Break(reason) = flow {
            eprintln!("page-monitor: stopped: {reason:?}");
            break;
        }
        if !ctx.at_window_start() {
            interval_ns.push(ns);
            continue;
        }
        window_ns.push(ns);
        regions_seen = regions_seen.max(ctx.nr_regions());
        // The samples' events are the record's; nothing records here.
        drop(events.take());
        let elapsed = started.elapsed().as_secs_f64();
        if let Some(child) = referenced.as_mut()
            && child.try_wait().ok().flatten().is_some()
        {
            let child = referenced.take().expect("running");
            let ws = ctx.working_sets(0, &[HORIZON_US]);
            if let Some(kernel) = referenced_bytes(child) {
                comparisons.push((ws[0].bytes(), kernel));
                eprintln!(
                    "page-monitor: at {elapsed:.0} s: udamon's 10 s working set {} MiB \
                     (interval {}-{} MiB, {}), the kernel's referenced {} MiB",
                    ws[0].bytes() >> 20,
                    ws[0].low_bytes() >> 20,
                    ws[0].high_bytes() >> 20,
                    if ws[0].total.is_settled() {
                        "settled"
                    } else {
                        "unsettled"
                    },
                    kernel >> 20
                );
            }
        }
        if referenced.is_none() && elapsed >= WARM_UP_S && elapsed + 11.0 < seconds {
            referenced = Some(spawn_referenced(pid));
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let samples_per_s = (ops.stats().samples - samples_started) as f64 / wall;
    let cpu = process_cpu_s() - cpu_started;
    let hwm_kib = status_kib("VmHWM:");
    let mut sorted = interval_ns.clone();
    sorted.sort_unstable();
    let pct = |p: f64| {
        sorted
            .get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    let ratios: Vec<String> = comparisons
        .iter()
        .map(|&(u, k)| format!("{}/{} ({:+.0} %)", u >> 20, k >> 20, pct_diff(u, k)))
        .collect();
    let regions = regions_seen.max(ctx.nr_regions());
    println!(
        "| {} MiB | {} | {:.0} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} % | {} | {:.0} | {} |",
        monitored >> 20,
        regions,
        samples_per_s,
        interval_ns.len(),
        mean(&interval_ns) / 1e3,
        pct(0.99) as f64 / 1e3,
        sorted.last().copied().unwrap_or(0) as f64 / 1e3,
        mean(&window_ns) / 1e6,
        100.0 * cpu / wall,
        hwm_kib >> 10,
        (hwm_kib.saturating_sub(rss_before_kib) * 1024) as f64 / regions.max(1) as f64,
        if ratios.is_empty() {
            "-".to_string()
        } else {
            ratios.join(", ")
        }
    );
}

fn pct_diff(ours: u64, kernel: u64) -> f64 {
    100.0 * (ours as f64 - kernel as f64) / (kernel as f64).max(1.0)
}
