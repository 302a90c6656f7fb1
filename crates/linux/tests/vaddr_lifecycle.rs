//! The vaddr operations over a process's life: attaching to a multi-threaded process and
//! following threads it creates later, exec, exit (also during setup), and the sample-driven
//! loop's wake-ups.

#[path = "workload/patterns.rs"]
mod patterns;
mod workload;

use patterns::{Collect, MIB, Snap, median};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use udamon_core::{Attrs, Context, StopReason};
use udamon_linux::perf::{AccessSource, CpuClock, SamplerConfig};
use udamon_linux::vaddr::{
    self, SampleClock, VaddrError, VaddrEventKind, VaddrOps, monotonic_us, sampled_attrs,
};
use workload::memloop;

fn config() -> SamplerConfig {
    SamplerConfig {
        source: AccessSource::CpuClock(CpuClock::default()),
        ..SamplerConfig::default()
    }
}

fn monitor(ops: &mut VaddrOps, clock: &mut SampleClock, attrs: Attrs) -> Vec<Snap> {
    let mut ctx = Context::new(attrs, 1).unwrap();
    for t in ops.targets() {
        ctx.add_target(t);
    }
    ctx.set_start_time_us(monotonic_us());
    let mut collect = Collect::default();
    let stop = ctx.run(ops, clock, &mut collect).unwrap();
    assert_eq!(stop, StopReason::NoValidTarget);
    collect.0
}

#[test]
fn attach_follows_every_thread_and_threads_created_later() {
    // One worker now; two more after attaching (one per line on stdin). Each writes its own
    // 16 MiB buffer.
    let t0 = monotonic_us();
    let mut child = Command::new(memloop())
        .args(["-s", "-t", "5", "-n", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline_us = t0 + 5_000_000;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while line.trim() != "ready" {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "memloop ended early");
    }
    let (mut ops, mut clock) = vaddr::attach(&[child.id()], &config()).unwrap();
    assert_eq!(ops.pids(), [child.id()]);
    let attached_us = monotonic_us();
    let mut stdin = child.stdin.take().unwrap();
    // After 2 s, start two more workers; returns when both have their buffers. Two seconds
    // leave at least three whole 400 ms windows of one worker after the first (1.5 s left two
    // when the workers took a moment to start).
    let feeder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(2000));
        stdin.write_all(b"more\nmore\n").unwrap();
        drop(stdin);
        let mut started = 0;
        let mut line = String::new();
        while started < 2 {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0);
            started += usize::from(line.starts_with("tid "));
        }
        monotonic_us()
    });
    let snaps = monitor(&mut ops, &mut clock, sampled_attrs(&config().source));
    child.wait().unwrap();
    let three_at_us = feeder.join().unwrap();
    let wss: Vec<u64> = snaps.iter().map(|s| s.wss() / MIB).collect();
    eprintln!("wss per snapshot (MiB) {wss:?}; stats {:?}", ops.stats());
    let aggr = sampled_attrs(&config().source).aggr_interval_us;
    let between = |from: u64, to: u64| -> Vec<u64> {
        snaps
            .iter()
            .filter(|s| s.start_us >= from && s.end_us <= to)
            .map(Snap::wss)
            .collect()
    };
    let one = between(attached_us + aggr, three_at_us);
    let three = between(three_at_us + aggr, deadline_us);
    assert!(one.len() >= 3 && three.len() >= 3, "{wss:?}");
    // Each worker writes its own 16 MiB buffer.
    assert!(
        (12 * MIB..28 * MIB).contains(&median(one)),
        "one worker's 16 MiB at first: {wss:?}"
    );
    assert!(
        median(three) >= 40 * MIB,
        "three workers' 48 MiB later, including the threads created after attaching: {wss:?}"
    );
    let events = ops.take_events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e.kind, VaddrEventKind::Exit { target: 0, .. })),
        "{events:?}"
    );
}

#[test]
fn exec_refreshes_regions_and_exit_ends_monitoring() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    // memloop runs briefly, then execs the static pattern.
    let args = [
        "-t".to_string(),
        "0.5".into(),
        "-e".into(),
        patterns::patterns().to_str().unwrap().into(),
        "static".into(),
        "-t".into(),
        "2".into(),
        "-o".into(),
        report.to_str().unwrap().into(),
    ];
    let (mut ops, mut clock) = vaddr::spawn(memloop(), &args, &config()).unwrap();
    let snaps = monitor(&mut ops, &mut clock, sampled_attrs(&config().source));
    let events = ops.take_events();
    let execs: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            VaddrEventKind::Exec { comm, .. } => Some(comm.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(execs.last(), Some(&"patterns"), "{events:?}");
    let exit = events
        .iter()
        .find_map(|e| match e.kind {
            VaddrEventKind::Exit { target: 0, status } => Some(status),
            _ => None,
        })
        .expect("an exit event");
    assert_eq!(exit, Some(0));
    assert!(
        matches!(events.last().map(|e| &e.kind), Some(VaddrEventKind::Stats(s)) if s.samples > 0)
    );
    // After the exec, the new program's memory is monitored and its hot area found.
    let text = std::fs::read_to_string(&report).unwrap();
    let hot = text
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[..2] == ["area", "hot"]).then(|| {
                udamon_core::AddrRange::new(
                    u64::from_str_radix(f[2], 16).unwrap(),
                    u64::from_str_radix(f[3], 16).unwrap(),
                )
            })
        })
        .unwrap();
    let seen = snaps
        .iter()
        .filter(|s| s.accessed_bytes_in(hot) * 2 > hot.size())
        .count();
    assert!(seen >= 3, "hot area seen in {seen} snapshots");
}

#[test]
fn a_process_that_is_gone_cannot_be_attached() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    // Exited but not reaped: a zombie.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let e = vaddr::attach(&[pid], &config()).err().expect("a zombie");
    assert!(
        matches!(
            &e,
            VaddrError::ExitedDuringSetup(p) if *p == pid
        ) || e
            .to_string()
            .contains(&format!("process {pid} does not exist")),
        "{e}"
    );
    child.wait().unwrap();
    let e = vaddr::attach(&[pid], &config()).err().expect("reaped");
    assert_eq!(
        e.to_string(),
        format!("process {pid} does not exist (it may have exited)")
    );
    let e = vaddr::attach(&[std::process::id(), std::process::id()], &config())
        .err()
        .unwrap();
    assert!(matches!(e, VaddrError::DuplicatePid(_)), "{e}");
}

#[test]
fn a_command_that_exits_at_once_gives_an_empty_run() {
    let (mut ops, mut clock) = vaddr::spawn("true", &[] as &[&str], &config()).unwrap();
    monitor(&mut ops, &mut clock, sampled_attrs(&config().source));
    let events = ops.take_events();
    assert!(
        events.iter().any(|e| e.kind
            == VaddrEventKind::Exit {
                target: 0,
                status: Some(0)
            }),
        "{events:?}"
    );
}

#[test]
fn wakeups_do_not_follow_the_sampling_interval() {
    // 1 ms sampling intervals: 2000 intervals in 2 s, replayed from batches.
    let attrs = Attrs {
        sample_interval_us: 1_000,
        aggr_interval_us: 100_000,
        ..sampled_attrs(&config().source)
    };
    let (mut ops, mut clock) = vaddr::spawn(
        patterns::patterns(),
        &["static", "-t", "2", "-o", "/dev/null"],
        &config(),
    )
    .unwrap();
    let t0 = monotonic_us();
    let snaps = monitor(&mut ops, &mut clock, attrs);
    let elapsed_ms = (monotonic_us() - t0) / 1000;
    let batches = elapsed_ms / vaddr::BATCH.as_millis() as u64;
    eprintln!(
        "{} wake-ups in {elapsed_ms} ms, {} snapshots",
        clock.wakeups(),
        snaps.len()
    );
    // About one per batch, plus the odd early return for a ring at its watermark.
    assert!(
        clock.wakeups() <= batches + batches / 4 + 5,
        "{} wake-ups for {batches} batches",
        clock.wakeups()
    );
    // Every window replayed: each starts where the one before ended, and together they span
    // the workload's 2 s (its own time: on a busy machine the wall clock runs longer, with
    // start-up and exit around the windows, so it says nothing about missing ones).
    for pair in snaps.windows(2) {
        assert_eq!(pair[1].start_us, pair[0].end_us, "a window missing");
    }
    let span_us = snaps.last().unwrap().end_us - snaps[0].start_us;
    assert!(span_us >= 1_900_000, "the windows span {span_us} µs");
}
