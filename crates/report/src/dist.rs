//! Distributions of one number per snapshot (working-set size, region count): collection with
//! damo's warm-up skip, percentiles, average, the values in size or time order, and their text
//! rendering. [`crate::wss`] and [`crate::nr_regions`] only say which number to take.

use crate::{ReportError, Result, human, percentile, target_name};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use udamon_record::model::{Frame, Header, TargetSnapshot, Targets};

/// What the values count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    Regions,
}

/// The order in which [`Distribution::values`] are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortBy {
    /// Ascending value (damo's default `--sortby size`).
    #[default]
    Size,
    /// Chronological: the time series.
    Time,
}

/// Options shared by the distribution reports.
#[derive(Debug, Clone, PartialEq)]
pub struct DistOptions {
    /// Snapshots to leave out at the start, while regions are still adapting (damo: 20).
    pub skip: usize,
    /// Percentiles to report, each within 0..=100 ([`percentile::range`] builds damo's ranges).
    pub percentiles: Vec<f64>,
    pub sort_by: SortBy,
    /// One distribution per target instead of the targets' sum.
    pub per_target: bool,
}

impl Default for DistOptions {
    fn default() -> Self {
        DistOptions {
            skip: 20,
            percentiles: percentile::DEFAULT.to_vec(),
            sort_by: SortBy::Size,
            per_target: false,
        }
    }
}

/// One snapshot's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Point {
    /// The snapshot's index in the record (counting skipped ones).
    pub snapshot: usize,
    /// The end of the snapshot's aggregation window, in ns from the record's start.
    pub time_ns: u64,
    pub value: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PercentileValue {
    pub percentile: f64,
    pub value: u64,
}

/// The values of one target, or of all targets summed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Distribution {
    /// `None`: all targets summed snapshot by snapshot.
    pub target: Option<u32>,
    /// The target's process and command line, when the record tells.
    pub pid: Option<u32>,
    pub cmdline: Option<String>,
    pub percentiles: Vec<PercentileValue>,
    pub average: f64,
    /// Every value, in the order the options asked for.
    pub values: Vec<Point>,
}

/// A distribution report: what was counted, what was skipped, and the distributions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistReport {
    /// `wss` or `nr_regions`.
    pub metric: &'static str,
    pub unit: Unit,
    /// How regions were selected, for the reader (e.g. "nr_accesses >= 1 and size >= 1 B").
    pub selection: Option<String>,
    pub nr_snapshots: usize,
    /// Snapshots actually left out at the start.
    pub skipped: usize,
    /// Set when the skip could not be applied as asked.
    pub warning: Option<String>,
    pub sort_by: SortBy,
    /// For records of sampled sources: the samples the values rest on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    pub distributions: Vec<Distribution>,
}

/// The samples a sampled source's working set rests on, and what they can tell: a part of the
/// working set that draws a share `p` of its samples is missed by all `n` of them with
/// probability `(1 - p)^n`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Evidence {
    /// Over how long the working set was counted (0: each snapshot's own window).
    pub horizon_ns: u64,
    /// Whether `--horizon auto` chose the horizon from the evidence.
    pub chosen: bool,
    /// The median, over the snapshots, of the samples that fell in the working set.
    pub median_samples: u64,
    /// The smallest share of those samples a part of the working set must draw to be seen with
    /// probability [`Evidence::CONFIDENCE`].
    pub share_seen: f64,
    /// The medians, over the snapshots, of the low and high ends of the page-resolution
    /// estimate's 95 % interval (bytes; `None` for whole regions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<(u64, u64)>,
    /// The share of snapshots whose estimate was settled: its interval within about ±25 %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_share: Option<f64>,
}

impl Evidence {
    /// The probability with which [`Evidence::share_seen`] is stated.
    pub const CONFIDENCE: f64 = 0.95;

    /// A working set is trusted when a part of it drawing this share of its samples is seen
    /// with probability [`Evidence::CONFIDENCE`]: `--horizon auto` takes the shortest horizon
    /// that holds that many, and reports below it warn.
    pub const ENOUGH_SHARE: f64 = 0.1;

    /// The samples a working set must hold in the median snapshot to be trusted (29).
    pub fn enough_samples() -> u64 {
        Evidence::samples_to_see(Evidence::ENOUGH_SHARE)
    }

    pub fn is_enough(&self) -> bool {
        self.median_samples >= Evidence::enough_samples()
    }

    pub fn new(horizon_ns: u64, chosen: bool, median_samples: u64) -> Evidence {
        Evidence {
            horizon_ns,
            chosen,
            median_samples,
            share_seen: Evidence::share_seen_with(median_samples),
            interval: None,
            settled_share: None,
        }
    }

    /// Whether the page-resolution estimate was settled in most snapshots (true for whole
    /// regions, which estimate nothing).
    pub fn is_settled(&self) -> bool {
        self.settled_share.is_none_or(|s| s >= 0.5)
    }

    /// `1 - (1 - CONFIDENCE)^(1/n)`: with `n` samples, a part drawing at least this share of
    /// them is hit at least once with probability `CONFIDENCE`.
    pub fn share_seen_with(n: u64) -> f64 {
        if n == 0 {
            return 1.0;
        }
        1.0 - (1.0 - Evidence::CONFIDENCE).powf(1.0 / n as f64)
    }

    /// One line for text reports.
    pub fn describe(&self) -> String {
        let over = if self.horizon_ns == 0 {
            "each window".to_string()
        } else {
            format!("the last {}", human::seconds(self.horizon_ns, 3))
        };
        let chosen = if self.chosen {
            " (--horizon auto chose it from the samples)"
        } else {
            ""
        };
        let mut line = format!(
            "evidence: a median of {} samples fell in the working set over {over}{chosen}; a part \
             of it drawing {:.0} % of them or more is seen with {:.0} % probability",
            self.median_samples,
            (self.share_seen * 100.0).ceil(),
            Evidence::CONFIDENCE * 100.0
        );
        if let (Some((low, high)), Some(settled)) = (self.interval, self.settled_share) {
            line.push_str(&format!(
                "; counted at page resolution from the samples' repeats, 95 % interval a median \
                 of {} to {}, settled (within about ±25 %) in {:.0} % of snapshots",
                human::size(low),
                human::size(high),
                settled * 100.0
            ));
        }
        line
    }

    /// The fewest samples for which a part drawing `share` of them is seen with probability
    /// `CONFIDENCE`.
    pub fn samples_to_see(share: f64) -> u64 {
        ((1.0 - Evidence::CONFIDENCE).ln() / (1.0 - share).ln()).ceil() as u64
    }
}

/// Collects `value(end_ns, target's regions)` per snapshot and target, in record order, then
/// builds the report.
pub(crate) fn collect<F>(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    opts: &DistOptions,
    metric: &'static str,
    unit: Unit,
    selection: Option<String>,
    mut value: F,
) -> Result<DistReport>
where
    F: FnMut(u64, &TargetSnapshot) -> Result<u64>,
{
    percentile::check(&opts.percentiles)?;
    let mut summed = Vec::new();
    let mut per_target: BTreeMap<u32, Vec<Point>> = BTreeMap::new();
    let mut nr_snapshots = 0;
    let mut known = Targets::new(header);
    for frame in frames {
        known.observe(&frame);
        let Frame::Snapshot(snapshot) = frame else {
            continue;
        };
        let point = |value| Point {
            snapshot: nr_snapshots,
            time_ns: snapshot.end_ns,
            value,
        };
        let end_ns = snapshot.end_ns;
        if opts.per_target {
            for t in &snapshot.targets {
                let v = value(end_ns, t)?;
                per_target.entry(t.target).or_default().push(point(v));
            }
        } else {
            let mut sum = 0;
            for t in &snapshot.targets {
                sum = value(end_ns, t)?.saturating_add(sum);
            }
            summed.push(point(sum));
        }
        nr_snapshots += 1;
    }
    if nr_snapshots == 0 {
        return Err(ReportError::NoSnapshots);
    }
    let (skipped, warning) = if nr_snapshots > opts.skip {
        (opts.skip, None)
    } else if opts.skip == 0 {
        (0, None)
    } else {
        (
            0,
            Some(format!(
                "the record has only {nr_snapshots} snapshots, not more than the {} to skip as warm-up; all of them are used (set the skip to 0 to silence this)",
                opts.skip
            )),
        )
    };
    let lists: Vec<(Option<u32>, Vec<Point>)> = if opts.per_target {
        per_target.into_iter().map(|(t, v)| (Some(t), v)).collect()
    } else {
        vec![(None, summed)]
    };
    let distributions = lists
        .into_iter()
        .map(|(target, points)| {
            let points = points
                .into_iter()
                .filter(|p| p.snapshot >= skipped)
                .collect();
            let info = target.and_then(|t| known.get(t));
            Distribution {
                pid: info.and_then(|i| i.pid),
                cmdline: info.map(|i| i.cmdline.clone()),
                ..distribution(target, points, opts)
            }
        })
        .collect();
    Ok(DistReport {
        metric,
        unit,
        selection,
        nr_snapshots,
        skipped,
        warning,
        sort_by: opts.sort_by,
        evidence: None,
        distributions,
    })
}

fn distribution(target: Option<u32>, mut points: Vec<Point>, opts: &DistOptions) -> Distribution {
    let mut sorted: Vec<u64> = points.iter().map(|p| p.value).collect();
    sorted.sort_unstable();
    let percentiles = opts
        .percentiles
        .iter()
        .filter_map(|&p| {
            percentile::of_sorted(&sorted, p).map(|value| PercentileValue {
                percentile: p,
                value,
            })
        })
        .collect();
    let average = if sorted.is_empty() {
        0.0
    } else {
        sorted.iter().map(|&v| v as f64).sum::<f64>() / sorted.len() as f64
    };
    if opts.sort_by == SortBy::Size {
        points.sort_by_key(|p| (p.value, p.snapshot));
    }
    Distribution {
        target,
        pid: None,
        cmdline: None,
        percentiles,
        average,
        values: points,
    }
}

/// What the text rendering shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// Plain numbers (bytes) instead of human units, for scripts (damo's `--raw_number`).
    pub raw_number: bool,
    /// List every value (in the report's order, with its time) instead of the percentiles.
    pub all_values: bool,
    /// Width of the bars; 0 draws none.
    pub bar_width: usize,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            raw_number: false,
            all_values: false,
            bar_width: 40,
        }
    }
}

/// damo-like text: `# ` comment lines, then `<percentile> <value> |****  |` rows.
pub fn render_text(report: &DistReport, opts: &RenderOptions) -> String {
    let mut out = String::new();
    let fmt = |v: f64| -> String {
        match (opts.raw_number, report.unit) {
            (true, _) => format!("{}", v.round() as u64),
            (false, Unit::Bytes) => human::size(v.round() as u64),
            (false, Unit::Regions) => human::trimmed(v, 1),
        }
    };
    let used = report.nr_snapshots - report.skipped;
    let _ = write!(out, "# {}: {used} snapshots", report.metric);
    if report.skipped > 0 {
        let _ = write!(
            out,
            " (the first {} of {} skipped as warm-up)",
            report.skipped, report.nr_snapshots
        );
    }
    if let Some(selection) = &report.selection {
        let _ = write!(out, "; {selection}");
    }
    out.push('\n');
    if let Some(e) = &report.evidence {
        let _ = writeln!(out, "# {}", e.describe());
        if !e.is_enough() {
            let _ = writeln!(
                out,
                "# warning: the working set rests on few samples: memory that the program \
                 touches without stalling on it, such as streamed reads, may be missing; a \
                 longer horizon (--horizon, or --horizon auto) or a longer record gathers more"
            );
        }
    }
    if report.evidence.as_ref().is_some_and(|e| !e.is_settled()) {
        let _ = writeln!(
            out,
            "# warning: the page-resolution estimate rests on few repeated samples in most \
             snapshots: the working set lies within the interval above; a longer horizon or \
             record settles it"
        );
    }
    if let Some(warning) = &report.warning {
        let _ = writeln!(out, "# warning: {warning}");
    }
    for dist in &report.distributions {
        match dist.target {
            Some(t) => {
                let who = target_name(t, dist.pid, dist.cmdline.as_deref());
                let _ = writeln!(out, "# {who}");
            }
            None => {
                let _ = writeln!(out, "# all targets (summed)");
            }
        }
        let max = dist.values.iter().map(|p| p.value).max().unwrap_or(0);
        let bar = |v: u64| -> String {
            if opts.bar_width == 0 {
                return String::new();
            }
            let filled = if max == 0 {
                0
            } else {
                ((v as f64 / max as f64) * opts.bar_width as f64).round() as usize
            };
            format!(
                " |{}{}|",
                "*".repeat(filled),
                " ".repeat(opts.bar_width - filled)
            )
        };
        let rows: Vec<(String, u64)> = if opts.all_values {
            let _ = writeln!(out, "# time {}", report.metric);
            dist.values
                .iter()
                .map(|p| (human::seconds(p.time_ns, 3), p.value))
                .collect()
        } else {
            let _ = writeln!(out, "# percentile {}", report.metric);
            dist.percentiles
                .iter()
                .map(|p| (human::trimmed(p.percentile, 3), p.value))
                .collect()
        };
        let labels: Vec<String> = rows.iter().map(|(_, v)| fmt(*v as f64)).collect();
        let key_width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let value_width = labels.iter().map(String::len).max().unwrap_or(0);
        for ((key, value), label) in rows.iter().zip(&labels) {
            let _ = writeln!(
                out,
                "{key:>key_width$} {label:>value_width$}{}",
                bar(*value)
            );
        }
        let _ = writeln!(out, "# avr: {}", fmt(dist.average));
    }
    out
}
