//! What one target's aggregation window says, in the terms of the metrics: computed once per
//! window on the target's own monitoring thread, so that a scrape only reads numbers.
//!
//! - **Working set** over a horizon H: the memory accessed in a window that ended within H,
//!   counted at page resolution where the source samples, with the code the sampled
//!   instructions were fetched from, never beyond what is resident, and never above a longer
//!   horizon's: [`udamon_core::working_set::working_sets`], the same answer as the records'
//!   reports and `top` give. The window itself is the horizon `window`.
//! - **Access bandwidth**: DAMON_STAT's estimated memory bandwidth (damo's "memory bw
//!   estimate"), the sum over accessed regions of bytes × accesses per second of the window,
//!   with a region's bytes those the window's working set counts in it rather than its whole
//!   size: the same bytes the working set is made of.
//! - **Idle time**: DAMON_STAT's idle-time percentiles. Each byte is idle for its region's age
//!   plus one window when the region was not accessed in the window (upstream's count), and
//!   for 0 when the window's working set counts it (upstream reports accessed bytes as
//!   negative idle time, their hotness; a Prometheus gauge of seconds idle stops at 0), the
//!   rest of an accessed region one window; the percentiles are taken over the bytes of
//!   memory the regions hold ([`Context::regions_memory`]: not the address space a region
//!   reaches over, nor a host's free memory).

use std::collections::BTreeMap;
use udamon_core::Context;
use udamon_core::context::regions_touched_bytes;
use udamon_core::working_set::WorkingSet;

/// The working-set horizons exported (label value, microseconds; 0 is the window itself).
pub const HORIZONS: [(&str, u64); 3] = [("window", 0), ("10s", 10_000_000), ("60s", 60_000_000)];

/// The idle-time quantiles exported.
pub const IDLE_QUANTILES: [f64; 6] = [0.25, 0.5, 0.75, 0.9, 0.99, 1.0];

/// One scheme's cumulative statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemeCounters {
    pub index: usize,
    pub action: String,
    pub tried_regions: u64,
    pub tried_bytes: u64,
    pub applied_regions: u64,
    pub applied_bytes: u64,
    pub quota_exceeds: u64,
}

/// One target's last window, as the metrics show it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observation {
    /// The window's length, seconds.
    pub window_seconds: f64,
    pub regions: u64,
    pub monitored_bytes: u64,
    /// Bytes per horizon of [`HORIZONS`], in that order.
    pub working_set_bytes: Vec<u64>,
    /// The samples each horizon's working set rests on, in the same order.
    pub working_set_samples: Vec<u64>,
    pub bandwidth_bytes_per_second: f64,
    /// Seconds per quantile of [`IDLE_QUANTILES`], in that order.
    pub idle_seconds: Vec<f64>,
    pub resident_bytes: Option<u64>,
    pub paged_out_bytes: Option<u64>,
    pub refaulted_bytes: Option<u64>,
    pub schemes: Vec<SchemeCounters>,
    /// The access source's running totals by name (`samples`, `recovered`, `lost`,
    /// `dropped_<reason>`, ...).
    pub source: BTreeMap<String, u64>,
    /// The idle-time distribution the percentiles come from: (µs idle, bytes), sorted, one
    /// pair per region; what a cgroup's percentiles are taken over (see [`idle_quantiles`]).
    pub idle_bytes: Vec<(u64, u64)>,
}

/// Target `target` of `ctx` at an aggregation boundary (from `Callbacks::after_aggregation`,
/// where the window's regions are complete).
pub fn observe(ctx: &Context, target: usize) -> Observation {
    observe_touched(ctx, target).0
}

/// [`observe`], with the touched bytes of each region in the window as a snapshot of it
/// keeps them ([`Context::window_touched_bytes`]), from the same estimate: a caller that
/// snapshots the window it observes does not estimate the working sets a second time.
pub fn observe_touched(ctx: &Context, target: usize) -> (Observation, Option<Vec<u64>>) {
    observe_with(ctx, target, true)
}

/// [`observe`] of a target that passed idle windows (`Context::pass_idle_windows`: no sample
/// came) since `last`, its last observation. Where `last` counted nothing at any horizon, on
/// no sample, and no region is accessed now, the working sets are not estimated again: no
/// evidence came since, and what there was only ages, so every horizon reads 0 as before (a
/// thousand sleeping processes brought up to date every few seconds, each estimate for
/// nothing). The rest (idle times, memory) is taken anew.
pub fn observe_idle(ctx: &Context, target: usize, last: Option<&Observation>) -> Observation {
    let counted_nothing = last.is_some_and(|o| {
        o.working_set_bytes.len() == HORIZONS.len()
            && o.working_set_bytes.iter().all(|&b| b == 0)
            && o.working_set_samples.iter().all(|&n| n == 0)
    });
    let accessed = ctx
        .targets()
        .get(target)
        .is_some_and(|t| t.regions.iter().any(|r| r.nr_accesses > 0));
    observe_with(ctx, target, !counted_nothing || accessed).0
}

/// [`observe_touched`]; without `estimate`, every horizon's working set 0 on no sample.
fn observe_with(ctx: &Context, target: usize, estimate: bool) -> (Observation, Option<Vec<u64>>) {
    let attrs = ctx.attrs();
    let aggr_us = attrs.aggr_interval_us.max(1);
    let aggr_s = aggr_us as f64 / 1e6;
    let regions = ctx
        .targets()
        .get(target)
        .map_or(&[][..], |t| &t.regions[..]);
    let horizons: Vec<u64> = HORIZONS.iter().map(|h| h.1).collect();
    let working_sets = match estimate {
        true => ctx.working_sets(target, &horizons),
        false => Vec::new(),
    };
    let (working_set_bytes, working_set_samples) = match estimate {
        true => (
            working_sets.iter().map(WorkingSet::bytes).collect(),
            working_sets.iter().map(|w| w.total.samples).collect(),
        ),
        false => (vec![0; horizons.len()], vec![0; horizons.len()]),
    };
    // Each accessed region's bytes as the window's working set counts them: where samples
    // show a region touched thinly (a process's pages scattered over physical memory, a
    // sparse heap), its size would overstate the bytes its accesses moved.
    let window_touched = working_sets
        .first()
        .and_then(|w| ctx.touched_bytes_in(target, w));
    let touched = window_touched.clone().or_else(|| {
        working_sets
            .first()
            .map(|w| regions_touched_bytes(regions, w))
    });
    let touched_of =
        |i: usize, r: &udamon_core::Region| touched.as_ref().map_or(r.size(), |t| t[i]);
    let bandwidth = regions
        .iter()
        .enumerate()
        .filter(|(_, r)| r.nr_accesses > 0)
        .map(|(i, r)| touched_of(i, r) as f64 * f64::from(r.nr_accesses) / aggr_s)
        .sum();
    // Over the memory the regions hold (not the address space a region reaches over, nor a
    // host's free memory): an accessed region's bytes the window touched are idle 0 and the
    // rest of its memory one window; an idle region's memory its age plus the window that
    // just ended without an access, as current DAMON_STAT counts it.
    let memory = ctx.regions_memory(target);
    let mut idle_bytes: Vec<(u64, u64)> = Vec::with_capacity(regions.len() + 1);
    for (i, r) in regions.iter().enumerate() {
        let held = memory.get(i).copied().unwrap_or(r.size());
        if r.nr_accesses > 0 {
            let hot = touched_of(i, r).min(held);
            idle_bytes.push((0, hot));
            idle_bytes.push((aggr_us, held - hot));
        } else {
            let idle = u64::from(r.age).saturating_mul(aggr_us) + aggr_us;
            idle_bytes.push((idle, held));
        }
    }
    idle_bytes.retain(|x| x.1 > 0);
    idle_bytes.sort_unstable();
    let total: u64 = regions.iter().map(|r| r.size()).sum();
    let idle_seconds = idle_quantiles(&idle_bytes);
    let memory = ctx.target_memory(target);
    let observation = Observation {
        window_seconds: aggr_s,
        regions: regions.len() as u64,
        monitored_bytes: total,
        working_set_bytes,
        working_set_samples,
        bandwidth_bytes_per_second: bandwidth,
        idle_seconds,
        resident_bytes: memory.map(|m| m.resident_bytes),
        paged_out_bytes: memory.map(|m| m.paged_out_bytes),
        refaulted_bytes: memory.map(|m| m.refaulted_bytes),
        schemes: ctx
            .schemes()
            .iter()
            .enumerate()
            .map(|(index, s)| SchemeCounters {
                index,
                action: s.action.name().to_string(),
                tried_regions: s.stats.nr_tried,
                tried_bytes: s.stats.sz_tried,
                applied_regions: s.stats.nr_applied,
                applied_bytes: s.stats.sz_applied,
                quota_exceeds: s.stats.qt_exceeds,
            })
            .collect(),
        source: BTreeMap::new(),
        idle_bytes,
    };
    (observation, window_touched)
}

/// The [`IDLE_QUANTILES`] (seconds) of an idle-time distribution: (µs idle, bytes) pairs
/// sorted by idle time. Several targets' distributions, concatenated and sorted, give their
/// union's (a cgroup's).
pub fn idle_quantiles(idle_bytes: &[(u64, u64)]) -> Vec<f64> {
    let total: u64 = idle_bytes.iter().map(|x| x.1).sum();
    IDLE_QUANTILES
        .iter()
        .map(|&q| {
            let want = (q * total as f64).ceil() as u64;
            let mut seen = 0;
            idle_bytes
                .iter()
                .find(|&&(_, size)| {
                    seen += size;
                    seen >= want.max(1)
                })
                .map_or(0.0, |&(idle, _)| idle as f64 / 1e6)
        })
        .collect()
}

impl Observation {
    /// With the access source's running totals.
    pub fn with_source_counters(mut self, counters: BTreeMap<String, u64>) -> Self {
        self.source = counters;
        self
    }

    /// With the resident bytes measured by the operations (a page-table walk), when the
    /// context does not know them.
    pub fn with_resident_bytes(mut self, resident: Option<u64>) -> Self {
        self.resident_bytes = self.resident_bytes.or(resident);
        self
    }
}
