//! The served targets: starting one on a thread of its own, telling it what to change,
//! stopping it (with the reason its record ends with), and collecting the threads of targets
//! that ended, so that none outlives its target. A target started again while its previous
//! monitoring is still ending (removed and added back at once) starts as soon as that ends.

use super::records::RecordPolicy;
use super::target::{self, Command, Labels, Reply, Sink, Start, StopRequest, TargetSettings};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;

/// What identifies a served target across its life: a process by pid and start time (a pid
/// reused by another process is another target), a simulated workload by a number of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Process { pid: u32, start_time: u64 },
    Sim(u64),
}

struct Running {
    labels: Labels,
    stop: StopRequest,
    commands: Sender<Command>,
    thread: JoinHandle<()>,
    /// Started again while this one was ending: what to start once it ended.
    then: Option<(Labels, Start, TargetSettings)>,
}

/// What [`Supervisor::start`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    Now,
    /// Once its previous monitoring, which is ending, has ended.
    Next,
    /// It was served already.
    Already,
}

pub struct Supervisor {
    running: BTreeMap<Key, Running>,
    sink: Arc<dyn Sink>,
    records: Option<Arc<RecordPolicy>>,
}

impl Supervisor {
    pub fn new(sink: Arc<dyn Sink>, records: Option<Arc<RecordPolicy>>) -> Self {
        Supervisor {
            running: BTreeMap::new(),
            sink,
            records,
        }
    }

    /// Starts monitoring a target on its own thread: now, or once its previous monitoring
    /// ended if that is ending, or not at all if it is served already.
    pub fn start(
        &mut self,
        key: Key,
        labels: Labels,
        start: Start,
        settings: TargetSettings,
    ) -> Started {
        if let Some(running) = self.running.get_mut(&key) {
            if !running.stop.requested() {
                return Started::Already;
            }
            running.then = Some((labels, start, settings));
            return Started::Next;
        }
        self.spawn(key, labels, start, settings);
        Started::Now
    }

    fn spawn(&mut self, key: Key, labels: Labels, start: Start, settings: TargetSettings) {
        let stop = StopRequest::default();
        let (commands, receiver) = mpsc::channel();
        let thread_stop = stop.clone();
        let sink = Arc::clone(&self.sink);
        let records = self.records.clone();
        let thread_labels = labels.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("udamon {}", labels.comm))
            .spawn(move || {
                target::serve_target(
                    thread_labels,
                    start,
                    settings,
                    sink,
                    records,
                    receiver,
                    thread_stop,
                )
            });
        match spawned {
            Ok(thread) => {
                self.running.insert(
                    key,
                    Running {
                        labels,
                        stop,
                        commands,
                        thread,
                        then: None,
                    },
                );
            }
            Err(e) => super::log::error(&format!("{labels}: cannot start a thread: {e}")),
        }
    }

    /// Asks a target to stop because of `why`; its thread ends after its current step. A
    /// start waiting for it to end is called off.
    pub fn stop(&mut self, key: &Key, why: &str) {
        if let Some(r) = self.running.get_mut(key) {
            r.stop.request(why);
            r.then = None;
        }
    }

    /// Collects the threads of targets that ended, starting those started again meanwhile;
    /// returns the keys of those that ended.
    pub fn reap(&mut self) -> Vec<Key> {
        let ended: Vec<Key> = self
            .running
            .iter()
            .filter(|(_, r)| r.thread.is_finished())
            .map(|(k, _)| *k)
            .collect();
        for key in &ended {
            if let Some(r) = self.running.remove(key) {
                let _ = r.thread.join();
                if let Some((labels, start, settings)) = r.then {
                    self.spawn(*key, labels, start, settings);
                }
            }
        }
        ended
    }

    /// The served targets, in key order.
    pub fn targets(&self) -> impl Iterator<Item = (&Key, &Labels)> {
        self.running.iter().map(|(k, r)| (k, &r.labels))
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Sends `make(reply)` to target `key`; the reply comes on the receiver returned, or the
    /// error says the target is not served.
    pub fn ask(
        &self,
        key: &Key,
        make: impl FnOnce(Reply) -> Command,
    ) -> Result<mpsc::Receiver<Result<String, String>>, String> {
        let running = self
            .running
            .get(key)
            .ok_or_else(|| "no such target: `udamon ctl targets` lists them".to_string())?;
        let (reply, receiver) = mpsc::channel();
        running
            .commands
            .send(make(reply))
            .map_err(|_| format!("{}: it is ending", running.labels))?;
        Ok(receiver)
    }

    /// Stops every target because of `why` and waits for each to finish its record.
    pub fn stop_all(mut self, why: &str) {
        for r in self.running.values() {
            r.stop.request(why);
        }
        for (_, r) in std::mem::take(&mut self.running) {
            let _ = r.thread.join();
        }
    }
}
