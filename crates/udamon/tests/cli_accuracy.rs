//! `udamon record --sim` keeps the simulator's ground truth and `udamon report accuracy` judges
//! the record by it: the guided region adjustment against `--faithful` on small hot areas in
//! huge idle memory (docs/algorithms.md#guided, docs/reports/accuracy.md).

mod common;

use common::{info, report_json, sim_record, udamon};
use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;

fn share(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a share: {v}"))
}

#[test]
fn a_64_mib_hot_area_in_a_terabyte_is_found_where_damon_loses_it() {
    let dir = tempfile::tempdir().unwrap();
    let guided = sim_record(
        dir.path(),
        "g.data",
        "builtin:needle",
        &["--duration", "20s"],
    );
    let faithful = sim_record(
        dir.path(),
        "f.data",
        "builtin:needle",
        &["--duration", "20s", "--faithful"],
    );
    // One truth frame per window, each after its snapshot.
    let i = info(&guided);
    assert_eq!(i["events"]["by_kind"]["truth"], i["nr_snapshots"], "{i}");
    assert_eq!(i["header"]["adjustment"], "guided");
    assert_eq!(info(&faithful)["header"]["adjustment"], "faithful");

    let all = report_json(&["accuracy"], &guided);
    assert_eq!(all["summary"]["windows"], 200);
    let found = all["summary"]["first_found_ns"].as_u64().unwrap();
    assert!(
        found <= 10_000_000_000,
        "90 % recall and precision at {found} ns"
    );
    let late = &report_json(&["accuracy", "--time-range", "10s", "20s"], &guided)["summary"];
    assert!(share(&late["recall"]) > 0.99, "{late}");
    assert!(share(&late["precision"]) > 0.99, "{late}");
    // DAMON's adjustment alone, the same seed: the hot area hides in ~100 GiB idle regions.
    let late = &report_json(&["accuracy", "--time-range", "10s", "20s"], &faithful)["summary"];
    let (recall, precision) = (share(&late["recall"]), late["precision"].as_f64());
    assert!(
        recall < 0.9 || precision.is_none_or(|p| p < 0.9),
        "faithful: {late}"
    );
}

#[test]
fn a_hot_area_that_moves_is_found_again_within_three_windows() {
    let dir = tempfile::tempdir().unwrap();
    let rec = sim_record(
        dir.path(),
        "m.data",
        "builtin:moving",
        &["--duration", "25s"],
    );
    let report = report_json(&["accuracy"], &rec);
    let windows = report["windows"].as_array().unwrap();
    // It moves at 10 s and 20 s: windows 100 and 200 are the first after each move.
    for start in [100, 200] {
        let recall: Vec<f64> = windows[start..start + 3]
            .iter()
            .map(|w| share(&w["recall"]))
            .collect();
        assert!(
            recall.iter().any(|&r| r >= 0.9),
            "the three windows after the move at {} s: {recall:?}",
            start / 10
        );
    }
}

#[test]
fn a_record_without_truth_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let rec = sim_record(
        dir.path(),
        "s.data",
        "builtin:stairs",
        &["--duration", "1s"],
    );
    let damo = dir.path().join("s.json_compressed");
    udamon()
        .args(["convert"])
        .arg(&rec)
        .arg("-o")
        .arg(&damo)
        .assert()
        .success();
    udamon()
        .args(["report", "accuracy"])
        .arg(&damo)
        .assert()
        .failure()
        .stderr(contains("no ground truth").and(contains("udamon record --sim")));
    let text = common::report_text(&["accuracy"], &rec);
    assert!(text.starts_with("10 windows: precision "), "{text}");
}
