//! A target's samples of the window so far, counted into its regions when they are next read.
//!
//! Finding a sample's region costs a few cache misses at page granularity: the index's blocks
//! and the region itself lie among hundreds of megabytes that the window's pass over every
//! region has just pushed out of cache. Looked up in the interval that drew them, a handful of
//! samples at a time, those misses made a sampling interval cost twice as much over 16 GiB as
//! over 1 GiB. Kept here instead, an interval costs an append whatever the monitored size, and
//! the samples are counted before anything reads the regions ([`PendingSamples::count_into`]):
//! in the window's pass, a due scheme's, the operations' update, or for a caller handed the
//! regions to change. The misses are the same; they are paid where the window's pass, which
//! reads every region, costs a thousand times more.
//!
//! Each interval's samples are counted as a batch, as they would have been in their interval:
//! a region's `nr_accesses` is the number of intervals that drew a sample in it, and every
//! region reads as it did. (Sorting the window's samples into one batch lets more of their
//! misses overlap, 10-30 % less a sample at 16 GiB; sorting and telling the intervals apart
//! cost more than that below a million regions.)

use crate::region::{Region, SampledAccess};
use crate::region_index::RegionIndex;

#[derive(Debug, Clone, Default)]
pub(crate) struct PendingSamples {
    /// The samples, each interval's sorted by address.
    samples: Vec<SampledAccess>,
    /// Where each interval's samples end in `samples`.
    batch_ends: Vec<usize>,
    /// The samples counted so far that fell in no region.
    outside_regions: u64,
}

impl PendingSamples {
    /// Keeps one interval's samples, sorted by address.
    pub(crate) fn add(&mut self, samples: &[SampledAccess]) {
        debug_assert!(samples.is_sorted_by_key(|s| s.addr));
        self.samples.extend_from_slice(samples);
        self.batch_ends.push(self.samples.len());
    }

    /// Counts the kept samples into `regions` (sorted, disjoint) and forgets them: each sample
    /// is noted in the region that holds it ([`Region::note_sample`]), and each region's
    /// `nr_accesses` grows by one for each interval that drew a sample in it.
    pub(crate) fn count_into(&mut self, index: &mut RegionIndex, regions: &mut [Region]) {
        let mut start = 0;
        let mut hits = 0u64;
        for &end in &self.batch_ends {
            let mut last_hit: Option<usize> = None;
            index.find_each(
                regions,
                &self.samples[start..end],
                |s| s.addr,
                |&sample, i, r| {
                    hits += 1;
                    r.note_sample(sample);
                    // Addresses ascend, so repeated hits on one region are adjacent.
                    if last_hit != Some(i) {
                        r.nr_accesses = r.nr_accesses.saturating_add(1);
                        last_hit = Some(i);
                    }
                },
            );
            start = end;
        }
        self.outside_regions += self.samples.len() as u64 - hits;
        self.samples.clear();
        self.batch_ends.clear();
    }

    /// The samples counted so far that fell in no region of the target.
    pub(crate) fn outside_regions(&self) -> u64 {
        self.outside_regions
    }
}
