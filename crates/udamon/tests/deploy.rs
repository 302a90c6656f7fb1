//! deploy/ checked by the tools its users run: every Kubernetes manifest against the
//! Kubernetes schemas with `kubeconform -strict`, the Prometheus rules with `promtool check
//! rules` and `promtool test rules`, a live scrape of `udamon serve` (a process in a
//! kubelet-named cgroup, so that its pod labels are there) with `promtool check metrics`,
//! and every metric and label the rules and the Grafana dashboard name against that scrape.
//!
//! The tools come from `scripts/test` (promtool from Debian's `prometheus`, kubeconform with
//! `go install`, the schemas from PyPI's `kubernetes-validate`), named by `UDAMON_PROMTOOL`,
//! `UDAMON_KUBECONFORM` and `UDAMON_KUBE_SCHEMAS`. Without one, a check skips and says so; in
//! CI (`CI` set) it fails instead, for a check that never runs checks nothing.

mod common;
#[path = "../../record/tests/common/skip.rs"]
mod skip;

use common::serve::Serve;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use udamon_linux::discover::cgroup2_mount;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The tool `env` names, else `name` on PATH; `None` (the test skips) where neither is, but
/// in CI a missing tool fails the test.
fn tool(env: &str, name: &str) -> Option<PathBuf> {
    let found = std::env::var_os(env).map(PathBuf::from).or_else(|| {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    });
    let found = found.filter(|p| p.exists());
    if found.is_none() {
        let why = format!("no {name} ({env}, or on PATH): scripts/test installs it");
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "{why}; CI must run this check"
        );
        skip::skipped(&why);
    }
    found
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn manifests() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![repo().join("deploy/kubernetes")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The schemas of `kinds` (`daemonset-apps-v1`) for Kubernetes `version`, made standalone in
/// `out/<version>-standalone-strict/` as kubeconform reads them: `kubernetes-validate` keeps
/// the definitions in one file that every schema refers to by an absolute path of its own.
fn standalone_schemas(package: &Path, version: &str, kinds: &BTreeSet<String>, out: &Path) {
    let dir = package.join(format!("{version}-local-strict"));
    let definitions: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("_definitions.json"))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display())),
    )
    .unwrap();
    let defs = definitions["$defs"].clone();
    let to = out.join(format!("{version}-standalone-strict"));
    std::fs::create_dir_all(&to).unwrap();
    for kind in kinds {
        let file = dir.join(format!("{kind}.json"));
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("no schema for {kind} in {}: {e}", dir.display()))
            .replace("\"/api/_definitions.json#", "\"#");
        let mut schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        schema["$defs"] = defs.clone();
        std::fs::write(to.join(format!("{kind}.json")), schema.to_string()).unwrap();
    }
}

/// The schema file names kubeconform asks for: `kind-version` (`daemonset-apps-v1`), of the
/// core and built-in groups only (a custom resource's comes from tests/deploy/schemas).
fn builtin_kinds(files: &[PathBuf]) -> BTreeSet<String> {
    let mut kinds = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in text.split("\n---") {
            let value: serde_yaml::Value = serde_yaml::from_str(doc).unwrap();
            let (Some(api), Some(kind)) = (value["apiVersion"].as_str(), value["kind"].as_str())
            else {
                continue;
            };
            let (group, version) = api.split_once('/').unwrap_or(("", api));
            if group.contains('.') && !group.ends_with(".k8s.io") {
                continue;
            }
            let group = group.split('.').next().unwrap();
            let suffix = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}-{version}")
            };
            kinds.insert(format!("{}-{suffix}", kind.to_lowercase()));
        }
    }
    kinds
}

#[test]
fn every_kubernetes_manifest_passes_kubeconform_strict() {
    let Some(kubeconform) = tool("UDAMON_KUBECONFORM", "kubeconform") else {
        return;
    };
    let Some(package) = std::env::var_os("UDAMON_KUBE_SCHEMAS").map(PathBuf::from) else {
        let why = "no Kubernetes schemas (UDAMON_KUBE_SCHEMAS: scripts/test installs PyPI's kubernetes-validate)";
        assert!(std::env::var_os("CI").is_none_or(|v| v.is_empty()), "{why}");
        skip::skipped(why);
        return;
    };
    let files = manifests();
    assert!(files.len() >= 4, "{files:?}");
    let kinds = builtin_kinds(&files);
    assert!(kinds.contains("daemonset-apps-v1"), "{kinds:?}");
    let schemas = tempfile::tempdir().unwrap();
    // The oldest Kubernetes with every field the DaemonSet uses (appArmorProfile: 1.30), and
    // the newest the package has.
    let newest = std::fs::read_dir(&package)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let v = name.strip_suffix("-local-strict")?.strip_prefix("v1.")?;
            let minor: u32 = v.split('.').next()?.parse().ok()?;
            Some((minor, name.strip_suffix("-local-strict")?.to_string()))
        })
        .max()
        .expect("kubernetes-validate's schemas")
        .1;
    for version in ["v1.30.0", newest.as_str()] {
        standalone_schemas(&package, version, &kinds, schemas.path());
        let (ok, out) = run(Command::new(&kubeconform)
            .args(["-strict", "-summary", "-kubernetes-version"])
            .arg(version.trim_start_matches('v'))
            .arg("-schema-location")
            .arg(format!(
                "{}/{{{{ .NormalizedKubernetesVersion }}}}-standalone{{{{ .StrictSuffix }}}}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json",
                schemas.path().display()
            ))
            .arg("-schema-location")
            .arg(format!(
                "{}/tests/deploy/schemas/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .args(&files));
        assert!(ok, "kubeconform -strict against {version}:\n{out}");
        assert!(
            out.contains(&format!("Valid: {}", files.len())) && out.contains("Skipped: 0"),
            "{out}"
        );
    }

    // The schemas are strict: a field no Kubernetes knows fails.
    let bad = schemas.path().join("bad.yaml");
    let daemonset = std::fs::read_to_string(repo().join("deploy/kubernetes/daemonset.yaml"))
        .unwrap()
        .replace("hostPID: true", "hostPID: true\n      hostPIDs: true");
    std::fs::write(&bad, daemonset).unwrap();
    let (ok, out) = run(Command::new(&kubeconform)
        .args(["-strict", "-kubernetes-version", "1.30.0", "-schema-location"])
        .arg(format!(
            "{}/{{{{ .NormalizedKubernetesVersion }}}}-standalone{{{{ .StrictSuffix }}}}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json",
            schemas.path().display()
        ))
        .arg(&bad));
    assert!(!ok && out.contains("hostPIDs"), "{out}");
}

#[test]
fn prometheus_rules_pass_promtool_check_and_their_tests() {
    let Some(promtool) = tool("UDAMON_PROMTOOL", "promtool") else {
        return;
    };
    let dir = repo().join("deploy/prometheus");
    let (ok, out) = run(Command::new(&promtool)
        .args(["check", "rules", "udamon-rules.yaml"])
        .current_dir(&dir));
    assert!(ok, "{out}");
    let (ok, out) = run(Command::new(&promtool)
        .args(["test", "rules", "udamon-rules.test.yaml"])
        .current_dir(&dir));
    assert!(ok && out.contains("SUCCESS"), "{out}");
}

/// The OpenMetrics text serve sends, as Prometheus's text format that `promtool check
/// metrics` reads: a counter family `x` has samples `x_total` in both, but is named `x_total`
/// in the older format's HELP and TYPE lines, which has no `# EOF`.
fn as_prometheus_text(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut text = String::new();
    for line in openmetrics.lines().filter(|l| *l != "# EOF") {
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        text.push_str(&renamed.unwrap_or_else(|| line.to_string()));
        text.push('\n');
    }
    text
}

/// Metric and label names a PromQL expression uses, roughly but without false names: string
/// literals are blanked first, label names are those of matchers and of `by`, `without`,
/// `on`, `ignoring` and `group_*` lists, and metric names are the identifiers left that name
/// udamon's, the monitor's own, or a recording rule's (with a colon).
fn names_in(expr: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let strings = regex::Regex::new(r#""(?:[^"\\]|\\.)*""#).unwrap();
    let expr = strings.replace_all(expr, "\"\"");
    let matcher = regex::Regex::new(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\x22").unwrap();
    let grouping =
        regex::Regex::new(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
            .unwrap();
    let ident = regex::Regex::new(r"[a-zA-Z_:][a-zA-Z0-9_:]*").unwrap();
    let mut labels: BTreeSet<String> = matcher
        .captures_iter(&expr)
        .map(|c| c[1].to_string())
        .collect();
    for c in grouping.captures_iter(&expr) {
        labels.extend(
            c[1].split(',')
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty()),
        );
    }
    let metrics = ident
        .find_iter(&expr)
        .map(|m| m.as_str())
        .filter(|m| {
            m.starts_with("udamon_") || m.starts_with("process_") || *m == "up" || m.contains(':')
        })
        .map(str::to_string)
        .collect();
    (metrics, labels)
}

/// Label names a template uses: `{{ $labels.x }}` (alerts) and `{{x}}` (legends).
fn template_labels(text: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\{\{\s*(?:\$labels\.)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}").unwrap();
    re.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// Every metric and label name the rules file and the dashboard use, with where.
fn used_names() -> Vec<(String, BTreeSet<String>, BTreeSet<String>)> {
    let mut used = Vec::new();
    let rules: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("deploy/prometheus/udamon-rules.yaml")).unwrap(),
    )
    .unwrap();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let name = rule["record"]
                .as_str()
                .or(rule["alert"].as_str())
                .unwrap()
                .to_string();
            let (metrics, mut labels) = names_in(rule["expr"].as_str().unwrap());
            if let Some(annotations) = rule["annotations"].as_mapping() {
                for text in annotations.values().filter_map(|v| v.as_str()) {
                    labels.extend(template_labels(text));
                }
            }
            used.push((format!("rule {name}"), metrics, labels));
        }
    }
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/grafana/udamon-pods.json")).unwrap(),
    )
    .unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let (metrics, mut labels) = names_in(target["expr"].as_str().unwrap());
            labels.extend(template_labels(
                target["legendFormat"].as_str().unwrap_or_default(),
            ));
            used.push((
                format!("panel {:?}", panel["title"].as_str().unwrap()),
                metrics,
                labels,
            ));
        }
    }
    let values = regex::Regex::new(r"label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$").unwrap();
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        let Some(query) = var["query"]["query"].as_str() else {
            continue;
        };
        let c = values.captures(query).expect("a label_values query");
        let (metrics, mut labels) = names_in(&c[1]);
        labels.insert(c[2].to_string());
        used.push((
            format!("variable {}", var["name"].as_str().unwrap()),
            metrics,
            labels,
        ));
    }
    used
}

/// What a rule or panel names that is neither in the scrape nor recorded by a rule, nor a
/// label Prometheus adds to every target (`job`, `instance`; `node` from the ServiceMonitor).
fn unknown_names(
    used: &[(String, BTreeSet<String>, BTreeSet<String>)],
    exported: &BTreeSet<String>,
    exported_labels: &BTreeSet<String>,
) -> Vec<String> {
    let recorded: BTreeSet<&str> = used
        .iter()
        .filter_map(|(w, _, _)| w.strip_prefix("rule "))
        .filter(|n| n.contains(':'))
        .collect();
    let mut unknown = Vec::new();
    for (what, metrics, labels) in used {
        for m in metrics {
            let known = exported.contains(m) || recorded.contains(m.as_str()) || m == "up";
            if !known {
                unknown.push(format!("{what}: metric {m}"));
            }
        }
        for l in labels {
            let known = exported_labels.contains(l)
                || ["job", "instance", "node", "__name__"].contains(&l.as_str());
            if !known {
                unknown.push(format!("{what}: label {l}"));
            }
        }
    }
    unknown
}

#[test]
fn the_checker_finds_names_serve_does_not_export() {
    let (metrics, labels) = names_in(
        r#"sum by (namespace, horizon) (udamon_x_bytes{pod_uid!="", quantile="0.5", a="b=\"c"}) / on (instance) up"#,
    );
    assert_eq!(
        metrics,
        ["udamon_x_bytes", "up"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert_eq!(
        labels,
        [
            "a",
            "horizon",
            "instance",
            "namespace",
            "pod_uid",
            "quantile"
        ]
        .map(String::from)
        .into_iter()
        .collect()
    );
    let used = vec![("rule r".to_string(), metrics, labels)];
    let exported = ["udamon_working_set_bytes".to_string()].into();
    let exported_labels = ["horizon", "namespace", "pod_uid", "a"]
        .map(String::from)
        .into();
    assert_eq!(
        unknown_names(&used, &exported, &exported_labels),
        ["rule r: metric udamon_x_bytes", "rule r: label quantile"]
    );
    assert_eq!(
        template_labels("{{ $labels.pod }}/{{container}} {{ $value }}"),
        ["container", "pod"].map(String::from).into()
    );
}

/// A cgroup below the cgroup2 mount, removed (after its process) when dropped.
struct PodCgroup {
    top: PathBuf,
    leaf: PathBuf,
    child: std::process::Child,
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for dir in self
            .leaf
            .ancestors()
            .take_while(|d| d.starts_with(&self.top))
        {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::fs::remove_dir(dir).is_err()
                && dir.exists()
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

#[test]
fn a_live_scrape_passes_promtool_and_has_every_name_the_rules_and_dashboard_use() {
    let Some(promtool) = tool("UDAMON_PROMTOOL", "promtool") else {
        return;
    };
    if !common::is_root() {
        skip::skipped("a pod's cgroup (for the pod labels in the scrape) needs root");
        return;
    }
    let Some(mount) = cgroup2_mount() else {
        skip::skipped("no cgroup2 file system is mounted");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let uid = "77777777-7777-4777-8777-777777777777";
    let id = "7e".repeat(32);
    let top = mount.join(format!("udamon-test-deploy-{}", std::process::id()));
    let relative = format!("kubepods/burstable/pod{uid}/{id}");
    let leaf = top.join(&relative);
    std::fs::create_dir_all(&leaf).unwrap();
    let child = Command::new(common::patterns())
        .args(["static", "-t", "120", "-o", "/dev/null"])
        .spawn()
        .unwrap();
    let pod = PodCgroup { top, leaf, child };
    std::fs::write(pod.leaf.join("cgroup.procs"), pod.child.id().to_string()).unwrap();
    let cgroup = udamon_linux::discover::process_cgroup(pod.child.id()).unwrap();
    // The runtime's state names it, and its memory limit is found under the host's
    // hierarchy below --host-root where this one's has no memory controller.
    let host = dir.path().join("host");
    let state = host.join(format!(
        "run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}"
    ));
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("config.json"),
        r#"{"annotations":{"io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-name":"cart","io.kubernetes.cri.container-name":"app"}}"#,
    )
    .unwrap();
    let limit_dir = host
        .join("sys/fs/cgroup")
        .join(cgroup.trim_start_matches('/'));
    std::fs::create_dir_all(&limit_dir).unwrap();
    std::fs::write(limit_dir.join("memory.max"), "1073741824\n").unwrap();

    let pid = pod.child.id().to_string();
    let serve = Serve::start(
        dir.path(),
        &[
            "--pid",
            &pid,
            "--access-source",
            "cpuclock",
            "--host-root",
            host.to_str().unwrap(),
        ],
    );
    let wanted = [
        "udamon_cgroup_memory_limit_bytes",
        "udamon_source_lost_total",
        "udamon_cgroup_idle_time_seconds",
        "process_cpu_seconds_total",
    ];
    let samples = serve.metrics_until("the pod's series with a memory limit", |s| {
        wanted.iter().all(|w| s.iter().any(|x| x.name == *w))
    });
    let (status, body) = serve.get("/metrics");
    assert_eq!(status, 200);
    assert!(serve.stop());
    drop(pod);

    let text = as_prometheus_text(&body);
    let lint = dir.path().join("scrape.prom");
    std::fs::write(&lint, &text).unwrap();
    let (ok, out) = run(Command::new("sh").arg("-c").arg(format!(
        "{} check metrics < {}",
        promtool.display(),
        lint.display()
    )));
    assert!(ok, "promtool check metrics:\n{out}\n{text}");

    let exported: BTreeSet<String> = samples.iter().map(|s| s.name.clone()).collect();
    let labels: BTreeSet<String> = samples
        .iter()
        .flat_map(|s| s.labels.keys().cloned())
        .collect();
    for l in [
        "namespace",
        "pod",
        "container",
        "pod_uid",
        "qos",
        "percentile",
    ] {
        assert!(labels.contains(l), "{l} in the scrape: {labels:?}");
    }
    let unknown = unknown_names(&used_names(), &exported, &labels);
    assert!(
        unknown.is_empty(),
        "named by deploy/ but not exported by serve: {unknown:?}"
    );
}
