//! Reading another process's memory (the code bytes around a sampled IP) with
//! process_vm_readv. This needs PTRACE_MODE_ATTACH rights on the target: the same user without
//! Yama restrictions, or root.

/// The memory of process `pid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessMemory {
    pub pid: u32,
}

impl ProcessMemory {
    pub fn new(pid: u32) -> Self {
        ProcessMemory { pid }
    }

    /// Fills `buf` with the target's bytes at `addr`. False unless every byte was read (the
    /// range is unmapped or unreadable, the process is gone, or we may not read it).
    pub fn read_code(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` describes `buf`, which we borrow mutably for the call; the remote
        // iovec is only an address in the other process, checked by the kernel.
        let n =
            unsafe { libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        n == buf.len() as isize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_exactly() {
        let data: Vec<u8> = (0..=255).collect();
        let mut mem = ProcessMemory::new(std::process::id());
        let mut buf = [0u8; 64];
        assert!(mem.read_code(data.as_ptr() as u64 + 10, &mut buf));
        assert_eq!(buf[..], data[10..74]);
        assert!(mem.read_code(0, &mut []));
    }

    #[test]
    fn unmapped_or_partial_ranges_fail() {
        let mut mem = ProcessMemory::new(std::process::id());
        let mut buf = [0u8; 16];
        assert!(!mem.read_code(8, &mut buf), "page 0 is never mapped");
        // A range that runs off the end of a mapping into a guard page.
        let page = crate::perf::ring::page_size();
        // SAFETY: a fresh anonymous two-page mapping whose second page we make inaccessible.
        let p = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(
                libc::mprotect(p.cast::<u8>().add(page).cast(), page, libc::PROT_NONE),
                0
            );
            p as u64
        };
        assert!(mem.read_code(p + page as u64 - 16, &mut buf));
        assert!(!mem.read_code(p + page as u64 - 8, &mut buf));
        // SAFETY: unmapping the mapping created above.
        unsafe { libc::munmap(p as *mut libc::c_void, 2 * page) };
    }
}
