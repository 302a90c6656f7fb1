//! Pod and container labels end to end: cgroup v2 trees built with the kubelet's names under
//! the real cgroup2 mount (one per naming scheme: the systemd and cgroupfs drivers, every QoS
//! class, containerd, CRI-O and Docker), a process moved into each, a runtime's state for some
//! of them under `--host-root`, and the labels read off `udamon serve`'s scraped series. The
//! trees are removed after, pass or fail. Needs root and a cgroup2 mount; skips without.

mod common;
#[path = "../../record/tests/common/skip.rs"]
mod skip;

use common::serve::{Serve, which};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use udamon_linux::discover::cgroup2_mount;

/// One cgroup to build and what its series should say: `None` for a cgroup in no pod.
struct Case {
    /// Below the test's own cgroup.
    path: String,
    pod: Option<Expected>,
}

struct Expected {
    uid: &'static str,
    qos: &'static str,
    container_id: String,
    /// The runtime whose state the case writes (`containerd`, `crio`, `docker`), with the
    /// namespace, pod and container names in it; none where it writes none.
    names: Option<(&'static str, [&'static str; 3])>,
}

fn id(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

fn cases() -> Vec<Case> {
    let uids = [
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
        "33333333-3333-4333-8333-333333333333",
        "44444444-4444-4444-8444-444444444444",
        "55555555-5555-4555-8555-555555555555",
        "66666666-6666-4666-8666-666666666666",
    ];
    let systemd = |uid: &str| uid.replace('-', "_");
    let pod = |i: usize, qos, names| {
        Some(Expected {
            uid: uids[i],
            qos,
            container_id: id(i as u8 + 0xa0),
            names,
        })
    };
    vec![
        Case {
            path: format!(
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{}.scope",
                systemd(uids[0]),
                id(0xa0)
            ),
            pod: pod(
                0,
                "burstable",
                Some(("containerd", ["shop", "cart-5f6d", "app"])),
            ),
        },
        Case {
            path: format!(
                "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/crio-{}.scope",
                systemd(uids[1]),
                id(0xa1)
            ),
            pod: pod(
                1,
                "besteffort",
                Some(("crio", ["batch", "report-x2", "worker"])),
            ),
        },
        Case {
            path: format!(
                "kubepods.slice/kubepods-pod{}.slice/docker-{}.scope",
                systemd(uids[2]),
                id(0xa2)
            ),
            pod: pod(
                2,
                "guaranteed",
                Some(("docker", ["db", "pg-0", "postgres"])),
            ),
        },
        Case {
            path: format!("kubepods/burstable/pod{}/{}", uids[3], id(0xa3)),
            // A bare id (the cgroupfs driver) found in containerd's state.
            pod: pod(
                3,
                "burstable",
                Some(("containerd", ["shop", "search-7", "index"])),
            ),
        },
        Case {
            path: format!("kubepods/besteffort/pod{}/crio-{}", uids[4], id(0xa4)),
            pod: pod(4, "besteffort", None),
        },
        Case {
            path: format!("kubepods/pod{}/{}", uids[5], id(0xa5)),
            pod: pod(5, "guaranteed", None),
        },
        Case {
            path: "system.slice/app.service".to_string(),
            pod: None,
        },
    ]
}

/// The test's cgroup tree and processes, removed when dropped (a process first, then the
/// cgroups deepest first, waiting for the kernel to see each empty).
struct Tree {
    root: PathBuf,
    children: Vec<Child>,
}

impl Drop for Tree {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let mut dirs = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
            dirs.push(dir);
        }
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::fs::remove_dir(&dir).is_err() && dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Writes the runtime's state a CRI leaves for a container, as serve reads it.
fn write_state(host_root: &Path, expected: &Expected) {
    let Some((runtime, [ns, pod, container])) = expected.names else {
        return;
    };
    let id = &expected.container_id;
    let (file, json) = if runtime == "containerd" {
        (
            format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json"),
            serde_json::json!({"annotations": {
                "io.kubernetes.cri.sandbox-namespace": ns,
                "io.kubernetes.cri.sandbox-name": pod,
                "io.kubernetes.cri.container-name": container,
            }}),
        )
    } else if runtime == "crio" {
        (
            format!("run/containers/storage/overlay-containers/{id}/userdata/config.json"),
            serde_json::json!({"annotations": {
                "io.kubernetes.pod.namespace": ns,
                "io.kubernetes.pod.name": pod,
                "io.kubernetes.container.name": container,
            }}),
        )
    } else {
        (
            format!("var/lib/docker/containers/{id}/config.v2.json"),
            serde_json::json!({"Config": {"Labels": {
                "io.kubernetes.pod.namespace": ns,
                "io.kubernetes.pod.name": pod,
                "io.kubernetes.container.name": container,
            }}}),
        )
    };
    let file = host_root.join(file);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, json.to_string()).unwrap();
}

/// Enables the memory controller down to `dir` where the hierarchy offers it; whether it did.
fn enable_memory(mount: &Path, dir: &Path) -> bool {
    let mut at = mount.to_path_buf();
    for part in dir.strip_prefix(mount).unwrap().components() {
        let offered = std::fs::read_to_string(at.join("cgroup.controllers")).unwrap_or_default();
        if !offered.split_whitespace().any(|c| c == "memory")
            || std::fs::write(at.join("cgroup.subtree_control"), "+memory").is_err()
        {
            return false;
        }
        at.push(part);
    }
    true
}

#[test]
fn every_kubelet_cgroup_layout_labels_its_series_with_pod_and_container() {
    if !common::is_root() {
        skip::skipped("building cgroups needs root");
        return;
    }
    let Some(mount) = cgroup2_mount() else {
        skip::skipped("no cgroup2 file system is mounted");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let host_root = dir.path().join("host");
    let mut tree = Tree {
        root: mount.join(format!("udamon-test-pods-{}", std::process::id())),
        children: Vec::new(),
    };
    let cases = cases();
    let name = format!("udpod{}", std::process::id() % 100_000);
    let sleeper = dir.path().join(&name);
    std::os::unix::fs::symlink(which("sleep"), &sleeper).unwrap();
    let mut limits = true;
    for case in &cases {
        let cgroup = tree.root.join(&case.path);
        std::fs::create_dir_all(&cgroup).unwrap();
        limits &= enable_memory(&mount, &cgroup)
            && std::fs::write(cgroup.join("memory.max"), "268435456").is_ok();
        let child = Command::new(&sleeper).arg("120").spawn().unwrap();
        std::fs::write(cgroup.join("cgroup.procs"), child.id().to_string()).unwrap();
        tree.children.push(child);
        if let Some(expected) = &case.pod {
            write_state(&host_root, expected);
        }
    }
    if !limits {
        skip::skipped(
            "udamon_cgroup_memory_limit_bytes not checked: the cgroup v2 hierarchy here has no \
             memory controller to delegate (a hybrid hierarchy keeps it in v1)",
        );
    }
    // Each process's cgroup as serve reads it: the test's cgroup may be below the mount's root
    // in this process's namespace.
    let paths: Vec<String> = tree
        .children
        .iter()
        .map(|c| udamon_linux::discover::process_cgroup(c.id()).unwrap())
        .collect();

    let serve = Serve::start(
        dir.path(),
        &[
            "--cgroup",
            tree.root.to_str().unwrap(),
            "--process-series",
            "20",
            "--access-source",
            "cpuclock",
            "--host-root",
            host_root.to_str().unwrap(),
        ],
    );
    let pids: Vec<String> = tree.children.iter().map(|c| c.id().to_string()).collect();
    let ws_of = |s: &[common::Sample], pid: &str| -> Option<BTreeMap<String, String>> {
        s.iter()
            .find(|x| {
                x.name == "udamon_working_set_bytes"
                    && x.labels.get("pid").map(String::as_str) == Some(pid)
            })
            .map(|x| {
                x.labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
    };
    // A scrape may fall between a publication's processes and its cgroups: wait for both.
    let samples = serve.metrics_until("every process and cgroup with its series", |s| {
        pids.iter().all(|p| ws_of(s, p).is_some())
            && paths.iter().all(|c| {
                let horizons = s.iter().filter(|x| {
                    x.name == "udamon_cgroup_working_set_bytes" && x.labels.get("cgroup") == Some(c)
                });
                horizons.count() == 3
            })
    });
    for ((case, pid), path) in cases.iter().zip(&pids).zip(&paths) {
        let labels = ws_of(&samples, pid).unwrap();
        assert_eq!(labels.get("cgroup"), Some(path), "{labels:?}");
        let cgroup_series: Vec<&common::Sample> = samples
            .iter()
            .filter(|x| {
                x.name == "udamon_cgroup_working_set_bytes" && x.labels.get("cgroup") == Some(path)
            })
            .collect();
        assert_eq!(cgroup_series.len(), 3, "{path}: one per horizon");
        let Some(want) = &case.pod else {
            // A process in no pod keeps the labels it always had.
            let keys: Vec<&str> = labels.keys().map(String::as_str).collect();
            assert_eq!(keys, ["cgroup", "comm", "horizon", "pid"], "{path}");
            assert!(!cgroup_series[0].labels.contains_key("pod_uid"));
            continue;
        };
        let get = |k: &str| labels.get(k).map(String::as_str);
        assert_eq!(get("pod_uid"), Some(want.uid), "{path}");
        assert_eq!(get("qos"), Some(want.qos), "{path}");
        assert_eq!(
            get("container_id"),
            Some(want.container_id.as_str()),
            "{path}"
        );
        let names = [get("namespace"), get("pod"), get("container")];
        match want.names {
            Some((_, [ns, pod, container])) => {
                assert_eq!(names, [Some(ns), Some(pod), Some(container)], "{path}");
            }
            None => assert_eq!(names, [None; 3], "{path}: no state, no names"),
        }
        // The cgroup's series carry the same pod labels as its process's.
        for key in [
            "pod_uid",
            "qos",
            "container_id",
            "namespace",
            "pod",
            "container",
        ] {
            assert_eq!(
                cgroup_series[0].labels.get(key),
                labels.get(key),
                "{path}: {key}"
            );
        }
        if limits {
            let limit = samples.iter().find(|x| {
                x.name == "udamon_cgroup_memory_limit_bytes" && x.labels.get("cgroup") == Some(path)
            });
            assert_eq!(limit.map(|x| x.value), Some(268435456.0), "{path}");
        }
    }
    assert!(serve.stop());
    drop(tree);
}
