//! Which processes a long-running monitor takes in, and who may ask it to.
//!
//! A [`Discovery`] holds selectors (a pid, a cgroup v2, a regular expression on command names)
//! and, at every [`Discovery::scan`], says which processes came and which went since the scan
//! before: a process that exited, left its cgroup, or whose pid now names another process
//! (processes are told apart by pid and start time). It remembers only the processes it
//! currently takes, and the command names of the host's processes, so its state follows what
//! runs, not how long it ran.
//!
//! A scan costs what changed, not what runs: a process already taken is not read again (when
//! it ends, its monitoring ends, and [`Discovery::ended`] forgets it, so that a pid reused is
//! read anew), and command names are read once per process ([`Comms`]), except at every
//! [`FULL_SCAN_EVERY`]-th scan, which reads them all again: a process that executed another
//! program under the same pid is seen then.
//!
//! [`may_monitor`] is the rule of the service's control socket: a caller may make udamon watch
//! or act on a process only if it could ptrace that process itself.

use crate::maps::MapsError;
use crate::proc_stat::{self, ProcStat};
use crate::proc_status::{CAP_SYS_PTRACE, ProcStatus};
use regex::Regex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What to take in.
#[derive(Debug, Clone)]
pub enum Selector {
    /// This process, until it exits.
    Pid(u32),
    /// Every process of this cgroup v2 and its descendants; given as a path under the cgroup2
    /// mount (`/sys/fs/cgroup/system.slice/x.service`) or relative to it
    /// (`/system.slice/x.service`).
    Cgroup(PathBuf),
    /// Every process whose command name (`comm`) matches.
    Match(Regex),
}

/// A process taken in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub pid: u32,
    /// Clock ticks after boot when it started: with the pid, it names the process.
    pub start_time: u64,
    pub comm: String,
    /// Its cgroup v2 path (`/system.slice/x.service`), empty when unknown.
    pub cgroup: String,
}

/// What changed since the last scan.
#[derive(Debug, Default)]
pub struct Changes {
    pub added: Vec<Found>,
    pub removed: Vec<Found>,
    /// Selectors that stopped finding anything to read (a cgroup removed), once each time it
    /// happens: for the log.
    pub warnings: Vec<String>,
}

#[derive(Debug, Error)]
pub enum DiscoverError {
    #[error(transparent)]
    Process(#[from] MapsError),
    #[error(
        "cgroup {0} does not exist: give a cgroup v2 path such as /sys/fs/cgroup/system.slice/NAME.service"
    )]
    NoCgroup(PathBuf),
    #[error("no cgroup v2 file system is mounted: --cgroup needs one")]
    NoCgroup2,
}

/// A selector with what the discovery knows of it.
#[derive(Debug)]
enum Watch {
    /// The process and its start time; dropped by the scan that finds it gone (a pid is
    /// never taken again).
    Pid(u32, u64),
    /// The cgroup's directory, and whether it was missing at the last scan.
    Cgroup {
        dir: PathBuf,
        missing: bool,
    },
    Match(Regex),
}

/// Every this many scans, everything is read again (30 s at the default 2 s rescan).
pub const FULL_SCAN_EVERY: u32 = 15;

pub struct Discovery {
    watches: Vec<Watch>,
    cgroup_root: Option<PathBuf>,
    /// The processes taken in, by pid.
    known: BTreeMap<u32, Found>,
    /// The host's command names, when a selector matches them.
    comms: Comms,
    scans: u32,
}

/// The command name of every process of the host, read once per process (and again at full
/// scans): a host of a thousand processes is not read a thousand times per scan. A process is
/// read at the first two scans that see it, since a new process usually executes its program
/// just after it appears, under the name of the one that forked it.
#[derive(Debug, Default)]
struct Comms {
    by_pid: HashMap<u32, String>,
    /// The processes first seen by the last scan.
    young: HashSet<u32>,
}

impl Comms {
    /// Brings the command names up to date: every process's if `again`, else those of
    /// processes new or young.
    fn refresh(&mut self, again: bool) {
        if again {
            self.by_pid.clear();
        }
        let live: HashSet<u32> = proc_stat::pids().collect();
        self.by_pid.retain(|pid, _| live.contains(pid));
        let mut young = HashSet::new();
        for pid in live {
            let new = !self.by_pid.contains_key(&pid);
            if (new || self.young.contains(&pid))
                && let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            {
                self.by_pid
                    .insert(pid, comm.trim_end_matches('\n').to_string());
            }
            if new {
                young.insert(pid);
            }
        }
        self.young = young;
    }
}

impl Discovery {
    /// Checks every selector: a pid that does not exist or is a kernel thread, and a cgroup
    /// that does not exist, are errors.
    pub fn new(selectors: Vec<Selector>) -> Result<Self, DiscoverError> {
        let mut d = Discovery {
            watches: Vec::new(),
            cgroup_root: cgroup2_mount(),
            known: BTreeMap::new(),
            comms: Comms::default(),
            scans: 0,
        };
        for s in selectors {
            d.watch(s)?;
        }
        Ok(d)
    }

    fn watch(&mut self, selector: Selector) -> Result<(), DiscoverError> {
        let watch = match selector {
            Selector::Pid(pid) => {
                let stat = ProcStat::read(pid).ok_or(MapsError::NoSuchProcess(pid))?;
                if stat.is_kernel_thread() {
                    return Err(MapsError::KernelThread(pid).into());
                }
                Watch::Pid(pid, stat.start_time)
            }
            Selector::Cgroup(path) => {
                let root = self
                    .cgroup_root
                    .as_deref()
                    .ok_or(DiscoverError::NoCgroup2)?;
                let dir = cgroup_dir(root, &path);
                if !dir.join("cgroup.procs").exists() {
                    return Err(DiscoverError::NoCgroup(path));
                }
                Watch::Cgroup {
                    dir,
                    missing: false,
                }
            }
            Selector::Match(re) => Watch::Match(re),
        };
        self.watches.push(watch);
        Ok(())
    }

    /// Adds a selector of one process and takes it in at once (it is not in the next scan's
    /// `added`); returns it.
    pub fn add_pid(&mut self, pid: u32) -> Result<Found, DiscoverError> {
        self.watch(Selector::Pid(pid))?;
        let found = self.take(pid).ok_or(MapsError::NoSuchProcess(pid))?;
        self.known.insert(pid, found.clone());
        Ok(found)
    }

    /// How many selectors can still take processes in: a pid's goes with its process.
    pub fn selectors(&self) -> usize {
        self.watches.len()
    }

    /// A served process's monitoring ended: if it is gone, or its pid names another process
    /// now, it is forgotten, so that the next scan takes in whatever the pid names then.
    pub fn ended(&mut self, pid: u32, start_time: u64) {
        let same =
            ProcStat::read(pid).is_some_and(|s| s.start_time == start_time && !s.is_zombie());
        if !same
            && self
                .known
                .get(&pid)
                .is_some_and(|f| f.start_time == start_time)
        {
            self.known.remove(&pid);
            self.comms.by_pid.remove(&pid);
        }
    }

    /// The processes that came and went since the last scan.
    pub fn scan(&mut self) -> Changes {
        let mut changes = Changes::default();
        let mut now: BTreeMap<u32, Found> = BTreeMap::new();
        let full = self.scans % FULL_SCAN_EVERY == 0;
        self.scans = self.scans.wrapping_add(1);
        let mut comms = std::mem::take(&mut self.comms);
        if self.watches.iter().any(|w| matches!(w, Watch::Match(_))) {
            comms.refresh(full);
        }
        // A pid selector whose process is gone selects nothing ever again: dropped, so that a
        // service told of short-lived pids for weeks keeps none of them.
        let mut spent = vec![false; self.watches.len()];
        for (i, spent) in spent.iter_mut().enumerate() {
            let candidates: Vec<u32> = match &mut self.watches[i] {
                Watch::Pid(pid, start) => {
                    if ProcStat::read(*pid).is_some_and(|s| s.start_time == *start) {
                        vec![*pid]
                    } else {
                        *spent = true;
                        Vec::new()
                    }
                }
                Watch::Cgroup { dir, missing } => match cgroup_pids(dir) {
                    Some(pids) => {
                        *missing = false;
                        pids
                    }
                    None => {
                        if !*missing {
                            changes.warnings.push(format!(
                                "cgroup {} is gone; its processes are no longer served until it comes back",
                                dir.display()
                            ));
                        }
                        *missing = true;
                        Vec::new()
                    }
                },
                Watch::Match(re) => comms
                    .by_pid
                    .iter()
                    .filter(|(_, comm)| re.is_match(comm))
                    .map(|(pid, _)| *pid)
                    .collect(),
            };
            for pid in candidates {
                if now.contains_key(&pid) {
                    continue;
                }
                // A process taken before is not read again: if it ends, its monitoring ends
                // and [`Discovery::ended`] forgets it.
                let found = match self.known.get(&pid) {
                    Some(known) => Some(known.clone()),
                    None => self.take(pid),
                };
                if let Some(found) = found {
                    now.insert(pid, found);
                }
            }
        }
        for (pid, found) in &now {
            match self.known.get(pid) {
                Some(old) if old.start_time == found.start_time => {}
                Some(old) => {
                    changes.removed.push(old.clone());
                    changes.added.push(found.clone());
                }
                None => changes.added.push(found.clone()),
            }
        }
        for (pid, old) in &self.known {
            if !now.contains_key(pid) {
                changes.removed.push(old.clone());
            }
        }
        // What is known keeps the start time it was first seen with.
        for found in &changes.added {
            self.known.insert(found.pid, found.clone());
        }
        for gone in &changes.removed {
            if !now.contains_key(&gone.pid) {
                self.known.remove(&gone.pid);
            }
        }
        let mut spent = spent.into_iter();
        self.watches.retain(|_| !spent.next().unwrap_or(false));
        self.comms = comms;
        changes
    }

    /// Process `pid` as taken in, unless it is not a monitoring target at all: gone, a zombie,
    /// a kernel thread, or udamon itself.
    fn take(&self, pid: u32) -> Option<Found> {
        if pid == std::process::id() {
            return None;
        }
        let stat = ProcStat::read(pid)?;
        if stat.is_kernel_thread() || stat.is_zombie() {
            return None;
        }
        Some(Found {
            pid,
            start_time: stat.start_time,
            comm: stat.comm,
            cgroup: process_cgroup(pid).unwrap_or_default(),
        })
    }
}

/// Where the cgroup2 file system is mounted (usually `/sys/fs/cgroup`).
fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(mount))
    })
}

/// A cgroup's directory, for a path given under the mount or relative to it.
fn cgroup_dir(root: &Path, given: &Path) -> PathBuf {
    if given.starts_with(root) {
        given.to_path_buf()
    } else {
        root.join(given.strip_prefix("/").unwrap_or(given))
    }
}

/// Every process of a cgroup and its descendants; `None` when the cgroup is gone.
fn cgroup_pids(dir: &Path) -> Option<Vec<u32>> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
    let mut pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            // A child cgroup removed meanwhile holds nothing any more.
            pids.extend(cgroup_pids(&entry.path()).unwrap_or_default());
        }
    }
    Some(pids)
}

/// A process's cgroup v2 path (the `0::PATH` line of `/proc/PID/cgroup`).
pub fn process_cgroup(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// Who asks: a process's credentials as the kernel checks them for ptrace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Its effective capabilities (`CapEff`, a bit per capability).
    pub cap_effective: u64,
    /// Its permitted capabilities (`CapPrm`).
    pub cap_permitted: u64,
}

impl Credentials {
    /// CAP_SYS_PTRACE in its effective set: any process may be monitored for it.
    pub fn cap_sys_ptrace(&self) -> bool {
        self.cap_effective & (1 << CAP_SYS_PTRACE) != 0
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "process {pid}: permission denied: the caller (uid {uid}) could not ptrace it, so udamon will not monitor it for the caller"
)]
pub struct Denied {
    pub pid: u32,
    pub uid: u32,
}

/// The credentials of the process at the other end of a connected Unix socket (SO_PEERCRED,
/// which the kernel fills in at connect time: the peer cannot forge it).
pub fn peer_credentials(sock: &std::os::unix::net::UnixStream) -> std::io::Result<Credentials> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket, and a buffer of the size SO_PEERCRED fills.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // A caller whose status cannot be read (gone already) counts as having no capability.
    let status = ProcStatus::read(cred.pid as u32).unwrap_or_default();
    Ok(Credentials {
        pid: cred.pid as u32,
        uid: cred.uid,
        gid: cred.gid,
        cap_effective: status.capabilities("CapEff").unwrap_or(0),
        cap_permitted: status.capabilities("CapPrm").unwrap_or(0),
    })
}

/// Whether `caller` may have udamon monitor process `pid` (and act on it): the rule of ptrace
/// access (PTRACE_MODE_READ_REALCREDS) as far as user space can check it. CAP_SYS_PTRACE
/// allows every process; otherwise the caller's uid must equal the target's real, effective
/// and saved uids, its gid the target's gids, the target must be dumpable (a non-dumpable
/// process's `/proc/PID/*` files belong to root), and it must hold no permitted capability the
/// caller does not. What this cannot check: Yama's ptrace_scope and LSMs, which can only
/// refuse more; the service then fails to read the process, and says so.
pub fn may_monitor(caller: &Credentials, pid: u32) -> Result<(), Denied> {
    let denied = Denied {
        pid,
        uid: caller.uid,
    };
    if caller.cap_sys_ptrace() {
        return Ok(());
    }
    let Some(status) = ProcStatus::read(pid) else {
        return Err(denied);
    };
    let same = |all: &[u32], id: u32| all.len() >= 3 && all[..3].iter().all(|&x| x == id);
    // The files of a non-dumpable process's /proc directory belong to root (the directory
    // itself keeps the process's euid).
    let dumpable =
        std::fs::metadata(format!("/proc/{pid}/stat")).is_ok_and(|m| m.uid() == caller.uid);
    // A process holding capabilities its caller does not (file capabilities, ambient ones)
    // is the kernel's to refuse (cap_ptrace_access_check), whoever owns it.
    let no_more_capable = status
        .capabilities("CapPrm")
        .is_some_and(|c| c & !caller.cap_permitted == 0);
    if same(&status.ids("Uid"), caller.uid)
        && same(&status.ids("Gid"), caller.gid)
        && dumpable
        && no_more_capable
    {
        Ok(())
    } else {
        Err(denied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_paths_are_taken_under_the_mount_or_relative_to_it() {
        let root = Path::new("/sys/fs/cgroup");
        assert_eq!(
            cgroup_dir(root, Path::new("/sys/fs/cgroup/a.slice")),
            root.join("a.slice")
        );
        assert_eq!(
            cgroup_dir(root, Path::new("/a.slice/b")),
            root.join("a.slice/b")
        );
        assert_eq!(cgroup_dir(root, Path::new("a.slice")), root.join("a.slice"));
    }
}
