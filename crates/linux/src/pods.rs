//! Which Kubernetes pod and container a cgroup is, from the kubelet's cgroup names, and their
//! names from the container runtime's state on the host.
//!
//! **Layouts.** The kubelet puts every pod under a `kubepods` cgroup, in a cgroup per QoS
//! class (none for guaranteed pods), one per pod, and the runtime one per container below it.
//! Its two cgroup drivers spell these differently:
//!
//! - systemd: `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID>.slice/
//!   cri-containerd-<ID>.scope`, the pod UID's dashes turned into underscores (systemd reads a
//!   dash as nesting), the container scope named by the runtime (`cri-containerd-`, `crio-`,
//!   `docker-`);
//! - cgroupfs: `/kubepods/burstable/pod<UID>/<ID>` (CRI-O: `crio-<ID>`).
//!
//! The `kubepods` cgroup need not be at the root: kind and other nested nodes put it below
//! their own (`/kubelet.slice/kubelet-kubepods.slice/...`), so it is looked for along the path.
//! Nor need it be in the path at all: a process reading `/proc/PID/cgroup` from a cgroup
//! namespace of its own (a DaemonSet's container, on cgroup v2) sees other pods' cgroups
//! relative to its own, `/../../kubepods-besteffort.slice/...`; the names below the common
//! ancestor still say the pod, and the systemd driver's pod slice its QoS class too.
//! A cgroup in a pod but not in a container of it (a pod's own cgroup, CRI-O's `conmon`) names
//! the pod alone; a cgroup below a container's (a container that makes cgroups of its own)
//! names that container. Any other path names nothing, and the cgroup path stays its label.
//!
//! **Names.** The cgroup names hold ids only. Namespace, pod and container names are in the
//! runtime's state for the container, where the CRI wrote them as annotations of the OCI
//! spec (containerd, CRI-O) or labels of the container (Docker through cri-dockerd); serve reads
//! them when that state is mounted where it looks ([`ContainerNames::read`]), and does without
//! them otherwise.

use std::path::Path;

/// A pod's QoS class, as the kubelet's cgroups say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl Qos {
    /// The class as Kubernetes writes it in a pod's status (`qosClass`), lower-cased.
    pub fn as_str(self) -> &'static str {
        match self {
            Qos::Guaranteed => "guaranteed",
            Qos::Burstable => "burstable",
            Qos::BestEffort => "besteffort",
        }
    }
}

/// The container runtime whose scope name a container cgroup has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Runtime {
    Containerd,
    CriO,
    Docker,
    /// A bare id (the cgroupfs driver under containerd or Docker): either.
    Unknown,
}

/// The pod (and container) a cgroup path is in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodCgroup {
    /// The pod's UID, with dashes as the API writes it.
    pub pod_uid: String,
    /// Unknown only for the cgroupfs driver seen from a cgroup namespace that hides the class.
    pub qos: Option<Qos>,
    /// The container's id (64 hex digits), when the cgroup is a container's or below one.
    pub container: Option<(Runtime, String)>,
}

impl PodCgroup {
    /// The pod a cgroup v2 path (`/proc/PID/cgroup`'s `0::` line) is in; `None` for a path
    /// outside the kubelet's layouts.
    pub fn parse(path: &str) -> Option<PodCgroup> {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let (start, from_root) = match parts.iter().position(|p| is_kubepods(p)) {
            Some(root) => (root + 1, true),
            None => (
                parts.iter().position(|p| *p != "..").filter(|&i| i > 0)?,
                false,
            ),
        };
        let mut rest = parts[start..].iter();
        let mut next = rest.next()?;
        let class = qos_of(next);
        if class.is_some() {
            next = rest.next()?;
        }
        let (pod_uid, slice_class) = pod_of(next)?;
        // Below the kubelet's root, a pod outside a class's cgroup is guaranteed.
        let qos = slice_class
            .or(class)
            .or(from_root.then_some(Qos::Guaranteed));
        let container = rest.next().and_then(|c| container_of(c));
        Some(PodCgroup {
            pod_uid,
            qos,
            container,
        })
    }

    pub fn container_id(&self) -> Option<&str> {
        self.container.as_ref().map(|(_, id)| id.as_str())
    }
}

/// A cgroup path as the host's hierarchy names it. A path seen from a cgroup namespace
/// (`/../../kubepods-besteffort.slice/kubepods-besteffort-pod<UID>.slice/x.scope`) climbs to
/// an ancestor it does not name; but a systemd slice's name holds its ancestors' (`a-b-c.slice`
/// is in `a.slice/a-b.slice`), so below a slice such a path is whole again. `None` where the
/// ancestors cannot be known (the cgroupfs driver's plain names).
pub fn host_cgroup_path(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let up = parts.iter().take_while(|p| **p == "..").count();
    if up == 0 {
        return Some(path.to_string());
    }
    let unit = parts.get(up)?.strip_suffix(".slice")?;
    let mut whole = String::new();
    let mut name = String::new();
    for piece in unit.split('-') {
        if !name.is_empty() {
            name.push('-');
        }
        name.push_str(piece);
        whole.push_str(&format!("/{name}.slice"));
    }
    for part in &parts[up + 1..] {
        whole.push('/');
        whole.push_str(part);
    }
    Some(whole)
}

/// The kubelet's root cgroup: `kubepods` (cgroupfs), `kubepods.slice`, or a nested node's
/// `<parent>-kubepods.slice` (systemd).
fn is_kubepods(part: &str) -> bool {
    part == "kubepods" || part == "kubepods.slice" || part.ends_with("-kubepods.slice")
}

/// A QoS class's cgroup: `burstable`, `besteffort` (cgroupfs) or `...kubepods-burstable.slice`
/// (systemd).
fn qos_of(part: &str) -> Option<Qos> {
    let class = part
        .strip_suffix(".slice")
        .and_then(|s| s.rsplit_once("kubepods-"))
        .map_or(part, |(_, class)| class);
    match class {
        "burstable" => Some(Qos::Burstable),
        "besteffort" => Some(Qos::BestEffort),
        _ => None,
    }
}

/// A pod's cgroup: `pod<UID>` (cgroupfs) or `...kubepods[-<class>]-pod<UID_WITH_UNDERSCORES>
/// .slice` (systemd, whose name holds the class: none for guaranteed), with its UID and the
/// class its name says. A UID is a UUID for an API pod and 32 hex digits (a hash of its
/// manifest) for a static one.
fn pod_of(part: &str) -> Option<(String, Option<Qos>)> {
    let (uid, class) = match part.strip_suffix(".slice") {
        Some(unit) => {
            let (parent, uid) = unit.rsplit_once("-pod")?;
            let class = if parent == "kubepods" || parent.ends_with("-kubepods") {
                Qos::Guaranteed
            } else {
                qos_of(&format!("{parent}.slice"))?
            };
            (uid.replace('_', "-"), Some(class))
        }
        None => (part.strip_prefix("pod")?.to_string(), None),
    };
    let hex = uid.chars().filter(|c| *c != '-').count();
    let well_formed = (hex == 32)
        && uid
            .chars()
            .all(|c| c == '-' || (c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    well_formed.then_some((uid, class))
}

/// A container's cgroup: `<runtime>-<ID>.scope` (systemd), `crio-<ID>` or a bare `<ID>`
/// (cgroupfs). CRI-O's `crio-conmon-<ID>` holds the runtime's monitor, not the container.
fn container_of(part: &str) -> Option<(Runtime, String)> {
    let name = part.strip_suffix(".scope").unwrap_or(part);
    let (runtime, id) = if let Some(id) = name.strip_prefix("cri-containerd-") {
        (Runtime::Containerd, id)
    } else if let Some(id) = name.strip_prefix("crio-") {
        (Runtime::CriO, id)
    } else if let Some(id) = name.strip_prefix("docker-") {
        (Runtime::Docker, id)
    } else {
        (Runtime::Unknown, name)
    };
    let is_id = id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    is_id.then(|| (runtime, id.to_string()))
}

/// A container's namespace, pod and container names, as its runtime's state holds them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerNames {
    pub namespace: String,
    pub pod: String,
    /// Empty for a pod's sandbox (its `pause` container).
    pub container: String,
}

/// Where each runtime keeps a container's spec, under the host's root, and the keys of the
/// names in it (an object of string values at `object`, `/`-separated).
struct StateFile {
    runtime: Runtime,
    path: &'static str,
    object: &'static str,
    keys: [&'static str; 3],
}

const STATE_FILES: [StateFile; 3] = [
    StateFile {
        runtime: Runtime::Containerd,
        path: "run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json",
        object: "annotations",
        keys: [
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.cri.sandbox-name",
            "io.kubernetes.cri.container-name",
        ],
    },
    StateFile {
        runtime: Runtime::CriO,
        path: "run/containers/storage/overlay-containers/{id}/userdata/config.json",
        object: "annotations",
        keys: [
            "io.kubernetes.pod.namespace",
            "io.kubernetes.pod.name",
            "io.kubernetes.container.name",
        ],
    },
    StateFile {
        runtime: Runtime::Docker,
        path: "var/lib/docker/containers/{id}/config.v2.json",
        object: "Config/Labels",
        keys: [
            "io.kubernetes.pod.namespace",
            "io.kubernetes.pod.name",
            "io.kubernetes.container.name",
        ],
    },
];

impl ContainerNames {
    /// The names of container `id` of `runtime`, from its state under `host_root` (`/`, or
    /// where the host's root is mounted); `None` when no state of it is readable there or it
    /// names no pod.
    pub fn read(host_root: &Path, runtime: Runtime, id: &str) -> Option<ContainerNames> {
        STATE_FILES
            .iter()
            .filter(|f| runtime == Runtime::Unknown || f.runtime == runtime)
            .find_map(|f| {
                let text =
                    std::fs::read_to_string(host_root.join(f.path.replace("{id}", id))).ok()?;
                let json: serde_json::Value = serde_json::from_str(&text).ok()?;
                let object = f.object.split('/').try_fold(&json, |v, key| v.get(key))?;
                let get = |key: &str| object.get(key).and_then(|v| v.as_str()).map(str::to_string);
                let names = ContainerNames {
                    namespace: get(f.keys[0])?,
                    pod: get(f.keys[1])?,
                    // The sandbox has no container name (containerd) or "POD" (CRI-O, Docker).
                    container: get(f.keys[2]).filter(|c| c != "POD").unwrap_or_default(),
                };
                Some(names)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "1a2b3c4d-0000-4e5f-8a9b-0123456789ab";
    const UID_: &str = "1a2b3c4d_0000_4e5f_8a9b_0123456789ab";
    const ID: &str = "9f3e2d1c0b0a09080706050403020100ffeeddccbbaa99887766554433221100";

    fn pod(qos: Qos, container: Option<Runtime>) -> Option<PodCgroup> {
        Some(PodCgroup {
            pod_uid: UID.into(),
            qos: Some(qos),
            container: container.map(|r| (r, ID.to_string())),
        })
    }

    #[test]
    fn every_driver_qos_class_and_runtime_is_read() {
        let cases = [
            // systemd driver, containerd, each QoS class.
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope"
                ),
                pod(Qos::Burstable, Some(Runtime::Containerd)),
            ),
            (
                format!(
                    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope"
                ),
                pod(Qos::BestEffort, Some(Runtime::Containerd)),
            ),
            (
                format!("/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope"),
                pod(Qos::Guaranteed, Some(Runtime::Containerd)),
            ),
            // systemd driver, CRI-O and Docker (cri-dockerd).
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{ID}.scope"
                ),
                pod(Qos::Burstable, Some(Runtime::CriO)),
            ),
            (
                format!("/kubepods.slice/kubepods-pod{UID_}.slice/docker-{ID}.scope"),
                pod(Qos::Guaranteed, Some(Runtime::Docker)),
            ),
            // cgroupfs driver: bare ids (containerd, Docker) and CRI-O's prefix.
            (
                format!("/kubepods/burstable/pod{UID}/{ID}"),
                pod(Qos::Burstable, Some(Runtime::Unknown)),
            ),
            (
                format!("/kubepods/besteffort/pod{UID}/crio-{ID}"),
                pod(Qos::BestEffort, Some(Runtime::CriO)),
            ),
            (
                format!("/kubepods/pod{UID}/{ID}"),
                pod(Qos::Guaranteed, Some(Runtime::Unknown)),
            ),
            // A nested node (kind): the kubelet's root below the node's own cgroup.
            (
                format!(
                    "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope"
                ),
                pod(Qos::BestEffort, Some(Runtime::Containerd)),
            ),
            (
                format!("/kubelet/kubepods/burstable/pod{UID}/{ID}"),
                pod(Qos::Burstable, Some(Runtime::Unknown)),
            ),
            // Seen from a DaemonSet's cgroup namespace: only the part below the common
            // ancestor, the class in the systemd pod slice's name or the cgroupfs class's.
            (
                format!(
                    "/../../kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-{ID}.scope"
                ),
                pod(Qos::BestEffort, Some(Runtime::CriO)),
            ),
            (
                format!("/../kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope"),
                pod(Qos::Burstable, Some(Runtime::Containerd)),
            ),
            (
                format!("/../../kubepods-pod{UID_}.slice/docker-{ID}.scope"),
                pod(Qos::Guaranteed, Some(Runtime::Docker)),
            ),
            (
                format!("/../../../besteffort/pod{UID}/{ID}"),
                pod(Qos::BestEffort, Some(Runtime::Unknown)),
            ),
            // A cgroup a container made of its own names that container.
            (
                format!("/kubepods/pod{UID}/{ID}/init.scope"),
                pod(Qos::Guaranteed, Some(Runtime::Unknown)),
            ),
            // The pod's own cgroup and CRI-O's monitor name the pod alone.
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice"
                ),
                pod(Qos::Burstable, None),
            ),
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-conmon-{ID}.scope"
                ),
                pod(Qos::Burstable, None),
            ),
        ];
        for (path, want) in cases {
            assert_eq!(PodCgroup::parse(&path), want, "{path}");
        }
    }

    #[test]
    fn a_cgroupfs_pod_seen_from_within_its_class_has_no_class() {
        let got = PodCgroup::parse(&format!("/../../pod{UID}/{ID}")).unwrap();
        assert_eq!((got.pod_uid.as_str(), got.qos), (UID, None));
        assert_eq!(got.container_id(), Some(ID));
    }

    #[test]
    fn a_path_seen_from_a_cgroup_namespace_is_made_whole_by_its_slice_names() {
        assert_eq!(
            host_cgroup_path(&format!(
                "/../../kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-{ID}.scope"
            )),
            Some(format!(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-{ID}.scope"
            ))
        );
        assert_eq!(
            host_cgroup_path("/../kubepods-pod1.slice"),
            Some("/kubepods.slice/kubepods-pod1.slice".into())
        );
        assert_eq!(
            host_cgroup_path("/system.slice/x.service"),
            Some("/system.slice/x.service".into())
        );
        // The cgroupfs driver's names say nothing of their parents.
        assert_eq!(
            host_cgroup_path(&format!("/../../burstable/pod{UID}/{ID}")),
            None
        );
        assert_eq!(host_cgroup_path("/../.."), None);
        assert_eq!(
            host_cgroup_path(""),
            Some(String::new()),
            "unknown stays unknown"
        );
    }

    #[test]
    fn a_static_pods_uid_is_a_hash_of_its_manifest() {
        let hash = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
        let got = PodCgroup::parse(&format!("/kubepods/burstable/pod{hash}/{ID}")).unwrap();
        assert_eq!(got.pod_uid, hash);
        assert_eq!(got.container_id(), Some(ID));
    }

    #[test]
    fn other_paths_name_no_pod() {
        for path in [
            "",
            "/",
            "/system.slice/containerd.service",
            "/user.slice/user-1000.slice/session-2.scope",
            "/kubepods.slice",
            "/kubepods/burstable",
            "/kubepods/burstable/notapod",
            "/kubepods/burstable/podXYZ",
            // A UID of the wrong length, and one in capitals (never written so).
            "/kubepods/pod1a2b3c4d-0000-4e5f-8a9b-0123456789/abc",
            "/kubepods/pod1A2B3C4D-0000-4E5F-8A9B-0123456789AB",
            "/system.slice/docker-0123.scope",
            "/mykubepods/burstable/pod1a2b3c4d-0000-4e5f-8a9b-0123456789ab",
            // Up and down again, but not to a pod; a pod slice of no kubelet.
            "/../system.slice/containerd.service",
            "/../../user.slice/user-pod1a2b3c4d_0000_4e5f_8a9b_0123456789ab.slice",
        ] {
            assert_eq!(PodCgroup::parse(path), None, "{path}");
        }
        // A container cgroup whose name is no id keeps the pod.
        let got = PodCgroup::parse(&format!("/kubepods/pod{UID}/sidecar")).unwrap();
        assert_eq!(got.container, None);
    }

    fn write(root: &Path, path: &str, text: &str) {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    #[test]
    fn names_come_from_each_runtimes_state() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let want = |container: &str| ContainerNames {
            namespace: "shop".into(),
            pod: "cart-7d9".into(),
            container: container.into(),
        };
        write(
            r,
            &format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{ID}/config.json"),
            r#"{"ociVersion":"1.1.0","annotations":{"io.kubernetes.cri.container-type":"container",
               "io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-name":"cart-7d9",
               "io.kubernetes.cri.container-name":"app"}}"#,
        );
        assert_eq!(
            ContainerNames::read(r, Runtime::Containerd, ID),
            Some(want("app"))
        );
        // A bare id (cgroupfs) tries every runtime; a runtime named looks only in its own.
        assert_eq!(
            ContainerNames::read(r, Runtime::Unknown, ID),
            Some(want("app"))
        );
        assert_eq!(ContainerNames::read(r, Runtime::CriO, ID), None);

        let other = "a".repeat(64);
        write(
            r,
            &format!("run/containers/storage/overlay-containers/{other}/userdata/config.json"),
            r#"{"annotations":{"io.kubernetes.pod.namespace":"shop","io.kubernetes.pod.name":"cart-7d9",
               "io.kubernetes.container.name":"POD"}}"#,
        );
        assert_eq!(
            ContainerNames::read(r, Runtime::CriO, &other),
            Some(want(""))
        );

        let docker = "b".repeat(64);
        write(
            r,
            &format!("var/lib/docker/containers/{docker}/config.v2.json"),
            r#"{"Config":{"Labels":{"io.kubernetes.pod.namespace":"shop","io.kubernetes.pod.name":"cart-7d9",
               "io.kubernetes.container.name":"app"}}}"#,
        );
        assert_eq!(
            ContainerNames::read(r, Runtime::Docker, &docker),
            Some(want("app"))
        );
    }

    #[test]
    fn unreadable_or_foreign_state_names_nothing() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        assert_eq!(ContainerNames::read(r, Runtime::Unknown, ID), None);
        // Not JSON; JSON of a container no CRI made (no pod annotations).
        let file = format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{ID}/config.json");
        write(r, &file, "{not json");
        assert_eq!(ContainerNames::read(r, Runtime::Containerd, ID), None);
        write(
            r,
            &file,
            r#"{"annotations":{"org.opencontainers.image.title":"x"}}"#,
        );
        assert_eq!(ContainerNames::read(r, Runtime::Containerd, ID), None);
    }
}
