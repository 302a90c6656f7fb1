//! Shared test helpers: the fixtures (header, snapshot), realistic regions, and writing records
//! to temporary files.
#![allow(dead_code)] // Each test binary uses a different subset.

mod fixtures;

pub use fixtures::*;
use std::path::Path;
use udamon_record::model::{Event, EventKind, Frame, Header, RegionStat, Snapshot};
use udamon_record::{RecordWriter, WriterOptions};

/// A small deterministic generator, so that snapshots look varied without a dependency.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Regions like a live process's: page-aligned, mostly adjacent (a few gaps between mappings),
/// sizes from one page to a few MiB, access counts of a 5 ms / 100 ms monitor (0..=20), ages up
/// to a few thousand aggregations, a few raw samples.
pub fn realistic_regions(rng: &mut Lcg, n: usize) -> Vec<RegionStat> {
    let mut regions = Vec::with_capacity(n);
    let mut addr = 0x5555_5555_4000u64;
    for i in 0..n {
        if i % 100 == 99 {
            addr += (1 + rng.below(1 << 20)) << 12;
        }
        let size = (1 + rng.below(1024)) << 12;
        let hot = rng.below(4) == 0;
        let nr_accesses = if hot { rng.below(21) as u32 } else { 0 };
        let age = rng.below(3000) as u32;
        let raw_samples = if hot { rng.below(8) as u32 } else { 0 };
        regions.push(RegionStat {
            start: addr,
            end: addr + size,
            nr_accesses,
            age,
            raw_samples,
            read_samples: raw_samples,
            write_samples: raw_samples / 2,
            touched_bytes: None,
        });
        addr += size;
    }
    regions
}

/// Frames of a plausible record: `n` snapshots of two targets with a few events between.
pub fn sample_frames(n: u64) -> Vec<Frame> {
    let mut rng = Lcg(7);
    let mut frames = Vec::new();
    for i in 0..n {
        let targets = (0..2)
            .map(|t| (t, realistic_regions(&mut rng, 5 + i as usize)))
            .collect();
        frames.push(Frame::Snapshot(snapshot(i, targets)));
        if i % 3 == 1 {
            frames.push(Frame::Event(Event {
                time_ns: (i + 1) * 100_000_000,
                kind: EventKind::MappingsChanged {
                    target: 1,
                    nr_mappings: 20 + i as u32,
                },
            }));
        }
    }
    frames
}

pub fn write_record(path: &Path, header: &Header, frames: &[Frame], compress: bool) {
    let mut w = RecordWriter::create(path, header, WriterOptions { compress }).unwrap();
    for f in frames {
        match f {
            Frame::Snapshot(s) => w.write_snapshot(s).unwrap(),
            Frame::Event(e) => w.write_event(e).unwrap(),
        }
    }
    w.finish().unwrap();
}

/// Byte offsets where each frame starts in an uncompressed record of `frames`, and the end.
pub fn frame_offsets(header: &Header, frames: &[Frame], compress: bool) -> Vec<u64> {
    let mut w =
        RecordWriter::new(Vec::new(), "memory", header, WriterOptions { compress }).unwrap();
    let mut offsets = vec![w.bytes_written()];
    for f in frames {
        match f {
            Frame::Snapshot(s) => w.write_snapshot(s).unwrap(),
            Frame::Event(e) => w.write_event(e).unwrap(),
        }
        offsets.push(w.bytes_written());
    }
    offsets
}

pub fn data_file(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The snapshots among `frames`, in order.
pub fn snapshots(frames: &[Frame]) -> Vec<&Snapshot> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Snapshot(s) => Some(s),
            Frame::Event(_) => None,
        })
        .collect()
}
