//! The sample-driven clock: how live monitoring waits for time to pass.
//!
//! The core steps one sampling interval at a time and asks its [`Clock`] to wait until the
//! interval's end. Waking up for every interval would cost the monitor CPU in proportion to the
//! sampling rate, so this clock sleeps in batches instead: when the core asks for a time that has
//! not come yet, it sleeps until then or until [`BATCH`] after its last wake-up, whichever is
//! later, and drains the ring buffers. Every interval whose end is already past returns at once,
//! and [`VaddrOps`](super::VaddrOps) replays it from the sample timestamps. So the monitor wakes
//! at most every 50 ms (plus when a ring fills to its watermark), whatever the sampling
//! interval or the number of regions.
//!
//! Samples are stamped with CLOCK_MONOTONIC (perf's `use_clockid`), which is also the context's
//! time line. Draining itself is [`Rings`]' work, or [`SharedSampling`]'s for samplers shared
//! with other monitoring (the host's physical view).

use super::rings::Rings;
use super::shared::SharedSampling;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use udamon_core::Clock;

/// The longest the monitor sleeps, and the least time between two batches, by default.
pub const BATCH: Duration = Duration::from_millis(50);

/// A record stamped this long before a drain started is sure to be in the ring by then (the
/// kernel writes a sample within microseconds of taking it).
const PUBLISH_SLACK_US: u64 = 1_000;

/// CLOCK_MONOTONIC now, in microseconds: the live context's time line.
pub fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the kernel to fill; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// What the clock drains at each wake-up.
pub(crate) trait Drain {
    /// Waits up to `timeout` for records, then hands every record over; returns the time up to
    /// which every record is handed over (CLOCK_MONOTONIC µs).
    fn wait_and_drain(&mut self, timeout: Duration) -> u64;
    /// No record will come any more.
    fn all_gone(&self) -> bool;
    /// The spawned child still running, if any.
    fn running_child(&self) -> Option<u32>;
}

impl Drain for Rings {
    fn wait_and_drain(&mut self, timeout: Duration) -> u64 {
        // Everything stamped before the drain started (less the slack) was in the rings by
        // then.
        self.poll_and_drain(timeout)
            .saturating_sub(PUBLISH_SLACK_US)
    }

    fn all_gone(&self) -> bool {
        Rings::all_gone(self)
    }

    fn running_child(&self) -> Option<u32> {
        Rings::running_child(self)
    }
}

/// Shared samplers have no descriptor to wait on that says a process ended: they sleep out the
/// timeout, and sample until told to stop.
impl Drain for SharedSampling {
    fn wait_and_drain(&mut self, timeout: Duration) -> u64 {
        std::thread::sleep(timeout);
        self.drain().to_us
    }

    fn all_gone(&self) -> bool {
        false
    }

    fn running_child(&self) -> Option<u32> {
        None
    }
}

/// The [`Clock`] of live monitoring: sleeps in batches, draining the rings at each wake-up.
pub struct SampleClock {
    rings: Box<dyn Drain>,
    stop: Arc<AtomicBool>,
    /// Every record stamped before this time has been drained.
    drained_to_us: u64,
    last_wake_us: u64,
    wakeups: u64,
    /// The least time between two batches ([`BATCH`] unless set).
    batch: Batch,
}

/// The least time between a [`SampleClock`]'s wake-ups, settable while the clock runs (by a
/// control request between two of its waits, say).
#[derive(Debug, Clone)]
pub struct Batch(Arc<AtomicU64>);

impl Batch {
    /// Has the clock sleep at least `batch` between two wake-ups instead of [`BATCH`]: fewer
    /// wake-ups for a monitor of many processes, at the cost of windows reported that much
    /// later (a ring that fills to its watermark still wakes it). Takes effect at its next
    /// wait.
    pub fn set(&self, batch: Duration) {
        self.0
            .store(batch.as_micros().max(1) as u64, Ordering::Relaxed);
    }

    fn us(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl SampleClock {
    pub(crate) fn new(rings: Rings) -> Self {
        SampleClock::draining(Box::new(rings))
    }

    /// The clock of operations fed by `sampling` (say, through a
    /// [`tap`](SharedSampling::tap)): it drains them at each wake-up.
    pub fn shared(sampling: SharedSampling) -> Self {
        SampleClock::draining(Box::new(sampling))
    }

    fn draining(rings: Box<dyn Drain>) -> Self {
        SampleClock {
            rings,
            stop: Arc::new(AtomicBool::new(false)),
            drained_to_us: 0,
            last_wake_us: 0,
            wakeups: 0,
            batch: Batch(Arc::new(AtomicU64::new(BATCH.as_micros() as u64))),
        }
    }

    /// The least time between two wake-ups, to change now or later.
    pub fn batch(&self) -> Batch {
        self.batch.clone()
    }

    /// Set this flag (e.g. from a signal handler) to stop waiting: every wait returns at once,
    /// so the loop reaches its next callback quickly.
    pub fn set_stop_flag(&mut self, stop: Arc<AtomicBool>) {
        self.stop = stop;
    }

    /// The spawned child that is still running (not reaped), if any: monitoring stopped before
    /// it exited.
    pub fn running_child(&self) -> Option<u32> {
        self.rings.running_child()
    }

    /// Times the clock woke up to drain the rings.
    pub fn wakeups(&self) -> u64 {
        self.wakeups
    }

    fn drain(&mut self, timeout: Duration) {
        self.drained_to_us = self.rings.wait_and_drain(timeout);
        self.wakeups += 1;
        self.last_wake_us = self.drained_to_us + PUBLISH_SLACK_US;
    }
}

impl Clock for SampleClock {
    fn wait_until(&mut self, t_us: u64) {
        loop {
            if self.drained_to_us >= t_us {
                return;
            }
            if self.stop.load(Ordering::Relaxed) || self.rings.all_gone() {
                // Hand over what is left without waiting; the loop is about to stop.
                if !self.rings.all_gone() {
                    self.drain(Duration::ZERO);
                }
                return;
            }
            let now = monotonic_us();
            let batch_us = self.batch.us();
            let wake = (t_us + PUBLISH_SLACK_US).max(self.last_wake_us + batch_us);
            let timeout = Duration::from_micros(wake.saturating_sub(now).min(batch_us));
            self.drain(timeout);
        }
    }
}
