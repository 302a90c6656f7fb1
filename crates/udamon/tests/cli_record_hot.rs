//! A live process's small hot area becomes a region of its own within a few windows, however
//! large the idle memory around it (docs/algorithms.md#guided): `udamon record` with a sampled
//! source (tick when root, else cpuclock) on a program that touches 32 MiB inside a 64 GiB
//! reservation (bench/workloads/sparse_hot.c).

mod common;

use common::{build_bench_workload, favoured_udamon, is_root, raw_snapshots, workload_area};
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// Bytes of `range` that regions with accesses cover in `snapshot` (target 0).
fn accessed_in(snapshot: &Value, (start, end): (u64, u64)) -> u64 {
    snapshot["targets"][0]["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["nr_accesses"].as_u64().unwrap() > 0)
        .map(|r| {
            let (s, e) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
            e.min(end).saturating_sub(s.max(start))
        })
        .sum()
}

#[test]
fn a_small_hot_area_in_a_huge_reservation_becomes_its_own_region() {
    let source = if is_root() { "tick" } else { "cpuclock" };
    let exe = build_bench_workload("sparse_hot");
    let dir = tempfile::tempdir().unwrap();
    let (rec, areas) = (dir.path().join("rec.data"), dir.path().join("areas"));
    favoured_udamon()
        .args(["record", "--access-source", source, "-o"])
        .arg(&rec)
        .arg("--")
        .arg(&exe)
        .arg("6")
        .arg(&areas)
        .assert()
        .success();
    let hot = workload_area(&areas, "hot");
    let reservation = workload_area(&areas, "reservation");
    let snapshots = raw_snapshots(&[], &rec);
    // 400 ms windows over 6 s; the last one may end with the process.
    assert!(snapshots.len() >= 12, "{} snapshots", snapshots.len());
    let per_window: Vec<(u64, u64)> = snapshots
        .iter()
        .map(|s| {
            let inside = accessed_in(s, hot);
            (inside, accessed_in(s, reservation) - inside)
        })
        .collect();
    for (i, (inside, outside)) in per_window.iter().enumerate() {
        eprintln!(
            "window {i}: {:.1} MiB of the hot area reported accessed, {:.1} MiB of the rest \
             of the reservation",
            *inside as f64 / MIB as f64,
            *outside as f64 / MIB as f64
        );
    }
    // From the fourth window on (1.6 s, the first ones spent starting and writing the
    // reservation's sparse pages), every window but the last: the hot area, and hardly
    // anything of the 64 GiB around it, reported accessed.
    for (i, &(inside, outside)) in per_window.iter().enumerate().skip(3) {
        if i + 1 == per_window.len() {
            break;
        }
        assert!(
            inside >= 28 * MIB,
            "window {i}: only {inside} bytes of the 32 MiB hot area reported accessed"
        );
        assert!(
            outside <= 8 * MIB,
            "window {i}: {outside} bytes outside the hot area reported accessed with it"
        );
    }
}
