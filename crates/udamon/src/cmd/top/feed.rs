//! Where top's frames come from, on the calling thread while the display runs on its own: a
//! monitoring session (a simulation in real time, live processes) whose record is tapped as
//! it is written, or a running `udamon serve` asked for a target's last window as each one
//! completes.

use crate::cli::{RecordArgs, TopArgs};
use crate::cmd::record::{self, DEFAULT_SIM, Watch};
use crate::cmd::serve::control::{Request, Window, request, window};
use crate::monitor::{Summary, Tap};
use anyhow::{Context as _, Result, bail};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};
use udamon_record::model::{AccessSource, Frame, Header};

/// What the display is told.
pub enum Feed {
    /// A record starts (again, when another served target is picked).
    Header(Header),
    Frame(Frame),
    /// The targets a `udamon serve` offers: (name as ctl takes it, command name).
    Served(Vec<(String, String)>),
    /// Something to tell that is not a frame (a served target that cannot be reached now).
    Status(String),
    /// Monitoring ended, and why.
    Ended(String),
}

/// A session's record, handed over to the display.
struct Channel {
    feed: Sender<Feed>,
    /// The standard streams, pointed away while a command is spawned.
    redirected: Option<Redirected>,
}

impl Tap for Channel {
    fn header(&mut self, header: &Header) {
        // The command has been spawned with the streams it keeps: top's are given back.
        let spawned = self.redirected.take().is_some();
        let _ = self.feed.send(Feed::Header(header.clone()));
        if spawned {
            let _ = self.feed.send(Feed::Status(format!(
                "the command's output goes to {}",
                command_log().display()
            )));
        }
    }

    fn frame(&mut self, frame: Frame) {
        let _ = self.feed.send(Feed::Frame(frame));
    }
}

/// While it lives, this process's standard streams point elsewhere: input at /dev/null,
/// output and errors into a log file, so that a command spawned meanwhile inherits those
/// rather than the terminal top draws on (its output would be written over the screen, and it
/// could read the keys). Dropped, the streams are the terminal's again.
struct Redirected {
    saved: Vec<(i32, OwnedFd)>,
}

impl Redirected {
    fn start(log: &File) -> std::io::Result<Redirected> {
        let null = File::open("/dev/null")?;
        let mut saved = Vec::new();
        for (fd, to) in [
            (0, null.as_raw_fd()),
            (1, log.as_raw_fd()),
            (2, log.as_raw_fd()),
        ] {
            // SAFETY: duplicating a standard descriptor this process holds.
            let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            if copy < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `copy` is a new descriptor of ours.
            saved.push((fd, unsafe { OwnedFd::from_raw_fd(copy) }));
            // SAFETY: both descriptors are open.
            if unsafe { libc::dup2(to, fd) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(Redirected { saved })
    }
}

impl Drop for Redirected {
    fn drop(&mut self) {
        for (fd, copy) in &self.saved {
            // SAFETY: `copy` is the open duplicate of what `fd` was.
            unsafe { libc::dup2(copy.as_raw_fd(), *fd) };
        }
    }
}

/// Where a spawned command's output went: a file in a directory of top's own (a name under
/// the shared temporary directory is one another user could plant first).
static COMMAND_LOG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Where a spawned command's output goes while top shows it, once [`monitor`] has made it.
pub fn command_log() -> PathBuf {
    COMMAND_LOG.get().cloned().unwrap_or_default()
}

/// Monitors what `args` name (the built-in demo when nothing), until it ends or `stop` is set,
/// writing the record to `-o` when given.
pub fn monitor(args: &TopArgs, stop: Arc<AtomicBool>, feed: Sender<Feed>) -> Result<Summary> {
    let (out, compress) = match &args.out {
        Some(path) => (path.clone(), true),
        // Encoded and dropped: the display reads the frames before they are encoded.
        None => (PathBuf::from("/dev/null"), false),
    };
    let redirected = if args.command.is_empty() {
        None
    } else {
        let (log, path) = crate::output::private_file("udamon-top-", "command.log")
            .context("cannot make a file for the command's output")?;
        let _ = COMMAND_LOG.set(path);
        Some(Redirected::start(&log).context("cannot point the command's output away")?)
    };
    let watch = Watch {
        stop,
        tap: Some(Box::new(Channel { feed, redirected })),
        end_command: true,
    };
    if args.pid.is_empty() && args.command.is_empty() {
        let sim = args.sim.as_deref().unwrap_or(DEFAULT_SIM);
        return record::record_sim_watched(
            sim,
            &args.monitoring,
            &out,
            compress,
            args.duration,
            Some(watch),
        );
    }
    let mut live = RecordArgs {
        out,
        sim: None,
        pid: args.pid.clone(),
        host: false,
        children: args.children,
        command: args.command.clone(),
        access_source: args.access_source,
        sample_rate: args.sample_rate,
        duration: args.duration,
        no_compress: !compress,
        compress: false,
        dry_run: false,
        referenced: None,
        call_stacks: args.call_stacks,
        monitoring: args.monitoring.clone(),
    };
    live.resolve_target();
    record::record_live(&live, watch)
}

/// How often a served target is asked for its last window.
const SERVE_POLL: Duration = Duration::from_millis(100);
/// How often the served targets are listed again.
const SERVE_LIST: Duration = Duration::from_secs(2);

/// The served targets, as `ctl targets` lists them: (name, command name).
pub fn served(control: &Path) -> Result<Vec<(String, String)>> {
    let answer = request(control, &Request::Targets)?;
    if !answer.ok {
        bail!(
            "udamon serve: {}",
            answer.error.unwrap_or_else(|| "refused".into())
        );
    }
    Ok(answer
        .text
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut fields = l.split('\t');
            Some((fields.next()?.to_string(), fields.next()?.to_string()))
        })
        .collect())
}

/// Follows a served target's windows until `stop` is set; `picks` names another target to
/// follow.
pub fn serve(
    control: &Path,
    first: String,
    stop: &AtomicBool,
    feed: &Sender<Feed>,
    picks: &Receiver<String>,
) {
    let mut target = first;
    let mut last_end = None;
    let mut listed = Instant::now() - SERVE_LIST;
    while !stop.load(Ordering::Relaxed) {
        if let Ok(pick) = picks.try_recv() {
            target = pick;
            last_end = None;
        }
        if listed.elapsed() >= SERVE_LIST {
            listed = Instant::now();
            match served(control) {
                Ok(list) => {
                    let _ = feed.send(Feed::Served(list));
                }
                Err(e) => {
                    let _ = feed.send(Feed::Status(format!("{e:#}")));
                }
            }
        }
        match window(control, &target) {
            Ok(Window {
                mut header,
                snapshot,
            }) if last_end != Some(snapshot.end_ns) => {
                if last_end.is_none() {
                    // The status line names where the windows come from.
                    header.access_source = AccessSource {
                        name: "serve".into(),
                        reason: "a target of udamon serve, over its control socket".into(),
                    };
                    let _ = feed.send(Feed::Header(header));
                }
                last_end = Some(snapshot.end_ns);
                let _ = feed.send(Feed::Frame(Frame::Snapshot(snapshot)));
            }
            Ok(_) => {}
            Err(e) => {
                let _ = feed.send(Feed::Status(format!("{target}: {e}")));
            }
        }
        std::thread::sleep(SERVE_POLL);
    }
}
