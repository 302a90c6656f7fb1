//! Finding the region that holds a sampled address, with few cache misses.
//!
//! A binary search over the region array itself touches one 72-byte region per step; with
//! hundreds of thousands of regions most of those steps miss the cache, and the cost of a sample
//! grows with the region count. This index keeps the region ends in a compact array and, above
//! it, the last end of every block of [`BLOCK`] regions, and above that the last end of every
//! block of fences: the top search stays in cache (16 Ki entries for 4 Mi regions, page
//! granularity over 16 GiB), each block search below it reads one or two cache lines, and only
//! the hit region itself is touched. With two levels, the fence search over 4 Mi regions missed
//! the cache at most of its 18 steps, and a sampling interval cost 3x what it did at 256 Ki.
//!
//! The index is a cache of the boundaries, and nobody has to say when they change: every answer
//! is checked against the regions themselves ([`RegionIndex::find`]), in O(1), and an index found
//! out of date is rebuilt in one linear pass. Boundaries change at most a few times a window
//! (merge, split, schemes, the operations' updates), so it is rebuilt about as often as they do.

use crate::region::Region;

/// Regions per block: 16 ends are two cache lines.
const BLOCK: usize = 16;

#[derive(Debug, Clone, Default)]
pub(crate) struct RegionIndex {
    ends: Vec<u64>,
    /// `fences[j]` is the end of the last region in block `j`.
    fences: Vec<u64>,
    /// `top[k]` is `fences[16 k + 15]` (or the last fence): the end of the last region in
    /// block `k` of blocks.
    top: Vec<u64>,
}

impl RegionIndex {
    #[cfg(test)]
    fn build(regions: &[Region]) -> Self {
        let mut index = RegionIndex::default();
        index.rebuild(regions);
        index
    }

    fn rebuild(&mut self, regions: &[Region]) {
        self.ends.clear();
        self.ends.extend(regions.iter().map(|r| r.end));
        self.fences.clear();
        self.fences
            .extend(self.ends.chunks(BLOCK).map(|b| b[b.len() - 1]));
        self.top.clear();
        self.top
            .extend(self.fences.chunks(BLOCK).map(|b| b[b.len() - 1]));
    }

    /// The region of `regions` (sorted, disjoint) that holds `addr`, if any: what a binary
    /// search over `regions` finds, whatever happened to them since the index was built.
    pub(crate) fn find(&mut self, regions: &[Region], addr: u64) -> Option<usize> {
        if self.ends.len() != regions.len() {
            self.rebuild(regions);
        }
        let mut i = self.first_ending_after(addr);
        if !is_first_ending_after(regions, i, addr) {
            self.rebuild(regions);
            i = self.first_ending_after(addr);
        }
        regions.get(i).filter(|r| r.start <= addr).map(|_| i)
    }

    /// The index of the first region ending after `addr` (the one that may contain it), as the
    /// index last saw the regions.
    fn first_ending_after(&self, addr: u64) -> usize {
        let group = self.top.partition_point(|&e| e <= addr);
        let lo = group * BLOCK;
        let hi = (lo + BLOCK).min(self.fences.len());
        if lo >= hi {
            return self.ends.len();
        }
        let block = lo + self.fences[lo..hi].partition_point(|&e| e <= addr);
        let lo = block * BLOCK;
        let hi = (lo + BLOCK).min(self.ends.len());
        if lo >= hi {
            return self.ends.len();
        }
        lo + self.ends[lo..hi].partition_point(|&e| e <= addr)
    }
}

/// Whether `i` is where `addr` falls among `regions` (sorted by their ends): region `i` holds
/// it (a hit, found by reading the hit region alone), or it lies after region `i - 1` and
/// before the end of region `i` (a miss, checked by its two neighbours).
fn is_first_ending_after(regions: &[Region], i: usize, addr: u64) -> bool {
    match regions.get(i) {
        Some(r) if r.start <= addr && addr < r.end => true,
        next => next.is_none_or(|r| addr < r.end) && (i == 0 || regions[i - 1].end <= addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a plain binary search over `regions` finds for `addr`.
    fn plain(regions: &[Region], addr: u64) -> Option<usize> {
        let i = regions.partition_point(|r| r.end <= addr);
        regions.get(i).filter(|r| r.start <= addr).map(|_| i)
    }

    #[test]
    fn agrees_with_a_plain_binary_search() {
        // Regions with holes, more than a few blocks of blocks of them.
        let regions: Vec<Region> = (0..1000u64)
            .map(|i| Region::new(i * 10, i * 10 + 7))
            .collect();
        let mut index = RegionIndex::build(&regions);
        for addr in 0..10_010 {
            assert_eq!(
                index.find(&regions, addr),
                plain(&regions, addr),
                "address {addr}"
            );
        }
        assert_eq!(RegionIndex::build(&[]).find(&[], 5), None);
    }

    #[test]
    fn an_index_built_for_other_regions_still_answers_right() {
        // Built for 100 regions of 10; asked about the same span cut otherwise: the same
        // count of regions (merged here, split there), fewer, more, none.
        let tens: Vec<Region> = (0..100u64)
            .map(|i| Region::new(i * 10, i * 10 + 7))
            .collect();
        let mut moved = tens.clone();
        moved[40].end = 409; // a region grew into the hole after it
        moved[41].start = 409;
        moved[70] = Region::new(700, 703); // one shrank
        let fewer: Vec<Region> = (0..50u64)
            .map(|i| Region::new(i * 20, i * 20 + 15))
            .collect();
        let more: Vec<Region> = (0..333u64).map(|i| Region::new(i * 3, i * 3 + 2)).collect();
        for regions in [moved, fewer, more, Vec::new()] {
            let mut index = RegionIndex::build(&tens);
            for addr in 0..1010 {
                assert_eq!(
                    index.find(&regions, addr),
                    plain(&regions, addr),
                    "address {addr} among {} regions",
                    regions.len()
                );
            }
        }
    }
}
