//! What top shows and how the keys change it: the record so far ([`Live`]), the target, the
//! part of the heatmap in view (address zoom and pan, time rows, following or paused), and
//! the popups (keys, targets).

use super::feed::Feed;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use udamon_report::live::{HeatView, Live};

/// The keys, as `?` lists them.
pub const KEYS: &[(&str, &str)] = &[
    ("q, Esc", "quit (Esc closes a popup first)"),
    ("?", "show or hide this list"),
    (
        "p, space",
        "pause or resume the display (monitoring goes on)",
    ),
    ("t", "pick a target (a process tree, or serve's targets)"),
    ("+, -", "zoom in or out on addresses"),
    ("←, →  (h, l)", "pan along addresses"),
    ("↑, ↓  (k, j)", "back and forth in time (pauses)"),
    ("[, ]", "fewer or more windows per row (time zoom)"),
    ("End, f", "follow the newest window again"),
    ("a", "the hottest area or every area of the target"),
    ("0", "reset zoom and time"),
];

/// The most windows one row may hold.
const MAX_WINDOWS_PER_ROW: usize = 64;
/// The narrowest address zoom, as a fraction of the axis.
const MIN_SPAN: f64 = 1.0 / 4096.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Popup {
    Keys,
    /// The target list, and the row picked.
    Targets(usize),
}

/// Where the frames come from, for what picking a target means.
pub enum Source {
    Monitor,
    /// A `udamon serve`; picks go to the poller.
    Serve(std::sync::mpsc::Sender<String>),
}

pub struct State {
    pub live: Option<Live>,
    pub source: Source,
    /// The target shown; `None` takes the live model's default.
    pub target: Option<u32>,
    pub windows_per_row: usize,
    /// The window at the bottom row when not following the newest.
    pub newest: Option<u64>,
    pub zoom: (f64, f64),
    pub all_areas: bool,
    pub popup: Option<Popup>,
    /// Why monitoring ended, once it has.
    pub ended: Option<String>,
    /// The latest message that is not a frame.
    pub status: Option<String>,
    /// A `udamon serve`'s targets: (name, command name), and the one shown.
    pub served: Vec<(String, String)>,
    pub serving: Option<String>,
    /// Set when something shown changed.
    pub dirty: bool,
}

/// What a key asks of the loop.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    Continue,
    Quit,
}

impl State {
    pub fn new(source: Source, serving: Option<String>) -> State {
        State {
            live: None,
            source,
            target: None,
            windows_per_row: 1,
            newest: None,
            zoom: (0.0, 1.0),
            all_areas: false,
            popup: None,
            ended: None,
            status: None,
            served: Vec::new(),
            serving,
            dirty: true,
        }
    }

    /// Whether the windows come from a `udamon serve`, which sends no mappings or samples.
    pub fn watches_serve(&self) -> bool {
        matches!(self.source, Source::Serve(_))
    }

    pub fn feed(&mut self, item: Feed) {
        self.dirty = true;
        match item {
            Feed::Header(h) => {
                self.live = Some(Live::new(&h));
                self.target = None;
                self.newest = None;
                self.status = None;
            }
            Feed::Frame(f) => {
                if let Some(live) = &mut self.live {
                    live.observe(f);
                }
            }
            Feed::Served(list) => self.served = list,
            Feed::Status(s) => self.status = Some(s),
            Feed::Ended(why) => self.ended = Some(why),
        }
    }

    /// The target shown.
    pub fn target(&self) -> Option<u32> {
        self.target
            .or_else(|| self.live.as_ref().and_then(Live::default_target))
    }

    pub fn paused(&self) -> bool {
        self.newest.is_some()
    }

    /// The heatmap's view for a grid of `rows` × `cols`.
    pub fn heat_view(&self, target: u32, rows: usize, cols: usize) -> HeatView {
        HeatView {
            target,
            rows,
            cols,
            windows_per_row: self.windows_per_row,
            newest: self.newest,
            zoom: self.zoom,
            all_areas: self.all_areas,
        }
    }

    /// The newest window kept.
    fn latest_window(&self) -> Option<u64> {
        self.live.as_ref()?.kept().map(|k| k.1)
    }

    /// The rows the target list shows: a process tree, or serve's targets.
    pub fn target_rows(&self) -> Vec<(String, bool)> {
        if let Source::Serve(_) = self.source {
            return self
                .served
                .iter()
                .map(|(name, comm)| {
                    (
                        format!("{name}  {comm}"),
                        self.serving.as_deref() == Some(name),
                    )
                })
                .collect();
        }
        let shown = self.target();
        let Some(live) = &self.live else {
            return Vec::new();
        };
        live.targets()
            .into_iter()
            .map(|row| {
                let mut text = format!("{}target {}", "  ".repeat(row.depth), row.target);
                if let Some(info) = &row.info {
                    if let Some(pid) = info.pid {
                        text.push_str(&format!(", pid {pid}"));
                    }
                    text.push_str(&format!(": {}", info.cmdline));
                }
                if let Some(why) = &row.ended {
                    text.push_str(&format!(" ({why})"));
                }
                (text, shown == Some(row.target))
            })
            .collect()
    }

    pub fn key(&mut self, key: KeyEvent) -> Action {
        self.dirty = true;
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        match self.popup {
            Some(Popup::Keys) => {
                if key.code == KeyCode::Char('q') {
                    return Action::Quit;
                }
                self.popup = None;
                return Action::Continue;
            }
            Some(Popup::Targets(row)) => {
                let last = self.target_rows().len().saturating_sub(1);
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.popup = Some(Popup::Targets(row.saturating_sub(1)))
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.popup = Some(Popup::Targets((row + 1).min(last)))
                    }
                    KeyCode::Enter => {
                        self.popup = None;
                        self.pick(row);
                    }
                    KeyCode::Char('q') => return Action::Quit,
                    _ => self.popup = None,
                }
                return Action::Continue;
            }
            None => {}
        }
        let span = self.zoom.1 - self.zoom.0;
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('?') => self.popup = Some(Popup::Keys),
            KeyCode::Char('t') => {
                let current = self.target_rows().iter().position(|r| r.1).unwrap_or(0);
                self.popup = Some(Popup::Targets(current));
            }
            KeyCode::Char('p') | KeyCode::Char(' ') => {
                self.newest = match self.newest {
                    Some(_) => None,
                    None => self.latest_window(),
                }
            }
            KeyCode::Char('+') | KeyCode::Char('=') => self.zoom_to(span / 2.0),
            KeyCode::Char('-') => self.zoom_to(span * 2.0),
            KeyCode::Left | KeyCode::Char('h') => self.pan(-span / 4.0),
            KeyCode::Right | KeyCode::Char('l') => self.pan(span / 4.0),
            KeyCode::Up | KeyCode::Char('k') => self.scroll(-1),
            KeyCode::Down | KeyCode::Char('j') => self.scroll(1),
            KeyCode::Char('[') => self.windows_per_row = (self.windows_per_row / 2).max(1),
            KeyCode::Char(']') => {
                self.windows_per_row = (self.windows_per_row * 2).min(MAX_WINDOWS_PER_ROW)
            }
            KeyCode::End | KeyCode::Char('f') => self.newest = None,
            KeyCode::Char('a') => {
                self.all_areas = !self.all_areas;
                self.zoom = (0.0, 1.0);
            }
            KeyCode::Char('0') => {
                self.zoom = (0.0, 1.0);
                self.windows_per_row = 1;
                self.newest = None;
            }
            _ => self.dirty = false,
        }
        Action::Continue
    }

    /// Shows the `row`-th entry of the target list.
    fn pick(&mut self, row: usize) {
        match &self.source {
            Source::Serve(picks) => {
                if let Some((name, _)) = self.served.get(row) {
                    let _ = picks.send(name.clone());
                    self.serving = Some(name.clone());
                    self.live = None;
                }
            }
            Source::Monitor => {
                if let Some(t) = self
                    .live
                    .as_ref()
                    .and_then(|l| l.targets().get(row).cloned())
                {
                    self.target = Some(t.target);
                    self.zoom = (0.0, 1.0);
                }
            }
        }
    }

    /// Shows `span` of the address axis around the current centre.
    fn zoom_to(&mut self, span: f64) {
        let span = span.clamp(MIN_SPAN, 1.0);
        let centre = (self.zoom.0 + self.zoom.1) / 2.0;
        let lo = (centre - span / 2.0).clamp(0.0, 1.0 - span);
        self.zoom = (lo, lo + span);
    }

    fn pan(&mut self, by: f64) {
        let span = self.zoom.1 - self.zoom.0;
        let lo = (self.zoom.0 + by).clamp(0.0, 1.0 - span);
        self.zoom = (lo, lo + span);
    }

    /// Moves the bottom row by `rows` rows of windows (negative: back in time).
    fn scroll(&mut self, rows: i64) {
        let Some(live) = &self.live else { return };
        let Some((oldest, newest)) = live.kept() else {
            return;
        };
        let at = self.newest.unwrap_or(newest) as i64 + rows * self.windows_per_row as i64;
        let at = at.clamp(oldest as i64, newest as i64) as u64;
        self.newest = Some(at);
    }
}
