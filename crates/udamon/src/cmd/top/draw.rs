//! top's screen: a title line, the heatmap (time runs down, two windows per text row with
//! half blocks, addresses run right) with the working-set curve under it, the hottest
//! mappings and functions beside them, the source's and udamon's own health, and the keys.
//! Numbers come from the report crate ([`udamon_report::live`]) and are printed with its
//! [`human`] formats, as the text reports print them.

use super::state::{KEYS, Popup, State};
use super::usage::Usage;
use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Cell, Chart, Clear, Dataset, GraphType, List, ListItem, ListState, Paragraph, Row,
    Table,
};
use udamon_report::heatmap::Heatmap;
use udamon_report::{color, human};

/// Width of the side column (mappings, functions) when the terminal is wide enough for it.
const SIDE: u16 = 60;
/// Height of the working-set chart.
const CURVE: u16 = 8;
/// Columns of the heatmap's time labels.
const MARGIN: u16 = 9;

pub fn screen(f: &mut Frame<'_>, state: &mut State, usage: &Usage) {
    let [title, body, health, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(6),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(title_line(state)), title);
    let (main, side) = if body.width >= 100 {
        let [main, side] =
            Layout::horizontal([Constraint::Min(40), Constraint::Length(SIDE)]).areas(body);
        (main, Some(side))
    } else {
        (body, None)
    };
    let [map, curve] =
        Layout::vertical([Constraint::Min(4), Constraint::Length(CURVE)]).areas(main);
    heatmap(f, map, state);
    working_set(f, curve, state);
    if let Some(side) = side {
        let [top, bottom] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(side);
        mappings(f, top, state);
        functions(f, bottom, state);
    }
    f.render_widget(Paragraph::new(health_line(state, usage)), health);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                " q quit  ? keys  p pause  t target  +/- zoom  ←→ pan  ↑↓ time  [ ] rows  a areas  0 reset",
                Style::new().fg(Color::Black).bg(Color::Gray),
            ),
        ]))
        .style(Style::new().bg(Color::Gray)),
        keys,
    );
    match state.popup {
        Some(Popup::Keys) => keys_popup(f, body),
        Some(Popup::Targets(row)) => targets_popup(f, body, state, row),
        None => {}
    }
}

fn title_line(state: &State) -> Line<'static> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut spans = vec![Span::styled(
        " udamon top ",
        bold.fg(Color::Black).bg(Color::Cyan),
    )];
    // What state the view is in first, so that a narrow terminal still shows it.
    if let Some(why) = &state.ended {
        spans.push(Span::styled(
            format!(" ENDED: {} ", human::one_line(why, 40)),
            bold.fg(Color::Black).bg(Color::LightRed),
        ));
    }
    if state.paused() {
        spans.push(Span::styled(
            " PAUSED ",
            bold.fg(Color::Black).bg(Color::Yellow),
        ));
    }
    let Some(live) = &state.live else {
        let waiting = match &state.serving {
            Some(t) => format!(" waiting for a window of served target {t}"),
            None => " waiting for the first window".to_string(),
        };
        spans.push(Span::raw(waiting));
        return Line::from(spans);
    };
    let target = state.target();
    let h = live.header();
    if let Some(latest) = target.and_then(|t| live.latest(t)) {
        spans.push(Span::raw(format!(
            " {} · {} windows · {} · {} regions, {} monitored ·",
            h.access_source.name,
            human::duration(latest.aggr_us * 1000),
            human::duration(latest.end_ns),
            latest.nr_regions,
            human::size_short(latest.monitored_bytes),
        )));
    } else {
        spans.push(Span::raw(format!(" {} ·", h.access_source.name)));
    }
    if let Some(t) = target {
        let who = live.targets().into_iter().find(|r| r.target == t);
        let mut name = format!(" target {t}");
        if let Some(info) = who.and_then(|r| r.info) {
            if let Some(pid) = info.pid {
                name.push_str(&format!(", pid {pid}"));
            }
            name.push_str(&format!(": {}", human::one_line(&info.cmdline, 60)));
        }
        spans.push(Span::styled(name, bold));
    }
    Line::from(spans)
}

/// The terminal colour of each level, looked up once: finding the nearest of the 256
/// colours for every cell of every frame would cost more than all the rest of drawing.
fn level_colours() -> &'static [Color] {
    static COLOURS: std::sync::OnceLock<Vec<Color>> = std::sync::OnceLock::new();
    COLOURS.get_or_init(|| {
        (0..color::LEVELS)
            .map(|l| Color::Indexed(color::xterm256(color::level_rgb(l))))
            .collect()
    })
}

/// The terminal colour of a cell's value.
fn cell_colour(value: Option<f64>, max: f64) -> Option<Color> {
    Some(level_colours()[usize::from(color::level(value?, max))])
}

fn heatmap(f: &mut Frame<'_>, area: Rect, state: &mut State) {
    let mut title = " heatmap: time runs down, addresses right".to_string();
    if state.all_areas {
        title.push_str(" (every area)");
    }
    let span = state.zoom.1 - state.zoom.0;
    if span < 1.0 {
        title.push_str(&format!(" ×{}", human::trimmed(1.0 / span, 1)));
    }
    title.push(' ');
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    // Address labels, mapping names, legend: three rows; the rest hold two time rows each.
    if inner.height < 5 || inner.width <= MARGIN + 8 {
        return;
    }
    let text_rows = inner.height - 3;
    let cols = (inner.width - MARGIN) as usize;
    let Some(target) = state.target() else {
        return;
    };
    let view = state.heat_view(target, text_rows as usize * 2, cols);
    let Some(map) = state.live.as_mut().and_then(|l| l.heatmap(&view)) else {
        return;
    };
    let buf = f.buffer_mut();
    let top = inner.y;
    let left = inner.x + MARGIN;
    address_labels(buf, Rect::new(left, top, cols as u16, 1), &map);
    mapping_labels(buf, Rect::new(left, top + 1, cols as u16, 1), &map);
    let every = 4;
    for y in 0..text_rows {
        let (upper, lower) = (2 * y as usize, 2 * y as usize + 1);
        if y % every == 0 {
            let label = human::seconds(map.time_at(upper as f64), 1);
            buf.set_string(inner.x, top + 2 + y, format!("{label:>8}"), Style::new());
        }
        for c in 0..cols {
            let up = cell_colour(map.cell(upper, c), map.max);
            let down = cell_colour(map.cell(lower, c), map.max);
            let cell = &mut buf[(left + c as u16, top + 2 + y)];
            match (up, down) {
                (None, None) => {
                    cell.set_char(' ');
                }
                (Some(u), d) => {
                    cell.set_char('▀')
                        .set_fg(u)
                        .set_bg(d.unwrap_or(Color::Reset));
                }
                (None, Some(d)) => {
                    cell.set_char('▄').set_fg(d).set_bg(Color::Reset);
                }
            }
        }
    }
    legend(
        buf,
        Rect::new(inner.x, top + 2 + text_rows, inner.width, 1),
        &map,
        state.windows_per_row,
    );
}

/// The first and last addresses shown, and one in the middle where it fits.
fn address_labels(buf: &mut Buffer, area: Rect, map: &Heatmap) {
    let dim = Style::new().fg(Color::DarkGray);
    let first = human::hex(map.axis.start());
    let last = human::hex(map.axis.end());
    buf.set_string(area.x, area.y, &first, dim);
    let width = area.width as usize;
    if first.len() + last.len() + 2 <= width {
        buf.set_string(area.x + (width - last.len()) as u16, area.y, &last, dim);
    }
    let middle = human::hex(map.axis.address_at(map.axis.len() as f64 / 2.0));
    let at = width / 2 - middle.len().min(width / 2) / 2;
    if first.len() + 2 <= at && at + middle.len() + 2 + last.len() <= width {
        buf.set_string(area.x + at as u16, area.y, &middle, dim);
    }
}

/// Each mapping's name where its span starts, when there is room for it.
fn mapping_labels(buf: &mut Buffer, area: Rect, map: &Heatmap) {
    let width = area.width as usize;
    let per_col = map.col_bytes();
    let mut free = 0;
    for span in &map.mappings {
        let col = (span.from as f64 / per_col) as usize;
        let cols = ((span.to - span.from) as f64 / per_col).ceil() as usize;
        if col < free || col >= width || cols < 3 {
            continue;
        }
        let name = short_name(&span.name);
        let room = (width - col).min(cols.max(name.chars().count() + 1));
        let text: String = format!("▏{name}").chars().take(room).collect();
        buf.set_string(
            area.x + col as u16,
            area.y,
            &text,
            Style::new().fg(Color::Cyan),
        );
        free = col + text.chars().count() + 1;
    }
}

/// A mapping's name for a narrow column: a file's name without its directory.
fn short_name(name: &str) -> String {
    let short = if name.starts_with('/') {
        name.rsplit('/').next().unwrap_or(name)
    } else {
        name
    };
    human::one_line(short, 24)
}

fn legend(buf: &mut Buffer, area: Rect, map: &Heatmap, windows_per_row: usize) {
    let mut x = area.x;
    let mut put = |buf: &mut Buffer, text: &str, style: Style| {
        buf.set_string(x, area.y, text, style);
        x += text.chars().count() as u16;
    };
    put(buf, " 0 Hz ", Style::new());
    for &c in level_colours() {
        put(buf, "█", Style::new().fg(c));
    }
    let per_row = human::duration(map.row_ns().round() as u64);
    put(
        buf,
        &format!(
            " {} Hz · {} window{} per half row ({per_row}) · {} per column",
            human::number(map.max),
            windows_per_row,
            if windows_per_row == 1 { "" } else { "s" },
            human::size_short(map.col_bytes().round() as u64),
        ),
        Style::new(),
    );
}

fn working_set(f: &mut Frame<'_>, area: Rect, state: &State) {
    let block = Block::bordered().title(" working set: bytes accessed per window ");
    let (Some(live), Some(target)) = (&state.live, state.target()) else {
        f.render_widget(block, area);
        return;
    };
    let points: Vec<(f64, f64)> = live
        .wss_series(target)
        .map(|(t, b)| (t as f64 / 1e9, b as f64))
        .collect();
    // One point per column (half blocks: every terminal font has them, unlike braille): a
    // bucket's highest value per point.
    let dots = (area.width as usize).saturating_sub(12);
    let points = downsample(&points, dots.max(2));
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        f.render_widget(block, area);
        return;
    };
    let top = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0);
    let now = live.latest(target).map_or(0, |l| l.wss_bytes);
    let block = block.title(format!(" now {} ", human::size(now)));
    let data = [Dataset::default()
        .marker(Marker::HalfBlock)
        .graph_type(GraphType::Line)
        .style(Style::new().fg(Color::Yellow))
        .data(&points)];
    let chart = Chart::new(data.to_vec())
        .block(block)
        .x_axis(
            Axis::default()
                .bounds([first.0, last.0.max(first.0 + 1e-3)])
                .labels([
                    human::seconds((first.0 * 1e9) as u64, 1),
                    human::seconds((last.0 * 1e9) as u64, 1),
                ]),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, top * 1.05])
                .labels(["0 B".to_string(), human::size_short(top as u64)]),
        );
    f.render_widget(chart, area);
}

/// At most `n` points: the highest of each run of consecutive ones.
fn downsample(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    if points.len() <= n {
        return points.to_vec();
    }
    points
        .chunks(points.len().div_ceil(n))
        .map(|c| {
            let top = c.iter().map(|p| p.1).fold(0.0, f64::max);
            (c[c.len() - 1].0, top)
        })
        .collect()
}

fn mappings(f: &mut Frame<'_>, area: Rect, state: &mut State) {
    let block = Block::bordered().title(" hottest mappings (mean bytes) ");
    let target = state.target();
    let Some(report) = state.live.as_mut().and_then(|l| l.mappings()) else {
        let why = if state.watches_serve() {
            "no mappings: udamon serve sends its windows only; `udamon top --pid PID` shows them"
        } else {
            "no mappings: a simulation, or a record without them"
        };
        f.render_widget(
            Paragraph::new(why)
                .wrap(ratatui::widgets::Wrap { trim: true })
                .block(block),
            area,
        );
        return;
    };
    let rows: Vec<Row> = report
        .mappings
        .iter()
        .filter(|m| Some(m.target) == target)
        .take(area.height as usize)
        .map(|m| {
            // A library maps its text, constants and data apart: the permissions tell them so,
            // first, where a long name's cut cannot take them.
            let perms = m.perms.get(..3).unwrap_or(&m.perms);
            Row::new(vec![
                Cell::from(format!("{perms} {}", short_name(&m.name))),
                Cell::from(human::size_short(m.working_set_bytes)),
                Cell::from(human::size_short(m.hot_bytes)),
                Cell::from(human::size_short(m.warm_bytes)),
                Cell::from(human::size_short(m.cold_bytes)),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Min(14),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
    )
    .header(Row::new(["mapping", "ws", "hot", "warm", "cold"]).style(Style::new().bold()))
    .block(block);
    f.render_widget(table, area);
}

fn functions(f: &mut Frame<'_>, area: Rect, state: &mut State) {
    let block = Block::bordered().title(" hottest functions (samples in hot memory) ");
    let Some(report) = state.live.as_mut().and_then(|l| l.code()) else {
        let why = if state.watches_serve() {
            "no samples: udamon serve sends its windows only; `udamon top --pid PID` shows them"
        } else {
            "no samples: a simulation, or no sample has fallen in hot memory yet"
        };
        f.render_widget(
            Paragraph::new(why)
                .wrap(ratatui::widgets::Wrap { trim: true })
                .block(block),
            area,
        );
        return;
    };
    let rows: Vec<Row> = report
        .functions
        .iter()
        .take(area.height as usize)
        .map(|r| {
            let object = r.object.as_deref().map(short_name).unwrap_or_default();
            let name = match &r.function {
                Some(function) => format!("{function} ({object})"),
                None => format!("? ({object})"),
            };
            Row::new(vec![
                Cell::from(format!("{:>5.1}%", r.share * 100.0)),
                Cell::from(r.samples.to_string()),
                Cell::from(name),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(["share", "samples", "function (object)"]).style(Style::new().bold()))
    .block(block);
    f.render_widget(table, area);
}

fn health_line(state: &State, usage: &Usage) -> Line<'static> {
    let mut text = String::from(" ");
    match state.live.as_ref().and_then(|l| l.counters()) {
        Some(c) => {
            let get = |k: &str| c.get(k).copied().unwrap_or(0);
            let dropped: u64 = c
                .iter()
                .filter(|(k, _)| k.starts_with("dropped_"))
                .map(|(_, v)| v)
                .sum();
            text.push_str(&format!(
                "source: {} samples, {} recovered, {dropped} dropped, {} lost",
                get("samples"),
                get("recovered"),
                get("lost")
            ));
        }
        None => match &state.live {
            Some(l) if l.header().access_source.name == "sim" => {
                text.push_str("source: simulated, every access seen")
            }
            _ => text.push_str("source: no counters yet"),
        },
    }
    text.push_str(&format!(
        "  ·  udamon: {:.1}% CPU, {}  ·  drawing {:.2}% of a core",
        usage.cpu_percent,
        human::size_short(usage.rss_bytes),
        usage.draw_percent
    ));
    if let Some(status) = &state.status {
        text.push_str(&format!("  ·  {}", human::one_line(status, 80)));
    }
    Line::from(text)
}

fn centred(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn keys_popup(f: &mut Frame<'_>, area: Rect) {
    let rows: Vec<Row> = KEYS
        .iter()
        .map(|(k, what)| Row::new(vec![Cell::from(*k), Cell::from(*what)]))
        .collect();
    let popup = centred(area, 72, KEYS.len() as u16 + 2);
    f.render_widget(Clear, popup);
    f.render_widget(
        Table::new(rows, [Constraint::Length(16), Constraint::Min(20)])
            .block(Block::bordered().title(" keys (any key closes) ")),
        popup,
    );
}

fn targets_popup(f: &mut Frame<'_>, area: Rect, state: &State, row: usize) {
    let rows = state.target_rows();
    let items: Vec<ListItem> = rows
        .iter()
        .map(|(text, shown)| {
            let mark = if *shown { "● " } else { "  " };
            ListItem::new(format!("{mark}{}", human::one_line(text, 120)))
        })
        .collect();
    let popup = centred(
        area,
        area.width.saturating_sub(8).min(100),
        rows.len() as u16 + 2,
    );
    f.render_widget(Clear, popup);
    let list = List::new(items)
        .block(Block::bordered().title(" targets: ↑↓ choose, Enter show, Esc close "))
        .highlight_style(Style::new().bg(Color::Blue).fg(Color::White));
    let mut selected = ListState::default().with_selected(Some(row));
    f.render_stateful_widget(list, popup, &mut selected);
}
