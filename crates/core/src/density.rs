//! Whether two regions' samples show different access densities: the statistical test that
//! sampled access sources merge regions by.
//!
//! DAMON merges neighbours whose `nr_accesses` differ by at most a tenth of the window's highest
//! count. That scale assumes accessed-bit checks, where a hot region counts near the maximum. A
//! sampled source puts a few hundred samples a second wherever the CPU's time goes, so a data
//! region that the program really uses may count 1-10 beside a hot page counting 60: the fixed
//! threshold merges it into idle neighbours and its evidence is averaged away. What the samples
//! do say is how densely they fell: if two adjacent regions of sizes `a` and `b` bytes were
//! touched alike, each of their `n` samples fell in the first with probability `a / (a + b)`,
//! so the first's count is binomial. [`alike`] merges them unless that count is too unlikely
//! under this hypothesis (a two-sided exact binomial test).

use crate::normal;

/// The variance `n p (1 - p)`, and the number of samples, from which [`binomial_p_value`]
/// takes the normal approximation: the exact test takes two logarithms per possible outcome,
/// and the sampled sources' tests are asked of every pair of neighbouring regions per window.
const NORMAL_FROM: f64 = 50.0;
const EXACT_UP_TO: u32 = 500;

/// The two-sided p-value of seeing `k` of `n` samples in a part that holds a share `p` of the
/// space: the probability, under Binomial(n, p), of an outcome no more likely than `k`.
pub fn binomial_p_value(k: u32, n: u32, p: f64) -> f64 {
    debug_assert!(k <= n && (0.0..=1.0).contains(&p));
    if n == 0 {
        return 1.0;
    }
    if p <= 0.0 || p >= 1.0 {
        // Every sample must fall on one side: anything else is impossible.
        let expected = if p <= 0.0 { 0 } else { n };
        return if k == expected { 1.0 } else { 0.0 };
    }
    let variance = n as f64 * p * (1.0 - p);
    if variance >= NORMAL_FROM || n > EXACT_UP_TO {
        // The exact sum would run over n terms: the normal approximation, with continuity
        // correction, is close to it here (within a fraction of a percent from a variance of
        // 50; a few percent of a small p-value for skewed tests of many samples).
        let z = ((k as f64 - n as f64 * p).abs() - 0.5).max(0.0) / variance.sqrt();
        return (2.0 * normal::below(-z)).min(1.0);
    }
    // log P(X = i), built up term by term so that no factorial overflows; two passes (the
    // outcome's own probability, then the sum) keep it free of allocations.
    let (log_p, log_q) = (p.ln(), (1.0 - p).ln());
    let log_pmf = || {
        (0..=n).scan(n as f64 * log_q, move |log, i| {
            let this = *log;
            if i < n {
                *log += ((n - i) as f64 / (i + 1) as f64).ln() + log_p - log_q;
            }
            Some(this)
        })
    };
    let at_most = log_pmf().nth(k as usize).expect("k <= n") + 1e-9;
    let p_value: f64 = log_pmf().filter(|&l| l <= at_most).map(f64::exp).sum();
    p_value.min(1.0)
}

/// Whether regions of `size_a` and `size_b` bytes holding `samples_a` and `samples_b` of a
/// window's samples could have been touched alike: the binomial test of the split of their
/// samples by size does not reject at level `alpha`. Regions without samples are alike.
pub fn alike(samples_a: u32, size_a: u64, samples_b: u32, size_b: u64, alpha: f64) -> bool {
    let n = samples_a.saturating_add(samples_b);
    if n == 0 {
        return true;
    }
    let share = size_a as f64 / (size_a as f64 + size_b as f64);
    binomial_p_value(samples_a, n, share) >= alpha
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn p_values_of_small_binomials() {
        // Binomial(1, 0.2): P(1) = 0.2 is the less likely outcome.
        assert!(close(binomial_p_value(1, 1, 0.2), 0.2));
        assert!(close(binomial_p_value(0, 1, 0.2), 1.0));
        // Binomial(4, 0.5): P(4) = P(0) = 1/16.
        assert!(close(binomial_p_value(4, 4, 0.5), 2.0 / 16.0));
        assert!(close(binomial_p_value(2, 4, 0.5), 1.0));
        // Binomial(10, 0.3), k = 7: P(7..=10) = 0.01059..., and no lower outcome is as unlikely.
        let tail: f64 = [0.009001692, 0.001446701, 0.000137781, 0.0000059049]
            .iter()
            .sum();
        assert!((binomial_p_value(7, 10, 0.3) - tail).abs() < 1e-8);
    }

    #[test]
    fn large_counts_do_not_overflow() {
        let p = binomial_p_value(5000, 10_000, 0.5);
        assert!(p > 0.99, "{p}");
        assert!(binomial_p_value(6000, 10_000, 0.5) < 1e-80);
    }

    #[test]
    fn one_sample_cannot_tell_regions_of_similar_size_apart() {
        // 4 MiB with one sample beside 26 MiB with none: chance puts it there 13 % of the time.
        assert!(alike(1, 4 << 20, 0, 26 << 20, 0.05));
        // A page holding 50 samples beside 30 MiB holding none is another kind of memory.
        assert!(!alike(50, 4096, 0, 30 << 20, 0.05));
        // One sample in one page beside 30 MiB: 1 in 7,680 by chance.
        assert!(!alike(1, 4096, 0, 30 << 20, 0.05));
        assert!(alike(0, 1, 0, 1 << 40, 0.05));
        // Equal sizes and 12 vs 8 samples: well within chance.
        assert!(alike(12, 1 << 20, 8, 1 << 20, 0.05));
        assert!(!alike(20, 1 << 20, 0, 1 << 20, 0.05));
    }
}
