//! `/proc/PID/status`: the ids and capability sets udamon reads, parsed in one place. Unlike
//! the files a non-dumpable process's `/proc` directory hands to root, `status` is readable by
//! anyone, and its `Uid:` line is the process's own.

/// Capability numbers (`linux/capability.h`) that udamon checks.
pub const CAP_SYS_PTRACE: u32 = 19;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;

/// A process's `status`, read once.
#[derive(Debug, Default, Clone)]
pub struct ProcStatus(String);

impl ProcStatus {
    /// Process `pid`'s; `None` once it is gone.
    pub fn read(pid: u32) -> Option<ProcStatus> {
        Self::read_path(&format!("/proc/{pid}/status"))
    }

    /// This process's.
    pub fn read_self() -> Option<ProcStatus> {
        Self::read_path("/proc/self/status")
    }

    /// Process `pid`'s: `Ok(None)` once it is gone, an error when it could not be read.
    pub fn try_read(pid: u32) -> std::io::Result<Option<ProcStatus>> {
        match crate::proc_stat::read_small(&format!("/proc/{pid}/status")) {
            Ok(text) => Ok(Some(ProcStatus(text))),
            Err(e) if crate::proc_stat::gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn read_path(path: &str) -> Option<ProcStatus> {
        crate::proc_stat::read_small(path).ok().map(ProcStatus)
    }

    fn field(&self, key: &str) -> Option<&str> {
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
    }

    /// The real, effective, saved and file-system ids of `Uid` or `Gid` (empty when missing).
    pub fn ids(&self, key: &str) -> Vec<u32> {
        self.field(key)
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The real uid.
    pub fn uid(&self) -> Option<u32> {
        self.ids("Uid").first().copied()
    }

    /// A capability set (`CapEff`, `CapPrm`, ...), a bit per capability.
    pub fn capabilities(&self, key: &str) -> Option<u64> {
        u64::from_str_radix(self.field(key)?.trim(), 16).ok()
    }

    /// Whether any of `caps` is in the effective set.
    pub fn effective_any(&self, caps: &[u32]) -> bool {
        let wanted = caps.iter().fold(0u64, |m, &c| m | 1 << c);
        self.capabilities("CapEff").is_some_and(|e| e & wanted != 0)
    }
}

/// Whether this process may sample the kernel and other users' processes freely: CAP_PERFMON
/// or CAP_SYS_ADMIN in its effective set (root normally has both).
pub fn perf_privileged() -> bool {
    ProcStatus::read_self().is_some_and(|s| s.effective_any(&[CAP_PERFMON, CAP_SYS_ADMIN]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "Name:\tsleep\nUid:\t1000\t1001\t1002\t1003\nGid:\t50\t50\t50\t50\n\
                        CapPrm:\t0000000000002000\nCapEff:\t0000004000000000\n";

    #[test]
    fn ids_and_capabilities_are_read_by_their_keys() {
        let s = ProcStatus(TEXT.to_string());
        assert_eq!(s.ids("Uid"), [1000, 1001, 1002, 1003]);
        assert_eq!(s.uid(), Some(1000));
        assert_eq!(s.ids("Gid"), [50; 4]);
        assert_eq!(s.capabilities("CapPrm"), Some(1 << 13));
        assert!(s.effective_any(&[CAP_PERFMON, CAP_SYS_ADMIN]));
        assert!(!s.effective_any(&[CAP_SYS_PTRACE]));
        assert_eq!(s.capabilities("CapAmb"), None);
        assert!(s.ids("Groups").is_empty());
    }

    #[test]
    fn this_process_has_a_status() {
        let s = ProcStatus::read_self().unwrap();
        // SAFETY: getuid cannot fail.
        assert_eq!(s.uid(), Some(unsafe { libc::getuid() }));
        assert!(s.capabilities("CapEff").is_some());
        assert!(ProcStatus::read(u32::MAX).is_none());
    }
}
