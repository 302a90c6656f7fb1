//! `report footprints`: how much memory a target holds against how much it uses, over the
//! record, as damo's `report footprints` (`vsz`, `rss`) with the working set beside them:
//!
//! - **vsz**: the bytes mapped (the sum of the target's mappings, from `mappings` events);
//! - **rss**: the bytes resident at the snapshot: the reading nearest its end, before or after
//!   it, of those the record holds (`target_memory` events, and each page-table walk's
//!   `resident` event summed), so that rss and wss stand side by side from the same moment;
//! - **wss**: the working set, exactly as `report wss` counts it (its horizon included).
//!
//! Each is a distribution over the snapshots ([`crate::dist`]): percentiles, or with every
//! value the three side by side over time. A record without mappings (simulations, damo's
//! records) has no vsz; one without memory events no rss; the report says which it lacks.

use crate::dist::{self, DistOptions, DistReport, SortBy, Unit};
use crate::mappings::Layouts;
use crate::plot::{DrawResult, Drawing};
use crate::{Result, human, reopen};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use udamon_record::model::{EventKind, Frame, Header};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FootprintsReport {
    /// `vsz`, `rss` and `wss`, those the record holds, in that order.
    pub metrics: Vec<DistReport>,
    /// Why a metric is missing, one sentence each.
    pub missing: Vec<String>,
}

/// What the memory events told of each target.
#[derive(Default)]
struct Memory {
    layouts: Layouts,
    /// Every reading of the resident bytes by target, in the record's order: (time, bytes).
    resident: BTreeMap<u32, Vec<(u64, u64)>>,
    saw_mappings: bool,
}

impl Memory {
    fn observe(&mut self, frame: &Frame) {
        self.layouts.observe(frame);
        let Frame::Event(e) = frame else { return };
        let (target, bytes) = match &e.kind {
            EventKind::Mappings { .. } => {
                self.saw_mappings = true;
                return;
            }
            EventKind::Resident { target, mappings } => {
                (*target, mappings.iter().map(|m| m.resident_bytes).sum())
            }
            EventKind::TargetMemory {
                target,
                resident_bytes,
                ..
            } => (*target, *resident_bytes),
            _ => return,
        };
        self.resident
            .entry(target)
            .or_default()
            .push((e.time_ns, bytes));
    }

    fn vsz(&self, target: u32) -> u64 {
        let mappings = self.layouts.covering(target, 0, u64::MAX);
        mappings.iter().map(|m| m.size()).sum()
    }

    /// The reading nearest `time_ns`, the earlier of two as near (0 for a target never read).
    fn rss(&self, target: u32, time_ns: u64) -> u64 {
        let Some(readings) = self.resident.get(&target) else {
            return 0;
        };
        let after = readings.partition_point(|r| r.0 < time_ns);
        let candidates = [after.checked_sub(1), Some(after)];
        candidates
            .into_iter()
            .flatten()
            .filter_map(|i| readings.get(i))
            .min_by_key(|r| r.0.abs_diff(time_ns))
            .map_or(0, |r| r.1)
    }
}

/// The footprints of the record `open` yields afresh for each pass, beside its working set
/// `wss` (`report wss`'s report of the same record, with the same options).
pub fn footprints<I, E, F>(
    header: &Header,
    mut open: F,
    wss: DistReport,
    opts: &DistOptions,
) -> Result<FootprintsReport>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    let memory = RefCell::new(Memory::default());
    let frames = reopen(&mut open)?
        .into_iter()
        .inspect(|f| memory.borrow_mut().observe(f));
    let vsz = dist::collect(header, frames, opts, "vsz", Unit::Bytes, None, |_, t| {
        Ok(memory.borrow().vsz(t.target))
    })?;
    // The readings, all of them by now: each snapshot takes the nearest.
    let memory = memory.into_inner();
    let saw_resident = !memory.resident.is_empty();
    let mut metrics = Vec::new();
    let mut missing = Vec::new();
    if memory.saw_mappings {
        metrics.push(vsz);
    } else {
        missing.push(
            "vsz: the record holds no mappings (udamon records them for live processes)".into(),
        );
    }
    if saw_resident {
        metrics.push(dist::collect(
            header,
            reopen(&mut open)?,
            opts,
            "rss",
            Unit::Bytes,
            None,
            |end_ns, t| Ok(memory.rss(t.target, end_ns)),
        )?);
    } else {
        missing.push("rss: the record holds no resident sizes".into());
    }
    metrics.push(wss);
    Ok(FootprintsReport { metrics, missing })
}

/// Text: each metric's percentiles (damo's `report footprints all`, with the working set), or
/// with `all_values` every snapshot's values side by side, in the report's order.
pub fn render_text(report: &FootprintsReport, opts: &dist::RenderOptions) -> String {
    let mut out = String::new();
    for why in &report.missing {
        let _ = writeln!(out, "# no {why}");
    }
    if opts.all_values {
        render_table(&mut out, report, opts);
        return out;
    }
    for metric in &report.metrics {
        out.push_str(&dist::render_text(metric, opts));
    }
    out
}

/// Every snapshot's values, one row per snapshot, one column per metric and distribution.
fn render_table(out: &mut String, report: &FootprintsReport, opts: &dist::RenderOptions) {
    let Some(first) = report.metrics.first() else {
        return;
    };
    let columns: Vec<(String, &dist::Distribution)> = report
        .metrics
        .iter()
        .flat_map(|m| {
            m.distributions.iter().map(move |d| {
                let name = match d.target {
                    Some(t) => format!("{} t{t}", m.metric),
                    None => m.metric.to_string(),
                };
                (name, d)
            })
        })
        .collect();
    let value = |v: u64| {
        if opts.raw_number {
            v.to_string()
        } else {
            human::size(v)
        }
    };
    // Rows in the first column's order (size or time); the others follow by snapshot.
    let by_snapshot: Vec<BTreeMap<usize, u64>> = columns
        .iter()
        .map(|(_, d)| d.values.iter().map(|p| (p.snapshot, p.value)).collect())
        .collect();
    let _ = write!(out, "# {:>10}", "time");
    for (name, _) in &columns {
        let _ = write!(out, " {name:>12}");
    }
    out.push('\n');
    for point in &first.distributions[0].values {
        let _ = write!(out, "  {:>10}", human::seconds(point.time_ns, 3));
        for column in &by_snapshot {
            let shown = column
                .get(&point.snapshot)
                .map_or("-".into(), |&v| value(v));
            let _ = write!(out, " {shown:>12}");
        }
        out.push('\n');
    }
}

impl Drawing for FootprintsReport {
    /// The summed targets' vsz, rss and wss, one line each.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let sort_by = self.metrics.first().map_or(SortBy::Time, |m| m.sort_by);
        let lines: Vec<(String, Vec<(f64, f64)>)> = self
            .metrics
            .iter()
            .flat_map(|m| {
                m.distributions.iter().map(move |d| {
                    let name = match d.target {
                        Some(t) => format!("{} of target {t}", m.metric),
                        None => m.metric.to_string(),
                    };
                    (name, crate::dist_image::line(d, sort_by))
                })
            })
            .collect();
        let what = crate::dist_image::Plotted {
            metric: "footprint",
            note: " (vsz: mapped, rss: resident, wss: working set)",
            unit: Unit::Bytes,
            sort_by,
            x_desc: None,
        };
        crate::dist_image::draw_lines(root, &what, &lines)
    }
}
