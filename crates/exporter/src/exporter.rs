//! The registry of every served target's series.
//!
//! Labels are bounded: a target is `pid`, `comm` and `cgroup` (no addresses, no command
//! lines), with its Kubernetes pod and container where its cgroup is one ([`PodLabels`]), and
//! the few extra labels take values from fixed lists (horizons, percentiles, drop reasons) or
//! the target's own schemes. A target that goes takes every series it had with it,
//! so that targets coming and going for weeks leave nothing behind.

use crate::groups::GroupObservation;
use crate::observe::{HORIZONS, IDLE_QUANTILES, Observation};
use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// A served target's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct TargetLabels {
    /// The process id; empty for a simulated workload.
    pub pid: String,
    pub comm: String,
    /// Its cgroup v2 path; empty when unknown.
    pub cgroup: String,
    #[prometheus(flatten)]
    pub pod: PodLabels,
}

/// Where a cgroup is in Kubernetes: each label only when known, so that a process in no pod
/// keeps its `pid`, `comm` and `cgroup` alone (an empty label would be a different series to
/// whoever joins on the label set).
#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodLabels {
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub container: Option<String>,
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
    /// `guaranteed`, `burstable` or `besteffort`.
    pub qos: Option<String>,
}

impl EncodeLabelSet for PodLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let present: Vec<(&str, &str)> = [
            ("namespace", &self.namespace),
            ("pod", &self.pod),
            ("container", &self.container),
            ("pod_uid", &self.pod_uid),
            ("container_id", &self.container_id),
            ("qos", &self.qos),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref()?)))
        .collect();
        EncodeLabelSet::encode(&present.as_slice(), encoder)
    }
}

/// A cgroup's series' labels: its path, and its pod and container where it is one.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CgroupLabels {
    pub cgroup: String,
    #[prometheus(flatten)]
    pub pod: PodLabels,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CgroupHorizonLabels {
    #[prometheus(flatten)]
    cgroup: CgroupLabels,
    horizon: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CgroupQuantileLabels {
    #[prometheus(flatten)]
    cgroup: CgroupLabels,
    percentile: String,
}

/// The host's series have no label: there is one host. They exist only once it is observed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabels {}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OnlyHorizon {
    horizon: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OnlyQuantile {
    percentile: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HorizonLabels {
    #[prometheus(flatten)]
    target: TargetLabels,
    horizon: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuantileLabels {
    #[prometheus(flatten)]
    target: TargetLabels,
    percentile: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SchemeLabels {
    #[prometheus(flatten)]
    target: TargetLabels,
    scheme: String,
    action: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    #[prometheus(flatten)]
    target: TargetLabels,
    reason: String,
}

type GaugeF = Gauge<f64, AtomicU64>;
type CounterF = Counter<f64, AtomicU64>;

/// The families, one per metric.
#[derive(Default)]
struct Families {
    working_set: Family<HorizonLabels, Gauge>,
    bandwidth: Family<TargetLabels, GaugeF>,
    idle: Family<QuantileLabels, GaugeF>,
    regions: Family<TargetLabels, Gauge>,
    monitored: Family<TargetLabels, Gauge>,
    window: Family<TargetLabels, GaugeF>,
    last_window: Family<TargetLabels, GaugeF>,
    resident: Family<TargetLabels, Gauge>,
    paged_out: Family<TargetLabels, Gauge>,
    refaulted: Family<TargetLabels, Counter>,
    scheme_tried_regions: Family<SchemeLabels, Counter>,
    scheme_tried_bytes: Family<SchemeLabels, Counter>,
    scheme_applied_regions: Family<SchemeLabels, Counter>,
    scheme_applied_bytes: Family<SchemeLabels, Counter>,
    scheme_quota_exceeds: Family<SchemeLabels, Counter>,
    samples: Family<TargetLabels, Counter>,
    recovered: Family<TargetLabels, Counter>,
    lost: Family<TargetLabels, Counter>,
    dropped: Family<ReasonLabels, Counter>,
    cgroup_processes: Family<CgroupLabels, Gauge>,
    cgroup_working_set: Family<CgroupHorizonLabels, Gauge>,
    cgroup_bandwidth: Family<CgroupLabels, GaugeF>,
    cgroup_idle: Family<CgroupQuantileLabels, GaugeF>,
    cgroup_monitored: Family<CgroupLabels, Gauge>,
    cgroup_resident: Family<CgroupLabels, Gauge>,
    cgroup_memory_limit: Family<CgroupLabels, Gauge>,
    host_working_set: Family<OnlyHorizon, Gauge>,
    host_working_set_samples: Family<OnlyHorizon, Gauge>,
    host_bandwidth: Family<HostLabels, GaugeF>,
    host_idle: Family<OnlyQuantile, GaugeF>,
    host_monitored: Family<HostLabels, Gauge>,
    host_regions: Family<HostLabels, Gauge>,
    targets: Gauge,
    cpu: CounterF,
    memory: Gauge,
}

/// The label values a target created beyond the fixed lists, to withdraw them all.
#[derive(Default)]
struct Created {
    schemes: BTreeSet<(String, String)>,
    reasons: BTreeSet<String>,
}

struct Inner {
    registry: Registry,
    families: Arc<Families>,
    targets: Mutex<HashMap<TargetLabels, Created>>,
    /// The cgroups with series.
    cgroups: Mutex<BTreeSet<CgroupLabels>>,
}

/// Every served target's metrics; cheap to clone and shared between the monitoring threads
/// (which update it) and the HTTP server (which renders it).
#[derive(Clone)]
pub struct Exporter(Arc<Inner>);

impl Default for Exporter {
    fn default() -> Self {
        Exporter::new()
    }
}

/// Sets series `labels` of a counter family to the source's running total. A total below the
/// series' value is a new count under reused labels (a scheme removed, the next one taking
/// its index): the series starts again, which Prometheus reads as a counter reset.
fn set_counter<L>(family: &Family<L, Counter>, labels: &L, total: u64)
where
    L: Clone + std::hash::Hash + Eq,
{
    if family.get_or_create(labels).get() > total {
        family.remove(labels);
    }
    let counter = family.get_or_create(labels);
    counter.inc_by(total - counter.get());
}

/// Withdraws the series of one scheme of a target.
fn remove_scheme_series(f: &Families, target: &TargetLabels, scheme: &str, action: &str) {
    let l = SchemeLabels {
        target: target.clone(),
        scheme: scheme.to_string(),
        action: action.to_string(),
    };
    f.scheme_tried_regions.remove(&l);
    f.scheme_tried_bytes.remove(&l);
    f.scheme_applied_regions.remove(&l);
    f.scheme_applied_bytes.remove(&l);
    f.scheme_quota_exceeds.remove(&l);
}

/// A quantile as a `percentile` label: `90` for 0.9. The label is not Prometheus's
/// `quantile`, which belongs to summaries (a `_sum` and `_count` beside them): these are gauges.
fn quantile_label(q: f64) -> String {
    format!("{}", (q * 100.0 * 1000.0).round() / 1000.0)
}

/// Each target's families: its working sets, accesses, regions and memory.
fn register_target_families(r: &mut Registry, f: &Families) {
    r.register(
        "udamon_working_set_bytes",
        "Bytes accessed within the horizon: in the last aggregation window, or idle for less than 10 s / 60 s",
        f.working_set.clone(),
    );
    r.register(
        "udamon_access_bandwidth_bytes_per_second",
        "Estimated access bandwidth: sum over accessed regions of the bytes the window's working set counts in them times their accesses per second (DAMON_STAT's estimate at page resolution)",
        f.bandwidth.clone(),
    );
    r.register(
        "udamon_idle_time_seconds",
        "Idle-time percentiles over the monitored bytes (DAMON_STAT's): 0 for bytes accessed in the last window",
        f.idle.clone(),
    );
    r.register("udamon_regions", "Monitoring regions", f.regions.clone());
    r.register(
        "udamon_monitored_bytes",
        "Bytes the regions cover",
        f.monitored.clone(),
    );
    r.register(
        "udamon_aggregation_interval_seconds",
        "The aggregation window in force",
        f.window.clone(),
    );
    r.register(
        "udamon_last_window_timestamp_seconds",
        "Unix time when the target's last window completed (staleness)",
        f.last_window.clone(),
    );
    r.register(
        "udamon_resident_bytes",
        "Resident bytes of the target",
        f.resident.clone(),
    );
    r.register(
        "udamon_paged_out_bytes",
        "Bytes out of memory because a scheme paged them out",
        f.paged_out.clone(),
    );
    r.register(
        "udamon_refaulted_bytes",
        "Bytes paged out by a scheme and touched again",
        f.refaulted.clone(),
    );
}

/// The families of the schemes applied to each target.
fn register_scheme_families(r: &mut Registry, f: &Families) {
    r.register(
        "udamon_scheme_tried_regions",
        "Regions a scheme tried to apply its action to",
        f.scheme_tried_regions.clone(),
    );
    r.register(
        "udamon_scheme_tried_bytes",
        "Bytes a scheme tried to apply its action to",
        f.scheme_tried_bytes.clone(),
    );
    r.register(
        "udamon_scheme_applied_regions",
        "Regions where a scheme's action took effect",
        f.scheme_applied_regions.clone(),
    );
    r.register(
        "udamon_scheme_applied_bytes",
        "Bytes a scheme's action took effect on (paged out, collapsed, ...)",
        f.scheme_applied_bytes.clone(),
    );
    r.register(
        "udamon_scheme_quota_exceeds",
        "Charge windows that ended with a scheme's quota full",
        f.scheme_quota_exceeds.clone(),
    );
}

/// The families of what the access source made of each target's samples.
fn register_source_families(r: &mut Registry, f: &Families) {
    r.register(
        "udamon_source_samples",
        "Samples of the target taken by the access source",
        f.samples.clone(),
    );
    r.register(
        "udamon_source_recovered",
        "Samples whose data address was recovered",
        f.recovered.clone(),
    );
    r.register(
        "udamon_source_lost",
        "Samples the kernel dropped because a ring buffer was full",
        f.lost.clone(),
    );
    r.register(
        "udamon_source_dropped",
        "Samples without a data address, by reason",
        f.dropped.clone(),
    );
}

/// The families that sum a cgroup's served processes.
fn register_cgroup_families(r: &mut Registry, f: &Families) {
    r.register(
        "udamon_cgroup_processes",
        "Processes served in the cgroup (and its descendants' own series)",
        f.cgroup_processes.clone(),
    );
    r.register(
        "udamon_cgroup_working_set_bytes",
        "The working sets of the cgroup's served processes, summed, per horizon",
        f.cgroup_working_set.clone(),
    );
    r.register(
        "udamon_cgroup_access_bandwidth_bytes_per_second",
        "The estimated access bandwidth of the cgroup's served processes, summed",
        f.cgroup_bandwidth.clone(),
    );
    r.register(
        "udamon_cgroup_idle_time_seconds",
        "Idle-time percentiles over every monitored byte of the cgroup's served processes",
        f.cgroup_idle.clone(),
    );
    r.register(
        "udamon_cgroup_monitored_bytes",
        "Bytes the cgroup's served processes' regions cover",
        f.cgroup_monitored.clone(),
    );
    r.register(
        "udamon_cgroup_resident_bytes",
        "Resident bytes of the cgroup's served processes, summed",
        f.cgroup_resident.clone(),
    );
    r.register(
        "udamon_cgroup_memory_limit_bytes",
        "The cgroup's memory limit (cgroup v2 memory.max); no series when it has none or it cannot be read",
        f.cgroup_memory_limit.clone(),
    );
}

/// The families of the host's physical memory (`serve --host`).
fn register_host_families(r: &mut Registry, f: &Families) {
    r.register(
        "udamon_host_working_set_bytes",
        "Physical memory accessed within the horizon, every page counted once however many processes map it",
        f.host_working_set.clone(),
    );
    r.register(
        "udamon_host_working_set_samples",
        "Samples the host's working set over the horizon rests on (tens of thousands for a few percent)",
        f.host_working_set_samples.clone(),
    );
    r.register(
        "udamon_host_access_bandwidth_bytes_per_second",
        "Estimated access bandwidth of all physical memory (DAMON_STAT's estimate)",
        f.host_bandwidth.clone(),
    );
    r.register(
        "udamon_host_idle_time_seconds",
        "Idle-time percentiles over all physical memory (DAMON_STAT's)",
        f.host_idle.clone(),
    );
    r.register(
        "udamon_host_monitored_bytes",
        "Physical memory the host's regions cover",
        f.host_monitored.clone(),
    );
    r.register(
        "udamon_host_regions",
        "Monitoring regions of the host's physical memory",
        f.host_regions.clone(),
    );
}

/// The families of the monitor itself.
fn register_monitor_families(r: &mut Registry, f: &Families) {
    r.register("udamon_targets", "Targets served", f.targets.clone());
    r.register(
        "process_cpu_seconds",
        "CPU time of the monitor itself (user and system)",
        f.cpu.clone(),
    );
    r.register(
        "process_resident_memory_bytes",
        "Resident memory of the monitor itself",
        f.memory.clone(),
    );
}

impl Exporter {
    pub fn new() -> Self {
        let families = Arc::new(Families::default());
        let f = &families;
        let mut r = Registry::default();
        // A scrape lists the families in the order they are registered.
        register_target_families(&mut r, f);
        register_scheme_families(&mut r, f);
        register_source_families(&mut r, f);
        register_cgroup_families(&mut r, f);
        register_host_families(&mut r, f);
        register_monitor_families(&mut r, f);
        Exporter(Arc::new(Inner {
            registry: r,
            families,
            targets: Mutex::new(HashMap::new()),
            cgroups: Mutex::new(BTreeSet::new()),
        }))
    }

    /// Target `labels`' last window.
    pub fn update(&self, labels: &TargetLabels, obs: &Observation) {
        let f = &self.0.families;
        let mut targets = self.0.targets.lock().expect("not poisoned");
        let created = targets.entry(labels.clone()).or_default();
        for (&(horizon, _), &bytes) in HORIZONS.iter().zip(&obs.working_set_bytes) {
            f.working_set
                .get_or_create(&HorizonLabels {
                    target: labels.clone(),
                    horizon: horizon.to_string(),
                })
                .set(bytes as i64);
        }
        f.bandwidth
            .get_or_create(labels)
            .set(obs.bandwidth_bytes_per_second);
        for (&q, &seconds) in IDLE_QUANTILES.iter().zip(&obs.idle_seconds) {
            f.idle
                .get_or_create(&QuantileLabels {
                    target: labels.clone(),
                    percentile: quantile_label(q),
                })
                .set(seconds);
        }
        f.regions.get_or_create(labels).set(obs.regions as i64);
        f.monitored
            .get_or_create(labels)
            .set(obs.monitored_bytes as i64);
        f.window.get_or_create(labels).set(obs.window_seconds);
        f.last_window.get_or_create(labels).set(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
        if let Some(b) = obs.resident_bytes {
            f.resident.get_or_create(labels).set(b as i64);
        } else {
            f.resident.remove(labels);
        }
        if let Some(b) = obs.paged_out_bytes {
            f.paged_out.get_or_create(labels).set(b as i64);
        } else {
            f.paged_out.remove(labels);
        }
        if let Some(b) = obs.refaulted_bytes {
            set_counter(&f.refaulted, labels, b);
        } else {
            f.refaulted.remove(labels);
        }
        let now: BTreeSet<(String, String)> = obs
            .schemes
            .iter()
            .map(|s| (s.index.to_string(), s.action.clone()))
            .collect();
        for (scheme, action) in created.schemes.difference(&now) {
            remove_scheme_series(f, labels, scheme, action);
        }
        created.schemes = now;
        for s in &obs.schemes {
            let l = SchemeLabels {
                target: labels.clone(),
                scheme: s.index.to_string(),
                action: s.action.clone(),
            };
            set_counter(&f.scheme_tried_regions, &l, s.tried_regions);
            set_counter(&f.scheme_tried_bytes, &l, s.tried_bytes);
            set_counter(&f.scheme_applied_regions, &l, s.applied_regions);
            set_counter(&f.scheme_applied_bytes, &l, s.applied_bytes);
            set_counter(&f.scheme_quota_exceeds, &l, s.quota_exceeds);
        }
        for (name, &total) in &obs.source {
            match name.as_str() {
                "samples" => set_counter(&f.samples, labels, total),
                "recovered" => set_counter(&f.recovered, labels, total),
                "lost" => set_counter(&f.lost, labels, total),
                other => {
                    if let Some(reason) = other.strip_prefix("dropped_") {
                        created.reasons.insert(reason.to_string());
                        set_counter(
                            &f.dropped,
                            &ReasonLabels {
                                target: labels.clone(),
                                reason: reason.to_string(),
                            },
                            total,
                        );
                    }
                }
            }
        }
    }

    /// Target `labels` left: every series of it goes.
    pub fn remove(&self, labels: &TargetLabels) {
        let f = &self.0.families;
        let mut targets = self.0.targets.lock().expect("not poisoned");
        let created = targets.remove(labels).unwrap_or_default();
        for (horizon, _) in HORIZONS {
            f.working_set.remove(&HorizonLabels {
                target: labels.clone(),
                horizon: horizon.to_string(),
            });
        }
        for q in IDLE_QUANTILES {
            f.idle.remove(&QuantileLabels {
                target: labels.clone(),
                percentile: quantile_label(q),
            });
        }
        f.bandwidth.remove(labels);
        f.regions.remove(labels);
        f.monitored.remove(labels);
        f.window.remove(labels);
        f.last_window.remove(labels);
        f.resident.remove(labels);
        f.paged_out.remove(labels);
        f.refaulted.remove(labels);
        f.samples.remove(labels);
        f.recovered.remove(labels);
        f.lost.remove(labels);
        for (scheme, action) in &created.schemes {
            remove_scheme_series(f, labels, scheme, action);
        }
        for reason in created.reasons {
            f.dropped.remove(&ReasonLabels {
                target: labels.clone(),
                reason,
            });
        }
    }

    /// How many targets are served (with series of their own or not).
    pub fn set_targets(&self, served: usize) {
        self.0.families.targets.set(served as i64);
    }

    /// Every cgroup's series, as now: a cgroup not in `groups` any more loses its series.
    pub fn publish_cgroups<'a>(
        &self,
        groups: impl IntoIterator<Item = (&'a CgroupLabels, &'a GroupObservation)>,
    ) {
        let f = &self.0.families;
        let mut known = self.0.cgroups.lock().expect("not poisoned");
        let mut now = BTreeSet::new();
        for (l, g) in groups {
            f.cgroup_processes.get_or_create(l).set(g.processes as i64);
            f.cgroup_bandwidth
                .get_or_create(l)
                .set(g.bandwidth_bytes_per_second);
            f.cgroup_monitored
                .get_or_create(l)
                .set(g.monitored_bytes as i64);
            f.cgroup_resident
                .get_or_create(l)
                .set(g.resident_bytes as i64);
            match g.memory_limit_bytes {
                Some(limit) => {
                    f.cgroup_memory_limit.get_or_create(l).set(limit as i64);
                }
                None => {
                    f.cgroup_memory_limit.remove(l);
                }
            }
            for (&(horizon, _), &bytes) in HORIZONS.iter().zip(&g.working_set_bytes) {
                f.cgroup_working_set
                    .get_or_create(&CgroupHorizonLabels {
                        cgroup: l.clone(),
                        horizon: horizon.to_string(),
                    })
                    .set(bytes as i64);
            }
            for (&q, &seconds) in IDLE_QUANTILES.iter().zip(&g.idle_seconds) {
                f.cgroup_idle
                    .get_or_create(&CgroupQuantileLabels {
                        cgroup: l.clone(),
                        percentile: quantile_label(q),
                    })
                    .set(seconds);
            }
            now.insert(l.clone());
        }
        for gone in known.difference(&now) {
            f.cgroup_processes.remove(gone);
            f.cgroup_bandwidth.remove(gone);
            f.cgroup_monitored.remove(gone);
            f.cgroup_resident.remove(gone);
            f.cgroup_memory_limit.remove(gone);
            for (horizon, _) in HORIZONS {
                f.cgroup_working_set.remove(&CgroupHorizonLabels {
                    cgroup: gone.clone(),
                    horizon: horizon.to_string(),
                });
            }
            for q in IDLE_QUANTILES {
                f.cgroup_idle.remove(&CgroupQuantileLabels {
                    cgroup: gone.clone(),
                    percentile: quantile_label(q),
                });
            }
        }
        *known = now;
    }

    /// The host's physical memory's last window (`udamon_host_*`), with the samples each
    /// horizon's working set rests on.
    pub fn update_host(&self, obs: &Observation, samples: &[u64]) {
        let f = &self.0.families;
        for (&(horizon, _), &n) in HORIZONS.iter().zip(samples) {
            f.host_working_set_samples
                .get_or_create(&OnlyHorizon {
                    horizon: horizon.to_string(),
                })
                .set(n as i64);
        }
        for (&(horizon, _), &bytes) in HORIZONS.iter().zip(&obs.working_set_bytes) {
            f.host_working_set
                .get_or_create(&OnlyHorizon {
                    horizon: horizon.to_string(),
                })
                .set(bytes as i64);
        }
        for (&q, &seconds) in IDLE_QUANTILES.iter().zip(&obs.idle_seconds) {
            f.host_idle
                .get_or_create(&OnlyQuantile {
                    percentile: quantile_label(q),
                })
                .set(seconds);
        }
        f.host_bandwidth
            .get_or_create(&HostLabels {})
            .set(obs.bandwidth_bytes_per_second);
        f.host_monitored
            .get_or_create(&HostLabels {})
            .set(obs.monitored_bytes as i64);
        f.host_regions
            .get_or_create(&HostLabels {})
            .set(obs.regions as i64);
    }

    /// Every series, in the OpenMetrics text format, with the monitor's own CPU and memory read
    /// now.
    pub fn render(&self) -> String {
        let f = &self.0.families;
        let (cpu, rss) = own_usage();
        let now = f.cpu.get();
        if cpu > now {
            f.cpu.inc_by(cpu - now);
        }
        f.memory.set(rss as i64);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.0.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// This process's CPU seconds (user + system) and resident bytes.
fn own_usage() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    ((ticks(11) + ticks(12)) / hz, pages * udamon_core::PAGE_SIZE)
}
