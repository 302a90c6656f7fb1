//! `report referenced`: the kernel's page-table accessed bits, read per mapping by `record
//! --referenced PERIOD`, set against udamon's working set over the same intervals (the memory
//! accessed in the windows that ended within each interval, at page resolution where the
//! samples allow: [`crate::working_set`]), in total and per mapping. The kernel's numbers are exact bytes touched; udamon's come from samples. Where the
//! two part, the samples missed memory (too few landed there) or regions reached past what was
//! touched.

use crate::working_set::{Basis, Membership, Replay, WorkingSet, samples_first};
use crate::{ReportError, Result, human, target_name};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use udamon_core::AddrRange;
use udamon_record::model::{EventKind, Frame, Header, ReferencedMapping, Targets};

/// Mappings listed per interval, by the kernel's referenced bytes.
pub const TOP_MAPPINGS: usize = 5;

/// One mapping in one interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MappingComparison {
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub kernel_bytes: u64,
    pub udamon_bytes: u64,
}

/// One interval of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    pub target: u32,
    /// The interval's end, from the record's start.
    pub time_ns: u64,
    pub interval_ns: u64,
    pub kernel_bytes: u64,
    pub udamon_bytes: u64,
    pub resident_bytes: u64,
    /// The mappings the kernel saw most referenced, most first.
    pub top: Vec<MappingComparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferencedReport {
    pub intervals: Vec<Interval>,
    /// Per target, in target order: pooling a busy worker with its idle parent would give a
    /// median of neither.
    pub targets: Vec<TargetReferenced>,
}

/// One target's intervals summed up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetReferenced {
    pub target: u32,
    pub pid: Option<u32>,
    pub cmdline: Option<String>,
    pub nr_intervals: usize,
    /// Medians over its intervals: the kernel's bytes, udamon's, and of the ratios udamon's /
    /// the kernel's (the median ratio, not the ratio of the medians).
    pub median_kernel_bytes: u64,
    pub median_udamon_bytes: u64,
    pub median_ratio: f64,
}

/// The report over `frames`; fails when they hold no `referenced` event.
pub fn referenced(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
) -> Result<ReferencedReport> {
    let mut known = Targets::new(header);
    let mut replay = Replay::new(Membership::default(), Basis::Pages);
    let mut window_ns = 0;
    let mut intervals = Vec::new();
    for frame in samples_first(frames) {
        known.observe(&frame);
        replay.observe(&frame);
        match frame {
            Frame::Snapshot(s) => window_ns = s.aggr_us.saturating_mul(1000),
            Frame::Event(e) => {
                let EventKind::Referenced {
                    target,
                    interval_ns,
                    resident_bytes,
                    mappings,
                } = e.kind
                else {
                    continue;
                };
                let Some(ws) = replay.working_set(target, interval_ns, window_ns) else {
                    continue;
                };
                intervals.push(compare(
                    target,
                    e.time_ns,
                    interval_ns,
                    resident_bytes,
                    mappings,
                    &ws,
                ));
            }
        }
    }
    if intervals.is_empty() {
        return Err(ReportError::NoReferenced);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut by_target: BTreeMap<u32, Vec<&Interval>> = BTreeMap::new();
    for i in &intervals {
        by_target.entry(i.target).or_default().push(i);
    }
    let targets = by_target
        .into_iter()
        .map(|(target, list)| {
            let info = known.get(target);
            TargetReferenced {
                target,
                pid: info.and_then(|i| i.pid),
                cmdline: info.map(|i| i.cmdline.clone()),
                nr_intervals: list.len(),
                median_kernel_bytes: median(list.iter().map(|i| i.kernel_bytes as f64).collect())
                    as u64,
                median_udamon_bytes: median(list.iter().map(|i| i.udamon_bytes as f64).collect())
                    as u64,
                median_ratio: median(list.iter().map(|i| i.ratio()).collect()),
            }
        })
        .collect();
    Ok(ReferencedReport { targets, intervals })
}

fn compare(
    target: u32,
    time_ns: u64,
    interval_ns: u64,
    resident_bytes: u64,
    mut mappings: Vec<ReferencedMapping>,
    working_set: &WorkingSet,
) -> Interval {
    mappings.sort_by_key(|m| std::cmp::Reverse(m.referenced_bytes));
    let top = mappings
        .iter()
        .take(TOP_MAPPINGS)
        .map(|m| MappingComparison {
            start: m.start,
            end: m.end,
            name: m.name.clone(),
            kernel_bytes: m.referenced_bytes,
            udamon_bytes: working_set.bytes_within(AddrRange::new(m.start, m.end)),
        })
        .collect();
    Interval {
        target,
        time_ns,
        interval_ns,
        kernel_bytes: mappings.iter().map(|m| m.referenced_bytes).sum(),
        udamon_bytes: working_set.bytes(),
        resident_bytes,
        top,
    }
}

impl Interval {
    /// udamon's bytes over the kernel's.
    pub fn ratio(&self) -> f64 {
        self.udamon_bytes as f64 / self.kernel_bytes.max(1) as f64
    }
}

pub fn render_text(report: &ReferencedReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# the kernel's accessed bits (record --referenced) against udamon's working set over the same intervals"
    );
    let _ = writeln!(
        out,
        "# {:>3} {:>9} {:>9} {:>12} {:>12} {:>7} {:>12}",
        "tgt", "time", "interval", "kernel", "udamon", "ratio", "resident"
    );
    for i in &report.intervals {
        let _ = writeln!(
            out,
            "  {:>3} {:>9} {:>9} {:>12} {:>12} {:>7.2} {:>12}",
            i.target,
            human::seconds(i.time_ns, 1),
            human::seconds(i.interval_ns, 1),
            human::size(i.kernel_bytes),
            human::size(i.udamon_bytes),
            i.ratio(),
            human::size(i.resident_bytes)
        );
    }
    for t in &report.targets {
        let _ = writeln!(
            out,
            "# {}: medians over {} intervals: kernel {}, udamon {}; median ratio udamon/kernel {:.2}",
            target_name(t.target, t.pid, t.cmdline.as_deref()),
            t.nr_intervals,
            human::size(t.median_kernel_bytes),
            human::size(t.median_udamon_bytes),
            t.median_ratio
        );
    }
    if let Some(last) = report.intervals.last() {
        let _ = writeln!(
            out,
            "# the last interval's most referenced mappings (target {}):",
            last.target
        );
        for m in &last.top {
            let _ = writeln!(
                out,
                "  {:>12} kernel {:>12} udamon  {}-{} {}",
                human::size(m.kernel_bytes),
                human::size(m.udamon_bytes),
                human::hex(m.start),
                human::hex(m.end),
                m.name
            );
        }
    }
    out
}
