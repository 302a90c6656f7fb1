//! `report accuracy`: a simulated record's monitoring results against the simulator's ground
//! truth, which `record --sim` keeps for every window (truth frames). Per window and target:
//!
//! - **precision**: of the bytes reported accessed (regions with at least `acc_thres`
//!   accesses), the share that the workload touched;
//! - **recall**: of the bytes the workload touched, the share reported accessed;
//! - **working-set error**: bytes reported accessed against bytes touched, as a signed share
//!   of the bytes touched.
//!
//! Where the simulator knows only an expectation (random accesses), the touched bytes of a range
//! are spread evenly over it, which is what they are on average. The summary sums bytes over
//! the windows (byte-weighted precision and recall), averages the per-window shares, and says
//! when the monitor first reported 90 % of the touched memory, and first did so with 90 %
//! precision too.

use crate::{ReportError, Result, human};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use udamon_core::AddrRange;
use udamon_record::model::{EventKind, Frame, RegionStat, TouchedExtent};

/// The share of recall (and precision) at which hot memory counts as found.
pub const FOUND: f64 = 0.9;

/// What the report reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccuracyOptions {
    /// Only this part of the address space, regions and truth alike.
    pub address: Option<AddrRange>,
    /// A region counts as reported accessed with at least this many accesses (at least 1).
    pub acc_thres: u32,
}

/// One window of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowAccuracy {
    pub target: u32,
    /// The window's end, from the record's start.
    pub end_ns: u64,
    pub window_ns: u64,
    /// Bytes in regions reported accessed.
    pub reported_bytes: u64,
    /// Bytes of the pages the workload touched.
    pub touched_bytes: u64,
    /// Bytes touched that regions reported accessed cover.
    pub found_bytes: u64,
    /// `found / reported`; `None` when nothing was reported accessed.
    pub precision: Option<f64>,
    /// `found / touched`; `None` when nothing was touched.
    pub recall: Option<f64>,
    /// `(reported - touched) / touched`; `None` when nothing was touched.
    pub wss_error: Option<f64>,
}

impl WindowAccuracy {
    /// The accuracy of `accessed` (address-ordered, disjoint ranges reported accessed) against
    /// `extents` (the window's truth, address-ordered and disjoint).
    pub fn new(
        target: u32,
        end_ns: u64,
        window_ns: u64,
        accessed: &[AddrRange],
        extents: &[TouchedExtent],
    ) -> WindowAccuracy {
        let reported: u64 = accessed.iter().map(AddrRange::size).sum();
        let touched: u64 = extents.iter().map(|e| e.touched_bytes).sum();
        let found = touched_within(accessed, extents).round() as u64;
        let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
        WindowAccuracy {
            target,
            end_ns,
            window_ns,
            reported_bytes: reported,
            touched_bytes: touched,
            found_bytes: found,
            precision: share(found, reported),
            recall: share(found, touched),
            wss_error: (touched > 0).then(|| (reported as f64 - touched as f64) / touched as f64),
        }
    }

    /// Recall of at least [`FOUND`] (and, with `precise`, precision too).
    pub fn found(&self, precise: bool) -> bool {
        self.recall.is_some_and(|r| r >= FOUND)
            && (!precise || self.precision.is_some_and(|p| p >= FOUND))
    }
}

/// Bytes touched within `accessed`: each extent's touched bytes spread evenly over it. Both
/// lists are address-ordered and disjoint; one pass over the two.
pub fn touched_within(accessed: &[AddrRange], extents: &[TouchedExtent]) -> f64 {
    let mut total = 0.0;
    let mut e = 0;
    for &AddrRange { start, end } in accessed {
        while e < extents.len() && extents[e].end <= start {
            e += 1;
        }
        let mut i = e;
        while i < extents.len() && extents[i].start < end {
            let x = &extents[i];
            let overlap = end.min(x.end) - start.max(x.start);
            total += x.touched_bytes as f64 * overlap as f64 / (x.end - x.start) as f64;
            i += 1;
        }
    }
    total
}

/// Summed over the windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AccuracySummary {
    pub windows: usize,
    pub reported_bytes: u64,
    pub touched_bytes: u64,
    pub found_bytes: u64,
    /// Byte-weighted over the windows: found / reported.
    pub precision: Option<f64>,
    /// Byte-weighted over the windows: found / touched.
    pub recall: Option<f64>,
    /// Means of the windows' shares (windows where one is undefined left out).
    pub mean_precision: Option<f64>,
    pub mean_recall: Option<f64>,
    /// The mean of the windows' absolute working-set errors.
    pub mean_abs_wss_error: Option<f64>,
    /// The end of the first window with recall of at least 90 %.
    pub first_recall_90_ns: Option<u64>,
    /// The end of the first window with recall and precision of at least 90 %.
    pub first_found_ns: Option<u64>,
}

impl AccuracySummary {
    pub fn of(windows: &[WindowAccuracy]) -> AccuracySummary {
        let sum = |f: fn(&WindowAccuracy) -> u64| windows.iter().map(f).sum::<u64>();
        let (reported, touched, found) = (
            sum(|w| w.reported_bytes),
            sum(|w| w.touched_bytes),
            sum(|w| w.found_bytes),
        );
        let mean = |f: fn(&WindowAccuracy) -> Option<f64>| {
            let values: Vec<f64> = windows.iter().filter_map(f).collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        };
        let first = |precise: bool| windows.iter().find(|w| w.found(precise)).map(|w| w.end_ns);
        AccuracySummary {
            windows: windows.len(),
            reported_bytes: reported,
            touched_bytes: touched,
            found_bytes: found,
            precision: (reported > 0).then(|| found as f64 / reported as f64),
            recall: (touched > 0).then(|| found as f64 / touched as f64),
            mean_precision: mean(|w| w.precision),
            mean_recall: mean(|w| w.recall),
            mean_abs_wss_error: mean(|w| w.wss_error.map(f64::abs)),
            first_recall_90_ns: first(false),
            first_found_ns: first(true),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccuracyReport {
    pub summary: AccuracySummary,
    pub windows: Vec<WindowAccuracy>,
}

/// Clips address-ordered ranges to `range` (all of them without one); `with` makes an item of
/// the part of one inside.
fn clip<T>(
    items: impl Iterator<Item = T>,
    range: Option<AddrRange>,
    bounds: impl Fn(&T) -> AddrRange,
    with: impl Fn(T, AddrRange) -> T,
) -> Vec<T> {
    let within = range.unwrap_or(AddrRange::new(0, u64::MAX));
    items
        .filter_map(|x| {
            let whole = bounds(&x);
            let part = AddrRange::new(whole.start.max(within.start), whole.end.min(within.end));
            (part.start < part.end).then(|| if part == whole { x } else { with(x, part) })
        })
        .collect()
}

/// The report over `frames`: each truth frame against the snapshot of the same window (the
/// one just before it). Fails when no truth frame pairs with a snapshot.
pub fn accuracy(
    frames: impl IntoIterator<Item = Frame>,
    opts: &AccuracyOptions,
) -> Result<AccuracyReport> {
    // The last snapshot's accessed ranges per target, with its end.
    let mut last: BTreeMap<u32, (u64, Vec<AddrRange>)> = BTreeMap::new();
    let mut windows = Vec::new();
    let thres = opts.acc_thres.max(1);
    for frame in frames {
        match frame {
            Frame::Snapshot(s) => {
                for t in s.targets {
                    let accessed = t
                        .regions
                        .iter()
                        .filter(|r| r.nr_accesses >= thres)
                        .map(RegionStat::range);
                    let ranges = clip(accessed, opts.address, |&r| r, |_, part| part);
                    last.insert(t.target, (s.end_ns, ranges));
                }
            }
            Frame::Event(e) => {
                let EventKind::Truth {
                    target,
                    window_ns,
                    extents,
                } = e.kind
                else {
                    continue;
                };
                let Some((end_ns, accessed)) = last.get(&target).filter(|l| l.0 == e.time_ns)
                else {
                    continue;
                };
                // An extent cut to the range keeps its share of the touched bytes.
                let extents = clip(
                    extents.into_iter(),
                    opts.address,
                    |x| AddrRange::new(x.start, x.end),
                    |x, part| TouchedExtent {
                        start: part.start,
                        end: part.end,
                        touched_bytes: (x.touched_bytes as u128 * part.size() as u128
                            / (x.end - x.start) as u128)
                            as u64,
                    },
                );
                windows.push(WindowAccuracy::new(
                    target, *end_ns, window_ns, accessed, &extents,
                ));
            }
        }
    }
    if windows.is_empty() {
        return Err(ReportError::NoTruth);
    }
    Ok(AccuracyReport {
        summary: AccuracySummary::of(&windows),
        windows,
    })
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), |s| format!("{:.1} %", s * 100.0))
}

fn signed_percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), |s| format!("{:+.1} %", s * 100.0))
}

/// The summary, then one line per window.
pub fn render_text(report: &AccuracyReport) -> String {
    let s = &report.summary;
    let mut out = String::new();
    let when = |t: Option<u64>| t.map_or_else(|| "never".to_string(), human::duration);
    let _ = writeln!(
        out,
        "{} windows: precision {} (mean {}), recall {} (mean {}), mean working-set error {}",
        s.windows,
        percent(s.precision),
        percent(s.mean_precision),
        percent(s.recall),
        percent(s.mean_recall),
        percent(s.mean_abs_wss_error),
    );
    let _ = writeln!(
        out,
        "{} % recall first at {}; with {} % precision too, at {}",
        FOUND * 100.0,
        when(s.first_recall_90_ns),
        FOUND * 100.0,
        when(s.first_found_ns),
    );
    let several = report.windows.iter().any(|w| w.target != 0);
    let _ = writeln!(
        out,
        "\n{}{:>10} {:>11} {:>11} {:>10} {:>8} {:>9}",
        if several { "target " } else { "" },
        "time",
        "reported",
        "touched",
        "precision",
        "recall",
        "wss error"
    );
    for w in &report.windows {
        if several {
            let _ = write!(out, "{:>6} ", w.target);
        }
        let _ = writeln!(
            out,
            "{:>10} {:>11} {:>11} {:>10} {:>8} {:>9}",
            human::seconds(w.end_ns, 1),
            human::size(w.reported_bytes),
            human::size(w.touched_bytes),
            percent(w.precision),
            percent(w.recall),
            signed_percent(w.wss_error),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_frames::snapshot;
    use udamon_record::model::Event;

    fn extent(start: u64, end: u64, touched_bytes: u64) -> TouchedExtent {
        TouchedExtent {
            start,
            end,
            touched_bytes,
        }
    }

    #[test]
    fn touched_bytes_are_spread_evenly_over_their_extent() {
        let extents = [extent(100, 200, 50), extent(300, 400, 100)];
        // Half of the first extent (25 bytes), all of the second.
        let r = AddrRange::new;
        assert_eq!(touched_within(&[r(150, 250), r(290, 410)], &extents), 125.0);
        assert_eq!(touched_within(&[r(0, 100), r(200, 300)], &extents), 0.0);
        let w = WindowAccuracy::new(0, 10, 10, &[r(150, 250), r(290, 410)], &extents);
        assert_eq!(
            (w.reported_bytes, w.touched_bytes, w.found_bytes),
            (220, 150, 125)
        );
        assert_eq!(w.precision, Some(125.0 / 220.0));
        assert_eq!(w.recall, Some(125.0 / 150.0));
        assert_eq!(w.wss_error, Some(70.0 / 150.0));
        let idle = WindowAccuracy::new(0, 10, 10, &[], &[]);
        assert_eq!(
            (idle.precision, idle.recall, idle.wss_error),
            (None, None, None)
        );
    }

    fn truth(time_ns: u64, extents: Vec<TouchedExtent>) -> Frame {
        Frame::Event(Event {
            time_ns,
            kind: EventKind::Truth {
                target: 0,
                window_ns: 100,
                extents,
            },
        })
    }

    #[test]
    fn each_truth_frame_judges_the_snapshot_of_its_window() {
        let frames = vec![
            snapshot(100, &[(0, 1000, 0), (1000, 2000, 3)]),
            truth(100, vec![extent(1500, 3000, 1500)]),
            snapshot(200, &[(0, 1500, 1), (1500, 3000, 20)]),
            truth(200, vec![extent(1500, 3000, 1500)]),
            // A truth frame without its snapshot (left out by a time range) is skipped.
            truth(300, vec![extent(0, 10, 10)]),
        ];
        let opts = AccuracyOptions::default();
        let r = accuracy(frames.clone(), &opts).unwrap();
        let got: Vec<_> = r
            .windows
            .iter()
            .map(|w| (w.end_ns, w.found_bytes, w.precision, w.recall))
            .collect();
        assert_eq!(
            got,
            [
                (100, 500, Some(0.5), Some(1.0 / 3.0)),
                (200, 1500, Some(0.5), Some(1.0))
            ]
        );
        assert_eq!(r.summary.first_recall_90_ns, Some(200));
        assert_eq!(r.summary.first_found_ns, None);
        assert_eq!(r.summary.recall, Some(2000.0 / 3000.0));
        // Only accesses of at least 2, and only addresses 1000..2000.
        let opts = AccuracyOptions {
            address: Some(AddrRange::new(1000, 2000)),
            acc_thres: 2,
        };
        let r = accuracy(frames, &opts).unwrap();
        let got: Vec<_> = r
            .windows
            .iter()
            .map(|w| (w.reported_bytes, w.touched_bytes, w.precision))
            .collect();
        assert_eq!(got, [(1000, 500, Some(0.5)), (500, 500, Some(1.0))]);
        assert!(matches!(
            accuracy(
                vec![snapshot(100, &[(0, 10, 1)])],
                &AccuracyOptions::default()
            ),
            Err(ReportError::NoTruth)
        ));
        let text = render_text(
            &accuracy(
                vec![
                    snapshot(100, &[(0, 10, 1)]),
                    truth(100, vec![extent(0, 10, 10)]),
                ],
                &AccuracyOptions::default(),
            )
            .unwrap(),
        );
        assert!(text.contains("precision 100.0 %"), "{text}");
        assert!(text.contains("first at 100 ns"), "{text}");
    }
}
