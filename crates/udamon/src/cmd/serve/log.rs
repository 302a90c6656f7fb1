//! The service's log: one line per event on stderr, in a form journald understands. Under
//! systemd (which sets `JOURNAL_STREAM`) each line starts with its syslog priority (`<6>` info,
//! `<4>` warning, `<3>` error), which journald files as the entry's priority and strips;
//! elsewhere the line starts with `udamon:` as the other commands' messages do.
//!
//! What a line quotes may come from anyone (a process's name, a client's request), so control
//! characters are escaped: no one can split an entry or write to the reader's terminal. Lines
//! that others can cause again and again (a client's refused requests, a failing `accept`)
//! go through [`limited`], so that a flood costs a few lines and a count, not the disk.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn line(priority: u8, text: &str) {
    let text = escape(text);
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        eprintln!("<{priority}>{text}");
    } else {
        eprintln!("udamon: {text}");
    }
}

/// `text` on one line, control characters written as escapes (`\n`, `\u{1b}`).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

pub fn info(text: &str) {
    line(6, text);
}

pub fn warn(text: &str) {
    line(4, text);
}

pub fn error(text: &str) {
    line(3, text);
}

/// How many lines of one kind are written per [`WINDOW`]; the rest are counted.
const BURST: u32 = 10;
const WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
}

struct Kind {
    since: Instant,
    written: u32,
    left_out: u64,
    level: Level,
}

static KINDS: Mutex<Option<HashMap<&'static str, Kind>>> = Mutex::new(None);

/// Writes a line of `kind` unless [`BURST`] of that kind were written in the last [`WINDOW`];
/// the first line written after some were left out says how many.
pub fn limited(level: Level, kind: &'static str, text: &str) {
    let Some(left_out) = admit(kind, level, Instant::now()) else {
        return;
    };
    let text = match left_out {
        0 => text.to_string(),
        n => format!("{text} ({n} more like this left out of the log)"),
    };
    match level {
        Level::Info => info(&text),
        Level::Warn => warn(&text),
    }
}

/// Whether a line of `kind` may be written at `now`, and how many were left out before it.
fn admit(kind: &'static str, level: Level, now: Instant) -> Option<u64> {
    let mut kinds = KINDS.lock().unwrap_or_else(|e| e.into_inner());
    let kind = kinds
        .get_or_insert_with(HashMap::new)
        .entry(kind)
        .or_insert(Kind {
            since: now,
            written: 0,
            left_out: 0,
            level,
        });
    if now.saturating_duration_since(kind.since) >= WINDOW {
        kind.since = now;
        kind.written = 0;
    }
    if kind.written >= BURST {
        kind.left_out += 1;
        return None;
    }
    kind.written += 1;
    Some(std::mem::take(&mut kind.left_out))
}

/// Says how many lines of each kind were left out in a window that has ended: a flood that
/// stopped has no next line of its kind to carry the count. Called from the serving loop.
pub fn say_left_out() {
    for (kind, level, n) in left_out_due(Instant::now()) {
        let text = format!("{n} more \"{kind}\" lines left out of the log in the last {WINDOW:?}");
        match level {
            Level::Info => info(&text),
            Level::Warn => warn(&text),
        }
    }
}

/// The kinds whose window ended by `now` with lines left out, and how many; their windows
/// start again.
fn left_out_due(now: Instant) -> Vec<(&'static str, Level, u64)> {
    let mut kinds = KINDS.lock().unwrap_or_else(|e| e.into_inner());
    let mut due = Vec::new();
    for (name, kind) in kinds.iter_mut().flatten() {
        if kind.left_out > 0 && now.saturating_duration_since(kind.since) >= WINDOW {
            due.push((*name, kind.level, std::mem::take(&mut kind.left_out)));
            kind.since = now;
            kind.written = 0;
        }
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_one_kind_costs_a_burst_and_a_count() {
        let start = Instant::now();
        let admitted = (0..1000)
            .filter(|_| admit("test flood", Level::Warn, start).is_some())
            .count();
        assert_eq!(admitted, BURST as usize);
        assert_eq!(
            admit("test other", Level::Warn, start),
            Some(0),
            "kinds are apart"
        );
        let later = start + WINDOW;
        assert_eq!(
            admit("test flood", Level::Warn, later),
            Some(1000 - u64::from(BURST))
        );
        assert_eq!(admit("test flood", Level::Warn, later), Some(0));
    }

    #[test]
    fn a_flood_that_stops_is_counted_once_its_window_ends() {
        let start = Instant::now();
        for _ in 0..25 {
            admit("test stopped", Level::Info, start);
        }
        let mine = |due: Vec<(&'static str, Level, u64)>| {
            due.into_iter()
                .filter(|(kind, ..)| *kind == "test stopped")
                .collect::<Vec<_>>()
        };
        assert!(mine(left_out_due(start)).is_empty(), "its window is on");
        assert_eq!(
            mine(left_out_due(start + WINDOW)),
            [("test stopped", Level::Info, 25 - u64::from(BURST))]
        );
        assert!(
            mine(left_out_due(start + 2 * WINDOW)).is_empty(),
            "said once"
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("a\nb\x1b[31mc\td"), "a\\nb\\u{1b}[31mc\\td");
        assert_eq!(escape("plain é"), "plain é");
    }
}
