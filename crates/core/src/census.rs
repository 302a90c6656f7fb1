//! How many distinct pages were touched over a horizon, estimated from where samples fell: a
//! working set at page resolution, for memory whose pages are scattered (physical memory: one
//! process's pages lie all over it, so that no region of DAMON's tells them apart).
//!
//! Over the horizon, `d` distinct pages got samples, `f1` of them exactly one and `f2` exactly
//! two. Pages touched but never sampled are estimated with Chao's estimator, `f1² / (2·f2)`
//! (`f1·(f1 - 1) / 2` without doubles): the fewer pages are seen twice, the more remain unseen.
//! It is exact on average when every touched page is sampled alike, and a lower bound
//! otherwise; it needs samples about as many as a tenth of the pages to be within a few
//! percent, so it is for horizons of seconds, not for one window.
//!
//! The counts are kept up to date as samples come and expire, so an estimate costs nothing
//! and a sample O(1) per horizon: memory follows the samples of the longest horizon.

use std::collections::{HashMap, VecDeque};

use crate::touched::{Repeats, Unbounded};

/// Distinct pages sampled over one horizon, kept as samples come and go.
#[derive(Debug, Clone)]
pub struct PageCensus {
    horizon_us: u64,
    /// The samples within the horizon: (time µs, page), oldest first.
    samples: VecDeque<(u64, u64)>,
    /// Samples per page within the horizon.
    counts: HashMap<u64, u32>,
    /// Pages with exactly one and exactly two samples.
    singles: u64,
    doubles: u64,
}

impl PageCensus {
    pub fn new(horizon_us: u64) -> Self {
        PageCensus {
            horizon_us,
            samples: VecDeque::new(),
            counts: HashMap::new(),
            singles: 0,
            doubles: 0,
        }
    }

    pub fn horizon_us(&self) -> u64 {
        self.horizon_us
    }

    /// A sample fell in `page` (a page number) at `time_us`; samples older than the horizon
    /// before it are forgotten.
    pub fn add(&mut self, time_us: u64, page: u64) {
        self.expire(time_us);
        self.samples.push_back((time_us, page));
        let count = self.counts.entry(page).or_insert(0);
        *count += 1;
        let now = *count;
        self.moved(now - 1, now);
    }

    /// Forgets the samples older than the horizon before `now_us`.
    pub fn expire(&mut self, now_us: u64) {
        let oldest = now_us.saturating_sub(self.horizon_us);
        while let Some(&(t, page)) = self.samples.front() {
            if t >= oldest {
                break;
            }
            self.samples.pop_front();
            let count = self.counts.get_mut(&page).expect("counted when added");
            *count -= 1;
            let now = *count;
            if now == 0 {
                self.counts.remove(&page);
            }
            self.moved(now + 1, now);
        }
    }

    /// A page's count went from `from` to `to`: the singles and doubles follow.
    fn moved(&mut self, from: u32, to: u32) {
        for (count, sign) in [(from, -1i64), (to, 1)] {
            let tally = match count {
                1 => &mut self.singles,
                2 => &mut self.doubles,
                _ => continue,
            };
            *tally = tally.saturating_add_signed(sign);
        }
    }

    /// Samples within the horizon.
    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    /// Distinct pages sampled within the horizon.
    pub fn seen(&self) -> u64 {
        self.counts.len() as u64
    }

    /// Pages touched within the horizon: those seen and those estimated unseen (Chao's
    /// estimator, [`crate::touched`]; memory with no bounds to count whole, so the point
    /// estimate).
    pub fn estimate(&self) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        let repeats = Repeats {
            samples: self.samples.len() as u64,
            pages: self.seen(),
            once: self.singles,
            twice: self.doubles,
        };
        repeats.estimate_as(u64::MAX, Unbounded::Point).pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::Prng;

    #[test]
    fn counts_follow_samples_in_and_out_of_the_horizon() {
        let mut c = PageCensus::new(1_000);
        c.add(0, 7);
        c.add(10, 7);
        c.add(20, 9);
        assert_eq!((c.seen(), c.singles, c.doubles), (2, 1, 1));
        // Both samples of page 7 expire; page 9's stays.
        c.expire(1_015);
        assert_eq!((c.seen(), c.singles, c.doubles, c.samples()), (1, 1, 0, 1));
        c.expire(5_000);
        assert_eq!((c.seen(), c.singles, c.doubles, c.samples()), (0, 0, 0, 0));
        assert_eq!(c.estimate(), 0.0);
    }

    #[test]
    fn pages_sampled_alike_are_estimated_within_a_few_percent() {
        // 80,000 pages touched alike, 30,000 samples: only about a third are ever seen.
        let mut rng = Prng::seeded(3);
        let mut c = PageCensus::new(u64::MAX);
        for t in 0..30_000 {
            c.add(t, rng.in_range(0, 80_000));
        }
        assert!(c.seen() < 30_000);
        let e = c.estimate();
        assert!((e / 80_000.0 - 1.0).abs() < 0.05, "{e}");
    }
}
