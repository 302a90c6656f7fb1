//! The kernel as judge of udamon's working sets. Truth for an interval comes from the page-table
//! accessed bits of the processes we own: `/proc/PID/clear_refs` clears them, and after the
//! interval `Referenced:` in `/proc/PID/smaps` says how many bytes of each mapping were touched.
//! udamon's answer for the same interval is what its reports say: the working set over a
//! horizon as long as the interval, at the snapshot that ends with it
//! (`udamon_report::working_set`, page resolution from the record's samples), cut along the
//! same mappings; DAMON's count (accessed regions whole) is kept beside it.
//!
//! Shared by the `judge` bench and udamon's `judge_live` test (which includes this file by
//! path), so that both judge the same way.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use udamon_core::AddrRange;
use udamon_linux::referenced::parse_smaps;
use udamon_record::model::{Frame, Header, Snapshot, Targets};
use udamon_record::{RecordError, RecordReader};
use udamon_report::working_set::{Basis, Membership, Replay, WorkingSet, samples_first};

/// One mapping of `/proc/PID/smaps` at the end of an interval: its resident bytes and the bytes
/// whose accessed bit was set again during the interval.
pub use udamon_linux::referenced::MappingReferenced as Mapping;

/// A name that tells mappings apart across intervals and in a report.
pub fn label(m: &Mapping) -> String {
    format!("{:x}-{:x} {} {}", m.start, m.end, m.perms, m.name)
}

/// The kernel's answer for one interval, with its wall-clock bounds (CLOCK_REALTIME ns), per
/// process judged.
#[derive(Debug, Clone)]
pub struct TruthInterval {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Each process's mappings.
    pub processes: Vec<(u32, Vec<Mapping>)>,
}

impl TruthInterval {
    pub fn referenced(&self) -> u64 {
        self.mappings().map(|(_, m)| m.referenced_bytes).sum()
    }

    /// Every process's mappings, with the process.
    pub fn mappings(&self) -> impl Iterator<Item = (u32, &Mapping)> {
        self.processes
            .iter()
            .flat_map(|(pid, maps)| maps.iter().map(move |m| (*pid, m)))
    }
}

/// Wall-clock time in ns since the Unix epoch: the clock of the record's `start_time_unix_ns`.
pub fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_nanos() as u64
}

/// Clears the accessed bits of `pids`, waits `len`, and reads which bytes were referenced
/// meanwhile. Only for our own test processes: it resets what the kernel's reclaim knows about
/// them.
pub fn take_interval(pids: &[u32], len: Duration) -> io::Result<TruthInterval> {
    for pid in pids {
        std::fs::write(format!("/proc/{pid}/clear_refs"), "1")?;
    }
    let start_ns = realtime_ns();
    std::thread::sleep(len);
    let mut processes = Vec::new();
    for &pid in pids {
        let text = std::fs::read(format!("/proc/{pid}/smaps"))?;
        processes.push((pid, parse_smaps(&text)));
    }
    Ok(TruthInterval {
        start_ns,
        end_ns: realtime_ns(),
        processes,
    })
}

/// A record read whole (judged records are small), with its wall-clock time zero.
pub struct Record {
    pub header: Header,
    pub start_unix_ns: u64,
    pub frames: Vec<Frame>,
}

impl Record {
    fn snapshots(&self) -> impl Iterator<Item = &Snapshot> {
        self.frames.iter().filter_map(|f| match f {
            Frame::Snapshot(s) => Some(s),
            Frame::Event(_) => None,
        })
    }

    /// The record's target of each pid.
    fn targets_of(&self) -> BTreeMap<u32, u32> {
        let mut targets = Targets::new(&self.header);
        for f in &self.frames {
            targets.observe(f);
        }
        (0..)
            .map_while(|i| Some((i, targets.get(i)?.pid)))
            .filter_map(|(i, pid)| Some((pid?, i)))
            .collect()
    }

    /// The working sets of every target over `horizon_ns`, at the last snapshot ending by
    /// `end_ns` (wall clock), counted at page resolution and as whole regions; `None` when no
    /// snapshot ends in the horizon.
    pub fn working_sets(&self, end_ns: u64, horizon_ns: u64) -> Option<AtSnapshot> {
        let end = end_ns.checked_sub(self.start_unix_ns)?;
        let at = self
            .snapshots()
            .map(|s| s.end_ns)
            .filter(|&e| e <= end + HALF_WINDOW_NS)
            .last()
            .filter(|&e| e + horizon_ns >= end)?;
        let mut pages = Replay::new(Membership::default(), Basis::Pages);
        let mut whole = Replay::new(Membership::default(), Basis::Regions);
        for f in samples_first(self.frames.iter().cloned()) {
            let done = matches!(&f, Frame::Snapshot(s) if s.end_ns == at);
            pages.observe(&f);
            whole.observe(&f);
            if done {
                break;
            }
        }
        let window_ns = self.header.intervals.aggr_us * 1000;
        let of = |r: &Replay| -> BTreeMap<u32, WorkingSet> {
            self.targets_of()
                .into_iter()
                .filter_map(|(pid, t)| Some((pid, r.working_set(t, horizon_ns, window_ns)?)))
                .collect()
        };
        Some(AtSnapshot {
            pages: of(&pages),
            whole: of(&whole),
            snapshots: self
                .snapshots()
                .filter(|s| s.end_ns <= at && s.end_ns + horizon_ns > at)
                .cloned()
                .collect(),
        })
    }
}

/// A window ends at most this long after the truth's interval and still counts for it (the
/// smaps read that ends the interval takes a moment; the monitor's windows are 400 ms).
const HALF_WINDOW_NS: u64 = 200_000_000;

/// udamon's working sets at one snapshot, per pid, and the snapshots in their horizon.
pub struct AtSnapshot {
    pub pages: BTreeMap<u32, WorkingSet>,
    pub whole: BTreeMap<u32, WorkingSet>,
    pub snapshots: Vec<Snapshot>,
}

pub fn read_record(path: &Path) -> Result<Record, RecordError> {
    let reader = RecordReader::open(path)?;
    let header = reader.header().clone();
    let start_unix_ns = header.start_time_unix_ns;
    Ok(Record {
        header,
        start_unix_ns,
        frames: reader.collect(),
    })
}

/// udamon against the truth over one interval.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The kernel's referenced bytes.
    pub truth: u64,
    /// udamon's working set (page resolution), and the ends of its 95 % interval.
    pub udamon: u64,
    pub low: u64,
    pub high: u64,
    /// Whether udamon's estimate said it was settled.
    pub settled: bool,
    /// DAMON's count: the accessed regions whole.
    pub whole_regions: u64,
    /// The part of `udamon` that is code the sampled instructions ran from (DAMON's count has
    /// no such part).
    pub code: u64,
    /// (truth, udamon) bytes per mapping, in the order of the interval's mappings.
    pub per_mapping: Vec<(u64, u64)>,
    /// udamon's bytes that cannot have been touched: outside every mapping, or beyond a
    /// mapping's resident size.
    pub not_resident: u64,
    /// The part of `not_resident` outside every mapping.
    pub outside_mappings: u64,
    /// Regions with sample addresses in them but `nr_accesses == 0`, and with
    /// `nr_accesses > 0` but no sample (both 0 when counts rest on samples).
    pub sampled_zero: usize,
    pub accessed_unsampled: usize,
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

/// udamon's working set of `pids` over `horizon_ns` ending at `end_ns` (wall clock), judged by
/// nothing: for intervals in which no truth was taken, to see what taking it changes.
pub fn udamon_bytes(rec: &Record, pids: &[u32], end_ns: u64, horizon_ns: u64) -> Option<u64> {
    let at = rec.working_sets(end_ns, horizon_ns)?;
    Some(
        pids.iter()
            .filter_map(|p| at.pages.get(p))
            .map(WorkingSet::bytes)
            .sum(),
    )
}

/// Judges udamon's record over `t`, a horizon as long as the interval; None when no snapshot
/// ends in it.
pub fn judge(t: &TruthInterval, rec: &Record) -> Option<Judged> {
    let horizon_ns = t.end_ns - t.start_ns;
    let at = rec.working_sets(t.end_ns, horizon_ns)?;
    let sum = |f: &dyn Fn(&WorkingSet) -> u64, of: &BTreeMap<u32, WorkingSet>| -> u64 {
        t.processes
            .iter()
            .filter_map(|(pid, _)| of.get(pid))
            .map(f)
            .sum()
    };
    let per_mapping: Vec<(u64, u64)> = t
        .mappings()
        .map(|(pid, m)| {
            let ours = at
                .pages
                .get(&pid)
                .map_or(0, |ws| ws.bytes_within(AddrRange::new(m.start, m.end)));
            (m.referenced_bytes, ours)
        })
        .collect();
    let udamon = sum(&WorkingSet::bytes, &at.pages);
    let in_mappings: u64 = per_mapping.iter().map(|p| p.1).sum();
    let beyond_rss: u64 = t
        .mappings()
        .zip(&per_mapping)
        .map(|((_, m), p)| p.1.saturating_sub(m.rss_bytes))
        .sum();
    // The judged processes' regions in the snapshots of the horizon.
    let targets = rec.targets_of();
    let judged_targets: Vec<u32> = t
        .processes
        .iter()
        .filter_map(|(pid, _)| targets.get(pid).copied())
        .collect();
    let regions = || {
        at.snapshots
            .iter()
            .flat_map(|s| &s.targets)
            .filter(|t| judged_targets.contains(&t.target))
            .flat_map(|t| t.regions.iter())
    };
    // Each mapping's share of the regions' weight and samples, in one pass over the regions:
    // each process's mappings are sorted and disjoint, so a region finds those it overlaps by
    // a binary search (at one region a page, the snapshots of a horizon hold millions).
    let mut by_process: BTreeMap<u32, Vec<(usize, &Mapping)>> = BTreeMap::new();
    for (i, (pid, m)) in t.mappings().enumerate() {
        by_process.entry(pid).or_default().push((i, m));
    }
    let mut weights = vec![0.0f64; per_mapping.len()];
    let mut sampled = vec![0.0f64; per_mapping.len()];
    for r in regions() {
        for maps in by_process.values() {
            let first = maps.partition_point(|(_, m)| m.end <= r.start);
            for &(i, m) in maps[first..].iter().take_while(|(_, m)| m.start < r.end) {
                let share = overlap((r.start, r.end), (m.start, m.end)) as f64 / r.size() as f64;
                weights[i] += share * r.size() as f64 * r.nr_accesses as f64;
                sampled[i] += share * r.raw_samples as f64;
            }
        }
    }
    let settled = t
        .processes
        .iter()
        .filter_map(|(pid, _)| at.pages.get(pid))
        .all(|ws| ws.total.is_settled());
    Some(Judged {
        truth: t.referenced(),
        udamon,
        low: sum(&WorkingSet::low_bytes, &at.pages),
        high: sum(&WorkingSet::high_bytes, &at.pages),
        settled,
        whole_regions: sum(&WorkingSet::bytes, &at.whole),
        code: sum(&WorkingSet::code_bytes, &at.pages),
        not_resident: udamon.saturating_sub(in_mappings) + beyond_rss,
        outside_mappings: udamon.saturating_sub(in_mappings),
        sampled_zero: regions()
            .filter(|r| r.raw_samples > 0 && r.nr_accesses == 0)
            .count(),
        accessed_unsampled: regions()
            .filter(|r| r.raw_samples == 0 && r.nr_accesses > 0)
            .count(),
        hottest_by_weight: argmax(weights.into_iter()),
        hottest_by_samples: argmax(sampled.into_iter()),
        per_mapping,
        nr_snapshots: at.snapshots.len(),
    })
}
