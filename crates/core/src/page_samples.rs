//! Where a target's samples fell, by page and time, over the longest horizon a working set is
//! asked for: the evidence that [`crate::touched`] estimates from.
//!
//! A horizon's estimate rests on the samples of that horizon when they settle it. When they do
//! not (a 2 s horizon of a server whose hot items draw a few samples a second each), it borrows
//! the samples of a longer span, up to [`MAX_EVIDENCE_US`]: memory touched over and over looks
//! the same over 2 s and over 30 s, so the longer span's repeats tell how many pages the short
//! one touched. Memory whose use moved does not, and the borrowing stops where the samples show
//! it: if the pages touched were the same over the longer span, the horizon's own samples would
//! land on pages sampled before it as often as the earlier samples cover the sampling (Good and
//! Turing's coverage, one less the share of earlier samples alone on their page, which holds
//! however unequally pages draw samples); far fewer such recaptures (a one-sided Poisson test
//! at [`MOVED_LEVEL`]) say that the horizon touched other pages, and its estimate keeps to the
//! evidence before that span. (The span's page count, which the test used before, is inflated
//! by the horizon's own samples where they moved, each on a new page, and without a page
//! sampled twice it has no value at all: a hot loop left for a large table went unseen.)
//!
//! Samples also tell how far the touched memory extends: `D` distinct pages sampled uniformly
//! over a span of memory are spread over `(D - 1) / (D + 1)` of it on average, so a range
//! whose samples cluster (a thread's stack in its 8 MiB mapping) is not counted beyond their
//! spread scaled up by that factor.
//!
//! The cost follows the samples kept: a window's samples are sorted once and merged into one
//! sorted array (linear), a range's samples are found by binary search, and an estimate passes
//! over them once per span of evidence tried.

use crate::attrs::PAGE_SIZE;
use crate::region::AddrRange;
use crate::touched::{Repeats, Touched, Unbounded, poisson_cdf};

/// How long samples are kept: the longest horizon that serve exports.
pub const KEEP_US: u64 = 60_000_000;

/// The most samples kept per target (2 MiB); beyond it the oldest are forgotten first, so that
/// memory stays bounded whatever the sampling rate.
pub const MAX_KEPT: usize = 1 << 17;

/// The longest span of samples an estimate borrows beyond its own horizon.
pub const MAX_EVIDENCE_US: u64 = 30_000_000;

/// The spans of evidence tried after the horizon's own, shortest first.
const EVIDENCE_SPANS_US: [u64; 6] = [
    1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 30_000_000,
];

/// The level of the recapture test below which a longer span's samples are taken to show
/// other pages than the horizon's, and are not borrowed.
pub const MOVED_LEVEL: f64 = 0.01;

/// Distinct pages from which their spread bounds a range to within about 25 %: the spread of
/// `D` pages is scaled by `(D + 1) / (D - 1)`, 1.25 at 9.
const SPREAD_SETTLED_PAGES: u64 = 9;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Sample {
    page: u64,
    time_us: u64,
}

/// One target's sampled pages and when they were sampled.
#[derive(Debug, Clone, Default)]
pub struct PageSamples {
    /// Sorted by page, then time; within [`KEEP_US`] of the last [`PageSamples::settle`].
    kept: Vec<Sample>,
    /// Added since then, in arrival order.
    pending: Vec<Sample>,
    /// Reused for merging.
    scratch: Vec<Sample>,
}

/// What the samples of one span of evidence say of one range.
#[derive(Debug, Default)]
struct SpanCounts {
    repeats: Repeats,
    /// Lowest and highest page sampled.
    spread: Option<(u64, u64)>,
    /// Samples within the horizon itself.
    recent: u64,
    /// Of those, samples on a page that was also sampled earlier in the span.
    recaptured: u64,
    /// Pages sampled in the span before the horizon.
    earlier_pages: u64,
    /// Samples in the span before the horizon, and the pages that took exactly one of them:
    /// how much of the sampling the pages sampled earlier hold (Good and Turing's coverage).
    earlier_samples: u64,
    earlier_once: u64,
}

impl PageSamples {
    /// Adds the sample addresses of the sampling interval that ended at `time_us`.
    pub fn add(&mut self, time_us: u64, addrs: impl IntoIterator<Item = u64>) {
        self.pending.extend(addrs.into_iter().map(|a| Sample {
            page: a / PAGE_SIZE,
            time_us,
        }));
    }

    /// Makes every sample added so far count, and forgets those more than [`KEEP_US`] before
    /// `now_us` (and the oldest beyond [`MAX_KEPT`]). Linear in the samples kept.
    pub fn settle(&mut self, now_us: u64) {
        let oldest = now_us.saturating_sub(KEEP_US);
        let mut added = std::mem::take(&mut self.pending);
        added.retain(|s| s.time_us >= oldest);
        added.sort_unstable();
        let total = self.kept.len() + added.len();
        let oldest = if total > MAX_KEPT {
            // The time at which the newest MAX_KEPT samples begin.
            let mut times: Vec<u64> = self.kept.iter().chain(&added).map(|s| s.time_us).collect();
            let nth = total - MAX_KEPT;
            *times.select_nth_unstable(nth).1
        } else {
            oldest
        };
        self.scratch.clear();
        self.scratch.reserve(total);
        let mut added_iter = added.iter().peekable();
        for &s in &self.kept {
            while let Some(&&a) = added_iter.peek() {
                if a > s {
                    break;
                }
                if a.time_us >= oldest {
                    self.scratch.push(a);
                }
                added_iter.next();
            }
            if s.time_us >= oldest {
                self.scratch.push(s);
            }
        }
        self.scratch
            .extend(added_iter.filter(|a| a.time_us >= oldest));
        std::mem::swap(&mut self.kept, &mut self.scratch);
        added.clear();
        self.pending = added;
    }

    /// Forgets every sample, for an address space that was replaced (exec).
    pub fn clear(&mut self) {
        self.kept.clear();
        self.pending.clear();
    }

    /// The samples kept (after the last [`PageSamples::settle`]).
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// The estimated pages of `range` touched in the `horizon_us` before `now_us`, the range
    /// being memory that DAMON's rule saw accessed in that horizon (see the module
    /// documentation for the evidence it weighs). Samples added since the last settle do not
    /// count.
    pub fn estimate(&self, range: AddrRange, now_us: u64, horizon_us: u64) -> Touched {
        self.estimate_pooled(&[range], now_us, horizon_us, Unbounded::Whole)
    }

    /// [`PageSamples::estimate`] of the pages of several ranges (sorted, disjoint) taken as one
    /// memory: pieces of memory touched alike, which together hold more evidence than each.
    /// Their samples' spread bounds a single range only. `unbounded` says what counts where
    /// the samples set no upper bound.
    pub fn estimate_pooled(
        &self,
        ranges: &[AddrRange],
        now_us: u64,
        horizon_us: u64,
        unbounded: Unbounded,
    ) -> Touched {
        self.pooled_evidence(ranges, now_us, horizon_us, unbounded)
            .0
    }

    /// [`PageSamples::estimate_pooled`], with the most pages that the span of evidence it rests
    /// on allows where pages draw samples as unequally as its counts clearly show
    /// ([`Repeats::shown_high`]).
    pub fn pooled_evidence(
        &self,
        ranges: &[AddrRange],
        now_us: u64,
        horizon_us: u64,
        unbounded: Unbounded,
    ) -> (Touched, f64) {
        let range_pages: u64 = ranges.iter().map(|&r| pages_of(r).1).sum::<u64>().max(1);
        let horizon_us = horizon_us.max(1);
        let longest = horizon_us.max(MAX_EVIDENCE_US);
        let mut spans = [0u64; EVIDENCE_SPANS_US.len() + 1];
        spans[0] = horizon_us;
        let mut nr_spans = 1;
        for s in EVIDENCE_SPANS_US {
            if s > horizon_us && s <= longest {
                spans[nr_spans] = s;
                nr_spans += 1;
            }
        }
        let spans = &spans[..nr_spans];
        let all = span_counts(ranges.iter().map(|&r| self.within(r)), now_us, spans);
        if all.iter().all(|c| c.repeats.samples == 0) {
            // Counted accessed, yet no sample to show it: nothing supports a count, and
            // nothing rules one out.
            let nothing = Touched {
                high: range_pages as f64,
                ..Touched::default()
            };
            return (nothing, range_pages as f64);
        }
        let mut best: Option<(Touched, f64)> = None;
        // The horizon's own estimate's high end: what a borrowed estimate cannot narrow where
        // the horizon's samples are too few to show whether its pages are the span's.
        let mut own_high = range_pages as f64;
        for (counts, &span_us) in all.iter().zip(spans) {
            let (bound, spread_settled) = if ranges.len() == 1 {
                counts.spread_bound(range_pages)
            } else {
                (range_pages, true)
            };
            let mut estimate = Touched {
                evidence_us: span_us,
                ..counts.repeats.estimate_as(bound, unbounded)
            };
            match &best {
                None => own_high = estimate.high,
                Some(_) => match counts.recapture_test() {
                    Recapture::Moved => break,
                    Recapture::Untested => estimate.high = estimate.high.max(own_high),
                    Recapture::Same => {}
                },
            }
            best = Some((estimate, counts.repeats.shown_high(bound)));
            if estimate.is_settled() && spread_settled {
                break;
            }
        }
        best.unwrap_or_else(|| (Touched::whole(range_pages as f64), range_pages as f64))
    }

    /// The estimated pages of `ranges` (sorted, disjoint) touched in the `horizon_us` before
    /// `now_us`, taken as one memory from the horizon's own samples alone: for memory whose
    /// pages are scattered over its ranges (physical memory), where neither the samples'
    /// spread nor a longer span's repeats say more of the horizon than its own samples do.
    pub fn estimate_own(
        &self,
        ranges: &[AddrRange],
        now_us: u64,
        horizon_us: u64,
        unbounded: Unbounded,
    ) -> Touched {
        let range_pages: u64 = ranges.iter().map(|&r| pages_of(r).1).sum::<u64>().max(1);
        let horizon_us = horizon_us.max(1);
        let counts = span_counts(
            ranges.iter().map(|&r| self.within(r)),
            now_us,
            &[horizon_us],
        );
        Touched {
            evidence_us: horizon_us,
            ..counts[0].repeats.estimate_as(range_pages, unbounded)
        }
    }

    /// The samples of `range` taken within `span_us` before `now_us`.
    pub fn count(&self, range: AddrRange, now_us: u64, span_us: u64) -> u64 {
        let from = now_us.saturating_sub(span_us);
        self.within(range)
            .iter()
            .filter(|s| s.time_us > from && s.time_us <= now_us)
            .count() as u64
    }

    /// The kept samples of `range`'s pages.
    fn within(&self, range: AddrRange) -> &[Sample] {
        let (first, pages) = pages_of(range);
        let end = first + pages;
        let lo = self.kept.partition_point(|s| s.page < first);
        let hi = lo + self.kept[lo..].partition_point(|s| s.page < end);
        &self.kept[lo..hi]
    }
}

/// The first page of `range` and how many pages it touches (at least one).
fn pages_of(range: AddrRange) -> (u64, u64) {
    let first = range.start / PAGE_SIZE;
    let end = range.end.div_ceil(PAGE_SIZE);
    (first, end.saturating_sub(first).max(1))
}

/// Counts the samples of `ranges` (each range's, sorted by page then time; the ranges in
/// address order) taken within each of `spans` (ascending, the first the horizon) before
/// `now_us`, and how those within the horizon recapture earlier ones: one pass for all spans.
fn span_counts<'a>(
    ranges: impl Iterator<Item = &'a [Sample]>,
    now_us: u64,
    spans: &[u64],
) -> Vec<SpanCounts> {
    let mut counts: Vec<SpanCounts> = spans.iter().map(|_| SpanCounts::default()).collect();
    let starts: Vec<u64> = spans.iter().map(|&s| now_us.saturating_sub(s)).collect();
    // Per page: its samples in each span's own part (between it and the next shorter span).
    let mut parts = vec![0u64; spans.len()];
    for samples in ranges {
        let mut i = 0;
        while i < samples.len() {
            let page = samples[i].page;
            parts.iter_mut().for_each(|p| *p = 0);
            while i < samples.len() && samples[i].page == page {
                let t = samples[i].time_us;
                if t <= now_us
                    && let Some(s) = starts.iter().position(|&from| t > from)
                {
                    parts[s] += 1;
                }
                i += 1;
            }
            let recent = parts[0];
            let mut n = 0;
            for (s, c) in counts.iter_mut().enumerate() {
                n += parts[s];
                if n == 0 {
                    continue;
                }
                c.repeats.add_page(n);
                c.spread = Some(c.spread.map_or((page, page), |(l, _)| (l, page)));
                c.recent += recent;
                if n > recent {
                    c.earlier_pages += 1;
                    c.recaptured += recent;
                    c.earlier_samples += n - recent;
                    c.earlier_once += u64::from(n - recent == 1);
                }
            }
        }
    }
    counts
}

impl SpanCounts {
    /// The pages of a range of `range_pages` that the samples' spread allows, and whether
    /// the spread bounds it well (or does not bound it at all).
    fn spread_bound(&self, range_pages: u64) -> (u64, bool) {
        let d = self.repeats.pages;
        let Some((low, high)) = self.spread.filter(|_| d >= 2) else {
            return (range_pages, true);
        };
        let spread = high - low + 1;
        let scaled = (spread as f64 * (d + 1) as f64 / (d - 1) as f64).ceil() as u64;
        // Within two of the gaps expected at its ends, the spread is what samples of the
        // whole range would give.
        let slack = 2 * range_pages / (d + 1);
        if scaled + slack >= range_pages {
            (range_pages, true)
        } else {
            (scaled.max(d), d >= SPREAD_SETTLED_PAGES)
        }
    }

    /// Whether the horizon's samples recapture the earlier samples of this span as often as
    /// the span's own estimate predicts (see the module documentation).
    fn recapture_test(&self) -> Recapture {
        if self.recent == 0 || self.earlier_pages == 0 {
            return Recapture::Untested;
        }
        // If nothing moved, a sample of the horizon falls on a page sampled earlier as often
        // as the earlier samples cover the sampling: Good and Turing's coverage, one less the
        // share of them alone on their page, which holds however unequally pages draw samples.
        let coverage = 1.0 - self.earlier_once as f64 / self.earlier_samples as f64;
        let expected = self.recent as f64 * coverage;
        if poisson_cdf(self.recaptured, expected) < MOVED_LEVEL {
            Recapture::Moved
        } else if poisson_cdf(0, expected) >= MOVED_LEVEL {
            // Even none recaptured would not have shown a move.
            Recapture::Untested
        } else {
            Recapture::Same
        }
    }
}

/// What the recapture test says of borrowing a longer span's evidence.
enum Recapture {
    /// The horizon touched other pages than the span before it.
    Moved,
    /// The horizon holds too few samples to tell.
    Untested,
    /// Nothing shows a move.
    Same,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Prng;

    const P: u64 = PAGE_SIZE;

    /// `per_second` samples a second for `seconds`, each on a page drawn by `page`, in 400 ms
    /// windows.
    fn sample(
        h: &mut PageSamples,
        rng: &mut Prng,
        from_us: u64,
        seconds: u64,
        per_second: u64,
        mut page: impl FnMut(&mut Prng) -> u64,
    ) -> u64 {
        let mut t = from_us;
        for _ in 0..seconds * 5 / 2 {
            t += 400_000;
            let n = per_second * 2 / 5;
            let addrs: Vec<u64> = (0..n).map(|_| page(rng) * P + 8).collect();
            h.add(t, addrs);
            h.settle(t);
        }
        t
    }

    #[test]
    fn settle_merges_in_order_and_forgets_the_old() {
        let mut h = PageSamples::default();
        h.add(1_000_000, [5 * P, P]);
        h.settle(1_000_000);
        h.add(2_000_000, [3 * P, 5 * P + 7]);
        h.settle(2_000_000);
        let pages: Vec<(u64, u64)> = h.kept.iter().map(|s| (s.page, s.time_us)).collect();
        assert_eq!(
            pages,
            [
                (1, 1_000_000),
                (3, 2_000_000),
                (5, 1_000_000),
                (5, 2_000_000)
            ]
        );
        h.settle(1_000_001 + KEEP_US);
        assert_eq!(h.len(), 2, "the samples of 1 s are more than KEEP_US old");
        h.clear();
        assert!(h.is_empty());
    }

    #[test]
    fn the_kept_samples_are_bounded() {
        let mut h = PageSamples::default();
        for w in 0..10u64 {
            h.add(w + 1, (0..MAX_KEPT as u64 / 4).map(|i| i * P));
            h.settle(w + 1);
        }
        assert!(h.len() <= MAX_KEPT);
        assert!(h.kept.iter().all(|s| s.time_us > 6), "the newest are kept");
    }

    #[test]
    fn a_sparse_set_touched_steadily_borrows_evidence_for_a_short_horizon() {
        // 8,000 random pages of a 45,000-page heap, 100 samples a second: 200 in 2 s are too
        // few to repeat, 30 s of them settle the count.
        let mut rng = Prng::seeded(11);
        let hot: Vec<u64> = (0..8000).map(|_| rng.in_range(0, 45_000)).collect();
        let mut h = PageSamples::default();
        let now = sample(&mut h, &mut rng, 0, 40, 100, |r| {
            hot[r.in_range(0, hot.len() as u64) as usize]
        });
        let heap = AddrRange::new(0, 45_000 * P);
        let distinct = {
            let mut d = hot.clone();
            d.sort_unstable();
            d.dedup();
            d.len() as f64
        };
        let t = h.estimate(heap, now, 2_000_000);
        assert!(
            (t.pages / distinct - 1.0).abs() < 0.25,
            "{t:?} for {distinct} pages"
        );
        assert!(t.low <= distinct && distinct <= t.high, "{t:?}");
    }

    #[test]
    fn a_set_that_moved_is_not_estimated_from_before_the_move() {
        // 2,000 pages for 30 s, then 40,000 others: the 2 s horizon after the move must not
        // take the narrow set's repeats for its own.
        let mut rng = Prng::seeded(12);
        let mut h = PageSamples::default();
        let t = sample(&mut h, &mut rng, 0, 30, 200, |r| r.in_range(0, 2000));
        let now = sample(&mut h, &mut rng, t, 2, 200, |r| {
            r.in_range(100_000, 140_000)
        });
        let range = AddrRange::new(0, 140_000 * P);
        let e = h.estimate(range, now, 2_000_000);
        assert!(e.pages > 20_000.0, "{e:?}");
    }

    #[test]
    fn a_set_that_widened_is_not_estimated_from_before() {
        // 600 pages of 8,200 for 30 s, then all of them (a server's narrow then wide load):
        // the 2 s horizon after the change holds most of the range.
        let mut rng = Prng::seeded(15);
        let narrow: Vec<u64> = (0..600).map(|_| rng.in_range(0, 8200)).collect();
        let mut h = PageSamples::default();
        let t = sample(&mut h, &mut rng, 0, 30, 80, |r| {
            narrow[r.in_range(0, narrow.len() as u64) as usize]
        });
        let now = sample(&mut h, &mut rng, t, 2, 80, |r| r.in_range(0, 8200));
        let e = h.estimate(AddrRange::new(0, 8200 * P), now, 2_000_000);
        assert!(e.pages > 4000.0, "{e:?}");
    }

    #[test]
    fn a_hot_set_left_for_others_is_not_estimated_from_before() {
        // 20 pages hot for 30 s, then 30,000 others at a few samples a second (a program
        // done with its hot loop, walking a large table): the horizon's samples land on none
        // of the hot pages, which held every earlier sample. The span's page count is no
        // measure of that (its estimate is inflated by the horizon's own samples, each new),
        // the earlier samples' coverage is.
        let mut rng = Prng::seeded(16);
        let mut h = PageSamples::default();
        let t = sample(&mut h, &mut rng, 0, 30, 100, |r| r.in_range(0, 20));
        let now = sample(&mut h, &mut rng, t, 2, 15, |r| r.in_range(1000, 31_000));
        let e = h.estimate(AddrRange::new(0, 31_000 * P), now, 2_000_000);
        assert_eq!(e.evidence_us, 2_000_000, "{e:?}");
        assert!(e.pages > 10_000.0, "{e:?}");
    }

    #[test]
    fn memory_touched_all_over_counts_whole() {
        let mut rng = Prng::seeded(13);
        let mut h = PageSamples::default();
        let now = sample(&mut h, &mut rng, 0, 30, 200, |r| r.in_range(0, 65_536));
        let range = AddrRange::new(0, 65_536 * P);
        for horizon in [400_000, 2_000_000, 10_000_000, 30_000_000] {
            let e = h.estimate(range, now, horizon);
            assert_eq!(e.pages, 65_536.0, "horizon {horizon}: {e:?}");
        }
    }

    #[test]
    fn samples_that_cluster_bound_the_range_by_their_spread() {
        // 40 samples on 16 pages at the top of an 8 MiB stack mapping.
        let mut rng = Prng::seeded(14);
        let mut h = PageSamples::default();
        let now = sample(&mut h, &mut rng, 0, 10, 4, |r| 2048 - r.in_range(1, 17));
        let e = h.estimate(AddrRange::new(0, 2048 * P), now, 10_000_000);
        assert!(e.pages >= 15.0 && e.pages < 40.0, "{e:?}");
    }
}
