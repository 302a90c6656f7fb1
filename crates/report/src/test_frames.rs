//! Frames that the report modules' unit tests build records of.

use udamon_record::model::{Frame, RegionStat, Snapshot, TargetSnapshot};

/// A snapshot of target 0 over the 100 ns that end at `end_ns` (sampling every 5 µs,
/// aggregating over 100 µs), with `(start, end, nr_accesses)` regions.
pub fn snapshot(end_ns: u64, regions: &[(u64, u64, u32)]) -> Frame {
    Frame::Snapshot(Snapshot {
        start_ns: end_ns - 100,
        end_ns,
        sample_us: 5,
        aggr_us: 100,
        targets: vec![TargetSnapshot {
            target: 0,
            regions: regions
                .iter()
                .map(|&(start, end, nr_accesses)| RegionStat::new(start, end, nr_accesses))
                .collect(),
        }],
    })
}
