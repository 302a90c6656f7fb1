//! The control socket: a Unix stream socket (mode 0600) that takes one JSON request per line
//! and answers each with one JSON line (docs/serve.md, "Control"). `udamon ctl` speaks it; so
//! can `socat` or a script.
//!
//! Each connection has a thread of its own, which reads a line, hands the request to the
//! serving loop with the caller's credentials (from the socket itself, SO_PEERCRED), and
//! writes the answer. A line that is not a request, or longer than [`MAX_LINE`], gets an
//! error answer; the connection and the service go on. Every change and every refusal is a
//! line in the log.
//!
//! What clients can take is bounded: [`MAX_CONNECTIONS`] at a time, a new one closing the
//! connection idle the longest (so that idle clients cannot lock the others out), and a
//! silent one is closed after [`IDLE_TIMEOUT`]. A failed `accept` (the service out of file
//! descriptors, say) is logged, rate-limited, and retried after a pause.

use super::log::{self, Level};
use crate::cli::Overrides;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use udamon_linux::discover::{Credentials, peer_credentials};
use udamon_record::model::{Header, Snapshot};

/// The longest request line read (a schemes file inline fits many times over).
pub const MAX_LINE: usize = 1 << 20;

/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 16;

/// How long a connection waits for a target's answer: a target takes requests between two
/// samples, and the sampling interval may be up to 10 s.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection silent for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The pause after a failed `accept`, so that a lasting failure does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// A request, as a JSON object: `{"request": "tune", "target": "1234", "tune": {"aggr_us":
/// 200000}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Targets,
    Add {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        /// `builtin:NAME`, or the name of the workload whose text is `config`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sim: Option<String>,
        /// A masim-format workload's text: serve opens no file for its callers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<String>,
        /// A simulation in virtual time: as fast as the CPU goes.
        #[serde(default)]
        fast: bool,
    },
    Remove {
        target: String,
    },
    Tune {
        target: String,
        tune: Overrides,
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
    /// The last window as the record crate's own types: a [`Window`], as JSON text.
    Window {
        target: String,
    },
    Status {
        target: String,
    },
}

impl Request {
    /// Whether it changes what is served (as opposed to asking about it).
    fn changes(&self) -> bool {
        !matches!(
            self,
            Request::Targets
                | Request::Snapshot { .. }
                | Request::Window { .. }
                | Request::Status { .. }
        )
    }

    /// The request in a few words for the log, without the text it carries (a client's
    /// strings cut short).
    fn describe(&self) -> String {
        match self {
            Request::Targets => "targets".to_string(),
            Request::Add { pid: Some(pid), .. } => format!("add --pid {pid}"),
            Request::Add { sim: Some(sim), .. } => format!("add --sim {}", short(sim)),
            Request::Add { .. } => "add".to_string(),
            Request::Remove { target } => format!("remove {}", short(target)),
            Request::Tune { target, tune } => format!("tune {} {tune}", short(target)),
            Request::AddSchemes { target, schemes } => {
                format!("add-schemes {} ({} bytes)", short(target), schemes.len())
            }
            Request::RemoveScheme { target, index } => {
                format!("remove-scheme {} {index}", short(target))
            }
            Request::Snapshot { target, .. } => format!("snapshot {}", short(target)),
            Request::Window { target } => format!("window {}", short(target)),
            Request::Status { target } => format!("status {}", short(target)),
        }
    }
}

/// A client's string for the log: at most [`SHORT`] characters.
pub fn short(text: &str) -> String {
    match text.char_indices().nth(SHORT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// The most characters of a client's string the log and labels keep.
const SHORT: usize = 64;

/// A served target's last window, as [`Request::Window`] answers it: a snapshot of a
/// one-target record and that record's header, the types records are written in, so that a
/// change to them changes both ends (`udamon top --serve` reads it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub header: Header,
    pub snapshot: Snapshot,
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
pub enum ServingAnswer {
    Now(Result<String, String>),
    Later(Receiver<Result<String, String>>),
}

/// A request for the serving loop, with who asks and where the answer goes.
pub struct CallerRequest {
    pub request: Request,
    pub caller: Credentials,
    pub answer: Sender<ServingAnswer>,
}

/// The bound socket; removed when dropped.
pub struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `path` (mode 0600) and serves connections on threads, sending their requests to
    /// `requests`. A stale socket of a dead server is replaced; a live one is an error.
    pub fn bind(path: &Path, requests: Sender<CallerRequest>) -> anyhow::Result<Self> {
        super::socket::prepare(path, "control socket")?;
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
            .spawn(move || accept(listener, requests))?;
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

/// The open connections, oldest first, each with a handle to close it and whether it is in
/// the middle of a request.
#[derive(Default)]
struct Connections {
    next: u64,
    open: BTreeMap<u64, (UnixStream, bool)>,
}

type Shared = Arc<Mutex<Connections>>;

fn lock(connections: &Shared) -> std::sync::MutexGuard<'_, Connections> {
    connections.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connections {
    /// Makes room for `stream` (closing the connection idle the longest when all are taken)
    /// and registers it; `None` when every connection is busy with a request.
    fn admit(&mut self, stream: &UnixStream) -> Option<u64> {
        if self.open.len() >= MAX_CONNECTIONS {
            let idle = self
                .open
                .iter()
                .find(|(_, (_, busy))| !busy)
                .map(|(id, _)| *id)?;
            if let Some((s, _)) = self.open.remove(&idle) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
        let handle = stream.try_clone().ok()?;
        let id = self.next;
        self.next += 1;
        self.open.insert(id, (handle, false));
        Some(id)
    }

    fn set_busy(&mut self, id: u64, busy: bool) {
        if let Some((_, b)) = self.open.get_mut(&id) {
            *b = busy;
        }
    }
}

fn accept(listener: UnixListener, requests: Sender<CallerRequest>) {
    let connections = Shared::default();
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                log::limited(
                    Level::Warn,
                    "control accept",
                    &format!("control socket: cannot accept a connection ({e}); retrying"),
                );
                std::thread::sleep(ACCEPT_RETRY);
                continue;
            }
        };
        let Some(id) = lock(&connections).admit(&stream) else {
            log::limited(
                Level::Warn,
                "control full",
                &format!("control socket: {MAX_CONNECTIONS} connections busy; closing a new one"),
            );
            continue;
        };
        let (requests, shared) = (requests.clone(), Arc::clone(&connections));
        let spawned = std::thread::Builder::new()
            .name("udamon control connection".into())
            .spawn(move || {
                connection(id, stream, requests, &shared);
                lock(&shared).open.remove(&id);
            });
        if let Err(e) = spawned {
            lock(&connections).open.remove(&id);
            log::limited(
                Level::Warn,
                "control accept",
                &format!("control socket: cannot start a connection's thread ({e})"),
            );
        }
    }
}

/// Answers one connection's requests until it closes.
fn connection(id: u64, stream: UnixStream, requests: Sender<CallerRequest>, connections: &Shared) {
    let caller = match peer_credentials(&stream) {
        Ok(c) => c,
        Err(e) => {
            log::limited(
                Level::Warn,
                "control refused",
                &format!("control socket: cannot tell who connected: {e}"),
            );
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
        lock(connections).set_busy(id, true);
        let answer = if line.len() > MAX_LINE {
            refused(
                &caller,
                "a request",
                &format!("a request line is longer than {MAX_LINE} bytes"),
            )
        } else {
            match serde_json::from_slice::<Request>(&line) {
                Ok(request) => ask(request, &caller, &requests),
                Err(e) => refused(
                    &caller,
                    "a request",
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
        lock(connections).set_busy(id, false);
    }
}

/// Who asks, for the log.
fn who(caller: &Credentials) -> String {
    format!("uid {} (pid {})", caller.uid, caller.pid)
}

fn refused(caller: &Credentials, what: &str, why: &str) -> Answer {
    log::limited(
        Level::Warn,
        "control refused",
        &format!("control: {} asked for {what}: refused: {why}", who(caller)),
    );
    Answer::from(Err(why.to_string()))
}

fn ask(request: Request, caller: &Credentials, requests: &Sender<CallerRequest>) -> Answer {
    let (what, changes) = (request.describe(), request.changes());
    let (answer, pending) = mpsc::channel();
    let asked = CallerRequest {
        request,
        caller: caller.clone(),
        answer,
    };
    if requests.send(asked).is_err() {
        return Answer::from(Err("udamon serve is stopping".to_string()));
    }
    let result = match pending.recv_timeout(ANSWER_TIMEOUT) {
        Ok(ServingAnswer::Now(result)) => result,
        Ok(ServingAnswer::Later(later)) => later
            .recv_timeout(ANSWER_TIMEOUT)
            .unwrap_or_else(|_| Err("the target did not answer: it may have ended".to_string())),
        Err(_) => Err("udamon serve did not answer".to_string()),
    };
    match result {
        Err(why) => refused(caller, &what, &why),
        Ok(text) => {
            if changes {
                log::limited(
                    Level::Info,
                    "control change",
                    &format!("control: {} asked for {what}: {text}", who(caller)),
                );
            }
            Answer::from(Ok(text))
        }
    }
}

/// Sends one request to the socket at `path` and returns its answer (for `udamon ctl`).
pub fn request(path: &Path, request: &Request) -> anyhow::Result<Answer> {
    let mut text = serde_json::to_string(request)?;
    if text.len() >= MAX_LINE {
        anyhow::bail!(
            "the request is {} bytes, more than udamon serve takes ({MAX_LINE}): send a smaller \
             file",
            text.len()
        );
    }
    text.push('\n');
    let mut stream = super::socket::connect(path)?;
    // The longest serve takes to answer, and some.
    stream.set_read_timeout(Some(3 * ANSWER_TIMEOUT))?;
    stream.write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    if line.is_empty() {
        anyhow::bail!("udamon serve closed the connection without an answer");
    }
    serde_json::from_str(&line)
        .map_err(|e| anyhow::anyhow!("udamon serve answered something else: {e}"))
}

/// A served target's last window (for `udamon top --serve`); a refusal or a failure to ask, in
/// a line.
pub fn window(path: &Path, target: &str) -> Result<Window, String> {
    let asked = Request::Window {
        target: target.to_string(),
    };
    let answer = request(path, &asked).map_err(|e| format!("{e:#}"))?;
    if !answer.ok {
        return Err(answer.error.unwrap_or_else(|| "refused".into()));
    }
    let window: Window = serde_json::from_str(&answer.text.unwrap_or_default())
        .map_err(|e| format!("not a window: {e}"))?;
    window.snapshot.check()?;
    Ok(window)
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
            e.to_string().contains("more than udamon serve takes"),
            "{e}"
        );
    }
}
