//! What the rest of udamon writes to stderr while top owns the terminal (warnings, notes of
//! the monitoring session) would be written over the screen. While a [`Captured`] lives,
//! stderr goes into a pipe instead: its lines come to the display as they are written, and
//! they are written to the real stderr, in order, once the terminal is restored. A panic
//! gives stderr back first, so that its message is seen.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// The real stderr while it is captured (-1: not captured), for the panic hook.
static SAVED: AtomicI32 = AtomicI32::new(-1);

/// Lines kept for the real stderr; more are counted.
const KEPT: usize = 200;

/// How long the last lines may take to come through the pipe at the end.
const DRAIN: Duration = Duration::from_millis(200);

pub struct Captured {
    /// The real stderr, kept open while descriptor 2 points at the pipe.
    _saved: OwnedFd,
    lines: Receiver<String>,
    /// Lines the display has taken, to be written out at the end.
    taken: Vec<String>,
    dropped: usize,
}

impl Captured {
    /// Sends stderr into a pipe; `None` (stderr left as it is) if that cannot be done.
    pub fn start() -> Option<Captured> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and ours.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: dup of the open descriptor 2.
        let saved = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        if saved < 0 {
            return None;
        }
        // SAFETY: `saved` is a new descriptor of ours.
        let saved = unsafe { OwnedFd::from_raw_fd(saved) };
        // SAFETY: both descriptors are open; 2 now writes into the pipe.
        if unsafe { libc::dup2(write.as_raw_fd(), 2) } < 0 {
            return None;
        }
        drop(write);
        SAVED.store(saved.as_raw_fd(), Ordering::SeqCst);
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            give_back();
            hook(info);
        }));
        let (tx, lines) = mpsc::channel();
        // Not joined: a process started meanwhile may hold the pipe open.
        std::thread::Builder::new()
            .name("udamon top stderr".into())
            .spawn(move || {
                for line in BufReader::new(File::from(read)).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(Captured {
            _saved: saved,
            lines,
            taken: Vec::new(),
            dropped: 0,
        })
    }

    /// The lines written since the last call.
    pub fn take(&mut self) -> Vec<String> {
        let new: Vec<String> = self.lines.try_iter().collect();
        for line in &new {
            self.keep(line.clone());
        }
        new
    }

    fn keep(&mut self, line: String) {
        if self.taken.len() < KEPT {
            self.taken.push(line);
        } else {
            self.dropped += 1;
        }
    }
}

/// Points descriptor 2 at the real stderr again, if it was captured.
fn give_back() {
    let saved = SAVED.swap(-1, Ordering::SeqCst);
    if saved >= 0 {
        // SAFETY: `saved` is the open duplicate of the real stderr that `Captured` holds.
        unsafe { libc::dup2(saved, 2) };
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        give_back();
        while let Ok(line) = self.lines.recv_timeout(DRAIN) {
            self.keep(line);
        }
        let mut err = std::io::stderr().lock();
        for line in &self.taken {
            let _ = writeln!(err, "{line}");
        }
        if self.dropped > 0 {
            let _ = writeln!(err, "udamon: ... and {} more lines", self.dropped);
        }
    }
}
