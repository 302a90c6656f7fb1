//! Targets that join a record while monitoring runs (processes forked by a monitored one): the
//! recorder announces them before any snapshot names them, the reader and [`Targets`] follow
//! them, damo conversion gives them records of their own, and version 1 records still read.

mod common;

use common::{header, snapshot, snapshots, write_record};
use std::ops::ControlFlow;
use udamon_core::testing::TestOps;
use udamon_core::{AddrRange, Attrs, Context, NoCallbacks, SampledAccess, Target, VirtualClock};
use udamon_record::damo::{self, DamoFormat};
use udamon_record::model::{Event, EventKind, Frame, Header, RegionStat, Targets};
use udamon_record::{RecordReader, RecordWriter, Recorder, WriterOptions};

const START_US: u64 = 1_000_000;
/// The sampling interval at whose end the second target joins: the end of the second window
/// (20 intervals of 5 ms per 100 ms window).
const ADDED_AT: u64 = 40;

/// One sample per interval in each target; at interval [`ADDED_AT`] a second target joins.
fn forking() -> TestOps<'static> {
    let mut intervals = 0;
    TestOps::sampled(&[AddrRange::new(0, 1 << 20)], move |ctx| {
        intervals += 1;
        if intervals == ADDED_AT {
            ctx.add_target(Target::with_regions(
                Some(1001),
                &[AddrRange::new(1 << 30, (1 << 30) + (1 << 20))],
            ));
        }
        ctx.record_sampled_accesses(0, &mut [SampledAccess::at(4096)]);
        if ctx.targets().len() > 1 {
            ctx.record_sampled_accesses(1, &mut [SampledAccess::at((1 << 30) + 4096)]);
        }
    })
}

/// The announcement the owner writes after the step in which the target joined, once.
fn take_announcement(ctx: &Context, announced: &mut bool) -> Option<EventKind> {
    (ctx.targets().len() > 1 && !*announced).then(|| {
        *announced = true;
        EventKind::TargetAdded {
            target: 1,
            pid: Some(1001),
            parent: Some(0),
            cmdline: "workload-0".into(),
        }
    })
}

/// Records 100 sampling intervals of [`forking`], writing the second target's announcement after
/// the step in which it joined, and then whatever `after_step` writes (given the step, counting
/// from 1, and its time): the record's bytes.
fn record_forking(mut after_step: impl FnMut(u32, u64, &mut Recorder<&mut Vec<u8>>)) -> Vec<u8> {
    let mut buf = Vec::new();
    {
        let writer =
            RecordWriter::new(&mut buf, "memory", &header(1), WriterOptions::default()).unwrap();
        let mut callbacks = (Recorder::new(writer, START_US), NoCallbacks);
        let mut ctx = Context::new(Attrs::default(), 1).unwrap();
        ctx.add_target(Target::new(Some(1000)));
        ctx.set_start_time_us(START_US);
        let mut ops = forking();
        let mut announced = false;
        ctx.start(&mut ops).unwrap();
        for step in 1..=100 {
            let flow = ctx.step(&mut ops, &mut VirtualClock, &mut callbacks);
            assert_eq!(flow.unwrap(), ControlFlow::Continue(()));
            let time_ns = callbacks.0.time_ns(ctx.now_us());
            if let Some(kind) = take_announcement(&ctx, &mut announced) {
                callbacks.0.write_event(time_ns, kind).unwrap();
            }
            after_step(step, time_ns, &mut callbacks.0);
        }
        callbacks.0.finish().unwrap();
    }
    buf
}

#[test]
fn a_target_added_mid_run_is_announced_before_any_snapshot_names_it() {
    let buf = record_forking(|_, _, _| {});
    let reader = RecordReader::from_reader(std::io::Cursor::new(buf), "memory").unwrap();
    let header = reader.header().clone();
    let mut targets = Targets::new(&header);
    let mut per_snapshot = Vec::new();
    for frame in reader {
        targets.observe(&frame);
        if let Frame::Snapshot(s) = &frame {
            for t in &s.targets {
                assert!(
                    targets.get(t.target).is_some(),
                    "snapshot {} names target {} before its announcement",
                    per_snapshot.len(),
                    t.target
                );
            }
            per_snapshot.push(s.targets.len());
        }
    }
    // Windows 1 and 2 have one target (the second joined in the last interval of window 2, so
    // its snapshot leaves it out); windows 3 to 5 have both.
    assert_eq!(per_snapshot, [1, 1, 2, 2, 2]);
    let added = targets.get(1).unwrap();
    assert_eq!((added.pid, added.parent), (Some(1001), Some(0)));
    assert_eq!(added.cmdline, "workload-0");
}

/// A target leaves the snapshots with its exit: a helper process that lived a few milliseconds
/// was in every later snapshot with no regions, and reports listed it as monitored.
#[test]
fn a_target_is_in_no_snapshot_after_its_exit() {
    let buf = record_forking(|step, time_ns, recorder| {
        // In the middle of window 4, so window 3's snapshot holds it and window 4's not.
        if step == 70 {
            let exit = EventKind::Exit {
                target: 1,
                status: None,
            };
            recorder.write_event(time_ns, exit).unwrap();
        }
    });
    let reader = RecordReader::from_reader(std::io::Cursor::new(buf), "memory").unwrap();
    let per_snapshot: Vec<Vec<u32>> = reader
        .filter_map(|f| match f {
            Frame::Snapshot(s) => Some(s.targets.iter().map(|t| t.target).collect()),
            Frame::Event(_) => None,
        })
        .collect();
    assert_eq!(
        per_snapshot,
        [vec![0], vec![0], vec![0, 1], vec![0], vec![0]]
    );
}

/// A record whose header lists target 0; target 1 joins after two snapshots and exits.
fn frames_with_an_added_target() -> Vec<Frame> {
    let regions = |base: u64, hot: u32| {
        vec![
            RegionStat {
                start: base,
                end: base + (4 << 20),
                nr_accesses: hot,
                age: 1,
                raw_samples: hot,
                read_samples: 0,
                write_samples: 0,
                touched_bytes: None,
            },
            RegionStat {
                start: base + (4 << 20),
                end: base + (8 << 20),
                nr_accesses: 0,
                age: 3,
                raw_samples: 0,
                read_samples: 0,
                write_samples: 0,
                touched_bytes: None,
            },
        ]
    };
    let target = |target: u32, base: u64, hot: u32| (target, regions(base, hot));
    let event = |time_ns: u64, kind: EventKind| Frame::Event(Event { time_ns, kind });
    let mut frames = Vec::new();
    for i in 0..2 {
        frames.push(Frame::Snapshot(snapshot(
            i,
            vec![target(0, 0x5555_0000_0000, 5)],
        )));
    }
    frames.push(event(
        210_000_000,
        EventKind::TargetAdded {
            target: 1,
            pid: Some(2001),
            parent: Some(0),
            cmdline: "workload-0".into(),
        },
    ));
    for i in 2..5 {
        frames.push(Frame::Snapshot(snapshot(
            i,
            vec![
                target(0, 0x5555_0000_0000, 5),
                target(1, 0x7f00_0000_0000, 9),
            ],
        )));
    }
    frames.push(event(
        500_000_000,
        EventKind::Exit {
            target: 1,
            status: None,
        },
    ));
    frames
}

#[test]
fn the_reader_gives_added_targets_back_and_damo_gets_a_record_for_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.udamon");
    let h = header(1);
    let frames = frames_with_an_added_target();
    write_record(&path, &h, &frames, true);
    let mut r = RecordReader::open(&path).unwrap();
    let back: Vec<Frame> = r.by_ref().collect();
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    assert_eq!(back, frames);

    let out = dir.path().join("tree.json_compressed");
    damo::write_json_compressed_file(&out, r.header(), || {
        Ok(RecordReader::open(&path)?.collect::<Vec<_>>())
    })
    .unwrap();
    let damo = damo::read(&out, DamoFormat::JsonCompressed).unwrap();
    let labels: Vec<&str> = damo
        .header
        .targets
        .iter()
        .map(|t| t.cmdline.as_str())
        .collect();
    assert_eq!(
        labels,
        ["damo target 1000", "damo target 2001"],
        "damo names process targets by pid, the added one included"
    );
    assert_eq!(snapshots(&damo.frames), snapshots(&frames));
}

/// `header` with its version set to `version`, as a header frame.
fn header_frame(header: &Header, version: u32) -> Vec<u8> {
    let h = Header {
        format_version: version,
        ..header.clone()
    };
    let payload = serde_json::to_vec(&h).unwrap();
    let len = (payload.len() as u32).to_le_bytes();
    let mut frame = b"\xF9UDF\x01".to_vec();
    frame.extend_from_slice(&len);
    frame.extend_from_slice(&payload);
    let mut crc_input = vec![1u8];
    crc_input.extend_from_slice(&len);
    crc_input.extend_from_slice(&payload);
    frame.extend_from_slice(&crc32fast::hash(&crc_input).to_le_bytes());
    frame
}

#[test]
fn version_1_records_still_read() {
    let h = header(2);
    // Snapshots as version 1 wrote them: without the later versions' sections.
    let mut frames = common::sample_frames(4);
    for f in &mut frames {
        if let Frame::Snapshot(s) = f {
            for r in s.targets.iter_mut().flat_map(|t| &mut t.regions) {
                (r.read_samples, r.write_samples) = (0, 0);
            }
        }
    }
    let mut w = RecordWriter::new(Vec::new(), "memory", &h, WriterOptions::default()).unwrap();
    let after_header = w.bytes_written() as usize;
    for f in &frames {
        match f {
            Frame::Snapshot(s) => w.write_snapshot(s).unwrap(),
            Frame::Event(e) => w.write_event(e).unwrap(),
        }
    }
    let bytes = w.finish().unwrap();
    let mut v1 = b"\x89UDAMON\n".to_vec();
    v1.extend_from_slice(&header_frame(&h, 1));
    v1.extend_from_slice(&bytes[after_header..]);
    let mut r = RecordReader::from_reader(std::io::Cursor::new(v1), "v1.udamon").unwrap();
    assert_eq!(r.header().format_version, 1);
    let targets = Targets::new(r.header());
    assert!(targets.get(1).is_some() && targets.get(2).is_none());
    let back: Vec<Frame> = r.by_ref().collect();
    assert!(r.damage().is_empty());
    assert_eq!(back, frames);
}

/// A small file can announce targets with command lines of megabytes each (they compress to
/// nothing): the reader keeps a bounded start of each and says how many it cut.
#[test]
fn command_lines_longer_than_a_reader_keeps_are_cut_and_counted() {
    use udamon_record::DamageKind;
    use udamon_record::texts::MAX_TEXT;
    let long = "A".repeat(4 << 20);
    let mut buf = Vec::new();
    {
        let mut writer = RecordWriter::new(
            &mut buf,
            "memory",
            &header(1),
            WriterOptions { compress: true },
        )
        .unwrap();
        for target in 1..=6 {
            let kind = EventKind::TargetAdded {
                target,
                pid: Some(1000 + target),
                parent: Some(0),
                cmdline: long.clone(),
            };
            writer.write_event(&Event { time_ns: 1, kind }).unwrap();
        }
        writer.finish().unwrap();
    }
    assert!(buf.len() < 64 << 10, "the file is small: {}", buf.len());
    let mut reader = RecordReader::from_reader(std::io::Cursor::new(buf), "crafted").unwrap();
    let mut announced = 0;
    for frame in reader.by_ref() {
        if let Frame::Event(Event {
            kind: EventKind::TargetAdded { cmdline, .. },
            ..
        }) = frame
        {
            assert!(cmdline.len() <= MAX_TEXT, "kept {} bytes", cmdline.len());
            assert!(cmdline.starts_with("AAAA") && cmdline.ends_with('…'));
            announced += 1;
        }
    }
    assert_eq!(announced, 6);
    let cut: Vec<_> = reader
        .damage()
        .iter()
        .filter_map(|d| match d.kind {
            DamageKind::TextCut { strings, bytes } => Some((strings, bytes)),
            _ => None,
        })
        .collect();
    assert_eq!(
        cut.len(),
        1,
        "one entry for the record: {:?}",
        reader.damage()
    );
    assert_eq!(cut[0].0, 6);
    assert!(cut[0].1 > 6 * (long.len() as u64 - MAX_TEXT as u64));
}
