//! The schemes report: statistics read back, per-row increases, memory saved over time, refaults
//! as a share of the working set per minute, tried-region passes, row sizing and the errors,
//! each checked against values worked out here from the synthetic inputs.

mod common;

use common::*;
use udamon_record::model::{EventKind, Frame, RegionStat, SchemeStatsRecord, TriedRegionRecord};
use udamon_report::ReportError;
use udamon_report::schemes::{
    MAX_ROWS, REFAULT_REFERENCE_PCT_PER_MIN, SchemesOptions, SchemesReport, render_text, schemes,
};

const S: u64 = 1_000_000_000;

fn stats(t: u64, scheme: u32, action: &str, stats: SchemeStatsRecord) -> Frame {
    event(
        t,
        EventKind::SchemeStats {
            scheme,
            action: action.into(),
            stats,
        },
    )
}

fn memory(t: u64, target: u32, resident: u64, paged_out: u64, refaulted: u64) -> Frame {
    event(
        t,
        EventKind::TargetMemory {
            target,
            resident_bytes: resident,
            paged_out_bytes: paged_out,
            refaulted_bytes: refaulted,
        },
    )
}

/// `nr` snapshots of target 0 with an accessed region of `wss(i)` bytes and an idle region.
fn snapshots(nr: u64, wss: impl Fn(u64) -> u64) -> Vec<Frame> {
    (0..nr)
        .map(|i| {
            let hot = AREA + wss(i);
            let regions: Vec<RegionStat> =
                vec![region(AREA, hot, 5), region(hot, hot + 200 * MIB, 0)];
            Frame::Snapshot(snapshot(i, vec![(0, regions)]))
        })
        .collect()
}

/// Frames merged in time order (snapshots by their end, as the recorder writes them).
fn by_time(mut frames: Vec<Frame>) -> Vec<Frame> {
    let time = |f: &Frame| match f {
        Frame::Snapshot(s) => s.end_ns,
        Frame::Event(e) => e.time_ns,
    };
    frames.sort_by_key(time);
    frames
}

fn rows_of(secs: u64) -> SchemesOptions {
    SchemesOptions {
        bucket_ns: Some(secs * S),
        ..SchemesOptions::default()
    }
}

/// Scheme 0's cumulative statistics at second `s`: it tries 4 MiB a second throughout and
/// applies 1 MiB a second until 30 s.
fn pageout_at(s: u64) -> SchemeStatsRecord {
    SchemeStatsRecord {
        nr_tried: 2 * s,
        sz_tried: 4 * MIB * s,
        nr_applied: s.min(30),
        sz_applied: MIB * s.min(30),
        sz_ops_filter_passed: 3 * MIB * s,
        qt_exceeds: s / 10,
    }
}

fn one_minute_of_schemes() -> Vec<Frame> {
    let mut frames = snapshots(600, |_| 10 * MIB);
    for s in 1..=60 {
        frames.push(stats(s * S, 0, "pageout", pageout_at(s)));
        if s % 10 == 0 {
            let st = SchemeStatsRecord {
                nr_tried: s,
                sz_tried: s * KIB,
                ..SchemeStatsRecord::default()
            };
            frames.push(stats(s * S, 3, "stat", st));
        }
    }
    by_time(frames)
}

#[test]
fn statistics_read_back_with_increases_per_row() {
    let report = schemes(&header(1), one_minute_of_schemes(), &rows_of(10)).unwrap();
    assert_eq!(report.start_ns, 0);
    assert_eq!(report.end_ns, 60 * S);
    assert_eq!(report.nr_snapshots, 600);
    assert_eq!(report.bucket_ns, 10 * S);
    let ids: Vec<u32> = report.schemes.iter().map(|s| s.scheme).collect();
    assert_eq!(ids, [0, 3]);

    let s0 = &report.schemes[0];
    assert_eq!(s0.action.as_deref(), Some("pageout"));
    assert_eq!(s0.stats, pageout_at(60));
    // 30 MiB applied over one minute.
    assert!((s0.applied_bytes_per_min.unwrap() - (30 * MIB) as f64).abs() < 1e-6);
    assert!((s0.applied_bytes_per_sec.unwrap() - (30 * MIB) as f64 / 60.0).abs() < 1e-6);
    // Row r holds (10r, 10r+10] s: what the counters gained over it.
    assert_eq!(s0.series.len(), 6);
    for (r, row) in s0.series.iter().enumerate() {
        let (a, b) = (10 * r as u64, 10 * r as u64 + 10);
        assert_eq!((row.start_ns, row.end_ns), (a * S, b * S));
        assert_eq!(
            row.sz_tried,
            pageout_at(b).sz_tried - pageout_at(a).sz_tried
        );
        assert_eq!(
            row.sz_applied,
            pageout_at(b).sz_applied - pageout_at(a).sz_applied
        );
    }
    assert_eq!(s0.series[3].sz_applied, 0, "nothing applied after 30 s");

    let s3 = &report.schemes[1];
    assert_eq!(s3.action.as_deref(), Some("stat"));
    assert_eq!(s3.stats.sz_tried, 60 * KIB);
    assert_eq!(s3.stats.sz_applied, 0);
    assert!(s3.series.iter().all(|r| r.sz_tried == 10 * KIB));

    let text = render_text(&report);
    assert!(text.contains("pageout"), "{text}");
    assert!(text.contains("30.000 MiB"), "{text}");
    assert!(text.contains("applied #3"), "{text}");
}

#[test]
fn a_counter_that_goes_back_restarted() {
    let st = |applied| SchemeStatsRecord {
        sz_applied: applied,
        ..SchemeStatsRecord::default()
    };
    let mut frames = snapshots(30, |_| MIB);
    frames.push(stats(S, 0, "pageout", st(10 * MIB)));
    frames.push(stats(2 * S, 0, "pageout", st(20 * MIB)));
    frames.push(stats(3 * S, 0, "pageout", st(5 * MIB)));
    let report = schemes(&header(1), by_time(frames), &rows_of(1)).unwrap();
    let s = &report.schemes[0];
    assert_eq!(s.stats.sz_applied, 5 * MIB, "the last written statistics");
    let applied: Vec<u64> = s.series.iter().map(|r| r.sz_applied).collect();
    assert_eq!(applied, [10 * MIB, 10 * MIB, 5 * MIB]);
}

#[test]
fn default_rows_come_close_to_twenty_and_cover_the_record() {
    // 1000 s of 100 ms aggregation windows, statistics changing at every one.
    let nr = 10_000;
    let mut frames = snapshots(nr, |_| MIB);
    for i in 1..=nr {
        let st = SchemeStatsRecord {
            sz_applied: i * 4096,
            ..SchemeStatsRecord::default()
        };
        frames.push(stats(i * AGGR_NS, 0, "cold", st));
    }
    let report = schemes(&header(1), by_time(frames), &SchemesOptions::default()).unwrap();
    let series = &report.schemes[0].series;
    assert!(
        (15..=20).contains(&series.len()),
        "{} rows for 20 asked",
        series.len()
    );
    assert_eq!(series[0].start_ns, report.start_ns);
    assert_eq!(series.last().unwrap().end_ns, report.end_ns);
    for pair in series.windows(2) {
        assert_eq!(pair[0].end_ns, pair[1].start_ns);
    }
    let applied: u64 = series.iter().map(|r| r.sz_applied).sum();
    assert_eq!(applied, nr * 4096);

    // A one-second record: rows no finer than the aggregation interval.
    let mut short = snapshots(10, |_| MIB);
    short.push(stats(AGGR_NS, 0, "cold", SchemeStatsRecord::default()));
    let report = schemes(&header(1), by_time(short), &SchemesOptions::default()).unwrap();
    assert_eq!(report.bucket_ns, AGGR_NS);
    assert_eq!(report.schemes[0].series.len(), 10);
}

#[test]
fn rows_asked_too_fine_are_widened_with_a_note() {
    let opts = SchemesOptions {
        bucket_ns: Some(1000),
        ..SchemesOptions::default()
    };
    let report = schemes(&header(1), one_minute_of_schemes(), &opts).unwrap();
    let series = &report.schemes[0].series;
    assert!(series.len() <= MAX_ROWS);
    assert!(report.bucket_ns > 1000);
    assert!(
        report.notes.iter().any(|n| n.contains("instead of")),
        "{:?}",
        report.notes
    );
    let applied: u64 = series.iter().map(|r| r.sz_applied).sum();
    assert_eq!(applied, 30 * MIB);
}

#[test]
fn bad_row_options_are_refused() {
    let zero = SchemesOptions {
        bucket_ns: Some(0),
        ..SchemesOptions::default()
    };
    let none = SchemesOptions {
        rows: 0,
        ..SchemesOptions::default()
    };
    for opts in [zero, none] {
        let err = schemes(&header(1), one_minute_of_schemes(), &opts).unwrap_err();
        assert!(matches!(err, ReportError::Buckets(_)), "{err}");
    }
}

/// Target 0's memory observations: (time s, resident MiB, saved MiB).
const OBSERVED: [(u64, u64, u64); 5] = [
    (12, 100, 0),
    (15, 80, 20),
    (25, 60, 40),
    (40, 90, 10),
    (55, 85, 15),
];

fn memory_record() -> Vec<Frame> {
    let mut frames = snapshots(600, |_| 10 * MIB);
    frames.push(stats(S, 0, "pageout", pageout_at(1)));
    for (t, resident, saved) in OBSERVED {
        frames.push(memory(t * S, 0, resident * MIB, saved * MIB, 0));
    }
    frames.push(memory(30 * S, 1, 10 * MIB, 5 * MIB, MIB));
    by_time(frames)
}

#[test]
fn memory_saved_over_time_peak_and_average() {
    let report = schemes(&header(2), memory_record(), &rows_of(10)).unwrap();
    assert_eq!(report.targets.len(), 2);
    let t0 = &report.targets[0];
    assert_eq!(t0.target, 0);
    assert_eq!(t0.cmdline.as_deref(), Some("workload-0"));
    assert_eq!(t0.final_paged_out_bytes, 15 * MIB);
    assert_eq!(t0.final_resident_bytes, 85 * MIB);
    assert_eq!(t0.peak_paged_out_bytes, 40 * MIB);
    assert_eq!(t0.peak_paged_out_at_ns, 25 * S);

    // Each value holds until the next observation, the last until the end (60 s); nothing is
    // saved before the first.
    let mut integral = 0.0;
    for (k, &(t, _, saved)) in OBSERVED.iter().enumerate() {
        let until = OBSERVED.get(k + 1).map_or(60, |next| next.0);
        integral += (saved * MIB) as f64 * (until - t) as f64;
    }
    let expected = integral / 60.0;
    assert!(
        (t0.average_paged_out_bytes - expected).abs() < 1.0,
        "{} vs {expected}",
        t0.average_paged_out_bytes
    );

    // Each row shows the last observation at or before its end.
    assert_eq!(t0.series.len(), 6);
    for row in &t0.series {
        let state = OBSERVED.iter().rev().find(|o| o.0 * S <= row.end_ns);
        assert_eq!(row.resident_bytes, state.map(|o| o.1 * MIB), "{row:?}");
        assert_eq!(row.paged_out_bytes, state.map(|o| o.2 * MIB), "{row:?}");
    }
    assert_eq!(
        t0.series[0].paged_out_bytes, None,
        "nothing observed by 10 s"
    );

    let t1 = &report.targets[1];
    assert_eq!(t1.final_paged_out_bytes, 5 * MIB);
    assert_eq!(t1.refaults.refaulted_bytes, MIB);
    assert_eq!(
        t1.refaults.mean_wss_bytes, None,
        "target 1 has no snapshots"
    );
    assert_eq!(t1.refaults.pct_of_wss_per_min, None);

    // Target 1's refaults cannot be weighed against a working set nobody measured.
    let all = report.refaults.unwrap();
    assert_eq!(all.refaulted_bytes, MIB);
    assert_eq!(all.pct_of_wss_per_min, None);

    let text = render_text(&report);
    assert!(text.contains("peak 40.000 MiB at 25 s"), "{text}");
    assert!(text.contains("# all targets:"), "{text}");
}

/// Two minutes: the working set is 50 MiB for the first and 150 MiB for the second (mean
/// 100 MiB, the idle 200 MiB region not counted); 512 KiB refault in each minute.
fn refault_record(refaulted_total: u64) -> Vec<Frame> {
    let mut frames = snapshots(1200, |i| if i < 600 { 50 * MIB } else { 150 * MIB });
    frames.push(stats(S, 0, "pageout", pageout_at(1)));
    frames.push(memory(30 * S, 0, 90 * MIB, 10 * MIB, refaulted_total / 2));
    frames.push(memory(90 * S, 0, 90 * MIB, 10 * MIB, refaulted_total));
    by_time(frames)
}

#[test]
fn refaults_as_a_share_of_the_working_set_per_minute() {
    let report = schemes(&header(1), refault_record(MIB), &rows_of(60)).unwrap();
    let r = &report.targets[0].refaults;
    assert_eq!(r.refaulted_bytes, MIB);
    assert!((r.bytes_per_min.unwrap() - (512 * KIB) as f64).abs() < 1e-6);
    assert!((r.mean_wss_bytes.unwrap() - (100 * MIB) as f64).abs() < 1e-6);
    // 1 MiB over 2 minutes of a 100 MiB working set.
    assert!((r.pct_of_wss_per_min.unwrap() - 0.5).abs() < 1e-9);
    assert_eq!(r.within_reference, Some(false));
    assert_eq!(
        report.refaults.as_ref(),
        Some(r),
        "one target: all targets alike"
    );
    assert_eq!(report.refault_reference_pct_per_min, 0.2);

    // Per minute: 512 KiB against 50 MiB, then against 150 MiB.
    let rows = &report.targets[0].series;
    assert_eq!(rows.len(), 2);
    let expected = [0.5 / 50.0 * 100.0, 0.5 / 150.0 * 100.0];
    for (row, want) in rows.iter().zip(expected) {
        assert_eq!(row.refaulted_bytes, 512 * KIB);
        assert!((row.refault_pct_of_wss_per_min.unwrap() - want).abs() < 1e-9);
    }

    let text = render_text(&report);
    assert!(text.contains("0.5 %/min"), "{text}");
    assert!(text.contains("0.2 %/min"), "{text}");
    assert!(text.contains("above"), "{text}");

    // 100 KiB over the same run: 0.05 %/min, within the reference.
    let report = schemes(&header(1), refault_record(100 * KIB), &rows_of(60)).unwrap();
    let pct = report.targets[0].refaults.pct_of_wss_per_min.unwrap();
    assert!((pct - 100.0 / 1024.0 / 2.0 / 100.0 * 100.0).abs() < 1e-9);
    assert!(pct <= REFAULT_REFERENCE_PCT_PER_MIN);
    assert_eq!(report.targets[0].refaults.within_reference, Some(true));
}

#[test]
fn tried_region_passes_are_counted_and_the_last_summarised() {
    let tried = |start, end, passed| TriedRegionRecord {
        start,
        end,
        nr_accesses: 0,
        age: 10,
        sz_filter_passed: passed,
    };
    let mut frames = snapshots(50, |_| MIB);
    frames.push(stats(S, 0, "pageout", pageout_at(1)));
    frames.push(event(
        S,
        EventKind::SchemeTriedRegions {
            scheme: 0,
            regions: vec![tried(0x1000, 0x2000, 0)],
        },
    ));
    frames.push(event(
        2 * S,
        EventKind::SchemeTriedRegions {
            scheme: 0,
            regions: vec![tried(0x1000, 0x3000, 0x1000), tried(0x8000, 0x9000, 0x1000)],
        },
    ));
    frames.push(event(
        2 * S,
        EventKind::SchemeTriedRegions {
            scheme: 1,
            regions: Vec::new(),
        },
    ));
    let report = schemes(&header(1), by_time(frames), &SchemesOptions::default()).unwrap();
    let s0 = &report.schemes[0].tried_regions;
    assert_eq!(s0.passes, 2);
    let last = s0.last.unwrap();
    assert_eq!(last.time_ns, 2 * S);
    assert_eq!(last.nr_regions, 2);
    assert_eq!(last.total_bytes, 0x3000);
    assert_eq!(last.sz_filter_passed, 0x2000);
    let span = last.span.unwrap();
    assert_eq!((span.start, span.end), (0x1000, 0x9000));

    // A scheme known only from its (empty) tried regions.
    let s1 = &report.schemes[1];
    assert_eq!(s1.action, None);
    assert_eq!(s1.tried_regions.passes, 1);
    assert_eq!(s1.tried_regions.last.unwrap().span, None);

    let text = render_text(&report);
    assert!(text.contains("2 passes captured"), "{text}");
    assert!(text.contains("0x1000-0x9000"), "{text}");
}

#[test]
fn a_record_without_schemes_says_so_in_one_line() {
    let err = schemes(&header(1), banded_frames(), &SchemesOptions::default()).unwrap_err();
    assert!(matches!(err, ReportError::NoSchemes));
    assert_eq!(
        err.to_string(),
        "no scheme ran in this record: record with --schemes FILE"
    );
    // Target memory alone is not a scheme.
    let mut frames = snapshots(10, |_| MIB);
    frames.push(memory(S, 0, MIB, 0, 0));
    let err = schemes(&header(1), by_time(frames), &SchemesOptions::default()).unwrap_err();
    assert!(matches!(err, ReportError::NoSchemes));
}

#[test]
fn missing_memory_and_snapshots_are_noted() {
    let report = schemes(&header(1), one_minute_of_schemes(), &rows_of(10)).unwrap();
    assert!(report.targets.is_empty());
    assert_eq!(report.refaults, None);
    assert!(
        report.notes.iter().any(|n| n.contains("no target memory")),
        "{:?}",
        report.notes
    );

    let frames = vec![
        stats(S, 0, "pageout", pageout_at(1)),
        memory(2 * S, 0, MIB, MIB, 0),
    ];
    let report = schemes(&header(1), frames, &SchemesOptions::default()).unwrap();
    assert_eq!(report.nr_snapshots, 0);
    assert_eq!(report.targets[0].refaults.mean_wss_bytes, None);
    assert!(
        report.notes.iter().any(|n| n.contains("no snapshots")),
        "{:?}",
        report.notes
    );
    render_text(&report);
}

#[test]
fn the_report_serialises_to_json() {
    let report: SchemesReport = schemes(&header(1), refault_record(MIB), &rows_of(60)).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["schemes"][0]["action"], "pageout");
    assert_eq!(json["schemes"][0]["stats"]["sz_applied"], MIB);
    assert_eq!(json["schemes"][0]["series"].as_array().unwrap().len(), 2);
    assert_eq!(json["targets"][0]["refaults"]["refaulted_bytes"], MIB);
    let pct = json["targets"][0]["refaults"]["pct_of_wss_per_min"]
        .as_f64()
        .unwrap();
    assert!((pct - 0.5).abs() < 1e-9);
    assert_eq!(json["refault_reference_pct_per_min"], 0.2);
    assert_eq!(json["targets"][0]["series"][0]["paged_out_bytes"], 10 * MIB);
}

/// Tried bytes that were not applied are explained by what the record noted about the action
/// (a dry-run preview promised more than the real run applied, and nothing said why).
#[test]
fn a_scheme_that_applied_less_than_it_tried_says_why() {
    let why = "pageout on process 7 took 0.0 of 4.6 MiB of pages it could have: the kernel \
               leaves pages shared with other processes";
    let mut frames = one_minute_of_schemes();
    frames.push(event(
        61 * S,
        EventKind::Note {
            text: why.to_string(),
        },
    ));
    frames.push(event(
        61 * S,
        EventKind::Note {
            text: "process_madvise(collapse) on process 7 failed: EINVAL".to_string(),
        },
    ));
    let report = schemes(&header(1), frames, &SchemesOptions::default()).unwrap();
    let pageout = report.schemes.iter().find(|s| s.scheme == 0).unwrap();
    assert_eq!(pageout.not_applied, [why]);
    // The stat scheme applies nothing by design, and no note is about it.
    let stat = report.schemes.iter().find(|s| s.scheme == 3).unwrap();
    assert!(stat.not_applied[0].contains("does not say why"), "{stat:?}");
    let text = render_text(&report);
    assert!(
        text.contains(
            "# scheme 0: 210.000 MiB of 240.000 MiB tried not applied: pageout on process 7 took"
        ),
        "{text}"
    );
}
