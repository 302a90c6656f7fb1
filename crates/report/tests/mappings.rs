//! What the memory is: the targets' mappings from the record's `mappings` events, per region in
//! `report access`, and summed up per mapping by `report mappings`.

mod common;

use common::*;
use udamon_record::model::{EventKind, Frame, MappingRecord, MappingResident};
use udamon_report::ReportError;
use udamon_report::access::{AccessOptions, access, render_text as access_text};
use udamon_report::heatmap::{AddressSelection, HeatmapOptions, heatmap, term};
use udamon_report::horizon::Horizon;
use udamon_report::mappings::{Layouts, MappingsOptions, OUTSIDE, mappings, render_text};
use udamon_report::plot::{Format, ImageOptions, write};

const HEAP: u64 = 0x5500_0000_0000;
const ANON: u64 = 0x7f00_0000_0000;
const PAGE: u64 = 4096;

fn mapping(start: u64, end: u64, perms: &str, name: &str) -> MappingRecord {
    MappingRecord {
        start,
        end,
        perms: perms.into(),
        offset: 0,
        name: name.into(),
    }
}

fn layout(heap_pages: u64, anon: &str) -> EventKind {
    EventKind::Mappings {
        target: 0,
        mappings: vec![
            mapping(HEAP, HEAP + heap_pages * PAGE, "rw-p", "[heap]"),
            mapping(ANON, ANON + 100 * PAGE, "rw-p", anon),
            mapping(
                ANON + 100 * PAGE,
                ANON + 110 * PAGE,
                "r-xp",
                "/usr/lib/libc.so.6",
            ),
        ],
    }
}

/// Four 100 ms windows. The heap (10 pages, 20 from window 2 on) is one region accessed 4
/// times a window; the anonymous mapping's first 40 pages are accessed twice a window, the
/// next 60 idle for 200 windows (20 s), and libc's 10 pages idle for 5 windows (0.5 s). From
/// window 2 on the anonymous mapping is named `[anon:cache]` (prctl).
fn record() -> Vec<Frame> {
    let mut frames = vec![event(0, layout(10, "[anon]"))];
    for i in 0..4 {
        if i == 2 {
            frames.push(event(i * AGGR_NS, layout(20, "[anon:cache]")));
        }
        if i == 1 {
            // A walk of the page tables completes: the anonymous mapping has 30 pages.
            frames.push(event(
                i * AGGR_NS,
                EventKind::Resident {
                    target: 0,
                    mappings: vec![MappingResident {
                        start: ANON,
                        end: ANON + 100 * PAGE,
                        resident_bytes: 30 * PAGE,
                    }],
                },
            ));
        }
        let heap_pages = if i >= 2 { 20 } else { 10 };
        let mut idle = region(ANON + 40 * PAGE, ANON + 100 * PAGE, 0);
        idle.age = 200;
        let mut lib = region(ANON + 100 * PAGE, ANON + 110 * PAGE, 0);
        lib.age = 5;
        let regions = vec![
            region(HEAP, HEAP + heap_pages * PAGE, 4),
            region(ANON, ANON + 40 * PAGE, 2),
            idle,
            lib,
        ];
        frames.push(Frame::Snapshot(snapshot(i, vec![(0, regions)])));
    }
    frames
}

#[test]
fn layouts_tell_which_mappings_a_range_overlaps() {
    let mut layouts = Layouts::default();
    assert!(layouts.is_empty());
    for f in &record()[..1] {
        layouts.observe(f);
    }
    let strings = |v: Vec<std::sync::Arc<str>>| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let names = |s, e| strings(layouts.names(0, s, e));
    assert_eq!(
        names(ANON + 99 * PAGE, ANON + 101 * PAGE),
        ["[anon]", "/usr/lib/libc.so.6"]
    );
    assert_eq!(
        names(ANON + 110 * PAGE, ANON + 120 * PAGE),
        Vec::<String>::new()
    );
    assert_eq!(names(HEAP, HEAP + 1), ["[heap]"]);
    assert_eq!(
        strings(layouts.names(1, HEAP, HEAP + 1)),
        Vec::<String>::new(),
        "another target"
    );
}

#[test]
fn per_mapping_hot_warm_and_cold_bytes_are_the_means_over_the_snapshots() {
    let report = mappings(&header(1), reading(record()), &MappingsOptions::default()).unwrap();
    // Four snapshots, no more than the warm-up to skip: all counted, as report wss counts them.
    assert_eq!((report.skipped, report.nr_snapshots), (0, 4));
    assert!(
        report
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("only 4"))
    );
    let m: Vec<_> = report
        .mappings
        .iter()
        .map(|m| (m.name.as_str(), m))
        .collect();
    // The hottest first: the anonymous mapping's 40 pages (under each of its names: a mapping
    // is one by its start, permissions and name), then the heap's 10-20.
    assert_eq!(m[0].0, "[anon:cache]");
    assert_eq!(m[1].0, "[anon]");
    assert_eq!(m[2].0, "[heap]");
    assert_eq!(m[3].0, "/usr/lib/libc.so.6");
    assert_eq!((m[0].1.nr_snapshots, m[1].1.nr_snapshots), (2, 2));
    // Each name held the mapping in two of the four snapshots: half of it each, so that the
    // two rows add up to the one mapping.
    let anon = m[0].1;
    assert_eq!((anon.size_bytes, anon.hot_bytes), (50 * PAGE, 20 * PAGE));
    assert_eq!(m[1].1.size_bytes, 50 * PAGE);
    // Walked from window 1 on (three snapshots): 30 pages in two of them under the later
    // name, one under the earlier; 30 pages together.
    assert_eq!(anon.resident_bytes, Some(20 * PAGE));
    assert_eq!(m[1].1.resident_bytes, Some(10 * PAGE));
    assert_eq!(m[2].1.resident_bytes, None, "the heap was never walked");
    // Idle 20 s: cold (the threshold is 10 s); libc idle 0.5 s: warm.
    assert_eq!((anon.warm_bytes, anon.cold_bytes), (0, 30 * PAGE));
    // 2 accesses per 100 ms window: 20 Hz.
    assert!(
        (anon.hot_access_hz - 20.0).abs() < 1e-9,
        "{}",
        anon.hot_access_hz
    );
    let heap = m[2].1;
    // One mapping that grew (same start): 10, 10, 20, 20 pages.
    assert_eq!(heap.nr_snapshots, 4);
    assert_eq!((heap.size_bytes, heap.hot_bytes), (15 * PAGE, 15 * PAGE));
    assert_eq!(heap.end, HEAP + 20 * PAGE);
    let libc = m[3].1;
    assert_eq!(
        (libc.hot_bytes, libc.warm_bytes, libc.cold_bytes),
        (0, 10 * PAGE, 0)
    );
    // A lower threshold turns libc cold too.
    let strict = MappingsOptions {
        cold_after_ns: 100_000_000,
        ..MappingsOptions::default()
    };
    let report = mappings(&header(1), reading(record()), &strict).unwrap();
    let libc = report
        .mappings
        .iter()
        .find(|m| m.name.contains("libc"))
        .unwrap();
    assert_eq!((libc.warm_bytes, libc.cold_bytes), (0, 10 * PAGE));
    let text = render_text(&report);
    assert!(
        text.contains("[heap]") && text.contains("idle less than 100 ms"),
        "{text}"
    );
}

#[test]
fn access_names_the_mappings_of_each_region() {
    let report = access(&header(1), record(), &AccessOptions::default()).unwrap();
    let regions = &report.targets[0].regions;
    assert_eq!(
        regions[0].mappings,
        ["[heap]"].map(std::sync::Arc::<str>::from)
    );
    assert_eq!(
        regions[1].mappings,
        ["[anon:cache]"].map(std::sync::Arc::<str>::from)
    );
    assert_eq!(
        regions[3].mappings,
        ["/usr/lib/libc.so.6"].map(std::sync::Arc::<str>::from)
    );
    let text = access_text(&report);
    assert!(
        text.contains("mappings") && text.contains("[heap]"),
        "{text}"
    );
    // The first snapshot shows the layout of its time.
    let first = access(
        &header(1),
        record(),
        &AccessOptions {
            snapshot: 0,
            ..AccessOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        first.targets[0].regions[1].mappings,
        ["[anon]"].map(std::sync::Arc::<str>::from)
    );
}

#[test]
fn a_record_without_mappings_says_so() {
    let frames: Vec<Frame> = record()
        .into_iter()
        .filter(|f| matches!(f, Frame::Snapshot(_)))
        .collect();
    let err = mappings(
        &header(1),
        reading(frames.clone()),
        &MappingsOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, ReportError::NoMappings), "{err}");
    assert!(
        err.to_string()
            .contains("udamon records them for live processes")
    );
    // access shows no mappings column then.
    let report = access(&header(1), frames, &AccessOptions::default()).unwrap();
    assert!(report.targets[0].regions[0].mappings.is_empty());
    assert!(!access_text(&report).contains("mappings"));
}

#[test]
fn the_heatmap_labels_its_address_axis_by_mapping() {
    let frames = record();
    let opts = HeatmapOptions {
        address: AddressSelection::All,
        collapse_gaps: true,
        ..HeatmapOptions::terminal(Some(100))
    };
    let map = heatmap(
        &header(1),
        || Ok::<_, std::io::Error>(frames.clone()),
        &opts,
    )
    .unwrap();
    let names: Vec<&str> = map.mappings.iter().map(|m| m.name.as_str()).collect();
    // The heap (both sizes seen: one span), the anonymous mapping under its latest name, libc;
    // the heap's gap to the rest is collapsed.
    assert_eq!(names, ["[heap]", "[anon:cache]", "/usr/lib/libc.so.6"]);
    let spans: Vec<(u64, u64)> = map.mappings.iter().map(|m| (m.from, m.to)).collect();
    assert_eq!(
        spans,
        [
            (0, 20 * PAGE),
            (20 * PAGE, 120 * PAGE),
            (120 * PAGE, 130 * PAGE)
        ]
    );
    let text = term::render(&map, term::TermStyle { color: false });
    assert!(text.contains("# mappings: [heap] columns 0-"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("map.svg");
    write(&map, &svg, Format::Svg, &ImageOptions::default()).unwrap();
    let svg = std::fs::read_to_string(&svg).unwrap();
    for label in ["[heap]", "libc.so.6"] {
        assert!(svg.contains(label), "the image labels {label}");
    }
}

#[test]
fn the_working_set_outside_every_mapping_is_a_row_of_its_own() {
    // Memory mapped after the last `mappings` event: the heap's 10 pages are known, the 30
    // accessed pages beyond them not.
    let mut frames = vec![event(0, layout(10, "[anon]"))];
    for i in 0..4 {
        let regions = vec![region(HEAP, HEAP + 40 * PAGE, 4)];
        frames.push(Frame::Snapshot(snapshot(i, vec![(0, regions)])));
    }
    let opts = MappingsOptions {
        horizon: Horizon::WINDOW,
        ..MappingsOptions::default()
    };
    let report = mappings(&header(1), reading(frames), &opts).unwrap();
    let ws = |name: &str| {
        let row = report.mappings.iter().find(|m| m.name == name);
        row.map(|m| m.working_set_bytes)
    };
    assert_eq!(ws("[heap]"), Some(10 * PAGE));
    assert_eq!(ws(OUTSIDE), Some(30 * PAGE));
    assert_eq!(report.mappings.last().unwrap().name, OUTSIDE, "last");
    let text = render_text(&report);
    assert!(
        text.contains("ws: the working set of each window"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("- ") && l.ends_with(OUTSIDE)),
        "{text}"
    );
}
