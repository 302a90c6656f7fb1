//! Watermarks (docs/algorithms.md#damos-watermarks): activate a scheme only while a system metric
//! is in a band, with hysteresis, and let monitoring idle while every scheme is inactive.

use super::{Scheme, UnknownName};
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WmarkMetric {
    /// No watermarks: the scheme stays as it is (active from creation).
    #[default]
    None,
    /// Free memory, per-mille of total memory (see [`free_mem_rate`]).
    FreeMemRate,
}

impl WmarkMetric {
    pub fn name(self) -> &'static str {
        match self {
            WmarkMetric::None => "none",
            WmarkMetric::FreeMemRate => "free_mem_rate",
        }
    }
}

impl FromStr for WmarkMetric {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [WmarkMetric::None, WmarkMetric::FreeMemRate]
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownName::new("watermark metric", s, &["none", "free_mem_rate"]))
    }
}

/// Watermark parameters; `high`, `mid` and `low` are in the metric's unit (per-mille).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Watermarks {
    pub metric: WmarkMetric,
    /// How long to wait between checks while inactive, µs.
    pub interval_us: u64,
    pub high: u64,
    pub mid: u64,
    pub low: u64,
}

impl Watermarks {
    /// `damos_wmark_wait_us`: update `activated` from the metric's value and return how long to
    /// wait before the next check (0 while active). A metric that cannot be read here (`None`,
    /// as on a simulation, which has no system memory) gates nothing and leaves `activated`
    /// alone, as upstream treats a metric it fails to read.
    ///
    /// Above `high` or below `low` deactivates. An inactive scheme activates only once the
    /// metric is below `mid` (and at least `low`); an active one stays active anywhere in
    /// `[low, high]`.
    pub fn wait_us(&self, activated: &mut bool, metric_value: Option<u64>) -> u64 {
        let Some(m) = metric_value.filter(|_| self.metric != WmarkMetric::None) else {
            return 0;
        };
        if m > self.high || m < self.low {
            *activated = false;
            return self.interval_us;
        }
        if !*activated && self.mid <= m {
            return self.interval_us;
        }
        *activated = true;
        0
    }
}

/// `free_mem_rate`: free memory per-mille of total (0 when the total is unknown).
pub fn free_mem_rate(free: u64, total: u64) -> u64 {
    if total == 0 {
        0
    } else {
        (free as u128 * 1000 / total as u128) as u64
    }
}

/// `kdamond_wait_activation`'s wait: the shortest of the schemes' waits, after updating every
/// scheme's activation. 0 (monitor now) when some scheme is active or there are no schemes.
pub fn wait_activation_us(schemes: &mut [Scheme], metric_value: Option<u64>) -> u64 {
    schemes
        .iter_mut()
        .map(|s| s.wmarks_wait_us(metric_value))
        .min()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::damos::{AccessPattern, Action};

    fn wmarks() -> Watermarks {
        Watermarks {
            metric: WmarkMetric::FreeMemRate,
            interval_us: 5_000_000,
            high: 500,
            mid: 400,
            low: 200,
        }
    }

    #[test]
    fn transitions_have_hysteresis() {
        let w = wmarks();
        let mut active = true;
        // Plenty of free memory: nothing to do.
        assert_eq!(w.wait_us(&mut active, Some(600)), 5_000_000);
        assert!(!active);
        // Falling into [mid, high] is not enough to start...
        assert_eq!(w.wait_us(&mut active, Some(450)), 5_000_000);
        assert!(!active);
        // ...below mid starts.
        assert_eq!(w.wait_us(&mut active, Some(399)), 0);
        assert!(active);
        // Once active, the whole [low, high] band keeps it active.
        assert_eq!(w.wait_us(&mut active, Some(480)), 0);
        assert_eq!(w.wait_us(&mut active, Some(500)), 0);
        assert_eq!(w.wait_us(&mut active, Some(200)), 0);
        assert!(active);
        // Too little free memory: stop (the system is beyond help of this scheme).
        assert_eq!(w.wait_us(&mut active, Some(199)), 5_000_000);
        assert!(!active);
        assert_eq!(
            w.wait_us(&mut active, Some(200)),
            0,
            "back at low: below mid"
        );
        assert!(active);
    }

    #[test]
    fn no_metric_leaves_the_flag_alone() {
        let w = Watermarks::default();
        let mut active = false;
        assert_eq!(w.wait_us(&mut active, Some(0)), 0);
        assert!(!active);
    }

    #[test]
    fn monitoring_waits_only_while_every_scheme_is_inactive() {
        let mut a = Scheme::new(AccessPattern::default(), Action::Pageout);
        a.wmarks = wmarks();
        let mut b = a.clone();
        b.wmarks.interval_us = 1_000_000;
        let mut schemes = vec![a, b];
        assert_eq!(wait_activation_us(&mut schemes, Some(900)), 1_000_000);
        assert!(schemes.iter().all(|s| !s.is_active()));
        schemes[1].wmarks.metric = WmarkMetric::None;
        assert_eq!(wait_activation_us(&mut schemes, Some(900)), 0);
        assert_eq!(wait_activation_us(&mut [], Some(900)), 0);
    }

    #[test]
    fn free_rate_is_per_mille() {
        assert_eq!(free_mem_rate(1 << 30, 4 << 30), 250);
        assert_eq!(free_mem_rate(1, 0), 0);
        assert_eq!("free_mem_rate".parse(), Ok(WmarkMetric::FreeMemRate));
        assert!("free".parse::<WmarkMetric>().is_err());
    }

    #[test]
    fn a_metric_that_cannot_be_read_gates_nothing() {
        let w = wmarks();
        let mut active = true;
        assert_eq!(w.wait_us(&mut active, None), 0);
        assert!(active);
        let mut scheme = Scheme::new(AccessPattern::default(), Action::Pageout);
        scheme.wmarks = wmarks();
        assert_eq!(wait_activation_us(&mut [scheme], None), 0);
    }
}
