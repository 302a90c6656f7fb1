//! The kernel as judge of udamon's working sets. Truth for an interval comes from the page-table
//! accessed bits of one process we own: `/proc/PID/clear_refs` clears them, and after the
//! interval `Referenced:` in `/proc/PID/smaps` says how many bytes of each mapping were touched.
//! udamon's answer for the same interval is the union of the regions it saw accessed
//! (`nr_accesses >= 1`) in the aggregation windows lying mostly inside the interval, cut along
//! the same mappings.
//!
//! Shared by the `judge` bench and udamon's `judge_live` test (which includes this file by
//! path), so that both judge the same way.

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use udamon_linux::referenced::parse_smaps;
use udamon_record::model::{Frame, RegionStat, Snapshot};
use udamon_record::{RecordError, RecordReader};
use udamon_report::wss::union;

/// One mapping of `/proc/PID/smaps` at the end of an interval: its resident bytes and the bytes
/// whose accessed bit was set again during the interval.
pub use udamon_linux::referenced::MappingReferenced as Mapping;

/// A name that tells mappings apart across intervals and in a report.
pub fn label(m: &Mapping) -> String {
    format!("{:x}-{:x} {} {}", m.start, m.end, m.perms, m.name)
}

/// The kernel's answer for one interval, with its wall-clock bounds (CLOCK_REALTIME ns).
#[derive(Debug, Clone)]
pub struct TruthInterval {
    pub start_ns: u64,
    pub end_ns: u64,
    pub mappings: Vec<Mapping>,
}

impl TruthInterval {
    pub fn referenced(&self) -> u64 {
        self.mappings.iter().map(|m| m.referenced_bytes).sum()
    }
}

/// Wall-clock time in ns since the Unix epoch: the clock of the record's `start_time_unix_ns`.
pub fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_nanos() as u64
}

/// Clears `pid`'s accessed bits, waits `len`, and reads which bytes were referenced meanwhile.
/// Only for our own test processes: it resets what the kernel's reclaim knows about them.
pub fn take_interval(pid: u32, len: Duration) -> io::Result<TruthInterval> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "1")?;
    let start_ns = realtime_ns();
    std::thread::sleep(len);
    let text = std::fs::read(format!("/proc/{pid}/smaps"))?;
    let end_ns = realtime_ns();
    Ok(TruthInterval {
        start_ns,
        end_ns,
        mappings: parse_smaps(&text),
    })
}

/// The snapshots of a record, with its wall-clock time zero.
pub struct Record {
    pub start_unix_ns: u64,
    pub snaps: Vec<Snapshot>,
}

pub fn read_record(path: &Path) -> Result<Record, RecordError> {
    let reader = RecordReader::open(path)?;
    let start_unix_ns = reader.header().start_time_unix_ns;
    let snaps = reader
        .filter_map(|f| match f {
            Frame::Snapshot(s) => Some(s),
            Frame::Event(_) => None,
        })
        .collect();
    Ok(Record {
        start_unix_ns,
        snaps,
    })
}

/// udamon against the truth over one interval.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The kernel's referenced bytes.
    pub truth: u64,
    /// Bytes of the union of udamon's accessed regions.
    pub udamon: u64,
    /// (truth, udamon) bytes per mapping, in the order of the interval's mappings.
    pub per_mapping: Vec<(u64, u64)>,
    /// udamon's accessed bytes that cannot have been touched: outside every mapping, or beyond
    /// a mapping's resident size.
    pub not_resident: u64,
    /// The part of `not_resident` outside every mapping.
    pub outside_mappings: u64,
    /// Regions with sample addresses in them but `nr_accesses == 0`.
    pub sampled_zero: usize,
    /// Index of the mapping udamon holds hottest by accessed bytes times `nr_accesses`.
    pub hottest_by_weight: Option<usize>,
    /// Index of the mapping with most of udamon's raw samples.
    pub hottest_by_samples: Option<usize>,
    pub nr_snapshots: usize,
}

impl Judged {
    /// Whether mapping `i` is (about: within 5 %, so that ties count) the one with most
    /// referenced bytes.
    pub fn is_truth_hottest(&self, i: Option<usize>) -> bool {
        let max = self.per_mapping.iter().map(|p| p.0).max().unwrap_or(0);
        i.is_some_and(|i| max > 0 && self.per_mapping[i].0 * 20 >= max * 19)
    }
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

fn argmax(v: impl Iterator<Item = f64>) -> Option<usize> {
    v.enumerate()
        .filter(|&(_, x)| x > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// The snapshots of `rec` whose windows lie at least half inside `[start_ns, end_ns)`
/// (wall-clock).
fn inside(rec: &Record, start_ns: u64, end_ns: u64) -> Vec<&Snapshot> {
    rec.snaps
        .iter()
        .filter(|s| {
            let w = (rec.start_unix_ns + s.start_ns, rec.start_unix_ns + s.end_ns);
            overlap(w, (start_ns, end_ns)) * 2 >= w.1 - w.0
        })
        .collect()
}

/// udamon's accessed ranges (first target) over `[start_ns, end_ns)`: the union of the
/// accessed regions of the snapshots inside it; None when there is none.
fn accessed(inside: &[&Snapshot]) -> Option<Vec<(u64, u64)>> {
    if inside.is_empty() {
        return None;
    }
    Some(union(
        inside
            .iter()
            .filter_map(|s| s.targets.first())
            .flat_map(|t| t.regions.iter())
            .filter(|r| r.nr_accesses >= 1)
            .map(|r| (r.start, r.end)),
    ))
}

/// udamon's working set over `[start_ns, end_ns)` (wall-clock), judged by nothing: for
/// intervals in which no truth was taken, to see what taking it changes.
pub fn udamon_bytes(rec: &Record, start_ns: u64, end_ns: u64) -> Option<u64> {
    let accessed = accessed(&inside(rec, start_ns, end_ns))?;
    Some(accessed.iter().map(|a| a.1 - a.0).sum())
}

/// Judges udamon's record (first target) over `t`, from the snapshots whose windows lie at least
/// half inside it; None when there is none.
pub fn judge(t: &TruthInterval, rec: &Record) -> Option<Judged> {
    let inside = inside(rec, t.start_ns, t.end_ns);
    let accessed = accessed(&inside)?;
    let regions = || {
        inside
            .iter()
            .filter_map(|s| s.targets.first())
            .flat_map(|t| t.regions.iter())
    };
    let in_range = |range| accessed.iter().map(|&a| overlap(a, range)).sum::<u64>();
    let per_mapping: Vec<(u64, u64)> = t
        .mappings
        .iter()
        .map(|m| (m.referenced_bytes, in_range((m.start, m.end))))
        .collect();
    let udamon: u64 = accessed.iter().map(|a| a.1 - a.0).sum();
    let in_mappings: u64 = per_mapping.iter().map(|p| p.1).sum();
    let beyond_rss: u64 = t
        .mappings
        .iter()
        .zip(&per_mapping)
        .map(|(m, p)| p.1.saturating_sub(m.rss_bytes))
        .sum();
    // How much of a region's weight or samples falls in a mapping: its share of the region.
    let share = |m: &Mapping, value: &dyn Fn(&RegionStat) -> f64| {
        regions()
            .map(|r| {
                value(r) * overlap((r.start, r.end), (m.start, m.end)) as f64 / r.size() as f64
            })
            .sum::<f64>()
    };
    let weight = |r: &RegionStat| r.size() as f64 * r.nr_accesses as f64;
    let samples = |r: &RegionStat| r.raw_samples as f64;
    Some(Judged {
        truth: t.referenced(),
        udamon,
        not_resident: udamon - in_mappings + beyond_rss,
        outside_mappings: udamon - in_mappings,
        sampled_zero: regions()
            .filter(|r| r.raw_samples > 0 && r.nr_accesses == 0)
            .count(),
        hottest_by_weight: argmax(t.mappings.iter().map(|m| share(m, &weight))),
        hottest_by_samples: argmax(t.mappings.iter().map(|m| share(m, &samples))),
        per_mapping,
        nr_snapshots: inside.len(),
    })
}
