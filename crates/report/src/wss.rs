//! Working-set size per snapshot, as damo's `report wss`: the total size of the regions accessed
//! at least `acc_thres` times per aggregation window and at least `sz_thres` bytes large; and
//! over a horizon: the bytes accessed at least once in the last T (the union of the windows'
//! accessed regions), for one horizon or a curve of them.
//!
//! Sampled access sources see memory only where samples fall, a few hundred a second wherever
//! the CPU's time goes: one window often holds too few samples to find all of a working set,
//! while the union over a longer horizon does. For records of sampled sources the report also
//! counts the samples that fell in the working set over the horizon, and warns when there were
//! so few that the number says little.

use crate::dist::{self, DistOptions, DistReport, Evidence, Unit};
use crate::recent::Recent;
use crate::{Result, human, reopen};
use std::collections::{BTreeMap, VecDeque};
use udamon_record::model::{Frame, Header, RegionStat};

/// Which regions count as the working set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WssFilter {
    /// Minimum `nr_accesses` (damo's `--acc_thres`, default 1).
    pub acc_thres: u32,
    /// Minimum region size in bytes (damo's `--sz_thres`, default 1).
    pub sz_thres: u64,
    /// Count the regions selected in any window that ended within this long before the
    /// snapshot's end (0: the snapshot's own window only, as damo does).
    pub horizon_ns: u64,
}

impl Default for WssFilter {
    fn default() -> Self {
        WssFilter {
            acc_thres: 1,
            sz_thres: 1,
            horizon_ns: 0,
        }
    }
}

/// The horizons `--horizon auto` tries, shortest first: one window, then the spans of the
/// default curve.
pub const AUTO_HORIZONS_NS: [u64; 8] = [
    0,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
    20_000_000_000,
    30_000_000_000,
    60_000_000_000,
];

impl WssFilter {
    fn selects(&self, r: &RegionStat) -> bool {
        r.nr_accesses >= self.acc_thres && r.size() >= self.sz_thres
    }

    /// The working-set size of one target's regions in one window.
    pub fn wss(&self, regions: &[RegionStat]) -> u64 {
        regions
            .iter()
            .filter(|r| self.selects(r))
            .map(RegionStat::size)
            .sum()
    }
}

/// The targets' selected memory of the windows within the horizon, and the samples in it.
#[derive(Debug, Default)]
struct Horizon {
    recent: Recent,
    /// The end of the window last added: what the horizon was last trimmed to.
    trimmed_at: Option<u64>,
    /// Per target, the windows within the horizon that had samples in their selection: (end,
    /// samples), oldest first.
    samples: BTreeMap<u32, VecDeque<(u64, u64)>>,
}

impl Horizon {
    /// Adds `target`'s window ending at `end_ns`, forgets what only windows that ended
    /// `horizon_ns` or more before it selected, and returns the bytes of what is left (the union
    /// of the windows' selections) and the samples in it.
    fn add(
        &mut self,
        target: u32,
        end_ns: u64,
        regions: &[RegionStat],
        filter: &WssFilter,
    ) -> Result<(u64, u64)> {
        let selected = regions.iter().filter(|r| filter.selects(r));
        self.recent
            .add(target, selected.clone().map(|r| (r.start, r.end)), end_ns)?;
        let counts = |last: u64| within(last, end_ns, filter.horizon_ns);
        // Once per snapshot: its targets' windows end together.
        if self.trimmed_at != Some(end_ns) {
            self.recent.retain(|last| last > end_ns || counts(last));
            self.trimmed_at = Some(end_ns);
        }
        let samples = selected.map(|r| u64::from(r.raw_samples)).sum::<u64>();
        let windows = self.samples.entry(target).or_default();
        if samples > 0 {
            windows.push_back((end_ns, samples));
        }
        while windows.front().is_some_and(|w| !counts(w.0)) {
            windows.pop_front();
        }
        let samples = windows.iter().map(|w| w.1).sum();
        if windows.is_empty() {
            self.samples.remove(&target);
        }
        Ok((self.recent.bytes(target, counts), samples))
    }
}

/// Whether a window that ended at `window_end_ns` counts at a snapshot ending at `end_ns` over
/// a horizon of `horizon_ns` (its own window always does).
fn within(window_end_ns: u64, end_ns: u64, horizon_ns: u64) -> bool {
    window_end_ns + horizon_ns > end_ns || window_end_ns == end_ns
}

/// The union of address ranges `[start, end)`, as sorted, disjoint ranges.
pub fn union(ranges: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut all: Vec<(u64, u64)> = ranges.filter(|(s, e)| s < e).collect();
    all.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(all.len());
    for (start, end) in all {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// The working-set size distribution over the record's snapshots (`header` names the targets).
pub fn wss(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    filter: &WssFilter,
    opts: &DistOptions,
) -> Result<DistReport> {
    let mut selection = format!(
        "regions with nr_accesses >= {} and size >= {}",
        filter.acc_thres,
        human::size(filter.sz_thres)
    );
    if filter.horizon_ns > 0 {
        selection.push_str(&format!(
            ", in any window of the last {}",
            human::seconds(filter.horizon_ns, 3)
        ));
    }
    let mut horizon = Horizon::default();
    // Samples in the working set per snapshot (all targets), for sampled sources.
    let mut evidence: BTreeMap<u64, u64> = BTreeMap::new();
    let mut report = dist::collect(
        header,
        frames,
        opts,
        "wss",
        Unit::Bytes,
        Some(selection),
        |end_ns, target| {
            let (bytes, samples) = horizon.add(target.target, end_ns, &target.regions, filter)?;
            *evidence.entry(end_ns).or_default() += samples;
            Ok(bytes)
        },
    )?;
    let supporting: Vec<u64> = evidence.into_values().skip(report.skipped).collect();
    if supporting.iter().any(|&n| n > 0) {
        let found = Evidence::new(filter.horizon_ns, false, median(supporting));
        report.evidence = Some(found);
    }
    Ok(report)
}

/// The median of `values` (0 for none).
fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

/// `--horizon auto` takes a horizon once the next one on [`AUTO_HORIZONS_NS`] adds at most
/// this share to the median working set: the set has stopped growing with the horizon.
pub const AUTO_GROWTH: f64 = 0.1;

/// The horizon `--horizon auto` chooses for a record of a sampled source: the shortest of
/// [`AUTO_HORIZONS_NS`] (up to half the record's span) whose working set holds
/// [`Evidence::enough_samples`] in the median snapshot and grows by at most [`AUTO_GROWTH`]
/// over the next horizon; if none does, the shortest with enough samples (or the longest, when
/// none has). For other sources each snapshot's own window, whose counts come from a check
/// every sampling interval as DAMON's do. Reads the record once per horizon tried.
pub fn choose_horizon<I, E, F>(
    header: &Header,
    mut open: F,
    filter: &WssFilter,
    skip: usize,
) -> Result<u64>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    let opts = DistOptions {
        skip,
        percentiles: vec![50.0],
        ..DistOptions::default()
    };
    // (horizon, median working set, enough samples) of the horizons tried so far.
    let mut tried: Vec<(u64, u64, bool)> = Vec::new();
    let mut span_ns = u64::MAX;
    for horizon_ns in AUTO_HORIZONS_NS {
        if horizon_ns > 0 && horizon_ns > span_ns / 2 {
            break;
        }
        let f = WssFilter {
            horizon_ns,
            ..*filter
        };
        let report = wss(header, reopen(&mut open)?, &f, &opts)?;
        let Some(evidence) = report.evidence else {
            return Ok(0);
        };
        let times = report
            .distributions
            .iter()
            .flat_map(|d| d.values.iter().map(|p| p.time_ns));
        if let (Some(first), Some(last)) = (times.clone().min(), times.max()) {
            span_ns = last - first;
        }
        let median = report
            .distributions
            .first()
            .and_then(|d| d.percentiles.first());
        let median = median.map_or(0, |p| p.value);
        if let Some(&(previous, previous_median, true)) = tried.last()
            && median as f64 <= previous_median as f64 * (1.0 + AUTO_GROWTH)
        {
            return Ok(previous);
        }
        tried.push((horizon_ns, median, evidence.is_enough()));
    }
    Ok(tried
        .iter()
        .find(|t| t.2)
        .or(tried.last())
        .map_or(0, |t| t.0))
}

/// [`wss`] over the horizon [`choose_horizon`] picks; `open` yields the record's frames afresh.
pub fn wss_auto<I, E, F>(
    header: &Header,
    mut open: F,
    filter: &WssFilter,
    opts: &DistOptions,
) -> Result<DistReport>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    let chosen = WssFilter {
        horizon_ns: choose_horizon(header, &mut open, filter, opts.skip)?,
        ..*filter
    };
    let mut report = wss(header, reopen(&mut open)?, &chosen, opts)?;
    if let Some(evidence) = &mut report.evidence {
        evidence.chosen = true;
    }
    Ok(report)
}

/// The working set at several horizons: for each, its distribution over the snapshots; `open`
/// yields the record's frames afresh for each horizon.
pub fn curve<I, E, F>(
    header: &Header,
    mut open: F,
    filter: &WssFilter,
    horizons_ns: &[u64],
    opts: &DistOptions,
) -> Result<Vec<(u64, DistReport)>>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    horizons_ns
        .iter()
        .map(|&horizon_ns| {
            let f = WssFilter {
                horizon_ns,
                ..*filter
            };
            Ok((horizon_ns, wss(header, reopen(&mut open)?, &f, opts)?))
        })
        .collect()
}

/// Text for [`curve`]: one row per horizon with the median and the 10th and 90th percentiles
/// of the summed targets (`opts.percentiles` must hold 10, 50 and 90).
pub fn render_curve(curve: &[(u64, DistReport)]) -> String {
    let sampled = curve.iter().any(|(_, r)| r.evidence.is_some());
    let mut out = String::from(
        "# working set by horizon: bytes accessed at least once in the last T \
         (over the snapshots: median, 10th and 90th percentiles)\n",
    );
    if sampled {
        out.push_str(&format!(
            "# samples: the median number in the working set; seen: the smallest part of the \
             working set, by share of those samples, seen with {:.0} % probability\n",
            Evidence::CONFIDENCE * 100.0
        ));
    }
    out.push_str(&format!(
        "# {:>9} {:>12} {:>12} {:>12}",
        "horizon", "median", "p10", "p90"
    ));
    if sampled {
        out.push_str(&format!(" {:>8} {:>6}", "samples", "seen"));
    }
    out.push('\n');
    for (horizon_ns, report) in curve {
        let Some(d) = report.distributions.first() else {
            continue;
        };
        let at = |p: f64| {
            d.percentiles
                .iter()
                .find(|v| v.percentile == p)
                .map_or("-".to_string(), |v| human::size(v.value))
        };
        out.push_str(&format!(
            "  {:>9} {:>12} {:>12} {:>12}",
            human::seconds(*horizon_ns, 3),
            at(50.0),
            at(10.0),
            at(90.0)
        ));
        if let Some(e) = &report.evidence {
            let mark = if e.is_enough() { "" } else { "  (few samples)" };
            out.push_str(&format!(
                " {:>8} {:>5.0}%{mark}",
                e.median_samples,
                (e.share_seen * 100.0).ceil()
            ));
        }
        out.push('\n');
        if let Some(w) = &report.warning {
            out.push_str(&format!(
                "# warning at {}: {w}\n",
                human::seconds(*horizon_ns, 3)
            ));
        }
    }
    out
}
