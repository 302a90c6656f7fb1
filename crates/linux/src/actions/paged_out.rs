//! The memory this run's pageouts took out of a process, range by range, and how much of it came
//! back: the target memory that records report as paged out and refaulted.
//!
//! A page a pageout took out is refaulted once it is present again: the process touched it (or
//! the kernel read it ahead for a neighbour that was touched). [`PagedOut::refresh`] scans the
//! ranges still out with `PAGEMAP_SCAN`, which reports runs of pages in equal state, so memory
//! that stays out costs a few entries however large it is.

use super::pagescan::{PAGE_IS_PRESENT, PageMap, PageRun};
use std::io;
use udamon_core::AddrRange;

/// Ranges that pageouts took out of memory and that have not come back, and the bytes that did.
#[derive(Debug, Default)]
pub struct PagedOut {
    /// Sorted, disjoint, not adjacent.
    ranges: Vec<AddrRange>,
    refaulted: u64,
}

impl PagedOut {
    /// Adds ranges that a pageout took out of memory.
    pub fn add(&mut self, ranges: &[AddrRange]) {
        self.ranges.extend_from_slice(ranges);
        self.coalesce();
    }

    /// Sorts the ranges and joins those that overlap or touch.
    fn coalesce(&mut self) {
        self.ranges.sort_unstable();
        let mut coalesced: Vec<AddrRange> = Vec::with_capacity(self.ranges.len());
        for &range in &self.ranges {
            match coalesced.last_mut() {
                Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                _ => coalesced.push(range),
            }
        }
        self.ranges = coalesced;
    }

    /// Bytes out of memory now (as of the last [`refresh`](Self::refresh)).
    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(AddrRange::size).sum()
    }

    /// Bytes that came back into memory since monitoring started.
    pub fn refaulted(&self) -> u64 {
        self.refaulted
    }

    /// Looks at every range still out: pages present again count as refaulted and leave the
    /// set; pages no longer mapped leave it without counting.
    pub fn refresh(&mut self, pagemap: &PageMap) -> io::Result<()> {
        let mut runs: Vec<PageRun> = Vec::new();
        for range in &self.ranges {
            pagemap.scan(range.start, range.end, &mut runs)?;
        }
        self.ranges.clear();
        for r in runs {
            if r.is(PAGE_IS_PRESENT) {
                self.refaulted += r.size();
            } else {
                self.ranges.push(r.range());
            }
        }
        self.coalesce();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::pagescan::map_anonymous;
    use super::*;

    const PAGE: u64 = 4096;

    #[test]
    fn added_ranges_are_merged() {
        let mut p = PagedOut::default();
        let pages = |start: u64, end: u64| AddrRange::new(start * PAGE, end * PAGE);
        p.add(&[pages(8, 10), pages(0, 2)]);
        p.add(&[pages(2, 3), pages(9, 12)]);
        assert_eq!(p.ranges, [pages(0, 3), pages(8, 12)]);
        assert_eq!(p.bytes(), 7 * PAGE);
    }

    #[test]
    fn pages_present_again_are_refaulted_and_unmapped_ones_forgotten() {
        let len = 32 * PAGE as usize;
        let addr = map_anonymous(len);
        let base = addr as u64;
        let page = |i: u64| (base + i * PAGE) as *mut u8;
        // The first 16 pages were "paged out": dropped from the page tables.
        // SAFETY: inside the mapping.
        assert_eq!(
            unsafe { libc::madvise(addr, 16 * PAGE as usize, libc::MADV_DONTNEED) },
            0
        );
        let pagemap = PageMap::open(std::process::id()).unwrap();
        let mut p = PagedOut::default();
        p.add(&[AddrRange::new(base, base + 16 * PAGE)]);
        p.refresh(&pagemap).unwrap();
        assert_eq!((p.bytes(), p.refaulted()), (16 * PAGE, 0));
        for i in [0, 1, 7, 15] {
            // SAFETY: inside the mapping.
            unsafe { page(i).write_volatile(1) };
        }
        p.refresh(&pagemap).unwrap();
        assert_eq!((p.bytes(), p.refaulted()), (12 * PAGE, 4 * PAGE));
        // SAFETY: pages 8..12 of the mapping made above.
        assert_eq!(
            unsafe { libc::munmap(page(8).cast(), 4 * PAGE as usize) },
            0
        );
        p.refresh(&pagemap).unwrap();
        assert_eq!((p.bytes(), p.refaulted()), (8 * PAGE, 4 * PAGE));
        // SAFETY: the rest of the mapping made above.
        unsafe {
            libc::munmap(addr, 8 * PAGE as usize);
            libc::munmap(page(12).cast(), len - 12 * PAGE as usize);
        }
    }
}
