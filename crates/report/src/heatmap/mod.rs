//! The access heatmap, damo's `report heatmap`: a time × address grid of access frequency for one
//! target, made in two streaming passes (the guide, then the binning) whose memory is the grid's.
//!
//! By default it shows the target's hottest area (most access per byte; see [`guide`]) with the
//! gaps inside it that no region ever covered collapsed, so the picture is of monitored memory
//! rather than of holes. Renderers: [`term`] (256-colour or plain text) and [`image`] (PNG, SVG).

pub mod axis;
pub(crate) mod grid;
pub mod guide;
pub mod image;
pub mod term;

use crate::time_window::TimeWindow;
use crate::{ReportError, Result, human, reopen};
use axis::AddressAxis;
use guide::{Area, ContiguousRange, Coverage};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use udamon_core::AddrRange;
use udamon_record::model::{EventKind, Frame, Header, Snapshot, Targets};

/// The most address ranges the coverage keeps over all targets (about 100 MiB at worst), whatever
/// a record claims: real records keep a few times their regions.
const MAX_RANGES: usize = 1 << 21;

/// The most memory the mapping labels of all targets may take.
const MAPPING_LABEL_BYTES: usize = 32 << 20;

/// Which addresses to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressSelection {
    /// The area with the most access per byte (damo's `--draw_range hottest`).
    #[default]
    Hottest,
    /// Everything the target's regions covered, gaps collapsed.
    All,
    /// Addresses `start..end`.
    Range { start: u64, end: u64 },
}

/// What a cell's number means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeatUnit {
    /// Accesses per second: `nr_accesses` / aggregation interval (damo's default).
    #[default]
    Hz,
    /// `nr_accesses` as a percentage of the most a window can count.
    PercentOfMax,
}

impl HeatUnit {
    pub fn label(self) -> &'static str {
        match self {
            HeatUnit::Hz => "Hz",
            HeatUnit::PercentOfMax => "% of max",
        }
    }

    pub(crate) fn of(self, nr_accesses: u32, snapshot: &Snapshot) -> f64 {
        match self {
            HeatUnit::Hz => f64::from(nr_accesses) * 1e6 / snapshot.aggr_us.max(1) as f64,
            HeatUnit::PercentOfMax => {
                f64::from(nr_accesses) * 100.0 / f64::from(snapshot.max_nr_accesses().max(1))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeatmapOptions {
    /// The target to show; `None` picks the busiest (see [`busiest_target`]).
    pub target: Option<u32>,
    pub address: AddressSelection,
    /// Only this time.
    pub time_range: Option<TimeWindow>,
    /// Time slots.
    pub rows: usize,
    /// Address slots.
    pub cols: usize,
    pub unit: HeatUnit,
    /// Leave out address gaps that no region ever covered.
    pub collapse_gaps: bool,
    /// The most rows and columns the output can show (an image's pixels, a terminal's
    /// columns): a finer resolution only costs memory and time, so it is reduced to this.
    pub limit: (usize, usize),
}

/// Columns of a terminal heatmap when the terminal's width is unknown (damo's 80).
pub const TERMINAL_COLS: usize = 80;
/// Rows of a terminal heatmap (damo's 40).
pub const TERMINAL_ROWS: usize = 40;
/// Cells per side of an image heatmap (damo's 500×500).
pub const IMAGE_CELLS: usize = 500;
/// Most rows of a terminal heatmap: more lines than a terminal's scrollback keeps in view.
pub const TERMINAL_MAX_ROWS: usize = 1000;

impl HeatmapOptions {
    /// For a terminal of `width` columns, if known: leaves room for the time labels.
    pub fn terminal(width: Option<usize>) -> HeatmapOptions {
        let cols = width.map_or(TERMINAL_COLS, |w| {
            w.saturating_sub(term::MARGIN_HINT)
                .clamp(16, 2 * TERMINAL_COLS)
        });
        HeatmapOptions {
            rows: TERMINAL_ROWS,
            cols,
            limit: (TERMINAL_MAX_ROWS, 2 * TERMINAL_COLS),
            ..HeatmapOptions::image()
        }
    }

    /// For an image of [`crate::plot::ImageOptions::default`]'s size: at most a cell per pixel.
    pub fn image() -> HeatmapOptions {
        let pixels = crate::plot::ImageOptions::default();
        HeatmapOptions {
            limit: (pixels.height as usize, pixels.width as usize),
            target: None,
            address: AddressSelection::Hottest,
            time_range: None,
            rows: IMAGE_CELLS,
            cols: IMAGE_CELLS,
            unit: HeatUnit::Hz,
            collapse_gaps: true,
        }
    }
}

/// A computed heatmap: rows are time slots (earliest first), columns address slots (lowest
/// first) along [`AddressAxis`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Heatmap {
    pub target: u32,
    pub pid: Option<u32>,
    pub cmdline: Option<String>,
    pub unit: HeatUnit,
    pub start_ns: u64,
    pub end_ns: u64,
    pub rows: usize,
    pub cols: usize,
    pub axis: AddressAxis,
    /// The target's areas (the guide), ascending.
    pub areas: Vec<Area>,
    /// The area shown, when the selection was [`AddressSelection::Hottest`].
    pub area: Option<usize>,
    /// Row-major; `None` where no region was monitored.
    pub cells: Vec<Option<f64>>,
    /// The largest cell value (0 when none).
    pub max: f64,
    /// The target's mappings along the axis (records of live processes), ascending.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mappings: Vec<MappingSpan>,
    /// The other targets with regions in the time shown, which `--target` could show instead.
    pub other_targets: Vec<u32>,
    /// Whether the target was picked as the busiest rather than asked for.
    pub busiest: bool,
}

/// Where a named mapping lies on the address axis: consecutive mappings of one name (a
/// library's text, data and read-only parts) are one span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MappingSpan {
    pub name: String,
    /// Axis offsets, in shown bytes from the left edge.
    pub from: u64,
    pub to: u64,
}

/// The spans of `mappings`, by their ranges, on `axis`.
pub(crate) fn mapping_spans(
    axis: &AddressAxis,
    mappings: &BTreeMap<AddrRange, String>,
) -> Vec<MappingSpan> {
    let mut spans: Vec<MappingSpan> = Vec::new();
    for (&range, name) in mappings {
        axis.pieces(range, |from, to| match spans.last_mut() {
            Some(last) if last.name == *name && from <= last.to => last.to = last.to.max(to),
            // A mapping seen again with other bounds (a heap that grew) overlaps the last span.
            Some(last) if from < last.to => last.to = last.to.max(to),
            _ => spans.push(MappingSpan {
                name: name.clone(),
                from,
                to,
            }),
        });
    }
    spans
}

impl Heatmap {
    pub fn cell(&self, row: usize, col: usize) -> Option<f64> {
        self.cells[row * self.cols + col]
    }

    pub fn row_ns(&self) -> f64 {
        (self.end_ns - self.start_ns) as f64 / self.rows as f64
    }

    pub fn col_bytes(&self) -> f64 {
        self.axis.len() as f64 / self.cols as f64
    }

    /// Time at a (fractional) row boundary, in ns from the record's start.
    pub fn time_at(&self, row: f64) -> u64 {
        self.start_ns + (row * self.row_ns()).round() as u64
    }
}

/// Builds the heatmap; `open` yields the record's frames afresh for each of the two passes:
/// the first surveys what was monitored when (the guide), the second bins the chosen target's
/// accesses into the grid the guide lays out.
pub fn heatmap<I, E, F>(header: &Header, mut open: F, opts: &HeatmapOptions) -> Result<Heatmap>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: Error + Send + Sync + 'static,
{
    if opts.rows == 0 || opts.cols == 0 {
        return Err(ReportError::Resolution {
            rows: opts.rows,
            cols: opts.cols,
        });
    }
    let rows = opts.rows.min(opts.limit.0.max(1));
    let cols = opts.cols.min(opts.limit.1.max(1));
    let window = opts.time_range.unwrap_or(TimeWindow::ALL);
    if window.is_empty() {
        return Err(ReportError::EmptyTimeRange {
            start_ns: window.start_ns,
            end_ns: window.end_ns,
        });
    }
    let survey = Survey::of(reopen(&mut open)?, header, opts, window)?;
    let shown = survey.time_span(opts, window)?;
    let target = survey.target(opts)?;
    let areas = survey.guides.get(&target).cloned().unwrap_or_default();
    let (ranges, area) = select(&areas, opts.address, target)?;
    let axis = address_axis(ranges, opts, cols);

    // Pass 2: the binning.
    let mut grid = grid::Grid::new(rows, cols, shown, axis.len());
    for frame in reopen(&mut open)? {
        let Frame::Snapshot(s) = frame else { continue };
        if !TimeWindow::of(&s).overlaps(window) {
            continue;
        }
        if let Some(t) = s.targets.iter().find(|t| t.target == target) {
            let regions = t
                .regions
                .iter()
                .map(|r| (r.start, r.end, opts.unit.of(r.nr_accesses, &s)));
            grid.add(&axis, TimeWindow::of(&s), regions);
        }
    }
    let cells = grid.finish();
    let max = cells.iter().flatten().copied().fold(0.0, f64::max);
    let spans = survey
        .mappings
        .get(&target)
        .map(|m| mapping_spans(&axis, m))
        .unwrap_or_default();
    let info = survey.known.get(target);
    Ok(Heatmap {
        target,
        pid: info.and_then(|i| i.pid),
        cmdline: info.map(|i| i.cmdline.clone()),
        unit: opts.unit,
        start_ns: shown.start_ns,
        end_ns: shown.end_ns,
        rows,
        cols,
        axis,
        areas,
        area,
        cells,
        max,
        mappings: spans,
        other_targets: survey
            .with_regions
            .iter()
            .copied()
            .filter(|&t| t != target)
            .collect(),
        busiest: opts.target.is_none(),
    })
}

/// What the first pass finds: each target's guide (its monitored areas and their heat), the
/// time the snapshots in the window span, and the names to label.
struct Survey {
    guides: BTreeMap<u32, Vec<Area>>,
    /// The snapshots' span within the window, if any overlaps it.
    span: Option<TimeWindow>,
    any_snapshot: bool,
    /// Targets with regions in the window, whether asked for or not.
    with_regions: BTreeSet<u32>,
    known: Targets,
    /// Every mapping each target had, by its range, with its latest name.
    mappings: BTreeMap<u32, BTreeMap<AddrRange, String>>,
}

impl Survey {
    /// Pass 1 over `frames`: the guide.
    fn of(
        frames: impl IntoIterator<Item = Frame>,
        header: &Header,
        opts: &HeatmapOptions,
        window: TimeWindow,
    ) -> Result<Survey> {
        let mut coverage: BTreeMap<u32, Coverage> = BTreeMap::new();
        // Ranges in all the targets' coverage: bounded, whatever the record claims.
        let mut nr_ranges = 0;
        let mut mapping_bytes = 0;
        let mut survey = Survey {
            guides: BTreeMap::new(),
            span: None,
            any_snapshot: false,
            with_regions: BTreeSet::new(),
            known: Targets::new(header),
            mappings: BTreeMap::new(),
        };
        for frame in frames {
            survey.known.observe(&frame);
            if let Frame::Event(e) = &frame
                && let EventKind::Mappings {
                    target,
                    mappings: list,
                } = &e.kind
            {
                // Labels only: past their budget, mappings not seen before go unlabelled.
                let seen = survey.mappings.entry(*target).or_default();
                for m in list {
                    let range = AddrRange::new(m.start, m.end);
                    let known = seen.contains_key(&range);
                    if known || mapping_bytes < MAPPING_LABEL_BYTES {
                        seen.insert(range, m.name.clone());
                    }
                    if !known {
                        mapping_bytes += 64 + m.name.len();
                    }
                }
            }
            let Frame::Snapshot(s) = frame else { continue };
            survey.any_snapshot = true;
            let snapshot = TimeWindow::of(&s);
            if !snapshot.overlaps(window) {
                continue;
            }
            survey.span = Some(survey.span.map_or(snapshot, |span| span.hull(snapshot)));
            for t in s.targets.iter().filter(|t| !t.regions.is_empty()) {
                survey.with_regions.insert(t.target);
                if opts.target.is_none_or(|want| want == t.target) {
                    let c = coverage.entry(t.target).or_default();
                    let before = c.len();
                    c.add_regions(&t.regions);
                    nr_ranges = nr_ranges - before + c.len();
                    if nr_ranges > MAX_RANGES {
                        return Err(ReportError::TooFragmented { max: MAX_RANGES });
                    }
                }
            }
        }
        survey.guides = coverage
            .iter()
            .map(|(&t, c)| (t, guide::areas(&c.ranges())))
            .collect();
        Ok(survey)
    }

    /// The time the heatmap shows: the snapshots' span within the window.
    fn time_span(&self, opts: &HeatmapOptions, window: TimeWindow) -> Result<TimeWindow> {
        // A range the user gave is named; the whole record's, which they did not give, is not.
        let empty = || match opts.time_range {
            Some(TimeWindow { start_ns, end_ns }) => {
                ReportError::EmptyTimeRange { start_ns, end_ns }
            }
            None => ReportError::NoTimeSpan,
        };
        let shown = match self.span {
            Some(span) => span.within(window),
            None if self.any_snapshot => return Err(empty()),
            None => return Err(ReportError::NoSnapshots),
        };
        if shown.is_empty() {
            return Err(empty());
        }
        Ok(shown)
    }

    /// The target shown: the one asked for, or the busiest.
    fn target(&self, opts: &HeatmapOptions) -> Result<u32> {
        match opts.target {
            Some(t) if self.guides.contains_key(&t) => Ok(t),
            Some(t) => Err(ReportError::NoSuchTarget {
                target: t,
                present: target_list(&self.known, &self.with_regions),
            }),
            None => busiest_target(&self.guides).ok_or(ReportError::NoRegions),
        }
    }
}

/// The address axis over the selected `ranges`: the gaps between them collapsed where the
/// options say so (any wider than a column), or one span from the first to the last.
fn address_axis(ranges: Vec<AddrRange>, opts: &HeatmapOptions, cols: usize) -> AddressAxis {
    let covered: u64 = ranges.iter().map(AddrRange::size).sum();
    if opts.collapse_gaps {
        AddressAxis::new(ranges, covered / cols as u64)
    } else {
        let whole = match opts.address {
            AddressSelection::Range { start, end } => AddrRange::new(start, end),
            _ => AddrRange::new(ranges[0].start, ranges[ranges.len() - 1].end),
        };
        AddressAxis::new([whole], 0)
    }
}

/// The busiest target: the one with the most access (heats, Σ size × nr_accesses) over the
/// record, so that a program's worker wins over its idle parent however small a hot spot the
/// parent has; the lowest index among equals.
fn busiest_target(guides: &BTreeMap<u32, Vec<Area>>) -> Option<u32> {
    let mut best: Option<(u32, f64)> = None;
    for (&t, areas) in guides {
        let heats: f64 = areas.iter().map(|a| a.heats).sum();
        if best.is_none_or(|(_, b)| heats > b) {
            best = Some((t, heats));
        }
    }
    best.map(|(t, _)| t)
}

/// Address ranges, ascending.
type Ranges = Vec<AddrRange>;

/// The covered ranges to show, and the area picked for [`AddressSelection::Hottest`].
fn select(
    areas: &[Area],
    selection: AddressSelection,
    target: u32,
) -> Result<(Ranges, Option<usize>)> {
    let all = || areas.iter().flat_map(|a| &a.ranges);
    match selection {
        AddressSelection::Hottest => {
            let i = guide::hottest(areas).ok_or(ReportError::NoRegions)?;
            Ok((
                areas[i].ranges.iter().map(ContiguousRange::range).collect(),
                Some(i),
            ))
        }
        AddressSelection::All => Ok((all().map(ContiguousRange::range).collect(), None)),
        AddressSelection::Range { start, end } => {
            if start >= end {
                return Err(ReportError::EmptyAddressRange { start, end });
            }
            let ranges: Vec<AddrRange> = all()
                .map(|r| AddrRange::new(r.start.max(start), r.end.min(end)))
                .filter(|r| r.start < r.end)
                .collect();
            if ranges.is_empty() {
                return Err(ReportError::NothingInRange { target, start, end });
            }
            Ok((ranges, None))
        }
    }
}

/// Targets by index and command line, for an error message.
fn target_list(known: &Targets, targets: &BTreeSet<u32>) -> String {
    let list: Vec<String> = targets
        .iter()
        .map(|&t| match known.get(t) {
            Some(info) if !info.cmdline.is_empty() => {
                format!(
                    "{t} ({})",
                    human::one_line(&info.cmdline, human::TEXT_CHARS)
                )
            }
            _ => t.to_string(),
        })
        .collect();
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}
