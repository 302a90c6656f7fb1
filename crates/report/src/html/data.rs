//! The page's data, as its script reads it: per target the heatmap (cells as one byte each,
//! base64) and the windows kept for hovering (regions as varints, base64), and per hot
//! mapping the functions that touched it. Numbers stay numbers (addresses fit JavaScript's
//! doubles: user space ends below 2^57); the script prints them as the text reports do.

use crate::code::{CodeReport, FunctionRow};
use crate::heatmap::Heatmap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use udamon_record::model::{Frame, Snapshot};

#[derive(Serialize)]
pub(super) struct PageData {
    pub udamon_version: &'static str,
    pub record: String,
    /// The colour ramp's stops, as `crate::color` has them.
    pub viridis: Vec<(u8, u8, u8)>,
    pub targets: Vec<Target>,
    pub functions: Vec<MappingFunctions>,
}

#[derive(Serialize)]
pub(super) struct Target {
    pub target: u32,
    pub name: String,
    pub heatmap: HeatmapData,
    /// One window in `every` is kept.
    pub every: usize,
    pub windows: Vec<WindowData>,
}

/// [`Heatmap`] for the script: rows are time slots, columns address slots along the axis.
#[derive(Serialize)]
pub(super) struct HeatmapData {
    pub rows: usize,
    pub cols: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub max: f64,
    pub unit: &'static str,
    /// The axis: shown address ranges laid end to end.
    pub segments: Vec<(u64, u64)>,
    pub mappings: Vec<(String, u64, u64)>,
    /// Row-major; 0: not monitored, 1..=255: the value on a scale from 0 to `max`.
    pub cells: String,
}

/// A kept window: its place in the record, its intervals and its regions of the target.
#[derive(Serialize)]
pub(super) struct WindowData {
    /// The snapshot's index in the record, as `report access --snapshot` counts.
    pub index: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub sample_us: u64,
    pub aggr_us: u64,
    /// Per region, varints: the gap from the previous region's end (the first's from 0), the
    /// size, nr_accesses, age.
    pub regions: String,
}

/// The functions that touched a mapping (`report code --mapping NAME`).
#[derive(Serialize)]
pub(super) struct MappingFunctions {
    pub mapping: String,
    pub samples: u64,
    /// (share in percent as the report prints it, function (object))
    pub functions: Vec<(String, String)>,
}

impl MappingFunctions {
    pub fn new(mapping: String, report: &CodeReport, n: usize) -> MappingFunctions {
        MappingFunctions {
            mapping,
            samples: report.samples,
            functions: report
                .functions
                .iter()
                .take(n)
                .map(|f| (format!("{:.1}%", f.share * 100.0), function_name(f)))
                .collect(),
        }
    }
}

/// A function as `report code` names it: `function (object)`.
pub(super) fn function_name(f: &FunctionRow) -> String {
    let object = f.object.as_deref().unwrap_or("an unknown mapping");
    match &f.function {
        Some(function) => format!("{function} ({object})"),
        None => format!("? ({object})"),
    }
}

impl Target {
    pub fn new(target: u32, name: String, map: &Heatmap) -> Target {
        let cells: Vec<u8> = map
            .cells
            .iter()
            .map(|c| match c {
                None => 0,
                Some(v) if map.max > 0.0 => {
                    1 + (v / map.max * 254.0).round().clamp(0.0, 254.0) as u8
                }
                Some(_) => 1,
            })
            .collect();
        let gaps_and_all = map.axis.segments.iter().map(|s| (s.start, s.end)).collect();
        Target {
            target,
            name,
            heatmap: HeatmapData {
                rows: map.rows,
                cols: map.cols,
                start_ns: map.start_ns,
                end_ns: map.end_ns,
                max: map.max,
                unit: map.unit.label(),
                segments: gaps_and_all,
                mappings: map
                    .mappings
                    .iter()
                    .map(|m| (m.name.clone(), m.from, m.to))
                    .collect(),
                cells: BASE64.encode(cells),
            },
            every: 1,
            windows: Vec::new(),
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The regions of `target` in `s`, as [`WindowData::regions`] encodes them.
fn encode_regions(s: &Snapshot, target: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut previous_end = 0;
    if let Some(t) = s.targets.iter().find(|t| t.target == target) {
        for r in &t.regions {
            put_varint(&mut out, r.start.saturating_sub(previous_end));
            put_varint(&mut out, r.size());
            put_varint(&mut out, u64::from(r.nr_accesses));
            put_varint(&mut out, u64::from(r.age));
            previous_end = r.end;
        }
    }
    out
}

/// Keeps every `every`-th snapshot of `frames` (and the last) for each of `targets`.
pub(super) fn keep_windows(
    frames: impl IntoIterator<Item = Frame>,
    every: usize,
    targets: &mut [Target],
) {
    let mut last: Option<(usize, Snapshot)> = None;
    let mut index = 0;
    let keep = |i: usize, s: &Snapshot, targets: &mut [Target]| {
        for t in targets.iter_mut() {
            t.every = every;
            if !s.targets.iter().any(|x| x.target == t.target) {
                continue;
            }
            t.windows.push(WindowData {
                index: i,
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                sample_us: s.sample_us,
                aggr_us: s.aggr_us,
                regions: BASE64.encode(encode_regions(s, t.target)),
            });
        }
    };
    for frame in frames {
        let Frame::Snapshot(s) = frame else { continue };
        if index % every == 0 {
            keep(index, &s, targets);
            last = None;
        } else {
            last = Some((index, s));
        }
        index += 1;
    }
    if let Some((i, s)) = last {
        keep(i, &s, targets);
    }
}
