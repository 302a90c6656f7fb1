//! wss and nr_regions: percentiles, averages, warm-up skipping, thresholds, per-target split and
//! ordering, checked against values computed here from the inputs.

mod common;

use common::*;
use udamon_record::model::{Frame, RegionStat};
use udamon_report::dist::{self, DistOptions, RenderOptions, SortBy};
use udamon_report::horizon::Horizon;
use udamon_report::nr_regions::nr_regions;
use udamon_report::plot::{Format, ImageOptions, write};
use udamon_report::wss::{WssFilter, choose_horizon, wss};
use udamon_report::{ReportError, percentile};

/// Accessed pages of target 0 in snapshot `i`: a scrambled sequence so sorting matters.
fn pages0(i: u64) -> u64 {
    (i * 7919) % 37 + 1
}

/// Target 0: an accessed region of `pages0(i)` pages and an idle one; target 1: one accessed
/// page at nr_accesses 1 and a 2-page region at nr_accesses 5.
fn record(nr: u64) -> Vec<Frame> {
    (0..nr)
        .map(|i| {
            let a = 0x10_0000;
            let t0 = vec![
                region(a, a + pages0(i) * 4096, 3),
                region(a + pages0(i) * 4096, a + 64 * 4096, 0),
            ];
            let b = 0x90_0000;
            let t1 = vec![region(b, b + 4096, 1), region(b + 4096, b + 3 * 4096, 5)];
            Frame::Snapshot(snapshot(i, vec![(0, t0), (1, t1)]))
        })
        .collect()
}

/// damo's percentile definition, restated: index ⌊p/100·n⌋ of the sorted values, clamped.
fn expected_percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((p / 100.0) * sorted.len() as f64) as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[test]
fn wss_percentiles_and_average_after_skipping_warm_up() {
    let opts = DistOptions {
        skip: 5,
        ..DistOptions::default()
    };
    let report = wss(
        &header(2),
        reading(record(30)),
        &WssFilter::default(),
        &opts,
    )
    .unwrap();
    assert_eq!(report.nr_snapshots, 30);
    assert_eq!(report.skipped, 5);
    assert!(report.warning.is_none());
    assert_eq!(report.distributions.len(), 1);
    let d = &report.distributions[0];
    assert_eq!(d.target, None);

    // Summed over targets: target 0's accessed pages plus target 1's 3 pages.
    let mut expected: Vec<u64> = (5..30).map(|i| (pages0(i) + 3) * 4096).collect();
    let average = expected.iter().sum::<u64>() as f64 / expected.len() as f64;
    expected.sort();
    assert_eq!(d.values.len(), 25);
    let got: Vec<(f64, u64)> = d
        .percentiles
        .iter()
        .map(|p| (p.percentile, p.value))
        .collect();
    let want: Vec<(f64, u64)> = [0.0, 25.0, 50.0, 75.0, 100.0]
        .iter()
        .map(|&p| (p, expected_percentile(&expected, p)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(got[0].1, expected[0]);
    assert_eq!(got[4].1, expected[24]);
    assert!((d.average - average).abs() < 1e-6);
    // Default order: ascending size.
    let values: Vec<u64> = d.values.iter().map(|p| p.value).collect();
    assert_eq!(values, expected);
}

#[test]
fn damo_median_command_range() {
    // `damo report wss --range 50 51 1` in damon-tests.
    let opts = DistOptions {
        skip: 0,
        percentiles: percentile::range(50.0, 51.0, 1.0).unwrap(),
        ..DistOptions::default()
    };
    let report = wss(
        &header(2),
        reading(record(10)),
        &WssFilter::default(),
        &opts,
    )
    .unwrap();
    let mut values: Vec<u64> = (0..10).map(|i| (pages0(i) + 3) * 4096).collect();
    values.sort();
    let d = &report.distributions[0];
    assert_eq!(d.percentiles.len(), 1);
    assert_eq!(d.percentiles[0].value, values[5]);
}

#[test]
fn short_records_are_used_whole_with_a_warning() {
    let report = wss(
        &header(2),
        reading(record(12)),
        &WssFilter::default(),
        &DistOptions::default(),
    )
    .unwrap();
    assert_eq!(report.skipped, 0);
    assert_eq!(report.distributions[0].values.len(), 12);
    let warning = report.warning.as_deref().expect("a warning about the skip");
    assert!(
        warning.contains("12 snapshots") && warning.contains("20"),
        "{warning}"
    );
    let text = dist::render_text(&report, &RenderOptions::default());
    assert!(text.contains("# warning:"), "{text}");

    // One more snapshot than the skip: the skip applies and one value is left.
    let report = wss(
        &header(2),
        reading(record(21)),
        &WssFilter::default(),
        &DistOptions::default(),
    )
    .unwrap();
    assert_eq!((report.skipped, report.warning.is_none()), (20, true));
    assert_eq!(report.distributions[0].values.len(), 1);
    assert_eq!(report.distributions[0].values[0].snapshot, 20);
}

#[test]
fn thresholds_select_regions() {
    let opts = DistOptions {
        skip: 0,
        per_target: true,
        ..DistOptions::default()
    };
    // nr_accesses >= 4 leaves target 0's accessed region (3) out, and target 1's 2 pages (5) in.
    let filter = WssFilter {
        acc_thres: 4,
        ..WssFilter::default()
    };
    let report = wss(&header(2), reading(record(4)), &filter, &opts).unwrap();
    let t1 = &report.distributions[1];
    assert_eq!(t1.target, Some(1));
    assert!(t1.values.iter().all(|p| p.value == 2 * 4096));
    assert!(report.distributions[0].values.iter().all(|p| p.value == 0));
    // size >= 2 pages leaves target 1's single page out.
    let filter = WssFilter {
        sz_thres: 2 * 4096,
        ..WssFilter::default()
    };
    let report = wss(&header(2), reading(record(4)), &filter, &opts).unwrap();
    assert!(
        report.distributions[1]
            .values
            .iter()
            .all(|p| p.value == 2 * 4096)
    );
}

#[test]
fn per_target_and_time_order() {
    let opts = DistOptions {
        skip: 2,
        sort_by: SortBy::Time,
        per_target: true,
        ..DistOptions::default()
    };
    let report = wss(&header(2), reading(record(8)), &WssFilter::default(), &opts).unwrap();
    let targets: Vec<Option<u32>> = report.distributions.iter().map(|d| d.target).collect();
    assert_eq!(targets, vec![Some(0), Some(1)]);
    let t0 = &report.distributions[0];
    let series: Vec<(u64, u64)> = t0.values.iter().map(|p| (p.time_ns, p.value)).collect();
    let want: Vec<(u64, u64)> = (2..8)
        .map(|i| ((i + 1) * AGGR_NS, pages0(i) * 4096))
        .collect();
    assert_eq!(series, want);
    let text = dist::render_text(
        &report,
        &RenderOptions {
            all_values: true,
            raw_number: true,
            bar_width: 0,
        },
    );
    // Time series lines: "<time> <bytes>", the first one being snapshot 2's end at 0.3 s.
    let first = text.lines().find(|l| !l.starts_with('#')).unwrap();
    assert_eq!(
        first.split_whitespace().collect::<Vec<_>>(),
        vec!["0.300", "s", &(pages0(2) * 4096).to_string()]
    );
}

#[test]
fn nr_regions_counts_regions_of_all_targets() {
    let opts = DistOptions {
        skip: 0,
        ..DistOptions::default()
    };
    let report = nr_regions(&header(2), record(5), &opts).unwrap();
    let d = &report.distributions[0];
    assert!(d.values.iter().all(|p| p.value == 4));
    assert_eq!(d.average, 4.0);
    let text = dist::render_text(&report, &RenderOptions::default());
    assert!(text.contains("# nr_regions: 5 snapshots"), "{text}");
    assert!(text.contains("# avr: 4"), "{text}");
}

#[test]
fn percentile_text_has_damo_layout() {
    let opts = DistOptions {
        skip: 0,
        ..DistOptions::default()
    };
    let report = wss(
        &header(2),
        reading(record(10)),
        &WssFilter::default(),
        &opts,
    )
    .unwrap();
    let text = dist::render_text(&report, &RenderOptions::default());
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 5);
    assert!(rows[0].trim_start().starts_with("0 ") && rows[4].trim_start().starts_with("100 "));
    assert!(
        rows.iter().all(|r| r.ends_with('|') && r.contains("KiB")),
        "{text}"
    );
    // The largest value has a full bar.
    assert!(rows[4].contains(&format!("|{}|", "*".repeat(40))), "{text}");
}

#[test]
fn errors_are_clear() {
    let empty: Vec<Frame> = Vec::new();
    assert!(matches!(
        wss(
            &header(2),
            reading(empty),
            &WssFilter::default(),
            &DistOptions::default()
        ),
        Err(ReportError::NoSnapshots)
    ));
    let bad = DistOptions {
        percentiles: vec![101.0],
        ..DistOptions::default()
    };
    let err = wss(&header(2), reading(record(3)), &WssFilter::default(), &bad).unwrap_err();
    assert!(err.to_string().contains("within 0 and 100"), "{err}");
}

/// A sampled source's windows: page `page(i)` (1 to 15) of a 16-page area gets one sample in
/// window `i`, and page 0 is hot: it takes 50.
fn roaming(nr: u64, page: impl Fn(u64) -> u64) -> Vec<Frame> {
    let a = 0x10_0000;
    (0..nr)
        .map(|i| {
            let p = page(i);
            let mut regions = vec![RegionStat {
                raw_samples: 50,
                read_samples: 0,
                write_samples: 0,
                ..region(a, a + 4096, 40)
            }];
            if p > 1 {
                regions.push(region(a + 4096, a + p * 4096, 0));
            }
            regions.push(RegionStat {
                raw_samples: 1,
                read_samples: 0,
                write_samples: 0,
                ..region(a + p * 4096, a + (p + 1) * 4096, 1)
            });
            if p < 15 {
                regions.push(region(a + (p + 1) * 4096, a + 16 * 4096, 0));
            }
            Frame::Snapshot(snapshot(i, vec![(0, regions)]))
        })
        .collect()
}

#[test]
fn a_horizon_counts_the_union_of_its_windows_accessed_bytes() {
    let opts = DistOptions {
        skip: 0,
        sort_by: SortBy::Time,
        ..DistOptions::default()
    };
    // Pages 1, 2, 3, 4, 4, 6, 7, ...: page 4 in two windows in a row.
    let page = |i: u64| if i == 4 { 4 } else { 1 + i % 15 };
    let at = |horizon_windows: u64| {
        let filter = WssFilter {
            horizon: Horizon::Span(horizon_windows * AGGR_NS),
            ..WssFilter::default()
        };
        let report = wss(&header(1), reading(roaming(12, page)), &filter, &opts).unwrap();
        let values: Vec<u64> = report.distributions[0]
            .values
            .iter()
            .map(|p| p.value / 4096)
            .collect();
        values
    };
    // One window: the hot page and the roaming one.
    assert_eq!(at(0), vec![2; 12]);
    // Three windows: the hot page and up to three distinct roaming pages; window 4 repeats
    // page 4, so the unions at windows 4 and 5 hold one page less.
    assert_eq!(at(3), vec![2, 3, 4, 4, 3, 3, 4, 4, 4, 4, 4, 4]);
    // A horizon longer than the record: every page seen so far.
    assert_eq!(at(100), vec![2, 3, 4, 5, 5, 6, 7, 8, 9, 10, 11, 12]);
}

#[test]
fn a_working_set_resting_on_few_samples_is_said_to() {
    let opts = DistOptions {
        skip: 0,
        ..DistOptions::default()
    };
    let text = |report: &dist::DistReport| dist::render_text(report, &RenderOptions::default());
    // The hot page's 50 samples a window are evidence enough.
    let report = wss(
        &header(1),
        reading(roaming(6, |i| i + 1)),
        &WssFilter::default(),
        &opts,
    )
    .unwrap();
    let evidence = report.evidence.expect("evidence of a sampled record");
    assert_eq!(evidence.median_samples, 51);
    assert!(evidence.is_enough());
    assert!(!text(&report).contains("warning"), "{}", text(&report));
    // The same windows with a single sample each: the working set rests on one sample, and a
    // part of it must draw all of them to be seen.
    let thin: Vec<Frame> = roaming(6, |i| i + 1)
        .into_iter()
        .map(|f| match f {
            Frame::Snapshot(mut s) => {
                s.targets[0].regions.remove(0);
                Frame::Snapshot(s)
            }
            other => other,
        })
        .collect();
    let report = wss(&header(1), reading(thin), &WssFilter::default(), &opts).unwrap();
    let evidence = report.evidence.expect("evidence of a sampled record");
    assert_eq!(evidence.median_samples, 1);
    assert!(!evidence.is_enough());
    assert!((evidence.share_seen - 0.95).abs() < 1e-9);
    let shown = text(&report);
    assert!(shown.contains("a median of 1 samples"), "{shown}");
    assert!(
        shown.contains("warning: the working set rests on few samples"),
        "{shown}"
    );
    // Accessed-bit records have no samples: no evidence to state, nothing to warn about.
    let report = wss(&header(2), reading(record(6)), &WssFilter::default(), &opts).unwrap();
    assert_eq!(report.evidence, None);
    assert!(!text(&report).contains("warning"));
}

/// `nr` windows of a sampled source in which `samples(i)` samples fall in one page.
fn sampled(nr: u64, samples: impl Fn(u64) -> u32) -> Vec<Frame> {
    (0..nr)
        .map(|i| {
            let regions = vec![RegionStat {
                raw_samples: samples(i),
                read_samples: 0,
                write_samples: 0,
                ..region(0x10_0000, 0x10_1000, u32::from(samples(i) > 0))
            }];
            Frame::Snapshot(snapshot(i, vec![(0, regions)]))
        })
        .collect()
}

#[test]
fn the_auto_horizon_is_the_shortest_that_holds_enough_samples_and_stops_growing() {
    let enough = dist::Evidence::enough_samples();
    assert_eq!(
        enough, 29,
        "a tenth of the samples seen with 95 % probability"
    );
    let chosen = |frames: Vec<Frame>| {
        choose_horizon(
            &header(1),
            || Ok::<_, std::io::Error>(frames.clone()),
            &WssFilter::default(),
            0,
        )
        .unwrap()
    };
    const S: u64 = 1_000_000_000;
    // One page, 100 ms windows over 20 s: the working set never grows, so the first horizon
    // with enough samples: one window (30), a second (10 x 3), 5 s (50 x 1).
    assert_eq!(chosen(sampled(200, |_| 30)), 0);
    assert_eq!(chosen(sampled(200, |_| 3)), S);
    assert_eq!(chosen(sampled(200, |_| 1)), 5 * S);
    // One window in ten has a sample, over 41 s: 10 s holds 10, 20 s (the longest up to half the
    // record) 20: not enough anywhere, so the longest is taken.
    assert_eq!(chosen(sampled(410, |i| u32::from(i % 10 == 0))), 20 * S);
    // A record of 3 s: horizons up to 1.5 s.
    assert_eq!(chosen(sampled(30, |_| 1)), S);
    // A hot page with plenty of samples, and one more page of 15 in turn per window: 2 pages
    // in a window, 11 in a second, all 16 in 2 s, and no more in 5 s: 2 s.
    assert_eq!(chosen(roaming(200, |i| 1 + i % 15)), 2 * S);
    // No samples at all: an accessed-bit record, whose windows count checks as DAMON's do.
    assert_eq!(chosen(record(50)), 0);
}

#[test]
fn the_auto_horizon_reports_over_the_chosen_one_and_says_so() {
    let frames = sampled(200, |_| 1);
    let opts = DistOptions {
        skip: 0,
        ..DistOptions::default()
    };
    let auto = WssFilter {
        horizon: Horizon::Auto,
        ..WssFilter::default()
    };
    let report = wss(
        &header(1),
        || Ok::<_, std::io::Error>(frames.clone()),
        &auto,
        &opts,
    )
    .unwrap();
    let evidence = report.evidence.expect("evidence");
    assert!(evidence.chosen);
    assert_eq!(evidence.horizon_ns, 5_000_000_000);
    assert_eq!(evidence.median_samples, 50);
    let shown = dist::render_text(&report, &RenderOptions::default());
    assert!(shown.contains("in any window of the last 5"), "{shown}");
    assert!(shown.contains("--horizon auto chose it"), "{shown}");
}

#[test]
fn a_distribution_draws_one_line_per_target_by_percentile_or_time() {
    let dir = tempfile::tempdir().unwrap();
    let svg = |opts: &DistOptions| {
        let report = wss(&header(2), reading(record(30)), &WssFilter::default(), opts).unwrap();
        let path = dir.path().join("wss.svg");
        write(&report, &path, Format::Svg, &ImageOptions::default()).unwrap();
        std::fs::read_to_string(&path).unwrap()
    };
    let summed = svg(&DistOptions {
        skip: 0,
        ..DistOptions::default()
    });
    assert!(summed.contains("wss by percentile"), "{}", &summed[..300]);
    // The data lines are 2 px wide; the mesh's are 1.
    let lines = |svg: &str| svg.matches(r#"stroke-width="2""#).count();
    assert_eq!(lines(&summed), 1);
    let per_target = svg(&DistOptions {
        skip: 0,
        sort_by: SortBy::Time,
        per_target: true,
        ..DistOptions::default()
    });
    assert!(per_target.contains("wss by time (s)"));
    assert_eq!(lines(&per_target), 2, "one line per target");
    for who in ["target 0", "target 1"] {
        assert!(per_target.contains(who), "the legend names {who}");
    }
}
