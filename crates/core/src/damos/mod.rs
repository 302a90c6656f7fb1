//! DAMOS, DAMON-based Operation Schemes (docs/algorithms.md#damos): act on regions whose access
//! pattern matches, within quotas, prioritised by access temperature, gated by watermarks and
//! filters.
//!
//! Everything here is deterministic logic: time, system metrics and the effect of an action come
//! in as values or through small traits ([`SchemeApplier`], [`MetricSource`]), so the same code
//! drives simulations and live processes. Where upstream's OLD (≈v6.16) and NEW (2026) behaviour
//! differ, NEW is followed; comments at the points of difference say so.
//!
//! - [`pattern`]: which regions a scheme is for;
//! - [`action`]: what it does to them;
//! - [`quota`]: how much per charge window, and the effective size quota;
//! - [`score`]: which regions first when the quota cannot cover all (prioritisation);
//! - [`goal`]: quota auto-tuning towards a goal on a system metric;
//! - [`watermarks`]: when a scheme is active at all;
//! - [`filter`]: which memory inside matching regions is excluded or included;
//! - [`stats`]: what was tried and applied, and tried-regions capture;
//! - [`apply`]: one apply pass over the targets.

pub mod action;
pub mod apply;
pub mod filter;
pub mod goal;
pub mod pattern;
pub mod quota;
pub mod score;
pub mod stats;
pub mod watermarks;

pub use action::{Action, HUGE_PAGE, huge_page_blocks};
pub(crate) use apply::any_due;
pub use apply::{Applied, ApplyEnv, ApplyPass, SchemeApplier};
pub use filter::{Filter, FilterKind, Filters};
pub use goal::{GoalMetric, LruMem, MetricSource, NoMetrics, NodeMem, QuotaGoal};
pub use pattern::AccessPattern;
pub use quota::{GoalTuner, Quota, QuotaState};
pub use score::{MAX_SCORE, ScoreHistogram, cold_score, default_scheme_score, hot_score};
pub use stats::{DamosWalk, SchemeStats, SchemeTriedRegions, TriedRegion, WalkError};
pub use watermarks::{Watermarks, WmarkMetric, free_mem_rate, wait_activation_us};

use crate::attrs::Attrs;
use crate::region::AddrRange;
use thiserror::Error;

/// A name that is not one of a closed set of keywords (actions, tuners, metrics).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown {what} `{got}`; valid {what}s: {valid}")]
pub struct UnknownName {
    pub what: &'static str,
    pub got: String,
    pub valid: String,
}

impl UnknownName {
    fn new(what: &'static str, got: &str, valid: &[&str]) -> Self {
        UnknownName {
            what,
            got: got.to_string(),
            valid: valid.join(", "),
        }
    }
}

/// A scheme whose parameters contradict themselves; found by [`Scheme::validate`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SchemeError {
    #[error(
        "the access pattern's {field} range is empty (min {min} > max {max}); swap or fix the bounds"
    )]
    EmptyRange {
        field: &'static str,
        min: u64,
        max: u64,
    },
    #[error(
        "watermarks must satisfy low <= mid <= high (got low {low}, mid {mid}, high {high}, per-mille)"
    )]
    WatermarkOrder { low: u64, mid: u64, high: u64 },
    #[error("quota goal {index} ({metric}) has target value 0; give a positive target")]
    ZeroGoalTarget { index: usize, metric: &'static str },
}

/// A weighted migration destination (`migrate_dests`), for the migrate actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrateDest {
    pub node_id: u32,
    pub weight: u32,
}

/// A scheme's runtime state: everything the apply passes change, and that a parameter
/// [`Scheme::commit`] keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemeState {
    pub quota: QuotaState,
    /// The sampling-interval count at which the scheme is next applied.
    pub next_apply_sis: u64,
    /// Watermarks' verdict; a new scheme starts active.
    pub activated: bool,
    /// Whether a core filter allowed the region being applied to, in which case the operations
    /// layer skips its own filters for that region (docs/algorithms.md#damos-filters).
    pub core_filters_allowed: bool,
}

impl Default for SchemeState {
    fn default() -> Self {
        SchemeState {
            quota: QuotaState::default(),
            next_apply_sis: 0,
            activated: true,
            core_filters_allowed: false,
        }
    }
}

/// One operation scheme: parameters (public fields) and runtime state (read with
/// [`Scheme::state`], changed only by the apply pass and the methods here).
#[derive(Debug, Clone)]
pub struct Scheme {
    pub pattern: AccessPattern,
    pub action: Action,
    /// How often the scheme is applied; 0 means every aggregation interval
    /// (docs/algorithms.md#damos-apply-interval).
    pub apply_interval_us: u64,
    pub quota: Quota,
    pub wmarks: Watermarks,
    pub filters: Filters,
    /// Destination node of `migrate_hot`/`migrate_cold`; `None` is upstream's `NUMA_NO_NODE`.
    pub target_nid: Option<u32>,
    pub dests: Vec<MigrateDest>,
    /// Stop applying once this many whole passes over a target completed; 0 means no limit.
    pub max_nr_snapshots: u64,
    pub stats: SchemeStats,
    state: SchemeState,
}

impl Scheme {
    /// A scheme with no quota, no watermarks (always active), no filters, applied every
    /// aggregation interval.
    pub fn new(pattern: AccessPattern, action: Action) -> Self {
        Scheme {
            pattern,
            action,
            apply_interval_us: 0,
            quota: Quota::default(),
            wmarks: Watermarks::default(),
            filters: Filters::default(),
            target_nid: None,
            dests: Vec::new(),
            max_nr_snapshots: 0,
            stats: SchemeStats::default(),
            state: SchemeState::default(),
        }
    }

    pub fn state(&self) -> &SchemeState {
        &self.state
    }

    /// The huge-page blocks a `collapse` by this scheme acts on in `range`
    /// ([`huge_page_blocks`]), bounded by the region when a quota is set.
    pub fn huge_page_blocks(&self, range: AddrRange) -> Option<AddrRange> {
        huge_page_blocks(range, self.quota.is_set(&self.state.quota))
    }

    /// `damos_set_next_apply_sis`: call when monitoring starts, when the scheme is added to a
    /// running context, and whenever the attributes change.
    pub fn set_next_apply_sis(&mut self, passed_sample_intervals: u64, attrs: &Attrs) {
        let interval = if self.apply_interval_us == 0 {
            attrs.aggr_interval_us
        } else {
            self.apply_interval_us
        };
        self.state.next_apply_sis = passed_sample_intervals + interval / attrs.sample_divisor();
    }

    /// Whether the watermarks currently let the scheme run.
    pub fn is_active(&self) -> bool {
        self.state.activated
    }

    /// `damos_wmark_wait_us` for this scheme: updates the activation and returns how long to
    /// wait before checking again (0 when active). `metric_value` is the watermark metric's
    /// current value (ignored for [`WmarkMetric::None`]).
    pub fn wmarks_wait_us(&mut self, metric_value: Option<u64>) -> u64 {
        self.wmarks.wait_us(&mut self.state.activated, metric_value)
    }

    /// Call when target `index` is removed from the context: a resume marker on it is dropped
    /// (as upstream's target commit does) and markers on later targets follow the shift.
    pub fn target_removed(&mut self, index: usize) {
        let q = &mut self.state.quota;
        match q.charge_target_from {
            Some(t) if t == index => {
                q.charge_target_from = None;
                q.charge_addr_from = 0;
            }
            Some(t) if t > index => q.charge_target_from = Some(t - 1),
            _ => {}
        }
    }

    /// `damos_commit`: take every user parameter from `src`, keep this scheme's runtime state
    /// (stats, quota charging and effective size, per-goal PSI baseline, next apply time).
    ///
    /// As upstream, which copies the whole watermarks struct, the activation comes with the
    /// watermarks (a fresh source scheme is active): the next watermark check decides again,
    /// and a scheme whose watermarks were removed does not stay inactive forever.
    pub fn commit(&mut self, src: &Scheme) {
        self.pattern = src.pattern;
        self.action = src.action;
        self.apply_interval_us = src.apply_interval_us;
        self.quota.commit(&src.quota);
        self.wmarks = src.wmarks;
        self.state.activated = src.state.activated;
        self.target_nid = src.target_nid;
        self.dests.clone_from(&src.dests);
        self.filters.clone_from(&src.filters);
        self.max_nr_snapshots = src.max_nr_snapshots;
    }

    /// Reject parameters that can never do what was meant: empty pattern ranges, watermarks out
    /// of order, goals with a zero target.
    pub fn validate(&self) -> Result<(), SchemeError> {
        let p = &self.pattern;
        for (field, min, max) in [
            ("size", p.min_sz_region, p.max_sz_region),
            (
                "nr_accesses",
                p.min_nr_accesses as u64,
                p.max_nr_accesses as u64,
            ),
            ("age", p.min_age_region as u64, p.max_age_region as u64),
        ] {
            if min > max {
                return Err(SchemeError::EmptyRange { field, min, max });
            }
        }
        let w = &self.wmarks;
        if w.metric != WmarkMetric::None && !(w.low <= w.mid && w.mid <= w.high) {
            return Err(SchemeError::WatermarkOrder {
                low: w.low,
                mid: w.mid,
                high: w.high,
            });
        }
        if let Some(index) = self.quota.goals.iter().position(|g| g.target_value == 0) {
            return Err(SchemeError::ZeroGoalTarget {
                index,
                metric: self.quota.goals[index].metric.name(),
            });
        }
        Ok(())
    }
}

/// `x * n / d` saturating at `u64::MAX` instead of wrapping (`d` > 0).
fn mult_frac_sat(x: u64, n: u64, d: u64) -> u64 {
    (x as u128 * n as u128 / d as u128).min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_apply_follows_apply_interval_or_aggregation() {
        let attrs = Attrs::default();
        let mut s = Scheme::new(AccessPattern::default(), Action::Stat);
        s.set_next_apply_sis(7, &attrs);
        assert_eq!(s.state().next_apply_sis, 7 + 20);
        s.apply_interval_us = 1_000_000;
        s.set_next_apply_sis(7, &attrs);
        assert_eq!(s.state().next_apply_sis, 7 + 200);
    }

    #[test]
    fn validation_names_the_problem() {
        let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
        assert_eq!(s.validate(), Ok(()));
        s.pattern.min_age_region = 10;
        s.pattern.max_age_region = 5;
        assert_eq!(
            s.validate(),
            Err(SchemeError::EmptyRange {
                field: "age",
                min: 10,
                max: 5
            })
        );
        s.pattern = AccessPattern::default();
        s.wmarks = Watermarks {
            metric: WmarkMetric::FreeMemRate,
            interval_us: 1000,
            high: 100,
            mid: 500,
            low: 50,
        };
        assert!(matches!(
            s.validate(),
            Err(SchemeError::WatermarkOrder { .. })
        ));
        s.wmarks.metric = WmarkMetric::None;
        s.quota
            .goals
            .push(QuotaGoal::new(GoalMetric::SomeMemPsiUs, 0));
        let err = s.validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "quota goal 0 (some_mem_psi_us) has target value 0; give a positive target"
        );
    }

    #[test]
    fn removing_a_target_moves_or_drops_the_resume_marker() {
        let mut s = Scheme::new(AccessPattern::default(), Action::Pageout);
        s.state.quota.charge_target_from = Some(2);
        s.state.quota.charge_addr_from = 4096;
        s.target_removed(0);
        assert_eq!(s.state().quota.charge_target_from, Some(1));
        s.target_removed(1);
        assert_eq!(s.state().quota.charge_target_from, None);
        assert_eq!(s.state().quota.charge_addr_from, 0);
    }
}
