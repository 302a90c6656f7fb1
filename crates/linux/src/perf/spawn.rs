//! Starting a target so that sampling begins exactly at its exec: fork a child that waits on a
//! pipe, let the caller open events on it (with `enable_on_exec`), then release it to exec.

use super::error::PerfError;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// A forked child paused before exec. Dropping it without [`release`](Self::release) makes the
/// child exit with status 127 without running anything, and reaps it.
pub(crate) struct PausedChild {
    pid: libc::pid_t,
    program: String,
    /// Write end of the "go" pipe; the child execs when it reads a byte.
    go: Option<OwnedFd>,
    /// Read end of the exec-error pipe (close-on-exec in the child: EOF means exec succeeded).
    exec_error: OwnedFd,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `program` itself if it contains a slash, else the first executable `PATH` entry.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

impl PausedChild {
    /// Forks a child that will run `program args...` (with our environment and stdio) once
    /// released.
    pub(crate) fn fork(program: &OsStr, args: &[OsString]) -> Result<PausedChild, PerfError> {
        let name = program.to_string_lossy().into_owned();
        let spawn_err = |cause| PerfError::Spawn {
            program: name.clone(),
            cause,
        };
        let path = resolve(program).ok_or_else(|| PerfError::NotFound {
            program: name.clone(),
        })?;
        let cstr =
            |s: Vec<u8>| CString::new(s).map_err(|_| spawn_err(io::ErrorKind::InvalidInput.into()));
        let path = cstr(path.into_os_string().into_vec())?;
        let mut argv = vec![cstr(program.as_bytes().to_vec())?];
        for a in args {
            argv.push(cstr(a.clone().into_vec())?);
        }
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());

        let (go_r, go_w) = pipe().map_err(spawn_err)?;
        let (err_r, err_w) = pipe().map_err(spawn_err)?;
        // SAFETY: between fork and exec the child calls only async-signal-safe functions
        // (close, signal, sigprocmask, read, execv, write, _exit) on data prepared before the
        // fork, so the state other threads left behind in the copy does not matter.
        match unsafe { libc::fork() } {
            -1 => Err(spawn_err(io::Error::last_os_error())),
            0 => unsafe {
                child(
                    go_r.as_raw_fd(),
                    go_w.as_raw_fd(),
                    err_w.as_raw_fd(),
                    &path,
                    &argv_ptrs,
                )
            },
            pid => Ok(PausedChild {
                pid,
                program: name,
                go: Some(go_w),
                exec_error: err_r,
            }),
        }
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Lets the child exec; returns once the exec has happened (or failed).
    pub(crate) fn release(mut self) -> Result<libc::pid_t, PerfError> {
        let go = self.go.take().expect("released once");
        // SAFETY: writing one byte from a valid buffer to our pipe.
        let n = unsafe { libc::write(go.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        let write_err = io::Error::last_os_error();
        drop(go);
        if n != 1 {
            self.reap();
            return Err(PerfError::Spawn {
                program: self.program.clone(),
                cause: write_err,
            });
        }
        let mut errno = [0u8; 4];
        let mut got = 0;
        while got < errno.len() {
            // SAFETY: reading into the unread tail of `errno`.
            let n = unsafe {
                libc::read(
                    self.exec_error.as_raw_fd(),
                    errno[got..].as_mut_ptr().cast(),
                    errno.len() - got,
                )
            };
            match n {
                0 => break,
                n if n > 0 => got += n as usize,
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
                _ => break,
            }
        }
        if got == errno.len() {
            self.reap();
            return Err(PerfError::Spawn {
                program: self.program.clone(),
                cause: io::Error::from_raw_os_error(i32::from_ne_bytes(errno)),
            });
        }
        let pid = self.pid;
        self.pid = 0; // released: the Sampler owns it now
        Ok(pid)
    }

    fn reap(&mut self) {
        if self.pid > 0 {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
            self.pid = 0;
        }
    }
}

impl Drop for PausedChild {
    fn drop(&mut self) {
        // Closing the go pipe without writing makes the child _exit(127).
        self.go = None;
        self.reap();
    }
}

/// The forked child: wait for the go byte, then exec. Never returns.
///
/// # Safety
/// Must run in a freshly forked child; the pointers must stay valid (they are the parent's data,
/// copied by fork).
unsafe fn child(
    go_r: i32,
    go_w: i32,
    err_w: i32,
    path: &CString,
    argv: &[*const libc::c_char],
) -> ! {
    // SAFETY: async-signal-safe calls on descriptors and buffers valid in this process.
    unsafe {
        // Our copy of the write end must go, or the parent closing its copy would not be seen.
        libc::close(go_w);
        // Undo what a Rust parent may have set (SIGPIPE ignored) and any blocked signals, as
        // std::process::Command does for its children.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        let mut b = 0u8;
        loop {
            let n = libc::read(go_r, (&raw mut b).cast(), 1);
            if n == 1 {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            libc::_exit(127);
        }
        libc::execv(path.as_ptr(), argv.as_ptr());
        let errno = (*libc::__errno_location()).to_ne_bytes();
        libc::write(err_w, errno.as_ptr().cast(), errno.len());
        libc::_exit(127)
    }
}
