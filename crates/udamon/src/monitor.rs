//! A monitoring session: settings resolved once from the command line ([`Settings`]), a
//! context run by the core's own loop with its operations, a recorder and progress hanging off
//! that loop as callbacks, and a summary at the end. Every target kind (simulated workloads,
//! live processes) records through this one path; operations hand the events they see (exec,
//! exit, source statistics) to the record through [`RecordedOps`], read at every sampling
//! interval. Every context is built here ([`context_for`]: record's, and each of serve's
//! targets'), and every failed stop is worded here ([`stop_reason`]).

pub mod clock;
mod settings;
pub mod sim;

pub use settings::{Settings, check_attrs, check_live};

use crate::host::{host_info, unix_now_ns};
use crate::progress::Progress;
use anyhow::{Context as _, Result, bail};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use udamon_core::damos::MetricSource;
use udamon_core::{
    Attrs, Callbacks, Clock, Context, Flow, Operations, RunError, StopReason, Target,
};
use udamon_record::model::{AccessSource, EventKind, Header, Intervals, TargetInfo, TouchedExtent};
use udamon_record::{FORMAT_VERSION, RecordError, RecordWriter, Recorder, WriterOptions};

/// The operations' events for the record, each with its time on the context's time line (µs),
/// oldest first, since the last call.
pub type EventSource = Box<dyn FnMut() -> Vec<(u64, EventKind)>>;

/// What a simulated workload touched in a window, `[start, end)` in µs since monitoring
/// started: the ground truth that records keep beside the snapshots.
pub type TruthSource = Box<dyn FnMut((u64, u64)) -> Vec<TouchedExtent>>;

/// Operations whose events go into the record.
pub trait RecordedOps: Operations {
    /// Where to read the events while the monitoring loop holds the operations.
    fn record_events(&self) -> EventSource {
        Box::new(Vec::new)
    }

    /// Where to read the ground truth of each window, for operations that know it.
    fn record_truth(&self) -> Option<TruthSource> {
        None
    }
}

impl RecordedOps for udamon_sim::SimOps {
    fn record_truth(&self) -> Option<TruthSource> {
        let (workload, options) = (self.workload().clone(), *self.options());
        Some(Box::new(move |window| {
            workload
                .touched_extents(&options, window)
                .into_iter()
                .map(|e| TouchedExtent {
                    start: e.range.start,
                    end: e.range.end,
                    touched_bytes: (e.bytes.round() as u64).min(e.range.size()),
                })
                .collect()
        }))
    }
}

/// Where a session also hands its record as it writes it (`udamon top`): the header, then
/// every frame.
pub trait Tap {
    fn header(&mut self, header: &Header);
    fn frame(&mut self, frame: udamon_record::model::Frame);
}

/// What to monitor, as the record's header will describe it.
pub struct Session<'a> {
    pub settings: Settings,
    pub targets: Vec<(Target, TargetInfo)>,
    pub source: AccessSource,
    pub out: &'a Path,
    /// The files the run reads (a schemes file, a workload file): the record never replaces
    /// one of them.
    pub inputs: Vec<&'a Path>,
    pub compress: bool,
    /// How long the run is expected to take, for the progress bar.
    pub expected_us: Option<u64>,
    /// Set (by a signal handler) to stop monitoring with a complete record.
    pub stop: Option<Arc<AtomicBool>>,
    /// Where quota goals and watermarks read system metrics (none: upstream's fallbacks).
    pub metrics: Option<Box<dyn MetricSource>>,
    /// Where the record also goes as it is written.
    pub tap: Option<Box<dyn Tap>>,
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

/// Breaks the loop once the requested duration has passed on the context's time line, or a
/// stop was requested from outside (Ctrl-C, SIGTERM): after every step, also the ones spent
/// waiting for the schemes' watermarks.
struct Stop {
    deadline_us: Option<u64>,
    flag: Option<Arc<AtomicBool>>,
}

impl Stop {
    fn expired(&self, ctx: &Context) -> bool {
        self.deadline_us.is_some_and(|d| ctx.now_us() >= d)
    }

    fn raised(&self) -> bool {
        self.flag
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// How a stop of the loop's own reads.
    fn words(&self, ctx: &Context, reason: StopReason) -> String {
        match reason {
            StopReason::Requested if self.expired(ctx) => "the requested duration elapsed",
            StopReason::Requested if self.raised() => "interrupted by a signal",
            StopReason::Requested => "stopped on request",
            StopReason::NoValidTarget => "every target ended",
        }
        .to_string()
    }

    fn check(&self, ctx: &Context) -> Flow {
        Ok(if self.expired(ctx) || self.raised() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

impl Callbacks for Stop {
    fn after_sampling(&mut self, ctx: &Context) -> Flow {
        self.check(ctx)
    }

    fn after_wait(&mut self, ctx: &Context) -> Flow {
        self.check(ctx)
    }
}

/// The recorder, fed the operations' events at every sampling interval: before the window's
/// snapshot, which then holds the targets they announce.
struct Recording {
    recorder: Recorder,
    events: EventSource,
    truth: Option<TruthSource>,
    /// Where monitoring started on the context's time line.
    start_us: u64,
    /// Whether monitoring is waiting on the schemes' watermarks, so that the record (and the
    /// user) learn once when it starts and stops waiting.
    waiting: bool,
}

impl Recording {
    fn write_events(&mut self) -> Result<(), RecordError> {
        for (t_us, kind) in (self.events)() {
            let time_ns = self.recorder.time_ns(t_us);
            self.recorder.write_event(time_ns, kind)?;
        }
        Ok(())
    }

    /// Ends the record to `out`: the operations' last events (from their cleanup), then why
    /// monitoring stopped; what the session tells the user.
    fn finish(mut self, ctx: &Context, why: String, out: &Path) -> Result<Summary> {
        // Best effort: a record whose writes already fail keeps its first error, reported by
        // the recorder's finish.
        let _ = self.write_events().and_then(|()| {
            let time_ns = self.recorder.time_ns(ctx.now_us());
            let reason = why.clone();
            self.recorder
                .write_event(time_ns, EventKind::Stopped { reason })
        });
        let summary = Summary {
            snapshots: self.recorder.snapshots_written(),
            bytes: self.recorder.bytes_written(),
            monitored_us: ctx.now_us() - self.start_us,
            stop: why,
        };
        self.recorder
            .finish()
            .with_context(|| format!("recording to {} failed", out.display()))?;
        Ok(summary)
    }

    fn note(&mut self, ctx: &Context, text: &str) -> Result<(), RecordError> {
        let time_ns = self.recorder.time_ns(ctx.now_us());
        self.recorder.write_event(
            time_ns,
            EventKind::Note {
                text: text.to_string(),
            },
        )
    }
}

impl Callbacks for Recording {
    fn after_sampling(&mut self, ctx: &Context) -> Flow {
        if self.waiting {
            self.waiting = false;
            self.note(ctx, "monitoring resumed: a scheme's watermarks let it run")?;
        }
        self.write_events()?;
        Ok(ControlFlow::Continue(()))
    }

    fn after_wait(&mut self, ctx: &Context) -> Flow {
        if !self.waiting {
            self.waiting = true;
            let why = "monitoring waits: the watermarks of every scheme hold it back (free \
                       memory is outside their range; see docs/schemes.md)";
            eprintln!("udamon: {why}");
            self.note(ctx, why)?;
        }
        Ok(ControlFlow::Continue(()))
    }

    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        let flow = self.recorder.after_aggregation(ctx)?;
        if let Some(truth) = &mut self.truth {
            // Every target is a view of the one simulated address space.
            let (start, end) = ctx.window_us();
            let extents = truth((start - self.start_us, end - self.start_us));
            let time_ns = self.recorder.time_ns(end);
            for target in 0..ctx.targets().len() as u32 {
                let kind = EventKind::Truth {
                    target,
                    window_ns: (end - start) * 1000,
                    extents: extents.clone(),
                };
                self.recorder.write_event(time_ns, kind)?;
            }
        }
        Ok(flow)
    }
}

/// The header of a record of `targets` monitored with `attrs`, starting now.
fn header(
    attrs: &Attrs,
    seed: u64,
    access_source: AccessSource,
    targets: Vec<TargetInfo>,
) -> Header {
    Header {
        format_version: FORMAT_VERSION,
        udamon_version: env!("CARGO_PKG_VERSION").to_string(),
        access_source,
        intervals: Intervals {
            sample_us: attrs.sample_interval_us,
            aggr_us: attrs.aggr_interval_us,
            update_us: attrs.ops_update_interval_us,
        },
        min_nr_regions: attrs.min_nr_regions,
        max_nr_regions: attrs.max_nr_regions,
        seed,
        targets,
        host: host_info(),
        start_time_unix_ns: unix_now_ns(),
        adjustment: attrs.adjustment.name().to_string(),
    }
}

/// A context that monitors `targets` with `settings` from `start_us` on its time line, and
/// the header of its record: how every session starts, `record`'s and each of serve's targets.
pub fn context_for(
    settings: &Settings,
    start_us: u64,
    metrics: Option<Box<dyn MetricSource>>,
    source: AccessSource,
    targets: Vec<(Target, TargetInfo)>,
) -> Result<(Context, Header)> {
    let mut ctx = Context::new(settings.attrs, settings.seed)?;
    ctx.set_start_time_us(start_us);
    for scheme in &settings.schemes {
        ctx.add_scheme(scheme.clone())?;
    }
    ctx.capture_tried_regions(settings.tried_regions);
    if let Some(metrics) = metrics {
        ctx.set_metric_source(metrics);
    }
    let infos = targets.iter().map(|(_, info)| info.clone()).collect();
    let header = header(&settings.attrs, settings.seed, source, infos);
    for (target, _) in targets {
        ctx.add_target(target);
    }
    Ok((ctx, header))
}

/// Why monitoring stopped, in a line (a record's last event, the summary, serve's log). A
/// failure is worded here; `stopped` words a stop the run chose (a deadline, a signal, every
/// target gone), which only its caller can tell apart.
pub fn stop_reason(
    result: Result<StopReason, &RunError>,
    stopped: impl FnOnce(StopReason) -> String,
) -> String {
    match result {
        Ok(reason) => stopped(reason),
        Err(RunError::Callback(e)) => format!("the record could not be written: {e}"),
        Err(RunError::Ops(e)) => format!("monitoring failed: {e}"),
    }
}

/// Records `session` until it stops: build its context, record, run, finish.
pub fn run(
    session: Session<'_>,
    ops: &mut dyn RecordedOps,
    clock: &mut dyn Clock,
    start_us: u64,
) -> Result<Summary> {
    if session.targets.is_empty() {
        bail!("nothing to monitor");
    }
    let Session {
        settings,
        targets,
        source,
        out,
        inputs,
        compress,
        expected_us,
        stop,
        metrics,
        tap,
    } = session;
    let (mut ctx, header) = context_for(&settings, start_us, metrics, source, targets)?;
    // A watched session is shown by its watcher, not by a progress bar.
    let watched = tap.is_some();
    let recording = Recording {
        waiting: false,
        recorder: open_recorder(out, &inputs, compress, &header, tap, start_us)?,
        events: ops.record_events(),
        truth: ops.record_truth(),
        start_us,
    };
    let progress = if watched {
        Progress::hidden(start_us)
    } else {
        Progress::new("recording", expected_us, start_us)
    };
    let stop = Stop {
        deadline_us: settings.duration_us.map(|d| start_us.saturating_add(d)),
        flag: stop,
    };
    let mut callbacks = (recording, (progress, stop));
    let result = ctx.run(ops, clock, &mut callbacks);
    let (recording, (progress, stop)) = callbacks;
    progress.finish();
    let why = stop_reason(result.as_ref().copied(), |reason| stop.words(&ctx, reason));
    let summary = recording.finish(&ctx, why, out)?;
    result.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(summary)
}

/// The recorder of a session to `out` (never replacing one of its `inputs`), handing what it
/// writes to `tap` as well.
fn open_recorder(
    out: &Path,
    inputs: &[&Path],
    compress: bool,
    header: &Header,
    tap: Option<Box<dyn Tap>>,
    start_us: u64,
) -> Result<Recorder> {
    let file = crate::output::stream(out, inputs)?;
    let writer = RecordWriter::new(file, out, header, WriterOptions { compress })
        .with_context(|| format!("cannot record to {}", out.display()))?;
    let mut recorder = Recorder::new(writer, start_us);
    if let Some(mut tap) = tap {
        tap.header(header);
        recorder.set_tap(Box::new(move |frame| tap.frame(frame)));
    }
    Ok(recorder)
}
