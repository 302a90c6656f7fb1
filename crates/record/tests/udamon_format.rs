//! udamon's record format: round trips, the documented byte layout, and survival of truncation
//! and corruption.

mod common;

use common::*;
use proptest::prelude::*;
use std::io::Write;
use std::path::Path;
use udamon_record::model::{Event, EventKind, Frame, RegionStat, Snapshot, TargetSnapshot};
use udamon_record::{
    Damage, DamageKind, FORMAT_VERSION, RecordError, RecordReader, RecordWriter, WriterOptions,
};

fn read_all(path: &Path) -> (Vec<Frame>, Vec<Damage>) {
    let mut r = RecordReader::open(path).unwrap();
    let frames: Vec<Frame> = r.by_ref().collect();
    (frames, r.damage().to_vec())
}

fn temp_path(dir: &tempfile::TempDir, name: &str) -> std::path::PathBuf {
    dir.path().join(name)
}

#[test]
fn frames_and_header_round_trip_plain_and_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header(2);
    h.format_version = 0; // The writer stamps its own version.
    let frames = sample_frames(30);
    for compress in [false, true] {
        let path = temp_path(&dir, "r.udamon");
        write_record(&path, &h, &frames, compress);
        let r = RecordReader::open(&path).unwrap();
        assert_eq!(r.header().format_version, FORMAT_VERSION);
        assert_eq!(r.header().targets, h.targets);
        assert_eq!(r.header().start_time_unix_ns, h.start_time_unix_ns);
        let (read, damage) = read_all(&path);
        assert_eq!(read, frames, "compress={compress}");
        assert!(damage.is_empty(), "{damage:?}");
    }
}

#[test]
fn compression_makes_realistic_records_smaller() {
    let dir = tempfile::tempdir().unwrap();
    let frames = sample_frames(30);
    let mut sizes = Vec::new();
    for compress in [false, true] {
        let path = temp_path(&dir, "r.udamon");
        write_record(&path, &header(2), &frames, compress);
        sizes.push(std::fs::metadata(&path).unwrap().len());
    }
    assert!(sizes[1] < sizes[0], "{sizes:?}");
}

/// Regions anywhere in the address space, in address order without overlap (readers refuse
/// others).
fn arb_scattered_regions() -> impl Strategy<Value = Vec<RegionStat>> {
    (
        prop::collection::vec(any::<u64>(), 0..40),
        prop::collection::vec((any::<u32>(), any::<u32>(), any::<u32>()), 20),
    )
        .prop_map(|(mut bounds, counters)| {
            bounds.sort_unstable();
            bounds.dedup();
            bounds
                .chunks_exact(2)
                .zip(counters)
                .map(|(b, (nr_accesses, age, raw_samples))| RegionStat {
                    start: b[0],
                    end: b[1],
                    nr_accesses,
                    age,
                    raw_samples,
                    // Any values in a region with raw samples; a region without has none.
                    read_samples: if raw_samples > 0 { age } else { 0 },
                    write_samples: if raw_samples > 0 { nr_accesses } else { 0 },
                    touched_bytes: None,
                })
                .collect()
        })
}

/// Sorted, adjacent-or-gapped, page-aligned regions: what monitors produce.
fn arb_sorted_regions() -> impl Strategy<Value = Vec<RegionStat>> {
    prop::collection::vec(
        (0u64..4, 1u64..5000, 0u32..=20, 0u32..100_000, 0u32..50),
        0..60,
    )
    .prop_map(|v| {
        let mut addr = 0x7f00_0000_0000u64;
        v.into_iter()
            .map(|(gap, size, nr_accesses, age, raw_samples)| {
                let start = addr + gap * 4096;
                addr = start + size * 4096;
                RegionStat {
                    start,
                    end: addr,
                    nr_accesses,
                    age,
                    raw_samples,
                    read_samples: raw_samples / 2,
                    write_samples: raw_samples / 3,
                    touched_bytes: None,
                }
            })
            .collect()
    })
}

fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
    let regions = prop_oneof![arb_scattered_regions(), arb_sorted_regions()];
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec((any::<u32>(), regions), 0..4),
    )
        .prop_map(|(start_ns, end_ns, sample_us, aggr_us, targets)| Snapshot {
            start_ns,
            end_ns,
            sample_us,
            aggr_us,
            targets: targets
                .into_iter()
                .map(|(target, regions)| TargetSnapshot { target, regions })
                .collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_snapshots_round_trip(snapshots in prop::collection::vec(arb_snapshot(), 0..8), compress: bool) {
        let mut w = RecordWriter::new(Vec::new(), "memory", &header(1), WriterOptions { compress }).unwrap();
        for s in &snapshots {
            w.write_snapshot(s).unwrap();
        }
        let bytes = w.finish().unwrap();
        let mut r = RecordReader::from_reader(std::io::Cursor::new(bytes), "memory").unwrap();
        let read: Vec<Frame> = r.by_ref().collect();
        let expected: Vec<Frame> = snapshots.into_iter().map(Frame::Snapshot).collect();
        prop_assert_eq!(read, expected);
        prop_assert!(r.damage().is_empty());
    }
}

/// Builds a record byte by byte from the layout in the crate documentation, independently of the
/// writer, and reads it back.
#[test]
fn the_documented_layout_reads_back() {
    fn frame(out: &mut Vec<u8>, type_byte: u8, payload: &[u8]) {
        let len = (payload.len() as u32).to_le_bytes();
        out.extend_from_slice(&[0xF9, b'U', b'D', b'F', type_byte]);
        out.extend_from_slice(&len);
        out.extend_from_slice(payload);
        let mut crc_input = vec![type_byte];
        crc_input.extend_from_slice(&len);
        crc_input.extend_from_slice(payload);
        out.extend_from_slice(&crc32fast::hash(&crc_input).to_le_bytes());
    }
    let h = header(1);
    let mut bytes = b"\x89UDAMON\n".to_vec();
    frame(&mut bytes, 1, &serde_json::to_vec(&h).unwrap());
    // start 1000 ns, duration 300 (0xac 0x02), sample 5, aggr 100, one target: index 0, two
    // regions, shift 12; region [0x1000, 0x3000): gap 1 (zigzag 2), size 2, nr_accesses 3,
    // age 4, raw 5; region [0x5000, 0x6000): gap 2 (zigzag 4), size 1, 0, 1, 0.
    let snapshot = [
        0xe8, 0x07, 0xac, 0x02, 5, 100, 1, 0, 2, 12, 2, 2, 3, 4, 5, 4, 1, 0, 1, 0,
    ];
    frame(&mut bytes, 2, &snapshot);
    frame(&mut bytes, 3, br#"{"time_ns":7,"kind":"note","text":"hi"}"#);
    let mut r = RecordReader::from_reader(std::io::Cursor::new(bytes), "handmade").unwrap();
    assert_eq!(r.header(), &h);
    let frames: Vec<Frame> = r.by_ref().collect();
    let region = |start, end, nr_accesses, age, raw_samples| RegionStat {
        start,
        end,
        nr_accesses,
        age,
        raw_samples,
        read_samples: 0,
        write_samples: 0,
        touched_bytes: None,
    };
    assert_eq!(
        frames,
        vec![
            Frame::Snapshot(Snapshot {
                start_ns: 1000,
                end_ns: 1300,
                sample_us: 5,
                aggr_us: 100,
                targets: vec![TargetSnapshot {
                    target: 0,
                    regions: vec![
                        region(0x1000, 0x3000, 3, 4, 5),
                        region(0x5000, 0x6000, 0, 1, 0)
                    ],
                }],
            }),
            Frame::Event(Event {
                time_ns: 7,
                kind: EventKind::Note { text: "hi".into() },
            }),
        ]
    );
    assert!(r.damage().is_empty());
}

#[test]
fn cut_anywhere_in_the_last_frame_keeps_the_others_and_reports_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let h = header(2);
    let frames = sample_frames(6);
    for compress in [false, true] {
        let path = temp_path(&dir, "full");
        write_record(&path, &h, &frames, compress);
        let full = std::fs::read(&path).unwrap();
        let offsets = frame_offsets(&h, &frames, compress);
        let last = offsets[offsets.len() - 2];
        assert_eq!(*offsets.last().unwrap(), full.len() as u64);
        let cut_path = temp_path(&dir, "cut");
        for cut in last + 1..full.len() as u64 {
            std::fs::write(&cut_path, &full[..cut as usize]).unwrap();
            let (read, damage) = read_all(&cut_path);
            assert_eq!(read, frames[..frames.len() - 1], "cut at {cut}");
            assert_eq!(
                damage,
                vec![Damage {
                    offset: last,
                    kind: DamageKind::TruncatedTail { bytes: cut - last },
                }],
                "cut at {cut}"
            );
        }
        // Cut exactly between frames: nothing is damaged.
        std::fs::write(&cut_path, &full[..last as usize]).unwrap();
        let (read, damage) = read_all(&cut_path);
        assert_eq!(read, frames[..frames.len() - 1]);
        assert!(damage.is_empty());
    }
}

#[test]
fn a_damaged_middle_frame_is_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let h = header(2);
    let frames = sample_frames(6);
    let offsets = frame_offsets(&h, &frames, false);
    let path = temp_path(&dir, "r");
    write_record(&path, &h, &frames, false);
    let good = std::fs::read(&path).unwrap();
    let middle = frames.len() / 2;
    let (start, end) = (offsets[middle], offsets[middle + 1]);
    let mut expected = frames.clone();
    expected.remove(middle);
    let damaged_path = temp_path(&dir, "damaged");
    for at in start..end {
        for flip in [0x01u8, 0xff] {
            let mut bad = good.clone();
            bad[at as usize] ^= flip;
            std::fs::write(&damaged_path, &bad).unwrap();
            let (read, damage) = read_all(&damaged_path);
            assert_eq!(read, expected, "byte {at} ^ {flip:#x}");
            assert_eq!(damage.len(), 1, "byte {at} ^ {flip:#x}: {damage:?}");
            assert_eq!(
                damage[0].offset, start,
                "byte {at} ^ {flip:#x}: {}",
                damage[0]
            );
            let skipped = match damage[0].kind {
                DamageKind::ChecksumMismatch { skipped }
                | DamageKind::Garbage { skipped }
                | DamageKind::BadLength { skipped, .. } => skipped,
                ref other => panic!("byte {at}: unexpected {other:?}"),
            };
            assert_eq!(skipped, end - start, "byte {at} ^ {flip:#x}");
        }
    }
}

#[test]
fn garbage_between_frames_and_unknown_frame_types_are_skipped() {
    let h = header(2);
    let frames = sample_frames(4);
    let offsets = frame_offsets(&h, &frames, false);
    let mut w = RecordWriter::new(Vec::new(), "memory", &h, WriterOptions::default()).unwrap();
    for f in &frames {
        if let Frame::Snapshot(s) = f {
            w.write_snapshot(s).unwrap();
        } else if let Frame::Event(e) = f {
            w.write_event(e).unwrap();
        }
    }
    let good = w.finish().unwrap();

    // 13 bytes of junk (including a false sync marker) after the second frame.
    let at = offsets[2] as usize;
    let mut bytes = good[..at].to_vec();
    bytes.extend_from_slice(b"junk\xF9UDF\x02junk");
    bytes.extend_from_slice(&good[at..]);
    let mut r = RecordReader::from_reader(std::io::Cursor::new(bytes), "junk").unwrap();
    assert_eq!(r.by_ref().collect::<Vec<_>>(), frames);
    assert_eq!(
        r.damage(),
        [Damage {
            offset: at as u64,
            kind: DamageKind::Garbage { skipped: 13 },
        }]
    );

    // A well-formed frame of a type this reader does not know (as a newer writer may add).
    let mut unknown = vec![0xF9, b'U', b'D', b'F', 0x09, 2, 0, 0, 0, b'h', b'i'];
    unknown.extend_from_slice(&crc32fast::hash(&[0x09, 2, 0, 0, 0, b'h', b'i']).to_le_bytes());
    let mut bytes = good[..at].to_vec();
    bytes.extend_from_slice(&unknown);
    bytes.extend_from_slice(&good[at..]);
    let mut r = RecordReader::from_reader(std::io::Cursor::new(bytes), "unknown").unwrap();
    assert_eq!(r.by_ref().collect::<Vec<_>>(), frames);
    assert_eq!(
        r.damage(),
        [Damage {
            offset: at as u64,
            kind: DamageKind::UnknownFrameType {
                frame_type: 0x09,
                skipped: unknown.len() as u64,
            },
        }]
    );
}

#[test]
fn concatenated_records_read_on_with_the_second_header_reported() {
    let h = header(1);
    let frames = sample_frames(2);
    let one = |frames: &[Frame]| {
        let mut w = RecordWriter::new(Vec::new(), "m", &h, WriterOptions::default()).unwrap();
        for f in frames {
            if let Frame::Snapshot(s) = f {
                w.write_snapshot(s).unwrap();
            }
        }
        w.finish().unwrap()
    };
    let a = one(&frames);
    let mut bytes = a.clone();
    bytes.extend_from_slice(&one(&frames));
    let mut r = RecordReader::from_reader(std::io::Cursor::new(bytes), "cat").unwrap();
    let read: Vec<Frame> = r.by_ref().collect();
    let snapshots: Vec<Frame> = frames
        .iter()
        .filter(|f| matches!(f, Frame::Snapshot(_)))
        .cloned()
        .collect();
    assert_eq!(read, [snapshots.clone(), snapshots].concat());
    // The second signature is garbage, then its header frame is undecodable here.
    let damage = r.damage();
    assert_eq!(damage.len(), 2, "{damage:?}");
    assert_eq!(damage[0].offset, a.len() as u64);
    assert_eq!(damage[0].kind, DamageKind::Garbage { skipped: 8 });
    assert!(
        damage[1].to_string().contains("second record header"),
        "{}",
        damage[1]
    );
}

#[test]
fn every_frame_reaches_the_file_as_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = temp_path(&dir, "live");
    let frames = sample_frames(5);
    let mut w = RecordWriter::create(&path, &header(2), WriterOptions { compress: true }).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), w.bytes_written());
    for (i, f) in frames.iter().enumerate() {
        match f {
            Frame::Snapshot(s) => w.write_snapshot(s).unwrap(),
            Frame::Event(e) => w.write_event(e).unwrap(),
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), w.bytes_written());
        // Without finish (as after SIGKILL), every frame so far reads back.
        let (read, damage) = read_all(&path);
        assert_eq!(read, frames[..=i]);
        assert!(damage.is_empty());
    }
}

#[test]
fn empty_foreign_and_damaged_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let open_err = |name: &str, bytes: &[u8]| {
        let path = temp_path(&dir, name);
        std::fs::write(&path, bytes).unwrap();
        match RecordReader::open(&path) {
            Ok(_) => panic!("{name} opened"),
            Err(e) => {
                assert!(!e.to_string().contains('\n'), "{e}");
                e
            }
        }
    };

    let e = open_err("udamon.data", b"");
    assert!(matches!(e, RecordError::Empty { .. }));
    assert!(
        e.to_string()
            .ends_with("udamon.data: empty file, nothing was recorded"),
        "{e}"
    );

    let e = open_err(
        "x.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06",
    );
    assert!(matches!(e, RecordError::NotARecord { .. }));
    assert!(
        e.to_string().ends_with(r#"x.png: not a udamon or damo record (starts with "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")"#),
        "{e}"
    );

    let mut rng = Lcg(99);
    let random: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    let e = open_err("random", &random);
    assert!(matches!(e, RecordError::NotARecord { .. }), "{e}");
    assert!(udamon_record::detect_format(temp_path(&dir, "random")).is_err());

    let e = open_err(
        "damo.json",
        std::fs::read(data_file("min.json")).unwrap().as_slice(),
    );
    assert!(
        matches!(
            e,
            RecordError::NotUdamon {
                found: "damo json",
                ..
            }
        ),
        "{e}"
    );

    // Damaged headers.
    let path = temp_path(&dir, "good");
    write_record(&path, &header(1), &sample_frames(2), false);
    let good = std::fs::read(&path).unwrap();
    let e = open_err("magic-only", &good[..8]);
    assert!(e.to_string().contains("before writing the header"), "{e}");
    let e = open_err("short-magic", &good[..5]);
    assert!(e.to_string().contains("inside the signature"), "{e}");
    let e = open_err("cut-header", &good[..40]);
    assert!(e.to_string().contains("ends inside the header"), "{e}");
    // A flipped header with no frame after it leaves nothing to salvage.
    let path = temp_path(&dir, "header-only");
    write_record(&path, &header(1), &[], false);
    let mut bad = std::fs::read(&path).unwrap();
    bad[30] ^= 0x20;
    let e = open_err("flipped-header", &bad);
    assert!(matches!(e, RecordError::CorruptHeader { .. }), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
}

#[test]
fn the_frames_after_a_damaged_header_are_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = temp_path(&dir, "r.data");
    let frames = sample_frames(4);
    write_record(&path, &header(2), &frames, false);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[30] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let mut r = RecordReader::open(&path).expect("salvaged");
    assert!(
        r.header().targets.is_empty(),
        "the header's facts are unknown"
    );
    let first = snapshots(&frames)[0];
    assert_eq!(
        (r.header().intervals.sample_us, r.header().intervals.aggr_us),
        (first.sample_us, first.aggr_us),
        "intervals from the first snapshot"
    );
    let read: Vec<Frame> = r.by_ref().collect();
    assert_eq!(read, frames, "every frame after the header");
    let damage: Vec<String> = r.damage().iter().map(ToString::to_string).collect();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert!(
        damage[0]
            .starts_with("byte 8: damaged record header (the header frame fails its checksum)"),
        "{}",
        damage[0]
    );
}

#[test]
fn a_newer_format_version_is_refused() {
    let mut h = header(1);
    h.format_version = FORMAT_VERSION + 1;
    let payload = serde_json::to_vec(&h).unwrap();
    let len = (payload.len() as u32).to_le_bytes();
    let mut bytes = b"\x89UDAMON\n\xF9UDF\x01".to_vec();
    bytes.extend_from_slice(&len);
    bytes.extend_from_slice(&payload);
    let mut crc_input = vec![1u8];
    crc_input.extend_from_slice(&len);
    crc_input.extend_from_slice(&payload);
    bytes.extend_from_slice(&crc32fast::hash(&crc_input).to_le_bytes());
    let Err(e) = RecordReader::from_reader(std::io::Cursor::new(bytes), "new.udamon") else {
        panic!("opened");
    };
    assert!(matches!(e, RecordError::NewerFormat { version, .. } if version == FORMAT_VERSION + 1));
}

/// Bytes per region of a 1000-region snapshot with realistic values (`realistic_regions`):
/// at most 1 (gap) + 2 (size < 2^14 pages) + 1 (nr_accesses <= 20) + 2 (age < 2^14) +
/// 1 (raw samples < 8) = 7 bytes, 3 more for the one-in-100 gaps of up to 2^20 pages, 2 more
/// (read and write samples < 8) for a region with raw samples, and about 60 bytes for the
/// frame, the times and the first region's absolute address.
#[test]
fn a_realistic_snapshot_takes_at_most_7_bytes_per_region() {
    let mut rng = Lcg(1);
    let snapshot = snapshot(0, vec![(0, realistic_regions(&mut rng, 1000))]);
    let sampled = snapshot.targets[0]
        .regions
        .iter()
        .filter(|r| r.raw_samples > 0)
        .count() as u64;
    let mut sizes = Vec::new();
    for compress in [false, true] {
        let mut w =
            RecordWriter::new(Vec::new(), "m", &header(1), WriterOptions { compress }).unwrap();
        let before = w.bytes_written();
        w.write_snapshot(&snapshot).unwrap();
        sizes.push(w.bytes_written() - before);
    }
    assert!(
        sizes[0] <= 7 * 1000 + 3 * 10 + 2 * sampled + 60,
        "{} bytes, {sampled} regions with samples",
        sizes[0]
    );
    assert!(sizes[1] < sizes[0], "{sizes:?}");
}

#[test]
fn a_failing_sink_stops_the_writer_with_an_io_error() {
    struct Full(usize);
    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "disk full",
                ));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let frames = sample_frames(3);
    let Frame::Snapshot(s) = &frames[0] else {
        unreachable!()
    };
    let mut w = RecordWriter::new(
        Full(2000),
        "full.udamon",
        &header(1),
        WriterOptions::default(),
    )
    .unwrap();
    let mut result = Ok(());
    for _ in 0..100 {
        result = w.write_snapshot(s);
        if result.is_err() {
            break;
        }
    }
    let e = result.unwrap_err();
    assert!(matches!(e, RecordError::Io { .. }));
    assert_eq!(e.to_string(), "full.udamon: disk full");
    assert!(matches!(
        w.write_snapshot(s),
        Err(RecordError::WriterFailed { .. })
    ));
}
