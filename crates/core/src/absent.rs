//! Memory that holds no pages was not accessed: cutting it out of accessed regions before a
//! window is reported.
//!
//! A region counts as accessed when any part of it was seen accessed, so a region that reaches
//! from used memory into a mapping that was never populated (or was paged out) reports all of
//! it accessed, more than the process even has resident. An access faults a page in, so a page
//! that is absent at the end of a window and got none of its samples was not accessed in it.
//! Operations that can read residency (vaddr, with `PAGEMAP_SCAN`) hand the absent ranges to
//! [`cut_absent`], which cuts them out of accessed regions within the region budget, largest
//! first, as pieces not accessed. The parts of a region left on either side keep its count: the
//! region's claim about them is unchanged.

use crate::region::{AddrRange, Region, align_down, align_up};

/// Cuts the parts of `absent` (sorted, disjoint) that lie in accessed regions of `regions` out
/// of them as regions not accessed, largest first while the region count stays within
/// `max_nr_regions` (counting `others`, the regions of the other targets). Only parts of at
/// least `min_sz` (aligned inward to it) and outside the window's sampled span are cut: a
/// sampled address was accessed, even if its page has gone since. Returns the bytes cut out.
pub fn cut_absent(
    regions: &mut Vec<Region>,
    absent: &[AddrRange],
    min_sz: u64,
    max_nr_regions: usize,
    others: usize,
) -> u64 {
    let mut budget = max_nr_regions.saturating_sub(regions.len() + others);
    // (bytes, region index, piece)
    let mut pieces: Vec<(u64, usize, AddrRange)> = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        if r.nr_accesses == 0 {
            continue;
        }
        let first = absent.partition_point(|a| a.end <= r.start);
        for a in absent[first..].iter().take_while(|a| a.start < r.end) {
            let clipped = AddrRange::new(a.start.max(r.start), a.end.min(r.end));
            for piece in outside_span(clipped, r.sampled_within(), min_sz) {
                pieces.push((piece.size(), i, piece));
            }
        }
    }
    pieces.sort_by_key(|p| std::cmp::Reverse(p.0));
    // A piece inside a region costs two more regions, one at its end one.
    pieces.retain(|&(_, i, p)| {
        let r = &regions[i];
        let cost = usize::from(p.start > r.start) + usize::from(p.end < r.end);
        let fits = cost <= budget;
        if fits {
            budget -= cost;
        }
        fits
    });
    if pieces.is_empty() {
        return 0;
    }
    let cut = pieces.iter().map(|p| p.0).sum();
    pieces.sort_unstable_by_key(|&(_, i, p)| (i, p.start));
    let mut out = Vec::with_capacity(regions.len() + 2 * pieces.len());
    let mut next = pieces.iter().peekable();
    for (i, r) in regions.iter().enumerate() {
        let mut at = r.start;
        while let Some(&&(_, _, p)) = next.peek().filter(|&&&(_, pi, _)| pi == i) {
            if p.start > at {
                out.push(kept(r, AddrRange::new(at, p.start)));
            }
            out.push(Region {
                nr_accesses: 0,
                raw_samples: 0,
                sampled: None,
                ..piece_of(r, p)
            });
            at = p.end;
            next.next();
        }
        if at == r.start {
            out.push(*r);
        } else if at < r.end {
            out.push(kept(r, AddrRange::new(at, r.end)));
        }
    }
    *regions = out;
    cut
}

/// `r`'s statistics over `range`, a part of it.
fn piece_of(r: &Region, range: AddrRange) -> Region {
    Region {
        start: range.start,
        end: range.end,
        sampling_addr: range.start,
        ..*r
    }
}

/// A part of `r` that is not cut out: it keeps the region's count, and its samples if the
/// sampled span lies in it (the span lies in one part: cut pieces avoid it).
fn kept(r: &Region, range: AddrRange) -> Region {
    let span = r.sampled_within();
    let holds_span = span.is_some_and(|s| range.start <= s.start && s.end <= range.end);
    Region {
        raw_samples: if holds_span { r.raw_samples } else { 0 },
        sampled: if holds_span { span } else { None },
        ..piece_of(r, range)
    }
}

/// The parts of `range` outside `span` (aligned outward to `min_sz`), aligned inward to
/// `min_sz`, that are at least `min_sz` large.
fn outside_span(range: AddrRange, span: Option<AddrRange>, min_sz: u64) -> Vec<AddrRange> {
    let parts = match span {
        None => vec![range],
        Some(s) => {
            let (lo, hi) = (align_down(s.start, min_sz), align_up(s.end, min_sz));
            [
                AddrRange::new(range.start, range.end.min(lo)),
                AddrRange::new(range.start.max(hi), range.end),
            ]
            .into_iter()
            .filter(|p| p.start < p.end)
            .collect()
        }
    };
    parts
        .into_iter()
        .map(|p| AddrRange::new(align_up(p.start, min_sz), align_down(p.end, min_sz)))
        .filter(|p| p.start < p.end && p.size() >= min_sz)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    fn accessed(start: u64, end: u64, span: Option<(u64, u64)>) -> Region {
        Region {
            nr_accesses: 5,
            age: 3,
            raw_samples: if span.is_some() { 7 } else { 0 },
            sampled: span.map(|(s, e)| AddrRange::new(s * P, e * P)),
            ..Region::new(start * P, end * P)
        }
    }

    fn pages(regions: &[Region]) -> Vec<(u64, u64, u32, u32)> {
        regions
            .iter()
            .map(|r| (r.start / P, r.end / P, r.nr_accesses, r.raw_samples))
            .collect()
    }

    fn range(s: u64, e: u64) -> AddrRange {
        AddrRange::new(s * P, e * P)
    }

    #[test]
    fn absent_memory_beside_the_samples_is_cut_out_and_the_rest_keeps_its_count() {
        // Samples in pages 10..20 of 0..100; pages 40..60 and 90..100 hold nothing.
        let mut regions = vec![
            accessed(0, 100, Some((10, 20))),
            Region::new(100 * P, 200 * P),
        ];
        let cut = cut_absent(&mut regions, &[range(40, 60), range(90, 150)], P, 10, 0);
        assert_eq!(
            cut,
            30 * P,
            "the idle region's absent pages are not its to cut"
        );
        assert_eq!(
            pages(&regions),
            [
                (0, 40, 5, 7),
                (40, 60, 0, 0),
                (60, 90, 5, 0),
                (90, 100, 0, 0),
                (100, 200, 0, 0)
            ]
        );
        assert!(regions.iter().all(|r| r.age == 3 || r.start >= 100 * P));
        assert_eq!(regions[0].sampled, Some(range(10, 20)));
        assert_eq!(regions[2].sampled, None);
    }

    #[test]
    fn sampled_pages_are_never_cut_even_if_absent_now() {
        let mut regions = vec![accessed(0, 100, Some((10, 20)))];
        let cut = cut_absent(&mut regions, &[range(5, 30)], P, 10, 0);
        assert_eq!(cut, 15 * P);
        assert_eq!(
            pages(&regions),
            [
                (0, 5, 5, 0),
                (5, 10, 0, 0),
                (10, 20, 5, 7),
                (20, 30, 0, 0),
                (30, 100, 5, 0)
            ]
        );
    }

    #[test]
    fn the_largest_pieces_go_first_within_the_region_bound() {
        let mut regions = vec![accessed(0, 100, None), accessed(100, 200, None)];
        // Room for two more regions: the 30-page piece inside the second region takes both.
        let cut = cut_absent(&mut regions, &[range(10, 20), range(130, 160)], P, 4, 0);
        assert_eq!(cut, 30 * P);
        assert_eq!(
            pages(&regions),
            [
                (0, 100, 5, 0),
                (100, 130, 5, 0),
                (130, 160, 0, 0),
                (160, 200, 5, 0)
            ]
        );
        // No room at all: nothing is cut.
        let mut full = vec![accessed(0, 100, None)];
        assert_eq!(cut_absent(&mut full, &[range(10, 20)], P, 1, 0), 0);
        // A piece at a region's end costs one region only.
        let mut edge = vec![accessed(0, 100, None)];
        assert_eq!(cut_absent(&mut edge, &[range(80, 120)], P, 2, 0), 20 * P);
        assert_eq!(pages(&edge), [(0, 80, 5, 0), (80, 100, 0, 0)]);
    }

    #[test]
    fn pieces_smaller_than_the_minimum_region_are_left() {
        let mut regions = vec![accessed(0, 100, None)];
        let absent = [AddrRange::new(10 * P + 1, 11 * P + 5)];
        assert_eq!(cut_absent(&mut regions, &absent, P, 10, 0), 0);
        assert_eq!(regions.len(), 1);
    }
}
