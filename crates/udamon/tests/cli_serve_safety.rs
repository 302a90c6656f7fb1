//! `udamon serve` as root on a shared host, where every local user, file and socket client is
//! untrusted (issue 19): the ptrace rule for processes found by name, credentials that change,
//! private records, a control socket only its owner's `ctl` speaks to, files read with the
//! caller's rights, bounded tunes, waits and inputs, a flood of idle control connections, and
//! a log that says what changed and why each target ended.

mod common;
#[path = "../../record/tests/common/skip.rs"]
mod skip;
#[path = "../../linux/tests/users/mod.rs"]
mod users;

use common::serve::{PATIENCE, Serve, series, which};
use common::{info, udamon};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use users::{
    NOBODY, as_user, link, nobody_runs, other_users_run, setuid_cases_run, shared_dir, wait_euid,
};

/// Another unprivileged user, who needs no account: the kernel takes any uid.
const MALLORY: u32 = 4242;

/// Whether other users can run this build's udamon (its path may be private).
fn others_run_udamon() -> bool {
    if !other_users_run() {
        return false;
    }
    let ok = as_user(NOBODY, Path::new(env!("CARGO_BIN_EXE_udamon")))
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "skipped: other users cannot run {}",
            env!("CARGO_BIN_EXE_udamon")
        );
    }
    ok
}

fn stop(children: &mut [&mut Child]) {
    for c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Sends one raw request line to serve's socket; returns the answer line.
fn raw(serve: &Serve, request: &str) -> serde_json::Value {
    let mut s = UnixStream::connect(&serve.control).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    s.write_all(b"\n").unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// Waits for serve to exit after SIGTERM, for `PATIENCE` at most; its success.
fn stopped_in_time(mut serve: Serve) -> bool {
    serve.signal(libc::SIGTERM);
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            return status.success();
        }
        assert!(
            Instant::now() < deadline,
            "serve never finished after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `ctl status TARGET` answers: the target runs.
fn wait_served(serve: &Serve, target: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !serve.ctl(&["status", target]).get_output().status.success() {
        assert!(Instant::now() < deadline, "{target} never served");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for the log line that says why process `pid`'s monitoring ended; returns it.
fn wait_ended(serve: &mut Serve, pid: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match serve.log.recv_timeout(left) {
            Ok(line) if line.contains(&format!("({pid})")) && line.contains("monitoring ended") => {
                return line;
            }
            Ok(_) => {}
            Err(_) => panic!("no log line saying why {pid} ended"),
        }
    }
}

fn records(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn a_setuid_program_under_a_matched_name_is_not_served_and_records_are_private() {
    if !setuid_cases_run() {
        return;
    }
    let dir = shared_dir();
    let name = format!("udmS{}", std::process::id() % 10_000);
    let records_dir = dir.path().join("records");
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--match",
            &format!("^{name}$"),
            "--access-source",
            "cpuclock",
            "--record-dir",
            records_dir.to_str().unwrap(),
        ],
    );
    // Three processes of nobody's under the name: sleep, su (setuid root), and a shell that
    // later executes su in its place.
    let sleep = link(dir.path(), "sleep", &name, &which("sleep"));
    let su = link(dir.path(), "su", &name, Path::new("/usr/bin/su"));
    let sh = link(dir.path(), "sh", &name, Path::new("/bin/sh"));
    let mut theirs = nobody_runs(&sleep, &["60"]);
    let mut setuid = nobody_runs(&su, &["root"]);
    let script = format!("read x; exec {} root", su.display());
    let mut changer = nobody_runs(&sh, &["-c", &script]);
    wait_euid(setuid.id(), 0);
    let (pt, ps, pc) = (
        theirs.id().to_string(),
        setuid.id().to_string(),
        changer.id().to_string(),
    );
    serve.metrics_until("nobody's own processes served", |s| {
        !series(s, "udamon_regions", &pt).is_empty() && !series(s, "udamon_regions", &pc).is_empty()
    });
    let refused = serve.wait_log(&format!("({ps}) is selected but not served"));
    assert!(refused.contains("gained privileges"), "{refused}");
    let listed = serve.ctl_ok(&["targets"]);
    assert!(
        !listed.contains(&ps),
        "the setuid program is served: {listed}"
    );

    // The shell becomes su: its credentials change, and it is dropped for good.
    changer.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    wait_euid(changer.id(), 0);
    let ended = wait_ended(&mut serve, &pc);
    assert!(ended.contains("credentials changed"), "{ended}");
    serve.metrics_until("the changed process's series gone", |s| {
        series(s, "udamon_regions", &pc).is_empty()
    });
    std::thread::sleep(Duration::from_secs(1));
    let listed = serve.ctl_ok(&["targets"]);
    assert!(
        listed.contains(&pt) && !listed.contains(&pc) && !listed.contains(&ps),
        "{listed}"
    );
    stop(&mut [&mut theirs, &mut setuid, &mut changer]);
    assert!(serve.stop());

    let files = records(&records_dir);
    assert!(files.len() >= 2, "{files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        assert!(!name.contains(&format!("-{ps}-")), "a record of su: {name}");
        let mode = f.metadata().unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name} is {mode:o}");
        if name.contains(&format!("-{pc}-")) {
            let i = info(f).to_string();
            assert!(i.contains("credentials changed"), "{i}");
        }
    }
}

#[test]
fn ctl_speaks_only_to_its_own_user_or_root_and_the_default_socket_is_private() {
    if !others_run_udamon() {
        return;
    }
    let dir = shared_dir();
    let bin = Path::new(env!("CARGO_BIN_EXE_udamon"));
    // Mallory serves a socket of his own and waits for root to speak to it.
    let theirs = dir.path().join("mallory");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(MALLORY), Some(MALLORY)).unwrap();
    let fake = theirs.join("udamon.sock");
    let mut mallory = as_user(MALLORY, bin)
        .args(["serve", "--idle", "--listen", "127.0.0.1:0", "--control"])
        .arg(&fake)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !fake.exists() {
        assert!(Instant::now() < deadline, "mallory's serve never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = udamon()
        .args(["ctl", "--control"])
        .arg(&fake)
        .args(["targets"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "root spoke to mallory's socket");
    assert!(err.contains(&format!("belongs to uid {MALLORY}")), "{err}");
    stop(&mut [&mut mallory]);

    // Without a runtime directory, nobody's socket is in a directory of nobody's own...
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let run = |uid: u32, tmp: &Path, args: &[&str]| {
        let mut c = as_user(uid, bin);
        c.args(args)
            .env("TMPDIR", tmp)
            .env_remove("XDG_RUNTIME_DIR")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let mut serve = run(
        NOBODY,
        &tmp,
        &["serve", "--idle", "--listen", "127.0.0.1:0"],
    )
    .spawn()
    .unwrap();
    let private = tmp.join(format!("udamon-{NOBODY}"));
    let socket = private.join("udamon.sock");
    let deadline = Instant::now() + PATIENCE;
    while !socket.exists() {
        assert!(
            serve.try_wait().unwrap().is_none(),
            "nobody's serve ended: {:?}",
            serve.wait_with_output()
        );
        assert!(
            Instant::now() < deadline,
            "no socket at {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let meta = private.symlink_metadata().unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (NOBODY, 0o700));
    let out = run(NOBODY, &tmp, &["ctl", "targets"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    stop(&mut [&mut serve]);

    // ... and a directory there that another user made first is refused, by serve and ctl.
    let squatted = dir.path().join("tmp2");
    std::fs::create_dir(&squatted).unwrap();
    std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let trap = squatted.join(format!("udamon-{NOBODY}"));
    std::fs::create_dir(&trap).unwrap();
    std::fs::set_permissions(&trap, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(&trap, Some(MALLORY), Some(MALLORY)).unwrap();
    let out = run(
        NOBODY,
        &squatted,
        &["serve", "--idle", "--listen", "127.0.0.1:0"],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve used mallory's directory");
    assert!(err.contains("not a place for the control socket"), "{err}");
}

#[test]
fn serve_opens_no_file_for_a_caller_and_bounds_what_ctl_reads() {
    let dir = tempfile::tempdir().unwrap();
    // A file the caller names: serve must not read it for them, nor show a line of it.
    let secret = dir.path().join("secret.cfg");
    std::fs::write(&secret, "a, 4096\n\nphase\n100\nTOPSECRET-LINE, 1, 64, 1\n").unwrap();
    let mut serve = Serve::start(dir.path(), &["--idle"]);
    let answer = raw(
        &serve,
        &format!(
            r#"{{"request": "add", "sim": "{}"}}"#,
            secret.to_str().unwrap()
        ),
    );
    assert_eq!(answer["ok"], false, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("opens no file"), "{error}");
    assert!(!error.contains("TOPSECRET"), "{error}");
    serve.wait_log("opens no file");
    // ctl reads the file itself, with the caller's rights, and sends its text.
    let workload = dir.path().join("demo.cfg");
    std::fs::write(&workload, udamon_sim::builtin("demo").unwrap()).unwrap();
    let added = serve.ctl_ok(&["add", "--sim", workload.to_str().unwrap(), "--fast"]);
    assert!(added.contains("serving sim:1"), "{added}");
    // What ctl reads is bounded: /dev/zero is refused at once.
    serve
        .ctl(&["add", "--sim", "/dev/zero"])
        .failure()
        .stderr(predicates::str::contains("larger than 16 MiB"));
    serve
        .ctl(&["add-schemes", "sim:1", "/dev/zero"])
        .failure()
        .stderr(predicates::str::contains("larger than 16 MiB"));
    assert!(serve.stop());
}

#[test]
fn record_reads_bounded_inputs_and_refuses_overflowing_durations() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.data");
    for (args, says) in [
        (vec!["--sim", "/dev/zero"], "larger than 16 MiB"),
        (vec!["--schemes", "/dev/zero"], "larger than 16 MiB"),
        (
            vec!["--duration", "99999999999h"],
            "longer than udamon takes",
        ),
        (
            vec!["--duration", "18446744073709551616"],
            "longer than udamon takes",
        ),
        (
            vec![
                "--sample-us",
                "1us",
                "--aggr-us",
                "1us",
                "--update-us",
                "1us",
            ],
            "out of range",
        ),
    ] {
        let result = udamon()
            .arg("record")
            .args(&args)
            .arg("-o")
            .arg(&out)
            .timeout(PATIENCE)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&result.stderr);
        assert!(!result.status.success(), "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote a record");
    }
}

#[test]
fn absurd_tunes_are_refused_and_the_longest_windows_still_stop_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut sleeper = Command::new(which("sleep")).arg("120").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let records_dir = dir.path().join("records");
    let serve = Serve::start(
        dir.path(),
        &[
            "--pid",
            &pid,
            "--access-source",
            "cpuclock",
            "--record-dir",
            records_dir.to_str().unwrap(),
        ],
    );
    wait_served(&serve, &pid);
    serve
        .ctl(&["tune", &pid, "--aggr-us", "1000000000000000000"])
        .failure()
        .stderr(predicates::str::contains("longer than udamon takes"));
    let max = u64::MAX;
    for tune in [
        r#"{"aggr_us": 1000000000000000000}"#.to_string(),
        r#"{"sample_us": 0}"#.to_string(),
        format!(r#"{{"sample_us": {max}, "aggr_us": {max}, "update_us": {max}}}"#),
        r#"{"sample_us": 1, "aggr_us": 1, "update_us": 1}"#.to_string(),
        r#"{"max_regions": 4294967295}"#.to_string(),
    ] {
        let answer = raw(
            &serve,
            &format!(r#"{{"request": "tune", "target": "{pid}", "tune": {tune}}}"#),
        );
        assert_eq!(answer["ok"], false, "{tune}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(
            error.contains("out of range") || error.contains("at most"),
            "{tune}: {error}"
        );
    }
    // The longest intervals taken: the target still answers, and SIGTERM still ends it with
    // its record complete, without waiting out a window of an hour.
    let tuned = serve.ctl_ok(&["tune", &pid, "--sample-us", "10s", "--aggr-us", "1h"]);
    assert!(tuned.contains("10000000 / 3600000000"), "{tuned}");
    assert!(serve.ctl_ok(&["status", &pid]).contains("3600000000"));
    assert!(stopped_in_time(serve), "SIGTERM is a clean stop");
    stop(&mut [&mut sleeper]);
    let files = records(&records_dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let i = info(&files[0]);
    assert_eq!(i["finished"], true, "{i}");
    assert!(i.to_string().contains("udamon serve stopped"), "{i}");
}

#[test]
fn a_rescan_of_zero_in_the_configuration_is_refused_as_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, "rescan = \"0s\"\nmatch = [\"^nothing$\"]\n").unwrap();
    let out = udamon()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .timeout(PATIENCE)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("serve.toml: rescan") && err.contains("not a rescan period"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let out = udamon()
        .args(["serve", "--idle", "--rescan", "0s"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a rescan period"));
    // A file others may write is refused: they would choose what root monitors.
    std::fs::write(&config, "match = [\"^nothing$\"]\n").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = udamon()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("may be written by other users"),
        "{out:?}"
    );
}

/// A connection to `path` that does not wait when the server's backlog is full.
fn try_connect(path: &Path) -> Option<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: plain socket calls on a descriptor this function owns; the address is a
    // zeroed sockaddr_un with a path that fits.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        if fd < 0 {
            return None;
        }
        let stream = UnixStream::from_raw_fd(fd);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_os_str().as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let rc = libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len);
        (rc == 0).then_some(stream)
    }
}

#[test]
fn a_flood_of_idle_control_connections_locks_no_one_out_and_drops_no_target() {
    let dir = tempfile::tempdir().unwrap();
    let mut sleeper = Command::new(which("sleep")).arg("120").spawn().unwrap();
    let pid = sleeper.id().to_string();
    // Few descriptors, as a service under a tight limit: more connections than it has.
    let serve = Serve::start_limited(
        dir.path(),
        &["--pid", &pid, "--access-source", "cpuclock"],
        Some(256),
    );
    wait_served(&serve, &pid);
    let flood: Vec<UnixStream> = (0..600)
        .filter_map(|_| try_connect(&serve.control))
        .collect();
    assert!(flood.len() > 100, "only {} connections", flood.len());
    // Answered, with the target still served after many rescans.
    assert!(serve.ctl_ok(&["targets"]).contains(&pid));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        serve.ctl_ok(&["targets"]).contains(&pid),
        "the target was dropped"
    );
    assert!(!series(&serve.metrics(), "udamon_regions", &pid).is_empty());
    let mut lines = Vec::new();
    while let Ok(line) = serve.log.try_recv() {
        lines.push(line);
    }
    assert!(
        lines.len() < 100,
        "{} log lines: {:?}",
        lines.len(),
        &lines[..20]
    );
    assert!(
        lines.iter().all(|l| !l.contains("monitoring ended")),
        "{lines:?}"
    );
    drop(flood);
    stop(&mut [&mut sleeper]);
    assert!(serve.stop());
}

#[test]
fn a_process_removed_and_added_back_at_once_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut sleeper = Command::new(which("sleep")).arg("120").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let mut serve = Serve::start(dir.path(), &["--idle", "--access-source", "cpuclock"]);
    assert!(serve.ctl_ok(&["add", "--pid", &pid]).contains("serving"));
    serve.wait_log("monitoring started");
    for round in 0..10 {
        assert!(serve.ctl_ok(&["remove", &pid]).contains("stopping"));
        let added = serve.ctl_ok(&["add", "--pid", &pid]);
        assert!(added.contains("serving"), "round {round}: {added}");
        let ended = serve.wait_log("monitoring ended");
        assert!(ended.contains("removed with udamon ctl remove"), "{ended}");
        serve.wait_log("monitoring started");
        wait_served(&serve, &pid);
    }
    assert!(
        serve
            .ctl_ok(&["add", "--pid", &pid])
            .contains("served already")
    );
    stop(&mut [&mut sleeper]);
    assert!(serve.stop());
}

#[test]
fn sighup_keeps_targets_added_at_runtime_and_says_why_others_end() {
    let dir = shared_dir();
    let name = format!("udmH{}", std::process::id() % 10_000);
    let mut matched = Command::new(link(dir.path(), "m", &name, &which("sleep")))
        .arg("120")
        .spawn()
        .unwrap();
    let mut added = Command::new(which("sleep")).arg("120").spawn().unwrap();
    let (pm, pa) = (matched.id().to_string(), added.id().to_string());
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, format!("match = [\"^{name}$\"]\n")).unwrap();
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--access-source",
            "cpuclock",
        ],
    );
    wait_served(&serve, &pm);
    assert!(serve.ctl_ok(&["add", "--pid", &pa]).contains("serving"));
    wait_served(&serve, &pa);
    // The same file again: nothing changes.
    serve.signal(libc::SIGHUP);
    let read = serve.wait_log("configuration read again");
    assert!(read.contains("0 stopping"), "{read}");
    std::thread::sleep(Duration::from_secs(1));
    let listed = serve.ctl_ok(&["targets"]);
    assert!(listed.contains(&pm) && listed.contains(&pa), "{listed}");
    // A file that no longer takes the matched process: it ends, saying why; the added stays.
    std::fs::write(&config, "match = [\"^nothing-at-all$\"]\n").unwrap();
    serve.signal(libc::SIGHUP);
    let ended = wait_ended(&mut serve, &pm);
    assert!(ended.contains("no selector takes it any more"), "{ended}");
    assert!(serve.ctl_ok(&["targets"]).contains(&pa));
    wait_served(&serve, &pa);
    // A process that exits says so.
    stop(&mut [&mut added]);
    let ended = wait_ended(&mut serve, &pa);
    assert!(
        ended.contains("exited") || ended.contains("the target ended"),
        "{ended}"
    );
    stop(&mut [&mut matched]);
    assert!(serve.stop());
}

#[test]
fn every_change_and_refusal_is_logged_and_status_shows_scheme_counters() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), &["--idle"]);
    assert!(
        serve
            .ctl_ok(&["add", "--sim", "builtin:demo"])
            .contains("sim:1")
    );
    let line = serve.wait_log("asked for add --sim builtin:demo");
    assert!(
        line.contains("serving sim:1") && line.contains("uid "),
        "{line}"
    );
    let schemes = dir.path().join("stat.json");
    std::fs::write(
        &schemes,
        r#"[{"action": "stat", "access_pattern": {"sz_bytes": {"min": 0, "max": "max"},
            "nr_accesses": {"min": "0 %", "max": "100 %"}, "age": {"min": "0 s", "max": "max"}}}]"#,
    )
    .unwrap();
    serve.ctl_ok(&["add-schemes", "sim:1", schemes.to_str().unwrap()]);
    serve.wait_log("asked for add-schemes sim:1");
    let answer = raw(
        &serve,
        r#"{"request": "tune", "target": "sim:1", "tune": {"sample_us": 0}}"#,
    );
    assert_eq!(answer["ok"], false);
    let line = serve.wait_log("asked for tune sim:1");
    assert!(
        line.contains("refused") && line.contains("out of range"),
        "{line}"
    );
    serve.ctl(&["status", "sim:9"]).failure();
    serve.wait_log("asked for status sim:9: refused");
    // The scheme's counters, once it had windows to try.
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        let status = serve.ctl_ok(&["status", "sim:1"]);
        if !status.contains("tried 0 regions") {
            break status;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.contains("scheme 0 stat: tried") && status.contains("applied"),
        "{status}"
    );
    serve.ctl_ok(&["remove", "sim:1"]);
    let ended = serve.wait_log("monitoring ended");
    assert!(ended.contains("removed with udamon ctl remove"), "{ended}");
    assert!(serve.stop());
}

/// More matching processes than serve has file descriptors for: it serves those it can, says
/// it left the rest out, and /metrics and the control socket keep answering.
#[test]
fn more_processes_than_file_descriptors_leave_metrics_and_control_answering() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("udmf{}", std::process::id() % 100_000);
    let sleeper = dir.path().join(&name);
    std::os::unix::fs::symlink(which("sleep"), &sleeper).unwrap();
    let mut sleepers: Vec<Child> = (0..60)
        .map(|_| Command::new(&sleeper).arg("120").spawn().unwrap())
        .collect();
    let mut serve = Serve::start_limited(
        dir.path(),
        &[
            "--match",
            &format!("^{name}$"),
            "--access-source",
            "cpuclock",
        ],
        Some(160),
    );
    let line = serve.wait_log("more processes found");
    assert!(line.contains("of the 160 file descriptors"), "{line}");
    let served_pids = |serve: &Serve| -> Vec<u32> {
        serve
            .ctl_ok(&["targets"])
            .lines()
            .filter(|l| l.contains(&name))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    };
    let served = served_pids(&serve);
    assert!(!served.is_empty() && served.len() < 60, "{served:?}");
    let (status, body) = serve.get("/metrics");
    assert_eq!(status, 200, "{body}");
    // Targets that go make room for those left out.
    let (gone, waiting): (Vec<Child>, Vec<Child>) =
        sleepers.drain(..).partition(|c| served.contains(&c.id()));
    for mut s in gone {
        s.kill().unwrap();
        s.wait().unwrap();
    }
    let deadline = Instant::now() + PATIENCE;
    while !served_pids(&serve)
        .iter()
        .any(|p| waiting.iter().any(|c| c.id() == *p))
    {
        assert!(
            Instant::now() < deadline,
            "none of those left out was served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    sleepers = waiting;
    stop(&mut sleepers.iter_mut().collect::<Vec<_>>());
    assert!(serve.stop());
}

/// A simulated workload belongs to whoever added it: on a socket root shared, another user
/// neither sees root's nor removes it, and keeps their own.
#[test]
fn a_simulated_workload_is_its_adders_alone() {
    if !others_run_udamon() {
        return;
    }
    let dir = shared_dir();
    let serve = Serve::start(dir.path(), &["--idle"]);
    assert!(
        serve
            .ctl_ok(&["add", "--sim", "builtin:demo"])
            .contains("sim:1")
    );
    std::fs::set_permissions(&serve.control, std::fs::Permissions::from_mode(0o666)).unwrap();
    let nobody_ctl = |args: &[&str]| {
        as_user(NOBODY, Path::new(env!("CARGO_BIN_EXE_udamon")))
            .arg("ctl")
            .arg("--control")
            .arg(&serve.control)
            .args(args)
            .output()
            .unwrap()
    };
    let out = nobody_ctl(&["remove", "sim:1"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another user's"),
        "{out:?}"
    );
    let out = nobody_ctl(&["targets"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("sim:1"),
        "{out:?}"
    );
    assert!(
        nobody_ctl(&["add", "--sim", "builtin:demo"])
            .status
            .success()
    );
    let out = nobody_ctl(&["targets"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sim:2"),
        "{out:?}"
    );
    assert!(nobody_ctl(&["remove", "sim:2"]).status.success());
    assert!(serve.ctl_ok(&["targets"]).contains("sim:1"), "root's stays");
    assert!(serve.stop());
}

/// Whether user nobody can connect to the unix socket at `path`: a child that drops to nobody
/// tries (root only; `None` when this is not root).
fn nobody_connects(path: &Path) -> Option<bool> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip::skipped("connecting as another user needs root");
        return None;
    }
    // SAFETY: the address is a zeroed sockaddr_un with a path that fits, made before the fork;
    // the child makes only system calls (async-signal-safe) before it exits.
    unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, b) in path.as_os_str().as_bytes().iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let child = libc::fork();
        if child == 0 {
            let dropped = libc::setgroups(0, std::ptr::null()) == 0
                && libc::setresgid(NOBODY, NOBODY, NOBODY) == 0
                && libc::setresuid(NOBODY, NOBODY, NOBODY) == 0;
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let connected = libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len) == 0;
            libc::_exit(match (dropped, connected) {
                (false, _) => 2,
                (true, true) => 0,
                (true, false) => 1,
            });
        }
        let mut status = 0;
        assert_eq!(libc::waitpid(child, &mut status, 0), child);
        match libc::WEXITSTATUS(status) {
            0 => Some(true),
            1 => Some(false),
            _ => panic!("the child could not become nobody"),
        }
    }
}

/// `GET /metrics` over `stream`, with `Authorization: Basic BASE64` when given; the status.
fn scrape_status(mut stream: impl std::io::Read + Write, basic: Option<&str>) -> u16 {
    let auth = basic.map_or(String::new(), |b| format!("Authorization: Basic {b}\r\n"));
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: test\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn the_metrics_socket_has_its_mode_and_a_web_configuration_asks_for_a_password() {
    let dir = shared_dir();
    let socket = dir.path().join("metrics.sock");
    let listen = format!("unix:{}", socket.display());
    for mode in [0o600, 0o666] {
        let text = format!("{mode:o}");
        let serve = Serve::start_at(
            dir.path(),
            &listen,
            &["--idle", "--listen-mode", &text],
            None,
        );
        let meta = std::fs::metadata(&socket).unwrap();
        assert_eq!(meta.mode() & 0o777, mode);
        assert_eq!(
            scrape_status(UnixStream::connect(&socket).unwrap(), None),
            200
        );
        if let Some(connects) = nobody_connects(&socket) {
            assert_eq!(connects, mode == 0o666, "nobody and mode {mode:o}");
        }
        assert!(serve.stop());
        assert!(!socket.exists(), "the socket goes with serve");
    }

    // Basic authentication, as Prometheus's exporters read it: a bcrypt hash per user.
    let web = dir.path().join("web.yml");
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    std::fs::write(&web, format!("basic_auth_users:\n  prometheus: {hash}\n")).unwrap();
    std::fs::set_permissions(&web, std::fs::Permissions::from_mode(0o600)).unwrap();
    let web_arg = web.to_str().unwrap();
    let serve = Serve::start(dir.path(), &["--idle", "--web.config.file", web_arg]);
    let tcp = || std::net::TcpStream::connect(serve.addr).unwrap();
    assert_eq!(scrape_status(tcp(), None), 401);
    // base64("prometheus:guess") and base64("prometheus:s3cret").
    assert_eq!(scrape_status(tcp(), Some("cHJvbWV0aGV1czpndWVzcw==")), 401);
    assert_eq!(scrape_status(tcp(), Some("cHJvbWV0aGV1czpzM2NyZXQ=")), 200);
    assert!(serve.stop());

    // A configuration that does not read: one line naming the file and the field.
    std::fs::write(&web, "basic_auth_users:\n  prometheus: s3cret\n").unwrap();
    let out = udamon()
        .args([
            "serve",
            "--idle",
            "--listen",
            "127.0.0.1:0",
            "--web.config.file",
            web_arg,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "{web_arg}: basic_auth_users.prometheus: not a bcrypt hash"
        )),
        "{err}"
    );
}

#[test]
fn connections_over_the_limit_again_and_again_cost_a_few_log_lines_and_a_count() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &["--idle"]);
    // Each round takes every connection and one more, then lets them go: an episode of a full
    // endpoint per round (unless serve is too slow to see them go between two), which cost a
    // log line each.
    let rounds = 80;
    for _ in 0..rounds {
        let open: Vec<_> = (0..=udamon_exporter::MAX_CONNECTIONS)
            .map(|_| std::net::TcpStream::connect(serve.addr).unwrap())
            .collect();
        // The oldest, which sent nothing, is closed for the newest once that is accepted.
        let mut oldest = &open[0];
        oldest.set_read_timeout(Some(PATIENCE)).unwrap();
        assert_eq!(
            oldest.read(&mut [0; 16]).unwrap(),
            0,
            "not closed for a newcomer"
        );
        drop(open);
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + PATIENCE;
    let (mut full, mut counted) = (0, None);
    while counted.is_none() {
        let line = serve
            .log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("a count of the lines left out");
        full += usize::from(line.contains("connections open"));
        if line.contains("lines left out of the log") {
            counted = Some(line);
        }
    }
    let counted = counted.unwrap();
    assert!(counted.contains("\"metrics full\""), "{counted}");
    let left_out: usize = counted
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count: {counted}"));
    assert!(full <= 10, "{full} lines");
    assert!(left_out > 0 && full + left_out <= rounds, "{counted}");
    assert!(serve.stop());
}
