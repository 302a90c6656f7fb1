//! What the record keeps of each recovered sample beyond its region's count: its data address,
//! the code site of its instruction pointer, its thread and CPU, and whether it read or wrote.
//!
//! Code sites are numbered across the whole run in the order their IPs are first seen, and
//! named once, then ([`Symbolizer`]); the batch that first uses a site carries its name. An exec
//! forgets the process's sites: the same IP then holds other code and gets a new number. The
//! facts of an aggregation window are handed over as one [`SampleBatch`] per target once the
//! window is over, in address order (which keeps the record's address deltas small).
//!
//! With call stacks, each return address of a sample's call chain is a code site too (named by
//! the call instruction before it), and the chain of caller sites is interned in a stack table
//! numbered like the sites: a sample then names its callers with one number.
//!
//! Sites and stacks keep their numbers for [`SITES_KEPT`] and [`STACKS_KEPT`] numbers after
//! theirs ([`Numbering`]): the tables stay bounded however long a program whose code moves is
//! monitored.

use super::numbering::Numbering;
use crate::decode::Access;
use crate::maps::Maps;
use crate::symbolize::{SiteName, Symbolizer};
use std::rc::Rc;
use std::sync::Arc;

/// A code site's number holds for this many sites numbered after it: a samples batch refers
/// only to sites numbered within this of the newest.
pub const SITES_KEPT: u32 = 1 << 17;

/// A call stack's number holds for this many stacks numbered after it.
pub const STACKS_KEPT: u32 = 1 << 16;

/// A code site first seen in a batch's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub index: u32,
    pub ip: u64,
    pub name: SiteName,
}

/// A caller chain first seen in a batch's window: the sites of the return addresses, innermost
/// first (the sampled site itself is the sample's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub index: u32,
    pub sites: Vec<u32>,
}

/// One recovered sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fact {
    pub addr: u64,
    /// The [`Site`] index of its instruction pointer.
    pub site: u32,
    pub tid: u32,
    pub cpu: u32,
    /// `None` when the source gives the address without the instruction (PMU samples).
    pub access: Option<Access>,
    /// The [`Stack`] index of its callers, when call stacks are recorded.
    pub stack: Option<u32>,
}

/// One target's samples of one aggregation window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleBatch {
    pub target: usize,
    /// The window, on the context's time line (µs).
    pub start_us: u64,
    pub end_us: u64,
    /// Sites first used in this window, by index.
    pub sites: Vec<Site>,
    /// Stacks first used in this window, by index.
    pub stacks: Vec<Stack>,
    pub facts: Vec<Fact>,
}

#[derive(Default)]
struct Pending {
    sites: Vec<Site>,
    stacks: Vec<Stack>,
    facts: Vec<Fact>,
}

/// Collects the facts of the current window, per target.
pub(super) struct Facts {
    /// Its own, or one shared by many processes' monitoring (each file it reads is read
    /// once for them all).
    symbolizer: Rc<Symbolizer>,
    /// (target, IP) → site index.
    sites: Numbering<(usize, u64)>,
    /// Caller sites → stack index.
    stacks: Numbering<Arc<[u32]>>,
    pending: Vec<Pending>,
    /// Where the window being collected started; `None` before the first sample interval.
    window_start_us: Option<u64>,
}

impl Default for Facts {
    fn default() -> Self {
        Facts {
            symbolizer: Rc::new(Symbolizer::default()),
            sites: Numbering::new(SITES_KEPT),
            stacks: Numbering::new(STACKS_KEPT),
            pending: Vec::new(),
            window_start_us: None,
        }
    }
}

impl Facts {
    /// Names sites with `symbolizer`, shared with other processes' monitoring.
    pub(super) fn share_symbolizer(&mut self, symbolizer: Rc<Symbolizer>) {
        self.symbolizer = symbolizer;
    }

    /// Keeps one sample of target `t` (process `pid`, whose mappings are `maps`) taken at
    /// `ip`; `callers` are the return addresses of its call chain (innermost first) when call
    /// stacks are recorded.
    pub(super) fn push(
        &mut self,
        t: usize,
        pid: u32,
        maps: &Maps,
        ip: u64,
        callers: Option<&[u64]>,
        fact: impl FnOnce(u32, Option<u32>) -> Fact,
    ) {
        if self.pending.len() <= t {
            self.pending.resize_with(t + 1, Pending::default);
        }
        let site = self.site(t, pid, maps, ip, ip);
        let stack = callers.map(|callers| {
            // A return address follows its call: the call instruction names the caller (a
            // call ending a function would otherwise name the next one).
            let sites: Vec<u32> = callers
                .iter()
                .map(|&ret| self.site(t, pid, maps, ret, ret.saturating_sub(1)))
                .collect();
            match self.stacks.get(&sites[..]) {
                Some(stack) => stack,
                None => {
                    let index = self.stacks.assign(Arc::from(&sites[..]));
                    self.pending[t].stacks.push(Stack { index, sites });
                    index
                }
            }
        });
        self.pending[t].facts.push(fact(site, stack));
    }

    /// The site of `ip` in target `t`, named (by the code at `lookup`) when first seen.
    fn site(&mut self, t: usize, pid: u32, maps: &Maps, ip: u64, lookup: u64) -> u32 {
        if let Some(site) = self.sites.get(&(t, ip)) {
            return site;
        }
        let index = self.sites.assign((t, ip));
        let name = self.symbolizer.name(pid, maps, lookup);
        self.pending[t].sites.push(Site { index, ip, name });
        index
    }

    /// Target `t`'s samples of the window being collected so far, in arrival order.
    pub(super) fn current(&self, t: usize) -> &[Fact] {
        self.pending.get(t).map_or(&[], |p| &p.facts)
    }

    /// Target `t` exec'd: its IPs now name other code.
    pub(super) fn forget_sites(&mut self, t: usize) {
        self.sites.forget(|&(target, _)| target == t);
    }

    /// At the start of a sampling interval's handling, with the context's current window:
    /// when a window ended since the last call, its batches (targets with samples only).
    pub(super) fn window(&mut self, window_start_us: u64) -> Vec<SampleBatch> {
        match self.window_start_us.replace(window_start_us) {
            Some(start) if start != window_start_us => self.take(start, window_start_us),
            _ => Vec::new(),
        }
    }

    /// Every target's batch since the window started (monitoring ended at `end_us`).
    pub(super) fn finish(&mut self, end_us: u64) -> Vec<SampleBatch> {
        let start = self.window_start_us.replace(end_us).unwrap_or(end_us);
        self.take(start, end_us)
    }

    fn take(&mut self, start_us: u64, end_us: u64) -> Vec<SampleBatch> {
        let mut batches = Vec::new();
        for (target, p) in self.pending.iter_mut().enumerate() {
            if p.facts.is_empty() && p.sites.is_empty() && p.stacks.is_empty() {
                continue;
            }
            let mut facts = std::mem::take(&mut p.facts);
            facts.sort_by_key(|f| f.addr);
            batches.push(SampleBatch {
                target,
                start_us,
                end_us,
                sites: std::mem::take(&mut p.sites),
                stacks: std::mem::take(&mut p.stacks),
                facts,
            });
        }
        batches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(addr: u64) -> impl FnOnce(u32, Option<u32>) -> Fact {
        move |site, stack| Fact {
            addr,
            site,
            tid: 1,
            cpu: 0,
            access: Some(Access::Read),
            stack,
        }
    }

    #[test]
    fn sites_are_named_once_per_process_image_and_batched_per_window() {
        let maps = Maps::default();
        let mut f = Facts::default();
        assert!(f.window(0).is_empty());
        f.push(0, 1, &maps, 0x10, None, fact(0x300));
        f.push(0, 1, &maps, 0x10, None, fact(0x100));
        f.push(1, 2, &maps, 0x10, None, fact(0x200));
        assert!(f.window(0).is_empty(), "the window goes on");
        let batches = f.window(400);
        assert_eq!(batches.len(), 2);
        let b = &batches[0];
        assert_eq!((b.target, b.start_us, b.end_us), (0, 0, 400));
        assert_eq!(b.sites.len(), 1, "one IP, one site");
        assert_eq!(
            b.facts.iter().map(|f| (f.addr, f.site)).collect::<Vec<_>>(),
            [(0x100, 0), (0x300, 0)],
            "address order"
        );
        assert_eq!(
            batches[1].sites[0].index, 1,
            "another process's IP is another site"
        );

        f.push(0, 1, &maps, 0x10, None, fact(0x100));
        let b = f.finish(500);
        assert!(b[0].sites.is_empty(), "already described");
        assert_eq!((b[0].facts[0].site, b[0].start_us), (0, 400));

        f.forget_sites(0);
        f.push(0, 1, &maps, 0x10, None, fact(0x100));
        let b = f.finish(600);
        assert_eq!(b[0].sites[0].index, 2, "after an exec the IP is a new site");
    }

    #[test]
    fn caller_chains_are_sites_and_interned_stacks() {
        let maps = Maps::default();
        let mut f = Facts::default();
        f.window(0);
        f.push(0, 1, &maps, 0x10, Some(&[0x20, 0x30]), fact(0x100));
        f.push(0, 1, &maps, 0x11, Some(&[0x20, 0x30]), fact(0x200));
        f.push(0, 1, &maps, 0x10, Some(&[0x40]), fact(0x300));
        let b = f.window(100);
        let ips: Vec<u64> = b[0].sites.iter().map(|s| s.ip).collect();
        assert_eq!(
            ips,
            [0x10, 0x20, 0x30, 0x11, 0x40],
            "return addresses are sites"
        );
        assert_eq!(
            b[0].stacks,
            [
                Stack {
                    index: 0,
                    sites: vec![1, 2]
                },
                Stack {
                    index: 1,
                    sites: vec![4]
                }
            ],
            "one entry per distinct caller chain"
        );
        let stacks: Vec<_> = b[0].facts.iter().map(|f| (f.site, f.stack)).collect();
        assert_eq!(stacks, [(0, Some(0)), (3, Some(0)), (0, Some(1))]);
        f.push(0, 1, &maps, 0x10, Some(&[0x40]), fact(0x100));
        let b = f.finish(200);
        assert!(b[0].stacks.is_empty(), "already described");
        assert_eq!(b[0].facts[0].stack, Some(1));
    }
}
