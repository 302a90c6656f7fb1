//! The live model of `udamon top`: fed frame by frame, it shows what the reports show for the
//! same frames, and keeps to its bounds.

mod common;

use common::*;
use std::convert::Infallible;
use udamon_record::model::{EventKind, Frame, MappingRecord, SampleAccess, SampleFact, TargetInfo};
use udamon_report::dist::{DistOptions, SortBy};
use udamon_report::heatmap::{self, HeatmapOptions};
use udamon_report::live::{HISTORY, HeatView, Live};
use udamon_report::mappings::{self, MappingsOptions};
use udamon_report::wss::{self, WssFilter};

fn fed(frames: &[Frame]) -> Live {
    let mut live = Live::new(&header(1));
    for f in frames {
        live.observe(f.clone());
    }
    live
}

fn mapping(start: u64, end: u64, name: &str) -> MappingRecord {
    MappingRecord {
        start,
        end,
        perms: "rw-p".into(),
        offset: 0,
        name: name.into(),
    }
}

fn view(rows: usize, cols: usize) -> HeatView {
    HeatView {
        target: 0,
        rows,
        cols,
        windows_per_row: 1,
        newest: None,
        zoom: (0.0, 1.0),
        all_areas: false,
    }
}

#[test]
fn the_live_heatmap_is_the_reports_over_the_same_windows() {
    let frames = banded_frames();
    let mut live = fed(&frames);
    let rows = NR_BANDED as usize;
    let got = live.heatmap(&view(rows, 40)).expect("a heatmap");
    let opts = HeatmapOptions {
        rows,
        cols: 40,
        target: Some(0),
        ..HeatmapOptions::image()
    };
    let want = heatmap::heatmap(&header(1), || Ok::<_, Infallible>(frames.clone()), &opts).unwrap();
    assert_eq!(got.axis, want.axis, "the hottest area, gaps collapsed");
    assert_eq!((got.start_ns, got.end_ns), (want.start_ns, want.end_ns));
    for (i, (a, b)) in got.cells.iter().zip(&want.cells).enumerate() {
        match (a, b) {
            (Some(a), Some(b)) => assert!((a - b).abs() < 1e-6 * b.max(1.0), "cell {i}: {a} {b}"),
            _ => assert_eq!(a, b, "cell {i}"),
        }
    }
    // The hot band is hot before the phase change and cold after it.
    let hot = |row: usize| got.cell(row, 0).unwrap();
    assert!(hot(0) > hot(rows - 1) * 5.0);
}

#[test]
fn a_young_record_fills_the_rows_from_the_top() {
    let frames = banded_frames();
    let mut live = fed(&frames[..5]);
    let map = live.heatmap(&view(10, 40)).unwrap();
    assert_eq!((map.start_ns, map.end_ns), (0, 10 * AGGR_NS));
    assert!(map.cell(0, 0).is_some() && map.cell(4, 0).is_some());
    assert!(map.cell(5, 0).is_none(), "windows to come");
}

#[test]
fn a_young_record_paused_keeps_its_picture_as_windows_arrive() {
    let frames = banded_frames();
    let mut live = fed(&frames[..5]);
    let paused = HeatView {
        newest: Some(3),
        ..view(10, 40)
    };
    let before = live.heatmap(&paused).unwrap();
    assert!(before.cell(3, 0).is_some());
    assert!(before.cell(4, 0).is_none(), "window 4 came after the pause");
    for f in &frames[5..8] {
        live.observe(f.clone());
    }
    let after = live.heatmap(&paused).unwrap();
    assert_eq!(after.cells, before.cells);
}

#[test]
fn zoom_pan_and_time_rows_pick_their_part() {
    let frames = banded_frames();
    let mut live = fed(&frames);
    let whole = live.heatmap(&view(10, 40)).unwrap();
    let left = live
        .heatmap(&HeatView {
            zoom: (0.0, 0.25),
            ..view(10, 40)
        })
        .unwrap();
    assert_eq!(left.axis.start(), whole.axis.start());
    assert!(
        left.axis.len() * 3 < whole.axis.len(),
        "a quarter of the axis"
    );
    // Two windows per row: the 10 rows span 20 windows.
    let coarse = live
        .heatmap(&HeatView {
            windows_per_row: 2,
            ..view(10, 40)
        })
        .unwrap();
    assert_eq!(coarse.end_ns - coarse.start_ns, 20 * AGGR_NS);
    // Back in time: the rows end at window 9, in the first phase (hot band hot).
    let early = live
        .heatmap(&HeatView {
            newest: Some(9),
            ..view(10, 40)
        })
        .unwrap();
    assert_eq!(early.end_ns, 10 * AGGR_NS);
    assert!(early.cell(9, 0).unwrap() > whole.cell(9, 0).unwrap());
}

#[test]
fn working_set_and_mappings_are_the_reports() {
    let mut frames = banded_frames();
    frames.insert(
        0,
        event(
            0,
            EventKind::Mappings {
                target: 0,
                mappings: vec![
                    mapping(HOT.0, WARM.1, "[heap]"),
                    mapping(COLD.0, COLD.1, "/lib/x.so"),
                ],
            },
        ),
    );
    let mut live = fed(&frames);
    let series: Vec<(u64, u64)> = live.wss_series(0).collect();
    assert_eq!(series.len(), NR_BANDED as usize);
    let first = frames
        .iter()
        .find_map(|f| match f {
            Frame::Snapshot(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        series[0].1,
        WssFilter::default().wss(&first.targets[0].regions)
    );
    // The live view counts from the first window.
    let from_start = MappingsOptions {
        skip: 0,
        ..MappingsOptions::default()
    };
    let want = mappings::mappings(&header(1), reading(frames.clone()), &from_start).unwrap();
    assert_eq!(live.mappings(), Some(&want));
    assert_eq!(live.stopped(), Some("workload finished"));
    assert!(live.code().is_none(), "no samples in this record");
}

#[test]
fn a_sampled_records_working_set_is_report_wss_at_page_resolution() {
    // After each window, as a record writes them, its samples: 40 on two pages of the hot band.
    let mut frames = Vec::new();
    for f in banded_frames() {
        let end = match &f {
            Frame::Snapshot(s) => Some(s.end_ns),
            _ => None,
        };
        frames.push(f);
        if let Some(end) = end {
            let samples = (0..40)
                .map(|i| SampleFact {
                    addr: HOT.0 + (i % 2) * 4096,
                    site: 0,
                    tid: 0,
                    cpu: 0,
                    access: SampleAccess::Read,
                })
                .collect();
            frames.push(event(
                end,
                EventKind::Samples {
                    target: 0,
                    window_ns: AGGR_NS,
                    sites: vec![],
                    samples,
                },
            ));
        }
    }
    let live = fed(&frames);
    let series: Vec<u64> = live.wss_series(0).map(|p| p.1).collect();
    let opts = DistOptions {
        skip: 0,
        sort_by: SortBy::Time,
        per_target: true,
        ..DistOptions::default()
    };
    let report = wss::wss(
        &header(1),
        reading(frames.clone()),
        &WssFilter::default(),
        &opts,
    )
    .unwrap();
    let want: Vec<u64> = report.distributions[0]
        .values
        .iter()
        .map(|p| p.value)
        .collect();
    assert_eq!(series, want);
    let whole = (HOT.1 - HOT.0) / 2;
    assert!(
        series.iter().any(|&b| b < whole),
        "page resolution counts less than the hot band's regions: {series:?}"
    );
}

#[test]
fn history_is_bounded_and_targets_come_in_tree_order() {
    let mut live = Live::new(&header(1));
    let regions = vec![region(HOT.0, HOT.1, 3)];
    live.observe(event(
        0,
        EventKind::TargetAdded {
            target: 1,
            pid: Some(77),
            parent: Some(0),
            cmdline: "child".into(),
        },
    ));
    for i in 0..(HISTORY as u64 + 50) {
        live.observe(Frame::Snapshot(snapshot(
            i,
            vec![(0, regions.clone()), (1, regions.clone())],
        )));
    }
    let (oldest, newest) = live.kept().unwrap();
    assert_eq!(newest - oldest + 1, HISTORY as u64);
    assert_eq!(live.windows(), HISTORY as u64 + 50);
    live.observe(event(
        0,
        EventKind::Exit {
            target: 1,
            status: Some(3),
        },
    ));
    let rows = live.targets();
    let order: Vec<(u32, usize)> = rows.iter().map(|r| (r.target, r.depth)).collect();
    assert_eq!(order, [(0, 0), (1, 1)]);
    assert_eq!(rows[1].ended.as_deref(), Some("exited with status 3"));
    assert_eq!(
        rows[1].info,
        Some(TargetInfo {
            pid: Some(77),
            cmdline: "child".into(),
            parent: Some(0)
        })
    );
    // Far back in time: only the kept windows are drawn.
    let map = live
        .heatmap(&HeatView {
            newest: Some(0),
            ..view(5, 10)
        })
        .unwrap();
    assert_eq!(map.end_ns, (oldest + 1) * AGGR_NS);
}

#[test]
fn a_served_window_shows_its_own_estimate() {
    // A window of `udamon serve` (`top --serve`): its regions carry the touched bytes serve
    // estimated from samples that stay in serve. The view shows those, not the regions whole.
    let mut hot = region(HOT.0, HOT.1, 12);
    hot.touched_bytes = Some(300 * 4096);
    let mut warm = region(WARM.0, WARM.1, 2);
    warm.touched_bytes = Some(20 * 4096);
    let idle = region(COLD.0, COLD.1, 0);
    let mut live = Live::new(&header(1));
    for i in 0..3 {
        let regions = vec![hot, warm, idle];
        live.observe(Frame::Snapshot(snapshot(i, vec![(0, regions)])));
    }
    let series: Vec<u64> = live.wss_series(0).map(|p| p.1).collect();
    // Each window is known once the next comes: the first two.
    assert_eq!(series, [320 * 4096, 320 * 4096]);
}

#[test]
fn the_curve_never_dips_to_zero_where_the_statistics_come_before_the_samples() {
    // As a sampled record writes every fifth window: the source's statistics, then the
    // window's samples, all after its snapshot.
    let mut frames = Vec::new();
    for (w, f) in banded_frames().into_iter().enumerate() {
        let end = match &f {
            Frame::Snapshot(s) => Some(s.end_ns),
            _ => None,
        };
        frames.push(f);
        let Some(end) = end else { continue };
        if w % 5 == 4 {
            frames.push(event(
                end,
                EventKind::SourceStats {
                    counters: [("samples".to_string(), w as u64)].into(),
                },
            ));
        }
        let samples = (0..20)
            .map(|i| SampleFact {
                addr: HOT.0 + i * 4096,
                site: 0,
                tid: 0,
                cpu: 0,
                access: SampleAccess::Read,
            })
            .collect();
        frames.push(event(
            end,
            EventKind::Samples {
                target: 0,
                window_ns: AGGR_NS,
                sites: vec![],
                samples,
            },
        ));
    }
    let live = fed(&frames);
    let series: Vec<(u64, u64)> = live.wss_series(0).collect();
    assert_eq!(series.len(), NR_BANDED as usize);
    let zero: Vec<u64> = series.iter().filter(|p| p.1 == 0).map(|p| p.0).collect();
    assert!(zero.is_empty(), "0 B at {zero:?}");
}
