//! The control socket: a Unix stream socket (mode 0600) that takes one JSON request per line
//! and answers each with one JSON line (docs/serve.md, "Control"). `udamon ctl` speaks it; so
//! can `socat` or a script.
//!
//! Each connection has a thread of its own, which reads a line, hands the request to the
//! serving loop with the caller's credentials (from the socket itself, SO_PEERCRED), and
//! writes the answer. A line that is not a request, or longer than [`MAX_LINE`], gets an
//! error answer and a log line; the connection and the service go on.

use super::log;
use super::target::Tune;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;
use udamon_linux::discover::{Credentials, peer_credentials};

/// The longest request line read (a schemes file inline fits many times over).
pub const MAX_LINE: usize = 1 << 20;

/// How long a connection waits for a target's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection silent for this long is closed, so that idle clients hold no thread forever.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A request, as a JSON object: `{"request": "tune", "target": "1234", "tune": {"aggr_us":
/// 200000}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Targets,
    Add {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sim: Option<String>,
        /// A simulation in virtual time: as fast as the CPU goes.
        #[serde(default)]
        fast: bool,
    },
    Remove {
        target: String,
    },
    Tune {
        target: String,
        tune: Tune,
    },
    /// Schemes as the text of a schemes file.
    AddSchemes {
        target: String,
        schemes: String,
    },
    RemoveScheme {
        target: String,
        index: usize,
    },
    Snapshot {
        target: String,
        #[serde(default)]
        json: bool,
    },
    Status {
        target: String,
    },
}

/// The answer: `{"ok": true, "text": "..."}` or `{"ok": false, "error": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<Result<String, String>> for Answer {
    fn from(r: Result<String, String>) -> Self {
        match r {
            Ok(text) => Answer {
                ok: true,
                text: Some(text),
                error: None,
            },
            Err(error) => Answer {
                ok: false,
                text: None,
                error: Some(error),
            },
        }
    }
}

/// How the serving loop answers: at once, or later from a target's thread.
pub enum Pending {
    Now(Result<String, String>),
    Later(Receiver<Result<String, String>>),
}

/// A request for the serving loop, with who asks and where the answer goes.
pub struct Asked {
    pub request: Request,
    pub caller: Credentials,
    pub answer: Sender<Pending>,
}

/// The bound socket; removed when dropped.
pub struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `path` (mode 0600) and serves connections on threads, sending their requests to
    /// `requests`. A stale socket of a dead server is replaced; a live one is an error.
    pub fn bind(path: &Path, requests: Sender<Asked>) -> anyhow::Result<Self> {
        if UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "{} is the control socket of a running udamon serve: stop it, or give another \
                 --control path",
                path.display()
            );
        }
        let _ = std::fs::remove_file(path);
        // Created with no permission for others at all, then opened to the owner only: no
        // window in which another user can connect.
        let listener = {
            // SAFETY: umask only changes this process's file creation mask.
            let old = unsafe { libc::umask(0o177) };
            let bound = UnixListener::bind(path);
            // SAFETY: as above, restoring the previous mask.
            unsafe { libc::umask(old) };
            bound.map_err(|e| {
                anyhow::anyhow!("cannot create the control socket {}: {e}", path.display())
            })?
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        std::thread::Builder::new()
            .name("udamon control".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    match stream {
                        Ok(stream) => {
                            let requests = requests.clone();
                            let _ = std::thread::Builder::new()
                                .name("udamon control connection".into())
                                .spawn(move || connection(stream, requests));
                        }
                        Err(e) => log::warn(&format!("control socket: {e}")),
                    }
                }
            })?;
        Ok(ControlSocket {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Answers one connection's requests until it closes.
fn connection(stream: UnixStream, requests: Sender<Asked>) {
    let caller = match peer_credentials(&stream) {
        Ok(c) => c,
        Err(e) => {
            log::warn(&format!("control socket: cannot tell who connected: {e}"));
            return;
        }
    };
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = if line.len() > MAX_LINE {
            bad(
                &caller,
                &format!("a request line is longer than {MAX_LINE} bytes"),
            )
        } else {
            match serde_json::from_slice::<Request>(&line) {
                Ok(request) => ask(request, &caller, &requests),
                Err(e) => bad(
                    &caller,
                    &format!("not a request ({e}); see docs/serve.md, \"Control\""),
                ),
            }
        };
        let mut text = serde_json::to_string(&answer).expect("answers serialize");
        text.push('\n');
        if writer.write_all(text.as_bytes()).is_err() || line.len() > MAX_LINE {
            // A line that long is not a client speaking the protocol: hang up.
            return;
        }
    }
}

fn bad(caller: &Credentials, why: &str) -> Answer {
    log::warn(&format!("control socket (pid {}): {why}", caller.pid));
    Answer::from(Err(why.to_string()))
}

fn ask(request: Request, caller: &Credentials, requests: &Sender<Asked>) -> Answer {
    let (answer, pending) = mpsc::channel();
    let asked = Asked {
        request,
        caller: caller.clone(),
        answer,
    };
    if requests.send(asked).is_err() {
        return Answer::from(Err("udamon serve is stopping".to_string()));
    }
    let result = match pending.recv_timeout(ANSWER_TIMEOUT) {
        Ok(Pending::Now(result)) => result,
        Ok(Pending::Later(later)) => later
            .recv_timeout(ANSWER_TIMEOUT)
            .unwrap_or_else(|_| Err("the target did not answer: it may have ended".to_string())),
        Err(_) => Err("udamon serve did not answer".to_string()),
    };
    Answer::from(result)
}

/// Sends one request to the socket at `path` and returns its answer (for `udamon ctl`).
pub fn request(path: &Path, request: &Request) -> anyhow::Result<Answer> {
    let mut text = serde_json::to_string(request)?;
    text.push('\n');
    // serve answers a longer line with a refusal and hangs up while it is still being sent,
    // which the sender would only see as a broken pipe.
    if text.len() > MAX_LINE {
        let what = match request {
            Request::AddSchemes { .. } => "the schemes file makes a request of",
            _ => "the request takes",
        };
        anyhow::bail!(
            "{what} {} KiB, more than serve takes ({} KiB): give fewer schemes at a time",
            text.len() >> 10,
            MAX_LINE >> 10
        );
    }
    let mut stream = UnixStream::connect(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot reach udamon serve at {}: {e} (is it running? give its --control path)",
            path.display()
        )
    })?;
    stream.write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    serde_json::from_str(&line)
        .map_err(|e| anyhow::anyhow!("udamon serve answered something else: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_longer_than_serve_takes_is_refused_before_it_is_sent() {
        let schemes = format!("[{}]", vec![r#"{"action": "stat"}"#; 90_000].join(","));
        let big = Request::AddSchemes {
            target: "1".into(),
            schemes,
        };
        let e = request(Path::new("/nonexistent/udamon.sock"), &big).unwrap_err();
        assert!(
            e.to_string().contains("more than serve takes (1024 KiB)"),
            "{e}"
        );
    }
}
