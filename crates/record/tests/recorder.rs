//! The recorder on the core's monitoring loop: one snapshot per aggregation with times relative
//! to the record's start, events in between, and a write failure that stops monitoring.

mod common;

use common::header;
use std::io::Write;
use udamon_core::testing::{StopAfterWindows, TestOps};
use udamon_core::{
    AddrRange, Attrs, Context, RunError, SampledAccess, StopReason, Target, TargetMemory,
    VirtualClock,
};
use udamon_record::model::{EventKind, Frame};
use udamon_record::{RecordError, RecordReader, RecordWriter, Recorder, WriterOptions};

const HOT: u64 = 0x10_0000;
const MAPPING: AddrRange = AddrRange::new(0x10_0000, 0x50_0000);

/// One sampled write per sampling interval, always at `HOT` (the target comes with its
/// regions: [`context`]).
fn one_hot_address() -> TestOps<'static> {
    TestOps::sampled(&[], |ctx| {
        ctx.record_sampled_accesses(0, &mut [SampledAccess::write(HOT)]);
    })
}

const START_US: u64 = 7_000_000;

fn context() -> Context {
    let mut ctx = Context::new(Attrs::default(), 1).unwrap();
    ctx.add_target(Target::with_regions(Some(1000), &[MAPPING]));
    ctx.set_start_time_us(START_US);
    ctx
}

#[test]
fn records_one_snapshot_per_aggregation_and_the_stop_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.udamon");
    let mut recorder = Recorder::create(
        &path,
        &header(1),
        WriterOptions { compress: true },
        START_US,
    )
    .unwrap();
    recorder
        .write_event(
            0,
            EventKind::Note {
                text: "starting".into(),
            },
        )
        .unwrap();
    let mut callbacks = (recorder, StopAfterWindows(5));
    let mut ctx = context();
    let stop = ctx
        .run(&mut one_hot_address(), &mut VirtualClock, &mut callbacks)
        .unwrap();
    assert_eq!(stop, StopReason::Requested);
    let mut recorder = callbacks.0;
    // The owner knows why monitoring stopped, and says so last.
    recorder
        .write_event(
            recorder.time_ns(ctx.now_us()),
            EventKind::Stopped {
                reason: "enough".into(),
            },
        )
        .unwrap();
    assert_eq!(recorder.snapshots_written(), 5);
    recorder.finish().unwrap();

    let mut r = RecordReader::open(&path).unwrap();
    let frames: Vec<Frame> = r.by_ref().collect();
    assert!(r.damage().is_empty());
    assert_eq!(frames.len(), 7);
    assert!(
        matches!(&frames[0], Frame::Event(e) if e.kind == EventKind::Note { text: "starting".into() })
    );
    for (i, f) in frames[1..6].iter().enumerate() {
        let Frame::Snapshot(s) = f else {
            panic!("frame {i} is not a snapshot")
        };
        // Default attributes: 5 ms sampling, 100 ms aggregation, from the record's time zero.
        let i = i as u64;
        assert_eq!(
            (s.start_ns, s.end_ns),
            (i * 100_000_000, (i + 1) * 100_000_000)
        );
        assert_eq!((s.sample_us, s.aggr_us), (5_000, 100_000));
        let regions = &s.targets[0].regions;
        assert_eq!(regions.first().unwrap().start, MAPPING.start);
        assert_eq!(regions.last().unwrap().end, MAPPING.end);
        assert!(regions.windows(2).all(|w| w[0].end == w[1].start));
        // The region holding HOT saw it written in all 20 samples of the window, the others
        // nothing.
        for r in regions {
            let hot = r.start <= HOT && HOT < r.end;
            assert_eq!(
                (
                    r.nr_accesses,
                    r.raw_samples,
                    r.read_samples,
                    r.write_samples
                ),
                if hot { (20, 20, 0, 20) } else { (0, 0, 0, 0) },
                "{r:?}"
            );
        }
    }
    let Frame::Event(last) = &frames[6] else {
        panic!("no final event")
    };
    assert_eq!(
        last.kind,
        EventKind::Stopped {
            reason: "enough".into()
        }
    );
    assert_eq!(last.time_ns, 500_000_000);
}

/// Accepts `room` bytes, then fails as a full disk does.
struct FillsUp {
    room: usize,
}

impl Write for FillsUp {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.room {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left",
            ));
        }
        self.room -= buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_error_stops_monitoring_and_is_kept() {
    let writer = RecordWriter::new(
        FillsUp { room: 2000 },
        "full.udamon",
        &header(1),
        WriterOptions::default(),
    )
    .unwrap();
    let recorder = Recorder::new(writer, START_US);
    let mut callbacks = (recorder, StopAfterWindows(1000));
    let mut ctx = context();
    let stopped = ctx
        .run(&mut one_hot_address(), &mut VirtualClock, &mut callbacks)
        .unwrap_err();
    let RunError::Callback(e) = stopped else {
        panic!("the recorder's error ends the run: {stopped}")
    };
    let mut recorder = callbacks.0;
    let written = recorder.snapshots_written();
    assert!(written > 0 && written < 1000, "{written}");
    // Monitoring stopped at the aggregation whose snapshot failed.
    assert_eq!(ctx.passed_sample_intervals(), (written + 1) * 20);
    let e = e.downcast_ref::<RecordError>().expect("a record error");
    assert!(matches!(e, RecordError::Io { .. }));
    assert_eq!(e.to_string(), "full.udamon: no space left");
    // Later events are refused with the same error; finishing reports it too.
    let again = recorder
        .write_event(1, EventKind::Note { text: "x".into() })
        .unwrap_err();
    assert_eq!(again.to_string(), "full.udamon: no space left");
    assert_eq!(
        recorder.finish().err().unwrap().to_string(),
        "full.udamon: no space left"
    );
}

/// [`one_hot_address`] with one resident page, whose schemes take effect on all they are
/// applied to: a `stat` scheme on every cold region "applies" to the cold bytes each pass.
fn one_hot_address_with_stat() -> TestOps<'static> {
    TestOps::sampled(&[], |ctx| {
        let memory = TargetMemory {
            resident_bytes: 4096,
            ..TargetMemory::default()
        };
        ctx.set_target_memory(0, memory);
        ctx.record_sampled_accesses(0, &mut [SampledAccess::write(HOT)]);
    })
    .acting()
}

#[test]
fn scheme_statistics_tried_regions_and_memory_are_recorded_when_they_change() {
    use udamon_core::damos::{AccessPattern, Action, Scheme};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("schemes.udamon");
    let recorder = Recorder::create(&path, &header(1), WriterOptions::default(), START_US).unwrap();
    let mut ctx = context();
    let cold = AccessPattern {
        max_nr_accesses: 0,
        ..AccessPattern::default()
    };
    ctx.add_scheme(Scheme::new(cold, Action::Stat)).unwrap();
    ctx.capture_tried_regions(true);
    let mut callbacks = (recorder, StopAfterWindows(4));
    ctx.run(
        &mut one_hot_address_with_stat(),
        &mut VirtualClock,
        &mut callbacks,
    )
    .unwrap();
    callbacks.0.finish().unwrap();

    let events: Vec<EventKind> = RecordReader::open(&path)
        .unwrap()
        .filter_map(|f| match f {
            Frame::Event(e) => Some(e.kind),
            Frame::Snapshot(_) => None,
        })
        .collect();
    let stats: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::SchemeStats {
                scheme: 0,
                action,
                stats,
            } => Some((action.clone(), *stats)),
            _ => None,
        })
        .collect();
    assert_eq!(
        stats.len(),
        4,
        "the statistics changed at every aggregation"
    );
    assert!(stats.iter().all(|(a, _)| a == "stat"));
    assert!(
        stats.windows(2).all(|w| w[1].1.nr_tried > w[0].1.nr_tried),
        "cumulative"
    );
    let tried: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::SchemeTriedRegions { regions, .. } => Some(regions),
            _ => None,
        })
        .collect();
    assert!(!tried.is_empty());
    for regions in tried {
        assert!(
            regions
                .iter()
                .all(|r| r.nr_accesses == 0 && !(r.start <= HOT && HOT < r.end))
        );
    }
    let memory = events
        .iter()
        .filter(|e| matches!(e, EventKind::TargetMemory { .. }))
        .count();
    assert_eq!(
        memory, 1,
        "target memory is written once while it does not change"
    );
}

#[test]
fn a_tap_sees_every_frame_written_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.udamon");
    let mut recorder = Recorder::create(
        &path,
        &header(1),
        WriterOptions { compress: true },
        START_US,
    )
    .unwrap();
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let tapped = std::rc::Rc::clone(&seen);
    recorder.set_tap(Box::new(move |frame| tapped.borrow_mut().push(frame)));
    recorder
        .write_event(
            0,
            EventKind::Note {
                text: "starting".into(),
            },
        )
        .unwrap();
    let mut callbacks = (recorder, StopAfterWindows(3));
    context()
        .run(&mut one_hot_address(), &mut VirtualClock, &mut callbacks)
        .unwrap();
    callbacks.0.finish().unwrap();
    let read: Vec<Frame> = RecordReader::open(&path).unwrap().collect();
    assert_eq!(read.len(), 4, "a note and three snapshots");
    assert_eq!(*seen.borrow(), read, "the tap saw what the file holds");
}
