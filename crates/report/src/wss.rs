//! Working-set size per snapshot, as damo's `report wss`: the total size of the regions accessed
//! at least `acc_thres` times per aggregation window and at least `sz_thres` bytes large.

use crate::dist::{self, DistOptions, DistReport, Unit};
use crate::{Result, human};
use udamon_record::model::{Frame, Header, RegionStat};

/// Which regions count as the working set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WssFilter {
    /// Minimum `nr_accesses` (damo's `--acc_thres`, default 1).
    pub acc_thres: u32,
    /// Minimum region size in bytes (damo's `--sz_thres`, default 1).
    pub sz_thres: u64,
}

impl Default for WssFilter {
    fn default() -> Self {
        WssFilter {
            acc_thres: 1,
            sz_thres: 1,
        }
    }
}

impl WssFilter {
    /// The working-set size of one target's regions.
    pub fn wss(&self, regions: &[RegionStat]) -> u64 {
        regions
            .iter()
            .filter(|r| r.nr_accesses >= self.acc_thres && r.size() >= self.sz_thres)
            .map(RegionStat::size)
            .sum()
    }
}

/// The working-set size distribution over the record's snapshots (`header` names the targets).
pub fn wss(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    filter: &WssFilter,
    opts: &DistOptions,
) -> Result<DistReport> {
    let selection = format!(
        "regions with nr_accesses >= {} and size >= {}",
        filter.acc_thres,
        human::size(filter.sz_thres)
    );
    dist::collect(
        header,
        frames,
        opts,
        "wss",
        Unit::Bytes,
        Some(selection),
        |regions| filter.wss(regions),
    )
}
