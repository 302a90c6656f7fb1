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
//! never the end of the endpoint. Each kind of trouble costs one log line until it clears.

use crate::Exporter;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
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

/// The running HTTP server; stops when dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Serves this exporter's metrics on `addr` (port 0: any free port; see
    /// [`Server::local_addr`]).
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<Server> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let (stop, stopped) = oneshot::channel();
        let exporter = self.clone();
        let thread = std::thread::Builder::new()
            .name("udamon metrics".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => accept_until(listener, exporter, stopped).await,
                        Err(e) => eprintln!("udamon: metrics: cannot listen on {addr}: {e}"),
                    }
                })
            })?;
        Ok(Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
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

async fn accept_until(
    listener: tokio::net::TcpListener,
    exporter: Exporter,
    mut stopped: oneshot::Receiver<()>,
) {
    let open = Shared::default();
    let mut failing: Option<std::io::ErrorKind> = None;
    let mut full = false;
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                failing = None;
                stream
            }
            Err(e) => {
                if failing != Some(e.kind()) {
                    eprintln!("udamon: metrics: cannot accept a connection ({e}); retrying");
                    failing = Some(e.kind());
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let (id, closed, evicted) = lock(&open).admit();
        if evicted && !full {
            eprintln!(
                "udamon: metrics: {MAX_CONNECTIONS} connections open; closing the slowest for \
                 new ones until some end"
            );
        }
        full = evicted;
        let (exporter, shared) = (exporter.clone(), Arc::clone(&open));
        tokio::spawn(async move {
            let marks = Arc::clone(&shared);
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .keep_alive(false)
                .serve_connection(
                    TokioIo::new(stream),
                    hyper::service::service_fn(move |request| {
                        lock(&marks).headed(id);
                        let response = answer(&exporter, &request);
                        async move { Ok::<_, Infallible>(response) }
                    }),
                );
            // Garbage, a client that hangs up, one that is too slow or one closed for a
            // newcomer ends its connection and nothing else; scrapers retry.
            tokio::select! {
                _ = tokio::time::timeout(EXCHANGE_TIMEOUT, connection) => {}
                _ = closed => {}
            }
            lock(&shared).connections.remove(&id);
        });
        // The new connection reads what it was sent before the next one is accepted: a
        // scraper's head, which comes with its connection, marks it as no idler.
        tokio::task::yield_now().await;
    }
}

fn answer(exporter: &Exporter, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, exporter.render()),
        (&Method::GET, _) => (
            StatusCode::NOT_FOUND,
            "not found: udamon serves its metrics at /metrics\n".to_string(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET /metrics\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if status == StatusCode::OK {
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(CONTENT_TYPE),
        );
    }
    response
}

impl Server {
    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
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
    }
}
