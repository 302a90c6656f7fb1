//! Snapshots of a monitoring run's aggregation windows and the measures the accuracy tests take
//! over them; shared by the live tests (through `patterns.rs`) and the model test.
#![allow(dead_code)] // each test binary uses a different subset

use std::ops::ControlFlow;
use udamon_core::{AddrRange, Callbacks, Context, Flow};

pub const MIB: u64 = 1 << 20;

/// One aggregation window's regions of a target: (start, end, nr_accesses).
#[derive(Debug, Clone)]
pub struct Snap {
    pub start_us: u64,
    pub end_us: u64,
    pub regions: Vec<(u64, u64, u32)>,
}

impl Snap {
    /// The window just completed, as target `target`'s regions show it.
    pub fn of(ctx: &Context, target: usize) -> Snap {
        let (start_us, end_us) = ctx.window_us();
        let regions = ctx.targets()[target]
            .regions
            .iter()
            .map(|r| (r.start, r.end, r.nr_accesses))
            .collect();
        Snap {
            start_us,
            end_us,
            regions,
        }
    }

    /// Bytes of `area` lying in regions with at least one access.
    pub fn accessed_bytes_in(&self, area: AddrRange) -> u64 {
        self.regions
            .iter()
            .filter(|r| r.2 > 0)
            .map(|&(s, e, _)| e.min(area.end).saturating_sub(s.max(area.start)))
            .sum()
    }

    /// `nr_accesses` averaged over the bytes of `area` (what a heatmap shows for it).
    pub fn mean_accesses_in(&self, area: AddrRange) -> f64 {
        let sum: f64 = self
            .regions
            .iter()
            .map(|&(s, e, n)| e.min(area.end).saturating_sub(s.max(area.start)) as f64 * n as f64)
            .sum();
        sum / area.size() as f64
    }

    /// The working set: bytes in regions with at least one access.
    pub fn wss(&self) -> u64 {
        self.regions
            .iter()
            .filter(|r| r.2 > 0)
            .map(|r| r.1 - r.0)
            .sum()
    }
}

/// Callbacks that keep every aggregation window's snapshot.
#[derive(Default)]
pub struct Collect(pub Vec<Snap>);

impl Callbacks for Collect {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        self.0.push(Snap::of(ctx, 0));
        Ok(ControlFlow::Continue(()))
    }
}

pub fn median(mut v: Vec<u64>) -> u64 {
    assert!(!v.is_empty());
    v.sort_unstable();
    v[v.len() / 2]
}
