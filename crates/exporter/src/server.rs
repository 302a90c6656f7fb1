//! `GET /metrics` over HTTP, on a thread of its own (`tiny_http`: small and synchronous; a
//! scrape every few seconds needs no async runtime). Any other path is 404, any other method
//! 405; a request that fails to parse or a client that hangs up costs one log line at most.

use crate::Exporter;
use std::net::SocketAddr;
use std::sync::Arc;
use tiny_http::{Header, Method, Response};

/// The running HTTP server; stops when dropped.
pub struct Server {
    http: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

impl Exporter {
    /// Serves this exporter's metrics on `addr` (port 0: any free port; see
    /// [`Server::local_addr`]).
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<Server> {
        let http = tiny_http::Server::http(addr).map_err(std::io::Error::other)?;
        let addr = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| std::io::Error::other("not an IP address"))?;
        let http = Arc::new(http);
        let serving = Arc::clone(&http);
        let exporter = self.clone();
        let thread = std::thread::Builder::new()
            .name("udamon metrics".into())
            .spawn(move || {
                for request in serving.incoming_requests() {
                    let response = match (request.method(), request.url()) {
                        (Method::Get, "/metrics") => Response::from_string(exporter.render())
                            .with_header(
                                Header::from_bytes("Content-Type", CONTENT_TYPE)
                                    .expect("a valid header"),
                            ),
                        (Method::Get, _) => Response::from_string(
                            "not found: udamon serves its metrics at /metrics\n",
                        )
                        .with_status_code(404),
                        _ => Response::from_string("only GET /metrics\n").with_status_code(405),
                    };
                    // A client that hung up costs a line, never the service.
                    if let Err(e) = request.respond(response) {
                        eprintln!("udamon: metrics: could not answer a scrape: {e}");
                    }
                }
            })?;
        Ok(Server {
            http,
            addr,
            thread: Some(thread),
        })
    }
}

impl Server {
    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.http.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
