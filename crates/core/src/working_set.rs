//! A horizon's working set at page resolution: the memory DAMON's rule saw accessed in the
//! horizon, each piece estimated from its samples' repeats ([`crate::page_samples`]), and none
//! counted beyond the resident bytes of the mapping it lies in.
//!
//! The same function serves the live monitor (each window's regions, serve's horizons) and the
//! reports (a record's windows replayed), so that a number means the same everywhere.
//!
//! Pieces are DAMON's regions, whose boundaries the adaptive split draws at random: a heap
//! touched alike all over is often cut into pieces of a few MiB, each with too few samples to
//! repeat. Neighbouring pieces whose samples could have come from memory touched alike (the
//! binomial test that sampled sources merge regions by, [`crate::density`]) are therefore also
//! estimated together, and a piece whose own estimate is unsettled takes its share of theirs
//! where that is better determined: evidence is pooled across regions as it is across windows.
//! A piece with no sample in the horizon is there only through a region it shared with sampled
//! memory: it takes that memory's density, or counts nothing ([`estimate_cells`]' steps, in
//! order).
//!
//! The resident bound makes the working set what the kernel could have seen: pages that were
//! never resident were never touched, whatever a region's size says (a thread's 8 MiB stack
//! mapping holds a few pages; a region spanning four of them holds a few times that). A
//! mapping's resident bytes come from its last walk ([`ResidentRange`], every 10 s or so); the
//! part of a piece in a gap between walked mappings holds nothing, and a piece wholly outside
//! them (mapped since the walk) is not bounded.

use crate::attrs::PAGE_SIZE;
use crate::density;
use crate::page_samples::{MAX_EVIDENCE_US, PageSamples};
use crate::region::AddrRange;
use crate::touched::{Touched, Unbounded};

/// One mapping's resident bytes, as of its last walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentRange {
    pub range: AddrRange,
    pub resident_bytes: u64,
}

/// The estimated touched pages of each of `cells` (sorted, disjoint ranges that DAMON's rule
/// saw accessed in the `horizon_us` before `now_us`), from `samples`, bounded by `resident`
/// (sorted, disjoint; empty when unknown). Cells of a source without samples (`samples`
/// empty) are counted whole, as DAMON counts them.
pub fn estimate_cells(
    samples: &PageSamples,
    cells: &[AddrRange],
    now_us: u64,
    horizon_us: u64,
    resident: &[ResidentRange],
) -> Vec<Touched> {
    if samples.is_empty() {
        return cells
            .iter()
            .map(|c| Touched::whole(c.size() as f64 / PAGE_SIZE as f64))
            .collect();
    }
    let mut estimates: Vec<Touched> = cells
        .iter()
        .map(|&c| samples.estimate(c, now_us, horizon_us))
        .collect();
    let span_us = horizon_us.max(MAX_EVIDENCE_US);
    let counts: Vec<u64> = cells
        .iter()
        .map(|&c| samples.count(c, now_us, span_us))
        .collect();
    pool_alike_neighbours(samples, cells, &mut estimates, &counts, now_us, horizon_us);
    let in_horizon: Vec<u64> = cells
        .iter()
        .map(|&c| samples.count(c, now_us, horizon_us))
        .collect();
    borrow_neighbours_density(cells, &mut estimates, &counts, &in_horizon);
    bound_by_resident(cells, &mut estimates, resident);
    estimates
}

/// Gives each cell that drew samples in the evidence span (`counts`) but none in the horizon
/// (`in_horizon`) the density of the cells it touches that did. Such a piece is in the
/// horizon's memory only because a region that held it was seen accessed through a sample
/// elsewhere in it, which the snapshot's regions now put in a neighbouring piece: that memory
/// tells how densely it was touched (13 MiB of a heap with one sample 20 s ago beside 13 MiB
/// with a tenth of its pages touched takes a tenth, not all of it). A piece without any sample
/// counts nothing already; one touching no sampled cell keeps its estimate.
fn borrow_neighbours_density(
    cells: &[AddrRange],
    estimates: &mut [Touched],
    counts: &[u64],
    in_horizon: &[u64],
) {
    let own = estimates.to_vec();
    let touching = |a: usize, b: usize| cells[a].end == cells[b].start;
    for i in 0..cells.len() {
        if in_horizon[i] > 0 || counts[i] == 0 {
            continue;
        }
        let nearby: Vec<usize> = [
            (i > 0 && touching(i - 1, i)).then(|| i - 1),
            (i + 1 < cells.len() && touching(i, i + 1)).then_some(i + 1),
        ]
        .into_iter()
        .flatten()
        .filter(|&j| in_horizon[j] > 0)
        .collect();
        let e = &mut estimates[i];
        if nearby.is_empty() {
            // Nothing in the horizon shows it touched: none counted, with the interval open.
            *e = Touched {
                pages: 0.0,
                low: 0.0,
                ..*e
            };
            continue;
        }
        let bytes: u64 = nearby.iter().map(|&j| cells[j].size()).sum();
        let density = |f: &dyn Fn(&Touched) -> f64| {
            nearby.iter().map(|&j| f(&own[j])).sum::<f64>() * PAGE_SIZE as f64 / bytes as f64
        };
        let pages = cells[i].size() as f64 / PAGE_SIZE as f64;
        *e = Touched {
            pages: (density(&|t| t.pages) * pages).min(pages),
            low: (density(&|t| t.low) * pages).min(pages),
            high: (density(&|t| t.high) * pages).min(pages),
            ..*e
        };
    }
}

/// The level of the binomial test below which neighbouring pieces' samples are taken to show
/// memory touched unlike, and are not pooled. Lower than the merges' level: a pooled estimate
/// is only taken where a piece's own is unsettled, while a piece left apart counts whole.
pub const POOL_ALPHA: f64 = 0.05;

/// Gives each cell whose estimate is unsettled its share (by size) of the estimate of the run
/// of alike neighbours it belongs to, where that is better determined (see the module
/// documentation).
fn pool_alike_neighbours(
    samples: &PageSamples,
    cells: &[AddrRange],
    estimates: &mut [Touched],
    counts: &[u64],
    now_us: u64,
    horizon_us: u64,
) {
    let clamp = |n: u64| n.min(u64::from(u32::MAX)) as u32;
    let mut start = 0;
    while start < cells.len() {
        let (mut n, mut size) = (counts[start], cells[start].size());
        let mut end = start + 1;
        while end < cells.len()
            && density::alike(
                clamp(n),
                size,
                clamp(counts[end]),
                cells[end].size(),
                POOL_ALPHA,
            )
        {
            n += counts[end];
            size += cells[end].size();
            end += 1;
        }
        let run = start..end;
        start = end;
        if run.len() < 2 || estimates[run.clone()].iter().all(Touched::is_settled) {
            continue;
        }
        let pooled =
            samples.estimate_pooled(&cells[run.clone()], now_us, horizon_us, Unbounded::Whole);
        for i in run {
            let own = estimates[i];
            if !own.is_settled() && spread(&pooled) < spread(&own) {
                let share = cells[i].size() as f64 / size as f64;
                estimates[i] = Touched {
                    seen: own.seen,
                    samples: own.samples,
                    ..pooled.scaled(share)
                };
            }
        }
    }
}

/// How wide an estimate's interval is, relative to it.
fn spread(t: &Touched) -> f64 {
    t.high / t.low.max(f64::MIN_POSITIVE)
}

/// Scales `estimates` (of `cells`) so that the part of them in each mapping of `resident` is at
/// most its resident bytes. A cell's estimate is shared among the mappings it overlaps in
/// proportion to the overlap.
pub fn bound_by_resident(
    cells: &[AddrRange],
    estimates: &mut [Touched],
    resident: &[ResidentRange],
) {
    if resident.is_empty() {
        return;
    }
    // Per mapping, the pages the cells' estimates put in it.
    let mut claimed = vec![0.0f64; resident.len()];
    for_each_overlap(cells, resident, |c, m, share| {
        claimed[m] += estimates[c].pages * share;
    });
    let page = PAGE_SIZE as f64;
    let scale: Vec<f64> = resident
        .iter()
        .zip(&claimed)
        .map(|(m, &pages)| {
            let allowed = m.resident_bytes as f64 / page;
            if pages > allowed {
                allowed / pages
            } else {
                1.0
            }
        })
        .collect();
    // Each cell's factor: its overlaps' scales, weighted by the overlaps. A cell partly outside
    // every mapping walked reaches into a gap between mappings, which holds no memory; one
    // wholly outside lies in a mapping made since the walk, and keeps its estimate.
    let mut factor = vec![0.0f64; cells.len()];
    let mut covered = vec![0.0f64; cells.len()];
    for_each_overlap(cells, resident, |c, m, share| {
        factor[c] += share * scale[m];
        covered[c] += share;
    });
    for (i, e) in estimates.iter_mut().enumerate() {
        let f = if covered[i] > 0.0 { factor[i] } else { 1.0 };
        if f < 1.0 {
            *e = e.scaled(f);
        }
    }
}

/// The code touched in the `horizon_us` before `now_us`, from `ips` (the sampled instructions'
/// addresses): the instructions the CPU fetched touched their pages as data accesses touch
/// theirs, and the kernel's accessed bits count both. The mappings of `resident` that hold a
/// sampled instruction in the evidence span are the cells, estimated as one memory (code of
/// one program touched alike) and shared among them by their sampled pages; each bounded by
/// its resident bytes. Where the samples set no upper bound, the point estimate counts, not
/// the mappings whole ([`Unbounded::Point`]). Nothing where the mappings are unknown.
pub fn estimate_code(
    ips: &PageSamples,
    now_us: u64,
    horizon_us: u64,
    resident: &[ResidentRange],
) -> Vec<(AddrRange, Touched)> {
    let span_us = horizon_us.max(MAX_EVIDENCE_US);
    let cells: Vec<(AddrRange, u64)> = resident
        .iter()
        .map(|m| (m.range, ips.count(m.range, now_us, horizon_us)))
        .filter(|&(_, n)| n > 0)
        .collect();
    if cells.is_empty() {
        return Vec::new();
    }
    let ranges: Vec<AddrRange> = cells.iter().map(|c| c.0).collect();
    let pooled = ips.estimate_pooled(&ranges, now_us, horizon_us, Unbounded::Point);
    let in_span: Vec<u64> = ranges
        .iter()
        .map(|&r| ips.count(r, now_us, span_us))
        .collect();
    let all: u64 = in_span.iter().sum::<u64>().max(1);
    let mut estimates: Vec<Touched> = in_span
        .iter()
        .map(|&n| pooled.scaled(n as f64 / all as f64))
        .collect();
    bound_by_resident(&ranges, &mut estimates, resident);
    ranges.into_iter().zip(estimates).collect()
}

/// Scales `estimates` down so that together they count at most `resident_bytes` (a target's
/// whole resident memory).
pub fn bound_total(estimates: &mut [Touched], resident_bytes: u64) {
    let allowed = resident_bytes as f64 / PAGE_SIZE as f64;
    let total: f64 = estimates.iter().map(|e| e.pages).sum();
    if total > allowed && total > 0.0 {
        for e in estimates.iter_mut() {
            *e = e.scaled(allowed / total);
        }
    }
}

/// Calls `f(cell, mapping, share)` for every cell that overlaps a mapping, `share` being the
/// part of the cell's bytes inside it. Both lists are sorted and disjoint: one linear walk.
fn for_each_overlap(
    cells: &[AddrRange],
    resident: &[ResidentRange],
    mut f: impl FnMut(usize, usize, f64),
) {
    let mut m = 0;
    for (c, cell) in cells.iter().enumerate() {
        while m < resident.len() && resident[m].range.end <= cell.start {
            m += 1;
        }
        let mut k = m;
        while k < resident.len() && resident[k].range.start < cell.end {
            let r = resident[k].range;
            let overlap = cell.end.min(r.end).saturating_sub(cell.start.max(r.start));
            if overlap > 0 && cell.size() > 0 {
                f(c, k, overlap as f64 / cell.size() as f64);
            }
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = PAGE_SIZE;

    fn whole(pages: u64) -> Touched {
        Touched::whole(pages as f64)
    }

    #[test]
    fn a_cell_over_stacks_counts_no_more_than_their_resident_pages() {
        // Four 8 MiB stack mappings holding two pages each, under one 32 MiB cell.
        let stacks: Vec<ResidentRange> = (0..4)
            .map(|i| ResidentRange {
                range: AddrRange::new(i * 2048 * P, (i + 1) * 2048 * P),
                resident_bytes: 2 * P,
            })
            .collect();
        let cells = [AddrRange::new(0, 4 * 2048 * P)];
        let mut e = vec![whole(4 * 2048)];
        bound_by_resident(&cells, &mut e, &stacks);
        assert!((e[0].pages - 8.0).abs() < 1e-9, "{:?}", e[0]);
    }

    #[test]
    fn cells_share_a_mapping_s_bound_and_gaps_hold_nothing() {
        let mapping = [ResidentRange {
            range: AddrRange::new(0, 100 * P),
            resident_bytes: 30 * P,
        }];
        // Two cells of 40 pages in the mapping, one of 10 pages half outside it (in the gap
        // after it), one in a mapping made since the walk.
        let cells = [
            AddrRange::new(0, 40 * P),
            AddrRange::new(50 * P, 90 * P),
            AddrRange::new(95 * P, 105 * P),
            AddrRange::new(200 * P, 210 * P),
        ];
        let mut e = vec![whole(40), whole(40), whole(10), whole(10)];
        bound_by_resident(&cells, &mut e, &mapping);
        // 40 + 40 + 5 pages claimed in the mapping, 30 allowed: each scaled by 30 / 85.
        let s = 30.0 / 85.0;
        assert!((e[0].pages - 40.0 * s).abs() < 1e-9);
        assert!((e[1].pages - 40.0 * s).abs() < 1e-9);
        assert!((e[2].pages - 5.0 * s).abs() < 1e-9, "{:?}", e[2]);
        let inside: f64 = e[0].pages + e[1].pages + e[2].pages;
        assert!((inside - 30.0).abs() < 1e-9);
        assert_eq!(
            e[3].pages, 10.0,
            "a mapping the walk has not seen is not bounded"
        );
    }

    /// Samples on `hot` pages for `seconds`, `per_window` in each 400 ms window.
    fn sampled(hot: &[u64], seconds: u64, per_window: u64, seed: u64) -> (PageSamples, u64) {
        let mut rng = crate::Prng::seeded(seed);
        let mut h = PageSamples::default();
        let mut t = 0;
        for _ in 0..seconds * 5 / 2 {
            t += 400_000;
            let addrs: Vec<u64> = (0..per_window)
                .map(|_| hot[rng.in_range(0, hot.len() as u64) as usize] * P)
                .collect();
            h.add(t, addrs);
            h.settle(t);
        }
        (h, t)
    }

    #[test]
    fn pieces_of_memory_touched_alike_are_estimated_together() {
        // A heap of 16 pieces of 4,096 pages, 3,000 of its pages touched at random: each
        // piece's 40-odd samples in 30 s rarely repeat, all 750 of them often do.
        let mut rng = crate::Prng::seeded(21);
        let mut hot: Vec<u64> = (0..3000).map(|_| rng.in_range(0, 16 * 4096)).collect();
        hot.sort_unstable();
        hot.dedup();
        let (h, now) = sampled(&hot, 30, 10, 22);
        let cells: Vec<AddrRange> = (0..16)
            .map(|i| AddrRange::new(i * 4096 * P, (i + 1) * 4096 * P))
            .collect();
        let alone: Vec<Touched> = cells
            .iter()
            .map(|&c| h.estimate(c, now, 2_000_000))
            .collect();
        let together = estimate_cells(&h, &cells, now, 2_000_000, &[]);
        let total = |e: &[Touched]| e.iter().map(|t| t.pages).sum::<f64>();
        let truth = hot.len() as f64;
        assert!(
            (total(&together) / truth - 1.0).abs() < 0.25,
            "{} for {truth}",
            total(&together)
        );
        // Alone, the pieces' estimates rest on too few repeats to settle; together they do.
        let settled = |e: &[Touched]| e.iter().filter(|t| t.is_settled()).count();
        assert!(settled(&alone) < 4, "{alone:?}");
        assert_eq!(settled(&together), 16, "{together:?}");
    }

    #[test]
    fn pieces_touched_unlike_are_not_pooled() {
        // A dense piece (all 1,024 pages, 9 samples a window) beside a sparse one ten times
        // its size with as few samples per window: their densities differ.
        let mut pages: Vec<u64> = (0..1024).collect();
        let sparse: Vec<u64> = (0..100).map(|i| 1024 + i * 100).collect();
        let mut rng = crate::Prng::seeded(23);
        let mut h = PageSamples::default();
        let mut t = 0;
        for _ in 0..75 {
            t += 400_000;
            let mut addrs: Vec<u64> = (0..9)
                .map(|_| pages[rng.in_range(0, 1024) as usize] * P)
                .collect();
            addrs.push(sparse[rng.in_range(0, 100) as usize] * P);
            h.add(t, addrs);
            h.settle(t);
        }
        pages.clear();
        let cells = [
            AddrRange::new(0, 1024 * P),
            AddrRange::new(1024 * P, 11_264 * P),
        ];
        let e = estimate_cells(&h, &cells, t, 2_000_000, &[]);
        assert!(
            e[0].pages > 700.0,
            "the dense piece stays dense: {:?}",
            e[0]
        );
        assert!(
            e[1].pages < 500.0,
            "the sparse piece stays sparse: {:?}",
            e[1]
        );
    }

    #[test]
    fn a_piece_sampled_only_before_the_horizon_takes_the_density_beside_it() {
        let cells = [
            AddrRange::new(0, 1000 * P),
            AddrRange::new(1000 * P, 4000 * P),
            AddrRange::new(4000 * P, 5000 * P),
            AddrRange::new(6000 * P, 7000 * P),
            AddrRange::new(7000 * P, 8000 * P),
        ];
        let sparse = Touched {
            pages: 100.0,
            low: 80.0,
            high: 130.0,
            seen: 60.0,
            samples: 90,
            evidence_us: 10_000_000,
        };
        let old = Touched {
            pages: 3000.0,
            low: 1.1,
            high: 3000.0,
            seen: 1.0,
            samples: 1,
            evidence_us: 30_000_000,
        };
        // The second piece drew a sample before the horizon and none in it; the first, beside
        // it, is a tenth touched. The fourth touches no piece sampled in the horizon (a gap
        // lies before it, the fifth drew none), and the fifth never drew one.
        let mut e = vec![sparse, old, sparse, old, Touched::default()];
        borrow_neighbours_density(&cells, &mut e, &[90, 1, 90, 1, 0], &[90, 0, 90, 0, 0]);
        assert!((e[1].pages - 300.0).abs() < 1e-9, "{:?}", e[1]);
        assert!((e[1].low - 240.0).abs() < 1e-9 && (e[1].high - 390.0).abs() < 1e-9);
        assert_eq!(
            (e[3].pages, e[3].low, e[3].high),
            (0.0, 0.0, 3000.0),
            "nothing in the horizon shows it touched"
        );
        assert_eq!(e[4], Touched::default());
        assert_eq!(
            (e[0], e[2]),
            (sparse, sparse),
            "sampled pieces keep their own"
        );
    }

    #[test]
    fn code_counts_the_pages_its_sampled_instructions_lie_in() {
        // A loop in 3 pages of a 64-page text mapping, sampled 600 times over 30 s; nothing
        // sampled in the library beside it.
        let (ips, now) = sampled(&[10, 11, 12], 30, 8, 31);
        let text = ResidentRange {
            range: AddrRange::new(0, 64 * P),
            resident_bytes: 64 * P,
        };
        let lib = ResidentRange {
            range: AddrRange::new(100 * P, 200 * P),
            resident_bytes: 50 * P,
        };
        let code = estimate_code(&ips, now, 10_000_000, &[text, lib]);
        assert_eq!(code.len(), 1, "{code:?}");
        assert_eq!(code[0].0, text.range);
        assert!((code[0].1.pages - 3.0).abs() < 0.5, "{code:?}");
        assert!(
            estimate_code(&ips, now, 10_000_000, &[]).is_empty(),
            "mappings unknown"
        );
    }

    #[test]
    fn code_that_few_samples_found_counts_their_estimate_not_the_library() {
        // An interpreter's library of 560 pages of text, its 50 hot pages sampled 8 times in
        // 10 s (the program spends its time elsewhere): no page sampled twice, nothing bounds
        // the count from above, and yet the library is not counted whole.
        let hot: Vec<u64> = (0..50).map(|i| 1000 + i * 11).collect();
        let mut h = PageSamples::default();
        for (i, &page) in hot.iter().take(8).enumerate() {
            let t = (i as u64 + 1) * 1_000_000;
            h.add(t, vec![page * P]);
            h.settle(t);
        }
        let lib = ResidentRange {
            range: AddrRange::new(1000 * P, 1560 * P),
            resident_bytes: 560 * P,
        };
        let code = estimate_code(&h, 8_000_000, 10_000_000, &[lib]);
        assert_eq!(code.len(), 1, "{code:?}");
        let t = code[0].1;
        assert!(t.pages >= 8.0 && t.pages < 0.5 * t.high, "{t:?}");
        assert!(!t.is_settled(), "{t:?}");
        // Data memory that DAMON's rule saw accessed, with the same samples, counts all that
        // its samples' spread allows.
        let data = estimate_cells(&h, &[lib.range], 8_000_000, 10_000_000, &[lib]);
        assert_eq!(data[0].pages, data[0].high, "{data:?}");
        assert!(data[0].pages > 2.0 * t.pages, "{data:?}");
    }

    #[test]
    fn without_samples_cells_count_whole() {
        let cells = [AddrRange::new(0, 10 * P), AddrRange::new(20 * P, 21 * P)];
        let e = estimate_cells(&PageSamples::default(), &cells, 1_000_000, 0, &[]);
        assert_eq!(e, vec![whole(10), whole(1)]);
    }
}
