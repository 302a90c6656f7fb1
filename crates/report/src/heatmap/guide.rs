//! The heatmap's first pass, damo's "guide" (`damo_record_info.get_guide_info`): which addresses
//! each target's regions ever covered, split into contiguous ranges by the gaps that no snapshot
//! covered, and how much access ("heats" = Σ size × nr_accesses) fell in each.
//!
//! Ranges are then grouped into areas: a gap wider than all the target's covered bytes together
//! separates areas (for a process: heap, mmap area and stack, DAMON's own three regions), while
//! narrower gaps are holes within one area, which the heatmap collapses instead of drawing them
//! as empty columns. damo splits at every gap and may then show a small fragment of an area.

use serde::Serialize;
use std::collections::BTreeMap;
use udamon_core::AddrRange;
use udamon_record::model::RegionStat;

/// Addresses a target's regions covered, merged, with the heats that fell in each range.
#[derive(Debug, Default)]
pub(crate) struct Coverage {
    /// start → (end, heats); ranges neither overlap nor touch.
    map: BTreeMap<u64, (u64, f64)>,
}

impl Coverage {
    /// Adds one snapshot's regions, merging runs of adjacent regions first so that the map is
    /// touched once per run rather than once per region.
    pub(crate) fn add_regions(&mut self, regions: &[RegionStat]) {
        let mut run: Option<(u64, u64, f64)> = None;
        for r in regions.iter().filter(|r| r.end > r.start) {
            let heat = r.size() as f64 * f64::from(r.nr_accesses);
            run = match run {
                Some((s, e, h)) if e == r.start => Some((s, r.end, h + heat)),
                Some((s, e, h)) => {
                    self.add(s, e, h);
                    Some((r.start, r.end, heat))
                }
                None => Some((r.start, r.end, heat)),
            };
        }
        if let Some((s, e, h)) = run {
            self.add(s, e, h);
        }
    }

    fn add(&mut self, mut start: u64, mut end: u64, mut heat: f64) {
        if let Some((&s, &(e, h))) = self.map.range(..=start).next_back()
            && e >= start
        {
            self.map.remove(&s);
            start = s;
            end = end.max(e);
            heat += h;
        }
        while let Some((&s, &(e, h))) = self.map.range(start..=end).next() {
            self.map.remove(&s);
            end = end.max(e);
            heat += h;
        }
        self.map.insert(start, (end, heat));
    }

    /// How many contiguous ranges there are.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The contiguous ranges, ascending.
    pub(crate) fn ranges(&self) -> Vec<ContiguousRange> {
        self.map
            .iter()
            .map(|(&start, &(end, heats))| ContiguousRange { start, end, heats })
            .collect()
    }
}

/// Addresses covered without a break by some snapshot's regions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ContiguousRange {
    pub start: u64,
    pub end: u64,
    /// Σ size × nr_accesses of the regions in it, over all snapshots.
    pub heats: f64,
}

impl ContiguousRange {
    pub fn range(&self) -> AddrRange {
        AddrRange::new(self.start, self.end)
    }
}

/// Contiguous ranges separated only by gaps narrower than the target's covered size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Area {
    pub start: u64,
    pub end: u64,
    /// Bytes covered (the span less the gaps).
    pub covered_bytes: u64,
    pub heats: f64,
    pub ranges: Vec<ContiguousRange>,
}

impl Area {
    /// What the default heatmap maximises: access per covered byte.
    pub fn heats_per_byte(&self) -> f64 {
        self.heats / self.covered_bytes.max(1) as f64
    }
}

/// Groups ascending ranges into areas.
pub(crate) fn areas(ranges: &[ContiguousRange]) -> Vec<Area> {
    let covered: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    let mut areas: Vec<Area> = Vec::new();
    for r in ranges {
        match areas.last_mut() {
            Some(area) if r.start - area.end <= covered => {
                area.end = r.end;
                area.covered_bytes += r.end - r.start;
                area.heats += r.heats;
                area.ranges.push(*r);
            }
            _ => areas.push(Area {
                start: r.start,
                end: r.end,
                covered_bytes: r.end - r.start,
                heats: r.heats,
                ranges: vec![*r],
            }),
        }
    }
    areas
}

/// The area with the most heats per byte; the first such on ties (damo's `hottest`).
pub(crate) fn hottest(areas: &[Area]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, a) in areas.iter().enumerate() {
        if best.is_none_or(|(_, h)| a.heats_per_byte() > h) {
            best = Some((i, a.heats_per_byte()));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(start: u64, end: u64, nr_accesses: u32) -> RegionStat {
        RegionStat::new(start, end, nr_accesses)
    }

    #[test]
    fn coverage_merges_overlapping_and_touching_ranges_only() {
        let mut c = Coverage::default();
        c.add_regions(&[region(0, 10, 1), region(10, 20, 2), region(30, 40, 0)]);
        c.add_regions(&[region(15, 25, 1)]);
        c.add_regions(&[region(100, 110, 1)]);
        c.add_regions(&[region(25, 30, 0)]); // bridges 0..25 and 30..40
        let r = c.ranges();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].start, r[0].end), (0, 40));
        assert_eq!(r[0].heats, 10.0 + 20.0 + 10.0);
        assert_eq!((r[1].start, r[1].end, r[1].heats), (100, 110, 10.0));
    }

    #[test]
    fn only_gaps_wider_than_the_covered_size_separate_areas() {
        let range = |start, end, heats| ContiguousRange { start, end, heats };
        // 30 bytes covered: the 10-byte hole joins, the 1000-byte gap separates.
        let a = areas(&[
            range(0, 10, 0.0),
            range(20, 30, 50.0),
            range(1030, 1040, 20.0),
        ]);
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].start, a[0].end, a[0].covered_bytes), (0, 30, 20));
        assert_eq!(a[0].ranges.len(), 2);
        // 50/20 = 2.5 per byte beats 20/10 = 2.
        assert_eq!(hottest(&a), Some(0));
    }
}
