//! Where the workload's regions live in the simulated 64-bit address space, laid out the way a
//! masim process on x86-64 Linux has them, and the initial monitoring regions built from it.
//!
//! masim allocates its regions with `malloc`. glibc serves requests below its mmap threshold
//! (128 KiB) from the brk heap and maps bigger ones with their own anonymous `mmap`, which the
//! kernel places top-down below the libraries, each adjacent to the previous one. So:
//!
//! ```text
//! 0x5555_5555_4000  program image (64 KiB)                        } process mappings
//! 0x5555_5600_0000  heap: regions < 128 KiB, in config order, packed
//!                   ... the heap-to-mmap gap (tens of TiB) ...
//!     (lower)       mmap area: regions >= 128 KiB, top-down in config order: the first region
//! 0x7f00_0000_0000  ends here, the next one ends where it starts, and so on
//! 0x7f00_0000_0000  shared libraries (2 MiB)                      } process mappings
//!                   ... the mmap-to-stack gap (about 1 TiB) ...
//! 0x7ffd_fffd_f000  stack (132 KiB), up to 0x7ffe_0000_0000       } process mappings
//! ```
//!
//! Every region starts on a page boundary and its mapping is its size rounded up to whole pages
//! (malloc would put a 16-byte header first; we leave it out so that a region owns its pages).
//! The three process mappings are optional ([`crate::SimOptions::process_mappings`]); they are
//! never accessed in the model. With them, the two big gaps make upstream's three-regions
//! construction ([`udamon_core::layout::three_regions`]) produce exactly what vaddr builds for a
//! live process. Without them there are at most two groups of adjacent mappings (heap, mmap
//! area), fewer than two gaps, and each group becomes one initial region instead.
//!
//! The mmap area may grow down to 1 GiB above the heap, which leaves about 41 TiB for the
//! regions of 128 KiB or more; a workload that needs more is rejected when it is parsed.

#[cfg(test)]
use udamon_core::layout::initial_ranges;
use udamon_core::region::align_up;
use udamon_core::{AddrRange, PAGE_SIZE};

/// glibc's default `M_MMAP_THRESHOLD`: smaller allocations come from the heap.
pub const MMAP_THRESHOLD: u64 = 128 << 10;
/// The program's text and data (a PIE executable's usual place).
pub const IMAGE: AddrRange = AddrRange::new(0x5555_5555_4000, 0x5555_5556_4000);
/// Where the brk heap starts (a randomised offset after the image in a real process).
pub const HEAP_BASE: u64 = 0x5555_5600_0000;
/// The top of the area that holds the mmap'd regions: they are placed below the libraries.
pub const MMAP_TOP: u64 = 0x7f00_0000_0000;
/// The shared libraries, mapped first, at the top of the mmap area.
pub const LIBS: AddrRange = AddrRange::new(MMAP_TOP, MMAP_TOP + (2 << 20));
/// A fresh process's stack.
pub const STACK: AddrRange = AddrRange::new(0x7ffd_fffd_f000, 0x7ffe_0000_0000);
/// The least distance between the heap's end and the mmap area's bottom.
const MIN_HEAP_MMAP_GAP: u64 = 1 << 30;

/// The mapping of each region (same order as `sizes`), or the index of the first region that
/// does not fit.
pub fn place(sizes: &[u64]) -> Result<Vec<AddrRange>, usize> {
    let mut ranges = vec![AddrRange::new(0, 0); sizes.len()];
    let mut heap = HEAP_BASE;
    for (i, &size) in sizes.iter().enumerate() {
        if size < MMAP_THRESHOLD {
            let len = align_up(size, PAGE_SIZE);
            // Only millions of small regions could get here.
            if heap + len + MIN_HEAP_MMAP_GAP > MMAP_TOP {
                return Err(i);
            }
            ranges[i] = AddrRange::new(heap, heap + len);
            heap += len;
        }
    }
    let floor = heap + MIN_HEAP_MMAP_GAP;
    let mut top = MMAP_TOP;
    for (i, &size) in sizes.iter().enumerate() {
        if size >= MMAP_THRESHOLD {
            let start = size
                .checked_next_multiple_of(PAGE_SIZE)
                .and_then(|len| top.checked_sub(len))
                .filter(|&start| start >= floor)
                .ok_or(i)?;
            ranges[i] = AddrRange::new(start, top);
            top = start;
        }
    }
    Ok(ranges)
}

/// Bytes the mmap area can hold for a workload with these region sizes.
pub fn mmap_capacity(sizes: &[u64]) -> u64 {
    let heap = sizes
        .iter()
        .filter(|&&s| s < MMAP_THRESHOLD)
        .fold(0u64, |sum, &s| sum.saturating_add(align_up(s, PAGE_SIZE)));
    MMAP_TOP.saturating_sub(
        HEAP_BASE
            .saturating_add(heap)
            .saturating_add(MIN_HEAP_MMAP_GAP),
    )
}

/// Every mapping of the simulated process, sorted by address: the workload's regions, plus the
/// image, libraries and stack when `process` is set.
pub fn mappings(regions: impl IntoIterator<Item = AddrRange>, process: bool) -> Vec<AddrRange> {
    let mut all: Vec<AddrRange> = regions.into_iter().collect();
    if process {
        all.extend([IMAGE, LIBS, STACK]);
    }
    all.sort();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_regions_go_to_the_heap_big_ones_top_down() {
        let sizes = [100 << 20, 256, 10_000_000, 4097, 128 << 10];
        let r = place(&sizes).unwrap();
        assert_eq!(r[0], AddrRange::new(MMAP_TOP - (100 << 20), MMAP_TOP));
        assert_eq!(r[1], AddrRange::new(HEAP_BASE, HEAP_BASE + 4096));
        // 10,000,000 bytes round up to 2442 pages, right below the first region.
        assert_eq!(r[2], AddrRange::new(r[0].start - 2442 * 4096, r[0].start));
        assert_eq!(r[3], AddrRange::new(HEAP_BASE + 4096, HEAP_BASE + 3 * 4096));
        assert_eq!(r[4], AddrRange::new(r[2].start - (128 << 10), r[2].start));
        assert!(
            r.iter()
                .all(|m| m.start % PAGE_SIZE == 0 && m.end % PAGE_SIZE == 0)
        );
    }

    #[test]
    fn terabytes_fit_and_too_much_is_refused() {
        let cap = mmap_capacity(&[4 << 40]);
        assert!(cap > 40 << 40, "{cap}");
        assert!(place(&[4 << 40, 30 << 40]).is_ok());
        assert_eq!(place(&[4 << 40, 30 << 40, 8 << 40]), Err(2));
        assert_eq!(place(&[1, u64::MAX]), Err(1));
        let exact = place(&[cap]).unwrap();
        assert_eq!(exact[0].start, HEAP_BASE + MIN_HEAP_MMAP_GAP);
        assert_eq!(place(&[cap + 1]), Err(0));
    }

    #[test]
    fn process_mappings_give_vaddrs_three_regions() {
        let regions = place(&[10 << 20, 10 << 20, 4096]).unwrap();
        let all = mappings(regions.iter().copied(), true);
        let init = initial_ranges(&all, PAGE_SIZE);
        assert_eq!(
            init,
            [
                AddrRange::new(IMAGE.start, HEAP_BASE + 4096),
                AddrRange::new(MMAP_TOP - (20 << 20), LIBS.end),
                STACK,
            ]
        );
        // A 2 MiB minimum region size aligns the stack region away.
        assert_eq!(initial_ranges(&all, 2 << 20).len(), 2);
    }

    #[test]
    fn without_process_mappings_each_group_is_a_region() {
        let regions = place(&[10 << 20, 10 << 20, 4096, 4096]).unwrap();
        let init = initial_ranges(&mappings(regions.iter().copied(), false), PAGE_SIZE);
        assert_eq!(
            init,
            [
                AddrRange::new(HEAP_BASE, HEAP_BASE + 8192),
                AddrRange::new(MMAP_TOP - (20 << 20), MMAP_TOP)
            ]
        );
        let one = place(&[1 << 30]).unwrap();
        assert_eq!(
            initial_ranges(&mappings(one.clone(), false), PAGE_SIZE),
            one
        );
    }
}
