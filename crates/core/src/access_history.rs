//! Which memory DAMON's rule saw accessed in each recent window: what a horizon's working set
//! is made of, kept alike by the live monitor and by a record's replay so that both ask the
//! estimate the same question.
//!
//! A horizon H counts memory accessed in a window that ended within H, **of the memory the
//! target has now** (its current regions): memory unmapped within the horizon counted while it
//! was mapped and no longer does. Keeping each window's accessed ranges, rather than reading a
//! region's age, keeps a merge from blurring when a piece was last accessed (the kernel
//! averages the ages of merged regions): the cells of a longer horizon always contain those of
//! a shorter one.
//!
//! The current regions are kept only where a kept window's accessed memory lies: the cells are
//! accessed memory cut at region boundaries, so the boundaries elsewhere never show, and a copy
//! of every region (16 bytes each, millions at page granularity) would cost more than the
//! regions' own counters.
//!
//! Memory stays bounded whatever the windows claim: beyond [`AccessHistory::new`]'s `max_ranges`
//! the oldest windows are forgotten first (the newest always stays), and a horizon reaching
//! back before them counts fewer windows.

use crate::region::AddrRange;
use std::collections::VecDeque;

/// What a kept window costs beside its ranges, in ranges (its place in the queue and its
/// list's own allocation): the bound counts windows as well as ranges, so that many small
/// windows cannot outgrow it.
const WINDOW_COST: usize = 3;

/// One window's accessed memory.
#[derive(Debug, Clone)]
struct Window {
    end_us: u64,
    accessed: Vec<AddrRange>,
}

/// One target's accessed ranges per window, over the longest horizon asked for.
#[derive(Debug, Clone)]
pub struct AccessHistory {
    /// The windows that accessed anything (idle ones add nothing to a horizon).
    windows: VecDeque<Window>,
    /// When the latest window ended.
    now_us: Option<u64>,
    /// The latest window's regions where `reach` lies (or lay before the window; cut at its
    /// edges): the memory the target has, as far as a horizon's cells can show it.
    current: Vec<AddrRange>,
    /// The union of every kept window's accessed ranges, or more (sorted, disjoint): windows
    /// forgotten since it was last computed afresh may still be in it.
    reach: Vec<AddrRange>,
    /// Ranges forgotten since `reach` was last computed afresh.
    forgotten: usize,
    longest_us: u64,
    max_ranges: usize,
    kept_ranges: usize,
    /// The latest window's regions: how finely the memory is monitored.
    nr_regions: usize,
}

impl AccessHistory {
    /// A history able to answer horizons up to `longest_us`, keeping at most `max_ranges`
    /// accessed ranges.
    pub fn new(longest_us: u64, max_ranges: usize) -> AccessHistory {
        AccessHistory {
            windows: VecDeque::new(),
            now_us: None,
            current: Vec::new(),
            reach: Vec::new(),
            forgotten: 0,
            longest_us,
            max_ranges: max_ranges.max(1),
            kept_ranges: 0,
            nr_regions: 0,
        }
    }

    /// Takes in the window that ended at `end_us`: the target's `regions` (sorted, disjoint),
    /// each with whether it was found accessed. One pass over the regions: at page granularity
    /// a target has millions.
    pub fn push(&mut self, end_us: u64, regions: impl IntoIterator<Item = (AddrRange, bool)>) {
        self.now_us = Some(end_us);
        // An accessed region is kept whole (the new window's accessed memory joins `reach`);
        // another only where `reach` already lies, which the accessed ones do not change.
        let mut accessed = Vec::new();
        let mut current = Vec::new();
        let mut j = 0;
        self.nr_regions = 0;
        for (r, was_accessed) in regions {
            self.nr_regions += 1;
            if was_accessed {
                accessed.push(r);
                current.push(r);
                continue;
            }
            let reach = &self.reach;
            while j < reach.len() && reach[j].end <= r.start {
                j += 1;
            }
            let mut k = j;
            while k < reach.len() && reach[k].start < r.end {
                let piece = AddrRange::new(r.start.max(reach[k].start), r.end.min(reach[k].end));
                if piece.start < piece.end {
                    current.push(piece);
                }
                k += 1;
            }
        }
        self.current = current;
        if !accessed.is_empty() {
            self.reach = union_sorted(&self.reach, &accessed);
            self.kept_ranges += accessed.len() + WINDOW_COST;
            self.windows.push_back(Window { end_us, accessed });
        }
        while self
            .windows
            .front()
            .is_some_and(|w| w.end_us + self.longest_us < end_us)
        {
            if self.forget_oldest() == 0 && self.windows.len() < 2 {
                break;
            }
        }
        self.trim_to(self.max_ranges);
        // Computed afresh once about as many ranges were forgotten as are kept: the cost of a
        // range is a share of one sort, and `reach` is at most about twice what it must be.
        if self.forgotten > self.kept_ranges {
            self.reach = union(self.windows.iter().flat_map(|w| w.accessed.iter().copied()));
            self.forgotten = 0;
        }
    }

    /// Forgets the oldest windows while more than `max_ranges` ranges are kept; the newest
    /// window stays. For callers that bound several histories together.
    pub fn trim_to(&mut self, max_ranges: usize) {
        while self.kept_ranges > max_ranges && self.windows.len() > 1 {
            self.forget_oldest();
        }
    }

    /// Forgets the oldest window, unless it is the only one; the ranges it held.
    pub fn forget_oldest(&mut self) -> usize {
        if self.windows.len() < 2 {
            return 0;
        }
        let gone = self
            .windows
            .pop_front()
            .map_or(0, |w| w.accessed.len() + WINDOW_COST);
        self.kept_ranges -= gone;
        self.forgotten += gone;
        gone
    }

    /// The accessed ranges kept, each window counted as a few more.
    pub fn kept_ranges(&self) -> usize {
        self.kept_ranges
    }

    /// When the oldest kept window ended.
    pub fn oldest_end_us(&self) -> Option<u64> {
        self.windows.front().map(|w| w.end_us)
    }

    /// When the latest window ended.
    pub fn now_us(&self) -> Option<u64> {
        self.now_us
    }

    /// How many regions the latest window had.
    pub fn nr_regions(&self) -> usize {
        self.nr_regions
    }

    /// Forgets everything, for an address space that was replaced (exec).
    pub fn clear(&mut self) {
        self.windows.clear();
        self.now_us = None;
        self.current.clear();
        self.reach.clear();
        self.forgotten = 0;
        self.kept_ranges = 0;
        self.nr_regions = 0;
    }

    /// The memory accessed within `horizon_us` before the latest window's end (its own window
    /// always counts), as sorted, disjoint pieces of the current regions: the cells of that
    /// horizon's working set.
    pub fn accessed_within(&self, horizon_us: u64) -> Vec<AddrRange> {
        let Some(now_us) = self.now_us() else {
            return Vec::new();
        };
        let windows = self
            .windows
            .iter()
            .filter(|w| within(w.end_us, now_us, horizon_us));
        // Each range of this union lies within one of `reach`, where `current` holds every
        // region boundary: the pieces are those of the whole regions.
        let accessed = union(windows.flat_map(|w| w.accessed.iter().copied()));
        intersect(&accessed, &self.current)
    }
}

/// Whether a window that ended at `window_end` counts at a time `now` over a horizon of
/// `horizon` (the window ending at `now` always does).
pub fn within(window_end: u64, now: u64, horizon: u64) -> bool {
    window_end + horizon > now || window_end == now
}

/// The union of address ranges, as sorted, disjoint ranges.
pub fn union(ranges: impl Iterator<Item = AddrRange>) -> Vec<AddrRange> {
    let mut all: Vec<AddrRange> = ranges.filter(|r| r.start < r.end).collect();
    all.sort_unstable();
    let mut out: Vec<AddrRange> = Vec::with_capacity(all.len());
    for r in all {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The union of two sorted, disjoint lists of ranges, in one pass.
fn union_sorted(a: &[AddrRange], b: &[AddrRange]) -> Vec<AddrRange> {
    let mut out: Vec<AddrRange> = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let r = if j == b.len() || (i < a.len() && a[i].start <= b[j].start) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The pieces of `a` inside `b` (both sorted and disjoint), split at `b`'s boundaries, so
/// that each piece lies in one of `b`'s ranges.
fn intersect(a: &[AddrRange], b: &[AddrRange]) -> Vec<AddrRange> {
    let mut out = Vec::new();
    let mut j = 0;
    for r in a {
        while j < b.len() && b[j].end <= r.start {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].start < r.end {
            let piece = AddrRange::new(r.start.max(b[k].start), r.end.min(b[k].end));
            if piece.start < piece.end {
                out.push(piece);
            }
            k += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: u64, b: u64) -> AddrRange {
        AddrRange::new(a, b)
    }

    /// `regions`, those in `accessed` marked so.
    fn marked<'a>(
        regions: &'a [AddrRange],
        accessed: &'a [AddrRange],
    ) -> impl Iterator<Item = (AddrRange, bool)> + 'a {
        regions.iter().map(|&g| (g, accessed.contains(&g)))
    }

    #[test]
    fn a_longer_horizon_holds_a_shorter_one_s_cells() {
        let mut h = AccessHistory::new(10_000, 1 << 20);
        // Regions [0,100) [100,200) [200,300); each window accesses another one.
        let regions = [r(0, 100), r(100, 200), r(200, 300)];
        h.push(1_000, marked(&regions, &[r(0, 100)]));
        h.push(2_000, marked(&regions, &[r(200, 300)]));
        let regions = [r(0, 50), r(50, 150), r(150, 300)];
        h.push(3_000, marked(&regions, &[r(50, 150)]));
        assert_eq!(h.accessed_within(0), [r(50, 150)]);
        assert_eq!(h.accessed_within(1_500), [r(50, 150), r(200, 300)]);
        assert_eq!(
            h.accessed_within(5_000),
            [r(0, 50), r(50, 150), r(200, 300)],
            "pieces of the current regions"
        );
    }

    #[test]
    fn the_cells_are_pieces_of_the_whole_regions_though_only_some_are_kept() {
        // Regions re-cut at random every window, random ones accessed, windows forgotten by
        // age and by the bound: every horizon's cells are the accessed memory cut at the
        // boundaries of all the current regions.
        let mut rng = crate::rand::Prng::seeded(5);
        let mut h = AccessHistory::new(3_000, 40);
        for w in 1..200u64 {
            let mut cuts: Vec<u64> = (0..rng.in_range(0, 30))
                .map(|_| rng.in_range(0, 1000))
                .collect();
            cuts.extend([0, 1000]);
            cuts.sort_unstable();
            cuts.dedup();
            let regions: Vec<AddrRange> = cuts
                .windows(2)
                .map(|c| r(c[0], c[1]))
                .filter(|_| rng.in_range(0, 8) != 0)
                .collect();
            let accessed: Vec<AddrRange> = regions
                .iter()
                .copied()
                .filter(|_| rng.in_range(0, 4) == 0)
                .collect();
            h.push(w * 200, marked(&regions, &accessed));
            for horizon in [0, 500, 1_000, 10_000] {
                let windows = h
                    .windows
                    .iter()
                    .filter(|x| within(x.end_us, w * 200, horizon));
                let all = union(windows.flat_map(|x| x.accessed.iter().copied()));
                assert_eq!(
                    h.accessed_within(horizon),
                    intersect(&all, &regions),
                    "window {w}, horizon {horizon}"
                );
            }
            assert!(h.current.len() <= 2 * (h.kept_ranges + regions.len()));
        }
    }

    #[test]
    fn memory_unmapped_since_counts_no_more() {
        let mut h = AccessHistory::new(10_000, 1 << 20);
        h.push(1_000, [(r(0, 100), true), (r(100, 200), true)]);
        h.push(2_000, [(r(100, 200), false)]);
        assert_eq!(h.accessed_within(5_000), [r(100, 200)]);
    }

    #[test]
    fn the_kept_ranges_are_bounded_and_the_newest_window_stays() {
        let mut h = AccessHistory::new(u64::MAX / 2, 10);
        for w in 0..20u64 {
            let ranges: Vec<AddrRange> = (0..4).map(|i| r(w * 100 + i, w * 100 + i + 1)).collect();
            h.push(w + 1, marked(&ranges, &ranges));
        }
        assert!(h.kept_ranges() <= 10);
        assert_eq!(h.now_us(), Some(20));
        h.trim_to(0);
        assert_eq!(h.kept_ranges(), 4 + WINDOW_COST, "the newest window stays");
    }

    #[test]
    fn windows_beyond_the_longest_horizon_are_forgotten() {
        let mut h = AccessHistory::new(1_000, 1 << 20);
        for t in 1..=10 {
            h.push(t * 400, [(r(0, 10), true)]);
        }
        assert!(h.oldest_end_us().is_some_and(|t| t + 1_000 >= 4_000));
    }
}
