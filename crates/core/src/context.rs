//! The monitoring context and its loop, as a step machine counted in sampling intervals
//! (docs/algorithms.md#loop). One [`Context::step`] is one sampling interval; a [`Clock`] decides
//! whether it takes real time (live monitoring) or none (simulation, replay of timestamped
//! samples).
//!
//! Order of work at an aggregation boundary, as upstream (NEW) with the recording hook placed
//! where the `damon_aggregated` tracepoint fires: merge (updates ages) → enforce the minimum
//! region count → DAMOS apply (every step, when a scheme is due) → `after_aggregation`
//! callbacks → intervals tuning → reset → split. The guided adjustment (the default,
//! [`Adjustment::Guided`]) adds the cuts where accesses were seen
//! ([`adjust::split_at_sampled_extents`]) twice: before DAMOS apply for the cuts the window's
//! report may show (before the operations' residency check, which cuts out memory that holds no
//! pages), and before the reset for those that only refine the next window; and, for
//! accessed-bit sources, splits only regions seen accessed at random and probes the idle ones
//! ([`crate::probe`]). While every scheme is deactivated by its watermarks, a step only waits
//! and checks them again.

use crate::absent;
use crate::access_history::AccessHistory;
use crate::adjust::{self, IdleEvidence, MergeRule, SplitState};
use crate::attrs::{Adjustment, Attrs, AttrsError, PAGE_SIZE, convert_monitoring_result};
use crate::callbacks::Callbacks;
use crate::callbacks::{CallbackError, RunError};
use crate::damos::SchemeTriedRegions;
use crate::damos::{
    self, Applied, ApplyEnv, ApplyPass, DamosWalk, MetricSource, NoMetrics, Scheme, SchemeApplier,
    SchemeError,
};
use crate::ops::{Clock, Operations, OpsError, TargetMemory};
use crate::page_samples::PageSamples;
use crate::pending_samples::PendingSamples;
use crate::probe;
use crate::rand::Prng;
use crate::recent_samples::RecentSamples;
use crate::region::{AddrRange, Region, SampledAccess, SampledSpan, Target, mult_frac};
use crate::region_index::RegionIndex;
use crate::tuning;
use crate::working_set::{self, AddressSpace, Basis, Evidence, ResidentRange, WorkingSet};

/// The most accessed ranges a target's access history keeps (2 MiB).
const HISTORY_RANGES: usize = 1 << 17;
use std::ops::ControlFlow;

/// The level of the density test by which sampled sources merge regions: neighbours stay
/// apart when their samples split between them as unevenly as chance would in fewer than 30 %
/// of windows. Keeping alike neighbours apart costs a region for a window; merging unlike ones
/// costs accuracy, since a merged region reports all its bytes accessed when any got a sample
/// (a library's rare sample would report the untouched memory beside it). Over the accuracy
/// model's 40 layouts (`vaddr_accuracy_model.rs`), 0.05 and 0.1 left up to 1.3 % of
/// never-touched memory reported accessed, 0.3 at most 0.84 %, 0.5 up to 1.24 %.
pub const DENSITY_ALPHA: f64 = 0.3;

/// What the context keeps about one target beside its regions, as the kernel hangs a target's
/// state off its `damon_target`: the evidence its working sets and cuts weigh, and what the
/// operations told about it. A target that never got any of it keeps empty ones, which weigh
/// as nothing.
struct TargetKept {
    /// The sample addresses of its recent windows (sampled sources only).
    recent: RecentSamples,
    /// Its regions' sampling addresses for this interval's accessed-bit checks.
    sampling_addrs: Vec<u64>,
    /// Its sampled pages over the last minute, the evidence of its working set at page
    /// resolution (sampled sources only).
    pages: PageSamples,
    /// Its sampled instructions' pages over the last minute: the code it touched.
    code: PageSamples,
    /// Its mappings' resident bytes as the operations last walked them.
    resident: Vec<ResidentRange>,
    /// Its accessed memory, window by window, over the longest horizon: what its working sets
    /// count.
    history: AccessHistory,
    /// The lookup index for sampled addresses; it checks itself against the regions, so
    /// nothing that changes them has to invalidate it.
    region_index: RegionIndex,
    /// The window's samples not yet counted into its regions.
    pending: PendingSamples,
    /// What the operations observed about its memory.
    memory: Option<TargetMemory>,
}

impl Default for TargetKept {
    fn default() -> Self {
        TargetKept {
            recent: RecentSamples::default(),
            sampling_addrs: Vec::new(),
            pages: PageSamples::default(),
            code: PageSamples::default(),
            resident: Vec::new(),
            history: AccessHistory::new(working_set::LONGEST_US, HISTORY_RANGES),
            region_index: RegionIndex::default(),
            pending: PendingSamples::default(),
            memory: None,
        }
    }
}

impl TargetKept {
    /// The sampling addresses picked for `regions`, or none where they were picked for others.
    fn sampling_addrs_of<'k>(kept: Option<&'k TargetKept>, regions: &[Region]) -> &'k [u64] {
        kept.map(|k| &k.sampling_addrs[..])
            .filter(|a| a.len() == regions.len())
            .unwrap_or_default()
    }
}

/// Why monitoring stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A callback asked to stop.
    Requested,
    /// Every target became invalid (processes exited, the simulated workload ended).
    NoValidTarget,
}

pub struct Context {
    attrs: Attrs,
    /// Sampling intervals per aggregation, kept constant by the intervals tuner.
    aggr_samples: u64,
    targets: Vec<Target>,
    rng: Prng,
    passed_sample_intervals: u64,
    next_aggregation_sis: u64,
    next_ops_update_sis: u64,
    next_intervals_tune_sis: u64,
    /// The merge size limit, refreshed by `apply_min_nr_regions` after every merge.
    sz_limit: u64,
    split: SplitState,
    /// The current (or, during `check_accesses`, the just-finished) sampling interval.
    interval_us: (u64, u64),
    /// When the current aggregation window started.
    window_start_us: u64,
    /// Where the time line starts.
    start_us: u64,
    started: bool,
    /// The operations record sampled accesses ([`Context::record_sampled_accesses`]): regions
    /// merge by sample density rather than by DAMON's threshold.
    sampled: bool,
    /// What is kept about each target beside its regions, by target index: grown to a target
    /// on first use ([`Context::kept_mut`]).
    kept: Vec<TargetKept>,
    /// What the targets' addresses are: a process's memory, or the host's.
    space: AddressSpace,
    schemes: Vec<Scheme>,
    walk: DamosWalk,
    /// System metrics for quota goals and watermarks.
    metrics: Box<dyn MetricSource>,
    /// Whether every apply interval's tried regions are kept (a standing `damos_walk`).
    capture_tried: bool,
    /// The last completed capture of tried regions, per scheme.
    tried: Vec<SchemeTriedRegions>,
    /// How many captures completed so far.
    tried_captures: u64,
}

impl Context {
    /// A context with no targets. `seed` drives every random choice, so runs reproduce.
    pub fn new(attrs: Attrs, seed: u64) -> Result<Self, AttrsError> {
        attrs.validate()?;
        let si = attrs.sample_divisor();
        Ok(Context {
            attrs,
            aggr_samples: attrs.aggr_interval_us / si,
            targets: Vec::new(),
            rng: Prng::seeded(seed),
            passed_sample_intervals: 0,
            next_aggregation_sis: 0,
            next_ops_update_sis: 0,
            next_intervals_tune_sis: 0,
            sz_limit: 0,
            kept: Vec::new(),
            space: AddressSpace::Virtual,
            split: SplitState::default(),
            interval_us: (0, 0),
            window_start_us: 0,
            start_us: 0,
            started: false,
            sampled: false,
            schemes: Vec::new(),
            walk: DamosWalk::default(),
            metrics: Box::new(NoMetrics),
            capture_tried: false,
            tried: Vec::new(),
            tried_captures: 0,
        })
    }

    /// Adds a target, before starting or while running (a process forked by a monitored one):
    /// everything kept by target index (what [`TargetKept`] holds, schemes' passes) grows to
    /// it on first use, and it is adjusted and schemed from the next window.
    pub fn add_target(&mut self, target: Target) {
        self.targets.push(target);
    }

    /// What is kept about target `target`, grown to it if it had nothing yet.
    fn kept_mut(&mut self, target: usize) -> &mut TargetKept {
        if self.kept.len() <= target {
            self.kept.resize_with(target + 1, TargetKept::default);
        }
        &mut self.kept[target]
    }

    /// Grows what is kept to every target.
    fn keep_every_target(&mut self) {
        if let Some(last) = self.targets.len().checked_sub(1) {
            self.kept_mut(last);
        }
    }

    /// Where the time line starts (for live sources: the monotonic clock at start, so that
    /// sample timestamps and intervals share one time line). Only before [`Context::start`].
    pub fn set_start_time_us(&mut self, t_us: u64) {
        debug_assert!(
            !self.started,
            "the start time is fixed once monitoring started"
        );
        self.interval_us = (t_us, t_us);
        self.window_start_us = t_us;
        self.start_us = t_us;
    }

    /// Adds an operation scheme; it first applies one aggregation interval (or its apply
    /// interval) from now.
    pub fn add_scheme(&mut self, mut scheme: Scheme) -> Result<(), SchemeError> {
        scheme.validate()?;
        scheme.set_next_apply_sis(self.passed_sample_intervals, &self.attrs);
        self.schemes.push(scheme);
        Ok(())
    }

    /// Removes scheme `index` (its statistics go with it); `None` when there is no such scheme.
    pub fn remove_scheme(&mut self, index: usize) -> Option<Scheme> {
        (index < self.schemes.len()).then(|| self.schemes.remove(index))
    }

    pub fn schemes(&self) -> &[Scheme] {
        &self.schemes
    }

    /// Where quota goals and watermarks read system metrics (none by default).
    pub fn set_metric_source(&mut self, metrics: Box<dyn MetricSource>) {
        self.metrics = metrics;
    }

    /// Keep, for every apply interval, the regions each scheme was applied to (upstream's
    /// tried regions, through a `damos_walk` renewed after each completion).
    pub fn capture_tried_regions(&mut self, on: bool) {
        self.capture_tried = on;
    }

    /// The last captured tried regions, per scheme, with a count that grows with each capture
    /// (so that a reader can tell a new capture from one it has seen).
    pub fn tried_regions(&self) -> (u64, &[SchemeTriedRegions]) {
        (self.tried_captures, &self.tried)
    }

    /// Operations report what they observed about target `target`'s memory.
    pub fn set_target_memory(&mut self, target: usize, memory: TargetMemory) {
        self.kept_mut(target).memory = Some(memory);
    }

    pub fn target_memory(&self, target: usize) -> Option<TargetMemory> {
        self.kept.get(target).and_then(|k| k.memory)
    }

    pub fn attrs(&self) -> &Attrs {
        &self.attrs
    }

    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The targets, to change: the samples kept so far are counted into their regions first.
    pub fn targets_mut(&mut self) -> &mut [Target] {
        self.count_pending_samples();
        &mut self.targets
    }

    pub fn rng(&mut self) -> &mut Prng {
        &mut self.rng
    }

    pub fn passed_sample_intervals(&self) -> u64 {
        self.passed_sample_intervals
    }

    /// The sampling interval being prepared or, during `check_accesses`, just finished:
    /// `[start, end)` in microseconds on the context's time line.
    pub fn interval_us(&self) -> (u64, u64) {
        self.interval_us
    }

    /// Now: the end of the last completed sampling interval.
    pub fn now_us(&self) -> u64 {
        self.interval_us.1
    }

    /// Where the time line started (see [`Context::set_start_time_us`]).
    pub fn start_us(&self) -> u64 {
        self.start_us
    }

    /// The current aggregation window `[start, now)`; at `after_aggregation`, the completed one.
    pub fn window_us(&self) -> (u64, u64) {
        (self.window_start_us, self.now_us())
    }

    pub fn nr_regions(&self) -> usize {
        self.targets.iter().map(Target::nr_regions).sum()
    }

    /// `damon_nr_accesses_mvsum` (NEW): the region's access count over the last full window
    /// length, estimated mid-window from the partial count and the previous window.
    pub fn nr_accesses_mvsum(&self, r: &Region) -> u32 {
        nr_accesses_mvsum(
            &self.attrs,
            self.passed_sample_intervals,
            self.next_aggregation_sis,
            r,
        )
    }

    /// Pick every region's sampling address uniformly at random, as accessed-bit style sources
    /// do before each sampling interval. The addresses are kept beside the regions until the
    /// interval's check ([`Context::count_checked_accesses`]) reads them: sampled sources never
    /// pick one, and a region has no room for it.
    pub fn randomize_sampling_addrs(&mut self) {
        self.keep_every_target();
        for (t, kept) in self.targets.iter().zip(&mut self.kept) {
            kept.sampling_addrs.clear();
            let addrs = t.regions.iter().map(|r| self.rng.in_range(r.start, r.end));
            kept.sampling_addrs.extend(addrs);
        }
    }

    /// Target `target`'s regions, each with the address its access check reads: the one
    /// [`Context::randomize_sampling_addrs`] picked this interval, or the region's start where
    /// none was picked (a source that checks the first page of each region).
    pub fn regions_with_sampling_addrs(
        &mut self,
        target: usize,
    ) -> impl Iterator<Item = (&mut Region, u64)> {
        let regions = &mut self.targets[target].regions;
        let picked = TargetKept::sampling_addrs_of(self.kept.get(target), regions);
        regions.iter_mut().enumerate().map(move |(i, r)| {
            let addr = picked.get(i).copied().unwrap_or(r.start);
            (r, addr)
        })
    }

    /// Accessed-bit style sources, after the interval: `accessed(target, region, addr, rng)`
    /// says whether the page at `addr`, the region's sampling address, was accessed during it
    /// (`rng` for sources that decide by chance). Each region accessed counts the interval
    /// (`nr_accesses += 1`); in the guided adjustment it also keeps where the access was seen
    /// ([`Region::note_accessed_check`]), which the cuts of
    /// [`adjust::split_at_sampled_extents`] follow. The interval's sampling addresses are
    /// used up.
    pub fn count_checked_accesses(
        &mut self,
        mut accessed: impl FnMut(usize, &Region, u64, &mut Prng) -> bool,
    ) {
        let keep_where = self.guided();
        for (ti, t) in self.targets.iter_mut().enumerate() {
            let picked = TargetKept::sampling_addrs_of(self.kept.get(ti), &t.regions);
            for (i, r) in t.regions.iter_mut().enumerate() {
                let addr = picked.get(i).copied().unwrap_or(r.start);
                if accessed(ti, r, addr, &mut self.rng) {
                    if keep_where {
                        r.note_accessed_check(addr);
                    } else {
                        r.nr_accesses = r.nr_accesses.saturating_add(1);
                    }
                }
            }
        }
        for kept in &mut self.kept {
            kept.sampling_addrs.clear();
        }
    }

    fn guided(&self) -> bool {
        self.attrs.adjustment == Adjustment::Guided
    }

    /// Keeps the samples of target `target` that fell in the interval just finished. They are
    /// counted into its regions before anything next reads or changes them (the window's
    /// aggregation, a due scheme, the operations' update, [`Context::targets_mut`]): every
    /// sample in a region adds to its `raw_samples` (and, by its kind, to `read_samples` and
    /// `write_samples`), and a region's `nr_accesses` counts the intervals that drew a sample
    /// in it. The interval itself costs an append and the sample-sized records below, whatever
    /// the monitored size ([`crate::pending_samples`]). Sorts `samples` by address in place.
    /// A context that records sampled accesses merges its regions by sample density
    /// ([`DENSITY_ALPHA`]) from then on.
    pub fn record_sampled_accesses(&mut self, target: usize, samples: &mut [SampledAccess]) {
        // Kept for a target that does not exist, they would wait for it forever.
        assert!(
            target < self.targets.len(),
            "samples of target {target}, of {}",
            self.targets.len()
        );
        self.sampled = true;
        samples.sort_unstable_by_key(|s| s.addr);
        let now = self.now_us();
        let kept = self.kept_mut(target);
        kept.recent.add(samples.iter().map(|s| s.addr));
        kept.pages.add(now, samples.iter().map(|s| s.addr));
        kept.pending.add(samples);
    }

    /// Counts every target's kept samples into its regions ([`Context::record_sampled_accesses`]).
    fn count_pending_samples(&mut self) {
        for (t, kept) in self.targets.iter_mut().zip(&mut self.kept) {
            kept.pending
                .count_into(&mut kept.region_index, &mut t.regions);
        }
    }

    /// How many samples, over all targets and the whole run, fell in no region: counted when
    /// they are counted into the regions (by each window's end).
    pub fn samples_outside_regions(&self) -> u64 {
        self.kept.iter().map(|k| k.pending.outside_regions()).sum()
    }

    /// Cuts `absent` (sorted, disjoint ranges of target `target` that hold no memory) out of
    /// its accessed regions as regions not accessed, except the pages the window's samples fell
    /// in, within the region bound; see [`absent::cut_absent`]. Returns the bytes cut out.
    pub fn cut_absent(&mut self, target: usize, absent: &[AddrRange]) -> u64 {
        self.count_pending_samples();
        let others = self.nr_regions() - self.targets[target].nr_regions();
        let samples = self
            .kept
            .get_mut(target)
            .map_or(&[][..], |k| k.recent.current_sorted());
        absent::cut_absent(
            &mut self.targets[target].regions,
            absent,
            samples,
            self.sampled,
            self.attrs.min_region_sz,
            self.attrs.max_nr_regions as usize,
            others,
        )
    }

    /// Forgets where target `target`'s samples fell in its recent windows, for an address space
    /// that was replaced (exec): they would weigh as evidence about memory that is gone.
    pub fn forget_recent_samples(&mut self, target: usize) {
        if let Some(kept) = self.kept.get_mut(target) {
            kept.recent.clear();
            kept.pages.clear();
            kept.code.clear();
            kept.resident.clear();
            kept.history.clear();
        }
    }

    /// Keeps the window that just ended in each target's access history.
    fn note_window(&mut self) {
        self.keep_every_target();
        let now = self.now_us();
        for (t, kept) in self.targets.iter().zip(&mut self.kept) {
            let regions = t.regions.iter();
            let marked = regions.map(|r| (AddrRange::new(r.start, r.end), r.nr_accesses > 0));
            kept.history.push(now, marked);
        }
    }

    /// Says what the targets' addresses are (the host's physical memory is estimated as one
    /// memory: [`working_set::AddressSpace`]).
    pub fn set_address_space(&mut self, space: AddressSpace) {
        self.space = space;
    }

    /// Target `target`'s working sets over each of `horizons_us` (0: the window) as of the
    /// window that just ended: the one answer every view gives ([`working_set::working_sets`]).
    pub fn working_sets(&self, target: usize, horizons_us: &[u64]) -> Vec<WorkingSet> {
        let empty;
        let kept = match self.kept.get(target) {
            Some(kept) => kept,
            None => {
                empty = TargetKept::default();
                &empty
            }
        };
        let evidence = Evidence {
            history: &kept.history,
            data: &kept.pages,
            code: &kept.code,
            resident: &kept.resident,
            resident_total: kept.memory.map(|m| m.resident_bytes),
            walked_total: working_set::walked_total(&kept.resident),
            window_us: self.attrs.aggr_interval_us,
            space: self.space,
            basis: Basis::Pages,
        };
        working_set::working_sets(&evidence, self.now_us(), horizons_us)
    }

    /// Counts the instruction addresses of target `target`'s samples of the interval just
    /// finished (those whose data address [`Context::record_sampled_accesses`] took): the code
    /// they were fetched from is touched memory too ([`working_set::estimate_code`]).
    pub fn record_sampled_code(&mut self, target: usize, ips: &[u64]) {
        let now = self.now_us();
        self.kept_mut(target).code.add(now, ips.iter().copied());
    }

    /// Records target `target`'s mappings' resident bytes (sorted, disjoint), as the
    /// operations walked them: working sets count no more than this of any mapping.
    pub fn set_resident(&mut self, target: usize, mappings: Vec<ResidentRange>) {
        self.kept_mut(target).resident = mappings;
    }

    /// The estimated touched bytes of each of target `target`'s regions in the window that
    /// just ended (0 for regions not accessed in it): what records keep beside `nr_accesses`,
    /// each region's share of the window's working set ([`Context::working_sets`] at horizon
    /// 0), so that a record's regions add up to what every view reads. `None` for sources
    /// without samples, whose accessed regions count whole.
    pub fn window_touched_bytes(&self, target: usize) -> Option<Vec<u64>> {
        self.targets.get(target).filter(|_| self.sampled)?;
        let window = self.working_sets(target, &[0]).pop()?;
        self.touched_bytes_in(target, &window)
    }

    /// [`Context::window_touched_bytes`] from the window's working set `window`, estimated
    /// already (with other horizons, say: the ladder is the same whichever are asked), so that
    /// a caller that has it does not estimate it twice.
    pub fn touched_bytes_in(&self, target: usize, window: &WorkingSet) -> Option<Vec<u64>> {
        let t = self.targets.get(target).filter(|_| self.sampled)?;
        Some(regions_touched_bytes(&t.regions, window))
    }

    /// The bytes of memory each of target `target`'s regions holds: its share of the resident
    /// bytes of the mappings it overlaps ([`working_set::resident_within`]), its size where
    /// those are unknown; for physical memory, the memory in use spread over its regions. A
    /// region's range can reach over address space that holds nothing.
    pub fn regions_memory(&self, target: usize) -> Vec<u64> {
        let Some(t) = self.targets.get(target) else {
            return Vec::new();
        };
        let ranges: Vec<AddrRange> = t
            .regions
            .iter()
            .map(|r| AddrRange::new(r.start, r.end))
            .collect();
        let resident = self.kept.get(target).map_or(&[][..], |k| &k.resident[..]);
        let memory = working_set::resident_within(&ranges, resident);
        let in_use = self.target_memory(target).map(|m| m.resident_bytes);
        match (self.space, in_use) {
            (AddressSpace::Physical, Some(in_use)) => {
                let all: u64 = memory.iter().sum::<u64>().max(1);
                let share = (in_use as f64 / all as f64).min(1.0);
                memory.iter().map(|&m| (m as f64 * share) as u64).collect()
            }
            _ => memory,
        }
    }

    /// Change the monitoring attributes while running (`damon_set_attrs`): results so far are
    /// converted to the new intervals and the deadlines restart from now.
    pub fn set_attrs(&mut self, attrs: Attrs) -> Result<(), AttrsError> {
        attrs.validate()?;
        self.aggr_samples = attrs.aggr_interval_us / attrs.sample_divisor();
        self.apply_attrs(attrs);
        Ok(())
    }

    fn apply_attrs(&mut self, attrs: Attrs) {
        self.count_pending_samples();
        let aggregating = self.passed_sample_intervals < self.next_aggregation_sis;
        let old = self.attrs;
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            convert_monitoring_result(r, &old, &attrs, aggregating);
        }
        self.attrs = attrs;
        let si = attrs.sample_divisor();
        self.next_aggregation_sis = self.passed_sample_intervals + attrs.aggr_interval_us / si;
        self.next_ops_update_sis = self.passed_sample_intervals + attrs.ops_update_interval_us / si;
        for s in &mut self.schemes {
            s.set_next_apply_sis(self.passed_sample_intervals, &attrs);
        }
    }

    /// `kdamond_init_ctx`: deadlines, initial regions, and the minimum region count.
    pub fn start(&mut self, ops: &mut dyn Operations) -> Result<(), OpsError> {
        let si = self.attrs.sample_divisor();
        self.passed_sample_intervals = 0;
        self.next_aggregation_sis = self.attrs.aggr_interval_us / si;
        self.next_ops_update_sis = self.attrs.ops_update_interval_us / si;
        self.next_intervals_tune_sis =
            self.next_aggregation_sis * self.attrs.intervals_goal.aggrs as u64;
        for s in &mut self.schemes {
            s.set_next_apply_sis(0, &self.attrs);
        }
        ops.init(self)?;
        self.sz_limit = self.apply_min_nr_regions();
        self.started = true;
        Ok(())
    }

    fn apply_min_nr_regions(&mut self) -> u64 {
        adjust::apply_min_nr_regions(
            &mut self.targets,
            self.attrs.min_nr_regions,
            self.attrs.min_region_sz,
        )
    }

    /// One sampling interval. Returns `Break` with the reason when monitoring should stop.
    pub fn step(
        &mut self,
        ops: &mut dyn Operations,
        clock: &mut dyn Clock,
        callbacks: &mut dyn Callbacks,
    ) -> Result<ControlFlow<StopReason>, RunError> {
        debug_assert!(self.started, "start() the context before stepping it");
        if self.wait_activation(clock) {
            let flow = callbacks.after_wait(self).map_err(RunError::Callback)?;
            return Ok(self.stop_unless_valid(ops, flow));
        }
        let snap_aggr = self.next_aggregation_sis;
        let snap_upd = self.next_ops_update_sis;
        let start = self.interval_us.1;
        self.interval_us = (start, start + self.attrs.sample_interval_us);

        ops.prepare_access_checks(self);
        clock.wait_until(self.interval_us.1);
        self.passed_sample_intervals += 1;
        ops.check_accesses(self);
        let mut flow = callbacks.after_sampling(self).map_err(RunError::Callback)?;

        let aggregation = self.passed_sample_intervals >= snap_aggr;
        if aggregation {
            self.count_pending_samples();
            let sizes = self.merge_regions();
            self.sz_limit = adjust::apply_min_nr_regions_of(
                &mut self.targets,
                self.attrs.min_nr_regions,
                self.attrs.min_region_sz,
                sizes,
            );
            // Before schemes and the recorder see the window: a part of a region that surely
            // got no sample, or that holds no memory, is reported, and acted on, as what it
            // was: not accessed. Both draw on what the region bound leaves, and the samples'
            // cuts go first: one cut takes off all of a region's unsampled side, where memory
            // that is resident here and there (a sparsely written reservation) would take the
            // residency cuts a region for every gap between its pages, and use up the bound
            // before the large idle part beside a small hot area is cut off.
            self.split_at_sampled_extents(IdleEvidence::Report);
            ops.check_residency(self);
            let now = self.now_us();
            for kept in &mut self.kept {
                kept.pages.settle(now);
                kept.code.settle(now);
            }
            self.note_window();
        }
        self.apply_schemes(ops);
        if aggregation {
            if callbacks
                .after_aggregation(self)
                .map_err(RunError::Callback)?
                .is_break()
            {
                flow = ControlFlow::Break(());
            }
            self.maybe_tune_intervals(snap_aggr);
            let si = self.attrs.sample_divisor();
            self.next_aggregation_sis = snap_aggr + self.attrs.aggr_interval_us / si;
            self.split_at_sampled_extents(IdleEvidence::Refine);
            self.reset_aggregated();
            self.split_regions();
        }

        if self.passed_sample_intervals >= snap_upd {
            let si = self.attrs.sample_divisor();
            self.next_ops_update_sis = snap_upd + self.attrs.ops_update_interval_us / si;
            self.count_pending_samples();
            ops.update(self).map_err(RunError::Ops)?;
        }

        Ok(self.stop_unless_valid(ops, flow))
    }

    fn stop_unless_valid(
        &self,
        ops: &dyn Operations,
        flow: ControlFlow<()>,
    ) -> ControlFlow<StopReason> {
        if flow.is_break() {
            return ControlFlow::Break(StopReason::Requested);
        }
        if !(0..self.targets.len()).any(|t| ops.target_valid(self, t)) {
            return ControlFlow::Break(StopReason::NoValidTarget);
        }
        ControlFlow::Continue(())
    }

    /// `kdamond_wait_activation`: while every scheme is deactivated by its watermarks, wait
    /// (time moves on; no sampling interval passes) and report that the step was spent so.
    fn wait_activation(&mut self, clock: &mut dyn Clock) -> bool {
        if self.schemes.is_empty() {
            return false;
        }
        let metric = self.metrics.free_mem_rate();
        let wait = damos::wait_activation_us(&mut self.schemes, metric);
        if wait == 0 {
            return false;
        }
        self.walk.cancel();
        let until = self.now_us() + wait;
        clock.wait_until(until);
        self.interval_us = (until, until);
        true
    }

    /// `kdamond_apply_schemes`: every due scheme over every valid target.
    fn apply_schemes(&mut self, ops: &mut dyn Operations) {
        if self.schemes.is_empty() {
            self.walk.cancel();
            return;
        }
        if damos::any_due(&self.schemes, self.passed_sample_intervals) {
            self.count_pending_samples();
        }
        let valid: Vec<bool> = (0..self.targets.len())
            .map(|t| ops.target_valid(self, t))
            .collect();
        let env = ApplyEnv {
            attrs: self.attrs,
            passed_sample_intervals: self.passed_sample_intervals,
            next_aggregation_sis: self.next_aggregation_sis,
            now_us: self.now_us(),
        };
        if self.capture_tried && !self.walk.is_pending() {
            // Refused only once monitoring terminated, when there is nothing left to capture.
            let _ = self.walk.request();
        }
        let mut applier = OpsApplier { ops, valid: &valid };
        let mut pass = ApplyPass {
            env,
            applier: &mut applier,
            metrics: self.metrics.as_mut(),
            walk: &mut self.walk,
        };
        pass.run(&mut self.targets, &mut self.schemes);
        if let Some(Ok(tried)) = self.walk.take_result() {
            self.tried = tried;
            self.tried_captures += 1;
        }
    }

    /// `kdamond_merge_regions` with the threshold from this window's highest access count.
    /// Sampled sources merge by sample density instead ([`MergeRule::density_alpha`]).
    /// Returns the sizes of the regions left.
    fn merge_regions(&mut self) -> adjust::Sizes {
        let max_nr = self
            .targets
            .iter()
            .flat_map(|t| &t.regions)
            .map(|r| r.nr_accesses)
            .max()
            .unwrap_or(0);
        let guided = self.guided();
        let rule = MergeRule {
            density_alpha: (guided && self.sampled).then_some(DENSITY_ALPHA),
            keep_seen_apart: guided && !self.sampled,
            ..MergeRule::damon(max_nr / 10, self.attrs.max_nr_accesses())
        };
        adjust::merge_regions(
            &mut self.targets,
            rule,
            self.sz_limit,
            self.attrs.max_nr_regions,
            |t| self.kept.get(t).map(|k| &k.recent),
        )
    }

    fn maybe_tune_intervals(&mut self, snap_aggr: u64) {
        let goal = self.attrs.intervals_goal;
        if !goal.enabled() || self.passed_sample_intervals < self.next_intervals_tune_sis {
            return;
        }
        // So that the conversion sees a completed window, not a partial one.
        self.next_aggregation_sis = snap_aggr;
        self.next_intervals_tune_sis += self.aggr_samples * goal.aggrs as u64;
        let adapt_bp =
            tuning::intervals_adaptation_bp(&self.targets, self.aggr_samples, goal.access_bp);
        if adapt_bp == 10_000 {
            return;
        }
        let new = tuning::tuned_attrs(&self.attrs, self.aggr_samples, adapt_bp);
        self.apply_attrs(new);
    }

    /// `kdamond_split_regions`; in the guided adjustment with an accessed-bit source, regions
    /// seen accessed are split so and idle ones probed ([`crate::probe`]).
    fn split_regions(&mut self) {
        let (max, min_sz) = (self.attrs.max_nr_regions, self.attrs.min_region_sz);
        if self.guided() && !self.sampled {
            adjust::split_regions_where(
                &mut self.targets,
                max,
                min_sz,
                &mut self.split,
                &mut self.rng,
                |r| r.last_nr_accesses > 0,
            );
            probe::probe_idle(&mut self.targets, max, min_sz);
        } else {
            adjust::split_regions(
                &mut self.targets,
                max,
                min_sz,
                &mut self.split,
                &mut self.rng,
            );
        }
    }

    /// The cuts where accesses were seen of [`adjust::split_at_sampled_extents`], on every
    /// target (the guided adjustment only).
    fn split_at_sampled_extents(&mut self, evidence: IdleEvidence) {
        if !self.guided() {
            return;
        }
        adjust::split_at_sampled_extents(
            &mut self.targets,
            self.attrs.max_nr_regions,
            self.attrs.min_region_sz,
            evidence,
            |t| self.kept.get(t).map(|k| &k.recent),
        );
    }

    /// `kdamond_reset_aggregated`: the window's counts become the previous window's.
    fn reset_aggregated(&mut self) {
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            let reset = Region {
                last_nr_accesses: r.nr_accesses,
                nr_accesses: 0,
                raw_samples: 0,
                read_samples: 0,
                write_samples: 0,
                sampled: SampledSpan::NONE,
                ..*r
            };
            // Most regions are idle, and reset already: left unwritten, their cache lines
            // are not written back (at page granularity, most of the pass's memory traffic).
            if *r != reset {
                *r = reset;
            }
        }
        for kept in &mut self.kept {
            kept.recent.complete_window();
        }
        self.window_start_us = self.now_us();
    }

    /// True between two aggregation windows: the last step completed a window (or none ran
    /// yet), and the next one starts a new window.
    pub fn at_window_start(&self) -> bool {
        self.window_start_us == self.now_us()
    }

    /// Passes `n` whole aggregation windows in which nothing was accessed, at once rather than
    /// a sampling interval at a time: what a monitor of many processes does for one that did
    /// not run (no sample can have fallen in it). Every region ages by `n` windows and counts
    /// no access; the recent windows' samples age out as `n` empty windows would push them.
    /// Regions are neither merged nor split meanwhile (idle neighbours would merge and split
    /// again to about the same picture; their ages only grow alike). Deadlines move on with the
    /// time line; an operations update that fell due meanwhile comes at the next step, once.
    ///
    /// Only at a window start, and only without schemes (a scheme must see idle memory age
    /// window by window to act on it): otherwise nothing happens and false is returned.
    pub fn pass_idle_windows(&mut self, n: u64) -> bool {
        if n == 0 || !self.may_pass_idle() {
            return false;
        }
        self.age_idle(n);
        self.window_start_us = self.now_us();
        true
    }

    /// Passes one idle window as [`Context::pass_idle_windows`] does, and hands it to the
    /// `after_aggregation` callbacks as a step completing it would (for a record that keeps
    /// every window). Returns false, calling nothing, where it may not pass.
    pub fn pass_idle_window(&mut self, callbacks: &mut dyn Callbacks) -> Result<bool, RunError> {
        if !self.may_pass_idle() {
            return Ok(false);
        }
        self.age_idle(1);
        let flow = callbacks
            .after_aggregation(self)
            .map_err(RunError::Callback);
        self.window_start_us = self.now_us();
        flow.map(|_| true)
    }

    fn may_pass_idle(&self) -> bool {
        self.started && self.at_window_start() && self.schemes.is_empty()
    }

    /// Ages every region by `n` idle windows and moves the time line and deadlines on; the
    /// window start stays where the windows began.
    fn age_idle(&mut self, n: u64) {
        let windows = u32::try_from(n).unwrap_or(u32::MAX);
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            // As the merge counts ages: the first idle window after an accessed one restarts
            // the age, every idle window after an idle one adds one.
            r.age = if r.last_nr_accesses > 0 {
                windows - 1
            } else {
                r.age.saturating_add(windows)
            };
            r.last_nr_accesses = 0;
            r.nr_accesses = 0;
        }
        for kept in &mut self.kept {
            for _ in 0..n.min(crate::recent_samples::RECENT_WINDOWS as u64) {
                kept.recent.complete_window();
            }
        }
        let si = self.attrs.sample_divisor();
        let window_sis = self.attrs.aggr_interval_us / si;
        let skipped_sis = n * window_sis;
        self.passed_sample_intervals += skipped_sis;
        self.next_aggregation_sis += skipped_sis;
        self.next_intervals_tune_sis += skipped_sis;
        // Due at the next step, once: not once per interval that passed.
        self.next_ops_update_sis = self
            .next_ops_update_sis
            .max(self.passed_sample_intervals + 1)
            .min(self.passed_sample_intervals + self.attrs.ops_update_interval_us / si);
        let now = self.now_us() + skipped_sis * self.attrs.sample_interval_us;
        self.interval_us = (now, now);
        // The windows passed as the aggregation settles them: the page samples' history
        // forgets what is older than it keeps, in quiet targets too.
        let now = self.now_us();
        for kept in &mut self.kept {
            kept.pages.settle(now);
            kept.code.settle(now);
        }
        self.note_window();
    }

    /// Start, step until a stop, then terminate: the whole monitoring run. The first error,
    /// of the operations or of a callback, ends it (after terminating) and is returned.
    pub fn run(
        &mut self,
        ops: &mut dyn Operations,
        clock: &mut dyn Clock,
        callbacks: &mut dyn Callbacks,
    ) -> Result<StopReason, RunError> {
        let result = self.start(ops).map_err(RunError::Ops).and_then(|()| {
            loop {
                match callbacks.control(self) {
                    Ok(ControlFlow::Continue(())) => {}
                    Ok(ControlFlow::Break(())) => break Ok(StopReason::Requested),
                    Err(e) => break Err(RunError::Callback(e)),
                }
                match self.step(ops, clock, callbacks) {
                    Ok(ControlFlow::Continue(())) => continue,
                    Ok(ControlFlow::Break(reason)) => break Ok(reason),
                    Err(e) => break Err(e),
                }
            }
        });
        let terminated = self.terminate(ops, callbacks).map_err(RunError::Callback);
        let reason = result?;
        terminated?;
        Ok(reason)
    }

    /// `before_terminate` callbacks, then the operations' cleanup (which happens even when a
    /// callback fails): the end of a run that [`Context::run`] does not drive (a monitor of
    /// many contexts steps each one itself).
    pub fn terminate(
        &mut self,
        ops: &mut dyn Operations,
        callbacks: &mut dyn Callbacks,
    ) -> Result<(), CallbackError> {
        self.walk.make_obsolete();
        self.count_pending_samples();
        let result = callbacks.before_terminate(self);
        ops.cleanup(self);
        result
    }
}

/// The operations set seen from a DAMOS apply pass.
struct OpsApplier<'a> {
    ops: &'a mut dyn Operations,
    valid: &'a [bool],
}

impl SchemeApplier for OpsApplier<'_> {
    fn apply(
        &mut self,
        target: usize,
        region: &Region,
        scheme: &Scheme,
        env: &ApplyEnv,
    ) -> Applied {
        self.ops.apply_scheme(target, region, scheme, env)
    }

    fn score(&self, target: usize, region: &Region, scheme: &Scheme, env: &ApplyEnv) -> Option<u8> {
        self.ops.scheme_score(target, region, scheme, env)
    }

    fn target_valid(&self, target: usize) -> bool {
        self.valid.get(target).copied().unwrap_or(false)
    }
}

/// `damon_nr_accesses_mvsum` at a point of the window: `passed` sampling intervals so far, the
/// window ending at `next_aggregation_sis`.
pub fn nr_accesses_mvsum(attrs: &Attrs, passed: u64, next_aggregation_sis: u64, r: &Region) -> u32 {
    let window_len = attrs.aggr_interval_us.max(1) / attrs.sample_divisor();
    let left = next_aggregation_sis.saturating_sub(passed);
    mvsum(
        r.nr_accesses,
        r.last_nr_accesses,
        mult_frac(left, 10_000, window_len.max(1)),
    )
}

/// Upstream's kunit vectors of `damon_test_nr_accesses_mvsum`, for every test of a place that
/// computes the moving sum: (sampling intervals passed, where the window ends in them,
/// `nr_accesses`, `last_nr_accesses`, the moving sum).
#[cfg(test)]
pub(crate) const NR_ACCESSES_MVSUM_VECTORS: [(u64, u64, u32, u32, u32); 5] = [
    (0, 10, 5, 3, 3),
    (0, 10, 0, 7, 7),
    (5, 10, 3, 10, 8),
    (8, 10, 3, 10, 5),
    (10, 10, 42, 49, 42),
];

/// `damon_mvsum`: the partial count plus the not-yet-elapsed share (`left_bp` basis points) of
/// the last window's count. A full window left means nothing was sampled yet: the last count.
pub fn mvsum(current: u32, last: u32, left_bp: u64) -> u32 {
    if left_bp == 10_000 {
        return last;
    }
    current.saturating_add(mult_frac(last as u64, left_bp, 10_000) as u32)
}

/// Each of `regions`' bytes of `working_set` (0 for regions not accessed in its window),
/// at most its size.
pub fn regions_touched_bytes(regions: &[Region], working_set: &WorkingSet) -> Vec<u64> {
    let ranges: Vec<AddrRange> = regions
        .iter()
        .map(|r| AddrRange::new(r.start, r.end))
        .collect();
    regions
        .iter()
        .zip(working_set.pages_in_each(&ranges))
        .map(|(r, pages)| match r.nr_accesses {
            0 => 0,
            _ => ((pages * PAGE_SIZE as f64).round() as u64).min(r.size()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callbacks::{Flow, NoCallbacks};
    use crate::ops::VirtualClock;
    use crate::region::AddrRange;
    use crate::testing::{TestOps, steps};

    fn ctx_with(sample: u64, aggr: u64) -> Context {
        let attrs = Attrs {
            sample_interval_us: sample,
            aggr_interval_us: aggr,
            ..Attrs::default()
        };
        Context::new(attrs, 1).unwrap()
    }

    /// Upstream's kunit test `damon_test_target`.
    #[test]
    fn damon_test_target() {
        let mut ctx = ctx_with(5000, 100_000);
        assert_eq!(ctx.targets().len(), 0);
        ctx.add_target(Target::new(Some(1)));
        assert_eq!(ctx.targets().len(), 1);
        ctx.targets.pop();
        assert_eq!(ctx.targets().len(), 0);
    }

    /// Upstream's kunit test `damon_test_regions`.
    #[test]
    fn damon_test_regions() {
        let r = Region::new(1, 2);
        assert_eq!((r.start, r.end, r.nr_accesses), (1, 2, 0));
        let mut t = Target::new(None);
        assert_eq!(t.nr_regions(), 0);
        t.regions.push(r);
        assert_eq!(t.nr_regions(), 1);
        t.regions.remove(0);
        assert_eq!(t.nr_regions(), 0);
    }

    /// Upstream's kunit test `damon_test_aggregate` (`kdamond_reset_aggregated`): every
    /// sampling interval that found a region accessed added to its `nr_accesses`; at the end of
    /// a window the counts are reported and reset to zero (here, kept as `last_nr_accesses`),
    /// and the targets and their regions stay as they were.
    #[test]
    fn damon_test_aggregate() {
        let mut ctx = ctx_with(5000, 100_000);
        let data: [[(u64, u64, u32); 3]; 3] = [
            [(10, 15, 42), (20, 27, 95), (30, 40, 84)],
            [(5, 31, 10), (42, 45, 20), (49, 55, 30)],
            [(13, 23, 0), (33, 44, 1), (55, 66, 2)],
        ];
        for regions in data {
            let mut t = Target::new(None);
            for (s, e, nr) in regions {
                t.regions.push(Region {
                    nr_accesses: nr,
                    ..Region::new(s, e)
                });
            }
            ctx.add_target(t);
        }
        ctx.reset_aggregated();
        assert_eq!(ctx.targets().len(), 3);
        for (t, regions) in ctx.targets().iter().zip(data) {
            assert_eq!(t.nr_regions(), 3);
            for (r, (_, _, nr)) in t.regions.iter().zip(regions) {
                assert_eq!((r.nr_accesses, r.last_nr_accesses), (0, nr));
            }
        }
    }

    /// Upstream's kunit test NEW `damon_test_mvsum`.
    #[test]
    fn damon_test_mvsum() {
        for (current, last, left_bp, want) in [
            (0, 49, 10_000, 49),
            (3, 10, 7_000, 10),
            (3, 10, 5_000, 8),
            (32, 100, 1_000, 42),
            (42, 49, 0, 42),
        ] {
            assert_eq!(
                mvsum(current, last, left_bp),
                want,
                "mvsum({current}, {last}, {left_bp})"
            );
        }
    }

    /// Upstream's kunit test NEW `damon_test_nr_accesses_mvsum`.
    #[test]
    fn damon_test_nr_accesses_mvsum() {
        let mut ctx = ctx_with(1, 10);
        for (passed, next_aggr, nr, last, want) in NR_ACCESSES_MVSUM_VECTORS {
            ctx.passed_sample_intervals = passed;
            ctx.next_aggregation_sis = next_aggr;
            let r = Region {
                nr_accesses: nr,
                last_nr_accesses: last,
                ..Region::new(0, 4096)
            };
            assert_eq!(
                ctx.nr_accesses_mvsum(&r),
                want,
                "passed {passed} nr {nr} last {last}"
            );
        }
    }

    /// Upstream's kunit test NEW `damon_test_commit_ctx`: the minimum region size must be a power
    /// of two. (udamon has no separate commit step; the same check guards every context's
    /// attributes.)
    #[test]
    fn damon_test_commit_ctx() {
        let attrs = |min_region_sz| Attrs {
            min_region_sz,
            ..Attrs::default()
        };
        assert!(Context::new(attrs(4096), 0).is_ok());
        assert!(Context::new(attrs(4095), 0).is_err());
        let mut ctx = Context::new(attrs(4096), 0).unwrap();
        assert!(ctx.set_attrs(attrs(4095)).is_err());
        assert_eq!(
            ctx.attrs().min_region_sz,
            4096,
            "a rejected change leaves the attributes"
        );
    }

    /// The ranges reported accessed in each window, in pages, and the most regions held, when
    /// accessed-bit checks over 4 GiB (1 Mi pages) find pages 600,001 to 600,016 touched in
    /// every interval, and nothing else.
    fn hot_pages_windows(adjustment: Adjustment, windows: usize) -> (Vec<Vec<(u64, u64)>>, usize) {
        let attrs = Attrs {
            adjustment,
            ..Attrs::default()
        };
        let mut ctx = Context::new(attrs, 3).unwrap();
        ctx.add_target(Target::new(None));
        let mut ops = TestOps::hot_ranges(
            &[AddrRange::new(0, 1 << 32)],
            &[AddrRange::new(600_001 * 4096, 600_017 * 4096)],
        );
        let mut seen = Windows::default();
        ctx.start(&mut ops).unwrap();
        let mut most = 0;
        for _ in 0..windows * 20 {
            let flow = ctx.step(&mut ops, &mut VirtualClock, &mut seen).unwrap();
            assert!(flow.is_continue());
            most = most.max(ctx.nr_regions());
        }
        let accessed = seen
            .0
            .iter()
            .map(|w| {
                w.iter()
                    .filter(|&&(_, _, nr)| nr > 0)
                    .map(|&(s, e, _)| (s, e))
                    .collect()
            })
            .collect();
        (accessed, most)
    }

    #[test]
    fn guided_checks_find_16_pages_in_4_gib_to_the_page() {
        let (guided, most) = hot_pages_windows(Adjustment::Guided, 40);
        assert!(most <= 1000, "{most} regions");
        let exact = vec![(600_001, 600_017)];
        let first = guided.iter().position(|w| *w == exact);
        assert!(
            first.is_some_and(|i| i < 20),
            "exact first in window {first:?}"
        );
        assert!(
            guided[20..].iter().all(|w| *w == exact),
            "and from then on: {:?}",
            &guided[20..]
        );
        // DAMON's adjustment alone, the same seed: never the hot pages alone.
        let (faithful, _) = hot_pages_windows(Adjustment::Faithful, 40);
        assert!(!faithful.contains(&exact), "{faithful:?}");
    }

    #[test]
    fn only_the_guided_adjustment_keeps_where_checks_found_accesses() {
        for (adjustment, kept) in [(Adjustment::Guided, true), (Adjustment::Faithful, false)] {
            let attrs = Attrs {
                adjustment,
                ..Attrs::default()
            };
            let mut ctx = Context::new(attrs, 1).unwrap();
            ctx.add_target(Target::with_regions(
                None,
                &[AddrRange::new(0, 100), AddrRange::new(100, 200)],
            ));
            ctx.randomize_sampling_addrs();
            let picked = ctx.regions_with_sampling_addrs(0).map(|(_, a)| a).nth(1);
            assert!(picked.is_some_and(|a| (100..200).contains(&a)));
            ctx.count_checked_accesses(|_, r, _, _| r.start == 100);
            let r = &ctx.targets()[0].regions;
            assert_eq!((r[0].nr_accesses, r[1].nr_accesses), (0, 1));
            assert_eq!(r[0].sampled.get(), None);
            let point = picked.map(|a| AddrRange::new(a, a + 1));
            assert_eq!(r[1].sampled.get(), point.filter(|_| kept));
            assert_eq!(
                ctx.regions_with_sampling_addrs(0).map(|(_, a)| a).nth(1),
                Some(100),
                "the check used up the interval's addresses"
            );
        }
    }

    /// The regions each aggregation callback saw: (start page, end page, nr_accesses).
    #[derive(Default)]
    struct Windows(Vec<Vec<(u64, u64, u32)>>);

    impl Callbacks for Windows {
        fn after_aggregation(&mut self, ctx: &Context) -> Flow {
            let t = &ctx.targets()[0];
            let pages = |a: u64| a / 4096;
            self.0.push(
                t.regions
                    .iter()
                    .map(|r| (pages(r.start), pages(r.end), r.nr_accesses))
                    .collect(),
            );
            Ok(ControlFlow::Continue(()))
        }
    }

    /// Sampled ops that put one sample per interval into the first 4 pages until 300 ms,
    /// then nothing.
    fn goes_quiet() -> TestOps<'static> {
        let mut next = 0;
        TestOps::sampled(&[AddrRange::new(0, 100 * 4096)], move |ctx| {
            if ctx.now_us() <= 300_000 {
                next = (next + 4096 + 8) % (4 * 4096);
                ctx.record_sampled_accesses(0, &mut [SampledAccess::at(next)]);
            }
        })
    }

    /// Each byte's age, summed over the target: what merging (size-weighted averages) and
    /// splitting (ages kept) leave as it was.
    fn byte_ages(ctx: &Context) -> u64 {
        ctx.targets()[0]
            .regions
            .iter()
            .map(|r| r.size() / 4096 * u64::from(r.age))
            .sum()
    }

    #[test]
    fn idle_windows_passed_at_once_age_memory_as_stepping_through_them_does() {
        let (mut stepped, mut passed) = (ctx_with(5000, 100_000), ctx_with(5000, 100_000));
        let (mut a, mut b) = (goes_quiet(), goes_quiet());
        for (ctx, ops) in [(&mut stepped, &mut a), (&mut passed, &mut b)] {
            ctx.add_target(Target::new(None));
            ctx.start(ops).unwrap();
            // Three windows with samples, then one idle window.
            for _ in 0..80 {
                let _ = ctx.step(ops, &mut VirtualClock, &mut NoCallbacks).unwrap();
            }
            assert!(ctx.at_window_start());
        }
        for _ in 0..20 * 7 {
            let _ = stepped
                .step(&mut a, &mut VirtualClock, &mut NoCallbacks)
                .unwrap();
        }
        assert!(passed.pass_idle_windows(7));
        assert_eq!(passed.now_us(), stepped.now_us());
        assert_eq!(
            passed.passed_sample_intervals(),
            stepped.passed_sample_intervals()
        );
        assert!(passed.at_window_start());
        let (want, got) = (byte_ages(&stepped), byte_ages(&passed));
        assert!(
            want.abs_diff(got) * 50 <= want,
            "byte-windows of age: stepped {want}, passed {got}"
        );
        assert!(
            passed.targets()[0]
                .regions
                .iter()
                .all(|r| r.nr_accesses == 0 && r.last_nr_accesses == 0)
        );
        // Both go on alike: the next window ends at the same step.
        let mut windows = (Windows::default(), Windows::default());
        for _ in 0..20 {
            let _ = stepped
                .step(&mut a, &mut VirtualClock, &mut windows.0)
                .unwrap();
            let _ = passed
                .step(&mut b, &mut VirtualClock, &mut windows.1)
                .unwrap();
        }
        assert_eq!((windows.0.0.len(), windows.1.0.len()), (1, 1));
        // One window handed to the callbacks spans a whole window.
        let mut seen = Windows::default();
        let before = passed.now_us();
        assert!(passed.pass_idle_window(&mut seen).unwrap());
        assert_eq!(seen.0.len(), 1);
        assert!(seen.0[0].iter().all(|&(_, _, nr)| nr == 0));
        assert_eq!(passed.window_us(), (before + 100_000, before + 100_000));
        // Not in the middle of a window, and never with schemes.
        let _ = passed
            .step(&mut b, &mut VirtualClock, &mut NoCallbacks)
            .unwrap();
        assert!(!passed.pass_idle_windows(1));
    }

    #[test]
    fn an_unsampled_side_is_reported_idle_in_its_own_window() {
        // 20 samples in each window, all in the first 4 pages of the first 10-page region.
        let mut ctx = ctx_with(5000, 100_000);
        ctx.add_target(Target::new(None));
        let mut next = 0;
        let mut ops = TestOps::sampled(&[AddrRange::new(0, 100 * 4096)], |ctx| {
            next = (next + 4096 + 8) % (4 * 4096);
            ctx.record_sampled_accesses(0, &mut [SampledAccess::at(next)]);
        });
        let mut windows = Windows::default();
        ctx.start(&mut ops).unwrap();
        steps(&mut ctx, &mut ops, &mut windows, 20);
        assert_eq!(
            &windows.0[0][..2],
            &[(0, 4, 20), (4, 10, 0)],
            "the first window already reports the 6 unsampled pages apart, not accessed"
        );
    }

    #[test]
    fn sampled_accesses_count_once_per_region_and_interval() {
        let mut ctx = ctx_with(5000, 100_000);
        ctx.add_target(Target::with_regions(
            None,
            &[
                AddrRange::new(0, 100),
                AddrRange::new(100, 200),
                AddrRange::new(300, 400),
            ],
        ));
        let (r, w) = (SampledAccess::read, SampledAccess::write);
        let both = |addr| SampledAccess {
            addr,
            read: true,
            write: true,
        };
        let mut samples = vec![
            r(150),
            w(10),
            both(199),
            r(250),
            SampledAccess::at(20),
            w(399),
            r(400),
            r(5),
        ];
        ctx.record_sampled_accesses(0, &mut samples);
        // The next interval: its samples lie among the first one's in the first region.
        ctx.passed_sample_intervals += 1;
        ctx.record_sampled_accesses(0, &mut [r(30), r(7)]);
        assert_eq!(
            ctx.targets()[0].regions[0].raw_samples,
            0,
            "counted when the regions are next read, not in the interval"
        );
        let got: Vec<(u32, u32, u32, u32)> = ctx.targets_mut()[0]
            .regions
            .iter()
            .map(|r| {
                (
                    r.nr_accesses,
                    r.raw_samples,
                    r.read_samples,
                    r.write_samples,
                )
            })
            .collect();
        assert_eq!(
            got,
            [(2, 5, 3, 1), (1, 2, 2, 1), (1, 1, 0, 1)],
            "a read-write sample counts as both, one of unknown kind as neither; a region \
             counts each interval that drew a sample in it once"
        );
        assert_eq!(
            ctx.samples_outside_regions(),
            2,
            "250 falls in a hole and 400 past the end"
        );
        let spans: Vec<_> = ctx.targets()[0]
            .regions
            .iter()
            .map(|r| r.sampled.get())
            .collect();
        assert_eq!(
            spans,
            [
                Some(AddrRange::new(5, 31)),
                Some(AddrRange::new(150, 200)),
                Some(AddrRange::new(399, 400))
            ]
        );
        ctx.reset_aggregated();
        assert!(ctx.targets()[0].regions.iter().all(|r| r.sampled.is_none()
            && (r.raw_samples, r.read_samples, r.write_samples) == (0, 0, 0)));
    }

    #[test]
    fn recent_windows_samples_show_a_part_idle_that_one_window_cannot() {
        // 20 intervals a window; the first region, of 40 pages, gets every sample, all in its
        // first 2 pages. One sample misses 38 pages of 40 by chance in 5 % of windows: not evidence
        // enough; two samples (the window's and the last window's) in 0.25 %: reported idle.
        let mut ctx = Context::new(
            Attrs {
                ops_update_interval_us: 100_000,
                min_nr_regions: 3,
                ..ctx_with(5000, 100_000).attrs
            },
            1,
        )
        .unwrap();
        ctx.add_target(Target::new(None));
        // One sample per window at the start of a 120-page target, which every update sets
        // back to three 40-page regions, so that each window judges the same ones.
        let thirds: Vec<_> = (0..3)
            .map(|i| AddrRange::new(i * 40 * 4096, (i + 1) * 40 * 4096))
            .collect();
        let mut intervals = 0u64;
        let mut ops = TestOps::sampled(&thirds, |ctx| {
            if intervals.is_multiple_of(20) {
                let addr = intervals / 20 % 2 * 4096 + 8;
                ctx.record_sampled_accesses(0, &mut [SampledAccess::at(addr)]);
            }
            intervals += 1;
        })
        .reset_on_update();
        let mut windows = Windows::default();
        ctx.start(&mut ops).unwrap();
        let mut window = |ctx: &mut Context| {
            steps(ctx, &mut ops, &mut windows, 20);
            windows.0.last().cloned().unwrap()
        };
        let idle = [(40, 80, 0), (80, 120, 0)];
        let whole = [&[(0, 40, 1)], &idle[..]].concat();
        let cut = [&[(0, 2, 1), (2, 40, 0)], &idle[..]].concat();
        assert_eq!(window(&mut ctx), whole, "one window: could be luck");
        assert_eq!(window(&mut ctx), cut);
        assert_eq!(window(&mut ctx), cut);
        ctx.forget_recent_samples(0);
        assert_eq!(
            window(&mut ctx),
            whole,
            "the samples of a replaced address space weigh nothing"
        );
    }

    #[test]
    fn a_scheme_due_mid_window_sees_the_samples_of_the_window_so_far() {
        // A scheme applied every sampling interval, to regions accessed at least once; one
        // sample an interval in the first page. The samples are counted into the regions when
        // the scheme is due, not only when the window ends.
        let mut ctx = ctx_with(5000, 100_000);
        ctx.add_target(Target::new(Some(1)));
        let mut scheme = Scheme::new(
            damos::AccessPattern {
                min_nr_accesses: 1,
                ..damos::AccessPattern::default()
            },
            damos::Action::Stat,
        );
        scheme.apply_interval_us = 5000;
        ctx.add_scheme(scheme).unwrap();
        ctx.capture_tried_regions(true);
        let mut ops = TestOps::sampled(&[AddrRange::new(0, 100 * 4096)], |ctx| {
            ctx.record_sampled_accesses(0, &mut [SampledAccess::at(8)]);
        });
        ctx.start(&mut ops).unwrap();
        steps(&mut ctx, &mut ops, &mut NoCallbacks, 3);
        assert!(!ctx.at_window_start(), "mid-window");
        let (_, tried) = ctx.tried_regions();
        let first_page: Vec<_> = tried[0].regions.iter().filter(|r| r.start == 0).collect();
        assert!(
            first_page.len() == 1 && first_page[0].nr_accesses >= 1,
            "the sampled region, accessed: {tried:?}"
        );
    }

    const SECOND: u64 = 1 << 30;

    #[test]
    fn a_target_added_while_running_is_monitored_and_schemed_like_the_first() {
        let mut ctx = Context::new(
            Attrs {
                min_nr_regions: 3,
                ..ctx_with(5000, 100_000).attrs
            },
            1,
        )
        .unwrap();
        ctx.add_target(Target::new(Some(1)));
        ctx.add_scheme(Scheme::new(
            damos::AccessPattern::default(),
            damos::Action::Stat,
        ))
        .unwrap();
        ctx.capture_tried_regions(true);
        // Targets of 100 pages, the second added at the end of interval 50, mid-window: every
        // interval one sample in the first 4 pages of each target, and the memory of each.
        let mut intervals = 0;
        let mut ops = TestOps::sampled(&[AddrRange::new(0, 100 * 4096)], |ctx| {
            intervals += 1;
            if intervals == 50 {
                let pages = AddrRange::new(SECOND, SECOND + 100 * 4096);
                ctx.add_target(Target::with_regions(Some(2), &[pages]));
            }
            for (t, base) in [0, SECOND].into_iter().enumerate() {
                if t < ctx.targets().len() {
                    let addr = base + intervals % 4 * 4096 + 8;
                    ctx.record_sampled_accesses(t, &mut [SampledAccess::at(addr)]);
                    let memory = TargetMemory {
                        resident_bytes: 100 * 4096,
                        ..TargetMemory::default()
                    };
                    ctx.set_target_memory(t, memory);
                }
            }
        });
        let mut windows = Windows::default();
        ctx.start(&mut ops).unwrap();
        steps(&mut ctx, &mut ops, &mut windows, 200);
        let second = &ctx.targets()[1].regions;
        assert!(second.len() >= 3, "split like the first: {second:?}");
        let hot: u64 = second
            .iter()
            .filter(|r| r.last_nr_accesses > 0)
            .map(|r| r.end - r.start)
            .sum();
        assert_eq!(
            hot,
            4 * 4096,
            "its 4 sampled pages, and only those: {second:?}"
        );
        assert!(ctx.target_memory(1).is_some());
        let (_, tried) = ctx.tried_regions();
        assert!(
            tried[0].regions.iter().any(|r| r.start >= SECOND),
            "the scheme applies to it too"
        );
    }
}
