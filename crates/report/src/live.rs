//! A record as it grows, for live views (`udamon top`): frames go in as the monitor writes
//! them, and the views come out of the same report code as for a finished record — the
//! heatmap's guide and binning ([`crate::heatmap`]), the mappings ([`LiveMappings`]) with the
//! working set at page resolution as `report wss` counts it ([`crate::working_set`]), and the
//! code touching hot memory ([`LiveCode`]). A sampled record writes a window's samples after
//! its snapshot (after other events, at times), so a window's working set is known once the next
//! window (or a later window's samples) comes.
//!
//! Memory stays bounded: the last [`HISTORY`] windows are kept for the heatmap, the last
//! [`SERIES`] working-set points per target, and the reports hold what the record names.
//! Drawing stays cheap: each window is binned once per address axis and kept ([`Live::heatmap`]
//! only bins windows it has not binned for that axis), so that a redraw at every window of
//! 1,000 regions costs little more than putting the cells on the screen.

use crate::code::{CodeOptions, CodeReport, LiveCode};
use crate::heatmap::axis::AddressAxis;
use crate::heatmap::grid::Grid;
use crate::heatmap::guide::{self, Area, ContiguousRange, Coverage};
use crate::heatmap::{HeatUnit, Heatmap, mapping_spans};
use crate::horizon::Horizon;
use crate::mappings::{LiveMappings, MappingsOptions, MappingsReport};
use crate::time_window::TimeWindow;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use udamon_core::AddrRange;
use udamon_record::model::{EventKind, Frame, Header, RegionStat, Snapshot, TargetInfo, Targets};

/// Windows kept for the heatmap (a minute of 100 ms windows).
pub const HISTORY: usize = 600;
/// Working-set points kept per target.
pub const SERIES: usize = 3600;
/// The horizon of the mappings' working sets, as `report mappings`'s default.
const MAPPINGS_HORIZON_NS: u64 = 10_000_000_000;

/// A window kept for the heatmap, with its number among all windows seen.
struct Window {
    number: u64,
    snapshot: Snapshot,
}

/// One window binned on one axis: Σ frequency × bytes × ns and Σ bytes × ns per column.
type Bins = (Vec<f64>, Vec<f64>);

/// Windows binned on the axis last drawn.
#[derive(Default)]
struct BinCache {
    key: Option<(u32, AddressAxis, usize)>,
    windows: HashMap<u64, Bins>,
}

/// What part of the history to draw, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatView {
    pub target: u32,
    /// Time rows (oldest first) and address columns.
    pub rows: usize,
    pub cols: usize,
    /// Windows per row (time zoom), at least 1.
    pub windows_per_row: usize,
    /// The number of the window in the last row; `None` follows the newest.
    pub newest: Option<u64>,
    /// The part of the address axis shown, as fractions of it (address zoom and pan).
    pub zoom: (f64, f64),
    /// Every area the target's regions covered, instead of the hottest.
    pub all_areas: bool,
}

/// A target as a live view lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetRow {
    pub target: u32,
    pub info: Option<TargetInfo>,
    /// How deep in the process tree (0: a root).
    pub depth: usize,
    /// Why it is gone (exited, dropped), if it is.
    pub ended: Option<String>,
}

/// One target's latest window in numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latest {
    pub end_ns: u64,
    pub aggr_us: u64,
    pub nr_regions: usize,
    pub monitored_bytes: u64,
    /// The working set of the newest window whose samples are in (`report wss`'s count).
    pub wss_bytes: u64,
}

/// A window whose working set is not known yet: its end, and each target with its regions'
/// own estimate of the window ([`window_touched`]).
type Pending = (u64, Vec<(u32, Option<u64>)>);

pub struct Live {
    header: Header,
    known: Targets,
    /// Targets the record has named or shown regions of.
    seen: BTreeSet<u32>,
    windows: u64,
    history: VecDeque<Window>,
    coverage: BTreeMap<u32, Coverage>,
    series: BTreeMap<u32, VecDeque<(u64, u64)>>,
    /// Windows whose working set is not known yet (their samples may follow).
    pending: VecDeque<Pending>,
    /// Targets whose samples the record holds.
    sampled: BTreeSet<u32>,
    /// Windows whose working set is known.
    counted: usize,
    latest: BTreeMap<u32, Latest>,
    mappings: LiveMappings,
    code: LiveCode,
    /// The reports as of the last window, made when first asked for.
    mappings_report: Option<Option<MappingsReport>>,
    code_report: Option<Option<CodeReport>>,
    counters: Option<BTreeMap<String, u64>>,
    ended: BTreeMap<u32, String>,
    stopped: Option<String>,
    bins: BinCache,
}

impl Live {
    pub fn new(header: &Header) -> Live {
        Live {
            known: Targets::new(header),
            seen: (0..header.targets.len() as u32).collect(),
            header: header.clone(),
            windows: 0,
            history: VecDeque::new(),
            coverage: BTreeMap::new(),
            series: BTreeMap::new(),
            pending: VecDeque::new(),
            sampled: BTreeSet::new(),
            counted: 0,
            latest: BTreeMap::new(),
            // Everything from the first window: the view starts with the record.
            mappings: LiveMappings::new(
                header,
                &MappingsOptions {
                    skip: 0,
                    horizon: Horizon::Span(MAPPINGS_HORIZON_NS),
                    ..MappingsOptions::default()
                },
                MAPPINGS_HORIZON_NS,
            ),
            code: LiveCode::new(&CodeOptions::default()),
            mappings_report: None,
            code_report: None,
            counters: None,
            ended: BTreeMap::new(),
            stopped: None,
            bins: BinCache::default(),
        }
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Takes in the record's next frame.
    pub fn observe(&mut self, frame: Frame) {
        self.known.observe(&frame);
        match &frame {
            Frame::Snapshot(s) => self.window(s),
            Frame::Event(e) => match &e.kind {
                EventKind::TargetAdded { target, .. } => {
                    self.seen.insert(*target);
                }
                EventKind::Samples { target, .. } => {
                    self.sampled.insert(*target);
                }
                EventKind::SourceStats { counters } => self.counters = Some(counters.clone()),
                EventKind::Exit { target, status } => {
                    let why = match status {
                        Some(s) => format!("exited with status {s}"),
                        None => "exited".to_string(),
                    };
                    self.ended.insert(*target, why);
                }
                EventKind::TargetDropped { target, reason } => {
                    self.ended.insert(*target, format!("dropped: {reason}"));
                }
                EventKind::Stopped { reason } => self.stopped = Some(reason.clone()),
                _ => {}
            },
        }
        self.code.observe(frame.clone());
        self.mappings.observe(frame);
        while self.mappings.nr_snapshots() > self.counted {
            self.counted += 1;
            if let Some((end_ns, targets)) = self.pending.pop_front() {
                self.working_sets(end_ns, &targets);
            }
        }
    }

    /// The working sets of a window the mappings have just counted: from the samples, as
    /// `report wss --horizon 0` counts it, where the record has them; else from the regions'
    /// own estimate where they carry one (a window of `udamon serve`, whose samples stay
    /// there), so that the view shows what the monitor counted.
    fn working_sets(&mut self, end_ns: u64, targets: &[(u32, Option<u64>)]) {
        for &(t, touched) in targets {
            let wss = match touched {
                Some(bytes) if !self.sampled.contains(&t) => bytes,
                _ => self.mappings.working_set(t, 0).map_or(0, |w| w.bytes()),
            };
            let series = self.series.entry(t).or_default();
            series.push_back((end_ns, wss));
            if series.len() > SERIES {
                series.pop_front();
            }
            if let Some(latest) = self.latest.get_mut(&t) {
                latest.wss_bytes = wss;
            }
        }
    }

    fn window(&mut self, s: &Snapshot) {
        let targets = s.targets.iter();
        let touched = targets.map(|t| (t.target, window_touched(&t.regions)));
        self.pending.push_back((s.end_ns, touched.collect()));
        for t in &s.targets {
            self.seen.insert(t.target);
            self.coverage
                .entry(t.target)
                .or_default()
                .add_regions(&t.regions);
            let wss = self.latest.get(&t.target).map_or(0, |l| l.wss_bytes);
            self.latest.insert(
                t.target,
                Latest {
                    end_ns: s.end_ns,
                    aggr_us: s.aggr_us,
                    nr_regions: t.regions.len(),
                    monitored_bytes: t.regions.iter().map(|r| r.size()).sum(),
                    wss_bytes: wss,
                },
            );
        }
        self.history.push_back(Window {
            number: self.windows,
            snapshot: s.clone(),
        });
        if self.history.len() > HISTORY
            && let Some(old) = self.history.pop_front()
        {
            self.bins.windows.remove(&old.number);
        }
        self.windows += 1;
        self.mappings_report = None;
        self.code_report = None;
    }

    /// Windows seen so far.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// The numbers of the oldest and newest windows kept for the heatmap.
    pub fn kept(&self) -> Option<(u64, u64)> {
        Some((self.history.front()?.number, self.history.back()?.number))
    }

    /// Why monitoring stopped, once it has.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// The access source's counters as last reported.
    pub fn counters(&self) -> Option<&BTreeMap<String, u64>> {
        self.counters.as_ref()
    }

    /// The target's latest window, if it had one.
    pub fn latest(&self, target: u32) -> Option<Latest> {
        self.latest.get(&target).copied()
    }

    /// The target's working set per window: (end, bytes), oldest first.
    pub fn wss_series(&self, target: u32) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.series.get(&target).into_iter().flatten().copied()
    }

    /// The targets, in process-tree order (each after its parent).
    pub fn targets(&self) -> Vec<TargetRow> {
        let info = |t: u32| self.known.get(t).cloned();
        let parent_of = |t: u32| {
            info(t)
                .and_then(|i| i.parent)
                .filter(|p| *p != t && self.seen.contains(p))
        };
        let mut rows = Vec::new();
        let mut stack: Vec<(u32, usize)> = self
            .seen
            .iter()
            .rev()
            .filter(|&&t| parent_of(t).is_none())
            .map(|&t| (t, 0))
            .collect();
        let mut listed = BTreeSet::new();
        while let Some((t, depth)) = stack.pop() {
            if !listed.insert(t) {
                continue;
            }
            rows.push(TargetRow {
                target: t,
                info: info(t),
                depth,
                ended: self.ended.get(&t).cloned(),
            });
            for &child in self.seen.iter().rev() {
                if parent_of(child) == Some(t) {
                    stack.push((child, depth + 1));
                }
            }
        }
        rows
    }

    /// The target to show first: the first one with regions in the latest window.
    pub fn default_target(&self) -> Option<u32> {
        let last = self.history.back()?;
        last.snapshot
            .targets
            .iter()
            .find(|t| !t.regions.is_empty())
            .map(|t| t.target)
    }

    /// `report mappings` over the windows so far; `None` for records without mappings.
    pub fn mappings(&mut self) -> Option<&MappingsReport> {
        let mappings = &self.mappings;
        self.mappings_report
            .get_or_insert_with(|| mappings.report().ok())
            .as_ref()
    }

    /// `report code` over the windows so far; `None` before the first sample.
    pub fn code(&mut self) -> Option<&CodeReport> {
        let code = &self.code;
        self.code_report
            .get_or_insert_with(|| code.report())
            .as_ref()
    }

    /// The target's guide: the areas its regions covered, with their heats.
    pub fn areas(&self, target: u32) -> Vec<Area> {
        self.coverage
            .get(&target)
            .map(|c| guide::areas(&c.ranges()))
            .unwrap_or_default()
    }

    /// The heatmap of `view`: rows of `windows_per_row` windows ending at `view.newest`, as
    /// `report heatmap` computes cells (Hz, weighted by overlapped time × bytes). `None` when
    /// the target has no regions yet.
    pub fn heatmap(&mut self, view: &HeatView) -> Option<Heatmap> {
        let (rows, cols, k) = (
            view.rows.max(1),
            view.cols.max(1),
            view.windows_per_row.max(1) as u64,
        );
        let areas = self.areas(view.target);
        let area = if view.all_areas {
            None
        } else {
            guide::hottest(&areas)
        };
        let ranges: Vec<AddrRange> = match area {
            Some(i) => areas[i].ranges.iter().map(ContiguousRange::range).collect(),
            None => areas
                .iter()
                .flat_map(|a| &a.ranges)
                .map(ContiguousRange::range)
                .collect(),
        };
        let covered: u64 = ranges.iter().map(AddrRange::size).sum();
        if covered == 0 {
            return None;
        }
        let axis = zoomed(&AddressAxis::new(ranges, covered / cols as u64), view.zoom);
        if axis.is_empty() {
            return None;
        }
        let key = (view.target, axis.clone(), cols);
        if self.bins.key.as_ref() != Some(&key) {
            self.bins = BinCache {
                key: Some(key),
                windows: HashMap::new(),
            };
        }
        let (oldest, newest) = self.kept()?;
        let slots = rows as u64 * k;
        // While the record from its start fits, it fills the rows from the top down; then
        // the window shown last sits in the bottom row and older ones scroll up.
        // Windows after `until` stay off the picture (a paused view), wherever it sits.
        let until = view.newest.unwrap_or(newest).clamp(oldest, newest);
        let from_top = oldest == 0 && until + 1 < slots;
        let last = if from_top { slots - 1 } else { until };
        let mut sum = vec![0.0; rows * cols];
        let mut weight = vec![0.0; rows * cols];
        for r in 0..rows {
            let back = (rows - 1 - r) as u64 * k;
            for w in 0..k {
                let Some(number) = last.checked_sub(back + w).filter(|&n| n <= until) else {
                    continue;
                };
                let Some(window) = number
                    .checked_sub(oldest)
                    .and_then(|i| self.history.get(i as usize))
                else {
                    continue;
                };
                let s = &window.snapshot;
                let bins = self
                    .bins
                    .windows
                    .entry(number)
                    .or_insert_with(|| bin(s, view.target, &axis, cols));
                let row = r * cols;
                for c in 0..cols {
                    sum[row + c] += bins.0[c];
                    weight[row + c] += bins.1[c];
                }
            }
        }
        // Rows of `k` windows as long as the newest one.
        let last_kept = &self.history.back()?.snapshot;
        let row_ns = k * (last_kept.end_ns - last_kept.start_ns).max(1);
        let (t0, t1) = if from_top {
            let t0 = self.history.front()?.snapshot.start_ns;
            (t0, t0 + rows as u64 * row_ns)
        } else {
            let shown = self.history.get((last - oldest) as usize)?;
            let t1 = shown.snapshot.end_ns;
            (t1.saturating_sub(rows as u64 * row_ns), t1)
        };
        let cells: Vec<Option<f64>> = sum
            .iter()
            .zip(&weight)
            .map(|(&s, &w)| (w > 0.0).then(|| s / w))
            .collect();
        let max = cells.iter().flatten().copied().fold(0.0, f64::max);
        let names: BTreeMap<AddrRange, String> = self
            .mappings
            .layouts()
            .covering(view.target, 0, u64::MAX)
            .iter()
            .map(|m| (AddrRange::new(m.start, m.end), m.name.clone()))
            .collect();
        let info = self.known.get(view.target);
        Some(Heatmap {
            target: view.target,
            pid: info.and_then(|i| i.pid),
            cmdline: info.map(|i| i.cmdline.clone()),
            unit: HeatUnit::Hz,
            start_ns: t0,
            end_ns: t1,
            rows,
            cols,
            mappings: mapping_spans(&axis, &names),
            axis,
            areas,
            area,
            cells,
            max,
            // The view names its target and moves between them itself.
            other_targets: Vec::new(),
            busiest: false,
        })
    }
}

/// The bytes a window's regions say were touched in it, where they say it (sampled sources
/// estimate each accessed region's touched pages): `None` where no region does.
fn window_touched(regions: &[RegionStat]) -> Option<u64> {
    let estimated = regions.iter().any(|r| r.touched_bytes.is_some());
    estimated.then(|| regions.iter().map(RegionStat::touched).sum())
}

/// The part `zoom` (fractions of its length) of `axis`.
fn zoomed(axis: &AddressAxis, (lo, hi): (f64, f64)) -> AddressAxis {
    if lo <= 0.0 && hi >= 1.0 {
        return axis.clone();
    }
    let len = axis.len() as f64;
    let (from, to) = (axis.address_at(lo * len), axis.address_at(hi * len));
    let mut pieces = Vec::new();
    for seg in &axis.segments {
        let (s, e) = (seg.start.max(from), seg.end.min(to));
        if s < e {
            pieces.push(AddrRange::new(s, e));
        }
    }
    AddressAxis::new(pieces, 0)
}

/// One window of `target` binned on `axis`.
fn bin(s: &Snapshot, target: u32, axis: &AddressAxis, cols: usize) -> Bins {
    let mut grid = Grid::new(1, cols, TimeWindow::of(s), axis.len());
    if let Some(t) = s.targets.iter().find(|t| t.target == target) {
        let regions = t
            .regions
            .iter()
            .map(|r| (r.start, r.end, HeatUnit::Hz.of(r.nr_accesses, s)));
        grid.add(axis, TimeWindow::of(s), regions);
    }
    grid.into_sums()
}
