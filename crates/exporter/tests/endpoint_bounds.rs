//! What a client can take from the metrics endpoint is bounded: with every connection taken
//! by clients that send nothing, or that trickle their request a byte a second (slowloris),
//! scrapes are still answered, and a client that sends nothing is closed after the head
//! timeout.

mod scrape;

use scrape::scrape;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use udamon_exporter::{Exporter, HEAD_TIMEOUT, MAX_CONNECTIONS};

/// Generous: these machines are shared and slow; nothing here is a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// Whether the server closed `stream` (end of file or a reset) within `PATIENCE`.
fn closed(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn with_every_connection_taken_by_silent_clients_a_scrape_closes_the_oldest() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr().unwrap();
    assert_eq!(scrape(addr), Some(200));
    let mut idle: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // Accepted in order: the server has them all before the scrape comes.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(scrape(addr), Some(200), "a scrape with every slot taken");
    assert!(closed(&mut idle[0]), "the oldest silent client is closed");
}

/// Clients that each send a byte of a request head per second, reconnecting when closed, as
/// a slowloris attack does, until `stop`.
fn slowloris(
    addr: SocketAddr,
    clients: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let head = b"GET /metrics HTTP/1.1\r\nHost: t\r\nX-Slow: ";
        let mut conns: Vec<(Option<TcpStream>, usize)> = (0..clients).map(|_| (None, 0)).collect();
        while !stop.load(Ordering::Relaxed) {
            for (conn, sent) in &mut conns {
                if conn.is_none() {
                    *conn = TcpStream::connect(addr).ok();
                    *sent = 0;
                }
                let byte = head.get(*sent).copied().unwrap_or(b'a');
                if conn.as_mut().is_some_and(|c| c.write_all(&[byte]).is_err()) {
                    *conn = None;
                } else {
                    *sent += 1;
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

#[test]
fn scrapes_are_answered_under_a_slowloris_attack() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let attack = slowloris(addr, 200, Arc::clone(&stop));
    // The attack holds every connection from its first second on.
    std::thread::sleep(Duration::from_secs(2));
    let statuses: Vec<Option<u16>> = (0..30)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(200));
            scrape(addr)
        })
        .collect();
    stop.store(true, Ordering::Relaxed);
    attack.join().unwrap();
    let failed = statuses.iter().filter(|s| **s != Some(200)).count();
    assert_eq!(
        failed,
        0,
        "{failed} of {} scrapes failed: {statuses:?}",
        statuses.len()
    );
}

#[test]
fn a_client_that_sends_nothing_is_closed_after_the_head_timeout() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut silent = TcpStream::connect(server.local_addr().unwrap()).unwrap();
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
