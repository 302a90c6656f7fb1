//! Working-set size per snapshot, as damo's `report wss`, and over a horizon: the bytes
//! accessed at least once in the last T, for one horizon or a curve of them.
//!
//! What a window's or a horizon's accessed memory holds is counted at page resolution where
//! the record has samples ([`crate::working_set`]): a region that DAMON's rule calls accessed
//! because one sample fell in it is not counted whole when its samples show that few of its
//! pages take them. `--whole-regions` counts accessed regions whole, as damo does. Either way
//! no horizon counts memory the target no longer has or beyond what was resident.
//!
//! Sampled access sources see memory only where samples fall, a few hundred a second wherever
//! the CPU's time goes: one window often holds too few samples to find all of a working set,
//! while the union over a longer horizon does. For records of sampled sources the report also
//! says what the numbers rest on: the samples that fell in the working set over the horizon,
//! the 95 % interval of the page-resolution estimate, and how often it was settled.

use crate::dist::{self, DistOptions, DistReport, Evidence, Unit};
use crate::horizon::Horizon;
use crate::working_set::{self, AddressSpace, Basis, Membership, Replay};
use crate::{Result, human, reopen};
use std::cell::RefCell;
use std::collections::BTreeMap;
use udamon_record::model::{Frame, Header, RegionStat};

/// Which regions count as the working set, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WssFilter {
    /// Minimum `nr_accesses` (damo's `--acc_thres`, default 1).
    pub acc_thres: u32,
    /// Minimum region size in bytes (damo's `--sz_thres`, default 1).
    pub sz_thres: u64,
    /// Count the regions selected in any window that ended within the horizon before the
    /// snapshot's end.
    pub horizon: Horizon,
    /// Pages from the samples, or whole regions as damo counts.
    pub basis: Basis,
}

impl Default for WssFilter {
    fn default() -> Self {
        WssFilter {
            acc_thres: 1,
            sz_thres: 1,
            horizon: Horizon::WINDOW,
            basis: Basis::Pages,
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
    fn membership(&self) -> Membership {
        Membership {
            acc_thres: self.acc_thres,
            sz_thres: self.sz_thres,
        }
    }

    /// The working-set size of one target's regions in one window, damo's way: the selected
    /// regions whole.
    pub fn wss(&self, regions: &[RegionStat]) -> u64 {
        regions
            .iter()
            .filter(|r| self.membership().selects(r))
            .map(RegionStat::size)
            .sum()
    }
}

/// What one snapshot's working set rests on (all targets summed).
#[derive(Debug, Default, Clone, Copy)]
struct SnapshotEvidence {
    /// Raw samples in the regions selected within the horizon.
    samples: u64,
    low: u64,
    high: u64,
    /// Whether every target's estimate was settled.
    settled: bool,
}

/// The working-set size distribution over the snapshots of the record `open` yields (afresh
/// for each pass: `auto` reads it once per horizon tried), over `filter`'s horizon; `header`
/// names the targets.
pub fn wss<I, E, F>(
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
    let horizon_ns = span_of(header, &mut open, filter, opts.skip)?;
    let mut report = over_span(header, reopen(&mut open)?, filter, horizon_ns, opts)?;
    if let (Horizon::Auto, Some(evidence)) = (filter.horizon, &mut report.evidence) {
        evidence.chosen = true;
    }
    Ok(report)
}

/// The span `filter`'s horizon stands for in the record `open` yields: its own, or the one
/// [`choose_horizon`] picks for `auto` (with the first `skip` snapshots left out, as the
/// report that asks leaves them).
pub fn span_of<I, E, F>(header: &Header, open: F, filter: &WssFilter, skip: usize) -> Result<u64>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    match filter.horizon {
        Horizon::Span(ns) => Ok(ns),
        Horizon::Auto => choose_horizon(header, open, filter, skip),
    }
}

/// [`wss`] over `horizon_ns`, in one pass over `frames`.
fn over_span(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    filter: &WssFilter,
    horizon_ns: u64,
    opts: &DistOptions,
) -> Result<DistReport> {
    let mut selection = format!(
        "regions with nr_accesses >= {} and size >= {}",
        filter.acc_thres,
        human::size(filter.sz_thres)
    );
    if horizon_ns > 0 {
        selection.push_str(&format!(
            ", in any window of the last {}",
            human::seconds(horizon_ns, 3)
        ));
    }
    selection.push_str(match filter.basis {
        Basis::Pages => ", at page resolution where samples allow",
        Basis::Regions => ", whole regions",
    });
    let window_ns = header.intervals.aggr_us.saturating_mul(1000);
    let replay = RefCell::new(
        Replay::new(filter.membership(), filter.basis)
            .of_space(AddressSpace::of_source(&header.access_source.name)),
    );
    // Raw samples of the selected regions per window and target, within the horizon.
    let mut raw: BTreeMap<u32, std::collections::VecDeque<(u64, u64)>> = BTreeMap::new();
    let mut evidence: BTreeMap<u64, SnapshotEvidence> = BTreeMap::new();
    let frames = working_set::samples_first(frames).inspect(|f| replay.borrow_mut().observe(f));
    let mut report = dist::collect(
        header,
        frames,
        opts,
        "wss",
        Unit::Bytes,
        Some(selection),
        |end_ns, target| {
            let windows = raw.entry(target.target).or_default();
            let selected = target
                .regions
                .iter()
                .filter(|r| filter.membership().selects(r));
            windows.push_back((end_ns, selected.map(|r| u64::from(r.raw_samples)).sum()));
            while windows
                .front()
                .is_some_and(|w| !working_set::within(w.0, end_ns, horizon_ns))
            {
                windows.pop_front();
            }
            let e = evidence.entry(end_ns).or_insert(SnapshotEvidence {
                settled: true,
                ..SnapshotEvidence::default()
            });
            e.samples += windows.iter().map(|w| w.1).sum::<u64>();
            let Some(ws) = replay
                .borrow()
                .working_set(target.target, horizon_ns, window_ns)
            else {
                return Ok(0);
            };
            e.low += ws.low_bytes();
            e.high += ws.high_bytes();
            e.settled &= ws.total.is_settled();
            Ok(ws.bytes())
        },
    )?;
    let per_snapshot: Vec<SnapshotEvidence> = evidence.into_values().skip(report.skipped).collect();
    if per_snapshot.iter().any(|e| e.samples > 0) {
        let mut found = Evidence::new(
            horizon_ns,
            false,
            median(per_snapshot.iter().map(|e| e.samples).collect()),
        );
        if filter.basis == Basis::Pages {
            found.interval = Some((
                median(per_snapshot.iter().map(|e| e.low).collect()),
                median(per_snapshot.iter().map(|e| e.high).collect()),
            ));
            let settled = per_snapshot.iter().filter(|e| e.settled).count();
            found.settled_share = Some(settled as f64 / per_snapshot.len().max(1) as f64);
        }
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
        let report = over_span(header, reopen(&mut open)?, filter, horizon_ns, &opts)?;
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

/// The working set at several horizons (`filter`'s own is not used): for each, its span and
/// its distribution over the snapshots; `open` yields the record's frames afresh for each
/// horizon.
pub fn curve<I, E, F>(
    header: &Header,
    mut open: F,
    filter: &WssFilter,
    horizons: &[Horizon],
    opts: &DistOptions,
) -> Result<Vec<(u64, DistReport)>>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    horizons
        .iter()
        .map(|&horizon| {
            let f = WssFilter { horizon, ..*filter };
            let horizon_ns = span_of(header, &mut open, &f, opts.skip)?;
            let report = over_span(header, reopen(&mut open)?, &f, horizon_ns, opts)?;
            Ok((horizon_ns, report))
        })
        .collect()
}

/// Text for [`curve`]: one row per horizon with the median and the 10th and 90th percentiles
/// of the summed targets (`opts.percentiles` must hold 10, 50 and 90).
pub fn render_curve(curve: &[(u64, DistReport)]) -> String {
    let sampled = curve.iter().any(|(_, r)| r.evidence.is_some());
    let estimated = curve
        .iter()
        .any(|(_, r)| r.evidence.is_some_and(|e| e.interval.is_some()));
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
    if estimated {
        out.push_str(
            "# interval: the median 95 % interval of the page-resolution estimate; settled: \
             the share of snapshots where it is within about ±25 %\n",
        );
    }
    out.push_str(&format!(
        "# {:>9} {:>12} {:>12} {:>12}",
        "horizon", "median", "p10", "p90"
    ));
    if sampled {
        out.push_str(&format!(" {:>8} {:>6}", "samples", "seen"));
    }
    if estimated {
        out.push_str(&format!(" {:>27} {:>8}", "interval", "settled"));
    }
    out.push('\n');
    let nr_rows = curve
        .iter()
        .filter(|(_, r)| !r.distributions.is_empty())
        .count();
    let mut warnings: Vec<(String, Vec<String>)> = Vec::new();
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
            out.push_str(&format!(
                " {:>8} {:>5.0}%",
                e.median_samples,
                (e.share_seen * 100.0).ceil()
            ));
            if let (Some((low, high)), Some(settled)) = (e.interval, e.settled_share) {
                let interval = format!("{} - {}", human::size(low), human::size(high));
                out.push_str(&format!(" {interval:>27} {:>7.0}%", settled * 100.0));
            }
            if !e.is_enough() {
                out.push_str("  (few samples)");
            } else if !e.is_settled() {
                out.push_str("  (few repeats)");
            }
        }
        out.push('\n');
        if let Some(w) = &report.warning {
            let at = human::seconds(*horizon_ns, 3);
            match warnings.iter_mut().find(|(seen, _)| seen == w) {
                Some((_, horizons)) => horizons.push(at),
                None => warnings.push((w.clone(), vec![at])),
            }
        }
    }
    // Each warning once, after the table: most hold for every horizon alike.
    for (w, horizons) in warnings {
        if horizons.len() == nr_rows {
            out.push_str(&format!("# warning: {w}\n"));
        } else {
            out.push_str(&format!("# warning at {}: {w}\n", horizons.join(", ")));
        }
    }
    out
}
