//! DAMOS `collapse` on a live process: hot anonymous memory becomes huge pages (smaps
//! `AnonHugePages`) while cold memory is left alone, with THP in `madvise` mode and no
//! `MADV_HUGEPAGE` on the memory.

#[path = "workload/schemes.rs"]
mod schemes;
#[path = "../../record/tests/common/skip.rs"]
mod skip;
mod workload;

use schemes::{MIB, SERIAL, Workload, monitor, scheme};
use udamon_core::damos::Action;

#[test]
fn collapse_turns_hot_anonymous_memory_into_huge_pages_only() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = Workload::start(12);
    let (hot, _) = w.area("hot_anon");
    let (cold, _) = w.area("cold_anon");
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if thp.contains("[never]") {
        skip::skipped("THP is disabled");
        return;
    }
    let always = thp.contains("[always]");
    let hot_before = w.anon_huge_bytes(hot);
    // Accessed in at least 5 of a window's 40 sampling intervals. No minimum age: sampled
    // counts of hot memory vary enough between windows to keep resetting ages. Applied every
    // second, so that the first pass comes after five windows of region splitting: in the
    // very first windows one region can still span hot and cold memory.
    let mut s = scheme(Action::Collapse, (5, u32::MAX), 0);
    s.apply_interval_us = 1_000_000;
    let out = monitor(&w, vec![s], 4.5, false);
    let hot_after = w.anon_huge_bytes(hot);
    let cold_after = w.anon_huge_bytes(cold);
    let stats = out.last();
    eprintln!(
        "hot {hot_before} -> {hot_after}, cold {cold_after}, {stats:?} {:?}",
        out.notes
    );
    w.stop();
    assert!(
        hot_after >= hot_before + 8 * MIB,
        "at least half the hot 16 MiB collapsed: {hot_before} -> {hot_after}"
    );
    if !always {
        assert_eq!(cold_after, 0, "the cold area was left alone");
    }
    assert!(
        stats.sz_applied >= hot_after - hot_before,
        "applied counts the newly huge memory: {stats:?}"
    );
    assert_eq!(
        stats.sz_applied % (2 * MIB),
        0,
        "whole huge pages: {stats:?}"
    );
}
