//! Which parts of a process's accessed regions hold no memory: the ranges without a present
//! page, from `PAGEMAP_SCAN` (see [`crate::actions::pagescan`]), for
//! [`Context::cut_absent`](udamon_core::Context::cut_absent).
//!
//! Only accessed regions are walked, within a time budget per window ([`WALK_BUDGET`]).

use crate::actions::pagescan::{PAGE_IS_PRESENT, PageMap, PageRun};
use std::io;
use std::time::{Duration, Instant};
use udamon_core::{AddrRange, Region};

/// The page-table walk a process's residency check may take per window (0.25 % of a core at
/// 400 ms windows). Walking costs about 11 µs per MiB resident here, so walking every accessed
/// region every window would cost 2-3 % of a core per GiB of working set. Within the budget,
/// each window continues where the last stopped, so every part is walked every few windows
/// (a GiB in about ten) while the cost stays bounded whatever the memory size.
pub(super) const WALK_BUDGET: Duration = Duration::from_millis(1);

/// The largest piece walked at once, so that the budget is checked often enough.
const WALK_CHUNK: u64 = 16 << 20;

/// A process's pagemap, opened once (it names the address space, not the pid).
#[derive(Debug)]
pub(super) struct Residency {
    pagemap: Option<PageMap>,
    runs: Vec<PageRun>,
    /// Where the next window's walk starts: the end of the last part walked.
    cursor: u64,
    /// The absent ranges found by the walks so far, each as of its part's last walk, sorted.
    /// A window uses all of them: memory seldom fills in, and where it did, the pages a sample
    /// fell in are not cut; the rest is reported not accessed until its next walk.
    known: Vec<AddrRange>,
    /// Every address range walked at least once, sorted and joined. Parts outside it are walked
    /// at once, whatever it costs, so that no window reports memory whose residency is unknown;
    /// each address costs that once (about 11 ms per GiB resident), far less than the page
    /// faults that populated it cost the process. Parts walked before share the budget.
    walked: Vec<AddrRange>,
}

impl Residency {
    /// Reads `pagemap`; a process whose pagemap cannot be read (gone, or not ours) has no
    /// residency to tell.
    pub(super) fn of(pagemap: Option<PageMap>) -> Residency {
        Residency {
            pagemap,
            runs: Vec::new(),
            cursor: 0,
            known: Vec::new(),
            walked: Vec::new(),
        }
    }

    /// Ranges without a present page, in address order, as far as known: the parts of the
    /// accessed `regions` never walked are walked, then the others within `budget` from where
    /// the last call stopped, and what earlier calls found elsewhere is kept.
    pub(super) fn absent(
        &mut self,
        regions: &[Region],
        budget: Duration,
    ) -> io::Result<Vec<AddrRange>> {
        let Some(pagemap) = &self.pagemap else {
            return Ok(Vec::new());
        };
        let mut parts: Vec<(u64, u64)> = Vec::new();
        for r in regions.iter().filter(|r| r.nr_accesses > 0) {
            let mut at = r.start;
            while at < r.end {
                let to = r.end.min(at + WALK_CHUNK);
                parts.push((at, to));
                at = to;
            }
        }
        // Parts never walked first, then the others from the cursor on and around from the
        // lowest address.
        let (fresh, mut seen): (Vec<_>, Vec<_>) = parts
            .into_iter()
            .partition(|&(start, end)| !covers(&self.walked, start, end));
        let first = seen.partition_point(|p| p.1 <= self.cursor);
        seen.rotate_left(first);
        let started = Instant::now();
        for (i, &(start, end)) in fresh.iter().chain(&seen).enumerate() {
            if i >= fresh.len() && started.elapsed() >= budget {
                break;
            }
            self.runs.clear();
            pagemap.scan(start, end, &mut self.runs)?;
            // What was known of this part gives way to what the walk found.
            let mut known: Vec<AddrRange> = Vec::with_capacity(self.known.len() + 1);
            for k in &self.known {
                push_joined(&mut known, k.start, k.end.min(start));
                push_joined(&mut known, k.start.max(end), k.end);
            }
            // Unmapped parts are not in the runs: they hold nothing either.
            let mut at = start;
            for run in self.runs.iter().filter(|run| run.is(PAGE_IS_PRESENT)) {
                push_joined(&mut known, at, run.start.max(at));
                at = at.max(run.end);
            }
            push_joined(&mut known, at, end);
            known.sort_unstable();
            self.known = joined(known);
            if i >= fresh.len() {
                self.cursor = end;
            }
        }
        if !fresh.is_empty() {
            let mut walked = std::mem::take(&mut self.walked);
            walked.extend(fresh.iter().map(|&(s, e)| AddrRange::new(s, e)));
            walked.sort_unstable();
            self.walked = joined(walked);
        }
        Ok(self.known.clone())
    }
}

/// Whether `[start, end)` lies within one of the sorted, joined `ranges`.
fn covers(ranges: &[AddrRange], start: u64, end: u64) -> bool {
    let i = ranges.partition_point(|r| r.end <= start);
    ranges
        .get(i)
        .is_some_and(|r| r.start <= start && end <= r.end)
}

/// Sorted ranges with the touching ones joined.
fn joined(sorted: Vec<AddrRange>) -> Vec<AddrRange> {
    let mut out: Vec<AddrRange> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Appends `[start, end)` to `ranges`, joined to the last one where they touch.
fn push_joined(ranges: &mut Vec<AddrRange>, start: u64, end: u64) {
    if start >= end {
        return;
    }
    match ranges.last_mut() {
        Some(last) if last.end == start => last.end = end,
        _ => ranges.push(AddrRange::new(start, end)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::pagescan::map_anonymous;

    #[test]
    fn untouched_pages_of_an_accessed_region_are_absent() {
        const PAGE: usize = 4096;
        let len = 64 * PAGE;
        let addr = map_anonymous(len);
        let base = addr as u64;
        // Touch pages 8..16 and 40..41.
        for page in (8..16).chain(40..41) {
            // SAFETY: inside the mapping just made, which nothing else uses.
            unsafe { *(addr as *mut u8).add(page * PAGE) = 1 };
        }
        let region = |start: usize, end: usize, nr_accesses| Region {
            nr_accesses,
            ..Region::new(base + (start * PAGE) as u64, base + (end * PAGE) as u64)
        };
        let mut residency = Residency::of(PageMap::open(std::process::id()).ok());
        let pages = |a: &AddrRange| ((a.start - base) / 4096, (a.end - base) / 4096);
        // Memory never walked is walked, even without a budget.
        let absent = residency
            .absent(&[region(0, 32, 1), region(32, 64, 0)], Duration::ZERO)
            .unwrap();
        assert_eq!(
            absent.iter().map(pages).collect::<Vec<_>>(),
            [(0, 8), (16, 32)],
            "the second region is not accessed: not scanned"
        );
        let absent = residency.absent(&[region(32, 64, 2)], WALK_BUDGET).unwrap();
        assert_eq!(
            absent.iter().map(pages).collect::<Vec<_>>(),
            [(0, 8), (16, 40), (41, 64)],
            "what the first walk found is kept"
        );
        // Pages 20..22 fill in: the next walk finds them present.
        for page in 20..22 {
            // SAFETY: as above.
            unsafe { *(addr as *mut u8).add(page * PAGE) = 1 };
        }
        let absent = residency.absent(&[region(16, 64, 2)], WALK_BUDGET).unwrap();
        assert_eq!(
            absent.iter().map(pages).collect::<Vec<_>>(),
            [(0, 8), (16, 20), (22, 40), (41, 64)]
        );
        // No budget: nothing is walked; what is known stays.
        let before = absent.clone();
        let absent = residency
            .absent(&[region(0, 64, 1)], Duration::ZERO)
            .unwrap();
        assert_eq!(absent, before);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(addr, len) };
    }
}
