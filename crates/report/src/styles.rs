//! damo's other styles of `report access` (`--style`), on one snapshot's regions as
//! [`crate::access`] reads them: how the memory is spread over temperature or idle time, as a
//! histogram of bytes (`temperature-sz-hist`, `recency-sz-hist`) or as per-byte percentiles
//! (`temperature-percentiles`, `recency-percentiles`), and the regions from the hottest or the
//! coldest down (`hot`, `cold`).
//!
//! The numbers are damo's (`damo_report_access.py`, damo 3.x):
//! - a region's **temperature** is `w_size × size + w_rate × access rate (%) + w_age × age (µs)`,
//!   negated when the region was not accessed in the window, with weights 0, 100, 100 by
//!   default: among accessed regions the one accessed longest is hottest, among idle ones the
//!   one idle longest is coldest;
//! - its **idle time** is 0 when it was accessed in the window, else its age plus one
//!   aggregation interval;
//! - a histogram has ten equal bins from the smallest value to the largest, each the bytes of
//!   the regions whose value falls in it;
//! - the value at percentile p is that of the region in which the p-th percent of the bytes,
//!   counted from the lowest value up, falls.
//!
//! Text follows damo's layout (`[from, to) size |****|` rows, numbers with thousands
//! separators, damo's durations), so that a damo user's eyes and scripts find their way.

use crate::access::{AccessReport, RegionAccess};
use crate::{human, target_name};
use serde::Serialize;
use std::fmt::Write as _;

/// Which view of the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Style {
    TemperatureSzHist,
    RecencySzHist,
    TemperaturePercentiles,
    RecencyPercentiles,
    Hot,
    Cold,
}

/// The weights of a region's size, access rate (%) and age (µs) in its temperature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TemperatureWeights {
    pub size: i64,
    pub access_rate: i64,
    pub age: i64,
}

impl Default for TemperatureWeights {
    /// damo's `--temperature_weights 0 100 100`.
    fn default() -> Self {
        TemperatureWeights {
            size: 0,
            access_rate: 100,
            age: 100,
        }
    }
}

impl std::fmt::Display for TemperatureWeights {
    /// As damo prints them: `[0, 100, 100]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}, {}, {}]", self.size, self.access_rate, self.age)
    }
}

/// Percentiles damo shows by default.
pub const DEFAULT_PERCENTILES: [u32; 7] = [0, 1, 25, 50, 75, 99, 100];

/// A region's age in µs (damo's `age.usec`).
fn age_us(r: &RegionAccess) -> u64 {
    r.age_ns / 1000
}

/// The region's temperature under `w`.
pub fn temperature(r: &RegionAccess, w: &TemperatureWeights) -> f64 {
    let score = r.size as f64 * w.size as f64
        + r.access_percent * w.access_rate as f64
        + age_us(r) as f64 * w.age as f64;
    if r.access_percent > 0.0 {
        score
    } else {
        -score
    }
}

/// The region's idle time in µs: 0 when accessed in the window, else its age plus the window.
pub fn idle_time_us(r: &RegionAccess, aggr_us: u64) -> u64 {
    if r.access_percent > 0.0 {
        0
    } else {
        age_us(r) + aggr_us
    }
}

/// What a histogram or percentiles measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Temperature,
    /// Idle time, in µs.
    IdleTime,
}

/// One bin of a histogram: values in `[from, to)`, and the bytes of the regions there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bin {
    pub from: f64,
    pub to: f64,
    pub bytes: u64,
}

/// A region as the `hot` and `cold` styles list it: as `report access` has it, with its
/// temperature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedRegion {
    #[serde(flatten)]
    pub region: RegionAccess,
    pub temperature: f64,
}

/// One target's view.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum View {
    Histogram {
        metric: Metric,
        bins: Vec<Bin>,
    },
    Percentiles {
        metric: Metric,
        /// (percentile, value), ascending.
        values: Vec<(u32, f64)>,
    },
    Regions {
        regions: Vec<RankedRegion>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetView {
    pub target: u32,
    pub pid: Option<u32>,
    pub cmdline: Option<String>,
    /// `None` when the target has no region in the snapshot.
    pub view: Option<View>,
    pub total_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StyleReport {
    pub style: Style,
    pub weights: TemperatureWeights,
    pub snapshot: usize,
    pub nr_snapshots: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub sample_us: u64,
    pub aggr_us: u64,
    pub targets: Vec<TargetView>,
    pub total_bytes: u64,
    pub est_mem_bw_bytes_per_sec: f64,
}

/// Options of the styles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StyleOptions {
    pub weights: TemperatureWeights,
    /// The percentiles the percentile styles show, ascending, each within 0..=100.
    pub percentiles: Vec<u32>,
}

impl Default for StyleOptions {
    fn default() -> Self {
        StyleOptions {
            weights: TemperatureWeights::default(),
            percentiles: DEFAULT_PERCENTILES.to_vec(),
        }
    }
}

/// `report`'s snapshot in `style`.
pub fn style(report: &AccessReport, style: Style, opts: &StyleOptions) -> StyleReport {
    let aggr_us = report.aggr_us;
    // damo's histograms and percentiles leave the size out of the temperature.
    let unsized_weights = TemperatureWeights {
        size: 0,
        ..opts.weights
    };
    let value = |metric: Metric, r: &RegionAccess| match metric {
        Metric::Temperature => temperature(r, &unsized_weights),
        Metric::IdleTime => idle_time_us(r, aggr_us) as f64,
    };
    let targets = report
        .targets
        .iter()
        .map(|t| {
            let regions = &t.regions;
            let view = (!regions.is_empty()).then(|| match style {
                Style::TemperatureSzHist | Style::RecencySzHist => {
                    let metric = metric_of(style);
                    View::Histogram {
                        metric,
                        bins: histogram(regions.iter().map(|r| (value(metric, r), r.size))),
                    }
                }
                Style::TemperaturePercentiles | Style::RecencyPercentiles => {
                    let metric = metric_of(style);
                    let values = regions.iter().map(|r| (value(metric, r), r.size));
                    View::Percentiles {
                        metric,
                        values: percentiles(values, &opts.percentiles),
                    }
                }
                Style::Hot | Style::Cold => {
                    let mut ranked: Vec<RankedRegion> = regions
                        .iter()
                        .map(|r| RankedRegion {
                            region: r.clone(),
                            temperature: temperature(r, &opts.weights),
                        })
                        .collect();
                    // Stable, so that regions of one temperature stay in address order.
                    ranked.sort_by(|a, b| a.temperature.total_cmp(&b.temperature));
                    if style == Style::Hot {
                        ranked.reverse();
                    }
                    View::Regions { regions: ranked }
                }
            });
            TargetView {
                target: t.target,
                pid: t.pid,
                cmdline: t.cmdline.clone(),
                view,
                total_bytes: t.total_bytes,
            }
        })
        .collect();
    StyleReport {
        style,
        weights: opts.weights,
        snapshot: report.snapshot,
        nr_snapshots: report.nr_snapshots,
        start_ns: report.start_ns,
        end_ns: report.end_ns,
        sample_us: report.sample_us,
        aggr_us,
        targets,
        total_bytes: report.total_bytes,
        est_mem_bw_bytes_per_sec: report.est_mem_bw_bytes_per_sec,
    }
}

/// What a histogram or percentile style measures.
fn metric_of(style: Style) -> Metric {
    match style {
        Style::RecencySzHist | Style::RecencyPercentiles => Metric::IdleTime,
        _ => Metric::Temperature,
    }
}

/// Bins of (value, bytes): ten of equal width from the smallest value to past the largest
/// (damo's `get_linearscale_hist_ranges`: width ⌈(max + 1 - min) / 10⌉, at least 1).
pub fn histogram(values: impl Iterator<Item = (f64, u64)> + Clone) -> Vec<Bin> {
    const BINS: usize = 10;
    let min = values.clone().map(|v| v.0).fold(f64::INFINITY, f64::min);
    let max = values
        .clone()
        .map(|v| v.0)
        .fold(f64::NEG_INFINITY, f64::max);
    if !min.is_finite() {
        return Vec::new();
    }
    let width = ((max + 1.0 - min) / BINS as f64).ceil().max(1.0);
    (0..BINS)
        .map(|i| {
            let (from, to) = (min + width * i as f64, min + width * (i + 1) as f64);
            let bytes = values
                .clone()
                .filter(|&(v, _)| v >= from && v < to)
                .map(|(_, b)| b)
                .sum();
            Bin { from, to, bytes }
        })
        .collect()
}

/// The value at each of `wanted` percentiles of the bytes, lowest values first (damo's
/// `get_percentile_values`).
pub fn percentiles(values: impl Iterator<Item = (f64, u64)>, wanted: &[u32]) -> Vec<(u32, f64)> {
    let mut sorted: Vec<(f64, u64)> = values.collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = sorted.iter().map(|v| v.1).sum();
    let mut out = Vec::with_capacity(wanted.len());
    let mut pending = wanted.iter().copied().peekable();
    let mut percent = 0.0;
    for &(value, bytes) in &sorted {
        percent += bytes as f64 * 100.0 / total.max(1) as f64;
        while let Some(&p) = pending.peek() {
            if percent < f64::from(p) {
                break;
            }
            out.push((p, value));
            pending.next();
        }
        if percent >= 100.0 {
            break;
        }
    }
    // Rounding may leave the sum a hair under 100: the last percentiles take the last value.
    if let Some(&(last, _)) = sorted.last() {
        out.extend(pending.map(|p| (p, last)));
    }
    out
}

/// An integer with thousands separators, as damo's `format_nr` (`-1,234,567`).
pub fn grouped(value: f64) -> String {
    let n = value.trunc() as i128;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A duration in µs as damo's `format_time_us` prints it: `0 ns`, `20.001 ms`,
/// `11 m 4.820 s`, `1 h 6 m 28.920 s`.
pub fn damo_time_us(us: f64) -> String {
    damo_time_ns(us * 1000.0)
}

fn damo_time_ns(ns: f64) -> String {
    const US: f64 = 1e3;
    const MS: f64 = 1e6;
    const S: f64 = 1e9;
    const M: f64 = 60.0 * S;
    const H: f64 = 60.0 * M;
    let (sign, ns) = if ns < 0.0 { ("-", -ns) } else { ("", ns) };
    let whole = |unit: f64| ns % unit == 0.0;
    let text = if ns >= H {
        let hours = (ns / H).trunc();
        let rest = ns - hours * H;
        if rest == 0.0 {
            format!("{hours} h")
        } else {
            format!("{hours} h {}", damo_time_ns(rest))
        }
    } else if ns >= M {
        let minutes = (ns / M).trunc();
        if whole(M) {
            format!("{minutes} m")
        } else if whole(S) {
            format!("{minutes} m {} s", ((ns % M) / S).trunc())
        } else {
            format!("{minutes} m {:.3} s", (ns % M) / S)
        }
    } else {
        let (unit, name) = match ns {
            n if n >= S => (S, "s"),
            n if n >= MS => (MS, "ms"),
            n if n >= US => (US, "us"),
            _ => (1.0, "ns"),
        };
        if unit == 1.0 || whole(unit) {
            format!("{} {name}", (ns / unit).trunc())
        } else {
            format!("{:.3} {name}", ns / unit)
        }
    };
    format!("{sign}{text}")
}

/// A value of `metric` as damo prints it.
fn metric_text(metric: Metric, value: f64) -> String {
    match metric {
        Metric::Temperature => grouped(value),
        Metric::IdleTime => damo_time_us(value),
    }
}

/// What a temperature is, for the styles that print them: a score without a unit, which a
/// reader cannot guess from `-3,040,000,000`.
fn temperature_note(w: &TemperatureWeights) -> String {
    format!(
        "# temperature: a score, no unit: {} x access rate (%) + {} x age (us) for a region \
         accessed in the last window, negated for one that was not (damo's, sizes left out; \
         --temperature_weights)",
        w.access_rate, w.age
    )
}

/// A bar of at most 20 stars.
fn bar(stars: usize) -> String {
    const MAX: usize = 20;
    let stars = stars.min(MAX);
    format!("|{}{}|", "*".repeat(stars), " ".repeat(MAX - stars))
}

fn render_histogram(out: &mut String, metric: Metric, bins: &[Bin]) {
    let legend = match metric {
        Metric::Temperature => "<temperature>",
        // Each value carries its own unit (`1.200 s`), as damo prints them.
        Metric::IdleTime => "<idle time>",
    };
    let _ = writeln!(out, "{legend} <total size>");
    let rows: Vec<(String, String, u64)> = bins
        .iter()
        .map(|b| {
            (
                format!(
                    "[{}, {})",
                    metric_text(metric, b.from),
                    metric_text(metric, b.to)
                ),
                human::size(b.bytes),
                b.bytes,
            )
        })
        .collect();
    let min = rows.iter().map(|r| r.2).min().unwrap_or(0);
    let max = rows.iter().map(|r| r.2).max().unwrap_or(0);
    let per_star = ((max - min) / 20).max(1);
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    for (range, size, bytes) in rows {
        let stars = (bytes - min).div_ceil(per_star) as usize;
        let _ = writeln!(out, "{range:<w0$} {size:<w1$} {}", bar(stars));
    }
}

fn render_percentiles(
    out: &mut String,
    metric: Metric,
    values: &[(u32, f64)],
    weights: &TemperatureWeights,
) {
    let (what, legend) = match metric {
        Metric::Temperature => ("temperature", format!("<temperature (weights: {weights})>")),
        Metric::IdleTime => ("recency", "<idle time>".to_string()),
    };
    let _ = writeln!(out, "# total {what} percentiles");
    let _ = writeln!(out, "<percentile> {legend}");
    let rows: Vec<(String, String, f64)> = values
        .iter()
        .map(|&(p, v)| (p.to_string(), metric_text(metric, v), v))
        .collect();
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return;
    };
    let (min, max) = (first.2, last.2);
    let per_star = if max != min { (max - min) / 20.0 } else { 1.0 };
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    for (p, text, v) in &rows {
        let stars = ((v - min) / per_star) as usize;
        let _ = writeln!(out, "{p:>w0$}  {text:>w1$}  {}", bar(stars));
    }
}

/// Columns of a region's box at most (damo's `--region_box_min_max_length 1 40` of these
/// styles).
const BOX_COLUMNS: f64 = 40.0;

/// `hot` and `cold`: one line per region, as damo's `<box> <size> access <access hz> <age>`:
/// the box's length is the region's age (log scale) and its digit the access rate (0 to 9).
fn render_regions(out: &mut String, ranked: &[RankedRegion]) {
    let regions: Vec<&RegionAccess> = ranked.iter().map(|r| &r.region).collect();
    let log = |v: f64| if v > 0.0 { v.log2() } else { 0.0 };
    let ages = regions.iter().map(|r| log(r.age_ns as f64 / 1000.0));
    let (age_min, age_max) = (
        ages.clone().fold(f64::INFINITY, f64::min),
        ages.fold(f64::NEG_INFINITY, f64::max),
    );
    let rates = regions.iter().map(|r| r.access_percent);
    let (rate_min, rate_max) = (
        rates.clone().fold(f64::INFINITY, f64::min),
        rates.fold(f64::NEG_INFINITY, f64::max),
    );
    let rescale = |v: f64, (lo, hi): (f64, f64), (to_lo, to_hi): (f64, f64)| {
        let ratio = if hi > lo {
            (to_hi - to_lo) / (hi - lo)
        } else {
            1.0
        };
        (v - lo) * ratio + to_lo
    };
    let ages_ns = regions.iter().map(|r| r.age_ns);
    let _ = writeln!(
        out,
        "# box: length is the age ({} to {}, log scale), digit the access rate ({} % to {} %, 0 to 9)",
        human::duration(ages_ns.clone().min().unwrap_or(0)),
        human::duration(ages_ns.max().unwrap_or(0)),
        human::number(rate_min),
        human::number(rate_max),
    );
    for r in &regions {
        let age = log(r.age_ns as f64 / 1000.0);
        let length = rescale(age, (age_min, age_max), (1.0, BOX_COLUMNS)) as usize;
        let level = rescale(r.access_percent, (rate_min, rate_max), (0.0, 9.0)) as usize;
        let digits = level.to_string().repeat(length);
        let indent = " ".repeat(BOX_COLUMNS as usize - length.min(BOX_COLUMNS as usize));
        let line = format!(
            "{indent}|{digits}| {:<11} access {:<6} {}",
            human::size(r.size),
            hz_text(r.access_hz),
            damo_time_us(r.age_ns as f64 / 1000.0)
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// An access frequency as damo's `format_hz`: three decimals below 10 Hz, else grouped, and
/// damo's lower-case `hz` (every other report writes `Hz`): these lines are damo's format.
fn hz_text(hz: f64) -> String {
    if hz < 10.0 && hz != 0.0 {
        format!("{hz:.3} hz")
    } else {
        format!("{} hz", grouped(hz))
    }
}

/// damo-like text: per target, the style's view, then the snapshot's totals.
pub fn render_text(report: &StyleReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# snapshot {} of {} (counting from 0): {} - {} after the start; intervals: sample {}, aggr {}",
        report.snapshot,
        report.nr_snapshots,
        human::duration(report.start_ns),
        human::duration(report.end_ns),
        human::duration(report.sample_us * 1000),
        human::duration(report.aggr_us * 1000),
    );
    let temperatures = report.targets.iter().any(|t| {
        matches!(
            t.view,
            Some(
                View::Histogram {
                    metric: Metric::Temperature,
                    ..
                } | View::Percentiles {
                    metric: Metric::Temperature,
                    ..
                }
            )
        )
    });
    if temperatures {
        let _ = writeln!(out, "{}", temperature_note(&report.weights));
    }
    for t in &report.targets {
        let _ = writeln!(
            out,
            "# {}",
            target_name(t.target, t.pid, t.cmdline.as_deref())
        );
        match &t.view {
            None => {
                let _ = writeln!(out, "no region in snapshot");
            }
            Some(View::Histogram { metric, bins }) => render_histogram(&mut out, *metric, bins),
            Some(View::Percentiles { metric, values }) => {
                render_percentiles(&mut out, *metric, values, &report.weights)
            }
            Some(View::Regions { regions }) => render_regions(&mut out, regions),
        }
    }
    let _ = writeln!(
        out,
        "memory bw estimate: {} per second",
        human::size(report.est_mem_bw_bytes_per_sec.round() as u64)
    );
    let _ = writeln!(out, "total size: {}", human::size(report.total_bytes));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(size: u64, access_percent: f64, age_ms: u64) -> RegionAccess {
        RegionAccess {
            start: 0,
            end: size,
            size,
            nr_accesses: (access_percent / 5.0) as u32,
            access_percent,
            access_hz: access_percent * 2.0,
            age: (age_ms / 100) as u32,
            age_ns: age_ms * 1_000_000,
            raw_samples: 0,
            touched_bytes: None,
            read_samples: 0,
            write_samples: 0,
            mappings: Vec::new(),
        }
    }

    #[test]
    fn temperature_is_damos() {
        let w = TemperatureWeights::default();
        // Accessed at 55 % for no time: 100 × 55.
        assert_eq!(temperature(&region(4096, 55.0, 0), &w), 5_500.0);
        // Idle for 100 ms: -(100 × 100,000 µs).
        assert_eq!(temperature(&region(4096, 0.0, 100), &w), -10_000_000.0);
        // Accessed at 10 % for 1 s: age dominates.
        assert_eq!(temperature(&region(4096, 10.0, 1000), &w), 100_001_000.0);
        assert_eq!(idle_time_us(&region(4096, 0.0, 100), 100_000), 200_000);
        assert_eq!(idle_time_us(&region(4096, 5.0, 100), 100_000), 0);
    }

    #[test]
    fn histogram_bins_are_damos() {
        // damo's `report-temperature-sz-hist` of its demo record: -10,000,000 to 5,500 gives
        // bins of 1,000,551.
        let bins = histogram([(-10_000_000.0, 10), (5_500.0, 3), (-995_000.0, 2)].into_iter());
        assert_eq!(bins.len(), 10);
        assert_eq!(
            (grouped(bins[0].from), grouped(bins[0].to)),
            ("-10,000,000".into(), "-8,999,449".into())
        );
        assert_eq!(grouped(bins[9].to), "5,510");
        assert_eq!(bins[0].bytes, 10);
        assert_eq!(bins[9].bytes, 5, "the last bin holds the largest value");
        assert_eq!(bins.iter().map(|b| b.bytes).sum::<u64>(), 15);
    }

    #[test]
    fn percentiles_are_of_bytes() {
        // 25 % of the bytes idle 0, 75 % idle 300 ms.
        let v = percentiles(
            [(300_000.0, 300), (0.0, 100)].into_iter(),
            &DEFAULT_PERCENTILES,
        );
        assert_eq!(
            v,
            [
                (0, 0.0),
                (1, 0.0),
                (25, 0.0),
                (50, 300_000.0),
                (75, 300_000.0),
                (99, 300_000.0),
                (100, 300_000.0)
            ]
        );
    }

    #[test]
    fn idle_times_are_headed_without_a_unit_of_their_own_and_temperatures_are_explained() {
        let bins = histogram([(0.0, 10), (1_200_000.0, 30)].into_iter());
        let mut out = String::new();
        render_histogram(&mut out, Metric::IdleTime, &bins);
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("<idle time> <total size>"));
        assert!(
            out.contains("1.200 s"),
            "the values carry their unit: {out}"
        );
        let note = temperature_note(&TemperatureWeights {
            size: 0,
            access_rate: 7,
            age: 3,
        });
        assert!(
            note.contains("7 x access rate (%) + 3 x age (us)") && note.contains("no unit"),
            "{note}"
        );
    }

    #[test]
    fn durations_and_numbers_print_as_damos() {
        assert_eq!(damo_time_us(0.0), "0 ns");
        assert_eq!(damo_time_us(20_001.0), "20.001 ms");
        assert_eq!(damo_time_us(200_000.0), "200 ms");
        assert_eq!(damo_time_us(664_820_000.0), "11 m 4.820 s");
        assert_eq!(damo_time_us(3_988_920_000.0), "1 h 6 m 28.920 s");
        assert_eq!(damo_time_us(6_648_200_000.0), "1 h 50 m 48.200 s");
        assert_eq!(grouped(-664_810_000_000.0), "-664,810,000,000");
        assert_eq!(grouped(290_010_010.7), "290,010,010");
        assert_eq!(grouped(0.0), "0");
        assert_eq!(hz_text(110.0), "110 hz");
        assert_eq!(hz_text(2.5), "2.500 hz");
    }
}
