//! Every reader refuses a region that does not start below its end (reports would show it as
//! 16 EiB), saying where: a byte offset for udamon records and damo's text and binary formats,
//! the record and snapshot index for damo's JSON.

mod common;

use common::*;
use std::fs;
use udamon_record::model::{Event, EventKind, Frame, MappingRecord, RegionStat};
use udamon_record::{RecordError, open_any};

fn read_all(path: &std::path::Path) -> (Vec<Frame>, Vec<String>) {
    let mut r = open_any(path).unwrap();
    let frames: Vec<Frame> = r.by_ref().collect();
    let damage = r.damage().iter().map(ToString::to_string).collect();
    (frames, damage)
}

#[test]
fn udamon_records_skip_the_snapshot_with_an_inverted_region() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.data");
    let mut frames = sample_frames(3);
    let inverted = Frame::Snapshot(snapshot(
        3,
        vec![(
            0,
            vec![RegionStat {
                start: 0x2000,
                end: 0x1000,
                nr_accesses: 1,
                age: 0,
                raw_samples: 0,
                read_samples: 0,
                write_samples: 0,
                touched_bytes: None,
            }],
        )],
    ));
    frames.push(inverted);
    frames.extend(sample_frames(1));
    write_record(&path, &header(2), &frames, false);
    let offsets = frame_offsets(&header(2), &frames, false);
    let bad_at = offsets[frames.len() - 2];
    let (read, damage) = read_all(&path);
    assert_eq!(
        read.len(),
        frames.len() - 1,
        "only the bad snapshot is left out"
    );
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert!(
        damage[0].starts_with(&format!("byte {bad_at}: "))
            && damage[0].contains("region 0: region start 0x2000 is not below its end 0x1000"),
        "{}",
        damage[0]
    );
}

#[test]
fn udamon_records_skip_the_snapshot_whose_regions_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.data");
    let region = |start, end| RegionStat {
        start,
        end,
        nr_accesses: 0,
        age: 0,
        raw_samples: 0,
        read_samples: 0,
        write_samples: 0,
        touched_bytes: None,
    };
    let frames = vec![
        Frame::Snapshot(snapshot(0, vec![(0, vec![region(0x1000, 0x3000)])])),
        Frame::Snapshot(snapshot(
            1,
            vec![(0, vec![region(0x1000, 0x3000), region(0x2000, 0x4000)])],
        )),
    ];
    write_record(&path, &header(1), &frames, true);
    let (read, damage) = read_all(&path);
    assert_eq!(read, frames[..1]);
    assert!(
        damage[0].contains(
            "target 0: region 1: starts at 0x2000, below the previous region's end 0x3000"
        ),
        "{damage:?}"
    );
}

#[test]
fn damo_json_names_the_snapshot_and_region() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    let text = fs::read_to_string(data_file("min.json")).unwrap();
    // The second snapshot's first region: start 4096, end 1052672 → start after the end.
    let second = text
        .match_indices(r#""start": 4096, "end": 1052672"#)
        .nth(1)
        .unwrap()
        .0;
    let mut bad = text.clone();
    bad.replace_range(
        second..second + r#""start": 4096, "end": 1052672"#.len(),
        r#""start": 1052672, "end": 4096"#,
    );
    fs::write(&path, bad).unwrap();
    let e = open_any(&path).err().expect("refused");
    assert!(matches!(e, RecordError::Damo { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains(
            "record 0: snapshot 1: region 0: region start 0x101000 is not below its end 0x1000"
        ),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
}

#[test]
fn damo_perf_script_and_binary_report_the_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(data_file("min.perf_script")).unwrap();
    let line = text.lines().nth(2).unwrap();
    let at = text.find(line).unwrap();
    let path = dir.path().join("bad.perf_script");
    fs::write(
        &path,
        text.replacen("4096-1052672: 20 1", "1052672-4096: 20 1", 1),
    )
    .unwrap();
    let (_, damage) = read_all(&path);
    assert!(
        damage.iter().any(|d| d.starts_with(&format!("byte {at}: "))
            && d.contains("region start 0x101000 is not below its end 0x1000")),
        "{damage:?}"
    );

    let mut bytes = fs::read(data_file("min.record_v2")).unwrap();
    let (good_frames, _) = read_all(&data_file("min.record_v2"));
    // After the 20-byte signature and version: the first block's time (16 bytes), target count
    // (4), target id (8) and region count (4); then its first region's start.
    let first_start = 20 + 16 + 4 + 8 + 4;
    bytes[first_start..first_start + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let path = dir.path().join("bad.record");
    fs::write(&path, bytes).unwrap();
    let (frames, damage) = read_all(&path);
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert!(
        damage[0].starts_with("byte 20: ") && damage[0].contains("region 0: region start"),
        "{}",
        damage[0]
    );
    assert_eq!(
        frames.len(),
        good_frames.len() - 1,
        "the other blocks still read"
    );
}

#[test]
fn a_mappings_event_with_overlapping_mappings_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.data");
    let mapping = |start, end| MappingRecord {
        start,
        end,
        perms: "rw-p".into(),
        offset: 0,
        name: "[anon]".into(),
    };
    let mappings = |list| {
        Frame::Event(Event {
            time_ns: 0,
            kind: EventKind::Mappings {
                target: 0,
                mappings: list,
            },
        })
    };
    let frames = vec![
        mappings(vec![mapping(0x1000, 0x3000), mapping(0x3000, 0x4000)]),
        mappings(vec![mapping(0x1000, 0x3000), mapping(0x2000, 0x4000)]),
    ];
    write_record(&path, &header(1), &frames, false);
    let (read, damage) = read_all(&path);
    assert_eq!(read, frames[..1]);
    assert!(
        damage[0].contains("mapping 1: starts at 0x2000, below the previous region's end"),
        "{damage:?}"
    );
}
