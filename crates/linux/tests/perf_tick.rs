//! The tick source: samples on the scheduler tick tracepoint (root only). If tracefs is not
//! mounted, the first test to open the source mounts it at /sys/kernel/tracing and it stays
//! mounted.

#[path = "../../record/tests/common/skip.rs"]
mod skip;
mod workload;

use std::time::Duration;
use udamon_linux::perf::{AccessSource, REGS_ABI_64, Sampler, SamplerConfig, reg};
use workload::{is_root, memloop, run_to_end, samples};

fn tracefs_mounted() -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .any(|l| l.split(' ').nth(2) == Some("tracefs"))
}

/// CONFIG_HZ from /proc/config.gz, when the kernel exposes it.
fn config_hz() -> Option<f64> {
    let out = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ=")?.parse().ok())
}

#[test]
fn tick_source_samples_each_scheduler_tick() {
    if !is_root() {
        skip::skipped("the tick source needs root or CAP_PERFMON");
        return;
    }
    let was_mounted = tracefs_mounted();
    let config = SamplerConfig {
        source: AccessSource::Tick,
        ..SamplerConfig::default()
    };
    let mut s = Sampler::spawn(
        memloop(),
        &["-t", "1.5", "-n", "1", "-o", "/dev/null"],
        &config,
    )
    .unwrap();
    if was_mounted {
        assert!(s.notes().is_empty(), "{:?}", s.notes());
    } else {
        assert_eq!(s.notes().len(), 1);
        assert!(
            s.notes()[0].starts_with("mounted tracefs at /sys/kernel/tracing"),
            "{:?}",
            s.notes()
        );
        assert!(tracefs_mounted());
    }
    let pid = s.pid();
    let recs = run_to_end(&mut s, Duration::from_secs(30), |_, _| {});
    let exit = s.wait_child().unwrap().unwrap();
    assert!(exit.status.success());

    let all: Vec<_> = samples(&recs).collect();
    for smp in &all {
        assert_eq!(smp.pid, pid);
        // Taken in the interrupt handler, with the interrupted user context's registers.
        assert!(smp.in_kernel && smp.ip >= 0xffff_8000_0000_0000, "{smp:?}");
        assert_eq!(smp.abi, REGS_ABI_64);
        assert!(smp.regs[reg::IP] < 0x8000_0000_0000, "{smp:?}");
    }
    let per_cpu_second = all.len() as f64 / exit.cpu_time.as_secs_f64();
    eprintln!(
        "tick source: {} samples, {per_cpu_second:.0} per CPU-second of the target",
        all.len()
    );
    // At least one tick per 1/HZ of CPU time. Not at most: every local timer interrupt is
    // a sample, and on a busy host other tasks' timers interrupt the target too (355 per
    // CPU-second at HZ 250 beside a release build and a test run). What must not happen is
    // two samples of one interrupt.
    let floor = config_hz().map_or(50.0, |hz| 0.6 * hz);
    assert!(
        per_cpu_second >= floor,
        "{per_cpu_second}/s, at least {floor}"
    );
    let mut interrupts: Vec<(u32, u64)> = all.iter().map(|smp| (smp.cpu, smp.time_ns)).collect();
    interrupts.sort_unstable();
    let before = interrupts.len();
    interrupts.dedup();
    assert_eq!(
        interrupts.len(),
        before,
        "two samples of one timer interrupt"
    );

    // Once tracefs is mounted, opening the source again needs no mount.
    let mut again = Sampler::spawn(memloop(), &["-t", "0.1", "-o", "/dev/null"], &config).unwrap();
    assert!(again.notes().is_empty());
    again.wait_child().unwrap();
}
