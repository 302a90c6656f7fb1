//! A monitoring session: attributes from the command line, a context with its operations, a
//! recorder and progress hanging off the loop, and a summary at the end. Every target kind
//! (simulated workloads, live processes) records through this one path; operations hand the
//! events they see (exec, exit, source statistics) to the record through [`RecordedOps`].

use crate::cli::MonitoringArgs;
use crate::host::{host_info, unix_now_ns};
use crate::progress::Progress;
use crate::schemes_file;
use anyhow::{Context as _, Result, bail};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use udamon_core::damos::MetricSource;
use udamon_core::{
    Attrs, Callbacks, Clock, Context, IntervalsGoal, Operations, OpsError, StopReason, Target,
};
use udamon_record::model::{AccessSource, EventKind, Header, Intervals, TargetInfo};
use udamon_record::{FORMAT_VERSION, RecordWriter, Recorder, WriterOptions};

impl MonitoringArgs {
    /// DAMON's attributes from the options, checked with DAMON's rules.
    pub fn attrs(&self) -> Result<Attrs> {
        let (sample, aggr, update) = match self.monitoring_intervals.as_deref() {
            Some(&[s, a, u]) => (s, a, u),
            _ => (self.sample_us, self.aggr_us, self.update_us),
        };
        let (min, max) = match self.nr_regions_range.as_deref() {
            Some(&[min, max]) => (min, max),
            _ => (self.min_regions, self.max_regions),
        };
        let attrs = Attrs {
            sample_interval_us: sample,
            aggr_interval_us: aggr,
            ops_update_interval_us: update,
            min_nr_regions: min,
            max_nr_regions: max,
            intervals_goal: if self.autotune {
                IntervalsGoal {
                    min_sample_us: sample.min(5_000),
                    ..IntervalsGoal::recommended()
                }
            } else {
                IntervalsGoal::default()
            },
            ..Attrs::default()
        };
        attrs.validate().context("invalid monitoring attributes")?;
        Ok(attrs)
    }
}

/// Operations whose events go into the record.
pub trait RecordedOps: Operations {
    /// Events since the last call, oldest first, each with its time on the context's time line
    /// (µs).
    fn take_record_events(&mut self) -> Vec<(u64, EventKind)> {
        Vec::new()
    }
}

impl RecordedOps for udamon_sim::SimOps {}

/// What to monitor, as the record's header will describe it.
pub struct Session<'a> {
    pub attrs: Attrs,
    pub seed: u64,
    pub targets: Vec<(Target, TargetInfo)>,
    pub source: AccessSource,
    pub out: &'a Path,
    pub compress: bool,
    /// Stop after this long (on the context's time line).
    pub duration_us: Option<u64>,
    /// How long the run is expected to take, for the progress bar.
    pub expected_us: Option<u64>,
    /// Set (by a signal handler) to stop monitoring with a complete record.
    pub stop: Option<Arc<AtomicBool>>,
    /// A scheme file to apply, and whether to record each apply pass's tried regions.
    pub schemes: Option<&'a Path>,
    pub tried_regions: bool,
    /// Where quota goals and watermarks read system metrics (none: upstream's fallbacks).
    pub metrics: Option<Box<dyn MetricSource>>,
}

/// What a finished session tells the user.
pub struct Summary {
    pub snapshots: u64,
    pub bytes: u64,
    pub monitored_us: u64,
    pub stop: String,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} snapshots over {:.1} s, {} bytes ({})",
            self.snapshots,
            self.monitored_us as f64 / 1e6,
            self.bytes,
            self.stop
        )
    }
}

/// Breaks the loop once the context's time passes a limit.
struct Deadline(Option<u64>);

impl Callbacks for Deadline {
    fn after_sampling(&mut self, ctx: &Context) -> ControlFlow<()> {
        match self.0 {
            Some(limit) if ctx.now_us() >= limit => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    }
}

/// Breaks the loop once a stop was requested from outside (Ctrl-C, SIGTERM).
struct StopFlag(Option<Arc<AtomicBool>>);

impl StopFlag {
    fn raised(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }
}

impl Callbacks for StopFlag {
    fn after_sampling(&mut self, _ctx: &Context) -> ControlFlow<()> {
        if self.raised() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

/// Writes the operations' pending events; a failure is kept in the recorder and ends the run at
/// its next snapshot.
fn write_events(ops: &mut dyn RecordedOps, recorder: &mut Recorder) {
    for (t_us, kind) in ops.take_record_events() {
        let _ = recorder.write_event(recorder.time_ns(t_us), kind);
    }
}

pub fn run(
    session: Session<'_>,
    ops: &mut dyn RecordedOps,
    clock: &mut dyn Clock,
    start_us: u64,
) -> Result<Summary> {
    if session.targets.is_empty() {
        bail!("nothing to monitor");
    }
    let mut ctx = Context::new(session.attrs, session.seed)?;
    ctx.set_start_time_us(start_us);
    let attrs = session.attrs;
    if let Some(path) = session.schemes {
        // Rates and ages in the file become counts of these intervals.
        for scheme in schemes_file::load(path, &attrs)? {
            ctx.add_scheme(scheme)?;
        }
        ctx.capture_tried_regions(session.tried_regions);
    }
    if let Some(metrics) = session.metrics {
        ctx.set_metric_source(metrics);
    }
    let header = Header {
        format_version: FORMAT_VERSION,
        udamon_version: env!("CARGO_PKG_VERSION").to_string(),
        access_source: session.source,
        intervals: Intervals {
            sample_us: attrs.sample_interval_us,
            aggr_us: attrs.aggr_interval_us,
            update_us: attrs.ops_update_interval_us,
        },
        min_nr_regions: attrs.min_nr_regions,
        max_nr_regions: attrs.max_nr_regions,
        seed: session.seed,
        targets: session
            .targets
            .iter()
            .map(|(_, info)| info.clone())
            .collect(),
        host: host_info(),
        start_time_unix_ns: unix_now_ns(),
    };
    for (target, _) in session.targets {
        ctx.add_target(target);
    }
    let file = crate::output::stream(session.out, session.schemes.as_slice())?;
    let writer = RecordWriter::new(
        file,
        session.out,
        &header,
        WriterOptions {
            compress: session.compress,
        },
    )
    .with_context(|| format!("cannot record to {}", session.out.display()))?;
    let recorder = Recorder::new(writer, start_us);
    let progress = Progress::new("recording", session.expected_us, start_us);
    let deadline = Deadline(session.duration_us.map(|d| start_us + d));
    let mut callbacks = (recorder, (progress, (deadline, StopFlag(session.stop))));

    let result: Result<StopReason, OpsError> = (|| {
        ctx.start(ops)?;
        write_events(ops, &mut callbacks.0);
        loop {
            let flow = ctx.step(ops, clock, &mut callbacks);
            write_events(ops, &mut callbacks.0);
            match flow? {
                ControlFlow::Continue(()) => continue,
                ControlFlow::Break(reason) => return Ok(reason),
            }
        }
    })();
    ctx.terminate(ops, &mut callbacks);
    write_events(ops, &mut callbacks.0);
    let (mut recorder, (progress, (deadline, stop_flag))) = callbacks;
    progress.finish();

    let stop = match &result {
        Ok(_) if recorder.error().is_some() => {
            "stopped: the record could not be written".to_string()
        }
        Ok(StopReason::Requested) if deadline.0.is_some_and(|d| ctx.now_us() >= d) => {
            "the requested duration elapsed".to_string()
        }
        Ok(StopReason::Requested) if stop_flag.raised() => "interrupted by a signal".to_string(),
        Ok(StopReason::Requested) => "stopped on request".to_string(),
        Ok(StopReason::NoValidTarget) => "every target ended".to_string(),
        Err(e) => format!("monitoring failed: {e}"),
    };
    // Best effort: a record whose writes already fail keeps its first error, reported below.
    let _ = recorder.write_event(
        recorder.time_ns(ctx.now_us()),
        EventKind::Stopped {
            reason: stop.clone(),
        },
    );
    let summary = Summary {
        snapshots: recorder.snapshots_written(),
        bytes: recorder.bytes_written(),
        monitored_us: ctx.now_us() - start_us,
        stop,
    };
    recorder
        .finish()
        .with_context(|| format!("recording to {} failed", session.out.display()))?;
    result.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(summary)
}
