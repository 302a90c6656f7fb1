//! Memory that holds no pages was not accessed: cutting it out of accessed regions before a
//! window is reported.
//!
//! A region counts as accessed when any part of it was seen accessed, so a region that reaches
//! from used memory into a mapping that was never populated (or was paged out, or into a gap
//! between mappings) reports all of it accessed, more than the process even has resident. An
//! access faults a page in, so a page that is absent at the end of a window and holds none of
//! its samples was not accessed in it. Operations that can read residency (vaddr, with
//! `PAGEMAP_SCAN`) hand the absent ranges to [`cut_absent`], which cuts them out of accessed
//! regions within the region budget, largest first, as pieces not accessed. A page that a
//! sample fell in stays, present or not: it was accessed. The parts left between the cuts keep
//! the window's samples that fell in them, and the region's count: whole for accessed-bit
//! sources (the region's claim about them is unchanged), and for sampled sources at most the
//! samples they hold, so that a part without a sample is not reported accessed.

use crate::region::{AddrRange, Region, SampledSpan, align_down, align_up};

/// Cuts the parts of `absent` (sorted, disjoint) that lie in accessed regions of `regions` out
/// of them as regions not accessed, largest first while the region count stays within
/// `max_nr_regions` (counting `others`, the regions of the other targets). `samples` are the
/// window's sample addresses in these regions, sorted: their pages are never cut; `sampled`
/// says that the counts come from them. Only parts of at least `min_sz` (aligned inward to it)
/// are cut. Returns the bytes cut out.
pub fn cut_absent(
    regions: &mut Vec<Region>,
    absent: &[AddrRange],
    samples: &[u64],
    sampled: bool,
    min_sz: u64,
    max_nr_regions: usize,
    others: usize,
) -> u64 {
    let mut budget = max_nr_regions.saturating_sub(regions.len() + others);
    let mut pieces: Vec<Piece> = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        if r.nr_accesses == 0 {
            continue;
        }
        let first = absent.partition_point(|a| a.end <= r.start);
        for a in absent[first..].iter().take_while(|a| a.start < r.end) {
            let clipped = AddrRange::new(a.start.max(r.start), a.end.min(r.end));
            for piece in between_samples(clipped, samples, min_sz) {
                pieces.push(Piece {
                    region: i,
                    range: piece,
                });
            }
        }
    }
    pieces.sort_by_key(|p| std::cmp::Reverse(p.range.size()));
    // A piece inside a region costs two more regions, one at its end one.
    pieces.retain(|&Piece { region, range: p }| {
        let r = &regions[region];
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
    let cut = pieces.iter().map(|p| p.range.size()).sum();
    pieces.sort_unstable_by_key(|p| (p.region, p.range.start));
    let mut out = Vec::with_capacity(regions.len() + 2 * pieces.len());
    let mut next = pieces.iter().peekable();
    for (i, r) in regions.iter().enumerate() {
        if next.peek().is_none_or(|p| p.region != i) {
            out.push(*r);
            continue;
        }
        let mut at = r.start;
        while let Some(p) = next.peek().filter(|p| p.region == i).map(|p| p.range) {
            if p.start > at {
                out.push(kept(r, AddrRange::new(at, p.start), samples, sampled));
            }
            out.push(Region {
                nr_accesses: 0,
                raw_samples: 0,
                read_samples: 0,
                write_samples: 0,
                sampled: SampledSpan::NONE,
                ..piece_of(r, p)
            });
            at = p.end;
            next.next();
        }
        if at < r.end {
            out.push(kept(r, AddrRange::new(at, r.end), samples, sampled));
        }
    }
    *regions = out;
    cut
}

/// An absent part of an accessed region, to be cut out of it.
#[derive(Debug, Clone, Copy)]
struct Piece {
    /// The region's index.
    region: usize,
    range: AddrRange,
}

/// `r`'s statistics over `range`, a part of it.
fn piece_of(r: &Region, range: AddrRange) -> Region {
    Region {
        start: range.start,
        end: range.end,
        ..*r
    }
}

/// A part of `r` that is not cut out: it keeps the window's samples that fell in it, with their
/// span (and its share of their read and write samples), and the region's count (for a
/// `sampled` source, at most its samples).
fn kept(r: &Region, range: AddrRange, samples: &[u64], sampled: bool) -> Region {
    let lo = samples.partition_point(|&a| a < range.start);
    let hi = samples.partition_point(|&a| a < range.end);
    let inside = &samples[lo..hi];
    let raw_samples = inside.len().min(u32::MAX as usize) as u32;
    let (read_samples, write_samples) = r.kind_shares(raw_samples);
    let mut piece = Region {
        raw_samples,
        read_samples,
        write_samples,
        sampled: inside
            .first()
            .zip(inside.last())
            .map(|(&a, &b)| AddrRange::new(a, b + 1))
            .into(),
        ..piece_of(r, range)
    };
    if sampled {
        piece.rest_count_on_samples();
    }
    piece
}

/// The parts of `range`, aligned inward to `min_sz` and at least that large, that hold no page
/// (of `min_sz`) that a sample fell in.
fn between_samples(range: AddrRange, samples: &[u64], min_sz: u64) -> Vec<AddrRange> {
    let mut parts = Vec::new();
    let mut at = align_up(range.start, min_sz);
    let end = align_down(range.end, min_sz);
    let first = samples.partition_point(|&a| a < at);
    for &s in samples[first..].iter().take_while(|&&a| a < end) {
        let page = align_down(s, min_sz);
        if page > at {
            parts.push(AddrRange::new(at, page));
        }
        at = at.max(page + min_sz);
    }
    if end > at {
        parts.push(AddrRange::new(at, end));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    fn accessed(start: u64, end: u64) -> Region {
        Region {
            nr_accesses: 5,
            age: 3,
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
    fn absent_memory_is_cut_out_and_the_rest_keeps_its_samples_and_the_count_they_support() {
        // Samples in pages 10 and 19 of 0..100; pages 40..60 and 90..100 hold nothing.
        let samples = [10 * P + 8, 19 * P + 8];
        let mut regions = vec![
            Region {
                raw_samples: 2,
                read_samples: 2,
                write_samples: 1,
                ..accessed(0, 100)
            },
            Region::new(100 * P, 200 * P),
        ];
        let absent = [range(40, 60), range(90, 150)];
        let before = regions.clone();
        let cut = cut_absent(&mut regions, &absent, &samples, true, P, 10, 0);
        assert_eq!(
            cut,
            30 * P,
            "the idle region's absent pages are not its to cut"
        );
        // A sampled source's count rests on samples: the part without one was not seen
        // accessed, and the part with two in at most two intervals.
        assert_eq!(
            pages(&regions),
            [
                (0, 40, 2, 2),
                (40, 60, 0, 0),
                (60, 90, 0, 0),
                (90, 100, 0, 0),
                (100, 200, 0, 0)
            ]
        );
        // An accessed-bit source's region claim holds for every part left.
        let mut checked = before;
        cut_absent(&mut checked, &absent, &samples, false, P, 10, 0);
        assert_eq!(
            pages(&checked),
            [
                (0, 40, 5, 2),
                (40, 60, 0, 0),
                (60, 90, 5, 0),
                (90, 100, 0, 0),
                (100, 200, 0, 0)
            ]
        );
        assert!(regions[..4].iter().all(|r| r.age == 3));
        let kinds: Vec<_> = regions
            .iter()
            .map(|r| (r.read_samples, r.write_samples))
            .collect();
        assert_eq!(
            kinds,
            [(2, 1), (0, 0), (0, 0), (0, 0), (0, 0)],
            "reads and writes go with the samples"
        );
        assert_eq!(
            regions[0].sampled.get(),
            Some(AddrRange::new(10 * P + 8, 19 * P + 9))
        );
        assert_eq!(regions[2].sampled.get(), None);
    }

    #[test]
    fn pages_a_sample_fell_in_are_never_cut_even_if_absent_now() {
        // Pages 5..30 absent, but samples fell in pages 12 and 13 (the program touched them,
        // then they went).
        let samples = [12 * P + 1, 13 * P + 2, 70 * P];
        let mut regions = vec![accessed(0, 100)];
        let cut = cut_absent(&mut regions, &[range(5, 30)], &samples, true, P, 10, 0);
        assert_eq!(cut, 23 * P);
        assert_eq!(
            pages(&regions),
            [
                (0, 5, 0, 0),
                (5, 12, 0, 0),
                (12, 14, 2, 2),
                (14, 30, 0, 0),
                (30, 100, 1, 1)
            ]
        );
    }

    #[test]
    fn the_largest_pieces_go_first_within_the_region_bound() {
        let mut regions = vec![accessed(0, 100), accessed(100, 200)];
        // Room for two more regions: the 30-page piece inside the second region takes both.
        let absent = [range(10, 20), range(130, 160)];
        let cut = cut_absent(&mut regions, &absent, &[], false, P, 4, 0);
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
        let mut full = vec![accessed(0, 100)];
        assert_eq!(
            cut_absent(&mut full, &[range(10, 20)], &[], false, P, 1, 0),
            0
        );
        // A piece at a region's end costs one region only.
        let mut edge = vec![accessed(0, 100)];
        assert_eq!(
            cut_absent(&mut edge, &[range(80, 120)], &[], false, P, 2, 0),
            20 * P
        );
        assert_eq!(pages(&edge), [(0, 80, 5, 0), (80, 100, 0, 0)]);
    }

    #[test]
    fn pieces_smaller_than_the_minimum_region_are_left() {
        let mut regions = vec![accessed(0, 100)];
        let absent = [AddrRange::new(10 * P + 1, 11 * P + 5)];
        assert_eq!(cut_absent(&mut regions, &absent, &[], false, P, 10, 0), 0);
        assert_eq!(regions.len(), 1);
    }
}
