//! The state of another process's pages, range by range, from the `PAGEMAP_SCAN` ioctl on
//! `/proc/PID/pagemap` (Linux 6.7+): present, file-backed (or shared), swapped, PMD-mapped huge.
//!
//! One ioctl returns runs of pages with equal state, so a gigabyte of uniform memory costs a
//! few entries instead of the 2 MiB of 8-byte entries a `read` of pagemap would. The file
//! descriptor is opened once per process: it holds the process's address space, so it keeps
//! naming that process even if its pid is reused.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use udamon_core::AddrRange;

/// Page categories (`PAGE_IS_*` of `linux/fs.h`).
pub const PAGE_IS_FILE: u64 = 1 << 2;
pub const PAGE_IS_PRESENT: u64 = 1 << 3;
pub const PAGE_IS_SWAPPED: u64 = 1 << 4;
/// PMD-mapped THP or hugetlb.
pub const PAGE_IS_HUGE: u64 = 1 << 6;

const RETURN_MASK: u64 = PAGE_IS_FILE | PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_HUGE;

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageRun {
    pub start: u64,
    pub end: u64,
    /// `PAGE_IS_*` bits of every page in `[start, end)`.
    pub categories: u64,
}

impl PageRun {
    pub fn size(&self) -> u64 {
        self.end - self.start
    }

    pub fn range(&self) -> AddrRange {
        AddrRange::new(self.start, self.end)
    }

    pub fn is(&self, category: u64) -> bool {
        self.categories & category != 0
    }
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: libc::c_ulong = (3 << 30)
    | ((std::mem::size_of::<PmScanArg>() as libc::c_ulong) << 16)
    | ((b'f' as libc::c_ulong) << 8)
    | 16;

/// A process's pagemap, open for scans. Clones share the one descriptor: a monitored process
/// costs one pagemap however many readers it has (residency, footprints, actions).
#[derive(Debug, Clone)]
pub struct PageMap(std::sync::Arc<File>);

impl PageMap {
    pub fn open(pid: u32) -> io::Result<PageMap> {
        File::open(format!("/proc/{pid}/pagemap")).map(|f| PageMap(std::sync::Arc::new(f)))
    }

    /// Another handle of an opening's result, the error told again.
    pub fn share(opened: &io::Result<PageMap>) -> io::Result<PageMap> {
        match opened {
            Ok(pm) => Ok(pm.clone()),
            Err(e) => Err(e.raw_os_error().map_or_else(
                || io::Error::new(e.kind(), e.to_string()),
                io::Error::from_raw_os_error,
            )),
        }
    }

    /// The physical frame number of the page at `addr`: `None` when it is not in memory (never
    /// touched, or swapped out), or when frames are hidden from us (without CAP_SYS_ADMIN the
    /// kernel reports every frame as 0).
    pub fn frame(&self, addr: u64) -> io::Result<Option<u64>> {
        use std::os::unix::fs::FileExt;
        let mut entry = [0u8; 8];
        self.0.read_exact_at(&mut entry, addr / 4096 * 8)?;
        let entry = u64::from_ne_bytes(entry);
        // Bit 63: present; bits 0-54: the frame.
        let pfn = entry & ((1 << 55) - 1);
        Ok((entry >> 63 == 1 && pfn != 0).then_some(pfn))
    }

    /// Appends to `out` the runs of `[start, end)` (page aligned) in address order. Pages with
    /// no page table entry are in runs with no category; the parts of the range that are not
    /// mapped at all are left out.
    pub fn scan(&self, start: u64, end: u64, out: &mut Vec<PageRun>) -> io::Result<()> {
        let mut buf = [PageRun::default(); 256];
        let mut from = start;
        while from < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                start: from,
                end,
                vec: buf.as_mut_ptr() as u64,
                vec_len: buf.len() as u64,
                return_mask: RETURN_MASK,
                ..PmScanArg::default()
            };
            // SAFETY: `arg` and the `buf` it points to are valid for the call.
            let n = unsafe { libc::ioctl(self.0.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            out.extend_from_slice(&buf[..n as usize]);
            if arg.walk_end <= from {
                break;
            }
            from = arg.walk_end;
        }
        Ok(())
    }
}

/// The ranges whose state satisfies `before` in `a` and `after` in `b` (both sorted runs, as
/// [`PageMap::scan`] gives them), in address order, adjacent ones joined. Addresses missing
/// from a list have no category.
pub fn changed_ranges(
    a: &[PageRun],
    b: &[PageRun],
    before: impl Fn(u64) -> bool,
    after: impl Fn(u64) -> bool,
) -> Vec<AddrRange> {
    // Walk the union of both lists' boundaries.
    let mut cuts: Vec<u64> = a.iter().chain(b).flat_map(|r| [r.start, r.end]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let cat = |runs: &[PageRun], addr: u64| {
        let i = runs.partition_point(|r| r.end <= addr);
        runs.get(i)
            .filter(|r| r.start <= addr)
            .map_or(0, |r| r.categories)
    };
    let mut ranges: Vec<AddrRange> = Vec::new();
    for w in cuts.windows(2) {
        if !(before(cat(a, w[0])) && after(cat(b, w[0]))) {
            continue;
        }
        match ranges.last_mut() {
            Some(last) if last.end == w[0] => last.end = w[1],
            _ => ranges.push(AddrRange::new(w[0], w[1])),
        }
    }
    ranges
}

/// A fresh private anonymous mapping of `len` bytes in this process, for tests (of scans, of a
/// perf ring's reading); whoever takes it unmaps it.
#[cfg(test)]
pub(crate) fn map_anonymous(len: usize) -> *mut libc::c_void {
    // SAFETY: asks the kernel for new memory; nothing existing is touched.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED, "mmap of {len} bytes failed");
    addr
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed_bytes(
        a: &[PageRun],
        b: &[PageRun],
        before: impl Fn(u64) -> bool,
        after: impl Fn(u64) -> bool,
    ) -> u64 {
        let ranges = changed_ranges(a, b, before, after);
        ranges.iter().map(AddrRange::size).sum()
    }

    fn run(start: u64, end: u64, categories: u64) -> PageRun {
        PageRun {
            start,
            end,
            categories,
        }
    }

    #[test]
    fn ioctl_number_matches_the_uapi_header() {
        // 96-byte argument, read-write, type 'f', number 16.
        assert_eq!(std::mem::size_of::<PmScanArg>(), 96);
        assert_eq!(PAGEMAP_SCAN, 0xc060_6610);
    }

    #[test]
    fn changes_are_counted_on_the_union_of_boundaries() {
        let p = PAGE_IS_PRESENT;
        let before = [run(0, 8192, p), run(8192, 16384, 0)];
        let after = [run(0, 4096, p), run(4096, 12288, 0), run(12288, 16384, p)];
        let went_out = changed_bytes(&before, &after, |c| c & p != 0, |c| c & p == 0);
        assert_eq!(went_out, 4096);
        let came_in = changed_bytes(&before, &after, |c| c & p == 0, |c| c & p != 0);
        assert_eq!(came_in, 4096);
        let out_after = changed_ranges(&before, &after, |_| true, |c| c & p == 0);
        assert_eq!(
            out_after,
            [AddrRange::new(4096, 12288)],
            "adjacent pieces are joined"
        );
        // A range missing from the second list has no category: not present.
        assert_eq!(
            changed_bytes(&before, &[], |c| c & p != 0, |c| c & p == 0),
            8192
        );
    }

    #[test]
    fn scans_its_own_pages() {
        let len = 64 * 4096;
        let addr = map_anonymous(len);
        // Touch the first 16 pages only.
        for i in 0..16 {
            // SAFETY: inside the mapping.
            unsafe { *(addr as *mut u8).add(i * 4096) = 1 };
        }
        let pm = PageMap::open(std::process::id()).unwrap();
        let mut runs = Vec::new();
        let start = addr as u64;
        pm.scan(start, start + len as u64, &mut runs).unwrap();
        let present: u64 = runs
            .iter()
            .filter(|r| r.is(PAGE_IS_PRESENT))
            .map(PageRun::size)
            .sum();
        assert_eq!(present, 16 * 4096, "{runs:?}");
        assert!(runs.iter().all(|r| !r.is(PAGE_IS_FILE)));
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(addr, len) };
    }
}
