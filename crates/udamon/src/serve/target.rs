//! One served target: a process (or a simulated workload) monitored on a thread of its own, by
//! the core's one loop, until it ends or is told to stop.
//!
//! A thread per target keeps targets apart: each has its own context, intervals and schemes,
//! one that is slow to attach or to symbolize holds no other back, and one that leaves takes
//! everything it owned with it (its regions, its events, its record, its metrics), so that a
//! week of targets coming and going leaves nothing behind. The operations set is built on the
//! thread itself: a live process's sampler is not meant to move between threads.
//!
//! The thread publishes every aggregation window to the [`Sink`] (the metrics), drains the
//! operations' events whether or not a record is kept (so they never pile up), writes the
//! record through [`Rotation`] when records are on, and takes [`Command`]s between steps, where
//! the core lets a running context change.

use super::log;
use super::records::{RecordPolicy, Rotation};
use crate::monitor::{EventSource, RecordedOps};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::time::Duration;
use udamon_core::damos::{MetricSource, Scheme};
use udamon_core::{Attrs, Callbacks, Clock, Context, Flow, RunError, StopReason, Target};
use udamon_linux::vaddr;
use udamon_record::model::{AccessSource, EventKind, Frame, TargetInfo};
use udamon_record::recorder::snapshot_from_context;

/// How a served target is named in metrics, logs and records: a bounded set of labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Labels {
    pub id: TargetId,
    /// The command name (a simulated workload's name).
    pub comm: String,
    /// The cgroup v2 path it was found in; empty when not selected by cgroup.
    pub cgroup: String,
}

/// A target as `udamon ctl` and the metrics' `pid` label name it: a process id, or `sim:N`
/// for the N-th simulated workload served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetId {
    Pid(u32),
    Sim(u64),
}

impl std::fmt::Display for TargetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetId::Pid(pid) => write!(f, "{pid}"),
            TargetId::Sim(n) => write!(f, "sim:{n}"),
        }
    }
}

impl std::fmt::Display for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.comm, self.id)?;
        if !self.cgroup.is_empty() {
            write!(f, " in {}", self.cgroup)?;
        }
        Ok(())
    }
}

/// Where each aggregation window of every target goes: the metrics.
pub trait Sink: Send + Sync {
    /// Target `labels`' window just completed in `ctx` (its only target is index 0), with what
    /// its operations told besides.
    fn window(&self, labels: &Labels, ctx: &Context, told: &Told);
    /// The target ended or was removed: forget it.
    fn gone(&self, labels: &Labels);
}

/// What a target's operations told through their events, for the metrics.
#[derive(Debug, Default, Clone)]
pub struct Told {
    /// The access source's running totals.
    pub counters: BTreeMap<String, u64>,
    /// The resident bytes of the last page-table walk.
    pub resident_bytes: Option<u64>,
}

/// A target's monitoring, ready to start: what [`Start`] builds on the target's thread.
pub struct Monitored {
    pub ops: Box<dyn RecordedOps>,
    pub clock: Box<dyn Clock>,
    pub target: Target,
    pub info: TargetInfo,
    pub source: AccessSource,
    /// The context's time at the start (its clock's time line).
    pub start_us: u64,
    /// Where quota goals and watermarks read system metrics (none: upstream's fallbacks).
    pub metrics: Option<Box<dyn MetricSource>>,
    /// A live process: scheme actions must be ones user space can do.
    pub live: bool,
    /// How long its clock sleeps between wake-ups, kept at [`wake_batch`] of the window.
    pub batch: Option<vaddr::Batch>,
    /// Why the target is gone once its operations find nothing left to monitor.
    pub gone: Box<dyn Fn() -> String + Send>,
}

/// How long a served target's clock sleeps between wake-ups: half its aggregation window,
/// rather than every 50 ms, but at most [`MAX_WAKE_BATCH`]. With many targets, wake-ups are
/// most of the service's cost, and a window is still published within half a window of its
/// end; a stop is seen within the longest batch whatever the window.
pub fn wake_batch(aggr_interval_us: u64) -> Duration {
    Duration::from_micros(aggr_interval_us / 2).clamp(vaddr::BATCH, MAX_WAKE_BATCH)
}

/// The longest a served target's clock sleeps at once.
pub const MAX_WAKE_BATCH: Duration = Duration::from_secs(1);

/// How a target is asked to stop: the flag its loop and clock watch, and why, for its log line
/// and the end of its record.
#[derive(Debug, Clone, Default)]
pub struct StopRequest {
    flag: Arc<AtomicBool>,
    why: Arc<std::sync::Mutex<Option<String>>>,
}

impl StopRequest {
    /// Asks the target to stop because of `why` (the first reason given is kept).
    pub fn request(&self, why: &str) {
        let mut kept = self.why.lock().unwrap_or_else(|e| e.into_inner());
        kept.get_or_insert_with(|| why.to_string());
        self.flag.store(true, Ordering::Relaxed);
    }

    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    pub fn flag(&self) -> &Arc<AtomicBool> {
        &self.flag
    }

    fn why(&self) -> String {
        let kept = self.why.lock().unwrap_or_else(|e| e.into_inner());
        kept.clone()
            .unwrap_or_else(|| "stopped on request".to_string())
    }
}

/// Builds a target's operations on its thread (its clock watching the stop flag given);
/// fails with a one-line reason.
pub type Start = Box<dyn FnOnce(&Arc<AtomicBool>) -> Result<Monitored, String> + Send>;

/// What a target is monitored with: the serve-wide settings, copied at its start.
#[derive(Debug, Clone)]
pub struct TargetSettings {
    pub attrs: Attrs,
    pub seed: u64,
    pub schemes: Vec<Scheme>,
}

/// Changes of the monitoring attributes; what is not given is kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tune {
    pub sample_us: Option<u64>,
    pub aggr_us: Option<u64>,
    pub update_us: Option<u64>,
    pub min_regions: Option<u32>,
    pub max_regions: Option<u32>,
}

impl std::fmt::Display for Tune {
    /// The changes given, as `ctl tune` takes them: `--aggr-us 200000us --max-regions 300`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let intervals = [
            ("sample-us", self.sample_us),
            ("aggr-us", self.aggr_us),
            ("update-us", self.update_us),
        ];
        let bounds = [
            ("min-regions", self.min_regions),
            ("max-regions", self.max_regions),
        ];
        let mut words = Vec::new();
        for (name, us) in intervals {
            if let Some(us) = us {
                words.push(format!("--{name} {us}us"));
            }
        }
        for (name, n) in bounds {
            if let Some(n) = n {
                words.push(format!("--{name} {n}"));
            }
        }
        if words.is_empty() {
            words.push("(nothing)".to_string());
        }
        write!(f, "{}", words.join(" "))
    }
}

impl Tune {
    /// `attrs` with these changes.
    pub fn apply_to(&self, attrs: &Attrs) -> Attrs {
        Attrs {
            sample_interval_us: self.sample_us.unwrap_or(attrs.sample_interval_us),
            aggr_interval_us: self.aggr_us.unwrap_or(attrs.aggr_interval_us),
            ops_update_interval_us: self.update_us.unwrap_or(attrs.ops_update_interval_us),
            min_nr_regions: self.min_regions.unwrap_or(attrs.min_nr_regions),
            max_nr_regions: self.max_regions.unwrap_or(attrs.max_nr_regions),
            ..*attrs
        }
    }
}

/// A reply to a command: text for the caller, or why the command was refused.
pub type Reply = Sender<Result<String, String>>;

/// What a running target can be asked, between two steps of its loop.
pub enum Command {
    /// Change the intervals and region bounds.
    Tune(Tune, Reply),
    /// Add the schemes of a schemes file's text (its rates and ages converted with the
    /// target's intervals in force).
    AddSchemes(String, Reply),
    /// Remove the scheme at this index.
    RemoveScheme(usize, Reply),
    /// The last window's regions, as `report access` shows them (JSON when asked).
    Snapshot { json: bool, reply: Reply },
    /// Intervals, region bounds, schemes and windows so far, one line.
    Status(Reply),
}

/// The callbacks of a served target's loop.
struct Served {
    labels: Labels,
    sink: Arc<dyn Sink>,
    events: EventSource,
    told: Told,
    rotation: Option<Rotation>,
    commands: Receiver<Command>,
    stop: StopRequest,
    start_us: u64,
    windows: u64,
    /// The last complete window, for [`Command::Snapshot`].
    last: Option<Frame>,
    header: udamon_record::model::Header,
    live: bool,
    batch: Option<vaddr::Batch>,
}

impl Served {
    fn drain_events(&mut self) -> Result<(), udamon_record::RecordError> {
        for (t_us, kind) in (self.events)() {
            match &kind {
                EventKind::SourceStats { counters } => self.told.counters.clone_from(counters),
                EventKind::Resident { mappings, .. } => {
                    self.told.resident_bytes =
                        Some(mappings.iter().map(|m| m.resident_bytes).sum());
                }
                _ => {}
            }
            if let Some(rotation) = &mut self.rotation {
                rotation.write_event(t_us, kind)?;
            }
        }
        Ok(())
    }

    fn answer(&mut self, ctx: &mut Context, command: Command) {
        match command {
            Command::Tune(tune, reply) => {
                let attrs = tune.apply_to(ctx.attrs());
                let result = crate::monitor::check_attrs(&attrs)
                    .map_err(|e| format!("{e:#}"))
                    .and_then(|()| ctx.set_attrs(attrs).map_err(|e| e.to_string()))
                    .map(|()| {
                        // A shorter window must not wait out the old one's batch.
                        if let Some(batch) = &self.batch {
                            batch.set(wake_batch(attrs.aggr_interval_us));
                        }
                        format!("{}: {}", self.labels, describe(ctx))
                    })
                    .map_err(|e| format!("{}: {e}", self.labels));
                let _ = reply.send(result);
            }
            Command::AddSchemes(text, reply) => {
                let result = crate::schemes_file::parse(&text, ctx.attrs())
                    .and_then(|schemes| {
                        crate::schemes_file::check_total(ctx.schemes().len(), schemes.len())
                            .map(|()| schemes)
                    })
                    .map_err(|e| format!("{e:#}"))
                    .and_then(|schemes| {
                        if self.live {
                            for (i, scheme) in schemes.iter().enumerate() {
                                udamon_linux::actions::check_action(scheme.action)
                                    .map_err(|why| format!("schemes[{i}]: {why}"))?;
                            }
                        }
                        let n = schemes.len();
                        schemes
                            .into_iter()
                            .try_for_each(|s| ctx.add_scheme(s))
                            .map(|()| n)
                            .map_err(|e| e.to_string())
                    })
                    .map(|n| format!("{}: {n} scheme(s) added; {}", self.labels, describe(ctx)))
                    .map_err(|e| format!("{}: {e}", self.labels));
                let _ = reply.send(result);
            }
            Command::RemoveScheme(index, reply) => {
                let result = match ctx.remove_scheme(index) {
                    Some(s) => Ok(format!(
                        "{}: scheme {index} ({}) removed; {}",
                        self.labels,
                        s.action.name(),
                        describe(ctx)
                    )),
                    None => Err(format!(
                        "{}: no scheme {index}: it has {} (numbered from 0)",
                        self.labels,
                        ctx.schemes().len()
                    )),
                };
                let _ = reply.send(result);
            }
            Command::Snapshot { json, reply } => {
                let _ = reply.send(self.snapshot(json));
            }
            Command::Status(reply) => {
                let mut text = format!(
                    "{}: {}; {} windows",
                    self.labels,
                    describe(ctx),
                    self.windows
                );
                for (i, scheme) in ctx.schemes().iter().enumerate() {
                    text.push('\n');
                    text.push_str(&scheme_counters(i, scheme));
                }
                let _ = reply.send(Ok(text));
            }
        }
    }

    fn snapshot(&self, json: bool) -> Result<String, String> {
        let Some(frame) = self.last.clone() else {
            return Err(format!(
                "{}: no window completed yet: ask again after one aggregation interval",
                self.labels
            ));
        };
        let report = udamon_report::access::access(
            &self.header,
            [frame],
            &udamon_report::access::AccessOptions::default(),
        )
        .map_err(|e| format!("{}: {e}", self.labels))?;
        if json {
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())
        } else {
            Ok(udamon_report::access::render_text(&report))
        }
    }
}

/// The intervals, region bounds and schemes in force, for replies and logs.
fn describe(ctx: &Context) -> String {
    let a = ctx.attrs();
    format!(
        "intervals {} / {} / {} us, regions {}..{}, {} scheme(s)",
        a.sample_interval_us,
        a.aggr_interval_us,
        a.ops_update_interval_us,
        a.min_nr_regions,
        a.max_nr_regions,
        ctx.schemes().len()
    )
}

/// What scheme `index` did so far, one line: regions and bytes it tried and applied, and how
/// often its quota ran out (the counters `udamon report schemes` shows of a record).
fn scheme_counters(index: usize, scheme: &Scheme) -> String {
    let s = &scheme.stats;
    let size = udamon_report::human::size;
    format!(
        "scheme {index} {}: tried {} regions ({}), applied {} regions ({}), quota exceeded {} \
         times",
        scheme.action.name(),
        s.nr_tried,
        size(s.sz_tried),
        s.nr_applied,
        size(s.sz_applied),
        s.qt_exceeds
    )
}

impl Callbacks for Served {
    fn control(&mut self, ctx: &mut Context) -> Flow {
        if self.stop.requested() {
            return Ok(ControlFlow::Break(()));
        }
        loop {
            match self.commands.try_recv() {
                Ok(command) => self.answer(ctx, command),
                Err(TryRecvError::Empty) => return Ok(ControlFlow::Continue(())),
                // The supervisor is gone: nobody serves this target any more.
                Err(TryRecvError::Disconnected) => return Ok(ControlFlow::Break(())),
            }
        }
    }

    fn after_sampling(&mut self, _ctx: &Context) -> Flow {
        self.drain_events()?;
        Ok(ControlFlow::Continue(()))
    }

    fn after_wait(&mut self, _ctx: &Context) -> Flow {
        self.drain_events()?;
        Ok(ControlFlow::Continue(()))
    }

    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        self.windows += 1;
        self.sink.window(&self.labels, ctx, &self.told);
        self.last = Some(Frame::Snapshot(snapshot_from_context(ctx, self.start_us)));
        match &mut self.rotation {
            Some(rotation) => rotation.after_aggregation(ctx),
            None => Ok(ControlFlow::Continue(())),
        }
    }
}

/// Monitors the target `start` builds until it ends, `stop` is raised, or the supervisor goes.
/// Everything ends with it: its metrics are withdrawn and its record finished.
pub fn serve_target(
    labels: Labels,
    start: Start,
    settings: TargetSettings,
    sink: Arc<dyn Sink>,
    records: Option<Arc<RecordPolicy>>,
    commands: Receiver<Command>,
    stop: StopRequest,
) {
    let outcome = run(&labels, start, settings, &sink, records, commands, stop);
    sink.gone(&labels);
    match outcome {
        Ok(why) => log::info(&format!("{labels}: monitoring ended: {why}")),
        Err(why) => log::warn(&format!("{labels}: {why}")),
    }
}

fn run(
    labels: &Labels,
    start: Start,
    settings: TargetSettings,
    sink: &Arc<dyn Sink>,
    records: Option<Arc<RecordPolicy>>,
    commands: Receiver<Command>,
    stop: StopRequest,
) -> Result<String, String> {
    let Monitored {
        mut ops,
        mut clock,
        target,
        info,
        source,
        start_us,
        metrics,
        live,
        batch,
        gone,
    } = start(stop.flag())?;
    let mut ctx = Context::new(settings.attrs, settings.seed).map_err(|e| e.to_string())?;
    ctx.set_start_time_us(start_us);
    if let Some(metrics) = metrics {
        ctx.set_metric_source(metrics);
    }
    for scheme in settings.schemes {
        ctx.add_scheme(scheme).map_err(|e| e.to_string())?;
    }
    ctx.add_target(target);
    let header = crate::monitor::header(&settings.attrs, settings.seed, source, vec![info]);
    let rotation = match records {
        Some(policy) => Some(Rotation::open(policy, labels, header.clone(), start_us)?),
        None => None,
    };
    log::info(&format!("{labels}: monitoring started; {}", describe(&ctx)));
    let mut served = Served {
        labels: labels.clone(),
        sink: Arc::clone(sink),
        events: ops.record_events(),
        told: Told::default(),
        rotation,
        commands,
        stop,
        start_us,
        windows: 0,
        last: None,
        header,
        live,
        batch,
    };
    let result = ctx.run(ops.as_mut(), clock.as_mut(), &mut served);
    let why = match &result {
        Ok(StopReason::Requested) => served.stop.why(),
        Ok(StopReason::NoValidTarget) => gone(),
        Err(RunError::Callback(e)) => format!("the record could not be written: {e}"),
        Err(RunError::Ops(e)) => format!("monitoring failed: {e}"),
    };
    // The operations' last events, then why it ended; best effort, as `record` does.
    let _ = served.drain_events();
    if let Some(rotation) = served.rotation.take() {
        rotation
            .finish(ctx.now_us(), &why)
            .map_err(|e| format!("its record is incomplete: {e}"))?;
    }
    match result {
        Ok(_) => Ok(why),
        Err(_) => Err(why),
    }
}
