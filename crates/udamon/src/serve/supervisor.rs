//! The served targets: starting one on a thread of its own, telling it what to change,
//! stopping it, and collecting the threads of targets that ended, so that none outlives its
//! target.

use super::records::RecordPolicy;
use super::target::{self, Command, Labels, Reply, Sink, Start, TargetSettings};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    stop: Arc<AtomicBool>,
    commands: Sender<Command>,
    thread: JoinHandle<()>,
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

    /// Starts monitoring a target on its own thread (nothing if it is served already).
    pub fn start(&mut self, key: Key, labels: Labels, start: Start, settings: TargetSettings) {
        if self.running.contains_key(&key) {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (commands, receiver) = mpsc::channel();
        let thread_stop = Arc::clone(&stop);
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
                    },
                );
            }
            Err(e) => super::log::error(&format!("{labels}: cannot start a thread: {e}")),
        }
    }

    /// Asks a target to stop; its thread ends after its current step.
    pub fn stop(&mut self, key: &Key) {
        if let Some(r) = self.running.get(key) {
            r.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Collects the threads of targets that ended; returns their keys.
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

    /// Stops every target and waits for each to finish its record.
    pub fn stop_all(mut self) {
        for r in self.running.values() {
            r.stop.store(true, Ordering::Relaxed);
        }
        for (_, r) in std::mem::take(&mut self.running) {
            let _ = r.thread.join();
        }
    }
}
