//! DAMOS actions on the simulated memory: what `pageout`, `willneed`, `collapse` and `stat`
//! change and report as applied, how filters see simulated memory, refaults when the workload
//! touches paged-out memory again, and a `prcl`-style scheme run by the core on zigzag.

use udamon_core::damos::HUGE_PAGE;
use udamon_core::damos::{
    AccessPattern, Action, Applied, ApplyEnv, Filter, FilterKind, Filters, Scheme,
};
use udamon_core::{
    AddrRange, Attrs, Context, NoCallbacks, Operations, Region, TargetMemory, VirtualClock,
};
use udamon_sim::{SimOps, SimOptions, Workload, layout};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

fn workload(text: &str) -> Workload {
    Workload::parse(text, "test").unwrap()
}

fn started(w: &Workload, options: SimOptions) -> (Context, SimOps) {
    let mut ops = SimOps::new(w.clone(), options);
    let mut ctx = Context::new(Attrs::default(), 7).unwrap();
    ctx.start(&mut ops).unwrap();
    (ctx, ops)
}

fn run_until(ctx: &mut Context, ops: &mut SimOps, t_us: u64) {
    while ctx.now_us() < t_us {
        let flow = ctx.step(ops, &mut VirtualClock, &mut NoCallbacks).unwrap();
        assert!(flow.is_continue(), "the workload ended before {t_us} us");
    }
}

/// Ask the operations to apply `scheme` to `range` now, as an apply pass would.
fn act(ctx: &Context, ops: &mut SimOps, range: AddrRange, scheme: &Scheme) -> Applied {
    let env = ApplyEnv {
        attrs: *ctx.attrs(),
        passed_sample_intervals: ctx.passed_sample_intervals(),
        next_aggregation_sis: ctx.passed_sample_intervals(),
        now_us: ctx.now_us(),
    };
    ops.apply_scheme(0, &Region::new(range.start, range.end), scheme, &env)
}

fn scheme(action: Action, filters: &[Filter]) -> Scheme {
    let mut s = Scheme::new(AccessPattern::default(), action);
    s.filters = filters.iter().cloned().collect::<Filters>();
    s
}

fn memory(resident: u64, paged_out: u64, refaulted: u64) -> TargetMemory {
    TargetMemory {
        resident_bytes: resident,
        paged_out_bytes: paged_out,
        refaulted_bytes: refaulted,
    }
}

/// `hot` (4 MiB) is swept all the time, `cold` (8 MiB) only in the first 500 ms. At the
/// default 10^8 accesses/s a 5 ms interval makes 500,000 page-stride accesses, far more than
/// the regions' pages, so every sweep covers its region: the numbers below are exact.
const HOT_COLD: &str = "hot, 4m\ncold, 8m\n\nwarm up\n500\nhot, 0, 4k, 1\ncold, 0, 4k, 1\n\n\
                        hot only\n100000\nhot, 0, 4k, 1\n";

#[test]
fn pageout_moves_exactly_the_resident_bytes_and_charges_nothing_twice() {
    let w = workload(HOT_COLD);
    let (hot, cold) = (w.regions()[0].range, w.regions()[1].range);
    let (mut ctx, mut ops) = started(&w, SimOptions::default());
    assert_eq!(
        ctx.target_memory(0),
        Some(memory(0, 0, 0)),
        "nothing touched yet"
    );
    run_until(&mut ctx, &mut ops, 1_000_000);
    assert_eq!(ops.target_memory(), memory(12 * MIB, 0, 0));
    assert_eq!(ctx.target_memory(0), Some(ops.target_memory()));

    let pageout = scheme(Action::Pageout, &[]);
    let first = act(&ctx, &mut ops, cold, &pageout);
    assert_eq!(
        (first.sz_applied, first.sz_ops_filter_passed),
        (8 * MIB, 8 * MIB)
    );
    assert_eq!(ops.target_memory(), memory(4 * MIB, 8 * MIB, 0));
    let again = act(&ctx, &mut ops, cold, &pageout);
    assert_eq!(again.sz_applied, 0, "already paged out");
    assert_eq!(ops.target_memory(), memory(4 * MIB, 8 * MIB, 0));

    // The rest of the run never touches `cold` again: it stays out.
    run_until(&mut ctx, &mut ops, 2_000_000);
    assert_eq!(ctx.target_memory(0), Some(memory(4 * MIB, 8 * MIB, 0)));
    let r = ops.residency(cold);
    assert_eq!(
        (r.resident_bytes, r.paged_out_bytes),
        (0.0, (8 * MIB) as f64)
    );

    // `hot` and the first 1 MiB of the libraries above it: only the workload's bytes change.
    assert_eq!(hot.end, layout::LIBS.start);
    let hot_and_libs = AddrRange::new(hot.start, hot.end + MIB);
    let a = act(&ctx, &mut ops, hot_and_libs, &pageout);
    assert_eq!((a.sz_applied, a.sz_ops_filter_passed), (4 * MIB, 5 * MIB));
    assert_eq!(ops.target_memory(), memory(0, 12 * MIB, 0));
    // The next sampling interval sweeps `hot` whole: all of it refaults.
    let next = ctx.now_us() + 1;
    run_until(&mut ctx, &mut ops, next);
    assert_eq!(
        ctx.target_memory(0),
        Some(memory(4 * MIB, 8 * MIB, 4 * MIB))
    );
}

#[test]
fn stat_changes_nothing_and_filters_measure_what_passes() {
    let w = workload(HOT_COLD);
    let (hot, cold) = (w.regions()[0].range, w.regions()[1].range);
    let (mut ctx, mut ops) = started(&w, SimOptions::default());
    run_until(&mut ctx, &mut ops, 1_000_000);
    let half_cold = AddrRange::new(cold.start, cold.start + 4 * MIB);
    act(&ctx, &mut ops, half_cold, &scheme(Action::Pageout, &[]));
    let before = ops.target_memory();
    assert_eq!(before, memory(8 * MIB, 4 * MIB, 0));

    // From 1 MiB below `cold` (a gap) to the end of `hot`.
    let all = AddrRange::new(cold.start - MIB, hot.end);
    let stat = act(&ctx, &mut ops, all, &scheme(Action::Stat, &[]));
    assert_eq!((stat.sz_applied, stat.sz_ops_filter_passed), (0, 13 * MIB));
    assert_eq!(ops.target_memory(), before);

    let not_unmapped = Filter::new(FilterKind::Unmapped, true, false);
    let stat = act(&ctx, &mut ops, all, &scheme(Action::Stat, &[not_unmapped]));
    assert_eq!(
        stat.sz_ops_filter_passed,
        8 * MIB,
        "only resident memory passes"
    );

    let only_anon = Filter::new(FilterKind::Anon, true, true);
    let stat = act(&ctx, &mut ops, all, &scheme(Action::Stat, &[only_anon]));
    assert_eq!(
        stat.sz_ops_filter_passed,
        12 * MIB,
        "the gap is not anonymous memory"
    );

    let no_anon = Filter::new(FilterKind::Anon, true, false);
    let a = act(&ctx, &mut ops, all, &scheme(Action::Pageout, &[no_anon]));
    assert_eq!((a.sz_applied, a.sz_ops_filter_passed), (0, MIB));
    assert_eq!(ops.target_memory(), before);

    // The model has no LRU lists: "not active" excludes nothing, "only active" includes nothing.
    let no_active = Filter::new(FilterKind::Active, true, false);
    let stat = act(&ctx, &mut ops, all, &scheme(Action::Stat, &[no_active]));
    assert_eq!(stat.sz_ops_filter_passed, 13 * MIB);
    let only_active = Filter::new(FilterKind::Active, true, true);
    let stat = act(&ctx, &mut ops, all, &scheme(Action::Stat, &[only_active]));
    assert_eq!(stat.sz_ops_filter_passed, 0);

    // Actions the model has nothing for report nothing.
    for action in [
        Action::Cold,
        Action::LruDeprio,
        Action::MigrateCold,
        Action::Nohugepage,
    ] {
        let a = act(&ctx, &mut ops, all, &scheme(action, &[]));
        assert_eq!(a.sz_applied, 0, "{action}");
        assert_eq!(ops.target_memory(), before, "{action}");
    }
}

#[test]
fn random_accesses_refault_the_expected_share_and_willneed_brings_back_the_rest() {
    // 1024 pages, resident from the start (init file), 1000 random accesses per 5 ms.
    let w = workload("r, 4m, /dev/zero\n\np\n100000\nr, 1, 64, 1\n");
    let r = w.regions()[0].range;
    let options = SimOptions {
        access_rate: 200_000,
        ..SimOptions::default()
    };
    let (mut ctx, mut ops) = started(&w, options);
    assert_eq!(ctx.target_memory(0), Some(memory(4 * MIB, 0, 0)));
    let a = act(&ctx, &mut ops, r, &scheme(Action::Pageout, &[]));
    assert_eq!(a.sz_applied, 4 * MIB);

    // A page escapes n uniform accesses to 1024 pages with probability (1 - 1/1024)^n.
    let expected_refault = |n: i32| (4 * MIB) as f64 * (1.0 - (1.0 - 1.0 / 1024.0f64).powi(n));
    for (steps, n) in [(1, 1000), (10, 10_000)] {
        run_until(&mut ctx, &mut ops, steps * 5_000);
        let m = ctx.target_memory(0).unwrap();
        let want = expected_refault(n);
        assert!(
            (m.refaulted_bytes as f64 - want).abs() <= 1.0,
            "after {n} accesses: {} refaulted, expected {want}",
            m.refaulted_bytes
        );
        assert!((m.resident_bytes as f64 - want).abs() <= 1.0);
        assert!(m.resident_bytes + m.paged_out_bytes - 4 * MIB <= 1);
    }

    let before = ops.target_memory();
    let a = act(&ctx, &mut ops, r, &scheme(Action::Willneed, &[]));
    assert!(a.sz_applied.abs_diff(before.paged_out_bytes) <= 1);
    assert_eq!(
        ops.target_memory(),
        memory(4 * MIB, 0, before.refaulted_bytes),
        "read back, not refaulted"
    );
}

#[test]
fn a_slow_sweep_refaults_exactly_the_pages_it_reaches() {
    // 1024 resident pages (init file), swept at one page per ms: five pages per 5 ms interval,
    // pages 1, 2, 3, ... (masim's offset advances before each access).
    let w = workload("s, 4m, /dev/zero\n\np\n100000\ns, 0, 4k, 1\n");
    let s = w.regions()[0].range;
    let options = SimOptions {
        access_rate: 1000,
        ..SimOptions::default()
    };
    let (mut ctx, mut ops) = started(&w, options);
    act(&ctx, &mut ops, s, &scheme(Action::Pageout, &[]));
    run_until(&mut ctx, &mut ops, 50_000);
    assert_eq!(
        ops.target_memory(),
        memory(50 * PAGE, 974 * PAGE, 50 * PAGE)
    );
    // Pages 0..25: page 0 is still out, pages 1..=24 came back.
    let first = AddrRange::new(s.start, s.start + 25 * PAGE);
    let a = act(&ctx, &mut ops, first, &scheme(Action::Pageout, &[]));
    assert_eq!(a.sz_applied, 24 * PAGE);
    let r = ops.residency(AddrRange::new(s.start, s.start + 60 * PAGE));
    assert_eq!(r.resident_bytes, (26 * PAGE) as f64, "pages 25..=50");
}

#[test]
fn collapse_backs_whole_blocks_and_pageout_splits_them() {
    // `a` is swept all the time, `idle` never; both are 2 MiB-aligned (placed top-down below
    // a 2 MiB-aligned address, with sizes in whole MiB).
    let w = workload("a, 4m\nidle, 4m\n\np\n100000\na, 0, 4k, 1\n");
    let (a, idle) = (w.regions()[0].range, w.regions()[1].range);
    assert_eq!(a.start % HUGE_PAGE, 0);
    let (mut ctx, mut ops) = started(&w, SimOptions::default());
    run_until(&mut ctx, &mut ops, 100_000);
    assert_eq!(ops.target_memory(), memory(4 * MIB, 0, 0));

    let collapse = scheme(Action::Collapse, &[]);
    // Without a quota a region takes the blocks whose middle it holds (as on live processes):
    // only the second block's middle is in [a + 1 MiB + 4 KiB, a end).
    let c = act(
        &ctx,
        &mut ops,
        AddrRange::new(a.start + MIB + PAGE, a.end),
        &collapse,
    );
    assert_eq!(c.sz_applied, 2 * MIB);
    assert_eq!(ops.residency(a).huge_bytes, (2 * MIB) as f64);
    // [a + 1 MiB, a + 3 MiB) holds no whole block, but the first block's middle.
    let middle = AddrRange::new(a.start + MIB, a.start + 3 * MIB);
    let c = act(&ctx, &mut ops, middle, &collapse);
    assert_eq!(c.sz_applied, 2 * MIB, "only the first block is new");
    // Collapsing untouched memory fills it: the memory cost of huge pages.
    let c = act(&ctx, &mut ops, idle, &scheme(Action::Hugepage, &[]));
    assert_eq!(c.sz_applied, 4 * MIB);
    assert_eq!(ops.target_memory(), memory(8 * MIB, 0, 0));

    // A filter that keeps huge pages resident.
    let keep_huge = Filter::new(
        FilterKind::HugepageSize {
            min: HUGE_PAGE,
            max: HUGE_PAGE,
        },
        true,
        false,
    );
    let p = act(&ctx, &mut ops, a, &scheme(Action::Pageout, &[keep_huge]));
    assert_eq!((p.sz_applied, p.sz_ops_filter_passed), (0, 0));

    // Paging out the upper half of the second block splits it; the first block stays huge.
    let upper = AddrRange::new(a.start + 3 * MIB, a.end);
    let p = act(&ctx, &mut ops, upper, &scheme(Action::Pageout, &[]));
    assert_eq!(p.sz_applied, MIB);
    let r = ops.residency(a);
    assert_eq!(r.huge_bytes, (2 * MIB) as f64);
    assert_eq!(r.resident_bytes, (3 * MIB) as f64);
    // And the split block can be collapsed again, reading its paged-out half back.
    let c = act(&ctx, &mut ops, a, &collapse);
    assert_eq!(c.sz_applied, 2 * MIB);
    assert_eq!(ops.residency(a).huge_bytes, (4 * MIB) as f64);
    assert_eq!(ops.target_memory(), memory(8 * MIB, 0, 0));
}

/// Every byte a pageout scheme applied is either still paged out or came back as a refault
/// (no `willneed` ran); rounding leaves at most a byte per number.
fn assert_conserved(ctx: &Context, ops: &SimOps) {
    let m = ops.target_memory();
    let applied = ctx.schemes()[0].stats.sz_applied;
    assert!(
        applied.abs_diff(m.paged_out_bytes + m.refaulted_bytes) <= 2,
        "applied {applied}, paged out {} + refaulted {}",
        m.paged_out_bytes,
        m.refaulted_bytes
    );
}

#[test]
fn an_addr_filter_that_allows_skips_the_operations_filters() {
    // Page out everything, except anonymous memory, except (core filter first) `cold`: the
    // address filter allows `cold`, so the anon filter is not asked about it; `hot`, which no
    // core filter hits, is left to the anon filter, which rejects it.
    let w = workload(HOT_COLD);
    let (hot, cold) = (w.regions()[0].range, w.regions()[1].range);
    let mut pageout = scheme(
        Action::Pageout,
        &[
            Filter::new(FilterKind::Addr(cold), true, true),
            Filter::new(FilterKind::Anon, true, false),
        ],
    );
    pageout.pattern.min_age_region = 0;
    let mut ops = SimOps::new(w, SimOptions::default());
    let mut ctx = Context::new(Attrs::default(), 3).unwrap();
    ctx.add_scheme(pageout).unwrap();
    ctx.start(&mut ops).unwrap();
    run_until(&mut ctx, &mut ops, 2_000_000);
    let (h, c) = (ops.residency(hot), ops.residency(cold));
    assert_eq!(
        (h.resident_bytes, h.paged_out_bytes),
        ((4 * MIB) as f64, 0.0)
    );
    assert_eq!(
        (c.resident_bytes, c.paged_out_bytes),
        (0.0, (8 * MIB) as f64)
    );
    // `cold` was paged out while still swept in the first 500 ms: it refaulted, and was paged
    // out again.
    assert!(ops.target_memory().refaulted_bytes >= 8 * MIB);
    assert_conserved(&ctx, &ops);
}

/// `prcl`: page out regions with no access for at least `min_age` aggregations.
fn prcl(min_age: u32) -> Scheme {
    let pattern = AccessPattern {
        min_nr_accesses: 0,
        max_nr_accesses: 0,
        min_age_region: min_age,
        ..AccessPattern::default()
    };
    Scheme::new(pattern, Action::Pageout)
}

#[test]
fn prcl_on_zigzag_pages_out_the_idle_region_and_refaults_it_when_active() {
    // zigzag: `a` and `b` (100 MiB each) swept together for 5 s, then `a` alone for 2.5 s,
    // `b` alone for 2.5 s, and so on. With a 1 s age threshold (10 aggregations of 100 ms),
    // an idle region is paged out a little over 1 s after it went idle (its age restarts at
    // the first window without accesses), so half-way through the second of its 2.5 s idle
    // phases it is out, while the active one, swept whole every 5 ms, is in.
    let w = Workload::builtin("zigzag").unwrap();
    let (a, b) = (w.regions()[0].range, w.regions()[1].range);
    let mut ops = SimOps::new(w, SimOptions::default());
    let mut ctx = Context::new(Attrs::default(), 5).unwrap();
    ctx.add_scheme(prcl(10)).unwrap();
    ctx.start(&mut ops).unwrap();
    // Up to 5 % of a region may sit in monitoring regions that straddle the a/b boundary or
    // have not been split from a neighbour yet (see tests/wss.rs on settling).
    let most = (95 * MIB) as f64;

    run_until(&mut ctx, &mut ops, 3_000_000);
    assert_eq!(ops.target_memory().paged_out_bytes, 0, "both active");
    // (`b` idle since 5 s, `a` active)
    run_until(&mut ctx, &mut ops, 7_000_000);
    assert!(
        ops.residency(b).paged_out_bytes >= most,
        "{:?}",
        ops.residency(b)
    );
    assert!(
        ops.residency(a).resident_bytes >= most,
        "{:?}",
        ops.residency(a)
    );
    // (`a` idle since 7.5 s; `b` active again: it refaulted)
    run_until(&mut ctx, &mut ops, 9_500_000);
    assert!(
        ops.residency(a).paged_out_bytes >= most,
        "{:?}",
        ops.residency(a)
    );
    assert!(
        ops.residency(b).resident_bytes >= most,
        "{:?}",
        ops.residency(b)
    );
    assert!(ops.target_memory().refaulted_bytes >= 95 * MIB);

    while ctx
        .step(&mut ops, &mut VirtualClock, &mut NoCallbacks)
        .unwrap()
        .is_continue()
    {}
    // Each region goes idle six times after the first 5 s, and all but the last idle phase
    // (the end of the run) are followed by an active one: 11 refaults of (nearly) 100 MiB.
    // Active memory paged out at the edge of a straddling monitoring region would refault on
    // top of that; 5 % allows for it.
    let refaulted = ops.target_memory().refaulted_bytes;
    assert!(
        (11 * 95 * MIB..=11 * 105 * MIB).contains(&refaulted),
        "{refaulted} bytes refaulted"
    );
    assert_conserved(&ctx, &ops);
}
