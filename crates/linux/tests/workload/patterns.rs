//! Shared by the vaddr tests: the pattern workloads (`patterns.c`, built once per test binary),
//! monitoring one of them through the library (spawn, `VaddrOps`, `Context`, `SampleClock`),
//! and measures over the snapshots taken.
#![allow(dead_code)] // each test binary uses a different subset

#[path = "snapshots.rs"]
mod snapshots;

use crate::workload::build_c;
pub use snapshots::{Collect, MIB, Snap, median};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use udamon_core::{AddrRange, Attrs, Context, StopReason};
use udamon_linux::perf::{AccessSource, SamplerConfig};
use udamon_linux::vaddr::{self, SourceStats, VaddrEvent, monotonic_us};

/// The workload binary (see patterns.c for its modes).
pub fn patterns() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| build_c("patterns", &["-O2"]))
}

/// What a monitored run of a pattern gave.
pub struct Run {
    pub areas: Vec<(String, AddrRange)>,
    /// When the pattern started (after the initial writes), CLOCK_MONOTONIC µs.
    pub start_us: u64,
    pub end_us: u64,
    pub phases_us: Vec<u64>,
    pub snaps: Vec<Snap>,
    pub stats: SourceStats,
    pub events: Vec<VaddrEvent>,
    pub attrs: Attrs,
}

impl Run {
    pub fn area(&self, name: &str) -> AddrRange {
        self.areas
            .iter()
            .find(|a| a.0 == name)
            .unwrap_or_else(|| panic!("no area {name}"))
            .1
    }

    /// Snapshots whose window lies within the pattern's run.
    pub fn during(&self) -> impl Iterator<Item = &Snap> {
        self.snaps
            .iter()
            .filter(|s| s.start_us >= self.start_us && s.end_us <= self.end_us)
    }
}

/// Runs `patterns MODE ARGS...` under `source` with `attrs` to its exit.
pub fn run(source: AccessSource, attrs: Attrs, mode: &str, args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let mut argv = vec![mode, "-o", report.to_str().unwrap()];
    argv.extend_from_slice(args);
    let config = SamplerConfig {
        source,
        ..SamplerConfig::default()
    };
    let (mut ops, mut clock) = vaddr::spawn(patterns(), &argv, &config).unwrap();
    let mut ctx = Context::new(attrs, 7).unwrap();
    for t in ops.targets() {
        ctx.add_target(t);
    }
    ctx.set_start_time_us(monotonic_us());
    let mut collect = Collect(Vec::new());
    let stop = ctx.run(&mut ops, &mut clock, &mut collect).unwrap();
    assert_eq!(
        stop,
        StopReason::NoValidTarget,
        "runs until the workload exits"
    );
    let text = std::fs::read_to_string(&report).unwrap();
    let mut run = Run {
        areas: Vec::new(),
        start_us: 0,
        end_us: 0,
        phases_us: Vec::new(),
        snaps: collect.0,
        stats: *ops.stats(),
        events: ops.take_events(),
        attrs,
    };
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    let us = |s: &str| s.parse::<u64>().unwrap() / 1000;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "area" => run
                .areas
                .push((f[1].to_string(), AddrRange::new(hex(f[2]), hex(f[3])))),
            "start" => run.start_us = us(f[1]),
            "end" => run.end_us = us(f[1]),
            "phase" => run.phases_us.push(us(f[2])),
            _ => panic!("unexpected report line {line:?}"),
        }
    }
    assert!(run.end_us > run.start_us, "the workload finished: {text}");
    run
}
