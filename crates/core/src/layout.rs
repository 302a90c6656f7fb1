//! Building and updating a target's regions from address ranges
//! (docs/algorithms.md#address-ranges): the three-regions construction from a list of mappings,
//! `set_regions`, and the even split.

use crate::region::{AddrRange, Region, align_down, align_up};
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LayoutError {
    #[error("need at least two gaps between mappings to build three regions")]
    TooFewGaps,
    #[error(
        "address ranges must be non-empty, sorted and non-overlapping (range {:#x}-{:#x})",
        .0.start,
        .0.end
    )]
    BadRanges(AddrRange),
    #[error("cannot split into {0} pieces")]
    BadPieceCount(u64),
}

/// `__damon_va_three_regions`: the span of `mappings` (sorted by address) minus its two largest
/// gaps, as three ranges aligned up to `min_sz`. Excludes e.g. heap-to-mmap and mmap-to-stack.
pub fn three_regions(mappings: &[AddrRange], min_sz: u64) -> Result<[AddrRange; 3], LayoutError> {
    let first = mappings.first().ok_or(LayoutError::TooFewGaps)?;
    let last = mappings.last().ok_or(LayoutError::TooFewGaps)?;
    let mut gaps = [AddrRange::new(0, 0); 2]; // the largest, then the second largest
    for pair in mappings.windows(2) {
        let gap = AddrRange::new(pair[0].end, pair[1].start);
        // Strict `>`: among equal gaps the earliest wins.
        if gap.size() > gaps[0].size() {
            gaps = [gap, gaps[0]];
        } else if gap.size() > gaps[1].size() {
            gaps[1] = gap;
        }
    }
    if gaps[0].size() == 0 || gaps[1].size() == 0 {
        return Err(LayoutError::TooFewGaps);
    }
    gaps.sort();
    let a = |x| align_up(x, min_sz);
    Ok([
        AddrRange::new(a(first.start), a(gaps[0].start)),
        AddrRange::new(a(gaps[0].end), a(gaps[1].start)),
        AddrRange::new(a(gaps[1].end), a(last.end)),
    ])
}

/// Maximal runs of adjacent ranges (sorted), each merged into one range.
pub fn groups(ranges: &[AddrRange]) -> Vec<AddrRange> {
    let mut out: Vec<AddrRange> = Vec::new();
    for m in ranges {
        match out.last_mut() {
            Some(last) if last.end == m.start => last.end = m.end,
            _ => out.push(*m),
        }
    }
    out
}

/// The ranges initial regions cover for an address space of `mappings` (sorted): the three
/// regions when there are two gaps, as vaddr does, else one range per group of adjacent
/// mappings (so that a layout without two gaps is still monitored). Ranges that alignment to
/// `min_sz` empties are left out.
pub fn initial_ranges(mappings: &[AddrRange], min_sz: u64) -> Vec<AddrRange> {
    match three_regions(mappings, min_sz) {
        Ok(three) => three.into_iter().filter(|r| r.start < r.end).collect(),
        Err(_) => groups(mappings),
    }
}

/// `damon_set_regions` (NEW): make `regions` cover exactly `ranges` (sorted, non-overlapping).
/// Regions that intersect a range keep their statistics and are trimmed or extended; holes
/// between them are filled with fresh regions; regions outside every range are dropped.
pub fn set_regions(
    regions: &mut Vec<Region>,
    ranges: &[AddrRange],
    min_sz: u64,
) -> Result<(), LayoutError> {
    let aligned: Vec<AddrRange> = ranges
        .iter()
        .map(|r| AddrRange::new(align_down(r.start, min_sz), align_up(r.end, min_sz)))
        .collect();
    let mut prev_end = 0;
    for (i, r) in aligned.iter().enumerate() {
        if r.start >= r.end || (i > 0 && prev_end > r.start) {
            return Err(LayoutError::BadRanges(ranges[i]));
        }
        prev_end = r.end;
    }

    let old = std::mem::take(regions);
    let mut out = Vec::with_capacity(old.len() + aligned.len() * 2);
    let mut cursor = 0usize; // first old region not yet consumed
    for (raw, rg) in ranges.iter().zip(&aligned) {
        // Old regions wholly before this range intersect no range (ranges are sorted): dropped.
        while cursor < old.len() && old[cursor].end <= raw.start {
            cursor += 1;
        }
        let first = cursor;
        while cursor < old.len() && old[cursor].start < raw.end {
            cursor += 1;
        }
        let hits = &old[first..cursor];
        if hits.is_empty() {
            out.push(Region::new(rg.start, rg.end));
            continue;
        }
        let mut expect = rg.start;
        for (i, r) in hits.iter().enumerate() {
            let mut r = *r;
            if i == 0 {
                r.start = rg.start;
            }
            if i == hits.len() - 1 {
                r.end = rg.end;
            }
            if r.start > expect {
                out.push(Region::new(expect, r.start));
            }
            expect = r.end;
            out.push(r);
        }
        // A region reaching into the next range was trimmed to this one, as upstream does; the
        // next range gets a fresh region there.
    }
    *regions = out;
    Ok(())
}

/// `damon_va_evenly_split_region` (fixed version): `n` pieces of equal, `min_sz`-aligned width;
/// the last piece absorbs the remainder.
pub fn evenly_split(region: Region, n: u64, min_sz: u64) -> Result<Vec<Region>, LayoutError> {
    if n == 0 {
        return Err(LayoutError::BadPieceCount(n));
    }
    if n == 1 {
        return Ok(vec![region]);
    }
    let piece = align_down(region.size() / n, min_sz);
    if piece == 0 {
        return Err(LayoutError::BadPieceCount(n));
    }
    let mut pieces: Vec<Region> = (0..n)
        .map(|i| {
            let mut r = region;
            r.start = region.start + i * piece;
            r.end = r.start + piece;
            r
        })
        .collect();
    if let Some(last) = pieces.last_mut() {
        last.end = region.end;
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Bounds = &'static [(u64, u64)];

    fn ranges(v: &[(u64, u64)]) -> Vec<AddrRange> {
        v.iter().map(|&(s, e)| AddrRange::new(s, e)).collect()
    }

    fn bounds(regions: &[Region]) -> Vec<(u64, u64)> {
        regions.iter().map(|r| (r.start, r.end)).collect()
    }

    /// Upstream's kunit test `damon_test_set_regions`, all five NEW cases: (old regions, new
    /// ranges, expected regions).
    #[test]
    fn damon_test_set_regions() {
        let cases: [(Bounds, Bounds, Bounds); 5] = [
            // The first regions of a target that had none.
            (&[], &[(5, 15), (15, 25)], &[(5, 15), (15, 25)]),
            // Regions that intersect no new range are removed.
            //
            // old:    [4,   16)       [24,  32)
            // new:              [18, 23)
            // expect:           [18, 23)
            (&[(4, 16), (24, 32)], &[(18, 23)], &[(18, 23)]),
            // Holes are filled up with new regions.
            //
            // old:    [4,   16)       [24,     32)
            // new:      [8,                28)
            // expect:   [8, 16)[16,   24)[24, 28)
            (
                &[(4, 16), (24, 32)],
                &[(8, 28)],
                &[(8, 16), (16, 24), (24, 28)],
            ),
            // New regions are appended after the last one.
            //
            // old:    [0, 4)[4,    17)
            // new:    [0,       15)     [25, 40)
            // expect: [0, 4)[4, 15)     [25, 40)
            (
                &[(0, 4), (4, 17)],
                &[(0, 15), (25, 40)],
                &[(0, 4), (4, 15), (25, 40)],
            ),
            // New regions are inserted between old ones.
            //
            // old:    [0, 4)                      [42,    52)
            // new:    [0,       15)     [25, 40)    [44, 50)
            // expect: [0,       15)     [25, 40)    [44, 50)
            (
                &[(0, 4), (42, 52)],
                &[(0, 15), (25, 40), (44, 50)],
                &[(0, 15), (25, 40), (44, 50)],
            ),
        ];
        for (old, new, want) in cases {
            let mut regions: Vec<Region> = ranges(old)
                .iter()
                .map(|r| Region::new(r.start, r.end))
                .collect();
            set_regions(&mut regions, &ranges(new), 1).unwrap();
            assert_eq!(bounds(&regions), want, "old {old:?} new {new:?}");
        }
    }

    #[test]
    fn set_regions_keeps_statistics_of_survivors() {
        let mut regions = vec![
            Region {
                nr_accesses: 7,
                age: 3,
                ..Region::new(4, 16)
            },
            Region {
                nr_accesses: 2,
                age: 9,
                ..Region::new(24, 32)
            },
        ];
        set_regions(&mut regions, &ranges(&[(8, 28)]), 1).unwrap();
        let stats: Vec<(u32, u32)> = regions.iter().map(|r| (r.nr_accesses, r.age)).collect();
        // The hole [16, 24) is filled with a fresh region; the survivors keep their statistics.
        assert_eq!(stats, [(7, 3), (0, 0), (2, 9)]);
        assert!(set_regions(&mut regions, &ranges(&[(10, 5)]), 1).is_err());
        assert!(set_regions(&mut regions, &ranges(&[(0, 10), (5, 20)]), 1).is_err());
    }

    #[test]
    fn initial_ranges_fall_back_to_groups_without_two_gaps() {
        let two_gaps = ranges(&[(0, 10), (10, 20), (100, 110), (200, 210)]);
        assert_eq!(
            initial_ranges(&two_gaps, 1),
            ranges(&[(0, 20), (100, 110), (200, 210)])
        );
        let one_gap = ranges(&[(0, 10), (10, 20), (100, 110)]);
        assert_eq!(initial_ranges(&one_gap, 1), ranges(&[(0, 20), (100, 110)]));
    }

    /// Upstream's kunit test `damon_test_three_regions_in_vmas`. A process's mappings become
    /// three regions that cover every mapping but leave out the two largest unmapped gaps:
    /// normally the gaps between the heap and the mmap()-ed area and between that and the
    /// stack, huge and never accessed, so covering them would only waste regions.
    ///
    /// mappings: 10-20-25, 200-210-220, 300-305, 307-330
    /// gaps:     25-200 (175), 220-300 (80), 305-307 (2): the first two are left out
    /// expect:   10-25, 200-220, 300-330
    #[test]
    fn damon_test_three_regions_in_vmas() {
        let vmas = ranges(&[
            (10, 20),
            (20, 25),
            (200, 210),
            (210, 220),
            (300, 305),
            (307, 330),
        ]);
        let three = three_regions(&vmas, 1).unwrap();
        assert_eq!(
            three,
            [
                AddrRange::new(10, 25),
                AddrRange::new(200, 220),
                AddrRange::new(300, 330)
            ]
        );
        assert_eq!(
            three_regions(&ranges(&[(0, 10), (20, 30)]), 1),
            Err(LayoutError::TooFewGaps)
        );
    }

    /// Upstream's kunit tests `damon_test_apply_three_regions1..4`: the monitored regions
    /// follow a process's changed mappings, simplified to three regions, by `set_regions`.
    /// Each case starts from the regions 10-20-30, 50-55-57-59, 70-80-90-100.
    #[test]
    fn damon_test_apply_three_regions() {
        let initial = [
            (10, 20),
            (20, 30),
            (50, 55),
            (55, 57),
            (57, 59),
            (70, 80),
            (80, 90),
            (90, 100),
        ];
        let cases: [(Bounds, Bounds); 4] = [
            // 1: the most common case, the three regions only slightly changed. The regions
            // move their boundaries (10-20-30, 50-55, 70-80, 90-100) to fit, and those now
            // outside the three (55-57-59) are removed: 55-57 only touches 45-55.
            //
            // new:    5-27, 45-55, 73-104
            // expect: 5-20-27, 45-55, 73-80-90-104
            (
                &[(5, 27), (45, 55), (73, 104)],
                &[(5, 20), (20, 27), (45, 55), (73, 80), (80, 90), (90, 104)],
            ),
            // 2: a slightly bigger change: the second region now needs two regions (50-55,
            // 57-59) removed.
            //
            // new:    5-27, 56-57, 65-104
            // expect: 5-20-27, 56-57, 65-80-90-104
            (
                &[(5, 27), (56, 57), (65, 104)],
                &[(5, 20), (20, 27), (56, 57), (65, 80), (80, 90), (90, 104)],
            ),
            // 3: a big change: the second region was freed and mapped elsewhere (50-59 ->
            // 61-63). The regions of the old one (50-55-57-59) are removed and a region
            // covering the new one is created.
            //
            // new:    5-27, 61-63, 65-104
            // expect: 5-20-27, 61-63, 65-80-90-104
            (
                &[(5, 27), (61, 63), (65, 104)],
                &[(5, 20), (20, 27), (61, 63), (65, 80), (80, 90), (90, 104)],
            ),
            // 4: another big change: the second and third regions (50-59, 70-100) were freed
            // and mapped elsewhere (30-32, 65-68): their regions are removed and new ones
            // cover the new second and third regions.
            //
            // new:    5-7, 30-32, 65-68
            // expect: 5-7, 30-32, 65-68
            (&[(5, 7), (30, 32), (65, 68)], &[(5, 7), (30, 32), (65, 68)]),
        ];
        for (i, (three, want)) in cases.into_iter().enumerate() {
            let mut regions: Vec<Region> =
                initial.iter().map(|&(s, e)| Region::new(s, e)).collect();
            set_regions(&mut regions, &ranges(three), 1).unwrap();
            assert_eq!(bounds(&regions), want, "apply_three_regions{}", i + 1);
        }
    }

    /// Upstream's kunit test `damon_test_split_evenly` (the NULL case has no Rust equivalent):
    /// pieces of `(end - start) / n`, the last taking the remainder; no pieces, or pieces
    /// smaller than the minimum region size, fail and leave the region as it was.
    #[test]
    fn damon_test_split_evenly() {
        // Zero pieces.
        assert!(evenly_split(Region::new(0, 100), 0, 1).is_err());
        let ok = |s, e, n| bounds(&evenly_split(Region::new(s, e), n, 1).unwrap());
        // old:    [0,                          100)
        // expect: [0, 10)[10, 20) ... [80, 90)[90, 100)
        let want: Vec<(u64, u64)> = (0..10).map(|i| (i * 10, i * 10 + 10)).collect();
        assert_eq!(ok(0, 100, 10), want);
        // Pieces of 54 / 5 = 10, the last with the remainder.
        //
        // old:    [5,                          59)
        // expect: [5, 15)[15, 25)[25, 35)[35, 45)[45, 59)
        assert_eq!(
            ok(5, 59, 5),
            [(5, 15), (15, 25), (25, 35), (35, 45), (45, 59)]
        );
        // One piece: the region itself.
        assert_eq!(ok(4, 6, 1), [(4, 6)]);
        // old: [0, 3)  expect: [0, 1)[1, 3)
        assert_eq!(ok(0, 3, 2), [(0, 1), (1, 3)]);
        // A piece of 1 / 2 = 0 bytes.
        assert!(evenly_split(Region::new(5, 6), 2, 1).is_err());
    }
}
