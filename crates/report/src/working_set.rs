//! A record's working sets, replayed: at each snapshot, per target and horizon, the memory
//! DAMON's rule saw accessed within the horizon, estimated at page resolution from the samples
//! the record keeps, with the same code that the live monitor uses
//! ([`udamon_core::working_set`]), so that a report, `udamon serve` and the record's own
//! per-region estimates mean the same.
//!
//! What a horizon counts: memory accessed in a window that ended within it, **of the memory
//! the target has at the snapshot** (its current regions): memory unmapped within the horizon
//! counted while it was mapped and no longer does, and no mapping counts beyond the resident
//! bytes of its last walk (`resident` events). So no horizon's working set exceeds what is
//! resident.
//!
//! The code the sampled instructions were fetched from counts too, as the kernel counts it:
//! each sample names its instruction's code site, whose page is touched
//! ([`udamon_core::working_set::estimate_code`]).
//!
//! A sampled record writes each window's samples after its snapshot; [`samples_first`] moves
//! them before it, so that a report looking at a snapshot has seen its samples.

use std::collections::{BTreeMap, HashMap, VecDeque};
use udamon_core::page_samples::PageSamples;
use udamon_core::touched::Touched;
use udamon_core::working_set::{self, ResidentRange};
use udamon_core::{AddrRange, PAGE_SIZE};
use udamon_record::model::{Event, EventKind, Frame, RegionStat, TargetSnapshot};

/// How the bytes of the memory accessed within a horizon are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Basis {
    /// At page resolution from the samples' repeats (the default; sources without samples
    /// count whole regions).
    #[default]
    Pages,
    /// Every accessed region whole, as DAMON and damo count.
    Regions,
}

/// Which regions count as accessed in a window (damo's `--acc_thres` and `--sz_thres`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Membership {
    pub acc_thres: u32,
    pub sz_thres: u64,
}

impl Membership {
    pub fn selects(&self, r: &RegionStat) -> bool {
        r.nr_accesses >= self.acc_thres.max(1) && r.size() >= self.sz_thres
    }
}

impl Default for Membership {
    fn default() -> Self {
        Membership {
            acc_thres: 1,
            sz_thres: 1,
        }
    }
}

/// One target's working set over a horizon at a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkingSet {
    /// The memory accessed within the horizon (sorted, disjoint), with each piece's estimate
    /// in pages.
    pub cells: Vec<(AddrRange, Touched)>,
    /// The estimate in pages, summed over the cells.
    pub total: Touched,
    /// The part of `total` that is code the sampled instructions were fetched from (none when
    /// whole regions are counted, as damo counts only the regions).
    pub code: Touched,
}

/// The most code sites a replay remembers; a record numbers its sites so that no more are in
/// use at once (serve's rotation and `record` keep far fewer).
const MAX_SITES: usize = 1 << 17;

impl WorkingSet {
    pub fn bytes(&self) -> u64 {
        to_bytes(self.total.pages)
    }

    pub fn low_bytes(&self) -> u64 {
        to_bytes(self.total.low)
    }

    pub fn high_bytes(&self) -> u64 {
        to_bytes(self.total.high)
    }

    pub fn code_bytes(&self) -> u64 {
        to_bytes(self.code.pages)
    }

    /// The estimate's bytes within `range` (a mapping, say): each cell's share by its overlap.
    pub fn bytes_within(&self, range: AddrRange) -> u64 {
        let pages: f64 = self
            .cells
            .iter()
            .map(|(c, t)| {
                let overlap = c
                    .end
                    .min(range.end)
                    .saturating_sub(c.start.max(range.start));
                t.pages * overlap as f64 / c.size().max(1) as f64
            })
            .sum();
        to_bytes(pages)
    }
}

pub fn to_bytes(pages: f64) -> u64 {
    (pages * PAGE_SIZE as f64).round() as u64
}

/// One window's accessed memory.
#[derive(Debug)]
struct Window {
    /// Its place in the order windows came in, over all targets.
    seq: u64,
    end_ns: u64,
    accessed: Vec<AddrRange>,
}

/// The most accessed ranges a replay keeps in its windows, over all targets (32 MiB): beyond
/// them the oldest windows are forgotten first, so a record's claims cannot take its reader's
/// memory (a window may hold 2^18 regions, a horizon hundreds of windows), and a horizon that
/// reached back before them counts fewer windows.
const MAX_KEPT_RANGES: usize = 1 << 21;

/// One target's replayed state.
#[derive(Debug, Default)]
struct TargetReplay {
    /// The windows within the longest horizon asked for, oldest first.
    windows: VecDeque<Window>,
    /// The latest snapshot's regions: the memory the target has.
    current: Vec<AddrRange>,
    /// Its end.
    now_ns: u64,
    pages: PageSamples,
    /// The sampled instructions' pages.
    code: PageSamples,
    resident: Vec<ResidentRange>,
    resident_total: Option<u64>,
}

/// The working sets of a record's targets, as its frames go by.
#[derive(Debug)]
pub struct Replay {
    targets: BTreeMap<u32, TargetReplay>,
    /// The record's code sites, by index: their instructions' addresses.
    sites: HashMap<u32, u64>,
    /// Windows are kept for this long.
    longest_ns: u64,
    membership: Membership,
    basis: Basis,
    /// Every target's kept windows in the order they came: (seq, target).
    order: VecDeque<(u64, u32)>,
    next_seq: u64,
    /// The accessed ranges in all kept windows.
    kept_ranges: usize,
}

impl Replay {
    /// A replay that can answer horizons up to `longest_ns`.
    pub fn new(longest_ns: u64, membership: Membership, basis: Basis) -> Replay {
        Replay {
            targets: BTreeMap::new(),
            sites: HashMap::new(),
            longest_ns,
            membership,
            basis,
            order: VecDeque::new(),
            next_seq: 0,
            kept_ranges: 0,
        }
    }

    /// Takes in one frame (in [`samples_first`] order).
    pub fn observe(&mut self, frame: &Frame) {
        match frame {
            Frame::Snapshot(s) => {
                for t in &s.targets {
                    self.observe_window(s.end_ns, t);
                }
            }
            Frame::Event(Event { time_ns, kind }) => match kind {
                EventKind::Samples {
                    target,
                    sites,
                    samples,
                    ..
                } => {
                    if self.sites.len() + sites.len() > MAX_SITES {
                        self.sites.clear();
                    }
                    self.sites.extend(sites.iter().map(|s| (s.index, s.ip)));
                    let t = self.targets.entry(*target).or_default();
                    t.pages.add(time_ns / 1000, samples.iter().map(|s| s.addr));
                    let ips = samples.iter().filter_map(|s| self.sites.get(&s.site));
                    t.code.add(time_ns / 1000, ips.copied());
                }
                EventKind::Resident { target, mappings } => {
                    self.targets.entry(*target).or_default().resident = mappings
                        .iter()
                        .filter(|m| m.start < m.end)
                        .map(|m| ResidentRange {
                            range: AddrRange::new(m.start, m.end),
                            resident_bytes: m.resident_bytes,
                        })
                        .collect();
                }
                EventKind::TargetMemory {
                    target,
                    resident_bytes,
                    ..
                } => {
                    self.targets.entry(*target).or_default().resident_total = Some(*resident_bytes);
                }
                // A new address space: the old one's samples say nothing of it.
                EventKind::Exec { target, .. } => {
                    if let Some(t) = self.targets.get_mut(target) {
                        t.pages.clear();
                        t.code.clear();
                        t.resident.clear();
                    }
                }
                _ => {}
            },
        }
    }

    fn observe_window(&mut self, end_ns: u64, snapshot: &TargetSnapshot) {
        let t = self.targets.entry(snapshot.target).or_default();
        t.now_ns = end_ns;
        t.current.clear();
        t.current.extend(
            snapshot
                .regions
                .iter()
                .map(|r| AddrRange::new(r.start, r.end)),
        );
        let accessed: Vec<AddrRange> = snapshot
            .regions
            .iter()
            .filter(|r| self.membership.selects(r))
            .map(|r| AddrRange::new(r.start, r.end))
            .collect();
        self.kept_ranges += accessed.len();
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back((seq, snapshot.target));
        t.windows.push_back(Window {
            seq,
            end_ns,
            accessed,
        });
        while t
            .windows
            .front()
            .is_some_and(|w| w.end_ns + self.longest_ns < end_ns)
        {
            let gone = t.windows.pop_front().expect("a front window");
            self.kept_ranges -= gone.accessed.len();
        }
        self.forget_beyond_the_bound();
        let t = self.targets.get_mut(&snapshot.target).expect("added above");
        t.pages.settle(end_ns / 1000);
        t.code.settle(end_ns / 1000);
    }

    /// Forgets the oldest windows, of any target, while the kept ones hold more than
    /// [`MAX_KEPT_RANGES`] ranges; the newest window always stays.
    fn forget_beyond_the_bound(&mut self) {
        while self.kept_ranges > MAX_KEPT_RANGES && self.order.len() > 1 {
            let Some((seq, target)) = self.order.pop_front() else {
                break;
            };
            let Some(t) = self.targets.get_mut(&target) else {
                continue;
            };
            // Gone already where the horizon moved past it.
            if t.windows.front().is_some_and(|w| w.seq == seq) {
                let gone = t.windows.pop_front().expect("a front window");
                self.kept_ranges -= gone.accessed.len();
            }
        }
        // Windows forgotten by the horizon leave their entries; drop them as they surface.
        while let Some(&(seq, target)) = self.order.front() {
            let kept = self
                .targets
                .get(&target)
                .and_then(|t| t.windows.front())
                .is_some_and(|w| w.seq <= seq);
            if kept {
                break;
            }
            self.order.pop_front();
        }
    }

    /// Target `target`'s working set over the `horizon_ns` before its latest snapshot (0: that
    /// snapshot's own window, `window_ns` long); `None` before its first snapshot.
    pub fn working_set(&self, target: u32, horizon_ns: u64, window_ns: u64) -> Option<WorkingSet> {
        let t = self.targets.get(&target)?;
        let windows = t
            .windows
            .iter()
            .filter(|w| within(w.end_ns, t.now_ns, horizon_ns));
        let accessed = union(windows.flat_map(|w| w.accessed.iter().copied()));
        let cells = intersect(&accessed, &t.current);
        let horizon_us = horizon_ns.max(window_ns) / 1000;
        let mut estimates = match self.basis {
            Basis::Pages => working_set::estimate_cells(
                &t.pages,
                &cells,
                t.now_ns / 1000,
                horizon_us,
                &t.resident,
            ),
            Basis::Regions => {
                let mut whole: Vec<Touched> = cells
                    .iter()
                    .map(|c| Touched::whole(c.size() as f64 / PAGE_SIZE as f64))
                    .collect();
                working_set::bound_by_resident(&cells, &mut whole, &t.resident);
                whole
            }
        };
        if let Some(total) = t.resident_total {
            working_set::bound_total(&mut estimates, total);
        }
        let mut cells: Vec<(AddrRange, Touched)> = cells.into_iter().zip(estimates).collect();
        let mut code = Touched::default();
        if self.basis == Basis::Pages {
            let code_cells =
                working_set::estimate_code(&t.code, t.now_ns / 1000, horizon_us, &t.resident);
            code = Touched::sum(code_cells.iter().map(|c| c.1));
            cells.extend(code_cells);
            cells.sort_by_key(|c| c.0);
        }
        let total = Touched::sum(cells.iter().map(|c| c.1));
        Some(WorkingSet { cells, total, code })
    }
}

/// Whether a window that ended at `window_end_ns` counts at a snapshot ending at `end_ns` over
/// a horizon of `horizon_ns` (its own window always does).
pub fn within(window_end_ns: u64, end_ns: u64, horizon_ns: u64) -> bool {
    window_end_ns + horizon_ns > end_ns || window_end_ns == end_ns
}

/// The union of address ranges, as sorted, disjoint ranges.
pub fn union(ranges: impl Iterator<Item = AddrRange>) -> Vec<AddrRange> {
    let mut all: Vec<AddrRange> = ranges.filter(|r| r.start < r.end).collect();
    all.sort_unstable();
    let mut out: Vec<AddrRange> = Vec::with_capacity(all.len());
    for r in all {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The pieces of `a` inside `b` (both sorted and disjoint), split at `b`'s boundaries, so
/// that each piece lies in one of `b`'s ranges.
fn intersect(a: &[AddrRange], b: &[AddrRange]) -> Vec<AddrRange> {
    let mut out = Vec::new();
    let mut j = 0;
    for r in a {
        while j < b.len() && b[j].end <= r.start {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].start < r.end {
            let piece = AddrRange::new(r.start.max(b[k].start), r.end.min(b[k].end));
            if piece.start < piece.end {
                out.push(piece);
            }
            k += 1;
        }
    }
    out
}

/// `frames` with each window's samples (and call stacks) before its snapshot instead of after
/// it, as a record writes them: one snapshot is held back at a time, with the other events
/// that follow it.
pub fn samples_first(frames: impl IntoIterator<Item = Frame>) -> impl Iterator<Item = Frame> {
    let mut frames = frames.into_iter();
    let mut order = SamplesFirst::default();
    let mut ready = VecDeque::new();
    std::iter::from_fn(move || {
        loop {
            if let Some(f) = ready.pop_front() {
                return Some(f);
            }
            match frames.next() {
                Some(frame) => order.push(frame, &mut ready),
                None => {
                    order.finish(&mut ready);
                    return ready.pop_front();
                }
            }
        }
    })
}

/// [`samples_first`] for frames that come one at a time (a live view): each frame pushed
/// releases those now in order.
///
/// A window's samples may come after other events of its end (the source's statistics, a
/// page-table walk: whatever the source logged at the same step before the samples), so a
/// snapshot is held until a frame that is past its window comes: the next snapshot, a later
/// event, or the end of monitoring. The events of its end keep their place after it; only
/// the samples move.
#[derive(Debug, Default)]
pub struct SamplesFirst {
    held: Option<Frame>,
    /// The events after the held snapshot that are not its window's samples, in order.
    after: Vec<Frame>,
}

impl SamplesFirst {
    /// Takes in the record's next frame; the frames it releases go to `ready`.
    pub fn push(&mut self, frame: Frame, ready: &mut VecDeque<Frame>) {
        let Some(Frame::Snapshot(held)) = &self.held else {
            match frame {
                Frame::Snapshot(_) => self.held = Some(frame),
                other => ready.push_back(other),
            }
            return;
        };
        let end_ns = held.end_ns;
        match &frame {
            Frame::Event(Event { time_ns, kind }) if *time_ns <= end_ns => match kind {
                EventKind::Samples { .. } | EventKind::Stacks { .. } => ready.push_back(frame),
                EventKind::Stopped { .. } => {
                    self.after.push(frame);
                    self.finish(ready);
                }
                _ => self.after.push(frame),
            },
            _ => {
                self.finish(ready);
                self.push(frame, ready);
            }
        }
    }

    /// Releases the snapshot held back, and the events after it: the record has ended.
    pub fn finish(&mut self, ready: &mut VecDeque<Frame>) {
        ready.extend(self.held.take());
        ready.extend(self.after.drain(..));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_record::model::{SampleAccess, SampleFact, Snapshot};

    const P: u64 = PAGE_SIZE;

    fn snapshot(end_ns: u64, regions: &[(u64, u64, u32)]) -> Frame {
        Frame::Snapshot(Snapshot {
            start_ns: end_ns - 400_000_000,
            end_ns,
            sample_us: 5000,
            aggr_us: 400_000,
            targets: vec![TargetSnapshot {
                target: 0,
                regions: regions
                    .iter()
                    .map(|&(start, end, nr)| RegionStat {
                        start,
                        end,
                        nr_accesses: nr,
                        age: 0,
                        raw_samples: nr,
                        read_samples: 0,
                        write_samples: 0,
                        touched_bytes: None,
                    })
                    .collect(),
            }],
        })
    }

    fn samples(time_ns: u64, addrs: &[u64]) -> Frame {
        Frame::Event(Event {
            time_ns,
            kind: EventKind::Samples {
                target: 0,
                window_ns: 400_000_000,
                sites: vec![],
                samples: addrs
                    .iter()
                    .map(|&addr| SampleFact {
                        addr,
                        site: 0,
                        tid: 0,
                        cpu: 0,
                        access: SampleAccess::Read,
                    })
                    .collect(),
            },
        })
    }

    #[test]
    fn samples_move_before_their_snapshot_and_nothing_else_moves() {
        let frames = vec![
            snapshot(400_000_000, &[]),
            samples(400_000_000, &[1]),
            snapshot(800_000_000, &[]),
            samples(800_000_000, &[2]),
            samples(900_000_000, &[3]),
        ];
        assert_eq!(
            names(samples_first(frames)),
            [
                "samples 400",
                "snapshot 400",
                "samples 800",
                "snapshot 800",
                "samples 900"
            ]
        );
    }

    fn stats(time_ns: u64) -> Frame {
        Frame::Event(Event {
            time_ns,
            kind: EventKind::SourceStats {
                counters: BTreeMap::new(),
            },
        })
    }

    fn names(frames: impl IntoIterator<Item = Frame>) -> Vec<String> {
        frames
            .into_iter()
            .map(|f| match f {
                Frame::Snapshot(s) => format!("snapshot {}", s.end_ns / 1_000_000),
                Frame::Event(Event {
                    time_ns,
                    kind: EventKind::Samples { .. },
                }) => format!("samples {}", time_ns / 1_000_000),
                Frame::Event(e) => format!("event {}", e.time_ns / 1_000_000),
            })
            .collect()
    }

    #[test]
    fn samples_after_other_events_still_move_before_their_snapshot() {
        // As a source writes every few windows: its statistics logged before the samples of
        // the window just closed. The statistics keep their place after the snapshot.
        let frames = vec![
            snapshot(400_000_000, &[]),
            stats(400_000_000),
            samples(400_000_000, &[1]),
            snapshot(800_000_000, &[]),
            samples(800_000_000, &[2]),
            stats(900_000_000),
        ];
        assert_eq!(
            names(samples_first(frames)),
            [
                "samples 400",
                "snapshot 400",
                "event 400",
                "samples 800",
                "snapshot 800",
                "event 900"
            ]
        );
    }

    #[test]
    fn a_window_with_samples_never_reads_zero() {
        // Every window of a busy program has samples on one page; every fifth one has the
        // source's statistics before them.
        let mut frames = Vec::new();
        for w in 1..=20u64 {
            let end = w * 400_000_000;
            frames.push(snapshot(end, &[(0, 16 * P, 20)]));
            if w % 5 == 0 {
                frames.push(stats(end));
            }
            frames.push(samples(end, &[8 * P; 20]));
        }
        let mut r = Replay::new(10_000_000_000, Membership::default(), Basis::Pages);
        let mut windows = Vec::new();
        for f in samples_first(frames) {
            r.observe(&f);
            if let Frame::Snapshot(s) = &f {
                let ws = r.working_set(0, 0, 400_000_000).unwrap();
                windows.push((s.end_ns / 1_000_000, ws.bytes()));
            }
        }
        assert_eq!(windows.len(), 20);
        assert!(windows.iter().all(|w| w.1 > 0), "{windows:?}");
    }

    #[test]
    fn memory_no_longer_mapped_leaves_the_horizon() {
        // A 1 MiB region accessed, then unmapped (the next snapshots no longer have it) while
        // another is accessed: the 10 s horizon holds only what is still there.
        let mut r = Replay::new(10_000_000_000, Membership::default(), Basis::Regions);
        r.observe(&snapshot(
            400_000_000,
            &[(0, 256 * P, 1), (256 * P, 512 * P, 0)],
        ));
        r.observe(&snapshot(800_000_000, &[(256 * P, 512 * P, 1)]));
        let ws = r.working_set(0, 10_000_000_000, 400_000_000).unwrap();
        assert_eq!(ws.bytes(), 256 * P);
        let window = r.working_set(0, 0, 400_000_000).unwrap();
        assert_eq!(window.bytes(), 256 * P);
    }

    #[test]
    fn no_mapping_counts_beyond_its_resident_bytes() {
        let mut r = Replay::new(10_000_000_000, Membership::default(), Basis::Regions);
        r.observe(&Frame::Event(Event {
            time_ns: 0,
            kind: EventKind::Resident {
                target: 0,
                mappings: vec![udamon_record::model::MappingResident {
                    start: 0,
                    end: 2048 * P,
                    resident_bytes: 2 * P,
                }],
            },
        }));
        r.observe(&snapshot(400_000_000, &[(0, 2048 * P, 3)]));
        let ws = r.working_set(0, 0, 400_000_000).unwrap();
        assert_eq!(ws.bytes(), 2 * P);
    }

    #[test]
    fn the_code_of_the_sampled_instructions_counts_with_the_data() {
        // Samples at one data page, their instructions on two pages of a text mapping.
        let mut r = Replay::new(10_000_000_000, Membership::default(), Basis::Pages);
        r.observe(&Frame::Event(Event {
            time_ns: 0,
            kind: EventKind::Resident {
                target: 0,
                mappings: vec![udamon_record::model::MappingResident {
                    start: 1000 * P,
                    end: 1100 * P,
                    resident_bytes: 100 * P,
                }],
            },
        }));
        for w in 1..=25u64 {
            let end = w * 400_000_000;
            let mut frame = samples(end, &[8; 20]);
            if let Frame::Event(Event {
                kind: EventKind::Samples { sites, samples, .. },
                ..
            }) = &mut frame
            {
                if w == 1 {
                    *sites = [0u32, 1]
                        .iter()
                        .map(|&i| udamon_record::model::CodeSite {
                            index: i,
                            ip: (1000 + u64::from(i)) * P + 16,
                            function: None,
                            object: None,
                            missing: None,
                        })
                        .collect();
                }
                for (k, s) in samples.iter_mut().enumerate() {
                    s.site = (k % 2) as u32;
                }
            }
            for f in samples_first([snapshot(end, &[(0, 16 * P, 20)]), frame]) {
                r.observe(&f);
            }
        }
        let ws = r.working_set(0, 10_000_000_000, 400_000_000).unwrap();
        let code = ws.bytes_within(AddrRange::new(1000 * P, 1100 * P));
        assert_eq!(code, 2 * P, "{ws:?}");
        assert_eq!(ws.bytes(), 3 * P, "one data page and two of code: {ws:?}");
    }

    #[test]
    fn sparse_samples_estimate_below_the_region_and_whole_regions_do_not() {
        // 4,000 pages of a 40,000-page region, 1,000 samples over 10 s.
        let mut rng = udamon_core::Prng::seeded(5);
        let hot: Vec<u64> = (0..4000).map(|_| rng.in_range(0, 40_000)).collect();
        let mut frames = Vec::new();
        for w in 1..=25u64 {
            let end = w * 400_000_000;
            let addrs: Vec<u64> = (0..40)
                .map(|_| hot[rng.in_range(0, 4000) as usize] * P)
                .collect();
            frames.push(snapshot(end, &[(0, 40_000 * P, 20)]));
            frames.push(samples(end, &addrs));
        }
        let mut pages = Replay::new(60_000_000_000, Membership::default(), Basis::Pages);
        let mut whole = Replay::new(60_000_000_000, Membership::default(), Basis::Regions);
        for f in samples_first(frames) {
            pages.observe(&f);
            whole.observe(&f);
        }
        let est = pages.working_set(0, 10_000_000_000, 400_000_000).unwrap();
        let distinct = {
            let mut d = hot.clone();
            d.sort_unstable();
            d.dedup();
            d.len() as f64
        };
        assert!(
            (est.total.pages / distinct - 1.0).abs() < 0.3,
            "{:?} for {distinct}",
            est.total
        );
        assert_eq!(
            whole
                .working_set(0, 10_000_000_000, 400_000_000)
                .unwrap()
                .bytes(),
            40_000 * P
        );
    }
}
