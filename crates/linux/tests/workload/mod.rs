//! Shared by the integration tests: building the C workloads ([`build_c`]); for the perf and
//! maps tests, the `memloop.c` workload (built once per test binary), running a test as the
//! unprivileged user `nobody`, and collecting a sampler's records until its target is gone.
#![allow(dead_code)] // each test binary uses a different subset

mod build;

pub use build::build_c;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use udamon_linux::perf::{PerfRecord, PollOutcome, Sample, Sampler};

/// The workload binary (see memloop.c for its options).
pub fn memloop() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        match std::env::var_os("UDAMON_TEST_MEMLOOP") {
            Some(p) => PathBuf::from(p), // set when a test re-runs itself as nobody
            None => build_c("memloop", &["-O1", "-pthread"]),
        }
    })
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs test `name` of this test binary as uid/gid 65534 (nobody) with `env`, and returns its
/// output. The test must be `#[ignore]`d so that it only runs this way.
pub fn run_as_nobody(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(exe)
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("UDAMON_TEST_MEMLOOP", memloop());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output()
        .expect("setpriv (util-linux) is needed to run a test as nobody")
}

/// Polls and drains (unsorted, ring by ring) until the target is gone, calling `tick` after
/// every drain. Panics after `limit`.
pub fn run_to_end(
    s: &mut Sampler,
    limit: Duration,
    mut tick: impl FnMut(&mut Sampler, &[PerfRecord]),
) -> Vec<PerfRecord> {
    let start = Instant::now();
    let mut recs = Vec::new();
    loop {
        let outcome = s.poll(Duration::from_millis(50)).unwrap();
        s.drain(|r| recs.push(r));
        tick(s, &recs);
        if outcome == PollOutcome::TargetGone {
            return recs;
        }
        assert!(
            start.elapsed() < limit,
            "the target did not end within {limit:?}"
        );
    }
}

pub fn samples(recs: &[PerfRecord]) -> impl Iterator<Item = &Sample> {
    recs.iter().filter_map(|r| match r {
        PerfRecord::Sample(s) => Some(s),
        _ => None,
    })
}

/// The tids the workload wrote to its `-o` file.
pub fn reported_tids(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| l.strip_prefix("tid ")?.parse().ok())
        .collect()
}

/// User plus system CPU seconds of a live process, from /proc/PID/stat.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_comm.split(' ').collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the comm.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}
