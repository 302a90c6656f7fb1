//! Monitoring accuracy on the built-in stairs and zigzag workloads: the working set the core
//! monitors in each aggregation window (Σ size of regions with `nr_accesses ≥ 1`, as
//! `damo report wss` computes it) against the model's ground truth for the same window, with
//! upstream's default attributes (5 ms sampling, 100 ms aggregation, 10..1000 regions).

use std::ops::ControlFlow;
use udamon_core::testing::EachWindow;
use udamon_core::{Attrs, Context, StopReason, VirtualClock};
use udamon_sim::{SimOps, SimOptions, Workload};

const MIB: f64 = (1 << 20) as f64;
const AGGR_US: u64 = 100_000;

/// Aggregation windows, from the start and from every phase change, left out of the
/// per-snapshot comparison. When the working set moves, its new edges lie inside regions that
/// adaptive adjustment had merged up to the size limit (total / min_nr_regions, about one stair)
/// while they were cold; such a region counts whole as soon as its sampling address hits the
/// hot part. Splits cut at 10-90 % of a region and pieces within max_nr_accesses / 10 of their
/// neighbour merge back, so isolating an edge takes a few aggregations. Measured over seeds
/// 1..=20 on stairs, the share of snapshots off by more than 10 % is 55 %, 38 %, 22 %, 12 % and
/// 8 % in the first five windows after a change, and 1.6 % from the fourth window on. This is
/// DAMON's behaviour (the core follows upstream's merge and split), not an error of the model.
const SETTLE_WINDOWS: u64 = 3;

/// Share of the remaining snapshots that may be off by more than 10 %: an edge that lands in a
/// cold region as a sliver under a tenth of it is merged back into the cold region, which then
/// counts whole in the windows where a sample hits the sliver. Over seeds 1..=20 the worst seed
/// had 3.4 % such snapshots on stairs, 1 % on zigzag.
const OUTLIER_BUDGET: f64 = 0.05;

struct Snapshot {
    window: (u64, u64),
    monitored: u64,
    truth: f64,
}

/// The window just aggregated: what was monitored accessed, and the model's truth.
fn snapshot(ctx: &Context, truth: &SimOps) -> Snapshot {
    let monitored = ctx
        .targets()
        .iter()
        .flat_map(|t| &t.regions)
        .filter(|r| r.nr_accesses >= 1)
        .map(|r| r.size())
        .sum();
    Snapshot {
        window: ctx.window_us(),
        monitored,
        truth: truth.ground_truth_wss(ctx.window_us()),
    }
}

fn monitor(workload: &Workload, seed: u64) -> Vec<Snapshot> {
    let mut ops = SimOps::new(workload.clone(), SimOptions::default());
    let mut ctx = Context::new(Attrs::default(), seed).unwrap();
    // `init` fixes the start of the workload's time line; a clone taken before the run would
    // not know it, so ground truth uses a clone of the initialised operations set.
    ctx.start(&mut ops).unwrap();
    let truth = ops.clone();
    let mut snapshots = Vec::new();
    let mut collect = EachWindow(|ctx: &Context| snapshots.push(snapshot(ctx, &truth)));
    let stop = loop {
        match ctx.step(&mut ops, &mut VirtualClock, &mut collect).unwrap() {
            ControlFlow::Continue(()) => {}
            ControlFlow::Break(reason) => break reason,
        }
    };
    assert_eq!(stop, StopReason::NoValidTarget);
    snapshots
}

/// Aggregation windows since the latest phase change at or before `t_us`.
fn windows_since_change(workload: &Workload, t_us: u64) -> u64 {
    let mut start = 0;
    for p in workload.phases() {
        if start + p.duration_us() > t_us {
            break;
        }
        start += p.duration_us();
    }
    (t_us - start) / AGGR_US
}

/// `damo report wss --range 50 51 1` after its default `--exclude_samples 20`.
fn damo_median_wss(snapshots: &[Snapshot]) -> u64 {
    let mut wss: Vec<u64> = snapshots.iter().skip(20).map(|s| s.monitored).collect();
    wss.sort_unstable();
    wss[wss.len() / 2]
}

fn assert_accurate(name: &str, snapshots: &[Snapshot], workload: &Workload) {
    let settled: Vec<&Snapshot> = snapshots
        .iter()
        .filter(|s| windows_since_change(workload, s.window.0) >= SETTLE_WINDOWS)
        .collect();
    assert!(
        settled.len() * 10 > snapshots.len() * 8,
        "most snapshots are compared"
    );
    let off: Vec<String> = settled
        .iter()
        .filter(|s| (s.monitored as f64 - s.truth).abs() > 0.1 * s.truth)
        .map(|s| {
            format!(
                "{:?}: monitored {} vs truth {}",
                s.window, s.monitored, s.truth
            )
        })
        .collect();
    assert!(
        (off.len() as f64) <= OUTLIER_BUDGET * settled.len() as f64,
        "{name}: {} of {} snapshots off by more than 10 %:\n{}",
        off.len(),
        settled.len(),
        off.join("\n")
    );
    // No systematic error: the typical snapshot is right to within 1 %.
    let mut errors: Vec<f64> = settled
        .iter()
        .map(|s| s.monitored as f64 / s.truth - 1.0)
        .collect();
    errors.sort_by(f64::total_cmp);
    let median = errors[errors.len() / 2];
    assert!(
        median.abs() < 0.01,
        "{name}: median relative error {median}"
    );
}

#[test]
fn stairs_working_set_matches_ground_truth() {
    let workload = Workload::builtin("stairs").unwrap();
    let snapshots = monitor(&workload, 42);
    assert_eq!(snapshots.len(), 300);
    // The model's truth is what the configuration says: all ten stairs for the first 5 s, one
    // stair after that (each is swept many times per window).
    for s in &snapshots {
        let stairs = if s.window.1 <= 5_000_000 { 10.0 } else { 1.0 };
        assert_eq!(s.truth, stairs * 10.0 * MIB, "{:?}", s.window);
    }
    assert_accurate("stairs", &snapshots, &workload);
    // damon-tests' criterion for masim's stairs_30secs is a median WSS in [9e6, 11e6] bytes:
    // one 10 MB (10^7 B) stair within 10 %. Our stairs are 10 MiB, so the same criterion
    // reads [0.9, 1.1] × 10 MiB.
    let median = damo_median_wss(&snapshots) as f64;
    assert!(
        (9.0 * MIB..=11.0 * MIB).contains(&median),
        "stairs median WSS {median}"
    );
}

#[test]
fn zigzag_working_set_matches_ground_truth() {
    let workload = Workload::builtin("zigzag").unwrap();
    let snapshots = monitor(&workload, 42);
    assert_eq!(snapshots.len(), 350);
    for s in &snapshots {
        let regions = if s.window.1 <= 5_000_000 { 2.0 } else { 1.0 };
        assert_eq!(s.truth, regions * 100.0 * MIB, "{:?}", s.window);
    }
    assert_accurate("zigzag", &snapshots, &workload);
    // damon-tests: zigzag_30secs' median WSS in [9e7, 1.1e8] bytes, one 100 MB region within
    // 10 %; scaled to our 100 MiB regions.
    let median = damo_median_wss(&snapshots) as f64;
    assert!(
        (90.0 * MIB..=110.0 * MIB).contains(&median),
        "zigzag median WSS {median}"
    );
}
