//! Where a target's samples fell over its last few aggregation windows (sampled access sources
//! only), kept by address because regions are merged and split between windows.
//!
//! One window holds too few samples to tell memory touched at a low rate from memory never
//! touched: a region that got one sample in its warm part and none in its larger cold part may
//! just have been unlucky. The same addresses over several windows hold several times the
//! evidence, which is what the report-time cuts of [`crate::adjust::split_at_sampled_extents`]
//! weigh. The cost follows the number of samples: each completed window's addresses are sorted
//! once and merged into one sorted array (and the oldest window's taken out of it, both linear),
//! and a query is two binary searches in it.

use crate::region::AddrRange;
use std::collections::VecDeque;

/// Completed windows whose samples are kept: 4 s at the sampled sources' default 400 ms
/// windows. Fewer gave too little evidence at warm/never-touched boundaries (see
/// docs/sources/README.md); memory touched at a steady rate looks the same over more windows,
/// but memory whose use changed looks sampled for longer.
pub const RECENT_WINDOWS: usize = 10;

/// The sample addresses of one target's recent windows.
#[derive(Debug, Clone, Default)]
pub struct RecentSamples {
    /// Completed windows' addresses, each sorted, oldest first; at most [`RECENT_WINDOWS`].
    completed: VecDeque<Vec<u64>>,
    /// Every address of `completed`, sorted: what queries search.
    all: Vec<u64>,
    /// The current window's addresses, in arrival order (or sorted, once asked for so).
    current: Vec<u64>,
    /// Reused for rebuilding `all`.
    scratch: Vec<u64>,
}

impl RecentSamples {
    /// Adds sample addresses of the current window.
    pub fn add(&mut self, addrs: impl IntoIterator<Item = u64>) {
        self.current.extend(addrs);
    }

    /// The current window's addresses so far, sorted.
    pub fn current_sorted(&mut self) -> &[u64] {
        self.current.sort_unstable();
        &self.current
    }

    /// Ends the current window: its addresses join the completed windows and the oldest window
    /// beyond [`RECENT_WINDOWS`] is forgotten.
    pub fn complete_window(&mut self) {
        let expired = if self.completed.len() >= RECENT_WINDOWS {
            self.completed.pop_front()
        } else {
            None
        };
        let mut done = std::mem::take(&mut self.current);
        done.sort_unstable();
        let forgotten = expired.as_deref().unwrap_or_default();
        rebuild(&mut self.scratch, &self.all, &done, forgotten);
        std::mem::swap(&mut self.all, &mut self.scratch);
        self.completed.push_back(done);
        if let Some(mut buffer) = expired {
            buffer.clear();
            self.current = buffer;
        }
    }

    /// Forgets every sample, for an address space that was replaced (exec).
    pub fn clear(&mut self) {
        self.completed.clear();
        self.all.clear();
        self.current.clear();
    }

    /// A walk that counts the completed windows' samples in regions asked for in address
    /// order: one linear pass over both, cheaper than a search per region, and no array of
    /// counts as long as the regions (at page granularity, millions).
    pub fn counter(&self) -> SampleCounter<'_> {
        SampleCounter {
            all: &self.all,
            at: 0,
        }
    }

    /// The span of the completed windows' samples within `range`, from the lowest address to
    /// just past the highest, and how many there are; `None` when there is none.
    pub fn within(&self, range: AddrRange) -> Option<(AddrRange, u32)> {
        let lo = self.all.partition_point(|&a| a < range.start);
        let hi = self.all.partition_point(|&a| a < range.end);
        (lo < hi).then(|| {
            let span = AddrRange::new(self.all[lo], self.all[hi - 1] + 1);
            (span, (hi - lo).min(u32::MAX as usize) as u32)
        })
    }
}

/// See [`RecentSamples::counter`].
#[derive(Debug, Clone)]
pub struct SampleCounter<'a> {
    all: &'a [u64],
    /// The first sample not yet passed.
    at: usize,
}

impl SampleCounter<'_> {
    /// The samples in `range`, which starts at or after every range asked for before it.
    pub fn count(&mut self, range: AddrRange) -> u32 {
        let before = |at: &mut usize, end: u64| {
            let from = *at;
            while *at < self.all.len() && self.all[*at] < end {
                *at += 1;
            }
            *at - from
        };
        before(&mut self.at, range.start);
        before(&mut self.at, range.end).min(u32::MAX as usize) as u32
    }
}

/// `out` = (`all` without `expired`) with `added`, sorted; every input is sorted and `expired`
/// is part of `all` (as a multiset). Linear in the sizes.
fn rebuild(out: &mut Vec<u64>, all: &[u64], added: &[u64], expired: &[u64]) {
    out.clear();
    out.reserve(all.len() + added.len());
    let mut expired = expired.iter().peekable();
    let mut added = added.iter().peekable();
    for &a in all {
        if expired.next_if_eq(&&a).is_some() {
            continue;
        }
        while let Some(&b) = added.next_if(|&&b| b < a) {
            out.push(b);
        }
        out.push(a);
    }
    out.extend(added);
    debug_assert!(expired.next().is_none(), "forgot samples it never had");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::Region;

    #[test]
    fn within_spans_the_completed_windows_only() {
        let mut h = RecentSamples::default();
        h.add([500, 100]);
        h.complete_window();
        h.add([300, 900]);
        h.complete_window();
        h.add([200]);
        assert_eq!(
            h.within(AddrRange::new(100, 600)),
            Some((AddrRange::new(100, 501), 3)),
            "the current window's 200 is not counted until it completes"
        );
        assert_eq!(
            h.within(AddrRange::new(600, 900)),
            None,
            "900 is past the end"
        );
        assert_eq!(
            h.within(AddrRange::new(0, u64::MAX)),
            Some((AddrRange::new(100, 901), 4))
        );
    }

    #[test]
    fn windows_beyond_the_limit_are_forgotten() {
        let mut h = RecentSamples::default();
        h.add([7]);
        h.complete_window();
        for _ in 0..RECENT_WINDOWS - 1 {
            h.complete_window();
        }
        let everything = AddrRange::new(0, 100);
        assert_eq!(h.within(everything), Some((AddrRange::new(7, 8), 1)));
        h.complete_window();
        assert_eq!(h.within(everything), None);
        h.add([9]);
        h.complete_window();
        h.clear();
        assert_eq!(h.within(everything), None);
    }

    #[test]
    fn within_matches_a_search_of_every_recent_window() {
        // Many windows with repeated addresses: forgetting a window takes out its copies only.
        let mut rng = crate::Prng::seeded(7);
        let mut h = RecentSamples::default();
        let mut windows: Vec<Vec<u64>> = Vec::new();
        for _ in 0..3 * RECENT_WINDOWS {
            let w: Vec<u64> = (0..rng.in_range(0, 40))
                .map(|_| rng.in_range(0, 64))
                .collect();
            h.add(w.iter().copied());
            h.complete_window();
            windows.push(w);
            let recent = &windows[windows.len().saturating_sub(RECENT_WINDOWS)..];
            for (start, end) in [(0, 64), (10, 20), (31, 33), (63, 64)] {
                let inside: Vec<u64> = recent
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|a| (start..end).contains(a))
                    .collect();
                let want = (!inside.is_empty()).then(|| {
                    let (lo, hi) = (inside.iter().min().unwrap(), inside.iter().max().unwrap());
                    (AddrRange::new(*lo, hi + 1), inside.len() as u32)
                });
                assert_eq!(h.within(AddrRange::new(start, end)), want);
            }
            // Counts per region in one pass agree with a search per region, holes included.
            let regions = [
                Region::new(0, 5),
                Region::new(5, 6),
                Region::new(10, 33),
                Region::new(40, 64),
            ];
            let want: Vec<u32> = regions
                .iter()
                .map(|r| h.within(AddrRange::new(r.start, r.end)).map_or(0, |w| w.1))
                .collect();
            let mut counter = h.counter();
            let got: Vec<u32> = regions
                .iter()
                .map(|r| counter.count(AddrRange::new(r.start, r.end)))
                .collect();
            assert_eq!(got, want);
        }
    }
}
