//! The served targets' windows as Prometheus metrics: the exporter as the monitoring loop's
//! [`Sink`].
//!
//! **Bounded label sets.** Every served process counts in its cgroup's series
//! (`udamon_cgroup_*`, labelled by the cgroup alone), whatever their number. Series of a
//! process of its own (labelled `pid`, `comm`, `cgroup`) exist only for the processes named
//! (`--pid`, `udamon ctl add`) and for the `process_series` largest others by resident memory,
//! chosen again at every publication: a host of ten thousand processes exports as many series
//! as one of a hundred. A process that drops out of the largest loses its series (its
//! counters start again if it comes back, which Prometheus reads as a reset).
//!
//! **Pods.** A cgroup of a Kubernetes pod gives its series the pod's and container's ids and
//! QoS class (`udamon_linux::pods`), and their names where the container runtime's state is
//! readable under `--host-root`, read once per container. Each cgroup's memory limit
//! (`memory.max`) is read at every publication, as the working set beside it is.

use super::engine::Sink;
use super::target::Labels;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use udamon_exporter::{CgroupLabels, Exporter, Observation, PodLabels, TargetLabels, aggregate};
use udamon_linux::pods::{ContainerNames, PodCgroup};
use udamon_report::human::{TEXT_CHARS, one_line};

pub struct ExporterSink {
    pub exporter: Exporter,
    /// Processes with series of their own besides those named.
    pub process_series: usize,
    /// The targets whose series are exported now, under the labels they were exported with.
    exported: BTreeMap<Labels, TargetLabels>,
    pods: Pods,
}

impl ExporterSink {
    /// `host_root`: where the host's root file system is seen (the runtime's state under it).
    pub fn new(exporter: Exporter, process_series: usize, host_root: PathBuf) -> Self {
        ExporterSink {
            exporter,
            process_series,
            exported: BTreeMap::new(),
            pods: Pods {
                host_root,
                cgroup_root: udamon_linux::discover::cgroup2_mount(),
                names: HashMap::new(),
            },
        }
    }
}

/// What cgroups say of pods: their labels, with the names of the containers seen, and their
/// memory limits.
struct Pods {
    host_root: PathBuf,
    /// The cgroup v2 mount, where `memory.max` is read; none without one.
    cgroup_root: Option<PathBuf>,
    /// Names by container id, `None` where its runtime's state had none; kept while the
    /// container has processes served.
    names: HashMap<String, Option<ContainerNames>>,
}

impl Pods {
    /// The pod labels of a cgroup path: none outside a pod.
    fn labels(&mut self, cgroup: &str) -> PodLabels {
        let Some(pod) = PodCgroup::parse(cgroup) else {
            return PodLabels::default();
        };
        let names = pod.container.as_ref().and_then(|(runtime, id)| {
            self.names
                .entry(id.clone())
                .or_insert_with(|| ContainerNames::read(&self.host_root, *runtime, id))
                .clone()
        });
        let printable = |text: &str| one_line(text, TEXT_CHARS);
        let (namespace, pod_name, container) = match names {
            Some(n) => (
                Some(printable(&n.namespace)),
                Some(printable(&n.pod)),
                (!n.container.is_empty()).then(|| printable(&n.container)),
            ),
            None => (None, None, None),
        };
        PodLabels {
            namespace,
            pod: pod_name,
            container,
            container_id: pod.container_id().map(str::to_string),
            qos: pod.qos.map(|q| q.as_str().to_string()),
            pod_uid: Some(pod.pod_uid),
        }
    }

    /// Forgets the names of containers not among `cgroups` any more.
    fn keep_only<'a>(&mut self, cgroups: impl IntoIterator<Item = &'a String>) {
        let ids: BTreeSet<String> = cgroups
            .into_iter()
            .filter_map(|c| Some(PodCgroup::parse(c)?.container?.1))
            .collect();
        self.names.retain(|id, _| ids.contains(id));
    }

    /// A cgroup's memory limit (`memory.max`), `None` when it has none ("max") or it cannot
    /// be read (no memory controller for it: a hybrid hierarchy keeps memory in cgroup v1).
    /// Read under this process's cgroup2 mount, else under the host's, below `host_root`:
    /// from a container's cgroup namespace, its own mount holds its own cgroup alone, and
    /// the others' paths are made whole from their names first
    /// ([`udamon_linux::pods::host_cgroup_path`]).
    fn memory_limit(&self, cgroup: &str) -> Option<u64> {
        let whole = udamon_linux::pods::host_cgroup_path(cgroup)?;
        let own = self.cgroup_root.as_ref().filter(|_| whole == cgroup);
        let host = self.host_root.join("sys/fs/cgroup");
        own.into_iter().chain([&host]).find_map(|root| {
            let dir = root.join(whole.trim_start_matches('/'));
            std::fs::read_to_string(dir.join("memory.max"))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
    }
}

/// A cgroup path's longest (PATH_MAX): escaped, never cut, since a kubelet's paths are longer
/// than a line of text and two containers of one pod differ only at their ends.
const CGROUP_CHARS: usize = 4096;

/// A cgroup path as its `cgroup` label shows it: the host's path where it is known. From a
/// container's cgroup namespace (a DaemonSet's) paths climb out of it (`/../../kubepods-...`);
/// below a systemd slice their names make them whole again, the same on every node.
fn cgroup_label(cgroup: &str) -> String {
    let whole = udamon_linux::pods::host_cgroup_path(cgroup);
    one_line(whole.as_deref().unwrap_or(cgroup), CGROUP_CHARS)
}

/// A target's label values, escaped as reports escape text: a process names itself (prctl)
/// and a cgroup's owner names it, and either could otherwise put terminal escapes on the
/// screen of whoever reads the metrics.
fn labels_of(labels: &Labels, pod: PodLabels) -> TargetLabels {
    let printable = |text: &str| one_line(text, TEXT_CHARS);
    TargetLabels {
        pid: labels.id.to_string(),
        comm: printable(&labels.comm),
        cgroup: cgroup_label(&labels.cgroup),
        pod,
    }
}

/// The targets that get series of their own: every one named, and the `n` largest others by
/// resident memory (by monitored memory where residency is unknown).
fn with_own_series<'a>(
    targets: &[(&'a Labels, &'a Observation)],
    n: usize,
) -> BTreeSet<&'a Labels> {
    let mut others: Vec<&(&Labels, &Observation)> =
        targets.iter().filter(|(l, _)| !l.named).collect();
    others.sort_by_key(|(l, o)| {
        (
            std::cmp::Reverse(o.resident_bytes.unwrap_or(o.monitored_bytes)),
            *l,
        )
    });
    targets
        .iter()
        .filter(|(l, _)| l.named)
        .chain(others.into_iter().take(n))
        .map(|(l, _)| *l)
        .collect()
}

impl Sink for ExporterSink {
    fn publish(&mut self, targets: &[(&Labels, &Observation)], served: usize) {
        let mut cgroups: BTreeMap<&String, Vec<&Observation>> = BTreeMap::new();
        for (labels, obs) in targets {
            if !labels.cgroup.is_empty() {
                cgroups.entry(&labels.cgroup).or_default().push(obs);
            }
        }
        self.pods.keep_only(cgroups.keys().copied());
        let pods: BTreeMap<&String, PodLabels> =
            cgroups.keys().map(|c| (*c, self.pods.labels(c))).collect();
        let pod_of = |cgroup: &String| pods.get(cgroup).cloned().unwrap_or_default();

        let chosen = with_own_series(targets, self.process_series);
        let mut now = BTreeMap::new();
        for (labels, obs) in targets {
            if chosen.contains(labels) {
                let exported = labels_of(labels, pod_of(&labels.cgroup));
                self.exporter.update(&exported, obs);
                now.insert((*labels).clone(), exported);
            }
        }
        for (gone, exported) in &self.exported {
            // Gone, or exported under other labels now (its container's names were read).
            if now.get(gone) != Some(exported) {
                self.exporter.remove(exported);
            }
        }
        self.exported = now;

        let groups: Vec<(CgroupLabels, udamon_exporter::GroupObservation)> = cgroups
            .into_iter()
            .map(|(cgroup, members)| {
                let labels = CgroupLabels {
                    cgroup: cgroup_label(cgroup),
                    pod: pod_of(cgroup),
                };
                let group = udamon_exporter::GroupObservation {
                    memory_limit_bytes: self.pods.memory_limit(cgroup),
                    ..aggregate(members)
                };
                (labels, group)
            })
            .collect();
        self.exporter
            .publish_cgroups(groups.iter().map(|(c, g)| (c, g)));
        self.exporter.set_targets(served);
    }

    fn publish_host(&mut self, host: &Observation, samples: &[u64]) {
        self.exporter.update_host(host, samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::serve::target::TargetId;

    fn labels(pid: u32, named: bool) -> Labels {
        Labels {
            id: TargetId::Pid(pid),
            comm: "p".into(),
            cgroup: "/c".into(),
            named,
        }
    }

    fn resident(bytes: u64) -> Observation {
        Observation {
            resident_bytes: Some(bytes),
            ..Observation::default()
        }
    }

    #[test]
    fn the_named_and_the_largest_processes_get_series_of_their_own() {
        let (a, b, c, d) = (
            labels(1, false),
            labels(2, true),
            labels(3, false),
            labels(4, false),
        );
        let (small, big, bigger) = (resident(1), resident(100), resident(200));
        let targets = [(&a, &big), (&b, &small), (&c, &bigger), (&d, &small)];
        let chosen = with_own_series(&targets, 2);
        assert_eq!(chosen, [&a, &b, &c].into_iter().collect());
        assert_eq!(with_own_series(&targets, 0), [&b].into_iter().collect());
    }

    #[test]
    fn a_cgroups_memory_limit_is_its_memory_max_and_names_are_read_once() {
        let root = tempfile::tempdir().unwrap();
        let limited = root
            .path()
            .join("kubepods/pod11111111-1111-4111-8111-111111111111");
        std::fs::create_dir_all(&limited).unwrap();
        std::fs::write(limited.join("memory.max"), "268435456\n").unwrap();
        std::fs::create_dir_all(root.path().join("free")).unwrap();
        std::fs::write(root.path().join("free/memory.max"), "max\n").unwrap();
        let mut pods = Pods {
            host_root: root.path().to_path_buf(),
            cgroup_root: Some(root.path().to_path_buf()),
            names: HashMap::new(),
        };
        let pod = "/kubepods/pod11111111-1111-4111-8111-111111111111";
        assert_eq!(pods.memory_limit(pod), Some(268435456));
        assert_eq!(pods.memory_limit("/free"), None, "unlimited");
        assert_eq!(pods.memory_limit("/gone"), None, "no such cgroup");
        // Under the host's hierarchy (below --host-root), for a path seen from a cgroup
        // namespace made whole by its slice names.
        pods.cgroup_root = None;
        assert_eq!(
            pods.memory_limit(pod),
            None,
            "no cgroup2 mount, nothing under the host's"
        );
        let slice = root
            .path()
            .join("sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/c.scope");
        std::fs::create_dir_all(&slice).unwrap();
        std::fs::write(slice.join("memory.max"), "1048576\n").unwrap();
        assert_eq!(
            pods.memory_limit("/../kubepods-besteffort.slice/c.scope"),
            Some(1048576)
        );

        // A container's names are looked up once while it is served, then forgotten.
        let container = format!("{pod}/{}", "ab".repeat(32));
        let labels = pods.labels(&container);
        assert_eq!(labels.qos.as_deref(), Some("guaranteed"));
        assert_eq!(labels.namespace, None, "no runtime state under the root");
        assert_eq!(pods.names.len(), 1);
        pods.keep_only([&container]);
        assert_eq!(pods.names.len(), 1);
        pods.keep_only([]);
        assert!(pods.names.is_empty());
        assert_eq!(pods.labels("/system.slice/x.service"), PodLabels::default());
    }

    #[test]
    fn a_cgroup_seen_from_a_cgroup_namespace_is_labelled_by_its_host_path() {
        let slice = "kubepods-besteffort-pod1_2.slice/crio-a.scope";
        assert_eq!(
            cgroup_label(&format!("/../../{slice}")),
            format!("/kubepods.slice/kubepods-besteffort.slice/{slice}")
        );
        // Plain names cannot be made whole: the path stays as seen.
        assert_eq!(
            cgroup_label("/../besteffort/pod1/a"),
            "/../besteffort/pod1/a"
        );
        assert_eq!(
            cgroup_label("/system.slice/a.service"),
            "/system.slice/a.service"
        );
        assert_eq!(cgroup_label(""), "");
    }

    #[test]
    fn label_values_carry_no_terminal_escapes() {
        let named = Labels {
            comm: "\x1b]52;c;aGk=\x07\u{9b}8m".into(),
            cgroup: "/a\x1b[8m".into(),
            ..labels(1, true)
        };
        let got = labels_of(&named, PodLabels::default());
        for value in [&got.comm, &got.cgroup] {
            assert!(!value.chars().any(char::is_control), "{value:?}");
        }
        assert_eq!(got.comm, "\\u{1b}]52;c;aGk=\\u{7}\\u{9b}8m");
    }
}
