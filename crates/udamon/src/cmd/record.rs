//! `udamon record`: monitor a workload and write a record file: a simulated workload in
//! virtual time, or live processes (spawned or attached) with a sampled access source.

use crate::cli::{MonitoringArgs, RecordArgs};
use crate::monitor::clock::PacedClock;
use crate::monitor::sim::{load_workload, sim_identity};
use crate::monitor::{self, RecordedOps, Session, Settings, Summary, Tap};
use anyhow::{Context as _, Result, bail};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use udamon_core::{Target, VirtualClock};
use udamon_linux::decode::Access;
use udamon_linux::metrics::ProcMetrics;
use udamon_linux::paddr::{self, PaddrOps};
use udamon_linux::perf::{AccessSource as Source, SamplerConfig};
use udamon_linux::vaddr::{
    self, SampleBatch, SampleClock, SharedSampling, Tapped, VaddrError, VaddrEvent, VaddrEventKind,
    VaddrOps, monotonic_us,
};
use udamon_record::model::{
    AccessSource, CallStack, CodeSite, EventKind, MappingRecord, MappingResident,
    ReferencedMapping, SampleAccess, SampleFact, TargetInfo,
};
use udamon_sim::{SimOps, SimOptions};

/// The workload recorded when no target is given.
pub const DEFAULT_SIM: &str = "builtin:demo";

pub fn run(args: &RecordArgs) -> Result<()> {
    let summary = if args.host {
        record_host(args)?
    } else if args.command.is_empty() && args.pid.is_empty() {
        if args.referenced.is_some() {
            bail!(
                "--referenced reads a live process's page tables (--pid or -- COMMAND); a \
                 simulation has exact accesses already: drop --referenced"
            );
        }
        if args.call_stacks {
            bail!(
                "--call-stacks records live processes' call stacks (--pid or -- COMMAND); a \
                 simulation runs no code: drop --call-stacks"
            );
        }
        if args.dry_run {
            bail!(
                "--dry-run is for live processes (--pid or -- COMMAND): a simulated run changes \
                 nothing real; drop --dry-run"
            );
        }
        let sim = args.sim.as_deref().unwrap_or(DEFAULT_SIM);
        record_sim(
            sim,
            &args.monitoring,
            &args.out,
            !args.no_compress,
            args.duration,
        )?
    } else {
        let watch = Watch {
            stop: stop_on_signals()?,
            tap: None,
            end_command: false,
        };
        record_live(args, watch)?
    };
    eprintln!("udamon: recorded {} to {}", summary, args.out.display());
    Ok(())
}

/// The settings of live monitoring with `source`'s defaults, checked for live processes:
/// every scheme's action can be done to one, and `--referenced` fits the update interval.
fn live_settings(args: &RecordArgs, source: &Source) -> Result<Settings> {
    let settings = args
        .monitoring
        .resolve_live(&vaddr::sampled_attrs(source), args.duration)?;
    let update = settings.attrs.ops_update_interval_us;
    if args.referenced.is_some_and(|period| period < update) {
        bail!(
            "--referenced: the kernel's accessed bits are read at most once per update \
             interval ({} ms): give a period of at least that",
            update / 1000
        );
    }
    Ok(settings)
}

impl RecordedOps for PaddrOps {
    fn record_events(&self) -> monitor::EventSource {
        let log = self.event_log();
        Box::new(move || log.take().into_iter().flat_map(record_event).collect())
    }
}

impl RecordedOps for VaddrOps {
    fn record_events(&self) -> monitor::EventSource {
        let log = self.event_log();
        Box::new(move || log.take().into_iter().flat_map(record_event).collect())
    }
}

/// A live process's event as the record has it, with its time (µs): one event, but two for a
/// batch of samples with call stacks.
fn record_event(e: VaddrEvent) -> Vec<(u64, EventKind)> {
    let kind = match e.kind {
        VaddrEventKind::Exec {
            target,
            comm,
            cmdline,
        } => EventKind::Exec {
            target: target as u32,
            command: (cmdline != comm).then_some(cmdline),
            comm,
        },
        VaddrEventKind::TargetAdded {
            target,
            pid,
            parent,
            cmdline,
        } => EventKind::TargetAdded {
            target: target as u32,
            pid: Some(pid),
            parent: parent.map(|p| p as u32),
            cmdline,
        },
        VaddrEventKind::Exit { target, status } => EventKind::Exit {
            target: target as u32,
            status,
        },
        VaddrEventKind::Mappings { target, mappings } => EventKind::Mappings {
            target: target as u32,
            mappings: mappings
                .into_iter()
                .map(|m| MappingRecord {
                    start: m.start,
                    end: m.end,
                    perms: m.perms.to_string(),
                    offset: m.offset,
                    name: m.path.to_string(),
                })
                .collect(),
        },
        VaddrEventKind::Resident { target, mappings } => EventKind::Resident {
            target: target as u32,
            mappings: mappings
                .into_iter()
                .map(|m| MappingResident {
                    start: m.start,
                    end: m.end,
                    resident_bytes: m.resident_bytes,
                })
                .collect(),
        },
        VaddrEventKind::Stats(s) => EventKind::SourceStats {
            counters: s.counters(),
        },
        VaddrEventKind::Referenced { target, found } => EventKind::Referenced {
            target: target as u32,
            interval_ns: e.time_us.saturating_sub(found.since_us) * 1000,
            resident_bytes: found.resident_bytes,
            mappings: found
                .mappings
                .into_iter()
                .map(|m| ReferencedMapping {
                    start: m.start,
                    end: m.end,
                    name: m.name,
                    rss_bytes: m.rss_bytes,
                    referenced_bytes: m.referenced_bytes,
                })
                .collect(),
        },
        VaddrEventKind::Note(text) => EventKind::Note { text },
        VaddrEventKind::Samples(batch) => {
            return samples_events(batch)
                .into_iter()
                .map(|kind| (e.time_us, kind))
                .collect();
        }
    };
    vec![(e.time_us, kind)]
}

/// A target's samples of one window as the record has them, followed by their call stacks
/// when they have them.
fn samples_events(batch: SampleBatch) -> Vec<EventKind> {
    let access = |a: Option<Access>| match a {
        None => SampleAccess::Unknown,
        Some(Access::Read) => SampleAccess::Read,
        Some(Access::Write) => SampleAccess::Write,
        Some(Access::ReadWrite) => SampleAccess::ReadWrite,
    };
    let target = batch.target as u32;
    let stacks = batch
        .facts
        .iter()
        .map(|f| f.stack)
        .collect::<Option<Vec<u32>>>();
    let mut events = vec![EventKind::Samples {
        target,
        window_ns: (batch.end_us - batch.start_us) * 1000,
        sites: batch
            .sites
            .into_iter()
            .map(|s| CodeSite {
                index: s.index,
                ip: s.ip,
                function: s.name.function,
                object: s.name.object,
                missing: s.name.missing,
            })
            .collect(),
        samples: batch
            .facts
            .into_iter()
            .map(|f| SampleFact {
                addr: f.addr,
                site: f.site,
                tid: f.tid,
                cpu: f.cpu,
                access: access(f.access),
            })
            .collect(),
    }];
    if let Some(samples) = stacks.filter(|s| !s.is_empty() || !batch.stacks.is_empty()) {
        events.push(EventKind::Stacks {
            target,
            stacks: batch
                .stacks
                .into_iter()
                .map(|s| CallStack {
                    index: s.index,
                    sites: s.sites,
                })
                .collect(),
            samples,
        });
    }
    events
}

/// Spawns (following the command's forks) or attaches (following forks with --children) with
/// `source`.
fn start_live(args: &RecordArgs, source: Source) -> Result<(VaddrOps, SampleClock), VaddrError> {
    let config = SamplerConfig {
        source,
        follow_forks: !args.command.is_empty(),
        call_stacks: args.call_stacks,
        ..SamplerConfig::default()
    };
    match args.command.split_first() {
        Some((program, rest)) => vaddr::spawn(program, rest, &config),
        None if args.children => vaddr::attach_tree(&args.pid, &config),
        None => vaddr::attach(&args.pid, &config),
    }
}

/// How a recording is watched while it runs: what stops it, and where its record also goes.
pub struct Watch {
    /// Set to stop monitoring with a complete record.
    pub stop: Arc<AtomicBool>,
    pub tap: Option<Box<dyn Tap>>,
    /// The command udamon started is stopped when monitoring stops before it ends (top's
    /// `q`: its user watched the command, and expects it gone with the screen), where
    /// `record` leaves it running and says so.
    pub end_command: bool,
}

/// A flag that Ctrl-C and SIGTERM set.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the Ctrl-C/SIGTERM handler")?;
    }
    Ok(stop)
}

/// Records live processes until they exit, `--duration` passes, or `watch.stop` is set.
pub fn record_live(args: &RecordArgs, watch: Watch) -> Result<Summary> {
    let chosen = vaddr::choose_source(args.access_source.into(), args.sample_rate)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    // Bad options and schemes fail before anything starts.
    let settings = live_settings(args, &chosen.source)?;
    let Watch {
        stop,
        tap,
        end_command,
    } = watch;
    // The errors' messages already include their causes: keep them to one line.
    let one_line = |e: VaddrError| anyhow::anyhow!("{e}");
    let (source, reason, settings, (mut ops, mut clock)) = match start_live(args, chosen.source) {
        Ok(live) => (chosen.source, chosen.reason, settings, live),
        Err(e @ VaddrError::Perf(_)) => match chosen.fallback {
            Some((fallback, why)) => {
                // The fallback's own defaults, checked before it starts.
                let settings = live_settings(args, &fallback)?;
                let live = start_live(args, fallback).map_err(one_line)?;
                (fallback, format!("{why} ({e})"), settings, live)
            }
            None => return Err(one_line(e)),
        },
        Err(e) => return Err(one_line(e)),
    };
    clock.set_stop_flag(Arc::clone(&stop));
    ops.set_dry_run(args.dry_run);
    if let Some(period) = args.referenced {
        ops.set_referenced(period);
    }
    let metrics = ProcMetrics::new(ops.pids());
    let targets = ops
        .targets()
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let info = TargetInfo {
                pid: t.pid,
                cmdline: ops.cmdline(i).to_string(),
                parent: ops.parent(i).map(|p| p as u32),
            };
            (t, info)
        })
        .collect();
    let session = Session {
        settings,
        targets,
        source: AccessSource {
            name: vaddr::source_name(&source).to_string(),
            reason,
        },
        out: &args.out,
        inputs: args.monitoring.schemes.as_deref().into_iter().collect(),
        compress: !args.no_compress,
        expected_us: args.duration,
        stop: Some(stop),
        metrics: Some(Box::new(metrics)),
        tap,
    };
    let start_us = monotonic_us();
    let summary = monitor::run(session, &mut ops, &mut clock, start_us)?;
    if let Some(pid) = clock.running_child() {
        // A signal that stopped monitoring may be ending the command at the same moment
        // (Ctrl-C reaches the terminal's whole process group): it is given a moment to.
        if exited_within(pid, Duration::from_millis(300)) {
            eprintln!("udamon: process {pid} ended as monitoring stopped");
        } else if end_command {
            eprintln!("udamon: {}", stop_command(pid));
        } else {
            eprintln!("udamon: process {pid} keeps running; monitoring stopped");
        }
    }
    Ok(summary)
}

/// How long a command has to end after SIGTERM before it is killed.
const COMMAND_GRACE: Duration = Duration::from_secs(3);

/// Stops the command udamon started, `pid`: SIGTERM, then SIGKILL if it is still there after
/// [`COMMAND_GRACE`]. Returns what happened, for the user.
fn stop_command(pid: u32) -> String {
    // SAFETY: signalling our own child, which is not reaped yet (its pid is still its).
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    if exited_within(pid, COMMAND_GRACE) {
        return format!("stopped the command (process {pid}, SIGTERM) with monitoring");
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    format!(
        "killed the command (process {pid}): it was still running {} s after SIGTERM",
        COMMAND_GRACE.as_secs()
    )
}

/// Whether the command udamon started, `pid`, exits within `wait`. Looks without reaping it.
fn exited_within(pid: u32, wait: Duration) -> bool {
    let deadline = std::time::Instant::now() + wait;
    loop {
        // SAFETY: waitid fills the zeroed siginfo it is given; WNOWAIT leaves the child as
        // it is for the sampler to reap.
        let exited = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            libc::waitid(libc::P_PID, pid, &mut info, flags) != 0 || info.si_pid() != 0
        };
        if exited {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Records the host's physical memory from every process's samples (or `--pid`'s), until
/// `--duration` passes or Ctrl-C/SIGTERM.
fn record_host(args: &RecordArgs) -> Result<Summary> {
    if args.monitoring.schemes.is_some() {
        bail!(
            "--host monitors physical memory, which schemes cannot act on: drop --schemes, or \
             record the processes (--pid) to act on their memory"
        );
    }
    let chosen = vaddr::choose_source(args.access_source.into(), args.sample_rate)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let settings = args
        .monitoring
        .resolve(&paddr::host_attrs(&chosen.source), args.duration)?;
    let one_line = |e: &dyn std::fmt::Display| anyhow::anyhow!("{e}");
    let mut ops = PaddrOps::new(&chosen.source).map_err(|e| one_line(&e))?;
    let config = SamplerConfig {
        source: chosen.source,
        ..SamplerConfig::default()
    };
    let mut sampling = SharedSampling::per_cpu(&config).map_err(|e| one_line(&e))?;
    let (tapped, cmdline) = if args.pid.is_empty() {
        (Tapped::All, "physical memory: every process".to_string())
    } else {
        for &pid in &args.pid {
            if udamon_linux::proc_stat::ProcStat::read(pid).is_none() {
                bail!("process {pid} does not exist (it may have exited)");
            }
        }
        let pids: Vec<String> = args.pid.iter().map(u32::to_string).collect();
        (
            Tapped::Pids(args.pid.iter().copied().collect()),
            format!("physical memory: processes {}", pids.join(", ")),
        )
    };
    sampling.tap(ops.feed(), tapped);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the Ctrl-C/SIGTERM handler")?;
    }
    let mut clock = SampleClock::shared(sampling);
    clock.set_stop_flag(Arc::clone(&stop));
    let session = Session {
        tap: None,
        settings,
        targets: vec![(
            Target::new(None),
            TargetInfo {
                pid: None,
                cmdline,
                parent: None,
            },
        )],
        source: AccessSource {
            name: format!("paddr/{}", vaddr::source_name(&chosen.source)),
            reason: format!(
                "{}; data addresses translated to physical frames through /proc/PID/pagemap",
                chosen.reason
            ),
        },
        out: &args.out,
        inputs: Vec::new(),
        compress: !args.no_compress,
        expected_us: args.duration,
        stop: Some(stop),
        metrics: None,
    };
    monitor::run(session, &mut ops, &mut clock, monotonic_us())
}

/// Records a simulated workload in virtual time.
pub fn record_sim(
    spec: &str,
    monitoring: &MonitoringArgs,
    out: &Path,
    compress: bool,
    duration_us: Option<u64>,
) -> Result<Summary> {
    record_sim_watched(spec, monitoring, out, compress, duration_us, None)
}

/// Records a simulated workload: in virtual time, or when watched in real time, until it
/// ends or `watch.stop` is set.
pub fn record_sim_watched(
    spec: &str,
    monitoring: &MonitoringArgs,
    out: &Path,
    compress: bool,
    duration_us: Option<u64>,
    watch: Option<Watch>,
) -> Result<Summary> {
    let settings = monitoring.resolve(&udamon_sim::default_attrs(), duration_us)?;
    let workload = load_workload(spec)?;
    let time = if watch.is_some() {
        "real time"
    } else {
        "virtual time"
    };
    let (info, source) = sim_identity(workload.name(), time);
    let mut ops = SimOps::new(workload, SimOptions::default());
    let session = Session {
        settings,
        targets: vec![(Target::new(None), info)],
        source,
        out,
        inputs: monitoring
            .schemes
            .as_deref()
            .into_iter()
            .chain(
                spec.strip_prefix("builtin:")
                    .is_none()
                    .then(|| Path::new(spec)),
            )
            .collect(),
        compress,
        expected_us: Some(duration_us.map_or(ops.duration_us(), |d| d.min(ops.duration_us()))),
        stop: Some(match &watch {
            Some(w) => Arc::clone(&w.stop),
            None => stop_on_signals()?,
        }),
        metrics: None,
        tap: None,
    };
    match watch {
        None => monitor::run(session, &mut ops, &mut VirtualClock, 0),
        Some(Watch { stop, tap, .. }) => {
            let session = Session { tap, ..session };
            monitor::run(session, &mut ops, &mut PacedClock::new(stop), 0)
        }
    }
}
