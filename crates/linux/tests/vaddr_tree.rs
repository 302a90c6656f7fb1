//! Whole process trees: a spawned command's forked children (one of which execs) become targets
//! of their own, each with its own regions, exec and exit (a child gone before it is looked at
//! just ends); attaching with `attach_tree` finds the running descendants.

#[path = "../../record/tests/common/skip.rs"]
mod skip;
#[path = "workload/snapshots.rs"]
mod snapshots;
mod workload;

use snapshots::{MIB, Snap};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use udamon_core::{AddrRange, Callbacks, Context, Flow, StopReason};
use udamon_linux::perf::{AccessSource, CpuClock, SamplerConfig};
use udamon_linux::vaddr::{
    self, SampleClock, VaddrEvent, VaddrEventKind, VaddrOps, monotonic_us, sampled_attrs,
};
use workload::{build_c, is_root};

/// The tree workload (see tree.c).
fn tree() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| build_c("tree", &["-O1"]))
}

/// Every aggregation window's regions of every target, by target index.
#[derive(Default)]
struct CollectAll(Vec<BTreeMap<usize, Snap>>);

impl Callbacks for CollectAll {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        let window = (0..ctx.targets().len())
            .map(|t| (t, Snap::of(ctx, t)))
            .collect();
        self.0.push(window);
        Ok(ControlFlow::Continue(()))
    }
}

fn monitor(ops: &mut VaddrOps, clock: &mut SampleClock, source: &AccessSource) -> CollectAll {
    let mut ctx = Context::new(sampled_attrs(source), 1).unwrap();
    for t in ops.targets() {
        ctx.add_target(t);
    }
    ctx.set_start_time_us(monotonic_us());
    let mut collect = CollectAll::default();
    let stop = ctx.run(ops, clock, &mut collect).unwrap();
    assert_eq!(stop, StopReason::NoValidTarget);
    collect
}

/// The children's areas from the workload's report: pid → area.
fn areas(report: &Path) -> BTreeMap<u32, AddrRange> {
    let text = std::fs::read_to_string(report).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() == 4 && f[0] == "area").then(|| {
                let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
                (f[1].parse().unwrap(), AddrRange::new(hex(f[2]), hex(f[3])))
            })
        })
        .collect()
}

/// Asserts that each child's target saw most of its own area accessed in several windows.
fn assert_children_areas_seen(
    ops: &VaddrOps,
    windows: &CollectAll,
    areas: &BTreeMap<u32, AddrRange>,
) {
    assert_eq!(areas.len(), 2, "both children reported their areas");
    let pids = ops.pids();
    for (&pid, &area) in areas {
        let t = pids
            .iter()
            .position(|&p| p == pid)
            .unwrap_or_else(|| panic!("no target for child {pid}: targets {pids:?}"));
        let seen: Vec<u64> = windows
            .0
            .iter()
            .filter_map(|w| w.get(&t))
            .map(|s| s.accessed_bytes_in(area) / MIB)
            .collect();
        let most = seen
            .iter()
            .filter(|&&mib| mib * 2 > area.size() / MIB)
            .count();
        assert!(
            most >= 2,
            "target {t} (pid {pid}): accessed MiB of its {} MiB area per window: {seen:?}",
            area.size() / MIB
        );
    }
}

fn exits(events: &[VaddrEvent]) -> BTreeMap<usize, Option<i32>> {
    events
        .iter()
        .filter_map(|e| match e.kind {
            VaddrEventKind::Exit { target, status } => Some((target, status)),
            _ => None,
        })
        .collect()
}

fn spawned_tree_is_monitored_process_by_process(source: AccessSource) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let config = SamplerConfig {
        source,
        follow_forks: true,
        ..SamplerConfig::default()
    };
    let args = [report.to_str().unwrap(), "3"];
    let (mut ops, mut clock) = vaddr::spawn(tree(), &args, &config).unwrap();
    let windows = monitor(&mut ops, &mut clock, &source);
    let events = ops.take_events();
    let pids = ops.pids();
    assert_eq!(pids.len(), 3, "the parent and its two children: {events:?}");
    let added: Vec<(usize, u32, Option<usize>)> = events
        .iter()
        .filter_map(|e| match e.kind {
            VaddrEventKind::TargetAdded {
                target,
                pid,
                parent,
                ..
            } => Some((target, pid, parent)),
            _ => None,
        })
        .collect();
    assert_eq!(
        added,
        [(1, pids[1], Some(0)), (2, pids[2], Some(0))],
        "{events:?}"
    );
    assert_eq!(ops.parent(1), Some(0));
    let areas = areas(&report);
    assert_children_areas_seen(&ops, &windows, &areas);
    // Child B re-executes the workload: its exec is its own (the parent only had the exec of
    // its spawn).
    let execs: Vec<usize> = events
        .iter()
        .filter_map(|e| match e.kind {
            VaddrEventKind::Exec { target, .. } => Some(target),
            _ => None,
        })
        .collect();
    assert_eq!(execs.last(), Some(&2), "{events:?}");
    assert!(!execs.contains(&1), "{events:?}");
    assert!(ops.cmdline(2).contains("--exec"), "{}", ops.cmdline(2));
    let exits = exits(&events);
    assert_eq!(exits.len(), 3, "every process's exit: {events:?}");
    assert_eq!(exits[&0], Some(0), "the spawned parent's status");
}

#[test]
fn cpuclock_follows_every_forked_process() {
    spawned_tree_is_monitored_process_by_process(AccessSource::CpuClock(CpuClock::default()));
}

#[test]
fn tick_follows_every_forked_process() {
    if !is_root() {
        skip::skipped("the tick source needs root");
        return;
    }
    spawned_tree_is_monitored_process_by_process(AccessSource::Tick);
}

#[test]
fn attach_tree_takes_the_running_children_too() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let mut parent = Command::new(tree())
        .args([report.to_str().unwrap(), "3"])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while areas(&report).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no areas reported"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let source = AccessSource::CpuClock(CpuClock::default());
    let config = SamplerConfig {
        source,
        ..SamplerConfig::default()
    };
    let (mut ops, mut clock) = vaddr::attach_tree(&[parent.id()], &config).unwrap();
    let pids = ops.pids();
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert_eq!(pids[0], parent.id());
    assert_eq!((ops.parent(1), ops.parent(2)), (Some(0), Some(0)));
    let windows = monitor(&mut ops, &mut clock, &source);
    assert!(parent.wait().unwrap().success());
    assert_children_areas_seen(&ops, &windows, &areas(&report));
    let events = ops.take_events();
    assert_eq!(exits(&events).len(), 3, "{events:?}");
}

#[test]
fn a_child_gone_before_it_is_looked_at_just_ends() {
    let config = SamplerConfig {
        source: AccessSource::CpuClock(CpuClock::default()),
        follow_forks: true,
        ..SamplerConfig::default()
    };
    // The child exits within microseconds, long before the monitor handles its fork record.
    let args = ["-c", "/bin/true & wait; sleep 0.3"];
    let (mut ops, mut clock) = vaddr::spawn("sh", &args, &config).unwrap();
    monitor(&mut ops, &mut clock, &config.source);
    let events = ops.take_events();
    // sh, /bin/true and (unless sh execs it) sleep.
    assert!(ops.pids().len() >= 2, "{events:?}");
    assert_eq!(exits(&events).len(), ops.pids().len(), "{events:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, VaddrEventKind::Note(_))),
        "no note, no error: {events:?}"
    );
}
