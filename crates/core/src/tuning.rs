//! Monitoring intervals auto-tuning (docs/algorithms.md#autotune) and the feedback loop it shares
//! with DAMOS quota goals (docs/algorithms.md#damos-goals).

use crate::attrs::Attrs;
use crate::region::{Target, mult_frac};

/// `damon_feed_loop_next_input`: the next control input from the last one and a score in basis
/// points of the goal (10,000 = goal met). Under-achieving raises the input in proportion to the
/// shortfall; over-achieving lowers it, never below the minimum input of 10,000.
pub fn feed_loop_next_input(last: u64, score: u64) -> u64 {
    const GOAL: u64 = 10_000;
    const MIN_INPUT: u64 = 10_000;
    if score == GOAL {
        return last;
    }
    if score >= GOAL * 2 {
        return MIN_INPUT;
    }
    let diff = score.abs_diff(GOAL);
    let comp = match last.checked_mul(diff) {
        Some(p) => p / GOAL,
        None => last / GOAL * diff,
    };
    if score > GOAL {
        last.saturating_sub(comp).max(MIN_INPUT)
    } else {
        last.saturating_add(comp)
    }
}

/// `damon_get_intervals_adaptation_bp`: how much to stretch the sampling interval, in basis
/// points, from the share of access events observed in the window just completed.
pub fn intervals_adaptation_bp(targets: &[Target], aggr_samples: u64, access_bp: u32) -> u64 {
    let (mut max_events, mut events) = (0u128, 0u128);
    for r in targets.iter().flat_map(|t| &t.regions) {
        max_events += r.size() as u128 * aggr_samples as u128;
        events += r.size() as u128 * r.nr_accesses as u128;
    }
    let target = (max_events * access_bp as u128 / 10_000).max(1);
    let score_bp = (events * 10_000 / target).min(u64::MAX as u128) as u64;
    let mut adapt_bp = feed_loop_next_input(100_000_000, score_bp) / 10_000;
    if adapt_bp <= 10_000 {
        // Shrink at most by half per tuning.
        adapt_bp = 5_000 + adapt_bp / 2;
    }
    adapt_bp
}

/// New intervals for an adaptation: the sampling interval scaled within the goal's bounds, the
/// aggregation interval kept at `aggr_samples` sampling intervals.
pub fn tuned_attrs(attrs: &Attrs, aggr_samples: u64, adapt_bp: u64) -> Attrs {
    let goal = attrs.intervals_goal;
    let sample = mult_frac(attrs.sample_interval_us, adapt_bp, 10_000)
        .min(goal.max_sample_us)
        .max(goal.min_sample_us);
    Attrs {
        sample_interval_us: sample,
        aggr_interval_us: sample * aggr_samples,
        ..*attrs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::{AddrRange, Region};

    /// Upstream's kunit test `damon_test_feed_loop_next_input`, with the derived values.
    #[test]
    fn damon_test_feed_loop_next_input() {
        let last = 900_000;
        // A score below the goal (always 10,000) raises the input.
        assert!(feed_loop_next_input(last, 200) > last);
        // A score above the goal lowers it.
        assert!(feed_loop_next_input(last, 250_000_000) < last);
        // The farther the score from the goal, the larger the change.
        assert!(feed_loop_next_input(last, 200) > feed_loop_next_input(last, 2000));
        assert_eq!(feed_loop_next_input(last, 200), 1_782_000);
        assert_eq!(feed_loop_next_input(last, 2000), 1_620_000);
        assert_eq!(feed_loop_next_input(last, 250_000_000), 10_000);
        assert_eq!(feed_loop_next_input(last, 10_000), last);
    }

    /// The adaptation table of docs/algorithms.md#autotune.
    #[test]
    fn adaptation_follows_the_score() {
        // One region of 10,000 bytes, 100 samples per window, goal 100 bp = 1 % of events,
        // so a score of N bp corresponds to nr_accesses = N / 10,000.
        let at = |nr: u32| {
            let mut t = Target::with_regions(None, &[AddrRange::new(0, 10_000)]);
            t.regions[0] = Region {
                nr_accesses: nr,
                ..t.regions[0]
            };
            intervals_adaptation_bp(&[t], 100, 100)
        };
        assert_eq!(at(0), 20_000);
        assert_eq!(at(1), 10_000); // score 10,000: no change
        assert_eq!(at(2), 5_000); // score 20,000: halve
    }

    #[test]
    fn tuned_intervals_keep_ratio_and_bounds() {
        let a = Attrs {
            intervals_goal: crate::IntervalsGoal::recommended(),
            ..Attrs::default()
        };
        let t = tuned_attrs(&a, 20, 20_000);
        assert_eq!(
            (t.sample_interval_us, t.aggr_interval_us),
            (10_000, 200_000)
        );
        let t = tuned_attrs(&a, 20, 5_000);
        assert_eq!(t.sample_interval_us, 5_000, "clamped to min_sample_us");
    }
}
