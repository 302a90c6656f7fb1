//! Target discovery on this machine's own processes: the test process's cgroup with children
//! it starts and kills, a command-name match, pids, and the ptrace rule of the control socket.
//! No cgroup is created and nothing system-wide changes.

#[path = "../../record/tests/common/skip.rs"]
mod skip;
mod users;

use std::os::unix::net::UnixStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use udamon_linux::discover::{
    AskedFor, Credentials, Departure, Discovery, Selector, may_monitor, peer_credentials,
    process_cgroup,
};
use users::{link, nobody_runs, setuid_cases_run, shared_dir, wait_euid};

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

/// Selectors asked for by this process (whoever runs the tests).
fn asked_by_me(selectors: Vec<Selector>) -> Vec<AskedFor> {
    selectors
        .into_iter()
        .map(|selector| AskedFor {
            selector,
            by: Credentials::of_this_process(),
        })
        .collect()
}

/// Scans until `pid` is added (or removed, with `gone`); a generous bound, not a timing.
/// Returns why it went.
fn scan_until(d: &mut Discovery, pid: u32, gone: bool) -> Option<Departure> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = d.scan();
        if gone {
            if let Some(g) = c.removed.iter().find(|g| g.found.pid == pid) {
                return Some(g.why.clone());
            }
        } else if c.added.iter().any(|f| f.pid == pid) {
            return None;
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
    let mut d = Discovery::new(asked_by_me(vec![Selector::Cgroup(own.clone().into())])).unwrap();
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
    assert_eq!(scan_until(&mut d, pid, true), Some(Departure::Exited));
}

#[test]
fn a_match_takes_the_named_processes_only() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("udmm{}", std::process::id() % 100_000);
    let mut mine = sleeper(&sleep_named(dir.path(), &name));
    let mut other = sleeper(&sleep_named(dir.path(), "udm-other"));
    let re = regex::Regex::new(&format!("^{name}$")).unwrap();
    let mut d = Discovery::new(asked_by_me(vec![Selector::Match(re)])).unwrap();
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
    assert_eq!(gone.removed[0].found.comm, name);
    assert_eq!(gone.removed[0].why, Departure::Exited);
}

#[test]
fn a_pid_is_followed_until_it_exits_and_bad_pids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = sleeper(&sleep_named(dir.path(), "udm-pid"));
    let pid = child.id();
    let mut d = Discovery::new(asked_by_me(vec![Selector::Pid(pid)])).unwrap();
    let first = d.scan();
    assert_eq!(first.added.iter().map(|f| f.pid).collect::<Vec<_>>(), [pid]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(d.scan().removed.len(), 1);
    assert_eq!(d.selectors(), 0, "a spent pid selector is dropped");
    assert!(d.scan().added.is_empty());

    let e = Discovery::new(asked_by_me(vec![Selector::Pid(u32::MAX)]))
        .err()
        .unwrap();
    assert!(e.to_string().contains("does not exist"), "{e}");
    let e = Discovery::new(asked_by_me(vec![Selector::Cgroup(
        "/no/such/cgroup".into(),
    )]))
    .err()
    .unwrap();
    assert!(e.to_string().contains("cgroup"), "{e}");
    // kthreadd, when this pid namespace shows it.
    if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
        let e = Discovery::new(asked_by_me(vec![Selector::Pid(2)]))
            .err()
            .unwrap();
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

#[test]
fn a_process_that_executes_a_matching_program_later_is_taken_in_by_a_full_scan() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("udmx{}", std::process::id() % 100_000);
    let link = sleep_named(dir.path(), &name);
    let re = regex::Regex::new(&format!("^{name}$")).unwrap();
    let mut d = Discovery::new(asked_by_me(vec![Selector::Match(re)])).unwrap();
    // A shell that runs a while under its own name, then becomes the matching program.
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(format!("read _; exec {} 60", link.display()))
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Seen (as sh) by enough scans to be neither new nor young.
    for _ in 0..3 {
        assert!(d.scan().added.is_empty());
    }
    drop(shell.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut scans = 0;
    loop {
        let added = d.scan().added;
        scans += 1;
        if added.iter().any(|f| f.pid == shell.id() && f.comm == name) {
            break;
        }
        assert!(Instant::now() < deadline, "never taken in");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        scans <= udamon_linux::discover::FULL_SCAN_EVERY as usize + 1,
        "{scans} scans"
    );
    // Its monitoring ends while it runs: it stays known (not taken in again); once it is
    // gone, it is forgotten.
    let start_time = udamon_linux::proc_stat::ProcStat::read(shell.id())
        .unwrap()
        .start_time;
    d.ended(shell.id(), start_time);
    assert!(d.scan().added.is_empty());
    shell.kill().unwrap();
    shell.wait().unwrap();
    d.ended(shell.id(), start_time);
    let after = d.scan();
    assert!(
        after.added.is_empty() && after.removed.is_empty(),
        "forgotten, not reported gone: {after:?}"
    );
}

#[test]
fn a_setuid_program_started_under_a_matched_name_is_not_taken() {
    if !setuid_cases_run() {
        return;
    }
    let dir = shared_dir();
    let name = format!("udms{}", std::process::id() % 100_000);
    // The user's own process under the name is taken; su, setuid root, under the same name
    // (a link the user made) is not, though root asked for the name.
    let su = link(dir.path(), "su", &name, std::path::Path::new("/usr/bin/su"));
    let mut theirs = nobody_runs(&sleep_named(dir.path(), &name), &["60"]);
    let mut setuid = nobody_runs(&su, &["root"]);
    wait_euid(setuid.id(), 0);
    let re = regex::Regex::new(&format!("^{name}$")).unwrap();
    let mut d = Discovery::new(asked_by_me(vec![Selector::Match(re)])).unwrap();
    scan_until(&mut d, theirs.id(), false);
    let mut warned = Vec::new();
    for _ in 0..3 {
        let c = d.scan();
        assert!(
            c.added.iter().all(|f| f.pid != setuid.id()),
            "the setuid program is taken: {c:?}"
        );
        warned.extend(c.warnings);
    }
    let first = d.scan();
    assert!(first.added.is_empty(), "{first:?}");
    let about: Vec<_> = warned
        .iter()
        .filter(|w| w.contains(&setuid.id().to_string()))
        .collect();
    assert!(about.len() <= 1, "warned once at most: {warned:?}");
    // Named by pid, by root, it is root's to monitor.
    let by_pid = Discovery::new(asked_by_me(vec![Selector::Pid(setuid.id())]));
    assert!(by_pid.is_ok(), "root may name it");
    // Asked for by nobody, it is refused outright.
    let nobody = Credentials::of_user(65534, 65534);
    let e = Discovery::new(vec![AskedFor {
        selector: Selector::Pid(setuid.id()),
        by: nobody,
    }])
    .err()
    .unwrap();
    assert!(e.to_string().contains("could not ptrace"), "{e}");
    for c in [&mut theirs, &mut setuid] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn a_process_that_changes_credentials_is_dropped() {
    if !setuid_cases_run() {
        return;
    }
    use std::io::Write;
    let dir = shared_dir();
    let name = format!("udmc{}", std::process::id() % 100_000);
    // The same command name before and after: a shell, then su exec'd in its place.
    let sh = link(dir.path(), "sh", &name, std::path::Path::new("/bin/sh"));
    let su = link(dir.path(), "su", &name, std::path::Path::new("/usr/bin/su"));
    let script = format!("read x; exec {} root", su.display());
    let mut by_name = nobody_runs(&sh, &["-c", &script]);
    let mut by_pid = nobody_runs(&sh, &["-c", &script]);
    wait_euid(by_name.id(), 65534);
    wait_euid(by_pid.id(), 65534);
    let re = regex::Regex::new(&format!("^{name}$")).unwrap();
    let mut d = Discovery::new(asked_by_me(vec![
        Selector::Match(re),
        Selector::Pid(by_pid.id()),
    ]))
    .unwrap();
    let first = d.scan();
    let mut pids: Vec<u32> = first.added.iter().map(|f| f.pid).collect();
    pids.sort();
    let mut both = vec![by_name.id(), by_pid.id()];
    both.sort();
    assert_eq!(pids, both, "{first:?}");
    // The shells exec su: setuid root, started by nobody. A process found by name is not
    // read again at every scan: its monitor says it executed a program (serve's does).
    for c in [&mut by_name, &mut by_pid] {
        c.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        wait_euid(c.id(), 0);
        d.recheck(c.id());
    }
    let c = d.scan();
    for pid in [by_name.id(), by_pid.id()] {
        let gone = c.removed.iter().find(|g| g.found.pid == pid);
        assert_eq!(
            gone.map(|g| &g.why),
            Some(&Departure::CredentialsChanged),
            "{c:?}"
        );
    }
    // ... and neither comes back: the pid's selector is spent (root named the process it
    // was), and the name takes no setuid program.
    assert_eq!(d.selectors(), 1, "the match only");
    for _ in 0..3 {
        let c = d.scan();
        assert!(c.added.is_empty(), "{c:?}");
    }
    for c in [&mut by_name, &mut by_pid] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}
