//! Finding the region that holds a sampled address, with few cache misses.
//!
//! A binary search over the region array itself touches one 56-byte region per step; with
//! hundreds of thousands of regions most of those steps miss the cache, and the cost of a sample
//! grows with the region count. This index keeps the region ends in a compact array and, above
//! it, levels of fences: the last end of every block of [`BLOCK`] regions, the last of every
//! block of those, and so on up to a level of one block. A search reads one block a level
//! (one or two cache lines) and only the hit region itself. The levels used to stop at two
//! above the ends, searched by a binary search each: at 4 Mi regions (page granularity over
//! 16 GiB) the top one, 16 Ki entries, fell out of cache in every window's passes, and its 14
//! steps missed one after the other. With blocks at every level, the samples of an interval go
//! down together ([`RegionIndex::find_each`]) and their misses overlap.
//!
//! An end is kept as 32 bits above its block's base (the end of the block before it): 4 bytes a
//! region rather than 8, half the index's memory at page granularity and a block in one cache
//! line. A block whose regions reach further than 32 bits above its base (regions of gigabytes,
//! which are few) keeps no offsets and is searched in the regions themselves.
//!
//! The index is a cache of the boundaries, and nobody has to say when they change: every
//! answer is checked against the regions themselves ([`RegionIndex::find_each`]), in O(1), and
//! an index found out of date is rebuilt in one linear pass. Boundaries change at most a few times a window
//! (merge, split, schemes, the operations' updates), so it is rebuilt about as often as they do.

use crate::region::Region;

/// Regions per block: 16 offsets are one cache line.
const BLOCK: usize = 16;

#[derive(Debug, Clone, Default)]
pub(crate) struct RegionIndex {
    /// Each region's end less its block's base; 0 throughout a wide block.
    offsets: Vec<u32>,
    /// `levels[0][j]` is the end of the last region in block `j` (the base of block `j + 1`);
    /// each level above holds the last entry of every block of [`BLOCK`] of the level below,
    /// up to one of at most [`BLOCK`] entries: a search reads one or two lines a level.
    levels: Vec<Vec<u64>>,
    /// The base of block 0: the first region's start.
    first: u64,
    /// One bit a block: set where the block is wide (its ends do not fit in offsets).
    wide: Vec<u64>,
}

/// Where a search found no region ending after its address.
const PAST: usize = usize::MAX;

impl RegionIndex {
    #[cfg(test)]
    fn build(regions: &[Region]) -> Self {
        let mut index = RegionIndex::default();
        index.rebuild(regions);
        index
    }

    fn rebuild(&mut self, regions: &[Region]) {
        self.offsets.clear();
        self.wide.clear();
        let mut fences = std::mem::take(&mut self.levels)
            .into_iter()
            .next()
            .unwrap_or_default();
        fences.clear();
        self.first = regions.first().map_or(0, |r| r.start);
        for (j, block) in regions.chunks(BLOCK).enumerate() {
            let base = fences.last().copied().unwrap_or(self.first);
            let last = block[block.len() - 1].end;
            // (Regions out of order, which no pass leaves, make a wide block: the answers are
            // checked against the regions anyway.)
            let fits = block
                .iter()
                .all(|r| r.end >= base && r.end - base <= u64::from(u32::MAX));
            if j % 64 == 0 {
                self.wide.push(0);
            }
            if fits {
                self.offsets
                    .extend(block.iter().map(|r| (r.end - base) as u32));
            } else {
                self.wide[j / 64] |= 1 << (j % 64);
                self.offsets.extend(std::iter::repeat_n(0, block.len()));
            }
            fences.push(last);
        }
        self.levels.push(fences);
        while let Some(below) = self.levels.last().filter(|l| l.len() > BLOCK) {
            let above = below.chunks(BLOCK).map(|b| b[b.len() - 1]).collect();
            self.levels.push(above);
        }
    }

    /// The region of `regions` that holds `addr`, if any, by [`RegionIndex::find_each`].
    #[cfg(test)]
    fn find(&mut self, regions: &[Region], addr: u64) -> Option<usize> {
        let mut found = None;
        let mut regions = regions.to_vec();
        self.find_each(&mut regions, &[addr], |&a| a, |_, i, _| found = Some(i));
        found
    }

    /// The region of each of `items` (sorted by their address, `addr`) in `regions` (sorted,
    /// disjoint), whatever happened to them since the index was built (what a binary search
    /// over them finds): `hit(item, i, region)` for each item whose address region `i` holds,
    /// in order.
    ///
    /// At page granularity over gigabytes each level below the top misses the cache, and a
    /// sample waited for each miss in turn: a sampling interval cost 3x at 4 Mi regions what it
    /// did at 256 Ki. Here the addresses go down the levels together, a few at a time, and
    /// each level first reads the lines every address will search there: the misses of
    /// different samples overlap, and the searches find their lines in cache.
    pub(crate) fn find_each<T>(
        &mut self,
        regions: &mut [Region],
        items: &[T],
        addr: impl Fn(&T) -> u64,
        mut hit: impl FnMut(&T, usize, &mut Region),
    ) {
        const AT_ONCE: usize = 16;
        if self.offsets.len() != regions.len() {
            self.rebuild(regions);
        }
        let mut touched = 0u64;
        for items in items.chunks(AT_ONCE) {
            let mut chunk = [0u64; AT_ONCE];
            for (a, item) in chunk.iter_mut().zip(items) {
                *a = addr(item);
            }
            let chunk = &chunk[..items.len()];
            let mut at = [0usize; AT_ONCE];
            for level in self.levels.iter().rev() {
                for &a in &at[..chunk.len()] {
                    touched ^= line(level, a) ^ line(level, a.saturating_add(BLOCK / 2));
                }
                for (a, &addr) in at.iter_mut().zip(chunk) {
                    *a = descend(level, *a, addr);
                }
            }
            for &a in &at[..chunk.len()] {
                touched ^= u64::from(line(&self.offsets, a));
            }
            for (a, &addr) in at.iter_mut().zip(chunk) {
                *a = self.entry_of(regions, *a, addr);
                touched ^= regions.get(*a).map_or(0, |r| r.end);
            }
            for ((&guess, &addr), item) in at.iter().zip(chunk).zip(items) {
                let mut i = guess;
                if !is_first_ending_after(regions, i, addr) {
                    self.rebuild(regions);
                    i = self.first_ending_after(regions, addr);
                }
                if let Some(r) = regions.get_mut(i).filter(|r| r.start <= addr) {
                    hit(item, i, r);
                }
            }
        }
        std::hint::black_box(touched);
    }

    /// The index of the first region ending after `addr` (the one that may contain it), as the
    /// index last saw the regions (`regions`, as many as it saw, are read in wide blocks only).
    fn first_ending_after(&self, regions: &[Region], addr: u64) -> usize {
        let block_start = self
            .levels
            .iter()
            .rev()
            .fold(0, |at, level| descend(level, at, addr));
        self.entry_of(regions, block_start, addr)
    }

    /// The first region ending after `addr` in the block that starts at region `lo` (where
    /// the levels led for `addr`); past the last region where they led past the end.
    fn entry_of(&self, regions: &[Region], lo: usize, addr: u64) -> usize {
        let hi = lo.saturating_add(BLOCK).min(self.offsets.len());
        if lo >= hi {
            return self.offsets.len();
        }
        let block = lo / BLOCK;
        if self.wide[block / 64] & (1 << (block % 64)) != 0 {
            return lo + regions[lo..hi].partition_point(|r| r.end <= addr);
        }
        let base = if block == 0 {
            self.first
        } else {
            self.levels[0][block - 1]
        };
        // Below the base, every end of the block lies above `addr`; otherwise `addr` is under
        // the block's fence, so within 32 bits of the base.
        let Some(above) = addr.checked_sub(base) else {
            return lo;
        };
        let above = above.min(u64::from(u32::MAX)) as u32;
        lo + self.offsets[lo..hi].partition_point(|&o| o <= above)
    }
}

/// One level of the search: among the entries of `level` from `lo` (a block's start), the
/// first that ends after `addr`, as the start of its block in the level below; [`PAST`] where
/// there is none.
fn descend(level: &[u64], lo: usize, addr: u64) -> usize {
    let hi = lo.saturating_add(BLOCK).min(level.len());
    if lo >= hi {
        return PAST;
    }
    let j = lo + level[lo..hi].partition_point(|&e| e <= addr);
    if j == hi && hi == level.len() {
        return PAST;
    }
    j * BLOCK
}

/// `v[i]`, or the default past the end: a read that brings its cache line in.
fn line<T: Copy + Default>(v: &[T], i: usize) -> T {
    v.get(i).copied().unwrap_or_default()
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
    fn finding_many_at_once_finds_what_one_at_a_time_does() {
        let mut regions: Vec<Region> = (0..5000u64)
            .map(|i| Region::new(i * 10, i * 10 + 7))
            .collect();
        // More addresses than one batch takes, holes and addresses past the end among them;
        // the index first built for other regions.
        let addrs: Vec<u64> = (0..50_100).step_by(3).collect();
        let mut index = RegionIndex::build(&regions[..100]);
        let mut found = Vec::new();
        index.find_each(&mut regions, &addrs, |&a| a, |&a, i, _| found.push((a, i)));
        let want: Vec<(u64, usize)> = addrs
            .iter()
            .filter_map(|&a| plain(&regions, a).map(|i| (a, i)))
            .collect();
        assert_eq!(found, want);
    }

    #[test]
    fn regions_of_gigabytes_are_found_too() {
        // Blocks of 4 GiB regions beside blocks of pages, and a first region far from 0.
        const GIB: u64 = 1 << 30;
        let mut regions: Vec<Region> = (0..40u64)
            .map(|i| Region::new(GIB + i * 4096, GIB + (i + 1) * 4096))
            .collect();
        let mut at = regions.last().unwrap().end;
        for _ in 0..40 {
            regions.push(Region::new(at, at + 4 * GIB + 4096));
            at += 5 * GIB;
        }
        regions.extend((0..40u64).map(|i| Region::new(at + i * 4096, at + (i + 1) * 4096)));
        let mut index = RegionIndex::build(&regions);
        assert!(index.wide.iter().any(|&w| w != 0), "some block is wide");
        let probes = regions
            .iter()
            .flat_map(|r| [r.start.saturating_sub(1), r.start, r.end - 1, r.end])
            .chain([0, u64::MAX]);
        for addr in probes {
            assert_eq!(
                index.find(&regions, addr),
                plain(&regions, addr),
                "address {addr:#x}"
            );
        }
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
