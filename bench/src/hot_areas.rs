//! Small hot areas in huge address spaces: DAMON's faithful region adjustment against udamon's
//! guided one (docs/algorithms.md#guided), side by side on the same simulated workloads, the
//! same attributes (upstream's defaults: 5 ms sampling, 100 ms aggregation, 10..1000 regions)
//! and the same seeds, judged by the simulator's ground truth.
//!
//! Workloads: the built-in `needle` (one 64 MiB hot area in 1 TiB), `scattered` (100 hot areas
//! of 1 MiB over 64 GiB), `moving` (a 256 MiB hot area that moves every 10 s across 256 GiB),
//! and `stairs` and `zigzag`, which must not get worse. Per workload and mode, averaged over the
//! seeds (worst case for times):
//!
//! - recall and precision of the hot set, byte-weighted over the windows of the run's second
//!   half (`udamon report accuracy`'s measures: bytes touched that were reported accessed, of
//!   all touched; of all reported);
//! - time to 90 % recall, and to 90 % recall with 90 % precision: the end of the first window
//!   that reached it (`never` when no window did); for `moving`, the most windows it took to be
//!   found after it started or moved;
//! - regions: the mean count in the snapshots (what reports see) and the mean and highest count
//!   during the windows (what is checked every sampling interval);
//! - CPU: the thread's CPU time in the monitoring loop (the core and the simulated accessed-bit
//!   checks) per second of workload, as a share of one core; and the wall time of the run.
//!
//! Run: `cargo run --release -p udamon-bench --bin hot-areas [--seeds N] [WORKLOAD ...]`.

mod cpu;

use cpu::thread_cpu_ns;
use std::ops::ControlFlow;
use std::time::Instant;
use udamon_core::{AddrRange, Adjustment, Attrs, Callbacks, Context, Flow, VirtualClock};
use udamon_record::model::TouchedExtent;
use udamon_report::accuracy::{FOUND, WindowAccuracy};
use udamon_sim::{SimOps, SimOptions, Workload};

const WORKLOADS: [&str; 5] = ["needle", "scattered", "moving", "stairs", "zigzag"];

/// A window (µs on the context's time line) and the ranges reported accessed at its end.
type Reported = ((u64, u64), Vec<AddrRange>);

/// The regions reported accessed at each window's end, kept for judging outside the timed loop.
#[derive(Default)]
struct Windows {
    pending: Vec<Reported>,
    snapshot_regions: usize,
}

impl Callbacks for Windows {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        let regions = &ctx.targets()[0].regions;
        self.snapshot_regions += regions.len();
        let accessed = regions
            .iter()
            .filter(|r| r.nr_accesses > 0)
            .map(|r| AddrRange::new(r.start, r.end))
            .collect();
        self.pending.push((ctx.window_us(), accessed));
        Ok(ControlFlow::Continue(()))
    }
}

/// One run's results.
struct Run {
    windows: Vec<WindowAccuracy>,
    snapshot_regions: f64,
    checked_regions: f64,
    max_regions: usize,
    cpu_share: f64,
    wall_s: f64,
}

fn run(workload: &Workload, adjustment: Adjustment, seed: u64) -> Run {
    let options = SimOptions::default();
    let attrs = Attrs {
        adjustment,
        ..udamon_sim::default_attrs()
    };
    let mut ops = SimOps::new(workload.clone(), options);
    let mut ctx = Context::new(attrs, seed).expect("the defaults are valid");
    let mut windows = Windows::default();
    let wall = Instant::now();
    ctx.start(&mut ops).expect("the simulation starts");
    let (mut cpu, mut steps, mut regions, mut max_regions) = (0u64, 0u64, 0usize, 0usize);
    let mut judged = Vec::new();
    loop {
        let t0 = thread_cpu_ns();
        let flow = ctx
            .step(&mut ops, &mut VirtualClock, &mut windows)
            .expect("the simulation runs");
        cpu += thread_cpu_ns() - t0;
        steps += 1;
        regions += ctx.nr_regions();
        max_regions = max_regions.max(ctx.nr_regions());
        for ((start_us, end_us), accessed) in windows.pending.drain(..) {
            let extents: Vec<TouchedExtent> = workload
                .touched_extents(&options, (start_us, end_us))
                .into_iter()
                .map(|e| TouchedExtent {
                    start: e.range.start,
                    end: e.range.end,
                    touched_bytes: e.bytes.round() as u64,
                })
                .collect();
            judged.push(WindowAccuracy::new(
                0,
                end_us * 1000,
                (end_us - start_us) * 1000,
                &accessed,
                &extents,
            ));
        }
        if flow.is_break() {
            break;
        }
    }
    let seconds = ctx.now_us() as f64 / 1e6;
    Run {
        snapshot_regions: windows.snapshot_regions as f64 / judged.len().max(1) as f64,
        windows: judged,
        checked_regions: regions as f64 / steps as f64,
        max_regions,
        cpu_share: cpu as f64 / 1e9 / seconds,
        wall_s: wall.elapsed().as_secs_f64(),
    }
}

/// Byte-weighted recall and precision over the windows ending after `from_ns`.
fn shares(windows: &[WindowAccuracy], from_ns: u64) -> (f64, f64) {
    let late = windows.iter().filter(|w| w.end_ns > from_ns);
    let (mut found, mut touched, mut reported) = (0u64, 0u64, 0u64);
    for w in late {
        found += w.found_bytes;
        touched += w.touched_bytes;
        reported += w.reported_bytes;
    }
    (
        found as f64 / touched.max(1) as f64,
        found as f64 / reported.max(1) as f64,
    )
}

/// For a workload whose hot memory moves at phase starts: the most windows any move took to
/// be found again (`precise`: with 90 % precision too), or `None` if one never was.
fn worst_refind(windows: &[WindowAccuracy], phase_starts_ns: &[u64], precise: bool) -> Option<u64> {
    let mut worst = 0;
    for (i, &start) in phase_starts_ns.iter().enumerate() {
        let end = phase_starts_ns.get(i + 1).copied().unwrap_or(u64::MAX);
        let after: Vec<&WindowAccuracy> = windows
            .iter()
            .filter(|w| w.end_ns > start && w.end_ns <= end)
            .collect();
        let n = after.iter().position(|w| w.found(precise))? as u64 + 1;
        worst = worst.max(n);
    }
    Some(worst)
}

fn first_found(windows: &[WindowAccuracy], precise: bool) -> Option<u64> {
    windows.iter().find(|w| w.found(precise)).map(|w| w.end_ns)
}

fn time(ns: Option<u64>) -> String {
    ns.map_or_else(
        || "never".to_string(),
        |t| format!("{:.1} s", t as f64 / 1e9),
    )
}

fn main() {
    let mut seeds = 3u64;
    let mut names: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--seeds" {
            seeds = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--seeds takes a number");
        } else {
            names.push(a);
        }
    }
    if names.is_empty() {
        names = WORKLOADS.iter().map(|s| s.to_string()).collect();
    }
    println!("# Small hot areas: faithful against guided region adjustment\n");
    println!(
        "Upstream's default attributes (5 ms sampling, 100 ms aggregation, 10..1000 regions), \
         seeds 1..={seeds}; recall and precision over the second half of each run; times are \
         the worst seed's.\n"
    );
    println!(
        "| workload | adjustment | recall | precision | 90 % recall at | 90 % recall and precision at | regions in snapshots | regions checked (mean / max) | CPU per workload second | wall |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut refinds = Vec::new();
    for name in &names {
        let workload = Workload::builtin(name).unwrap_or_else(|| panic!("no workload {name}"));
        let mut starts = Vec::new();
        let mut t = 0;
        for p in workload.phases() {
            starts.push(t * 1000);
            t += p.duration_us();
        }
        let half_ns = t * 1000 / 2;
        for adjustment in [Adjustment::Faithful, Adjustment::Guided] {
            let runs: Vec<Run> = (1..=seeds).map(|s| run(&workload, adjustment, s)).collect();
            let n = runs.len() as f64;
            let mean = |f: &dyn Fn(&Run) -> f64| runs.iter().map(f).sum::<f64>() / n;
            let worst = |precise: bool| -> Option<u64> {
                runs.iter()
                    .map(|r| first_found(&r.windows, precise))
                    .try_fold(0, |w, t| t.map(|t| w.max(t)))
            };
            println!(
                "| {name} | {} | {:.1} % | {:.1} % | {} | {} | {:.0} | {:.0} / {} | {:.2} % | {:.1} s |",
                adjustment.name(),
                mean(&|r| shares(&r.windows, half_ns).0) * 100.0,
                mean(&|r| shares(&r.windows, half_ns).1) * 100.0,
                time(worst(false)),
                time(worst(true)),
                mean(&|r| r.snapshot_regions),
                mean(&|r| r.checked_regions),
                runs.iter().map(|r| r.max_regions).max().unwrap_or(0),
                mean(&|r| r.cpu_share) * 100.0,
                runs.iter().map(|r| r.wall_s).fold(0.0, f64::max),
            );
            if starts.len() > 2 && name == "moving" {
                let worst_of = |precise| {
                    runs.iter()
                        .map(|r| worst_refind(&r.windows, &starts, precise))
                        .try_fold(0, |w, t| t.map(|t| w.max(t)))
                };
                refinds.push((name.clone(), adjustment, worst_of(false), worst_of(true)));
            }
        }
    }
    if !refinds.is_empty() {
        println!(
            "\nWindows until the moving hot area is found again after each move (the worst move \
             of the worst seed; {} % recall, and with {} % precision too):\n",
            FOUND * 100.0,
            FOUND * 100.0
        );
        println!("| workload | adjustment | 90 % recall | 90 % recall and precision |");
        println!("|---|---|---:|---:|");
        let w = |n: Option<u64>| n.map_or_else(|| "never".to_string(), |n| n.to_string());
        for (name, adjustment, recall, both) in refinds {
            println!(
                "| {name} | {} | {} | {} |",
                adjustment.name(),
                w(recall),
                w(both)
            );
        }
    }
}
