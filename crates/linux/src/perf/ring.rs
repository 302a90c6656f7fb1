//! A perf ring buffer: one metadata page followed by 2^n data pages, shared with the kernel.
//! The kernel advances `data_head` as it writes; we read up to it, then publish `data_tail` so
//! the kernel may reuse the space.

use perf_event_open_sys::bindings as b;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

const HEADER: usize = 8;

pub(crate) struct Ring {
    base: NonNull<u8>,
    map_len: usize,
    data_offset: usize,
    /// A power of two.
    data_size: usize,
    /// Holds a record that wraps around the end of the data area.
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone; the kernel is the only other party and
// synchronises through data_head/data_tail, not through the thread that holds the Ring.
unsafe impl Send for Ring {}

/// What one drain found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drained {
    pub records: u64,
    /// A record header was impossible (size < 8 or past data_head): the rest was skipped.
    pub corrupt: bool,
}

impl Ring {
    /// Maps `data_pages` (a power of two) data pages plus the metadata page of perf event `fd`.
    pub(crate) fn map(fd: BorrowedFd<'_>, data_pages: usize) -> io::Result<Ring> {
        let page = page_size();
        let map_len = page * (data_pages + 1);
        // SAFETY: a fresh shared mapping of a perf event fd; the kernel validates the size.
        // Nothing else refers to the returned range until it is wrapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `p` is a live mapping of `map_len` bytes whose first page is the kernel's
        // perf_event_mmap_page, now owned by the Ring.
        Ok(unsafe {
            Ring::from_mapping(
                NonNull::new(p.cast()).expect("mmap never returns NULL"),
                map_len,
            )
        })
    }

    /// # Safety
    /// `base` must be a mapping of `map_len` bytes, owned by the new Ring (it unmaps it), whose
    /// first page is a `perf_event_mmap_page` describing the data area inside the mapping.
    unsafe fn from_mapping(base: NonNull<u8>, map_len: usize) -> Ring {
        let meta = base.as_ptr().cast::<b::perf_event_mmap_page>();
        // SAFETY: by the contract the metadata page is mapped and the kernel has filled in
        // data_offset and data_size (Linux ≥ 4.1) before mmap returned.
        let (off, size) = unsafe { ((*meta).data_offset as usize, (*meta).data_size as usize) };
        let page = page_size();
        // Kernels before 4.1 leave both at 0: the data area is then everything after page 0.
        let (data_offset, data_size) = if size == 0 {
            (page, map_len - page)
        } else {
            (off, size)
        };
        assert!(data_size.is_power_of_two() && data_offset + data_size <= map_len);
        Ring {
            base,
            map_len,
            data_offset,
            data_size,
            scratch: Vec::new(),
        }
    }

    fn meta(&self) -> *mut b::perf_event_mmap_page {
        self.base.as_ptr().cast()
    }

    /// Calls `f` with every complete record (header included) the kernel has published, oldest
    /// first, then hands the space back to the kernel.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(&[u8])) -> Drained {
        // SAFETY: data_head and data_tail are naturally aligned u64s in the mapped metadata
        // page, which lives as long as self; the kernel accesses them atomically too.
        let (head_ref, tail_ref) = unsafe {
            let m = self.meta();
            (
                AtomicU64::from_ptr(&raw mut (*m).data_head),
                AtomicU64::from_ptr(&raw mut (*m).data_tail),
            )
        };
        // Acquire pairs with the kernel's store of data_head: records before head are complete.
        let head = head_ref.load(Ordering::Acquire);
        let mut tail = tail_ref.load(Ordering::Relaxed);
        let mut out = Drained::default();
        let mask = self.data_size as u64 - 1;
        // SAFETY: the data area is mapped for data_size bytes at data_offset.
        let data = unsafe { self.base.as_ptr().add(self.data_offset) };
        while tail < head {
            let off = (tail & mask) as usize;
            let mut h = [0u8; HEADER];
            self.copy_out(data, off, &mut h);
            let size = u16::from_ne_bytes([h[6], h[7]]) as usize;
            if size < HEADER || tail + size as u64 > head {
                out.corrupt = true;
                tail = head;
                break;
            }
            if off + size <= self.data_size {
                // SAFETY: [off, off + size) lies inside the data area and between tail and
                // head, which the kernel does not write until we advance data_tail.
                f(unsafe { std::slice::from_raw_parts(data.add(off), size) });
            } else {
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.resize(size, 0);
                self.copy_out(data, off, &mut scratch);
                f(&scratch);
                self.scratch = scratch;
            }
            out.records += 1;
            tail += size as u64;
        }
        // Release: our reads of the records happen before the kernel may overwrite them.
        tail_ref.store(tail, Ordering::Release);
        out
    }

    /// Copies `dst.len()` bytes starting at data offset `off`, wrapping at the end of the area.
    fn copy_out(&self, data: *const u8, off: usize, dst: &mut [u8]) {
        let first = dst.len().min(self.data_size - off);
        // SAFETY: both pieces lie inside the data area (off < data_size, and the wrapped part
        // starts at 0 with dst.len() - first <= data_size bytes); the bytes are published.
        unsafe {
            std::ptr::copy_nonoverlapping(data.add(off), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, dst.as_mut_ptr().add(first), dst.len() - first);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping was created for this Ring and nothing borrows it any more.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.map_len) };
    }
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::tests::{layout, sample_bytes};
    use crate::perf::record::{PerfRecord, parse};

    /// A Ring over anonymous memory laid out like a perf mapping, with records written at a
    /// chosen starting offset so that they wrap around the end of the data area.
    fn fake_ring(data_pages: usize, start: u64, records: &[Vec<u8>]) -> Ring {
        let page = page_size();
        let len = page * (data_pages + 1);
        // Handed to the Ring, which unmaps it.
        let p = crate::actions::pagescan::map_anonymous(len);
        let base = NonNull::new(p.cast::<u8>()).unwrap();
        let size = (page * data_pages) as u64;
        let mut pos = start;
        // SAFETY: all writes stay inside the mapping (offsets are reduced modulo the data size).
        unsafe {
            let m = base.as_ptr().cast::<b::perf_event_mmap_page>();
            (*m).data_offset = page as u64;
            (*m).data_size = size;
            (*m).data_tail = start;
            for r in records {
                for &byte in r {
                    *base.as_ptr().add(page + (pos % size) as usize) = byte;
                    pos += 1;
                }
            }
            (*m).data_head = pos;
            Ring::from_mapping(base, len)
        }
    }

    fn tail(r: &Ring) -> u64 {
        // SAFETY: the metadata page is mapped; no concurrent writer in this test.
        unsafe { (*r.meta()).data_tail }
    }

    #[test]
    fn drains_records_across_the_wrap() {
        let recs: Vec<Vec<u8>> = (0..40)
            .map(|i| sample_bytes(1, 2, 1000 + i, 0x400000 + i))
            .collect();
        let bytes: u64 = recs.iter().map(|r| r.len() as u64).sum();
        // Start 100 bytes before the end of a one-page area, many laps in: the first record
        // straddles the boundary, and so do later ones.
        let size = page_size() as u64;
        let start = 7 * size - 104;
        let mut ring = fake_ring(1, start, &recs[..20]);
        let mut times = Vec::new();
        let d = ring.drain(|rec| match parse(rec, layout(), 0) {
            Some(PerfRecord::Sample(s)) => times.push(s.time_ns),
            other => panic!("{other:?}"),
        });
        assert_eq!(
            d,
            Drained {
                records: 20,
                corrupt: false
            }
        );
        assert_eq!(times, (1000..1020).collect::<Vec<_>>());
        assert_eq!(tail(&ring), start + bytes / 2);
        // Nothing new: a second drain is empty and leaves the tail alone.
        assert_eq!(ring.drain(|_| panic!("no records")).records, 0);
        assert_eq!(tail(&ring), start + bytes / 2);
    }

    #[test]
    fn impossible_header_skips_to_head() {
        let mut bad = sample_bytes(1, 2, 3, 4);
        bad[6] = 4; // size 4 < header size
        bad[7] = 0;
        let mut ring = fake_ring(1, 0, &[sample_bytes(1, 2, 3, 4), bad]);
        let mut n = 0;
        let d = ring.drain(|_| n += 1);
        assert_eq!((n, d.records, d.corrupt), (1, 1, true));
        // SAFETY: see `tail`.
        assert_eq!(tail(&ring), unsafe { (*ring.meta()).data_head });
    }
}
