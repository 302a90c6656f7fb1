//! Monitoring attributes (docs/algorithms.md#attributes): intervals, region-count bounds, the
//! minimum region size and the intervals auto-tuning goal, with upstream's validation rules.

use thiserror::Error;

/// The intervals auto-tuning goal (docs/algorithms.md#autotune). Tuning is off while `aggrs` is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntervalsGoal {
    /// Target share of observed access events among all possible ones, in basis points.
    pub access_bp: u32,
    /// Tune every this many aggregation intervals.
    pub aggrs: u32,
    pub min_sample_us: u64,
    pub max_sample_us: u64,
}

impl IntervalsGoal {
    /// The goal DAMON's design document recommends (damo's `--monitoring_intervals_autotune`):
    /// 4 % of possible access events, tuned every 3 aggregations, sampling between 5 ms and 10 s.
    pub fn recommended() -> Self {
        IntervalsGoal {
            access_bp: 400,
            aggrs: 3,
            min_sample_us: 5_000,
            max_sample_us: 10_000_000,
        }
    }

    pub fn enabled(&self) -> bool {
        self.aggrs != 0
    }
}

/// How regions are merged and split (docs/algorithms.md#guided).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Adjustment {
    /// DAMON's adaptive regions, plus cuts where accesses were seen and probes of idle memory
    /// around them ([`crate::probe`]), so that small hot areas in large idle memory are found
    /// within the same region bound.
    #[default]
    Guided,
    /// Upstream's merge and split alone (random 10-90 % cuts, merging by DAMON's threshold),
    /// whatever the source, for comparison with the kernel.
    Faithful,
}

impl Adjustment {
    /// The name records and the command line use: `guided` or `faithful`.
    pub fn name(self) -> &'static str {
        match self {
            Adjustment::Guided => "guided",
            Adjustment::Faithful => "faithful",
        }
    }
}

/// Every time value is in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    pub sample_interval_us: u64,
    pub aggr_interval_us: u64,
    pub ops_update_interval_us: u64,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
    /// Every region boundary DAMON itself makes is aligned to this; a power of two.
    pub min_region_sz: u64,
    pub intervals_goal: IntervalsGoal,
    /// udamon's guided region adjustment (the default) or upstream's alone.
    pub adjustment: Adjustment,
}

/// What one region of `max_nr_regions` may cost a monitor at most, in bytes: the region itself
/// twice (the minimum-count pass and the residency cuts build the new region vector beside the
/// old one), its end's offset and an eighth of a fence in the sample lookup index
/// ([`crate::region_index`]), its sampling address (accessed-bit sources), and its
/// touched-bytes estimate at the window's end. (The density merge counts the recent samples
/// region by region as it goes, and a target's access history keeps the regions only where
/// recent windows' accesses were: neither is a cost a region.) There is no fixed cap on
/// regions: page granularity over a whole target is millions of them, and the host's memory is
/// the bound ([`Attrs::region_memory_bytes`], checked against it by the front ends).
pub const REGION_BYTES: u64 = 2 * std::mem::size_of::<crate::Region>() as u64 + 4 + 1 + 8 + 8;

/// The region bounds of sampled access sources unless given (`Attrs` of `udamon_linux`'s
/// `sampled_attrs`), which also set the pieces a working set is estimated in where the
/// regions are finer ([`crate::working_set`]).
pub const SAMPLED_MIN_REGIONS: u32 = 20;
pub const SAMPLED_MAX_REGIONS: u32 = 60;

/// The page size that upstream uses as the default minimum region size.
pub const PAGE_SIZE: u64 = 4096;

impl Default for Attrs {
    /// `damon_new_ctx`'s defaults: 5 ms sampling, 100 ms aggregation, 60 s updates,
    /// 10..1000 regions, page-sized minimum regions.
    fn default() -> Self {
        Attrs {
            sample_interval_us: 5_000,
            aggr_interval_us: 100_000,
            ops_update_interval_us: 60_000_000,
            min_nr_regions: 10,
            max_nr_regions: 1000,
            min_region_sz: PAGE_SIZE,
            intervals_goal: IntervalsGoal::default(),
            adjustment: Adjustment::default(),
        }
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AttrsError {
    #[error("the minimum number of regions must be at least 3 (got {0})")]
    TooFewMinRegions(u32),
    #[error("the minimum number of regions ({min}) exceeds the maximum ({max})")]
    MinAboveMax { min: u32, max: u32 },
    #[error(
        "the sampling interval ({sample} us) is longer than the aggregation interval ({aggr} us)"
    )]
    SampleAboveAggr { sample: u64, aggr: u64 },
    #[error(
        "the intervals goal needs min_sample_us <= sampling interval <= max_sample_us \
         (got {min} <= {sample} <= {max})"
    )]
    BadIntervalsGoal { min: u64, sample: u64, max: u64 },
    #[error("the minimum region size must be a power of two (got {0})")]
    MinRegionSizeNotPowerOfTwo(u64),
}

impl Attrs {
    /// `damon_set_attrs`'s checks, plus NEW's power-of-two minimum region size.
    pub fn validate(&self) -> Result<(), AttrsError> {
        let g = &self.intervals_goal;
        if g.enabled()
            && !(g.min_sample_us <= g.max_sample_us
                && g.min_sample_us <= self.sample_interval_us
                && self.sample_interval_us <= g.max_sample_us)
        {
            return Err(AttrsError::BadIntervalsGoal {
                min: g.min_sample_us,
                sample: self.sample_interval_us,
                max: g.max_sample_us,
            });
        }
        if self.min_nr_regions < 3 {
            return Err(AttrsError::TooFewMinRegions(self.min_nr_regions));
        }
        if self.min_nr_regions > self.max_nr_regions {
            return Err(AttrsError::MinAboveMax {
                min: self.min_nr_regions,
                max: self.max_nr_regions,
            });
        }
        if self.sample_interval_us > self.aggr_interval_us {
            return Err(AttrsError::SampleAboveAggr {
                sample: self.sample_interval_us,
                aggr: self.aggr_interval_us,
            });
        }
        if !self.min_region_sz.is_power_of_two() {
            return Err(AttrsError::MinRegionSizeNotPowerOfTwo(self.min_region_sz));
        }
        Ok(())
    }

    /// The most memory the regions may take, at `max_nr_regions` ([`REGION_BYTES`] each).
    pub fn region_memory_bytes(&self) -> u64 {
        u64::from(self.max_nr_regions) * REGION_BYTES
    }

    /// The sampling interval as a divisor: upstream treats 0 as 1.
    pub fn sample_divisor(&self) -> u64 {
        self.sample_interval_us.max(1)
    }

    /// Sampling intervals per aggregation window, the maximum of `nr_accesses`
    /// (`damon_max_nr_accesses`, capped at `u32::MAX`).
    pub fn max_nr_accesses(&self) -> u32 {
        (self.aggr_interval_us / self.sample_divisor()).min(u32::MAX as u64) as u32
    }
}

/// Converts `nr_accesses` and `age` to new intervals (docs/algorithms.md#interval-change, NEW
/// behaviour).
///
/// `aggregating` is true mid-window, when the current `nr_accesses` is partial and dropped.
pub fn convert_monitoring_result(
    region: &mut crate::Region,
    old: &Attrs,
    new: &Attrs,
    aggregating: bool,
) {
    if old.sample_interval_us == 0
        || old.aggr_interval_us == 0
        || new.sample_interval_us == 0
        || new.aggr_interval_us == 0
    {
        return;
    }
    let old_max = old.max_nr_accesses().max(1) as u64;
    let new_max = new.max_nr_accesses() as u64;
    let conv = |n: u32| -> u32 {
        let bp = crate::region::mult_frac(n as u64, 10_000, old_max);
        (bp * new_max / 10_000).min(u32::MAX as u64) as u32
    };
    region.last_nr_accesses = conv(region.last_nr_accesses);
    region.nr_accesses = if aggregating {
        0
    } else {
        conv(region.nr_accesses)
    };
    region.age = (region.age as u64 * old.aggr_interval_us / new.aggr_interval_us) as u32;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Region;

    fn attrs(sample: u64, aggr: u64) -> Attrs {
        Attrs {
            sample_interval_us: sample,
            aggr_interval_us: aggr,
            ..Attrs::default()
        }
    }

    /// Upstream's kunit test `damon_test_set_attrs`: valid attributes, then each made invalid
    /// by one change.
    #[test]
    fn damon_test_set_attrs() {
        let valid = Attrs {
            min_nr_regions: 10,
            max_nr_regions: 1000,
            sample_interval_us: 5000,
            aggr_interval_us: 100_000,
            ..Attrs::default()
        };
        assert_eq!(valid.validate(), Ok(()));
        // A minimum region count below 3.
        let mut a = valid;
        a.min_nr_regions = 1;
        assert!(a.validate().is_err());
        // A maximum below the minimum.
        let mut a = valid;
        a.max_nr_regions = 9;
        assert!(a.validate().is_err());
        // An aggregation interval shorter than the sampling interval.
        let mut a = valid;
        a.aggr_interval_us = 4999;
        assert!(a.validate().is_err());
        // No fixed cap: page granularity over 16 GiB is 4 Mi regions, bounded by memory alone.
        let mut a = valid;
        a.max_nr_regions = 4 << 20;
        assert_eq!(a.validate(), Ok(()));
        assert_eq!(a.region_memory_bytes(), (4 << 20) * REGION_BYTES);
    }

    #[test]
    fn intervals_goal_bounds_are_checked() {
        let mut a = Attrs {
            intervals_goal: IntervalsGoal::recommended(),
            ..Attrs::default()
        };
        assert_eq!(a.validate(), Ok(()));
        a.sample_interval_us = 1000;
        assert!(matches!(
            a.validate(),
            Err(AttrsError::BadIntervalsGoal { .. })
        ));
        let a = Attrs {
            min_region_sz: 4095,
            ..Attrs::default()
        };
        assert_eq!(
            a.validate(),
            Err(AttrsError::MinRegionSizeNotPowerOfTwo(4095))
        );
    }

    /// Upstream's kunit test `damon_test_update_monitoring_result`: a region's results,
    /// counted under 10 µs sampling and 1 ms aggregation, converted to new intervals so that
    /// they mean the same (the region carries each conversion into the next).
    #[test]
    fn damon_test_update_monitoring_result() {
        let old = attrs(10, 1000);
        let mut r = Region::new(3, 7);
        r.nr_accesses = 15;
        r.age = 20;
        for (new, nr, age) in [
            // Both ten times longer: the same share of samples, a tenth of the windows.
            (attrs(100, 10_000), 15, 2),
            // Sampling ten times shorter: ten times the samples in a window as long.
            (attrs(1, 1000), 150, 2),
            // Windows ten times shorter too: ten times the windows for the same age.
            (attrs(1, 100), 150, 20),
        ] {
            convert_monitoring_result(&mut r, &old, &new, false);
            assert_eq!((r.nr_accesses, r.age), (nr, age), "new intervals {new:?}");
        }
    }

    /// Upstream's kunit test MID `damon_test_nr_accesses_to_accesses_bp`: the maximum is capped at
    /// `u32::MAX`, so a small count converts to 0 basis points.
    #[test]
    fn damon_test_nr_accesses_to_accesses_bp() {
        let a = attrs(10, (u32::MAX as u64 + 1) * 10);
        assert_eq!(a.max_nr_accesses(), u32::MAX);
        assert_eq!(
            crate::region::mult_frac(123, 10_000, a.max_nr_accesses() as u64),
            0
        );
    }
}
