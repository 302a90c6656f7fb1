//! Sample batches: their binary frames read back as the events written, stay small, and
//! readers that skip them or meet a damaged one read on.

mod common;

use common::*;
use udamon_record::RecordReader;
use udamon_record::damo::{self, DamoFormat};
use udamon_record::model::{CodeSite, Event, EventKind, Frame, SampleAccess, SampleFact};

fn batch(rng: &mut Lcg, first_site: u32, n: usize) -> Event {
    let sites = (first_site..first_site + 3)
        .map(|index| CodeSite {
            index,
            ip: 0x5555_5555_1000 + 0x40 * index as u64,
            function: (index % 3 != 2).then(|| format!("worker_{index}")),
            object: Some("/usr/bin/prog".into()),
            missing: (index % 3 == 2).then(|| "no symbol table (stripped)".into()),
        })
        .collect();
    let mut addrs: Vec<u64> = (0..n)
        .map(|_| 0x7f00_0000_0000 + rng.below(100 << 20))
        .collect();
    addrs.sort_unstable();
    let accesses = [
        SampleAccess::Read,
        SampleAccess::Write,
        SampleAccess::ReadWrite,
        SampleAccess::Unknown,
    ];
    let samples = addrs
        .into_iter()
        .map(|addr| SampleFact {
            addr,
            site: rng.below(first_site as u64 + 3) as u32,
            tid: 4000 + rng.below(4) as u32,
            cpu: rng.below(2) as u32,
            access: accesses[rng.below(4) as usize],
        })
        .collect();
    Event {
        time_ns: 400_000_000 * (first_site as u64 + 1),
        kind: EventKind::Samples {
            target: 0,
            window_ns: 400_000_000,
            sites,
            samples,
        },
    }
}

#[test]
fn sample_batches_read_back_between_snapshots() {
    let mut rng = Lcg(3);
    let mut frames = sample_frames(4);
    frames.insert(1, Frame::Event(batch(&mut rng, 0, 200)));
    frames.insert(3, Frame::Event(batch(&mut rng, 3, 0)));
    let dir = tempfile::tempdir().unwrap();
    for compress in [false, true] {
        let path = dir.path().join(format!("r{compress}"));
        write_record(&path, &header(2), &frames, compress);
        let mut r = RecordReader::open(&path).unwrap();
        assert_eq!(r.by_ref().collect::<Vec<_>>(), frames);
        assert!(r.damage().is_empty(), "{:?}", r.damage());
    }
}

#[test]
fn a_sample_takes_a_few_bytes() {
    let mut rng = Lcg(5);
    let frames = [Frame::Event(batch(&mut rng, 0, 1000))];
    let offsets = frame_offsets(&header(1), &frames, false);
    let bytes = offsets[1] - offsets[0];
    // Sorted addresses 100 KiB apart on average take 3 bytes, the rest one each.
    assert!(bytes < 7 * 1000, "{bytes} bytes for 1000 samples");
}

#[test]
fn a_damaged_sample_batch_is_skipped_as_damage() {
    let mut rng = Lcg(9);
    let mut frames = sample_frames(2);
    frames.insert(1, Frame::Event(batch(&mut rng, 0, 50)));
    let h = header(2);
    let offsets = frame_offsets(&h, &frames, false);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r");
    write_record(&path, &h, &frames, false);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offsets[1] as usize + 20] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let mut r = RecordReader::open(&path).unwrap();
    let read: Vec<Frame> = r.by_ref().collect();
    frames.remove(1);
    assert_eq!(read, frames);
    assert_eq!(r.damage().len(), 1);
    assert_eq!(r.damage()[0].offset, offsets[1]);
}

#[test]
fn sample_batches_show_as_json() {
    let mut rng = Lcg(1);
    let json = serde_json::to_string(&Frame::Event(batch(&mut rng, 0, 1))).unwrap();
    assert!(json.contains(r#""kind":"samples""#), "{json}");
    assert!(json.contains(r#""function":"worker_0""#), "{json}");
    assert!(
        json.contains(r#""missing":"no symbol table (stripped)""#),
        "{json}"
    );
}

#[test]
fn conversion_to_damo_leaves_the_samples_out() {
    let mut rng = Lcg(11);
    let mut frames = sample_frames(3);
    frames.insert(1, Frame::Event(batch(&mut rng, 0, 20)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.json_compressed");
    damo::write_json_compressed_file(&path, &header(2), || Ok(frames.clone())).unwrap();
    let back = damo::read(&path, DamoFormat::JsonCompressed).unwrap();
    // Every snapshot, none lost to the samples between them.
    assert_eq!(snapshots(&back.frames).len(), 3);
}
