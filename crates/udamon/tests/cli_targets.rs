//! Records of several targets (a program and the processes it forks): reports of one target
//! take the busiest by default and say which others there are, and every report takes
//! `--target`.

mod common;

use common::{report_json, report_text, udamon};
use predicates::prelude::*;
use predicates::str::contains;
use std::path::{Path, PathBuf};
use udamon_record::model::{Header, RegionStat, Snapshot, TargetSnapshot};
use udamon_record::{RecordWriter, WriterOptions};

/// An idle parent (target 0, a page touched now and then) and its busy worker (target 1,
/// 64 MiB accessed in every window), as `record -- stress-ng ...` gives them.
fn parent_and_worker(dir: &Path) -> PathBuf {
    let header: Header = serde_json::from_value(serde_json::json!({
        "format_version": 3, "udamon_version": "0.1.0",
        "access_source": {"name": "sim", "reason": "test"},
        "intervals": {"sample_us": 5000, "aggr_us": 100000, "update_us": 1000000},
        "min_nr_regions": 10, "max_nr_regions": 1000, "seed": 1,
        "targets": [{"pid": 10, "cmdline": "stress-ng --vm 1"},
                    {"pid": 11, "cmdline": "stress-ng-vm [run]", "parent": 0}],
        "host": {"hostname": "h", "kernel": "k", "nr_cpus": 1, "page_size": 4096,
                 "mem_total_bytes": 1},
        "start_time_unix_ns": 1
    }))
    .unwrap();
    let path = dir.join("two.data");
    let mut w = RecordWriter::create(&path, &header, WriterOptions::default()).unwrap();
    let region = |start: u64, end: u64, nr_accesses| RegionStat {
        start,
        end,
        nr_accesses,
        age: 0,
        raw_samples: 0,
        read_samples: 0,
        write_samples: 0,
        touched_bytes: None,
    };
    for i in 0..30u64 {
        let parent = vec![
            region(0x1000, 0x2000, 20 * (i % 10 == 0) as u32),
            region(0x2000, 0x10_0000, 0),
        ];
        let worker = (0..16)
            .map(|k| {
                region(
                    0x7f00_0000_0000 + k * (4 << 20),
                    0x7f00_0000_0000 + (k + 1) * (4 << 20),
                    15,
                )
            })
            .collect();
        w.write_snapshot(&Snapshot {
            start_ns: i * 100_000_000,
            end_ns: (i + 1) * 100_000_000,
            sample_us: 5000,
            aggr_us: 100_000,
            targets: vec![
                TargetSnapshot {
                    target: 0,
                    regions: parent,
                },
                TargetSnapshot {
                    target: 1,
                    regions: worker,
                },
            ],
        })
        .unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn the_heatmap_shows_the_busiest_target_and_names_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let rec = parent_and_worker(dir.path());
    let text = report_text(&["heatmap"], &rec);
    assert!(text.contains("heatmap of target 1, pid 11"), "{text}");
    assert!(
        text.contains("(the busiest; other targets: 0; --target INDEX shows one)"),
        "{text}"
    );
    let parent = report_text(&["heatmap", "--target", "0"], &rec);
    assert!(parent.contains("heatmap of target 0, pid 10"), "{parent}");
    assert!(parent.contains("(other targets: 1;"), "{parent}");
}

#[test]
fn every_report_takes_a_target() {
    let dir = tempfile::tempdir().unwrap();
    let rec = parent_and_worker(dir.path());
    let access = report_json(&["access", "--target", "1"], &rec);
    let targets: Vec<&serde_json::Value> = access["targets"].as_array().unwrap().iter().collect();
    assert_eq!(targets.len(), 1, "{access}");
    assert_eq!(targets[0]["target"], 1);
    for report in ["wss", "nr_regions"] {
        let dist = report_json(&[report, "--target", "0"], &rec);
        let d = &dist["distributions"];
        assert_eq!(d.as_array().unwrap().len(), 1, "{dist}");
        assert_eq!(d[0]["target"], 0, "{dist}");
        assert_eq!(d[0]["pid"], 10, "{dist}");
    }
    // The worker's working set alone: its 64 MiB, none of the parent's.
    let wss = report_json(&["wss", "--target", "1", "--exclude_samples", "0"], &rec);
    assert_eq!(wss["distributions"][0]["percentiles"][0]["value"], 64 << 20);
    for args in [
        &["info", "--target", "1"][..],
        &["raw", "--target", "1"],
        &["schemes", "--target", "1"],
        &["mappings", "--target", "1"],
        &["referenced", "--target", "1"],
        &["code", "--target", "1"],
    ] {
        // Each takes the option; those the record holds nothing for say so.
        let out = udamon()
            .arg("report")
            .args(args)
            .arg(&rec)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("unexpected argument"),
            "{args:?}: {stderr}"
        );
    }
    // A target the record does not have is named, with those it has.
    for report in ["access", "wss", "heatmap", "info", "mappings"] {
        udamon()
            .args(["report", report, "--target", "7"])
            .arg(&rec)
            .assert()
            .failure()
            .stderr(contains("target 7").and(contains("targets with regions")));
    }
}
