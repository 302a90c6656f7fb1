//! The heatmap's address axis: the shown address pieces laid end to end, so that collapsed gaps
//! take no width. Positions on the axis ("offsets") count shown bytes from the left edge.

use serde::Serialize;
use udamon_core::AddrRange;

/// A shown piece of the address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
}

/// A gap left out of the axis, and where on the axis it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CollapsedGap {
    /// Offset on the axis, in shown bytes from the left edge.
    pub offset: u64,
    pub start: u64,
    pub end: u64,
}

/// A labelled position on the axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tick {
    pub offset: u64,
    pub address: u64,
    /// The start of a segment (the left edge, or just after a collapsed gap).
    pub edge: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddressAxis {
    /// Ascending, disjoint; the space between consecutive segments is collapsed.
    pub segments: Vec<Segment>,
    /// Offset of each segment's start.
    #[serde(skip)]
    offsets: Vec<u64>,
}

impl AddressAxis {
    /// Lays out ascending, disjoint `ranges`, keeping gaps narrower than `min_gap` in place (they
    /// would be too thin to see, and collapsing them would only clutter the axis with marks).
    pub fn new(ranges: impl IntoIterator<Item = AddrRange>, min_gap: u64) -> AddressAxis {
        let mut segments: Vec<Segment> = Vec::new();
        for AddrRange { start, end } in ranges.into_iter().filter(|r| r.start < r.end) {
            match segments.last_mut() {
                Some(last) if start.saturating_sub(last.end) < min_gap => last.end = end,
                _ => segments.push(Segment { start, end }),
            }
        }
        let offsets = segments
            .iter()
            .scan(0u64, |acc, s| {
                let offset = *acc;
                *acc += s.end - s.start;
                Some(offset)
            })
            .collect();
        AddressAxis { segments, offsets }
    }

    /// Shown bytes.
    pub fn len(&self) -> u64 {
        match (self.segments.last(), self.offsets.last()) {
            (Some(s), Some(o)) => o + (s.end - s.start),
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn start(&self) -> u64 {
        self.segments.first().map_or(0, |s| s.start)
    }

    pub fn end(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.end)
    }

    /// Calls `f(from, to)` with the axis offsets of the shown parts of `range`.
    pub fn pieces(&self, range: AddrRange, mut f: impl FnMut(u64, u64)) {
        let AddrRange { start, end } = range;
        let first = self.segments.partition_point(|s| s.end <= start);
        for (seg, offset) in self.segments[first..].iter().zip(&self.offsets[first..]) {
            if seg.start >= end {
                break;
            }
            let (s, e) = (start.max(seg.start), end.min(seg.end));
            if s < e {
                f(offset + (s - seg.start), offset + (e - seg.start));
            }
        }
    }

    /// The address at an axis offset (offsets at a collapsed gap give the address after it).
    pub fn address_at(&self, offset: f64) -> u64 {
        let offset = offset.max(0.0);
        let i = self
            .offsets
            .partition_point(|&o| o as f64 <= offset)
            .saturating_sub(1);
        match (self.segments.get(i), self.offsets.get(i)) {
            (Some(seg), Some(&o)) => {
                let within = ((offset - o as f64).round() as u64).min(seg.end - seg.start);
                seg.start + within
            }
            _ => 0,
        }
    }

    /// Tick marks: each segment's start, then addresses that are multiples of the smallest power
    /// of two giving at most `max` of them. Returns the ticks (segment starts first) and the step.
    pub fn ticks(&self, max: usize) -> (Vec<Tick>, u64) {
        let step = (self.len() / max.max(1) as u64).max(1).next_power_of_two();
        let mut edges = Vec::new();
        let mut round = Vec::new();
        for (seg, &offset) in self.segments.iter().zip(&self.offsets) {
            edges.push(Tick {
                offset,
                address: seg.start,
                edge: true,
            });
            let mut a = seg.start.next_multiple_of(step);
            while a < seg.end {
                if a > seg.start {
                    round.push(Tick {
                        offset: offset + (a - seg.start),
                        address: a,
                        edge: false,
                    });
                }
                a = match a.checked_add(step) {
                    Some(next) => next,
                    None => break,
                };
            }
        }
        edges.extend(round);
        (edges, step)
    }

    /// The collapsed gaps, left to right.
    pub fn gaps(&self) -> Vec<CollapsedGap> {
        self.segments
            .windows(2)
            .zip(&self.offsets[1..])
            .map(|(pair, &offset)| CollapsedGap {
                offset,
                start: pair[0].end,
                end: pair[1].start,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_collapse_and_pieces_map_onto_offsets() {
        // Gap of 50 collapsed, gap of 2 kept (below min_gap 5).
        let r = AddrRange::new;
        let axis = AddressAxis::new([r(100, 120), r(170, 180), r(182, 190)], 5);
        assert_eq!(axis.segments.len(), 2);
        assert_eq!(axis.len(), 20 + 20);
        let mut got = Vec::new();
        axis.pieces(r(110, 185), |a, b| got.push((a, b)));
        assert_eq!(got, vec![(10, 20), (20, 35)]);
        got.clear();
        axis.pieces(r(120, 170), |a, b| got.push((a, b)));
        assert!(
            got.is_empty(),
            "a region inside a collapsed gap shows nowhere"
        );
        assert_eq!(axis.address_at(0.0), 100);
        assert_eq!(axis.address_at(20.0), 170);
        assert_eq!(axis.address_at(25.0), 175);
        let (ticks, step) = axis.ticks(4);
        assert_eq!(step, 16);
        let at: Vec<(u64, u64, bool)> = ticks
            .iter()
            .map(|t| (t.offset, t.address, t.edge))
            .collect();
        // Edges at 100 and 170; multiples of 16 inside: 112, 176.
        assert_eq!(
            at,
            vec![
                (0, 100, true),
                (20, 170, true),
                (12, 112, false),
                (26, 176, false)
            ]
        );
        assert_eq!(
            axis.gaps(),
            vec![CollapsedGap {
                offset: 20,
                start: 120,
                end: 170
            }]
        );
    }
}
