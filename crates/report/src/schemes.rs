//! DAMOS in a record, `udamon report schemes`: what each scheme tried and applied (its cumulative
//! statistics, bytes per time row, the tried-region passes), how much memory the schemes kept out
//! of each target's memory over time, and what that cost in refaults, as a share of the working
//! set per minute: the far-memory papers hold [`REFAULT_REFERENCE_PCT_PER_MIN`] or less to be
//! harmless, which is the question a user asks before running a scheme on production.
//!
//! One streaming pass. Scheme statistics and refaults are cumulative counters in the record, so a
//! time row gets the increase of the counters within it; resident and paged-out bytes are states
//! written when they change, so a row shows the state at its end. Rows start fine (one aggregation
//! interval) and pairs of rows merge whenever the record outgrows the allowed number, so memory is
//! bounded by the number of rows, schemes and targets, never by the length of the record.

use crate::wss::WssFilter;
use crate::{ReportError, Result, human, target_name};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use udamon_record::model::{
    EventKind, Frame, Header, SchemeStatsRecord, Targets, TriedRegionRecord,
};

/// Refaults per minute, in percent of the working set, that far-memory deployments accept
/// (Google's "Software-defined far memory" keeps the promotion rate at or below 0.2 %/min).
pub const REFAULT_REFERENCE_PCT_PER_MIN: f64 = 0.2;

/// The most time rows a report may have, whatever the options ask.
pub const MAX_ROWS: usize = 10_000;

/// Rows are collected this many times finer than asked, so that the final grouping can come
/// close to the asked number of rows (merging by pairs alone could leave only half of them).
const FINE_ROWS_PER_ROW: usize = 16;

const NS_PER_MIN: f64 = 60e9;

/// How finely the time series are cut, and what counts as the working set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemesOptions {
    /// The length of a time row in ns; `None` picks one that gives about `rows` rows.
    pub bucket_ns: Option<u64>,
    /// How many time rows to aim for when `bucket_ns` is `None` (1 to [`MAX_ROWS`]).
    pub rows: usize,
    /// Which regions count as the working set (as in the wss report).
    pub wss_filter: WssFilter,
}

impl Default for SchemesOptions {
    fn default() -> Self {
        SchemesOptions {
            bucket_ns: None,
            rows: 20,
            wss_filter: WssFilter::default(),
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemesReport {
    /// The first and last time the record mentions, in ns on the record's time line.
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    pub nr_snapshots: usize,
    /// The length of a time row (the last row ends with the record, so it may be shorter).
    pub bucket_ns: u64,
    pub schemes: Vec<SchemeReport>,
    /// Targets whose memory the record reports, by target index.
    pub targets: Vec<TargetMemoryReport>,
    /// Refaults of all those targets together, against the sum of their working sets (unknown
    /// when one of them has no snapshots); `None` when no target reported its memory.
    pub refaults: Option<RefaultSummary>,
    pub refault_reference_pct_per_min: f64,
    /// What the reader should know about what could not be computed.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemeReport {
    pub scheme: u32,
    /// `None` when the record has tried regions of the scheme but no statistics.
    pub action: Option<String>,
    /// The cumulative statistics as last written.
    pub stats: SchemeStatsRecord,
    /// `sz_applied` over the record's duration; `None` for a record without duration.
    pub applied_bytes_per_sec: Option<f64>,
    pub applied_bytes_per_min: Option<f64>,
    pub tried_regions: TriedRegionsSummary,
    pub series: Vec<SchemeRow>,
    /// When less was applied than tried: what the record says of why (the notes of the
    /// operations about the scheme's action), or that it does not say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_applied: Vec<String>,
}

/// What a scheme tried and applied within one time row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SchemeRow {
    pub start_ns: u64,
    pub end_ns: u64,
    pub sz_tried: u64,
    pub sz_applied: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TriedRegionsSummary {
    /// Apply passes whose tried regions the record captured (including passes that tried none).
    pub passes: usize,
    pub last: Option<TriedPass>,
}

/// One captured apply pass, summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TriedPass {
    pub time_ns: u64,
    pub nr_regions: usize,
    pub total_bytes: u64,
    pub sz_filter_passed: u64,
    /// Lowest start and highest end of the regions; `None` when it tried none.
    pub span: Option<AddressSpan>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AddressSpan {
    pub start: u64,
    pub end: u64,
}

/// One target's memory as the operations observed it. Paged out: bytes out of memory because
/// schemes paged them out, the memory they saved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetMemoryReport {
    pub target: u32,
    pub pid: Option<u32>,
    pub cmdline: Option<String>,
    pub final_resident_bytes: u64,
    pub final_paged_out_bytes: u64,
    pub peak_paged_out_bytes: u64,
    pub peak_paged_out_at_ns: u64,
    /// Time-weighted over the whole record; nothing is saved before the first observation
    /// (records write the memory as soon as it is known, and paging out changes it).
    pub average_paged_out_bytes: f64,
    pub refaults: RefaultSummary,
    pub series: Vec<MemoryRow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RefaultSummary {
    /// Bytes paged out by schemes and touched again, over the record.
    pub refaulted_bytes: u64,
    /// `None` for a record without duration.
    pub bytes_per_min: Option<f64>,
    /// Working-set size averaged over the snapshots; `None` without snapshots.
    pub mean_wss_bytes: Option<f64>,
    /// `bytes_per_min / mean_wss_bytes` in percent; `None` when either is unknown or the
    /// working set is empty.
    pub pct_of_wss_per_min: Option<f64>,
    /// Whether that share is at or below [`REFAULT_REFERENCE_PCT_PER_MIN`].
    pub within_reference: Option<bool>,
}

/// One target's memory in one time row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryRow {
    pub start_ns: u64,
    pub end_ns: u64,
    /// The state at the end of the row; `None` before the first observation.
    pub resident_bytes: Option<u64>,
    pub paged_out_bytes: Option<u64>,
    /// Refaulted within the row.
    pub refaulted_bytes: u64,
    /// The mean working-set size of the row's snapshots; `None` when it has none.
    pub mean_wss_bytes: Option<f64>,
    pub refault_pct_of_wss_per_min: Option<f64>,
}

/// Builds the report in one pass over the frames.
pub fn schemes(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    opts: &SchemesOptions,
) -> Result<SchemesReport> {
    let mut timeline = Timeline::new(header, opts)?;
    let mut pass = Pass::new(header);
    for frame in frames {
        pass.read(frame, &mut timeline, &opts.wss_filter);
    }
    if pass.schemes.is_empty() {
        return Err(ReportError::NoSchemes);
    }
    let (start_ns, end_ns) = timeline.span();
    let duration_ns = end_ns - start_ns;
    let mut notes = timeline.notes();
    let rows = timeline.rows(opts);
    let targets = pass.memory_reports(&rows, start_ns, end_ns);
    let refaults = if targets.is_empty() {
        notes.push(
            "no target memory in the record (resident, paged out, refaulted): the operations did not observe it, so memory saved and refaults are unknown"
                .to_string(),
        );
        None
    } else {
        Some(pass.all_refaults(duration_ns))
    };
    if pass.nr_snapshots == 0 {
        notes.push(
            "the record has no snapshots, so the working set, and the refault share of it, are unknown"
                .to_string(),
        );
    }
    Ok(SchemesReport {
        start_ns,
        end_ns,
        duration_ns,
        nr_snapshots: pass.nr_snapshots,
        bucket_ns: rows.width,
        schemes: pass.scheme_reports(&rows, duration_ns),
        targets,
        refaults,
        refault_reference_pct_per_min: REFAULT_REFERENCE_PCT_PER_MIN,
        notes,
    })
}

/// What the pass over the frames gathers, per scheme and per target (each indexed densely
/// by its id), besides the time rows.
struct Pass {
    schemes: Vec<SchemeState>,
    scheme_index: BTreeMap<u32, usize>,
    targets: Vec<TargetState>,
    target_index: BTreeMap<u32, usize>,
    nr_snapshots: usize,
    known: Targets,
    /// The operations' notes of trouble, which may say why a scheme applied nothing.
    action_notes: Vec<String>,
}

impl Pass {
    fn new(header: &Header) -> Pass {
        Pass {
            schemes: Vec::new(),
            scheme_index: BTreeMap::new(),
            targets: Vec::new(),
            target_index: BTreeMap::new(),
            nr_snapshots: 0,
            known: Targets::new(header),
            action_notes: Vec::new(),
        }
    }

    fn read(&mut self, frame: Frame, timeline: &mut Timeline, wss_filter: &WssFilter) {
        self.known.observe(&frame);
        match frame {
            Frame::Snapshot(s) => {
                self.nr_snapshots += 1;
                timeline.see(s.start_ns);
                let bucket = timeline.bucket(s.end_ns);
                for t in &s.targets {
                    let i = self.target(t.target);
                    let wss = wss_filter.wss(&t.regions);
                    self.targets[i].wss_sum += u128::from(wss);
                    self.targets[i].wss_snapshots += 1;
                    let cell = bucket.target(i);
                    cell.wss_sum += u128::from(wss);
                    cell.wss_snapshots += 1;
                }
            }
            Frame::Event(e) => match e.kind {
                EventKind::SchemeStats {
                    scheme,
                    action,
                    stats,
                } => {
                    let i = self.scheme(scheme);
                    let state = &mut self.schemes[i];
                    let cell = timeline.bucket(e.time_ns).scheme(i);
                    cell.tried += increase(state.stats.sz_tried, stats.sz_tried);
                    cell.applied += increase(state.stats.sz_applied, stats.sz_applied);
                    state.stats = stats;
                    state.action = Some(action);
                }
                EventKind::SchemeTriedRegions { scheme, regions } => {
                    timeline.see(e.time_ns);
                    let i = self.scheme(scheme);
                    self.schemes[i].passes += 1;
                    self.schemes[i].last_pass = Some(tried_pass(e.time_ns, &regions));
                }
                EventKind::TargetMemory {
                    target,
                    resident_bytes,
                    paged_out_bytes,
                    refaulted_bytes,
                } => {
                    let i = self.target(target);
                    let m = self.targets[i]
                        .memory
                        .get_or_insert_with(MemoryState::default);
                    let refaulted =
                        m.observe(e.time_ns, resident_bytes, paged_out_bytes, refaulted_bytes);
                    let cell = timeline.bucket(e.time_ns).target(i);
                    cell.memory = Some((resident_bytes, paged_out_bytes));
                    cell.refaulted += refaulted;
                }
                EventKind::Note { text } => {
                    timeline.see(e.time_ns);
                    // Few: the operations note each kind of trouble once per process.
                    if self.action_notes.len() < MAX_ACTION_NOTES
                        && !self.action_notes.contains(&text)
                    {
                        self.action_notes.push(text);
                    }
                }
                _ => timeline.see(e.time_ns),
            },
        }
    }

    fn scheme(&mut self, id: u32) -> usize {
        dense(
            &mut self.scheme_index,
            &mut self.schemes,
            id,
            SchemeState::new,
        )
    }

    fn target(&mut self, id: u32) -> usize {
        dense(
            &mut self.target_index,
            &mut self.targets,
            id,
            TargetState::new,
        )
    }

    /// Each scheme's statistics, rates over the record's `duration_ns`, passes and time rows.
    fn scheme_reports(&self, rows: &Rows, duration_ns: u64) -> Vec<SchemeReport> {
        let minutes = (duration_ns > 0).then(|| duration_ns as f64 / NS_PER_MIN);
        self.scheme_index
            .iter()
            .map(|(&id, &i)| {
                let s = &self.schemes[i];
                SchemeReport {
                    scheme: id,
                    action: s.action.clone(),
                    stats: s.stats,
                    applied_bytes_per_sec: minutes.map(|m| s.stats.sz_applied as f64 / (m * 60.0)),
                    applied_bytes_per_min: minutes.map(|m| s.stats.sz_applied as f64 / m),
                    tried_regions: TriedRegionsSummary {
                        passes: s.passes,
                        last: s.last_pass,
                    },
                    not_applied: not_applied(s, &self.action_notes),
                    series: rows
                        .rows
                        .iter()
                        .map(|row| {
                            let cell = row.bucket.schemes.get(i).copied().unwrap_or_default();
                            SchemeRow {
                                start_ns: row.start_ns,
                                end_ns: row.end_ns,
                                sz_tried: cell.tried,
                                sz_applied: cell.applied,
                            }
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The memory of each target whose memory the record has, from `start_ns` to `end_ns`.
    fn memory_reports(&self, rows: &Rows, start_ns: u64, end_ns: u64) -> Vec<TargetMemoryReport> {
        let duration_ns = end_ns - start_ns;
        let mut reports = Vec::new();
        for (&id, &i) in &self.target_index {
            let t = &self.targets[i];
            let Some(m) = &t.memory else {
                continue;
            };
            reports.push(TargetMemoryReport {
                target: id,
                pid: self.known.get(id).and_then(|t| t.pid),
                cmdline: self.known.get(id).map(|t| t.cmdline.clone()),
                final_resident_bytes: m.resident,
                final_paged_out_bytes: m.paged_out,
                peak_paged_out_bytes: m.peak_paged_out,
                peak_paged_out_at_ns: m.peak_paged_out_at_ns.unwrap_or(start_ns),
                average_paged_out_bytes: if duration_ns == 0 {
                    m.paged_out as f64
                } else {
                    (m.paged_out_integral
                        + u128::from(m.paged_out) * u128::from(end_ns - m.since_ns))
                        as f64
                        / duration_ns as f64
                },
                refaults: refault_summary(
                    m.refaulted,
                    duration_ns,
                    mean(t.wss_sum, t.wss_snapshots),
                ),
                series: memory_rows(rows, i),
            });
        }
        reports
    }

    /// The refaults of every target whose memory the record has, against their working sets.
    fn all_refaults(&self, duration_ns: u64) -> RefaultSummary {
        let observed = || self.targets.iter().filter(|t| t.memory.is_some());
        let refaulted: u64 = observed()
            .filter_map(|t| t.memory.as_ref())
            .map(|m| m.refaulted)
            .sum();
        let wss_sum: u128 = observed().map(|t| t.wss_sum).sum();
        // A share for all targets needs the working set of every target whose refaults it counts.
        let wss_known = observed().all(|t| t.wss_snapshots > 0);
        let mean_wss = mean(wss_sum, self.nr_snapshots as u64).filter(|_| wss_known);
        refault_summary(refaulted, duration_ns, mean_wss)
    }
}

/// Target `i`'s memory per time row: the state at each row's end, its refaults and working set.
fn memory_rows(rows: &Rows, i: usize) -> Vec<MemoryRow> {
    let mut last = None;
    rows.rows
        .iter()
        .map(|row| {
            let cell = row.bucket.targets.get(i).copied().unwrap_or_default();
            last = cell.memory.or(last);
            let mean_wss = mean(cell.wss_sum, cell.wss_snapshots);
            MemoryRow {
                start_ns: row.start_ns,
                end_ns: row.end_ns,
                resident_bytes: last.map(|(r, _)| r),
                paged_out_bytes: last.map(|(_, s)| s),
                refaulted_bytes: cell.refaulted,
                mean_wss_bytes: mean_wss,
                refault_pct_of_wss_per_min: share(
                    cell.refaulted,
                    row.end_ns - row.start_ns,
                    mean_wss,
                ),
            }
        })
        .collect()
}

/// What a cumulative counter gained; a counter that went back restarted (records joined
/// together), so all of its new value is new.
fn increase(previous: u64, now: u64) -> u64 {
    now.checked_sub(previous).unwrap_or(now)
}

fn mean(sum: u128, count: u64) -> Option<f64> {
    (count > 0).then(|| sum as f64 / count as f64)
}

/// Refaulted bytes per minute as a percentage of the working set.
fn share(refaulted: u64, span_ns: u64, mean_wss: Option<f64>) -> Option<f64> {
    let wss = mean_wss.filter(|&w| w > 0.0)?;
    (span_ns > 0).then(|| refaulted as f64 / (span_ns as f64 / NS_PER_MIN) / wss * 100.0)
}

fn refault_summary(refaulted: u64, duration_ns: u64, mean_wss: Option<f64>) -> RefaultSummary {
    let pct = share(refaulted, duration_ns, mean_wss);
    RefaultSummary {
        refaulted_bytes: refaulted,
        bytes_per_min: (duration_ns > 0)
            .then(|| refaulted as f64 / (duration_ns as f64 / NS_PER_MIN)),
        mean_wss_bytes: mean_wss,
        pct_of_wss_per_min: pct,
        within_reference: pct.map(|p| p <= REFAULT_REFERENCE_PCT_PER_MIN),
    }
}

fn tried_pass(time_ns: u64, regions: &[TriedRegionRecord]) -> TriedPass {
    let span = regions
        .iter()
        .map(|r| r.start)
        .min()
        .zip(regions.iter().map(|r| r.end).max())
        .map(|(start, end)| AddressSpan { start, end });
    TriedPass {
        time_ns,
        nr_regions: regions.len(),
        total_bytes: regions.iter().map(|r| r.end.saturating_sub(r.start)).sum(),
        sz_filter_passed: regions.iter().map(|r| r.sz_filter_passed).sum(),
        span,
    }
}

/// The dense index of `id`, adding a fresh state for an id not seen before.
fn dense<T>(
    index: &mut BTreeMap<u32, usize>,
    states: &mut Vec<T>,
    id: u32,
    new: fn() -> T,
) -> usize {
    *index.entry(id).or_insert_with(|| {
        states.push(new());
        states.len() - 1
    })
}

#[derive(Debug)]
struct SchemeState {
    action: Option<String>,
    stats: SchemeStatsRecord,
    passes: usize,
    last_pass: Option<TriedPass>,
}

impl SchemeState {
    fn new() -> Self {
        SchemeState {
            action: None,
            stats: SchemeStatsRecord::default(),
            passes: 0,
            last_pass: None,
        }
    }
}

#[derive(Debug)]
struct TargetState {
    wss_sum: u128,
    wss_snapshots: u64,
    memory: Option<MemoryState>,
}

impl TargetState {
    fn new() -> Self {
        TargetState {
            wss_sum: 0,
            wss_snapshots: 0,
            memory: None,
        }
    }
}

#[derive(Debug, Default)]
struct MemoryState {
    resident: u64,
    paged_out: u64,
    /// The record's cumulative counter as last written.
    refaulted_counter: u64,
    /// What that counter gained over the record.
    refaulted: u64,
    peak_paged_out: u64,
    /// When the peak was first reached; `None` before the first observation.
    peak_paged_out_at_ns: Option<u64>,
    /// Since when `paged_out` holds, and ∫ paged_out dt (bytes × ns) before that.
    since_ns: u64,
    paged_out_integral: u128,
}

impl MemoryState {
    /// Takes in one observation; returns the bytes refaulted since the previous one.
    fn observe(
        &mut self,
        time_ns: u64,
        resident: u64,
        paged_out: u64,
        refaulted_counter: u64,
    ) -> u64 {
        let held = time_ns.saturating_sub(self.since_ns);
        self.paged_out_integral += u128::from(self.paged_out) * u128::from(held);
        self.since_ns = self.since_ns.max(time_ns);
        if self.peak_paged_out_at_ns.is_none() || paged_out > self.peak_paged_out {
            self.peak_paged_out = paged_out;
            self.peak_paged_out_at_ns = Some(time_ns);
        }
        let refaulted = increase(self.refaulted_counter, refaulted_counter);
        self.refaulted += refaulted;
        self.refaulted_counter = refaulted_counter;
        self.resident = resident;
        self.paged_out = paged_out;
        refaulted
    }
}

/// One fine time bucket: counter increases and states, per scheme and target (dense indexes).
#[derive(Debug, Default, Clone)]
struct Bucket {
    schemes: Vec<SchemeCell>,
    targets: Vec<TargetCell>,
}

#[derive(Debug, Default, Clone, Copy)]
struct SchemeCell {
    tried: u64,
    applied: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct TargetCell {
    /// Resident and paged-out bytes as last written within the bucket.
    memory: Option<(u64, u64)>,
    refaulted: u64,
    wss_sum: u128,
    wss_snapshots: u64,
}

impl Bucket {
    fn scheme(&mut self, i: usize) -> &mut SchemeCell {
        if self.schemes.len() <= i {
            self.schemes.resize(i + 1, SchemeCell::default());
        }
        &mut self.schemes[i]
    }

    fn target(&mut self, i: usize) -> &mut TargetCell {
        if self.targets.len() <= i {
            self.targets.resize(i + 1, TargetCell::default());
        }
        &mut self.targets[i]
    }

    /// Adds a later bucket to this one.
    fn absorb(&mut self, later: &Bucket) {
        for (i, c) in later.schemes.iter().enumerate() {
            let cell = self.scheme(i);
            cell.tried += c.tried;
            cell.applied += c.applied;
        }
        for (i, c) in later.targets.iter().enumerate() {
            let cell = self.target(i);
            cell.memory = c.memory.or(cell.memory);
            cell.refaulted += c.refaulted;
            cell.wss_sum += c.wss_sum;
            cell.wss_snapshots += c.wss_snapshots;
        }
    }

    fn merged(run: &[Bucket]) -> Bucket {
        let mut b = Bucket::default();
        for later in run {
            b.absorb(later);
        }
        b
    }
}

/// Buckets `(origin + i·width, origin + (i+1)·width]` (the first one also holds `origin`): an
/// aggregation window ending exactly at a row's end belongs to that row, with the statistics
/// written at the same instant.
struct Timeline {
    origin: Option<u64>,
    end: u64,
    width: u64,
    asked_width: Option<u64>,
    /// More buckets than this and pairs of them merge.
    cap: usize,
    buckets: Vec<Bucket>,
}

/// The final rows.
struct Rows {
    width: u64,
    rows: Vec<Row>,
}

struct Row {
    start_ns: u64,
    end_ns: u64,
    bucket: Bucket,
}

impl Timeline {
    fn new(header: &Header, opts: &SchemesOptions) -> Result<Self> {
        if opts.bucket_ns == Some(0) {
            return Err(ReportError::Buckets(
                "the row length must be above 0".to_string(),
            ));
        }
        if opts.bucket_ns.is_none() && !(1..=MAX_ROWS).contains(&opts.rows) {
            return Err(ReportError::Buckets(format!(
                "asked for {} rows: give 1 to {MAX_ROWS}",
                opts.rows
            )));
        }
        let (width, cap) = match opts.bucket_ns {
            Some(w) => (w, MAX_ROWS),
            None => (
                header.intervals.aggr_us.saturating_mul(1000).max(1),
                opts.rows * FINE_ROWS_PER_ROW,
            ),
        };
        Ok(Timeline {
            origin: None,
            end: 0,
            width,
            asked_width: opts.bucket_ns,
            cap,
            buckets: Vec::new(),
        })
    }

    fn index(&self, t: u64) -> usize {
        let offset = t.saturating_sub(self.origin.unwrap_or(t)).saturating_sub(1);
        usize::try_from(offset / self.width).unwrap_or(usize::MAX)
    }

    /// Extends the record's span to `t`, widening the buckets if it needs too many.
    fn see(&mut self, t: u64) {
        let origin = *self.origin.get_or_insert(t);
        self.end = self.end.max(t).max(origin);
        while self.index(t) >= self.cap {
            self.width = self.width.saturating_mul(2);
            let fine = std::mem::take(&mut self.buckets);
            self.buckets = fine.chunks(2).map(Bucket::merged).collect();
        }
    }

    fn bucket(&mut self, t: u64) -> &mut Bucket {
        self.see(t);
        let i = self.index(t);
        if self.buckets.len() <= i {
            self.buckets.resize_with(i + 1, Bucket::default);
        }
        &mut self.buckets[i]
    }

    fn span(&self) -> (u64, u64) {
        let start = self.origin.unwrap_or(0);
        (start, self.end)
    }

    fn notes(&self) -> Vec<String> {
        match self.asked_width {
            Some(asked) if asked != self.width => vec![format!(
                "rows are {} long instead of the {} asked, to stay within {MAX_ROWS} rows",
                human::duration(self.width),
                human::duration(asked)
            )],
            _ => Vec::new(),
        }
    }

    /// The buckets over the whole span, grouped to about the asked number of rows.
    fn rows(mut self, opts: &SchemesOptions) -> Rows {
        let (start, end) = self.span();
        let n = self.index(end) + 1;
        self.buckets.resize_with(n, Bucket::default);
        let group = match opts.bucket_ns {
            Some(_) => 1,
            None => n.div_ceil(opts.rows).max(1),
        };
        let width = self.width.saturating_mul(group as u64);
        let rows = self
            .buckets
            .chunks(group)
            .enumerate()
            .map(|(g, run)| {
                let row_start = start.saturating_add(width.saturating_mul(g as u64));
                Row {
                    start_ns: row_start.min(end),
                    end_ns: row_start.saturating_add(width).min(end),
                    bucket: Bucket::merged(run),
                }
            })
            .collect();
        Rows { width, rows }
    }
}

/// Right-aligned columns except the `left` ones, two spaces apart.
fn table(out: &mut String, head: &[String], rows: &[Vec<String>], left: &[usize]) {
    let mut widths: Vec<usize> = head.iter().map(String::len).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in std::iter::once(head).chain(rows.iter().map(Vec::as_slice)) {
        let mut line = String::new();
        for (i, (cell, &w)) in row.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            if left.contains(&i) {
                let _ = write!(line, "{cell:<w$}");
            } else {
                let _ = write!(line, "{cell:>w$}");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn opt_size(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), human::size)
}

fn opt_pct_per_min(v: Option<f64>) -> String {
    v.map_or_else(
        || "-".to_string(),
        |p| format!("{} %/min", human::number(p)),
    )
}

fn refault_text(r: &RefaultSummary) -> String {
    let mut text = format!("refaulted {}", human::size(r.refaulted_bytes));
    if let Some(per_min) = r.bytes_per_min {
        let _ = write!(text, ", {}/min", human::size(per_min.round() as u64));
    }
    match (r.mean_wss_bytes, r.pct_of_wss_per_min) {
        (Some(wss), Some(pct)) => {
            let verdict = if pct <= REFAULT_REFERENCE_PCT_PER_MIN {
                "within"
            } else {
                "above"
            };
            let _ = write!(
                text,
                " = {} %/min of the mean working set ({}): {verdict} the {} %/min the far-memory papers hold acceptable",
                human::number(pct),
                human::size(wss.round() as u64),
                human::number(REFAULT_REFERENCE_PCT_PER_MIN)
            );
        }
        (Some(_), None) if r.bytes_per_min.is_some() => {
            text.push_str("; the working set was empty, so no share of it");
        }
        (None, _) => text.push_str("; working set unknown (the record has no snapshots of it)"),
        _ => {}
    }
    text
}

/// Notes kept for the schemes report: more would be the same troubles on more processes.
const MAX_ACTION_NOTES: usize = 20;

/// Why a scheme applied less than it tried, as far as the record's notes say.
fn not_applied(s: &SchemeState, notes: &[String]) -> Vec<String> {
    let (Some(action), true) = (&s.action, s.stats.sz_applied < s.stats.sz_tried) else {
        return Vec::new();
    };
    let about: Vec<String> = notes
        .iter()
        .filter(|n| n.contains(action.as_str()))
        .cloned()
        .collect();
    if !about.is_empty() {
        return about;
    }
    vec![format!(
        "the record does not say why: tried bytes are the regions' whole ranges, applied the \
         pages {action} changed (unmapped gaps, pages the filters left, and pages already in \
         the state it makes count as tried only)"
    )]
}

/// Text: the record's span and notes, a summary table of the schemes, their tried-region passes,
/// bytes tried and applied per row, then per target the memory saved and refaults, and per row.
pub fn render_text(report: &SchemesReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# schemes: {} over {} ({} snapshots); rows of {}, each shown at its end",
        report.schemes.len(),
        human::duration(report.duration_ns),
        report.nr_snapshots,
        human::duration(report.bucket_ns)
    );
    for note in &report.notes {
        let _ = writeln!(out, "# note: {note}");
    }
    statistics_text(&mut out, report);
    not_applied_text(&mut out, report);
    tried_regions_text(&mut out, report);
    series_text(&mut out, report);
    for t in &report.targets {
        target_memory_text(&mut out, t, report.bucket_ns);
    }
    if let (Some(all), true) = (&report.refaults, report.targets.len() > 1) {
        let _ = writeln!(out, "# all targets: {}", refault_text(all));
    }
    out
}

/// Each scheme's cumulative statistics, one row a scheme.
fn statistics_text(out: &mut String, report: &SchemesReport) {
    let head = [
        "scheme",
        "action",
        "nr_tried",
        "tried",
        "nr_applied",
        "applied",
        "filter passed",
        "quota exceeded",
        "applied/min",
    ]
    .map(String::from);
    let rows: Vec<Vec<String>> = report
        .schemes
        .iter()
        .map(|s| {
            vec![
                s.scheme.to_string(),
                s.action.clone().unwrap_or_else(|| "?".to_string()),
                s.stats.nr_tried.to_string(),
                human::size(s.stats.sz_tried),
                s.stats.nr_applied.to_string(),
                human::size(s.stats.sz_applied),
                human::size(s.stats.sz_ops_filter_passed),
                s.stats.qt_exceeds.to_string(),
                opt_size(s.applied_bytes_per_min.map(|v| v.round() as u64)),
            ]
        })
        .collect();
    table(out, &head, &rows, &[0, 1]);
}

/// Why a scheme applied less than it tried, as far as the record says.
fn not_applied_text(out: &mut String, report: &SchemesReport) {
    for s in &report.schemes {
        for why in &s.not_applied {
            let _ = writeln!(
                out,
                "# scheme {}: {} of {} tried not applied: {}",
                s.scheme,
                human::size(s.stats.sz_tried - s.stats.sz_applied),
                human::size(s.stats.sz_tried),
                human::one_line(why, 400)
            );
        }
    }
}

/// Each scheme's last captured apply pass.
fn tried_regions_text(out: &mut String, report: &SchemesReport) {
    for s in &report.schemes {
        let tr = &s.tried_regions;
        let _ = write!(out, "# scheme {} tried regions: ", s.scheme);
        match &tr.last {
            None => {
                let _ = writeln!(out, "none captured");
            }
            Some(last) => {
                let _ = write!(
                    out,
                    "{} passes captured; the last, at {}: {} regions, {}",
                    tr.passes,
                    human::duration(last.time_ns),
                    last.nr_regions,
                    human::size(last.total_bytes)
                );
                if let Some(span) = last.span {
                    let _ = write!(
                        out,
                        " in {}-{}",
                        human::hex(span.start),
                        human::hex(span.end)
                    );
                }
                let _ = writeln!(
                    out,
                    ", {} passed the filters",
                    human::size(last.sz_filter_passed)
                );
            }
        }
    }
}

/// Bytes each scheme tried and applied, a row per time row.
fn series_text(out: &mut String, report: &SchemesReport) {
    let decimals = human::seconds_decimals(report.bucket_ns as f64);
    let _ = writeln!(out, "# bytes tried and applied per row");
    let mut head = vec!["time".to_string()];
    for s in &report.schemes {
        head.push(format!("tried #{}", s.scheme));
        head.push(format!("applied #{}", s.scheme));
    }
    let nr_rows = report.schemes.first().map_or(0, |s| s.series.len());
    let rows: Vec<Vec<String>> = (0..nr_rows)
        .map(|r| {
            let mut row = vec![human::seconds(report.schemes[0].series[r].end_ns, decimals)];
            for s in &report.schemes {
                row.push(human::size(s.series[r].sz_tried));
                row.push(human::size(s.series[r].sz_applied));
            }
            row
        })
        .collect();
    table(out, &head, &rows, &[]);
}

/// A target's memory saved and its refaults, over the record and a row per time row.
fn target_memory_text(out: &mut String, t: &TargetMemoryReport, bucket_ns: u64) {
    let decimals = human::seconds_decimals(bucket_ns as f64);
    let who = target_name(t.target, t.pid, t.cmdline.as_deref());
    let _ = writeln!(
        out,
        "# {who}; paged out by schemes (memory saved) {} at the end, peak {} at {}, average {}; resident {} at the end",
        human::size(t.final_paged_out_bytes),
        human::size(t.peak_paged_out_bytes),
        human::duration(t.peak_paged_out_at_ns),
        human::size(t.average_paged_out_bytes.round() as u64),
        human::size(t.final_resident_bytes)
    );
    let _ = writeln!(out, "# {}", refault_text(&t.refaults));
    let head = [
        "time",
        "resident",
        "paged out",
        "refaulted",
        "wss",
        "refaults of wss",
    ]
    .map(String::from);
    let rows: Vec<Vec<String>> = t
        .series
        .iter()
        .map(|r| {
            vec![
                human::seconds(r.end_ns, decimals),
                opt_size(r.resident_bytes),
                opt_size(r.paged_out_bytes),
                human::size(r.refaulted_bytes),
                opt_size(r.mean_wss_bytes.map(|w| w.round() as u64)),
                opt_pct_per_min(r.refault_pct_of_wss_per_min),
            ]
        })
        .collect();
    table(out, &head, &rows, &[]);
}
