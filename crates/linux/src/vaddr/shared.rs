//! Many processes' monitoring fed from shared samplers, drained together by one thread: no
//! thread, poll or wake-up per process.
//!
//! With root or CAP_PERFMON the samplers are one per CPU for every process ([`CpuSampler`]):
//! the host's cost is one event per CPU whatever the number of processes served, and records
//! of processes not served are skipped unread. Otherwise each process gets a sampler of its
//! own ([`Sampler::attach`], the kernel checking that it is ours to sample), drained in the
//! same pass without polling.
//!
//! Either way [`SharedSampling::drain`] sorts a pass's records by time and hands each
//! process's to the [`VaddrOps`] attached to it ([`SharedSampling::attach`]), as its own
//! sampler's clock would. Only processes attached get anything: whose samples are read,
//! decoded and counted is the attacher's rule.

use super::rings::{Feed, FeedMsg};
use super::{Proc, VaddrError, VaddrOps, monotonic_us, proc_cmdline};
use crate::maps::{MapsError, is_kernel_thread, read_maps};
use crate::perf::{CpuSampler, PerfRecord, Sampler, SamplerConfig};
use std::collections::{HashMap, HashSet};

/// A record stamped this long before a drain started is sure to be in its ring by then.
const PUBLISH_SLACK_US: u64 = 1_000;

enum Samplers {
    PerCpu(CpuSampler),
    PerProcess(HashMap<u32, Sampler>),
}

/// Which processes' records a [`SharedSampling::tap`] gets besides their operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tapped {
    /// Those of the processes attached.
    Attached,
    /// Those of these processes.
    Pids(HashSet<u32>),
    /// Every process's (per-CPU samplers only).
    All,
}

/// The samplers of every process served, and where each process's records go.
pub struct SharedSampling {
    config: SamplerConfig,
    samplers: Samplers,
    feeds: HashMap<u32, Feed>,
    /// Where a copy of some processes' records goes too (the host's physical view).
    tap: Option<(Feed, Tapped)>,
    /// A drain's records, reused.
    records: Vec<PerfRecord>,
    /// Records the kernel dropped with a full ring, of any process (the CPUs' rings are
    /// shared).
    lost: u64,
}

/// What a drain delivered.
#[derive(Debug, Default)]
pub struct Drained {
    /// Every record stamped before this time (CLOCK_MONOTONIC µs) has been handed over.
    pub to_us: u64,
    /// The processes that got records, each once.
    pub heard: Vec<u32>,
}

impl SharedSampling {
    /// One sampler per CPU for every process: needs root or CAP_PERFMON.
    pub fn per_cpu(config: &SamplerConfig) -> Result<SharedSampling, VaddrError> {
        Ok(SharedSampling::new(
            config,
            Samplers::PerCpu(CpuSampler::open(config)?),
        ))
    }

    /// One sampler per process attached, as an unprivileged user's must be.
    pub fn per_process(config: &SamplerConfig) -> SharedSampling {
        SharedSampling::new(config, Samplers::PerProcess(HashMap::new()))
    }

    fn new(config: &SamplerConfig, samplers: Samplers) -> SharedSampling {
        SharedSampling {
            config: SamplerConfig {
                follow_forks: false,
                ..*config
            },
            samplers,
            feeds: HashMap::new(),
            tap: None,
            records: Vec::new(),
            lost: 0,
        }
    }

    /// Hands a copy of the records of the `tapped` processes to `feed` as well, in time
    /// order, at every drain (for [`crate::paddr`]). Per-process samplers sample only the
    /// processes attached, so that is all they can tap.
    pub fn tap(&mut self, feed: Feed, tapped: Tapped) {
        self.tap = Some((feed, tapped));
    }

    /// Whether the records of process `pid` are drained at all.
    fn wanted(&self, pid: u32) -> bool {
        self.feeds.contains_key(&pid)
            || match &self.tap {
                Some((_, Tapped::All)) => true,
                Some((_, Tapped::Pids(pids))) => pids.contains(&pid),
                _ => false,
            }
    }

    /// Whether one sampler per CPU serves every process.
    pub fn is_per_cpu(&self) -> bool {
        matches!(self.samplers, Samplers::PerCpu(_))
    }

    /// Records the kernel dropped so far because a CPU's ring was full (per-CPU samplers:
    /// whose records they were is not known).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Processes attached.
    pub fn len(&self) -> usize {
        self.feeds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.feeds.is_empty()
    }

    /// Starts monitoring running process `pid` (its threads, and those it creates): its
    /// operations, one target, fed by the next drains. A pid attached already is refused.
    pub fn attach(&mut self, pid: u32) -> Result<VaddrOps, VaddrError> {
        if self.feeds.contains_key(&pid) {
            return Err(VaddrError::DuplicatePid(pid));
        }
        // Maps first: the clearer error for a wrong pid or a kernel thread.
        if read_maps(pid)?.is_empty() && is_kernel_thread(pid) {
            return Err(MapsError::KernelThread(pid).into());
        }
        let mut notes = Vec::new();
        if let Samplers::PerProcess(samplers) = &mut self.samplers {
            let sampler = Sampler::attach(pid, &self.config)?;
            notes = sampler.notes().to_vec();
            samplers.insert(pid, sampler);
        } else if let Samplers::PerCpu(cpus) = &self.samplers
            && self.feeds.is_empty()
        {
            notes = cpus.notes().to_vec();
        }
        let maps = match read_maps(pid) {
            Ok(m) if !m.is_empty() => m,
            Ok(_) | Err(MapsError::NoSuchProcess(_)) => {
                self.detach(pid);
                return Err(VaddrError::ExitedDuringSetup(pid));
            }
            Err(e) => {
                self.detach(pid);
                return Err(e.into());
            }
        };
        let feed = Feed::default();
        self.feeds.insert(pid, feed.clone());
        let proc = Proc::new(pid, maps, monotonic_us(), None, proc_cmdline(pid));
        Ok(VaddrOps::fed(vec![proc], &notes, &self.config, feed))
    }

    /// Stops handing `pid`'s records to its operations (and closes its own sampler, if it
    /// has one).
    pub fn detach(&mut self, pid: u32) {
        self.feeds.remove(&pid);
        if let Samplers::PerProcess(samplers) = &mut self.samplers {
            samplers.remove(&pid);
        }
    }

    /// Drains every ring and hands each attached process its records, in time order.
    pub fn drain(&mut self) -> Drained {
        let started = monotonic_us();
        let mut records = std::mem::take(&mut self.records);
        let mut samplers =
            std::mem::replace(&mut self.samplers, Samplers::PerProcess(HashMap::new()));
        match &mut samplers {
            Samplers::PerCpu(cpus) => cpus.drain(|pid| self.wanted(pid), |r| records.push(r)),
            Samplers::PerProcess(samplers) => {
                for s in samplers.values_mut() {
                    s.drain(|r| records.push(r));
                }
            }
        }
        self.samplers = samplers;
        // Stable: a CPU's records keep their order where times are equal.
        records.sort_by_key(PerfRecord::time_ns);
        if let Some((feed, tapped)) = &self.tap {
            let copied: Vec<PerfRecord> = records
                .iter()
                .filter(|r| match (record_pid(r), tapped) {
                    (Some(pid), Tapped::Attached) => self.feeds.contains_key(&pid),
                    (Some(pid), Tapped::Pids(pids)) => pids.contains(&pid),
                    (Some(_), Tapped::All) => true,
                    (None, _) => false,
                })
                .cloned()
                .collect();
            if !copied.is_empty() {
                feed.send(FeedMsg::Records(copied));
            }
        }
        let mut by_pid: HashMap<u32, Vec<PerfRecord>> = HashMap::new();
        for r in records.drain(..) {
            match record_pid(&r) {
                Some(pid) => by_pid.entry(pid).or_default().push(r),
                None => {
                    if let PerfRecord::Lost { lost, .. } = r {
                        self.lost += lost;
                    }
                }
            }
        }
        self.records = records;
        let mut heard = Vec::with_capacity(by_pid.len());
        for (pid, records) in by_pid {
            if let Some(feed) = self.feeds.get(&pid) {
                feed.send(FeedMsg::Records(records));
                heard.push(pid);
            }
        }
        heard.sort_unstable();
        Drained {
            to_us: started.saturating_sub(PUBLISH_SLACK_US),
            heard,
        }
    }
}

/// The process a record is about.
fn record_pid(r: &PerfRecord) -> Option<u32> {
    match *r {
        PerfRecord::Sample(ref s) => Some(s.pid),
        PerfRecord::Exec { pid, .. }
        | PerfRecord::Comm { pid, .. }
        | PerfRecord::Mmap { pid, .. }
        | PerfRecord::Fork { pid, .. }
        | PerfRecord::Exit { pid, .. } => Some(pid),
        PerfRecord::Lost { .. } | PerfRecord::Throttle { .. } | PerfRecord::Unthrottle { .. } => {
            None
        }
    }
}
