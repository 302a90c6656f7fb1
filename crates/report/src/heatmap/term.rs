//! The heatmap as terminal text: time runs down, addresses run right, one character per cell.
//! With colour, cells are 256-colour backgrounds on the viridis ramp; without (not a terminal,
//! `NO_COLOR`), cells are damo's level digits 0-9. Blank cells were not monitored. Address ticks
//! (hex above, shown-byte offsets below) mark collapsed gaps with `/`; a legend gives the units.

use super::Heatmap;
use crate::{color, human, target_name};
use std::fmt::Write as _;

/// Columns to leave for the time labels when fitting a terminal's width.
pub const MARGIN_HINT: usize = 12;

const RESET: &str = "\x1b[0m";

/// How to draw; the caller knows whether the output is a terminal and whether NO_COLOR is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermStyle {
    pub color: bool,
}

/// Places labels on one text line without overlaps; earlier calls win.
struct LabelLine {
    chars: Vec<char>,
    taken: Vec<bool>,
}

impl LabelLine {
    fn new(width: usize) -> LabelLine {
        LabelLine {
            chars: vec![' '; width],
            taken: vec![false; width],
        }
    }

    /// Puts `label` starting at `pos`, or ending at `pos` if it does not fit to the right.
    fn place(&mut self, pos: usize, label: &str) -> bool {
        let len = label.chars().count();
        let width = self.chars.len();
        let candidates = [Some(pos), (pos + 1).checked_sub(len)];
        for start in candidates.into_iter().flatten() {
            let (from, to) = (start.saturating_sub(1), (start + len + 1).min(width));
            if start + len <= width && !self.taken[from..to].iter().any(|&t| t) {
                for (i, ch) in label.chars().enumerate() {
                    self.chars[start + i] = ch;
                }
                self.taken[start..start + len].fill(true);
                return true;
            }
        }
        false
    }

    fn text(&self) -> String {
        self.chars.iter().collect::<String>().trim_end().to_string()
    }
}

pub fn render(map: &Heatmap, style: TermStyle) -> String {
    let mut out = String::new();
    let cols = map.cols;
    let col_bytes = map.col_bytes();

    // Time labels in the left margin.
    let every = map.rows.div_ceil(10).max(1);
    let decimals = human::seconds_decimals(every as f64 * map.row_ns());
    let time_labels: Vec<Option<String>> = (0..map.rows)
        .map(|r| (r % every == 0).then(|| human::seconds(map.time_at(r as f64), decimals)))
        .collect();
    let margin = time_labels
        .iter()
        .flatten()
        .map(String::len)
        .max()
        .unwrap_or(0)
        + 1;
    let pad = " ".repeat(margin);

    title_text(&mut out, map);
    let (hex_line, tick_line, step) = address_lines(map);
    let _ = writeln!(out, "{pad}{hex_line}");
    let _ = writeln!(out, "{pad}{tick_line}");
    cells_text(&mut out, map, style, &time_labels, margin);
    let _ = writeln!(out, "{pad}{tick_line}");
    let _ = writeln!(out, "{pad}{}", segment_sizes_line(map, cols, col_bytes));

    footer(&mut out, map, style, step);
    out
}

/// Whose heatmap, in which unit, and which other targets the record has.
fn title_text(out: &mut String, map: &Heatmap) {
    let who = target_name(map.target, map.pid, map.cmdline.as_deref());
    let _ = writeln!(
        out,
        "# heatmap of {who}; access frequency in {}; time runs down, addresses run right",
        map.unit.label()
    );
    if !map.other_targets.is_empty() {
        let others: Vec<String> = map.other_targets.iter().map(u32::to_string).collect();
        let why = if map.busiest { "the busiest; " } else { "" };
        let _ = writeln!(
            out,
            "# ({why}other targets: {}; --target INDEX shows one)",
            human::one_line(&others.join(", "), human::TEXT_CHARS)
        );
    }
}

/// The address labels and the tick line under them, with the tick step. Ticks at segment
/// starts (the left edge, after each collapsed gap) and round addresses, labelled where they
/// fit; segment starts win. Collapsed gaps are marked '/'.
fn address_lines(map: &Heatmap) -> (String, String, u64) {
    let cols = map.cols;
    let col_bytes = map.col_bytes();
    let label_width = human::hex(map.axis.end()).len() + 2;
    let (ticks, step) = map.axis.ticks(cols / label_width);
    let col_of = |offset: u64| ((offset as f64 / col_bytes).floor() as usize).min(cols - 1);
    let mut hex_line = LabelLine::new(cols);
    let mut tick_line = vec![' '; cols];
    for tick in &ticks {
        let c = col_of(tick.offset);
        if hex_line.place(c, &human::hex(tick.address)) && tick_line[c] == ' ' {
            tick_line[c] = '|';
        }
    }
    for gap in map.axis.gaps() {
        let c = col_of(gap.offset);
        tick_line[c] = '/';
    }
    let tick_line: String = tick_line.into_iter().collect();
    (hex_line.text(), tick_line.trim_end().to_string(), step)
}

/// One line a row: its time label, then a cell a column (a colour, or a digit without
/// colour; blank where nothing was monitored).
fn cells_text(
    out: &mut String,
    map: &Heatmap,
    style: TermStyle,
    time_labels: &[Option<String>],
    margin: usize,
) {
    let cols = map.cols;
    let bg: Vec<u8> = (0..color::LEVELS)
        .map(|l| color::xterm256(color::level_rgb(l)))
        .collect();
    for (r, label) in time_labels.iter().enumerate() {
        let _ = write!(
            out,
            "{:>w$} ",
            label.as_deref().unwrap_or(""),
            w = margin - 1
        );
        let mut current: Option<u8> = None;
        for c in 0..cols {
            match map.cell(r, c) {
                None => {
                    if current.take().is_some() {
                        out.push_str(RESET);
                    }
                    out.push(' ');
                }
                Some(v) => {
                    let level = color::level(v, map.max);
                    if style.color {
                        let colour = bg[usize::from(level)];
                        if current != Some(colour) {
                            let _ = write!(out, "\x1b[48;5;{colour}m");
                            current = Some(colour);
                        }
                        out.push(' ');
                    } else {
                        out.push(char::from(b'0' + level));
                    }
                }
            }
        }
        if current.is_some() {
            out.push_str(RESET);
        }
        out.push('\n');
    }
}

/// Each segment's size, as `<-- 12 MiB -->` across the columns it fills.
fn segment_sizes_line(map: &Heatmap, cols: usize, col_bytes: f64) -> String {
    let mut size_line = vec![' '; cols];
    let mut offset = 0;
    for seg in &map.axis.segments {
        let len = seg.end - seg.start;
        let c0 = ((offset as f64 / col_bytes).ceil() as usize).min(cols);
        let c1 = (((offset + len) as f64 / col_bytes).floor() as usize).min(cols);
        offset += len;
        let label = format!(" {} ", human::size_short(len));
        let room = c1.saturating_sub(c0);
        if room < label.len() + 2 {
            continue;
        }
        let dashes = room - label.len() - 2;
        let text = format!(
            "<{}{label}{}>",
            "-".repeat(dashes / 2),
            "-".repeat(dashes - dashes / 2)
        );
        for (i, ch) in text.chars().enumerate() {
            size_line[c0 + i] = ch;
        }
    }
    let size_line: String = size_line.into_iter().collect();
    size_line.trim_end().to_string()
}

/// What the axes span and what the marks mean, below the picture.
fn footer(out: &mut String, map: &Heatmap, style: TermStyle, tick_step: u64) {
    x_axis_text(out, map, tick_step);
    let _ = writeln!(
        out,
        "# y: time {} - {} ({}); {} per row",
        human::duration(map.start_ns),
        human::duration(map.end_ns),
        human::duration(map.end_ns - map.start_ns),
        human::duration(map.row_ns().round() as u64)
    );
    if !map.mappings.is_empty() {
        mappings_text(out, map);
    }
    if map.areas.len() > 1 {
        areas_text(out, map);
    }
    legend_text(out, map, style);
}

/// The addresses shown, the gaps collapsed among them, and the bytes a column holds.
fn x_axis_text(out: &mut String, map: &Heatmap, tick_step: u64) {
    let gaps = map.axis.gaps();
    let mut x = format!(
        "# x: addresses {}-{}, {} shown",
        human::hex(map.axis.start()),
        human::hex(map.axis.end()),
        human::size(map.axis.len())
    );
    if !gaps.is_empty() {
        let list: Vec<String> = gaps
            .iter()
            .take(3)
            .map(|g| {
                format!(
                    "{} at {}",
                    human::size_short(g.end - g.start),
                    human::hex(g.start)
                )
            })
            .collect();
        let more = if gaps.len() > 3 { ", ..." } else { "" };
        let _ = write!(
            x,
            "; {} never-monitored gap{} collapsed at '/' ({}{more})",
            gaps.len(),
            if gaps.len() == 1 { "" } else { "s" },
            list.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "{x}; {} per column, ticks at multiples of {}",
        human::size(map.col_bytes().round() as u64),
        human::size_short(tick_step)
    );
}

/// Mappings at least a column wide, named with their columns; the rest only counted.
fn mappings_text(out: &mut String, map: &Heatmap) {
    let col = |offset: u64| (offset as f64 / map.col_bytes()) as usize;
    let (wide, narrow): (Vec<_>, Vec<_>) = map
        .mappings
        .iter()
        .partition(|m| (m.to - m.from) as f64 >= map.col_bytes());
    let mut list: Vec<String> = wide
        .iter()
        .map(|m| {
            let (from, to) = (col(m.from), col(m.to - 1));
            let cols = if from == to {
                format!("column {from}")
            } else {
                format!("columns {from}-{to}")
            };
            format!("{} {cols}", human::one_line(&m.name, 60))
        })
        .collect();
    if !narrow.is_empty() {
        list.push(format!("{} narrower than a column", narrow.len()));
    }
    let _ = writeln!(out, "# mappings: {}", list.join(", "));
}

/// The target's hot areas, the one shown marked.
fn areas_text(out: &mut String, map: &Heatmap) {
    let list: Vec<String> = map
        .areas
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mark = if map.area == Some(i) { "*" } else { "" };
            format!(
                "{mark}{}-{} ({})",
                human::hex(a.start),
                human::hex(a.end),
                human::size_short(a.covered_bytes)
            )
        })
        .collect();
    let how = if map.area.is_some() {
        "; * = shown, the hottest per byte (pick others by address range, or show all)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "# areas of target {}: {}{how}",
        map.target,
        list.join(", ")
    );
}

/// What each colour or digit stands for, in the heatmap's unit.
fn legend_text(out: &mut String, map: &Heatmap, style: TermStyle) {
    let mut legend = String::from("# legend:");
    for level in 0..color::LEVELS {
        if style.color {
            let bg = color::xterm256(color::level_rgb(level));
            let fg = color::level_fg(level);
            let _ = write!(legend, " \x1b[48;5;{bg}m\x1b[38;5;{fg}m {level} {RESET}");
        } else {
            let _ = write!(legend, " {level}");
        }
    }
    let _ = writeln!(out, "{legend}");
    let unit = map.unit.label();
    if map.max > 0.0 {
        let step = human::number(color::level_upper(1, map.max));
        let _ = writeln!(
            out,
            "#   0 = no access; 1-9 = above 0 up to {} {unit}, in steps of {step} {unit}; blank = not monitored",
            human::number(map.max)
        );
    } else {
        let _ = writeln!(
            out,
            "#   0 = no access (nothing here was accessed); blank = not monitored"
        );
    }
}
