//! Call-stack frames: they read back as the events written, after the samples they describe,
//! and a damaged one costs its stacks only, never the samples.

mod common;

use common::*;
use udamon_record::RecordReader;
use udamon_record::model::{
    CallStack, CodeSite, Event, EventKind, Frame, SampleAccess, SampleFact,
};

fn samples_and_stacks(time_ns: u64) -> [Frame; 2] {
    let site = |index: u32, function: &str| CodeSite {
        index,
        ip: 0x1000 + index as u64,
        function: Some(function.into()),
        object: Some("/usr/bin/prog".into()),
        missing: None,
    };
    let sample = |addr: u64| SampleFact {
        addr,
        site: 0,
        tid: 7,
        cpu: 0,
        access: SampleAccess::Read,
    };
    [
        Frame::Event(Event {
            time_ns,
            kind: EventKind::Samples {
                target: 0,
                window_ns: 1000,
                sites: vec![site(0, "touch"), site(1, "caller_a"), site(2, "main")],
                samples: vec![sample(0x10), sample(0x20), sample(0x30)],
            },
        }),
        Frame::Event(Event {
            time_ns,
            kind: EventKind::Stacks {
                target: 0,
                stacks: vec![CallStack {
                    index: 0,
                    sites: vec![1, 2],
                }],
                samples: vec![0, 0, 0],
            },
        }),
    ]
}

#[test]
fn stacks_read_back_after_their_samples() {
    let mut frames = sample_frames(2);
    frames.splice(1..1, samples_and_stacks(1_000_000));
    let dir = tempfile::tempdir().unwrap();
    for compress in [false, true] {
        let path = dir.path().join(format!("r{compress}"));
        write_record(&path, &header(1), &frames, compress);
        let mut r = RecordReader::open(&path).unwrap();
        assert_eq!(r.by_ref().collect::<Vec<_>>(), frames);
        assert!(r.damage().is_empty(), "{:?}", r.damage());
    }
}

#[test]
fn a_damaged_stacks_frame_keeps_the_samples() {
    let frames = samples_and_stacks(1_000_000).to_vec();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r");
    write_record(&path, &header(1), &frames, false);
    let offsets = frame_offsets(&header(1), &frames, false);
    let mut bytes = std::fs::read(&path).unwrap();
    // A bit flipped in the stacks frame's payload.
    bytes[offsets[1] as usize + 12] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let mut r = RecordReader::open(&path).unwrap();
    assert_eq!(r.by_ref().collect::<Vec<_>>(), frames[..1]);
    assert_eq!(r.damage().len(), 1);
}
