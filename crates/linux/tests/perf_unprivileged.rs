//! An unprivileged monitor (uid nobody) sampling its own child, at perf_event_paranoid=2: user
//! mode works, kernel mode and other users' processes fail with clear errors. Run as root, the
//! test re-runs its `#[ignore]`d half as nobody with setpriv.

#[path = "../../record/tests/common/skip.rs"]
mod skip;
mod workload;

use std::time::Duration;
use udamon_linux::perf::{AccessSource, CpuClock, PerfError, Sampler, SamplerConfig};
use workload::{is_root, memloop, run_as_nobody, run_to_end, samples};

#[test]
fn unprivileged_monitor_samples_its_own_child() {
    if !is_root() {
        skip::skipped(
            "needs root to switch to nobody (when not root, run the ignored test directly)",
        );
        return;
    }
    let out = run_as_nobody("as_nobody", &[("UDAMON_AS_NOBODY", "1")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "as nobody:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("as_nobody: done"),
        "the test did not run as nobody:\n{stdout}\n{stderr}"
    );
}

#[test]
#[ignore = "run by unprivileged_monitor_samples_its_own_child as nobody"]
fn as_nobody() {
    if std::env::var_os("UDAMON_AS_NOBODY").is_none() {
        return;
    }
    assert!(!is_root());
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if paranoid > 2 {
        // Unprivileged perf is off entirely here: the error must say so.
        let e = Sampler::spawn(memloop(), &["-t", "0.1"], &SamplerConfig::default())
            .err()
            .unwrap();
        assert!(matches!(e, PerfError::ParanoidTooHigh { .. }), "{e}");
        println!("as_nobody: done");
        return;
    }

    // User-mode cpu-clock on our own child works.
    let mut s = Sampler::spawn(
        memloop(),
        &["-t", "0.5", "-o", "/dev/null"],
        &SamplerConfig::default(),
    )
    .unwrap();
    let pid = s.pid();
    let recs = run_to_end(&mut s, Duration::from_secs(30), |_, _| {});
    assert!(s.wait_child().unwrap().unwrap().status.success());
    let n = samples(&recs)
        .filter(|s| s.pid == pid && !s.in_kernel)
        .count();
    assert!(n > 100, "only {n} samples");

    // Kernel mode needs privilege at paranoid 2.
    let kernel = SamplerConfig {
        source: AccessSource::CpuClock(CpuClock {
            include_kernel: true,
            ..CpuClock::default()
        }),
        ..SamplerConfig::default()
    };
    if paranoid == 2 {
        let e = Sampler::spawn(memloop(), &["-t", "0.1"], &kernel)
            .err()
            .expect("kernel sampling refused");
        assert!(
            matches!(e, PerfError::KernelSamplingDenied { paranoid: 2, .. }),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "kernel-mode sampling (exclude_kernel=0) needs root or CAP_PERFMON while kernel.perf_event_paranoid is 2: run as root, or use --access-source cpuclock (user-mode only)"
        );
        // The tick source is refused up front, before any tracefs access.
        let tick = SamplerConfig {
            source: AccessSource::Tick,
            ..SamplerConfig::default()
        };
        let e = Sampler::attach(std::process::id(), &tick).err().unwrap();
        assert!(matches!(e, PerfError::KernelSamplingDenied { .. }), "{e}");
        assert!(e.to_string().starts_with(
            "the tick source (tracepoint irq_vectors:local_timer_entry) needs root or CAP_PERFMON"
        ));
    }

    // Another user's process (pid 1 is root's).
    let e = Sampler::attach(1, &SamplerConfig::default()).err().unwrap();
    assert_eq!(
        e.to_string(),
        "no permission to sample process 1 (owned by uid 0, we are uid 65534): run as the process's owner or as root"
    );
    // Our own process, once it made itself non-dumpable.
    let mut undumpable = std::process::Command::new(memloop())
        .args(["-d", "-t", "10", "-s"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(undumpable.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready, "ready\n");
    let e = Sampler::attach(undumpable.id(), &SamplerConfig::default())
        .err()
        .unwrap();
    undumpable.kill().unwrap();
    undumpable.wait().unwrap();
    assert!(matches!(e, PerfError::NotDumpable(_)), "{e}");
    assert!(
        e.to_string()
            .ends_with("so only root may sample it: run as root")
    );
    // And its maps.
    let e = udamon_linux::maps::read_maps(1).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no permission to read /proc/1/maps: run as the process's owner or as root"
    );
    println!("as_nobody: done");
}
