//! The access report: snapshot choice (including negative indexes), per-region rates and ages,
//! totals, and the text.

mod common;

use common::*;
use udamon_record::model::Frame;
use udamon_report::ReportError;
use udamon_report::access::{AccessOptions, access, render_text};

/// Three snapshots; snapshot `i` has a region accessed `5 * i` times.
fn record() -> Vec<Frame> {
    (0..3)
        .map(|i| {
            let mut hot = region(0x7f00_0000_0000, 0x7f00_0000_1000, 5 * i as u32);
            hot.age = 12;
            let cold = region(0x7f00_0000_1000, 0x7f00_0060_1000, 0);
            Frame::Snapshot(snapshot(i, vec![(0, vec![hot, cold])]))
        })
        .collect()
}

#[test]
fn last_snapshot_by_default_with_rates_and_ages() {
    let header = header(1);
    let report = access(&header, record(), &AccessOptions::default()).unwrap();
    assert_eq!((report.snapshot, report.nr_snapshots), (2, 3));
    let r = &report.targets[0].regions;
    assert_eq!(r[0].nr_accesses, 10);
    // 10 of at most 20 samples per 100 ms window: 50 %, 100 Hz.
    assert_eq!(r[0].access_percent, 50.0);
    assert_eq!(r[0].access_hz, 100.0);
    // Age 12 windows of 100 ms.
    assert_eq!(r[0].age_ns, 1_200_000_000);
    assert_eq!(report.total_bytes, 0x60_1000);
    assert_eq!(report.accessed_bytes, 0x1000);
    assert_eq!(report.est_mem_bw_bytes_per_sec, 4096.0 * 100.0);
    assert_eq!(report.targets[0].cmdline.as_deref(), Some("workload-0"));
}

#[test]
fn snapshot_indexes_count_from_either_end() {
    let header = header(1);
    let pick = |snapshot| {
        access(
            &header,
            record(),
            &AccessOptions {
                snapshot,
                ..AccessOptions::default()
            },
        )
        .map(|r| (r.snapshot, r.targets[0].regions[0].nr_accesses))
    };
    assert_eq!(pick(0).unwrap(), (0, 0));
    assert_eq!(pick(1).unwrap(), (1, 5));
    assert_eq!(pick(-3).unwrap(), (0, 0));
    assert_eq!(pick(-2).unwrap(), (1, 5));
    for bad in [3, -4] {
        let err = pick(bad).unwrap_err();
        assert!(
            matches!(err, ReportError::SnapshotIndex { count: 3, .. }),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains("0 to 2"), "{err}");
    }
}

#[test]
fn unknown_target_is_an_error() {
    let err = access(
        &header(1),
        record(),
        &AccessOptions {
            target: Some(4),
            ..AccessOptions::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("targets with regions: 0"), "{err}");
}

#[test]
fn text_is_damo_like_and_shows_samples_only_when_present() {
    let header = header(1);
    let text = render_text(&access(&header, record(), &AccessOptions::default()).unwrap());
    assert!(text.contains("0x7f0000000000-0x7f0000001000"), "{text}");
    assert!(
        text.contains("4.000 KiB") && text.contains("6.000 MiB"),
        "{text}"
    );
    assert!(
        text.contains("50 %") && text.contains("100 Hz") && text.contains("1.2 s"),
        "{text}"
    );
    assert!(
        text.contains("memory bw estimate: 400.000 KiB per second"),
        "{text}"
    );
    assert!(!text.contains("samples"), "{text}");

    let mut frames = record();
    if let Frame::Snapshot(s) = &mut frames[2] {
        s.targets[0].regions[0].raw_samples = 17;
    }
    let text = render_text(&access(&header, frames, &AccessOptions::default()).unwrap());
    let line = text.lines().find(|l| l.starts_with("0 ")).unwrap();
    assert!(text.contains("samples") && line.ends_with("17"), "{text}");
}

#[test]
fn reads_and_writes_are_columns_and_filters() {
    let header = header(1);
    let mut frames = record();
    if let Frame::Snapshot(s) = &mut frames[2] {
        let regions = &mut s.targets[0].regions;
        (regions[0].raw_samples, regions[0].read_samples) = (9, 9);
        (regions[1].raw_samples, regions[1].read_samples) = (4, 1);
        regions[1].write_samples = 3;
    }
    let report = |reads, writes| {
        let opts = AccessOptions {
            reads,
            writes,
            ..AccessOptions::default()
        };
        access(&header, frames.clone(), &opts).unwrap()
    };
    let all = report(false, false);
    let text = render_text(&all);
    let line = |i: usize| {
        let prefix = format!("{i} ");
        text.lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap()
            .to_string()
    };
    assert!(text.contains("samples    reads   writes"), "{text}");
    let cells = |l: String| {
        l.split_whitespace()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(cells(line(0)), "0 9 9", "{text}");
    assert_eq!(cells(line(1)), "3 1 4", "{text}");

    let starts = |r: &udamon_report::access::AccessReport| {
        r.targets[0]
            .regions
            .iter()
            .map(|r| r.start)
            .collect::<Vec<_>>()
    };
    let (first, second) = (
        all.targets[0].regions[0].start,
        all.targets[0].regions[1].start,
    );
    assert_eq!(starts(&report(true, false)), [first, second]);
    assert_eq!(starts(&report(false, true)), [second]);
    assert_eq!(starts(&report(true, true)), [first, second]);
    let written = report(false, true);
    assert_eq!(
        written.total_bytes, written.targets[0].regions[0].size,
        "totals are those of the regions shown"
    );
    let json = serde_json::to_value(&written).unwrap();
    assert_eq!(json["targets"][0]["regions"][0]["write_samples"], 3);
    assert_eq!(json["targets"][0]["regions"][0]["read_samples"], 1);
}
