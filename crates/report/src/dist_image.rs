//! A distribution report (`wss`, `nr_regions`) as an image, as damo's `--plot` draws it: by
//! size, the value at each percentile (x: 0 to 100); by time, the value at each snapshot
//! (x: seconds from the record's start). One line per distribution (the targets summed, or
//! each target). Written by [`crate::plot::write`].

use crate::dist::{DistReport, Distribution, SortBy, Unit};
use crate::plot::{DrawResult, Drawing};
use crate::{color, human, target_name};
use plotters::coord::Shift;
use plotters::prelude::*;

/// The points of one distribution's line, in x order.
pub(crate) fn line(dist: &Distribution, sort_by: SortBy) -> Vec<(f64, f64)> {
    match sort_by {
        SortBy::Time => dist
            .values
            .iter()
            .map(|p| (p.time_ns as f64 / 1e9, p.value as f64))
            .collect(),
        SortBy::Size => {
            let mut sorted: Vec<u64> = dist.values.iter().map(|p| p.value).collect();
            sorted.sort_unstable();
            let last = sorted.len().saturating_sub(1).max(1) as f64;
            sorted
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as f64 * 100.0 / last, v as f64))
                .collect()
        }
    }
}

impl Drawing for DistReport {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let lines: Vec<(String, Vec<(f64, f64)>)> = self
            .distributions
            .iter()
            .map(|d| {
                let name = match d.target {
                    Some(t) => target_name(t, d.pid, d.cmdline.as_deref()),
                    None => "all targets (summed)".to_string(),
                };
                (name, line(d, self.sort_by))
            })
            .collect();
        let note = self
            .selection
            .as_ref()
            .map(|s| format!(" ({})", human::one_line(s, 90)))
            .unwrap_or_default();
        let what = Plotted {
            metric: self.metric,
            note: &note,
            unit: self.unit,
            sort_by: self.sort_by,
            x_desc: None,
        };
        draw_lines(root, &what, &lines)
    }
}

/// What lines show: a metric (the y axis) in a unit, by percentile or time, and a note for
/// the title.
pub(crate) struct Plotted<'a> {
    pub metric: &'a str,
    pub note: &'a str,
    pub unit: Unit,
    pub sort_by: SortBy,
    /// What x is, when not the percentile or the time the order says.
    pub x_desc: Option<&'a str>,
}

/// Named lines, drawn by [`draw_lines`].
pub(crate) struct NamedLines<'a> {
    pub what: Plotted<'a>,
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

impl Drawing for NamedLines<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        draw_lines(root, &self.what, &self.lines)
    }
}

/// Named lines against the percentile or time, with a legend when there are several.
pub(crate) fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    what: &Plotted<'_>,
    lines: &[(String, Vec<(f64, f64)>)],
) -> DrawResult<DB> {
    let (unit, sort_by) = (what.unit, what.sort_by);
    root.fill(&WHITE)?;
    let points = || lines.iter().flat_map(|l| l.1.iter());
    let x_max = points().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let x_min = points().map(|p| p.0).fold(x_max, f64::min);
    let y_max = points().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.05;
    let (x_desc, x_range) = match sort_by {
        SortBy::Size => ("percentile", 0.0..100.0),
        SortBy::Time => ("time (s)", x_min..x_max),
    };
    let x_desc = what.x_desc.unwrap_or(x_desc);
    let y_label = move |v: &f64| match unit {
        Unit::Bytes => human::size_short(v.round() as u64),
        Unit::Regions => human::trimmed(*v, 1),
    };
    let title = format!("{} by {x_desc}{}", what.metric, what.note);
    let body = root.titled(&title, ("sans-serif", 20))?;
    let mut chart = ChartBuilder::on(&body)
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(100)
        .build_cartesian_2d(x_range, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(what.metric)
        .y_label_formatter(&y_label)
        .label_style(("sans-serif", 15))
        .draw()?;
    let n = lines.len().max(2) as f64;
    for (i, (name, points)) in lines.iter().enumerate() {
        let (r, g, b) = color::rgb(i as f64 / (n - 1.0) * 0.85);
        let colour = RGBColor(r, g, b);
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour));
    }
    if lines.len() > 1 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    Ok(())
}
