//! The monitoring loop end to end, with a small operations set whose "memory" is accessed in
//! known address ranges: aggregation timing, callbacks, stopping, updates, tuning, determinism.

use std::ops::ControlFlow;
use udamon_core::{
    AddrRange, Attrs, Callbacks, Clock, Context, IntervalsGoal, Operations, OpsError, StopReason,
    Target, VirtualClock,
};

/// Accessed-bit style operations: a sampled page counts as accessed when it lies in `hot`.
struct HotRangesOps {
    span: AddrRange,
    hot: Vec<AddrRange>,
    updates: u32,
    valid_until_us: u64,
}

impl HotRangesOps {
    fn new(span: AddrRange, hot: Vec<AddrRange>) -> Self {
        HotRangesOps {
            span,
            hot,
            updates: 0,
            valid_until_us: u64::MAX,
        }
    }
}

impl Operations for HotRangesOps {
    fn name(&self) -> &str {
        "hot-ranges"
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        for t in ctx.targets_mut() {
            if t.regions.is_empty() {
                *t = Target::with_regions(t.pid, &[self.span]);
            }
        }
        Ok(())
    }

    fn update(&mut self, _ctx: &mut Context) -> Result<(), OpsError> {
        self.updates += 1;
        Ok(())
    }

    fn prepare_access_checks(&mut self, ctx: &mut Context) {
        ctx.randomize_sampling_addrs();
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        for r in ctx
            .targets_mut()
            .iter_mut()
            .flat_map(|t| t.regions.iter_mut())
        {
            if self
                .hot
                .iter()
                .any(|h| h.start <= r.sampling_addr && r.sampling_addr < h.end)
            {
                r.nr_accesses += 1;
            }
        }
    }

    fn target_valid(&self, ctx: &Context, _target: usize) -> bool {
        ctx.now_us() < self.valid_until_us
    }
}

/// Keeps what the aggregation callback saw.
#[derive(Default)]
struct Snapshots {
    windows: Vec<(u64, u64)>,
    regions: Vec<Vec<(u64, u64, u32, u32)>>,
    samples: u64,
    stop_after: Option<usize>,
    terminated: bool,
}

impl Callbacks for Snapshots {
    fn after_sampling(&mut self, _ctx: &Context) -> ControlFlow<()> {
        self.samples += 1;
        ControlFlow::Continue(())
    }

    fn after_aggregation(&mut self, ctx: &Context) -> ControlFlow<()> {
        self.windows.push(ctx.window_us());
        self.regions.push(
            ctx.targets()[0]
                .regions
                .iter()
                .map(|r| (r.start, r.end, r.nr_accesses, r.age))
                .collect(),
        );
        match self.stop_after {
            Some(n) if self.regions.len() >= n => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    }

    fn before_terminate(&mut self, _ctx: &Context) {
        self.terminated = true;
    }
}

const MIB: u64 = 1 << 20;

fn monitor(seed: u64, attrs: Attrs, aggregations: usize) -> (Snapshots, HotRangesOps, StopReason) {
    let mut ctx = Context::new(attrs, seed).unwrap();
    ctx.add_target(Target::new(Some(1)));
    let mut ops = HotRangesOps::new(
        AddrRange::new(0, 100 * MIB),
        vec![
            AddrRange::new(20 * MIB, 30 * MIB),
            AddrRange::new(60 * MIB, 62 * MIB),
        ],
    );
    let mut cb = Snapshots {
        stop_after: Some(aggregations),
        ..Default::default()
    };
    let reason = ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap();
    (cb, ops, reason)
}

#[test]
fn aggregates_every_aggregation_interval_and_stops_on_request() {
    let (cb, _, reason) = monitor(1, Attrs::default(), 30);
    assert_eq!(reason, StopReason::Requested);
    assert!(cb.terminated);
    assert_eq!(cb.regions.len(), 30);
    assert_eq!(
        cb.samples,
        30 * 20,
        "20 sampling intervals of 5 ms per 100 ms window"
    );
    for (i, &(start, end)) in cb.windows.iter().enumerate() {
        assert_eq!((start, end), (i as u64 * 100_000, (i as u64 + 1) * 100_000));
    }
}

#[test]
fn finds_the_hot_ranges() {
    let (cb, _, _) = monitor(2, Attrs::default(), 50);
    let last = cb.regions.last().unwrap();
    let hot_bytes: u64 = last.iter().filter(|r| r.2 > 0).map(|r| r.1 - r.0).sum();
    // 12 MiB are hot; region boundaries land within a few region sizes of the true edges.
    assert!(
        (10 * MIB..=16 * MIB).contains(&hot_bytes),
        "hot bytes {hot_bytes}"
    );
    for &(start, end, nr, _) in last {
        let inside_hot = (20 * MIB..30 * MIB).contains(&start) && end <= 30 * MIB;
        if inside_hot {
            assert_eq!(
                nr, 20,
                "a region inside the hot range is accessed every interval"
            );
        }
    }
    // Ages grow for stable regions.
    assert!(last.iter().any(|r| r.3 >= 10), "{last:?}");
}

#[test]
fn same_seed_reproduces_and_another_seed_differs() {
    let a = monitor(7, Attrs::default(), 20).0.regions;
    let b = monitor(7, Attrs::default(), 20).0.regions;
    let c = monitor(8, Attrs::default(), 20).0.regions;
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn updates_every_update_interval() {
    let attrs = Attrs {
        ops_update_interval_us: 1_000_000,
        ..Attrs::default()
    };
    let (_, ops, _) = monitor(3, attrs, 35); // 3.5 s
    assert_eq!(ops.updates, 3);
}

#[test]
fn stops_when_no_target_is_valid() {
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    ctx.add_target(Target::new(Some(1)));
    let mut ops = HotRangesOps::new(AddrRange::new(0, MIB), vec![]);
    ops.valid_until_us = 1_000_000;
    let mut cb = Snapshots::default();
    let reason = ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap();
    assert_eq!(reason, StopReason::NoValidTarget);
    assert_eq!(ctx.now_us(), 1_000_000);
    assert!(cb.terminated);
}

/// Records the times a clock was asked to wait for.
struct RecordingClock(Vec<u64>);

impl Clock for RecordingClock {
    fn wait_until(&mut self, t_us: u64) {
        self.0.push(t_us);
    }
}

#[test]
fn clock_is_asked_for_each_interval_end_from_the_start_time() {
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    ctx.set_start_time_us(1_000_000);
    ctx.add_target(Target::new(Some(1)));
    let mut ops = HotRangesOps::new(AddrRange::new(0, MIB), vec![]);
    let mut clock = RecordingClock(Vec::new());
    let mut cb = Snapshots {
        stop_after: Some(1),
        ..Default::default()
    };
    ctx.run(&mut ops, &mut clock, &mut cb).unwrap();
    let want: Vec<u64> = (1..=20).map(|i| 1_000_000 + i * 5_000).collect();
    assert_eq!(clock.0, want);
    assert_eq!(cb.windows, [(1_000_000, 1_100_000)]);
}

fn tuned_sample_interval(hot: Vec<AddrRange>) -> u64 {
    let attrs = Attrs {
        intervals_goal: IntervalsGoal::recommended(),
        ..Attrs::default()
    };
    let mut ctx = Context::new(attrs, 5).unwrap();
    ctx.add_target(Target::new(Some(1)));
    let mut ops = HotRangesOps::new(AddrRange::new(0, 100 * MIB), hot);
    let mut cb = Snapshots {
        stop_after: Some(30),
        ..Default::default()
    };
    ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap();
    assert_eq!(
        ctx.attrs().aggr_interval_us / ctx.attrs().sample_interval_us,
        20,
        "tuning keeps the aggregation/sampling ratio"
    );
    ctx.attrs().sample_interval_us
}

#[test]
fn interval_tuning_lengthens_when_too_few_accesses_and_shortens_when_too_many() {
    // Nothing accessed: below the 4 % goal, intervals grow.
    assert!(tuned_sample_interval(vec![]) > 5_000);
    // Everything accessed: far above the goal, intervals shrink to the minimum.
    let all = vec![AddrRange::new(0, 100 * MIB)];
    assert_eq!(tuned_sample_interval(all), 5_000);
    // A hot 20 % starting at the minimum cannot shrink further but must not grow either.
    assert_eq!(
        tuned_sample_interval(vec![AddrRange::new(0, 20 * MIB)]),
        5_000
    );
}
