//! Which processes a long-running monitor takes in, and who may ask it to.
//!
//! A [`Discovery`] holds selectors (a pid, a cgroup v2, a regular expression on command names),
//! each with the credentials of whoever asked for it, and, at every [`Discovery::scan`], says
//! which processes came and which went since the scan before, and why each went: it exited,
//! its pid now names another process (processes are told apart by pid and start time), it
//! changed credentials, or no selector takes it any more. It remembers only the processes it
//! currently takes, so its state follows what is monitored, not how long it ran.
//!
//! Every process a selector takes must pass [`may_take`]: whoever asked for the selector
//! could ptrace it ([`may_monitor`], also the rule of the service's control socket), and a
//! process found by its command name or cgroup, which the user who started it chose, gained
//! no privilege by exec. A scan that cannot read `/proc` (the service out of file
//! descriptors, say) takes what it could see and lets nothing go: a process is dropped only
//! when the scan saw why.
//!
//! A scan costs what changed, not what runs. A process taken in is read again (its start
//! time and credentials; its cgroup is read once, when it is taken in) only when it may have
//! changed: when it executed a program ([`Discovery::recheck`]: a privilege gained comes with
//! an exec), when its monitoring ended ([`Discovery::ended`]: it is forgotten if it is gone,
//! so that a pid reused is read anew), and at every [`FULL_SCAN_EVERY`]-th scan, which reads everything again (ids given up
//! without an exec are seen then). Command names are read once per process ([`Comms`]), at
//! the first two scans that see it and at full scans.

use crate::maps::MapsError;
use crate::proc_stat::{self, ProcStat};
use crate::proc_status::{CAP_SYS_PTRACE, ProcStatus};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What to take in.
#[derive(Debug, Clone)]
pub enum Selector {
    /// This process, until it exits or changes credentials.
    Pid(u32),
    /// Every process of this cgroup v2 and its descendants; given as a path under the cgroup2
    /// mount (`/sys/fs/cgroup/system.slice/x.service`) or relative to it
    /// (`/system.slice/x.service`).
    Cgroup(PathBuf),
    /// Every process whose command name (`comm`) matches.
    Match(Regex),
}

impl Selector {
    /// Whether it finds processes by something their starter chose (a command name, a place
    /// in a cgroup) rather than naming one.
    fn indirect(&self) -> bool {
        !matches!(self, Selector::Pid(_))
    }
}

/// A selector, and who asked for it: what it takes must pass [`may_take`] for them.
#[derive(Debug, Clone)]
pub struct AskedFor {
    pub selector: Selector,
    pub by: Credentials,
}

/// A process taken in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub pid: u32,
    /// Clock ticks after boot when it started: with the pid, it names the process.
    pub start_time: u64,
    pub comm: String,
    /// Its cgroup v2 path (`/system.slice/x.service`) when it was taken in, empty when unknown.
    pub cgroup: String,
    /// Its credentials when it was taken in.
    pub identity: Identity,
}

impl Found {
    /// With its cgroup read.
    fn with_cgroup(mut self) -> Found {
        self.cgroup = process_cgroup(self.pid).unwrap_or_default();
        self
    }
}

/// The credentials the ptrace rule reads of a process: its user and group ids (real,
/// effective, saved, file system) and permitted capabilities. A change (a setuid or setgid
/// program executed, ids given up or taken back) ends its monitoring: it was taken in as the
/// process it was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    uids: Vec<u32>,
    gids: Vec<u32>,
    cap_permitted: u64,
}

impl Identity {
    fn of(status: &ProcStatus) -> Identity {
        Identity {
            uids: status.ids("Uid"),
            gids: status.ids("Gid"),
            cap_permitted: status.capabilities("CapPrm").unwrap_or(0),
        }
    }
}

/// A process that went, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    pub found: Found,
    pub why: Departure,
}

/// Why a process is no longer taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Departure {
    Exited,
    /// Its pid names another process now.
    PidReused,
    CredentialsChanged,
    /// [`may_take`] refuses it now (it made itself undumpable, say).
    Refused(String),
    /// It still runs, but no selector takes it.
    Unselected,
}

impl std::fmt::Display for Departure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Departure::Exited => write!(f, "the process exited"),
            Departure::PidReused => write!(f, "its pid now names another process"),
            Departure::CredentialsChanged => write!(
                f,
                "its credentials changed (a setuid or setgid program, or ids given up): it is \
                 not monitored as another user"
            ),
            Departure::Refused(why) => write!(f, "{why}"),
            Departure::Unselected => write!(
                f,
                "no selector takes it any more (it left its cgroup, changed its command name, \
                 or the configuration changed)"
            ),
        }
    }
}

/// What changed since the last scan.
#[derive(Debug, Default)]
pub struct Changes {
    pub added: Vec<Found>,
    pub removed: Vec<Gone>,
    /// For the log, once each time it happens: a selector that stopped finding anything to
    /// read (a cgroup removed), a process a selector found but the rule refused, a scan that
    /// could not read `/proc`.
    pub warnings: Vec<String>,
}

#[derive(Debug, Error)]
pub enum DiscoverError {
    #[error(transparent)]
    Process(#[from] MapsError),
    #[error(transparent)]
    Denied(#[from] Denied),
    #[error(
        "cgroup {0} does not exist: give a cgroup v2 path such as /sys/fs/cgroup/system.slice/NAME.service"
    )]
    NoCgroup(PathBuf),
    #[error("no cgroup v2 file system is mounted: --cgroup needs one")]
    NoCgroup2,
}

/// A selector with what the discovery knows of it.
#[derive(Debug)]
struct Watch {
    kind: WatchKind,
    asked: AskedFor,
    /// Added while serving ([`Discovery::add_pid`]): kept when the selectors are replaced.
    runtime: bool,
}

#[derive(Debug)]
enum WatchKind {
    /// The process, its start time and credentials; dropped by the scan that finds it gone or
    /// changed (a pid is never taken again).
    Pid(u32, u64, Identity),
    /// The cgroup's directory, and whether it was missing at the last scan.
    Cgroup {
        dir: PathBuf,
        missing: bool,
    },
    Match(Regex),
}

/// Every this many scans, everything is read again (30 s at the default 2 s rescan).
pub const FULL_SCAN_EVERY: u32 = 15;

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
    /// processes new or young. An error when `/proc` could not be read.
    fn refresh(&mut self, again: bool) -> std::io::Result<()> {
        if again {
            self.by_pid.clear();
        }
        let live: HashSet<u32> = proc_stat::try_pids()?.into_iter().collect();
        self.by_pid.retain(|pid, _| live.contains(pid));
        let mut young = HashSet::new();
        for pid in live {
            let new = !self.by_pid.contains_key(&pid);
            if new || self.young.contains(&pid) {
                match proc_stat::read_small(&format!("/proc/{pid}/comm")) {
                    Ok(comm) => {
                        self.by_pid
                            .insert(pid, comm.trim_end_matches('\n').to_string());
                    }
                    Err(e) if proc_stat::gone(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            if new {
                young.insert(pid);
            }
        }
        self.young = young;
        Ok(())
    }
}

pub struct Discovery {
    watches: Vec<Watch>,
    cgroup_root: Option<PathBuf>,
    /// The processes taken in, by pid.
    known: BTreeMap<u32, Found>,
    /// The host's command names, when a selector matches them.
    comms: Comms,
    /// Processes taken in that may have changed since: read again at the next scan.
    stale: BTreeSet<u32>,
    scans: u32,
    /// Processes a selector found and the rule refused, warned about once each while they live.
    refused: BTreeSet<(u32, u64)>,
    /// Whether the last scan failed to read `/proc` (warned about once until one reads again).
    failing: bool,
}

/// How a candidate of a scan turned out.
enum Take {
    Taken(Found),
    /// Not a target at all: gone, a zombie, a kernel thread, udamon itself.
    Skipped,
    Refused(Found, Denied),
    Unreadable(std::io::Error),
}

impl Discovery {
    /// Checks every selector: a pid that does not exist, is a kernel thread or that its asker
    /// could not ptrace, and a cgroup that does not exist, are errors.
    pub fn new(selectors: Vec<AskedFor>) -> Result<Self, DiscoverError> {
        let mut d = Discovery {
            watches: Vec::new(),
            cgroup_root: cgroup2_mount(),
            known: BTreeMap::new(),
            comms: Comms::default(),
            stale: BTreeSet::new(),
            scans: 0,
            refused: BTreeSet::new(),
            failing: false,
        };
        d.watches = d.watches_of(selectors, false)?;
        Ok(d)
    }

    /// Replaces the selectors given at the start (those added with [`Discovery::add_pid`]
    /// stay); the next scan says what came and went. On an error nothing changes.
    pub fn set_selectors(&mut self, selectors: Vec<AskedFor>) -> Result<(), DiscoverError> {
        let new = self.watches_of(selectors, false)?;
        self.watches.retain(|w| w.runtime);
        self.watches.extend(new);
        Ok(())
    }

    fn watches_of(
        &self,
        selectors: Vec<AskedFor>,
        runtime: bool,
    ) -> Result<Vec<Watch>, DiscoverError> {
        selectors
            .into_iter()
            .map(|asked| self.watch(asked, runtime))
            .collect()
    }

    fn watch(&self, asked: AskedFor, runtime: bool) -> Result<Watch, DiscoverError> {
        let kind = match &asked.selector {
            Selector::Pid(pid) => {
                let pid = *pid;
                let stat = ProcStat::read(pid).ok_or(MapsError::NoSuchProcess(pid))?;
                if stat.is_kernel_thread() {
                    return Err(MapsError::KernelThread(pid).into());
                }
                let status = ProcStatus::read(pid).ok_or(MapsError::NoSuchProcess(pid))?;
                may_take(&asked.by, false, pid, &status)?;
                WatchKind::Pid(pid, stat.start_time, Identity::of(&status))
            }
            Selector::Cgroup(path) => {
                let root = self
                    .cgroup_root
                    .as_deref()
                    .ok_or(DiscoverError::NoCgroup2)?;
                let dir = cgroup_dir(root, path);
                if !dir.join("cgroup.procs").exists() {
                    return Err(DiscoverError::NoCgroup(path.clone()));
                }
                WatchKind::Cgroup {
                    dir,
                    missing: false,
                }
            }
            Selector::Match(re) => WatchKind::Match(re.clone()),
        };
        Ok(Watch {
            kind,
            asked,
            runtime,
        })
    }

    /// Adds a selector of one process, asked for by `by` while serving, and takes it in at
    /// once (it is not in the next scan's `added`); returns it.
    pub fn add_pid(&mut self, pid: u32, by: Credentials) -> Result<Found, DiscoverError> {
        let asked = AskedFor {
            selector: Selector::Pid(pid),
            by,
        };
        let watch = self.watch(asked, true)?;
        let found = match self.take(pid, &watch.asked) {
            Take::Taken(found) => found.with_cgroup(),
            Take::Refused(_, denied) => return Err(denied.into()),
            Take::Skipped | Take::Unreadable(_) => return Err(MapsError::NoSuchProcess(pid).into()),
        };
        self.watches.push(watch);
        self.known.insert(pid, found.clone());
        Ok(found)
    }

    /// How many selectors can still take processes in: a pid's goes with its process.
    pub fn selectors(&self) -> usize {
        self.watches.len()
    }

    /// Process `pid`, taken in, may have changed (it executed a program): the next scan reads
    /// it again, its command name too.
    pub fn recheck(&mut self, pid: u32) {
        if self.known.contains_key(&pid) {
            self.stale.insert(pid);
            self.comms.by_pid.remove(&pid);
        }
    }

    /// Forgets process `pid`, which the caller did not take in (serve had no file descriptors
    /// to spare): a later scan finds it again, as new.
    pub fn forget(&mut self, pid: u32) {
        self.known.remove(&pid);
        self.stale.remove(&pid);
        self.comms.by_pid.remove(&pid);
    }

    /// A served process's monitoring ended: if it is gone, or its pid names another process
    /// now, it is forgotten (not reported gone: its monitoring ended already), so that the
    /// next scan takes in whatever the pid names then.
    pub fn ended(&mut self, pid: u32, start_time: u64) {
        let ours = |f: &Found| f.start_time == start_time;
        if self.known.get(&pid).is_some_and(ours)
            && ProcStat::read(pid)
                .is_none_or(|s| s.start_time != start_time || s.is_zombie() || s.is_exiting())
        {
            self.known.remove(&pid);
            self.comms.by_pid.remove(&pid);
        }
    }

    /// The processes that came and went since the last scan.
    pub fn scan(&mut self) -> Changes {
        let mut changes = Changes::default();
        let mut now: BTreeMap<u32, Found> = BTreeMap::new();
        let mut refused: BTreeMap<u32, (Found, Denied)> = BTreeMap::new();
        let mut unreadable: Option<std::io::Error> = None;
        let full = self.scans.is_multiple_of(FULL_SCAN_EVERY);
        self.scans = self.scans.wrapping_add(1);
        let mut comms: Option<std::io::Result<()>> = None;
        let stale = std::mem::take(&mut self.stale);
        // A pid selector whose process is gone or changed selects nothing ever again:
        // dropped, so that a service told of short-lived pids for weeks keeps none of them.
        let mut spent = vec![false; self.watches.len()];
        for (i, spent) in spent.iter_mut().enumerate() {
            let candidates = match self.candidates(i, &mut comms, full, &mut changes.warnings) {
                Ok(Some(pids)) => pids,
                Ok(None) => {
                    *spent = true;
                    Vec::new()
                }
                Err(e) => {
                    unreadable.get_or_insert(e);
                    Vec::new()
                }
            };
            for pid in candidates {
                if now.contains_key(&pid) {
                    continue;
                }
                // A process taken in is read again only when it may have changed.
                if let Some(known) = self.known.get(&pid)
                    && !full
                    && !stale.contains(&pid)
                {
                    now.insert(pid, known.clone());
                    continue;
                }
                match self.take(pid, &self.watches[i].asked) {
                    Take::Taken(found) => {
                        refused.remove(&pid);
                        now.insert(pid, found);
                    }
                    Take::Refused(found, denied) => {
                        refused.insert(pid, (found, denied));
                    }
                    Take::Skipped => {}
                    Take::Unreadable(e) => {
                        unreadable.get_or_insert(e);
                    }
                }
            }
        }
        let mut refused_now = BTreeSet::new();
        for (pid, (found, denied)) in &refused {
            refused_now.insert((*pid, found.start_time));
            if !self.refused.contains(&(*pid, found.start_time)) && !self.known.contains_key(pid) {
                changes.warnings.push(format!(
                    "{} ({pid}) is selected but not served: {denied}",
                    found.comm
                ));
            }
        }
        self.refused = refused_now;
        for (pid, found) in &now {
            match self.known.get(pid) {
                Some(old)
                    if old.start_time == found.start_time && old.identity == found.identity => {}
                Some(old) => {
                    let why = if old.start_time == found.start_time {
                        Departure::CredentialsChanged
                    } else {
                        Departure::PidReused
                    };
                    changes.removed.push(Gone {
                        found: old.clone(),
                        why,
                    });
                    changes.added.push(found.clone().with_cgroup());
                }
                None => changes.added.push(found.clone().with_cgroup()),
            }
        }
        match unreadable {
            // What could not be seen is kept as it was: a process is let go only for a reason
            // the scan saw.
            Some(e) => {
                if !self.failing {
                    changes.warnings.push(format!(
                        "cannot read the processes of /proc ({e}): every target is kept as it is \
                         until a scan reads again"
                    ));
                }
                self.failing = true;
            }
            None => {
                if self.failing {
                    changes
                        .warnings
                        .push("/proc reads again: scanning as before".to_string());
                }
                self.failing = false;
                for (pid, old) in &self.known {
                    if !now.contains_key(pid) {
                        let why = departure(old, refused.get(pid));
                        changes.removed.push(Gone {
                            found: old.clone(),
                            why,
                        });
                    }
                }
            }
        }
        // What is known keeps the start time and credentials it was taken in with.
        for gone in &changes.removed {
            self.known.remove(&gone.found.pid);
        }
        for found in &changes.added {
            self.known.insert(found.pid, found.clone());
        }
        let mut spent = spent.into_iter();
        self.watches.retain(|_| !spent.next().unwrap_or(false));
        changes
    }

    /// The pids watch `i` selects now; `None` when it is spent (a pid selector whose process
    /// is gone or changed); an error when `/proc` or the cgroup could not be read.
    fn candidates(
        &mut self,
        i: usize,
        comms: &mut Option<std::io::Result<()>>,
        full: bool,
        warnings: &mut Vec<String>,
    ) -> std::io::Result<Option<Vec<u32>>> {
        Ok(Some(match &mut self.watches[i].kind {
            WatchKind::Pid(pid, start, identity) => {
                let same = match ProcStat::try_read(*pid)? {
                    Some(s) if s.start_time == *start => ProcStatus::try_read(*pid)?
                        .is_some_and(|status| Identity::of(&status) == *identity),
                    _ => false,
                };
                if !same {
                    return Ok(None);
                }
                vec![*pid]
            }
            WatchKind::Cgroup { dir, missing } => match cgroup_pids(dir)? {
                Some(pids) => {
                    *missing = false;
                    pids
                }
                None => {
                    if !*missing {
                        warnings.push(format!(
                            "cgroup {} is gone; its processes are no longer served until it comes back",
                            dir.display()
                        ));
                    }
                    *missing = true;
                    Vec::new()
                }
            },
            WatchKind::Match(re) => match comms.get_or_insert_with(|| self.comms.refresh(full)) {
                Ok(()) => self
                    .comms
                    .by_pid
                    .iter()
                    .filter(|(_, comm)| re.is_match(comm))
                    .map(|(pid, _)| *pid)
                    .collect(),
                Err(e) => return Err(std::io::Error::new(e.kind(), e.to_string())),
            },
        }))
    }

    /// Process `pid` as taken in for `asked`, unless it is not a monitoring target at all
    /// (gone, a zombie, a kernel thread, udamon itself) or the rule refuses it.
    fn take(&self, pid: u32, asked: &AskedFor) -> Take {
        if pid == std::process::id() {
            return Take::Skipped;
        }
        let (stat, status) = match (ProcStat::try_read(pid), ProcStatus::try_read(pid)) {
            (Ok(Some(stat)), Ok(Some(status))) => (stat, status),
            (Err(e), _) | (_, Err(e)) => return Take::Unreadable(e),
            _ => return Take::Skipped,
        };
        if stat.is_kernel_thread() || stat.is_zombie() {
            return Take::Skipped;
        }
        // Its cgroup is read once it is known to be added ([`Found::with_cgroup`]): a process
        // taken in keeps the cgroup it came with, and a full scan reads every one again.
        let found = Found {
            pid,
            start_time: stat.start_time,
            comm: stat.comm,
            cgroup: String::new(),
            identity: Identity::of(&status),
        };
        match may_take(&asked.by, asked.selector.indirect(), pid, &status) {
            Ok(()) => Take::Taken(found),
            Err(denied) => Take::Refused(found, denied),
        }
    }
}

/// Why `old`, which the last scan took and this one did not, is no longer taken.
fn departure(old: &Found, refused: Option<&(Found, Denied)>) -> Departure {
    match (changed(old), refused) {
        (Some(why), _) => why,
        (None, Some((_, denied))) => Departure::Refused(denied.to_string()),
        (None, None) => Departure::Unselected,
    }
}

/// How process `found` is no longer what was taken in: it exited, its pid was reused, or its
/// credentials changed; `None` while it is still the same (for a monitor that lost it, to
/// say why).
pub fn changed(found: &Found) -> Option<Departure> {
    let Some(stat) = ProcStat::read(found.pid).filter(|s| !s.is_exiting()) else {
        return Some(Departure::Exited);
    };
    if stat.start_time != found.start_time {
        return Some(Departure::PidReused);
    }
    let identity = ProcStatus::read(found.pid).map(|s| Identity::of(&s));
    identity
        .is_some_and(|i| i != found.identity)
        .then_some(Departure::CredentialsChanged)
}

/// Where the cgroup2 file system is mounted (usually `/sys/fs/cgroup`).
pub fn cgroup2_mount() -> Option<PathBuf> {
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

/// Every process of a cgroup and its descendants; `None` when the cgroup is gone, an error
/// when it could not be read.
fn cgroup_pids(dir: &Path) -> std::io::Result<Option<Vec<u32>>> {
    let text = match std::fs::read_to_string(dir.join("cgroup.procs")) {
        Ok(text) => text,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENODEV) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let mut pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            // A child cgroup removed meanwhile holds nothing any more.
            pids.extend(cgroup_pids(&entry.path())?.unwrap_or_default());
        }
    }
    Ok(Some(pids))
}

/// A process's cgroup v2 path (the `0::PATH` line of `/proc/PID/cgroup`).
pub fn process_cgroup(pid: u32) -> Option<String> {
    let text = proc_stat::read_small(&format!("/proc/{pid}/cgroup")).ok()?;
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

    /// This process's: its real ids and its capabilities (whoever started it, as the ptrace
    /// rule sees them).
    pub fn of_this_process() -> Credentials {
        let status = ProcStatus::read_self().unwrap_or_default();
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Credentials {
            pid: std::process::id(),
            uid,
            gid,
            cap_effective: status.capabilities("CapEff").unwrap_or(0),
            cap_permitted: status.capabilities("CapPrm").unwrap_or(0),
        }
    }

    /// A user as a login of theirs is: every capability for root, none for anyone else (the
    /// owner of a file that asks for something, say).
    pub fn of_user(uid: u32, gid: u32) -> Credentials {
        let caps = if uid == 0 { u64::MAX } else { 0 };
        Credentials {
            pid: 0,
            uid,
            gid,
            cap_effective: caps,
            cap_permitted: caps,
        }
    }
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum Denied {
    #[error(
        "process {pid}: permission denied: the caller (uid {uid}) could not ptrace it, so udamon will not monitor it for the caller"
    )]
    NotTraceable { pid: u32, uid: u32 },
    #[error(
        "process {pid} (uid {uid}) gained privileges when it started (a setuid or setgid program, or file capabilities): a process found by command name or cgroup is monitored only if the user who started it could ptrace it"
    )]
    Privileged { pid: u32, uid: u32 },
}

/// The credentials of the process at the other end of a connected Unix socket (SO_PEERCRED,
/// which the kernel fills in at connect time for a client, at listen time for a server:
/// neither end can forge it).
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
    let denied = Denied::NotTraceable {
        pid,
        uid: caller.uid,
    };
    if caller.cap_sys_ptrace() {
        return Ok(());
    }
    let status = ProcStatus::read(pid).ok_or(denied.clone())?;
    ptrace_rule(caller, pid, &status)
}

/// The rule of [`may_monitor`] on a status already read.
fn ptrace_rule(caller: &Credentials, pid: u32, status: &ProcStatus) -> Result<(), Denied> {
    if caller.cap_sys_ptrace() {
        return Ok(());
    }
    // A process holding capabilities its caller does not (file capabilities, ambient ones)
    // is the kernel's to refuse (cap_ptrace_access_check), whoever owns it.
    let no_more_capable = status
        .capabilities("CapPrm")
        .is_some_and(|c| c & !caller.cap_permitted == 0);
    if own_ids(status, caller.uid, caller.gid) && dumpable_by(pid, caller.uid) && no_more_capable {
        Ok(())
    } else {
        Err(Denied::NotTraceable {
            pid,
            uid: caller.uid,
        })
    }
}

/// Whether the real, effective and saved user and group ids of `status` are `uid` and `gid`.
fn own_ids(status: &ProcStatus, uid: u32, gid: u32) -> bool {
    let same = |all: &[u32], id: u32| all.len() >= 3 && all[..3].iter().all(|&x| x == id);
    same(&status.ids("Uid"), uid) && same(&status.ids("Gid"), gid)
}

/// Whether process `pid` is dumpable and its effective user is `uid`: the files of a
/// non-dumpable process's /proc directory belong to root (the directory itself keeps the
/// process's euid).
fn dumpable_by(pid: u32, uid: u32) -> bool {
    std::fs::metadata(format!("/proc/{pid}/stat")).is_ok_and(|m| m.uid() == uid)
}

/// The rule every process a selector takes must pass (docs/serve.md, "Who may have what
/// monitored"), given its status. `asker`, who asked for the selector, could ptrace it
/// ([`may_monitor`]). And when the selector found it `indirectly`, by command name or cgroup
/// (which whoever started the process chose), the process gained no privilege by exec: its
/// real, effective and saved user ids agree, so do its group ids (not a setuid or setgid
/// program), and it does not hold capabilities while undumpable under a user other than root
/// (file capabilities). Otherwise any local user could have a root service watch, record and
/// act on a setuid program started under a name of their choosing. A daemon that gave up
/// root for another user, or was started with ambient capabilities, passes: its user could
/// not have made it.
pub fn may_take(
    asker: &Credentials,
    indirect: bool,
    pid: u32,
    status: &ProcStatus,
) -> Result<(), Denied> {
    ptrace_rule(asker, pid, status)?;
    if indirect && gained_privileges(pid, status) {
        let uid = status.uid().unwrap_or(0);
        return Err(Denied::Privileged { pid, uid });
    }
    Ok(())
}

/// Whether the process gained privileges by exec: see [`may_take`].
fn gained_privileges(pid: u32, status: &ProcStatus) -> bool {
    let agree = |ids: &[u32]| ids.len() >= 3 && ids[..3].iter().all(|&x| x == ids[0]);
    let (uids, gids) = (status.ids("Uid"), status.ids("Gid"));
    if !agree(&uids) || !agree(&gids) {
        return true;
    }
    // Root's /proc files belong to root whether or not it is dumpable: the test tells only
    // for other users.
    let capable = status.capabilities("CapPrm").is_none_or(|c| c != 0);
    uids[0] != 0 && capable && !dumpable_by(pid, uids[0])
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
