//! A process's resident bytes per mapping: its whole address space walked with `PAGEMAP_SCAN`
//! (see [`crate::actions::pagescan`]) and reported once per complete pass. The first pass is
//! walked at once, so that even a short record has one (about 11 ms per GiB resident, once);
//! later ones a part per window within [`WALK_BUDGET`], so that the cost stays bounded whatever
//! the memory size (a pass every ten seconds or so per GiB at 400 ms windows).

use crate::actions::pagescan::{PAGE_IS_PRESENT, PageMap, PageRun};
use crate::maps::{MapPath, Mapping};
use std::time::{Duration, Instant};

/// The walk a process's footprint may take per window (0.125 % of a core at 400 ms windows).
pub(super) const WALK_BUDGET: Duration = Duration::from_micros(500);

/// A pass starts at most this long after the last one started, so that a small process is not
/// walked, and recorded, every window.
const PASS_INTERVAL_US: u64 = 10_000_000;

/// The largest piece walked at once, so that the budget is checked often enough.
const WALK_CHUNK: u64 = 16 << 20;

/// One mapping's resident bytes, as of its pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingResident {
    pub start: u64,
    pub end: u64,
    pub resident_bytes: u64,
}

/// The pass in progress over a process's mappings.
#[derive(Debug)]
pub(super) struct Footprint {
    pagemap: Option<PageMap>,
    runs: Vec<PageRun>,
    /// Where the walk goes on: every address below it has been walked in this pass.
    cursor: u64,
    /// The mappings walked so far in this pass (the last one maybe in part).
    walked: Vec<MappingResident>,
    /// Whether a pass has completed.
    passed: bool,
    /// When the pass in progress started (µs, the caller's clock), or the last one did.
    pass_start_us: Option<u64>,
}

impl Footprint {
    /// Walks `pagemap`; a process whose pagemap cannot be read has no footprint to tell.
    pub(super) fn of(pagemap: Option<PageMap>) -> Footprint {
        Footprint {
            pagemap,
            runs: Vec::new(),
            cursor: 0,
            walked: Vec::new(),
            passed: false,
            pass_start_us: None,
        }
    }

    /// Walks on through `maps` (the process's mappings as now known) for up to `budget` (the
    /// first pass: all of it), `now_us` being the time; returns every mapping's resident bytes
    /// once a pass is complete. A pass starts [`PASS_INTERVAL_US`] after the last one started.
    /// Mappings that cannot be walked (the vDSO's data, the vsyscall page) count 0.
    pub(super) fn walk(
        &mut self,
        maps: &[Mapping],
        budget: Duration,
        now_us: u64,
    ) -> Option<Vec<MappingResident>> {
        let pagemap = self.pagemap.as_ref()?;
        if self.cursor == 0 && self.walked.is_empty() {
            match self.pass_start_us {
                Some(last) if now_us < last + PASS_INTERVAL_US => return None,
                _ => self.pass_start_us = Some(now_us),
            }
        }
        let started = Instant::now();
        // At least one chunk per call, so that every pass ends whatever the budget.
        let mut walked_some = false;
        let first = maps.partition_point(|m| m.end <= self.cursor);
        for m in &maps[first..] {
            if self.walked.last().is_none_or(|w| w.start != m.start) {
                self.walked.push(MappingResident {
                    start: m.start,
                    end: m.end,
                    resident_bytes: 0,
                });
            }
            let walkable = !matches!(m.path, MapPath::Vvar | MapPath::Vsyscall);
            let mut at = self.cursor.max(m.start);
            while walkable && at < m.end {
                if walked_some && self.passed && started.elapsed() >= budget {
                    self.cursor = at;
                    return None;
                }
                let to = m.end.min(at + WALK_CHUNK);
                self.runs.clear();
                walked_some = true;
                if pagemap.scan(at, to, &mut self.runs).is_err() {
                    // Unmapped meanwhile, or the process is gone: the rest of this mapping
                    // counts as not resident.
                    break;
                }
                let present: u64 = self
                    .runs
                    .iter()
                    .filter(|r| r.is(PAGE_IS_PRESENT))
                    .map(|r| r.end - r.start)
                    .sum();
                if let Some(w) = self.walked.last_mut() {
                    w.resident_bytes += present;
                }
                at = to;
            }
            self.cursor = m.end;
        }
        self.cursor = 0;
        self.passed = true;
        Some(std::mem::take(&mut self.walked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::pagescan::map_anonymous;
    use crate::maps::read_maps;

    #[test]
    fn a_pass_counts_each_mappings_present_pages_however_small_the_budget() {
        const PAGE: usize = 4096;
        let len = 64 * PAGE;
        let addr = map_anonymous(len);
        let base = addr as u64;
        for page in 10..30 {
            // SAFETY: inside the mapping just made, which nothing else uses.
            unsafe { *(addr as *mut u8).add(page * PAGE) = 1 };
        }
        let maps = read_maps(std::process::id()).unwrap();
        let mut footprint = Footprint::of(PageMap::open(std::process::id()).ok());
        // The first pass is walked at once, whatever the budget.
        let first = footprint
            .walk(&maps, Duration::ZERO, 0)
            .expect("a whole pass");
        // The next pass waits for its time.
        assert_eq!(footprint.walk(&maps, Duration::ZERO, 1), None);
        let mut now = PASS_INTERVAL_US;
        assert_eq!(first.len(), maps.len(), "every mapping once");
        // Later, with no budget, each call walks one chunk: the pass takes a call per mapping
        // at least.
        let mut calls = 1;
        let pass = loop {
            if let Some(pass) = footprint.walk(&maps, Duration::ZERO, now) {
                break pass;
            }
            now += 1;
            calls += 1;
            assert!(calls < 100_000, "the pass ends");
        };
        assert!(
            calls >= maps.len(),
            "{calls} calls for {} mappings",
            maps.len()
        );
        assert_eq!(pass.len(), maps.len(), "every mapping once");
        let ours = pass
            .iter()
            .find(|m| m.start <= base && base + len as u64 <= m.end)
            .expect("the test's mapping");
        // Mappings next to ours may have merged with it; ours holds at least its 20 pages.
        assert!(ours.resident_bytes >= 20 * PAGE as u64, "{ours:?}");
        // A generous budget walks it all at once.
        let again = footprint
            .walk(&maps, Duration::from_secs(10), 3 * PASS_INTERVAL_US)
            .unwrap();
        let ours_again = again.iter().find(|m| m.start == ours.start).unwrap();
        assert!(
            ours_again.resident_bytes >= 20 * PAGE as u64,
            "{ours_again:?}"
        );
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(addr, len) };
    }
}
