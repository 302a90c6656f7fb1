//! The exporter on a real core context: what a window's regions become as metrics, and the
//! HTTP endpoint scraped and parsed by a Prometheus text parser.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::ops::ControlFlow;
use udamon_core::working_set::ResidentRange;
use udamon_core::{AddrRange, Attrs, Callbacks, Context, Flow, Target, VirtualClock};
use udamon_exporter::{
    CgroupLabels, Exporter, Observation, PodLabels, TargetLabels, aggregate, observe, observe_idle,
};

mod common;

use common::{Areas, MIB};

/// The observation of the window that ends at `at_us`, with the mappings' resident bytes
/// `resident` says (none known when empty).
struct ObserveAt {
    at_us: u64,
    resident: Vec<ResidentRange>,
    seen: Option<Observation>,
}

impl Callbacks for ObserveAt {
    fn control(&mut self, ctx: &mut Context) -> Flow {
        if !self.resident.is_empty() {
            ctx.set_resident(0, self.resident.clone());
        }
        Ok(ControlFlow::Continue(()))
    }

    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if ctx.now_us() >= self.at_us {
            self.seen = Some(observe(ctx, 0));
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    }
}

fn observed_at(at_us: u64) -> Observation {
    observed_with(at_us, Vec::new())
}

fn observed_with(at_us: u64, resident: Vec<ResidentRange>) -> Observation {
    let attrs = Attrs {
        min_nr_regions: 4,
        ..Attrs::default()
    };
    let mut ctx = Context::new(attrs, 7).unwrap();
    ctx.add_target(Target::new(None));
    let mut cb = ObserveAt {
        at_us,
        resident,
        seen: None,
    };
    ctx.run(
        &mut Areas {
            second_until_us: 1_000_000,
        },
        &mut VirtualClock,
        &mut cb,
    )
    .unwrap();
    cb.seen.unwrap()
}

#[test]
fn the_working_set_counts_what_was_accessed_within_each_horizon() {
    let o = observed_at(3_000_000);
    let mib = |b: u64| b as f64 / MIB as f64;
    let [window, s10, s60] = o.working_set_bytes[..] else {
        panic!("three horizons: {o:?}")
    };
    assert!((0.9..=1.1).contains(&mib(window)), "the hot MiB: {o:?}");
    // The second MiB was accessed within the last 10 s; the last two never were, which an
    // idle age as old as the monitoring cannot tell from "idle since before".
    assert!((1.9..=2.1).contains(&mib(s10)), "{o:?}");
    assert_eq!(s10, s60, "{o:?}");
    assert_eq!(o.monitored_bytes, 4 * MIB);
    // The hot MiB is accessed in every sampling interval: 20 per 100 ms window.
    let want = MIB as f64 * 20.0 / 0.1;
    assert!(
        (0.8 * want..=1.2 * want).contains(&o.bandwidth_bytes_per_second),
        "{o:?}"
    );
    // A quarter of the bytes is not idle at all; half idles about 2 s (the second MiB) or
    // more; the rest since the start.
    assert_eq!(o.idle_seconds[0], 0.0, "{o:?}");
    assert!((1.5..=3.1).contains(&o.idle_seconds[1]), "{o:?}");
    assert!((2.5..=3.1).contains(&o.idle_seconds[5]), "{o:?}");
}

#[test]
fn idle_time_is_taken_over_the_memory_the_regions_hold() {
    // The last two MiB were never accessed and hold no memory (a region reaching over a gap
    // of address space, or pages never faulted in): no byte has idled since the start.
    let mapping = |start: u64, end: u64, resident_bytes: u64| ResidentRange {
        range: AddrRange::new(start, end),
        resident_bytes,
        executable: false,
    };
    let o = observed_with(
        3_000_000,
        vec![mapping(0, 2 * MIB, 2 * MIB), mapping(2 * MIB, 4 * MIB, 0)],
    );
    assert_eq!(o.monitored_bytes, 4 * MIB, "the regions' addresses: {o:?}");
    // Half the memory is the hot MiB; the other half idles about 2 s.
    assert_eq!(o.idle_seconds[0], 0.0, "{o:?}");
    let longest = *o.idle_seconds.last().unwrap();
    assert!((1.5..=2.5).contains(&longest), "{o:?}");
    let all_over_addresses = observed_at(3_000_000);
    assert!(*all_over_addresses.idle_seconds.last().unwrap() > 2.5);
}

fn labels(pid: &str) -> TargetLabels {
    TargetLabels {
        pid: pid.to_string(),
        comm: "app".to_string(),
        cgroup: "/a.slice".to_string(),
        pod: Default::default(),
    }
}

fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, text.split_once("\r\n\r\n").unwrap().1.to_string())
}

fn parse(body: &str) -> Vec<prometheus_parse::Sample> {
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("a valid exposition")
        .samples
}

fn value(s: &prometheus_parse::Sample) -> f64 {
    match s.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        _ => f64::NAN,
    }
}

#[test]
fn scraped_series_parse_and_a_removed_target_leaves_none() {
    let exporter = Exporter::new();
    let server = exporter.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut counters = BTreeMap::new();
    counters.insert("samples".to_string(), 1000);
    counters.insert("recovered".to_string(), 900);
    counters.insert("dropped_clobbered".to_string(), 7);
    let obs = observed_at(2_000_000).with_source_counters(counters);
    exporter.update(&labels("42"), &obs);
    exporter.update(&labels("43"), &obs);
    // Served, with series of their own or not.
    exporter.set_targets(2);

    let (status, body) = get(server.local_addr().unwrap(), "/metrics");
    assert_eq!(status, 200);
    let samples = parse(&body);
    let of = |name: &str, pid: &str| -> Vec<&prometheus_parse::Sample> {
        samples
            .iter()
            .filter(|s| s.metric == name && s.labels.get("pid") == Some(pid))
            .collect()
    };
    let ws = of("udamon_working_set_bytes", "42");
    assert_eq!(ws.len(), 3, "{body}");
    let window = ws
        .iter()
        .find(|s| s.labels.get("horizon") == Some("window"))
        .unwrap();
    assert_eq!(value(window), obs.working_set_bytes[0] as f64);
    assert_eq!(window.labels.get("cgroup"), Some("/a.slice"));
    assert_eq!(value(of("udamon_source_samples_total", "42")[0]), 1000.0);
    let dropped = of("udamon_source_dropped_total", "42");
    assert_eq!(dropped[0].labels.get("reason"), Some("clobbered"));
    assert_eq!(of("udamon_idle_time_seconds", "42").len(), 6);
    assert!(
        samples
            .iter()
            .any(|s| s.metric == "udamon_targets" && value(s) == 2.0)
    );

    // Counters follow the source's running totals.
    let mut more = BTreeMap::new();
    more.insert("samples".to_string(), 1500);
    exporter.update(&labels("42"), &obs.clone().with_source_counters(more));
    let samples = parse(&get(server.local_addr().unwrap(), "/metrics").1);
    let samples42: Vec<_> = samples
        .iter()
        .filter(|s| s.metric == "udamon_source_samples_total" && s.labels.get("pid") == Some("42"))
        .collect();
    assert_eq!(value(samples42[0]), 1500.0);

    exporter.remove(&labels("42"));
    let body = get(server.local_addr().unwrap(), "/metrics").1;
    assert!(!body.contains("pid=\"42\""), "{body}");
    assert!(body.contains("pid=\"43\""));

    // Other paths, and garbage on the socket, do no harm.
    assert_eq!(get(server.local_addr().unwrap(), "/").0, 404);
    let mut junk = TcpStream::connect(server.local_addr().unwrap()).unwrap();
    let _ = junk.write_all(b"\x00\x01 garbage\r\n\r\n");
    drop(junk);
    assert_eq!(get(server.local_addr().unwrap(), "/metrics").0, 200);
}

#[test]
fn pod_labels_only_where_known_and_a_memory_limit_beside_the_working_set() {
    let exporter = Exporter::new();
    let pod = PodLabels {
        namespace: Some("shop".into()),
        pod: Some("cart-7d9".into()),
        container: Some("app".into()),
        pod_uid: Some("1a2b3c4d-0000-4e5f-8a9b-0123456789ab".into()),
        container_id: Some("9f".repeat(32)),
        qos: Some("burstable".into()),
    };
    let in_pod = TargetLabels {
        pod: pod.clone(),
        ..labels("7")
    };
    let obs = observed_at(2_000_000);
    exporter.update(&in_pod, &obs);
    exporter.update(&labels("8"), &obs);
    let container = CgroupLabels {
        cgroup: "/kubepods/burstable/pod1a2b3c4d-0000-4e5f-8a9b-0123456789ab/x".into(),
        pod,
    };
    let plain = CgroupLabels {
        cgroup: "/a.slice".into(),
        pod: PodLabels::default(),
    };
    let limited = udamon_exporter::GroupObservation {
        memory_limit_bytes: Some(256 * MIB),
        ..aggregate([&obs])
    };
    let unlimited = aggregate([&obs]);
    exporter.publish_cgroups([(&container, &limited), (&plain, &unlimited)]);

    let samples = parse(&exporter.render());
    let names = |s: &prometheus_parse::Sample| -> Vec<String> {
        let mut n: Vec<String> = s.labels.keys().cloned().collect();
        n.sort();
        n
    };
    let ws = |pid: &str| {
        samples
            .iter()
            .find(|s| s.metric == "udamon_working_set_bytes" && s.labels.get("pid") == Some(pid))
            .unwrap()
    };
    assert_eq!(
        names(ws("7")),
        [
            "cgroup",
            "comm",
            "container",
            "container_id",
            "horizon",
            "namespace",
            "pid",
            "pod",
            "pod_uid",
            "qos"
        ]
    );
    assert_eq!(ws("7").labels.get("namespace"), Some("shop"));
    // A process in no pod keeps the labels it always had: no empty pod labels.
    assert_eq!(names(ws("8")), ["cgroup", "comm", "horizon", "pid"]);

    let limits: Vec<&prometheus_parse::Sample> = samples
        .iter()
        .filter(|s| s.metric == "udamon_cgroup_memory_limit_bytes")
        .collect();
    assert_eq!(limits.len(), 1, "only the cgroup with a limit has one");
    assert_eq!(value(limits[0]), (256 * MIB) as f64);
    assert_eq!(limits[0].labels.get("container"), Some("app"));
    let cgroup_ws = samples
        .iter()
        .filter(|s| s.metric == "udamon_cgroup_working_set_bytes")
        .filter(|s| s.labels.get("cgroup") == Some(&container.cgroup))
        .count();
    assert_eq!(cgroup_ws, 3);

    // A limit lifted takes its series away; the cgroup's other series stay.
    exporter.publish_cgroups([(&container, &unlimited)]);
    let text = exporter.render();
    assert!(
        !text.contains("udamon_cgroup_memory_limit_bytes{"),
        "{text}"
    );
    assert!(
        !text.contains("udamon_cgroup_working_set_bytes{cgroup=\"/a.slice\""),
        "{text}"
    );
    assert!(text.contains("udamon_cgroup_working_set_bytes{cgroup=\"/kubepods"));
}

/// A sampled source over 64 MiB whose samples fall on 1,024 pages (4 MiB) scattered over it,
/// five per sampling interval; the walk finds `resident` bytes in the mapping.
struct Scattered {
    pages: Vec<u64>,
    resident: u64,
}

impl udamon_core::Operations for Scattered {
    fn name(&self) -> &str {
        "scattered"
    }
    fn init(&mut self, ctx: &mut Context) -> Result<(), udamon_core::OpsError> {
        ctx.targets_mut()[0] =
            Target::with_regions(None, &[udamon_core::AddrRange::new(0, 64 * MIB)]);
        Ok(())
    }
    fn check_accesses(&mut self, ctx: &mut Context) {
        let mut samples: Vec<udamon_core::SampledAccess> = (0..5)
            .map(|_| {
                let i = ctx.rng().in_range(0, self.pages.len() as u64) as usize;
                udamon_core::SampledAccess::read(self.pages[i] * 4096 + 64)
            })
            .collect();
        ctx.record_sampled_accesses(0, &mut samples);
    }
    fn check_residency(&mut self, ctx: &mut Context) {
        let range = udamon_core::AddrRange::new(0, 64 * MIB);
        let resident_bytes = self.resident;
        ctx.set_resident(
            0,
            vec![udamon_core::working_set::ResidentRange {
                range,
                resident_bytes,
                executable: false,
            }],
        );
    }
}

fn scattered_at(at_us: u64, resident: u64) -> Observation {
    let mut ctx = Context::new(Attrs::default(), 3).unwrap();
    ctx.add_target(Target::new(None));
    let mut rng = udamon_core::Prng::seeded(9);
    let mut pages: Vec<u64> = (0..1024).map(|_| rng.in_range(0, 16384)).collect();
    pages.sort_unstable();
    pages.dedup();
    let mut cb = ObserveAt {
        at_us,
        resident: Vec::new(),
        seen: None,
    };
    ctx.run(
        &mut Scattered { pages, resident },
        &mut VirtualClock,
        &mut cb,
    )
    .unwrap();
    cb.seen.unwrap()
}

#[test]
fn a_sparse_working_set_is_counted_at_page_resolution_and_never_above_resident() {
    let o = scattered_at(30_000_000, 64 * MIB);
    let mib = |b: u64| b as f64 / MIB as f64;
    // About 4 MiB touched (1,024 pages less duplicates) over 10 s and 60 s, where DAMON's
    // whole regions would say up to 64; a 100 ms window's 100 samples touch fewer.
    let [window, s10, s60] = o.working_set_bytes[..] else {
        panic!("three horizons: {o:?}")
    };
    assert!((3.0..=5.0).contains(&mib(s10)), "{o:?}");
    assert!((3.0..=5.0).contains(&mib(s60)), "{o:?}");
    assert!(window < s10, "{o:?}");
    // The walk found 2 MiB resident: no horizon counts more.
    let o = scattered_at(30_000_000, 2 * MIB);
    assert!(o.working_set_bytes.iter().all(|&b| b <= 2 * MIB), "{o:?}");
}

/// Accessed-bit style operations over 1 MiB that nothing ever accesses: a sleeping process.
struct Untouched;

impl udamon_core::Operations for Untouched {
    fn name(&self) -> &str {
        "untouched"
    }
    fn init(&mut self, ctx: &mut Context) -> Result<(), udamon_core::OpsError> {
        ctx.targets_mut()[0] = Target::with_regions(None, &[AddrRange::new(0, MIB)]);
        Ok(())
    }
    fn check_accesses(&mut self, _ctx: &mut Context) {}
}

/// A context run until `until_us` by `ops`, and its observation then.
fn ran_until(ops: &mut dyn udamon_core::Operations, until_us: u64) -> (Context, Observation) {
    let mut ctx = Context::new(Attrs::default(), 7).unwrap();
    ctx.add_target(Target::new(None));
    let mut cb = ObserveAt {
        at_us: until_us,
        resident: Vec::new(),
        seen: None,
    };
    ctx.run(ops, &mut VirtualClock, &mut cb).unwrap();
    (ctx, cb.seen.unwrap())
}

#[test]
fn idle_windows_passed_read_as_a_fresh_observation_would() {
    // Never accessed: nothing to estimate again, and the idle times still grow.
    let (mut ctx, last) = ran_until(&mut Untouched, 1_000_000);
    assert_eq!(last.working_set_bytes, vec![0; 3], "{last:?}");
    assert!(ctx.pass_idle_windows(50));
    let idle = observe_idle(&ctx, 0, Some(&last));
    assert_eq!(idle, observe(&ctx, 0));
    assert!(
        idle.idle_seconds[5] > last.idle_seconds[5],
        "{idle:?} after {last:?}"
    );
    // Accessed before it slept: its horizons are estimated again, the 10 s one emptied as its
    // accesses age past it, the 60 s one still holding them.
    let (mut ctx, last) = ran_until(&mut Areas { second_until_us: 0 }, 3_000_000);
    assert!(last.working_set_bytes[1] > 0, "{last:?}");
    assert!(ctx.pass_idle_windows(150));
    let idle = observe_idle(&ctx, 0, Some(&last));
    assert_eq!(idle, observe(&ctx, 0));
    assert_eq!(idle.working_set_bytes[1], 0, "{idle:?}");
    assert!(idle.working_set_bytes[2] > 0, "{idle:?}");
}
