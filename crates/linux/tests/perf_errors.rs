//! The sources' error messages on bad settings and missing features.

mod workload;

use std::path::Path;
use udamon_linux::perf::{
    AccessSource, CpuClock, PerfError, PmuEvent, PmuKind, Rate, Sampler, SamplerConfig, detect_pmu,
};
use workload::memloop;

fn has_memory_sampling_pmu() -> bool {
    let d = Path::new("/sys/bus/event_source/devices");
    d.join("cpu/events/mem-loads").exists()
        || d.join("cpu_core/events/mem-loads").exists()
        || d.join("ibs_op").exists()
        || std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("arm_spe"))
}

#[test]
fn pmu_detection_on_this_machine() {
    match detect_pmu(Rate::Frequency(4000)) {
        Ok(event) => assert!(
            has_memory_sampling_pmu(),
            "detected {event:?} without a PMU in sysfs"
        ),
        Err(e) => {
            let msg = e.to_string();
            if !has_memory_sampling_pmu() {
                assert!(matches!(e, PerfError::NoPmu(_)));
                assert!(msg.starts_with("no PMU memory sampling here"), "{msg}");
                assert!(msg.contains("/sys/bus/event_source/devices"), "{msg}");
                assert!(
                    msg.ends_with("use --access-source tick (root) or cpuclock"),
                    "{msg}"
                );
            }
        }
    }
}

#[test]
fn pmu_event_the_machine_lacks_is_unsupported_with_alternatives() {
    if has_memory_sampling_pmu() {
        return;
    }
    // An Intel PEBS mem-loads event on a machine without it: the `cpu` PMU type does not exist
    // here (this VM has only software, tracepoint, breakpoint, msr and uprobe PMUs).
    let event = PmuEvent {
        kind: PmuKind::IntelPebs,
        pmu_type: 4,
        config: 0x1cd,
        config1: 30,
        config2: 0,
        precise_ip: 2,
        rate: Rate::Frequency(4000),
        phys_addr: false,
        include_kernel: false,
    };
    let config = SamplerConfig {
        source: AccessSource::Pmu(event),
        ..SamplerConfig::default()
    };
    let e = Sampler::spawn(memloop(), &["-t", "0.1", "-o", "/dev/null"], &config)
        .err()
        .expect("no PMU here");
    assert!(matches!(e, PerfError::Unsupported { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("Intel PEBS memory sampling (type 4 config 0x1cd"),
        "{msg}"
    );
    assert!(
        msg.ends_with("use --access-source tick (root) or cpuclock"),
        "{msg}"
    );
}

#[test]
fn bad_settings_are_refused_before_anything_runs() {
    let ring = SamplerConfig {
        ring_pages: 100,
        ..SamplerConfig::default()
    };
    let e = Sampler::attach(std::process::id(), &ring)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        "invalid sampler settings: ring buffer pages must be a power of two, not 100"
    );

    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let fast = SamplerConfig {
        source: AccessSource::CpuClock(CpuClock {
            rate: Rate::Frequency(max + 1),
            ..CpuClock::default()
        }),
        ..SamplerConfig::default()
    };
    let e = Sampler::attach(std::process::id(), &fast).err().unwrap();
    assert!(matches!(e, PerfError::FrequencyTooHigh { .. }));
    assert!(
        e.to_string().ends_with(&format!("use at most {max} Hz")),
        "{e}"
    );
}

#[test]
fn missing_program_is_a_spawn_error() {
    let e = Sampler::spawn(
        "/nonexistent/udamon-test-program",
        &["x"],
        &SamplerConfig::default(),
    )
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        "cannot run /nonexistent/udamon-test-program: No such file or directory (os error 2)"
    );
    let e = Sampler::spawn(
        "udamon-no-such-command-on-path",
        &[] as &[&str],
        &SamplerConfig::default(),
    )
    .err()
    .unwrap();
    assert!(
        e.to_string()
            .starts_with("cannot run udamon-no-such-command-on-path: "),
        "{e}"
    );
    // A file that exists but is not executable fails at exec, in the child.
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "data").unwrap();
    let e = Sampler::spawn(&plain, &[] as &[&str], &SamplerConfig::default())
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "cannot run {}: Permission denied (os error 13)",
            plain.display()
        )
    );
}
