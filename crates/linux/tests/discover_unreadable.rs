//! A scan that cannot read `/proc` lets no process go: out of file descriptors, the discovery
//! keeps every process it took and says why once; when reads work again it goes on as before.
//! On its own in this binary: it lowers the process's open-files limit.

use std::fs::File;
use std::process::Command;
use udamon_linux::discover::{AskedFor, Credentials, Departure, Discovery, Selector};

fn open_files_limit() -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit for the kernel to fill.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    limit
}

fn set_open_files_limit(limit: &libc::rlimit) {
    // SAFETY: a valid rlimit; lowering and restoring the soft limit needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, limit) }, 0);
}

#[test]
fn a_scan_out_of_file_descriptors_drops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("udmf{}", std::process::id() % 100_000);
    let link = dir.path().join(&name);
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap();
    std::os::unix::fs::symlink(sleep, &link).unwrap();
    let mut child = Command::new(&link).arg("60").spawn().unwrap();
    let pid = child.id();
    let by = Credentials::of_this_process();
    let re = regex::Regex::new(&format!("^{name}$")).unwrap();
    let mut d = Discovery::new(vec![
        AskedFor {
            selector: Selector::Pid(pid),
            by: by.clone(),
        },
        AskedFor {
            selector: Selector::Match(re),
            by,
        },
    ])
    .unwrap();
    assert_eq!(d.scan().added.len(), 1);

    // Every descriptor taken, as by a flood of connections.
    let saved = open_files_limit();
    set_open_files_limit(&libc::rlimit {
        rlim_cur: 64,
        rlim_max: saved.rlim_max,
    });
    let mut held = Vec::new();
    while let Ok(f) = File::open("/dev/null") {
        held.push(f);
    }
    let scans: Vec<_> = (0..3).map(|_| d.scan()).collect();
    drop(held);
    set_open_files_limit(&saved);
    for c in &scans {
        assert!(
            c.removed.is_empty(),
            "a failed scan let a process go: {c:?}"
        );
    }
    let warnings: Vec<&String> = scans.iter().flat_map(|c| &c.warnings).collect();
    assert_eq!(warnings.len(), 1, "said once: {warnings:?}");
    assert!(warnings[0].contains("cannot read"), "{warnings:?}");
    assert_eq!(d.selectors(), 2, "the pid's selector is not spent");

    let again = d.scan();
    assert!(
        again.added.is_empty() && again.removed.is_empty(),
        "{again:?}"
    );
    assert!(again.warnings.iter().any(|w| w.contains("reads again")));
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = d.scan();
    assert_eq!(gone.removed.len(), 1, "{gone:?}");
    assert_eq!(gone.removed[0].why, Departure::Exited);
}
