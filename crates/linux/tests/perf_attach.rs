//! Attach mode: sampling a running multi-threaded process, including a thread it creates after
//! the attach (followed through `inherit`).

mod workload;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use udamon_linux::perf::{PerfRecord, Sampler, SamplerConfig};
use workload::{memloop, samples};

#[test]
fn attach_follows_existing_and_new_threads() {
    // Two workers spinning; the main thread waits on stdin and starts a worker per line.
    let mut child = Command::new(memloop())
        .args(["-t", "5", "-n", "2", "-s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut read_tid = || -> Option<u32> {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        line.trim().strip_prefix("tid ").map(|t| t.parse().unwrap())
    };
    let workers: Vec<u32> = std::iter::from_fn(&mut read_tid).collect(); // until "ready"
    assert_eq!(workers.len(), 2);

    let mut s = Sampler::attach(pid, &SamplerConfig::default()).unwrap();
    assert_eq!(s.pid(), pid);
    assert_eq!(s.child(), None, "attach mode does not own the process");
    let cpus = online_cpus();
    assert_eq!(s.nr_events(), 3 * cpus, "one event per (thread × CPU)");

    let mut recs = Vec::new();
    let mut run = |s: &mut Sampler, d: Duration| {
        let start = Instant::now();
        while start.elapsed() < d {
            s.poll(Duration::from_millis(50)).unwrap();
            s.drain(|r| recs.push(r));
        }
    };
    run(&mut s, Duration::from_millis(300));
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let new_tid = read_tid().expect("the new worker's tid");
    run(&mut s, Duration::from_millis(600));
    child.kill().unwrap();
    child.wait().unwrap();
    s.drain(|r| recs.push(r));

    let sampled: HashSet<u32> = samples(&recs).map(|s| s.tid).collect();
    assert!(samples(&recs).all(|s| s.pid == pid));
    for t in workers.iter().chain([&new_tid]) {
        assert!(
            sampled.contains(t),
            "no samples of thread {t}; sampled {sampled:?}"
        );
    }
    assert!(
        !sampled.contains(&pid),
        "the main thread only waits on stdin"
    );
    assert!(
        recs.iter().any(
            |r| matches!(r, PerfRecord::Fork { pid: p, tid, .. } if *p == pid && *tid == new_tid)
        ),
        "a Fork record for the new thread"
    );
}

fn online_cpus() -> usize {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    online
        .trim()
        .split(',')
        .map(|p| match p.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

#[test]
fn attach_sees_the_exit() {
    let mut child = Command::new(memloop())
        .args(["-t", "0.5"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut s = Sampler::attach(pid, &SamplerConfig::default()).unwrap();
    let recs = workload::run_to_end(&mut s, Duration::from_secs(30), |_, _| {});
    child.wait().unwrap();
    assert!(samples(&recs).count() > 0);
    assert!(
        recs.iter()
            .any(|r| matches!(r, PerfRecord::Exit { pid: p, tid, .. } if *p == pid && *tid == pid)),
        "an Exit record for the main thread"
    );
}

#[test]
fn attach_to_missing_process_is_a_clear_error() {
    // Above the largest possible pid_max (2^22), so it can never exist.
    let pid = 1 << 23;
    let e = Sampler::attach(pid, &SamplerConfig::default())
        .err()
        .expect("no such process");
    assert_eq!(
        e.to_string(),
        format!("process {pid} does not exist (it may have exited)")
    );
}
