//! The served targets as the serving loop sees them: which are served, under which labels, and
//! the orders that start, stop (with the reason its record ends with), ask and end them,
//! carried out by the monitoring loop ([`super::engine`]) on its one thread. A target started
//! again while its previous monitoring is still ending (removed and added back at once)
//! starts as soon as that ends.

use super::engine::{self, News, Order, Sink};
use super::records::RecordPolicy;
use super::target::{Command, Labels, Reply, TargetStarter};
use crate::monitor::Settings;
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

/// What [`Supervisor::start`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOutcome {
    Now,
    /// Once its previous monitoring, which is ending, has ended.
    Next,
    /// It was served already.
    Already,
}

/// A target from its start until the monitoring loop says it ended.
struct Entry {
    labels: Labels,
    /// Which start of the key this is: the loop's end of an earlier one does not end it.
    generation: u64,
    stopping: bool,
}

/// What the monitoring loop said since the last [`Supervisor::reap`].
#[derive(Debug, Default)]
pub struct Reaped {
    /// Targets that ended.
    pub ended: Vec<Key>,
    /// Processes that executed a program.
    pub executed: Vec<Key>,
}

pub struct Supervisor {
    running: BTreeMap<Key, Entry>,
    generations: u64,
    orders: Sender<Order>,
    news: Receiver<News>,
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
        let (tell, news) = mpsc::channel();
        let engine = std::thread::Builder::new()
            .name("udamon monitor".into())
            .spawn(move || engine::run(config, host, sink, records, taken, tell))?;
        Ok(Supervisor {
            running: BTreeMap::new(),
            generations: 0,
            orders,
            news,
            engine: Some(engine),
        })
    }

    /// Starts monitoring a target: now, or once its previous monitoring ended if that is
    /// ending, or not at all if it is served already.
    pub fn start(
        &mut self,
        key: Key,
        labels: Labels,
        start: TargetStarter,
        settings: Settings,
    ) -> StartOutcome {
        let started = match self.running.get(&key) {
            Some(entry) if !entry.stopping => return StartOutcome::Already,
            // The loop ends the earlier one before it takes this order.
            Some(_) => StartOutcome::Next,
            None => StartOutcome::Now,
        };
        self.generations += 1;
        let generation = self.generations;
        self.running.insert(
            key,
            Entry {
                labels: labels.clone(),
                generation,
                stopping: false,
            },
        );
        let _ = self.orders.send(Order::Start {
            key,
            generation,
            labels,
            start,
            settings,
        });
        started
    }

    /// Stops a target because of `why`; its record is completed and ends with it.
    pub fn stop(&mut self, key: &Key, why: &str) {
        if let Some(entry) = self.running.get_mut(key)
            && !entry.stopping
        {
            entry.stopping = true;
            let _ = self.orders.send(Order::Stop(*key, why.to_string()));
        }
    }

    /// Forgets the targets that ended; says which, and which processes executed a program.
    pub fn reap(&mut self) -> Reaped {
        let mut reaped = Reaped::default();
        for news in self.news.try_iter() {
            match news {
                News::Ended(key, generation) => {
                    if self
                        .running
                        .get(&key)
                        .is_some_and(|e| e.generation == generation)
                    {
                        self.running.remove(&key);
                    }
                    reaped.ended.push(key);
                }
                News::Executed(key) => reaped.executed.push(key),
            }
        }
        reaped
    }

    /// The served targets, in key order.
    pub fn targets(&self) -> impl Iterator<Item = (&Key, &Labels)> {
        self.running.iter().map(|(k, e)| (k, &e.labels))
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
        let entry = self
            .running
            .get(key)
            .ok_or_else(|| "no such target: `udamon ctl targets` lists them".to_string())?;
        let (reply, receiver) = mpsc::channel();
        self.orders
            .send(Order::Ask(*key, make(reply)))
            .map_err(|_| format!("{}: it is ending", entry.labels))?;
        Ok(receiver)
    }

    /// Stops every target because of `why` and waits for each to finish its record.
    pub fn stop_all(mut self, why: &str) {
        let _ = self.orders.send(Order::StopAll(why.to_string()));
        if let Some(engine) = self.engine.take() {
            let _ = engine.join();
        }
    }
}
