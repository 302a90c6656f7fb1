//! Access patterns (docs/algorithms.md#damos-pattern): the regions a scheme is for, by size, access
//! frequency and age.

use crate::attrs::Attrs;
use crate::region::Region;

/// Three closed ranges `[min, max]` in upstream's units: bytes (core address units), positive
/// samples per aggregation window, and aggregation intervals. The default matches everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessPattern {
    pub min_sz_region: u64,
    pub max_sz_region: u64,
    pub min_nr_accesses: u32,
    pub max_nr_accesses: u32,
    pub min_age_region: u32,
    pub max_age_region: u32,
}

impl Default for AccessPattern {
    fn default() -> Self {
        AccessPattern {
            min_sz_region: 0,
            max_sz_region: u64::MAX,
            min_nr_accesses: 0,
            max_nr_accesses: u32::MAX,
            min_age_region: 0,
            max_age_region: u32::MAX,
        }
    }
}

impl AccessPattern {
    /// A pattern in the units people think in, converted as damo does: access rates in percent
    /// of the maximum `nr_accesses` (`aggr / sample`), ages in microseconds, both rounded down.
    /// `u64::MAX` as the maximum age means "no limit".
    pub fn from_rates(
        sz: (u64, u64),
        nr_accesses_percent: (u32, u32),
        age_us: (u64, u64),
        attrs: &Attrs,
    ) -> Self {
        let max_nr = attrs.max_nr_accesses() as u64;
        let nr = |percent: u32| (percent as u64 * max_nr / 100).min(u32::MAX as u64) as u32;
        let aggr = attrs.aggr_interval_us.max(1);
        let age = |us: u64| (us / aggr).min(u32::MAX as u64) as u32;
        AccessPattern {
            min_sz_region: sz.0,
            max_sz_region: sz.1,
            min_nr_accesses: nr(nr_accesses_percent.0),
            max_nr_accesses: nr(nr_accesses_percent.1),
            min_age_region: age(age_us.0),
            max_age_region: age(age_us.1),
        }
    }

    /// `__damos_valid_target`'s pattern check. `nr_accesses` is the value to compare: NEW passes
    /// the moving sum (`damon_nr_accesses_mvsum`), which equals the window's count at an
    /// aggregation boundary and estimates it mid-window (OLD used `nr_accesses_bp / 10000`).
    pub fn matches(&self, region: &Region, nr_accesses: u32) -> bool {
        let sz = region.size();
        (self.min_sz_region..=self.max_sz_region).contains(&sz)
            && (self.min_nr_accesses..=self.max_nr_accesses).contains(&nr_accesses)
            && (self.min_age_region..=self.max_age_region).contains(&region.age)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_closed() {
        let p = AccessPattern {
            min_sz_region: 10,
            max_sz_region: 20,
            min_nr_accesses: 2,
            max_nr_accesses: 4,
            min_age_region: 5,
            max_age_region: 6,
        };
        let r = |s: u64, e: u64, age: u32| Region {
            age,
            ..Region::new(s, e)
        };
        assert!(p.matches(&r(0, 10, 5), 2));
        assert!(p.matches(&r(0, 20, 6), 4));
        assert!(!p.matches(&r(0, 9, 5), 2), "too small");
        assert!(!p.matches(&r(0, 21, 5), 2), "too large");
        assert!(!p.matches(&r(0, 10, 5), 1), "too cold");
        assert!(!p.matches(&r(0, 10, 5), 5), "too hot");
        assert!(!p.matches(&r(0, 10, 4), 2), "too young");
        assert!(!p.matches(&r(0, 10, 7), 2), "too old");
        assert!(AccessPattern::default().matches(&r(0, 1 << 40, u32::MAX), u32::MAX));
    }

    #[test]
    fn rates_and_durations_convert_like_damo() {
        // 5 ms sampling, 100 ms aggregation: 20 samples per window.
        let attrs = Attrs::default();
        let p =
            AccessPattern::from_rates((4096, u64::MAX), (5, 100), (30_000_000, u64::MAX), &attrs);
        assert_eq!((p.min_nr_accesses, p.max_nr_accesses), (1, 20));
        assert_eq!((p.min_age_region, p.max_age_region), (300, u32::MAX));
        assert_eq!((p.min_sz_region, p.max_sz_region), (4096, u64::MAX));
        // Rounded down: 7 % of 20 samples is 1.4, 150 ms is 1.5 aggregations.
        let p = AccessPattern::from_rates((0, 0), (7, 7), (150_000, 150_000), &attrs);
        assert_eq!((p.min_nr_accesses, p.min_age_region), (1, 1));
    }
}
