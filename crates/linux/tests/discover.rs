//! Target discovery on this machine's own processes: the test process's cgroup with children
//! it starts and kills, a command-name match, pids, and the ptrace rule of the control socket.
//! No cgroup is created and nothing system-wide changes.

#[path = "../../record/tests/common/skip.rs"]
mod skip;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use udamon_linux::discover::{
    Credentials, Discovery, Selector, may_monitor, peer_credentials, process_cgroup,
};

fn sleeper(path: &std::path::Path) -> Child {
    Command::new(path).arg("60").spawn().unwrap()
}

/// `sleep(1)` under another command name. A symlink, not a copy: a copy is an executable
/// written while other tests fork, and a child that inherits the writing descriptor makes
/// exec fail with ETXTBSY.
fn sleep_named(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("sleep(1) is installed");
    let link = dir.join(name);
    std::os::unix::fs::symlink(sleep, &link).unwrap();
    link
}

/// Scans until `pid` is added (or removed, with `gone`); a generous bound, not a timing.
fn scan_until(d: &mut Discovery, pid: u32, gone: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = d.scan();
        let list = if gone { &c.removed } else { &c.added };
        if list.iter().any(|f| f.pid == pid) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} never {}",
            if gone { "went" } else { "came" }
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_cgroups_processes_come_and_go_across_scans() {
    let Some(own) = process_cgroup(std::process::id()) else {
        skip::skipped("this process is in no cgroup v2");
        return;
    };
    let mut d = Discovery::new(vec![Selector::Cgroup(own.clone().into())]).unwrap();
    let first = d.scan();
    assert!(
        first
            .added
            .iter()
            .all(|f| f.cgroup == own || f.cgroup.starts_with(&own))
    );
    assert!(
        first.added.iter().all(|f| f.pid != std::process::id()),
        "udamon's own process is never a target"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut child = sleeper(&sleep_named(dir.path(), "udm-cg"));
    let pid = child.id();
    scan_until(&mut d, pid, false);
    assert!(d.scan().added.iter().all(|f| f.pid != pid), "added once");
    child.kill().unwrap();
    child.wait().unwrap();
    scan_until(&mut d, pid, true);
}

#[test]
fn a_match_takes_the_named_processes_only() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("udmm{}", std::process::id() % 100_000);
    let mut mine = sleeper(&sleep_named(dir.path(), &name));
    let mut other = sleeper(&sleep_named(dir.path(), "udm-other"));
    let re = regex::Regex::new(&format!("^{name}$")).unwrap();
    let mut d = Discovery::new(vec![Selector::Match(re)]).unwrap();
    scan_until(&mut d, mine.id(), false);
    let again = d.scan();
    assert!(
        again.added.is_empty() && again.removed.is_empty(),
        "{again:?}"
    );
    for c in [&mut mine, &mut other] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    let gone = d.scan();
    assert_eq!(gone.removed.len(), 1, "{gone:?}");
    assert_eq!(gone.removed[0].comm, name);
}

#[test]
fn a_pid_is_followed_until_it_exits_and_bad_pids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = sleeper(&sleep_named(dir.path(), "udm-pid"));
    let pid = child.id();
    let mut d = Discovery::new(vec![Selector::Pid(pid)]).unwrap();
    let first = d.scan();
    assert_eq!(first.added.iter().map(|f| f.pid).collect::<Vec<_>>(), [pid]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(d.scan().removed.len(), 1);
    assert_eq!(d.selectors(), 0, "a spent pid selector is dropped");
    assert!(d.scan().added.is_empty());

    let e = Discovery::new(vec![Selector::Pid(u32::MAX)]).err().unwrap();
    assert!(e.to_string().contains("does not exist"), "{e}");
    let e = Discovery::new(vec![Selector::Cgroup("/no/such/cgroup".into())])
        .err()
        .unwrap();
    assert!(e.to_string().contains("cgroup"), "{e}");
    // kthreadd, when this pid namespace shows it.
    if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
        let e = Discovery::new(vec![Selector::Pid(2)]).err().unwrap();
        assert!(e.to_string().contains("kernel thread"), "{e}");
    }
}

#[test]
fn peer_credentials_come_from_the_socket() {
    let (a, _b) = UnixStream::pair().unwrap();
    let c = peer_credentials(&a).unwrap();
    assert_eq!(c.pid, std::process::id());
    // SAFETY: getuid cannot fail.
    assert_eq!(c.uid, unsafe { libc::getuid() });
}

#[test]
fn only_a_caller_who_could_ptrace_a_process_may_have_it_monitored() {
    let me = std::process::id();
    let (a, _b) = UnixStream::pair().unwrap();
    // This process as a caller, with every capability it has, but CAP_SYS_PTRACE.
    let ptrace = 1 << 19;
    let mut same = peer_credentials(&a).unwrap();
    same.cap_effective &= !ptrace;
    assert!(may_monitor(&same, me).is_ok(), "the same user");
    let other = Credentials {
        uid: same.uid + 1,
        ..same.clone()
    };
    let e = may_monitor(&other, me).unwrap_err();
    assert!(e.to_string().contains("could not ptrace"), "{e}");
    let other_with_ptrace = Credentials {
        cap_effective: ptrace,
        ..other
    };
    assert!(
        may_monitor(&other_with_ptrace, me).is_ok(),
        "CAP_SYS_PTRACE"
    );
    assert!(may_monitor(&same, u32::MAX).is_err(), "no such process");
}

#[test]
fn another_users_process_is_refused_and_its_own_user_allowed() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip::skipped("starting a process as another user needs root");
        return;
    }
    const NOBODY: u32 = 65534;
    let mut theirs = Command::new("sleep")
        .arg("60")
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap();
    let nobody = Credentials {
        pid: 1,
        uid: NOBODY,
        gid: NOBODY,
        cap_effective: 0,
        cap_permitted: 0,
    };
    assert!(
        may_monitor(&nobody, theirs.id()).is_ok(),
        "its own user's process"
    );
    let e = may_monitor(&nobody, std::process::id()).unwrap_err();
    assert!(e.to_string().contains("uid 65534"), "{e}");
    let root_without_ptrace = Credentials {
        uid: 0,
        gid: 0,
        ..nobody
    };
    assert!(
        may_monitor(&root_without_ptrace, theirs.id()).is_err(),
        "uid 0 without CAP_SYS_PTRACE is not enough"
    );
    theirs.kill().unwrap();
    theirs.wait().unwrap();

    // A process of nobody's that holds a capability nobody's caller lacks: the kernel would
    // refuse the caller its maps, so udamon refuses too.
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip::skipped("the capability case: setpriv (util-linux) is not installed");
        return;
    }
    let mut capable = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+net_raw",
            "--ambient-caps=+net_raw",
            "sleep",
            "60",
        ])
        .spawn()
        .unwrap();
    let pid = capable.id();
    // setpriv execs sleep in the same process; the capability holds from then on.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() != "sleep") {
        assert!(Instant::now() < deadline, "setpriv never exec'd sleep");
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = may_monitor(&nobody, pid).unwrap_err();
    assert!(e.to_string().contains("could not ptrace"), "{e}");
    let cap_net_raw = 1 << 13;
    let nobody_with_it = Credentials {
        cap_permitted: cap_net_raw,
        ..nobody
    };
    assert!(
        may_monitor(&nobody_with_it, pid).is_ok(),
        "a caller holding the same capability"
    );
    capable.kill().unwrap();
    capable.wait().unwrap();
}
