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
use udamon_core::AddrRange;
use udamon_core::access_history::AccessHistory;
pub use udamon_core::access_history::{union, within};
use udamon_core::page_samples::PageSamples;
use udamon_core::working_set::{self, Evidence, ResidentRange};
pub use udamon_core::working_set::{AddressSpace, Basis, WorkingSet, to_bytes};
use udamon_record::model::{Event, EventKind, Frame, RegionStat, TargetSnapshot};

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

/// The most code sites a replay remembers; a record numbers its sites so that no more are in
/// use at once (serve's rotation and `record` keep far fewer).
const MAX_SITES: usize = 1 << 17;

/// The most accessed ranges a replay keeps in its windows, over all targets (32 MiB): beyond
/// them the oldest windows are forgotten first, so a record's claims cannot take its reader's
/// memory (a window may hold 2^18 regions, a horizon hundreds of windows), and a horizon that
/// reached back before them counts fewer windows.
const MAX_KEPT_RANGES: usize = 1 << 21;

/// One target's replayed state.
#[derive(Debug)]
struct TargetReplay {
    history: AccessHistory,
    pages: PageSamples,
    /// The sampled instructions' pages.
    code: PageSamples,
    resident: Vec<ResidentRange>,
    resident_total: Option<u64>,
    /// Where the executable mappings of the last `mappings` event start (sorted): the
    /// `resident` events do not say which mappings hold code.
    executable: Vec<u64>,
}

impl TargetReplay {
    fn new() -> TargetReplay {
        TargetReplay {
            history: AccessHistory::new(working_set::LONGEST_US, MAX_KEPT_RANGES),
            pages: PageSamples::default(),
            code: PageSamples::default(),
            resident: Vec::new(),
            resident_total: None,
            executable: Vec::new(),
        }
    }

    /// Marks the resident mappings that hold code, by the last `mappings` event.
    fn mark_executable(&mut self) {
        for m in &mut self.resident {
            m.executable = self.executable.binary_search(&m.range.start).is_ok();
        }
    }
}

/// The working sets of a record's targets, as its frames go by.
#[derive(Debug)]
pub struct Replay {
    targets: BTreeMap<u32, TargetReplay>,
    /// The record's code sites, by index: their instructions' addresses.
    sites: HashMap<u32, u64>,
    membership: Membership,
    basis: Basis,
    space: AddressSpace,
    /// Windows that accessed anything, of every target, in the order they came: (end, target).
    order: VecDeque<(u64, u32)>,
    /// The accessed ranges kept, over all targets.
    kept_ranges: usize,
}

impl Replay {
    /// A replay of a process's record (see [`Replay::of_space`] for the host's). Every
    /// horizon up to a minute can be asked: the working sets of every horizon are taken
    /// together ([`working_set::working_sets`]).
    pub fn new(membership: Membership, basis: Basis) -> Replay {
        Replay {
            targets: BTreeMap::new(),
            sites: HashMap::new(),
            membership,
            basis,
            space: AddressSpace::Virtual,
            order: VecDeque::new(),
            kept_ranges: 0,
        }
    }

    /// The same, for a record whose addresses are `space`'s (`record --host`'s are physical:
    /// [`AddressSpace::of_source`]).
    pub fn of_space(self, space: AddressSpace) -> Replay {
        Replay { space, ..self }
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
                    let ips: Vec<u64> = samples
                        .iter()
                        .filter_map(|s| self.sites.get(&s.site))
                        .copied()
                        .collect();
                    let t = self.target(*target);
                    t.pages.add(time_ns / 1000, samples.iter().map(|s| s.addr));
                    t.code.add(time_ns / 1000, ips);
                }
                EventKind::Resident { target, mappings } => {
                    let t = self.target(*target);
                    t.resident = mappings
                        .iter()
                        .filter(|m| m.start < m.end)
                        .map(|m| ResidentRange {
                            range: AddrRange::new(m.start, m.end),
                            resident_bytes: m.resident_bytes,
                            executable: false,
                        })
                        .collect();
                    t.mark_executable();
                }
                EventKind::Mappings { target, mappings } => {
                    let t = self.target(*target);
                    t.executable = mappings
                        .iter()
                        .filter(|m| m.perms.contains('x'))
                        .map(|m| m.start)
                        .collect();
                    t.executable.sort_unstable();
                    t.mark_executable();
                }
                EventKind::TargetMemory {
                    target,
                    resident_bytes,
                    ..
                } => {
                    self.target(*target).resident_total = Some(*resident_bytes);
                }
                // A new address space: the old one's samples say nothing of it.
                EventKind::Exec { target, .. } => {
                    if let Some(t) = self.targets.get_mut(target) {
                        self.kept_ranges -= t.history.kept_ranges();
                        t.history.clear();
                        t.pages.clear();
                        t.code.clear();
                        t.resident.clear();
                        t.executable.clear();
                    }
                }
                _ => {}
            },
        }
    }

    fn target(&mut self, target: u32) -> &mut TargetReplay {
        self.targets.entry(target).or_insert_with(TargetReplay::new)
    }

    fn observe_window(&mut self, end_ns: u64, snapshot: &TargetSnapshot) {
        let membership = self.membership;
        let t = self.target(snapshot.target);
        let before = t.history.kept_ranges();
        let marked = |r: &RegionStat| (AddrRange::new(r.start, r.end), membership.selects(r));
        let end_us = end_ns / 1000;
        t.history.push(end_us, snapshot.regions.iter().map(marked));
        t.pages.settle(end_us);
        t.code.settle(end_us);
        let after = t.history.kept_ranges();
        let pushed = after > 0 && snapshot.regions.iter().any(|r| membership.selects(r));
        if pushed {
            self.order.push_back((end_us, snapshot.target));
        }
        self.kept_ranges = self.kept_ranges + after - before;
        self.forget_beyond_the_bound();
    }

    /// Forgets the oldest windows, of any target, while the kept ones hold more than
    /// [`MAX_KEPT_RANGES`] ranges; each target's newest window stays.
    fn forget_beyond_the_bound(&mut self) {
        while self.kept_ranges > MAX_KEPT_RANGES {
            let Some((end_us, target)) = self.order.pop_front() else {
                break;
            };
            // Gone already where the horizon moved past it.
            if let Some(t) = self.targets.get_mut(&target)
                && t.history.oldest_end_us() == Some(end_us)
            {
                self.kept_ranges -= t.history.forget_oldest();
            }
        }
    }

    /// Target `target`'s working set over the `horizon_ns` before its latest snapshot (0: that
    /// snapshot's own window, `window_ns` long); `None` before its first snapshot.
    pub fn working_set(&self, target: u32, horizon_ns: u64, window_ns: u64) -> Option<WorkingSet> {
        self.working_sets(target, &[horizon_ns], window_ns)
            .and_then(|mut w| w.pop())
    }

    /// [`Replay::working_set`] over several horizons at once, in the order asked.
    pub fn working_sets(
        &self,
        target: u32,
        horizons_ns: &[u64],
        window_ns: u64,
    ) -> Option<Vec<WorkingSet>> {
        let t = self.targets.get(&target)?;
        let now_us = t.history.now_us()?;
        let evidence = Evidence {
            history: &t.history,
            data: &t.pages,
            code: &t.code,
            resident: &t.resident,
            resident_total: t.resident_total,
            walked_total: working_set::walked_total(&t.resident),
            window_us: window_ns / 1000,
            space: self.space,
            basis: self.basis,
        };
        let horizons_us: Vec<u64> = horizons_ns.iter().map(|h| h / 1000).collect();
        Some(working_set::working_sets(&evidence, now_us, &horizons_us))
    }
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
    use udamon_core::PAGE_SIZE;
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
        let mut r = Replay::new(Membership::default(), Basis::Pages);
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
        let mut r = Replay::new(Membership::default(), Basis::Regions);
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
        let mut r = Replay::new(Membership::default(), Basis::Regions);
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
        let mut r = Replay::new(Membership::default(), Basis::Pages);
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
    fn a_library_no_instruction_was_sampled_in_bounds_the_interval_by_its_text() {
        // Samples at one data page; a library's text of 50 resident pages beside it, which the
        // `mappings` event says is executable, and a data mapping that is not.
        let mapping = |start: u64, end: u64, perms: &str| udamon_record::model::MappingRecord {
            start,
            end,
            perms: perms.to_string(),
            offset: 0,
            name: "lib".to_string(),
        };
        let resident = |start: u64, end: u64, pages: u64| udamon_record::model::MappingResident {
            start,
            end,
            resident_bytes: pages * P,
        };
        let mut r = Replay::new(Membership::default(), Basis::Pages);
        r.observe(&Frame::Event(Event {
            time_ns: 0,
            kind: EventKind::Resident {
                target: 0,
                mappings: vec![resident(0, 16 * P, 16), resident(2000 * P, 2100 * P, 50)],
            },
        }));
        r.observe(&Frame::Event(Event {
            time_ns: 0,
            kind: EventKind::Mappings {
                target: 0,
                mappings: vec![
                    mapping(0, 16 * P, "rw-p"),
                    mapping(2000 * P, 2100 * P, "r-xp"),
                ],
            },
        }));
        for w in 1..=25u64 {
            let end = w * 400_000_000;
            for f in samples_first([snapshot(end, &[(0, 16 * P, 20)]), samples(end, &[8; 20])]) {
                r.observe(&f);
            }
        }
        let ws = r.working_set(0, 10_000_000_000, 400_000_000).unwrap();
        assert_eq!(ws.bytes(), P, "the count is the data page's: {ws:?}");
        assert!(ws.high_bytes() >= 51 * P, "{ws:?}");
        assert!(!ws.total.is_settled(), "{ws:?}");
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
        let mut pages = Replay::new(Membership::default(), Basis::Pages);
        let mut whole = Replay::new(Membership::default(), Basis::Regions);
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
