//! Probing idle memory: where the guided adjustment cuts regions that were not seen accessed
//! (accessed-bit sources), so that the next window's checks find the hot memory that DAMON's
//! random cuts leave hidden in large idle regions (docs/algorithms.md#guided).
//!
//! An accessed-bit source checks one random page per region per sampling interval, so a check
//! of an idle region of `s` bytes finds a hot area of `h` bytes inside it with probability
//! `h / s`. Upstream merges idle neighbours back up to a tenth of the address space every
//! window and cuts them at random 10–90 % points: a 64 MiB hot area in a 1 TiB space sits in a
//! region of about 100 GiB, its checks find it once in tens of windows, and what they find is
//! averaged away. The guided adjustment keeps where accesses were seen and cuts there
//! ([`crate::adjust::split_at_sampled_extents`]); this module spends what is left of the region
//! bound, after the window's reset, on the idle memory around:
//!
//! - **Ladders.** Next to every region seen accessed, its idle neighbour is cut at distances of
//!   1, 4, 16, ... minimum region sizes from the shared edge (up to the middle when both its
//!   neighbours were seen). A hot area that goes on past the edge fills the pieces up to where
//!   it ends: the next window sees them accessed and merges them into the region, and sees the
//!   piece it ends in partly accessed, which its accessed span then cuts. An edge is found in a
//!   window or two, at page resolution, however large the idle neighbour. The nearest rungs of
//!   all ladders come first, within half of what the region bound leaves.
//! - **Exploration.** Up to a quarter ([`EXPLORE_SHARE`]) of the region bound, within what
//!   the ladders leave, cuts the largest idle regions into equal pieces (of the smallest size
//!   that this many cuts reach): a hot area of `h` bytes that nothing led to yet is found in
//!   about `s / (20 h)` windows in pieces of `s` bytes checked 20 times a window, rather than
//!   in regions of a tenth of memory.
//!
//! Pieces that stay idle merge back at the next window's merge, as DAMON's random pieces do, so
//! reports see the same few idle regions; only the checks of the window grow, within the bound
//! that the user set for them.

use crate::adjust::insert_cuts;
use crate::region::{Region, Target};

/// Each rung of a ladder is this many times as far from the edge as the one before.
pub const LADDER_RATIO: u64 = 4;

/// Exploration spends at most the region bound divided by this on cuts of idle memory.
pub const EXPLORE_SHARE: usize = 4;

/// Cuts idle regions (not seen accessed in the window just reset: `last_nr_accesses == 0`) of
/// `targets` by ladders and exploration, within `max_nr_regions`; every cut is aligned to
/// `min_sz`.
pub fn probe_idle(targets: &mut [Target], max_nr_regions: u32, min_sz: u64) {
    let max = max_nr_regions as usize;
    let nr: usize = targets.iter().map(Target::nr_regions).sum();
    let ladder_budget = max.saturating_sub(nr) / 2;
    let laddered = cut_ladders(targets, ladder_budget, min_sz);
    let explore_budget = (max / EXPLORE_SHARE).min(max.saturating_sub(nr + laddered));
    explore(targets, explore_budget, min_sz);
}

fn idle(r: &Region) -> bool {
    r.last_nr_accesses == 0
}

/// A cut of a ladder: `rung` steps from the seen edge (the nearest first, as the fields' order
/// sorts), at `at` in target `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Rung {
    rung: u32,
    target: usize,
    at: u64,
}

/// Cuts at most `budget` rungs, the nearest first; returns how many.
fn cut_ladders(targets: &mut [Target], budget: usize, min_sz: u64) -> usize {
    if budget == 0 {
        return 0;
    }
    let mut rungs: Vec<Rung> = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let regions = &t.regions;
        for (i, r) in regions.iter().enumerate() {
            if !idle(r) || r.size() < 2 * min_sz {
                continue;
            }
            let seen_left = i > 0 && regions[i - 1].end == r.start && !idle(&regions[i - 1]);
            let seen_right = regions
                .get(i + 1)
                .is_some_and(|n| n.start == r.end && !idle(n));
            // From both edges, each ladder stops at the middle.
            let reach = if seen_left && seen_right {
                r.size() / 2
            } else {
                r.size()
            };
            let mut distance = min_sz;
            let mut rung = 0;
            while distance < reach {
                if seen_left {
                    rungs.push(Rung {
                        rung,
                        target: ti,
                        at: r.start + distance,
                    });
                }
                if seen_right {
                    rungs.push(Rung {
                        rung,
                        target: ti,
                        at: r.end - distance,
                    });
                }
                rung += 1;
                distance = match distance.checked_mul(LADDER_RATIO) {
                    Some(d) => d,
                    None => break,
                };
            }
        }
    }
    if rungs.is_empty() {
        return 0;
    }
    rungs.sort_unstable();
    rungs.truncate(budget);
    rungs.sort_unstable_by_key(|c| (c.target, c.at));
    rungs.dedup_by_key(|c| (c.target, c.at));
    let cuts = rungs.len();
    for target_rungs in rungs.chunk_by(|a, b| a.target == b.target) {
        let at: Vec<u64> = target_rungs.iter().map(|c| c.at).collect();
        insert_cuts(&mut targets[target_rungs[0].target].regions, &at);
    }
    cuts
}

/// How many pieces an idle region of `size` bytes becomes with pieces of at most `piece`
/// bytes, each at least `min_sz`.
fn pieces(size: u64, piece: u64, min_sz: u64) -> u64 {
    size.div_ceil(piece).min(size / min_sz).max(1)
}

/// Cuts the largest idle regions into equal pieces, spending at most `budget` cuts.
fn explore(targets: &mut [Target], budget: usize, min_sz: u64) {
    if budget == 0 {
        return;
    }
    let sizes = || {
        targets
            .iter()
            .flat_map(|t| t.regions.iter())
            .filter(|r| idle(r))
            .map(Region::size)
    };
    let cuts_with = |piece: u64| -> u64 { sizes().map(|s| pieces(s, piece, min_sz) - 1).sum() };
    let Some(largest) = sizes().max() else {
        return;
    };
    // The smallest piece size whose cuts fit the budget (cuts only shrink as pieces grow).
    let (mut lo, mut hi) = (min_sz, largest);
    if cuts_with(hi) > budget as u64 {
        return;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if cuts_with(mid) <= budget as u64 {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let piece = hi;
    for t in targets.iter_mut() {
        let mut at = Vec::new();
        for r in t.regions.iter().filter(|r| idle(r)) {
            let k = pieces(r.size(), piece, min_sz);
            let width = (r.size() / k) / min_sz * min_sz;
            at.extend((1..k).map(|i| r.start + i * width));
        }
        if !at.is_empty() {
            insert_cuts(&mut t.regions, &at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::AddrRange;

    const P: u64 = 4096;

    fn target(regions: &[(u64, u64, u32)]) -> Target {
        Target {
            pid: None,
            regions: regions
                .iter()
                .map(|&(s, e, last)| Region {
                    last_nr_accesses: last,
                    ..Region::new(s * P, e * P)
                })
                .collect(),
        }
    }

    fn starts(t: &Target) -> Vec<u64> {
        t.regions.iter().map(|r| r.start / P).collect()
    }

    #[test]
    fn ladders_climb_away_from_accessed_memory_nearest_rungs_first() {
        // Pages 100..110 were seen accessed; 0..100 and 110..1000 were not.
        let mut targets = [target(&[(0, 100, 0), (100, 110, 20), (110, 1000, 0)])];
        let cut = cut_ladders(&mut targets, 100, P);
        assert_eq!(
            starts(&targets[0]),
            [0, 36, 84, 96, 99, 100, 110, 111, 114, 126, 174, 366],
            "rungs 1, 4, 16, 64, 256 pages from each edge, within each neighbour"
        );
        assert_eq!(cut, 9);
        // A budget of 4: the two nearest rungs of both ladders.
        let mut targets = [target(&[(0, 100, 0), (100, 110, 20), (110, 1000, 0)])];
        assert_eq!(cut_ladders(&mut targets, 4, P), 4);
        assert_eq!(starts(&targets[0]), [0, 96, 99, 100, 110, 111, 114]);
    }

    #[test]
    fn a_gap_between_accessed_regions_is_laddered_from_both_ends_to_its_middle() {
        let mut targets = [target(&[(0, 10, 5), (10, 50, 0), (50, 60, 5)])];
        cut_ladders(&mut targets, 100, P);
        assert_eq!(starts(&targets[0]), [0, 10, 11, 14, 26, 34, 46, 49, 50]);
        // Not next to anything accessed, or in a hole: nothing to climb from.
        let mut targets = [Target {
            pid: None,
            regions: vec![
                Region {
                    last_nr_accesses: 3,
                    ..Region::new(0, 10 * P)
                },
                Region::new(20 * P, 60 * P),
            ],
        }];
        assert_eq!(cut_ladders(&mut targets, 100, P), 0);
    }

    #[test]
    fn exploration_cuts_the_largest_idle_regions_into_equal_pieces() {
        // 400 and 100 idle pages, 50 accessed: 5 cuts make 100-page pieces of the large one.
        let mut targets = [target(&[(0, 400, 0), (400, 450, 7), (450, 550, 0)])];
        explore(&mut targets, 3, P);
        assert_eq!(starts(&targets[0]), [0, 100, 200, 300, 400, 450]);
        let mut targets = [target(&[(0, 400, 0), (400, 450, 7), (450, 550, 0)])];
        explore(&mut targets, 5, P);
        assert_eq!(
            starts(&targets[0]),
            [0, 80, 160, 240, 320, 400, 450, 500],
            "pieces of at most 80 pages"
        );
        let total: u64 = targets[0].regions.iter().map(Region::size).sum();
        assert_eq!(total, 550 * P);
    }

    #[test]
    fn probing_stays_within_the_bound_and_keeps_coverage_and_alignment() {
        for max in [3u32, 10, 40, 1000] {
            let mut targets = [target(&[(0, 1000, 0), (1000, 1003, 9), (1003, 9000, 0)])];
            probe_idle(&mut targets, max, P);
            let regions = &targets[0].regions;
            assert!(
                regions.len() <= (max as usize).max(3),
                "{max}: {}",
                regions.len()
            );
            assert_eq!(regions.first().map(|r| r.start), Some(0));
            assert_eq!(regions.last().map(|r| r.end), Some(9000 * P));
            for w in regions.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            assert!(regions.iter().all(|r| r.start % P == 0 && r.size() >= P));
            let ranges: Vec<AddrRange> = regions
                .iter()
                .map(|r| AddrRange::new(r.start, r.end))
                .collect();
            assert!(ranges.contains(&AddrRange::new(1000 * P, 1003 * P)));
        }
    }
}
