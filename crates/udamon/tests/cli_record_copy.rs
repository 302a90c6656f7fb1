//! A copy seen from both ends: udamon-linux's `code` workload in `copy` mode copies chunks of
//! a large buffer into a small one with `rep movsb`, which a sample interrupts midway, and
//! both buffers must show: the source read, the destination written. Alone in its file, so
//! that no other busy test shares the CPUs with it. Sampling is random: the checks are on
//! clear shares, never on exact counts.

mod common;

use common::{build_workload_as, report_text, udamon, workload_area};
use serde_json::Value;
use std::collections::HashMap;

/// An address range `[start, end)`.
type Area = (u64, u64);

#[test]
fn a_rep_movsb_copy_shows_its_source_read_and_its_destination_written() {
    let code = build_workload_as("code", "rw", &["-O2", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    let (areas, rec) = (dir.path().join("areas"), dir.path().join("rec"));
    // The default source: tick as root, whose user registers come through another path than
    // cpuclock's.
    udamon()
        .args(["record", "--duration", "3s", "-o"])
        .arg(&rec)
        .arg("--")
        .arg(&code)
        .args(["copy", "4"])
        .arg(&areas)
        .assert()
        .success();
    let (src, dst) = (workload_area(&areas, "src"), workload_area(&areas, "dst"));
    // Samples in each buffer, and how many of them say read and write.
    let [mut in_src, mut in_dst] = [HashMap::<String, u64>::new(), HashMap::new()];
    for line in report_text(&["raw"], &rec).lines() {
        let frame: Value = serde_json::from_str(line).unwrap();
        if frame["kind"] != "samples" {
            continue;
        }
        for sample in frame["samples"].as_array().unwrap() {
            let addr = sample["addr"].as_u64().unwrap();
            let access = sample["access"].as_str().unwrap().to_string();
            let inside = |(start, end): Area| (start..end).contains(&addr);
            if inside(src) {
                *in_src.entry(access).or_default() += 1;
            } else if inside(dst) {
                *in_dst.entry(access).or_default() += 1;
            }
        }
    }
    let total = |m: &HashMap<String, u64>| m.values().sum::<u64>();
    let (from, to) = (total(&in_src), total(&in_dst));
    assert!(from + to >= 50, "too few samples: {in_src:?} {in_dst:?}");
    // Each step of the copy reads an element and writes one: neither side may go unseen.
    for (side, n) in [("source", from), ("destination", to)] {
        assert!(
            n * 4 >= from + to,
            "the {side} has {n} of {} samples",
            from + to
        );
    }
    // Reads of the source, writes of the destination (the source's first writes were its
    // filling).
    let share = |m: &HashMap<String, u64>, access: &str| m.get(access).copied().unwrap_or(0);
    assert!(share(&in_src, "read") * 10 >= from * 9, "{in_src:?}");
    assert!(share(&in_dst, "write") * 10 >= to * 9, "{in_dst:?}");
}
