//! The served targets as the serving loop sees them: which are served, under which labels, and
//! the orders that start, stop, ask and end them, carried out by the monitoring loop
//! ([`super::engine`]) on its one thread.

use super::engine::{self, Msg, Sink};
use super::records::RecordPolicy;
use super::target::{Command, Labels, Reply, Start, TargetSettings};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use udamon_linux::perf::SamplerConfig;

/// What identifies a served target across its life: a process by pid and start time (a pid
/// reused by another process is another target), a simulated workload by a number of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Process { pid: u32, start_time: u64 },
    Sim(u64),
}

pub struct Supervisor {
    /// The targets served, from their start until the monitoring loop says they ended.
    running: BTreeMap<Key, Labels>,
    orders: Sender<Msg>,
    ended: Receiver<Key>,
    engine: Option<JoinHandle<()>>,
}

impl Supervisor {
    /// Starts the monitoring loop: processes sampled with `config`, windows published to
    /// `sink`, records kept by `records`; with `host` (a seed), their physical memory too.
    pub fn new(
        config: SamplerConfig,
        host: Option<u64>,
        sink: Box<dyn Sink>,
        records: Option<Arc<RecordPolicy>>,
    ) -> std::io::Result<Self> {
        let (orders, taken) = mpsc::channel();
        let (tell_ended, ended) = mpsc::channel();
        let engine = std::thread::Builder::new()
            .name("udamon monitor".into())
            .spawn(move || engine::run(config, host, sink, records, taken, tell_ended))?;
        Ok(Supervisor {
            running: BTreeMap::new(),
            orders,
            ended,
            engine: Some(engine),
        })
    }

    /// Starts monitoring a target (nothing if it is served already).
    pub fn start(&mut self, key: Key, labels: Labels, start: Start, settings: TargetSettings) {
        if self.running.contains_key(&key) {
            return;
        }
        self.running.insert(key, labels.clone());
        let _ = self.orders.send(Msg::Start {
            key,
            labels,
            start,
            settings,
        });
    }

    /// Stops a target; its record is completed.
    pub fn stop(&mut self, key: &Key) {
        if self.running.contains_key(key) {
            let _ = self.orders.send(Msg::Stop(*key));
        }
    }

    /// Forgets the targets that ended; returns their keys.
    pub fn reap(&mut self) -> Vec<Key> {
        let ended: Vec<Key> = self.ended.try_iter().collect();
        for key in &ended {
            self.running.remove(key);
        }
        ended
    }

    /// The served targets, in key order.
    pub fn targets(&self) -> impl Iterator<Item = (&Key, &Labels)> {
        self.running.iter()
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Sends `make(reply)` to target `key`; the reply comes on the receiver returned (which
    /// hangs up if the target ends first), or the error says the target is not served.
    pub fn ask(
        &self,
        key: &Key,
        make: impl FnOnce(Reply) -> Command,
    ) -> Result<mpsc::Receiver<Result<String, String>>, String> {
        let labels = self
            .running
            .get(key)
            .ok_or_else(|| "no such target: `udamon ctl targets` lists them".to_string())?;
        let (reply, receiver) = mpsc::channel();
        self.orders
            .send(Msg::Ask(*key, make(reply)))
            .map_err(|_| format!("{labels}: it is ending"))?;
        Ok(receiver)
    }

    /// Stops every target and waits for each to finish its record.
    pub fn stop_all(mut self) {
        let _ = self.orders.send(Msg::StopAll);
        if let Some(engine) = self.engine.take() {
            let _ = engine.join();
        }
    }
}
