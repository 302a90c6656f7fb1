//! What schemes did (docs/algorithms.md#damos-stats) and which regions they were applied to
//! (docs/algorithms.md#damos-tried-regions, upstream's `damos_walk`, behind sysfs "tried regions").

use thiserror::Error;

/// Cumulative since the scheme was created; a parameter commit keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchemeStats {
    /// Regions (and bytes) the operations set was asked to apply the action to: they passed the
    /// pattern, the quota (a region trimmed to nothing counts, with 0 bytes), the watermarks and
    /// the core filters.
    pub nr_tried: u64,
    pub sz_tried: u64,
    /// Regions where the action did something, and the bytes it reported.
    pub nr_applied: u64,
    pub sz_applied: u64,
    /// Bytes that passed the operations-layer filters.
    pub sz_ops_filter_passed: u64,
    /// Charge windows that ended with the quota full.
    pub qt_exceeds: u64,
    /// NEW: completed passes over a whole target.
    pub nr_snapshots: u64,
}

impl SchemeStats {
    /// `damos_update_stat`.
    pub(crate) fn update(&mut self, sz_tried: u64, sz_applied: u64, sz_ops_filter_passed: u64) {
        self.nr_tried += 1;
        self.sz_tried = self.sz_tried.saturating_add(sz_tried);
        if sz_applied != 0 {
            self.nr_applied += 1;
        }
        self.sz_applied = self.sz_applied.saturating_add(sz_applied);
        self.sz_ops_filter_passed = self
            .sz_ops_filter_passed
            .saturating_add(sz_ops_filter_passed);
    }
}

/// A region an action was applied to, as it was at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriedRegion {
    pub start: u64,
    pub end: u64,
    /// The moving sum the pattern was matched with (NEW; OLD reported `nr_accesses_bp / 10000`).
    pub nr_accesses: u32,
    /// Before the reset that follows a non-`stat` action.
    pub age: u32,
    pub sz_filter_passed: u64,
}

/// The regions one scheme was applied to during one apply interval.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchemeTriedRegions {
    pub regions: Vec<TriedRegion>,
}

impl SchemeTriedRegions {
    /// sysfs `tried_regions/total_bytes`.
    pub fn total_bytes(&self) -> u64 {
        self.regions.iter().map(|r| r.end - r.start).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WalkError {
    #[error(
        "the tried-regions request was canceled: monitoring ended, or no scheme is active or present"
    )]
    Canceled,
    #[error("a tried-regions request is already pending; wait for its result first")]
    Busy,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum WalkState {
    #[default]
    Idle,
    /// Recording; `completed[i]` once scheme `i` finished an apply interval.
    Pending {
        completed: Vec<bool>,
        tried: Vec<SchemeTriedRegions>,
    },
    Done(Result<Vec<SchemeTriedRegions>, WalkError>),
}

/// `damos_walk`: a request to record, for each scheme, the regions its next apply interval
/// applies the action to. It completes once every scheme finished one apply interval; it is
/// canceled when monitoring cannot get there.
#[derive(Debug, Clone, Default)]
pub struct DamosWalk {
    state: WalkState,
    /// Set when monitoring terminates; later requests are refused.
    obsolete: bool,
}

impl DamosWalk {
    /// Install a request. Refused once monitoring ended, and while one is pending.
    pub fn request(&mut self) -> Result<(), WalkError> {
        if self.obsolete {
            return Err(WalkError::Canceled);
        }
        if self.is_pending() {
            return Err(WalkError::Busy);
        }
        self.state = WalkState::Pending {
            completed: Vec::new(),
            tried: Vec::new(),
        };
        Ok(())
    }

    pub fn is_pending(&self) -> bool {
        matches!(self.state, WalkState::Pending { .. })
    }

    /// `damos_walk_cancel`: call when every scheme is inactive (watermarks) or there are none.
    pub fn cancel(&mut self) {
        if self.is_pending() {
            self.state = WalkState::Done(Err(WalkError::Canceled));
        }
    }

    /// Monitoring is terminating: cancel a pending request and refuse new ones.
    pub fn make_obsolete(&mut self) {
        self.cancel();
        self.obsolete = true;
    }

    /// The outcome of the last request, once: per scheme, the tried regions.
    pub fn take_result(&mut self) -> Option<Result<Vec<SchemeTriedRegions>, WalkError>> {
        match std::mem::take(&mut self.state) {
            WalkState::Done(result) => Some(result),
            other => {
                self.state = other;
                None
            }
        }
    }

    /// Whether regions applied by scheme `scheme` are being recorded (`!s->walk_completed`).
    pub(crate) fn wants(&self, scheme: usize) -> bool {
        match &self.state {
            WalkState::Pending { completed, .. } => {
                !completed.get(scheme).copied().unwrap_or(false)
            }
            _ => false,
        }
    }

    /// Record a region for `scheme`, unless it already finished its pass.
    pub(crate) fn record(&mut self, scheme: usize, region: TriedRegion) {
        if !self.wants(scheme) {
            return;
        }
        if let WalkState::Pending { tried, .. } = &mut self.state {
            if tried.len() <= scheme {
                tried.resize_with(scheme + 1, SchemeTriedRegions::default);
            }
            tried[scheme].regions.push(region);
        }
    }

    /// `damos_walk_complete`: scheme `scheme` of `nr_schemes` finished an apply interval.
    pub(crate) fn complete(&mut self, scheme: usize, nr_schemes: usize) {
        let WalkState::Pending { completed, tried } = &mut self.state else {
            return;
        };
        completed.resize(nr_schemes, false);
        completed[scheme] = true;
        if completed.iter().all(|&c| c) {
            let mut tried = std::mem::take(tried);
            tried.resize_with(nr_schemes, SchemeTriedRegions::default);
            self.state = WalkState::Done(Ok(tried));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tried(start: u64) -> TriedRegion {
        TriedRegion {
            start,
            end: start + 10,
            nr_accesses: 0,
            age: 0,
            sz_filter_passed: 0,
        }
    }

    #[test]
    fn stats_count_applied_only_when_something_happened() {
        let mut s = SchemeStats::default();
        s.update(4096, 0, 4096);
        s.update(8192, 4096, 8192);
        s.update(0, 0, 0);
        assert_eq!(
            (
                s.nr_tried,
                s.sz_tried,
                s.nr_applied,
                s.sz_applied,
                s.sz_ops_filter_passed
            ),
            (3, 12288, 1, 4096, 12288)
        );
    }

    #[test]
    fn walk_completes_when_every_scheme_finished_a_pass() {
        let mut w = DamosWalk::default();
        assert!(!w.wants(0), "nothing requested");
        w.request().unwrap();
        assert_eq!(w.request(), Err(WalkError::Busy));
        w.record(1, tried(100));
        w.complete(1, 2);
        assert!(!w.wants(1), "scheme 1 is done recording");
        assert!(w.wants(0));
        assert_eq!(w.take_result(), None, "scheme 0 still to go");
        w.record(0, tried(0));
        w.record(1, tried(200));
        w.complete(0, 2);
        let result = w.take_result().unwrap().unwrap();
        assert_eq!(result[0].regions, [tried(0)]);
        assert_eq!(
            result[1].regions,
            [tried(100)],
            "recorded only before completion"
        );
        assert_eq!(result[1].total_bytes(), 10);
        assert_eq!(w.take_result(), None, "taken once");
        w.request().unwrap();
    }

    #[test]
    fn cancel_reports_once() {
        let mut w = DamosWalk::default();
        w.cancel();
        assert_eq!(w.take_result(), None, "nothing was pending");
        w.request().unwrap();
        w.cancel();
        assert_eq!(w.take_result(), Some(Err(WalkError::Canceled)));
    }
}
