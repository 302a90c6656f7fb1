//! Quotas (docs/algorithms.md#damos-quotas): how much a scheme may do per charge window, and the
//! effective size quota (`esz`) that combines the time quota, the size quota and the goals'
//! feedback.

use super::goal::{MetricSource, QuotaGoal, quota_score};
use super::{UnknownName, mult_frac_sat};
use crate::attrs::PAGE_SIZE;
use crate::tuning::feed_loop_next_input;
use std::str::FromStr;

/// How goals turn into an effective size quota (NEW).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GoalTuner {
    /// Proportional feedback: grow while under-achieving, shrink while over-achieving.
    #[default]
    Consist,
    /// All or nothing: the size quota (or no limit) until the goal is met, then nothing.
    Temporal,
}

impl GoalTuner {
    pub const ALL: [GoalTuner; 2] = [GoalTuner::Consist, GoalTuner::Temporal];

    pub fn name(self) -> &'static str {
        match self {
            GoalTuner::Consist => "consist",
            GoalTuner::Temporal => "temporal",
        }
    }
}

impl FromStr for GoalTuner {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GoalTuner::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownName::new("goal tuner", s, &["consist", "temporal"]))
    }
}

/// Quota parameters. All zero (the default) means no quota.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Quota {
    /// Time the action may take per window, ms.
    pub ms: u64,
    /// Bytes the action may be applied to per window.
    pub sz: u64,
    /// Charge window length, ms.
    pub reset_interval_ms: u64,
    /// Prioritisation weights, per-mille. `weight_sz` is kept for interface compatibility;
    /// upstream's score functions ignore it.
    pub weight_sz: u32,
    pub weight_nr_accesses: u32,
    pub weight_age: u32,
    pub goals: Vec<QuotaGoal>,
    pub goal_tuner: GoalTuner,
    /// NEW: bytes the action failed on are charged at `num / denom` (all of them while `denom`
    /// is 0).
    pub fail_charge_num: u32,
    pub fail_charge_denom: u32,
}

/// A quota's runtime state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuotaState {
    /// Effective size quota of the current window, bytes.
    pub esz: u64,
    /// The goal tuner's output, esz in basis points of a byte.
    pub esz_bp: u64,
    /// Bytes charged in the current window.
    pub charged_sz: u64,
    /// Start of the current window, µs; `None` before the first window.
    pub charged_from_us: Option<u64>,
    /// Bytes charged in all completed windows (the throughput estimate's numerator).
    pub total_charged_sz: u64,
    /// Time the action took, ever (the throughput estimate's denominator).
    pub total_charged_ns: u64,
    /// Where the quota ran out: the next window resumes from this target and address.
    pub charge_target_from: Option<usize>,
    pub charge_addr_from: u64,
    /// Regions scoring below this are not eligible in this pass (prioritisation).
    pub min_score: u8,
}

impl Quota {
    /// Whether any limit was asked for (`damos_adjust_quota`'s early exit).
    pub fn has_limits(&self) -> bool {
        self.ms != 0 || self.sz != 0 || !self.goals.is_empty()
    }

    /// `damos_quota_is_set` (NEW): a limit was asked for, or an effective quota is in force.
    pub fn is_set(&self, st: &QuotaState) -> bool {
        st.esz != 0 || self.has_limits()
    }

    /// `damos_quota_is_full` (NEW): nothing more may be charged in this window. Less than a
    /// minimum region left counts as full, since actions apply to whole regions. A set quota
    /// whose `esz` is 0 is full (OLD treated `esz == 0` as unlimited).
    pub fn is_full(&self, st: &QuotaState, min_region_sz: u64) -> bool {
        self.is_set(st) && (st.charged_sz >= st.esz || st.esz - st.charged_sz < min_region_sz)
    }

    /// `damos_charge_quota` (NEW fail-charge ratio): the bytes the action worked on count fully,
    /// the bytes it failed on at `fail_charge_num / fail_charge_denom`. An operations set that
    /// reports more than the region (huge pages) is charged the region.
    pub fn charge(&self, st: &mut QuotaState, sz_region: u64, sz_applied: u64) {
        let charge = if self.fail_charge_denom == 0 || sz_applied > sz_region {
            sz_region
        } else {
            sz_applied.saturating_add(mult_frac_sat(
                sz_region - sz_applied,
                self.fail_charge_num as u64,
                self.fail_charge_denom as u64,
            ))
        };
        st.charged_sz = st.charged_sz.saturating_add(charge);
    }

    /// `damos_commit_quota`: parameters and goals from `src`; runtime state and goals' PSI
    /// baselines stay (goals are matched by position, extra ones added or dropped).
    pub fn commit(&mut self, src: &Quota) {
        self.reset_interval_ms = src.reset_interval_ms;
        self.ms = src.ms;
        self.sz = src.sz;
        self.goals.truncate(src.goals.len());
        for (dst, src) in self.goals.iter_mut().zip(&src.goals) {
            dst.commit(src);
        }
        for extra in &src.goals[self.goals.len()..] {
            let mut g = QuotaGoal::new(extra.metric.clone(), extra.target_value);
            g.commit(extra);
            self.goals.push(g);
        }
        self.goal_tuner = src.goal_tuner;
        self.weight_sz = src.weight_sz;
        self.weight_nr_accesses = src.weight_nr_accesses;
        self.weight_age = src.weight_age;
        self.fail_charge_num = src.fail_charge_num;
        self.fail_charge_denom = src.fail_charge_denom;
    }
}

/// `damos_set_effective_quota`: the window's size quota from the goals' feedback, the time
/// quota (through the measured throughput) and the size quota, whichever is smallest.
pub fn set_effective_quota(
    quota: &mut Quota,
    st: &mut QuotaState,
    metrics: &mut dyn MetricSource,
    min_region_sz: u64,
) {
    if quota.ms == 0 && quota.goals.is_empty() {
        st.esz = quota.sz;
        return;
    }
    let mut esz = u64::MAX;
    if !quota.goals.is_empty() {
        let score = quota_score(&mut quota.goals, metrics);
        st.esz_bp = match quota.goal_tuner {
            // Starts from 10,000 bp (1 byte), so a goal-only quota starts tiny and at most
            // doubles per window while under-achieving.
            GoalTuner::Consist => feed_loop_next_input(st.esz_bp.max(10_000), score),
            GoalTuner::Temporal if score >= 10_000 => 0,
            GoalTuner::Temporal if quota.sz != 0 => quota.sz.saturating_mul(10_000),
            GoalTuner::Temporal => u64::MAX,
        };
        esz = st.esz_bp / 10_000;
    }
    if quota.ms != 0 {
        // Bytes per ms; before any measurement, assume 4 MiB per ms.
        let throughput = if st.total_charged_ns != 0 {
            mult_frac_sat(st.total_charged_sz, 1_000_000, st.total_charged_ns)
        } else {
            PAGE_SIZE * 1024
        };
        esz = throughput
            .saturating_mul(quota.ms)
            .min(esz)
            .max(min_region_sz);
    }
    if quota.sz != 0 && quota.sz < esz {
        esz = quota.sz;
    }
    st.esz = esz;
}

/// What [`update_charge_window`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeWindow {
    /// Nothing: now is inside the current window, or the quota has no limits.
    Same,
    /// A window started; `exceeded` when the one that ended had used up the quota (what
    /// upstream counts in `qt_exceeds`).
    Started { exceeded: bool },
}

/// The charge-window part of `damos_adjust_quota` (NEW): open the first window, or start a new
/// one once `now_us` left `[charged_from, charged_from + reset_interval)`, recomputing the
/// effective quota. Does nothing for a quota without limits.
pub fn update_charge_window(
    quota: &mut Quota,
    st: &mut QuotaState,
    now_us: u64,
    metrics: &mut dyn MetricSource,
    min_region_sz: u64,
) -> ChargeWindow {
    if !quota.has_limits() {
        return ChargeWindow::Same;
    }
    let mut started = ChargeWindow::Same;
    // NEW: an explicit first window. `None` replaces upstream's "charged_from == 0", which a
    // time line starting at 0 (simulation) would keep re-entering.
    let from = match st.charged_from_us {
        Some(from) => from,
        None => {
            st.charged_from_us = Some(now_us);
            set_effective_quota(quota, st, metrics, min_region_sz);
            started = ChargeWindow::Started { exceeded: false };
            now_us
        }
    };
    let window_end = from.saturating_add(quota.reset_interval_ms.saturating_mul(1000));
    if !(from..window_end).contains(&now_us) {
        let exceeded = quota.is_full(st, min_region_sz);
        st.total_charged_sz = st.total_charged_sz.saturating_add(st.charged_sz);
        st.charged_from_us = Some(now_us);
        st.charged_sz = 0;
        set_effective_quota(quota, st, metrics, min_region_sz);
        started = ChargeWindow::Started { exceeded };
    }
    started
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::damos::goal::{GoalMetric, NoMetrics};

    fn user_goal(current: u64, target: u64) -> QuotaGoal {
        QuotaGoal {
            current_value: current,
            ..QuotaGoal::new(GoalMetric::UserInput, target)
        }
    }

    fn esz_of(quota: &mut Quota, st: &mut QuotaState) -> u64 {
        set_effective_quota(quota, st, &mut NoMetrics, 4096);
        st.esz
    }

    #[test]
    fn size_only_quota_is_the_size() {
        let mut q = Quota {
            sz: 10 << 20,
            ..Quota::default()
        };
        assert_eq!(esz_of(&mut q, &mut QuotaState::default()), 10 << 20);
    }

    #[test]
    fn time_quota_uses_measured_throughput() {
        let mut q = Quota {
            ms: 10,
            ..Quota::default()
        };
        let mut st = QuotaState::default();
        // Nothing measured yet: 4 MiB per ms.
        assert_eq!(esz_of(&mut q, &mut st), 10 * 4096 * 1024);
        // 1 MiB in 2 ms: 512 KiB per ms.
        st.total_charged_sz = 1 << 20;
        st.total_charged_ns = 2_000_000;
        assert_eq!(esz_of(&mut q, &mut st), 10 * (512 << 10));
        // Never below a minimum region, so that something can always be tried.
        st.total_charged_ns = u64::MAX;
        assert_eq!(esz_of(&mut q, &mut st), 4096);
        // A smaller size quota wins.
        q.sz = 8192;
        st.total_charged_ns = 2_000_000;
        assert_eq!(esz_of(&mut q, &mut st), 8192);
    }

    #[test]
    fn goal_only_quota_starts_tiny_and_at_most_doubles() {
        let mut q = Quota {
            goals: vec![user_goal(0, 100)],
            ..Quota::default()
        };
        let mut st = QuotaState::default();
        let mut last = 1;
        for _ in 0..10 {
            let esz = esz_of(&mut q, &mut st);
            assert_eq!(esz, last * 2, "score 0 doubles the input");
            last = esz;
        }
        // Half-way to the goal: ×1.5 at most.
        q.goals[0].current_value = 50;
        assert_eq!(esz_of(&mut q, &mut st), last * 3 / 2);
    }

    #[test]
    fn goal_feedback_moves_esz_towards_the_goal() {
        let mut q = Quota {
            goals: vec![user_goal(0, 100)],
            ..Quota::default()
        };
        let mut st = QuotaState {
            esz_bp: 1_000_000_000,
            ..QuotaState::default()
        };
        q.goals[0].current_value = 80; // under-achieving: more aggressive
        let up = esz_of(&mut q, &mut st);
        assert!(up > 100_000, "{up}");
        q.goals[0].current_value = 100; // met: unchanged
        assert_eq!(esz_of(&mut q, &mut st), up);
        q.goals[0].current_value = 150; // over-achieving: less aggressive
        assert!(esz_of(&mut q, &mut st) < up);
        q.goals[0].current_value = 300; // far over: back to the minimum input
        assert_eq!(esz_of(&mut q, &mut st), 1);
    }

    #[test]
    fn temporal_tuner_is_all_or_nothing() {
        let mut q = Quota {
            goals: vec![user_goal(50, 100)],
            goal_tuner: GoalTuner::Temporal,
            ..Quota::default()
        };
        let mut st = QuotaState::default();
        assert_eq!(
            esz_of(&mut q, &mut st),
            u64::MAX / 10_000,
            "no size quota: no limit"
        );
        q.sz = 1 << 20;
        assert_eq!(esz_of(&mut q, &mut st), 1 << 20);
        q.goals[0].current_value = 100;
        assert_eq!(esz_of(&mut q, &mut st), 0, "goal met: nothing");
        // NEW: a set quota with esz 0 is full, not unlimited.
        assert!(q.is_full(&st, 4096));
    }

    #[test]
    fn fail_charge_ratio() {
        let mut st = QuotaState::default();
        let mut q = Quota::default();
        q.charge(&mut st, 1000, 700);
        assert_eq!(st.charged_sz, 1000, "without a ratio everything is charged");
        q.fail_charge_num = 1;
        q.fail_charge_denom = 10;
        q.charge(&mut st, 1000, 700);
        assert_eq!(st.charged_sz, 1000 + 700 + 30);
        q.charge(&mut st, 1000, 4096);
        assert_eq!(
            st.charged_sz,
            1730 + 1000,
            "over-reporting is charged the region"
        );
    }

    #[test]
    fn full_means_less_than_a_minimum_region_left() {
        let q = Quota {
            sz: 10_000,
            ..Quota::default()
        };
        let mut st = QuotaState {
            esz: 10_000,
            ..QuotaState::default()
        };
        assert!(!q.is_full(&st, 4096));
        st.charged_sz = 8192;
        assert!(q.is_full(&st, 4096), "1808 bytes left");
        assert!(
            !Quota::default().is_full(&QuotaState::default(), 4096),
            "no quota"
        );
    }

    #[test]
    fn windows_reset_after_the_interval_and_count_exceeds() {
        let mut q = Quota {
            sz: 8192,
            reset_interval_ms: 1000,
            ..Quota::default()
        };
        let mut st = QuotaState::default();
        let mut win =
            |st: &mut QuotaState, now| update_charge_window(&mut q, st, now, &mut NoMetrics, 4096);
        let started = |exceeded| ChargeWindow::Started { exceeded };
        assert_eq!(win(&mut st, 0), started(false), "first window");
        assert_eq!((st.esz, st.charged_from_us), (8192, Some(0)));
        st.charged_sz = 8192;
        assert_eq!(win(&mut st, 999_999), ChargeWindow::Same, "still inside");
        assert_eq!(win(&mut st, 1_000_000), started(true), "a full window");
        assert_eq!((st.charged_sz, st.total_charged_sz), (0, 8192));
        st.charged_sz = 4096;
        assert_eq!(
            win(&mut st, 2_500_000),
            started(false),
            "half-used window is no exceed"
        );
        assert_eq!(st.charged_from_us, Some(2_500_000));
        // Time going backwards (a restarted time line) also starts a window.
        assert_eq!(win(&mut st, 10), started(false));
    }

    #[test]
    fn no_limits_no_windows() {
        let mut q = Quota::default();
        let mut st = QuotaState::default();
        assert_eq!(
            update_charge_window(&mut q, &mut st, 5, &mut NoMetrics, 1),
            ChargeWindow::Same
        );
        assert_eq!(st, QuotaState::default());
    }

    #[test]
    fn tuner_names() {
        assert_eq!("temporal".parse(), Ok(GoalTuner::Temporal));
        assert_eq!(
            "fast".parse::<GoalTuner>().unwrap_err().to_string(),
            "unknown goal tuner `fast`; valid goal tuners: consist, temporal"
        );
    }
}
