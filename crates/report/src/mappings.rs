//! What the monitored memory is: each target's mappings as the record's `mappings` events give
//! them, with their resident bytes from its `resident` events ([`Layouts`]), and `udamon report
//! mappings`, which sums the snapshots up per mapping: its size, its resident bytes, and how
//! many of its bytes were hot (touched in the window: at page resolution where the record has
//! estimates), warm (idle for less than `cold_after`, or in an accessed region but not among
//! its touched pages) or cold, and its working set over a horizon ([`crate::working_set`]), with
//! the access rate of its bytes and the samples that fell in it.
//!
//! The rows partition the target's memory over the snapshots the report counts: each column is
//! a mean over all of them (a mapping adds nothing to the snapshots it did not exist in), and
//! each snapshot's working set, as `report wss` counts it at the same horizon, is split between
//! the mappings it lies in, what lies in none going to a row of its own. So the rows' sizes add
//! up to the mean mapped bytes, and their working sets to `report wss`'s average, snapshot for
//! snapshot: the same snapshots (the same warm-up skipped), the same horizon.

use crate::dist::DistOptions;
use crate::horizon::Horizon;
use crate::working_set::{AddressSpace, Basis, Membership, Replay, SamplesFirst, WorkingSet};
use crate::wss::{self, WssFilter};
use crate::{ReportError, Result, human, reopen, target_name};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use udamon_record::model::{EventKind, Frame, Header, MappingRecord, Snapshot, Targets};

/// Each target's mappings as of the frames observed so far, with their resident bytes as last
/// walked. Cheap to clone (the lists are shared), so that a report can keep the layout of a
/// snapshot it holds on to.
#[derive(Debug, Clone, Default)]
pub struct Layouts {
    by_target: BTreeMap<u32, Arc<Vec<MappingRecord>>>,
    /// The mappings' names, shared by every region a report names them for (a name may be
    /// long, and a snapshot has many regions).
    names: BTreeMap<u32, Arc<Vec<Arc<str>>>>,
    /// Resident bytes by (target, mapping start), from the latest `resident` event.
    resident: BTreeMap<(u32, u64), u64>,
    /// What each target's layout costs in memory, and when it was last updated (a count of
    /// updates), for keeping within [`LAYOUTS_BYTES`].
    cost: BTreeMap<u32, (usize, u64)>,
    updates: u64,
}

/// The most memory the targets' layouts may take together. A process has at most some tens of
/// thousands of mappings; a made-up record may claim millions for each of thousands of
/// targets, and then the layouts updated longest ago are forgotten (their regions go unnamed).
pub const LAYOUTS_BYTES: usize = 64 << 20;

/// What a mapping costs a layout besides its name.
const MAPPING_BYTES: usize = size_of::<MappingRecord>() + size_of::<Arc<str>>() + 32;

impl Layouts {
    /// Takes in a frame: a `mappings` event replaces its target's list, a `resident` event its
    /// resident bytes.
    pub fn observe(&mut self, frame: &Frame) {
        let Frame::Event(e) = frame else {
            return;
        };
        match &e.kind {
            EventKind::Mappings { target, mappings } => {
                self.by_target.insert(*target, Arc::new(mappings.clone()));
                let names = mappings.iter().map(|m| Arc::from(m.name.as_str()));
                self.names.insert(*target, Arc::new(names.collect()));
                self.keep_within_budget(*target);
            }
            EventKind::Resident { target, mappings } => {
                self.resident.retain(|k, _| k.0 != *target);
                self.resident.extend(
                    mappings
                        .iter()
                        .map(|m| ((*target, m.start), m.resident_bytes)),
                );
                self.keep_within_budget(*target);
            }
            _ => {}
        }
    }

    /// Counts `target`'s layout as just updated, and forgets the layouts updated longest ago
    /// while all of them take more than [`LAYOUTS_BYTES`].
    fn keep_within_budget(&mut self, target: u32) {
        let list = self.by_target.get(&target).map_or(&[][..], |l| &l[..]);
        let names: usize = list.iter().map(|m| 2 * m.name.len() + m.perms.len()).sum();
        let resident = self
            .resident
            .range((target, 0)..=(target, u64::MAX))
            .count();
        let cost = list.len() * MAPPING_BYTES + names + resident * 48;
        self.updates += 1;
        self.cost.insert(target, (cost, self.updates));
        while self.cost.values().map(|c| c.0).sum::<usize>() > LAYOUTS_BYTES {
            let Some((&oldest, _)) = self
                .cost
                .iter()
                .filter(|(t, _)| **t != target)
                .min_by_key(|(_, c)| c.1)
            else {
                break;
            };
            self.cost.remove(&oldest);
            self.by_target.remove(&oldest);
            self.names.remove(&oldest);
            self.resident.retain(|k, _| k.0 != oldest);
        }
    }

    /// The resident bytes of `target`'s mapping `[start, end)` as last walked: of the
    /// mappings walked that start in it (one that grew downwards since the walk started
    /// higher; one split since, in two pieces). `None` where none was.
    pub fn resident(&self, target: u32, start: u64, end: u64) -> Option<u64> {
        let mut walked = self
            .resident
            .range((target, start)..(target, end))
            .peekable();
        walked.peek()?;
        Some(walked.map(|(_, bytes)| bytes).sum())
    }

    /// `target`'s mappings, shared: the same list until a `mappings` event replaces it.
    fn list(&self, target: u32) -> Option<&Arc<Vec<MappingRecord>>> {
        self.by_target.get(&target)
    }

    /// Whether `target`'s page tables have been walked.
    fn walked(&self, target: u32) -> bool {
        self.resident
            .range((target, 0)..=(target, u64::MAX))
            .next()
            .is_some()
    }

    /// Whether any target's mappings are known (records before the `mappings` event, and
    /// simulations, have none).
    pub fn is_empty(&self) -> bool {
        self.by_target.is_empty()
    }

    /// `target`'s mappings that overlap `[start, end)`, in address order.
    pub fn covering(&self, target: u32, start: u64, end: u64) -> &[MappingRecord] {
        let Some(list) = self.by_target.get(&target) else {
            return &[];
        };
        &list[overlapping(list, start, end)]
    }

    /// The distinct names of the mappings overlapping `[start, end)`, in address order.
    pub fn names(&self, target: u32, start: u64, end: u64) -> Vec<Arc<str>> {
        let (Some(list), Some(all)) = (self.by_target.get(&target), self.names.get(&target)) else {
            return Vec::new();
        };
        let mut names: Vec<Arc<str>> = Vec::new();
        for name in &all[overlapping(list, start, end)] {
            if !names.contains(name) {
                names.push(Arc::clone(name));
            }
        }
        names
    }
}

/// The indexes of the mappings of `list` (in address order) that overlap `[start, end)`.
fn overlapping(list: &[MappingRecord], start: u64, end: u64) -> std::ops::Range<usize> {
    let from = list.partition_point(|m| m.end <= start);
    from..from + list[from..].partition_point(|m| m.start < end)
}

/// Options of `report mappings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingsOptions {
    /// Memory idle this long or longer counts as cold.
    pub cold_after_ns: u64,
    /// Snapshots left out at the start, while regions adapt (as the distribution reports, and
    /// with the same default); a record with no more than these is counted whole.
    pub skip: usize,
    /// The horizon of the working set shown per mapping.
    pub horizon: Horizon,
}

impl Default for MappingsOptions {
    fn default() -> Self {
        MappingsOptions {
            cold_after_ns: 10_000_000_000,
            skip: DistOptions::default().skip,
            horizon: Horizon::seconds(10),
        }
    }
}

/// The name of the row of the working set that lies in none of the target's mappings (memory
/// mapped after the last `mappings` event, the code of instructions outside them).
pub const OUTSIDE: &str = "[outside the mappings]";

/// One mapping of one target (one row: [`Rows`]), over the snapshots it existed in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MappingSummary {
    pub target: u32,
    /// Its range: the lowest start and the highest end it had (a heap grows; 0 and 0 for the
    /// row of [`OUTSIDE`]).
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub name: String,
    /// Snapshots in which it existed.
    pub nr_snapshots: usize,
    /// Mean bytes per snapshot counted (0 where it did not exist): its size, its resident
    /// bytes (over the snapshots after its target's first walk; none for records without
    /// `resident` events), and of it monitored, hot (touched in the window), warm (idle less
    /// than the cold threshold, or in a region accessed in the window but not among its
    /// touched pages) and cold, and its working set over the report's horizon.
    pub size_bytes: u64,
    pub resident_bytes: Option<u64>,
    pub monitored_bytes: u64,
    pub hot_bytes: u64,
    pub warm_bytes: u64,
    pub cold_bytes: u64,
    pub working_set_bytes: u64,
    /// Mean accesses per second of its hot bytes (byte-weighted).
    pub hot_access_hz: f64,
    /// Samples that fell in it over the record (sampled sources), a region's shared out by
    /// size.
    pub samples: f64,
}

impl MappingSummary {
    /// Its address range as the reports show it (`-` for the row of [`OUTSIDE`]).
    pub fn range_text(&self) -> String {
        if self.name == OUTSIDE && self.start == self.end {
            "-".to_string()
        } else {
            format!("{}-{}", human::hex(self.start), human::hex(self.end))
        }
    }

    /// Its cells between the target and the name, as every report of the mappings shows them
    /// ([`row_columns`]).
    pub fn row_cells(&self, resident: bool, sampled: bool) -> Vec<String> {
        let mut row = vec![
            self.range_text(),
            self.perms.clone(),
            human::size(self.size_bytes),
        ];
        if resident {
            row.push(self.resident_bytes.map_or("-".to_string(), human::size));
        }
        row.extend([
            human::size(self.hot_bytes),
            human::size(self.warm_bytes),
            human::size(self.cold_bytes),
            human::size(self.working_set_bytes),
            format!("{} Hz", human::number(self.hot_access_hz)),
        ]);
        if sampled {
            row.push(format!("{:.0}", self.samples));
        }
        row
    }
}

/// The headings of [`MappingSummary::row_cells`], each with its width in the text report (the
/// first left-aligned, the others right-aligned): with a resident column when the record read
/// residency, and a samples column when it holds samples.
pub fn row_columns(resident: bool, sampled: bool) -> Vec<(&'static str, usize)> {
    let mut columns = vec![("address range", 29), ("perm", 4), ("size", 11)];
    if resident {
        columns.push(("resident", 11));
    }
    columns.extend([
        ("hot", 11),
        ("warm", 11),
        ("cold", 11),
        ("ws", 11),
        ("hot rate", 10),
    ]);
    if sampled {
        columns.push(("samples", 8));
    }
    columns
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MappingsReport {
    pub cold_after_ns: u64,
    /// The horizon's span (`auto` chosen as `report wss` chooses it).
    pub horizon_ns: u64,
    pub nr_snapshots: usize,
    /// Snapshots left out at the start.
    pub skipped: usize,
    /// Why the skip was not applied, as `report wss` says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// By target, then mean hot bytes, most first.
    pub mappings: Vec<MappingSummary>,
    /// Target names, by index.
    pub targets: BTreeMap<u32, String>,
}

/// Sums for one mapping.
#[derive(Debug, Default)]
struct Sums {
    /// The lowest start and the highest end it had.
    start: u64,
    end: u64,
    nr_snapshots: usize,
    size: f64,
    resident: f64,
    resident_snapshots: usize,
    monitored: f64,
    hot: f64,
    warm: f64,
    cold: f64,
    working_set: f64,
    hot_hz_bytes: f64,
    samples: f64,
}

/// `report mappings` of the record `open` yields: streams it once (`auto` reads it once more
/// per horizon tried); memory grows with the number of distinct mappings, not with the
/// record's length.
pub fn mappings<I, E, F>(
    header: &Header,
    mut open: F,
    opts: &MappingsOptions,
) -> Result<MappingsReport>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    let filter = WssFilter {
        horizon: opts.horizon,
        ..WssFilter::default()
    };
    let horizon_ns = wss::span_of(header, &mut open, &filter, opts.skip)?;
    let mut live = LiveMappings::new(header, opts, horizon_ns);
    for frame in reopen(&mut open)? {
        live.observe(frame);
    }
    live.finish();
    live.report()
}

/// A row of the report: the target, and the start, permissions and name of the mapping it
/// began with.
type RowKey = (u32, u64, String, String);

/// The sums over some of the snapshots.
#[derive(Debug, Default)]
struct Counted {
    sums: BTreeMap<RowKey, Sums>,
    /// What `sums` takes; past [`SUMS_BYTES`] the report is refused.
    bytes: usize,
    snapshots: usize,
    /// By target, the snapshots counted after its first page-table walk.
    walked: BTreeMap<u32, usize>,
}

impl Counted {
    /// The sums of row `key`.
    fn row(&mut self, key: &RowKey) -> &mut Sums {
        if !self.sums.contains_key(key) {
            self.bytes += size_of::<Sums>() + 96 + key.2.len() + key.3.len();
            let first = Sums {
                start: u64::MAX,
                ..Sums::default()
            };
            self.sums.insert(key.clone(), first);
        }
        self.sums.get_mut(key).expect("inserted above")
    }
}

/// Which row each of a target's mappings is summed in: a mapping is one row while it keeps its
/// permissions and name, whichever way it grows or shrinks (CPython's arenas grow an anonymous
/// mapping downwards, a heap grows upwards), so that no two rows hold the same memory at once.
#[derive(Debug, Default)]
struct Rows {
    /// By target: its mappings as last counted, and each one's row.
    by_target: BTreeMap<u32, (Arc<Vec<MappingRecord>>, Vec<RowKey>)>,
}

impl Rows {
    /// The rows of `target`'s mappings `list`: a mapping overlapping one of the previous list
    /// with the same permissions and name continues its row; any other begins its own.
    fn of(&mut self, target: u32, list: &Arc<Vec<MappingRecord>>) -> &[RowKey] {
        let known = self.by_target.get(&target);
        if !known.is_some_and(|(old, _)| Arc::ptr_eq(old, list)) {
            let keys = list
                .iter()
                .map(|m| {
                    let continued = known.and_then(|(old, keys)| {
                        overlapping(old, m.start, m.end)
                            .find(|&i| old[i].perms == m.perms && old[i].name == m.name)
                            .map(|i| keys[i].clone())
                    });
                    continued.unwrap_or_else(|| (target, m.start, m.perms.clone(), m.name.clone()))
                })
                .collect();
            self.by_target.insert(target, (Arc::clone(list), keys));
        }
        &self.by_target[&target].1
    }
}

/// `report mappings` of a record that is still growing (a live view): frames go in as they
/// come, and the report covers those seen so far. A sampled record writes a window's samples
/// after its snapshot, so each snapshot counts once the next one (or a later window's samples)
/// has come ([`SamplesFirst`]), or at [`LiveMappings::finish`].
pub struct LiveMappings {
    opts: MappingsOptions,
    horizon_ns: u64,
    known: Targets,
    layouts: Layouts,
    window_ns: u64,
    order: SamplesFirst,
    ready: VecDeque<Frame>,
    replay: Replay,
    rows: Rows,
    /// The snapshots of the warm-up (the first `opts.skip`), and those after it: the report
    /// counts the warm-up only when nothing follows it, as the distributions do.
    warm_up: Counted,
    after: Counted,
    nr_snapshots: usize,
}

impl LiveMappings {
    /// The mappings of a record of `header`, with the working set over `horizon_ns` (the span
    /// of `opts.horizon`: [`mappings`] resolves `auto`).
    pub fn new(header: &Header, opts: &MappingsOptions, horizon_ns: u64) -> LiveMappings {
        let window_ns = header.intervals.aggr_us.saturating_mul(1000);
        LiveMappings {
            opts: *opts,
            horizon_ns,
            known: Targets::new(header),
            layouts: Layouts::default(),
            window_ns,
            order: SamplesFirst::default(),
            ready: VecDeque::new(),
            replay: Replay::new(Membership::default(), Basis::Pages)
                .of_space(AddressSpace::of_source(&header.access_source.name)),
            rows: Rows::default(),
            warm_up: Counted::default(),
            after: Counted::default(),
            nr_snapshots: 0,
        }
    }

    /// Takes in the record's next frame, in the record's order.
    pub fn observe(&mut self, frame: Frame) {
        self.order.push(frame, &mut self.ready);
        while let Some(f) = self.ready.pop_front() {
            self.count(f);
        }
    }

    /// Counts the snapshot held back for its samples: the record has ended.
    pub fn finish(&mut self) {
        self.order.finish(&mut self.ready);
        while let Some(f) = self.ready.pop_front() {
            self.count(f);
        }
    }

    fn count(&mut self, frame: Frame) {
        self.known.observe(&frame);
        self.layouts.observe(&frame);
        self.replay.observe(&frame);
        let Frame::Snapshot(snapshot) = frame else {
            return;
        };
        let counted = if self.nr_snapshots < self.opts.skip {
            &mut self.warm_up
        } else {
            &mut self.after
        };
        self.nr_snapshots += 1;
        if counted.bytes <= SUMS_BYTES {
            let (replay, window_ns, horizon_ns) = (&self.replay, self.window_ns, self.horizon_ns);
            let working_sets = |target: u32| replay.working_set(target, horizon_ns, window_ns);
            let at = Layout {
                layouts: &self.layouts,
                rows: &mut self.rows,
            };
            add_snapshot(counted, at, &snapshot, &self.opts, working_sets);
        }
    }

    /// Snapshots counted so far.
    pub fn nr_snapshots(&self) -> usize {
        self.nr_snapshots
    }

    /// The mappings as of the frames seen: each target's mappings and resident bytes.
    pub fn layouts(&self) -> &Layouts {
        &self.layouts
    }

    /// `target`'s working set over `horizon_ns` (at most the report's horizon; 0: one window)
    /// before the latest snapshot counted, as `report wss` counts it.
    pub fn working_set(&self, target: u32, horizon_ns: u64) -> Option<WorkingSet> {
        self.replay.working_set(target, horizon_ns, self.window_ns)
    }

    /// The report so far.
    pub fn report(&self) -> Result<MappingsReport> {
        let nr_snapshots = self.nr_snapshots;
        if nr_snapshots == 0 {
            return Err(ReportError::NoSnapshots);
        }
        if self.layouts.is_empty() {
            return Err(ReportError::NoMappings);
        }
        // As the distributions skip: a record no longer than the warm-up is counted whole.
        let (counted, skipped, warning) = if nr_snapshots > self.opts.skip {
            (&self.after, self.opts.skip, None)
        } else {
            let warning = format!(
                "the record has only {nr_snapshots} snapshots, not more than the {} to skip as \
                 warm-up; all of them are used (set the skip to 0 to silence this)",
                self.opts.skip
            );
            (&self.warm_up, 0, Some(warning))
        };
        if counted.bytes > SUMS_BYTES {
            return Err(ReportError::TooManyMappings {
                mib: SUMS_BYTES >> 20,
            });
        }
        let n = counted.snapshots.max(1) as f64;
        let mut mappings: Vec<MappingSummary> = counted
            .sums
            .iter()
            .map(|((target, _, perms, name), s)| {
                let walked = counted.walked.get(target).copied().unwrap_or(0);
                MappingSummary {
                    target: *target,
                    start: s.start.min(s.end),
                    end: s.end,
                    perms: perms.clone(),
                    name: name.clone(),
                    nr_snapshots: s.nr_snapshots,
                    size_bytes: (s.size / n).round() as u64,
                    resident_bytes: (s.resident_snapshots > 0)
                        .then(|| (s.resident / walked.max(1) as f64).round() as u64),
                    monitored_bytes: (s.monitored / n).round() as u64,
                    hot_bytes: (s.hot / n).round() as u64,
                    warm_bytes: (s.warm / n).round() as u64,
                    cold_bytes: (s.cold / n).round() as u64,
                    working_set_bytes: (s.working_set / n).round() as u64,
                    hot_access_hz: if s.hot > 0.0 {
                        s.hot_hz_bytes / s.hot
                    } else {
                        0.0
                    },
                    samples: s.samples,
                }
            })
            // Rounding leaves a part of a byte outside the mappings, at times.
            .filter(|m: &MappingSummary| m.name != OUTSIDE || m.working_set_bytes > 0)
            .collect();
        // The working set outside the mappings last, after the mappings by heat.
        mappings.sort_by(|a, b| {
            a.target
                .cmp(&b.target)
                .then((a.name == OUTSIDE).cmp(&(b.name == OUTSIDE)))
                .then(b.hot_bytes.cmp(&a.hot_bytes))
                .then(b.warm_bytes.cmp(&a.warm_bytes))
                .then(a.start.cmp(&b.start))
        });
        let targets = mappings
            .iter()
            .map(|m| m.target)
            .map(|t| {
                let info = self.known.get(t);
                (
                    t,
                    target_name(
                        t,
                        info.and_then(|i| i.pid),
                        info.map(|i| i.cmdline.as_str()),
                    ),
                )
            })
            .collect();
        Ok(MappingsReport {
            cold_after_ns: self.opts.cold_after_ns,
            horizon_ns: self.horizon_ns,
            nr_snapshots,
            skipped,
            warning,
            mappings,
            targets,
        })
    }
}

/// The most memory the report's sums may take: one per distinct mapping of the record, a real
/// one holds some hundred thousand at most.
const SUMS_BYTES: usize = 128 << 20;

/// The mappings at a snapshot, and their rows.
struct Layout<'a> {
    layouts: &'a Layouts,
    rows: &'a mut Rows,
}

fn add_snapshot(
    counted: &mut Counted,
    at: Layout<'_>,
    snapshot: &Snapshot,
    opts: &MappingsOptions,
    working_set: impl Fn(u32) -> Option<WorkingSet>,
) {
    let aggr_ns = snapshot.aggr_us.saturating_mul(1000);
    let aggr_s = snapshot.aggr_us.max(1) as f64 / 1e6;
    let Layout { layouts, rows } = at;
    counted.snapshots += 1;
    for t in &snapshot.targets {
        let (mappings, keys) = match layouts.list(t.target) {
            Some(list) => (&list[..], rows.of(t.target, list)),
            None => (&[][..], &[][..]),
        };
        if layouts.walked(t.target) {
            *counted.walked.entry(t.target).or_default() += 1;
        }
        if let Some(ws) = working_set(t.target) {
            let outside: RowKey = (t.target, 0, String::new(), OUTSIDE.to_string());
            for (i, bytes) in split_by_mapping(&ws, mappings) {
                let key = i.map_or(&outside, |i| &keys[i]);
                counted.row(key).working_set += bytes;
            }
        }
        let (Some(first), Some(last)) = (t.regions.first(), t.regions.last()) else {
            continue;
        };
        for (m, key) in mappings.iter().zip(keys) {
            let s = counted.row(key);
            s.start = s.start.min(m.start);
            s.end = s.end.max(m.end);
            s.nr_snapshots += 1;
            s.size += m.size() as f64;
            if let Some(resident) = layouts.resident(t.target, m.start, m.end) {
                s.resident += resident as f64;
                s.resident_snapshots += 1;
            }
            if m.end <= first.start || last.end <= m.start {
                continue;
            }
            let from = t.regions.partition_point(|r| r.end <= m.start);
            for r in t.regions[from..].iter().take_while(|r| r.start < m.end) {
                let bytes = r.range().overlap(m.range()) as f64;
                s.monitored += bytes;
                s.samples += f64::from(r.raw_samples) * bytes / r.size().max(1) as f64;
                if r.nr_accesses > 0 {
                    // The region's touched pages, shared out by size; the rest of it is
                    // accessed memory's idle part.
                    let touched = bytes * r.touched() as f64 / r.size().max(1) as f64;
                    s.hot += touched;
                    s.warm += bytes - touched;
                    s.hot_hz_bytes += touched * f64::from(r.nr_accesses) / aggr_s;
                } else if u64::from(r.age).saturating_mul(aggr_ns) < opts.cold_after_ns {
                    s.warm += bytes;
                } else {
                    s.cold += bytes;
                }
            }
        }
    }
}

/// `ws`'s bytes by the mapping of `mappings` (sorted, disjoint) they lie in, by index; `None`
/// for those in none. Each cell's estimate is shared out by its overlap, so the parts add up
/// to the whole.
fn split_by_mapping(ws: &WorkingSet, mappings: &[MappingRecord]) -> Vec<(Option<usize>, f64)> {
    let mut parts = Vec::new();
    for (cell, touched) in &ws.cells {
        let bytes = touched.pages * udamon_core::PAGE_SIZE as f64;
        let size = cell.size().max(1) as f64;
        let mut inside = 0.0;
        for i in overlapping(mappings, cell.start, cell.end) {
            let m = &mappings[i];
            let share = bytes * cell.overlap(m.range()) as f64 / size;
            inside += share;
            parts.push((Some(i), share));
        }
        if bytes - inside > 0.0 {
            parts.push((None, bytes - inside));
        }
    }
    parts
}

/// Text: per target, one row per mapping.
pub fn render_text(report: &MappingsReport) -> String {
    let mut out = String::new();
    let used = report.nr_snapshots - report.skipped;
    let _ = writeln!(
        out,
        "# mappings: means over the {used} snapshots{} (0 where a mapping did not exist); hot: \
         touched in the window, warm: idle less than {}, cold: idle longer; ws: the working set \
         {}, as report wss counts it, split by mapping",
        if report.skipped > 0 {
            format!(" after the first {}", report.skipped)
        } else {
            String::new()
        },
        human::duration(report.cold_after_ns),
        match report.horizon_ns {
            0 => "of each window".to_string(),
            ns => format!("over the last {}", human::duration(ns)),
        }
    );
    if let Some(w) = &report.warning {
        let _ = writeln!(out, "# warning: {w}");
    }
    let sampled = report.mappings.iter().any(|m| m.samples > 0.0);
    let resident = report.mappings.iter().any(|m| m.resident_bytes.is_some());
    let columns = row_columns(resident, sampled);
    let mut target = None;
    for m in &report.mappings {
        if target != Some(m.target) {
            target = Some(m.target);
            let _ = writeln!(out, "# {}", report.targets[&m.target]);
            let head: Vec<&str> = columns.iter().map(|c| c.0).collect();
            let _ = writeln!(out, "{}  name", aligned(&head, &columns));
        }
        let row = aligned(&m.row_cells(resident, sampled), &columns);
        let _ = writeln!(
            out,
            "{row}  {}",
            human::one_line(&m.name, human::TEXT_CHARS)
        );
    }
    out
}

/// `cells` padded to the text report's `columns` widths, the first left-aligned.
fn aligned(cells: &[impl AsRef<str>], columns: &[(&str, usize)]) -> String {
    let padded: Vec<String> = cells
        .iter()
        .zip(columns)
        .enumerate()
        .map(|(i, (cell, &(_, width)))| match i {
            0 => format!("{:<width$}", cell.as_ref()),
            _ => format!("{:>width$}", cell.as_ref()),
        })
        .collect();
    padded.join(" ")
}
