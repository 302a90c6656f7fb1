//! Recording a monitoring run: a [`Recorder`] hangs off the core's loop as a callback and writes
//! one snapshot frame per aggregation interval, plus the events its owner reports.
//!
//! A failed write stops monitoring rather than carrying on unrecorded, and never panics: the
//! callback returns the error, which ends the loop and comes back from `Context::run`; the
//! recorder refuses every later write with it, and [`Recorder::finish`] returns it too.
//!
//! A snapshot holds only the targets the record has announced (the header's, and those of the
//! `TargetAdded` events written so far): a target the operations add to the context is
//! announced by the recorder's owner, and a snapshot taken before that leaves it out rather
//! than name a target the reader does not know yet. A target leaves the snapshots with the
//! `Exit` or `TargetDropped` event written for it: a helper process that lived a few
//! milliseconds is in no snapshot, rather than in every later one with no regions.

use crate::error::RecordError;
use crate::frame::MAX_SNAPSHOT_REGIONS;
use crate::model::{
    Event, EventKind, Frame, Header, RegionStat, SchemeStatsRecord, Snapshot, TargetSnapshot,
    TriedRegionRecord,
};
use crate::writer::{RecordWriter, WriterOptions};
use std::fs::File;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use udamon_core::{Callbacks, Context, Flow};

/// Where a recorder also hands every frame it has written, in order (a live view of the
/// record as it grows).
pub type Tap = Box<dyn FnMut(Frame)>;

pub struct Recorder<W: Write = File> {
    writer: RecordWriter<W>,
    tap: Option<Tap>,
    /// The record's time zero on the context's time line.
    start_us: u64,
    /// Reused between aggregations.
    snapshot: Snapshot,
    error: Option<RecordError>,
    snapshots_written: u64,
    /// What was last written of each scheme's statistics and each target's memory, and the
    /// last tried-regions capture written, so that only changes are written.
    last_scheme_stats: Vec<SchemeStatsRecord>,
    last_memory: Vec<Option<udamon_core::TargetMemory>>,
    last_tried: u64,
    /// Targets announced so far: snapshots hold no others.
    announced: usize,
    /// By target index, whether its exit (or drop) was written: snapshots leave it out.
    ended: Vec<bool>,
    /// Whether a snapshot was merged to fit the format yet (said once, in a note).
    coarsened: bool,
}

impl Recorder<File> {
    /// Creates the record file. `start_us` is the context's time (`Context::set_start_time_us`)
    /// that becomes the record's time zero.
    pub fn create(
        path: impl AsRef<Path>,
        header: &Header,
        options: WriterOptions,
        start_us: u64,
    ) -> Result<Self, RecordError> {
        Ok(Recorder::new(
            RecordWriter::create(path, header, options)?,
            start_us,
        ))
    }
}

impl<W: Write> Recorder<W> {
    pub fn new(writer: RecordWriter<W>, start_us: u64) -> Self {
        Recorder {
            announced: writer.header_targets(),
            writer,
            tap: None,
            start_us,
            snapshot: Snapshot {
                start_ns: 0,
                end_ns: 0,
                sample_us: 0,
                aggr_us: 0,
                targets: Vec::new(),
            },
            error: None,
            snapshots_written: 0,
            last_scheme_stats: Vec::new(),
            last_memory: Vec::new(),
            last_tried: 0,
            ended: Vec::new(),
            coarsened: false,
        }
    }

    /// Hands every frame written from now on to `tap` as well.
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// Nanoseconds since the record's start for a time `t_us` on the context's time line.
    pub fn time_ns(&self, t_us: u64) -> u64 {
        t_us.saturating_sub(self.start_us).saturating_mul(1000)
    }

    /// Writes an event (an exec, an exit, source statistics, ...). After a failed write nothing
    /// more is written; the first failure is kept in [`Recorder::error`].
    pub fn write_event(&mut self, time_ns: u64, kind: EventKind) -> Result<(), RecordError> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        let added = match kind {
            EventKind::TargetAdded { target, .. } => Some(target as usize + 1),
            _ => None,
        };
        let ended = match kind {
            EventKind::Exit { target, .. } | EventKind::TargetDropped { target, .. } => {
                Some(target as usize)
            }
            _ => None,
        };
        let event = Event { time_ns, kind };
        let result = self.writer.write_event(&event);
        if let (Ok(()), Some(n)) = (&result, added) {
            self.announced = self.announced.max(n);
        }
        if let (Ok(()), Some(t)) = (&result, ended) {
            if self.ended.len() <= t {
                self.ended.resize(t + 1, false);
            }
            self.ended[t] = true;
        }
        if let (Ok(()), Some(tap)) = (&result, &mut self.tap) {
            tap(Frame::Event(event));
        }
        self.keep_error(result)
    }

    pub fn snapshots_written(&self) -> u64 {
        self.snapshots_written
    }

    pub fn bytes_written(&self) -> u64 {
        self.writer.bytes_written()
    }

    /// Ends the record; returns the first error of the whole run, if there was one.
    pub fn finish(self) -> Result<W, RecordError> {
        match self.error {
            Some(e) => Err(e),
            None => self.writer.finish(),
        }
    }

    fn keep_error(&mut self, result: Result<(), RecordError>) -> Result<(), RecordError> {
        if let Err(e) = result {
            let copy = e.duplicate();
            self.error.get_or_insert(e);
            return Err(copy);
        }
        Ok(())
    }
}

impl<W: Write> Callbacks for Recorder<W> {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if let Some(e) = &self.error {
            return Err(e.duplicate().into());
        }
        fill_snapshot(&mut self.snapshot, ctx, self.start_us);
        self.snapshot.targets.truncate(self.announced);
        let ended = &self.ended;
        self.snapshot
            .targets
            .retain(|t| !ended.get(t.target as usize).copied().unwrap_or(false));
        let before = self.snapshot.nr_regions();
        if fit_to_format(&mut self.snapshot) && !self.coarsened {
            self.coarsened = true;
            let text = format!(
                "a snapshot of {before} regions, more than the format's {MAX_SNAPSHOT_REGIONS}, \
                 was written with neighbouring regions merged (mappings made since the start \
                 took regions the bound could not give back); give fewer regions to keep \
                 every one"
            );
            let time_ns = self.time_ns(ctx.now_us());
            self.write_event(time_ns, EventKind::Note { text })?;
        }
        let result = self.writer.write_snapshot(&self.snapshot);
        self.keep_error(result)?;
        self.snapshots_written += 1;
        if let Some(tap) = &mut self.tap {
            tap(Frame::Snapshot(self.snapshot.clone()));
        }
        let time_ns = self.time_ns(ctx.now_us());
        self.write_changes(ctx, time_ns)?;
        Ok(ControlFlow::Continue(()))
    }
}

impl<W: Write> Recorder<W> {
    /// Scheme statistics, tried regions and target memory that changed since last written.
    fn write_changes(&mut self, ctx: &Context, time_ns: u64) -> Result<(), RecordError> {
        for (i, scheme) in ctx.schemes().iter().enumerate() {
            let st = &scheme.stats;
            let stats = SchemeStatsRecord {
                nr_tried: st.nr_tried,
                sz_tried: st.sz_tried,
                nr_applied: st.nr_applied,
                sz_applied: st.sz_applied,
                sz_ops_filter_passed: st.sz_ops_filter_passed,
                qt_exceeds: st.qt_exceeds,
            };
            if self.last_scheme_stats.get(i) == Some(&stats) {
                continue;
            }
            self.last_scheme_stats
                .resize(ctx.schemes().len(), SchemeStatsRecord::default());
            self.last_scheme_stats[i] = stats;
            let action = scheme.action.name().to_string();
            self.write_event(
                time_ns,
                EventKind::SchemeStats {
                    scheme: i as u32,
                    action,
                    stats,
                },
            )?;
        }
        let (generation, tried) = ctx.tried_regions();
        if generation != self.last_tried {
            self.last_tried = generation;
            for (i, t) in tried.iter().enumerate() {
                let regions = t
                    .regions
                    .iter()
                    .map(|r| TriedRegionRecord {
                        start: r.start,
                        end: r.end,
                        nr_accesses: r.nr_accesses,
                        age: r.age,
                        sz_filter_passed: r.sz_filter_passed,
                    })
                    .collect();
                self.write_event(
                    time_ns,
                    EventKind::SchemeTriedRegions {
                        scheme: i as u32,
                        regions,
                    },
                )?;
            }
        }
        for t in 0..ctx.targets().len() {
            let memory = ctx.target_memory(t);
            if memory.is_none() || self.last_memory.get(t) == Some(&memory) {
                continue;
            }
            self.last_memory.resize(ctx.targets().len(), None);
            self.last_memory[t] = memory;
            let m = memory.unwrap_or_default();
            self.write_event(
                time_ns,
                EventKind::TargetMemory {
                    target: t as u32,
                    resident_bytes: m.resident_bytes,
                    paged_out_bytes: m.paged_out_bytes,
                    refaulted_bytes: m.refaulted_bytes,
                },
            )?;
        }
        Ok(())
    }
}

/// The context's current aggregation window as a snapshot; times in nanoseconds since
/// `start_us` on the context's time line. Meant for `after_aggregation`, where the window is
/// complete.
pub fn snapshot_from_context(ctx: &Context, start_us: u64) -> Snapshot {
    let mut s = Snapshot::default();
    fill_snapshot(&mut s, ctx, start_us);
    s
}

/// [`snapshot_from_context`] with target 0's touched bytes per region given: what
/// [`Context::touched_bytes_in`] made of the window's working set, estimated already by the
/// caller (serve's metrics estimate it at every publication: a second estimate would be the
/// same, at the same cost).
pub fn snapshot_with_touched(ctx: &Context, start_us: u64, touched: Option<Vec<u64>>) -> Snapshot {
    let mut s = Snapshot::default();
    let mut touched = Some(touched);
    fill(&mut s, ctx, start_us, |i| match i {
        0 => touched.take().flatten(),
        _ => ctx.window_touched_bytes(i),
    });
    s
}

/// Merges neighbouring regions of `s` (touching ones of one target, those alike in
/// `nr_accesses` first) until it holds at most [`MAX_SNAPSHOT_REGIONS`], as DAMON merges
/// regions: counts and ages weighted by size, samples and touched bytes added. A monitor's
/// regions may outnumber its bound for a while (each mapping made since the last merge takes
/// its own), and at the format's limit that would end the record. Returns whether any was
/// merged.
fn fit_to_format(s: &mut Snapshot) -> bool {
    let mut excess = s.nr_regions().saturating_sub(MAX_SNAPSHOT_REGIONS);
    if excess == 0 {
        return false;
    }
    for alike_only in [true, false] {
        for t in &mut s.targets {
            if excess == 0 {
                return true;
            }
            let mut kept: Vec<RegionStat> = Vec::with_capacity(t.regions.len());
            for r in t.regions.drain(..) {
                match kept.last_mut() {
                    Some(last)
                        if excess > 0
                            && last.end == r.start
                            && (!alike_only || last.nr_accesses == r.nr_accesses) =>
                    {
                        merge_into(last, &r);
                        excess -= 1;
                    }
                    _ => kept.push(r),
                }
            }
            t.regions = kept;
        }
    }
    true
}

/// `r` merged into `into`, its neighbour before it.
fn merge_into(into: &mut RegionStat, r: &RegionStat) {
    let (a, b) = ((into.end - into.start) as f64, (r.end - r.start) as f64);
    let weighted =
        |x: u32, y: u32| ((f64::from(x) * a + f64::from(y) * b) / (a + b)).round() as u32;
    into.nr_accesses = weighted(into.nr_accesses, r.nr_accesses);
    into.age = weighted(into.age, r.age);
    into.raw_samples = into.raw_samples.saturating_add(r.raw_samples);
    into.read_samples = into.read_samples.saturating_add(r.read_samples);
    into.write_samples = into.write_samples.saturating_add(r.write_samples);
    into.touched_bytes = match (into.touched_bytes, r.touched_bytes) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    into.end = r.end;
}

/// [`snapshot_from_context`] into an existing snapshot, reusing its allocations.
pub fn fill_snapshot(s: &mut Snapshot, ctx: &Context, start_us: u64) {
    fill(s, ctx, start_us, |i| ctx.window_touched_bytes(i));
}

/// [`fill_snapshot`] with each target's touched bytes per region from `touched_of`.
fn fill(
    s: &mut Snapshot,
    ctx: &Context,
    start_us: u64,
    mut touched_of: impl FnMut(usize) -> Option<Vec<u64>>,
) {
    let (window_start, window_end) = ctx.window_us();
    let ns = |t_us: u64| t_us.saturating_sub(start_us).saturating_mul(1000);
    s.start_ns = ns(window_start);
    s.end_ns = ns(window_end);
    s.sample_us = ctx.attrs().sample_interval_us;
    s.aggr_us = ctx.attrs().aggr_interval_us;
    let targets = ctx.targets();
    s.targets.resize_with(targets.len(), || TargetSnapshot {
        target: 0,
        regions: Vec::new(),
    });
    for (i, (out, t)) in s.targets.iter_mut().zip(targets).enumerate() {
        out.target = i as u32;
        out.regions.clear();
        let mut touched = touched_of(i).map(Vec::into_iter);
        out.regions.extend(t.regions.iter().map(|r| {
            RegionStat {
                start: r.start,
                end: r.end,
                nr_accesses: r.nr_accesses,
                age: r.age,
                raw_samples: r.raw_samples,
                read_samples: r.read_samples,
                write_samples: r.write_samples,
                touched_bytes: touched
                    .as_mut()
                    .and_then(Iterator::next)
                    .filter(|_| r.nr_accesses > 0),
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(i: u64, nr_accesses: u32) -> RegionStat {
        RegionStat {
            start: i * 4096,
            end: (i + 1) * 4096,
            nr_accesses,
            age: 3,
            raw_samples: 1,
            read_samples: 0,
            write_samples: 1,
            touched_bytes: (nr_accesses > 0).then_some(4096),
        }
    }

    #[test]
    fn a_snapshot_beyond_the_format_is_merged_to_fit_alike_neighbours_first() {
        // Pairs of neighbours alike in nr_accesses, each pair unlike the next: 100 more
        // regions than the format holds merge 100 pairs, and no unlike two.
        let n = MAX_SNAPSHOT_REGIONS as u64 + 100;
        let regions: Vec<RegionStat> = (0..n).map(|i| region(i, ((i / 2) % 2) as u32)).collect();
        let mut s = Snapshot {
            start_ns: 0,
            end_ns: 1,
            sample_us: 5000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot { target: 0, regions }],
        };
        assert!(fit_to_format(&mut s));
        let r = &s.targets[0].regions;
        assert_eq!(r.len(), MAX_SNAPSHOT_REGIONS);
        assert_eq!((r[0].start, r.last().unwrap().end), (0, n * 4096));
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        let sum = |f: fn(&RegionStat) -> u64| r.iter().map(f).sum::<u64>();
        assert_eq!(sum(|r| u64::from(r.raw_samples)), n);
        assert_eq!(sum(|r| r.touched_bytes.unwrap_or(0)), n / 2 * 4096);
        // Every merged region joined two alike ones: its count is theirs.
        for m in r.iter().filter(|r| r.end - r.start > 4096) {
            let first = region(m.start / 4096, ((m.start / 4096 / 2) % 2) as u32);
            assert_eq!(m.nr_accesses, first.nr_accesses, "{m:?}");
            assert_eq!(m.end - m.start, 2 * 4096, "{m:?}");
        }
        // Within the format, nothing changes.
        let before = s.clone();
        assert!(!fit_to_format(&mut s));
        assert_eq!(s, before);
    }
}
