//! The heatmap as a PNG or SVG image (plotters). As in damo's images, time runs along x (seconds)
//! and addresses up y (hex, lowest at the bottom); cells are coloured on the continuous viridis
//! ramp with a colour bar in the heatmap's unit. Collapsed gaps are white lines labelled with
//! their size on the right; unmonitored cells stay white. Written by [`crate::plot::write`].

use super::Heatmap;
use crate::plot::{DrawResult, Drawing};
use crate::{color, human};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const BAR_WIDTH: u32 = 140;
/// Characters of the command line in the title: with the rest of the title (target, address
/// range: about 60 characters) it stays within the default image's width at the title's size.
const TITLE_COMMAND_CHARS: usize = 40;
/// Colour steps in cells and in the colour bar; beyond this the eye sees no difference, and
/// equal neighbours merge into one rectangle, which keeps SVGs small.
const STEPS: f64 = 255.0;

fn rgb_of(value: f64, max: f64) -> RGBColor {
    let t = if max > 0.0 {
        (value / max * STEPS).round() / STEPS
    } else {
        0.0
    };
    let (r, g, b) = color::rgb(t);
    RGBColor(r, g, b)
}

/// A mapping's name short enough for a label: a file's name without its directory.
fn mapping_label(name: &str) -> String {
    let short = if name.starts_with('/') {
        name.rsplit('/').next().unwrap_or(name)
    } else {
        name
    };
    human::one_line(short, 32)
}

impl Drawing for Heatmap {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        draw(root, self)
    }
}

/// The image: the cells over time and addresses with their axes, labels and gaps, the colour
/// bar beside them, and a line of what a cell is below.
fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, map: &Heatmap) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let root_body = root.titled(&title(map), ("sans-serif", 22))?;
    let (width, height) = root_body.dim_in_pixel();
    let (body, note) = root_body.split_vertically(height.saturating_sub(26));
    let (main, bar) = body.split_horizontally(width.saturating_sub(BAR_WIDTH));

    let (t0, t1) = (map.start_ns as f64 / 1e9, map.end_ns as f64 / 1e9);
    let total = map.axis.len() as f64;
    let mut chart = ChartBuilder::on(&main)
        .margin(10)
        .margin_right(80)
        .x_label_area_size(45)
        .y_label_area_size(145)
        .build_cartesian_2d(t0..t1, 0f64..total)?;
    chart.draw_series(cells(map, t0))?;
    // Collapsed gaps: a white line across.
    chart.draw_series(map.axis.gaps().iter().map(|gap| {
        let y = gap.offset as f64;
        PathElement::new(vec![(t0, y), (t1, y)], WHITE.stroke_width(2))
    }))?;

    // Axes after the cells, so that no label is painted over. Address ticks are drawn below at
    // round addresses, which plotters' decimal tick choice would not give.
    let secs = |v: &f64| human::trimmed(*v, 3);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("Time (s)")
        .y_desc(format!(
            "Address ({} shown)",
            human::size_short(map.axis.len())
        ))
        .x_label_formatter(&secs)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .x_labels(10)
        .y_labels(0)
        .draw()?;
    let (ox, oy) = main.get_base_pixel();
    let plot = Plot {
        area: &main,
        at: &|x: f64, y: f64| {
            let (px, py) = chart.backend_coord(&(x, y));
            (px - ox, py - oy)
        },
        t0,
        t1,
    };
    plot.address_ticks(map)?;
    plot.gap_sizes(map)?;
    plot.mapping_names(map)?;
    colour_bar(&bar, map)?;
    note.draw(&Text::new(
        note_text(map, t0, t1),
        (12, 4),
        ("sans-serif", 13),
    ))?;
    Ok(())
}

/// The target, its command line and the addresses shown.
fn title(map: &Heatmap) -> String {
    let mut title = format!("Access heatmap of target {}", map.target);
    if let Some(cmd) = map.cmdline.as_deref().filter(|c| !c.is_empty()) {
        title.push_str(&format!(" ({})", human::one_line(cmd, TITLE_COMMAND_CHARS)));
    }
    title.push_str(&format!(
        ": {}-{}",
        human::hex(map.axis.start()),
        human::hex(map.axis.end())
    ));
    title
}

/// The monitored cells as rectangles from time `t0` on, equal neighbours along time merged.
fn cells(map: &Heatmap, t0: f64) -> Vec<Rectangle<(f64, f64)>> {
    let (row_s, col_b) = (map.row_ns() / 1e9, map.col_bytes());
    let mut rects = Vec::new();
    for c in 0..map.cols {
        let mut r = 0;
        while r < map.rows {
            let Some(v) = map.cell(r, c) else {
                r += 1;
                continue;
            };
            let colour = rgb_of(v, map.max);
            let mut end = r + 1;
            while end < map.rows
                && map
                    .cell(end, c)
                    .is_some_and(|w| rgb_of(w, map.max) == colour)
            {
                end += 1;
            }
            rects.push(Rectangle::new(
                [
                    (t0 + r as f64 * row_s, c as f64 * col_b),
                    (t0 + end as f64 * row_s, (c + 1) as f64 * col_b),
                ],
                colour.filled(),
            ));
            r = end;
        }
    }
    rects
}

/// The plot's area, where a (time, offset) point falls in it (pixels), and its time span: what
/// the labels drawn over the plot need.
struct Plot<'a, DB: DrawingBackend> {
    area: &'a DrawingArea<DB, Shift>,
    at: &'a dyn Fn(f64, f64) -> (i32, i32),
    t0: f64,
    t1: f64,
}

impl<DB: DrawingBackend> Plot<'_, DB> {
    /// Round addresses on the left axis, none closer than a label's height to another.
    fn address_ticks(&self, map: &Heatmap) -> DrawResult<DB> {
        let right_label = ("sans-serif", 14)
            .into_font()
            .into_text_style(self.area)
            .pos(Pos::new(HPos::Right, VPos::Center));
        let (ticks, _) = map.axis.ticks(10);
        let mut taken: Vec<i32> = Vec::new();
        for tick in ticks {
            let (x, y) = (self.at)(self.t0, tick.offset as f64);
            if taken.iter().any(|&t| (t - y).abs() < 18) {
                continue;
            }
            taken.push(y);
            self.area
                .draw(&PathElement::new(vec![(x - 6, y), (x, y)], BLACK))?;
            self.area.draw(&Text::new(
                human::hex(tick.address),
                (x - 9, y),
                right_label.clone(),
            ))?;
        }
        Ok(())
    }

    /// Collapsed gaps' sizes, in the right margin.
    fn gap_sizes(&self, map: &Heatmap) -> DrawResult<DB> {
        for gap in map.axis.gaps() {
            let (x, y) = (self.at)(self.t1, gap.offset as f64);
            self.area.draw(&Text::new(
                format!("gap {}", human::size_short(gap.end - gap.start)),
                (x + 6, y),
                ("sans-serif", 13)
                    .into_font()
                    .into_text_style(self.area)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        Ok(())
    }

    /// Mapping names, on a light box at the left edge of each span tall enough to hold one,
    /// with a line where the span starts.
    fn mapping_names(&self, map: &Heatmap) -> DrawResult<DB> {
        let label = ("sans-serif", 13)
            .into_font()
            .into_text_style(self.area)
            .pos(Pos::new(HPos::Left, VPos::Bottom));
        let mut above = i32::MAX;
        for span in &map.mappings {
            let (x, y_from) = (self.at)(self.t0, span.from as f64);
            let (_, y_to) = (self.at)(self.t0, span.to as f64);
            if y_from - y_to < 16 || y_from > above {
                continue;
            }
            let name = mapping_label(&span.name);
            self.area.draw(&PathElement::new(
                vec![(x, y_from), ((self.at)(self.t1, 0.0).0, y_from)],
                WHITE.mix(0.6),
            ))?;
            let width = 7 * name.chars().count() as i32 + 6;
            self.area.draw(&Rectangle::new(
                [(x + 1, y_from - 17), (x + 1 + width, y_from - 1)],
                WHITE.mix(0.75).filled(),
            ))?;
            self.area
                .draw(&Text::new(name, (x + 4, y_from - 2), label.clone()))?;
            above = y_from - 17;
        }
        Ok(())
    }
}

/// The colour bar, labelled on its right with the heatmap's unit.
fn colour_bar<DB: DrawingBackend>(bar: &DrawingArea<DB, Shift>, map: &Heatmap) -> DrawResult<DB> {
    let top = if map.max > 0.0 { map.max } else { 1.0 };
    let mut scale = ChartBuilder::on(bar)
        .margin_top(10)
        .margin_bottom(55)
        .margin_left(30)
        .margin_right(40)
        .right_y_label_area_size(45)
        .build_cartesian_2d(0f64..1f64, 0f64..top)?;
    let steps = STEPS as usize;
    scale.draw_series((0..steps).map(|i| {
        let (lo, hi) = (top * i as f64 / STEPS, top * (i + 1) as f64 / STEPS);
        Rectangle::new([(0.0, lo), (1.0, hi)], rgb_of(lo, top).filled())
    }))?;
    scale
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(8)
        .y_label_formatter(&|v| human::number(*v))
        .label_style(("sans-serif", 13))
        .draw()?;
    let (bw, bh) = bar.dim_in_pixel();
    let label = format!("Access frequency ({})", map.unit.label());
    bar.draw(&Text::new(
        label,
        (bw as i32 - 22, (bh / 2) as i32),
        ("sans-serif", 15)
            .into_font()
            .transform(FontTransform::Rotate90)
            .into_text_style(bar)
            .pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    Ok(())
}

/// What a cell is, below the image: the time shown, a column's time and a row's bytes.
fn note_text(map: &Heatmap, t0: f64, t1: f64) -> String {
    format!(
        "{} to {} s, {} per column; {} per row; white: not monitored{}",
        human::trimmed(t0, 3),
        human::trimmed(t1, 3),
        human::duration(map.row_ns().round() as u64),
        human::size(map.col_bytes().round() as u64),
        if map.axis.gaps().is_empty() {
            ""
        } else {
            "; white lines: never-monitored gaps, collapsed"
        }
    )
}
