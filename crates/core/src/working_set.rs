//! A horizon's working set at page resolution: the memory DAMON's rule saw accessed in the
//! horizon, each piece estimated from its samples' repeats ([`crate::page_samples`]), and none
//! counted beyond the resident bytes of the mapping it lies in.
//!
//! The same function serves the live monitor (each window's regions, serve's horizons) and the
//! reports (a record's windows replayed), so that a number means the same everywhere.
//!
//! The resident bound makes the working set what the kernel could have seen: pages that were
//! never resident were never touched, whatever a region's size says (a thread's 8 MiB stack
//! mapping holds a few pages; a region spanning four of them holds a few times that). A
//! mapping's resident bytes come from its last walk ([`ResidentRange`], every 10 s or so); a
//! piece of memory outside every walked mapping (mapped since) is not bounded.

use crate::attrs::PAGE_SIZE;
use crate::page_samples::PageSamples;
use crate::region::AddrRange;
use crate::touched::Touched;

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
    let mut estimates: Vec<Touched> = cells
        .iter()
        .map(|&c| {
            if samples.is_empty() {
                Touched::whole(c.size() as f64 / PAGE_SIZE as f64)
            } else {
                samples.estimate(c, now_us, horizon_us)
            }
        })
        .collect();
    bound_by_resident(cells, &mut estimates, resident);
    estimates
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
    // Each cell's factor: its overlaps' scales, weighted by the overlaps; parts outside every
    // mapping walked keep their estimate.
    let mut factor = vec![0.0f64; cells.len()];
    let mut covered = vec![0.0f64; cells.len()];
    for_each_overlap(cells, resident, |c, m, share| {
        factor[c] += share * scale[m];
        covered[c] += share;
    });
    for (i, e) in estimates.iter_mut().enumerate() {
        let f = factor[i] + (1.0 - covered[i]).max(0.0);
        if f < 1.0 {
            *e = e.scaled(f);
        }
    }
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
    fn cells_share_a_mapping_s_bound_and_unknown_memory_keeps_its_estimate() {
        let mapping = [ResidentRange {
            range: AddrRange::new(0, 100 * P),
            resident_bytes: 30 * P,
        }];
        // Two cells of 40 pages in the mapping, one of 10 pages half outside it.
        let cells = [
            AddrRange::new(0, 40 * P),
            AddrRange::new(50 * P, 90 * P),
            AddrRange::new(95 * P, 105 * P),
        ];
        let mut e = vec![whole(40), whole(40), whole(10)];
        bound_by_resident(&cells, &mut e, &mapping);
        // 40 + 40 + 5 pages claimed in the mapping, 30 allowed: each scaled by 30 / 85.
        let s = 30.0 / 85.0;
        assert!((e[0].pages - 40.0 * s).abs() < 1e-9);
        assert!((e[1].pages - 40.0 * s).abs() < 1e-9);
        assert!((e[2].pages - (5.0 * s + 5.0)).abs() < 1e-9, "{:?}", e[2]);
        let inside: f64 = e[0].pages + e[1].pages + e[2].pages - 5.0;
        assert!((inside - 30.0).abs() < 1e-9);
    }

    #[test]
    fn without_samples_cells_count_whole() {
        let cells = [AddrRange::new(0, 10 * P), AddrRange::new(20 * P, 21 * P)];
        let e = estimate_cells(&PageSamples::default(), &cells, 1_000_000, 0, &[]);
        assert_eq!(e, vec![whole(10), whole(1)]);
    }
}
