//! One served target: a process (or a simulated workload) with its own context, intervals,
//! schemes and record, stepped by the service's one loop ([`super::engine`]) as its samples
//! come, and asleep while it has none.
//!
//! A [`ServedTarget`] target publishes an aggregation window as an [`Observation`] for the metrics
//! once per publication ([`ObservationSchedule`]; the window a target falls asleep after always), drains
//! its operations' events whether or not a record is kept (so they never pile up), writes its
//! record through [`Rotation`] when records are on, and takes [`Command`]s between steps, where
//! the core lets a running context change. Everything it owns goes with it (its regions, its
//! samples, its record, its series), so that a week of targets coming and going leaves nothing
//! behind.
//!
//! **Asleep.** A live target whose samplers delivered nothing since its window began (its
//! process did not run) is not stepped: it stops at the end of that window, and the windows
//! that pass while nothing comes are passed at once when it is next needed (records arrive, a
//! command, a publication, its record), each region ageing by the windows passed
//! ([`Context::pass_idle_windows`]). A thousand sleeping processes so cost nothing per window.
//! A target with schemes never sleeps: its schemes must see idle memory age window by window.

use super::engine::{Hub, ObservationSchedule};
use super::log;
use super::records::{RecordPolicy, Rotation};
use crate::cli::Overrides;
use crate::monitor::{EventSource, RecordedOps, Settings};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use udamon_core::damos::{MetricSource, Scheme};
use udamon_core::{Callbacks, Context, Flow, RunError, StopReason, Target, VirtualClock};
use udamon_exporter::Observation;
use udamon_record::model::{AccessSource, EventKind, Frame, Snapshot, TargetInfo};
use udamon_record::recorder::snapshot_with_touched;

/// How a served target is named in metrics, logs and records: a bounded set of labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Labels {
    pub id: TargetId,
    /// The command name (a simulated workload's name).
    pub comm: String,
    /// The cgroup v2 path it was found in; empty when not selected by cgroup.
    pub cgroup: String,
    /// Named by `--pid` or `udamon ctl add`: it always has series of its own. Not a label.
    pub named: bool,
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

/// What a target's operations readings through their events, for the metrics.
#[derive(Debug, Default, Clone)]
pub struct EventReadings {
    /// The access source's running totals.
    pub counters: BTreeMap<String, u64>,
    /// The resident bytes of the last page-table walk.
    pub resident_bytes: Option<u64>,
}

/// A target's monitoring, ready to start: what [`TargetStarter`] builds on the service's loop.
pub struct TargetSetup {
    pub ops: Box<dyn RecordedOps>,
    pub target: Target,
    pub info: TargetInfo,
    pub source: AccessSource,
    /// The context's time at the start (its time line).
    pub start_us: u64,
    /// Where quota goals and watermarks read system metrics (none: upstream's fallbacks).
    pub metrics: Option<Box<dyn MetricSource>>,
    /// What drives its time.
    pub pace: Pace,
    /// Why the target is gone once its operations find nothing left to monitor.
    pub gone: Box<dyn Fn() -> String + Send>,
}

/// How a target's time passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// A live process of the shared samplers (`pid`): its time is CLOCK_MONOTONIC, stepped as
    /// far as they were drained. It sleeps while it gets nothing.
    Live { pid: u32 },
    /// A simulation in real time: its time line starts at 0 when it starts.
    RealTime { origin: std::time::Instant },
    /// A simulation in virtual time: as fast as the loop gives it time.
    Fast,
}

/// Builds a target's operations on the service's loop, with its shared samplers; fails with
/// a one-line reason.
pub type TargetStarter = Box<dyn FnOnce(&mut Hub) -> Result<TargetSetup, String> + Send>;

/// A reply to a command: text for the caller, or why the command was refused.
pub type Reply = Sender<Result<String, String>>;

/// What a running target can be asked, between two steps of its loop.
pub enum Command {
    /// Change the intervals and region bounds.
    Tune(Overrides, Reply),
    /// Add the schemes of a schemes file's text (its rates and ages converted with the
    /// target's intervals in force).
    AddSchemes(String, Reply),
    /// Remove the scheme at this index.
    RemoveScheme(usize, Reply),
    /// The last window observed (at most a publication old), as `report access` shows its
    /// regions (JSON when asked).
    Snapshot { json: bool, reply: Reply },
    /// The last window observed and the record's header, a [`super::control::Window`] as
    /// JSON.
    Window(Reply),
    /// Intervals, region bounds, schemes and windows so far, one line.
    Status(Reply),
}

/// The callbacks of a served target's steps.
struct TargetHooks {
    labels: Labels,
    events: EventSource,
    readings: EventReadings,
    rotation: Option<Rotation>,
    start_us: u64,
    windows: u64,
    /// Which windows are observed.
    schedule: ObservationSchedule,
    /// The last window observed, for [`Command::Snapshot`] and [`Command::Window`].
    last: Option<Snapshot>,
    /// The last window observed, as the metrics show it.
    observation: Option<Observation>,
    header: udamon_record::model::Header,
    live: bool,
    /// Its process executed a program since this was last taken.
    executed: bool,
}

impl TargetHooks {
    fn drain_events(&mut self) -> Result<(), udamon_record::RecordError> {
        for (t_us, kind) in (self.events)() {
            match &kind {
                EventKind::SourceStats { counters } => self.readings.counters.clone_from(counters),
                EventKind::Exec { .. } => self.executed = true,
                EventKind::Resident { mappings, .. } => {
                    self.readings.resident_bytes =
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
                    .map(|()| format!("{}: {}", self.labels, describe(ctx)))
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
                            crate::monitor::check_live(&schemes)?;
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
            Command::Window(reply) => {
                let _ = reply.send(self.window());
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

    /// The last window observed, or why there is none yet.
    fn last(&self) -> Result<Snapshot, String> {
        self.last.clone().ok_or_else(|| {
            format!(
                "{}: no window completed yet: ask again after one aggregation interval",
                self.labels
            )
        })
    }

    fn window(&self) -> Result<String, String> {
        let window = super::control::Window {
            header: self.header.clone(),
            snapshot: self.last()?,
        };
        serde_json::to_string(&window).map_err(|e| e.to_string())
    }

    fn snapshot(&self, json: bool) -> Result<String, String> {
        let frame = Frame::Snapshot(self.last()?);
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

impl TargetHooks {
    /// The window just completed (or passed idle), as the metrics show it.
    fn observe(&mut self, ctx: &Context) -> Option<Vec<u64>> {
        let (observation, touched) = udamon_exporter::observe_touched(ctx, 0);
        self.observation = Some(
            observation
                .with_source_counters(self.readings.counters.clone())
                .with_resident_bytes(self.readings.resident_bytes),
        );
        touched
    }
}

impl Callbacks for TargetHooks {
    fn after_sampling(&mut self, _ctx: &Context) -> Flow {
        self.drain_events()?;
        Ok(ControlFlow::Continue(()))
    }

    fn after_wait(&mut self, _ctx: &Context) -> Flow {
        self.drain_events()?;
        Ok(ControlFlow::Continue(()))
    }

    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        // The window's own events (its residency walk's resident bytes) go with it.
        self.drain_events()?;
        self.windows += 1;
        if self.schedule.due(ctx.now_us()) {
            let touched = self.observe(ctx);
            self.last = Some(snapshot_with_touched(ctx, self.start_us, touched));
        }
        match &mut self.rotation {
            Some(rotation) => rotation.after_aggregation(ctx),
            None => Ok(ControlFlow::Continue(())),
        }
    }
}

/// A served target, started: stepped by the loop until it ends or is stopped.
pub struct ServedTarget {
    pub labels: Labels,
    ctx: Context,
    ops: Box<dyn RecordedOps>,
    hooks: TargetHooks,
    pub pace: Pace,
    /// Not stepped until something comes for it (see the module documentation).
    asleep: bool,
    /// Every record delivered to it so far was stamped before this time (µs): the time it
    /// was last heard of.
    heard_to_us: u64,
    /// While it sleeps: no record delivered since it fell asleep was stamped before this time.
    woken_at_us: Option<u64>,
    /// Why it is gone when its operations find nothing left to monitor.
    gone: Box<dyn Fn() -> String + Send>,
}

impl ServedTarget {
    /// Builds the target's monitoring with `start` and starts its context.
    pub fn start(
        labels: Labels,
        start: TargetStarter,
        settings: Settings,
        records: Option<Arc<RecordPolicy>>,
        hub: &mut Hub,
    ) -> Result<ServedTarget, String> {
        let TargetSetup {
            ops,
            target,
            info,
            source,
            start_us,
            metrics,
            pace,
            gone,
        } = start(hub)?;
        let (ctx, header) =
            crate::monitor::context_for(&settings, start_us, metrics, source, vec![(target, info)])
                .map_err(|e| e.to_string())?;
        let rotation = match records {
            Some(policy) => Some(Rotation::open(policy, &labels, header.clone(), start_us)?),
            None => None,
        };
        let hooks = TargetHooks {
            labels: labels.clone(),
            events: ops.record_events(),
            readings: EventReadings::default(),
            rotation,
            start_us,
            windows: 0,
            schedule: ObservationSchedule::default(),
            last: None,
            observation: None,
            header,
            live: matches!(pace, Pace::Live { .. }),
            executed: false,
        };
        let mut running = ServedTarget {
            labels,
            ctx,
            ops,
            hooks,
            pace,
            asleep: false,
            heard_to_us: start_us,
            woken_at_us: None,
            gone,
        };
        running
            .ctx
            .start(running.ops.as_mut())
            .map_err(|e| format!("monitoring failed: {e}"))?;
        log::info(&format!(
            "{}: monitoring started; {}",
            running.labels,
            describe(&running.ctx)
        ));
        Ok(running)
    }

    /// Where the next sampling interval ends, on its time line.
    fn next_end_us(&self) -> u64 {
        self.ctx.now_us() + self.ctx.attrs().sample_interval_us
    }

    /// Where the current aggregation window ends.
    fn window_end_us(&self) -> u64 {
        self.ctx.window_us().0 + self.ctx.attrs().aggr_interval_us
    }

    /// Records stamped from `from_us` (the last drain's end) to before `to_us` were delivered
    /// to it.
    pub fn heard(&mut self, from_us: u64, to_us: u64) {
        self.heard_to_us = self.heard_to_us.max(to_us);
        if self.asleep && self.woken_at_us.is_none() {
            self.woken_at_us = Some(from_us);
        }
    }

    /// Steps it through every sampling interval that ended by `due_us` (its time line), or as
    /// many as `max_steps` allows; a quiet live target stops at a window's end and sleeps.
    /// Returns why it ended, if it did.
    pub fn advance(&mut self, due_us: u64, max_steps: usize) -> Option<EndReason> {
        if self.asleep {
            let woken = self.woken_at_us.take()?;
            // Woken: the whole windows that passed before its records are passed at once.
            let windows = woken.min(due_us).saturating_sub(self.ctx.now_us())
                / self.ctx.attrs().aggr_interval_us.max(1);
            self.pass_idle(windows);
            self.asleep = false;
        }
        // Nothing came since the window starting then began.
        let quiet_from = |r: &Self, window_start_us: u64| {
            matches!(r.pace, Pace::Live { .. })
                && r.ctx.schemes().is_empty()
                && window_start_us >= r.heard_to_us
        };
        let quiet = |r: &Self| quiet_from(r, r.ctx.window_us().0);
        // Nothing came since its window began: the window is stepped only once it is over.
        if quiet(self) && self.window_end_us() > due_us {
            return None;
        }
        for _ in 0..max_steps {
            if self.next_end_us() > due_us {
                break;
            }
            // The window it falls asleep after is what its metrics show while it sleeps.
            self.hooks.schedule.force_next = quiet_from(self, self.window_end_us());
            let windows = self.hooks.windows;
            match self
                .ctx
                .step(self.ops.as_mut(), &mut VirtualClock, &mut self.hooks)
            {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(reason)) => {
                    return Some(EndReason::of(Ok(reason), &self.gone));
                }
                Err(e) => return Some(EndReason::of(Err(&e), &self.gone)),
            }
            if self.hooks.windows != windows && quiet(self) {
                self.asleep = true;
                break;
            }
        }
        None
    }

    /// Passes the whole windows that ended by `due_us` while it sleeps, so that its metrics
    /// and record are as of now.
    pub fn catch_up(&mut self, due_us: u64) {
        // Not past records waiting for it.
        let due_us = self.woken_at_us.map_or(due_us, |w| w.min(due_us));
        if self.asleep && self.window_end_us() <= due_us {
            let windows = (due_us - self.ctx.now_us()) / self.ctx.attrs().aggr_interval_us.max(1);
            self.pass_idle(windows);
        }
    }

    /// Passes `n` idle windows: at once, or one by one when each is recorded.
    fn pass_idle(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        if self.hooks.rotation.is_some() {
            for i in 0..n {
                // The last window passed is what its metrics show now.
                self.hooks.schedule.force_next = i + 1 == n;
                match self.ctx.pass_idle_window(&mut self.hooks) {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => {
                        log::warn(&format!(
                            "{}: {}; its record ends here",
                            self.labels,
                            EndReason::of(Err(&e), &self.gone).why
                        ));
                        self.hooks.rotation = None;
                    }
                }
            }
        } else if self.ctx.pass_idle_windows(n) {
            self.hooks.windows += n;
            let last = self.hooks.observation.take();
            let idle = udamon_exporter::observe_idle(&self.ctx, 0, last.as_ref());
            self.hooks.observation = Some(
                idle.with_source_counters(self.hooks.readings.counters.clone())
                    .with_resident_bytes(self.hooks.readings.resident_bytes),
            );
        }
    }

    /// Whether its process executed a program since the last call (it may have gained
    /// privileges: whoever asked for it may not be allowed it any more).
    pub fn take_executed(&mut self) -> bool {
        std::mem::take(&mut self.hooks.executed)
    }

    /// Whether it sleeps now.
    pub fn is_asleep(&self) -> bool {
        self.asleep
    }

    /// Its time line's now: the end of its last step (or of the idle windows passed).
    pub fn now_us(&self) -> u64 {
        self.ctx.now_us()
    }

    /// Its last window, as the metrics show it.
    pub fn observation(&self) -> Option<&Observation> {
        self.hooks.observation.as_ref()
    }

    /// Answers a command now, waking it first: what it answers is as of now.
    pub fn answer(&mut self, command: Command, due_us: u64) {
        self.catch_up(due_us);
        self.hooks.answer(&mut self.ctx, command);
    }

    /// Ends its monitoring: its operations' last events, its record finished with why; one
    /// line in the log says why, a warning when it failed or its record is incomplete.
    pub fn finish(mut self, ended: &EndReason) {
        let (why, failed) = (ended.why.as_str(), ended.failed);
        let _ = self.ctx.terminate(self.ops.as_mut(), &mut self.hooks);
        // The operations' last events, then why it ended; best effort, as `record` does.
        let _ = self.hooks.drain_events();
        let mut warning = failed.then(|| why.to_string());
        if let Some(rotation) = self.hooks.rotation.take()
            && let Err(e) = rotation.finish(self.ctx.now_us(), why)
        {
            warning = Some(format!("its record is incomplete: {e}"));
        }
        match warning {
            None => log::info(&format!("{}: monitoring ended: {why}", self.labels)),
            Some(w) => log::warn(&format!("{}: {w}", self.labels)),
        }
    }
}

/// Why a target's monitoring ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndReason {
    pub why: String,
    /// Monitoring failed (its record may be incomplete), rather than ending as it should.
    pub failed: bool,
}

impl EndReason {
    /// How a step's stop reads; `gone` words the end of its process.
    fn of(result: Result<StopReason, &RunError>, gone: &dyn Fn() -> String) -> EndReason {
        EndReason {
            failed: result.is_err(),
            why: crate::monitor::stop_reason(result, |reason| match reason {
                StopReason::NoValidTarget => gone(),
                StopReason::Requested => "stopped on request".to_string(),
            }),
        }
    }

    pub fn normally(why: &str) -> EndReason {
        EndReason {
            why: why.to_string(),
            failed: false,
        }
    }
}
