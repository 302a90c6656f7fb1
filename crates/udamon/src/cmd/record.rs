//! `udamon record`: monitor a workload and write a record file: a simulated workload in
//! virtual time, or live processes (spawned or attached) with a sampled access source.

use crate::cli::{RecordArgs, RecordMonitoringArgs, SourceArg};
use crate::monitor::{self, RecordedOps, Session, Summary};
use crate::schemes_file;
use anyhow::{Context as _, Result, bail};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use udamon_core::{Attrs, IntervalsGoal, Target, VirtualClock};
use udamon_linux::actions::check_action;
use udamon_linux::metrics::ProcMetrics;
use udamon_linux::perf::{AccessSource as Source, SamplerConfig};
use udamon_linux::vaddr::{
    self, SampleClock, SourceChoice, VaddrError, VaddrEventKind, VaddrOps, monotonic_us,
};
use udamon_record::model::{AccessSource, EventKind, ReferencedMapping, TargetInfo};
use udamon_sim::{SimOps, SimOptions, Workload};

/// The workload recorded when no target is given.
pub const DEFAULT_SIM: &str = "builtin:demo";

pub fn run(args: &RecordArgs) -> Result<()> {
    let summary = if args.command.is_empty() && args.pid.is_empty() {
        if args.referenced.is_some() {
            bail!(
                "--referenced reads a live process's page tables (--pid or -- COMMAND); a \
                 simulation has exact accesses already: drop --referenced"
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
            &args.monitoring.args,
            &args.out,
            args.compress,
            args.duration,
        )?
    } else {
        record_live(args)?
    };
    eprintln!("udamon: recorded {} to {}", summary, args.out.display());
    Ok(())
}

/// The attributes of live monitoring: `source`'s defaults for whatever the user did not set.
fn live_attrs(m: &RecordMonitoringArgs, source: &Source) -> Result<Attrs> {
    let mut attrs = m.args.attrs()?;
    let d = vaddr::sampled_attrs(source);
    if !m.intervals_given {
        attrs.sample_interval_us = d.sample_interval_us;
        attrs.aggr_interval_us = d.aggr_interval_us;
        attrs.ops_update_interval_us = d.ops_update_interval_us;
    }
    if !m.regions_given {
        attrs.min_nr_regions = d.min_nr_regions;
        attrs.max_nr_regions = d.max_nr_regions;
    }
    if attrs.intervals_goal.enabled() {
        attrs.intervals_goal = IntervalsGoal {
            min_sample_us: attrs.sample_interval_us.min(5_000),
            ..IntervalsGoal::recommended()
        };
    }
    attrs.validate().context("invalid monitoring attributes")?;
    Ok(attrs)
}

impl RecordedOps for VaddrOps {
    fn take_record_events(&mut self) -> Vec<(u64, EventKind)> {
        self.take_events()
            .into_iter()
            .map(|e| {
                let kind = match e.kind {
                    VaddrEventKind::Exec { target, comm } => EventKind::Exec {
                        target: target as u32,
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
                    VaddrEventKind::MappingsChanged {
                        target,
                        nr_mappings,
                    } => EventKind::MappingsChanged {
                        target: target as u32,
                        nr_mappings: nr_mappings as u32,
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
                };
                (e.time_us, kind)
            })
            .collect()
    }
}

/// Spawns (following the command's forks) or attaches (following forks with --children) with
/// `source`.
fn start_live(args: &RecordArgs, source: Source) -> Result<(VaddrOps, SampleClock), VaddrError> {
    let config = SamplerConfig {
        source,
        follow_forks: !args.command.is_empty(),
        ..SamplerConfig::default()
    };
    match args.command.split_first() {
        Some((program, rest)) => vaddr::spawn(program, rest, &config),
        None if args.children => vaddr::attach_tree(&args.pid, &config),
        None => vaddr::attach(&args.pid, &config),
    }
}

/// Records live processes until they exit, `--duration` passes, or Ctrl-C/SIGTERM.
fn record_live(args: &RecordArgs) -> Result<Summary> {
    // Bad options and schemes fail before anything starts.
    let user_attrs = args.monitoring.args.attrs()?;
    if let Some(path) = args.monitoring.args.schemes.as_deref() {
        for (i, scheme) in schemes_file::load(path, &user_attrs)?.iter().enumerate() {
            if let Err(why) = check_action(scheme.action) {
                bail!("{}: schemes[{i}]: {why}", path.display());
            }
        }
    }
    let choice = match args.access_source {
        SourceArg::Auto => SourceChoice::Auto,
        SourceArg::Tick => SourceChoice::Tick,
        SourceArg::Cpuclock => SourceChoice::CpuClock,
        SourceArg::Pmu => SourceChoice::Pmu,
    };
    let chosen =
        vaddr::choose_source(choice, args.sample_rate).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(period) = args.referenced {
        let update = live_attrs(&args.monitoring, &chosen.source)?.ops_update_interval_us;
        if period < update {
            bail!(
                "--referenced: the kernel's accessed bits are read at most once per update \
                 interval ({} ms): give a period of at least that",
                update / 1000
            );
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the Ctrl-C/SIGTERM handler")?;
    }
    // The errors' messages already include their causes: keep them to one line.
    let one_line = |e: VaddrError| anyhow::anyhow!("{e}");
    let (source, reason, (mut ops, mut clock)) = match start_live(args, chosen.source) {
        Ok(live) => (chosen.source, chosen.reason, live),
        Err(e @ VaddrError::Perf(_)) => match chosen.fallback {
            Some((fallback, why)) => {
                let live = start_live(args, fallback).map_err(one_line)?;
                (fallback, format!("{why} ({e})"), live)
            }
            None => return Err(one_line(e)),
        },
        Err(e) => return Err(one_line(e)),
    };
    clock.set_stop_flag(Arc::clone(&stop));
    ops.set_dry_run(args.dry_run);
    let attrs = live_attrs(&args.monitoring, &source)?;
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
        attrs,
        seed: args.monitoring.args.seed,
        targets,
        source: AccessSource {
            name: vaddr::source_name(&source).to_string(),
            reason,
        },
        out: &args.out,
        compress: args.compress,
        duration_us: args.duration,
        expected_us: args.duration,
        stop: Some(stop),
        schemes: args.monitoring.args.schemes.as_deref(),
        tried_regions: args.monitoring.args.tried_regions,
        metrics: Some(Box::new(metrics)),
    };
    let start_us = monotonic_us();
    let summary = monitor::run(session, &mut ops, &mut clock, start_us)?;
    if let Some(pid) = clock.running_child() {
        eprintln!("udamon: process {pid} keeps running; monitoring stopped");
    }
    Ok(summary)
}

/// Loads `builtin:NAME` or a masim-format file.
pub fn load_workload(spec: &str) -> Result<Workload> {
    match spec.strip_prefix("builtin:") {
        Some(name) => Workload::builtin(name).with_context(|| {
            format!(
                "no built-in workload '{name}': use one of {}",
                udamon_sim::BUILTIN_NAMES.join(", ")
            )
        }),
        None => Ok(Workload::from_file(spec)?),
    }
}

/// Records a simulated workload in virtual time.
pub fn record_sim(
    spec: &str,
    monitoring: &crate::cli::MonitoringArgs,
    out: &Path,
    compress: bool,
    duration_us: Option<u64>,
) -> Result<Summary> {
    let workload = load_workload(spec)?;
    let name = workload.name().to_string();
    let mut ops = SimOps::new(workload, SimOptions::default());
    let session = Session {
        attrs: monitoring.attrs()?,
        seed: monitoring.seed,
        targets: vec![(
            Target::new(None),
            TargetInfo {
                pid: None,
                cmdline: name.clone(),
                parent: None,
            },
        )],
        source: AccessSource {
            name: "sim".to_string(),
            reason: format!("simulated workload '{name}' (masim format) in virtual time"),
        },
        out,
        compress,
        duration_us,
        expected_us: Some(duration_us.map_or(ops.duration_us(), |d| d.min(ops.duration_us()))),
        stop: None,
        schemes: monitoring.schemes.as_deref(),
        tried_regions: monitoring.tried_regions,
        metrics: None,
    };
    monitor::run(session, &mut ops, &mut VirtualClock, 0)
}
