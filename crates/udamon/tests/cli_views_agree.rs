//! One working set in every view, on a real program's record (issue 27): a window with
//! samples in it never reads 0, `report mappings`' rows add up to `report wss`'s average at the
//! same horizon over the same snapshots, and the working set grows with the horizon.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A live record with mappings and samples: the static pattern (64 MiB hot, 256 MiB warm)
/// for 4 s.
fn live_record(dir: &Path) -> PathBuf {
    let out = dir.join("live.data");
    udamon()
        .args(["record", "--access-source", "cpuclock", "-o"])
        .arg(&out)
        .arg("--")
        .arg(patterns())
        .args(["static", "-t", "4", "-o", "/dev/null"])
        .assert()
        .success();
    out
}

/// Every snapshot's working set over `horizon`, in time order: (end, bytes).
fn per_snapshot(record: &Path, horizon: &str) -> Vec<(u64, u64)> {
    let args = [
        "wss",
        "--horizon",
        horizon,
        "--exclude_samples",
        "0",
        "--sortby",
        "time",
    ];
    let report = report_json(&args, record);
    let values = report["distributions"][0]["values"].as_array().unwrap();
    let n = |v: &Value| v.as_u64().unwrap();
    values
        .iter()
        .map(|p| (n(&p["time_ns"]), n(&p["value"])))
        .collect()
}

#[test]
fn a_window_with_samples_never_reads_zero() {
    let dir = tempfile::tempdir().unwrap();
    let record = live_record(dir.path());
    // The ends of the windows with samples (a window's samples carry its end).
    let sampled: BTreeSet<u64> = report_text(&["raw"], &record)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|f| f["kind"] == "samples" && !f["samples"].as_array().unwrap().is_empty())
        .map(|f| f["time_ns"].as_u64().unwrap())
        .collect();
    assert!(sampled.len() >= 5, "{sampled:?}");
    let windows = per_snapshot(&record, "0");
    let zero: Vec<u64> = windows
        .iter()
        .filter(|w| w.1 == 0 && sampled.contains(&w.0))
        .map(|w| w.0)
        .collect();
    assert!(zero.is_empty(), "0 B at {zero:?}: {windows:?}");
}

#[test]
fn mapping_rows_add_up_to_report_wss() {
    let dir = tempfile::tempdir().unwrap();
    let record = live_record(dir.path());
    for horizon in ["0", "1s", "10s", "auto"] {
        let both = ["--horizon", horizon, "--exclude_samples", "0"];
        let mappings = report_json(&[&["mappings"][..], &both].concat(), &record);
        let rows = mappings["mappings"].as_array().unwrap();
        let summed: u64 = rows
            .iter()
            .map(|m| m["working_set_bytes"].as_u64().unwrap())
            .sum();
        let wss = report_json(&[&["wss"][..], &both].concat(), &record);
        let average = wss["distributions"][0]["average"].as_f64().unwrap();
        // Each row's mean is rounded to a byte.
        assert!(
            (summed as f64 - average).abs() <= rows.len() as f64 + 1.0,
            "--horizon {horizon}: rows {summed} B, report wss {average} B"
        );
        if horizon == "auto" {
            assert_eq!(
                mappings["horizon_ns"], wss["evidence"]["horizon_ns"],
                "auto is chosen alike"
            );
        }
    }
}

#[test]
fn the_working_set_grows_with_the_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let record = live_record(dir.path());
    let horizons = ["0", "1s", "10s", "60s"];
    let curves: Vec<Vec<(u64, u64)>> = horizons.iter().map(|h| per_snapshot(&record, h)).collect();
    for (i, pair) in curves.windows(2).enumerate() {
        for (a, b) in pair[0].iter().zip(&pair[1]) {
            assert!(
                a.1 <= b.1,
                "at {} ms: {} B over {}, {} B over {}",
                a.0 / 1_000_000,
                a.1,
                horizons[i],
                b.1,
                horizons[i + 1]
            );
        }
    }
}
