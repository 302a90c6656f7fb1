//! `udamon record`: monitor a workload and write a record file.

use crate::cli::RecordArgs;
use crate::monitor::{self, Session, Summary};
use anyhow::{Context as _, Result};
use std::path::Path;
use udamon_core::{Target, VirtualClock};
use udamon_record::model::{AccessSource, TargetInfo};
use udamon_sim::{SimOps, SimOptions, Workload};

/// The workload recorded when no target is given.
pub const DEFAULT_SIM: &str = "builtin:demo";

pub fn run(args: &RecordArgs) -> Result<()> {
    let sim = args.sim.as_deref().unwrap_or(DEFAULT_SIM);
    let summary = record_sim(
        sim,
        &args.monitoring,
        &args.out,
        args.compress,
        args.duration,
    )?;
    eprintln!("udamon: recorded {} to {}", summary, args.out.display());
    Ok(())
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
    };
    monitor::run(session, &mut ops, &mut VirtualClock, 0)
}
