//! The metrics endpoint outlives failed `accept`s: out of file descriptors (the soft limit of
//! this test process lowered to what it has open), it cannot take connections, and once they
//! are back it serves again. Alone in its file: the limit is the whole process's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use udamon_exporter::Exporter;

fn open_files_limit() -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit for the kernel to fill.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    limit
}

fn set_open_files_limit(limit: &libc::rlimit) {
    // SAFETY: a valid rlimit, a soft limit at most the hard one.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, limit) }, 0);
}

fn scrape(addr: SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn serving_resumes_after_accept_runs_out_of_file_descriptors() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr();
    assert_eq!(scrape(addr), Some(200));

    let saved = open_files_limit();
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    set_open_files_limit(&libc::rlimit {
        rlim_cur: open + 4,
        rlim_max: saved.rlim_max,
    });
    // Clients until no descriptor is left: the server's accepts then fail.
    let mut clients = Vec::new();
    while let Ok(c) = TcpStream::connect(addr) {
        clients.push(c);
        assert!(clients.len() < 64, "the limit does not hold");
    }
    // Time for the server to meet the failure (it retries every 100 ms).
    std::thread::sleep(Duration::from_millis(500));
    drop(clients);
    set_open_files_limit(&saved);

    let deadline = Instant::now() + Duration::from_secs(60);
    while scrape(addr) != Some(200) {
        assert!(Instant::now() < deadline, "the endpoint never served again");
        std::thread::sleep(Duration::from_millis(100));
    }
}
