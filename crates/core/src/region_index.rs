//! Finding the region that holds a sampled address, with few cache misses.
//!
//! A binary search over the region array itself touches one 40-byte region per step; with
//! hundreds of thousands of regions most of those steps miss the cache, and the cost of a sample
//! grows with the region count. This index keeps the region ends in a compact array and, above
//! it, the last end of every block of [`BLOCK`] regions: the fence search stays in cache, the
//! block search reads one or two cache lines, and only the hit region itself is touched.
//! It is rebuilt in one linear pass whenever region boundaries may have changed.

use crate::region::Region;

/// Regions per block: 16 ends are two cache lines.
const BLOCK: usize = 16;

#[derive(Debug, Clone, Default)]
pub(crate) struct RegionIndex {
    ends: Vec<u64>,
    /// `fences[j]` is the end of the last region in block `j`.
    fences: Vec<u64>,
}

impl RegionIndex {
    pub(crate) fn build(regions: &[Region]) -> Self {
        let ends: Vec<u64> = regions.iter().map(|r| r.end).collect();
        let fences = ends.chunks(BLOCK).map(|b| b[b.len() - 1]).collect();
        RegionIndex { ends, fences }
    }

    /// The index of the first region ending after `addr` (the one that may contain it).
    pub(crate) fn first_ending_after(&self, addr: u64) -> usize {
        let block = self.fences.partition_point(|&e| e <= addr);
        let lo = block * BLOCK;
        let hi = (lo + BLOCK).min(self.ends.len());
        if lo >= hi {
            return self.ends.len();
        }
        lo + self.ends[lo..hi].partition_point(|&e| e <= addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_a_plain_binary_search() {
        // Regions with holes, more than a few blocks of them.
        let regions: Vec<Region> = (0..100u64)
            .map(|i| Region::new(i * 10, i * 10 + 7))
            .collect();
        let index = RegionIndex::build(&regions);
        for addr in 0..1010 {
            let want = regions.partition_point(|r| r.end <= addr);
            assert_eq!(index.first_ending_after(addr), want, "address {addr}");
        }
        assert_eq!(RegionIndex::build(&[]).first_ending_after(5), 0);
    }
}
