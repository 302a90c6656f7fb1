//! `udamon top`: watch a workload live in the terminal.
//!
//! Two threads: the calling one produces the record (it runs the monitoring session, whose
//! frames are tapped as the recorder writes them, or asks a running `udamon serve` for a
//! target's windows: [`feed`]), and a display thread owns the terminal, folds the frames into
//! the report crate's live model and draws it ([`draw`]) when something changed. Whatever way
//! the display ends (`q`, SIGTERM, the end of the feed, a panic) the terminal is restored
//! and monitoring is told to stop, so that the record written with `-o` is complete.

mod draw;
mod feed;
mod state;
mod stderr;
mod usage;

use crate::cli::TopArgs;
use crate::cmd::record;
use anyhow::{Context as _, Result, anyhow, bail};
use feed::Feed;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use state::{Action, Source, State};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the display waits for a key before looking at the feed again.
const KEY_WAIT: Duration = Duration::from_millis(50);

pub fn run(args: &TopArgs) -> Result<()> {
    // The served target is checked first: a target that is not served is a mistake wherever
    // top runs, and one that cannot be watched would leave the screen waiting forever.
    let watched = match args.serve {
        true => Some(served_target(args)?),
        false => None,
    };
    if !std::io::stdout().is_terminal() {
        bail!(
            "top draws on a terminal and stdout is not one: run it in a terminal, or record with \
             `udamon record` and share `udamon report html`"
        );
    }
    let stop = record::stop_on_signals()?;
    let (tx, rx) = mpsc::channel();
    if let Some((control, first)) = watched {
        let (picks, picked) = mpsc::channel();
        let display = spawn_display(rx, &stop, Source::Serve(picks), Some(first.clone()))?;
        feed::serve(&control, first, &stop, &tx, &picked);
        drop(tx);
        return finish(display);
    }
    let display = spawn_display(rx, &stop, Source::Monitor, None)?;
    let result = feed::monitor(args, Arc::clone(&stop), tx.clone());
    let _ = tx.send(Feed::Ended(match &result {
        Ok(summary) => summary.stop.clone(),
        Err(e) => format!("{e:#}"),
    }));
    drop(tx);
    let shown = finish(display);
    let summary = result?;
    shown?;
    if let Some(out) = &args.out {
        eprintln!("udamon: recorded {summary} to {}", out.display());
    }
    if !args.command.is_empty() {
        eprintln!(
            "udamon: the command's output is in {}",
            feed::command_log().display()
        );
    }
    Ok(())
}

/// The control socket of `top --serve`, and the target to watch first: `--target`, which
/// must be one that serve serves and the caller may watch, else the first listed.
fn served_target(args: &TopArgs) -> Result<(std::path::PathBuf, String)> {
    let control = args
        .control
        .clone()
        .unwrap_or_else(crate::cmd::serve::default_control);
    let served = feed::served(&control)?;
    let first = match (&args.target, served.first()) {
        (Some(t), _) if served.iter().any(|(name, _)| name == t) => t.clone(),
        (Some(t), _) => bail!(
            "udamon serve at {} serves no target {t} that you may watch (it serves {}): \
             `udamon ctl targets` lists them",
            control.display(),
            match served.len() {
                0 => "none".to_string(),
                n => {
                    let names: Vec<&str> =
                        served.iter().take(10).map(|(t, _)| t.as_str()).collect();
                    let more = if n > 10 {
                        format!(" and {} more", n - 10)
                    } else {
                        String::new()
                    };
                    format!("{}{more}", names.join(", "))
                }
            }
        ),
        (None, Some((name, _))) => name.clone(),
        (None, None) => bail!(
            "udamon serve at {} serves no target you may watch: add one with `udamon ctl add`",
            control.display()
        ),
    };
    Ok((control, first))
}

fn spawn_display(
    feed: Receiver<Feed>,
    stop: &Arc<AtomicBool>,
    source: Source,
    serving: Option<String>,
) -> Result<JoinHandle<Result<()>>> {
    let stop = Arc::clone(stop);
    std::thread::Builder::new()
        .name("udamon top".into())
        .spawn(move || display(feed, stop, source, serving))
        .context("cannot start top's display thread")
}

fn finish(display: JoinHandle<Result<()>>) -> Result<()> {
    display
        .join()
        .map_err(|_| anyhow!("top's display failed (see the message above)"))?
}

/// Sets the stop flag when dropped: the display's end, however it comes, ends monitoring.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Whether top holds the terminal (raw mode, the alternate screen), so that it is given back
/// exactly once: leaving the alternate screen twice would move the cursor back over what was
/// printed since (a panic's message).
static HELD: AtomicBool = AtomicBool::new(false);

/// Takes the terminal over, and makes a panic give it back before its message is printed.
fn take_terminal() -> Result<ratatui::DefaultTerminal> {
    terminal::enable_raw_mode().context("cannot take over the terminal")?;
    HELD.store(true, Ordering::SeqCst);
    execute!(std::io::stdout(), EnterAlternateScreen, Hide)
        .context("cannot take over the terminal")?;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        give_terminal_back();
        hook(info);
    }));
    Ok(Terminal::new(CrosstermBackend::new(std::io::stdout()))?)
}

/// Gives the terminal back as top found it, if top holds it.
fn give_terminal_back() {
    if HELD.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(std::io::stdout(), LeaveAlternateScreen, Show);
    }
}

/// Gives the terminal back when dropped.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        give_terminal_back();
    }
}

fn display(
    feed: Receiver<Feed>,
    stop: Arc<AtomicBool>,
    source: Source,
    serving: Option<String>,
) -> Result<()> {
    let _stop = StopOnDrop(Arc::clone(&stop));
    let mut state = State::new(source, serving);
    // The terminal is taken over only once there is something to show: a monitor that fails
    // to start leaves it untouched, and its error is printed as any command's.
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        match feed.recv_timeout(KEY_WAIT) {
            Ok(Feed::Ended(_)) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
            Ok(header @ Feed::Header(_)) => {
                state.feed(header);
                break;
            }
            Ok(other) => state.feed(other),
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    // Dropped in reverse: the terminal is restored, then stderr given back and its lines
    // written out.
    let mut captured = stderr::Captured::start();
    let mut terminal = take_terminal()?;
    let _restore = Restore;
    let mut meter = usage::Meter::new();
    // A test hook: proves that a panic leaves the terminal as it found it.
    let panic_after_draw = std::env::var_os("UDAMON_TOP_TEST_PANIC").is_some();
    loop {
        while let Ok(item) = feed.try_recv() {
            state.feed(item);
        }
        if let Some(line) = captured.as_mut().and_then(|c| c.take().pop()) {
            state.feed(Feed::Status(line));
        }
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if meter.tick() {
            state.dirty = true;
        }
        if state.dirty {
            state.dirty = false;
            terminal.draw(|f| draw::screen(f, &mut state, &meter.usage))?;
            if panic_after_draw {
                panic!("UDAMON_TOP_TEST_PANIC: a panic on purpose, after the first draw");
            }
        }
        if event::poll(KEY_WAIT)? {
            match event::read()? {
                Event::Key(key) if key.kind == KeyEventKind::Press => {
                    let action = state.key(key);
                    if action == Action::Quit {
                        return Ok(());
                    }
                }
                Event::Resize(..) => state.dirty = true,
                _ => {}
            }
        }
    }
}
