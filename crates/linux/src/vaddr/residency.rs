//! Which parts of a process's accessed regions hold no memory: the ranges without a present
//! page, from `PAGEMAP_SCAN` (see [`crate::actions::pagescan`]), for
//! [`Context::cut_absent`](udamon_core::Context::cut_absent).
//!
//! Only accessed regions are scanned, once per window: their page tables are what the walk
//! costs (runs of equal state come back as one entry each, so resident memory in large runs is
//! cheap), and the region count bounds the calls.

use crate::actions::pagescan::{PAGE_IS_PRESENT, PageMap, PageRun};
use std::io;
use udamon_core::{AddrRange, Region};

/// A process's pagemap, opened once (it names the address space, not the pid).
#[derive(Debug)]
pub(super) struct Residency {
    pagemap: Option<PageMap>,
    runs: Vec<PageRun>,
}

impl Residency {
    /// Opens `pid`'s pagemap; a process whose pagemap cannot be read (gone, or not ours) has
    /// no residency to tell.
    pub(super) fn open(pid: u32) -> Residency {
        Residency {
            pagemap: PageMap::open(pid).ok(),
            runs: Vec::new(),
        }
    }

    /// The ranges of the accessed `regions` without a present page, in address order.
    pub(super) fn absent(&mut self, regions: &[Region]) -> io::Result<Vec<AddrRange>> {
        let Some(pagemap) = &self.pagemap else {
            return Ok(Vec::new());
        };
        let mut absent: Vec<AddrRange> = Vec::new();
        let mut add = |start: u64, end: u64| {
            if start >= end {
                return;
            }
            match absent.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => absent.push(AddrRange::new(start, end)),
            }
        };
        for r in regions.iter().filter(|r| r.nr_accesses > 0) {
            self.runs.clear();
            pagemap.scan(r.start, r.end, &mut self.runs)?;
            // Unmapped parts are not in the runs: they hold nothing either.
            let mut at = r.start;
            for run in self.runs.iter().filter(|run| run.is(PAGE_IS_PRESENT)) {
                add(at, run.start.max(at));
                at = at.max(run.end);
            }
            add(at, r.end);
        }
        Ok(absent)
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
        let mut residency = Residency::open(std::process::id());
        let pages = |a: &AddrRange| ((a.start - base) / 4096, (a.end - base) / 4096);
        let absent = residency
            .absent(&[region(0, 32, 1), region(32, 64, 0)])
            .unwrap();
        assert_eq!(
            absent.iter().map(pages).collect::<Vec<_>>(),
            [(0, 8), (16, 32)],
            "the second region is not accessed: not scanned"
        );
        let absent = residency.absent(&[region(32, 64, 2)]).unwrap();
        assert_eq!(
            absent.iter().map(pages).collect::<Vec<_>>(),
            [(32, 40), (41, 64)]
        );
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(addr, len) };
    }
}
