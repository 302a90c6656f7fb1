//! Processes of other users for the tests of who may have what monitored: started with
//! setpriv (util-linux) as any uid, no account needed. Root only; each check says why it
//! skips. Shared by udamon-linux's and the CLI's tests.
#![allow(dead_code)] // each test binary uses a subset

// Each test binary that uses this declares `skip` (crates/record/tests/common/skip.rs).
use super::skip;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const NOBODY: u32 = 65534;

/// Whether processes can be started as other users here: root and setpriv.
pub fn other_users_run() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip::skipped("starting processes as other users needs root");
        return false;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip::skipped("setpriv (util-linux) is not installed");
        return false;
    }
    true
}

/// ... and whether su(1), setuid root, is there to be started by one.
pub fn setuid_cases_run() -> bool {
    if !Path::new("/usr/bin/su").exists() {
        skip::skipped("/usr/bin/su is not installed");
        return false;
    }
    other_users_run()
}

/// `program` as user `uid` (group `uid`, no supplementary groups).
pub fn as_user(uid: u32, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg(program);
    c
}

/// `program ARGS` as nobody, its stdin a pipe kept open (su waits on it for a password).
pub fn nobody_runs(program: &Path, args: &[&str]) -> Child {
    as_user(NOBODY, program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until process `pid`'s effective uid is `euid` (setpriv, then su, exec in place) and it
/// runs the program it was started for: setpriv takes the uid before it execs the program, and
/// on a busy machine a scan between the two finds `setpriv` under its own name.
pub fn wait_euid(pid: u32, euid: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
        if comm.trim_end() == "setpriv" {
            assert!(
                Instant::now() < deadline,
                "process {pid} never left setpriv"
            );
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uids: Vec<u32> = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .unwrap()
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        if uids[1] == euid {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} never ran as {euid}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A directory every user can read, for the links other users' processes run.
pub fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `dir/sub/name`, a link to `target`: a program under a name of the test's choosing.
pub fn link(dir: &Path, sub: &str, name: &str, target: &Path) -> std::path::PathBuf {
    let d = dir.join(sub);
    std::fs::create_dir_all(&d).unwrap();
    let l = d.join(name);
    std::os::unix::fs::symlink(target, &l).unwrap();
    l
}
