//! `SimOps` driven by the core's monitoring loop: initial regions, what access checks see
//! (probabilities, sweeps, gaps, phase boundaries inside a sampling interval), the workload's
//! end, and a terabyte-sized workload.

use std::num::NonZeroU32;
use udamon_core::testing::{EachInterval, EachWindow, steps};
use udamon_core::{
    AddrRange, Attrs, Context, NoCallbacks, Operations, StopReason, Target, VirtualClock,
};
use udamon_sim::{SimOps, SimOptions, Workload, layout};

const PAGE: u64 = 4096;

fn workload(text: &str) -> Workload {
    Workload::parse(text, "test").unwrap()
}

fn options(rate: u64) -> SimOptions {
    SimOptions {
        access_rate: rate,
        ..SimOptions::default()
    }
}

/// 5 ms sampling and no aggregation for 100 s, so that `nr_accesses` counts every sampling
/// interval and regions keep their boundaries.
fn counting_attrs() -> Attrs {
    Attrs {
        aggr_interval_us: 100_000_000,
        min_nr_regions: 3,
        ..Attrs::default()
    }
}

/// A context whose one target has single-page regions at `pages` (absolute addresses).
fn context_with_pages(pages: &[u64], seed: u64) -> Context {
    let mut ctx = Context::new(counting_attrs(), seed).unwrap();
    let ranges: Vec<AddrRange> = pages.iter().map(|&p| AddrRange::new(p, p + PAGE)).collect();
    ctx.add_target(Target::with_regions(None, &ranges));
    ctx
}

/// Counts of the target's regions after `steps` sampling intervals.
fn counts_after(ctx: &mut Context, ops: &mut SimOps, n: u64) -> Vec<u32> {
    ctx.start(ops).unwrap();
    steps(ctx, ops, &mut NoCallbacks, n);
    ctx.targets()[0]
        .regions
        .iter()
        .map(|r| r.nr_accesses)
        .collect()
}

#[test]
fn init_builds_vaddrs_three_regions_or_one_per_group() {
    let w = workload("small, 8k\nbig, 10m\nbigger, 20m\n\np\n1000\nbig, 0, 4k, 1\n");
    let (small, big, bigger) = (
        w.regions()[0].range,
        w.regions()[1].range,
        w.regions()[2].range,
    );
    // Process-like: image+heap, mmap area up to the libraries, stack.
    let mut ops = SimOps::new(w.clone(), SimOptions::default());
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    ops.init(&mut ctx).unwrap();
    let regions = &ctx.targets()[0].regions;
    let bounds: Vec<(u64, u64)> = regions.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(
        bounds,
        [
            (layout::IMAGE.start, small.end),
            (bigger.start, layout::LIBS.end),
            (layout::STACK.start, layout::STACK.end)
        ]
    );
    assert_eq!(
        bigger.end, big.start,
        "mmap'd regions are adjacent, top-down"
    );
    assert_eq!(big.end, layout::LIBS.start);

    // Only the workload: the heap group and the mmap group.
    let bare = SimOptions {
        process_mappings: false,
        ..SimOptions::default()
    };
    let mut ops = SimOps::new(w, bare);
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    ops.init(&mut ctx).unwrap();
    let bounds: Vec<(u64, u64)> = ctx.targets()[0]
        .regions
        .iter()
        .map(|r| (r.start, r.end))
        .collect();
    assert_eq!(bounds, [(small.start, small.end), (bigger.start, big.end)]);
    assert_eq!(ops.mappings(), [small, bigger, big]);
}

#[test]
fn init_keeps_regions_given_by_the_user() {
    let w = workload("a, 1m\n\np\n1000\na, 0, 4k, 1\n");
    let mut ops = SimOps::new(w, SimOptions::default());
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    let mine = AddrRange::new(0x1000, 0x9000);
    ctx.add_target(Target::with_regions(None, &[mine]));
    ctx.add_target(Target::new(None));
    ops.init(&mut ctx).unwrap();
    assert_eq!(ctx.targets()[0].regions.len(), 1);
    assert_eq!(
        (
            ctx.targets()[0].regions[0].start,
            ctx.targets()[0].regions[0].end
        ),
        (0x1000, 0x9000)
    );
    assert_eq!(ctx.targets()[1].regions.len(), 3);
}

#[test]
fn random_pages_are_seen_with_the_models_probability() {
    // 1000 pages, 100,000 accesses/s: 500 per 5 ms interval, so each page is touched in an
    // interval with probability 1 - (1 - 1/1000)^500 ≈ 0.394.
    let w = workload("a, 4096000\n\np\n20000\na, 1, 0, 1\n");
    let base = w.regions()[0].range.start;
    let pages: Vec<u64> = (0..10).map(|i| base + i * 97 * PAGE).collect();
    let mut ops = SimOps::new(w, options(100_000));
    let mut ctx = context_with_pages(&pages, 7);
    let intervals = 2000;
    let counts = counts_after(&mut ctx, &mut ops, intervals);
    let p = 1.0 - (1.0 - 1e-3f64).powi(500);
    for (i, &c) in counts.iter().enumerate() {
        let freq = c as f64 / intervals as f64;
        // The standard deviation of `freq` is about 0.011.
        assert!((freq - p).abs() < 0.05, "page {i}: seen {freq}, model {p}");
    }
    let mean =
        counts.iter().map(|&c| c as f64).sum::<f64>() / (counts.len() as u64 * intervals) as f64;
    assert!((mean - p).abs() < 0.02, "mean {mean}, model {p}");
}

#[test]
fn sequential_sweeps_are_seen_exactly_and_gaps_never() {
    // 100 pages swept one page per ms: every page is passed once per 100 ms, so in 10 s each
    // page is touched in exactly 100 sampling intervals. The page after the region (a gap, or
    // another mapping that nobody accesses) is never touched.
    let w = workload("a, 400k\n\np\n20000\na, 0, 4k, 1\n");
    let r = w.regions()[0].range;
    let pages = [
        r.start,
        r.start + 42 * PAGE,
        r.end - PAGE,
        r.end,
        layout::STACK.start,
    ];
    let mut ops = SimOps::new(w, options(1000));
    let mut ctx = context_with_pages(&pages, 3);
    let counts = counts_after(&mut ctx, &mut ops, 2000);
    assert_eq!(counts, [100, 100, 100, 0, 0]);
}

#[test]
fn stride_larger_than_a_page_skips_pages() {
    // Stride of 3 pages over 300 pages: only every third page is ever touched.
    let w = workload("a, 1200k\n\np\n20000\na, 0, 12k, 1\n");
    let base = w.regions()[0].range.start;
    let pages: Vec<u64> = (0..6).map(|i| base + i * PAGE).collect();
    let mut ops = SimOps::new(w, options(1000));
    let mut ctx = context_with_pages(&pages, 3);
    let counts = counts_after(&mut ctx, &mut ops, 2000);
    // 10,000 accesses over a 100-step cycle: 100 passes over each touched page.
    assert_eq!(counts, [100, 0, 0, 100, 0, 0]);
}

/// `nr_accesses` of every region after each sampling interval of a run.
fn per_interval(ctx: &mut Context, ops: &mut SimOps) -> (StopReason, Vec<Vec<u32>>) {
    let mut seen = Vec::new();
    let mut each = EachInterval(|ctx: &Context| {
        seen.push(
            ctx.targets()[0]
                .regions
                .iter()
                .map(|r| r.nr_accesses)
                .collect(),
        )
    });
    let stop = ctx.run(ops, &mut VirtualClock, &mut each).unwrap();
    (stop, seen)
}

#[test]
fn a_sampling_interval_straddling_a_phase_change_sees_both_phases() {
    // Two one-page heap regions, a then b; phase p0 hammers a for 7 ms, p1 hammers b for 7 ms.
    // Intervals of 5 ms: [0,5) sees a, [5,10) sees a and b, [10,15) sees b; the workload has
    // ended at 14 ms, so monitoring stops after the third interval.
    let w = workload("a, 4k\nb, 4k\n\np0\n7\na, 1, 0, 1\n\np1\n7\nb, 1, 0, 1\n");
    let pages = [w.regions()[0].range.start, w.regions()[1].range.start];
    let mut ops = SimOps::new(w.clone(), SimOptions::default());
    let mut ctx = context_with_pages(&pages, 1);
    let (stop, seen) = per_interval(&mut ctx, &mut ops);
    assert_eq!(stop, StopReason::NoValidTarget);
    assert_eq!(seen, [vec![1, 0], vec![2, 1], vec![2, 2]]);
    assert_eq!(ctx.now_us(), 15_000);

    // Run twice, like masim -c 2: the second run starts at 14 ms with p0 again.
    let twice = SimOptions {
        repeat: NonZeroU32::new(2).unwrap(),
        ..SimOptions::default()
    };
    let mut ops = SimOps::new(w, twice);
    let mut ctx = context_with_pages(&pages, 1);
    let (_, seen) = per_interval(&mut ctx, &mut ops);
    assert_eq!(ops.duration_us(), 28_000);
    // [10,15) straddles the second run's start (p1, then p0 again), [20,25) its phase change,
    // and the run ends at 28 ms, inside the sixth interval.
    assert_eq!(
        seen,
        [
            vec![1, 0],
            vec![2, 1],
            vec![3, 2],
            vec![4, 2],
            vec![5, 3],
            vec![5, 4]
        ]
    );
}

#[test]
fn the_time_line_may_start_anywhere() {
    let w = workload("a, 4k\n\np0\n7\na, 1, 0, 1\n");
    let page = w.regions()[0].range.start;
    let mut ops = SimOps::new(w, SimOptions::default());
    let mut ctx = context_with_pages(&[page], 1);
    ctx.set_start_time_us(1_000_000_000);
    let (_, seen) = per_interval(&mut ctx, &mut ops);
    assert_eq!(seen, [vec![1], vec![2]]);
    assert_eq!(ops.ground_truth_wss((1_000_000_000, 1_000_005_000)), 4096.0);
    assert_eq!(ops.ground_truth_wss((1_000_010_000, 1_000_015_000)), 0.0);
}

#[test]
fn terabyte_workload_runs_in_virtual_time() {
    // Two 4 TiB regions, one swept, one randomly accessed, for 100 s of virtual time at the
    // default rate: nothing is kept per simulated page, so this takes no more memory or time
    // than a small workload.
    let w = workload("seq, 4t\nrnd, 4t\n\np\n100000\nseq, 0, 4k, 1\nrnd, 1, 0, 1\n");
    let total = (8u64 << 40) as f64;
    let mut ops = SimOps::new(w, SimOptions::default());
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    let truth = ops.clone();
    let (mut max_regions, mut windows, mut truth_max) = (0, 0, 0.0f64);
    let mut each_window = EachWindow(|ctx: &Context| {
        max_regions = ctx.nr_regions().max(max_regions);
        windows += 1;
        truth_max = truth_max.max(truth.ground_truth_wss(ctx.window_us()));
    });
    let stop = ctx
        .run(&mut ops, &mut VirtualClock, &mut each_window)
        .unwrap();
    assert_eq!(stop, StopReason::NoValidTarget);
    assert_eq!(windows, 1000);
    assert!(max_regions <= 1000);
    // Per 100 ms: 5·10^6 sequential accesses sweep 5·10^6 pages; 5·10^6 random accesses over
    // 2^30 pages touch almost as many distinct ones.
    let want = 5e6 * 4096.0 + 2f64.powi(30) * (1.0 - (-5e6 / 2f64.powi(30)).exp()) * 4096.0;
    assert!(
        (truth_max - want).abs() < 1e-3 * want,
        "{truth_max} vs {want}"
    );
    assert!(truth_max < total);
}
