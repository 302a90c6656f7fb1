//! Spawn mode with the cpu-clock source: a workload sampled from its exec to its exit.

mod workload;

use std::collections::{HashMap, HashSet};
use std::time::Duration;
use udamon_linux::maps::{Maps, read_maps};
use udamon_linux::perf::{PerfRecord, REGS_ABI_64, Sampler, SamplerConfig, reg};
use workload::{memloop, monotonic_ns, reported_tids, run_to_end, samples};

#[test]
fn cpuclock_samples_the_spawned_workload() {
    let dir = tempfile::tempdir().unwrap();
    let tids_file = dir.path().join("tids");
    let t0 = monotonic_ns();
    let config = SamplerConfig::default(); // cpu-clock, 1 kHz, user mode
    let args = ["-t", "1", "-n", "1", "-o", tids_file.to_str().unwrap()];
    let mut s = Sampler::spawn(memloop(), &args, &config).unwrap();
    let pid = s.pid();
    assert_eq!(s.child(), Some(pid));
    assert!(s.notes().is_empty());

    let mut maps: Option<Maps> = None;
    let recs = run_to_end(&mut s, Duration::from_secs(30), |s, recs| {
        if maps.is_none() && workload::samples(recs).count() >= 200 {
            maps = Some(read_maps(s.pid()).unwrap());
        }
    });
    let exit = s.wait_child().unwrap().expect("our child");
    assert!(exit.status.success(), "{:?}", exit.status);
    assert_eq!(s.child(), None);
    let t1 = monotonic_ns();
    let maps = maps.expect("samples arrived while the workload ran");
    let tids: HashSet<u32> = reported_tids(&std::fs::read_to_string(&tids_file).unwrap())
        .into_iter()
        .collect();
    assert_eq!(tids.len(), 2, "main thread and one worker");

    let all: Vec<_> = samples(&recs).collect();
    let n = all.len() as f64;
    assert_eq!(s.counters().samples, all.len() as u64);
    assert_eq!(s.counters().lost, 0);
    // cpu-clock at 1 kHz takes one sample per millisecond of the target's CPU time.
    let per_cpu_second = n / exit.cpu_time.as_secs_f64();
    assert!(
        (500.0..1500.0).contains(&per_cpu_second),
        "{n} samples in {:?} of CPU",
        exit.cpu_time
    );

    let mut in_exec_mapping = 0;
    let mut last_time_per_cpu: HashMap<u32, u64> = HashMap::new();
    for smp in &all {
        assert_eq!(smp.pid, pid);
        assert!(
            tids.contains(&smp.tid),
            "tid {} is not one of the workload's {tids:?}",
            smp.tid
        );
        assert!(
            (t0..=t1).contains(&smp.time_ns),
            "time {} is not CLOCK_MONOTONIC in [{t0}, {t1}]",
            smp.time_ns
        );
        let last = last_time_per_cpu.entry(smp.cpu).or_default();
        assert!(smp.time_ns >= *last, "a ring's records go back in time");
        *last = smp.time_ns;
        assert!(!smp.in_kernel);
        assert_eq!(smp.abi, REGS_ABI_64);
        assert_ne!(smp.ip, 0);
        assert_eq!(
            smp.regs[reg::IP],
            smp.ip,
            "IP register in the documented slot"
        );
        assert_eq!(smp.addr, None);
        if maps.lookup(smp.ip).is_some_and(|m| m.perms.exec) {
            in_exec_mapping += 1;
        }
        // The stack pointer lies in a writable mapping (the main stack or a thread stack).
        assert!(
            maps.lookup(smp.regs[reg::SP])
                .is_some_and(|m| m.perms.write),
            "{smp:?}"
        );
    }
    // Samples taken before the maps snapshot are all in code; a few later ones may not be if
    // code was mapped after it (there is none in this workload).
    assert!(
        in_exec_mapping as f64 >= 0.99 * n,
        "{in_exec_mapping} of {n} IPs in executable mappings"
    );
    let by_tid = |t: u32| all.iter().filter(|s| s.tid == t).count();
    for &t in &tids {
        assert!(
            by_tid(t) as f64 > 0.2 * n,
            "thread {t} has only {} of {n} samples",
            by_tid(t)
        );
    }
}

#[test]
fn exec_mmap_fork_and_exit_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("memloop2");
    std::os::unix::fs::symlink(memloop(), &link).unwrap();
    let link = link.to_str().unwrap();
    // Work 0.3 s with one extra thread, then exec the workload again under another name.
    let args = [
        "-t",
        "0.3",
        "-n",
        "1",
        "-o",
        "/dev/null",
        "-e",
        link,
        "-t",
        "0.3",
        "-n",
        "1",
        "-o",
        "/dev/null",
    ];
    let mut s = Sampler::spawn(memloop(), &args, &SamplerConfig::default()).unwrap();
    let pid = s.pid();
    let mut recs = run_to_end(&mut s, Duration::from_secs(30), |_, _| {});
    assert!(s.wait_child().unwrap().unwrap().status.success());
    recs.sort_by_key(PerfRecord::time_ns);

    let execs: Vec<(u64, &str)> = recs
        .iter()
        .filter_map(|r| match r {
            PerfRecord::Exec {
                pid: p,
                tid,
                comm,
                time_ns,
            } if *p == pid && *tid == pid => Some((*time_ns, comm.as_str())),
            _ => None,
        })
        .collect();
    // The exec that started sampling (enable_on_exec) is reported too.
    assert_eq!(
        execs.iter().map(|e| e.1).collect::<Vec<_>>(),
        ["memloop", "memloop2"]
    );
    let second_exec = execs.last().unwrap().0;
    assert!(
        samples(&recs).any(|s| s.time_ns < second_exec),
        "samples before the second exec"
    );
    assert!(
        samples(&recs).any(|s| s.time_ns > second_exec),
        "samples after the second exec"
    );

    // The workload binary is mapped executable after each exec (by its real path: the kernel
    // resolves the symlink), and its buffers show up as data mappings.
    let real = std::fs::canonicalize(memloop()).unwrap();
    let code_maps: Vec<u64> = recs
        .iter()
        .filter_map(|r| match r {
            PerfRecord::Mmap {
                pid: p,
                prot,
                path,
                time_ns,
                ..
            } if *p == pid && *path == real && prot & libc::PROT_EXEC as u32 != 0 => Some(*time_ns),
            _ => None,
        })
        .collect();
    assert!(code_maps.iter().any(|&t| t > second_exec), "{code_maps:?}");
    assert!(
        recs.iter()
            .any(|r| matches!(r, PerfRecord::Mmap { pid: p, prot, len, .. }
            if *p == pid && prot & libc::PROT_EXEC as u32 == 0 && *len >= 16 << 20)),
        "a 16 MiB worker buffer mapping"
    );

    // Each run creates one worker thread, which exits before the main thread.
    let forks: Vec<u32> = recs
        .iter()
        .filter_map(|r| match r {
            PerfRecord::Fork {
                pid: p, ppid, tid, ..
            } if *p == pid && *ppid == pid && *tid != pid => Some(*tid),
            _ => None,
        })
        .collect();
    assert_eq!(forks.len(), 2, "{forks:?}");
    let exited: HashSet<u32> = recs
        .iter()
        .filter_map(|r| match r {
            PerfRecord::Exit { pid: p, tid, .. } if *p == pid => Some(*tid),
            _ => None,
        })
        .collect();
    for t in forks.iter().chain([&pid]) {
        assert!(
            exited.contains(t),
            "no Exit record for thread {t}: {exited:?}"
        );
    }
}

#[test]
fn drain_sorted_merges_the_cpus_in_time_order() {
    let mut s = Sampler::spawn(
        memloop(),
        // Long enough that a loaded machine still gives the loop CPU time for 100 samples.
        &["-t", "2", "-n", "1", "-o", "/dev/null"],
        &SamplerConfig::default(),
    )
    .unwrap();
    let mut recs = Vec::new();
    loop {
        let gone = s.poll(Duration::from_millis(50)).unwrap()
            == udamon_linux::perf::PollOutcome::TargetGone;
        let before = recs.len();
        s.drain_sorted(&mut recs);
        assert!(
            recs[before..]
                .windows(2)
                .all(|w| w[0].time_ns() <= w[1].time_ns())
        );
        if gone {
            break;
        }
    }
    s.wait_child().unwrap();
    assert!(samples(&recs).count() > 100);
    assert_eq!(samples(&recs).count() as u64, s.counters().samples);
}
