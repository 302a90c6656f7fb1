//! The `vaddr` operations: monitoring live processes' virtual address spaces with a sampled
//! access source (the tick tracepoint, cpu-clock sampling or a PMU).
//!
//! [`spawn`] or [`attach`] start sampling and return a [`VaddrOps`] (the [`Operations`] the
//! core drives) and a [`SampleClock`] (its [`Clock`](udamon_core::Clock)); the clock wakes in
//! batches to drain the ring buffers (`vaddr::rings`) and the operations replay each sampling
//! interval from the sample timestamps:
//!
//! - `init`/`update`: regions from `/proc/PID/maps` with the three-regions construction
//!   ([`ranges`]), refreshed every update interval with `set_regions`, and sooner (at most every
//!   [`EAGER_REFRESH_US`]) after perf reports a new mapping;
//! - `check_accesses`: the interval's samples, their data addresses recovered by the
//!   [`AddressDecoder`] (implicit stack references are counted but kept out of the regions),
//!   counted per target, reads and writes apart, with [`Context::record_sampled_accesses`];
//! - exec flushes the process's decode cache and the context's recent samples of it, reopens
//!   its pagemap for the residency check, and re-reads its mappings; a new executable mapping
//!   flushes the cache entries near it; a process whose threads have all exited is dropped
//!   (its regions removed) and noted;
//! - process trees ([`SamplerConfig::follow_forks`]): every process the monitored ones fork
//!   becomes a target of its own, added to the context when its fork record is handled (its
//!   samples arrive in the same rings with its own pid); [`attach_tree`] also attaches to the
//!   running descendants ([`tree`]);
//! - [`SourceStats`] count what happened to every sample; they are reported as events at every
//!   update and at the end;
//! - every recovered sample's facts (address, code site, thread, CPU, read or write; [`facts`])
//!   are reported as one [`SampleBatch`] event per target and aggregation window;
//! - `check_residency`: the parts of accessed regions without a present page (`PAGEMAP_SCAN`)
//!   are cut out before a window is reported: an access would have faulted them in;
//! - `apply_scheme`: DAMOS actions through each process's [`Actor`] (pidfd, current mappings,
//!   applied = what changed), with the `tid` and `cpu` filters answered from the window's
//!   samples in the region; `update` reports each target's memory to the context.

mod clock;
pub mod facts;
mod footprint;
mod numbering;
pub mod ranges;
mod residency;
pub(crate) mod rings;
mod shared;
mod source;

pub use footprint::MappingResident;
mod stats;
pub mod tree;
mod walks;

pub use rings::Feed;
pub use shared::{Drained, SharedSampling, Tapped};
pub use walks::WalkBudget;

pub use clock::{BATCH, Batch, SampleClock, monotonic_us};
pub use facts::{Fact, SampleBatch, Site, Stack};
pub use source::{
    ChosenSource, DEFAULT_CPUCLOCK_HZ, SourceChoice, choose_source, cpuclock_source, source_name,
};
pub use stats::SourceStats;
pub use tree::proc_cmdline;

use crate::actions::Actor;
use crate::actions::pagescan::PageMap;
use crate::decode::{
    Access, AccessKind, AddressDecoder, CodeReader, DropReason, SamplePoint, SegmentBases, UserRegs,
};
use crate::executed::ExecutedName;
use crate::maps::{Mapping, Maps, MapsError, is_kernel_thread, read_maps};
use crate::perf::{
    AccessSource, CpuClock, PerfError, PerfRecord, PmuEvent, ProcessMemory, REGS_ABI_32,
    REGS_ABI_64, Rate, Sample, Sampler, SamplerConfig,
};
use crate::referenced::{Referenced, ReferencedProbe};
use facts::Facts;
use footprint::Footprint;
use residency::Residency;
use rings::{FeedMsg, Rings};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::rc::Rc;
use thiserror::Error;
use udamon_core::damos::{Applied, ApplyEnv, FilterKind, Scheme};
use udamon_core::layout::set_regions;
use udamon_core::working_set::ResidentRange;
use udamon_core::{AddrRange, Attrs, Context, Operations, OpsError, Region, SampledAccess, Target};

/// After perf reports a new mapping, regions are refreshed at most this often (µs) before the
/// next update interval, so that memory mapped after start is monitored within a fraction of a
/// second rather than a whole update interval.
pub const EAGER_REFRESH_US: u64 = 200_000;

/// Monitoring attributes for sampled sources (see [`sampled_attrs`]).
pub const SAMPLED_SAMPLE_US: u64 = 5_000;
pub const SAMPLED_UPDATE_US: u64 = 1_000_000;
pub use udamon_core::attrs::{SAMPLED_MAX_REGIONS, SAMPLED_MIN_REGIONS};
/// Samples an aggregation window should hold on average (see [`sampled_attrs`]).
pub const SAMPLES_PER_WINDOW: u64 = 100;
/// The shortest aggregation window for sampled sources (see [`sampled_attrs`]).
pub const MIN_SAMPLED_AGGR_US: u64 = 400_000;
/// The tick source's rate: one sample per scheduler tick of a busy CPU (CONFIG_HZ, 250 on
/// common distribution kernels and on the test VM).
pub const TICK_HZ: u64 = 250;

/// Default attributes for `source`, chosen by measurement (tests/vaddr_accuracy.rs).
///
/// A few hundred samples per second spread over a process's memory carry far less information
/// per window than DAMON's one probe per region per sampling interval. A region that gets no
/// sample in a window looks unaccessed, so:
/// - the aggregation interval holds at least [`SAMPLES_PER_WINDOW`] samples of a busy thread
///   at the nominal rate and lasts at least [`MIN_SAMPLED_AGGR_US`] (at most 2 s): 400 ms for
///   both cpuclock at its default 500 Hz and the 250 Hz tick. With 200 ms windows the tick
///   source reported 88–95 MiB of zigzag's 100 MiB working set and cpuclock 87.5–95 MiB (the
///   cpu-clock event delivers only 75–98 % of its nominal rate here); with 400 ms both report
///   94–100 MiB; with 600 ms the tick's stairs median grows to 13 MiB (windows straddle steps);
/// - the region count is capped near what a window's samples can tell apart (60), and at least
///   20 regions keep the merge size limit (the monitored size / `min_nr_regions`) small, so that
///   a merged cold region that happens to contain a little warm memory cannot report much
///   untouched memory as accessed. Against 10..200, 10..100, 10..40, 20..200, 30..200 and
///   50..200 regions (and 100/300/1000 ms windows), 20..60 gave the least never-touched memory
///   reported accessed on the static workload (0.2–2 % of byte-snapshots) with zigzag's working
///   set right.
pub fn sampled_attrs(source: &AccessSource) -> Attrs {
    let rate_hz = match source {
        AccessSource::Tick => TICK_HZ,
        AccessSource::CpuClock(CpuClock { rate, .. })
        | AccessSource::Pmu(PmuEvent { rate, .. }) => {
            match *rate {
                Rate::Frequency(f) => f,
                // A period in event counts: nanoseconds for the clocks; a guess for a PMU.
                Rate::Period(p) => 1_000_000_000 / p.max(1),
            }
        }
    };
    let aggr =
        (SAMPLES_PER_WINDOW * 1_000_000 / rate_hz.max(1)).clamp(MIN_SAMPLED_AGGR_US, 2_000_000);
    Attrs {
        sample_interval_us: SAMPLED_SAMPLE_US,
        aggr_interval_us: aggr / SAMPLED_SAMPLE_US * SAMPLED_SAMPLE_US,
        ops_update_interval_us: SAMPLED_UPDATE_US,
        min_nr_regions: SAMPLED_MIN_REGIONS,
        max_nr_regions: SAMPLED_MAX_REGIONS,
        ..Attrs::default()
    }
}

#[derive(Debug, Error)]
pub enum VaddrError {
    #[error(transparent)]
    Perf(#[from] PerfError),
    #[error(transparent)]
    Maps(#[from] MapsError),
    #[error("process {0} exited while monitoring was being set up")]
    ExitedDuringSetup(u32),
    #[error("process {0} is given twice")]
    DuplicatePid(u32),
    #[error("no process to monitor")]
    NoTarget,
}

/// Something that happened to a target, for the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VaddrEventKind {
    /// The process executed a new program (`comm` is its name, `cmdline` its command line, or
    /// `comm` again when the process was gone before it was read); its caches were flushed.
    Exec {
        target: usize,
        comm: String,
        cmdline: String,
    },
    /// A process forked by a monitored one became target `target` (process trees only);
    /// `parent` is the forking process's target, `cmdline` the parent's command line (the
    /// child runs the same program until it execs).
    TargetAdded {
        target: usize,
        pid: u32,
        parent: Option<usize>,
        cmdline: String,
    },
    /// Every thread of the process exited; `status` is a spawned child's exit code (unknown for
    /// the processes it forked, which are not ours to wait for).
    Exit {
        target: usize,
        status: Option<i32>,
    },
    /// The process's mappings, when monitoring starts and whenever they change; its executable
    /// is named by the path it was executed by, when known ([`Maps::shown`]).
    Mappings {
        target: usize,
        mappings: Vec<Mapping>,
    },
    /// The kernel's accessed bits of the target over the last `--referenced` period.
    Referenced {
        target: usize,
        found: Referenced,
    },
    /// Its resident bytes per mapping, from a walk of its page tables that just completed.
    Resident {
        target: usize,
        mappings: Vec<MappingResident>,
    },
    /// The source's counters so far.
    Stats(SourceStats),
    /// A target's recovered samples of one aggregation window.
    Samples(SampleBatch),
    Note(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaddrEvent {
    /// On the context's time line (CLOCK_MONOTONIC µs).
    pub time_us: u64,
    pub kind: VaddrEventKind,
}

/// The events of a run, shared between the operations that note them and whoever records
/// them while the monitoring loop runs (the loop holds the operations meanwhile).
#[derive(Debug, Clone, Default)]
pub struct EventLog(Rc<RefCell<Vec<VaddrEvent>>>);

impl EventLog {
    pub(crate) fn push(&self, time_us: u64, kind: VaddrEventKind) {
        self.0.borrow_mut().push(VaddrEvent { time_us, kind });
    }

    /// Events since the last call, oldest first.
    pub fn take(&self) -> Vec<VaddrEvent> {
        let mut events = std::mem::take(&mut *self.0.borrow_mut());
        // Events are noted as they are found, not always in time order.
        events.sort_by_key(|e| e.time_us);
        events
    }
}

impl VaddrEvent {
    /// The text of a note (what a scheme could not do, what a dry run would have done).
    pub fn into_note(self) -> Option<String> {
        match self.kind {
            VaddrEventKind::Note(text) => Some(text),
            _ => None,
        }
    }
}

/// Starts `program args...` with sampling enabled from its exec on; monitors it to its exit.
pub fn spawn<S: AsRef<OsStr>>(
    program: impl AsRef<OsStr>,
    args: &[S],
    config: &SamplerConfig,
) -> Result<(VaddrOps, SampleClock), VaddrError> {
    let sampler = Sampler::spawn(program.as_ref(), args, config)?;
    let pid = sampler.pid();
    // A command that exits at once leaves no maps: it is monitored as an empty address space
    // that ends immediately.
    let maps = read_maps(pid).unwrap_or_default();
    let cmdline = std::iter::once(program.as_ref())
        .chain(args.iter().map(AsRef::as_ref))
        .map(OsStr::to_string_lossy)
        .collect::<Vec<_>>()
        .join(" ");
    let proc = Proc::new(pid, maps, monotonic_us(), None, cmdline);
    Ok(VaddrOps::build(vec![(sampler, proc)], config))
}

/// Starts sampling the running processes `pids`, all their threads and threads created later
/// (and, with `config.follow_forks`, processes they fork later).
pub fn attach(pids: &[u32], config: &SamplerConfig) -> Result<(VaddrOps, SampleClock), VaddrError> {
    let procs: Vec<(u32, Option<usize>)> = pids.iter().map(|&p| (p, None)).collect();
    attach_procs(&procs, config)
}

/// [`attach`] to `pids` and all their running descendants (each a target after its parent),
/// following the processes any of them fork later.
pub fn attach_tree(
    pids: &[u32],
    config: &SamplerConfig,
) -> Result<(VaddrOps, SampleClock), VaddrError> {
    let mut procs: Vec<(u32, Option<usize>)> = Vec::new();
    for (i, &pid) in pids.iter().enumerate() {
        if pids[..i].contains(&pid) {
            return Err(VaddrError::DuplicatePid(pid));
        }
        if procs.iter().any(|&(p, _)| p == pid) {
            // A descendant of a pid given before it: one target.
            continue;
        }
        procs.push((pid, None));
        for (child, parent) in tree::descendants(pid) {
            if procs.iter().all(|&(p, _)| p != child) {
                let parent = procs.iter().position(|&(p, _)| p == parent);
                procs.push((child, parent));
            }
        }
    }
    let config = SamplerConfig {
        follow_forks: true,
        ..*config
    };
    attach_procs(&procs, &config)
}

/// Attaches to each (pid, parent target) in turn.
fn attach_procs(
    procs: &[(u32, Option<usize>)],
    config: &SamplerConfig,
) -> Result<(VaddrOps, SampleClock), VaddrError> {
    if procs.is_empty() {
        return Err(VaddrError::NoTarget);
    }
    let mut parts = Vec::with_capacity(procs.len());
    for (i, &(pid, parent)) in procs.iter().enumerate() {
        if procs[..i].iter().any(|&(p, _)| p == pid) {
            return Err(VaddrError::DuplicatePid(pid));
        }
        // Maps first: the clearer error for a wrong pid, someone else's process or a kernel
        // thread (whose maps read empty, like an exited process's).
        if read_maps(pid)?.is_empty() && is_kernel_thread(pid) {
            return Err(MapsError::KernelThread(pid).into());
        }
        let sampler = Sampler::attach(pid, config)?;
        let maps = match read_maps(pid) {
            Ok(m) if !m.is_empty() => m,
            Ok(_) | Err(MapsError::NoSuchProcess(_)) => {
                return Err(VaddrError::ExitedDuringSetup(pid));
            }
            Err(e) => return Err(e.into()),
        };
        let proc = Proc::new(pid, maps, monotonic_us(), parent, proc_cmdline(pid));
        parts.push((sampler, proc));
    }
    Ok(VaddrOps::build(parts, config))
}

/// Reads a process's code for the decoder.
pub(crate) struct Code(pub(crate) ProcessMemory);

impl CodeReader for Code {
    fn read_code(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.0.read_code(addr, buf)
    }
}

/// Where the sampled registers of a source stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// cpu-clock of user mode: the interrupted instruction boundary.
    User,
    /// The tick tracepoint: the interrupted user context, or the entry of a system call.
    Tick,
    /// The PMU gives the data address itself.
    Pmu,
}

impl Point {
    pub(crate) fn of(source: &AccessSource) -> Point {
        match source {
            AccessSource::CpuClock(_) => Point::User,
            AccessSource::Tick => Point::Tick,
            AccessSource::Pmu(_) => Point::Pmu,
        }
    }
}

struct Proc {
    pid: u32,
    /// The target of the process that forked this one, when that one is monitored too.
    parent: Option<usize>,
    /// The command line it was started with, or of its last exec.
    cmdline: String,
    /// Its mappings as last read ([`Proc::reread_maps`]).
    maps: Maps,
    /// When `maps` was read (CLOCK_MONOTONIC µs, the samples' clock): samples taken after it may
    /// lie in mappings it lacks.
    maps_us: u64,
    /// perf reported a mapping that the regions may not cover yet (`maps` may lack it too).
    maps_stale: bool,
    /// The ranges its regions were last set to cover.
    ranges: Vec<AddrRange>,
    /// The mappings last reported, as reports name them ([`VaddrEventKind::Mappings`]).
    reported_maps: Vec<Mapping>,
    decoder: AddressDecoder,
    code: Code,
    /// When the process ended, once known.
    end_us: Option<u64>,
    status: Option<i32>,
    /// Its end was reported and its regions removed.
    dropped: bool,
    /// Applies schemes' actions to it.
    actor: Actor,
    /// Tells which parts of its accessed regions hold no memory.
    residency: Residency,
    /// Counts its resident bytes per mapping.
    footprint: Footprint,
    /// The kernel's accessed bits per mapping, when asked for (`set_referenced`).
    referenced: Option<ReferencedProbe>,
    /// Its regions were said to be coarser than the bound asks for
    /// ([`ranges::coarse_regions_note`]).
    coarse_noted: bool,
}

impl Proc {
    fn new(pid: u32, maps: Maps, now_us: u64, parent: Option<usize>, cmdline: String) -> Proc {
        // One pagemap descriptor for every reader of it: a served process costs few.
        let pagemap = PageMap::open(pid);
        Proc {
            pid,
            parent,
            cmdline,
            maps: maps.executed_as(ExecutedName::read(pid)),
            maps_us: now_us,
            maps_stale: false,
            ranges: Vec::new(),
            reported_maps: Vec::new(),
            decoder: AddressDecoder::new(),
            code: Code(ProcessMemory::new(pid)),
            end_us: None,
            status: None,
            dropped: false,
            actor: Actor::new(pid, PageMap::share(&pagemap)),
            residency: Residency::of(pagemap.as_ref().ok().cloned()),
            footprint: Footprint::of(pagemap.ok()),
            referenced: None,
            coarse_noted: false,
        }
    }

    /// Re-reads its mappings: the one place that does once it is monitored. Fails once the
    /// process is gone (or no longer ours to read), leaving the last mappings.
    fn reread_maps(&mut self) -> Result<(), MapsError> {
        let fresh = read_maps(self.pid)?;
        self.maps = fresh.executed_as(self.maps.executed().cloned());
        // When it was read, not when it was asked for: records are handled after they are
        // taken, so the copy holds what was mapped at every sample stamped before now.
        self.maps_us = monotonic_us();
        Ok(())
    }
}

/// A sample outside the known mappings re-reads them at most this often (µs) while a new
/// mapping is pending: a burst of such samples costs one read.
const LOOKUP_REREAD_US: u64 = 10_000;

/// Operations on live processes with a sampled source; see the module documentation.
pub struct VaddrOps {
    name: String,
    point: Point,
    /// Processes forked by targets become targets.
    follow_forks: bool,
    /// Schemes' actions are only worked out (see [`VaddrOps::set_dry_run`]); new processes
    /// inherit the setting.
    dry_run: bool,
    procs: Vec<Proc>,
    feed: Feed,
    pending: VecDeque<PerfRecord>,
    /// Each target's samples of the sampling interval being handled.
    addrs: Vec<Vec<SampledAccess>>,
    /// Per target, the instruction addresses of those samples, in the same order.
    ips: Vec<Vec<u64>>,
    stats: SourceStats,
    /// Recovered samples of processes that had exited, which no region holds.
    samples_after_exit: u64,
    events: EventLog,
    /// How often the kernel's accessed bits are read (`set_referenced`), in µs.
    referenced_period_us: Option<u64>,
    /// Every recovered sample's facts, for the record.
    facts: Facts,
    /// Samples carry their user call chains ([`SamplerConfig::call_stacks`]).
    call_stacks: bool,
    /// The page-table walks' budget, when shared with other processes' monitoring.
    walks: Option<WalkBudget>,
}

impl VaddrOps {
    fn build(parts: Vec<(Sampler, Proc)>, config: &SamplerConfig) -> (VaddrOps, SampleClock) {
        let feed = Feed::default();
        let (samplers, procs): (Vec<Sampler>, Vec<Proc>) = parts.into_iter().unzip();
        let notes: Vec<String> = samplers.iter().flat_map(|s| s.notes().to_vec()).collect();
        let ops = VaddrOps::fed(procs, &notes, config, feed.clone());
        (ops, SampleClock::new(Rings::new(samplers, feed)))
    }

    /// Operations on `procs` whose records come through `feed`, from samplers someone else
    /// drains; `notes` are the samplers' notes for the record.
    fn fed(procs: Vec<Proc>, notes: &[String], config: &SamplerConfig, feed: Feed) -> VaddrOps {
        let now = monotonic_us();
        let events = EventLog::default();
        for note in notes {
            events.push(now, VaddrEventKind::Note(note.clone()));
        }
        let source = &config.source;
        VaddrOps {
            name: format!("vaddr/{}", source_name(source)),
            follow_forks: config.follow_forks,
            dry_run: false,
            point: Point::of(source),
            addrs: vec![Vec::new(); procs.len()],
            ips: vec![Vec::new(); procs.len()],
            procs,
            feed: feed.clone(),
            pending: VecDeque::new(),
            stats: SourceStats::default(),
            samples_after_exit: 0,
            events,
            referenced_period_us: None,
            facts: Facts::default(),
            call_stacks: config.call_stacks,
            walks: None,
        }
    }

    /// One empty target per process, in the order given: add them to the context before
    /// starting it.
    pub fn targets(&self) -> Vec<Target> {
        self.procs
            .iter()
            .map(|p| Target::new(Some(p.pid)))
            .collect()
    }

    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(|p| p.pid).collect()
    }

    /// Target `t`'s command line (as started, or after its last exec).
    pub fn cmdline(&self, t: usize) -> &str {
        &self.procs[t].cmdline
    }

    /// The target of the process that forked target `t`, when that one is a target too.
    pub fn parent(&self, t: usize) -> Option<usize> {
        self.procs[t].parent
    }

    pub fn stats(&self) -> &SourceStats {
        &self.stats
    }

    /// Events since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<VaddrEvent> {
        self.take_action_notes();
        self.events.take()
    }

    /// A handle on the events as they are noted, for reading them while the monitoring loop
    /// holds the operations (each event is read once, through this or [`Self::take_events`]).
    pub fn event_log(&self) -> EventLog {
        self.events.clone()
    }

    /// Has its page-table walks (residency checks and footprints) draw on `budget`, shared
    /// with other processes' monitoring, instead of a budget per window of its own.
    pub fn share_walks(&mut self, budget: WalkBudget) {
        self.walks = Some(budget);
    }

    /// Has its code sites named by `symbolizer`, shared with other processes' monitoring:
    /// a library many of them run (libc, and its debug file, inflated) is read once, not once
    /// per process.
    pub fn share_symbolizer(&mut self, symbolizer: Rc<crate::symbolize::Symbolizer>) {
        self.facts.share_symbolizer(symbolizer);
    }

    /// Compute and report (as notes, one per apply pass and action) what schemes would do,
    /// without doing it: nothing counts as applied.
    pub fn set_dry_run(&mut self, on: bool) {
        self.dry_run = on;
        for p in &mut self.procs {
            p.actor.set_dry_run(on);
        }
    }

    /// Also read the kernel's accessed bits of every process, per mapping, every `period_us`
    /// (at the update that follows it): see [`crate::referenced`] for what it costs.
    pub fn set_referenced(&mut self, period_us: u64) {
        self.referenced_period_us = Some(period_us);
        for p in &mut self.procs {
            p.referenced = Some(ReferencedProbe::new(p.pid));
        }
    }

    /// Reads the accessed bits of the processes whose period has passed.
    fn probe_referenced(&mut self, now_us: u64) {
        let Some(period) = self.referenced_period_us else {
            return;
        };
        for t in 0..self.procs.len() {
            let p = &mut self.procs[t];
            let Some(probe) = p.referenced.as_mut().filter(|_| !p.dropped) else {
                continue;
            };
            if probe.cleared_us().is_some_and(|c| now_us < c + period) {
                continue;
            }
            match probe.probe(now_us) {
                Ok(Some(mut found)) => {
                    if let Some(executed) = p.maps.executed() {
                        for m in &mut found.mappings {
                            executed.rename_text(&mut m.name);
                        }
                    }
                    self.event(now_us, VaddrEventKind::Referenced { target: t, found })
                }
                Ok(None) => {}
                Err(e) => {
                    let pid = p.pid;
                    p.referenced = None;
                    self.event(
                        now_us,
                        VaddrEventKind::Note(format!(
                            "cannot read the kernel's accessed bits of process {pid} any more ({e}); its --referenced intervals end here"
                        )),
                    );
                }
            }
        }
    }

    /// The actors' notes join the events once an apply pass is over (a dry run's note sums up
    /// a whole pass).
    fn take_action_notes(&mut self) {
        for p in &mut self.procs {
            for (time_us, text) in p.actor.take_notes() {
                self.events.push(time_us, VaddrEventKind::Note(text));
            }
        }
    }

    /// Brings `outside_regions` up to the samples the context has counted into regions so far
    /// (by each window's end), with those of processes that had exited.
    fn count_outside_regions(&mut self, ctx: &Context) {
        self.stats.outside_regions = self.samples_after_exit + ctx.samples_outside_regions();
    }

    fn event(&mut self, time_us: u64, kind: VaddrEventKind) {
        self.events.push(time_us, kind);
    }

    /// Re-reads process `t`'s maps and makes its regions cover the new ranges.
    fn refresh(&mut self, ctx: &mut Context, t: usize, now_us: u64) {
        let min_sz = ctx.attrs().min_region_sz;
        let p = &mut self.procs[t];
        if p.dropped {
            return;
        }
        if p.reread_maps().is_err() {
            // Gone (or no longer ours to read): it ends now.
            p.end_us.get_or_insert(now_us);
            return;
        }
        p.maps_stale = false;
        let shown = p.maps.shown();
        if p.reported_maps != shown {
            p.reported_maps = shown;
            let mappings = p.reported_maps.clone();
            self.event(
                now_us,
                VaddrEventKind::Mappings {
                    target: t,
                    mappings,
                },
            );
        }
        let p = &mut self.procs[t];
        let ranges = ranges::monitoring_ranges(&p.maps, min_sz);
        if ranges == p.ranges {
            return;
        }
        if !p.coarse_noted
            && let Some(note) = ranges::coarse_regions_note(&ranges, &p.maps, ctx.attrs())
        {
            p.coarse_noted = true;
            let note = format!("target {t} (pid {}): {note}", p.pid);
            self.event(now_us, VaddrEventKind::Note(note));
        }
        let p = &mut self.procs[t];
        let regions = &mut ctx.targets_mut()[t].regions;
        let result = if ranges.is_empty() {
            regions.clear();
            Ok(())
        } else {
            set_regions(regions, &ranges, min_sz)
        };
        p.ranges = ranges;
        if let Err(e) = result {
            self.event(
                now_us,
                VaddrEventKind::Note(format!("cannot set the regions of target {t}: {e}")),
            );
        }
    }

    /// The newest target with pid `pid`: an older one with that pid ended before the pid was
    /// reused.
    fn target_of(&self, pid: u32) -> Option<usize> {
        self.procs.iter().rposition(|p| p.pid == pid)
    }

    /// Process `pid`, forked by `ppid` at `now_us`, becomes a target: in the context at once, so
    /// that its samples count from this interval on, with its regions from its mappings. A child
    /// that is already gone ends at once (its maps cannot be read) and is dropped with an exit
    /// event like any other.
    fn fork(&mut self, ctx: &mut Context, pid: u32, ppid: u32, now_us: u64) {
        if self
            .target_of(pid)
            .is_some_and(|t| self.procs[t].end_us.is_none())
        {
            // Known already: attached to while listing a tree, before its fork record arrived.
            return;
        }
        let parent = self.target_of(ppid);
        let cmdline = match parent {
            Some(t) => self.procs[t].cmdline.clone(),
            None => proc_cmdline(pid),
        };
        let t = self.procs.len();
        debug_assert_eq!(ctx.targets().len(), t, "one context target per process");
        let mut proc = Proc::new(pid, Maps::default(), now_us, parent, cmdline.clone());
        proc.actor.set_dry_run(self.dry_run);
        if self.referenced_period_us.is_some() {
            proc.referenced = Some(ReferencedProbe::new(pid));
        }
        self.procs.push(proc);
        self.addrs.push(Vec::new());
        self.ips.push(Vec::new());
        ctx.add_target(Target::new(Some(pid)));
        self.event(
            now_us,
            VaddrEventKind::TargetAdded {
                target: t,
                pid,
                parent,
                cmdline,
            },
        );
        self.refresh(ctx, t, now_us);
        if self.procs[t].end_us.is_some() {
            // Gone before it could be looked at: that schemes cannot act on it is no news.
            self.procs[t].actor.take_notes();
        }
    }

    fn receive(&mut self) {
        while let Some(msg) = self.feed.next() {
            match msg {
                FeedMsg::Records(recs) => self.pending.extend(recs),
                FeedMsg::Gone { pid, status, at_us } => {
                    if let Some(t) = self.target_of(pid) {
                        let p = &mut self.procs[t];
                        // A spawned child is reaped as soon as it exits; the end of its whole
                        // tree is reported again, without a status.
                        if status.is_some() {
                            p.status = status;
                        }
                        // The main thread's exit record, if seen, is the more exact time.
                        let end = p.end_us.map_or(at_us, |e| e.min(at_us));
                        p.end_us = Some(end);
                    }
                }
            }
        }
    }

    /// Handles one record of the sampling interval just finished.
    fn handle(&mut self, ctx: &mut Context, rec: PerfRecord) {
        match rec {
            PerfRecord::Sample(s) => self.sample(&s),
            PerfRecord::Lost { lost, .. } => self.stats.lost += lost,
            PerfRecord::Throttle { .. } => self.stats.throttled += 1,
            PerfRecord::Exec {
                pid, comm, time_ns, ..
            } => {
                if let Some(t) = self.target_of(pid) {
                    let p = &mut self.procs[t];
                    p.decoder.invalidate_all();
                    self.facts.forget_sites(t);
                    // The pagemap opened before names the address space that exec replaced.
                    let pagemap = PageMap::open(pid);
                    p.actor.exec(PageMap::share(&pagemap));
                    p.residency = Residency::of(pagemap.as_ref().ok().cloned());
                    p.footprint = Footprint::of(pagemap.ok());
                    p.maps = std::mem::take(&mut p.maps).executed_as(ExecutedName::read(pid));
                    // The full command line while the process still runs the new program.
                    p.cmdline = match proc_cmdline(pid) {
                        c if c.is_empty() => comm.clone(),
                        c => c,
                    };
                    let cmdline = p.cmdline.clone();
                    ctx.forget_recent_samples(t);
                    self.event(
                        time_ns / 1000,
                        VaddrEventKind::Exec {
                            target: t,
                            comm: comm.clone(),
                            cmdline,
                        },
                    );
                    self.refresh(ctx, t, time_ns / 1000);
                }
            }
            PerfRecord::Mmap {
                pid,
                addr,
                len,
                prot,
                ..
            } => {
                if let Some(t) = self.target_of(pid) {
                    let p = &mut self.procs[t];
                    if prot & libc::PROT_EXEC as u32 != 0 {
                        p.decoder.invalidate_range(addr, addr.saturating_add(len));
                    }
                    p.maps_stale = true;
                }
            }
            PerfRecord::Fork {
                pid, ppid, time_ns, ..
            } if self.follow_forks && pid != ppid => self.fork(ctx, pid, ppid, time_ns / 1000),
            PerfRecord::Exit {
                pid, tid, time_ns, ..
            } if pid == tid => {
                if let Some(t) = self.target_of(pid) {
                    let p = &mut self.procs[t];
                    let end = time_ns / 1000;
                    p.end_us = Some(p.end_us.map_or(end, |e| e.min(end)));
                }
            }
            _ => {}
        }
    }

    fn sample(&mut self, s: &Sample) {
        let Some(t) = self.target_of(s.pid) else {
            return;
        };
        self.stats.samples += 1;
        let p = &mut self.procs[t];
        let Some((addr, ip, access)) = recover_address(
            self.point,
            &mut p.decoder,
            &mut p.code,
            &p.maps,
            s,
            &mut self.stats,
        ) else {
            return;
        };
        self.stats.recovered += 1;
        let now_us = s.time_ns / 1000;
        if p.maps.lookup(addr).is_none() {
            // Maybe in a mapping created since the copy was read. The regions still wait for
            // their refresh (`maps_stale` stays), and a process that is gone ends there, not
            // here.
            if p.maps_stale && now_us >= p.maps_us + LOOKUP_REREAD_US {
                let _ = p.reread_maps();
            }
            // Outside only as judged by a copy read after the sample, or with no mapping
            // pending: a sample newer than the copy, while perf has told of a mapping the copy
            // may lack, cannot be judged (the re-read waits out a burst).
            let unjudged = p.maps_stale && now_us > p.maps_us;
            if p.maps.lookup(addr).is_none() && !unjudged {
                self.stats.outside_mapped += 1;
            }
        }
        self.addrs[t].push(SampledAccess {
            addr,
            read: matches!(access, Some(Access::Read | Access::ReadWrite)),
            write: matches!(access, Some(Access::Write | Access::ReadWrite)),
        });
        self.ips[t].push(ip);
        // The chain starts with the interrupted IP; its callers follow.
        let callers = self
            .call_stacks
            .then(|| s.callchain.get(1..).unwrap_or_default());
        self.facts
            .push(t, p.pid, &p.maps, ip, callers, |site, stack| Fact {
                addr,
                site,
                tid: s.tid,
                cpu: s.cpu,
                access,
                stack,
            });
    }
}

/// A sample's data address, the IP of its instruction and how it accessed memory (unknown
/// for a PMU's), recovered from its registers (`point` says where they were taken) or given
/// by the PMU; `None`, counted in `stats`, when there is none to use.
pub(crate) fn recover_address(
    point: Point,
    decoder: &mut AddressDecoder,
    code: &mut Code,
    maps: &Maps,
    s: &Sample,
    stats: &mut SourceStats,
) -> Option<(u64, u64, Option<Access>)> {
    Some(if let Some(addr) = s.addr {
        (addr, s.ip, None)
    } else if s.abi == REGS_ABI_32 {
        stats.abi32 += 1;
        return None;
    } else if s.abi != REGS_ABI_64 || point == Point::Pmu {
        stats.no_user_regs += 1;
        return None;
    } else {
        let regs = UserRegs::from_perf(&s.regs);
        let bases = SegmentBases::default();
        let result = match point {
            Point::Tick => decoder.recover(code, &regs, bases, SamplePoint::Tick),
            Point::User if s.in_kernel => {
                decoder.recover(code, &regs, bases, SamplePoint::KernelEntry)
            }
            _ => decoder.recover(code, &regs, bases, SamplePoint::UserBoundary),
        };
        match result {
            Ok(r) if r.kind == AccessKind::Stack => {
                stats.stack += 1;
                return None;
            }
            // A loaded value is an address only if it points into data memory: anything
            // else was a number, and the load's own address is lost.
            Ok(r) if r.kind == AccessKind::Chased => {
                let data = |m: &crate::maps::Mapping| m.perms.read && !m.perms.exec;
                if !maps.lookup(r.addr).is_some_and(data) {
                    stats.dropped[DropReason::Clobbered.index()] += 1;
                    return None;
                }
                stats.chased += 1;
                // The program reads the next node at the address found.
                (r.addr, regs.ip, Some(Access::Read))
            }
            Ok(r) => (r.addr, regs.ip, Some(r.access)),
            Err(reason) => {
                stats.dropped[reason.index()] += 1;
                return None;
            }
        }
    })
}

impl Operations for VaddrOps {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        while ctx.targets().len() < self.procs.len() {
            ctx.add_target(Target::new(Some(self.procs[ctx.targets().len()].pid)));
        }
        let min_sz = ctx.attrs().min_region_sz;
        for (t, p) in self.procs.iter_mut().enumerate() {
            if !ctx.targets()[t].regions.is_empty() {
                continue;
            }
            p.ranges = ranges::monitoring_ranges(&p.maps, min_sz);
            if !p.ranges.is_empty() {
                set_regions(&mut ctx.targets_mut()[t].regions, &p.ranges, min_sz)?;
            }
        }
        Ok(())
    }

    fn update(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        let now = ctx.now_us();
        for t in 0..self.procs.len() {
            self.refresh(ctx, t, now);
            let p = &mut self.procs[t];
            if !p.dropped
                && !ctx.schemes().is_empty()
                && let Some(memory) = p.actor.memory()
            {
                ctx.set_target_memory(t, memory);
            }
        }
        self.probe_referenced(now);
        self.count_outside_regions(ctx);
        self.event(now, VaddrEventKind::Stats(self.stats));
        Ok(())
    }

    fn prepare_access_checks(&mut self, _ctx: &mut Context) {
        // The last step's apply pass is over.
        self.take_action_notes();
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        // The samples of a window that ended with the last interval, before this one's.
        for batch in self.facts.window(ctx.window_us().0) {
            self.events
                .push(batch.end_us, VaddrEventKind::Samples(batch));
        }
        self.receive();
        let end_ns = ctx.interval_us().1.saturating_mul(1000);
        // Records stamped before the interval (late arrivals) count in it too.
        while self.pending.front().is_some_and(|r| r.time_ns() < end_ns) {
            let rec = self.pending.pop_front().expect("checked");
            self.handle(ctx, rec);
        }
        for t in 0..self.procs.len() {
            if !self.addrs[t].is_empty() {
                let mut addrs = std::mem::take(&mut self.addrs[t]);
                if self.procs[t].dropped {
                    self.samples_after_exit += addrs.len() as u64;
                } else {
                    ctx.record_sampled_code(t, &self.ips[t]);
                    ctx.record_sampled_accesses(t, &mut addrs);
                }
                self.ips[t].clear();
                addrs.clear();
                self.addrs[t] = addrs;
            }
        }
        self.count_outside_regions(ctx);
        let now = ctx.now_us();
        for t in 0..self.procs.len() {
            let p = &self.procs[t];
            if p.dropped {
                continue;
            }
            if p.end_us.is_some_and(|e| now >= e) {
                let status = p.status;
                self.procs[t].dropped = true;
                ctx.targets_mut()[t].regions.clear();
                self.event(now, VaddrEventKind::Exit { target: t, status });
            } else if p.maps_stale && now >= p.maps_us + EAGER_REFRESH_US {
                self.refresh(ctx, t, now);
            }
        }
    }

    fn check_residency(&mut self, ctx: &mut Context) {
        for (t, p) in self.procs.iter_mut().enumerate() {
            if p.dropped {
                continue;
            }
            let grant = |want| match &self.walks {
                Some(shared) => shared.grant(want),
                None => want,
            };
            let started = std::time::Instant::now();
            // A failed scan (the process just exited) tells nothing: the regions stay as they are.
            if let Ok(absent) = p
                .residency
                .absent(&ctx.targets()[t].regions, grant(residency::WALK_BUDGET))
            {
                let cut = ctx.cut_absent(t, &absent);
                self.stats.absent_bytes_cut += cut;
            }
            let walked = p
                .footprint
                .walk(&p.maps, grant(footprint::WALK_BUDGET), ctx.now_us());
            if let Some(shared) = &self.walks {
                shared.charge(started.elapsed());
            }
            if let Some(mappings) = walked {
                // Working sets count no more of a mapping than it holds.
                let executable = |start: u64| {
                    let i = p.maps.partition_point(|m| m.start < start);
                    p.maps
                        .get(i)
                        .is_some_and(|m| m.start == start && m.perms.exec)
                };
                ctx.set_resident(
                    t,
                    mappings
                        .iter()
                        .filter(|m| m.start < m.end)
                        .map(|m| ResidentRange {
                            range: AddrRange::new(m.start, m.end),
                            resident_bytes: m.resident_bytes,
                            executable: executable(m.start),
                        })
                        .collect(),
                );
                self.events.push(
                    ctx.now_us(),
                    VaddrEventKind::Resident {
                        target: t,
                        mappings,
                    },
                );
            }
        }
    }

    fn target_valid(&self, _ctx: &Context, target: usize) -> bool {
        self.procs.get(target).is_some_and(|p| !p.dropped)
    }

    fn apply_scheme(
        &mut self,
        target: usize,
        region: &Region,
        scheme: &Scheme,
        env: &ApplyEnv,
    ) -> Applied {
        // The window's samples in the region answer the scheme's filters about threads and
        // CPUs, once per region (the actor asks for every run of pages).
        let in_region = self
            .facts
            .current(target)
            .iter()
            .filter(|f| region.start <= f.addr && f.addr < region.end);
        let answers: Vec<(&FilterKind, bool)> = scheme
            .filters
            .ops()
            .iter()
            .filter_map(|f| match f.kind {
                FilterKind::Tid(tid) => Some((&f.kind, in_region.clone().any(|s| s.tid == tid))),
                FilterKind::Cpu(cpu) => Some((&f.kind, in_region.clone().any(|s| s.cpu == cpu))),
                _ => None,
            })
            .collect();
        let sampled_kind = |kind: &FilterKind| answers.iter().any(|&(k, yes)| yes && k == kind);
        match self.procs.get_mut(target) {
            Some(p) if !p.dropped => p.actor.apply(
                region,
                scheme,
                env.passed_sample_intervals,
                env.now_us,
                &sampled_kind,
            ),
            _ => Applied::default(),
        }
    }

    fn cleanup(&mut self, ctx: &mut Context) {
        self.take_action_notes();
        for batch in self.facts.finish(ctx.now_us()) {
            self.events
                .push(batch.end_us, VaddrEventKind::Samples(batch));
        }
        self.count_outside_regions(ctx);
        self.event(ctx.now_us(), VaddrEventKind::Stats(self.stats));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_about_a_hundred_samples() {
        let clock = |hz| {
            AccessSource::CpuClock(CpuClock {
                rate: Rate::Frequency(hz),
                ..CpuClock::default()
            })
        };
        let aggr = |s: AccessSource| sampled_attrs(&s).aggr_interval_us;
        assert_eq!(aggr(clock(DEFAULT_CPUCLOCK_HZ)), 400_000, "at least 400 ms");
        assert_eq!(aggr(AccessSource::Tick), 400_000);
        assert_eq!(aggr(clock(100)), 1_000_000, "100 samples at 100 Hz");
        assert_eq!(aggr(clock(10)), 2_000_000, "at most 2 s");
        let a = sampled_attrs(&AccessSource::Tick);
        assert_eq!(a.validate(), Ok(()));
        assert_eq!((a.min_nr_regions, a.max_nr_regions), (20, 60));
    }
}
