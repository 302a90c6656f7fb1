//! `/proc/PID/maps` parsing: a process's mappings as a sorted snapshot with a binary-search
//! address lookup, and the address ranges the core's three-regions construction starts from.
//!
//! A snapshot goes stale as soon as the process maps or unmaps memory; callers re-read it (perf
//! reports new mappings but never unmappings, so a periodic or miss-triggered re-read is needed).

use crate::executed::ExecutedName;
use crate::proc_status::ProcStatus;
use std::ffi::OsStr;
use std::io;
use std::ops::Deref;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use thiserror::Error;
use udamon_core::AddrRange;

#[derive(Debug, Error)]
pub enum MapsError {
    #[error("process {0} does not exist (it may have exited)")]
    NoSuchProcess(u32),
    #[error("no permission to read /proc/{pid}/maps: {advice}")]
    PermissionDenied { pid: u32, advice: String },
    #[error(
        "process {0} is a kernel thread: it has no user memory to monitor; give the pid of a user process"
    )]
    KernelThread(u32),
    // The OS error is part of the message and not also a `source()`, so that a printed chain
    // says it once.
    #[error("cannot read /proc/{pid}/maps: {cause}")]
    Io { pid: u32, cause: io::Error },
    #[error(
        "malformed maps line {line}: {text:?} (expected `start-end perms offset dev inode [path]`)"
    )]
    Malformed { line: usize, text: String },
}

/// Access permissions of a mapping (the `rwxp`/`rwxs` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Perms {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// `s`: shared mapping; `p`: private (copy-on-write).
    pub shared: bool,
}

impl std::fmt::Display for Perms {
    /// As maps prints them: `rw-p`, `r-xs`, ...
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flag = |on: bool, c: char| if on { c } else { '-' };
        write!(
            f,
            "{}{}{}{}",
            flag(self.read, 'r'),
            flag(self.write, 'w'),
            flag(self.exec, 'x'),
            if self.shared { 's' } else { 'p' }
        )
    }
}

/// What backs a mapping, from the last column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapPath {
    /// A file, exactly as the kernel prints it: a deleted file keeps its ` (deleted)` suffix and
    /// a newline in the name appears as `\012`.
    File(PathBuf),
    Heap,
    /// The main thread's stack (`[stack]`, or `[stack:TID]` on old kernels).
    Stack,
    Vdso,
    /// `[vvar]` and `[vvar_vclock]`: the vDSO's data pages.
    Vvar,
    Vsyscall,
    /// Anonymous memory without a name.
    Anon,
    /// Anything else: `[anon:NAME]` (prctl-named anonymous memory), `[uprobes]`,
    /// `anon_inode:...`, ...
    Other(String),
}

impl MapPath {
    fn parse(name: &[u8]) -> MapPath {
        match name {
            b"" => MapPath::Anon,
            b"[heap]" => MapPath::Heap,
            b"[stack]" => MapPath::Stack,
            b"[vdso]" => MapPath::Vdso,
            b"[vvar]" | b"[vvar_vclock]" => MapPath::Vvar,
            b"[vsyscall]" => MapPath::Vsyscall,
            _ if name.starts_with(b"[stack:") => MapPath::Stack,
            _ if name.starts_with(b"/") => MapPath::File(PathBuf::from(OsStr::from_bytes(name))),
            _ => MapPath::Other(String::from_utf8_lossy(name).into_owned()),
        }
    }
}

impl std::fmt::Display for MapPath {
    /// As the kernel names it, with `[anon]` for unnamed anonymous memory.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MapPath::File(p) => write!(f, "{}", p.display()),
            MapPath::Heap => f.write_str("[heap]"),
            MapPath::Stack => f.write_str("[stack]"),
            MapPath::Vdso => f.write_str("[vdso]"),
            MapPath::Vvar => f.write_str("[vvar]"),
            MapPath::Vsyscall => f.write_str("[vsyscall]"),
            MapPath::Anon => f.write_str("[anon]"),
            MapPath::Other(name) => f.write_str(name),
        }
    }
}

/// One line of `/proc/PID/maps`: the range `[start, end)` and what backs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: Perms,
    /// Offset into the file (or the page offset for anonymous memory).
    pub offset: u64,
    /// Device (major, minor) of the backing file; (0, 0) for anonymous memory.
    pub dev: (u32, u32),
    pub inode: u64,
    pub path: MapPath,
}

impl Mapping {
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    pub fn size(&self) -> u64 {
        self.end - self.start
    }
}

/// A process's mappings, sorted by address and non-overlapping (as the kernel prints them;
/// construction checks it), and the path its executable was executed by, when known. Dereferences
/// to `[Mapping]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Maps {
    mappings: Vec<Mapping>,
    executed: Option<ExecutedName>,
}

impl Deref for Maps {
    type Target = [Mapping];
    fn deref(&self) -> &[Mapping] {
        &self.mappings
    }
}

/// Reads and parses `/proc/PID/maps`. A zombie or a kernel thread gives an empty snapshot.
pub fn read_maps(pid: u32) -> Result<Maps, MapsError> {
    let text = std::fs::read(format!("/proc/{pid}/maps")).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => MapsError::NoSuchProcess(pid),
        Some(libc::EACCES | libc::EPERM) => MapsError::PermissionDenied {
            pid,
            advice: denial_advice(pid),
        },
        _ => MapsError::Io { pid, cause: e },
    })?;
    Maps::parse(&text)
}

/// What to do about a refused `/proc/PID/maps`. Reading it takes the kernel's ptrace access
/// check: an ordinary user passes it for their own processes only, so running as the owner or
/// root is the remedy; root itself fails it only for a process that holds capabilities root's
/// process lacks (as in a container with a reduced set) or that a security policy protects,
/// and no flag of udamon's changes that.
fn denial_advice(pid: u32) -> String {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return "run as the process's owner or as root".to_string();
    }
    let held = ProcStatus::read(pid).and_then(|s| s.capabilities("CapPrm"));
    let ours = ProcStatus::read_self().and_then(|s| s.capabilities("CapEff"));
    let lacking = match (held, ours) {
        (Some(held), Some(ours)) => capability_names(held & !ours),
        _ => Vec::new(),
    };
    let why = if lacking.is_empty() {
        "a security policy protects it".to_string()
    } else {
        format!(
            "it holds capabilities this process lacks ({})",
            lacking.join(", ")
        )
    };
    format!(
        "the kernel refuses even root access to process {pid}'s memory: {why}; it cannot be monitored from here"
    )
}

/// The names of the capabilities set in `mask` (capability(7) numbering).
fn capability_names(mask: u64) -> Vec<String> {
    const NAMES: [&str; 41] = [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ];
    (0..64)
        .filter(|bit| mask & (1 << bit) != 0)
        .map(|bit| match NAMES.get(bit) {
            Some(name) => format!("CAP_{name}"),
            None => format!("capability {bit}"),
        })
        .collect()
}

/// Whether `pid` is a kernel thread (`PF_KTHREAD` in `/proc/PID/stat`'s flags): its maps read
/// empty like a zombie's, but it never had user memory.
pub fn is_kernel_thread(pid: u32) -> bool {
    crate::proc_stat::ProcStat::read(pid).is_some_and(|s| s.is_kernel_thread())
}

impl Maps {
    /// Parses the text of a maps file. Lines must be in increasing, non-overlapping address
    /// order, as the kernel writes them.
    pub fn parse(text: &[u8]) -> Result<Maps, MapsError> {
        let mut mappings: Vec<Mapping> = Vec::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let malformed = || MapsError::Malformed {
                line: i + 1,
                text: String::from_utf8_lossy(line).into_owned(),
            };
            let m = parse_line(line).ok_or_else(malformed)?;
            if mappings.last().is_some_and(|prev| prev.end > m.start) {
                return Err(malformed());
            }
            mappings.push(m);
        }
        Ok(Maps {
            mappings,
            executed: None,
        })
    }

    /// These mappings, with their executable named by the path it was executed by.
    pub fn executed_as(self, executed: Option<ExecutedName>) -> Maps {
        Maps { executed, ..self }
    }

    pub fn executed(&self) -> Option<&ExecutedName> {
        self.executed.as_ref()
    }

    /// How reports name `m`: as maps do, except the executable, named by the path it was
    /// executed by when that is known ([`ExecutedName`]).
    pub fn shown_path<'a>(&'a self, m: &'a Mapping) -> &'a MapPath {
        match &self.executed {
            Some(e) => e.rename(&m.path),
            None => &m.path,
        }
    }

    /// The mappings with the names reports give them ([`Maps::shown_path`]).
    pub fn shown(&self) -> Vec<Mapping> {
        self.mappings
            .iter()
            .map(|m| Mapping {
                path: self.shown_path(m).clone(),
                ..m.clone()
            })
            .collect()
    }

    /// The mapping containing `addr`, by binary search.
    pub fn lookup(&self, addr: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.end <= addr);
        self.mappings.get(i).filter(|m| m.start <= addr)
    }

    pub fn into_vec(self) -> Vec<Mapping> {
        self.mappings
    }

    /// The ranges to feed `udamon_core::layout::three_regions`, in address order: every mapping
    /// except `[vsyscall]`. Kernel DAMON walks the process's VMAs, and `[vsyscall]` is not a VMA
    /// (it is the fixed gate page at the top of the address space); counting it would make the
    /// top gap the whole kernel-sized hole. `[vvar]` and `[vdso]` are real VMAs (next to the
    /// stack), so they count, as in the kernel.
    pub fn vma_ranges(&self) -> Vec<AddrRange> {
        self.mappings
            .iter()
            .filter(|m| m.path != MapPath::Vsyscall)
            .map(|m| AddrRange::new(m.start, m.end))
            .collect()
    }
}

/// `start-end perms offset dev inode [path]`; the path starts after the padding that follows the
/// inode and may itself contain spaces.
/// One line of maps (also the header line of each mapping in smaps).
pub(crate) fn parse_line(line: &[u8]) -> Option<Mapping> {
    let mut rest = line;
    let mut field = || -> Option<&[u8]> {
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r.strip_prefix(b" ").unwrap_or(r);
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?;
    let offset = field()?;
    let dev = field()?;
    let inode = field()?;
    let name = rest.trim_ascii_start();

    let dash = range.iter().position(|&b| b == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    let colon = dev.iter().position(|&b| b == b':')?;
    let perms = match perms {
        [r, w, x, s] => Perms {
            read: flag(*r, b'r')?,
            write: flag(*w, b'w')?,
            exec: flag(*x, b'x')?,
            shared: match s {
                b's' => true,
                b'p' => false,
                _ => return None,
            },
        },
        _ => return None,
    };
    (start < end).then_some(())?;
    Some(Mapping {
        start,
        end,
        perms,
        offset: hex(offset)?,
        dev: (hex(&dev[..colon])? as u32, hex(&dev[colon + 1..])? as u32),
        inode: std::str::from_utf8(inode).ok()?.parse().ok()?,
        path: MapPath::parse(name),
    })
}

fn flag(c: u8, set: u8) -> Option<bool> {
    match c {
        b'-' => Some(false),
        _ if c == set => Some(true),
        _ => None,
    }
}

fn hex(s: &[u8]) -> Option<u64> {
    u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55d0c2a00000-55d0c2a28000 r--p 00000000 fd:01 1835133                    /usr/bin/python3.11
55d0c2a28000-55d0c2d1a000 r-xp 00028000 fd:01 1835133                    /usr/bin/python3.11
55d0c3f1b000-55d0c3ff5000 rw-p 00000000 00:00 0                          [heap]
7f3a2c000000-7f3a2c021000 rw-p 00000000 00:00 0 
7f3a2d400000-7f3a2d600000 rw-s 00000000 00:01 2051                       /memfd:shm pool (deleted)
7f3a2d600000-7f3a2d601000 rw-p 00000000 00:00 0                          [anon:glibc: malloc arena]
7f3a2d700000-7f3a2d702000 r--p 00000000 103:02 99                        /tmp/a dir/file with  spaces
7ffd5a1e9000-7ffd5a20a000 rw-p 00000000 00:00 0                          [stack]
7ffd5a3c4000-7ffd5a3c8000 r--p 00000000 00:00 0                          [vvar]
7ffd5a3c8000-7ffd5a3ca000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    fn maps() -> Maps {
        Maps::parse(SAMPLE.as_bytes()).unwrap()
    }

    #[test]
    fn parses_every_field() {
        let m = maps();
        assert_eq!(m.len(), 11);
        assert_eq!(
            m[1],
            Mapping {
                start: 0x55d0c2a28000,
                end: 0x55d0c2d1a000,
                perms: Perms {
                    read: true,
                    write: false,
                    exec: true,
                    shared: false
                },
                offset: 0x28000,
                dev: (0xfd, 0x01),
                inode: 1835133,
                path: MapPath::File("/usr/bin/python3.11".into()),
            }
        );
        assert_eq!(m[6].dev, (0x103, 0x02));
        assert!(m[4].perms.shared && m[4].perms.write && !m[4].perms.exec);
        assert!(!m[10].perms.read && m[10].perms.exec);
    }

    #[test]
    fn classifies_paths() {
        let kinds: Vec<MapPath> = maps().iter().map(|m| m.path.clone()).collect();
        assert_eq!(kinds[2], MapPath::Heap);
        assert_eq!(kinds[3], MapPath::Anon);
        assert_eq!(kinds[4], MapPath::File("/memfd:shm pool (deleted)".into()));
        assert_eq!(
            kinds[5],
            MapPath::Other("[anon:glibc: malloc arena]".into())
        );
        assert_eq!(
            kinds[6],
            MapPath::File("/tmp/a dir/file with  spaces".into())
        );
        assert_eq!(
            kinds[7..],
            [
                MapPath::Stack,
                MapPath::Vvar,
                MapPath::Vdso,
                MapPath::Vsyscall
            ]
        );
        assert_eq!(MapPath::parse(b"[stack:1234]"), MapPath::Stack);
        assert_eq!(MapPath::parse(b"[vvar_vclock]"), MapPath::Vvar);
    }

    #[test]
    fn lookup_finds_containing_mapping_only() {
        let m = maps();
        assert_eq!(m.lookup(0x55d0c2a28000).unwrap().offset, 0x28000);
        assert_eq!(m.lookup(0x55d0c2a27fff).unwrap().offset, 0);
        assert_eq!(m.lookup(0x55d0c3f1c123).unwrap().path, MapPath::Heap);
        assert!(
            m.lookup(0x55d0c2d1a000).is_none(),
            "end is exclusive, next mapping is far"
        );
        assert!(m.lookup(0).is_none());
        assert!(
            m.lookup(0x7ffd5a3c9fff)
                .is_some_and(|x| x.path == MapPath::Vdso)
        );
        assert!(m.lookup(u64::MAX).is_none());
    }

    #[test]
    fn vma_ranges_exclude_vsyscall_only() {
        let r = maps().vma_ranges();
        assert_eq!(r.len(), 10);
        assert_eq!(r[0], AddrRange::new(0x55d0c2a00000, 0x55d0c2a28000));
        assert_eq!(
            *r.last().unwrap(),
            AddrRange::new(0x7ffd5a3c8000, 0x7ffd5a3ca000)
        );
        // The two largest gaps are binary-to-mmap and (here) mmap-to-stack, not the vsyscall hole.
        let three = udamon_core::layout::three_regions(&r, 4096).unwrap();
        assert_eq!(three[0], AddrRange::new(0x55d0c2a00000, 0x55d0c3ff5000));
        assert_eq!(three[2].end, 0x7ffd5a3ca000);
    }

    #[test]
    fn rejects_malformed_lines() {
        for bad in [
            "55d0c2a00000 r--p 00000000 fd:01 1 /x",
            "55d0c2a00000-55d0c2a28000 r--q 00000000 fd:01 1 /x",
            "55d0c2a00000-55d0c2a28000 r--p 00000000 fd01 1 /x",
            "55d0c2a00000-55d0c2a28000 r--p 00000000 fd:01 x1 /x",
            "55d0c2a28000-55d0c2a00000 r--p 00000000 fd:01 1 /x",
            "55d0c2a00000-55d0c2a28000 rwx",
        ] {
            let e = Maps::parse(format!("10-20 r--p 0 00:00 0\n{bad}\n").as_bytes()).unwrap_err();
            assert!(
                matches!(e, MapsError::Malformed { line: 2, .. }),
                "{bad}: {e}"
            );
        }
        let overlap = "1000-3000 r--p 0 00:00 0\n2000-4000 r--p 0 00:00 0\n";
        assert!(Maps::parse(overlap.as_bytes()).is_err());
    }

    #[test]
    fn empty_text_is_empty_snapshot() {
        assert!(Maps::parse(b"").unwrap().is_empty());
    }

    #[test]
    fn capabilities_are_named() {
        assert_eq!(
            capability_names((1 << 19) | (1 << 24) | (1 << 50)),
            ["CAP_SYS_PTRACE", "CAP_SYS_RESOURCE", "capability 50"]
        );
        assert!(capability_names(0).is_empty());
    }

    #[test]
    fn kernel_threads_are_told_from_user_processes() {
        assert!(!is_kernel_thread(std::process::id()));
        assert!(!is_kernel_thread(u32::MAX), "no such process");
        // kthreadd's children are the kernel threads, when this pid namespace shows them.
        let kthread = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.split_whitespace().nth(1) == Some("2"))
                })
            });
        match kthread {
            Some(pid) => assert!(is_kernel_thread(pid), "pid {pid}, a child of kthreadd"),
            None => eprintln!("skipped the kernel-thread half: no kernel thread is visible here"),
        }
    }
}
