//! The samplers' ring buffers, drained in batches: records, sorted by time, and the processes
//! found to have ended go into a [`Feed`] that the operations read at their next access check.
//! When to drain is the clock's business ([`super::clock`]).

use crate::perf::{PerfRecord, PollOutcome, Sampler};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// What the rings hand to the operations.
pub(crate) enum FeedMsg {
    /// Records drained in one batch, sorted by time.
    Records(Vec<PerfRecord>),
    /// Every thread of process `pid` has exited (noticed at `at_us`); `status` is the exit code
    /// of a spawned child that exited normally, sent once when it is reaped.
    Gone {
        pid: u32,
        status: Option<i32>,
        at_us: u64,
    },
}

/// The queue from the rings to the operations: the clock fills it while the core waits, the
/// operations empty it when they check accesses, both on the monitoring thread.
#[derive(Clone, Default)]
pub struct Feed(Rc<RefCell<VecDeque<FeedMsg>>>);

impl Feed {
    pub(crate) fn send(&self, msg: FeedMsg) {
        self.0.borrow_mut().push_back(msg);
    }

    /// The oldest message not read yet.
    pub(crate) fn next(&self) -> Option<FeedMsg> {
        self.0.borrow_mut().pop_front()
    }
}

/// Every sampler of a monitoring run, and which of them have ended.
pub(crate) struct Rings {
    samplers: Vec<Sampler>,
    gone: Vec<bool>,
    feed: Feed,
}

impl Rings {
    pub(crate) fn new(samplers: Vec<Sampler>, feed: Feed) -> Self {
        Rings {
            gone: vec![false; samplers.len()],
            samplers,
            feed,
        }
    }

    pub(crate) fn all_gone(&self) -> bool {
        self.gone.iter().all(|&g| g)
    }

    /// The spawned child that is still running (not reaped), if any.
    pub(crate) fn running_child(&self) -> Option<u32> {
        self.samplers.iter().find_map(Sampler::child)
    }

    /// Polls (the first live sampler with `timeout`, the others without waiting), drains every
    /// ring into the feed and reports the processes that ended. Returns the time the drain
    /// started (CLOCK_MONOTONIC µs).
    pub(crate) fn poll_and_drain(&mut self, timeout: Duration) -> u64 {
        let mut outcomes = Vec::with_capacity(self.samplers.len());
        let mut t = timeout;
        for (i, s) in self.samplers.iter_mut().enumerate() {
            outcomes.push(if self.gone[i] {
                PollOutcome::TargetGone
            } else {
                // A failing poll is treated like a target that ended: nothing more to read.
                let o = s.poll(t).unwrap_or(PollOutcome::TargetGone);
                t = Duration::ZERO;
                o
            });
        }
        let now = super::monotonic_us();
        let mut records = Vec::new();
        for (i, s) in self.samplers.iter_mut().enumerate() {
            if self.gone[i] {
                continue;
            }
            // A spawned child is reaped as soon as it exits, for its exit status: following
            // forks, its events hang up only once every descendant has exited too.
            if let Ok(Some(exit)) = s.try_wait_child() {
                self.feed.send(FeedMsg::Gone {
                    pid: s.pid(),
                    status: exit.status.code(),
                    at_us: now,
                });
            }
            s.drain_sorted(&mut records);
            if outcomes[i] == PollOutcome::TargetGone {
                self.gone[i] = true;
                let status = match s.wait_child() {
                    Ok(Some(exit)) => exit.status.code(),
                    _ => None,
                };
                records.sort_by_key(PerfRecord::time_ns);
                self.feed
                    .send(FeedMsg::Records(std::mem::take(&mut records)));
                self.feed.send(FeedMsg::Gone {
                    pid: s.pid(),
                    status,
                    at_us: now,
                });
            }
        }
        if !records.is_empty() {
            records.sort_by_key(PerfRecord::time_ns);
            self.feed.send(FeedMsg::Records(records));
        }
        now
    }
}
