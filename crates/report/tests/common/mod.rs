//! Synthetic records for the report tests: a header, snapshots built from region lists, and a
//! workload with hot, warm and cold bands, a never-monitored hole, a far-away cold area and a
//! phase change.

#![allow(dead_code)] // each test file uses a different part

use udamon_record::model::{
    AccessSource, Event, EventKind, Frame, Header, HostInfo, Intervals, RegionStat, Snapshot,
    TargetInfo, TargetSnapshot,
};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
/// Sampling and aggregation intervals: 5 ms and 100 ms, so nr_accesses is at most 20.
pub const SAMPLE_US: u64 = 5_000;
pub const AGGR_US: u64 = 100_000;
pub const AGGR_NS: u64 = AGGR_US * 1000;

pub fn header(nr_targets: usize) -> Header {
    Header {
        format_version: 1,
        udamon_version: "0.1.0".into(),
        access_source: AccessSource {
            name: "sim".into(),
            reason: "simulated workload".into(),
        },
        intervals: Intervals {
            sample_us: SAMPLE_US,
            aggr_us: AGGR_US,
            update_us: 1_000_000,
        },
        min_nr_regions: 10,
        max_nr_regions: 1000,
        seed: 42,
        targets: (0..nr_targets)
            .map(|i| TargetInfo {
                pid: Some(1000 + i as u32),
                cmdline: format!("workload-{i}"),
                parent: None,
            })
            .collect(),
        host: HostInfo {
            hostname: "testhost".into(),
            kernel: "6.18.0".into(),
            nr_cpus: 2,
            page_size: 4096,
            mem_total_bytes: 4 << 30,
        },
        start_time_unix_ns: 1_700_000_000_000_000_000,
    }
}

pub fn region(start: u64, end: u64, nr_accesses: u32) -> RegionStat {
    RegionStat {
        start,
        end,
        nr_accesses,
        age: 3,
        raw_samples: 0,
    }
}

/// Snapshot `index` (window `index*aggr .. (index+1)*aggr`) of the given targets.
pub fn snapshot(index: u64, targets: Vec<(u32, Vec<RegionStat>)>) -> Snapshot {
    Snapshot {
        start_ns: index * AGGR_NS,
        end_ns: (index + 1) * AGGR_NS,
        sample_us: SAMPLE_US,
        aggr_us: AGGR_US,
        targets: targets
            .into_iter()
            .map(|(target, regions)| TargetSnapshot { target, regions })
            .collect(),
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
