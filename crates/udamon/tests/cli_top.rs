//! `udamon top` as a person sees it: run in a terminal (tmux), typed at (send-keys), read off
//! the screen (capture-pane). It draws, follows the keys, quits on `q`, SIGTERM or a panic,
//! and every way out leaves the terminal as it found it: the main screen back, the line
//! discipline cooked (`stty -a` shows `icanon` and `echo`), the record complete.

mod common;

use common::screen::{self, Tmux, tmux};
use common::serve::Serve;
use common::*;
use std::time::{Duration, Instant};

const SIZE: (u16, u16) = (160, 46);

fn udamon_path() -> String {
    env!("CARGO_BIN_EXE_udamon").to_string()
}

/// Runs `udamon top ARGS` in a terminal; when it ends, its status and the terminal's modes
/// are written below it.
fn top(args: &str, env: &str) -> Tmux {
    Tmux::start(
        &format!(
            "{env} {} top {args}; echo TOP_EXIT=$?; echo MODES: $(stty -a | tr '\\n' ' ')",
            udamon_path()
        ),
        SIZE,
    )
}

/// After top ended: its exit status, with the terminal checked to be as before.
fn ended(t: &Tmux) -> i32 {
    t.wait_for("MODES:", 30);
    let screen = t.capture_all();
    let status = screen
        .split("TOP_EXIT=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exit status:\n{screen}"));
    let modes = screen.split("MODES:").nth(1).unwrap();
    let words: Vec<&str> = modes.split_whitespace().collect();
    for cooked in ["icanon", "echo", "isig"] {
        assert!(
            words.contains(&cooked),
            "the terminal is left without {cooked}: {modes}"
        );
    }
    assert!(
        !screen.contains("working set: bytes accessed"),
        "top's screen is left up:\n{screen}"
    );
    status
}

/// The pid of top itself: the pane's shell's child.
fn top_pid(t: &Tmux) -> u32 {
    let shell = t.pane_pid();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(&pid) = screen::children(shell).first() {
            return pid;
        }
        assert!(Instant::now() < deadline, "top did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The heatmap as drawn, read off the screen's colours: for each text row (oldest first), each
/// column's level from 0 (no access) to 9 (the highest frequency in view), the hotter of the
/// row's two windows (`▀`'s upper and lower half); `None` where neither was monitored. The
/// levels are the legend's ramp (`0 Hz ██████████ 200 Hz`).
fn heat_levels(ansi: &str) -> Vec<Vec<Option<usize>>> {
    let lines = screen::cells(ansi);
    let text = |l: &[screen::Cell]| l.iter().map(|c| c.ch).collect::<String>();
    let legend = lines
        .iter()
        .position(|l| text(l).contains(" Hz █"))
        .unwrap_or_else(|| panic!("no legend:\n{ansi}"));
    let ramp: Vec<u8> = lines[legend]
        .iter()
        .filter(|c| c.ch == '█')
        .filter_map(|c| c.fg)
        .collect();
    assert_eq!(
        ramp.len(),
        10,
        "the legend's ramp: {}",
        text(&lines[legend])
    );
    let level = |c: Option<u8>| c.and_then(|c| ramp.iter().position(|&r| r == c));
    let rows: Vec<&Vec<screen::Cell>> = lines[..legend]
        .iter()
        .filter(|l| l.iter().any(|c| c.ch == '▀' && level(c.fg).is_some()))
        .collect();
    let start = rows
        .iter()
        .filter_map(|l| l.iter().position(|c| c.ch == '▀'))
        .min()
        .unwrap_or_else(|| panic!("no heatmap rows:\n{ansi}"));
    rows.iter()
        .map(|l| {
            l[start..]
                .iter()
                .take_while(|c| c.ch != '│')
                .map(|c| match c.ch {
                    '▀' => level(c.fg).max(level(c.bg)),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// The heatmap's address axis: its labels, lowest first.
fn address_labels(screen: &str) -> Vec<u64> {
    let axis = screen
        .lines()
        .find(|l| l.contains("0x"))
        .unwrap_or_else(|| panic!("no address axis:\n{screen}"));
    axis.split(|c: char| c.is_whitespace() || c == '│' || c == '▏')
        .filter_map(|w| w.strip_prefix("0x"))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .collect()
}

/// The time monitored, in seconds, as the title writes it (`300 ms`, `1.9 s`); -1 if none.
fn time(screen: &str) -> f64 {
    let after = screen.split("ms windows · ").nth(1).unwrap_or("");
    let mut words = after.split(' ');
    let value: Option<f64> = words.next().and_then(|v| v.parse().ok());
    match (value, words.next()) {
        (Some(v), Some("ms")) => v / 1e3,
        (Some(v), Some("s")) => v,
        _ => -1.0,
    }
}

macro_rules! need_tmux {
    () => {
        if let Err(why) = tmux() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

#[test]
fn top_draws_follows_the_keys_and_quits_leaving_the_terminal_as_it_was() {
    need_tmux!();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("top.data");
    let t = top(&format!("--sim builtin:demo -o {}", record.display()), "");
    let screen = t.wait_for(" regions, ", 30);
    assert!(screen.contains("udamon top"), "{screen}");
    assert!(screen.contains("target 0: demo.cfg"), "{screen}");
    assert!(screen.contains("heatmap: time runs down"), "{screen}");
    assert!(screen.contains("source: simulated"), "{screen}");
    // Windows arrive: the time shown moves on.
    let first = time(&screen);
    let later = t.wait_until(10, "the time to move on", |s| time(s) > first);
    assert!(time(&later) > first);

    // The picture: in the first 12 s of the demo its hot area is hot_a, the highest 64 MiB of
    // the 1.9 GiB shown (3 % of the columns), beside warm memory (256 MiB) and 1.4 GiB never
    // touched (cold, and the scans not yet begun).
    let heat = heat_levels(&t.capture_ansi());
    let newest = heat.last().unwrap();
    let cols = newest.len();
    assert!(cols > 80, "{cols} columns");
    let hottest = newest.iter().flatten().max().copied();
    assert_eq!(
        hottest,
        Some(9),
        "the hottest in view has the top colour: {newest:?}"
    );
    let hot: Vec<usize> = (0..cols).filter(|&c| newest[c] >= Some(8)).collect();
    assert!(
        !hot.is_empty() && hot.iter().all(|&c| c >= cols * 9 / 10),
        "the hot columns are hot_a's, at the right end: {hot:?} of {cols}"
    );
    let cold = newest.iter().filter(|l| **l == Some(0)).count();
    assert!(
        cold >= cols / 2,
        "{cold} of {cols} columns untouched: {newest:?}"
    );

    t.send(&["?"]);
    t.wait_for("keys (any key closes)", 5);
    t.send(&["Escape"]);
    t.wait_until(5, "the keys to close", |s| {
        !s.contains("keys (any key closes)")
    });
    t.send(&["p"]);
    let paused = t.wait_for("PAUSED", 5);
    // The picture once the pause's redraw has reached the terminal.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut paused_heat = heat_levels(&t.capture_ansi());
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let again = heat_levels(&t.capture_ansi());
        if again == paused_heat {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the paused picture keeps changing"
        );
        paused_heat = again;
    }
    // Paused, the picture stands still; monitoring goes on (the record below has the windows
    // since).
    std::thread::sleep(Duration::from_millis(1500));
    let still = t.capture();
    assert!(
        time(&still) > time(&paused) + 1.0,
        "monitoring goes on:\n{still}"
    );
    assert_eq!(
        heat_levels(&t.capture_ansi()),
        paused_heat,
        "the paused picture changed"
    );
    let whole = address_labels(&paused);
    t.send(&["+"]);
    let zoomed = address_labels(&t.wait_for("×2", 5));
    assert!(
        zoomed[0] > whole[0] && zoomed.last() < whole.last(),
        "zooming in narrows the addresses: {whole:x?} to {zoomed:x?}"
    );
    t.send(&["l"]);
    let panned = t.wait_until(5, "the addresses to pan right", |s| {
        address_labels(s)[0] > zoomed[0]
    });
    assert!(address_labels(&panned).last() > zoomed.last());
    t.send(&["]"]);
    t.wait_for("2 windows per half row", 5);
    t.send(&["t"]);
    t.wait_for("targets: ↑↓ choose", 5);
    t.send(&["Enter"]);
    t.send(&["0"]);
    t.wait_until(5, "the zoom to reset", |s| {
        !s.contains("×2") && s.contains("1 window per")
    });
    t.send(&["q"]);
    assert_eq!(ended(&t), 0);
    let i = info(&record);
    assert_eq!(i["finished"], true, "a complete record: {i}");
    let windows_at_pause = (time(&paused) * 10.0) as u64;
    assert!(
        i["nr_snapshots"].as_u64().unwrap() > windows_at_pause + 10,
        "monitoring went on while paused ({windows_at_pause} windows then): {i}"
    );
}

#[test]
fn sigterm_ends_top_with_the_terminal_restored_and_the_record_complete() {
    need_tmux!();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("top.data");
    let t = top(&format!("--sim builtin:demo -o {}", record.display()), "");
    t.wait_for(" regions, ", 30);
    let pid = top_pid(&t);
    // SAFETY: a signal to the process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    assert_eq!(ended(&t), 0);
    let i = info(&record);
    assert_eq!(i["finished"], true, "{i}");
    let stopped = i["events"]["lifecycle"].to_string();
    assert!(stopped.contains("interrupted by a signal"), "{stopped}");
}

#[test]
fn a_panic_restores_the_terminal_and_says_what_happened() {
    need_tmux!();
    let t = top("--sim builtin:demo", "UDAMON_TOP_TEST_PANIC=1");
    assert_eq!(ended(&t), 1);
    let screen = t.capture_all();
    assert!(screen.contains("a panic on purpose"), "{screen}");
    assert!(screen.contains("top's display failed"), "{screen}");
}

#[test]
fn top_watches_a_live_process_its_mappings_and_functions() {
    need_tmux!();
    let t = top(
        &format!(
            "--access-source cpuclock -- {} static -t 8 -o /dev/null",
            patterns().display()
        ),
        "",
    );
    // A few seconds in, for a picture with some history.
    let screen = t.wait_until(40, "mappings and functions, 5 s in", |s| {
        s.contains("[anon]") && s.contains("(patterns-cli)") && time(s) >= 5.0
    });
    assert!(screen.contains("pid "), "{screen}");
    assert!(screen.contains("samples,"), "the source's health: {screen}");
    assert!(
        screen.contains("rw- [anon]") && screen.contains(" ws "),
        "mappings named with their permissions, and their working sets: {screen}"
    );
    if screen::chromium().is_ok() {
        let pictures = tempfile::tempdir().unwrap();
        let page = pictures.path().join("top.html");
        std::fs::write(&page, screen::ansi_page(&t.capture_ansi())).unwrap();
        let png = pictures.path().join("top.png");
        screen::screenshot(&format!("file://{}", page.display()), &png, (1460, 900));
        assert!(screen::colours(&png) > 20, "a blank screenshot");
        screen::keep_for_docs(&png, "top.png");
    }
    // The command ends: top says so and stays until q.
    t.wait_for("ENDED: every target ended", 40);
    t.send(&["q"]);
    assert_eq!(ended(&t), 0);
}

#[test]
fn q_stops_the_command_top_started() {
    need_tmux!();
    // A command that would outlive the test, deaf to the hangup the terminal's end sends
    // (nohup execs it): it must go with top.
    let t = top(
        &format!(
            "--access-source cpuclock -- nohup {} static -t 600 -o /dev/null",
            patterns().display()
        ),
        "",
    );
    t.wait_for("pid ", 40);
    let top = top_pid(&t);
    let command = *screen::children(top)
        .first()
        .expect("the command runs as top's child");
    t.send(&["q"]);
    assert_eq!(ended(&t), 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    // Gone, or a zombie not yet reaped by whoever inherited it.
    while std::fs::read_to_string(format!("/proc/{command}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    }) {
        assert!(
            Instant::now() < deadline,
            "the command (process {command}) still runs after q"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let screen = t.capture_all();
    assert!(
        screen.contains(&format!("stopped the command (process {command}")),
        "{screen}"
    );
}

#[test]
fn top_shows_a_target_of_a_running_serve() {
    need_tmux!();
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &["--idle"]);
    serve.ctl_ok(&["add", "--sim", "builtin:demo"]);
    let control = &serve.control;
    let t = top(&format!("--serve --control {}", control.display()), "");
    let screen = t.wait_for(" regions, ", 30);
    assert!(screen.contains(" serve · "), "{screen}");
    // Serve sends windows only: the side panes say so, and where the mappings are shown.
    assert!(screen.contains("sends its windows only"), "{screen}");
    t.wait_until(10, "a heatmap", |s| s.contains("0 Hz █"));
    t.send(&["t"]);
    t.wait_for("sim:1", 5);
    t.send(&["Escape", "q"]);
    assert_eq!(ended(&t), 0);
}

#[test]
fn top_needs_a_terminal_and_says_so() {
    // assert_cmd's output is a pipe, as in `udamon top | less`.
    let out = udamon()
        .args(["top", "--sim", "builtin:demo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stdout is not one"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
