//! The `paddr` operations: the host's physical memory as one target, as kernel DAMON's paddr
//! monitors it, from the samples of processes (root only).
//!
//! Every sample of a process it is fed (every process's, or a chosen set's: see
//! [`crate::vaddr::SharedSampling::tap`]) has its data address recovered as the `vaddr`
//! operations recover it (each process's code read and decoded, a few hundred processes
//! kept at a time), then translated to its physical frame through `/proc/PID/pagemap`. The
//! frames are the target's samples: memory that several processes share (page cache, shared
//! memory, a database's shared buffers) is one frame, counted once however many map it. The
//! target's regions cover the host's RAM (`/proc/iomem`'s System RAM), adjusted as for any
//! sampled source; they give the heat map over physical addresses, the access bandwidth and
//! the idle-time percentiles (DAMON_STAT's two signals).
//!
//! One process's pages lie all over physical memory, so regions, which count a whole region
//! as accessed, say little of how much memory was touched: the context is told that its
//! addresses are physical ([`AddressSpace::Physical`]), and its working sets count the frames
//! sampled and those touched but not sampled, estimated as one memory, never above the memory
//! in use (`MemTotal - MemFree`: page cache included, as a file the processes read is memory
//! they touch), which it is given as the target's resident bytes.

use crate::actions::pagescan::PageMap;
use crate::decode::AddressDecoder;
use crate::maps::{Maps, read_maps};
use crate::perf::{AccessSource, PerfRecord, ProcessMemory, Sample};
use crate::vaddr::rings::{Feed, FeedMsg};
use crate::vaddr::{
    Code, EventLog, Point, SourceStats, VaddrEvent, VaddrEventKind, recover_address, sampled_attrs,
    source_name,
};
use std::collections::{HashMap, VecDeque};
use thiserror::Error;
use udamon_core::layout::set_regions;
use udamon_core::working_set::AddressSpace;
use udamon_core::{AddrRange, Context, Operations, OpsError, SampledAccess, Target, TargetMemory};

/// Monitoring attributes for physical memory: the sampled sources' ([`sampled_attrs`]), with
/// up to 1,000 regions as kernel DAMON's paddr allows, since a host's memory is large and its
/// heat map needs them.
pub fn host_attrs(source: &AccessSource) -> udamon_core::Attrs {
    udamon_core::Attrs {
        max_nr_regions: 1_000,
        ..sampled_attrs(source)
    }
}

/// Processes whose decoding state is kept at once; the one unheard of longest goes first.
pub const PROCESSES_KEPT: usize = 256;

const PAGE: u64 = 4096;

#[derive(Debug, Error)]
pub enum PaddrError {
    #[error("cannot read /proc/iomem: {0}")]
    Iomem(std::io::Error),
    #[error(
        "the host's physical memory needs root: /proc/iomem hides its addresses from other users"
    )]
    Hidden,
}

/// The host's RAM: the top-level `System RAM` ranges of `/proc/iomem`.
pub fn system_ram() -> Result<Vec<AddrRange>, PaddrError> {
    let text = std::fs::read_to_string("/proc/iomem").map_err(PaddrError::Iomem)?;
    let ranges = parse_iomem(&text);
    if ranges.is_empty() || ranges.iter().all(|r| r.start == 0 && r.end <= 1) {
        return Err(PaddrError::Hidden);
    }
    Ok(ranges)
}

fn parse_iomem(text: &str) -> Vec<AddrRange> {
    text.lines()
        // Nested resources are indented; RAM is at the top level.
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| {
            let (span, name) = l.split_once(" : ")?;
            (name.trim() == "System RAM").then_some(())?;
            let (a, b) = span.trim().split_once('-')?;
            let start = u64::from_str_radix(a, 16).ok()?;
            let end = u64::from_str_radix(b, 16).ok()?.checked_add(1)?;
            // Whole pages only.
            let (start, end) = (start.div_ceil(PAGE) * PAGE, end / PAGE * PAGE);
            (start < end).then(|| AddrRange::new(start, end))
        })
        .collect()
}

/// What decoding one process's samples needs.
struct Seen {
    decoder: AddressDecoder,
    code: Code,
    maps: Maps,
    frames: Option<PageMap>,
    /// The last sample's time, for eviction.
    last_us: u64,
}

impl Seen {
    fn open(pid: u32, now_us: u64) -> Seen {
        Seen {
            decoder: AddressDecoder::new(),
            code: Code(ProcessMemory::new(pid)),
            maps: read_maps(pid).unwrap_or_default(),
            frames: PageMap::open(pid).ok(),
            last_us: now_us,
        }
    }
}

/// Operations on the host's physical memory; see the module documentation.
pub struct PaddrOps {
    name: String,
    point: Point,
    ram: Vec<AddrRange>,
    feed: Feed,
    pending: VecDeque<PerfRecord>,
    seen: HashMap<u32, Seen>,
    addrs: Vec<SampledAccess>,
    stats: SourceStats,
    events: EventLog,
}

impl PaddrOps {
    /// Physical memory sampled with `source`. Fails without root.
    pub fn new(source: &AccessSource) -> Result<PaddrOps, PaddrError> {
        Ok(PaddrOps {
            name: format!("paddr/{}", source_name(source)),
            point: Point::of(source),
            ram: system_ram()?,
            feed: Feed::default(),
            pending: VecDeque::new(),
            seen: HashMap::new(),
            addrs: Vec::new(),
            stats: SourceStats::default(),
            events: EventLog::default(),
        })
    }

    /// Where its processes' records are to be sent
    /// ([`SharedSampling::tap`](crate::vaddr::SharedSampling::tap)).
    pub fn feed(&self) -> Feed {
        self.feed.clone()
    }

    /// The host's RAM, as monitored.
    pub fn ram(&self) -> &[AddrRange] {
        &self.ram
    }

    pub fn stats(&self) -> &SourceStats {
        &self.stats
    }

    /// A handle on its events (source statistics), as [`crate::vaddr::VaddrOps::event_log`].
    pub fn event_log(&self) -> EventLog {
        self.events.clone()
    }

    /// Its events, as [`crate::vaddr::VaddrOps::take_events`] gives a process's.
    pub fn take_events(&mut self) -> Vec<VaddrEvent> {
        self.events.take()
    }

    fn sample(&mut self, s: &Sample) {
        self.stats.samples += 1;
        let now_us = s.time_ns / 1000;
        if !self.seen.contains_key(&s.pid) && self.seen.len() >= PROCESSES_KEPT {
            let oldest = self
                .seen
                .iter()
                .min_by_key(|(_, p)| p.last_us)
                .map(|(&pid, _)| pid);
            if let Some(pid) = oldest {
                self.seen.remove(&pid);
            }
        }
        let p = self
            .seen
            .entry(s.pid)
            .or_insert_with(|| Seen::open(s.pid, now_us));
        p.last_us = now_us;
        let Some((addr, _, access)) = recover_address(
            self.point,
            &mut p.decoder,
            &mut p.code,
            &p.maps,
            s,
            &mut self.stats,
        ) else {
            return;
        };
        self.stats.recovered += 1;
        let frame = p.frames.as_ref().and_then(|f| f.frame(addr).ok().flatten());
        let Some(frame) = frame else {
            self.stats.no_frame += 1;
            return;
        };
        let paddr = frame * PAGE + addr % PAGE;
        self.addrs.push(SampledAccess {
            addr: paddr,
            read: matches!(
                access,
                Some(crate::decode::Access::Read | crate::decode::Access::ReadWrite)
            ),
            write: matches!(
                access,
                Some(crate::decode::Access::Write | crate::decode::Access::ReadWrite)
            ),
        });
    }

    fn handle(&mut self, rec: PerfRecord) {
        match rec {
            PerfRecord::Sample(s) => self.sample(&s),
            PerfRecord::Lost { lost, .. } => self.stats.lost += lost,
            PerfRecord::Throttle { .. } => self.stats.throttled += 1,
            // A new program: what was decoded of the old one is void.
            PerfRecord::Exec { pid, .. } => {
                self.seen.remove(&pid);
            }
            PerfRecord::Mmap { pid, .. } => {
                if let Some(p) = self.seen.get_mut(&pid) {
                    p.maps = read_maps(pid).unwrap_or_default();
                }
            }
            PerfRecord::Exit { pid, tid, .. } if pid == tid => {
                self.seen.remove(&pid);
            }
            _ => {}
        }
    }
}

impl Operations for PaddrOps {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        if ctx.targets().is_empty() {
            ctx.add_target(Target::new(None));
        }
        ctx.set_address_space(AddressSpace::Physical);
        note_memory_in_use(ctx);
        let min_sz = ctx.attrs().min_region_sz;
        set_regions(&mut ctx.targets_mut()[0].regions, &self.ram, min_sz)?;
        Ok(())
    }

    fn update(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        note_memory_in_use(ctx);
        self.stats.outside_regions = ctx.samples_outside_regions();
        self.events
            .push(ctx.now_us(), VaddrEventKind::Stats(self.stats));
        Ok(())
    }

    fn prepare_access_checks(&mut self, _ctx: &mut Context) {}

    fn check_accesses(&mut self, ctx: &mut Context) {
        while let Some(msg) = self.feed.next() {
            if let FeedMsg::Records(recs) = msg {
                self.pending.extend(recs);
            }
        }
        let end_ns = ctx.interval_us().1.saturating_mul(1000);
        while self.pending.front().is_some_and(|r| r.time_ns() < end_ns) {
            let rec = self.pending.pop_front().expect("checked");
            self.handle(rec);
        }
        if !self.addrs.is_empty() {
            let mut addrs = std::mem::take(&mut self.addrs);
            ctx.record_sampled_accesses(0, &mut addrs);
            addrs.clear();
            self.addrs = addrs;
        }
        self.stats.outside_regions = ctx.samples_outside_regions();
    }

    fn cleanup(&mut self, ctx: &mut Context) {
        self.stats.outside_regions = ctx.samples_outside_regions();
        self.events
            .push(ctx.now_us(), VaddrEventKind::Stats(self.stats));
    }
}

/// Tells the context the memory in use, the bound of the host's working set (see the module
/// documentation); left as it was when /proc/meminfo cannot be read.
fn note_memory_in_use(ctx: &mut Context) {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return;
    };
    if let Some(bytes) = memory_in_use(&text) {
        ctx.set_target_memory(
            0,
            TargetMemory {
                resident_bytes: bytes,
                ..TargetMemory::default()
            },
        );
    }
}

/// `MemTotal - MemFree` of /proc/meminfo's text, in bytes.
fn memory_in_use(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(field("MemTotal")?.saturating_sub(field("MemFree")?) * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_in_use_counts_the_page_cache() {
        let text = "MemTotal:       24000000 kB\nMemFree:        20000000 kB\n\
                    MemAvailable:   23000000 kB\nCached:          2500000 kB\n";
        assert_eq!(super::memory_in_use(text), Some(4_000_000 * 1024));
        assert_eq!(super::memory_in_use("MemTotal: 5 kB\n"), None);
    }

    use super::*;

    #[test]
    fn system_ram_is_the_top_level_ram_of_iomem() {
        let text = "00000000-00000fff : Reserved\n\
                    00001000-0009fbff : System RAM\n\
                    00100000-bfffffff : System RAM\n\
                    \x20 01000000-01ffffff : Kernel code\n\
                    100000000-63fffffff : System RAM\n\
                    fee00000-fee00fff : Local APIC\n";
        let ram = parse_iomem(text);
        assert_eq!(
            ram,
            [
                AddrRange::new(0x1000, 0x9f000),
                AddrRange::new(0x100000, 0xc000_0000),
                AddrRange::new(0x1_0000_0000, 0x6_4000_0000),
            ]
        );
        // Unprivileged readers see zeros.
        assert!(parse_iomem("00000000-00000000 : System RAM\n").is_empty());
    }
}
