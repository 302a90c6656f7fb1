//! What a record holds, independent of how it is encoded: a header, then snapshots (one per
//! aggregation interval) and events, in time order. Every reader (udamon's own format, damo's
//! formats) produces these types and every report consumes them.
//!
//! Times are nanoseconds on the monitor's time line, counted from the record's start
//! (`Header::start_time_unix_ns` ties that to wall-clock time).
//!
//! Targets are numbered in the order they became known: first the header's, then those that
//! [`EventKind::TargetAdded`] events announce while monitoring runs (processes forked by a
//! monitored one); a snapshot names a target only once it is known. [`Targets`] follows that
//! list while reading.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use udamon_core::AddrRange;

/// Monitoring intervals in microseconds, as DAMON defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intervals {
    pub sample_us: u64,
    pub aggr_us: u64,
    pub update_us: u64,
}

impl Intervals {
    /// Sampling intervals per aggregation interval: the highest possible `nr_accesses`.
    pub fn max_nr_accesses(&self) -> u32 {
        (self.aggr_us / self.sample_us.max(1)).min(u32::MAX as u64) as u32
    }
}

/// Which access source produced the record, and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessSource {
    /// `sim`, `tick`, `cpuclock`, `pmu`, or `damo` for records converted from damo.
    pub name: String,
    /// A sentence: why this source (e.g. "auto: no PMU; tick needs root").
    pub reason: String,
}

/// One monitored address space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// The process id; `None` for simulated workloads.
    pub pid: Option<u32>,
    /// The command line, or the workload's name for simulations.
    pub cmdline: String,
    /// The target of the process that forked this one, when that one is monitored too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
}

/// Facts about the machine the record was made on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub kernel: String,
    pub nr_cpus: u32,
    pub page_size: u64,
    pub mem_total_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The version of the record format (not of udamon).
    pub format_version: u32,
    pub udamon_version: String,
    pub access_source: AccessSource,
    pub intervals: Intervals,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
    /// The seed of the monitor's random generator, so that a simulated run can be repeated.
    pub seed: u64,
    pub targets: Vec<TargetInfo>,
    pub host: HostInfo,
    /// Wall-clock time of the record's time zero, in nanoseconds since the Unix epoch.
    pub start_time_unix_ns: u64,
    /// How regions were merged and split: `guided` (udamon's default) or `faithful` (DAMON's
    /// alone); empty when unknown (damo's records, and udamon's from before the choice).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub adjustment: String,
}

impl Header {
    /// What is known of a record whose header frame is damaged: nothing but the format. Empty
    /// names and zero numbers are unknowns (as in records read from damo), which reports say.
    pub fn salvaged() -> Header {
        Header {
            format_version: crate::FORMAT_VERSION,
            udamon_version: String::new(),
            access_source: AccessSource {
                name: "unknown".into(),
                reason: "the record's header is damaged".into(),
            },
            intervals: Intervals {
                sample_us: 0,
                aggr_us: 0,
                update_us: 0,
            },
            min_nr_regions: 0,
            max_nr_regions: 0,
            seed: 0,
            targets: Vec::new(),
            host: HostInfo::default(),
            start_time_unix_ns: 0,
            adjustment: String::new(),
        }
    }
}

/// One region of an aggregation snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionStat {
    pub start: u64,
    pub end: u64,
    /// Sampling intervals of the window in which the region was seen accessed.
    pub nr_accesses: u32,
    /// Aggregation intervals for which the access frequency stayed about the same.
    pub age: u32,
    /// Sample addresses that fell in the region during the window (sampled sources; else 0).
    pub raw_samples: u32,
    /// Of `raw_samples`, those of reading instructions (a read-modify-write counts in both);
    /// 0 in records written before they were counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub read_samples: u32,
    /// Of `raw_samples`, those of writing instructions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub write_samples: u32,
    /// The bytes of the region estimated touched in the window, at page resolution from its
    /// samples' repeats (sampled sources, for regions accessed in the window); `None` where
    /// the record has no estimate (records of other sources, or written before version 4),
    /// in which case an accessed region counts whole, as DAMON counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touched_bytes: Option<u64>,
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RegionStat {
    /// A region seen accessed in `nr_accesses` sampling intervals, and nothing else known of
    /// it (no age, no samples, no estimate).
    pub fn new(start: u64, end: u64, nr_accesses: u32) -> Self {
        RegionStat {
            start,
            end,
            nr_accesses,
            age: 0,
            raw_samples: 0,
            read_samples: 0,
            write_samples: 0,
            touched_bytes: None,
        }
    }

    pub fn size(&self) -> u64 {
        self.end - self.start
    }

    pub fn range(&self) -> AddrRange {
        AddrRange::new(self.start, self.end)
    }

    /// The bytes touched in the window: the estimate where the record has one, else the whole
    /// region when it was accessed (DAMON's count) and none when it was not.
    pub fn touched(&self) -> u64 {
        match (self.nr_accesses, self.touched_bytes) {
            (0, _) => 0,
            (_, Some(bytes)) => bytes.min(self.end.saturating_sub(self.start)),
            (_, None) => self.end.saturating_sub(self.start),
        }
    }
}

/// Every reader's check of a region read from a file: it must start below its end (reports
/// would otherwise take `end - start` for a region of exabytes). `Err` says what is wrong.
pub fn check_range(range: AddrRange) -> Result<(), String> {
    let AddrRange { start, end } = range;
    if start < end {
        Ok(())
    } else {
        Err(format!(
            "region start {start:#x} is not below its end {end:#x}"
        ))
    }
}

/// [`check_range`] over one target's regions, which DAMON keeps in address order without
/// overlap (so that their sizes add up to at most the address space); names the first bad one
/// by its index.
pub fn check_regions(regions: impl IntoIterator<Item = AddrRange>) -> Result<(), String> {
    let mut previous_end = 0;
    for (i, range) in regions.into_iter().enumerate() {
        check_range(range).map_err(|e| format!("region {i}: {e}"))?;
        if range.start < previous_end {
            return Err(format!(
                "region {i}: starts at {:#x}, below the previous region's end \
                 {previous_end:#x} (regions out of order or overlapping)",
                range.start
            ));
        }
        previous_end = range.end;
    }
    Ok(())
}

/// One target's regions in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSnapshot {
    /// Index into the record's targets: `Header::targets`, then those `TargetAdded` events
    /// announced.
    pub target: u32,
    pub regions: Vec<RegionStat>,
}

/// The regions at the end of one aggregation window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub start_ns: u64,
    pub end_ns: u64,
    /// The intervals in force during this window (they change under auto-tuning).
    pub sample_us: u64,
    pub aggr_us: u64,
    pub targets: Vec<TargetSnapshot>,
}

impl Snapshot {
    /// [`check_regions`] for every target.
    pub fn check(&self) -> Result<(), String> {
        for t in &self.targets {
            check_regions(t.regions.iter().map(RegionStat::range))
                .map_err(|e| format!("target {}: {e}", t.target))?;
        }
        Ok(())
    }

    pub fn max_nr_accesses(&self) -> u32 {
        (self.aggr_us / self.sample_us.max(1)).min(u32::MAX as u64) as u32
    }

    pub fn nr_regions(&self) -> usize {
        self.targets.iter().map(|t| t.regions.len()).sum()
    }
}

/// Something that happened during monitoring, other than a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// A new target joined monitoring: a process forked by the monitored `parent` target (the
    /// command line is the parent's until the child execs). Its index is the next one.
    TargetAdded {
        target: u32,
        pid: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<u32>,
        cmdline: String,
    },
    /// The target's mappings changed; `nr_mappings` after the change. Records of udamon
    /// before 0.1's `mappings` event; new records write [`EventKind::Mappings`].
    MappingsChanged { target: u32, nr_mappings: u32 },
    /// The target's mappings (`/proc/PID/maps`), in address order: when monitoring starts and
    /// whenever they change. They hold until the target's next `mappings` event.
    Mappings {
        target: u32,
        mappings: Vec<MappingRecord>,
    },
    /// The target called exec; per-process caches were flushed. `comm` is the kernel's name of
    /// the new program (perf's `comm`: the file name, at most 15 bytes), not its command line;
    /// records written before this name call it `cmdline`. `command` is the new program's
    /// command line, when it could be read (older records lack it): the target is named by it
    /// from then on.
    Exec {
        target: u32,
        #[serde(alias = "cmdline")]
        comm: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
    },
    /// The target exited (its exit status when known).
    Exit { target: u32, status: Option<i32> },
    /// The target was dropped from monitoring for another reason.
    TargetDropped { target: u32, reason: String },
    /// Counters of the access source (samples, addresses recovered, drops by reason, lost).
    SourceStats { counters: BTreeMap<String, u64> },
    /// A scheme's cumulative statistics, written whenever they change.
    SchemeStats {
        scheme: u32,
        action: String,
        #[serde(flatten)]
        stats: SchemeStatsRecord,
    },
    /// The regions a scheme was applied to in one apply pass (when tried regions were asked for).
    SchemeTriedRegions {
        scheme: u32,
        regions: Vec<TriedRegionRecord>,
    },
    /// What the operations observed about a target's memory, written whenever it changes.
    TargetMemory {
        target: u32,
        resident_bytes: u64,
        /// Out of memory because a scheme paged it out.
        paged_out_bytes: u64,
        /// Paged out by a scheme and touched again, since the start (cumulative).
        refaulted_bytes: u64,
    },
    /// A target's resident bytes per mapping, from a walk of its page tables (a part every
    /// window) that completed at the event.
    Resident {
        target: u32,
        mappings: Vec<MappingResident>,
    },
    /// The kernel's page-table accessed bits of a target (`record --referenced`): the bytes of
    /// each mapping referenced in the `interval_ns` before the event.
    Referenced {
        target: u32,
        interval_ns: u64,
        /// Every mapping's resident bytes, summed, at the event.
        resident_bytes: u64,
        /// The mappings with referenced bytes, in address order.
        mappings: Vec<ReferencedMapping>,
    },
    /// Monitoring ended; why.
    Stopped { reason: String },
    /// Anything else worth telling the reader.
    Note { text: String },
    /// The samples of one target recovered in one aggregation window (sampled sources), with
    /// the code sites they name that the record has not described before. Stored as a binary
    /// frame of its own (see the crate documentation); `time_ns` is the window's end.
    Samples {
        target: u32,
        /// The window's length: its samples were taken in `time_ns - window_ns .. time_ns`.
        window_ns: u64,
        /// New entries of the record's code-site table, in index order.
        sites: Vec<CodeSite>,
        samples: Vec<SampleFact>,
    },
    /// The callers of each sample of the `samples` event just before it (same target, same
    /// time), in records made with call stacks (`record --call-stacks`), with the entries of the
    /// record's stack table first named here. Stored as a binary frame of its own (see the
    /// crate documentation), so that readers without call stacks skip it and keep the samples.
    Stacks {
        target: u32,
        /// New entries of the record's stack table, in index order.
        stacks: Vec<CallStack>,
        /// Per sample of that `samples` event, in its order: the stack index of its callers.
        samples: Vec<u32>,
    },
    /// The simulator's ground truth for one aggregation window (`record --sim`): where the
    /// workload touched memory in it. Stored as a binary frame of its own (see the crate
    /// documentation), written after the window's snapshot; `time_ns` is the window's end.
    Truth {
        target: u32,
        /// The window's length: `time_ns - window_ns .. time_ns`.
        window_ns: u64,
        /// Address-ordered, disjoint ranges and the bytes of their pages touched in the window.
        extents: Vec<TouchedExtent>,
    },
}

/// A range of a simulated address space and the bytes of its pages touched in a window. Where
/// the simulator knows only an expectation (random accesses), the bytes are its expected value
/// and lie anywhere in the range with equal chance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TouchedExtent {
    pub start: u64,
    pub end: u64,
    /// At most `end - start`.
    pub touched_bytes: u64,
}

/// DAMOS statistics of one scheme (cumulative since monitoring started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SchemeStatsRecord {
    pub nr_tried: u64,
    pub sz_tried: u64,
    pub nr_applied: u64,
    pub sz_applied: u64,
    pub sz_ops_filter_passed: u64,
    pub qt_exceeds: u64,
}

/// A region a scheme was applied to, as it was before the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriedRegionRecord {
    pub start: u64,
    pub end: u64,
    pub nr_accesses: u32,
    pub age: u32,
    pub sz_filter_passed: u64,
}

/// One mapping of a target, as `/proc/PID/maps` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingRecord {
    pub start: u64,
    pub end: u64,
    /// As maps prints them: `rw-p`, `r-xp`, ...
    pub perms: String,
    /// Offset into the file.
    pub offset: u64,
    /// The backing file, or the kernel's name: `[heap]`, `[stack]`, `[vdso]`, `[anon:NAME]`,
    /// and `[anon]` for unnamed anonymous memory.
    pub name: String,
}

impl MappingRecord {
    pub fn size(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub fn range(&self) -> AddrRange {
        AddrRange::new(self.start, self.end)
    }
}

/// One mapping's resident bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingResident {
    pub start: u64,
    pub end: u64,
    pub resident_bytes: u64,
}

/// One mapping's bytes referenced in an interval, by the kernel's accessed bits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferencedMapping {
    pub start: u64,
    pub end: u64,
    /// The backing file or the kernel's name for the mapping (`[heap]`, `[anon]`, ...).
    pub name: String,
    pub rss_bytes: u64,
    pub referenced_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub time_ns: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The longest mapping name read: a path (`PATH_MAX`, 4096 bytes) with the kernel's
/// ` (deleted)`, with room to spare. Reports show a name for each region it covers.
pub const MAX_MAPPING_NAME: usize = 4096 + 64;

impl EventKind {
    /// What an `Exec` event says the target runs now: its command line, else (records that
    /// lack it, or a process gone before it was read) the program's name; `None` for other
    /// events.
    pub fn exec_command(&self) -> Option<&str> {
        match self {
            EventKind::Exec { comm, command, .. } => Some(
                command
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .unwrap_or(comm.as_str()),
            ),
            _ => None,
        }
    }

    /// The target the event is about, if it is about one.
    pub fn target(&self) -> Option<u32> {
        match self {
            EventKind::TargetAdded { target, .. }
            | EventKind::MappingsChanged { target, .. }
            | EventKind::Mappings { target, .. }
            | EventKind::Exec { target, .. }
            | EventKind::Exit { target, .. }
            | EventKind::TargetDropped { target, .. }
            | EventKind::TargetMemory { target, .. }
            | EventKind::Resident { target, .. }
            | EventKind::Referenced { target, .. }
            | EventKind::Samples { target, .. }
            | EventKind::Stacks { target, .. }
            | EventKind::Truth { target, .. } => Some(*target),
            EventKind::SourceStats { .. }
            | EventKind::SchemeStats { .. }
            | EventKind::SchemeTriedRegions { .. }
            | EventKind::Stopped { .. }
            | EventKind::Note { .. } => None,
        }
    }

    /// [`check_range`] for the regions and mappings an event holds, and the length of
    /// mapping names ([`MAX_MAPPING_NAME`]).
    pub fn check(&self) -> Result<(), String> {
        let names: Vec<&str> = match self {
            EventKind::Mappings { mappings, .. } => mappings.iter().map(|m| &*m.name).collect(),
            EventKind::Referenced { mappings, .. } => mappings.iter().map(|m| &*m.name).collect(),
            _ => Vec::new(),
        };
        if let Some((i, name)) = names
            .iter()
            .enumerate()
            .find(|(_, n)| n.len() > MAX_MAPPING_NAME)
        {
            return Err(format!(
                "mapping {i}: a name of {} bytes, longer than a path can be",
                name.len()
            ));
        }
        let range = AddrRange::new;
        let ranges: Vec<AddrRange> = match self {
            EventKind::SchemeTriedRegions { regions, .. } => {
                regions.iter().map(|r| range(r.start, r.end)).collect()
            }
            EventKind::Referenced { mappings, .. } => {
                mappings.iter().map(|m| range(m.start, m.end)).collect()
            }
            EventKind::Resident { mappings, .. } => {
                mappings.iter().map(|m| range(m.start, m.end)).collect()
            }
            EventKind::Truth { extents, .. } => {
                check_regions(extents.iter().map(|e| range(e.start, e.end)))
                    .map_err(|e| e.replacen("region", "extent", 1))?;
                return match extents
                    .iter()
                    .position(|e| e.touched_bytes > e.end - e.start)
                {
                    Some(i) => Err(format!(
                        "extent {i}: more bytes touched ({}) than it holds",
                        extents[i].touched_bytes
                    )),
                    None => Ok(()),
                };
            }
            // Mappings never overlap: held to the regions' rule.
            EventKind::Mappings { mappings, .. } => {
                return check_regions(mappings.iter().map(|m| range(m.start, m.end)))
                    .map_err(|e| e.replacen("region", "mapping", 1));
            }
            _ => return Ok(()),
        };
        for (i, r) in ranges.into_iter().enumerate() {
            check_range(r).map_err(|e| format!("entry {i}: {e}"))?;
        }
        Ok(())
    }
}

/// One unit of a record after the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "frame", rename_all = "snake_case")]
pub enum Frame {
    Snapshot(Snapshot),
    Event(Event),
}

/// A record's targets as far as it has been read: the header's, then those that
/// [`EventKind::TargetAdded`] events announced. Feed it every frame in order
/// ([`Targets::observe`]); target indexes are never reused, so after the last frame it names
/// every target of the record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    /// By target index. A map, not a list: an index comes from the file, and a damaged or
    /// crafted record may announce target 4,000,000,000 first.
    known: BTreeMap<u32, TargetInfo>,
}

impl Targets {
    pub fn new(header: &Header) -> Self {
        Targets {
            known: (0..).zip(header.targets.iter().cloned()).collect(),
        }
    }

    /// Learns the target a `TargetAdded` event announces, and the program an `Exec` event says
    /// it runs now (a `sh -c` that exec'd `sqlite3` is `sqlite3` from then on); other frames
    /// change nothing.
    pub fn observe(&mut self, frame: &Frame) {
        let Frame::Event(Event { kind, .. }) = frame else {
            return;
        };
        match kind {
            EventKind::TargetAdded {
                target,
                pid,
                parent,
                cmdline,
            } => {
                self.known.insert(
                    *target,
                    TargetInfo {
                        pid: *pid,
                        cmdline: cmdline.clone(),
                        parent: *parent,
                    },
                );
            }
            EventKind::Exec { target, .. } => {
                if let (Some(info), Some(now)) = (self.known.get_mut(target), kind.exec_command()) {
                    info.cmdline = now.to_string();
                }
            }
            _ => {}
        }
    }

    pub fn get(&self, target: u32) -> Option<&TargetInfo> {
        self.known.get(&target)
    }
}

/// One entry of a record's code-site table: a sampled instruction pointer and what it was
/// symbolized to when it was first seen (so reports need not find the binary again). Indexes
/// grow through the record and are never reused: after an exec the same IP gets a new entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeSite {
    pub index: u32,
    pub ip: u64,
    /// The function (demangled), when a symbol covers the IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The mapped file (or `[anon]`, `[vdso]`, ...) the IP lies in, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Why no function was found (a stripped binary, JIT code without a perf map, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// One entry of a record's stack table: the callers of a sampled instruction, as code-site
/// indexes of their return addresses, innermost first (the sampled site itself is the
/// sample's). Indexes grow through the record like the code sites'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallStack {
    pub index: u32,
    pub sites: Vec<u32>,
}

/// Whether a sampled instruction read memory, wrote it, or both; `Unknown` when the source
/// gives an address without its instruction (PMU samples).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleAccess {
    Unknown = 0,
    Read = 1,
    Write = 2,
    ReadWrite = 3,
}

impl SampleAccess {
    pub fn from_bits(bits: u64) -> SampleAccess {
        match bits & 3 {
            1 => SampleAccess::Read,
            2 => SampleAccess::Write,
            3 => SampleAccess::ReadWrite,
            _ => SampleAccess::Unknown,
        }
    }

    pub fn reads(self) -> bool {
        matches!(self, SampleAccess::Read | SampleAccess::ReadWrite)
    }

    pub fn writes(self) -> bool {
        matches!(self, SampleAccess::Write | SampleAccess::ReadWrite)
    }
}

/// One recovered sample: the data address, the code site (an index into the record's
/// code-site table) of the sampled instruction pointer, its thread and CPU, and its access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleFact {
    pub addr: u64,
    pub site: u32,
    pub tid: u32,
    pub cpu: u32,
    pub access: SampleAccess,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_follow_the_header_then_the_announcements() {
        let header: Header = serde_json::from_str(
            r#"{"format_version":1,"udamon_version":"","access_source":{"name":"x","reason":""},
            "intervals":{"sample_us":5000,"aggr_us":100000,"update_us":1000000},
            "min_nr_regions":10,"max_nr_regions":1000,"seed":0,
            "targets":[{"pid":7,"cmdline":"sh -c x"}],
            "host":{"hostname":"","kernel":"","nr_cpus":1,"page_size":4096,"mem_total_bytes":0},
            "start_time_unix_ns":0}"#,
        )
        .expect("a version 1 header, without parents, still reads");
        let mut targets = Targets::new(&header);
        assert_eq!(targets.get(0).map(|t| t.pid), Some(Some(7)));
        assert_eq!(targets.get(1), None);
        let added = Frame::Event(Event {
            time_ns: 5,
            kind: EventKind::TargetAdded {
                target: 2,
                pid: Some(9),
                parent: Some(0),
                cmdline: "sh -c x".into(),
            },
        });
        targets.observe(&added);
        assert_eq!(targets.get(1), None, "never announced");
        // An index from a crafted record costs one entry, not a list up to it.
        let far = Frame::Event(Event {
            time_ns: 6,
            kind: EventKind::TargetAdded {
                target: u32::MAX,
                pid: None,
                parent: None,
                cmdline: String::new(),
            },
        });
        targets.observe(&far);
        assert!(targets.get(u32::MAX).is_some());
        assert_eq!(targets.known.len(), 3);
        assert_eq!(targets.get(2).and_then(|t| t.parent), Some(0));
        let json = serde_json::to_string(&added).unwrap();
        assert!(json.contains(r#""kind":"target_added""#), "{json}");
        assert_eq!(serde_json::from_str::<Frame>(&json).unwrap(), added);
    }
}
