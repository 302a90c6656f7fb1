//! Accuracy of the vaddr operations with the sampled sources available on a machine without a
//! PMU (cpuclock, and tick as root), at the default attributes for sampled sources, on
//! workloads with a known access pattern. The pass criteria are the (DAMON's own test
//! suite's for the working-set sizes of stairs and zigzag).
//!
//! Sampled sources depend on the sample-informed split (`adjust::split_at_sampled_extents`).
//! Without it stairs' median working set is 12–17 MiB. When it cut only after each window was
//! reported, never-touched memory at the boundary of accessed memory was reported accessed in
//! 0.5–1.7 % of byte-snapshots (criterion: at most 1 %); reporting the cuts that one window's
//! samples show unlikely by chance brought that to 0–1.1 %, and weighing the samples of the
//! recent windows too (`recent_samples`) to 0–0.35 % in 13-19 runs of each source.

#[path = "workload/patterns.rs"]
mod patterns;
#[path = "../../record/tests/common/skip.rs"]
mod skip;
mod workload;

use patterns::{MIB, Run, median, run};
use std::sync::Mutex;
use udamon_core::AddrRange;
use udamon_linux::perf::{AccessSource, CpuClock, Rate};
use udamon_linux::vaddr::{DEFAULT_CPUCLOCK_HZ, sampled_attrs};
use workload::is_root;

fn cpuclock() -> AccessSource {
    AccessSource::CpuClock(CpuClock {
        rate: Rate::Frequency(DEFAULT_CPUCLOCK_HZ),
        ..CpuClock::default()
    })
}

/// Sources to test here: tick needs root.
fn sources() -> Vec<(&'static str, AccessSource)> {
    let mut v = vec![("cpuclock", cpuclock())];
    if is_root() {
        v.push(("tick", AccessSource::Tick));
    } else {
        skip::skipped("the tick source: needs root or CAP_PERFMON");
    }
    v
}

/// Runs `check` on every source's run of `patterns ARGS` and fails with every failure at once.
/// One run at a time: two workloads and their monitors sharing the CPUs would each get fewer
/// samples per phase than the defaults are made for.
fn for_each_source(args: &[&str], check: impl Fn(&str, &Run) -> Vec<String>) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut failures = Vec::new();
    for (name, source) in sources() {
        let r = run(source, sampled_attrs(&source), args[0], &args[1..]);
        failures.extend(check(name, &r));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `nr_accesses` averaged over the bytes of `area` and over the run's snapshots.
fn mean_accesses(r: &Run, area: AddrRange) -> f64 {
    let snaps: Vec<_> = r.during().collect();
    snaps.iter().map(|s| s.mean_accesses_in(area)).sum::<f64>() / snaps.len() as f64
}

#[test]
fn static_workload_hot_area_ranks_hottest() {
    for_each_source(&["static", "-t", "6"], |name, r| {
        let n = r.during().count();
        assert!(n >= 10, "{name}: only {n} snapshots");
        let (hot, warm, cold) = (r.area("hot"), r.area("warm"), r.area("cold"));
        let (h, w, c) = (
            mean_accesses(r, hot),
            mean_accesses(r, warm),
            mean_accesses(r, cold),
        );
        let hot_first = r
            .during()
            .filter(|s| s.mean_accesses_in(hot) > s.mean_accesses_in(warm))
            .count();
        eprintln!(
            "{name} static: mean nr_accesses hot {h:.2} warm {w:.2} cold {c:.3}; hot above \
             warm in {hot_first} of {n} snapshots; {:?}",
            r.stats
        );
        // Nearly every sample of this loop gives an address, all in the workload's memory.
        assert!(
            r.stats.recovered * 10 > r.stats.samples * 9,
            "{:?}",
            r.stats
        );
        assert_eq!(r.stats.outside_mapped, 0);
        if h > w && w > c {
            vec![]
        } else {
            vec![format!(
                "{name}: mean nr_accesses hot {h} warm {w} cold {c}"
            )]
        }
    });
}

#[test]
fn static_workload_never_touched_memory_is_not_accessed() {
    // Twenty seconds, about 49 snapshots. The errors come one window at a time: a region
    // merged across the warm/never-touched boundary (DAMON's merge threshold cannot tell
    // 0 from 1-2 sampled intervals of 80) catches a warm sample that the recent windows'
    // samples cannot yet show apart, and reports its 15-80 MiB accessed. Each such window is
    // 0.1-0.6 % of the byte-snapshots of a 6 s run, so a short run measures the rate too
    // coarsely to compare it with 1 %.
    for_each_source(&["static", "-t", "20"], |name, r| {
        let cold = r.area("cold");
        let snaps: Vec<_> = r.during().collect();
        // Region edges rarely fall exactly on the area's edge, so the measure is the share of
        // (snapshot, never-touched byte) pairs reported accessed; the share of snapshots that
        // report none of it accessed is printed beside it.
        let accessed: u64 = snaps.iter().map(|s| s.accessed_bytes_in(cold)).sum();
        let share = accessed as f64 / (cold.size() as f64 * snaps.len() as f64);
        let per_snapshot: Vec<u64> = snaps
            .iter()
            .map(|s| s.accessed_bytes_in(cold) / MIB)
            .collect();
        let clean = snaps
            .iter()
            .filter(|s| s.accessed_bytes_in(cold) == 0)
            .count();
        eprintln!(
            "{name} static: never-touched memory reported accessed in {:.3} % of \
             byte-snapshots, in none of it in {clean} of {} snapshots; MiB per snapshot \
             {per_snapshot:?}",
            share * 100.0,
            snaps.len()
        );
        if share <= 0.01 {
            vec![]
        } else {
            vec![format!(
                "{name}: never-touched memory reported accessed in {:.2} % of byte-snapshots",
                share * 100.0
            )]
        }
    });
}

fn wss_median(r: &Run) -> u64 {
    median(r.during().map(|s| s.wss()).collect())
}

#[test]
fn stairs_working_set_is_one_step() {
    // Steps of a few seconds, as the issue describes them: with 400 ms windows a step of 1.5 s
    // leaves too many windows straddling two steps for the median to be one step.
    for_each_source(&["stairs", "-p", "3"], |name, r| {
        let mut failures = Vec::new();
        let m = wss_median(r);
        let wss: Vec<u64> = r.during().map(|s| s.wss() / (MIB / 10)).collect();
        eprintln!(
            "{name} stairs: median wss {:.2} MiB; per snapshot (0.1 MiB): {wss:?}",
            m as f64 / MIB as f64
        );
        if !(9 * MIB..=11 * MIB).contains(&m) {
            failures.push(format!(
                "{name}: stairs median working set {:.2} MiB",
                m as f64 / MIB as f64
            ));
        }
        failures
    });
}

#[test]
fn stairs_phase_change_shows_within_two_aggregations() {
    for_each_source(&["stairs", "-p", "1.5"], |name, r| {
        let mut failures = Vec::new();
        // The first window that starts after a step begins (it ends within two aggregation
        // intervals of the change) sees most of the new step accessed.
        for (i, &t) in r.phases_us.iter().enumerate().skip(1) {
            let step = r.area(&format!("step{i}"));
            let s = r
                .snaps
                .iter()
                .find(|s| s.start_us >= t)
                .expect("a window after each phase start");
            assert!(s.end_us <= t + 2 * r.attrs.aggr_interval_us);
            if s.accessed_bytes_in(step) * 2 < step.size() {
                failures.push(format!(
                    "{name}: step {i} not seen in the window {}..{} after it began at {t}",
                    s.start_us, s.end_us
                ));
            }
        }
        failures
    });
}

#[test]
fn zigzag_working_set_is_one_area() {
    for_each_source(&["zigzag", "-p", "1.5", "-t", "6"], |name, r| {
        let m = wss_median(r);
        let wss: Vec<u64> = r.during().map(|s| s.wss() / MIB).collect();
        eprintln!(
            "{name} zigzag: median wss {:.2} MiB; per snapshot (MiB): {wss:?}",
            m as f64 / MIB as f64
        );
        if (90 * MIB..=110 * MIB).contains(&m) {
            vec![]
        } else {
            vec![format!(
                "{name}: zigzag median working set {:.2} MiB",
                m as f64 / MIB as f64
            )]
        }
    });
}
