//! What a `prcl` scheme would have saved and cost, evaluated on simulated workloads before
//! running it anywhere: DAMON's proactive reclamation (`pageout` memory that had no access for
//! at least A seconds) at three age thresholds, side by side with no scheme.
//!
//! Each workload runs in the `sim` operations ([`udamon_sim`]) under upstream's default
//! attributes (5 ms sampling, 100 ms aggregation, 10..1000 regions), in virtual time, with one
//! seed (runs are deterministic). The simulated memory pages out what the scheme applies to and
//! refaults what the workload touches again. Per run:
//!
//! - memory saved: paged-out bytes over the baseline's resident bytes (the no-scheme run: every
//!   page the workload touched so far), averaged over the aggregation windows (mean paged out /
//!   mean baseline resident), and at the last window;
//! - refault rate: bytes refaulted per minute of workload time, as a share of the mean working
//!   set. The working set is the ground truth: the bytes the workload touched in each 100 ms
//!   aggregation window ([`SimOps::ground_truth_wss`]), averaged over the run. The far-memory
//!   target (Lagar-Cavilla et al., ASPLOS '19) is at most 0.2 % of the working set per minute;
//!   the table gives each rate as a multiple of it.
//!
//! Workloads: the built-in `stairs`, `zigzag` and `demo` run several times over (masim's
//! `--repeat`), and `demo` with its 1 GiB cold area written at start (an init file, as a program
//! that loads data it never uses again): the demo's cold area is otherwise never touched, so
//! never resident, and there is nothing to save in it.
//!
//! Run: `cargo run --release -p udamon-bench --bin sim-schemes [AGE_S ...]` (age thresholds in
//! whole seconds; 1 5 10 when none are given).

use std::num::NonZeroU32;
use std::ops::ControlFlow;
use std::time::Instant;
use udamon_core::damos::{AccessPattern, Action, Scheme};
use udamon_core::{Attrs, Callbacks, Context, Flow, TargetMemory, VirtualClock};
use udamon_sim::{SimOps, SimOptions, Workload};

const MIB: f64 = (1u64 << 20) as f64;
/// The far-memory papers' ceiling on promotions (refaults), % of the working set per minute.
const TARGET_PCT_PER_MIN: f64 = 0.2;
const SEED: u64 = 42;
/// `prcl` age thresholds when none are given, seconds.
const DEFAULT_AGES_S: [u64; 3] = [1, 5, 10];

/// One aggregation window: when it ended, and the memory the operations reported.
struct Point {
    window_us: (u64, u64),
    memory: TargetMemory,
}

#[derive(Default)]
struct Trace {
    points: Vec<Point>,
}

impl Callbacks for Trace {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if let Some(memory) = ctx.target_memory(0) {
            self.points.push(Point {
                window_us: ctx.window_us(),
                memory,
            });
        }
        Ok(ControlFlow::Continue(()))
    }
}

struct Run {
    trace: Trace,
    ops: SimOps,
    /// Bytes the scheme's pageouts applied to.
    sz_applied: u64,
    wall_ms: f64,
}

fn run(workload: &Workload, repeat: u32, scheme: Option<Scheme>) -> Run {
    let options = SimOptions {
        repeat: NonZeroU32::new(repeat).expect("repeat is positive"),
        ..SimOptions::default()
    };
    let mut ops = SimOps::new(workload.clone(), options);
    let mut ctx = Context::new(Attrs::default(), SEED).expect("default attributes are valid");
    if let Some(s) = scheme {
        ctx.add_scheme(s).expect("prcl is a valid scheme");
    }
    let mut trace = Trace::default();
    let t = Instant::now();
    ctx.run(&mut ops, &mut VirtualClock, &mut trace)
        .expect("the simulation runs");
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    let sz_applied = ctx.schemes().first().map_or(0, |s| s.stats.sz_applied);
    Run {
        trace,
        ops,
        sz_applied,
        wall_ms,
    }
}

/// `prcl` as damo writes it: pageout, 0 % access rate, age at least `age_s` seconds.
fn prcl(age_s: u64) -> Scheme {
    let attrs = Attrs::default();
    let pattern =
        AccessPattern::from_rates((0, u64::MAX), (0, 0), (age_s * 1_000_000, u64::MAX), &attrs);
    Scheme::new(pattern, Action::Pageout)
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

fn evaluate(name: &str, workload: &Workload, repeat: u32, ages_s: &[u64]) {
    let baseline = run(workload, repeat, None);
    let base = &baseline.trace.points;
    let minutes = baseline.ops.duration_us() as f64 / 60e6;
    let wss = mean(
        base.iter()
            .map(|p| baseline.ops.ground_truth_wss(p.window_us)),
    );
    let base_resident = mean(base.iter().map(|p| p.memory.resident_bytes as f64));
    let base_final = base.last().map_or(0.0, |p| p.memory.resident_bytes as f64);

    println!(
        "\n### {name} × {repeat} ({:.0} s): mean working set {:.1} MiB, mean resident without a \
         scheme {:.1} MiB ({:.1} MiB at the end)\n",
        minutes * 60.0,
        wss / MIB,
        base_resident / MIB,
        base_final / MIB
    );
    println!(
        "| scheme | mean resident (MiB) | resident vs none | saved, mean | saved, end | \
         paged out (MiB) | refaulted (MiB) | refaults, % WSS/min | vs 0.2 %/min | sim time (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| none | {:.1} | 1.00 | 0.0 % | 0.0 % | 0.0 | 0.0 | 0.00 | 0× | {:.0} |",
        base_resident / MIB,
        baseline.wall_ms
    );
    for &age_s in ages_s {
        let r = run(workload, repeat, Some(prcl(age_s)));
        let points = &r.trace.points;
        assert_eq!(
            points.len(),
            base.len(),
            "a scheme does not change the aggregation windows"
        );
        let resident = mean(points.iter().map(|p| p.memory.resident_bytes as f64));
        let saved = mean(points.iter().map(|p| p.memory.paged_out_bytes as f64));
        let last = points.last().map_or(TargetMemory::default(), |p| p.memory);
        let refaulted = r.ops.target_memory().refaulted_bytes as f64;
        let rate_pct = refaulted / minutes / wss * 100.0;
        println!(
            "| prcl, age ≥ {age_s} s | {:.1} | {:.2} | {:.1} % | {:.1} % | {:.1} | {:.1} | {:.2} | {:.0}× | {:.0} |",
            resident / MIB,
            resident / base_resident,
            saved / base_resident * 100.0,
            last.paged_out_bytes as f64 / base_final * 100.0,
            r.sz_applied as f64 / MIB,
            refaulted / MIB,
            rate_pct,
            rate_pct / TARGET_PCT_PER_MIN,
            r.wall_ms,
        );
    }
}

/// The demo with its cold area written at start.
fn demo_loaded() -> Workload {
    let demo = udamon_sim::builtin("demo").expect("the demo is built in");
    let loaded = demo.replace("cold, 1073741824\n", "cold, 1073741824, /dev/zero\n");
    assert_ne!(loaded, demo, "the demo's cold area line changed");
    Workload::parse(&loaded, "demo-loaded.cfg").expect("the changed demo parses")
}

fn main() {
    let ages_s: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| match a.parse::<u64>() {
            Ok(age) if age > 0 => age,
            _ => {
                eprintln!(
                    "sim-schemes: age threshold `{a}` is not a positive whole number of seconds; \
                     give thresholds like `1 5 10`"
                );
                std::process::exit(2);
            }
        })
        .collect();
    let ages_s = if ages_s.is_empty() {
        DEFAULT_AGES_S.to_vec()
    } else {
        ages_s
    };
    println!(
        "## prcl on simulated workloads (sim operations, default attributes, seed {SEED})\n\n\
         saved = paged-out bytes / resident bytes without a scheme; refaults per minute as a \
         share of the mean ground-truth working set (bytes touched per 100 ms aggregation \
         window); far-memory target ≤ {TARGET_PCT_PER_MIN} %/min. `paged out` is what the \
         scheme's pageouts applied to (quota-charged bytes)."
    );
    for (name, repeat) in [("stairs", 3), ("zigzag", 2), ("demo", 3)] {
        let workload = Workload::builtin(name).expect("a built-in workload");
        evaluate(name, &workload, repeat, &ages_s);
    }
    evaluate("demo, cold area loaded", &demo_loaded(), 3, &ages_s);
}
