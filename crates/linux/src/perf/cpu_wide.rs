//! One sampler per CPU for every process: the access source's event opened once on each online
//! CPU for all tasks (`pid = -1`), each CPU with a ring buffer of its own. A monitor of a whole
//! host costs one event per CPU, and the kernel's cost per sample is the same as for a sampler
//! per process; records of processes nobody asked for are skipped unread.
//!
//! Opening such events needs root or CAP_PERFMON (or `kernel.perf_event_paranoid` at most 0):
//! they sample every process, whoever owns it. Whose samples are used is the caller's rule to
//! keep ([`CpuSampler::drain`] takes it), as a per-process [`Sampler`](super::Sampler)'s
//! would be the kernel's ptrace check.
//!
//! The side-band records (exec, mmap, fork, exit) come for every process too, so the monitor
//! sees its targets' new mappings and ends as a per-process sampler does.

use super::error::PerfError;
use super::open::{self, online_cpus, open_event};
use super::record::{Layout, PerfRecord, SUPPORTED_SAMPLE_TYPE};
use super::ring::{Ring, page_size};
use super::sampler::{Counters, SamplerConfig, drain_rings};
use super::source::OpenSettings;
use std::os::fd::{AsFd, OwnedFd};

/// The events of every CPU and their rings. Dropping it stops sampling.
pub struct CpuSampler {
    layout: Layout,
    /// (cpu, ring) for each online CPU when it was opened.
    rings: Vec<(u32, Ring)>,
    _events: Vec<OwnedFd>,
    counters: Counters,
    notes: Vec<String>,
}

impl CpuSampler {
    /// Opens `config`'s source on every online CPU, for every process (`follow_forks` and
    /// `call_stacks` as for a per-process sampler; threads and processes come and go without
    /// being followed, since every task is sampled anyway).
    pub fn open(config: &SamplerConfig) -> Result<CpuSampler, PerfError> {
        config.validate()?;
        let mut notes = Vec::new();
        let spec = config.spec(&mut notes)?;
        debug_assert_eq!(spec.sample_type & !SUPPORTED_SAMPLE_TYPE, 0);
        open::check_spec(&spec)?;
        let cpus = online_cpus()?;
        let data_bytes = config.ring_pages * page_size();
        let mut attr = spec.attr(OpenSettings {
            enable_on_exec: false,
            follow_forks: false,
            wakeup_bytes: (data_bytes / 4) as u32,
        });
        // A CPU's event already sees every task: nothing to inherit.
        attr.set_inherit(0);
        attr.set_inherit_thread(0);
        let mut events = Vec::with_capacity(cpus.len());
        let mut rings = Vec::with_capacity(cpus.len());
        for cpu in cpus {
            let fd =
                open_event(&attr, -1, cpu as i32).map_err(|e| open::cpu_wide_error(e, &spec))?;
            let ring =
                Ring::map(fd.as_fd(), config.ring_pages).map_err(|e| match e.raw_os_error() {
                    Some(libc::EPERM | libc::ENOMEM) => PerfError::RingLimit {
                        kib: (data_bytes + page_size()) / 1024,
                    },
                    _ => PerfError::io("cannot map a perf ring buffer", e),
                })?;
            rings.push((cpu, ring));
            events.push(fd);
        }
        Ok(CpuSampler {
            layout: Layout {
                sample_type: spec.sample_type,
            },
            rings,
            _events: events,
            counters: Counters::default(),
            notes,
        })
    }

    /// Things the caller should record, e.g. that tracefs had to be mounted.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The CPUs sampled.
    pub fn nr_cpus(&self) -> usize {
        self.rings.len()
    }

    /// Hands every published record of a process `wanted` takes, and every record about no
    /// process in particular (lost records), to `f`, CPU by CPU: in time order within a CPU,
    /// not across CPUs. Records of other processes are skipped without being parsed.
    pub fn drain(&mut self, wanted: impl Fn(u32) -> bool, f: impl FnMut(PerfRecord)) {
        drain_rings(&mut self.rings, self.layout, &mut self.counters, wanted, f);
    }
}
