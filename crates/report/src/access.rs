//! One snapshot's regions, as damo's `report access` (detailed style): where each region is, how
//! big, how often it was accessed (percent of the maximum and Hz) and for how long that has held;
//! for sampled sources, its samples, reads and writes apart, and only the regions that were read
//! or written when asked.

use crate::mappings::Layouts;
use crate::{ReportError, Result, human, target_name};
use serde::Serialize;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;
use udamon_record::model::{Frame, Header, RegionStat, Snapshot, Targets};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessOptions {
    /// Which snapshot: 0 is the first, -1 the last, -2 the one before.
    pub snapshot: i64,
    /// Only this target; `None` shows every target.
    pub target: Option<u32>,
    /// Only regions with read samples (with `writes` too: with read or write samples).
    pub reads: bool,
    /// Only regions with write samples.
    pub writes: bool,
}

impl Default for AccessOptions {
    fn default() -> Self {
        AccessOptions {
            snapshot: -1,
            target: None,
            reads: false,
            writes: false,
        }
    }
}

impl AccessOptions {
    /// Whether a region with these read and write samples is shown.
    fn keeps(&self, r: &RegionStat) -> bool {
        match (self.reads, self.writes) {
            (false, false) => true,
            (true, false) => r.read_samples > 0,
            (false, true) => r.write_samples > 0,
            (true, true) => r.read_samples > 0 || r.write_samples > 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionAccess {
    pub start: u64,
    pub end: u64,
    pub size: u64,
    pub nr_accesses: u32,
    /// `nr_accesses` as a percentage of the highest possible (sampling intervals per window).
    pub access_percent: f64,
    /// `nr_accesses` per second of the aggregation window.
    pub access_hz: f64,
    /// Aggregation windows the frequency held.
    pub age: u32,
    /// `age` as time.
    pub age_ns: u64,
    pub raw_samples: u32,
    /// Of `raw_samples`, those of instructions that read memory (read-modify-writes included).
    pub read_samples: u32,
    /// Of `raw_samples`, those of instructions that wrote memory (read-modify-writes included).
    pub write_samples: u32,
    /// The bytes estimated touched in the window, at page resolution from its samples'
    /// repeats (records of sampled sources that keep the estimate; accessed regions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub touched_bytes: Option<u64>,
    /// The names of the mappings it overlaps, in address order (when the record has them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mappings: Vec<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetAccess {
    pub target: u32,
    pub pid: Option<u32>,
    pub cmdline: Option<String>,
    pub regions: Vec<RegionAccess>,
    pub total_bytes: u64,
    /// Bytes in regions with `nr_accesses > 0`.
    pub accessed_bytes: u64,
    /// Of those, the bytes estimated touched (when the record has estimates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub touched_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccessReport {
    /// The snapshot's index in the record.
    pub snapshot: usize,
    pub nr_snapshots: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub sample_us: u64,
    pub aggr_us: u64,
    pub max_nr_accesses: u32,
    pub targets: Vec<TargetAccess>,
    pub nr_regions: usize,
    pub total_bytes: u64,
    pub accessed_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub touched_bytes: Option<u64>,
    /// damo's "memory bw estimate": Σ size × nr_accesses per second of the window.
    pub est_mem_bw_bytes_per_sec: f64,
}

/// The regions of one snapshot.
pub fn access(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    opts: &AccessOptions,
) -> Result<AccessReport> {
    let mut known = Targets::new(header);
    let (found, nr_snapshots) = pick(frames, opts.snapshot, &mut known)?;
    let (index, snapshot, layouts) = found;
    let aggr_s = snapshot.aggr_us.max(1) as f64 / 1e6;
    let max = snapshot.max_nr_accesses().max(1);
    let mut bw = 0.0;
    let targets: Vec<TargetAccess> = snapshot
        .targets
        .iter()
        .filter(|t| opts.target.is_none_or(|want| want == t.target))
        .map(|t| {
            let info = known.get(t.target);
            let regions: Vec<RegionAccess> = t
                .regions
                .iter()
                .filter(|r| opts.keeps(r))
                .map(|r| RegionAccess {
                    start: r.start,
                    end: r.end,
                    size: r.size(),
                    nr_accesses: r.nr_accesses,
                    access_percent: f64::from(r.nr_accesses) * 100.0 / f64::from(max),
                    access_hz: f64::from(r.nr_accesses) / aggr_s,
                    age: r.age,
                    age_ns: u64::from(r.age).saturating_mul(snapshot.aggr_us.saturating_mul(1000)),
                    raw_samples: r.raw_samples,
                    read_samples: r.read_samples,
                    write_samples: r.write_samples,
                    touched_bytes: r.touched_bytes.map(|_| r.touched()),
                    mappings: layouts.names(t.target, r.start, r.end),
                })
                .collect();
            bw += regions
                .iter()
                .map(|r| r.size as f64 * r.access_hz)
                .sum::<f64>();
            TargetAccess {
                target: t.target,
                pid: info.and_then(|i| i.pid),
                cmdline: info.map(|i| i.cmdline.clone()),
                total_bytes: regions.iter().map(|r| r.size).sum(),
                accessed_bytes: regions
                    .iter()
                    .filter(|r| r.nr_accesses > 0)
                    .map(|r| r.size)
                    .sum(),
                touched_bytes: regions
                    .iter()
                    .any(|r| r.touched_bytes.is_some())
                    .then(|| regions.iter().map(|r| r.touched_bytes.unwrap_or(0)).sum()),
                regions,
            }
        })
        .collect();
    if let Some(target) = opts.target
        && targets.is_empty()
    {
        let present: Vec<String> = snapshot
            .targets
            .iter()
            .map(|t| t.target.to_string())
            .collect();
        return Err(ReportError::NoSuchTarget {
            target,
            present: present.join(", "),
        });
    }
    Ok(AccessReport {
        snapshot: index,
        nr_snapshots,
        start_ns: snapshot.start_ns,
        end_ns: snapshot.end_ns,
        sample_us: snapshot.sample_us,
        aggr_us: snapshot.aggr_us,
        max_nr_accesses: snapshot.max_nr_accesses(),
        nr_regions: targets.iter().map(|t| t.regions.len()).sum(),
        // Each target's regions fit in the address space (the reader checks), but targets
        // together may exceed it in a made-up record.
        total_bytes: targets
            .iter()
            .fold(0, |sum, t| sum.saturating_add(t.total_bytes)),
        accessed_bytes: targets
            .iter()
            .fold(0, |sum, t| sum.saturating_add(t.accessed_bytes)),
        touched_bytes: targets
            .iter()
            .filter_map(|t| t.touched_bytes)
            .reduce(u64::saturating_add),
        est_mem_bw_bytes_per_sec: bw,
        targets,
    })
}

/// A snapshot, its index, and the targets' mappings as of it.
type Picked = (usize, Snapshot, Layouts);

/// Finds snapshot `index` (negative: from the end) while counting all of them and learning
/// every target into `known`; keeps at most `|index|` snapshots in memory.
fn pick(
    frames: impl IntoIterator<Item = Frame>,
    index: i64,
    known: &mut Targets,
) -> Result<(Picked, usize)> {
    let keep = if index < 0 {
        index.unsigned_abs() as usize
    } else {
        1
    };
    let mut window: VecDeque<Picked> = VecDeque::with_capacity(keep.min(1024));
    let mut layouts = Layouts::default();
    let mut count = 0usize;
    for frame in frames {
        known.observe(&frame);
        layouts.observe(&frame);
        let Frame::Snapshot(snapshot) = frame else {
            continue;
        };
        if index < 0 {
            if window.len() == keep {
                window.pop_front();
            }
            window.push_back((count, snapshot, layouts.clone()));
        } else if count as i64 == index {
            window.push_back((count, snapshot, layouts.clone()));
        }
        count += 1;
    }
    if count == 0 {
        return Err(ReportError::NoSnapshots);
    }
    match window.pop_front() {
        Some(found) if index >= 0 || window.len() + 1 == keep => Ok((found, count)),
        _ => Err(ReportError::SnapshotIndex { index, count }),
    }
}

/// A region's mappings on one line: the first few names, then how many more.
fn mapping_names(names: &[Arc<str>]) -> String {
    const SHOWN: usize = 3;
    let mut text = names
        .iter()
        .take(SHOWN)
        .map(|n| human::one_line(n, 60))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        let _ = write!(text, " and {} more", names.len() - SHOWN);
    }
    text
}

/// damo-like text: one line per region, then totals.
pub fn render_text(report: &AccessReport) -> String {
    let mut out = String::new();
    let last = if report.snapshot + 1 == report.nr_snapshots {
        ", the last"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "# snapshot {} of {} (counting from 0{last}): {} - {} after the start",
        report.snapshot,
        report.nr_snapshots,
        human::duration(report.start_ns),
        human::duration(report.end_ns),
    );
    let _ = writeln!(
        out,
        "# intervals: sample {}, aggr {} (at most {} accesses per region per aggregation)",
        human::duration(report.sample_us * 1000),
        human::duration(report.aggr_us * 1000),
        report.max_nr_accesses
    );
    let extra = ExtraColumns::of(report);
    for target in &report.targets {
        target_text(&mut out, target, extra);
    }
    totals_text(&mut out, report);
    out
}

/// The columns a record's source gives only some records: shown when any region has them.
#[derive(Clone, Copy)]
struct ExtraColumns {
    samples: bool,
    kinds: bool,
    touched: bool,
    mappings: bool,
}

impl ExtraColumns {
    fn of(report: &AccessReport) -> Self {
        let regions = || report.targets.iter().flat_map(|t| &t.regions);
        ExtraColumns {
            samples: regions().any(|r| r.raw_samples > 0),
            kinds: regions().any(|r| r.read_samples > 0 || r.write_samples > 0),
            touched: report.touched_bytes.is_some(),
            mappings: regions().any(|r| !r.mappings.is_empty()),
        }
    }

    fn head(self, line: &mut String) {
        if self.samples {
            line.push_str("  samples");
        }
        if self.kinds {
            line.push_str("    reads   writes");
        }
        if self.touched {
            line.push_str(&format!("  {:>11}", "touched"));
        }
        if self.mappings {
            line.push_str("  mappings");
        }
    }

    fn cells(self, line: &mut String, region: &RegionAccess) {
        if self.samples {
            let _ = write!(line, "  {:>7}", region.raw_samples);
        }
        if self.kinds {
            let _ = write!(
                line,
                "  {:>7}  {:>7}",
                region.read_samples, region.write_samples
            );
        }
        if self.touched {
            let touched = region.touched_bytes.map_or(String::new(), human::size);
            let _ = write!(line, "  {touched:>11}");
        }
        if self.mappings {
            let _ = write!(line, "  {}", mapping_names(&region.mappings));
        }
    }
}

/// One target's regions in aligned columns, then its total.
fn target_text(out: &mut String, target: &TargetAccess, extra: ExtraColumns) {
    let who = target_name(target.target, target.pid, target.cmdline.as_deref());
    let _ = writeln!(out, "# {who}");
    let rows: Vec<[String; 6]> = target
        .regions
        .iter()
        .enumerate()
        .map(|(i, r)| {
            [
                i.to_string(),
                format!("{}-{}", human::hex(r.start), human::hex(r.end)),
                human::size(r.size),
                format!("{} %", human::number(r.access_percent)),
                format!("{} Hz", human::number(r.access_hz)),
                human::duration(r.age_ns),
            ]
        })
        .collect();
    let head = ["idx", "address range", "size", "access", "", "age"];
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let [w0, w1, w2, w3, w4, _] = widths;
    let mut line = format!(
        "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$} {:>w4$}  {}",
        head[0], head[1], head[2], head[3], head[4], head[5]
    );
    extra.head(&mut line);
    let _ = writeln!(out, "{}", line.trim_end());
    for (row, region) in rows.iter().zip(&target.regions) {
        let mut line = format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$} {:>w4$}  {:<w5$}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            w5 = widths[5]
        );
        extra.cells(&mut line, region);
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(
        out,
        "# target {} total: {} regions, {}; accessed: {}{}",
        target.target,
        target.regions.len(),
        human::size(target.total_bytes),
        human::size(target.accessed_bytes),
        target.touched_bytes.map_or(String::new(), |t| format!(
            ", of it touched (page resolution): {}",
            human::size(t)
        ))
    );
}

/// All targets' totals, and the memory bandwidth they suggest.
fn totals_text(out: &mut String, report: &AccessReport) {
    let _ = writeln!(
        out,
        "total size: {} in {} regions; accessed: {} ({}%)",
        human::size(report.total_bytes),
        report.nr_regions,
        human::size(report.accessed_bytes),
        human::number(if report.total_bytes == 0 {
            0.0
        } else {
            report.accessed_bytes as f64 * 100.0 / report.total_bytes as f64
        })
    );
    if let Some(touched) = report.touched_bytes {
        let _ = writeln!(
            out,
            "touched in the window, at page resolution from the samples' repeats: {}",
            human::size(touched)
        );
    }
    let _ = writeln!(
        out,
        "memory bw estimate: {} per second",
        human::size(report.est_mem_bw_bytes_per_sec.round() as u64)
    );
}
