//! `GET /metrics` over HTTP: hyper on a single-threaded tokio runtime, on a thread of its own.
//! Any other path is 404, any other method 405.
//!
//! The endpoint belongs to a service that may run as root on a shared host, where any local
//! user can connect to it, so what a client can take is bounded: at most
//! [`MAX_CONNECTIONS`] at a time, one request per connection, a request head of at most
//! [`MAX_HEAD_BYTES`] within [`HEAD_TIMEOUT`], and the whole exchange within
//! [`EXCHANGE_TIMEOUT`]. When every connection is taken, a new one closes the oldest that has
//! not sent its request head yet (or the oldest of all): clients that trickle their heads a
//! byte at a time (slowloris) hold connections only until someone else needs one, while a
//! scraper, which sends its request with its connection, is read before the next connection
//! is accepted. A failed `accept` (out of file descriptors, say) is logged and retried,
//! never the end of the endpoint. Each kind of trouble costs one log line until it clears,
//! through the log the caller gives (serve's bounds how many lines a flood of episodes costs).
//!
//! The endpoint listens on TCP or on a unix socket with the permissions asked for, and asks of
//! its clients what its [`WebConfig`] says: TLS, whose handshake must end within
//! [`HEAD_TIMEOUT`] as a head must, and a user and password (401 without them).

use crate::{Exporter, WebConfig};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

/// Connections at once: Prometheus uses one connection per scrape, a few scrapers are plenty.
pub const MAX_CONNECTIONS: usize = 32;

/// The largest request head read (hyper's least buffer): `GET /metrics` takes a few dozen
/// bytes.
pub const MAX_HEAD_BYTES: usize = 8192;

/// A client must send its request head within this time.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection is closed after this long, answered or not.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// The pause after a failed `accept`, so that a lasting failure does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Where the endpoint listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    /// A unix socket at this path, with these permission bits; a stale socket there is
    /// replaced, anything else is an error.
    Unix {
        path: PathBuf,
        mode: u32,
    },
}

/// Where log lines go: a kind (the same for every line of one trouble, for rate limits) and
/// the line.
pub type Log = Arc<dyn Fn(&'static str, &str) + Send + Sync>;

/// What [`Exporter::serve_at`] serves on, and how.
pub struct Endpoint {
    pub listen: Listen,
    pub web: WebConfig,
    pub log: Log,
}

/// The running HTTP server; stops when dropped (removing its unix socket).
pub struct Server {
    listening: Listen,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Listener {
    async fn accept(&self) -> std::io::Result<Box<dyn Io>> {
        Ok(match self {
            Listener::Tcp(l) => Box::new(l.accept().await?.0),
            Listener::Unix(l) => Box::new(l.accept().await?.0),
        })
    }
}

impl Exporter {
    /// Serves this exporter's metrics over plain HTTP on `addr` (port 0: any free port; see
    /// [`Server::local_addr`]), logging to stderr.
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<Server> {
        self.serve_at(Endpoint {
            listen: Listen::Tcp(addr),
            web: WebConfig::default(),
            log: Arc::new(|_, text| eprintln!("udamon: metrics: {text}")),
        })
    }

    /// Serves this exporter's metrics as `endpoint` says.
    pub fn serve_at(&self, endpoint: Endpoint) -> std::io::Result<Server> {
        let (listener, listening) = match &endpoint.listen {
            Listen::Tcp(addr) => {
                let listener = std::net::TcpListener::bind(addr)?;
                listener.set_nonblocking(true)?;
                let addr = listener.local_addr()?;
                (StdListener::Tcp(listener), Listen::Tcp(addr))
            }
            Listen::Unix { path, mode } => {
                let listener = bind_unix(path, *mode)?;
                listener.set_nonblocking(true)?;
                (StdListener::Unix(listener), endpoint.listen.clone())
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let (stop, stopped) = oneshot::channel();
        let exporter = self.clone();
        let Endpoint { web, log, .. } = endpoint;
        let thread = std::thread::Builder::new()
            .name("udamon metrics".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match listener {
                        StdListener::Tcp(l) => {
                            tokio::net::TcpListener::from_std(l).map(Listener::Tcp)
                        }
                        StdListener::Unix(l) => {
                            tokio::net::UnixListener::from_std(l).map(Listener::Unix)
                        }
                    };
                    match listener {
                        Ok(listener) => {
                            let served = Served { exporter, web, log };
                            accept_until(listener, served, stopped).await
                        }
                        Err(e) => log("metrics listen", &format!("cannot listen: {e}")),
                    }
                })
            })?;
        Ok(Server {
            listening,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

enum StdListener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// Binds a unix socket at `path` with permissions `mode`: created with none for others, then
/// opened to `mode`, so that no one connects in between. A socket no server answers on is
/// replaced; a live one or any other file is an error.
fn bind_unix(path: &Path, mode: u32) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::io::{Error, ErrorKind};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(Error::new(
                ErrorKind::AddrInUse,
                format!("a server already answers at {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    // SAFETY: umask only changes this process's file creation mask (serve sets it before its
    // other threads create files).
    let old = unsafe { libc::umask(0o177) };
    let bound = std::os::unix::net::UnixListener::bind(path);
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    let listener = bound?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// What every connection serves, and where it logs.
#[derive(Clone)]
struct Served {
    exporter: Exporter,
    web: WebConfig,
    log: Log,
}

/// The open connections, oldest first: each with what closes it, and whether its request
/// head has arrived.
#[derive(Default)]
struct Open {
    next: u64,
    connections: BTreeMap<u64, (oneshot::Sender<()>, bool)>,
}

type Shared = Arc<Mutex<Open>>;

fn lock(open: &Shared) -> std::sync::MutexGuard<'_, Open> {
    open.lock().unwrap_or_else(|e| e.into_inner())
}

impl Open {
    /// Registers a new connection, closing the one that waited longest for its head (or the
    /// oldest) when all are taken; returns the new one's number, what closes it, and whether
    /// another was closed for it.
    fn admit(&mut self) -> (u64, oneshot::Receiver<()>, bool) {
        let mut evicted = false;
        if self.connections.len() >= MAX_CONNECTIONS {
            let victim = self
                .connections
                .iter()
                .find(|(_, (_, headed))| !headed)
                .or_else(|| self.connections.iter().next())
                .map(|(id, _)| *id);
            if let Some((close, _)) = victim.and_then(|id| self.connections.remove(&id)) {
                let _ = close.send(());
                evicted = true;
            }
        }
        let (close, closed) = oneshot::channel();
        let id = self.next;
        self.next += 1;
        self.connections.insert(id, (close, false));
        (id, closed, evicted)
    }

    fn headed(&mut self, id: u64) {
        if let Some((_, headed)) = self.connections.get_mut(&id) {
            *headed = true;
        }
    }
}

async fn accept_until(listener: Listener, served: Served, mut stopped: oneshot::Receiver<()>) {
    let open = Shared::default();
    let tls = served
        .web
        .tls()
        .cloned()
        .map(tokio_rustls::TlsAcceptor::from);
    let mut failing: Option<std::io::ErrorKind> = None;
    let mut full = false;
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok(stream) => {
                failing = None;
                stream
            }
            Err(e) => {
                if failing != Some(e.kind()) {
                    (served.log)(
                        "metrics accept",
                        &format!("cannot accept a connection ({e}); retrying"),
                    );
                    failing = Some(e.kind());
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let (id, closed, evicted) = lock(&open).admit();
        if evicted && !full {
            (served.log)(
                "metrics full",
                &format!(
                    "{MAX_CONNECTIONS} connections open; closing the slowest for new ones until \
                     some end"
                ),
            );
        }
        full = evicted;
        let (served, shared, tls) = (served.clone(), Arc::clone(&open), tls.clone());
        tokio::spawn(async move {
            let marks = Arc::clone(&shared);
            let exchange = async move {
                let stream: Box<dyn Io> = match tls {
                    None => stream,
                    Some(tls) => match tokio::time::timeout(HEAD_TIMEOUT, tls.accept(stream)).await
                    {
                        Ok(Ok(stream)) => Box::new(stream),
                        _ => return,
                    },
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEAD_TIMEOUT)
                    .max_buf_size(MAX_HEAD_BYTES)
                    .keep_alive(false)
                    .serve_connection(
                        TokioIo::new(stream),
                        hyper::service::service_fn(move |request| {
                            lock(&marks).headed(id);
                            let served = served.clone();
                            async move { Ok::<_, Infallible>(answer(&served, &request).await) }
                        }),
                    )
                    .await;
            };
            // Garbage, a client that hangs up, one that is too slow or one closed for a
            // newcomer ends its connection and nothing else; scrapers retry.
            tokio::select! {
                _ = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange) => {}
                _ = closed => {}
            }
            lock(&shared).connections.remove(&id);
        });
        // The new connection reads what it was sent before the next one is accepted: a
        // scraper's head, which comes with its connection, marks it as no idler.
        tokio::task::yield_now().await;
    }
}

async fn answer(served: &Served, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let (status, body) = if !served.web.allows(authorization).await {
        (
            StatusCode::UNAUTHORIZED,
            "unauthorized: give the user and password of the web configuration\n".to_string(),
        )
    } else {
        match (request.method(), request.uri().path()) {
            (&Method::GET, "/metrics") => (StatusCode::OK, served.exporter.render()),
            (&Method::GET, _) => (
                StatusCode::NOT_FOUND,
                "not found: udamon serves its metrics at /metrics\n".to_string(),
            ),
            _ => (
                StatusCode::METHOD_NOT_ALLOWED,
                "only GET /metrics\n".to_string(),
            ),
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if status == StatusCode::OK {
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(CONTENT_TYPE),
        );
    }
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Basic realm=\"udamon\""),
        );
    }
    response
}

impl Server {
    /// Its TCP address (the port chosen, for port 0); `None` on a unix socket.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self.listening {
            Listen::Tcp(addr) => Some(addr),
            Listen::Unix { .. } => None,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Listen::Unix { path, .. } = &self.listening {
            let _ = std::fs::remove_file(path);
        }
    }
}
