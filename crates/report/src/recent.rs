//! The memory each target accessed in its recent windows, for the reports that look back over
//! a span of time (`wss --horizon`, `referenced`): every accessed byte with the end of the last
//! window that accessed it, as disjoint address ranges.
//!
//! Keeping the ranges rather than each window's regions bounds the memory by the distinct
//! ranges, not by windows × regions, and a hard limit ([`MAX_RANGES`]) over all targets bounds
//! it whatever a record claims: a small compressed frame may hold hundreds of thousands of
//! regions, and a look-back of a minute may span thousands of such frames.

use crate::{ReportError, Result};
use std::collections::BTreeMap;

/// The most address ranges kept over all targets (about 100 MiB at worst). Real records keep a
/// few times their regions: windows mostly share their boundaries.
pub const MAX_RANGES: usize = 1 << 21;

/// Disjoint accessed ranges of one target: start -> (end, end of the last window to access it).
type Pieces = BTreeMap<u64, (u64, u64)>;

/// Every target's recently accessed memory.
#[derive(Debug, Default)]
pub struct Recent {
    by_target: BTreeMap<u32, Pieces>,
    /// Ranges kept over all targets.
    total: usize,
}

impl Recent {
    /// Marks `ranges` of `target` as accessed by the window that ended at `end_ns`; fails when
    /// that takes more than [`MAX_RANGES`] ranges in all.
    pub fn add(
        &mut self,
        target: u32,
        ranges: impl IntoIterator<Item = (u64, u64)>,
        end_ns: u64,
    ) -> Result<()> {
        let pieces = self.by_target.entry(target).or_default();
        let before = pieces.len();
        for (start, end) in ranges {
            if start < end {
                mark(pieces, start, end, end_ns);
            }
        }
        self.total = self.total - before + pieces.len();
        if pieces.is_empty() {
            self.by_target.remove(&target);
        }
        if self.total > MAX_RANGES {
            return Err(ReportError::TooFragmented { max: MAX_RANGES });
        }
        Ok(())
    }

    /// Forgets the ranges whose last access `keep` no longer wants, and targets left empty.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        for pieces in self.by_target.values_mut() {
            pieces.retain(|_, &mut (_, last)| keep(last));
        }
        self.by_target.retain(|_, pieces| !pieces.is_empty());
        self.total = self.by_target.values().map(BTreeMap::len).sum();
    }

    /// `target`'s ranges last accessed by a window for which `counts` holds, sorted and
    /// disjoint, touching ones merged.
    pub fn ranges(&self, target: u32, counts: impl Fn(u64) -> bool) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let pieces = self.by_target.get(&target).into_iter().flatten();
        for (&start, &(end, _)) in pieces.filter(|(_, (_, last))| counts(*last)) {
            match out.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => out.push((start, end)),
            }
        }
        out
    }

    /// The bytes of [`Recent::ranges`].
    pub fn bytes(&self, target: u32, counts: impl Fn(u64) -> bool) -> u64 {
        let pieces = self.by_target.get(&target).into_iter().flatten();
        pieces
            .filter(|(_, (_, last))| counts(*last))
            .map(|(start, (end, _))| end - start)
            .sum()
    }
}

/// Records an access of `[start, end)` by the window that ended at `at`: the pieces it covers
/// take the later of their time and `at`, the gaps between them become pieces of `at`, and
/// touching pieces of one time merge.
fn mark(pieces: &mut Pieces, start: u64, end: u64, at: u64) {
    // Split the pieces that straddle either end, so that every piece is inside or outside.
    for cut in [start, end] {
        if let Some((&s, &(e, last))) = pieces.range(..cut).next_back()
            && e > cut
        {
            pieces.insert(s, (cut, last));
            pieces.insert(cut, (e, last));
        }
    }
    let inside: Vec<(u64, (u64, u64))> = pieces.range(start..end).map(|(&s, &p)| (s, p)).collect();
    let mut cursor = start;
    for (s, (e, last)) in inside {
        if cursor < s {
            pieces.insert(cursor, (s, at));
        }
        pieces.insert(s, (e, last.max(at)));
        cursor = e;
    }
    if cursor < end {
        pieces.insert(cursor, (end, at));
    }
    // Merge runs of one time from the piece before `start` to the one at `end`.
    let first = pieces.range(..start).next_back().map_or(start, |(&s, _)| s);
    let run: Vec<(u64, (u64, u64))> = pieces.range(first..=end).map(|(&s, &p)| (s, p)).collect();
    let mut merged: Option<(u64, u64, u64)> = None;
    for (s, (e, last)) in run {
        match &mut merged {
            Some((_, m_end, m_last)) if *m_end == s && *m_last == last => {
                pieces.remove(&s);
                *m_end = e;
            }
            _ => {
                if let Some((ms, me, ml)) = merged {
                    pieces.insert(ms, (me, ml));
                }
                merged = Some((s, e, last));
            }
        }
    }
    if let Some((ms, me, ml)) = merged {
        pieces.insert(ms, (me, ml));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(r: &Recent, target: u32) -> Vec<(u64, u64, u64)> {
        r.by_target[&target]
            .iter()
            .map(|(&s, &(e, l))| (s, e, l))
            .collect()
    }

    #[test]
    fn later_windows_overwrite_and_touching_ranges_of_one_time_merge() {
        let mut r = Recent::default();
        r.add(0, [(0, 10), (10, 20), (30, 40)], 1).unwrap();
        assert_eq!(pieces(&r, 0), [(0, 20, 1), (30, 40, 1)]);
        r.add(0, [(5, 35)], 2).unwrap();
        assert_eq!(pieces(&r, 0), [(0, 5, 1), (5, 35, 2), (35, 40, 1)]);
        assert_eq!(r.ranges(0, |last| last >= 2), [(5, 35)]);
        assert_eq!(r.ranges(0, |_| true), [(0, 40)]);
        assert_eq!(r.bytes(0, |last| last == 1), 10);
        // An older window does not take back what a later one touched.
        r.add(0, [(0, 40)], 1).unwrap();
        assert_eq!(pieces(&r, 0), [(0, 5, 1), (5, 35, 2), (35, 40, 1)]);
        r.retain(|last| last >= 2);
        assert_eq!(pieces(&r, 0), [(5, 35, 2)]);
        r.retain(|_| false);
        assert!(r.by_target.is_empty() && r.total == 0);
    }

    #[test]
    fn windows_that_share_boundaries_keep_few_ranges() {
        let mut r = Recent::default();
        for window in 0..1000u64 {
            let regions = (0..100u64).map(|i| (i * 4096, (i + 1) * 4096));
            r.add(7, regions, window).unwrap();
        }
        assert_eq!(r.total, 1);
    }

    #[test]
    fn a_record_of_ever_new_ranges_is_refused_at_the_limit() {
        let mut r = Recent::default();
        let mut result = Ok(());
        for window in 0..(MAX_RANGES as u64 / 1000 + 1) {
            // Every other page, at a new place each window.
            let base = window * 1_000_000;
            let regions = (0..1000u64).map(|i| (base + 2 * i, base + 2 * i + 1));
            result = r.add(0, regions, window);
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(result, Err(ReportError::TooFragmented { .. })));
        assert!(r.total <= MAX_RANGES + 1000);
    }
}
