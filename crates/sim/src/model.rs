//! The access model: which pages a workload touches in a window of virtual time, as a yes/no
//! for one page (what an access check sees) and as an amount of memory (the ground truth).
//!
//! **Time.** Workload time starts at 0 when monitoring starts. Phases run in configuration
//! order, each for its duration; with `repeat` > 1 the whole list runs again, as masim's `-c`
//! does. When the last run ends the workload exits and nothing is accessed any more.
//!
//! **Rate.** The workload makes `R` accesses per second ([`crate::SimOptions::access_rate`]).
//! masim picks a pattern with probability weight/total and performs a batch of 131072 accesses
//! to it, in a loop; we use the fluid version of that: pattern `p` of a phase with total weight
//! `W` makes `N_p(τ) = ⌊R · w_p · τ / W⌋` accesses in the first `τ` of the phase.
//!
//! **Sequential patterns** follow masim's loop exactly: each access first advances the offset
//! by the stride and wraps to 0 once it reaches the region size, so access `i` (from 1, counted
//! from the phase start, where masim's offset starts at 0 again) lands on offset
//! `(i mod m) · stride` with `m = ⌈size / stride⌉`. The accesses of a window `[t0, t1)` are
//! those numbered `N(t0)+1 ..= N(t1)`: a sweep over a range of steps (two ranges when it wraps,
//! all `m` steps when it goes all the way round). A page is touched iff some step's offset lies
//! in it; with a stride above the page size only the pages holding a step are touched.
//!
//! **Random patterns** pick a uniformly random byte of the region for each access. With `n`
//! random accesses to a region of `S` bytes in the window, a page holding `b` of its bytes
//! (a page, or less for the region's last page) is touched with probability
//! `1 − (1 − b/S)^n`; patterns on the same region add up their `n`. An access check draws from
//! the context's generator against that probability.
//!
//! A window that straddles phase boundaries (or runs) is cut into per-phase stretches and a page
//! is touched if any stretch touches it. Addresses outside every workload region (gaps, and the
//! program image, libraries and stack of [`crate::layout`]) are never touched.
//!
//! **Ground truth** ([`Workload::touched_bytes`]) is the memory touched in a window at page
//! granularity: exact for sequential patterns, the expected number of distinct pages for random
//! ones (pages × probability, plus the exactly known swept pages). Counting is arithmetic over
//! step ranges, never per page, so a terabyte region costs what a kilobyte one does. The one
//! exception is a region swept in one window by two patterns of different strides above the page
//! size (possible only across a phase boundary), where the second sweep's steps are enumerated.

use crate::config::Workload;
use crate::memory::Pages;
use crate::ops::SimOptions;
use udamon_core::{AddrRange, PAGE_SIZE};

const PAGE: u64 = PAGE_SIZE;

/// A stretch of one phase inside a window: `[from_us, to_us)` counted from the phase's start,
/// occurring `times` times (more than once when the window spans whole runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stretch {
    phase: usize,
    from_us: u64,
    to_us: u64,
    times: u64,
}

/// The phases on the workload's time line.
#[derive(Debug, Clone)]
pub(crate) struct Timeline {
    /// Start of each phase within a run.
    phase_starts: Vec<u64>,
    durations: Vec<u64>,
    run_us: u64,
    total_us: u64,
}

impl Timeline {
    pub(crate) fn new(workload: &Workload, repeat: u32) -> Timeline {
        let durations: Vec<u64> = workload.phases().iter().map(|p| p.duration_us()).collect();
        let mut phase_starts = Vec::with_capacity(durations.len());
        let mut t = 0u64;
        for d in &durations {
            phase_starts.push(t);
            t += d;
        }
        Timeline {
            phase_starts,
            durations,
            run_us: t,
            total_us: t.saturating_mul(repeat as u64),
        }
    }

    /// When the workload exits.
    pub(crate) fn total_us(&self) -> u64 {
        self.total_us
    }

    /// The stretches of `[a, b)`, with identical ones merged into one with a count.
    fn stretches(&self, (a, b): (u64, u64), out: &mut Vec<Stretch>) {
        out.clear();
        let b = b.min(self.total_us);
        if a >= b {
            return;
        }
        let run = self.run_us;
        let (r0, r1) = (a / run, (b - 1) / run);
        if r0 == r1 {
            self.within_run(a - r0 * run, b - r0 * run, out);
        } else {
            self.within_run(a - r0 * run, run, out);
            let whole_runs = r1 - r0 - 1;
            if whole_runs > 0 {
                for (phase, &d) in self.durations.iter().enumerate() {
                    out.push(Stretch {
                        phase,
                        from_us: 0,
                        to_us: d,
                        times: whole_runs,
                    });
                }
            }
            self.within_run(0, b - r1 * run, out);
        }
        out.sort_unstable_by_key(|s| (s.phase, s.from_us, s.to_us));
        out.dedup_by(|later, earlier| {
            let same = (later.phase, later.from_us, later.to_us)
                == (earlier.phase, earlier.from_us, earlier.to_us);
            if same {
                earlier.times += later.times;
            }
            same
        });
    }

    fn within_run(&self, x: u64, y: u64, out: &mut Vec<Stretch>) {
        let mut i = self.phase_starts.partition_point(|&s| s <= x) - 1;
        while i < self.phase_starts.len() && self.phase_starts[i] < y {
            let s = self.phase_starts[i];
            let from_us = x.max(s) - s;
            let to_us = y.min(s + self.durations[i]) - s;
            if from_us < to_us {
                out.push(Stretch {
                    phase: i,
                    from_us,
                    to_us,
                    times: 1,
                });
            }
            i += 1;
        }
    }
}

/// Steps `first..=last` of a sequential pattern: offsets `k · stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Sweep {
    stride: u64,
    first: u64,
    last: u64,
}

impl Sweep {
    fn small(&self) -> bool {
        self.stride <= PAGE
    }

    /// For a stride up to a page, the swept pages form one run.
    fn page_run(&self) -> Pages {
        Pages::new(
            self.first * self.stride / PAGE,
            self.last * self.stride / PAGE + 1,
        )
    }

    /// For a stride above a page: the step whose offset lies in `page`, if that step is swept.
    fn holds_page(&self, page: u64) -> bool {
        let (s, lo) = (self.stride as u128, page as u128 * PAGE as u128);
        let k = lo.div_ceil(s);
        k * s < lo + PAGE as u128 && (self.first as u128..=self.last as u128).contains(&k)
    }

    /// For a stride above a page: swept steps whose page is in `pages`.
    fn steps_in_pages(&self, pages: Pages) -> u64 {
        let s = self.stride as u128;
        let lo = (pages.start as u128 * PAGE as u128).div_ceil(s);
        let hi = (pages.end as u128 * PAGE as u128).div_ceil(s); // exclusive
        let lo = lo.max(self.first as u128);
        let hi = hi.min(self.last as u128 + 1);
        hi.saturating_sub(lo) as u64
    }
}

/// A range of a region's pages and how many of them were touched, expected.
struct TouchedPages {
    pages: Pages,
    expected: f64,
}

/// What one workload region received in a window.
#[derive(Debug, Clone, Default)]
pub(crate) struct RegionAccesses {
    sweeps: Vec<Sweep>,
    /// Random accesses, all patterns together.
    random: u128,
}

impl RegionAccesses {
    fn clear(&mut self) {
        self.sweeps.clear();
        self.random = 0;
    }

    fn add_sequential(&mut self, size: u64, stride: u64, before: u128, count: u128) {
        let m = size.div_ceil(stride) as u128;
        let mut push = |first: u128, last: u128| {
            let sweep = Sweep {
                stride,
                first: first as u64,
                last: last as u64,
            };
            if !self.sweeps.contains(&sweep) {
                self.sweeps.push(sweep);
            }
        };
        if count >= m {
            push(0, m - 1);
            return;
        }
        let first = (before + 1) % m;
        let last = first + count - 1;
        if last < m {
            push(first, last);
        } else {
            push(first, m - 1);
            push(0, last - m);
        }
    }

    /// Whether page `page` (counted from the region's start) was swept.
    pub(crate) fn swept(&self, page: u64) -> bool {
        self.sweeps.iter().any(|s| {
            if s.small() {
                s.page_run().contains(page)
            } else {
                s.holds_page(page)
            }
        })
    }

    /// Probability that random accesses touched page `page` of a region of `size` bytes.
    pub(crate) fn random_touch_probability(&self, size: u64, page: u64) -> f64 {
        if self.random == 0 {
            return 0.0;
        }
        let bytes = PAGE.min(size - page * PAGE);
        if bytes == size {
            return 1.0;
        }
        // 1 - (1 - b/S)^n, accurate for tiny b/S and huge n.
        -(self.random as f64 * (-(bytes as f64) / size as f64).ln_1p()).exp_m1()
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.random == 0 && self.sweeps.is_empty()
    }

    /// The pages swept by strides up to a page: sorted, disjoint, non-adjacent runs.
    pub(crate) fn swept_runs(&self) -> Vec<Pages> {
        let mut runs: Vec<Pages> = self
            .sweeps
            .iter()
            .filter(|s| s.small())
            .map(Sweep::page_run)
            .collect();
        runs.sort_unstable();
        let mut merged: Vec<Pages> = Vec::with_capacity(runs.len());
        for run in runs {
            match merged.last_mut() {
                Some(last) if run.start <= last.end => last.end = last.end.max(run.end),
                _ => merged.push(run),
            }
        }
        merged
    }

    /// Pages in `pages` holding a step of a sweep with a stride above a page, at most the
    /// number of pages (sweeps of different strides may share a page; not worked out here).
    pub(crate) fn comb_pages_in(&self, pages: Pages) -> u64 {
        let steps: u64 = self
            .sweeps
            .iter()
            .filter(|s| !s.small())
            .map(|s| s.steps_in_pages(pages))
            .fold(0, u64::saturating_add);
        steps.min(pages.count())
    }

    /// Exact count of swept pages.
    fn swept_pages(&self) -> u64 {
        let merged = self.swept_runs();
        let mut count: u64 = merged.iter().map(Pages::count).sum();

        let mut big: Vec<Sweep> = self.sweeps.iter().filter(|s| !s.small()).copied().collect();
        big.sort_unstable();
        // Steps of one stride: merge overlapping ranges so that no step counts twice.
        let mut merged_big: Vec<Sweep> = Vec::with_capacity(big.len());
        for s in big {
            match merged_big.last_mut() {
                Some(last) if last.stride == s.stride && s.first <= last.last.saturating_add(1) => {
                    last.last = last.last.max(s.last)
                }
                _ => merged_big.push(s),
            }
        }
        let first_stride = merged_big.first().map(|s| s.stride);
        for (i, s) in merged_big.iter().enumerate() {
            if Some(s.stride) == first_stride {
                // Distinct steps of a stride above a page hold distinct pages.
                let in_runs: u64 = merged.iter().map(|&run| s.steps_in_pages(run)).sum();
                count += s.last - s.first + 1 - in_runs;
            } else {
                let earlier = &merged_big[..i];
                for k in s.first..=s.last {
                    let page = k * s.stride / PAGE;
                    let in_runs = merged.iter().any(|run| run.contains(page));
                    if !in_runs
                        && !earlier
                            .iter()
                            .any(|e| e.stride != s.stride && e.holds_page(page))
                    {
                        count += 1;
                    }
                }
            }
        }
        count
    }

    /// Where in a region of `size` bytes its touched pages lie: page ranges and the expected
    /// number of touched pages in each. Runs swept at strides up to a page are whole ranges,
    /// fully touched; the pages between them (or the whole region) hold the pages of wider
    /// strides and of random accesses, spread evenly. Empty when nothing was accessed.
    fn touched_page_ranges(&self, size: u64) -> Vec<TouchedPages> {
        if self.is_idle() {
            return Vec::new();
        }
        let pages = size.div_ceil(PAGE);
        let mut out = Vec::new();
        let gap = |first: u64, end: u64, out: &mut Vec<TouchedPages>| {
            if first >= end {
                return;
            }
            let comb = self.comb_pages_in(Pages::new(first, end));
            let mut expected = comb as f64;
            if self.random > 0 {
                let p_full = self.random_touch_probability(size, 0);
                let last = pages - 1;
                let partial = end == pages && size - last * PAGE < PAGE;
                let full_pages = end - first - comb - u64::from(partial && comb < end - first);
                expected += full_pages as f64 * p_full;
                if partial && comb < end - first {
                    expected += self.random_touch_probability(size, last);
                }
            }
            if expected > 0.0 {
                out.push(TouchedPages {
                    pages: Pages::new(first, end),
                    expected,
                });
            }
        };
        let mut at = 0;
        for run in self.swept_runs() {
            gap(at, run.start, &mut out);
            out.push(TouchedPages {
                pages: run,
                expected: run.count() as f64,
            });
            at = run.end;
        }
        gap(at, pages, &mut out);
        out
    }

    /// Expected number of distinct pages touched in a region of `size` bytes.
    fn expected_touched_pages(&self, size: u64) -> f64 {
        let swept = self.swept_pages();
        if self.random == 0 {
            return swept as f64;
        }
        let pages = size.div_ceil(PAGE);
        let last = pages - 1;
        let last_bytes = size - last * PAGE;
        if last_bytes == PAGE {
            return swept as f64 + (pages - swept) as f64 * self.random_touch_probability(size, 0);
        }
        // The partial last page is hit less often than the others.
        let last_swept = self.swept(last);
        let swept_full = swept - last_swept as u64;
        let mut expected =
            swept as f64 + (last - swept_full) as f64 * self.random_touch_probability(size, 0);
        if !last_swept {
            expected += self.random_touch_probability(size, last);
        }
        expected
    }
}

/// What every workload region received in one window; buffers are reused between windows.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowAccesses {
    regions: Vec<RegionAccesses>,
    stretches: Vec<Stretch>,
}

impl WindowAccesses {
    /// Fill in the accesses of window `[t0, t1)` in workload time.
    pub(crate) fn compute(
        &mut self,
        workload: &Workload,
        timeline: &Timeline,
        rate: u64,
        window: (u64, u64),
    ) {
        self.regions
            .resize_with(workload.regions().len(), RegionAccesses::default);
        self.regions.iter_mut().for_each(RegionAccesses::clear);
        timeline.stretches(window, &mut self.stretches);
        for st in &self.stretches {
            let phase = &workload.phases()[st.phase];
            let total = phase.total_probability() as u128;
            let made_by = |weight: u32, t_us: u64| {
                (rate as u128 * weight as u128).saturating_mul(t_us as u128) / (total * 1_000_000)
            };
            for p in &phase.patterns {
                let before = made_by(p.probability, st.from_us);
                let count = made_by(p.probability, st.to_us) - before;
                if count == 0 {
                    continue;
                }
                let region = &mut self.regions[p.region];
                if p.random {
                    region.random = region
                        .random
                        .saturating_add(count.saturating_mul(st.times as u128));
                } else {
                    region.add_sequential(
                        workload.regions()[p.region].size,
                        p.stride,
                        before,
                        count,
                    );
                }
            }
        }
    }

    pub(crate) fn region(&self, i: usize) -> &RegionAccesses {
        &self.regions[i]
    }
}

/// Memory of one workload region touched in a window, at page granularity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Touched {
    /// Index into [`Workload::regions`].
    pub region: usize,
    /// The region's mapping.
    pub range: AddrRange,
    /// Bytes of the pages touched: exact for sequential patterns, an expectation when random
    /// patterns contribute.
    pub bytes: f64,
}

/// A range of the address space and the bytes of its pages touched in a window, spread evenly
/// over it as far as anyone knows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extent {
    pub range: AddrRange,
    pub bytes: f64,
}

impl Workload {
    /// The ground truth for window `[t0_us, t1_us)` of workload time (0 = when the workload
    /// started): for every region, in configuration order, the memory its touched pages cover.
    pub fn touched_bytes(&self, options: &SimOptions, window_us: (u64, u64)) -> Vec<Touched> {
        let timeline = Timeline::new(self, options.repeat.get());
        let mut accesses = WindowAccesses::default();
        accesses.compute(self, &timeline, options.access_rate, window_us);
        self.regions()
            .iter()
            .enumerate()
            .map(|(i, r)| Touched {
                region: i,
                range: r.range,
                bytes: accesses.region(i).expected_touched_pages(r.size) * PAGE as f64,
            })
            .collect()
    }

    /// The ground truth for window `[t0_us, t1_us)` of workload time by address: the ranges
    /// holding touched pages, sorted, with the bytes of the pages touched in each (all of a
    /// range swept at a stride up to a page; an expectation, spread evenly over the range,
    /// where random accesses or wider strides decide). Ranges of nothing touched are left
    /// out; the bytes add up to [`Workload::ground_truth_wss`].
    pub fn touched_extents(&self, options: &SimOptions, window_us: (u64, u64)) -> Vec<Extent> {
        let timeline = Timeline::new(self, options.repeat.get());
        let mut accesses = WindowAccesses::default();
        accesses.compute(self, &timeline, options.access_rate, window_us);
        let mut out: Vec<Extent> = Vec::new();
        for (i, r) in self.regions().iter().enumerate() {
            let page_addr = |p: u64| r.range.start + p * PAGE;
            for t in accesses.region(i).touched_page_ranges(r.size) {
                out.push(Extent {
                    range: AddrRange::new(page_addr(t.pages.start), page_addr(t.pages.end)),
                    bytes: t.expected * PAGE as f64,
                });
            }
        }
        out.sort_by_key(|e| e.range.start);
        out
    }

    /// The working set size of window `[t0_us, t1_us)`: bytes of all pages touched in it.
    pub fn ground_truth_wss(&self, options: &SimOptions, window_us: (u64, u64)) -> f64 {
        self.touched_bytes(options, window_us)
            .iter()
            .map(|t| t.bytes)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    fn workload(text: &str) -> Workload {
        Workload::parse(text, "test").unwrap()
    }

    fn opts(rate: u64, repeat: u32) -> SimOptions {
        SimOptions {
            access_rate: rate,
            repeat: NonZeroU32::new(repeat).unwrap(),
            ..SimOptions::default()
        }
    }

    fn stretches(t: &Timeline, w: (u64, u64)) -> Vec<(usize, u64, u64, u64)> {
        let mut out = Vec::new();
        t.stretches(w, &mut out);
        out.iter()
            .map(|s| (s.phase, s.from_us, s.to_us, s.times))
            .collect()
    }

    #[test]
    fn windows_are_cut_at_phase_and_run_boundaries() {
        let w = workload("a, 4096\n\np0\n10\na, 0, 1, 1\n\np1\n20\na, 0, 1, 1\n");
        let t = Timeline::new(&w, 5);
        assert_eq!(t.total_us(), 150_000);
        assert_eq!(stretches(&t, (1_000, 4_000)), [(0, 1_000, 4_000, 1)]);
        assert_eq!(
            stretches(&t, (8_000, 12_000)),
            [(0, 8_000, 10_000, 1), (1, 0, 2_000, 1)]
        );
        // Across a run boundary: the end of p1, then p0 of the next run.
        assert_eq!(
            stretches(&t, (25_000, 35_000)),
            [(0, 0, 5_000, 1), (1, 15_000, 20_000, 1)]
        );
        // Three whole runs inside (30-60, 60-90, 90-120 ms), plus partial runs on both sides.
        assert_eq!(
            stretches(&t, (29_000, 121_000)),
            [
                (0, 0, 1_000, 1),
                (0, 0, 10_000, 3),
                (1, 0, 20_000, 3),
                (1, 19_000, 20_000, 1)
            ]
        );
        // The whole p1 of the first run merges with the two of the whole runs.
        assert_eq!(
            stretches(&t, (5_000, 95_000)),
            [
                (0, 0, 5_000, 1),
                (0, 0, 10_000, 2),
                (0, 5_000, 10_000, 1),
                (1, 0, 20_000, 3)
            ]
        );
        // After the workload exited there is nothing; a window reaching past the end is clipped.
        assert!(stretches(&t, (150_000, 160_000)).is_empty());
        assert_eq!(stretches(&t, (145_000, 160_000)), [(1, 15_000, 20_000, 1)]);
    }

    #[test]
    fn sequential_sweep_follows_masims_offsets() {
        // 10 pages, stride one page, 1000 accesses per second: access i at second i/1000
        // lands on page i mod 10 (the first access skips offset 0, as masim's loop does).
        let w = workload("a, 40960\n\np\n1000000\na, 0, 4096, 1\n");
        let o = opts(1000, 1);
        let timeline = Timeline::new(&w, 1);
        let mut acc = WindowAccesses::default();
        // Accesses 1..=3 happen within [0, 3.5 ms): pages 1, 2, 3.
        acc.compute(&w, &timeline, o.access_rate, (0, 3_500));
        let swept: Vec<u64> = (0..10).filter(|&p| acc.region(0).swept(p)).collect();
        assert_eq!(swept, [1, 2, 3]);
        // Accesses 9..=12 wrap: pages 9, 0, 1, 2.
        acc.compute(&w, &timeline, o.access_rate, (8_000, 12_000));
        let swept: Vec<u64> = (0..10).filter(|&p| acc.region(0).swept(p)).collect();
        assert_eq!(swept, [0, 1, 2, 9]);
        assert_eq!(w.ground_truth_wss(&o, (8_000, 12_000)), 4.0 * 4096.0);
        // Ten or more accesses cover the region.
        assert_eq!(w.ground_truth_wss(&o, (20_000, 30_000)), 40960.0);
        assert_eq!(w.ground_truth_wss(&o, (0, 999)), 0.0);
    }

    #[test]
    fn strides_smaller_and_larger_than_a_page() {
        // Stride 1000 B: steps 1..=5 at offsets 1000..5000 cover pages 0 and 1.
        let w = workload("a, 1m\n\np\n1000000\na, 0, 1000, 1\n");
        assert_eq!(w.ground_truth_wss(&opts(1000, 1), (0, 5_000)), 2.0 * 4096.0);
        // Stride 3 pages: 4 steps touch 4 pages, not the ones in between.
        let w = workload("a, 1m\n\np\n1000000\na, 0, 12288, 1\n");
        let timeline = Timeline::new(&w, 1);
        let mut acc = WindowAccesses::default();
        acc.compute(&w, &timeline, 1000, (0, 4_000));
        let swept: Vec<u64> = (0..256).filter(|&p| acc.region(0).swept(p)).collect();
        assert_eq!(swept, [3, 6, 9, 12]);
        assert_eq!(w.ground_truth_wss(&opts(1000, 1), (0, 4_000)), 4.0 * 4096.0);
        // Stride 6000 B: steps land on pages 1, 2, 4, 5 (6000, 12000, 18000, 24000).
        let w = workload("a, 1m\n\np\n1000000\na, 0, 6000, 1\n");
        acc.compute(&w, &Timeline::new(&w, 1), 1000, (0, 4_000));
        let swept: Vec<u64> = (0..256).filter(|&p| acc.region(0).swept(p)).collect();
        assert_eq!(swept, [1, 2, 4, 5]);
        assert_eq!(w.ground_truth_wss(&opts(1000, 1), (0, 4_000)), 4.0 * 4096.0);
    }

    #[test]
    fn sweeps_restart_each_phase_and_union_across_a_boundary() {
        // Two phases sweeping the same 100-page region at one page per ms; each phase starts
        // again at offset 0. A window straddling the boundary sees pages 9, 10 (end of p0) and
        // 1, 2 (start of p1).
        let w = workload("a, 400k\n\np0\n10\na, 0, 4k, 1\n\np1\n10\na, 0, 4k, 1\n");
        let o = opts(1000, 1);
        assert_eq!(w.ground_truth_wss(&o, (8_500, 12_500)), 4.0 * 4096.0);
        // p1 with a stride of 3 pages and p0 with 2: pages {2,4,...} and {3,6,...} overlap at 6.
        let w = workload("a, 400k\n\np0\n3\na, 0, 8k, 1\n\np1\n3\na, 0, 12k, 1\n");
        // p0: steps 1..=3 → pages 2, 4, 6; p1: steps 1..=3 → pages 3, 6, 9.
        assert_eq!(w.ground_truth_wss(&o, (0, 6_000)), 5.0 * 4096.0);
        let timeline = Timeline::new(&w, 1);
        let mut acc = WindowAccesses::default();
        acc.compute(&w, &timeline, 1000, (0, 6_000));
        let swept: Vec<u64> = (0..100).filter(|&p| acc.region(0).swept(p)).collect();
        assert_eq!(swept, [2, 3, 4, 6, 9]);
    }

    #[test]
    fn random_probability_matches_the_formula_and_sampling() {
        // 1000 pages, 500 random accesses in the window.
        let w = workload("a, 4096000\n\np\n1000\na, 1, 0, 1\n");
        let o = opts(1_000_000, 1);
        let timeline = Timeline::new(&w, 1);
        let mut acc = WindowAccesses::default();
        acc.compute(&w, &timeline, o.access_rate, (0, 500));
        let p = acc.region(0).random_touch_probability(4_096_000, 17);
        let want = 1.0 - (1.0 - 1.0 / 1000.0f64).powi(500);
        assert!((p - want).abs() < 1e-12, "{p} vs {want}");
        let truth = w.ground_truth_wss(&o, (0, 500));
        assert!(
            (truth - 1000.0 * want * 4096.0).abs() < 1e-6 * truth,
            "{truth}"
        );

        // Simulate the accesses themselves and count distinct pages: the expectation holds.
        let mut rng = udamon_core::Prng::seeded(5);
        let trials = 200;
        let mut total = 0usize;
        for _ in 0..trials {
            let mut seen = vec![false; 1000];
            for _ in 0..500 {
                seen[(rng.in_range(0, 4_096_000) / 4096) as usize] = true;
            }
            total += seen.iter().filter(|&&s| s).count();
        }
        let mean = total as f64 / trials as f64;
        assert!(
            (mean - 1000.0 * want).abs() < 5.0,
            "simulated {mean}, model {}",
            1000.0 * want
        );
    }

    #[test]
    fn partial_last_page_is_hit_less() {
        // 2.5 pages: the last page holds 2048 of the 10240 bytes.
        let w = workload("a, 10240\n\np\n1000\na, 1, 0, 1\n");
        let timeline = Timeline::new(&w, 1);
        let mut acc = WindowAccesses::default();
        acc.compute(&w, &timeline, 1_000_000, (0, 2));
        let r = acc.region(0);
        let full = r.random_touch_probability(10240, 0);
        let last = r.random_touch_probability(10240, 2);
        assert!((full - (1.0 - 0.6f64.powi(2))).abs() < 1e-12);
        assert!((last - (1.0 - 0.8f64.powi(2))).abs() < 1e-12);
        let truth = w.ground_truth_wss(&opts(1_000_000, 1), (0, 2));
        assert!((truth - (2.0 * full + last) * 4096.0).abs() < 1e-6);
        // A one-page region is touched for sure by one access.
        let w = workload("a, 100\n\np\n1000\na, 1, 0, 1\n");
        assert_eq!(w.ground_truth_wss(&opts(1_000_000, 1), (0, 1)), 4096.0);
    }

    #[test]
    fn repeated_runs_multiply_random_accesses() {
        // 1000 pages, 100 accesses per 1 ms run; a window of three whole runs sees 300.
        let w = workload("a, 4096000\n\np\n1\na, 1, 0, 1\n");
        let o = opts(100_000, 10);
        let want = 1000.0 * (1.0 - (1.0 - 1e-3f64).powi(300)) * 4096.0;
        let got = w.ground_truth_wss(&o, (0, 3_000));
        assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
        let got = w.ground_truth_wss(&o, (500, 3_500));
        assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
        assert_eq!(w.ground_truth_wss(&o, (10_000, 20_000)), 0.0);
    }

    #[test]
    fn mixed_random_and_sequential_on_one_region() {
        // 100 pages, 10 swept pages, 50 random accesses.
        let w = workload("a, 409600\n\np\n1000\na, 0, 4096, 1\na, 1, 0, 5\n");
        let o = opts(60_000, 1);
        // 60 accesses per ms: 10 sequential (pages 1..=10), 50 random.
        let p = 1.0 - (1.0 - 0.01f64).powi(50);
        let want = (10.0 + 90.0 * p) * 4096.0;
        let got = w.ground_truth_wss(&o, (0, 1_000));
        assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
    }

    #[test]
    fn extents_place_the_truth_where_it_was_touched() {
        // 100 pages swept one page per ms from page 1, plus 50 random accesses, in 10 ms.
        let w = workload("a, 409600\n\np\n1000\na, 0, 4096, 1\na, 1, 0, 5\n");
        let o = opts(6_000, 1);
        let window = (0, 10_000);
        let e = w.touched_extents(&o, window);
        let start = w.regions()[0].range.start;
        let pages: Vec<(u64, u64)> = e
            .iter()
            .map(|x| ((x.range.start - start) / 4096, (x.range.end - start) / 4096))
            .collect();
        assert_eq!(pages, [(0, 1), (1, 11), (11, 100)], "swept pages 1..=10");
        assert_eq!(e[1].bytes, 10.0 * 4096.0);
        let p = 1.0 - (1.0 - 0.01f64).powi(50);
        assert!((e[2].bytes - 89.0 * p * 4096.0).abs() < 1e-6);
        let total: f64 = e.iter().map(|x| x.bytes).sum();
        assert!(
            (total - w.ground_truth_wss(&o, window)).abs() < 1e-6,
            "{total}"
        );
        // A region of 2.5 pages touched at random: the partial page counts less.
        let w = workload("a, 10240\n\np\n1000\na, 1, 0, 1\n");
        let o = opts(1_000_000, 1);
        let total: f64 = w.touched_extents(&o, (0, 2)).iter().map(|x| x.bytes).sum();
        assert!((total - w.ground_truth_wss(&o, (0, 2))).abs() < 1e-9);
        assert!(w.touched_extents(&o, (5_000_000, 6_000_000)).is_empty());
    }

    #[test]
    fn terabyte_regions_cost_nothing_per_page() {
        // 4 TiB swept round at a stride of 5000 B: every step holds its own page, so the
        // touched pages are the ⌈4 TiB / 5000⌉ steps, counted without visiting them.
        let w = workload("a, 4t\n\np\n100000\na, 0, 5000, 1\n");
        let o = opts(1 << 40, 1);
        let t = w.touched_bytes(&o, (0, 10_000_000));
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].bytes, ((4u64 << 40).div_ceil(5000) * 4096) as f64);
        assert_eq!(t[0].range, w.regions()[0].range);
    }
}
