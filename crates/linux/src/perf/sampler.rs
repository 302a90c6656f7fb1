//! A sampling session on one target process: events opened per (thread × CPU), one ring buffer
//! per CPU, polling, and draining into typed records with counters.
//!
//! Why per (thread × CPU): to follow threads created later, events need `inherit`, and the
//! kernel refuses to mmap an inherited per-task event opened with cpu=-1 (perf_mmap: "don't
//! allow mmap() of inherited per-task counters", all children would write to one buffer). So
//! each existing thread gets one event per online CPU; the first event on a CPU owns that CPU's
//! ring and the others are redirected into it with PERF_EVENT_IOC_SET_OUTPUT (allowed because
//! they share the CPU and the clock). Threads the target creates afterwards inherit the events
//! and write into the same rings. A thread created by a not-yet-opened thread while attaching
//! can be missed; spawn mode has no such race.

use super::error::PerfError;
use super::open::{self, online_cpus, open_event};
use super::record::{self, Layout, PerfRecord, SUPPORTED_SAMPLE_TYPE};
use super::ring::{Ring, page_size};
use super::source::{AccessSource, CpuClock, EventSpec, OpenSettings};
use super::spawn::PausedChild;
use perf_event_open_sys as sys;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

/// How to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplerConfig {
    pub source: AccessSource,
    /// Data pages of each per-CPU ring buffer, a power of two. The default, 128 (512 KiB), fits
    /// the default unprivileged lock limit (`kernel.perf_event_mlock_kb` = 516 KiB per CPU) and
    /// holds about 2.8 k samples, i.e. over 0.5 s at 5 kHz per CPU.
    pub ring_pages: usize,
    /// Also follow child processes (fork), not only new threads. Their samples carry their own
    /// pid.
    pub follow_forks: bool,
    /// Also take each sample's user call chain ([`Sample::callchain`](super::Sample)), walked
    /// by the kernel along the frame pointers.
    pub call_stacks: bool,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            source: AccessSource::CpuClock(CpuClock::default()),
            ring_pages: 128,
            follow_forks: false,
            call_stacks: false,
        }
    }
}

impl SamplerConfig {
    /// Checked before anything is opened or mounted.
    pub(super) fn validate(&self) -> Result<(), PerfError> {
        if !self.ring_pages.is_power_of_two() {
            return Err(PerfError::Config(format!(
                "ring buffer pages must be a power of two, not {}",
                self.ring_pages
            )));
        }
        Ok(())
    }

    /// The event to open: the source's, with call chains when asked for.
    pub(super) fn spec(&self, notes: &mut Vec<String>) -> Result<EventSpec, PerfError> {
        let mut spec = self.source.resolve(notes)?;
        if self.call_stacks {
            spec.sample_type |= sys::bindings::PERF_SAMPLE_CALLCHAIN as u64;
        }
        Ok(spec)
    }
}

/// Running totals over everything drained so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub samples: u64,
    /// Records the kernel dropped because a ring was full (from `Lost` records).
    pub lost: u64,
    /// `Throttle` records: times the kernel stopped sampling for exceeding its rate limit.
    pub throttled: u64,
    /// Records of types udamon does not use, or damaged ones.
    pub skipped: u64,
    /// Records of processes not asked for, skipped unread (a sampler of every process).
    pub others: u64,
}

/// What [`Sampler::poll`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollOutcome {
    /// A ring reached its wakeup watermark.
    Ready,
    Timeout,
    /// Every sampled thread has exited (the records up to the end are still in the rings:
    /// drain once more).
    TargetGone,
}

/// How a spawned child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildExit {
    pub status: ExitStatus,
    /// User plus system CPU time the child (and its reaped descendants) used.
    pub cpu_time: Duration,
}

/// A sampling session on one process. Dropping it stops sampling and unmaps the rings; a
/// spawned child keeps running (see [`Sampler::wait_child`]).
pub struct Sampler {
    pid: u32,
    layout: Layout,
    /// (cpu, ring) for each online CPU.
    rings: Vec<(u32, Ring)>,
    events: Vec<OwnedFd>,
    /// Events still worth polling: an event that reported POLLHUP (its thread and all threads it
    /// was inherited into have exited) is removed.
    pollfds: Vec<libc::pollfd>,
    counters: Counters,
    child: Option<libc::pid_t>,
    notes: Vec<String>,
}

impl Sampler {
    /// Starts sampling the running process `pid`, all its current threads and the threads they
    /// create from now on.
    pub fn attach(pid: u32, config: &SamplerConfig) -> Result<Sampler, PerfError> {
        config.validate()?;
        let tids = list_threads(pid)?;
        let mut notes = Vec::new();
        let spec = config.spec(&mut notes)?;
        let mut s = Sampler::open(pid, &spec, config, &tids, false)?;
        s.notes = notes;
        Ok(s)
    }

    /// Runs `program args...` (looked up in PATH, with our environment and stdio) with
    /// sampling enabled from its exec on. The child is ours to reap with [`Sampler::wait_child`].
    pub fn spawn<S: AsRef<OsStr>>(
        program: impl AsRef<OsStr>,
        args: &[S],
        config: &SamplerConfig,
    ) -> Result<Sampler, PerfError> {
        config.validate()?;
        let mut notes = Vec::new();
        let spec = config.spec(&mut notes)?;
        let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_owned()).collect();
        let child = PausedChild::fork(program.as_ref(), &args)?;
        let pid = child.pid();
        // On error the paused child is dropped, which makes it exit unexecuted and reaps it.
        let mut s = Sampler::open(pid as u32, &spec, config, &[pid], true)?;
        s.child = Some(child.release()?);
        s.notes = notes;
        Ok(s)
    }

    fn open(
        pid: u32,
        spec: &EventSpec,
        config: &SamplerConfig,
        tids: &[i32],
        spawn: bool,
    ) -> Result<Sampler, PerfError> {
        debug_assert_eq!(spec.sample_type & !SUPPORTED_SAMPLE_TYPE, 0);
        open::check_spec(spec)?;
        let cpus = online_cpus()?;
        let data_bytes = config.ring_pages * page_size();
        let attr = spec.attr(OpenSettings {
            enable_on_exec: spawn,
            follow_forks: config.follow_forks,
            wakeup_bytes: (data_bytes / 4) as u32,
        });
        let mut events: Vec<OwnedFd> = Vec::with_capacity(tids.len() * cpus.len());
        let mut rings: Vec<(u32, Ring, i32)> = Vec::with_capacity(cpus.len());
        let mut opened: std::collections::BTreeSet<i32> = std::collections::BTreeSet::new();
        let mut pending: Vec<i32> = tids.to_vec();
        let mut rounds = 0;
        loop {
            let Some(tid) = pending.pop() else {
                // A thread started while the events were opened has none of its own, nor one
                // inherited (its creator had none yet): list the threads again until no new
                // one shows (a few rounds at most: a process that starts threads without end
                // gets the rest by inheritance).
                if spawn || rounds == RELIST_ROUNDS {
                    break;
                }
                rounds += 1;
                let now = list_threads(pid).unwrap_or_default();
                pending.extend(now.into_iter().filter(|t| !opened.contains(t)));
                if pending.is_empty() {
                    break;
                }
                continue;
            };
            opened.insert(tid);
            for &cpu in &cpus {
                let fd = match open_event(&attr, tid, cpu as i32) {
                    Ok(fd) => fd,
                    // A thread that exited since we listed it.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) && !spawn => break,
                    Err(e) => return Err(open::open_error(e, spec, pid, tids.len() * cpus.len())),
                };
                match rings.iter().find(|r| r.0 == cpu) {
                    Some(&(_, _, ring_fd)) => {
                        // SAFETY: both are live perf event descriptors we own.
                        if unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), ring_fd) } != 0 {
                            return Err(PerfError::io(
                                format!(
                                    "cannot redirect a perf event into CPU {cpu}'s ring buffer"
                                ),
                                std::io::Error::last_os_error(),
                            ));
                        }
                    }
                    None => {
                        let ring = Ring::map(fd.as_fd(), config.ring_pages).map_err(|e| match e
                            .raw_os_error()
                        {
                            Some(libc::EPERM | libc::ENOMEM) => PerfError::RingLimit {
                                kib: (data_bytes + page_size()) / 1024,
                            },
                            _ => PerfError::io("cannot map a perf ring buffer", e),
                        })?;
                        rings.push((cpu, ring, fd.as_raw_fd()));
                    }
                }
                events.push(fd);
            }
        }
        if events.is_empty() {
            return Err(PerfError::NoSuchProcess(pid));
        }
        let pollfds = events
            .iter()
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        Ok(Sampler {
            pid,
            layout: Layout {
                sample_type: spec.sample_type,
            },
            rings: rings
                .into_iter()
                .map(|(cpu, ring, _)| (cpu, ring))
                .collect(),
            events,
            pollfds,
            counters: Counters::default(),
            child: None,
            notes: Vec::new(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Things the caller should record, e.g. that tracefs had to be mounted.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Number of perf events open (threads at attach × CPUs).
    pub fn nr_events(&self) -> usize {
        self.events.len()
    }

    /// Waits up to `timeout` for a ring to fill to its watermark or for the target to end.
    /// Cheap enough to call every few tens of milliseconds; drain after it whatever it returns.
    pub fn poll(&mut self, timeout: Duration) -> Result<PollOutcome, PerfError> {
        if self.pollfds.is_empty() {
            return Ok(PollOutcome::TargetGone);
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `pollfds` is a valid array of pollfd for the kernel to fill in.
        let n = unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                ms,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(PollOutcome::Timeout);
            }
            return Err(PerfError::io("poll on perf events", e));
        }
        let ready = self.pollfds.iter().any(|p| p.revents & libc::POLLIN != 0);
        self.pollfds
            .retain(|p| p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) == 0);
        Ok(if self.pollfds.is_empty() {
            PollOutcome::TargetGone
        } else if ready {
            PollOutcome::Ready
        } else {
            PollOutcome::Timeout
        })
    }

    /// Hands every published record to `f`, ring by ring (CPU by CPU). Within one CPU records
    /// are in time order; across CPUs they are not (see [`Sampler::drain_sorted`]). Samples
    /// are not allocated; exec/comm/mmap records allocate their strings.
    pub fn drain(&mut self, f: impl FnMut(PerfRecord)) {
        drain_rings(
            &mut self.rings,
            self.layout,
            &mut self.counters,
            |_| true,
            f,
        );
    }

    /// Appends every published record to `out` and sorts the appended part by time (stable:
    /// records with equal times keep their per-CPU order).
    pub fn drain_sorted(&mut self, out: &mut Vec<PerfRecord>) {
        let start = out.len();
        self.drain(|r| out.push(r));
        out[start..].sort_by_key(PerfRecord::time_ns);
    }

    /// Stops sampling (the events and what they wrote stay readable).
    pub fn disable(&self) -> Result<(), PerfError> {
        for fd in &self.events {
            // SAFETY: a live perf event descriptor we own; DISABLE takes no pointer.
            if unsafe { sys::ioctls::DISABLE(fd.as_raw_fd(), 0) } != 0 {
                return Err(PerfError::io(
                    "cannot disable a perf event",
                    std::io::Error::last_os_error(),
                ));
            }
        }
        Ok(())
    }

    /// The spawned child's pid, if this Sampler spawned it and it has not been reaped.
    pub fn child(&self) -> Option<u32> {
        self.child.map(|p| p as u32)
    }

    /// Reaps the spawned child if it has exited. `None` while it runs, or when there is no
    /// child (attach mode, or already reaped).
    pub fn try_wait_child(&mut self) -> Result<Option<ChildExit>, PerfError> {
        self.wait4(libc::WNOHANG)
    }

    /// Waits for the spawned child to exit and reaps it. `None` when there is no child.
    pub fn wait_child(&mut self) -> Result<Option<ChildExit>, PerfError> {
        self.wait4(0)
    }

    fn wait4(&mut self, options: i32) -> Result<Option<ChildExit>, PerfError> {
        let Some(pid) = self.child else {
            return Ok(None);
        };
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid value for the kernel to overwrite.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waiting for our own child with valid out-pointers.
            let r = unsafe { libc::wait4(pid, &mut status, options, &mut ru) };
            if r == 0 {
                return Ok(None);
            }
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(PerfError::io(format!("waiting for process {pid}"), e));
            }
            self.child = None;
            let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
            return Ok(Some(ChildExit {
                status: ExitStatus::from_raw(status),
                cpu_time: tv(ru.ru_utime) + tv(ru.ru_stime),
            }));
        }
    }
}

/// Hands every published record of `rings` whose process `wanted` takes (and every record about
/// no process in particular) to `f`, ring by ring, counting into `counters`. Records of other
/// processes are skipped unparsed.
pub(super) fn drain_rings(
    rings: &mut [(u32, Ring)],
    layout: Layout,
    counters: &mut Counters,
    wanted: impl Fn(u32) -> bool,
    mut f: impl FnMut(PerfRecord),
) {
    for (cpu, ring) in rings {
        let drained = ring.drain(|bytes| {
            if record::pid(bytes, layout).is_some_and(|pid| !wanted(pid)) {
                counters.others += 1;
                return;
            }
            match record::parse(bytes, layout, *cpu) {
                Some(rec) => {
                    match rec {
                        PerfRecord::Sample(_) => counters.samples += 1,
                        PerfRecord::Lost { lost, .. } => counters.lost += lost,
                        PerfRecord::Throttle { .. } => counters.throttled += 1,
                        _ => {}
                    }
                    f(rec)
                }
                None => counters.skipped += 1,
            }
        });
        counters.skipped += u64::from(drained.corrupt);
    }
}

// The monitor may move a Sampler to the thread that drains it.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Sampler>();
};

/// The thread ids of `pid`, from /proc/PID/task.
/// How many times [`Sampler::attach`] lists a process's threads again for those started while
/// it opened events.
const RELIST_ROUNDS: usize = 4;

fn list_threads(pid: u32) -> Result<Vec<i32>, PerfError> {
    let dir =
        std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT | libc::ESRCH) => PerfError::NoSuchProcess(pid),
            _ => PerfError::io(format!("cannot list the threads of process {pid}"), e),
        })?;
    let mut tids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    if tids.is_empty() {
        return Err(PerfError::NoSuchProcess(pid));
    }
    Ok(tids)
}
