//! `report footprints`: how much memory a target holds against how much it uses, over the
//! record, as damo's `report footprints` (`vsz`, `rss`) with the working set beside them:
//!
//! - **vsz**: the bytes mapped (the sum of the target's mappings, from `mappings` events);
//! - **rss**: the bytes resident (from `target_memory` events, else the last page-table walk
//!   of `resident` events);
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

/// What the memory events told of each target so far.
#[derive(Default)]
struct Memory {
    layouts: Layouts,
    /// The latest resident bytes by target, from `target_memory` events.
    resident: BTreeMap<u32, u64>,
    saw_mappings: bool,
    saw_resident: bool,
}

impl Memory {
    fn observe(&mut self, frame: &Frame) {
        self.layouts.observe(frame);
        let Frame::Event(e) = frame else { return };
        match &e.kind {
            EventKind::Mappings { .. } => self.saw_mappings = true,
            EventKind::Resident { .. } => self.saw_resident = true,
            EventKind::TargetMemory {
                target,
                resident_bytes,
                ..
            } => {
                self.saw_resident = true;
                self.resident.insert(*target, *resident_bytes);
            }
            _ => {}
        }
    }

    fn vsz(&self, target: u32) -> u64 {
        let mappings = self.layouts.covering(target, 0, u64::MAX);
        mappings.iter().map(|m| m.size()).sum()
    }

    fn rss(&self, target: u32) -> u64 {
        if let Some(&bytes) = self.resident.get(&target) {
            return bytes;
        }
        let mappings = self.layouts.covering(target, 0, u64::MAX);
        mappings
            .iter()
            .filter_map(|m| self.layouts.resident(target, m.start))
            .sum()
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
        memory.borrow().vsz(t.target)
    })?;
    let (saw_mappings, saw_resident) = {
        let m = memory.borrow();
        (m.saw_mappings, m.saw_resident)
    };
    let mut metrics = Vec::new();
    let mut missing = Vec::new();
    if saw_mappings {
        metrics.push(vsz);
    } else {
        missing.push(
            "vsz: the record holds no mappings (udamon records them for live processes)".into(),
        );
    }
    if saw_resident {
        let memory = RefCell::new(Memory::default());
        let frames = reopen(&mut open)?
            .into_iter()
            .inspect(|f| memory.borrow_mut().observe(f));
        metrics.push(dist::collect(
            header,
            frames,
            opts,
            "rss",
            Unit::Bytes,
            None,
            |_, t| memory.borrow().rss(t.target),
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
