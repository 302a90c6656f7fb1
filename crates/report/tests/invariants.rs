//! The working set's invariants, as properties of random records of sampled sources (issue
//! 27's item 2): in every view it grows with the horizon, never exceeds the resident bytes of
//! what it counts, splits by mapping into rows that add up to `report wss`'s figure, and never
//! reads 0 for a window with samples in it.
//!
//! Each record has one or two targets whose layouts move as real programs' do: a heap growing
//! upwards, an anonymous mapping growing downwards (CPython's arenas), a library's code, a file
//! mapped for a while and unmapped; its windows have random regions over the mappings, samples
//! on a hot subset of each accessed region's pages, the source's statistics before the samples
//! every fifth window (as `record` writes them), and page-table walks and resident sizes now
//! and then.

mod common;

use common::*;
use udamon_core::Prng;
use udamon_record::model::{
    EventKind, Frame, MappingRecord, MappingResident, SampleAccess, SampleFact,
};
use udamon_report::dist::{DistOptions, DistReport, SortBy};
use udamon_report::footprints::footprints;
use udamon_report::horizon::Horizon;
use udamon_report::mappings::{MappingsOptions, MappingsReport, mappings};
use udamon_report::working_set::{Basis, Membership, Replay, samples_first};
use udamon_report::wss::{WssFilter, wss};

const PAGE: u64 = 4096;
const NR_WINDOWS: u64 = 150;
const SEEDS: u64 = 12;
/// The horizons every property is checked at, shortest first.
const HORIZONS: [Horizon; 4] = [
    Horizon::WINDOW,
    Horizon::seconds(1),
    Horizon::seconds(10),
    Horizon::seconds(60),
];

/// One target's mappings at window `w`: a heap, an anonymous mapping growing down, a library's
/// code and (in the middle of the record) a file.
fn layout(target: u32, w: u64) -> Vec<MappingRecord> {
    let base = 0x5500_0000_0000 + u64::from(target) * 0x100_0000_0000;
    let m = |start: u64, end: u64, perms: &str, name: &str| MappingRecord {
        start,
        end,
        perms: perms.into(),
        offset: 0,
        name: name.into(),
    };
    let heap_pages = 64 + 16 * (w / 10);
    let arena_end = base + 0x10_0000_0000;
    let arena_pages = 256 + 64 * (w / 15);
    let mut list = vec![
        m(base, base + heap_pages * PAGE, "rw-p", "[heap]"),
        m(arena_end - arena_pages * PAGE, arena_end, "rw-p", "[anon]"),
        m(
            arena_end + 0x1000_0000,
            arena_end + 0x1000_0000 + 128 * PAGE,
            "r-xp",
            "/usr/lib/libx.so",
        ),
    ];
    if (40..110).contains(&w) {
        let file = arena_end + 0x2000_0000;
        list.push(m(file, file + 512 * PAGE, "r--s", "/data/table"));
    }
    list
}

/// A random record of `nr_targets` targets, as a sampled source's `record` writes it.
fn record(seed: u64, nr_targets: u32) -> Vec<Frame> {
    let mut rng = Prng::seeded(seed);
    let mut frames = Vec::new();
    let mut last: Vec<Vec<MappingRecord>> = vec![Vec::new(); nr_targets as usize];
    for w in 0..NR_WINDOWS {
        let (start_ns, end_ns) = (w * AGGR_NS, (w + 1) * AGGR_NS);
        let mut targets = Vec::new();
        let mut samples = Vec::new();
        for t in 0..nr_targets {
            let list = layout(t, w);
            if list != last[t as usize] {
                frames.push(event(
                    start_ns,
                    EventKind::Mappings {
                        target: t,
                        mappings: list.clone(),
                    },
                ));
                last[t as usize] = list.clone();
            }
            if w % 25 == 3 {
                // A walk: each mapping part resident.
                let walked: Vec<MappingResident> = list
                    .iter()
                    .map(|m| MappingResident {
                        start: m.start,
                        end: m.end,
                        resident_bytes: rng.in_range(m.size() / PAGE / 4, m.size() / PAGE + 1)
                            * PAGE,
                    })
                    .collect();
                let total = walked.iter().map(|m| m.resident_bytes).sum();
                frames.push(event(
                    start_ns,
                    EventKind::Resident {
                        target: t,
                        mappings: walked,
                    },
                ));
                frames.push(event(
                    start_ns,
                    EventKind::TargetMemory {
                        target: t,
                        resident_bytes: total,
                        paged_out_bytes: 0,
                        refaulted_bytes: 0,
                    },
                ));
            }
            let mut regions = Vec::new();
            let mut addrs = Vec::new();
            for m in &list {
                let pages = m.size() / PAGE;
                let cut = m.start + rng.in_range(1, pages) * PAGE;
                for (s, e) in [(m.start, cut), (cut, m.end)] {
                    let mut r = region(s, e, 0);
                    r.age = rng.in_range(0, 30) as u32;
                    if rng.unit() < 0.5 {
                        // Accessed: samples on a hot tenth of its pages.
                        let n = rng.in_range(1, 40);
                        let hot = ((e - s) / PAGE / 10).max(1);
                        for _ in 0..n {
                            addrs.push(s + rng.in_range(0, hot) * PAGE + 8);
                        }
                        r.nr_accesses = rng.in_range(1, 21) as u32;
                        r.raw_samples = n as u32;
                        r.age = 0;
                    }
                    regions.push(r);
                }
            }
            targets.push((t, regions));
            samples.push((t, addrs));
        }
        frames.push(Frame::Snapshot(snapshot(w, targets)));
        if w % 5 == 4 {
            frames.push(event(
                end_ns,
                EventKind::SourceStats {
                    counters: [("samples".to_string(), w)].into(),
                },
            ));
        }
        for (t, addrs) in samples {
            frames.push(event(
                end_ns,
                EventKind::Samples {
                    target: t,
                    window_ns: end_ns - start_ns,
                    sites: vec![],
                    samples: addrs
                        .into_iter()
                        .map(|addr| SampleFact {
                            addr,
                            site: 0,
                            tid: 0,
                            cpu: 0,
                            access: SampleAccess::Read,
                        })
                        .collect(),
                },
            ));
        }
    }
    frames
}

/// Every snapshot, in time order, each target apart.
fn over_time(skip: usize) -> DistOptions {
    DistOptions {
        skip,
        sort_by: SortBy::Time,
        per_target: true,
        ..DistOptions::default()
    }
}

fn wss_at(frames: &[Frame], nr_targets: u32, horizon: Horizon, skip: usize) -> DistReport {
    let filter = WssFilter {
        horizon,
        ..WssFilter::default()
    };
    wss(
        &header(nr_targets as usize),
        reading(frames.to_vec()),
        &filter,
        &over_time(skip),
    )
    .unwrap()
}

fn mappings_at(frames: &[Frame], nr_targets: u32, horizon: Horizon, skip: usize) -> MappingsReport {
    let opts = MappingsOptions {
        horizon,
        skip,
        ..MappingsOptions::default()
    };
    mappings(
        &header(nr_targets as usize),
        reading(frames.to_vec()),
        &opts,
    )
    .unwrap()
}

/// The records of every seed, with their number of targets.
fn records() -> impl Iterator<Item = (u64, u32, Vec<Frame>)> {
    (0..SEEDS).map(|seed| {
        let nr_targets = 1 + (seed % 2) as u32;
        (seed, nr_targets, record(seed, nr_targets))
    })
}

#[test]
fn a_window_with_samples_never_reads_zero() {
    for (seed, nr_targets, frames) in records() {
        // (target, end) of the windows with samples: all of them in accessed regions.
        let sampled: std::collections::BTreeSet<(u32, u64)> = frames
            .iter()
            .filter_map(|f| match f {
                Frame::Event(e) => match &e.kind {
                    EventKind::Samples {
                        target, samples, ..
                    } if !samples.is_empty() => Some((*target, e.time_ns)),
                    _ => None,
                },
                Frame::Snapshot(_) => None,
            })
            .collect();
        let report = wss_at(&frames, nr_targets, Horizon::WINDOW, 0);
        for d in &report.distributions {
            let target = d.target.expect("per target");
            let zero: Vec<u64> = d
                .values
                .iter()
                .filter(|p| p.value == 0 && sampled.contains(&(target, p.time_ns)))
                .map(|p| p.time_ns / 1_000_000)
                .collect();
            assert!(
                zero.is_empty(),
                "seed {seed}, target {target}: 0 B at {zero:?} ms"
            );
        }
    }
}

#[test]
fn a_targets_working_set_grows_with_the_horizon() {
    for (seed, nr_targets, frames) in records() {
        let reports: Vec<DistReport> = HORIZONS
            .iter()
            .map(|&h| wss_at(&frames, nr_targets, h, 0))
            .collect();
        for (i, pair) in reports.windows(2).enumerate() {
            for (short, long) in pair[0].distributions.iter().zip(&pair[1].distributions) {
                for (a, b) in short.values.iter().zip(&long.values) {
                    assert!(
                        a.value <= b.value,
                        "seed {seed}, target {:?} at {} ms: {} B over {:?}, {} B over {:?}",
                        short.target,
                        a.time_ns / 1_000_000,
                        a.value,
                        HORIZONS[i],
                        b.value,
                        HORIZONS[i + 1]
                    );
                }
            }
        }
    }
}

#[test]
fn a_mappings_working_set_grows_with_the_horizon() {
    for (seed, nr_targets, frames) in records() {
        let reports: Vec<MappingsReport> = HORIZONS
            .iter()
            .map(|&h| mappings_at(&frames, nr_targets, h, 0))
            .collect();
        for (i, pair) in reports.windows(2).enumerate() {
            for short in &pair[0].mappings {
                let long = pair[1]
                    .mappings
                    .iter()
                    .find(|m| {
                        (m.target, m.start, &m.name) == (short.target, short.start, &short.name)
                    })
                    .unwrap_or_else(|| panic!("seed {seed}: {short:?} at every horizon"));
                assert!(
                    short.working_set_bytes <= long.working_set_bytes + 1,
                    "seed {seed}: {} of target {}: {} B over {:?}, {} B over {:?}",
                    short.name,
                    short.target,
                    short.working_set_bytes,
                    HORIZONS[i],
                    long.working_set_bytes,
                    HORIZONS[i + 1]
                );
            }
        }
    }
}

#[test]
fn the_working_set_never_exceeds_the_resident_bytes_of_what_it_counts() {
    for (seed, _, frames) in records() {
        for horizon in HORIZONS {
            let Horizon::Span(horizon_ns) = horizon else {
                unreachable!("the horizons checked are spans")
            };
            let mut replay = Replay::new(Membership::default(), Basis::Pages);
            let mut resident = std::collections::BTreeMap::new();
            let mut walked = std::collections::BTreeMap::new();
            for f in samples_first(frames.clone()) {
                replay.observe(&f);
                match &f {
                    Frame::Event(e) => match &e.kind {
                        EventKind::TargetMemory {
                            target,
                            resident_bytes,
                            ..
                        } => {
                            resident.insert(*target, *resident_bytes);
                        }
                        EventKind::Resident { target, mappings } => {
                            walked.insert(*target, mappings.clone());
                        }
                        _ => {}
                    },
                    Frame::Snapshot(s) => {
                        for t in &s.targets {
                            let ws = replay.working_set(t.target, horizon_ns, AGGR_NS).unwrap();
                            if let Some(&bytes) = resident.get(&t.target) {
                                assert!(
                                    ws.bytes() <= bytes,
                                    "seed {seed}, {horizon:?} at {} ms: {} B of {bytes} B resident",
                                    s.end_ns / 1_000_000,
                                    ws.bytes()
                                );
                            }
                            for m in walked.get(&t.target).into_iter().flatten() {
                                let within =
                                    ws.bytes_within(udamon_core::AddrRange::new(m.start, m.end));
                                assert!(
                                    within <= m.resident_bytes + 1,
                                    "seed {seed}, {horizon:?} at {} ms: {within} B in a mapping of {} B resident",
                                    s.end_ns / 1_000_000,
                                    m.resident_bytes
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn mapping_rows_partition_the_working_set_and_the_memory() {
    for (seed, nr_targets, frames) in records() {
        for horizon in HORIZONS {
            // The same snapshots as report wss, the warm-up skipped alike.
            let skip = DistOptions::default().skip;
            let rows = mappings_at(&frames, nr_targets, horizon, skip);
            let total = wss_at(&frames, nr_targets, horizon, skip);
            for d in &total.distributions {
                let target = d.target.expect("per target");
                let mine: Vec<_> = rows
                    .mappings
                    .iter()
                    .filter(|m| m.target == target)
                    .collect();
                let summed: u64 = mine.iter().map(|m| m.working_set_bytes).sum();
                // Each row's mean is rounded to a byte, and each snapshot's total.
                let slack = mine.len() as f64 + 1.0;
                assert!(
                    (summed as f64 - d.average).abs() <= slack,
                    "seed {seed}, {horizon:?}, target {target}: rows {summed} B, report wss {} B",
                    d.average
                );
                // One row per mapping, however it grew: the arena that grew downwards too.
                let arenas = mine.iter().filter(|m| m.name == "[anon]").count();
                assert_eq!(arenas, 1, "seed {seed}: {mine:#?}");
            }
            // The rows' sizes add up to the mapped bytes, as footprints counts them.
            let feet = footprints(
                &header(nr_targets as usize),
                reading(frames.clone()),
                total.clone(),
                &over_time(skip),
            )
            .unwrap();
            let vsz = feet.metrics.iter().find(|m| m.metric == "vsz").unwrap();
            for d in &vsz.distributions {
                let target = d.target.expect("per target");
                let mine = rows.mappings.iter().filter(|m| m.target == target);
                let (n, sizes) = mine.fold((0, 0), |(n, s), m| (n + 1, s + m.size_bytes));
                assert!(
                    (sizes as f64 - d.average).abs() <= f64::from(n),
                    "seed {seed}, target {target}: rows {sizes} B mapped, vsz {} B",
                    d.average
                );
            }
        }
    }
}

#[test]
fn footprints_put_rss_beside_wss_from_the_same_moment() {
    // Resident sizes read often: each snapshot's rss is the reading at its end.
    let mut frames = Vec::new();
    for w in 0..40u64 {
        frames.push(Frame::Snapshot(snapshot(
            w,
            vec![(0, vec![region(AREA, AREA + 64 * MIB, 1)])],
        )));
        frames.push(event(
            (w + 1) * AGGR_NS,
            EventKind::TargetMemory {
                target: 0,
                resident_bytes: (w + 1) * MIB,
                paged_out_bytes: 0,
                refaulted_bytes: 0,
            },
        ));
        // A walk now and then, summed: the nearest reading either way.
        if w == 30 {
            frames.push(event(
                (w + 1) * AGGR_NS + 1,
                EventKind::Resident {
                    target: 0,
                    mappings: vec![MappingResident {
                        start: AREA,
                        end: AREA + 64 * MIB,
                        resident_bytes: 5 * MIB,
                    }],
                },
            ));
        }
    }
    let opts = DistOptions {
        skip: 0,
        sort_by: SortBy::Time,
        ..DistOptions::default()
    };
    let total = wss(
        &header(1),
        reading(frames.clone()),
        &WssFilter::default(),
        &opts,
    )
    .unwrap();
    let feet = footprints(&header(1), reading(frames), total, &opts).unwrap();
    let rss = feet.metrics.iter().find(|m| m.metric == "rss").unwrap();
    let values: Vec<u64> = rss.distributions[0]
        .values
        .iter()
        .map(|p| p.value / MIB)
        .collect();
    let want: Vec<u64> = (1..=40).collect();
    assert_eq!(values, want);
}

#[test]
fn footprints_follow_the_walks_when_the_resident_size_was_read_once() {
    // One reading of the resident size at the start, then a walk every ten windows as the
    // program grows: each snapshot's rss is the walk nearest it, not the first reading.
    let mut frames = vec![event(
        0,
        EventKind::TargetMemory {
            target: 0,
            resident_bytes: MIB,
            paged_out_bytes: 0,
            refaulted_bytes: 0,
        },
    )];
    for w in 0..40u64 {
        if w % 10 == 9 {
            frames.push(event(
                w * AGGR_NS,
                EventKind::Resident {
                    target: 0,
                    mappings: vec![MappingResident {
                        start: AREA,
                        end: AREA + 64 * MIB,
                        resident_bytes: (w + 1) * MIB,
                    }],
                },
            ));
        }
        frames.push(Frame::Snapshot(snapshot(
            w,
            vec![(0, vec![region(AREA, AREA + 64 * MIB, 1)])],
        )));
    }
    let opts = DistOptions {
        skip: 0,
        sort_by: SortBy::Time,
        ..DistOptions::default()
    };
    let total = wss(
        &header(1),
        reading(frames.clone()),
        &WssFilter::default(),
        &opts,
    )
    .unwrap();
    let feet = footprints(&header(1), reading(frames), total, &opts).unwrap();
    let rss = feet.metrics.iter().find(|m| m.metric == "rss").unwrap();
    let values: Vec<u64> = rss.distributions[0]
        .values
        .iter()
        .map(|p| p.value / MIB)
        .collect();
    // Snapshot i ends at (i + 1) × 100 ms; the reading at 0 (1 MiB), the walks at 0.9 s
    // (10 MiB), 1.9 s (20), 2.9 s (30) and 3.9 s (40).
    assert_eq!(
        &values[..5],
        [1, 1, 1, 1, 10],
        "0.5 s is nearer 0.9 s than 0"
    );
    assert_eq!(
        values[13], 10,
        "1.4 s: as near 0.9 s as 1.9 s, and the earlier taken"
    );
    assert_eq!(values[14], 20, "1.5 s: nearer 1.9 s");
    assert_eq!(values[39], 40);
}
