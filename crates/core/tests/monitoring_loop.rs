//! The monitoring loop end to end, with the test kit's operations set whose "memory" is
//! accessed in known address ranges: aggregation timing, callbacks, stopping, updates, tuning,
//! determinism.

use std::ops::ControlFlow;
use udamon_core::testing::{StopAfterWindows, StopAt, TestOps};
use udamon_core::{
    AddrRange, Attrs, CallbackError, Callbacks, Clock, Context, Flow, IntervalsGoal, RunError,
    StopReason, Target, VirtualClock,
};

/// An accessed-bit source over `span` whose pages in `hot` are accessed in every interval.
fn hot_ranges(span: AddrRange, hot: &[AddrRange]) -> TestOps<'static> {
    TestOps::hot_ranges(&[span], hot)
}

/// Keeps what the aggregation callback saw.
#[derive(Default)]
struct Snapshots {
    windows: Vec<(u64, u64)>,
    regions: Vec<Vec<(u64, u64, u32, u32)>>,
    samples: u64,
    terminated: bool,
}

impl Callbacks for Snapshots {
    fn after_sampling(&mut self, _ctx: &Context) -> Flow {
        self.samples += 1;
        Ok(ControlFlow::Continue(()))
    }

    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        self.windows.push(ctx.window_us());
        self.regions.push(
            ctx.targets()[0]
                .regions
                .iter()
                .map(|r| (r.start, r.end, r.nr_accesses, r.age))
                .collect(),
        );
        Ok(ControlFlow::Continue(()))
    }

    fn before_terminate(&mut self, _ctx: &Context) -> Result<(), CallbackError> {
        self.terminated = true;
        Ok(())
    }
}

const MIB: u64 = 1 << 20;

/// What `windows` aggregation windows saw, 10 MiB and 2 MiB hot in 100 MiB.
fn monitor(seed: u64, attrs: Attrs, windows: u64) -> (Snapshots, TestOps<'static>, StopReason) {
    let mut ctx = Context::new(attrs, seed).unwrap();
    ctx.add_target(Target::new(Some(1)));
    let mut ops = hot_ranges(
        AddrRange::new(0, 100 * MIB),
        &[
            AddrRange::new(20 * MIB, 30 * MIB),
            AddrRange::new(60 * MIB, 62 * MIB),
        ],
    );
    let mut cb = (Snapshots::default(), StopAfterWindows(windows));
    let reason = ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap();
    (cb.0, ops, reason)
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
    let mut ops = hot_ranges(AddrRange::new(0, MIB), &[]).valid_until_us(1_000_000);
    let mut cb = Snapshots::default();
    let reason = ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap();
    assert_eq!(reason, StopReason::NoValidTarget);
    assert_eq!(ctx.now_us(), 1_000_000);
    assert!(cb.terminated);
}

/// Fails at its `fail_at`-th sampling interval, as a recorder whose disk filled up does.
struct FailsAt {
    fail_at: u64,
    samples: u64,
    terminated: bool,
}

impl Callbacks for FailsAt {
    fn after_sampling(&mut self, _ctx: &Context) -> Flow {
        self.samples += 1;
        if self.samples == self.fail_at {
            return Err("no space left".into());
        }
        Ok(ControlFlow::Continue(()))
    }

    fn before_terminate(&mut self, _ctx: &Context) -> Result<(), CallbackError> {
        self.terminated = true;
        Err("cannot finish either".into())
    }
}

#[test]
fn a_callbacks_error_ends_the_run_at_once_and_comes_back_first() {
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    ctx.add_target(Target::new(Some(1)));
    let mut ops = hot_ranges(AddrRange::new(0, MIB), &[]);
    let failing = FailsAt {
        fail_at: 7,
        samples: 0,
        terminated: false,
    };
    let mut cb = (failing, Snapshots::default());
    let e = ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap_err();
    let (failing, after) = cb;
    assert!(
        matches!(&e, RunError::Callback(e) if e.to_string() == "no space left"),
        "{e}"
    );
    assert_eq!(ctx.passed_sample_intervals(), 7, "no step after the error");
    assert_eq!(
        after.samples, 6,
        "later callbacks do not see the failed interval"
    );
    assert!(
        failing.terminated && after.terminated,
        "every callback terminates"
    );
}

/// Lengthens the aggregation interval once the run passes `at_us`, and stops it at `stop_us`:
/// what a running monitor's control does between steps.
struct RetuneAt {
    at_us: u64,
    stop_us: u64,
    aggr_us: u64,
    window_ends: Vec<u64>,
}

impl Callbacks for RetuneAt {
    fn control(&mut self, ctx: &mut Context) -> Flow {
        if ctx.now_us() >= self.stop_us {
            return Ok(ControlFlow::Break(()));
        }
        if ctx.now_us() >= self.at_us && ctx.attrs().aggr_interval_us != self.aggr_us {
            let attrs = Attrs {
                aggr_interval_us: self.aggr_us,
                ..*ctx.attrs()
            };
            ctx.set_attrs(attrs)?;
        }
        Ok(ControlFlow::Continue(()))
    }

    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        self.window_ends.push(ctx.now_us());
        Ok(ControlFlow::Continue(()))
    }
}

#[test]
fn control_between_steps_changes_a_running_context_and_can_stop_it() {
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    ctx.add_target(Target::new(Some(1)));
    let mut ops = hot_ranges(AddrRange::new(0, MIB), &[]);
    let mut cb = RetuneAt {
        at_us: 300_000,
        stop_us: 1_000_000,
        aggr_us: 200_000,
        window_ends: Vec::new(),
    };
    let reason = ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap();
    assert_eq!(reason, StopReason::Requested);
    assert_eq!(ctx.now_us(), 1_000_000, "stopped before the next step");
    assert_eq!(
        cb.window_ends,
        [100_000, 200_000, 300_000, 500_000, 700_000, 900_000],
        "windows of 100 ms until the change, of 200 ms after it"
    );
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
    let mut ops = hot_ranges(AddrRange::new(0, MIB), &[]);
    let mut clock = RecordingClock(Vec::new());
    let mut cb = (Snapshots::default(), StopAfterWindows(1));
    ctx.run(&mut ops, &mut clock, &mut cb).unwrap();
    let want: Vec<u64> = (1..=20).map(|i| 1_000_000 + i * 5_000).collect();
    assert_eq!(clock.0, want);
    assert_eq!(cb.0.windows, [(1_000_000, 1_100_000)]);
}

fn tuned_sample_interval(hot: &[AddrRange]) -> u64 {
    let attrs = Attrs {
        intervals_goal: IntervalsGoal::recommended(),
        ..Attrs::default()
    };
    let mut ctx = Context::new(attrs, 5).unwrap();
    ctx.add_target(Target::new(Some(1)));
    let mut ops = hot_ranges(AddrRange::new(0, 100 * MIB), hot);
    ctx.run(&mut ops, &mut VirtualClock, &mut StopAfterWindows(30))
        .unwrap();
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
    assert!(tuned_sample_interval(&[]) > 5_000);
    // Everything accessed: far above the goal, intervals shrink to the minimum.
    assert_eq!(
        tuned_sample_interval(&[AddrRange::new(0, 100 * MIB)]),
        5_000
    );
    // A hot 20 % starting at the minimum cannot shrink further but must not grow either.
    assert_eq!(tuned_sample_interval(&[AddrRange::new(0, 20 * MIB)]), 5_000);
}

mod schemes {
    //! DAMOS wired into the loop: which regions the operations are asked to act on, quotas,
    //! and watermarks pausing monitoring.

    use super::*;
    use udamon_core::VirtualClock;
    use udamon_core::damos::{
        AccessPattern, Action, LruMem, MetricSource, NodeMem, Quota, Scheme, Watermarks,
        WmarkMetric,
    };

    /// 10 MiB hot in 100 MiB, under `scheme`, for `windows` aggregation windows; the operations
    /// apply every action they are asked to and keep what they applied it to.
    fn run_with(scheme: Scheme, windows: u64, free_permil: u64) -> (Context, TestOps<'static>) {
        let mut ctx = Context::new(Attrs::default(), 11).unwrap();
        ctx.add_target(Target::new(Some(1)));
        ctx.add_scheme(scheme).unwrap();
        ctx.set_metric_source(Box::new(FixedFree(free_permil)));
        let hot = [AddrRange::new(20 * MIB, 30 * MIB)];
        let mut ops = hot_ranges(AddrRange::new(0, 100 * MIB), &hot).acting();
        ctx.run(&mut ops, &mut VirtualClock, &mut StopAfterWindows(windows))
            .unwrap();
        (ctx, ops)
    }

    /// A machine whose free memory is a fixed share.
    struct FixedFree(u64);

    impl MetricSource for FixedFree {
        fn some_mem_psi_total_us(&mut self) -> u64 {
            0
        }
        fn node_mem(&mut self, _nid: u32) -> Option<NodeMem> {
            Some(NodeMem {
                total: 1000,
                free: self.0,
            })
        }
        fn memcg_node_used(&mut self, _nid: u32, _path: &str) -> Option<u64> {
            None
        }
        fn lru_mem(&mut self) -> LruMem {
            LruMem::default()
        }
        fn target_rss(&mut self, _target: usize) -> Option<u64> {
            None
        }
    }

    fn cold_pageout(min_age: u32) -> Scheme {
        let pattern = AccessPattern {
            max_nr_accesses: 0,
            min_age_region: min_age,
            ..AccessPattern::default()
        };
        Scheme::new(pattern, Action::Pageout)
    }

    #[test]
    fn a_cold_pageout_scheme_acts_only_on_cold_regions() {
        let (ctx, ops) = run_with(cold_pageout(5), 30, 500);
        assert!(
            !ops.applied.is_empty(),
            "cold memory aged past 5 aggregations was paged out"
        );
        for &(_, r, action) in &ops.applied {
            assert_eq!(action, Action::Pageout);
            let hot = AddrRange::new(20 * MIB, 30 * MIB);
            assert!(
                r.end <= hot.start || r.start >= hot.end,
                "hot memory {:#x}-{:#x} paged out",
                r.start,
                r.end
            );
        }
        let stats = &ctx.schemes()[0].stats;
        assert_eq!(stats.nr_applied as usize, ops.applied.len());
        assert!(
            stats.sz_applied >= 80 * MIB,
            "the 90 MiB of cold memory, give or take edges"
        );
    }

    #[test]
    fn a_size_quota_caps_bytes_per_window() {
        let mut scheme = cold_pageout(0);
        scheme.quota = Quota {
            sz: 4 * MIB,
            reset_interval_ms: 1000,
            ..Quota::default()
        };
        let (ctx, ops) = run_with(scheme, 50, 500); // 5 s: five charge windows
        let applied: u64 = ops.applied.iter().map(|(_, r, _)| r.size()).sum();
        assert!(
            applied <= 6 * 4 * MIB,
            "{applied} bytes in at most six windows of 4 MiB"
        );
        assert!(
            applied >= 4 * 4 * MIB,
            "the quota was used: {applied} bytes"
        );
        assert!(ctx.schemes()[0].stats.qt_exceeds >= 3);
    }

    /// One target and a scheme active only while free memory is below 40 %, on a machine with
    /// 90 % free: the scheme never activates.
    fn waiting_context() -> Context {
        let mut scheme = cold_pageout(0);
        scheme.wmarks = Watermarks {
            metric: WmarkMetric::FreeMemRate,
            interval_us: 1_000_000,
            high: 800,
            mid: 400,
            low: 0,
        };
        let mut ctx = Context::new(Attrs::default(), 1).unwrap();
        ctx.add_target(Target::new(Some(1)));
        ctx.add_scheme(scheme).unwrap();
        ctx.set_metric_source(Box::new(FixedFree(900)));
        ctx
    }

    #[test]
    fn watermarks_pause_monitoring_while_every_scheme_is_inactive() {
        let mut ctx = waiting_context();
        let mut ops = hot_ranges(AddrRange::new(0, MIB), &[])
            .acting()
            .valid_until_us(10_000_000);
        let mut cb = Snapshots::default();
        ctx.run(&mut ops, &mut VirtualClock, &mut cb).unwrap();
        assert!(ops.applied.is_empty());
        assert_eq!(cb.samples, 0, "no sampling while every scheme is inactive");
        assert_eq!(
            ctx.now_us(),
            10_000_000,
            "time moved on in watermark-check intervals"
        );
    }

    /// A run whose schemes never activate still ends when a callback says so (a requested
    /// duration, Ctrl-C), not only when its targets end.
    #[test]
    fn callbacks_can_stop_a_run_waiting_for_the_watermarks() {
        let mut ctx = waiting_context();
        let mut ops = hot_ranges(AddrRange::new(0, MIB), &[]).valid_until_us(10_000_000);
        let reason = ctx
            .run(&mut ops, &mut VirtualClock, &mut StopAt(3_000_000))
            .unwrap();
        assert_eq!(reason, StopReason::Requested);
        assert_eq!(ctx.now_us(), 3_000_000);
        assert_eq!(ctx.passed_sample_intervals(), 0, "it only waited");
    }
}
