//! Interoperability with damo, DAMON's user-space tool: reading every record format damo has
//! written (`json`, `json_compressed`, `perf_script` text, the legacy binary `record` format
//! versions 0 to 2) and writing `json_compressed`, the format damo 3.x reads.
//!
//! damo keeps one record per monitoring target, each holding that target's snapshots; udamon
//! keeps one frame per aggregation holding every target. Reading regroups snapshots that share
//! a time window into one frame. damo formats are read whole (damo itself does the same); only
//! udamon's own format streams.
//!
//! What damo does not store is filled in and said so in the header's access-source reason:
//! intervals (inferred from snapshot lengths when missing), ages (0 in the legacy binary
//! format), and start times (perf_script and binary records only have end times; as damo does,
//! a snapshot starts where the previous one of its target ended and the first one is given the
//! mean snapshot length).

pub(crate) mod binary;
mod json;
pub mod number;
mod perf_script;

pub use json::{write_json_compressed, write_json_compressed_file};

use crate::error::{Damage, RecordError};
use crate::model::{
    AccessSource, Frame, Header, HostInfo, Intervals, RegionStat, Snapshot, TargetInfo,
    TargetSnapshot,
};
use crate::writer::FORMAT_VERSION;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// damo's defaults (`damo start`): used when a record does not say.
const DEFAULT_SAMPLE_US: u64 = 5_000;
const DEFAULT_AGGR_US: u64 = 100_000;
const DEFAULT_UPDATE_US: u64 = 1_000_000;
const DEFAULT_MIN_NR_REGIONS: u32 = 10;
const DEFAULT_MAX_NR_REGIONS: u32 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamoFormat {
    Json,
    JsonCompressed,
    PerfScript,
    /// The legacy binary `record` format of damo up to v2.0.1 (versions 0, 1 and 2).
    Binary,
}

impl DamoFormat {
    pub fn name(self) -> &'static str {
        match self {
            DamoFormat::Json => "damo json",
            DamoFormat::JsonCompressed => "damo json_compressed",
            DamoFormat::PerfScript => "damo perf_script",
            DamoFormat::Binary => "damo legacy binary",
        }
    }
}

/// A damo record file, read whole and converted.
#[derive(Debug, Clone, PartialEq)]
pub struct DamoRecords {
    pub header: Header,
    /// Snapshots in time order.
    pub frames: Vec<Frame>,
    /// Incomplete or unreadable snapshots that were skipped (text and binary formats).
    pub damage: Vec<Damage>,
}

/// Reads a damo record of a known format.
pub fn read(path: impl AsRef<Path>, format: DamoFormat) -> Result<DamoRecords, RecordError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| RecordError::io(path, e))?;
    let (records, damage) = match format {
        DamoFormat::Json => (json::read(path, BufReader::new(file))?, Vec::new()),
        DamoFormat::JsonCompressed => {
            let unzipped = flate2::read::ZlibDecoder::new(BufReader::new(file));
            (json::read(path, BufReader::new(unzipped))?, Vec::new())
        }
        DamoFormat::PerfScript => perf_script::read(path, BufReader::new(file))?,
        DamoFormat::Binary => {
            let bytes = std::fs::read(path).map_err(|e| RecordError::io(path, e))?;
            binary::read(path, &bytes)?
        }
    };
    Ok(assemble(records, format, damage))
}

/// One damo record: a target's (or a scheme's tried regions') snapshots.
#[derive(Debug, Default)]
struct TargetRecord {
    /// Becomes `TargetInfo::cmdline`.
    label: String,
    intervals: Option<Intervals>,
    snapshots: Vec<TargetSnap>,
}

#[derive(Debug)]
struct TargetSnap {
    /// `None` where the format only has end times.
    start_ns: Option<u64>,
    end_ns: u64,
    sample_us: Option<u64>,
    aggr_us: Option<u64>,
    regions: Vec<RegionStat>,
}

fn target_label(target_id: Option<&str>, scheme: Option<&str>) -> String {
    let mut label = format!("damo target {}", target_id.unwrap_or("none"));
    if let Some(s) = scheme {
        label.push_str(&format!(" (regions tried by scheme {s})"));
    }
    label
}

/// Regroups per-target records into time-ordered frames under one header.
fn assemble(
    mut records: Vec<TargetRecord>,
    format: DamoFormat,
    damage: Vec<Damage>,
) -> DamoRecords {
    let mut notes = Vec::new();
    for r in &mut records {
        if fill_start_times(r) {
            notes.push("start times inferred from end times");
        }
    }
    let intervals = match records.iter().find_map(|r| r.intervals) {
        Some(i) => i,
        None => {
            notes.push("intervals not recorded: aggregation = mean snapshot length, sampling 5 ms");
            let durations: Vec<u64> = records
                .iter()
                .flat_map(|r| &r.snapshots)
                .filter_map(|s| Some(s.end_ns.saturating_sub(s.start_ns?) / 1000))
                .filter(|&d| d > 0)
                .collect();
            let aggr_us = match durations.len() as u64 {
                0 => DEFAULT_AGGR_US,
                n => durations.iter().sum::<u64>() / n,
            };
            Intervals {
                sample_us: DEFAULT_SAMPLE_US.min(aggr_us),
                aggr_us,
                update_us: DEFAULT_UPDATE_US,
            }
        }
    };
    if format == DamoFormat::Binary {
        notes.push("ages not recorded, shown as 0");
    }
    notes.dedup();

    let mut by_time: BTreeMap<(u64, u64), Snapshot> = BTreeMap::new();
    for (index, r) in records.iter_mut().enumerate() {
        let rec_iv = r.intervals.unwrap_or(intervals);
        for s in r.snapshots.drain(..) {
            let start_ns = s.start_ns.unwrap_or(s.end_ns);
            let sample_us = s.sample_us.unwrap_or(rec_iv.sample_us);
            // Intervals tuning keeps the number of samples per aggregation, so a snapshot with
            // its own sampling interval has its aggregation interval scaled alike.
            let aggr_us = s.aggr_us.unwrap_or(match s.sample_us {
                Some(si) if rec_iv.sample_us > 0 => {
                    (si as u128 * rec_iv.aggr_us as u128 / rec_iv.sample_us as u128) as u64
                }
                _ => rec_iv.aggr_us,
            });
            let snapshot = by_time
                .entry((s.end_ns, start_ns))
                .or_insert_with(|| Snapshot {
                    start_ns,
                    end_ns: s.end_ns,
                    sample_us,
                    aggr_us,
                    targets: Vec::new(),
                });
            snapshot.targets.push(TargetSnapshot {
                target: index as u32,
                regions: s.regions,
            });
        }
    }

    let mut reason = format!("read from a {} record", format.name());
    for n in &notes {
        reason.push_str("; ");
        reason.push_str(n);
    }
    let header = Header {
        format_version: FORMAT_VERSION,
        udamon_version: String::new(),
        access_source: AccessSource {
            name: "damo".into(),
            reason,
        },
        intervals,
        min_nr_regions: DEFAULT_MIN_NR_REGIONS,
        max_nr_regions: DEFAULT_MAX_NR_REGIONS,
        seed: 0,
        targets: records
            .into_iter()
            .map(|r| TargetInfo {
                pid: None,
                cmdline: r.label,
                parent: None,
            })
            .collect(),
        host: HostInfo::default(),
        start_time_unix_ns: 0,
        adjustment: String::new(),
    };
    DamoRecords {
        header,
        frames: by_time.into_values().map(Frame::Snapshot).collect(),
        damage,
    }
}

/// damo's rule for formats without start times (`set_first_snapshot_start_time`): a snapshot
/// starts where the previous one ended; the first gets the mean snapshot length. Returns
/// whether anything was inferred.
fn fill_start_times(r: &mut TargetRecord) -> bool {
    let n = r.snapshots.len();
    if n == 0 || r.snapshots.iter().all(|s| s.start_ns.is_some()) {
        return false;
    }
    let first_len = if n >= 2 {
        (r.snapshots[n - 1]
            .end_ns
            .saturating_sub(r.snapshots[0].end_ns))
            / (n as u64 - 1)
    } else {
        r.intervals.map_or(DEFAULT_AGGR_US, |i| i.aggr_us) * 1000
    };
    let mut prev_end = None;
    for s in &mut r.snapshots {
        if s.start_ns.is_none() {
            s.start_ns = Some(prev_end.unwrap_or(s.end_ns.saturating_sub(first_len)));
        }
        prev_end = Some(s.end_ns);
    }
    true
}

/// damo appends a fake snapshot to single-snapshot perf_script and binary records so that its
/// reader can infer a start time: one region `0-0` whose `nr_accesses` is -1.
fn is_fake_region(start: u64, end: u64, nr_accesses: i64) -> bool {
    start == 0 && end == 0 && nr_accesses == -1
}
