//! The service's one monitoring loop: every served target on one thread, whatever their number.
//!
//! The loop owns the [`Hub`] (the shared samplers: one per CPU for every process when serve
//! may, see [`SharedSampling`]; the walking budget and the symbolizer every target shares) and
//! every [`ServedTarget`]. Every [`TICK`] it drains the samplers, tells each process what came
//! for it, and steps the targets as far as the samples were drained; a target nothing came for
//! sleeps and costs nothing (see [`super::target`]). Every [`PUBLISH`] it hands every target's
//! last window to the [`Sink`] (the metrics), passing sleepers' idle windows first when they
//! are [`SLEEPER_REFRESH_US`] behind.
//!
//! It takes its orders from the serving loop ([`Order`]): start, stop, a command for a target,
//! stop everything. A command is answered when it comes, not at the next tick. Targets that
//! end are reported back, so that the serving loop's list follows.

use super::records::RecordPolicy;
use super::supervisor::Key;
use super::target::{Command, EndReason, Labels, Pace, ServedTarget, TargetStarter};
use crate::monitor::Settings;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};
use udamon_core::{Callbacks, Context, Flow, VirtualClock};
use udamon_exporter::Observation;
use udamon_linux::paddr::{self, PaddrOps};
use udamon_linux::perf::SamplerConfig;
use udamon_linux::symbolize::Symbolizer;
use udamon_linux::vaddr::{self, SharedSampling, Tapped, VaddrOps, WalkBudget, monotonic_us};

/// How often the samplers are drained and the targets stepped. Windows are published within
/// this of their end (the service's per-target clocks used to wake every half window).
pub const TICK: Duration = Duration::from_millis(200);

/// How often every target's last window goes to the metrics.
pub const PUBLISH: Duration = Duration::from_secs(1);

/// Which of a target's windows are observed for the metrics ([`udamon_exporter::observe`]):
/// one per [`PUBLISH`] is all they show, and an observation passes over a busy target's page
/// samples a few times per horizon, where its windows are 100 ms (400 ms for sampled sources).
#[derive(Debug, Default)]
pub struct ObservationSchedule {
    /// The end of the last window observed, on the target's time line.
    last_us: Option<u64>,
    /// The next window is observed, whenever it ends.
    pub force_next: bool,
}

impl ObservationSchedule {
    /// Whether the window ending at `end_us` is to be observed; if so, it is taken as observed.
    pub fn due(&mut self, end_us: u64) -> bool {
        let every_us = PUBLISH.as_micros() as u64;
        let due = std::mem::take(&mut self.force_next)
            || self.last_us.is_none_or(|last| end_us >= last + every_us);
        if due {
            self.last_us = Some(end_us);
        }
        due
    }
}

/// A sleeping target's metrics are brought up to date when they are this far behind (µs):
/// its idle time grows and its working set over a horizon shrinks as it sleeps.
pub const SLEEPER_REFRESH_US: u64 = 10_000_000;

/// Page-table walking time per second for every process together (residency checks and
/// footprints; see [`WalkBudget`]): 0.2 % of a core, what four processes' own budgets used to
/// allow at most.
pub const WALK_RATE: Duration = Duration::from_millis(2);

/// Sampling intervals a simulation in virtual time gets per turn, so that it shares the loop.
const FAST_SLICE: usize = 2_000;

/// What the serving loop asks of the monitoring loop.
pub enum Order {
    Start {
        key: Key,
        /// Which start of the key this is, for [`News::Ended`].
        generation: u64,
        labels: Labels,
        start: TargetStarter,
        settings: Settings,
    },
    /// Stop a target, for this reason.
    Stop(Key, String),
    Ask(Key, Command),
    /// Stop every target for this reason, completing its record, and end.
    StopAll(String),
}

/// What the monitoring loop tells the serving loop.
pub enum News {
    /// The target's monitoring (its `generation`-th start) ended.
    Ended(Key, u64),
    /// The process executed a program.
    Executed(Key),
}

/// Every target's last window, each time the metrics are published.
pub trait Sink: Send {
    /// `targets` are every served target with a window completed; `served` counts them all.
    fn publish(&mut self, targets: &[(&Labels, &Observation)], served: usize);
    /// The physical memory of the processes served, when it is monitored (`serve --host`),
    /// with the samples each horizon's working set rests on.
    fn publish_host(&mut self, host: &Observation, samples: &[u64]);
}

/// The physical memory of the processes served (`serve --host`): one context over the host's
/// RAM, fed a copy of every served process's records, stepped as they are drained.
struct HostView {
    ctx: Context,
    ops: PaddrOps,
    window: LastWindow,
}

/// The host's last window observed, as the metrics show it.
#[derive(Default)]
struct LastWindow {
    observation: Option<Observation>,
    schedule: ObservationSchedule,
}

impl Callbacks for LastWindow {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if self.schedule.due(ctx.now_us()) {
            self.observation = Some(udamon_exporter::observe(ctx, 0));
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl HostView {
    fn start(
        config: &SamplerConfig,
        seed: u64,
        sampling: &mut SharedSampling,
    ) -> Result<Self, String> {
        let mut ops = PaddrOps::new(&config.source).map_err(|e| e.to_string())?;
        let mut ctx =
            Context::new(paddr::host_attrs(&config.source), seed).map_err(|e| e.to_string())?;
        ctx.set_start_time_us(monotonic_us());
        ctx.start(&mut ops).map_err(|e| e.to_string())?;
        sampling.tap(ops.feed(), Tapped::Attached);
        Ok(HostView {
            ctx,
            ops,
            window: LastWindow::default(),
        })
    }

    /// Steps it to `due_us`; its last window, once one completed, with the samples each
    /// horizon's working set rests on.
    fn advance(&mut self, due_us: u64) -> Option<(Observation, Vec<u64>)> {
        while self.ctx.now_us() + self.ctx.attrs().sample_interval_us <= due_us {
            // Physical memory never ends, and no callback of its stops it.
            let _ = self
                .ctx
                .step(&mut self.ops, &mut VirtualClock, &mut self.window);
        }
        let observation = self.window.observation.clone()?;
        let samples = observation.working_set_samples.clone();
        Some((observation, samples))
    }
}

/// Targets that share one symbolizer: a fresh one then starts, and the old one goes with the
/// last of them, so that what a long-running serve keeps of the files it read stays bounded.
const SYMBOLIZER_TARGETS: u32 = 256;

/// What targets are built with on the loop: the shared samplers, walking budget and symbolizer.
pub struct Hub {
    config: SamplerConfig,
    sampling: Option<SharedSampling>,
    walks: WalkBudget,
    /// Names every target's code sites: 20 processes starting at once in libc's code each
    /// read libc's debug file with a symbolizer of their own (serve peaked at 212 MB, their
    /// metrics came 14 s late).
    symbolizer: Rc<Symbolizer>,
    /// Targets attached to `symbolizer`.
    symbolizing: u32,
}

impl Hub {
    fn new(config: SamplerConfig) -> Hub {
        Hub {
            config,
            sampling: None,
            walks: WalkBudget::new(WALK_RATE),
            symbolizer: Rc::default(),
            symbolizing: 0,
        }
    }

    /// The access source every process is sampled with.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The shared samplers, opened on first use: one per CPU for every process if serve may,
    /// else one per process.
    pub fn sampling(&mut self) -> &mut SharedSampling {
        self.sampling
            .get_or_insert_with(|| match SharedSampling::per_cpu(&self.config) {
                Ok(s) => {
                    super::log::info(&format!(
                        "sampling every process with one {} event per CPU",
                        vaddr::source_name(&self.config.source)
                    ));
                    s
                }
                Err(e) => {
                    super::log::info(&format!(
                        "sampling each process with events of its own ({e})"
                    ));
                    SharedSampling::per_process(&self.config)
                }
            })
    }

    /// Starts sampling process `pid`; its operations share the host's walking budget.
    pub fn attach(&mut self, pid: u32) -> Result<VaddrOps, String> {
        let mut ops = self.sampling().attach(pid).map_err(|e| e.to_string())?;
        ops.share_walks(self.walks.clone());
        if self.symbolizing >= SYMBOLIZER_TARGETS {
            self.symbolizer = Rc::default();
            self.symbolizing = 0;
        }
        self.symbolizing += 1;
        ops.share_symbolizer(Rc::clone(&self.symbolizer));
        Ok(ops)
    }

    fn detach(&mut self, pid: u32) {
        if let Some(s) = &mut self.sampling {
            s.detach(pid);
        }
    }
}

struct Engine {
    hub: Hub,
    host: Option<HostView>,
    /// Every target with the generation it was started as.
    targets: BTreeMap<Key, (u64, ServedTarget)>,
    records: Option<Arc<RecordPolicy>>,
    sink: Box<dyn Sink>,
    news: Sender<News>,
    /// Every record stamped before this (CLOCK_MONOTONIC µs) was handed over.
    drained_to_us: u64,
    next_tick: Instant,
    next_publish: Instant,
    /// The host's last window, when its physical memory is monitored, and its samples per
    /// horizon.
    host_window: Option<(Observation, Vec<u64>)>,
}

/// Runs the loop until [`Order::StopAll`] (or the serving loop is gone); with `host` (a seed),
/// the physical memory of the processes served is monitored too.
pub fn run(
    config: SamplerConfig,
    host: Option<u64>,
    sink: Box<dyn Sink>,
    records: Option<Arc<RecordPolicy>>,
    orders: Receiver<Order>,
    news: Sender<News>,
) {
    let now = Instant::now();
    let mut hub = Hub::new(config);
    let host = host.and_then(|seed| {
        HostView::start(&config, seed, hub.sampling())
            .map_err(|e| super::log::error(&format!("the host's physical memory: {e}")))
            .ok()
    });
    let mut engine = Engine {
        hub,
        host,
        targets: BTreeMap::new(),
        records,
        sink,
        news,
        drained_to_us: monotonic_us(),
        next_tick: now,
        next_publish: now + PUBLISH,
        host_window: None,
    };
    loop {
        let fast = engine
            .targets
            .values()
            .any(|(_, r)| matches!(r.pace, Pace::Fast));
        let wait = if fast {
            Duration::ZERO
        } else {
            engine.next_tick.saturating_duration_since(Instant::now())
        };
        match orders.recv_timeout(wait) {
            Ok(Order::StopAll(why)) => {
                engine.stop_all(&why);
                return;
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Ok(msg) => engine.order(msg),
            Err(RecvTimeoutError::Timeout) => {}
        }
        if fast {
            engine.step_fast();
        }
        if Instant::now() >= engine.next_tick {
            engine.tick();
        }
        if Instant::now() >= engine.next_publish {
            engine.publish();
        }
    }
    engine.stop_all("udamon serve stopped");
}

impl Engine {
    fn order(&mut self, order: Order) {
        match order {
            Order::Start {
                key,
                generation,
                labels,
                start,
                settings,
            } => {
                if self.targets.contains_key(&key) {
                    return;
                }
                match ServedTarget::start(
                    labels.clone(),
                    start,
                    settings,
                    self.records.clone(),
                    &mut self.hub,
                ) {
                    Ok(running) => {
                        self.targets.insert(key, (generation, running));
                    }
                    Err(why) => {
                        super::log::warn(&format!("{labels}: {why}"));
                        if let Key::Process { pid, .. } = key {
                            self.hub.detach(pid);
                        }
                        let _ = self.news.send(News::Ended(key, generation));
                    }
                }
            }
            Order::Stop(key, why) => {
                if let Some(running) = self.targets.remove(&key) {
                    let due = self.drained_to_us;
                    self.end(key, running, &EndReason::normally(&why), due);
                }
            }
            Order::Ask(key, command) => {
                // A target gone meanwhile drops the command, and its caller hears so.
                let due = self.drained_to_us;
                if let Some((_, running)) = self.targets.get_mut(&key) {
                    running.answer(command, due);
                }
            }
            Order::StopAll(_) => {}
        }
    }

    fn stop_all(&mut self, why: &str) {
        let due = self.drained_to_us;
        for (key, running) in std::mem::take(&mut self.targets) {
            self.end(key, running, &EndReason::normally(why), due);
        }
    }

    /// Drains the samplers and steps every target that is due.
    fn tick(&mut self) {
        self.next_tick = Instant::now() + TICK;
        let from_us = self.drained_to_us;
        if let Some(sampling) = &mut self.hub.sampling {
            let drained = sampling.drain();
            self.drained_to_us = drained.to_us;
            for (_, (_, running)) in self.targets.iter_mut() {
                if let Pace::Live { pid } = running.pace
                    && drained.heard.binary_search(&pid).is_ok()
                {
                    running.heard(from_us, drained.to_us);
                }
            }
        } else {
            self.drained_to_us = monotonic_us();
        }
        if let Some(host) = &mut self.host
            && let Some(observation) = host.advance(self.drained_to_us)
        {
            self.host_window = Some(observation);
        }
        let mut ended = Vec::new();
        for (key, (_, running)) in self.targets.iter_mut() {
            let due = match running.pace {
                Pace::Live { .. } => self.drained_to_us,
                Pace::RealTime { origin } => origin.elapsed().as_micros() as u64,
                Pace::Fast => continue,
            };
            if let Some(why) = running.advance(due, usize::MAX) {
                ended.push((*key, why));
            }
            if running.take_executed() {
                let _ = self.news.send(News::Executed(*key));
            }
        }
        self.end_all(ended);
    }

    /// Gives every simulation in virtual time a slice of steps.
    fn step_fast(&mut self) {
        let mut ended = Vec::new();
        for (key, (_, running)) in self.targets.iter_mut() {
            if running.pace == Pace::Fast
                && let Some(why) = running.advance(u64::MAX, FAST_SLICE)
            {
                ended.push((*key, why));
            }
        }
        self.end_all(ended);
    }

    fn end_all(&mut self, ended: Vec<(Key, EndReason)>) {
        let due = self.drained_to_us;
        for (key, why) in ended {
            if let Some(running) = self.targets.remove(&key) {
                self.end(key, running, &why, due);
            }
        }
    }

    /// Finishes a target (its record completed) and tells the serving loop.
    fn end(&mut self, key: Key, target: (u64, ServedTarget), why: &EndReason, due_us: u64) {
        let (generation, mut running) = target;
        if let Pace::Live { pid } = running.pace {
            // Its record covers the windows it slept through.
            running.catch_up(due_us);
            self.hub.detach(pid);
        }
        running.finish(why);
        let _ = self.news.send(News::Ended(key, generation));
    }

    /// Every target's last window to the metrics, sleepers brought up to date first.
    fn publish(&mut self) {
        self.next_publish = Instant::now() + PUBLISH;
        let due = self.drained_to_us;
        for (_, running) in self.targets.values_mut() {
            if running.is_asleep() && due.saturating_sub(running.now_us()) >= SLEEPER_REFRESH_US {
                running.catch_up(due);
            }
        }
        let published: Vec<(&Labels, &Observation)> = self
            .targets
            .values()
            .filter_map(|(_, r)| Some((&r.labels, r.observation()?)))
            .collect();
        self.sink.publish(&published, self.targets.len());
        if let Some((host, samples)) = &self.host_window {
            self.sink.publish_host(host, samples);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_window_per_publication_is_observed_and_a_forced_one_whenever_it_ends() {
        const WINDOW_US: u64 = 400_000;
        let mut schedule = ObservationSchedule::default();
        let observed: Vec<u64> = (1..=10)
            .map(|w| w * WINDOW_US)
            .filter(|&end| schedule.due(end))
            .collect();
        // The first window, then the first ending a publication after the last observed.
        assert_eq!(observed, [400_000, 1_600_000, 2_800_000, 4_000_000]);
        schedule.force_next = true;
        assert!(schedule.due(4_400_000), "forced, 0.4 s after the last");
        assert!(!schedule.force_next, "forced once");
        assert!(!schedule.due(4_800_000));
        assert!(schedule.due(5_400_000));
    }
}
