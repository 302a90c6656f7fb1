//! Synthetic records for the report tests: the shared fixtures (header, snapshot), and a
//! workload with hot, warm and cold bands, a never-monitored hole, a far-away cold area and a
//! phase change.

#![allow(dead_code)] // each test file uses a different part

#[path = "../../../record/tests/common/fixtures.rs"]
mod fixtures;

pub use fixtures::*;

use udamon_record::model::{Event, EventKind, Frame, RegionStat};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;

pub fn region(start: u64, end: u64, nr_accesses: u32) -> RegionStat {
    RegionStat {
        start,
        end,
        nr_accesses,
        age: 3,
        raw_samples: 0,
        read_samples: 0,
        write_samples: 0,
        touched_bytes: None,
    }
}

pub fn event(time_ns: u64, kind: EventKind) -> Frame {
    Frame::Event(Event { time_ns, kind })
}

/// Where the banded workload lives.
pub const AREA: u64 = 0x1000_0000;
pub const HOT: (u64, u64) = (AREA, AREA + 4 * MIB);
pub const WARM: (u64, u64) = (AREA + 4 * MIB, AREA + 12 * MIB);
/// Never covered by any region: the heatmap should collapse it.
pub const HOLE: (u64, u64) = (AREA + 12 * MIB, AREA + 28 * MIB);
pub const COLD: (u64, u64) = (AREA + 28 * MIB, AREA + 60 * MIB);
/// A far-away area, bigger and colder per byte.
pub const FAR: (u64, u64) = (0x7f00_0000_0000, 0x7f00_0000_0000 + 64 * MIB);
pub const PHASES_AT: u64 = 30;
pub const NR_BANDED: u64 = 60;

/// nr_accesses of the hot, warm and cold bands in snapshot `i`: the hot and cold bands swap at
/// `PHASES_AT`.
pub fn band_accesses(i: u64) -> (u32, u32, u32) {
    if i < PHASES_AT {
        (18, 8, 1)
    } else {
        (1, 8, 18)
    }
}

/// Splits `range` into `n` equal regions of the same access count, as DAMON would keep them.
fn band(range: (u64, u64), n: u64, nr_accesses: u32) -> Vec<RegionStat> {
    let step = (range.1 - range.0) / n;
    (0..n)
        .map(|k| {
            let end = if k + 1 == n {
                range.1
            } else {
                range.0 + (k + 1) * step
            };
            region(range.0 + k * step, end, nr_accesses)
        })
        .collect()
}

/// The banded workload: `NR_BANDED` snapshots of one target, with a mappings event and a stop.
pub fn banded_frames() -> Vec<Frame> {
    let mut frames = Vec::new();
    for i in 0..NR_BANDED {
        let (hot, warm, cold) = band_accesses(i);
        let mut regions = band(HOT, 2, hot);
        regions.extend(band(WARM, 3, warm));
        regions.extend(band(COLD, 4, cold));
        regions.extend(band(FAR, 2, if i % 10 == 0 { 1 } else { 0 }));
        frames.push(Frame::Snapshot(snapshot(i, vec![(0, regions)])));
        if i == PHASES_AT {
            frames.push(event(
                i * AGGR_NS,
                EventKind::MappingsChanged {
                    target: 0,
                    nr_mappings: 7,
                },
            ));
        }
    }
    frames.push(event(
        NR_BANDED * AGGR_NS,
        EventKind::Stopped {
            reason: "workload finished".into(),
        },
    ));
    frames
}

/// A record to read afresh for each pass, as reports that read it more than once take it.
pub fn reading(frames: Vec<Frame>) -> impl FnMut() -> Result<Vec<Frame>, std::convert::Infallible> {
    move || Ok(frames.clone())
}
