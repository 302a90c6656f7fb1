//! `report referenced`: the kernel's accessed bits against the union of udamon's accessed
//! regions over the same intervals, in total and per mapping.

mod common;

use common::*;
use udamon_record::model::{EventKind, Frame, ReferencedMapping};
use udamon_report::ReportError;
use udamon_report::referenced::referenced;

fn mapping(start: u64, end: u64, name: &str, referenced_bytes: u64) -> ReferencedMapping {
    ReferencedMapping {
        start,
        end,
        name: name.into(),
        rss_bytes: end - start,
        referenced_bytes,
    }
}

/// Windows of 100 ms: in window `i`, page `i` of a 16-page mapping at `A` is accessed (a region
/// of its own), the rest of it idle; then, every 4 windows, the kernel's bits of the last 4.
fn record() -> Vec<Frame> {
    const A: u64 = 0x10_0000;
    let mut frames = Vec::new();
    for i in 0..8u64 {
        let p = A + i * 4096;
        let mut regions = vec![];
        if i > 0 {
            regions.push(region(A, p, 0));
        }
        regions.push(region(p, p + 4096, 2));
        regions.push(region(p + 4096, A + 16 * 4096, 0));
        frames.push(Frame::Snapshot(snapshot(i, vec![(0, regions)])));
        if i % 4 == 3 {
            frames.push(event(
                (i + 1) * AGGR_NS,
                EventKind::Referenced {
                    target: 0,
                    interval_ns: 4 * AGGR_NS,
                    resident_bytes: 16 * 4096,
                    mappings: vec![
                        mapping(A, A + 16 * 4096, "[anon]", 8 * 4096),
                        mapping(0x7f00_0000, 0x7f00_4000, "/lib/x.so", 4096),
                    ],
                },
            ));
        }
    }
    frames
}

#[test]
fn each_interval_is_set_against_the_union_of_its_windows() {
    let report = referenced(&header(1), record()).unwrap();
    let got: Vec<_> = report
        .intervals
        .iter()
        .map(|i| {
            (
                i.time_ns / AGGR_NS,
                i.kernel_bytes / 4096,
                i.udamon_bytes / 4096,
            )
        })
        .collect();
    // Each interval spans 4 windows with one accessed page each; the kernel saw 8 + 1 pages.
    assert_eq!(got, [(4, 9, 4), (8, 9, 4)]);
    let top = &report.intervals[1].top;
    assert_eq!(top[0].name, "[anon]");
    assert_eq!(
        (top[0].kernel_bytes, top[0].udamon_bytes),
        (8 * 4096, 4 * 4096)
    );
    assert_eq!(
        (top[1].name.as_str(), top[1].udamon_bytes),
        ("/lib/x.so", 0)
    );
    let [t] = &report.targets[..] else {
        panic!("{:?}", report.targets)
    };
    assert_eq!(t.median_kernel_bytes, 9 * 4096);
    assert!((t.median_ratio - 4.0 / 9.0).abs() < 1e-9);
}

#[test]
fn a_record_without_the_kernels_bits_says_how_to_get_them() {
    let frames: Vec<Frame> = record()
        .into_iter()
        .filter(|f| matches!(f, Frame::Snapshot(_)))
        .collect();
    let err = referenced(&header(1), frames).unwrap_err();
    assert!(matches!(err, ReportError::NoReferenced));
    assert!(err.to_string().contains("--referenced"), "{err}");
}

/// A busy worker and its idle parent: each is summed up on its own, where a median over both
/// pooled took the parent's empty intervals for the answer (`udamon/kernel 0.00` while every
/// one of the worker's read 1.0).
#[test]
fn targets_are_summed_up_each_on_its_own() {
    const A: u64 = 0x10_0000;
    let mut frames = Vec::new();
    for i in 0..8u64 {
        let worker = vec![region(A, A + 16 * 4096, 2)];
        let parent = vec![region(0x40_0000, 0x40_1000, 0)];
        frames.push(Frame::Snapshot(snapshot(i, vec![(0, parent), (1, worker)])));
        // The parent touched nothing, each of three times; the worker all of its 16 pages.
        for (target, bytes) in [(0, 0), (0, 0), (0, 0), (1, 16 * 4096)] {
            frames.push(event(
                (i + 1) * AGGR_NS,
                EventKind::Referenced {
                    target,
                    interval_ns: AGGR_NS,
                    resident_bytes: 16 * 4096,
                    mappings: vec![mapping(A, A + 16 * 4096, "[anon]", bytes)],
                },
            ));
        }
    }
    let report = referenced(&header(2), frames).unwrap();
    let ratios: Vec<(u32, usize, f64)> = report
        .targets
        .iter()
        .map(|t| (t.target, t.nr_intervals, t.median_ratio))
        .collect();
    assert_eq!(ratios, [(0, 24, 0.0), (1, 8, 1.0)]);
    let text = udamon_report::referenced::render_text(&report);
    assert!(text.contains("median ratio udamon/kernel 1.00"), "{text}");
}
