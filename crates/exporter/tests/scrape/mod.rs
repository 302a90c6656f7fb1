//! One scrape of the endpoint, as a client that may be refused sees it.
#![allow(dead_code)] // each test binary uses a subset

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The status of a GET of `/metrics`, or `None` when the connection was refused or closed
/// without an answer.
pub fn scrape(addr: SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Scrapes until the endpoint answers 200, for a minute at most (a bound, not a timing).
pub fn scrape_until_answered(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while scrape(addr) != Some(200) {
        assert!(Instant::now() < deadline, "the endpoint never served again");
        std::thread::sleep(Duration::from_millis(100));
    }
}
