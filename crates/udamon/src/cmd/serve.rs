//! `udamon serve`: a long-running monitor (docs/serve.md).
//!
//! The serving loop owns the list of targets ([`Supervisor`]): at every rescan it asks the
//! discovery which processes its selectors (`--pid`, `--cgroup`, `--match`) now take in and
//! which left, and has the monitoring loop ([`engine`]) start and stop them; between rescans it
//! answers the control socket. The monitoring loop runs every target on one thread, fed by one
//! sampler per CPU, and publishes their windows to the exporter; the serving loop only starts
//! the HTTP server. SIGTERM and Ctrl-C stop every target with its record complete; SIGHUP
//! reads the configuration file again.

mod config;
pub(crate) mod control;
mod engine;
mod log;
mod metrics;
mod records;
mod socket;
mod supervisor;
pub(crate) mod target;

use crate::cli::ServeArgs;
use crate::monitor::Settings;
use anyhow::{Context as _, Result};
use config::{Config, Wanted};
use control::{CallerRequest, ControlSocket, Request, ServingAnswer};
use records::RecordPolicy;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};
use supervisor::{Key, StartOutcome, Supervisor};
use target::{Command, Labels, Pace, TargetId, TargetSetup, TargetStarter};
use udamon_core::Target;
use udamon_linux::discover::{
    AskedFor, Credentials, Discovery, Found, Selector, changed, may_monitor,
};
use udamon_linux::metrics::ProcMetrics;
use udamon_linux::perf::{AccessSource as Source, SamplerConfig};
use udamon_linux::vaddr::{self, monotonic_us};
use udamon_record::model::{AccessSource, TargetInfo};
use udamon_sim::Workload;

pub use control::request;

/// Raises the soft limit on open files to the hard one, as long-running services do: each
/// target holds a few `/proc` files (and, unprivileged, a perf event per CPU), so the usual
/// soft limit of 1024 runs out at a few hundred targets; a client that opens connections until
/// accepting fails would stop the metrics endpoint. serve starts no program that could mind
/// the higher limit (`record` starts its command, so it leaves the limit alone).
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit for the kernel to fill, then to read.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
            && (limit.rlim_cur >= limit.rlim_max || {
                limit.rlim_cur = limit.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0
            })
    };
    if !raised {
        log::warn(&format!(
            "cannot raise the open-files limit ({}): many targets may run out of file descriptors",
            std::io::Error::last_os_error()
        ));
    }
}

/// File descriptors kept free of targets, for /metrics, the control socket, records and the
/// /proc files serve reads: a quarter of the limit, at most this many.
const FDS_KEPT: u64 = 256;

/// What a target is taken to cost in file descriptors until serve has seen what they cost:
/// its pagemap and pidfd (2), and perf events where the access source opens them per process.
const FDS_PER_TARGET: u64 = 4;

/// The targets serve may still start without taking the descriptors it keeps for /metrics and
/// control: at 5,500 served processes a full table once cost both. What a target costs is
/// measured from those running (their threads open files after they start, so at least
/// [`FDS_PER_TARGET`]).
struct FdRoom {
    used: u64,
    limit: u64,
    per_target: u64,
}

impl FdRoom {
    fn now(running: usize) -> FdRoom {
        let used = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid rlimit for the kernel to fill.
        let limit = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
            0 => limit.rlim_cur,
            _ => u64::MAX,
        };
        FdRoom {
            used,
            limit,
            per_target: (used / running.max(1) as u64).max(FDS_PER_TARGET),
        }
    }

    fn kept(&self) -> u64 {
        (self.limit / 4).min(FDS_KEPT)
    }

    /// Takes the room of one more target, if there is any.
    fn take(&mut self) -> bool {
        let after = self.used.saturating_add(self.per_target);
        if after.saturating_add(self.kept()) > self.limit {
            return false;
        }
        self.used = after;
        true
    }
}

/// How often the loop looks at its stop flag while it waits for requests.
const POLL: Duration = Duration::from_millis(200);

pub fn run(args: &ServeArgs) -> Result<()> {
    let config = Config::resolve(args)?;
    raise_open_files_limit();
    let chosen = vaddr::choose_source(args.access_source.into(), args.sample_rate)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let source = ProcessSource {
        kind: chosen.source,
        reason: chosen.reason,
    };
    let mut settings = source.settings(&config)?;
    let discovery = Discovery::new(selectors(&config)?).map_err(|e| anyhow::anyhow!("{e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the SIGTERM handler")?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&reload))
        .context("cannot install the SIGHUP handler")?;

    let exporter = udamon_exporter::Exporter::new();
    let web = match &config.web_config {
        Some(path) => config::read_web_config(path)?,
        None => udamon_exporter::WebConfig::default(),
    };
    let scheme = if web.tls().is_some() { "https" } else { "http" };
    let password = if web.asks_password() {
        ", basic authentication"
    } else {
        ""
    };
    if let udamon_exporter::Listen::Unix { path, .. } = &config.listen {
        socket::prepare(path, "metrics socket")?;
    }
    // Serves until it goes out of scope, after every target stopped.
    let server = exporter
        .serve_at(udamon_exporter::Endpoint {
            listen: config.listen.clone(),
            web,
            // A client can cause these again and again (connections over the limit, say).
            log: Arc::new(|kind, text| {
                log::limited(log::Level::Warn, kind, &format!("metrics: {text}"))
            }),
        })
        .with_context(|| format!("cannot serve metrics on {}", listen_name(&config.listen)))?;
    let metrics_at = match server.local_addr() {
        Some(addr) => format!("{scheme}://{addr}/metrics{password}"),
        None => format!("{} over {scheme}{password}", listen_name(&config.listen)),
    };
    let records = match &config.records {
        Some(r) => Some(Arc::new(
            RecordPolicy::new(
                r.dir.clone(),
                r.every_us,
                r.max_bytes,
                r.retain_bytes,
                r.mode,
            )
            .map_err(|e| anyhow::anyhow!(e))?,
        )),
        None => None,
    };
    let (requests, asked) = mpsc::channel();
    let _control = ControlSocket::bind(&config.control, requests)?;
    log::info(&format!(
        "serving: metrics on {metrics_at}, control at {}, source {}",
        config.control.display(),
        vaddr::source_name(&source.kind)
    ));
    let sink =
        metrics::ExporterSink::new(exporter, config.process_series, config.host_root.clone());
    if config.host {
        // What the monitoring loop needs for it, checked before anything starts.
        let ram = udamon_linux::paddr::system_ram().map_err(|e| anyhow::anyhow!("--host: {e}"))?;
        log::info(&format!(
            "host: the physical memory of the served processes ({} of RAM), under \
             udamon_host_*; its working set counts the frames their samples fell on, shared \
             frames once, never above the memory in use",
            udamon_report::human::size(ram.iter().map(|r| r.size()).sum())
        ));
    }
    let host = config.host.then_some(settings.seed);
    let supervisor = Supervisor::new(source.sampler_config(), host, Box::new(sink), records)
        .context("cannot start the monitoring loop")?;
    let mut serving = Serving {
        supervisor,
        discovery,
        removed: BTreeSet::new(),
        named: named_pids(&config),
        next_sim: 0,
        sim_owners: HashMap::new(),
        source,
        host: config.host,
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if reload.swap(false, Ordering::Relaxed) {
            match serving.reload(args) {
                Ok(new) => settings = new,
                Err(e) => log::error(&format!("reload refused, nothing changed: {e:#}")),
            }
        }
        serving.rescan(&settings);
        serving.answer_until(
            &asked,
            Instant::now() + Duration::from_micros(config.rescan_us),
            &stop,
            &settings,
        );
    }
    log::info("stopping: finishing every target's record");
    serving.supervisor.stop_all("udamon serve stopped");
    Ok(())
}

/// Where the metrics are, for messages.
fn listen_name(listen: &udamon_exporter::Listen) -> String {
    match listen {
        udamon_exporter::Listen::Tcp(addr) => addr.to_string(),
        udamon_exporter::Listen::Unix { path, mode } => {
            format!("unix:{} (mode {mode:04o})", path.display())
        }
    }
}

/// The access source every process target is monitored with.
struct ProcessSource {
    kind: Source,
    reason: String,
}

impl ProcessSource {
    /// The settings of a target started now, from `config` and this source's defaults.
    fn settings(&self, config: &Config) -> Result<Settings> {
        let defaults = config
            .file_overrides
            .apply_to(&vaddr::sampled_attrs(&self.kind));
        let settings = config.monitoring.resolve_live(&defaults, None)?;
        // Serve's targets have never captured tried regions although its flags take
        // --tried-regions; honouring it changes its records, a change of its own.
        Ok(Settings {
            tried_regions: false,
            ..settings
        })
    }

    /// How every process is sampled.
    fn sampler_config(&self) -> SamplerConfig {
        SamplerConfig {
            source: self.kind,
            follow_forks: false,
            ..SamplerConfig::default()
        }
    }

    /// What monitoring process `found` starts with, on the monitoring loop.
    fn start(&self, found: &Found) -> TargetStarter {
        let reason = self.reason.clone();
        let (pid, found) = (found.pid, found.clone());
        Box::new(move |hub| {
            let source = hub.config().source;
            let ops = hub.attach(pid)?;
            let target = ops.targets().into_iter().next().ok_or("no target")?;
            let info = TargetInfo {
                pid: Some(pid),
                cmdline: ops.cmdline(0).to_string(),
                parent: None,
            };
            Ok(TargetSetup {
                metrics: Some(Box::new(ProcMetrics::new(ops.pids()))),
                ops: Box::new(ops),
                target,
                info,
                source: AccessSource {
                    name: vaddr::source_name(&source).to_string(),
                    reason,
                },
                start_us: monotonic_us(),
                pace: Pace::Live { pid },
                gone: Box::new(move || match changed(&found) {
                    Some(why) => why.to_string(),
                    None => "the process can no longer be monitored".to_string(),
                }),
            })
        })
    }
}

/// The workload `ctl add --sim` asks for: a built-in one, or a workload's text that the caller
/// read (serve opens no file for its callers: a caller could name one it may not read).
fn sim_workload(spec: &str, text: Option<&str>) -> Result<Workload, String> {
    match text {
        None if spec.starts_with("builtin:") => {
            crate::monitor::sim::load_workload(spec).map_err(|e| format!("{e:#}"))
        }
        None => Err(format!(
            "serve opens no file for its callers: send the workload's text in \"config\" \
             (`udamon ctl add --sim {spec}` does)"
        )),
        Some(_) if spec.starts_with("builtin:") => {
            Err("give a built-in workload or a workload's text, not both".to_string())
        }
        Some(text) => Workload::parse(text, spec).map_err(|e| e.to_string()),
    }
}

/// A simulated workload's monitoring (for trying serve out, and for its soak bench): in real
/// time, so that its metrics change as a live process's do, or `fast`, in virtual time.
fn start_sim(workload: Workload, fast: bool) -> TargetStarter {
    Box::new(move |_| {
        let time = if fast { "virtual time" } else { "real time" };
        let (info, source) = crate::monitor::sim::sim_identity(workload.name(), time);
        let ops = udamon_sim::SimOps::new(workload, udamon_sim::SimOptions::default());
        Ok(TargetSetup {
            ops: Box::new(ops),
            target: Target::new(None),
            info,
            source,
            start_us: 0,
            metrics: None,
            pace: if fast {
                Pace::Fast
            } else {
                Pace::RealTime {
                    origin: Instant::now(),
                }
            },
            gone: Box::new(|| "the target ended".to_string()),
        })
    })
}

/// The processes named by `--pid` (or the configuration's `pids`): they always get series of
/// their own.
fn named_pids(config: &Config) -> BTreeSet<u32> {
    config
        .selectors
        .iter()
        .filter_map(|(wanted, _)| match wanted {
            Wanted::Pid(pid) => Some(*pid),
            _ => None,
        })
        .collect()
}

/// The discovery's selectors from the configuration, each with who asked for it.
fn selectors(config: &Config) -> Result<Vec<AskedFor>> {
    config
        .selectors
        .iter()
        .map(|(wanted, by)| {
            let selector = match wanted {
                Wanted::Pid(pid) => Selector::Pid(*pid),
                Wanted::Cgroup(path) => Selector::Cgroup(path.clone()),
                Wanted::Match(m) => Selector::Match(regex::Regex::new(m).map_err(|e| {
                    anyhow::anyhow!("--match '{m}': {}", first_line(&e.to_string()))
                })?),
            };
            Ok(AskedFor {
                selector,
                by: by.clone(),
            })
        })
        .collect()
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The serving loop's state.
struct Serving {
    supervisor: Supervisor,
    discovery: Discovery,
    /// Processes removed through the control socket: not started again while they live.
    removed: BTreeSet<Key>,
    /// Processes named by `--pid` or `udamon ctl add`: they always get series of their own.
    named: BTreeSet<u32>,
    next_sim: u64,
    /// Who added each simulated workload (by uid): only they, or root, may see or change it.
    sim_owners: HashMap<u64, u32>,
    source: ProcessSource,
    /// Whether the host's physical memory is monitored (`--host`).
    host: bool,
}

fn process_key(found: &Found) -> Key {
    Key::Process {
        pid: found.pid,
        start_time: found.start_time,
    }
}

impl Serving {
    /// Starts the processes that came, stops those that went, collects threads that ended.
    /// Returns how many stopped.
    fn rescan(&mut self, settings: &Settings) -> usize {
        let changes = self.discovery.scan();
        for warning in &changes.warnings {
            log::limited(log::Level::Warn, "discovery", warning);
        }
        for gone in &changes.removed {
            let key = process_key(&gone.found);
            self.removed.remove(&key);
            self.supervisor.stop(&key, &gone.why.to_string());
        }
        // Counting the open descriptors lists /proc/self/fd, two entries a served process:
        // only when a process came.
        let mut room = (!changes.added.is_empty()).then(|| FdRoom::now(self.supervisor.len()));
        let mut left_out = 0;
        for found in &changes.added {
            if !room.as_mut().is_some_and(FdRoom::take) {
                // Found again by a later scan, when targets have gone.
                self.discovery.forget(found.pid);
                left_out += 1;
                continue;
            }
            self.start_process(found, settings);
        }
        if let Some(room) = room.filter(|_| left_out > 0) {
            log::limited(
                log::Level::Warn,
                "file descriptors",
                &format!(
                    "not serving {left_out} more processes found: {} of the {} file descriptors \
                     are in use, and serve keeps {} for /metrics and control; raise its \
                     open-files limit (systemd: LimitNOFILE=) to serve them",
                    room.used,
                    room.limit,
                    room.kept()
                ),
            );
        }
        let news = self.supervisor.reap();
        // A process whose monitoring ended is read anew if its pid comes back; one that
        // executed a program may have gained privileges: the next scan reads it again.
        for key in news.ended {
            if let Key::Process { pid, start_time } = key {
                self.discovery.ended(pid, start_time);
            }
        }
        for key in news.executed {
            if let Key::Process { pid, .. } = key {
                self.discovery.recheck(pid);
            }
        }
        changes.removed.len()
    }

    /// Starts serving a process the discovery found, unless the control socket removed it.
    fn start_process(&mut self, found: &Found, settings: &Settings) -> (Labels, StartOutcome) {
        let key = process_key(found);
        let labels = Labels {
            id: TargetId::Pid(found.pid),
            comm: found.comm.clone(),
            cgroup: found.cgroup.clone(),
            named: self.named.contains(&found.pid),
        };
        if self.removed.contains(&key) {
            return (labels, StartOutcome::Already);
        }
        let started = self.supervisor.start(
            key,
            labels.clone(),
            self.source.start(found),
            settings.clone(),
        );
        (labels, started)
    }

    /// Reads the configuration file again: new selectors, and the settings of targets started
    /// from now on. Running targets keep theirs (`udamon ctl tune` changes those), and targets
    /// added with `udamon ctl add` stay.
    fn reload(&mut self, args: &ServeArgs) -> Result<Settings> {
        let config = Config::resolve(args)?;
        let settings = self.source.settings(&config)?;
        self.discovery
            .set_selectors(selectors(&config)?)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        self.named = named_pids(&config);
        let stopping = self.rescan(&settings);
        log::info(&format!(
            "configuration read again: {} target(s), {stopping} stopping",
            self.supervisor.len()
        ));
        Ok(settings)
    }

    /// Answers control requests until `deadline` or a stop.
    fn answer_until(
        &mut self,
        asked: &Receiver<CallerRequest>,
        deadline: Instant,
        stop: &AtomicBool,
        settings: &Settings,
    ) {
        loop {
            // However long the rescan interval, a flood's count is said soon after it stops.
            log::say_left_out();
            let now = Instant::now();
            if now >= deadline || stop.load(Ordering::Relaxed) {
                return;
            }
            if let Ok(a) = asked.recv_timeout((deadline - now).min(POLL)) {
                let pending = self.answer(a.request, &a.caller, settings);
                let _ = a.answer.send(pending);
            }
        }
    }

    fn answer(
        &mut self,
        request: Request,
        caller: &Credentials,
        settings: &Settings,
    ) -> ServingAnswer {
        let ask = |serving: &Self, target: &str, make: Box<dyn FnOnce(_) -> Command>| match serving
            .key_for(target, caller)
        {
            Ok(key) => match serving.supervisor.ask(&key, make) {
                Ok(later) => ServingAnswer::Later(later),
                Err(e) => ServingAnswer::Now(Err(e)),
            },
            Err(e) => ServingAnswer::Now(Err(e)),
        };
        match request {
            Request::Targets => ServingAnswer::Now(Ok(self.list(caller))),
            Request::Add { pid: Some(pid), .. } => {
                ServingAnswer::Now(self.add_process(pid, caller, settings))
            }
            Request::Add {
                sim: Some(spec),
                config,
                fast,
                ..
            } => ServingAnswer::Now(self.add_sim(&spec, config.as_deref(), fast, settings, caller)),
            Request::Add { .. } => {
                ServingAnswer::Now(Err("add: give a pid or a sim workload".into()))
            }
            Request::Remove { target } => ServingAnswer::Now(self.remove(&target, caller)),
            Request::Tune { target, tune } => {
                ask(self, &target, Box::new(move |r| Command::Tune(tune, r)))
            }
            Request::AddSchemes { target, schemes } => ask(
                self,
                &target,
                Box::new(move |r| Command::AddSchemes(schemes, r)),
            ),
            Request::RemoveScheme { target, index } => ask(
                self,
                &target,
                Box::new(move |r| Command::RemoveScheme(index, r)),
            ),
            Request::Snapshot { target, json } => ask(
                self,
                &target,
                Box::new(move |reply| Command::Snapshot { json, reply }),
            ),
            Request::Window { target } => ask(self, &target, Box::new(Command::Window)),
            Request::Status { target } => ask(self, &target, Box::new(Command::Status)),
        }
    }

    /// The served target a caller names (`1234`, `sim:2`), if the caller may monitor it.
    fn key_for(&self, target: &str, caller: &Credentials) -> Result<Key, String> {
        let key = if let Some(n) = target.strip_prefix("sim:") {
            let n = n
                .parse()
                .map_err(|_| format!("'{target}' names no target"))?;
            if !self.owns_sim(caller, n) {
                return Err(format!(
                    "{target} is another user's simulated workload: only they or root may use it"
                ));
            }
            Key::Sim(n)
        } else {
            let pid: u32 = target
                .parse()
                .map_err(|_| format!("'{target}' names no target: give a pid or sim:N"))?;
            may_monitor(caller, pid).map_err(|e| e.to_string())?;
            self.supervisor
                .targets()
                .map(|(k, _)| *k)
                .find(|k| matches!(k, Key::Process { pid: p, .. } if *p == pid))
                .ok_or_else(|| format!("process {pid} is not served: `udamon ctl targets`"))?
        };
        Ok(key)
    }

    /// The targets the caller may monitor, one per line: id, command name, cgroup.
    fn list(&self, caller: &Credentials) -> String {
        let mut text = String::new();
        // Physical frames are the kernel's to show to root alone.
        if self.host && caller.uid == 0 {
            text.push_str("host\tphysical memory of the served processes\t/\n");
        }
        for (key, labels) in self.supervisor.targets() {
            let theirs = match key {
                Key::Process { pid, .. } => may_monitor(caller, *pid).is_ok(),
                Key::Sim(n) => self.owns_sim(caller, *n),
            };
            if !theirs {
                continue;
            }
            text.push_str(&format!(
                "{}\t{}\t{}\n",
                labels.id, labels.comm, labels.cgroup
            ));
        }
        text
    }

    fn add_process(
        &mut self,
        pid: u32,
        caller: &Credentials,
        settings: &Settings,
    ) -> Result<String, String> {
        may_monitor(caller, pid).map_err(|e| e.to_string())?;
        let found = self
            .discovery
            .add_pid(pid, caller.clone())
            .map_err(|e| e.to_string())?;
        self.named.insert(pid);
        self.removed.remove(&process_key(&found));
        match self.start_process(&found, settings) {
            (labels, StartOutcome::Already) => Ok(format!("{labels} is served already")),
            (labels, _) => Ok(format!("serving {labels}")),
        }
    }

    /// Whether `caller` added simulated workload `n`, or is root.
    fn owns_sim(&self, caller: &Credentials, n: u64) -> bool {
        caller.uid == 0 || self.sim_owners.get(&n) == Some(&caller.uid)
    }

    fn add_sim(
        &mut self,
        spec: &str,
        text: Option<&str>,
        fast: bool,
        settings: &Settings,
        caller: &Credentials,
    ) -> Result<String, String> {
        let workload = sim_workload(spec, text)?;
        self.next_sim += 1;
        self.sim_owners.insert(self.next_sim, caller.uid);
        let labels = Labels {
            id: TargetId::Sim(self.next_sim),
            comm: control::short(spec.trim_start_matches("builtin:")),
            cgroup: String::new(),
            named: true,
        };
        self.supervisor.start(
            Key::Sim(self.next_sim),
            labels,
            start_sim(workload, fast),
            settings_for_sim(settings),
        );
        Ok(format!("serving sim:{}", self.next_sim))
    }

    fn remove(&mut self, target: &str, caller: &Credentials) -> Result<String, String> {
        let key = self.key_for(target, caller)?;
        self.supervisor.stop(&key, "removed with udamon ctl remove");
        if let Key::Sim(n) = key {
            self.sim_owners.remove(&n);
        }
        if matches!(key, Key::Process { .. }) {
            self.removed.insert(key);
        }
        Ok(format!("stopping {target}"))
    }
}

/// A simulated target's settings: the simulation's own defaults, and no scheme (the
/// configuration's schemes are converted for live intervals; `ctl add-schemes` adds some).
fn settings_for_sim(live: &Settings) -> Settings {
    Settings {
        attrs: udamon_sim::default_attrs(),
        seed: live.seed,
        schemes: Vec::new(),
        tried_regions: false,
        duration_us: None,
    }
}

/// The default control socket, for `udamon ctl`.
pub fn default_control() -> PathBuf {
    socket::default_path()
}
