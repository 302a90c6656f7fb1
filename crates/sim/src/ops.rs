//! The `sim` operations: DAMON's accessed-bit probes of one sampling address per region, run
//! against the simulated address space of [`crate::layout`] and the access model of
//! [`crate::model`], in virtual time taken from the context's sampling intervals.
//!
//! - `init` builds each empty target's regions from the mappings, as vaddr does (three regions,
//!   or one per group of adjacent mappings when there are fewer than two gaps); a context with
//!   no target gets one.
//! - `prepare_access_checks` picks each region's sampling address uniformly at random with the
//!   context's generator.
//! - `check_accesses` asks the model whether the page holding each sampling address was touched
//!   during the interval just finished (`nr_accesses += 1` if so). Like vaddr, a region whose
//!   sampling address is in the same page as the previous region's reuses that answer. Cost:
//!   O(regions × log(workload regions)) plus O(workload regions + patterns) per interval.
//! - `target_valid` turns false once the workload's last phase has ended, so that
//!   [`udamon_core::Context::run`] stops, like monitoring a process that exits.
//! - `apply_scheme` acts on the simulated memory ([`crate::actions`], [`crate::memory`]):
//!   the memory first catches up with the workload's touches up to the pass's time, so that
//!   what was touched since the last check refaults before the action sees it.
//! - Every access check also brings the memory up to the end of the interval and reports it
//!   with [`Context::set_target_memory`], for every target (all of a context's targets are
//!   views of the one simulated process): touches up to the end of that interval and every
//!   action applied before it. A step's own actions show at the next step.

use crate::config::Workload;
use crate::layout;
use crate::memory::{Memory, Residency};
use crate::model::{Timeline, Touched, WindowAccesses};
use std::num::NonZeroU32;
use udamon_core::damos::{Applied, ApplyEnv, Scheme};
use udamon_core::layout::set_regions;
use udamon_core::region::align_down;
use udamon_core::{
    AddrRange, Context, Operations, OpsError, PAGE_SIZE, Prng, Region, Target, TargetMemory,
};

/// How the simulated workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimOptions {
    /// Accesses per second that the workload makes, shared among a phase's patterns in
    /// proportion to their probability weights. The default, 10^8 (100,000 accesses/msec in
    /// masim's report), is the order of magnitude masim reaches on current x86 hardware for
    /// page-stride sweeps. It only matters relative to region sizes: at the default a 10 MiB
    /// region is swept at 4 KiB stride about 200 times per 5 ms sampling interval.
    pub access_rate: u64,
    /// Runs through all phases, like masim's `-c/--repeat`.
    pub repeat: NonZeroU32,
    /// Add a program image, libraries and a stack (never accessed) around the workload's
    /// regions, so that the address space and the initial regions look like a live process's
    /// ([`crate::layout`]).
    pub process_mappings: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            access_rate: 100_000_000,
            repeat: NonZeroU32::MIN,
            process_mappings: true,
        }
    }
}

/// The simulated address space of one workload: an [`Operations`] implementation.
#[derive(Debug, Clone)]
pub struct SimOps {
    workload: Workload,
    options: SimOptions,
    timeline: Timeline,
    accesses: WindowAccesses,
    /// Workload regions' mappings, sorted by address, with their index.
    by_addr: Vec<(AddrRange, usize)>,
    /// The context's time at which the workload started (set by `init`).
    start_us: u64,
    memory: Memory,
    /// For catching the memory up over a window other than the last sampling interval.
    memory_accesses: WindowAccesses,
}

impl SimOps {
    pub fn new(workload: Workload, options: SimOptions) -> SimOps {
        let timeline = Timeline::new(&workload, options.repeat.get());
        let mut by_addr: Vec<(AddrRange, usize)> = workload
            .regions()
            .iter()
            .enumerate()
            .map(|(i, r)| (r.range, i))
            .collect();
        by_addr.sort();
        SimOps {
            options,
            timeline,
            accesses: WindowAccesses::default(),
            by_addr,
            start_us: 0,
            memory: Memory::new(&workload),
            memory_accesses: WindowAccesses::default(),
            workload,
        }
    }

    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    pub fn options(&self) -> &SimOptions {
        &self.options
    }

    /// How long the workload runs, all repeats included, in microseconds of virtual time.
    pub fn duration_us(&self) -> u64 {
        self.timeline.total_us()
    }

    /// Every mapping of the simulated address space, sorted by address.
    pub fn mappings(&self) -> Vec<AddrRange> {
        layout::mappings(
            self.workload.regions().iter().map(|r| r.range),
            self.options.process_mappings,
        )
    }

    /// The ground truth ([`Workload::touched_bytes`]) for a window on the context's time line,
    /// such as [`Context::window_us`].
    pub fn touched_bytes(&self, window_us: (u64, u64)) -> Vec<Touched> {
        self.workload
            .touched_bytes(&self.options, self.workload_window(window_us))
    }

    /// The working set size, in bytes, of a window on the context's time line.
    pub fn ground_truth_wss(&self, window_us: (u64, u64)) -> f64 {
        self.workload
            .ground_truth_wss(&self.options, self.workload_window(window_us))
    }

    /// The simulated process's memory as of the last access check or action: resident,
    /// paged out, and refaulted so far (what `check_accesses` reports to the context).
    pub fn target_memory(&self) -> TargetMemory {
        self.memory.target_memory()
    }

    /// The memory of the workload's regions within `range`, as of the last access check or
    /// action: expected values where random patterns decide.
    pub fn residency(&self, range: AddrRange) -> Residency {
        self.memory.residency(range)
    }

    /// Apply the workload's touches to the memory up to `now_us` on the context's time line.
    /// `last_interval` is the workload-time window that `self.accesses` holds, if any.
    fn sync_memory(&mut self, now_us: u64, last_interval: Option<(u64, u64)>) {
        let to = now_us.saturating_sub(self.start_us);
        let from = self.memory.synced_us();
        if to <= from {
            return;
        }
        if last_interval == Some((from, to)) {
            self.memory.advance(to, &self.accesses);
        } else {
            self.memory_accesses.compute(
                &self.workload,
                &self.timeline,
                self.options.access_rate,
                (from, to),
            );
            self.memory.advance(to, &self.memory_accesses);
        }
    }

    fn report_memory(&self, ctx: &mut Context) {
        let memory = self.memory.target_memory();
        for t in 0..ctx.targets().len() {
            ctx.set_target_memory(t, memory);
        }
    }

    fn workload_window(&self, (t0, t1): (u64, u64)) -> (u64, u64) {
        (
            t0.saturating_sub(self.start_us),
            t1.saturating_sub(self.start_us),
        )
    }

    /// Whether the page at `page_addr` was touched during the window in `self.accesses`.
    fn page_touched(&self, page_addr: u64, rng: &mut Prng) -> bool {
        let i = self.by_addr.partition_point(|(m, _)| m.end <= page_addr);
        let Some(&(mapping, region)) = self.by_addr.get(i).filter(|(m, _)| m.start <= page_addr)
        else {
            return false;
        };
        let accesses = self.accesses.region(region);
        if accesses.is_idle() {
            return false;
        }
        let page = (page_addr - mapping.start) / PAGE_SIZE;
        if accesses.swept(page) {
            return true;
        }
        let p = accesses.random_touch_probability(self.workload.regions()[region].size, page);
        p > 0.0 && rng.unit() < p
    }
}

impl Operations for SimOps {
    fn name(&self) -> &str {
        "sim"
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        self.start_us = ctx.now_us();
        self.memory = Memory::new(&self.workload);
        if ctx.targets().is_empty() {
            ctx.add_target(Target::new(None));
        }
        let min_sz = ctx.attrs().min_region_sz;
        let ranges = udamon_core::layout::initial_ranges(&self.mappings(), min_sz);
        for t in ctx
            .targets_mut()
            .iter_mut()
            .filter(|t| t.regions.is_empty())
        {
            set_regions(&mut t.regions, &ranges, min_sz)?;
        }
        self.report_memory(ctx);
        Ok(())
    }

    fn prepare_access_checks(&mut self, ctx: &mut Context) {
        ctx.randomize_sampling_addrs();
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        let window = self.workload_window(ctx.interval_us());
        self.accesses.compute(
            &self.workload,
            &self.timeline,
            self.options.access_rate,
            window,
        );
        // (target, page, touched) of the last check.
        let mut last: Option<(usize, u64, bool)> = None;
        ctx.count_checked_accesses(|target, _, addr, rng| {
            let page = align_down(addr, PAGE_SIZE);
            match last {
                Some((t, p, touched)) if (t, p) == (target, page) => touched,
                _ => {
                    let touched = self.page_touched(page, rng);
                    last = Some((target, page, touched));
                    touched
                }
            }
        });
        self.sync_memory(ctx.now_us(), Some(window));
        self.report_memory(ctx);
    }

    fn apply_scheme(
        &mut self,
        _target: usize,
        region: &Region,
        scheme: &Scheme,
        env: &ApplyEnv,
    ) -> Applied {
        self.sync_memory(env.now_us, None);
        crate::actions::apply(&mut self.memory, region, scheme)
    }

    fn target_valid(&self, ctx: &Context, _target: usize) -> bool {
        ctx.now_us().saturating_sub(self.start_us) < self.timeline.total_us()
    }
}
