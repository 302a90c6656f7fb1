//! What a client can take from the metrics endpoint is bounded: connections beyond the limit
//! are closed at once, a client that sends nothing is closed after the head timeout, and the
//! endpoint serves again as soon as they are gone.

mod scrape;

use scrape::{scrape, scrape_until_answered};
use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use udamon_exporter::{Exporter, HEAD_TIMEOUT, MAX_CONNECTIONS};

/// Generous: these machines are shared and slow; nothing here is a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

#[test]
fn connections_beyond_the_limit_are_closed_at_once_and_serving_resumes() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr();
    assert_eq!(scrape(addr), Some(200));
    // Connections that send nothing hold every slot...
    let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // ... so the next is closed unanswered (within the head timeout, were it waiting for one).
    assert_eq!(
        scrape(addr),
        None,
        "a connection over the limit is answered"
    );
    drop(idle);
    scrape_until_answered(addr);
}

#[test]
fn a_client_that_sends_nothing_is_closed_after_the_head_timeout() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut silent = TcpStream::connect(server.local_addr()).unwrap();
    silent.set_read_timeout(Some(PATIENCE)).unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 64];
    // End of file (or a reset) rather than a read timeout: the server closed it.
    match silent.read(&mut buf) {
        Ok(n) => assert_eq!(n, 0, "answered without a request"),
        Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "never closed"),
    }
    assert!(
        start.elapsed() >= HEAD_TIMEOUT.mul_f64(0.5),
        "closed before its time"
    );
}
