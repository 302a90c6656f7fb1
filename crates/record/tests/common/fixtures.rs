//! The fixtures record and report tests share (the report tests include this file): a header
//! with `n` targets and a snapshot built from each target's regions, at DAMON's default 5 ms
//! sampling and 100 ms aggregation intervals.

use udamon_record::model::{
    AccessSource, Header, HostInfo, Intervals, RegionStat, Snapshot, TargetInfo, TargetSnapshot,
};

/// Sampling and aggregation intervals: 5 ms and 100 ms, so nr_accesses is at most 20.
pub const SAMPLE_US: u64 = 5_000;
pub const AGGR_US: u64 = 100_000;
pub const AGGR_NS: u64 = AGGR_US * 1000;

/// A simulated run's header; target `i` is pid `1000 + i`, command `workload-i`.
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
        adjustment: String::new(),
    }
}

/// Snapshot `index` (the window `index × aggr .. (index + 1) × aggr`) of the given targets.
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
