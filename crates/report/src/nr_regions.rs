//! The number of regions per snapshot, as damo's `report nr_regions`: shows how the adaptive
//! region adjustment behaved (between the header's min and max number of regions).

use crate::Result;
use crate::dist::{self, DistOptions, DistReport, Unit};
use udamon_record::model::{Frame, Header};

/// The region-count distribution over the record's snapshots (`header` names the targets).
pub fn nr_regions(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    opts: &DistOptions,
) -> Result<DistReport> {
    dist::collect(
        header,
        frames,
        opts,
        "nr_regions",
        Unit::Regions,
        None,
        |_, target| Ok(target.regions.len() as u64),
    )
}
