//! Prioritisation (docs/algorithms.md#damos-quotas): when a quota cannot cover every matching
//! region, the regions with the highest scores go first. Scores come from the operations set; these
//! are upstream's `ops-common` hot and cold scores and the size histogram that turns scores into a
//! threshold.

use super::Scheme;
use super::action::Action;
use super::quota::Quota;
use crate::attrs::Attrs;

/// `DAMOS_MAX_SCORE`: scores range over `0..=99`.
pub const MAX_SCORE: u8 = 99;

/// `damon_hot_score`: access frequency and age, weighted by the quota's per-mille weights.
/// `nr_accesses` is the moving sum (NEW; OLD used the raw partial count here,
/// docs/algorithms.md#upstream-behaviours).
///
/// Age counts in seconds on a log scale, and counts as coldness for a region never accessed:
/// an old idle region is colder than a young idle one.
pub fn hot_score(nr_accesses: u32, age: u32, attrs: &Attrs, quota: &Quota) -> u8 {
    const MAX_SUBSCORE: i64 = 100;
    const MAX_AGE_IN_LOG: i64 = 32;
    let max_nr = (attrs.max_nr_accesses() as i64).max(1);
    // Capped: a mid-window estimate or converted count can exceed the window's maximum, and
    // upstream would then index past its histogram.
    let freq = (nr_accesses as i64 * MAX_SUBSCORE / max_nr).min(MAX_SUBSCORE);
    let age_s = age as u64 * attrs.aggr_interval_us / 1_000_000;
    let mut lg = (u64::BITS - age_s.leading_zeros()).min(MAX_AGE_IN_LOG as u32) as i64;
    if freq == 0 {
        lg = -lg;
    }
    // Integer operations left to right, as upstream: (lg + 32) * 100 / 32 / 2.
    let age_sub = (lg + MAX_AGE_IN_LOG) * MAX_SUBSCORE / MAX_AGE_IN_LOG / 2;
    let (fw, aw) = (quota.weight_nr_accesses as i64, quota.weight_age as i64);
    let mut hot = fw * freq + aw * age_sub;
    if fw + aw != 0 {
        hot /= fw + aw;
    }
    (hot * MAX_SCORE as i64 / MAX_SUBSCORE) as u8
}

/// `damon_cold_score`: the mirror of [`hot_score`].
pub fn cold_score(nr_accesses: u32, age: u32, attrs: &Attrs, quota: &Quota) -> u8 {
    MAX_SCORE - hot_score(nr_accesses, age, attrs, quota)
}

/// `get_scheme_score` of upstream's operations sets: cold regions first for actions that
/// demote or reclaim, hot regions first for those that promote, and everything equal
/// ([`MAX_SCORE`]) otherwise. This is paddr's table; vaddr's is the same for the actions it
/// supports.
pub fn default_scheme_score(scheme: &Scheme, nr_accesses: u32, age: u32, attrs: &Attrs) -> u8 {
    match scheme.action {
        Action::Pageout | Action::LruDeprio | Action::MigrateCold => {
            cold_score(nr_accesses, age, attrs, &scheme.quota)
        }
        Action::LruPrio | Action::MigrateHot => hot_score(nr_accesses, age, attrs, &scheme.quota),
        _ => MAX_SCORE,
    }
}

/// Bytes of eligible regions per score (`regions_score_histogram`).
#[derive(Debug, Clone)]
pub struct ScoreHistogram {
    bytes: [u64; MAX_SCORE as usize + 1],
    max_score: u8,
}

impl Default for ScoreHistogram {
    fn default() -> Self {
        ScoreHistogram {
            bytes: [0; MAX_SCORE as usize + 1],
            max_score: 0,
        }
    }
}

impl ScoreHistogram {
    pub fn add(&mut self, score: u8, sz: u64) {
        let score = score.min(MAX_SCORE);
        self.bytes[score as usize] = self.bytes[score as usize].saturating_add(sz);
        self.max_score = self.max_score.max(score);
    }

    /// The lowest score that still fits: going down from the highest score, the first at which
    /// the bytes so far reach `esz` (0 if they never do). Regions tied at the threshold may
    /// overshoot the quota; the apply pass trims them.
    pub fn min_score(&self, esz: u64) -> u8 {
        let mut cumulated = 0u64;
        let mut score = self.max_score;
        loop {
            cumulated = cumulated.saturating_add(self.bytes[score as usize]);
            if cumulated >= esz || score == 0 {
                return score;
            }
            score -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(nr: u32, age: u32) -> Quota {
        Quota {
            weight_nr_accesses: nr,
            weight_age: age,
            ..Quota::default()
        }
    }

    /// The examples of docs/algorithms.md#damos-quotas (5 ms sampling, 100 ms aggregation, so 20
    /// samples/window), which `derived_examples.py` reproduces independently.
    #[test]
    fn derived_examples_table() {
        let attrs = Attrs::default();
        for (nr, age, (fw, aw), hot, cold) in [
            (20, 10, (1, 1), 74, 25),
            (0, 100, (1, 1), 20, 79),
            (0, 0, (1, 1), 24, 75),
            (0, 0, (0, 1), 49, 50),
            (10, 0, (1, 1), 49, 50),
            (5, 3000, (1, 1), 43, 56),
            (0, 3000, (1, 1), 16, 83),
        ] {
            let q = weights(fw, aw);
            assert_eq!(
                (
                    hot_score(nr, age, &attrs, &q),
                    cold_score(nr, age, &attrs, &q)
                ),
                (hot, cold),
                "nr {nr} age {age} weights ({fw},{aw})"
            );
        }
    }

    #[test]
    fn scores_stay_in_range() {
        let attrs = Attrs::default();
        let q = weights(1000, 0);
        assert_eq!(hot_score(u32::MAX, u32::MAX, &attrs, &q), MAX_SCORE);
        assert_eq!(hot_score(0, 0, &attrs, &weights(0, 0)), 0, "no weights");
    }

    #[test]
    fn actions_pick_their_temperature() {
        let attrs = Attrs::default();
        let mut s = Scheme::new(Default::default(), Action::Pageout);
        s.quota = weights(1, 1);
        assert_eq!(default_scheme_score(&s, 20, 10, &attrs), 25);
        s.action = Action::MigrateHot;
        assert_eq!(default_scheme_score(&s, 20, 10, &attrs), 74);
        s.action = Action::Stat;
        assert_eq!(default_scheme_score(&s, 20, 10, &attrs), MAX_SCORE);
    }

    #[test]
    fn min_score_covers_the_quota_from_the_top() {
        let mut h = ScoreHistogram::default();
        h.add(90, 100);
        h.add(50, 100);
        h.add(10, 100);
        assert_eq!(h.min_score(100), 90);
        assert_eq!(h.min_score(150), 50, "ties may overshoot");
        assert_eq!(h.min_score(200), 50);
        assert_eq!(h.min_score(201), 10);
        assert_eq!(h.min_score(10_000), 0, "never enough: everything");
        assert_eq!(ScoreHistogram::default().min_score(1), 0);
    }
}
