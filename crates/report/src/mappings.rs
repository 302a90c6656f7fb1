//! What the monitored memory is: each target's mappings as the record's `mappings` events give
//! them, with their resident bytes from its `resident` events ([`Layouts`]), and `udamon report
//! mappings`, which sums the snapshots up per mapping: its size, its resident bytes, and how
//! many of its bytes were hot (touched in the window: at page resolution where the record has
//! estimates), warm (idle for less than `cold_after`, or in an accessed region but not among
//! its touched pages) or cold, and its working set over a horizon ([`crate::working_set`]), on
//! average over the snapshots it existed in, with the access rate of its bytes and the samples
//! that fell in it.

use crate::working_set::{AddressSpace, Basis, Membership, Replay, SamplesFirst, WorkingSet};
use crate::{ReportError, Result, human, target_name};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use udamon_core::AddrRange;
use udamon_record::model::{EventKind, Frame, Header, MappingRecord, Snapshot, Targets};

/// Each target's mappings as of the frames observed so far, with their resident bytes as last
/// walked. Cheap to clone (the lists are shared), so that a report can keep the layout of a
/// snapshot it holds on to.
#[derive(Debug, Clone, Default)]
pub struct Layouts {
    by_target: BTreeMap<u32, Arc<Vec<MappingRecord>>>,
    /// The mappings' names, shared by every region a report names them for (a name may be
    /// long, and a snapshot has many regions).
    names: BTreeMap<u32, Arc<Vec<Arc<str>>>>,
    /// Resident bytes by (target, mapping start), from the latest `resident` event.
    resident: BTreeMap<(u32, u64), u64>,
    /// What each target's layout costs in memory, and when it was last updated (a count of
    /// updates), for keeping within [`LAYOUTS_BYTES`].
    cost: BTreeMap<u32, (usize, u64)>,
    updates: u64,
}

/// The most memory the targets' layouts may take together. A process has at most some tens of
/// thousands of mappings; a made-up record may claim millions for each of thousands of
/// targets, and then the layouts updated longest ago are forgotten (their regions go unnamed).
pub const LAYOUTS_BYTES: usize = 64 << 20;

/// What a mapping costs a layout besides its name.
const MAPPING_BYTES: usize = size_of::<MappingRecord>() + size_of::<Arc<str>>() + 32;

impl Layouts {
    /// Takes in a frame: a `mappings` event replaces its target's list, a `resident` event its
    /// resident bytes.
    pub fn observe(&mut self, frame: &Frame) {
        let Frame::Event(e) = frame else {
            return;
        };
        match &e.kind {
            EventKind::Mappings { target, mappings } => {
                self.by_target.insert(*target, Arc::new(mappings.clone()));
                let names = mappings.iter().map(|m| Arc::from(m.name.as_str()));
                self.names.insert(*target, Arc::new(names.collect()));
                self.keep_within_budget(*target);
            }
            EventKind::Resident { target, mappings } => {
                self.resident.retain(|k, _| k.0 != *target);
                self.resident.extend(
                    mappings
                        .iter()
                        .map(|m| ((*target, m.start), m.resident_bytes)),
                );
                self.keep_within_budget(*target);
            }
            _ => {}
        }
    }

    /// Counts `target`'s layout as just updated, and forgets the layouts updated longest ago
    /// while all of them take more than [`LAYOUTS_BYTES`].
    fn keep_within_budget(&mut self, target: u32) {
        let list = self.by_target.get(&target).map_or(&[][..], |l| &l[..]);
        let names: usize = list.iter().map(|m| 2 * m.name.len() + m.perms.len()).sum();
        let resident = self
            .resident
            .range((target, 0)..=(target, u64::MAX))
            .count();
        let cost = list.len() * MAPPING_BYTES + names + resident * 48;
        self.updates += 1;
        self.cost.insert(target, (cost, self.updates));
        while self.cost.values().map(|c| c.0).sum::<usize>() > LAYOUTS_BYTES {
            let Some((&oldest, _)) = self
                .cost
                .iter()
                .filter(|(t, _)| **t != target)
                .min_by_key(|(_, c)| c.1)
            else {
                break;
            };
            self.cost.remove(&oldest);
            self.by_target.remove(&oldest);
            self.names.remove(&oldest);
            self.resident.retain(|k, _| k.0 != oldest);
        }
    }

    /// The resident bytes of `target`'s mapping starting at `start`, as last walked.
    pub fn resident(&self, target: u32, start: u64) -> Option<u64> {
        self.resident.get(&(target, start)).copied()
    }

    /// Whether any target's mappings are known (records before the `mappings` event, and
    /// simulations, have none).
    pub fn is_empty(&self) -> bool {
        self.by_target.is_empty()
    }

    /// `target`'s mappings that overlap `[start, end)`, in address order.
    pub fn covering(&self, target: u32, start: u64, end: u64) -> &[MappingRecord] {
        let Some(list) = self.by_target.get(&target) else {
            return &[];
        };
        &list[overlapping(list, start, end)]
    }

    /// The distinct names of the mappings overlapping `[start, end)`, in address order.
    pub fn names(&self, target: u32, start: u64, end: u64) -> Vec<Arc<str>> {
        let (Some(list), Some(all)) = (self.by_target.get(&target), self.names.get(&target)) else {
            return Vec::new();
        };
        let mut names: Vec<Arc<str>> = Vec::new();
        for name in &all[overlapping(list, start, end)] {
            if !names.contains(name) {
                names.push(Arc::clone(name));
            }
        }
        names
    }
}

/// The indexes of the mappings of `list` (in address order) that overlap `[start, end)`.
fn overlapping(list: &[MappingRecord], start: u64, end: u64) -> std::ops::Range<usize> {
    let from = list.partition_point(|m| m.end <= start);
    from..from + list[from..].partition_point(|m| m.start < end)
}

/// Options of `report mappings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingsOptions {
    /// Memory idle this long or longer counts as cold.
    pub cold_after_ns: u64,
    /// Snapshots left out at the start, while regions adapt (as the distribution reports).
    pub skip: usize,
    /// The horizon of the working set shown per mapping.
    pub horizon_ns: u64,
}

impl Default for MappingsOptions {
    fn default() -> Self {
        MappingsOptions {
            cold_after_ns: 10_000_000_000,
            skip: 0,
            horizon_ns: 10_000_000_000,
        }
    }
}

/// One mapping of one target, over the snapshots it existed in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MappingSummary {
    pub target: u32,
    pub start: u64,
    /// Its end in the last snapshot it existed in (a heap grows).
    pub end: u64,
    pub perms: String,
    pub name: String,
    /// Snapshots in which it existed.
    pub nr_snapshots: usize,
    /// Mean bytes per snapshot: its size, its resident bytes (over the snapshots after its
    /// first walk; none for records without `resident` events), and of it monitored, hot
    /// (touched in the window), warm (idle less than the cold threshold, or in a region
    /// accessed in the window but not among its touched pages) and cold, and its working set
    /// over the report's horizon.
    pub size_bytes: u64,
    pub resident_bytes: Option<u64>,
    pub monitored_bytes: u64,
    pub hot_bytes: u64,
    pub warm_bytes: u64,
    pub cold_bytes: u64,
    pub working_set_bytes: u64,
    /// Mean accesses per second of its hot bytes (byte-weighted).
    pub hot_access_hz: f64,
    /// Samples that fell in it over the record (sampled sources), a region's shared out by
    /// size.
    pub samples: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MappingsReport {
    pub cold_after_ns: u64,
    pub horizon_ns: u64,
    pub nr_snapshots: usize,
    /// Snapshots left out at the start.
    pub skipped: usize,
    /// By target, then mean hot bytes, most first.
    pub mappings: Vec<MappingSummary>,
    /// Target names, by index.
    pub targets: BTreeMap<u32, String>,
}

/// Sums for one mapping.
#[derive(Debug, Default)]
struct Sums {
    end: u64,
    nr_snapshots: usize,
    size: f64,
    resident: f64,
    resident_snapshots: usize,
    monitored: f64,
    hot: f64,
    warm: f64,
    cold: f64,
    working_set: f64,
    hot_hz_bytes: f64,
    samples: f64,
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

/// `report mappings`: streams the record once; memory grows with the number of distinct
/// mappings, not with the record's length.
pub fn mappings(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    opts: &MappingsOptions,
) -> Result<MappingsReport> {
    let mut live = LiveMappings::new(header, opts);
    for frame in frames {
        live.observe(frame);
    }
    live.finish();
    live.report()
}

/// `report mappings` of a record that is still growing (a live view): frames go in as they
/// come, and the report covers those seen so far. A sampled record writes a window's samples
/// after its snapshot, so each snapshot counts once the frame after its samples has come
/// ([`SamplesFirst`]), or at [`LiveMappings::finish`].
pub struct LiveMappings {
    opts: MappingsOptions,
    known: Targets,
    layouts: Layouts,
    window_ns: u64,
    order: SamplesFirst,
    ready: VecDeque<Frame>,
    replay: Replay,
    /// Keyed by what stays while a mapping grows: target, start, permissions and name.
    sums: BTreeMap<(u32, u64, String, String), Sums>,
    /// What `sums` takes; past [`SUMS_BYTES`] the report is refused.
    sums_bytes: usize,
    nr_snapshots: usize,
}

impl LiveMappings {
    pub fn new(header: &Header, opts: &MappingsOptions) -> LiveMappings {
        let window_ns = header.intervals.aggr_us.saturating_mul(1000);
        LiveMappings {
            opts: *opts,
            known: Targets::new(header),
            layouts: Layouts::default(),
            window_ns,
            order: SamplesFirst::default(),
            ready: VecDeque::new(),
            replay: Replay::new(
                opts.horizon_ns.max(window_ns),
                Membership::default(),
                Basis::Pages,
            )
            .of_space(AddressSpace::of_source(&header.access_source.name)),
            sums: BTreeMap::new(),
            sums_bytes: 0,
            nr_snapshots: 0,
        }
    }

    /// Takes in the record's next frame, in the record's order.
    pub fn observe(&mut self, frame: Frame) {
        self.order.push(frame, &mut self.ready);
        while let Some(f) = self.ready.pop_front() {
            self.count(f);
        }
    }

    /// Counts the snapshot held back for its samples: the record has ended.
    pub fn finish(&mut self) {
        if let Some(f) = self.order.finish() {
            self.count(f);
        }
    }

    fn count(&mut self, frame: Frame) {
        self.known.observe(&frame);
        self.layouts.observe(&frame);
        self.replay.observe(&frame);
        let Frame::Snapshot(snapshot) = frame else {
            return;
        };
        self.nr_snapshots += 1;
        if self.nr_snapshots > self.opts.skip && self.sums_bytes <= SUMS_BYTES {
            let (replay, window_ns, horizon_ns) =
                (&self.replay, self.window_ns, self.opts.horizon_ns);
            let working_sets = |target: u32| replay.working_set(target, horizon_ns, window_ns);
            add_snapshot(
                &mut self.sums,
                &mut self.sums_bytes,
                &self.layouts,
                &snapshot,
                &self.opts,
                working_sets,
            );
        }
    }

    /// Snapshots counted so far.
    pub fn nr_snapshots(&self) -> usize {
        self.nr_snapshots
    }

    /// The mappings as of the frames seen: each target's mappings and resident bytes.
    pub fn layouts(&self) -> &Layouts {
        &self.layouts
    }

    /// `target`'s working set over `horizon_ns` (at most the report's horizon; 0: one window)
    /// before the latest snapshot counted, as `report wss` counts it.
    pub fn working_set(&self, target: u32, horizon_ns: u64) -> Option<WorkingSet> {
        self.replay.working_set(target, horizon_ns, self.window_ns)
    }

    /// The report so far.
    pub fn report(&self) -> Result<MappingsReport> {
        let nr_snapshots = self.nr_snapshots;
        if nr_snapshots == 0 {
            return Err(ReportError::NoSnapshots);
        }
        if self.layouts.is_empty() {
            return Err(ReportError::NoMappings);
        }
        if self.sums_bytes > SUMS_BYTES {
            return Err(ReportError::TooManyMappings {
                mib: SUMS_BYTES >> 20,
            });
        }
        let mut mappings: Vec<MappingSummary> = self
            .sums
            .iter()
            .map(|((target, start, perms, name), s)| {
                let n = s.nr_snapshots.max(1) as f64;
                MappingSummary {
                    target: *target,
                    start: *start,
                    end: s.end,
                    perms: perms.clone(),
                    name: name.clone(),
                    nr_snapshots: s.nr_snapshots,
                    size_bytes: (s.size / n).round() as u64,
                    resident_bytes: (s.resident_snapshots > 0)
                        .then(|| (s.resident / s.resident_snapshots as f64).round() as u64),
                    monitored_bytes: (s.monitored / n).round() as u64,
                    hot_bytes: (s.hot / n).round() as u64,
                    warm_bytes: (s.warm / n).round() as u64,
                    cold_bytes: (s.cold / n).round() as u64,
                    working_set_bytes: (s.working_set / n).round() as u64,
                    hot_access_hz: if s.hot > 0.0 {
                        s.hot_hz_bytes / s.hot
                    } else {
                        0.0
                    },
                    samples: s.samples,
                }
            })
            .collect();
        mappings.sort_by(|a, b| {
            a.target
                .cmp(&b.target)
                .then(b.hot_bytes.cmp(&a.hot_bytes))
                .then(b.warm_bytes.cmp(&a.warm_bytes))
                .then(a.start.cmp(&b.start))
        });
        let targets = mappings
            .iter()
            .map(|m| m.target)
            .map(|t| {
                let info = self.known.get(t);
                (
                    t,
                    target_name(
                        t,
                        info.and_then(|i| i.pid),
                        info.map(|i| i.cmdline.as_str()),
                    ),
                )
            })
            .collect();
        Ok(MappingsReport {
            cold_after_ns: self.opts.cold_after_ns,
            horizon_ns: self.opts.horizon_ns,
            nr_snapshots,
            skipped: self.opts.skip.min(nr_snapshots),
            mappings,
            targets,
        })
    }
}

/// The most memory the report's sums may take: one per distinct mapping of the record, a real
/// one holds some hundred thousand at most.
const SUMS_BYTES: usize = 128 << 20;

fn add_snapshot(
    sums: &mut BTreeMap<(u32, u64, String, String), Sums>,
    sums_bytes: &mut usize,
    layouts: &Layouts,
    snapshot: &Snapshot,
    opts: &MappingsOptions,
    working_set: impl Fn(u32) -> Option<WorkingSet>,
) {
    let aggr_ns = snapshot.aggr_us.saturating_mul(1000);
    let aggr_s = snapshot.aggr_us.max(1) as f64 / 1e6;
    for t in &snapshot.targets {
        let (Some(first), Some(last)) = (t.regions.first(), t.regions.last()) else {
            continue;
        };
        let ws = working_set(t.target);
        for m in layouts.covering(t.target, 0, u64::MAX) {
            let s = sums
                .entry((t.target, m.start, m.perms.clone(), m.name.clone()))
                .or_insert_with(|| {
                    *sums_bytes += size_of::<Sums>() + 96 + m.perms.len() + m.name.len();
                    Sums::default()
                });
            s.end = m.end;
            s.nr_snapshots += 1;
            s.size += m.size() as f64;
            if let Some(resident) = layouts.resident(t.target, m.start) {
                s.resident += resident as f64;
                s.resident_snapshots += 1;
            }
            if let Some(ws) = &ws {
                s.working_set += ws.bytes_within(AddrRange::new(m.start, m.end)) as f64;
            }
            if m.end <= first.start || last.end <= m.start {
                continue;
            }
            let from = t.regions.partition_point(|r| r.end <= m.start);
            for r in t.regions[from..].iter().take_while(|r| r.start < m.end) {
                let bytes = overlap((r.start, r.end), (m.start, m.end)) as f64;
                s.monitored += bytes;
                s.samples += f64::from(r.raw_samples) * bytes / r.size().max(1) as f64;
                if r.nr_accesses > 0 {
                    // The region's touched pages, shared out by size; the rest of it is
                    // accessed memory's idle part.
                    let touched = bytes * r.touched() as f64 / r.size().max(1) as f64;
                    s.hot += touched;
                    s.warm += bytes - touched;
                    s.hot_hz_bytes += touched * f64::from(r.nr_accesses) / aggr_s;
                } else if u64::from(r.age).saturating_mul(aggr_ns) < opts.cold_after_ns {
                    s.warm += bytes;
                } else {
                    s.cold += bytes;
                }
            }
        }
    }
}

/// Text: per target, one row per mapping.
pub fn render_text(report: &MappingsReport) -> String {
    let mut out = String::new();
    let used = report.nr_snapshots - report.skipped;
    let _ = writeln!(
        out,
        "# mappings: means over the {used} snapshots each existed in{}; hot: touched in the \
         window, warm: idle less than {}, cold: idle longer; ws: the working set over the last {}",
        if report.skipped > 0 {
            format!(" (the first {} skipped)", report.skipped)
        } else {
            String::new()
        },
        human::duration(report.cold_after_ns),
        human::duration(report.horizon_ns)
    );
    let sampled = report.mappings.iter().any(|m| m.samples > 0.0);
    let resident = report.mappings.iter().any(|m| m.resident_bytes.is_some());
    let mut target = None;
    for m in &report.mappings {
        if target != Some(m.target) {
            target = Some(m.target);
            let _ = writeln!(out, "# {}", report.targets[&m.target]);
            let mut head = format!("{:<29} {:>4} {:>11}", "address range", "perm", "size");
            if resident {
                head.push_str(&format!(" {:>11}", "resident"));
            }
            head.push_str(&format!(
                " {:>11} {:>11} {:>11} {:>11} {:>10}",
                "hot", "warm", "cold", "ws", "hot rate"
            ));
            if sampled {
                head.push_str(&format!(" {:>8}", "samples"));
            }
            let _ = writeln!(out, "{head}  name");
        }
        let mut row = format!(
            "{:<29} {:>4} {:>11}",
            format!("{}-{}", human::hex(m.start), human::hex(m.end)),
            m.perms,
            human::size(m.size_bytes),
        );
        if resident {
            let bytes = m.resident_bytes.map_or("-".to_string(), human::size);
            row.push_str(&format!(" {bytes:>11}"));
        }
        row.push_str(&format!(
            " {:>11} {:>11} {:>11} {:>11} {:>10}",
            human::size(m.hot_bytes),
            human::size(m.warm_bytes),
            human::size(m.cold_bytes),
            human::size(m.working_set_bytes),
            format!("{} Hz", human::number(m.hot_access_hz)),
        ));
        if sampled {
            row.push_str(&format!(" {:>8.0}", m.samples));
        }
        let _ = writeln!(
            out,
            "{row}  {}",
            human::one_line(&m.name, human::TEXT_CHARS)
        );
    }
    out
}
