//! damo's `json` and `json_compressed` formats: a JSON array of records, one per target, each
//! with its snapshots (`_damo_records.py`, `DamonRecord.to_kvpairs`). `json_compressed` is the
//! same text in a zlib stream.
//!
//! The writer emits plain integers and the keys damo 3.x needs, plus two keys damo ignores so
//! that a round trip through damo's format loses nothing udamon records: `raw_samples` (and,
//! when there are any, `read_samples` and `write_samples`) per region and `aggr_interval_us`
//! per snapshot (when it differs from the record's).

use super::number::{Num, Unit};
use super::{TargetRecord, TargetSnap, target_label};
use crate::error::RecordError;
use crate::model::{Frame, Header, Intervals, RegionStat, Snapshot, Targets, check_regions};
use flate2::Compression;
use flate2::write::ZlibEncoder;
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::marker::PhantomData;
use std::path::Path;

/// The records of a file, each counted against the [`Budget`] as it is read.
struct JRecords(Vec<JRecord>);

#[derive(Deserialize)]
struct JRecord {
    #[serde(default)]
    intervals: Option<JIntervals>,
    #[serde(default)]
    scheme_idx: Option<Num>,
    #[serde(default)]
    target_id: Option<Num>,
    #[serde(deserialize_with = "budgeted")]
    snapshots: Vec<JSnapshot>,
}

#[derive(Deserialize)]
struct JIntervals {
    sample_us: Num,
    aggr_us: Num,
    ops_update_us: Num,
}

#[derive(Deserialize)]
struct JSnapshot {
    start_time: Num,
    end_time: Num,
    #[serde(deserialize_with = "compact_regions")]
    regions: Vec<Compact>,
    #[serde(default)]
    sample_interval_us: Option<Num>,
    #[serde(default)]
    aggr_interval_us: Option<Num>,
}

#[derive(Deserialize)]
struct JRegion {
    start: Num,
    end: Num,
    #[serde(default)]
    nr_accesses: Option<JNrAccesses>,
    #[serde(default)]
    age: Option<JAge>,
    #[serde(default)]
    raw_samples: Option<Num>,
    #[serde(default)]
    read_samples: Option<Num>,
    #[serde(default)]
    write_samples: Option<Num>,
}

#[derive(Deserialize)]
struct JNrAccesses {
    #[serde(default)]
    samples: Option<Num>,
    #[serde(default)]
    percent: Option<Num>,
}

#[derive(Deserialize)]
struct JAge {
    #[serde(default)]
    usec: Option<Num>,
    #[serde(default)]
    aggr_intervals: Option<Num>,
}

/// A region as read, its numbers parsed: what stays of it until its snapshot's intervals are
/// known (a third of a [`JRegion`]'s size).
struct Compact {
    start: u64,
    end: u64,
    nr_accesses: Rate,
    age: Age,
    raw_samples: u32,
    read_samples: u32,
    write_samples: u32,
}

enum Rate {
    Samples(u32),
    Percent(f64),
    Unknown,
}

enum Age {
    Intervals(u32),
    Microseconds(u64),
    Unknown,
}

impl TryFrom<JRegion> for Compact {
    type Error = String;

    fn try_from(r: JRegion) -> Result<Compact, String> {
        Ok(Compact {
            start: r.start.u64(Unit::Bytes)?,
            end: r.end.u64(Unit::Bytes)?,
            nr_accesses: match r.nr_accesses {
                Some(JNrAccesses {
                    samples: Some(n), ..
                }) => Rate::Samples(n.u32(Unit::Count)?),
                Some(JNrAccesses {
                    samples: None,
                    percent: Some(p),
                }) => Rate::Percent(p.value(Unit::Percent)?),
                _ => Rate::Unknown,
            },
            age: match r.age {
                Some(JAge {
                    aggr_intervals: Some(n),
                    ..
                }) => Age::Intervals(n.u32(Unit::Count)?),
                Some(JAge {
                    aggr_intervals: None,
                    usec: Some(us),
                }) => Age::Microseconds(us.u64(Unit::Microseconds)?),
                _ => Age::Unknown,
            },
            raw_samples: count(&r.raw_samples)?,
            read_samples: count(&r.read_samples)?,
            write_samples: count(&r.write_samples)?,
        })
    }
}

/// What reading a damo JSON file may hold in memory: damo's layout (snapshots grouped by target,
/// to be merged by time) is read whole, so a file that inflates far, or lists millions of
/// regions in little text, is refused at this bound rather than exhausting memory.
pub const MAX_LOADED_BYTES: usize = 160 << 20;

/// The most a file may inflate to, and the longest token (string or number) in it.
pub const MAX_TEXT_BYTES: u64 = 1 << 30;
const MAX_TOKEN_BYTES: usize = 64 << 10;

thread_local! {
    /// Bytes the file being read may still take; set by [`read`] on its own thread.
    static BUDGET: Cell<usize> = const { Cell::new(0) };
}

/// Why a file is refused at [`MAX_LOADED_BYTES`].
pub(super) const TOO_LARGE: &str = "it holds more than udamon loads of damo's formats (about 1.5 million \
    regions, 160 MiB in memory; damo's layout is read whole): record with udamon, whose format \
    streams, or split the record with damo";

/// Takes `bytes` from the budget of the file being read.
fn spend<E: serde::de::Error>(bytes: usize) -> Result<(), E> {
    BUDGET.with(|b| match b.get().checked_sub(bytes) {
        Some(left) => {
            b.set(left);
            Ok(())
        }
        None => Err(E::custom(TOO_LARGE)),
    })
}

/// A list whose items are each counted against the budget as they are read.
fn budgeted<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    each(d, |item: T| {
        spend(size_of::<T>())?;
        Ok(item)
    })
}

/// The regions of a snapshot, each made [`Compact`] and counted as it is read.
fn compact_regions<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Compact>, D::Error> {
    each(d, |r: JRegion| {
        spend(size_of::<Compact>() + size_of::<RegionStat>())?;
        Compact::try_from(r).map_err(serde::de::Error::custom)
    })
}

/// A JSON list read item by item, each turned by `f` into what is kept.
fn each<'de, D, T, U, F>(d: D, f: F) -> Result<Vec<U>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
    F: FnMut(T) -> Result<U, D::Error>,
{
    struct Each<T, U, F>(F, PhantomData<(T, U)>);
    impl<'de, T, U, F, E> Visitor<'de> for Each<T, U, F>
    where
        T: Deserialize<'de>,
        F: FnMut(T) -> Result<U, E>,
        E: serde::de::Error,
    {
        type Value = Vec<U>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Vec<U>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<T>()? {
                out.push((self.0)(item).map_err(|e| A::Error::custom(e.to_string()))?);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Each(f, PhantomData))
}

impl<'de> Deserialize<'de> for JRecords {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        budgeted(d).map(JRecords)
    }
}

/// The text of a damo file on its way to the JSON parser, refused once it runs longer than
/// [`MAX_TEXT_BYTES`] or holds a token longer than [`MAX_TOKEN_BYTES`] (which the parser would
/// buffer whole): the bounds that keep a small compressed file from taking unbounded time or
/// memory however it inflates.
struct Guarded<R> {
    inner: R,
    read: u64,
    token: usize,
    in_string: bool,
    escaped: bool,
}

impl<R: Read> Read for Guarded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > MAX_TEXT_BYTES {
            return Err(std::io::Error::other(format!(
                "it inflates to more than {} GiB of JSON",
                MAX_TEXT_BYTES >> 30
            )));
        }
        for &b in &buf[..n] {
            if self.in_string {
                match (self.escaped, b) {
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => self.escaped = false,
                }
                self.token += 1;
            } else if b == b'"' {
                (self.in_string, self.token) = (true, 0);
            } else if b.is_ascii_whitespace() || b"[]{},:".contains(&b) {
                self.token = 0;
            } else {
                self.token += 1;
            }
            if self.token > MAX_TOKEN_BYTES {
                return Err(std::io::Error::other(format!(
                    "a string or number longer than {} KiB, which damo never writes",
                    MAX_TOKEN_BYTES >> 10
                )));
            }
        }
        Ok(n)
    }
}

pub(super) fn read(path: &Path, text: impl Read) -> Result<Vec<TargetRecord>, RecordError> {
    let damo_error = |reason: String| RecordError::Damo {
        path: path.to_path_buf(),
        reason,
    };
    let text = Guarded {
        inner: text,
        read: 0,
        token: 0,
        in_string: false,
        escaped: false,
    };
    BUDGET.with(|b| b.set(MAX_LOADED_BYTES));
    let records = serde_json::from_reader::<_, JRecords>(text).map(|r| r.0);
    let records = records.map_err(|e| {
        if e.to_string().contains(TOO_LARGE) {
            damo_error(TOO_LARGE.to_string())
        } else if e.is_io() {
            damo_error(format!(
                "cannot decompress or read it ({e}); is the file truncated?"
            ))
        } else if e.is_eof() {
            damo_error(format!(
                "the JSON text ends early ({e}); is the file truncated?"
            ))
        } else {
            damo_error(format!(
                "unexpected JSON ({e}); damo writes an array of records"
            ))
        }
    })?;
    records
        .into_iter()
        .enumerate()
        .map(|(i, r)| convert_record(r).map_err(|e| damo_error(format!("record {i}: {e}"))))
        .collect()
}

fn convert_record(r: JRecord) -> Result<TargetRecord, String> {
    let intervals = match &r.intervals {
        Some(iv) => Some(Intervals {
            sample_us: iv.sample_us.u64(Unit::Microseconds)?,
            aggr_us: iv.aggr_us.u64(Unit::Microseconds)?,
            update_us: iv.ops_update_us.u64(Unit::Microseconds)?,
        }),
        None => None,
    };
    let id = r
        .target_id
        .map(|n| n.u64(Unit::Count).map(|v| v.to_string()))
        .transpose()?;
    let scheme = r
        .scheme_idx
        .map(|n| n.u64(Unit::Count).map(|v| v.to_string()))
        .transpose()?;
    let mut snapshots = Vec::with_capacity(r.snapshots.len());
    for (si, s) in r.snapshots.into_iter().enumerate() {
        let snap = convert_snapshot(s, intervals).map_err(|e| format!("snapshot {si}: {e}"))?;
        snapshots.push(snap);
    }
    Ok(TargetRecord {
        label: target_label(id.as_deref(), scheme.as_deref()),
        intervals,
        snapshots,
    })
}

fn convert_snapshot(s: JSnapshot, intervals: Option<Intervals>) -> Result<TargetSnap, String> {
    let sample_us = s
        .sample_interval_us
        .map(|n| n.u64(Unit::Microseconds))
        .transpose()?;
    let aggr_us = s
        .aggr_interval_us
        .map(|n| n.u64(Unit::Microseconds))
        .transpose()?;
    // For converting percentages and ages in microseconds back to counts.
    let (si, ai) = match (sample_us.or(intervals.map(|i| i.sample_us)), intervals) {
        (Some(si), Some(iv)) => (Some(si), Some(aggr_us.unwrap_or(iv.aggr_us))),
        (si, _) => (si, aggr_us),
    };
    let regions = s
        .regions
        .into_iter()
        .enumerate()
        .map(|(ri, r)| convert_region(&r, si, ai).map_err(|e| format!("region {ri}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    check_regions(regions.iter().map(RegionStat::range))?;
    Ok(TargetSnap {
        start_ns: Some(s.start_time.u64(Unit::Nanoseconds)?),
        end_ns: s.end_time.u64(Unit::Nanoseconds)?,
        sample_us,
        aggr_us,
        regions,
    })
}

/// An optional count: absent is 0.
fn count(n: &Option<Num>) -> Result<u32, String> {
    Ok(n.as_ref()
        .map(|n| n.u32(Unit::Count))
        .transpose()?
        .unwrap_or(0))
}

fn convert_region(
    r: &Compact,
    sample_us: Option<u64>,
    aggr_us: Option<u64>,
) -> Result<RegionStat, String> {
    let nr_accesses = match r.nr_accesses {
        Rate::Samples(n) => n,
        Rate::Percent(p) => {
            let (Some(si), Some(ai)) = (sample_us, aggr_us) else {
                return Err("access rate in percent, but the record has no intervals".into());
            };
            let max = ai as f64 / si.max(1) as f64;
            (p * max / 100.0).round() as u32
        }
        Rate::Unknown => 0,
    };
    let age = match r.age {
        Age::Intervals(n) => n,
        Age::Microseconds(us) => {
            let Some(ai) = aggr_us else {
                return Err("age in microseconds, but the record has no intervals".into());
            };
            (us / ai.max(1)).min(u32::MAX as u64) as u32
        }
        Age::Unknown => 0,
    };
    Ok(RegionStat {
        start: r.start,
        end: r.end,
        nr_accesses,
        age,
        raw_samples: r.raw_samples,
        read_samples: r.read_samples,
        write_samples: r.write_samples,
        touched_bytes: None,
    })
}

/// Writes `json_compressed` to `path`. `frames` is called once per target and must yield the
/// record's frames each time (e.g. by reopening the input): damo's layout groups snapshots by
/// target, and re-reading keeps memory bounded where collecting would not.
pub fn write_json_compressed_file<I, F>(
    path: impl AsRef<Path>,
    header: &Header,
    frames: F,
) -> Result<(), RecordError>
where
    I: IntoIterator<Item = Frame>,
    F: FnMut() -> Result<I, RecordError>,
{
    let path = path.as_ref();
    let file = File::create(path).map_err(|e| RecordError::io(path, e))?;
    let file = write_json_compressed(file, path, header, frames)?;
    file.sync_all().map_err(|e| RecordError::io(path, e))
}

/// Writes `json_compressed` to any sink (`name` is for messages); see
/// [`write_json_compressed_file`]. Records are one per target, in target order (targets added
/// while monitoring ran come after the header's); a target without snapshots gets no record
/// (damo's reports fail on empty records). Events have no place in damo's format and are left
/// out.
pub fn write_json_compressed<W, I, F>(
    out: W,
    name: &Path,
    header: &Header,
    mut frames: F,
) -> Result<W, RecordError>
where
    W: Write,
    I: IntoIterator<Item = Frame>,
    F: FnMut() -> Result<I, RecordError>,
{
    let io_error = |e| RecordError::io(name, e);
    let mut z = BufWriter::with_capacity(64 << 10, ZlibEncoder::new(out, Compression::default()));
    z.write_all(b"[").map_err(io_error)?;
    let mut nr_targets = header.targets.len();
    let mut nr_records = 0;
    let mut target = 0;
    // At least one pass, which also finds targets that only snapshots name.
    loop {
        let mut nr_snapshots = 0;
        let mut targets = Targets::new(header);
        for frame in frames()? {
            targets.observe(&frame);
            let Frame::Snapshot(s) = frame else { continue };
            for ts in &s.targets {
                // Snapshots may name targets the header lacks; they get records too.
                nr_targets = nr_targets.max(ts.target as usize + 1);
                if ts.target as usize != target {
                    continue;
                }
                if nr_snapshots == 0 {
                    if nr_records > 0 {
                        z.write_all(b",").map_err(io_error)?;
                    }
                    let pid = targets.get(target as u32).and_then(|t| t.pid);
                    write_record_head(&mut z, &header.intervals, target, pid).map_err(io_error)?;
                    nr_records += 1;
                } else {
                    z.write_all(b",").map_err(io_error)?;
                }
                nr_snapshots += 1;
                let snap = OutSnapshot::new(&s, &ts.regions, &header.intervals);
                serde_json::to_writer(&mut z, &snap).map_err(|e| RecordError::Encode {
                    path: name.to_path_buf(),
                    what: "a snapshot",
                    reason: e.to_string(),
                })?;
            }
        }
        if nr_snapshots > 0 {
            z.write_all(b"]}").map_err(io_error)?;
        }
        target += 1;
        if target >= nr_targets {
            break;
        }
    }
    z.write_all(b"]\n").map_err(io_error)?;
    let encoder = z.into_inner().map_err(|e| io_error(e.into_error()))?;
    let mut out = encoder.finish().map_err(io_error)?;
    out.flush().map_err(io_error)?;
    Ok(out)
}

/// The record's keys up to the opening of its snapshot list.
fn write_record_head(
    z: &mut impl Write,
    iv: &Intervals,
    target: usize,
    pid: Option<u32>,
) -> std::io::Result<()> {
    // damo uses the pid as target id for processes; without one, the target's index.
    let target_id = pid.map_or(target as u64, u64::from);
    write!(
        z,
        "{{\"kdamond_idx\":0,\"context_idx\":0,\"intervals\":{{\"sample_us\":{},\"aggr_us\":{},\
         \"ops_update_us\":{}}},\"scheme_idx\":null,\"target_id\":{target_id},\"snapshots\":[",
        iv.sample_us, iv.aggr_us, iv.update_us
    )
}

#[derive(Serialize)]
struct OutSnapshot<'a> {
    start_time: u64,
    end_time: u64,
    regions: OutRegions<'a>,
    total_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_interval_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aggr_interval_us: Option<u64>,
}

impl<'a> OutSnapshot<'a> {
    fn new(s: &Snapshot, regions: &'a [RegionStat], record: &Intervals) -> Self {
        let differs = s.sample_us != record.sample_us || s.aggr_us != record.aggr_us;
        OutSnapshot {
            start_time: s.start_ns,
            end_time: s.end_ns,
            regions: OutRegions {
                regions,
                aggr_us: s.aggr_us,
            },
            total_bytes: regions.iter().map(|r| r.end.saturating_sub(r.start)).sum(),
            sample_interval_us: differs.then_some(s.sample_us),
            aggr_interval_us: differs.then_some(s.aggr_us),
        }
    }
}

/// Serialises regions straight from the snapshot, without an intermediate vector.
struct OutRegions<'a> {
    regions: &'a [RegionStat],
    aggr_us: u64,
}

#[derive(Serialize)]
struct OutRegion {
    start: u64,
    end: u64,
    nr_accesses: OutNrAccesses,
    age: OutAge,
    raw_samples: u32,
    #[serde(skip_serializing_if = "crate::model::is_zero")]
    read_samples: u32,
    #[serde(skip_serializing_if = "crate::model::is_zero")]
    write_samples: u32,
}

#[derive(Serialize)]
struct OutNrAccesses {
    samples: u32,
    percent: Option<f64>,
}

#[derive(Serialize)]
struct OutAge {
    usec: u64,
    aggr_intervals: u32,
}

impl Serialize for OutRegions<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.regions.len()))?;
        for r in self.regions {
            seq.serialize_element(&OutRegion {
                start: r.start,
                end: r.end,
                nr_accesses: OutNrAccesses {
                    samples: r.nr_accesses,
                    percent: None,
                },
                age: OutAge {
                    usec: (r.age as u64).saturating_mul(self.aggr_us),
                    aggr_intervals: r.age,
                },
                raw_samples: r.raw_samples,
                read_samples: r.read_samples,
                write_samples: r.write_samples,
            })?;
        }
        seq.end()
    }
}
