//! `udamon serve` and `udamon ctl` end to end: metrics scraped over HTTP and parsed by a
//! Prometheus text parser, targets that come and go, runtime control, garbage on the control
//! socket, rotated records within their retention limit, and a clean stop on SIGTERM.

mod common;

use common::serve::{PATIENCE, Serve, series, which};
use common::{build_workload, info, one_line_error, udamon};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn serve_exports_a_live_process_and_completes_its_record_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = Command::new(build_workload("patterns"))
        .args(["static", "-t", "60", "-o", "/dev/null"])
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let records = dir.path().join("records");
    let serve = Serve::start(
        dir.path(),
        &[
            "--pid",
            &pid,
            "--access-source",
            "cpuclock",
            "--record-dir",
            records.to_str().unwrap(),
        ],
    );
    // Started with a soft open-files limit of 512, serve runs with its hard limit.
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.child.id())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(open_files[0], open_files[1], "soft = hard: {limits}");
    // The static pattern's 64 MiB hot area is touched all the time: once some windows have
    // passed, the working set over 10 s holds most of it, and no more than the process has.
    // (A window in which a busy machine never ran it shows no bandwidth: one that did.)
    let samples = serve.metrics_until(
        "the hot area in the working set, bandwidth and the source counters",
        |s| {
            series(s, "udamon_working_set_bytes", &pid)
                .iter()
                .any(|x| x.value >= 32.0 * 1048576.0)
                && series(s, "udamon_source_samples_total", &pid)
                    .iter()
                    .any(|x| x.value > 0.0)
                && series(s, "udamon_access_bandwidth_bytes_per_second", &pid)
                    .iter()
                    .any(|x| x.value > 0.0)
        },
    );
    for s in series(&samples, "udamon_working_set_bytes", &pid) {
        assert!(s.value <= 1.2 * 1024.0 * 1048576.0, "{s:?}");
        assert_eq!(s.labels["comm"], "patterns-cli");
    }
    let bandwidth = series(&samples, "udamon_access_bandwidth_bytes_per_second", &pid);
    assert!(
        bandwidth.len() == 1 && bandwidth[0].value > 0.0,
        "{bandwidth:?}"
    );
    let idle = series(&samples, "udamon_idle_time_seconds", &pid);
    assert_eq!(idle.len(), 6, "{idle:?}");
    assert!(
        samples
            .iter()
            .any(|s| s.name == "process_resident_memory_bytes" && s.value > 0.0),
        "the monitor's own memory"
    );
    let listed = serve.ctl_ok(&["targets"]);
    assert!(listed.contains(&pid), "{listed}");
    let snapshot = serve.ctl_ok(&["snapshot", &pid]);
    assert!(snapshot.contains("total size"), "{snapshot}");
    let (status, _) = serve.get("/nothing");
    assert_eq!(status, 404);
    assert!(serve.stop(), "SIGTERM is a clean stop");
    target.kill().unwrap();
    target.wait().unwrap();

    let files: Vec<PathBuf> = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let i = info(&files[0]);
    assert_eq!(i["finished"], true, "{i}");
    assert!(i["nr_snapshots"].as_u64().unwrap() > 0, "{i}");
    assert_eq!(
        i["header"]["targets"][0]["pid"]
            .as_u64()
            .unwrap()
            .to_string(),
        pid
    );
}

#[test]
fn a_matched_process_is_served_while_it_lives_and_its_series_go_with_it() {
    let dir = tempfile::tempdir().unwrap();
    // A command name no other process has.
    let name = format!("udm{}", std::process::id() % 100_000);
    let sleeper = dir.path().join(&name);
    // A symlink, not a copy: an executable written while other tests fork can fail to
    // exec with ETXTBSY. The command name is the link's.
    std::os::unix::fs::symlink(which("sleep"), &sleeper).unwrap();
    let serve = Serve::start(
        dir.path(),
        &[
            "--match",
            &format!("^{name}$"),
            "--access-source",
            "cpuclock",
        ],
    );
    let mut first = Command::new(&sleeper).arg("60").spawn().unwrap();
    let pid = first.id().to_string();
    serve.metrics_until("the matched process", |s| {
        !series(s, "udamon_working_set_bytes", &pid).is_empty()
    });
    first.kill().unwrap();
    first.wait().unwrap();
    serve.metrics_until("its series gone", |s| {
        series(s, "udamon_working_set_bytes", &pid).is_empty()
    });
    // Another one with the name comes: it is served too.
    let mut second = Command::new(&sleeper).arg("60").spawn().unwrap();
    let pid2 = second.id().to_string();
    serve.metrics_until("the second process", |s| {
        !series(s, "udamon_working_set_bytes", &pid2).is_empty()
    });
    second.kill().unwrap();
    second.wait().unwrap();
    assert!(serve.stop());
}

#[test]
fn per_process_series_are_bounded_and_every_process_counts_in_its_cgroup() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("udp{}", std::process::id() % 100_000);
    let sleeper = dir.path().join(&name);
    std::os::unix::fs::symlink(which("sleep"), &sleeper).unwrap();
    let mut sleeps: Vec<Child> = (0..4)
        .map(|_| Command::new(&sleeper).arg("60").spawn().unwrap())
        .collect();
    let pids: Vec<String> = sleeps.iter().map(|c| c.id().to_string()).collect();
    let cgroup = udamon_linux::discover::process_cgroup(sleeps[0].id()).unwrap();
    // The first one named by --pid, the others found by name; one more series besides.
    let serve = Serve::start(
        dir.path(),
        &[
            "--match",
            &format!("^{name}$"),
            "--pid",
            &pids[0],
            "--process-series",
            "1",
            "--access-source",
            "cpuclock",
        ],
    );
    let with_series = |s: &[common::Sample]| {
        pids.iter()
            .filter(|p| !series(s, "udamon_working_set_bytes", p).is_empty())
            .count()
    };
    let in_cgroup = |s: &[common::Sample]| {
        s.iter()
            .find(|x| {
                x.name == "udamon_cgroup_processes"
                    && x.labels.get("cgroup").map(String::as_str) == Some(cgroup.as_str())
            })
            .map_or(0.0, |x| x.value)
    };
    // Other tests' processes may share the cgroup and be served by them, not by this serve.
    let samples = serve.metrics_until("all four in their cgroup's series", |s| {
        in_cgroup(s) >= 4.0 && with_series(s) >= 2
    });
    assert_eq!(with_series(&samples), 2, "the named one and one more");
    assert!(
        !series(&samples, "udamon_working_set_bytes", &pids[0]).is_empty(),
        "the named one always"
    );
    assert!(
        samples
            .iter()
            .any(|x| x.name == "udamon_targets" && x.value == 4.0),
        "all four are served"
    );
    let cgroup_ws = samples.iter().filter(|x| {
        x.name == "udamon_cgroup_working_set_bytes"
            && x.labels.get("cgroup").map(String::as_str) == Some(cgroup.as_str())
    });
    assert_eq!(cgroup_ws.count(), 3, "one per horizon");
    for c in &mut sleeps {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    serve.metrics_until("the cgroup's series gone with its processes", |s| {
        in_cgroup(s) == 0.0
    });
    assert!(serve.stop());
}

#[test]
fn ctl_changes_a_running_target_and_garbage_on_the_socket_does_no_harm() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &["--idle"]);
    let added = serve.ctl_ok(&["add", "--sim", "builtin:demo"]);
    assert!(added.contains("sim:1"), "{added}");
    assert!(serve.ctl_ok(&["targets"]).contains("sim:1"));
    let tuned = serve.ctl_ok(&[
        "tune",
        "sim:1",
        "--aggr-us",
        "200ms",
        "--max-regions",
        "300",
    ]);
    assert!(tuned.contains("200000"), "{tuned}");
    assert!(tuned.contains("..300"), "{tuned}");
    let status = serve.ctl_ok(&["status", "sim:1"]);
    assert!(
        status.contains("200000") && status.contains("0 scheme"),
        "{status}"
    );

    let schemes = dir.path().join("schemes.json");
    std::fs::write(
        &schemes,
        r#"[{"action": "stat", "access_pattern": {"sz_bytes": {"min": 0, "max": "max"},
            "nr_accesses": {"min": "0 %", "max": "100 %"}, "age": {"min": "0 s", "max": "max"}}}]"#,
    )
    .unwrap();
    let added = serve.ctl_ok(&["add-schemes", "sim:1", schemes.to_str().unwrap()]);
    assert!(added.contains("1 scheme(s) added"), "{added}");
    serve
        .ctl(&["remove-scheme", "sim:1", "3"])
        .failure()
        .stderr(predicates::str::contains("no scheme 3"));
    assert!(
        serve
            .ctl_ok(&["remove-scheme", "sim:1", "0"])
            .contains("removed")
    );
    serve
        .ctl(&["status", "4242"])
        .failure()
        .stderr(predicates::str::contains("not served"));

    // Garbage, an unknown request, a line far too long: each gets an error answer, and the
    // service goes on.
    let mut s = UnixStream::connect(&serve.control).unwrap();
    s.write_all(b"\xff\xfe not json\n{\"request\": \"reboot\"}\n")
        .unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for _ in 0..2 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.contains("\"ok\":false"), "{line}");
    }
    let mut long = vec![b'x'; 2 << 20];
    long.push(b'\n');
    let _ = s.write_all(&long);
    let mut line = String::new();
    let _ = reader.read_line(&mut line);
    assert!(line.is_empty() || line.contains("longer than"), "{line}");

    // Right after the tune, the first window of the new length may not have completed yet.
    let deadline = Instant::now() + PATIENCE;
    let snapshot = loop {
        let out = serve
            .ctl(&["snapshot", "sim:1", "--json"])
            .get_output()
            .clone();
        if out.status.success() {
            break String::from_utf8(out.stdout).unwrap();
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no window completed yet"), "{err}");
        assert!(Instant::now() < deadline, "no window ever completed");
        std::thread::sleep(Duration::from_millis(100));
    };
    let report: serde_json::Value = serde_json::from_str(&snapshot).unwrap();
    assert!(report["nr_regions"].as_u64().unwrap() > 0, "{report}");
    assert!(serve.ctl_ok(&["remove", "sim:1"]).contains("stopping"));
    let deadline = Instant::now() + PATIENCE;
    while serve.ctl_ok(&["targets"]).contains("sim:1") {
        assert!(Instant::now() < deadline, "sim:1 never left");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(serve.stop());
}

#[test]
fn records_rotate_and_stay_within_the_retention_limit() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--idle",
            "--record-dir",
            records.to_str().unwrap(),
            "--rotate-size",
            "8K",
            "--retain",
            "40K",
        ],
    );
    for _ in 0..3 {
        serve.ctl_ok(&["add", "--sim", "builtin:demo", "--fast"]);
    }
    for _ in 0..3 {
        serve.wait_log("monitoring ended: the target ended");
    }
    assert!(serve.stop());
    let files: Vec<PathBuf> = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let total: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    // Three demo runs are about 40 KiB of records each: rotation cut them into files of about
    // 8 KiB, and retention removed the oldest (three records may be open at once, and each
    // rotation checks after its own file).
    assert!(files.len() >= 3, "{files:?}");
    assert!(
        total <= 40 * 1024 + 3 * 12 * 1024,
        "{total} bytes in {files:?}"
    );
    for f in &files {
        let i = info(f);
        assert_eq!(i["finished"], true, "{}: {i}", f.display());
        assert!(
            i["nr_snapshots"].as_u64().unwrap() > 0,
            "{}: {i}",
            f.display()
        );
    }
}

#[test]
fn bad_configurations_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\nmatches = [\"x\"]\n").unwrap();
    for (args, says) in [
        (vec!["serve"], "nothing to serve"),
        (
            vec!["serve", "--match", "(", "--listen", "127.0.0.1:0"],
            "--match '('",
        ),
        (
            vec!["serve", "--idle", "--listen", "nowhere"],
            "is not an address",
        ),
        (
            vec!["serve", "--config", config.to_str().unwrap()],
            "unknown field",
        ),
    ] {
        let out = udamon().args(&args).assert().failure().get_output().clone();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn sighup_reads_the_configuration_again_and_a_bad_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::process::id() % 10_000;
    let (a, b) = (format!("udha{base}"), format!("udhb{base}"));
    let mut first = Command::new({
        let p = dir.path().join(&a);
        std::os::unix::fs::symlink(which("sleep"), &p).unwrap();
        p
    })
    .arg("60")
    .spawn()
    .unwrap();
    let mut second = Command::new({
        let p = dir.path().join(&b);
        std::os::unix::fs::symlink(which("sleep"), &p).unwrap();
        p
    })
    .arg("60")
    .spawn()
    .unwrap();
    let (pa, pb) = (first.id().to_string(), second.id().to_string());
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, format!("match = [\"^{a}$\"]\n")).unwrap();
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--access-source",
            "cpuclock",
        ],
    );
    serve.metrics_until("the first match", |s| {
        !series(s, "udamon_working_set_bytes", &pa).is_empty()
    });
    std::fs::write(&config, "match = [\"(\"]\n").unwrap();
    serve.signal(libc::SIGHUP);
    serve.wait_log("reload refused, nothing changed");
    assert!(
        serve.ctl_ok(&["targets"]).contains(&pa),
        "the bad file changed nothing"
    );
    std::fs::write(&config, format!("match = [\"^{b}$\"]\n")).unwrap();
    serve.signal(libc::SIGHUP);
    serve.wait_log("configuration read again");
    serve.metrics_until("the second match only", |s| {
        series(s, "udamon_working_set_bytes", &pa).is_empty()
            && !series(s, "udamon_working_set_bytes", &pb).is_empty()
    });
    for c in [&mut first, &mut second] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    assert!(serve.stop());
}

/// Starts `shared FILE PRIVATE_MIB 120` and waits until it has touched all its memory.
fn shared_workload(file: &Path, private_mib: u32) -> Child {
    let mut child = Command::new(build_workload("shared"))
        .arg(file)
        .arg(private_mib.to_string())
        .arg("120")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child
}

#[test]
fn the_host_view_counts_memory_two_processes_share_once() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the host's physical memory needs root");
        return;
    }
    const MIB: f64 = 1048576.0;
    let dir = tempfile::tempdir().unwrap();
    // Two processes map the same 256 MiB file; the first also has a private 64 MiB.
    let file = dir.path().join("shared");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    let mut both = [shared_workload(&file, 64), shared_workload(&file, 0)];
    let pids: Vec<String> = both.iter().map(|c| c.id().to_string()).collect();
    let serve = Serve::start(
        dir.path(),
        &[
            "--host",
            "--pid",
            &pids[0],
            "--pid",
            &pids[1],
            "--access-source",
            "cpuclock",
            "--sample-rate",
            "5000",
        ],
    );
    let over = |s: &[common::Sample], name: &str, horizon: &str| {
        s.iter()
            .find(|x| {
                x.name == name && x.labels.get("horizon").map(String::as_str) == Some(horizon)
            })
            .map(|x| x.value)
    };
    // The estimate is within a few percent once its samples outnumber the pages: the
    // shared pages draw samples from both processes, the private ones from one, and an
    // estimate from fewer repeats counts that unequal draw short (0.88 of the truth at 60,000
    // samples). On a busy machine the two processes run less, and only the longer horizon
    // gathers as many.
    let enough = |s: &[common::Sample]| {
        ["10s", "60s"]
            .into_iter()
            .find(|h| over(s, "udamon_host_working_set_samples", h).is_some_and(|n| n >= 120_000.0))
    };
    let deadline = Instant::now() + Duration::from_secs(150);
    let samples = loop {
        let samples = serve.metrics();
        if enough(&samples).is_some() || Instant::now() >= deadline {
            break samples;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let Some(horizon) = enough(&samples) else {
        eprintln!(
            "skipped: the machine is too busy for the two processes to be sampled 120,000 times \
             in a minute"
        );
        return;
    };
    let host = over(&samples, "udamon_host_working_set_bytes", horizon).unwrap();
    eprintln!(
        "the host's working set over {horizon}: {:.1} MiB from {} samples",
        host / MIB,
        over(&samples, "udamon_host_working_set_samples", horizon).unwrap()
    );
    // 256 MiB shared + 64 MiB private, touched evenly: 320 MiB of physical memory.
    assert!(
        (host / (320.0 * MIB) - 1.0).abs() <= 0.1,
        "the host's working set over {horizon}: {:.1} MiB, not 320 MiB",
        host / MIB
    );
    // Each process counts the file it maps: together they count it twice.
    let per_process: f64 = pids
        .iter()
        .flat_map(|pid| series(&samples, "udamon_working_set_bytes", pid))
        .filter(|s| s.labels["horizon"] == horizon)
        .map(|s| s.value)
        .sum();
    assert!(
        per_process > 1.4 * host,
        "per process {:.1} MiB, host {:.1} MiB",
        per_process / MIB,
        host / MIB
    );
    // The host's bytes are the processes' frames: its bandwidth counts the bytes its working
    // set counts, never more than the processes' own (shared frames once).
    let host_bandwidth = samples
        .iter()
        .find(|s| s.name == "udamon_host_access_bandwidth_bytes_per_second")
        .map_or(0.0, |s| s.value);
    let processes_bandwidth: f64 = pids
        .iter()
        .flat_map(|pid| series(&samples, "udamon_access_bandwidth_bytes_per_second", pid))
        .map(|s| s.value)
        .sum();
    assert!(
        host_bandwidth <= 1.5 * processes_bandwidth,
        "host {host_bandwidth:.3e} B/s, processes {processes_bandwidth:.3e} B/s"
    );
    let horizons: Vec<f64> = ["window", "10s", "60s"]
        .iter()
        .map(|h| over(&samples, "udamon_host_working_set_bytes", h).unwrap())
        .collect();
    assert!(
        horizons.windows(2).all(|w| w[0] <= w[1]),
        "the host's horizons out of order: {horizons:?}"
    );
    assert!(
        serve
            .ctl_ok(&["targets"])
            .lines()
            .any(|l| l.starts_with("host\t")),
        "ctl targets lists the host"
    );
    for name in [
        "udamon_host_access_bandwidth_bytes_per_second",
        "udamon_host_monitored_bytes",
    ] {
        assert!(
            samples.iter().any(|s| s.name == name && s.value > 0.0),
            "{name}"
        );
    }
    let quantiles = samples
        .iter()
        .filter(|s| s.name == "udamon_host_idle_time_seconds")
        .count();
    assert_eq!(quantiles, 6);
    assert!(serve.stop());
    for c in &mut both {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

/// `top --serve --target X` for a target serve does not serve says so and ends, rather than
/// waiting on a screen that never fills.
#[test]
fn top_refuses_a_target_that_is_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &["--idle"]);
    assert!(
        serve
            .ctl_ok(&["add", "--sim", "builtin:demo"])
            .contains("sim:1")
    );
    let out = udamon()
        .args(["top", "--serve", "--control"])
        .arg(&serve.control)
        .args(["--target", "sim:7"])
        .output()
        .unwrap();
    let stderr = one_line_error(&out);
    assert!(
        stderr.contains("no target sim:7") && stderr.contains("it serves sim:1"),
        "{stderr}"
    );
    assert!(serve.stop());
}
