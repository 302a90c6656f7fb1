//! Seeing udamon the way a person does: a terminal (tmux, driven with send-keys and read with
//! capture-pane) and a browser (headless Chromium, asked for its DOM or a screenshot). Each
//! tool is optional: `tmux()` and `chromium()` say why they are missing, for the test to skip
//! with that message; `scripts/test` installs both.
//!
//! With `UDAMON_DOC_SCREENSHOTS=1` the tests also write their screenshots into docs/, where the
//! pages about each view show them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Headless Chromium, or why there is none.
pub fn chromium() -> Result<PathBuf, String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| on_path(n))
        .ok_or_else(|| {
            "no chromium on PATH (scripts/test installs Debian's chromium as root)".into()
        })
}

/// tmux, or why there is none.
pub fn tmux() -> Result<PathBuf, String> {
    on_path("tmux").ok_or_else(|| "no tmux on PATH (scripts/test installs it as root)".into())
}

/// Runs Chromium headless on `url` with `args`, a fresh profile, no network of its own, and a
/// minute at most.
pub fn run_chromium(url: &str, args: &[&str]) -> Output {
    let browser = chromium().expect("chromium checked by the caller");
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .arg("60")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The page's DOM once loaded, as Chromium serializes it.
pub fn dump_dom(url: &str) -> String {
    String::from_utf8(run_chromium(url, &["--dump-dom"]).stdout).unwrap()
}

/// A screenshot of `url` at `width` × `height` into `png`.
pub fn screenshot(url: &str, png: &Path, (width, height): (u32, u32)) {
    run_chromium(
        url,
        &[
            &format!("--window-size={width},{height}"),
            &format!("--screenshot={}", png.display()),
        ],
    );
    assert!(png.is_file(), "no screenshot of {url}");
}

/// The distinct colours of a PNG, sampled: a blank picture has one or two.
pub fn colours(png: &Path) -> usize {
    let decoder = png::Decoder::new(std::fs::File::open(png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let mut seen = std::collections::HashSet::new();
    for px in buf[..info.buffer_size()].chunks(step).step_by(13) {
        seen.insert(px[..3.min(px.len())].to_vec());
    }
    seen.len()
}

/// Copies a screenshot into docs/ when `UDAMON_DOC_SCREENSHOTS` is set.
pub fn keep_for_docs(png: &Path, name: &str) {
    if std::env::var_os("UDAMON_DOC_SCREENSHOTS").is_none() {
        return;
    }
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/images");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::copy(png, docs.join(name)).unwrap();
}

/// A tmux server of the test's own (its own socket), with one window running a command.
pub struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// Runs `command` (a shell command line) in a `width` × `height` terminal.
    pub fn start(command: &str, (width, height): (u16, u16)) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let t = Tmux {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        };
        let status = t
            .cmd()
            .args(["new-session", "-d", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .arg(command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        // Keep the pane after its command ends, to read what it left.
        let _ = t
            .cmd()
            .args(["set-option", "-g", "remain-on-exit", "on"])
            .status();
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    /// The screen as text.
    pub fn capture(&self) -> String {
        let out = self.cmd().args(["capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen and what scrolled off it.
    pub fn capture_all(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-S", "-"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen with its colours (SGR escapes).
    pub fn capture_ansi(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-e"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types keys, as tmux names them (`q`, `Escape`, `Up`, `+`).
    pub fn send(&self, keys: &[&str]) {
        let status = self.cmd().arg("send-keys").args(keys).status().unwrap();
        assert!(status.success());
    }

    /// Waits until the screen shows `text`, and returns it; fails with the screen after
    /// `secs` seconds.
    pub fn wait_for(&self, text: &str, secs: u64) -> String {
        self.wait_until(secs, &format!("{text:?} on screen"), |s| s.contains(text))
    }

    /// Waits until `ok(screen)`; fails with the screen and `what` after `secs` seconds.
    pub fn wait_until(&self, secs: u64, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let screen = self.capture();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited {secs} s for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The pid of the pane's process (the shell running the command).
    pub fn pane_pid(&self) -> u32 {
        let out = self
            .cmd()
            .args(["list-panes", "-F", "#{pane_pid}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// The children of process `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The xterm-256 colour `i` as RGB.
fn xterm(i: u8) -> (u8, u8, u8) {
    const BASIC: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];
    match i {
        0..=15 => BASIC[i as usize],
        16..=231 => {
            let k = i - 16;
            (
                CUBE[(k / 36) as usize],
                CUBE[(k / 6 % 6) as usize],
                CUBE[(k % 6) as usize],
            )
        }
        _ => {
            let v = 8 + 10 * (i - 232);
            (v, v, v)
        }
    }
}

/// One character cell of a captured screen, with its xterm-256 colours (`None`: the
/// terminal's default) and weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub ch: char,
    pub fg: Option<u8>,
    pub bg: Option<u8>,
    pub bold: bool,
}

/// A screen captured with its colours ([`Tmux::capture_ansi`]), as lines of cells.
pub fn cells(screen: &str) -> Vec<Vec<Cell>> {
    let (mut fg, mut bg, mut bold) = (None, None, false);
    let mut lines = Vec::new();
    for text in screen.lines() {
        let mut line = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\x1b' || chars.peek() != Some(&'[') {
                line.push(Cell {
                    ch: c,
                    fg,
                    bg,
                    bold,
                });
                continue;
            }
            chars.next();
            let code: String = chars.by_ref().take_while(|&d| d != 'm').collect();
            let params: Vec<u16> = code.split(';').map(|p| p.parse().unwrap_or(0)).collect();
            let mut i = 0;
            while i < params.len() {
                let p = params[i];
                match p {
                    0 => (fg, bg, bold) = (None, None, false),
                    1 => bold = true,
                    22 => bold = false,
                    30..=37 => fg = Some((p - 30) as u8),
                    90..=97 => fg = Some((p - 90 + 8) as u8),
                    40..=47 => bg = Some((p - 40) as u8),
                    100..=107 => bg = Some((p - 100 + 8) as u8),
                    39 => fg = None,
                    49 => bg = None,
                    38 | 48 if params.get(i + 1) == Some(&5) => {
                        let colour = params.get(i + 2).map(|&c| c as u8);
                        if p == 38 {
                            fg = colour;
                        } else {
                            bg = colour;
                        }
                        i += 2;
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        lines.push(line);
    }
    lines
}

/// A terminal screen captured with its colours, as a web page that shows it the way the
/// terminal did (for a screenshot).
pub fn ansi_page(screen: &str) -> String {
    let (default_fg, default_bg) = ((220, 220, 220), (24, 24, 27));
    let css = |(r, g, b): (u8, u8, u8)| format!("#{r:02x}{g:02x}{b:02x}");
    let mut out = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{{margin:0;background:{}}}\
         pre{{margin:0;padding:8px;font:15px/1.2 'DejaVu Sans Mono',monospace;color:{}}}</style>\
         </head><body><pre>",
        css(default_bg),
        css(default_fg)
    );
    for line in cells(screen) {
        let mut style = None;
        for cell in line {
            if style != Some((cell.fg, cell.bg, cell.bold)) {
                if style.is_some() {
                    out.push_str("</span>");
                }
                style = Some((cell.fg, cell.bg, cell.bold));
                out.push_str(&format!(
                    "<span style=\"color:{};background:{};font-weight:{}\">",
                    css(cell.fg.map_or(default_fg, xterm)),
                    css(cell.bg.map_or(default_bg, xterm)),
                    if cell.bold { 700 } else { 400 }
                ));
            }
            match cell.ch {
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '&' => out.push_str("&amp;"),
                c => out.push(c),
            }
        }
        if style.is_some() {
            out.push_str("</span>");
        }
        out.push('\n');
    }
    out.push_str("</pre></body></html>");
    out
}
