//! The simulated process's memory: which pages of the workload's regions are resident, paged
//! out by a scheme, or backed by huge pages, and how much paged-out memory came back because
//! the workload touched it again (refaults).
//!
//! **Life of a page.** masim allocates its regions with `malloc`, so a page takes memory on its
//! first touch (a region with an init file is written in full when the workload starts: masim
//! copies the file into it). A resident page can be paged out (`pageout`), and comes back when
//! the workload touches it again, which is a *refault*, or when a scheme asks for it
//! (`willneed`), which is not. The model assumes somewhere to page out to (swap, zswap, far
//! memory): that is the memory a scheme would save.
//!
//! **Representation.** Each workload region is cut into segments, page ranges that share a
//! state: the share of their pages ever faulted in (`faulted`), the share paged out (`out`,
//! at most `faulted`), and whether they are backed by huge pages. Shares rather than page sets
//! because random access patterns are only known in expectation: every page of a segment is as
//! likely as any other to be touched, so a window that touches each page with probability `q`
//! refaults `out · q` of the segment and leaves `out · (1 − q)` paged out, which is the expected
//! value. Sequential sweeps of strides up to a page are exact: the swept page runs cut the
//! segments and become fully resident. Strides above a page are approximated: the share of a
//! segment's pages holding a step is treated as spread evenly over the segment. Segments whose
//! states agree are joined again, so their number follows the number of distinct edges that
//! schemes and sweeps left, not the size of the memory.
//!
//! **Huge pages** are whole 2 MiB blocks, aligned in the address space, inside one region
//! ([`udamon_core::damos::HUGE_PAGE`]). A huge segment is always fully resident; paging out any part of a block
//! splits it (the whole block loses its huge backing), as the kernel splits a THP to reclaim it.

use crate::config::Workload;
use crate::model::WindowAccesses;
use udamon_core::damos::HUGE_PAGE;
use udamon_core::{AddrRange, PAGE_SIZE, TargetMemory};

const PAGE: u64 = PAGE_SIZE;
/// Base pages per huge page: the model backs memory with the same huge pages as the kernel.
const PAGES_PER_HUGE: u64 = HUGE_PAGE / PAGE;
/// Shares closer than this to 0 or 1 are snapped to it, and neighbours closer than this join.
const EPS: f64 = 1e-9;

/// Pages `[start, end)` of one workload region, numbered from the region's first page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pages {
    pub(crate) start: u64,
    pub(crate) end: u64,
}

impl Pages {
    pub(crate) const fn new(start: u64, end: u64) -> Pages {
        Pages { start, end }
    }

    /// How many pages (none when `end <= start`).
    pub(crate) fn count(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub(crate) fn contains(&self, page: u64) -> bool {
        self.start <= page && page < self.end
    }
}

/// A page range `[start, end)` (page indices within its region) and the state of its pages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Segment {
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Share of the pages ever faulted in, `0..=1`.
    pub(crate) faulted: f64,
    /// Share of the pages paged out, `0..=faulted`.
    pub(crate) out: f64,
    /// Backed by huge pages (then `faulted == 1` and `out == 0`).
    pub(crate) huge: bool,
}

impl Segment {
    pub(crate) fn pages(&self) -> u64 {
        self.end - self.start
    }

    /// Bytes of each state: never faulted in, paged out, resident.
    pub(crate) fn bytes(&self) -> (f64, f64, f64) {
        let b = (self.pages() * PAGE) as f64;
        (
            (1.0 - self.faulted) * b,
            self.out * b,
            (self.faulted - self.out) * b,
        )
    }

    fn same_state(&self, other: &Segment) -> bool {
        self.huge == other.huge
            && (self.faulted - other.faulted).abs() <= EPS
            && (self.out - other.out).abs() <= EPS
    }

    fn snap(&mut self) {
        if self.out < EPS {
            self.out = 0.0;
        }
        if self.faulted > 1.0 - EPS {
            self.faulted = 1.0;
        }
        self.out = self.out.min(self.faulted);
    }

    /// The workload touched each page with probability `q`.
    fn touch(&mut self, q: f64, refaulted: &mut f64) {
        *refaulted += self.out * q * (self.pages() * PAGE) as f64;
        self.faulted += (1.0 - self.faulted) * q;
        self.out *= 1.0 - q;
        self.snap();
    }
}

/// Memory of a range: expected bytes in each state.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Residency {
    /// Bytes in memory.
    pub resident_bytes: f64,
    /// Bytes a scheme paged out that the workload has not touched since.
    pub paged_out_bytes: f64,
    /// Resident bytes backed by huge pages.
    pub huge_bytes: f64,
}

/// One workload region's memory.
#[derive(Debug, Clone)]
struct RegionMemory {
    mapping: AddrRange,
    /// Bytes accesses fall in (the last page may be partly outside).
    size: u64,
    /// Sorted, disjoint, covering every page of the mapping.
    segments: Vec<Segment>,
}

impl RegionMemory {
    fn pages(&self) -> u64 {
        self.mapping.size() / PAGE
    }

    /// Split the segment holding `page` so that a segment starts there; returns its index.
    fn split_at(&mut self, page: u64) -> usize {
        let i = self.segments.partition_point(|s| s.end <= page);
        if i == self.segments.len() || self.segments[i].start == page {
            return i;
        }
        let mut right = self.segments[i];
        right.start = page;
        self.segments[i].end = page;
        self.segments.insert(i + 1, right);
        i + 1
    }

    /// Join neighbours in the same state (a weighted mean keeps the totals).
    fn coalesce(&mut self) {
        let mut out: Vec<Segment> = Vec::with_capacity(self.segments.len());
        for s in self.segments.drain(..) {
            match out.last_mut() {
                Some(last) if last.same_state(&s) => {
                    let (a, b) = (last.pages() as f64, s.pages() as f64);
                    last.faulted = (last.faulted * a + s.faulted * b) / (a + b);
                    last.out = (last.out * a + s.out * b) / (a + b);
                    last.end = s.end;
                }
                _ => out.push(s),
            }
        }
        self.segments = out;
    }

    /// Page index of the first huge-page block boundary at or after page 0.
    fn first_block(&self) -> u64 {
        (self.mapping.start.next_multiple_of(HUGE_PAGE) - self.mapping.start) / PAGE
    }

    /// The page range of the whole blocks that `pages` overlaps, clipped to the region.
    fn blocks_around(&self, pages: Pages) -> Pages {
        let first = self.first_block();
        let down = |p: u64| {
            if p < first {
                0
            } else {
                first + (p - first) / PAGES_PER_HUGE * PAGES_PER_HUGE
            }
        };
        let up = |p: u64| {
            if p <= first {
                first.min(self.pages())
            } else {
                (first + (p - first).div_ceil(PAGES_PER_HUGE) * PAGES_PER_HUGE).min(self.pages())
            }
        };
        Pages::new(down(pages.start), up(pages.end))
    }

    /// The whole blocks inside `pages` (and the region), as page ranges.
    fn blocks_within(&self, pages: Pages) -> impl Iterator<Item = Pages> + use<> {
        let first = self.first_block();
        let start = if pages.start <= first {
            first
        } else {
            first + (pages.start - first).div_ceil(PAGES_PER_HUGE) * PAGES_PER_HUGE
        };
        let end = pages.end.min(self.pages());
        (start..end)
            .step_by(PAGES_PER_HUGE as usize)
            .map(|s| Pages::new(s, s + PAGES_PER_HUGE))
            .take_while(move |b| b.end <= end)
    }
}

/// Every workload region's memory, and the refaults so far.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    regions: Vec<RegionMemory>,
    /// Region indices by address.
    by_addr: Vec<usize>,
    /// Workload time up to which the workload's touches have been applied.
    synced_us: u64,
    /// Bytes refaulted since the workload started.
    refaulted: f64,
}

impl Memory {
    /// The memory when the workload starts: untouched, except regions with an init file.
    pub(crate) fn new(workload: &Workload) -> Memory {
        let regions = workload
            .regions()
            .iter()
            .map(|r| {
                let faulted = if r.init_file.is_some() { 1.0 } else { 0.0 };
                RegionMemory {
                    mapping: r.range,
                    size: r.size,
                    segments: vec![Segment {
                        start: 0,
                        end: r.range.size() / PAGE,
                        faulted,
                        out: 0.0,
                        huge: false,
                    }],
                }
            })
            .collect::<Vec<RegionMemory>>();
        let mut by_addr: Vec<usize> = (0..regions.len()).collect();
        by_addr.sort_by_key(|&i| regions[i].mapping.start);
        Memory {
            regions,
            by_addr,
            synced_us: 0,
            refaulted: 0.0,
        }
    }

    pub(crate) fn synced_us(&self) -> u64 {
        self.synced_us
    }

    /// Apply the touches of window `[synced_us, to_us)` of workload time, given as `accesses`.
    /// One call per window is exact however long the window: what matters is which pages it
    /// touched at all, since no action happens inside it.
    pub(crate) fn advance(&mut self, to_us: u64, accesses: &WindowAccesses) {
        for (i, region) in self.regions.iter_mut().enumerate() {
            let acc = accesses.region(i);
            if acc.is_idle() {
                continue;
            }
            let runs = acc.swept_runs();
            let pages = region.pages();
            let last_page = pages - 1;
            let p_full = acc.random_touch_probability(region.size, 0);
            let p_last = acc.random_touch_probability(region.size, last_page);
            let mut touched = Vec::with_capacity(region.segments.len() + 2 * runs.len());
            let mut k = 0;
            for seg in &region.segments {
                while k < runs.len() && runs[k].end <= seg.start {
                    k += 1;
                }
                let (mut x, mut j) = (seg.start, k);
                while x < seg.end {
                    let mut piece = *seg;
                    piece.start = x;
                    if j < runs.len() && runs[j].start <= x {
                        piece.end = runs[j].end.min(seg.end);
                        if piece.end == runs[j].end {
                            j += 1;
                        }
                        piece.touch(1.0, &mut self.refaulted);
                    } else {
                        piece.end = runs.get(j).map_or(seg.end, |r| r.start.min(seg.end));
                        let n = piece.pages();
                        let comb = acc.comb_pages_in(Pages::new(piece.start, piece.end));
                        let rest = (n - comb) as f64;
                        let expected = if piece.end > last_page && p_last != p_full {
                            comb as f64 + (rest - 1.0).max(0.0) * p_full + p_last
                        } else {
                            comb as f64 + rest * p_full
                        };
                        piece.touch((expected / n as f64).min(1.0), &mut self.refaulted);
                    }
                    x = piece.end;
                    touched.push(piece);
                }
            }
            region.segments = touched;
            region.coalesce();
        }
        self.synced_us = to_us;
    }

    /// What the target's memory looks like now, in whole bytes.
    pub(crate) fn target_memory(&self) -> TargetMemory {
        let (mut resident, mut out) = (0.0, 0.0);
        for s in self.regions.iter().flat_map(|r| &r.segments) {
            let (_, o, r) = s.bytes();
            out += o;
            resident += r;
        }
        TargetMemory {
            resident_bytes: resident.round() as u64,
            paged_out_bytes: out.round() as u64,
            refaulted_bytes: self.refaulted.round() as u64,
        }
    }

    /// The memory of the workload's regions within `range`.
    pub(crate) fn residency(&self, range: AddrRange) -> Residency {
        let mut total = Residency::default();
        for (i, pages) in self.overlaps(range) {
            for s in &self.regions[i].segments {
                let (a, b) = (s.start.max(pages.start), s.end.min(pages.end));
                if a >= b {
                    continue;
                }
                let part = Segment {
                    start: a,
                    end: b,
                    ..*s
                };
                let (_, out, resident) = part.bytes();
                total.paged_out_bytes += out;
                total.resident_bytes += resident;
                if s.huge {
                    total.huge_bytes += resident;
                }
            }
        }
        total
    }

    /// The regions `range` overlaps and the pages of each that it covers (a page counts when
    /// its start lies in the range, as `madvise` rounds a page-aligned request).
    pub(crate) fn overlaps(&self, range: AddrRange) -> Vec<(usize, Pages)> {
        let start = range.start.next_multiple_of(PAGE);
        let end = range.end.saturating_add(PAGE - 1) / PAGE * PAGE;
        let first = self
            .by_addr
            .partition_point(|&i| self.regions[i].mapping.end <= start);
        self.by_addr[first..]
            .iter()
            .map(|&i| (i, self.regions[i].mapping))
            .take_while(|(_, m)| m.start < end)
            .filter_map(|(i, m)| {
                let (a, b) = (start.max(m.start), end.min(m.end));
                (a < b).then(|| (i, Pages::new((a - m.start) / PAGE, (b - m.start) / PAGE)))
            })
            .collect()
    }

    /// The segments of region `i` within `pages`, split at its edges.
    pub(crate) fn segments(&self, i: usize, pages: Pages) -> impl Iterator<Item = Segment> {
        self.regions[i]
            .segments
            .iter()
            .filter(move |s| s.start < pages.end && pages.start < s.end)
            .map(move |s| Segment {
                start: s.start.max(pages.start),
                end: s.end.min(pages.end),
                ..*s
            })
    }

    /// Change every segment of region `i` within `pages` with `f`, which returns the bytes
    /// it changed; returns their sum.
    pub(crate) fn update(
        &mut self,
        i: usize,
        pages: Pages,
        mut f: impl FnMut(&mut Segment) -> f64,
    ) -> f64 {
        let region = &mut self.regions[i];
        let from = region.split_at(pages.start);
        let to = region.split_at(pages.end);
        let mut changed = 0.0;
        for s in &mut region.segments[from..to] {
            changed += f(s);
            s.snap();
        }
        region.coalesce();
        changed
    }

    /// The page range of the whole huge-page blocks that `pages` of region `i` overlaps.
    pub(crate) fn blocks_around(&self, i: usize, pages: Pages) -> Pages {
        self.regions[i].blocks_around(pages)
    }

    /// The whole huge-page blocks inside `pages` of region `i`.
    pub(crate) fn blocks_within(
        &self,
        i: usize,
        pages: Pages,
    ) -> impl Iterator<Item = Pages> + use<> {
        self.regions[i].blocks_within(pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(text: &str) -> Memory {
        Memory::new(&Workload::parse(text, "test").unwrap())
    }

    #[test]
    fn init_files_make_a_region_resident_from_the_start() {
        let m = memory("a, 1m\nb, 1m, /dev/zero\nc, 1m, none\n\np\n10\na, 0, 4k, 1\n");
        assert_eq!(m.target_memory().resident_bytes, 1 << 20);
    }

    #[test]
    fn updates_split_and_join_segments() {
        let mut m = memory("a, 4m\n\np\n10\na, 0, 4k, 1\n");
        let page_out = |s: &mut Segment| {
            s.faulted = 1.0;
            s.out = 1.0;
            0.0
        };
        m.update(0, Pages::new(10, 20), page_out);
        assert_eq!(m.regions[0].segments.len(), 3);
        m.update(0, Pages::new(20, 30), page_out);
        assert_eq!(m.regions[0].segments.len(), 3, "[10, 30) joined");
        let r = m.residency(AddrRange::new(
            m.regions[0].mapping.start,
            m.regions[0].mapping.end,
        ));
        assert_eq!(r.paged_out_bytes, (20 * PAGE) as f64);
        assert_eq!(r.resident_bytes, 0.0);
    }

    #[test]
    fn blocks_follow_the_address_space_alignment() {
        // 4 MiB + 8 KiB, mapped top-down below a 2 MiB-aligned address: the mapping starts
        // 8 KiB below a block boundary, so page 2 starts the first whole block.
        let m = memory("a, 4202496\n\np\n10\na, 0, 4k, 1\n");
        let r = &m.regions[0];
        assert_eq!(r.first_block(), 2);
        let blocks: Vec<Pages> = r.blocks_within(Pages::new(0, r.pages())).collect();
        assert_eq!(blocks, [Pages::new(2, 514), Pages::new(514, 1026)]);
        assert_eq!(r.blocks_within(Pages::new(3, 1026)).count(), 1);
        assert_eq!(r.blocks_around(Pages::new(3, 4)), Pages::new(2, 514));
        assert_eq!(r.blocks_around(Pages::new(0, 1)), Pages::new(0, 2));
        assert_eq!(
            r.blocks_around(Pages::new(600, 1026)),
            Pages::new(514, 1026)
        );
    }
}
