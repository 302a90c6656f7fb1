//! The metrics endpoint outlives failed `accept`s: out of file descriptors (the soft limit of
//! this test process lowered to what it has open), it cannot take connections, and once they
//! are back it serves again. Alone in its file: the limit is the whole process's.

mod scrape;

use scrape::{scrape, scrape_until_answered};
use std::net::TcpStream;
use std::time::Duration;
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

#[test]
fn serving_resumes_after_accept_runs_out_of_file_descriptors() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr().unwrap();
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

    scrape_until_answered(addr);
}
