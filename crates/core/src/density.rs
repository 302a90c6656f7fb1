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
    exact_p_value(k, n, p)
}

/// [`binomial_p_value`] by its definition, for `n` up to [`EXACT_UP_TO`]. The probabilities
/// rise to the mode and fall after it, so the outcomes no more likely than `k` are the two
/// tails, found by bisection; each tail is summed from its inner end outwards until its terms
/// no longer change the sum. A few dozen terms, where summing all `n + 1` took a logarithm
/// each: the pooling of page samples asks this of every pair of neighbouring regions.
fn exact_p_value(k: u32, n: u32, p: f64) -> f64 {
    let ln_fact = ln_factorials();
    let (ln_p, ln_q) = (p.ln(), (1.0 - p).ln());
    let ln_pmf = |i: u32| {
        ln_fact[n as usize] - ln_fact[i as usize] - ln_fact[(n - i) as usize]
            + f64::from(i) * ln_p
            + f64::from(n - i) * ln_q
    };
    // The relative slack lets outcomes exactly as likely as `k` (a symmetric test's mirror
    // image) count despite rounding.
    let at_most = ln_pmf(k) + 1e-9;
    let mode = ((f64::from(n + 1) * p).floor() as u32).min(n);
    if ln_pmf(mode) <= at_most {
        return 1.0;
    }
    // Outcomes below the mode no more likely than `k`: 0..low_end; above it: high_start..=n.
    let low_end = partition_point(0, mode, |i| ln_pmf(i) <= at_most);
    let high_start = partition_point(mode, n + 1, |i| ln_pmf(i) > at_most);
    let tail = |outcomes: &mut dyn Iterator<Item = u32>| {
        let mut sum = 0.0;
        for i in outcomes {
            let term = ln_pmf(i).exp();
            if term <= sum * f64::EPSILON {
                break;
            }
            sum += term;
        }
        sum
    };
    let p_value = tail(&mut (0..low_end).rev()) + tail(&mut (high_start..=n));
    p_value.min(1.0)
}

/// The first `i` in `from..to` where `pred` fails, `pred` holding for a prefix of the range.
fn partition_point(from: u32, to: u32, pred: impl Fn(u32) -> bool) -> u32 {
    let (mut lo, mut hi) = (from, to);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `ln(i!)` for `i` up to [`EXACT_UP_TO`], computed once.
fn ln_factorials() -> &'static [f64] {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Vec::with_capacity(EXACT_UP_TO as usize + 1);
        let mut ln = 0.0;
        table.push(ln);
        for i in 1..=EXACT_UP_TO {
            ln += f64::from(i).ln();
            table.push(ln);
        }
        table
    })
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

    /// The p-value summed over every outcome, as the definition reads.
    fn by_definition(k: u32, n: u32, p: f64) -> f64 {
        let ln_pmf = |i: u32| {
            let ln_choose: f64 = (1..=i)
                .map(|j| (f64::from(n - i + j) / f64::from(j)).ln())
                .sum();
            ln_choose + f64::from(i) * p.ln() + f64::from(n - i) * (1.0 - p).ln()
        };
        let at_most = ln_pmf(k) + 1e-9;
        let sum: f64 = (0..=n)
            .map(ln_pmf)
            .filter(|&l| l <= at_most)
            .map(f64::exp)
            .sum();
        sum.min(1.0)
    }

    #[test]
    fn the_tails_sum_to_the_definition() {
        // Skewed and balanced tests of every size the exact sum serves, each outcome's.
        for n in [1, 2, 3, 7, 20, 61, 150, 499, 500] {
            for p in [0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.77, 0.99, 0.999] {
                if n as f64 * p * (1.0 - p) >= NORMAL_FROM {
                    continue;
                }
                for k in 0..=n {
                    let (got, want) = (binomial_p_value(k, n, p), by_definition(k, n, p));
                    assert!(
                        (got - want).abs() <= 1e-12 + 1e-9 * want,
                        "k {k} n {n} p {p}: {got} against {want}"
                    );
                }
            }
        }
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
