//! `/proc/PID/stat`: the few fields udamon reads (state, parent, flags, start time), parsed in
//! one place. The command name in parentheses may hold spaces and parentheses; the fields after
//! the last `)` do not.

/// What udamon reads of a process's `stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// The command name (`comm`), at most 15 bytes.
    pub comm: String,
    /// `R`, `S`, `D`, `Z` (zombie), ...
    pub state: char,
    pub ppid: u32,
    /// The kernel's `PF_*` flags.
    pub flags: u64,
    /// Clock ticks after boot when the process started: with the pid, it names a process
    /// across pid reuse.
    pub start_time: u64,
}

const PF_EXITING: u64 = 0x0000_0004;
const PF_KTHREAD: u64 = 0x0020_0000;

impl ProcStat {
    /// Parses the text of a `stat` file.
    pub fn parse(text: &str) -> Option<ProcStat> {
        let (head, rest) = text.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_string();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(ProcStat {
            comm,
            state: fields.first()?.chars().next()?,
            ppid: fields.get(1)?.parse().ok()?,
            flags: fields.get(6)?.parse().ok()?,
            start_time: fields.get(19)?.parse().ok()?,
        })
    }

    /// Reads process `pid`'s; `None` when it is gone (or could not be read).
    pub fn read(pid: u32) -> Option<ProcStat> {
        ProcStat::try_read(pid).ok().flatten()
    }

    /// Reads process `pid`'s: `Ok(None)` when it is gone, an error when `/proc` could not be
    /// read (out of file descriptors, say), so that a caller can tell a process that left from
    /// one it failed to see.
    pub fn try_read(pid: u32) -> std::io::Result<Option<ProcStat>> {
        match read_small(&format!("/proc/{pid}/stat")) {
            Ok(text) => Ok(ProcStat::parse(&text)),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    pub fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }

    /// Whether it is exiting or has exited: between its exit starting (when its perf events
    /// report it gone) and its reaping.
    pub fn is_exiting(&self) -> bool {
        self.is_zombie() || self.flags & PF_EXITING != 0
    }
}

/// A small text file of `/proc` (a process's `stat`, `status`, `comm`, `cgroup`) read whole,
/// in as few calls as it takes: a page at once, then the read that finds the end. `/proc`
/// makes a file's whole text at its first read and says its size is 0, so the size query and
/// the short probing read of [`std::fs::read_to_string`] are calls for nothing, and a host
/// of a thousand processes is read a thousand times per full scan (`discover`).
pub fn read_small(path: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(2 * len, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Whether reading a file of `/proc/PID` failed because the process is gone (the directory
/// went, or the process is exiting), rather than for a reason of the reader's own.
pub fn gone(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

/// The pids of `/proc`, in no particular order.
pub fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
}

/// The pids of `/proc`, or the error that kept the directory from being read.
pub fn try_pids() -> std::io::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        if let Some(pid) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_read_whole_as_std_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        // Longer than the first read's page, so that the buffer grows.
        let long: String = (0..3000).map(|i| format!("{i} ")).collect();
        for text in ["", "one line\n", long.as_str()] {
            let path = dir.path().join("f");
            std::fs::write(&path, text).unwrap();
            assert_eq!(read_small(path.to_str().unwrap()).unwrap(), text);
        }
        let me = std::process::id();
        let path = format!("/proc/{me}/status");
        let (ours, std) = (
            read_small(&path).unwrap(),
            std::fs::read_to_string(&path).unwrap(),
        );
        let name = |t: &str| t.lines().next().map(str::to_string);
        assert_eq!(name(&ours), name(&std), "{ours}");
        assert!(ours.ends_with('\n') && ours.contains("\nUid:"), "{ours}");
        let err = read_small("/proc/self/no-such-file").unwrap_err();
        assert!(gone(&err), "{err}");
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_parses() {
        let text = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 10";
        let s = ProcStat::parse(text).unwrap();
        assert_eq!(s.comm, "a) b (c");
        assert_eq!(
            (s.state, s.ppid, s.flags, s.start_time),
            ('S', 1, 4194560, 12345)
        );
        assert!(!s.is_kernel_thread() && !s.is_zombie() && !s.is_exiting());
        let exiting = text.replace("4194560", "4194564");
        assert!(
            ProcStat::parse(&exiting).unwrap().is_exiting(),
            "PF_EXITING"
        );
        assert_eq!(ProcStat::parse("42 (x) S 1"), None, "cut short");
    }

    #[test]
    fn this_process_reads_and_its_start_time_is_stable() {
        let me = std::process::id();
        let a = ProcStat::read(me).unwrap();
        assert_eq!(a.start_time, ProcStat::read(me).unwrap().start_time);
        assert!(pids().any(|p| p == me));
        assert_eq!(ProcStat::read(u32::MAX), None);
    }
}
