//! DAMOS through the public API: the kernel's DAMOS kunit vectors (docs/algorithms.md#kunit) and
//! the apply pass's rules (docs/algorithms.md#damos) on small hand-built targets.

use udamon_core::damos::quota::set_effective_quota;
use udamon_core::damos::{
    AccessPattern, Action, Applied, ApplyEnv, ApplyPass, DamosWalk, Filter, FilterKind, Filters,
    GoalMetric, GoalTuner, MigrateDest, NoMetrics, Quota, QuotaGoal, QuotaState, Scheme,
    SchemeApplier, WalkError, Watermarks, WmarkMetric, default_scheme_score,
};
use udamon_core::{AddrRange, Attrs, Region, Target};

const PAGE: u64 = 4096;

// ---------------------------------------------------------------------------------------------
// The kernel's kunit vectors (docs/algorithms.md#kunit).

/// `damos_test_new_filter`: upstream also checks the list node is empty; what carries over is
/// the fields and that an `anon` filter belongs to the operations layer.
#[test]
fn damos_test_new_filter() {
    let f = Filter::new(FilterKind::Anon, true, false);
    assert_eq!(f.kind, FilterKind::Anon);
    assert!(f.matching);
    assert!(!f.allow);
    let filters: Filters = [f.clone()].into_iter().collect();
    assert_eq!(filters.ops(), [f]);
    assert!(filters.core().is_empty());
}

#[test]
fn damos_test_commit_quota_goal() {
    let mut dst = QuotaGoal {
        metric: GoalMetric::SomeMemPsiUs,
        target_value: 1000,
        current_value: 123,
        last_psi_total: 456,
    };
    let memcg = |id: u32| format!("/sys/fs/cgroup/{id}");
    let sources = [
        QuotaGoal {
            current_value: 12,
            ..QuotaGoal::new(GoalMetric::UserInput, 789)
        },
        QuotaGoal {
            current_value: 678,
            ..QuotaGoal::new(GoalMetric::NodeMemFreeBp { nid: 9 }, 345)
        },
        QuotaGoal {
            current_value: 345,
            ..QuotaGoal::new(GoalMetric::NodeMemUsedBp { nid: 6 }, 12)
        },
        QuotaGoal {
            current_value: 567,
            ..QuotaGoal::new(
                GoalMetric::NodeMemcgUsedBp {
                    nid: 6,
                    memcg_path: memcg(7),
                },
                456,
            )
        },
        QuotaGoal {
            current_value: 901,
            ..QuotaGoal::new(
                GoalMetric::NodeMemcgFreeBp {
                    nid: 10,
                    memcg_path: memcg(1),
                },
                890,
            )
        },
        QuotaGoal {
            current_value: 345,
            last_psi_total: 567,
            ..QuotaGoal::new(GoalMetric::SomeMemPsiUs, 234)
        },
    ];
    for src in &sources {
        let before = dst.clone();
        dst.commit(src);
        // The metric carries its node and cgroup, so they are copied with it.
        assert_eq!(dst.metric, src.metric);
        assert_eq!(dst.target_value, src.target_value);
        if src.metric == GoalMetric::UserInput {
            assert_eq!(dst.current_value, src.current_value);
        } else {
            assert_eq!(dst.current_value, before.current_value);
        }
        assert_eq!(
            dst.last_psi_total, before.last_psi_total,
            "own PSI baseline kept"
        );
    }
    assert_eq!(dst.last_psi_total, 456);
}

#[test]
fn damos_test_commit_quota_goals() {
    let user = |target| QuotaGoal::new(GoalMetric::UserInput, target);
    for (dst, src) in [
        (vec![], vec![user(123)]),
        (vec![user(234)], vec![user(345)]),
        (vec![user(456)], vec![]),
    ] {
        let mut dst_quota = Quota {
            goals: dst,
            ..Quota::default()
        };
        let src_quota = Quota {
            goals: src.clone(),
            ..Quota::default()
        };
        dst_quota.commit(&src_quota);
        let got: Vec<_> = dst_quota
            .goals
            .iter()
            .map(|g| (g.metric.clone(), g.target_value))
            .collect();
        let want: Vec<_> = src
            .iter()
            .map(|g| (g.metric.clone(), g.target_value))
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn damos_test_commit_quota() {
    let src = Quota {
        reset_interval_ms: 7,
        ms: 8,
        sz: 9,
        goal_tuner: GoalTuner::Temporal,
        fail_charge_num: 1,
        fail_charge_denom: 1024,
        weight_sz: 10,
        weight_nr_accesses: 11,
        weight_age: 12,
        goals: vec![],
    };
    let mut dst = Quota {
        reset_interval_ms: 1,
        ms: 2,
        sz: 3,
        goal_tuner: GoalTuner::Consist,
        fail_charge_num: 2,
        fail_charge_denom: 3,
        weight_sz: 4,
        weight_nr_accesses: 5,
        weight_age: 6,
        goals: vec![],
    };
    dst.commit(&src);
    assert_eq!(dst, src);
}

#[test]
fn damos_test_commit_dests() {
    let dests = |ids: &[u32], weights: &[u32]| -> Vec<MigrateDest> {
        ids.iter()
            .zip(weights)
            .map(|(&node_id, &weight)| MigrateDest { node_id, weight })
            .collect()
    };
    for (dst, src) in [
        (dests(&[1, 2, 3], &[2, 3, 4]), dests(&[4, 5, 6], &[5, 6, 7])),
        (dests(&[1, 2], &[2, 3]), dests(&[4, 5, 6], &[5, 6, 7])),
        (dests(&[], &[]), dests(&[4, 5, 6], &[5, 6, 7])),
        (dests(&[1, 2, 3], &[2, 3, 4]), dests(&[4, 5], &[5, 6])),
        (dests(&[1, 2, 3], &[2, 3, 4]), dests(&[], &[])),
    ] {
        let mut d = Scheme::new(AccessPattern::default(), Action::MigrateHot);
        d.dests = dst;
        let mut s = d.clone();
        s.dests = src.clone();
        d.commit(&s);
        assert_eq!(d.dests, src);
    }
}

/// `damos_test_commit_filter`: committing one filter over another, through a scheme commit, so
/// that a filter also moves between the core and operations-layer groups when its kind does.
#[test]
fn damos_test_commit_filter() {
    let mut dst = Scheme::new(AccessPattern::default(), Action::Pageout);
    dst.filters = [Filter::new(FilterKind::Active, false, false)]
        .into_iter()
        .collect();
    for src_filter in [
        Filter::new(FilterKind::Anon, true, true),
        Filter::new(
            FilterKind::Memcg {
                path: "/123".into(),
            },
            false,
            false,
        ),
        Filter::new(FilterKind::Young, true, true),
        Filter::new(
            FilterKind::HugepageSize { min: 234, max: 345 },
            false,
            false,
        ),
        Filter::new(FilterKind::Unmapped, true, true),
        Filter::new(FilterKind::Addr(AddrRange::new(456, 567)), false, false),
        Filter::new(FilterKind::Target { idx: 6 }, true, true),
    ] {
        let mut src = Scheme::new(AccessPattern::default(), Action::Pageout);
        src.filters = [src_filter.clone()].into_iter().collect();
        dst.commit(&src);
        let all: Vec<&Filter> = dst.filters.core().iter().chain(dst.filters.ops()).collect();
        assert_eq!(all, [&src_filter]);
        assert_eq!(dst.filters.core().len(), src_filter.kind.is_core() as usize);
    }
}

/// The access pattern upstream's `damos_test_commit_*` cases write as six consecutive numbers
/// from `first`: minimum and maximum size, accesses and age.
fn consecutive_pattern(first: u32) -> AccessPattern {
    AccessPattern {
        min_sz_region: first.into(),
        max_sz_region: (first + 1).into(),
        min_nr_accesses: first + 2,
        max_nr_accesses: first + 3,
        min_age_region: first + 4,
        max_age_region: first + 5,
    }
}

fn commit_dst() -> Scheme {
    let mut s = Scheme::new(consecutive_pattern(1), Action::Pageout);
    s.apply_interval_us = 1_000_000;
    // Upstream's positional initialiser {FREE_MEM_RATE, 900, 100, 50}: interval 900, high 100,
    // mid 50, low 0.
    s.wmarks = Watermarks {
        metric: WmarkMetric::FreeMemRate,
        interval_us: 900,
        high: 100,
        mid: 50,
        low: 0,
    };
    s
}

fn check_commit(mut dst: Scheme, src: &Scheme) {
    // Runtime state that must survive a parameter update.
    dst.stats.nr_tried = 42;
    let mut st = dst.state().clone();
    dst.commit(src);
    assert_eq!(dst.pattern, src.pattern);
    assert_eq!(dst.action, src.action);
    assert_eq!(dst.apply_interval_us, src.apply_interval_us);
    assert_eq!(dst.wmarks, src.wmarks);
    if matches!(src.action, Action::MigrateHot | Action::MigrateCold) {
        assert_eq!(dst.target_nid, src.target_nid);
    }
    assert_eq!(dst.stats.nr_tried, 42);
    st.activated = src.state().activated;
    assert_eq!(dst.state(), &st);
}

#[test]
fn damos_test_commit_pageout() {
    let mut src = Scheme::new(consecutive_pattern(2), Action::Pageout);
    src.apply_interval_us = 2_000_000;
    src.wmarks = Watermarks {
        metric: WmarkMetric::FreeMemRate,
        interval_us: 800,
        high: 50,
        mid: 30,
        low: 0,
    };
    check_commit(commit_dst(), &src);
}

#[test]
fn damos_test_commit_migrate_hot() {
    let mut src = Scheme::new(consecutive_pattern(2), Action::MigrateHot);
    src.apply_interval_us = 2_000_000;
    src.target_nid = Some(5);
    check_commit(commit_dst(), &src);
}

/// `damos_test_filter_out`: an `addr` filter [2, 6) with a minimum region size of 1. A region
/// partly in the range is split at its edge, and the part the filter decides on is the first.
#[test]
fn damos_test_filter_out() {
    let f = Filter::new(FilterKind::Addr(AddrRange::new(2, 6)), true, false);
    let ranges = |regions: &[Region]| regions.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>();
    for (region, matched, after) in [
        // A region in the range.
        //
        // filter: [2,      6)
        // region:   [3, 5)
        ((3, 5), true, vec![(3, 5)]),
        // A region before the range.
        //
        // filter:       [2,   6)
        // region: [1, 2)
        ((1, 2), false, vec![(1, 2)]),
        // A region after the range.
        //
        // filter: [2,   6)
        // region:       [6, 8)
        ((6, 8), false, vec![(6, 8)]),
        // A region that starts before the range: split at its start.
        //
        // filter:       [2,      6)
        // region: [1,      4)
        // expect: [1, 2)[2, 4)
        ((1, 4), false, vec![(1, 2), (2, 4)]),
        // A region that starts in the range: split at its end.
        //
        // filter: [2,      6)
        // region: [2,            8)
        // expect: [2,      6)[6, 8)
        ((2, 8), true, vec![(2, 6), (6, 8)]),
    ] {
        let mut regions = vec![Region::new(region.0, region.1)];
        assert_eq!(
            f.matches_region(&mut regions, 0, 0, 1),
            matched,
            "{region:?}"
        );
        assert_eq!(ranges(&regions), after, "{region:?}");
    }
}

/// `damon_test_feed_loop_next_input`, through the consist goal tuner that uses it: the tuner's
/// input is `esz_bp`, the score is the goal's `current / target` in basis points.
#[test]
fn damon_test_feed_loop_next_input() {
    let esz_bp_after = |score: u64| {
        let mut quota = Quota {
            goals: vec![QuotaGoal {
                current_value: score,
                ..QuotaGoal::new(GoalMetric::UserInput, 10_000)
            }],
            ..Quota::default()
        };
        let mut st = QuotaState {
            esz_bp: 900_000,
            ..QuotaState::default()
        };
        set_effective_quota(&mut quota, &mut st, &mut NoMetrics, 1);
        assert_eq!(st.esz, st.esz_bp / 10_000);
        st.esz_bp
    };
    // A score below the goal (always 10,000 bp) raises the input.
    assert!(esz_bp_after(200) > 900_000);
    // A score above it lowers the input.
    assert!(esz_bp_after(250_000_000) < 900_000);
    // The farther the score from the goal, the larger the change.
    assert!(esz_bp_after(200) > esz_bp_after(2000));
    assert_eq!(esz_bp_after(200), 1_782_000);
    assert_eq!(esz_bp_after(250_000_000), 10_000);
}

/// `damon_test_set_filters_default_reject`: what each layer does with memory that no filter
/// decided on: (filters, core layer rejects it, operations layer rejects it).
#[test]
fn damon_test_set_filters_default_reject() {
    let target = |allow| Filter::new(FilterKind::Target { idx: 0 }, true, allow);
    let anon = Filter::new(FilterKind::Anon, true, true);
    for (filters, core, ops) in [
        // No filter: both layers allow, since nothing filters at all.
        (vec![], false, false),
        // A core allow-filter: the core layer rejects by default, as its last filter allows;
        // the operations layer, without filters, allows.
        (vec![target(true)], true, false),
        // A core reject-filter: the core layer allows by default, as its last filter rejects.
        (vec![target(false)], false, false),
        // A core reject-filter and an operations allow-filter: the core layer allows, since
        // the operations layer filters after it; that layer rejects, as its last filter
        // allows.
        (vec![target(false), anon.clone()], false, true),
        // A core allow-filter and an operations allow-filter: the same.
        (vec![target(true), anon.clone()], false, true),
    ] {
        let f: Filters = filters.into_iter().collect();
        assert_eq!(
            (f.core_default_reject(), f.ops_default_reject()),
            (core, ops),
            "{f:?}"
        );
    }
}

#[test]
fn damon_test_walk_control_obsolete() {
    let mut walk = DamosWalk::default();
    walk.make_obsolete();
    assert_eq!(walk.request(), Err(WalkError::Canceled));
}

// ---------------------------------------------------------------------------------------------
// The apply pass (docs/algorithms.md#damos-apply) on hand-built targets.

/// An operations set that records what it was asked to do.
struct Ops {
    /// (target, start, end, core filters allowed the region)
    log: Vec<(usize, u64, u64, bool)>,
    /// Share of each region the action succeeds on, per-mille.
    success_permil: u64,
    elapsed_ns: u64,
    scores: bool,
    invalid: Vec<usize>,
}

impl Ops {
    fn new() -> Self {
        Ops {
            log: Vec::new(),
            success_permil: 1000,
            elapsed_ns: 0,
            scores: false,
            invalid: Vec::new(),
        }
    }

    fn applied(&self) -> Vec<(u64, u64)> {
        self.log
            .iter()
            .map(|&(_, s, e, _)| (s / PAGE, e / PAGE))
            .collect()
    }
}

impl SchemeApplier for Ops {
    fn apply(&mut self, target: usize, r: &Region, s: &Scheme, _env: &ApplyEnv) -> Applied {
        self.log
            .push((target, r.start, r.end, s.state().core_filters_allowed));
        Applied {
            sz_applied: r.size() * self.success_permil / 1000,
            sz_ops_filter_passed: r.size(),
            elapsed_ns: self.elapsed_ns,
        }
    }

    fn score(&self, _target: usize, r: &Region, s: &Scheme, env: &ApplyEnv) -> Option<u8> {
        self.scores
            .then(|| default_scheme_score(s, env.nr_accesses_mvsum(r), r.age, &env.attrs))
    }

    fn target_valid(&self, target: usize) -> bool {
        !self.invalid.contains(&target)
    }
}

fn attrs() -> Attrs {
    Attrs {
        min_nr_regions: 3,
        ..Attrs::default()
    }
}

/// The environment at the end of aggregation window `k` (20 samples of 5 ms each).
fn boundary(k: u64) -> ApplyEnv {
    let passed = 20 * (k + 1);
    ApplyEnv {
        attrs: attrs(),
        passed_sample_intervals: passed,
        next_aggregation_sis: passed,
        now_us: passed * 5000,
    }
}

/// A target of regions given in pages: (start, end, nr_accesses, age).
fn target(specs: &[(u64, u64, u32, u32)]) -> Target {
    let mut t = Target::new(None);
    for &(s, e, nr, age) in specs {
        t.regions.push(Region {
            nr_accesses: nr,
            last_nr_accesses: nr,
            age,
            ..Region::new(s * PAGE, e * PAGE)
        });
    }
    t
}

fn pages(t: &Target) -> Vec<(u64, u64)> {
    t.regions
        .iter()
        .map(|r| (r.start / PAGE, r.end / PAGE))
        .collect()
}

fn run(targets: &mut [Target], schemes: &mut [Scheme], env: &ApplyEnv, ops: &mut Ops) -> bool {
    ApplyPass {
        env: *env,
        applier: ops,
        metrics: &mut NoMetrics,
        walk: &mut DamosWalk::default(),
    }
    .run(targets, schemes)
}

fn quota_sz(sz: u64, reset_interval_ms: u64) -> Quota {
    Quota {
        sz,
        reset_interval_ms,
        ..Quota::default()
    }
}

#[test]
fn pattern_sees_the_moving_sum_mid_window() {
    // Half-way through a window: 3 accesses so far, 10 in the last window: about 8.
    let mut t = [target(&[(0, 1, 3, 0)])];
    t[0].regions[0].last_nr_accesses = 10;
    let env = ApplyEnv {
        passed_sample_intervals: 30,
        next_aggregation_sis: 40,
        ..boundary(1)
    };
    let pattern = |min| AccessPattern {
        min_nr_accesses: min,
        ..AccessPattern::default()
    };
    let mut schemes = [
        Scheme::new(pattern(8), Action::Stat),
        Scheme::new(pattern(9), Action::Stat),
    ];
    run(&mut t, &mut schemes, &env, &mut Ops::new());
    assert_eq!(schemes[0].stats.nr_tried, 1);
    assert_eq!(schemes[1].stats.nr_tried, 0);
}

#[test]
fn non_stat_actions_reset_age_even_when_they_fail() {
    let mut t = [target(&[(0, 1, 0, 7), (1, 2, 5, 7)])];
    let cold = AccessPattern {
        max_nr_accesses: 0,
        ..AccessPattern::default()
    };
    let mut schemes = [Scheme::new(cold, Action::Stat)];
    run(&mut t, &mut schemes, &boundary(0), &mut Ops::new());
    assert_eq!(t[0].regions[0].age, 7, "stat leaves ages alone");
    let mut schemes = [Scheme::new(cold, Action::Pageout)];
    let mut ops = Ops::new();
    ops.success_permil = 0;
    run(&mut t, &mut schemes, &boundary(0), &mut ops);
    assert_eq!((t[0].regions[0].age, t[0].regions[1].age), (0, 7));
    let s = schemes[0].stats;
    assert_eq!(
        (s.nr_tried, s.sz_tried, s.nr_applied, s.sz_applied),
        (1, PAGE, 0, 0)
    );
}

#[test]
fn schemes_run_when_due_and_then_every_apply_interval() {
    let mut t = [target(&[(0, 4, 0, 0)])];
    let mut every_aggr = Scheme::new(AccessPattern::default(), Action::Stat);
    every_aggr.set_next_apply_sis(0, &attrs());
    let mut every_2nd = every_aggr.clone();
    every_2nd.apply_interval_us = 200_000;
    every_2nd.set_next_apply_sis(0, &attrs());
    let mut schemes = [every_aggr, every_2nd];
    let mut ops = Ops::new();
    for passed in 1..=80 {
        let env = ApplyEnv {
            passed_sample_intervals: passed,
            next_aggregation_sis: passed.div_ceil(20) * 20,
            ..boundary(0)
        };
        let due = run(&mut t, &mut schemes, &env, &mut ops);
        assert_eq!(due, passed % 20 == 0, "passed {passed}");
    }
    assert_eq!(schemes[0].stats.nr_tried, 4);
    assert_eq!(schemes[1].stats.nr_tried, 2);
    assert_eq!(schemes[0].state().next_apply_sis, 100);
}

#[test]
fn quota_trims_and_the_next_window_resumes_after_the_marker() {
    // Four 2-page regions, 3 pages per window (one window per pass).
    let mut t = [target(&[
        (0, 2, 0, 5),
        (2, 4, 0, 5),
        (4, 6, 0, 5),
        (6, 8, 0, 5),
    ])];
    let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
    s.quota = quota_sz(3 * PAGE, 100);
    let mut schemes = [s];
    let mut windows = Vec::new();
    for k in 0..4 {
        let mut ops = Ops::new();
        run(&mut t, &mut schemes, &boundary(k), &mut ops);
        windows.push(ops.applied());
    }
    assert_eq!(
        windows,
        [
            // The second region is trimmed to the one page left: [2, 3) and [3, 4).
            vec![(0, 2), (2, 3)],
            // Resumes at page 3 (the rest of the split region), stops inside the third.
            vec![(3, 4), (4, 6)],
            // Upstream's quirk: reaching the target's last region clears the marker and skips
            // that region, so this window applies nothing.
            vec![],
            vec![(0, 2), (2, 3)],
        ]
    );
    let st = &schemes[0].state().quota;
    assert_eq!(
        (st.charge_target_from, st.charge_addr_from),
        (Some(0), 3 * PAGE)
    );
    assert_eq!(
        schemes[0].stats.qt_exceeds, 2,
        "the first two windows ended full"
    );
    assert_eq!(schemes[0].stats.sz_tried, 9 * PAGE);
}

#[test]
fn a_full_quota_stops_the_rest_of_the_window() {
    let mut t = [target(&[(0, 2, 0, 5), (2, 4, 0, 5), (4, 6, 0, 5)])];
    let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
    s.quota = quota_sz(2 * PAGE, 1000);
    let mut schemes = [s];
    let mut ops = Ops::new();
    for k in 0..3 {
        run(&mut t, &mut schemes, &boundary(k), &mut ops);
    }
    assert_eq!(
        ops.applied(),
        [(0, 2)],
        "one window of 1 s spans the three passes"
    );
    assert_eq!(schemes[0].state().quota.charged_sz, 2 * PAGE);
}

#[test]
fn trimmed_pieces_merge_back_when_nothing_tells_them_apart() {
    // 6 pages over 3 regions: merge-back may make regions of up to 2 pages.
    let mut t = [target(&[(0, 2, 0, 5), (2, 4, 3, 5), (4, 6, 1, 5)])];
    // stat leaves ages alone: the piece split off for the quota equals its neighbour again.
    let mut s = Scheme::new(AccessPattern::default(), Action::Stat);
    s.quota = quota_sz(PAGE, 100);
    let mut schemes = [s];
    let mut ops = Ops::new();
    run(&mut t, &mut schemes, &boundary(0), &mut ops);
    assert_eq!(ops.applied(), [(0, 1)]);
    assert_eq!(pages(&t[0]), [(0, 2), (2, 4), (4, 6)]);
    // pageout resets the applied piece's age, so its split stays. (The next window resumes
    // after the first page, splitting the region there again.)
    schemes[0].action = Action::Pageout;
    run(&mut t, &mut schemes, &boundary(1), &mut ops);
    assert_eq!(ops.applied(), [(0, 1), (1, 2)]);
    assert_eq!(pages(&t[0]), [(0, 1), (1, 2), (2, 4), (4, 6)]);
}

#[test]
fn merge_back_keeps_a_written_region_apart_from_a_read_one() {
    // Equal counts and ages, but one region was read and the other written in the window.
    // (Merge-back may make regions of up to 12 / 3 pages.)
    let mut t = [target(&[
        (0, 1, 2, 5),
        (1, 2, 2, 5),
        (2, 3, 2, 5),
        (3, 12, 0, 5),
    ])];
    let kinds = [(2, 0), (0, 2), (0, 2)];
    for (r, (read, write)) in t[0].regions.iter_mut().zip(kinds) {
        (r.raw_samples, r.read_samples, r.write_samples) = (2, read, write);
    }
    let mut s = Scheme::new(AccessPattern::default(), Action::Stat);
    s.filters.push(Filter::new(FilterKind::Writes, true, true));
    let mut schemes = [s];
    let mut ops = Ops::new();
    run(&mut t, &mut schemes, &boundary(0), &mut ops);
    assert_eq!(ops.applied(), [(1, 2), (2, 3)], "the written regions only");
    assert_eq!(
        pages(&t[0]),
        [(0, 1), (1, 3), (3, 12)],
        "the written ones merged back, the read one kept apart"
    );
    assert_eq!(
        (t[0].regions[1].raw_samples, t[0].regions[1].write_samples),
        (4, 4)
    );
}

#[test]
fn merge_back_respects_the_region_size_limit() {
    // Equal neighbours are merged back only up to total / min_nr_regions (8 pages / 3).
    let mut t = [target(&[(0, 2, 0, 5), (2, 4, 0, 5), (4, 8, 1, 5)])];
    let mut schemes = [Scheme::new(AccessPattern::default(), Action::Stat)];
    run(&mut t, &mut schemes, &boundary(0), &mut Ops::new());
    assert_eq!(
        pages(&t[0]),
        [(0, 2), (2, 4), (4, 8)],
        "[0, 4) would exceed 2.67 pages"
    );
    let mut t = [target(&[(0, 1, 0, 5), (1, 2, 0, 5), (2, 8, 1, 5)])];
    run(&mut t, &mut schemes, &boundary(1), &mut Ops::new());
    assert_eq!(pages(&t[0]), [(0, 2), (2, 8)]);
}

#[test]
fn prioritisation_picks_the_coldest_regions_up_to_the_quota() {
    // Idle regions of different ages (1 s, 1000 s, 10 s, 100 s at 100 ms per aggregation).
    let regions = [
        (0, 2, 0, 10),
        (2, 4, 0, 10_000),
        (4, 6, 0, 100),
        (6, 8, 0, 1000),
    ];
    let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
    s.quota = Quota {
        weight_age: 1,
        ..quota_sz(4 * PAGE, 100)
    };
    let applied_with = |scores: bool, s: &Scheme| {
        let mut t = [target(&regions)];
        let mut ops = Ops::new();
        ops.scores = scores;
        run(&mut t, &mut [s.clone()], &boundary(0), &mut ops);
        ops.applied()
    };
    assert_eq!(
        applied_with(true, &s),
        [(2, 4), (6, 8)],
        "the two oldest, not the first two"
    );
    // Without scores, the quota goes in address order.
    assert_eq!(applied_with(false, &s), [(0, 2), (2, 4)]);
    // Regions the core filters reject do not take a share of the quota (NEW).
    s.filters = [Filter::new(
        FilterKind::Addr(AddrRange::new(2 * PAGE, 4 * PAGE)),
        true,
        false,
    )]
    .into_iter()
    .collect();
    assert_eq!(
        applied_with(true, &s),
        [(4, 6), (6, 8)],
        "the next two oldest"
    );
}

#[test]
fn goal_feedback_grows_the_quota_while_under_achieving() {
    let mut t = [target(&[(0, 64, 0, 5)])];
    let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
    s.quota = Quota {
        reset_interval_ms: 100,
        goals: vec![QuotaGoal::new(GoalMetric::UserInput, 100)],
        ..Quota::default()
    };
    let mut schemes = [s];
    let mut esz = Vec::new();
    for k in 0..5 {
        run(&mut t, &mut schemes, &boundary(k), &mut Ops::new());
        esz.push(schemes[0].state().quota.esz);
    }
    assert_eq!(
        esz,
        [2, 4, 8, 16, 32],
        "goal-only quotas start tiny and at most double"
    );
    assert_eq!(
        schemes[0].stats.nr_tried, 0,
        "less than a page is a full quota"
    );
    // The goal is met: the temporal tuner gives nothing at all, even with a size quota.
    schemes[0].quota.goal_tuner = GoalTuner::Temporal;
    schemes[0].quota.sz = 8 * PAGE;
    schemes[0].quota.goals[0].current_value = 100;
    run(&mut t, &mut schemes, &boundary(5), &mut Ops::new());
    assert_eq!(schemes[0].state().quota.esz, 0);
    assert_eq!(schemes[0].stats.nr_tried, 0);
    // Under-achieving again: the size quota.
    schemes[0].quota.goals[0].current_value = 10;
    let mut ops = Ops::new();
    run(&mut t, &mut schemes, &boundary(6), &mut ops);
    assert_eq!(ops.applied(), [(0, 8)]);
}

#[test]
fn time_quota_follows_the_measured_throughput() {
    let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
    s.quota = Quota {
        ms: 2,
        reset_interval_ms: 100,
        ..Quota::default()
    };
    let mut schemes = [s];
    let mut ops = Ops::new();
    ops.elapsed_ns = 1_000_000; // every region takes 1 ms
    let mut t = [target(&[
        (0, 4, 0, 5),
        (4, 8, 0, 5),
        (8, 12, 0, 5),
        (12, 16, 0, 5),
    ])];
    run(&mut t, &mut schemes, &boundary(0), &mut ops);
    // Before any measurement the estimate is 4 MiB/ms: everything.
    assert_eq!(ops.applied().len(), 4);
    ops.log.clear();
    run(&mut t, &mut schemes, &boundary(1), &mut ops);
    // 64 KiB in 4 ms is 16 KiB/ms; 2 ms is 32 KiB, two regions.
    assert_eq!(schemes[0].state().quota.esz, 8 * PAGE);
    assert_eq!(ops.applied(), [(0, 4), (4, 8)]);
}

#[test]
fn failed_bytes_are_charged_at_the_fail_charge_ratio() {
    // The action works on half of every region; 4 pages of quota.
    let applied_with = |fail_charge_num, fail_charge_denom| {
        let mut t = [target(&[(0, 4, 0, 5), (4, 8, 0, 5), (8, 12, 0, 5)])];
        let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
        s.quota = Quota {
            fail_charge_num,
            fail_charge_denom,
            ..quota_sz(4 * PAGE, 100)
        };
        let mut schemes = [s];
        let mut ops = Ops::new();
        ops.success_permil = 500;
        run(&mut t, &mut schemes, &boundary(0), &mut ops);
        (ops.applied(), schemes[0].state().quota.charged_sz)
    };
    assert_eq!(
        applied_with(0, 0),
        (vec![(0, 4)], 4 * PAGE),
        "no ratio: every byte counts"
    );
    // Failures are free: 2 pages charged for the first region, then the second is trimmed to
    // the 2 pages left (1 charged), then the third to the 1 page left (half a page charged).
    assert_eq!(
        applied_with(0, 1),
        (vec![(0, 4), (4, 6), (6, 7)], 3 * PAGE + PAGE / 2)
    );
}

#[test]
fn core_filter_rejects_are_not_counted() {
    // Reject [4, 8) by address: the region straddling it is split, the rejected part vanishes
    // from the stats; the operations set sees what passed.
    let mut t = [target(&[(0, 6, 0, 5), (6, 12, 0, 5)])];
    let mut s = Scheme::new(AccessPattern::default(), Action::Stat);
    s.filters = [Filter::new(
        FilterKind::Addr(AddrRange::new(4 * PAGE, 8 * PAGE)),
        true,
        false,
    )]
    .into_iter()
    .collect();
    let mut schemes = [s];
    let mut ops = Ops::new();
    run(&mut t, &mut schemes, &boundary(0), &mut ops);
    assert_eq!(ops.applied(), [(0, 4), (8, 12)]);
    let st = schemes[0].stats;
    assert_eq!(
        (st.nr_tried, st.sz_tried, st.sz_ops_filter_passed),
        (2, 8 * PAGE, 8 * PAGE)
    );
    assert!(
        ops.log.iter().all(|l| !l.3),
        "no filter allowed: the default did"
    );
}

#[test]
fn core_filter_allowance_reaches_the_operations_set() {
    // Allow target 1 only; with an operations filter present the core default lets target 0
    // through to the operations layer.
    let mut targets = [target(&[(0, 2, 0, 5)]), target(&[(8, 10, 0, 5)])];
    let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
    s.filters = [
        Filter::new(FilterKind::Target { idx: 1 }, true, true),
        Filter::new(FilterKind::Anon, true, true),
    ]
    .into_iter()
    .collect();
    let mut schemes = [s];
    let mut ops = Ops::new();
    run(&mut targets, &mut schemes, &boundary(0), &mut ops);
    assert_eq!(
        ops.log,
        [(0, 0, 2 * PAGE, false), (1, 8 * PAGE, 10 * PAGE, true)]
    );
    // Without the operations filter, the core default rejects target 0.
    schemes[0].filters = [Filter::new(FilterKind::Target { idx: 1 }, true, true)]
        .into_iter()
        .collect();
    let mut ops = Ops::new();
    run(&mut targets, &mut schemes, &boundary(1), &mut ops);
    assert_eq!(ops.log, [(1, 8 * PAGE, 10 * PAGE, true)]);
}

#[test]
fn inactive_schemes_and_invalid_targets_are_skipped() {
    let mut targets = [target(&[(0, 2, 0, 5)]), target(&[(8, 10, 0, 5)])];
    let mut active = Scheme::new(AccessPattern::default(), Action::Stat);
    let mut inactive = active.clone();
    inactive.wmarks = Watermarks {
        metric: WmarkMetric::FreeMemRate,
        interval_us: 1000,
        high: 500,
        mid: 400,
        low: 200,
    };
    assert_eq!(inactive.wmarks_wait_us(Some(900)), 1000);
    active.wmarks_wait_us(Some(900));
    let mut schemes = [active, inactive];
    let mut ops = Ops::new();
    ops.invalid = vec![0];
    run(&mut targets, &mut schemes, &boundary(0), &mut ops);
    assert_eq!(ops.log, [(1, 8 * PAGE, 10 * PAGE, false)]);
    assert_eq!(schemes[1].stats.nr_tried, 0);
    assert_eq!(
        schemes[1].state().next_apply_sis,
        40,
        "the deadline still moves on"
    );
}

#[test]
fn snapshots_count_whole_passes_and_can_stop_the_scheme() {
    let mut targets = [
        target(&[(0, 2, 0, 5), (2, 4, 1, 5)]),
        target(&[(8, 10, 0, 5)]),
    ];
    let mut s = Scheme::new(AccessPattern::default(), Action::Stat);
    s.max_nr_snapshots = 4;
    let mut schemes = [s];
    for k in 0..3 {
        run(&mut targets, &mut schemes, &boundary(k), &mut Ops::new());
    }
    // Two targets per pass: the limit is reached at the end of the second pass.
    assert_eq!(schemes[0].stats.nr_snapshots, 4);
    assert_eq!(schemes[0].stats.nr_tried, 6);
}

#[test]
fn tried_regions_are_captured_for_one_apply_interval() {
    let mut t = [target(&[(0, 2, 0, 7), (2, 4, 9, 3)])];
    let cold = AccessPattern {
        max_nr_accesses: 0,
        ..AccessPattern::default()
    };
    let mut schemes = [
        Scheme::new(cold, Action::Pageout),
        Scheme::new(AccessPattern::default(), Action::Stat),
    ];
    schemes[1].apply_interval_us = 200_000;
    schemes[1].set_next_apply_sis(0, &attrs());
    let mut walk = DamosWalk::default();
    walk.request().unwrap();
    let mut ops = Ops::new();
    ApplyPass {
        env: boundary(0),
        applier: &mut ops,
        metrics: &mut NoMetrics,
        walk: &mut walk,
    }
    .run(&mut t, &mut schemes);
    assert_eq!(
        walk.take_result(),
        None,
        "the stat scheme's interval is not over yet"
    );
    ApplyPass {
        env: boundary(1),
        applier: &mut ops,
        metrics: &mut NoMetrics,
        walk: &mut walk,
    }
    .run(&mut t, &mut schemes);
    let result = walk.take_result().unwrap().unwrap();
    let seen = |i: usize| {
        result[i]
            .regions
            .iter()
            .map(|r| {
                (
                    r.start / PAGE,
                    r.end / PAGE,
                    r.nr_accesses,
                    r.age,
                    r.sz_filter_passed,
                )
            })
            .collect::<Vec<_>>()
    };
    // The pageout scheme's first pass only, with the age from before its reset.
    assert_eq!(seen(0), [(0, 2, 0, 7, 2 * PAGE)]);
    // The stat scheme ran on the second pass: the pageout already reset the first region's age.
    assert_eq!(seen(1), [(0, 2, 0, 0, 2 * PAGE), (2, 4, 9, 3, 2 * PAGE)]);
    assert_eq!(result[1].total_bytes(), 4 * PAGE);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn covered(t: &Target) -> Vec<(u64, u64)> {
        // Coalesced ranges: merges and splits may change the regions, never what they cover.
        let mut out: Vec<(u64, u64)> = Vec::new();
        for r in &t.regions {
            match out.last_mut() {
                Some(last) if last.1 == r.start => last.1 = r.end,
                _ => out.push((r.start, r.end)),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn passes_keep_coverage_order_and_the_quota(
            specs in prop::collection::vec((1u64..6, 0u64..2, 0u32..3, 0u32..4), 1..12),
            quota_pages in 0u64..10,
            filter in prop::option::of((0u64..40, 0u64..20, any::<bool>(), any::<bool>())),
            pageout in any::<bool>(),
            with_scores in any::<bool>(),
        ) {
            // Regions of 1-5 pages, sometimes after a one-page hole.
            let mut t = Target::new(None);
            let mut at = 0;
            for &(len, hole, nr, age) in &specs {
                at += hole;
                t.regions.push(Region {
                    nr_accesses: nr,
                    last_nr_accesses: nr,
                    age: age * 10,
                    ..Region::new(at * PAGE, (at + len) * PAGE)
                });
                at += len;
            }
            let before = covered(&t);
            let action = if pageout { Action::Pageout } else { Action::Stat };
            let mut s = Scheme::new(AccessPattern::default(), action);
            s.quota = Quota {
                weight_age: 1,
                ..quota_sz(quota_pages * PAGE, 100)
            };
            if let Some((start, len, matching, allow)) = filter {
                let range = AddrRange::new(start * PAGE / 2, (start + len) * PAGE / 2);
                s.filters = [Filter::new(FilterKind::Addr(range), matching, allow)]
                    .into_iter()
                    .collect();
            }
            let mut targets = [t];
            let mut schemes = [s];
            let mut ops = Ops::new();
            ops.scores = with_scores;
            for k in 0..4 {
                run(&mut targets, &mut schemes, &boundary(k), &mut ops);
                let t = &targets[0];
                prop_assert!(t.regions.iter().all(|r| r.start < r.end));
                prop_assert!(t.regions.windows(2).all(|w| w[0].end <= w[1].start));
                prop_assert_eq!(covered(t), before.clone());
                let st = &schemes[0].state().quota;
                if quota_pages > 0 {
                    prop_assert!(st.charged_sz <= st.esz, "{} > {}", st.charged_sz, st.esz);
                }
            }
            // What the operations set was asked to apply is wholly inside or outside the
            // filter's (aligned-down) range, and the filter let it through: a hit decides by
            // `allow`, a miss by the default, which is the opposite of the last filter's `allow`.
            if let Some((start, len, matching, allow)) = filter {
                let fs = start * PAGE / 2 / PAGE * PAGE;
                let fe = (start + len) * PAGE / 2 / PAGE * PAGE;
                for &(_, s, e, _) in &ops.log {
                    let inside = fs <= s && e <= fe;
                    prop_assert!(inside || e <= fs || fe <= s, "[{s}, {e}) straddles");
                    prop_assert_eq!(inside == matching, allow);
                }
            }
            prop_assert_eq!(
                schemes[0].stats.sz_tried,
                ops.log.iter().map(|&(_, s, e, _)| e - s).sum::<u64>()
            );
        }
    }
}
