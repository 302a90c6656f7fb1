//! Reading damo's formats (the fixtures in tests/data hold the same 3-snapshot, 2-region record
//! in each format) and writing damo's json_compressed.

mod common;

use common::*;
use std::path::Path;
use udamon_record::damo::{self, DamoFormat};
use udamon_record::model::{Frame, Header, RegionStat, TargetSnapshot};
use udamon_record::{DamageKind, Format, RecordError, detect_format, open_any};

/// The record of `min.json`: target 42, 5 ms / 100 ms / 1 s, snapshots [1.0 s, 1.1 s),
/// [1.1, 1.2), [1.2, 1.3), each with [4096, 1052672) accessed in all 20 samples and
/// [1052672, 4198400) never, both of age 0, 1, 2.
fn check_min_record(header: &Header, frames: &[Frame], ages: bool) {
    assert_eq!(header.access_source.name, "damo");
    assert_eq!(header.targets.len(), 1);
    assert_eq!(header.targets[0].cmdline, "damo target 42");
    assert_eq!(header.intervals.sample_us, 5_000);
    assert_eq!(header.intervals.aggr_us, 100_000);
    let snaps = snapshots(frames);
    assert_eq!(snaps.len(), 3);
    for (i, s) in snaps.iter().enumerate() {
        let i = i as u64;
        assert_eq!(s.start_ns, 1_000_000_000 + i * 100_000_000);
        assert_eq!(s.end_ns, 1_100_000_000 + i * 100_000_000);
        assert_eq!((s.sample_us, s.aggr_us), (5_000, 100_000));
        let age = if ages { i as u32 } else { 0 };
        assert_eq!(
            s.targets,
            [TargetSnapshot {
                target: 0,
                regions: vec![
                    RegionStat {
                        start: 4096,
                        end: 1052672,
                        nr_accesses: 20,
                        age,
                        raw_samples: 0,
                        read_samples: 0,
                        write_samples: 0,
                        touched_bytes: None,
                    },
                    RegionStat {
                        start: 1052672,
                        end: 4198400,
                        nr_accesses: 0,
                        age,
                        raw_samples: 0,
                        read_samples: 0,
                        write_samples: 0,
                        touched_bytes: None,
                    },
                ],
            }]
        );
    }
}

#[test]
fn every_fixture_format_is_detected_and_read() {
    let cases = [
        ("min.json", DamoFormat::Json, true),
        ("min.json_compressed", DamoFormat::JsonCompressed, true),
        ("min.perf_script", DamoFormat::PerfScript, true),
        ("min.record_v2", DamoFormat::Binary, false),
    ];
    for (name, format, ages) in cases {
        let path = data_file(name);
        assert_eq!(
            detect_format(&path).unwrap(),
            Format::Damo(format),
            "{name}"
        );
        let mut r = open_any(&path).unwrap();
        let header = r.header().clone();
        let frames: Vec<Frame> = r.by_ref().collect();
        assert!(r.damage().is_empty(), "{name}: {:?}", r.damage());
        check_min_record(&header, &frames, ages);
    }
}

#[test]
fn formats_without_intervals_say_what_was_inferred() {
    let r = damo::read(data_file("min.perf_script"), DamoFormat::PerfScript).unwrap();
    let reason = &r.header.access_source.reason;
    assert!(reason.contains("intervals not recorded"), "{reason}");
    assert!(reason.contains("start times inferred"), "{reason}");
    let r = damo::read(data_file("min.record_v2"), DamoFormat::Binary).unwrap();
    assert!(r.header.access_source.reason.contains("ages not recorded"));
    let r = damo::read(data_file("min.json"), DamoFormat::Json).unwrap();
    assert_eq!(
        r.header.access_source.reason,
        "read from a damo json record"
    );
}

#[test]
fn damo_string_encoded_numbers_are_read() {
    // As damo writes them: numeric strings, comma-grouped addresses, units; plus an access rate
    // given only in percent and an age only in microseconds.
    let text = r#"[{"kdamond_idx": "0", "context_idx": "0",
        "intervals": {"sample_us": "5 ms", "aggr_us": "100 ms", "ops_update_us": "1 s"},
        "scheme_idx": null, "target_id": "42", "data_source": "unknown",
        "snapshots": [{"start_time": "1,000,000,000", "end_time": "1.100 s",
            "regions": [
                {"start": "94,827,419,009,024", "end": "94,827,420,057,600",
                 "nr_accesses": {"samples": "20", "percent": "100 %"},
                 "age": {"usec": "200 ms", "aggr_intervals": "2"},
                 "probe_hits": [], "sz_filter_passed": "0 B"},
                {"start": "94,827,420,057,600", "end": "max",
                 "nr_accesses": {"samples": null, "percent": "25 %"},
                 "age": {"usec": "1 s", "aggr_intervals": null}}],
            "total_bytes": "1.000 MiB", "damos_stats": null}]}]"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strings.json");
    std::fs::write(&path, text).unwrap();
    let mut r = open_any(&path).unwrap();
    assert_eq!(r.format(), Format::Damo(DamoFormat::Json));
    let frames: Vec<Frame> = r.by_ref().collect();
    let s = snapshots(&frames)[0];
    assert_eq!((s.start_ns, s.end_ns), (1_000_000_000, 1_100_000_000));
    let regions = &s.targets[0].regions;
    assert_eq!(
        (
            regions[0].start,
            regions[0].end,
            regions[0].nr_accesses,
            regions[0].age
        ),
        (94_827_419_009_024, 94_827_420_057_600, 20, 2)
    );
    // 25 % of 20 samples; 1 s of 100 ms aggregations.
    assert_eq!(
        (regions[1].end, regions[1].nr_accesses, regions[1].age),
        (u64::MAX, 5, 10)
    );
}

#[test]
fn bad_damo_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(
        &path,
        r#"[{"target_id": 1, "snapshots": [{"start_time": "soon"}]}]"#,
    )
    .unwrap();
    let e = open_any(&path).err().expect("read");
    assert!(matches!(e, RecordError::Damo { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot read this damo record", path.display())),
        "{e}"
    );

    let path = dir.path().join("bad-number.json");
    std::fs::write(
        &path,
        r#"[{"target_id": 1, "snapshots": [{"start_time": "soon", "end_time": 1, "regions": []}]}]"#,
    )
    .unwrap();
    let e = open_any(&path).err().expect("read");
    assert!(e.to_string().contains("record 0: snapshot 0"), "{e}");
    assert!(e.to_string().contains("\"soon\""), "{e}");

    // A json_compressed file cut short.
    let full = std::fs::read(data_file("min.json_compressed")).unwrap();
    let path = dir.path().join("cut.json_compressed");
    std::fs::write(&path, &full[..full.len() / 2]).unwrap();
    let e = open_any(&path).err().expect("read");
    assert!(e.to_string().contains("truncated"), "{e}");
}

#[test]
fn truncated_text_and_binary_records_keep_complete_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    // perf_script without its last line: the third snapshot has one of two regions.
    let text = std::fs::read(data_file("min.perf_script")).unwrap();
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(
            text.iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let path = dir.path().join("cut.perf_script");
    std::fs::write(&path, &text[..line_starts[5]]).unwrap();
    let r = damo::read(&path, DamoFormat::PerfScript).unwrap();
    assert_eq!(snapshots(&r.frames).len(), 2);
    assert_eq!(r.damage.len(), 1);
    assert_eq!(r.damage[0].offset, line_starts[4] as u64);
    assert!(matches!(r.damage[0].kind, DamageKind::TruncatedTail { .. }));

    // The binary record cut inside its third block (each block: 20 + 12 + 2 * 20 bytes).
    let bin = std::fs::read(data_file("min.record_v2")).unwrap();
    let third_block = 20 + 2 * 72;
    assert_eq!(bin.len(), 20 + 3 * 72);
    let path = dir.path().join("cut.record");
    std::fs::write(&path, &bin[..third_block + 30]).unwrap();
    let r = damo::read(&path, DamoFormat::Binary).unwrap();
    assert_eq!(snapshots(&r.frames).len(), 2);
    assert_eq!(r.damage.len(), 1);
    assert_eq!(r.damage[0].offset, third_block as u64);
    assert_eq!(r.damage[0].kind, DamageKind::TruncatedTail { bytes: 30 });
}

fn write_damo(path: &Path, header: &Header, frames: &[Frame]) {
    damo::write_json_compressed_file(path, header, || Ok(frames.to_vec())).unwrap();
}

#[test]
fn json_compressed_round_trip_keeps_regions_and_times() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.json_compressed");
    let h = header(2);
    let mut frames = sample_frames(12);
    // Intervals changed by auto-tuning in some snapshots.
    for f in frames.iter_mut().skip(5) {
        if let Frame::Snapshot(s) = f {
            s.sample_us = 7_300;
            s.aggr_us = 146_000;
        }
    }
    write_damo(&path, &h, &frames);
    assert_eq!(&std::fs::read(&path).unwrap()[..2], b"\x78\x9c");
    assert_eq!(
        detect_format(&path).unwrap(),
        Format::Damo(DamoFormat::JsonCompressed)
    );
    let back = damo::read(&path, DamoFormat::JsonCompressed).unwrap();
    assert!(back.damage.is_empty());
    assert_eq!(back.header.intervals, h.intervals);
    let cmdlines: Vec<&str> = back
        .header
        .targets
        .iter()
        .map(|t| t.cmdline.as_str())
        .collect();
    assert_eq!(cmdlines, ["damo target 1000", "damo target 1001"]);
    assert_eq!(snapshots(&back.frames), snapshots(&frames));
}

#[test]
fn json_compressed_writes_one_record_per_target_with_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.json_compressed");
    // The header lists three targets; only targets 0 and 2 appear in snapshots.
    let h = header(3);
    let mut frames = sample_frames(4);
    for f in &mut frames {
        if let Frame::Snapshot(s) = f {
            s.targets[1].target = 2;
        }
    }
    let mut passes = 0;
    damo::write_json_compressed_file(&path, &h, || {
        passes += 1;
        Ok(frames.clone())
    })
    .unwrap();
    assert_eq!(passes, 3);
    let text = {
        use std::io::Read;
        let mut s = String::new();
        flate2::read::ZlibDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        s
    };
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let records = json.as_array().unwrap();
    let ids: Vec<u64> = records
        .iter()
        .map(|r| r["target_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1000, 1002]);
    for r in records {
        assert_eq!(r["intervals"]["aggr_us"], 100_000);
        assert_eq!(r["snapshots"].as_array().unwrap().len(), 4);
        let region = &r["snapshots"][0]["regions"][0];
        assert!(region["nr_accesses"]["samples"].is_u64());
        assert!(region["age"]["aggr_intervals"].is_u64());
    }
}
