//! DAMOS `pageout` on a live process: a prcl-style scheme takes the cold file mapping out of
//! memory and leaves hot memory alone; pages touched again count as refaulted; a size quota
//! caps the bytes acted on per reset interval; anonymous pageout without swap applies nothing
//! and says why; a dry run changes nothing.

#[path = "workload/schemes.rs"]
mod schemes;
#[path = "../../record/tests/common/skip.rs"]
mod skip;
mod workload;

use schemes::{MIB, SERIAL, Workload, has_swap, monitor, scheme};
use udamon_core::Region;
use udamon_core::damos::{Action, Filter, FilterKind};
use udamon_linux::actions::Actor;
use udamon_linux::actions::pagescan::PageMap;

/// Aggregation intervals (200 ms with cpuclock's defaults) a region must stay unaccessed.
const COLD_AGE: u32 = 5;
const PAGES_PER_MIB: u64 = MIB / 4096;

#[test]
fn prcl_pages_out_the_cold_file_and_keeps_hot_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Workload::start(12);
    let before = w.resident();
    assert!(before.cold_file >= 60 * PAGES_PER_MIB, "{before:?}");
    // Long enough for regions to separate the cold file from hot memory with sampled
    // accesses; how far pageout gets within it depends on that, hence the loose bound below.
    let out = monitor(
        &w,
        vec![scheme(Action::Pageout, (0, 0), COLD_AGE)],
        8.0,
        false,
    );
    let after = w.resident();
    let stats = out.last();
    eprintln!(
        "before {before:?} after {after:?} stats {stats:?} notes {:?}",
        out.notes
    );
    w.stop();
    assert!(
        after.cold_file < before.cold_file / 2,
        "most of the cold file's pages left memory: {before:?} -> {after:?}"
    );
    assert!(
        after.hot_file >= before.hot_file * 9 / 10,
        "the hot file stayed: {before:?} -> {after:?}"
    );
    assert_eq!(
        after.hot_anon, before.hot_anon,
        "the hot anonymous area stayed"
    );
    // Applied bytes are pages that left the process's page tables: at least what left the
    // cold file, and never more than was tried.
    let left = (before.cold_file - after.cold_file) * 4096;
    assert!(stats.sz_applied >= left * 9 / 10, "{stats:?} vs {left}");
    assert!(stats.sz_applied <= stats.sz_tried, "{stats:?}");
    // What is out now: the cold file's pages, and whatever else went out (cold pages of the
    // program and its libraries) and was not touched again since.
    let memory = out.memory.expect("target memory reported");
    assert!(
        memory.paged_out_bytes >= left * 9 / 10,
        "{memory:?} vs {left}"
    );
    assert!(
        memory.paged_out_bytes + memory.refaulted_bytes <= stats.sz_applied,
        "{memory:?} vs {stats:?}"
    );
    assert!(memory.resident_bytes > 0);
}

#[test]
fn pages_touched_again_after_a_pageout_count_as_refaulted() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Workload::start(20);
    let before = w.resident();
    let (start, end) = w.area("cold_file");
    let mut actor = Actor::new(w.pid(), PageMap::open(w.pid()));
    let pageout = scheme(Action::Pageout, (0, 0), 0);
    let applied = actor
        .apply(&Region::new(start, end), &pageout, 1, 0, &|_| false)
        .sz_applied;
    let out = w.resident();
    let after_pageout = actor.memory().expect("the workload runs");
    let back = w.reread_cold_file();
    let after_reread = actor.memory().expect("the workload runs");
    w.stop();
    eprintln!("{before:?} -> {out:?} -> {back:?}; applied {applied}");
    assert!(
        applied >= (before.cold_file - out.cold_file) * 4096 * 9 / 10 && applied > 0,
        "the cold file left memory: {before:?} -> {out:?}, applied {applied}"
    );
    assert_eq!(
        (after_pageout.paged_out_bytes, after_pageout.refaulted_bytes),
        (applied, 0)
    );
    assert_eq!(back.cold_file * 4096, end - start, "read back in whole");
    assert_eq!(
        (after_reread.paged_out_bytes, after_reread.refaulted_bytes),
        (0, applied),
        "every page paged out is back"
    );
}

#[test]
fn a_size_quota_caps_the_bytes_acted_on_per_reset_interval() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Workload::start(12);
    let before = w.resident();
    let mut s = scheme(Action::Pageout, (0, 0), COLD_AGE);
    s.quota.sz = 4 * MIB;
    s.quota.reset_interval_ms = 1000;
    // Charge only what was applied: the coldest regions are mostly unmapped gaps, which
    // would otherwise use up the quota with nothing done (upstream's fail-charge ratio 0/1).
    s.quota.fail_charge_num = 0;
    s.quota.fail_charge_denom = 1;
    let seconds = 5.0;
    let out = monitor(&w, vec![s], seconds, false);
    let after = w.resident();
    w.stop();
    let stats = out.last();
    eprintln!("before {before:?} after {after:?} stats {stats:?}");
    // Charge windows start at the first apply and last 1 s: at most seconds + 1 of them.
    let windows = seconds as u64 + 1;
    assert!(stats.sz_applied <= windows * 4 * MIB, "{stats:?}");
    assert!(stats.qt_exceeds >= 1, "the quota ran out: {stats:?}");
    assert!(
        stats.sz_applied >= 4 * MIB,
        "something was paged out: {stats:?}"
    );
    // Within any 1 s of monitoring, applied bytes grow by at most two windows' quota (a span
    // can touch two windows).
    for (i, &(t0, s0)) in out.stats.iter().enumerate() {
        for &(t1, s1) in &out.stats[i + 1..] {
            if t1 - t0 <= 1_000_000 {
                let grown = s1.sz_applied - s0.sz_applied;
                assert!(grown <= 8 * MIB, "{t0}..{t1}: {s0:?} -> {s1:?}");
            }
        }
    }
    let left = before.cold_file.saturating_sub(after.cold_file) * 4096;
    assert!(
        left > 0 && left <= windows * 4 * MIB,
        "only quota-sized bites: {left}"
    );
}

#[test]
fn anonymous_pageout_without_swap_applies_nothing_and_says_so() {
    if has_swap() {
        skip::skipped("this system has swap (the case is pageout without it)");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Workload::start(10);
    let before = w.resident();
    let mut s = scheme(Action::Pageout, (0, u32::MAX), 0);
    s.filters.push(Filter::new(FilterKind::Anon, true, true));
    let out = monitor(&w, vec![s], 2.0, false);
    let after = w.resident();
    w.stop();
    let stats = out.last();
    eprintln!("stats {stats:?} notes {:?}", out.notes);
    assert!(
        stats.sz_tried > 0 && stats.sz_ops_filter_passed > 0,
        "{stats:?}"
    );
    assert_eq!(stats.sz_applied, 0, "nothing changed, so nothing applied");
    assert_eq!(after.cold_anon, before.cold_anon);
    assert_eq!(
        after.cold_file, before.cold_file,
        "the anon filter kept files out"
    );
    assert!(
        out.notes.iter().any(|n| n.contains("without swap")),
        "{:?}",
        out.notes
    );
}

#[test]
fn a_dry_run_reports_what_it_would_do_and_does_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Workload::start(10);
    let before = w.resident();
    // Five seconds: regions reach COLD_AGE (five 400 ms windows) at the earliest after 2.4 s,
    // and three seconds left one or two passes, too few for the cold file to be found in one
    // run in eight.
    let out = monitor(
        &w,
        vec![scheme(Action::Pageout, (0, 0), COLD_AGE)],
        5.0,
        true,
    );
    let after = w.resident();
    w.stop();
    let stats = out.last();
    assert_eq!(stats.sz_applied, 0, "{stats:?}");
    assert!(stats.sz_tried > 0, "{stats:?}");
    assert!(
        after.cold_file >= before.cold_file * 9 / 10,
        "{before:?} -> {after:?}"
    );
    // Part of the cold file would have been paged out (its pages are mapped and clean); how
    // much in one pass depends on how far regions have separated it from hot memory.
    let would: f64 = out
        .notes
        .iter()
        .filter_map(|n| {
            let rest = n.strip_prefix("dry run: pageout")?;
            // An upper bound, and said to be one (the real run's kernel may leave pages).
            assert!(rest.contains("(an upper bound: "), "{n}");
            rest.split("change up to ")
                .nth(1)?
                .split(" MiB")
                .next()?
                .parse()
                .ok()
        })
        .fold(0.0, f64::max);
    assert!(would >= 4.0, "{:?}", out.notes);
}
