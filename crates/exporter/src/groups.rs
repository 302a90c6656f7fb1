//! Series of many processes together: a cgroup's (a container's, a service's), aggregated from
//! its processes' observations, and the host's physical memory, observed as one target.
//!
//! A cgroup's working set and bandwidth are its processes' sums (memory a cgroup's processes
//! share, such as a file both map, counts once per process: the host's physical view counts it
//! once); its idle-time percentiles are taken over all its processes' bytes together.

use crate::observe::{HORIZONS, Observation, idle_quantiles};

/// Several processes' last windows together.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupObservation {
    pub processes: u64,
    /// Bytes per horizon of [`HORIZONS`], in that order.
    pub working_set_bytes: Vec<u64>,
    pub bandwidth_bytes_per_second: f64,
    /// Seconds per quantile of [`IDLE_QUANTILES`](crate::IDLE_QUANTILES), over every byte of
    /// every process.
    pub idle_seconds: Vec<f64>,
    pub monitored_bytes: u64,
    /// The processes' resident bytes, of those that know theirs.
    pub resident_bytes: u64,
    /// The cgroup's own memory limit, when it has one: the caller reads it (`memory.max`).
    pub memory_limit_bytes: Option<u64>,
}

/// The processes' observations, aggregated.
pub fn aggregate<'a>(members: impl IntoIterator<Item = &'a Observation>) -> GroupObservation {
    let mut group = GroupObservation {
        working_set_bytes: vec![0; HORIZONS.len()],
        ..GroupObservation::default()
    };
    let mut idle_bytes = Vec::new();
    for obs in members {
        group.processes += 1;
        for (sum, bytes) in group
            .working_set_bytes
            .iter_mut()
            .zip(&obs.working_set_bytes)
        {
            *sum += bytes;
        }
        group.bandwidth_bytes_per_second += obs.bandwidth_bytes_per_second;
        group.monitored_bytes += obs.monitored_bytes;
        group.resident_bytes += obs.resident_bytes.unwrap_or(0);
        idle_bytes.extend_from_slice(&obs.idle_bytes);
    }
    idle_bytes.sort_unstable();
    group.idle_seconds = idle_quantiles(&idle_bytes);
    group
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(ws: u64, idle: &[(u64, u64)], resident: Option<u64>) -> Observation {
        Observation {
            working_set_bytes: vec![ws, 2 * ws, 3 * ws],
            bandwidth_bytes_per_second: ws as f64,
            monitored_bytes: idle.iter().map(|x| x.1).sum(),
            idle_bytes: idle.to_vec(),
            resident_bytes: resident,
            ..Observation::default()
        }
    }

    #[test]
    fn a_cgroup_sums_its_processes_and_takes_percentiles_over_all_their_bytes() {
        // One process all hot (10 bytes idle 0 s), one all cold (30 bytes idle 8 s).
        let hot = process(10, &[(0, 10)], Some(100));
        let cold = process(0, &[(8_000_000, 30)], None);
        let g = aggregate([&hot, &cold]);
        assert_eq!(g.processes, 2);
        assert_eq!(g.working_set_bytes, [10, 20, 30]);
        assert_eq!((g.monitored_bytes, g.resident_bytes), (40, 100));
        // A quarter of the bytes is the hot process's, the rest cold: 0 s up to the 25th
        // percentile, 8 s from the median on.
        assert_eq!(g.idle_seconds, [0.0, 8.0, 8.0, 8.0, 8.0, 8.0]);
        assert_eq!(aggregate([]).idle_seconds, [0.0; 6]);
    }
}
