//! One DAMOS apply pass over the targets (docs/algorithms.md#damos-apply, NEW
//! `kdamond_apply_schemes`).
//!
//! It runs once per sampling interval, after the merge and before the reset at an aggregation
//! boundary, so it sees the complete window's `nr_accesses`; mid-window it sees the moving sum.
//! Regions are walked by index and pieces split off (quota trimming, the resume marker, `addr`
//! filters) are inserted right after and visited next, as NEW's plain list iteration does;
//! equal neighbours are merged back after each region (NEW `damos_apply_target`).

use super::goal::MetricSource;
use super::quota::{ChargeWindow, QuotaState, update_charge_window};
use super::score::ScoreHistogram;
use super::stats::{DamosWalk, TriedRegion};
use super::{Action, Scheme};
use crate::adjust::{region_sz_limit, rejoin, split_region_at};
use crate::attrs::Attrs;
use crate::region::{Region, Target, align_down};

/// What the operations set did when asked to apply an action to a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// Bytes the action took effect on (core address units).
    pub sz_applied: u64,
    /// Bytes that passed the operations-layer filters.
    pub sz_ops_filter_passed: u64,
    /// How long applying took, ns: the time quota's throughput estimate. Report 0 when the
    /// action takes no real time (simulation); the estimate then stays at its default.
    pub elapsed_ns: u64,
}

/// The context's state the pass needs: intervals and time, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyEnv {
    pub attrs: Attrs,
    pub passed_sample_intervals: u64,
    /// For the moving sum: where the current aggregation window ends, in sampling intervals.
    pub next_aggregation_sis: u64,
    /// Now on the context's time line, µs (charge windows).
    pub now_us: u64,
}

impl ApplyEnv {
    /// `damon_nr_accesses_mvsum` (NEW): what patterns, scores and tried regions see.
    pub fn nr_accesses_mvsum(&self, r: &Region) -> u32 {
        crate::context::nr_accesses_mvsum(
            &self.attrs,
            self.passed_sample_intervals,
            self.next_aggregation_sis,
            r,
        )
    }
}

/// The operations set's side of DAMOS (upstream's `apply_scheme`, `get_scheme_score`,
/// `target_valid`).
pub trait SchemeApplier {
    /// Apply `scheme.action` to `region` of target `target`, honouring `scheme.filters.ops()`
    /// (unless `scheme.state().core_filters_allowed`).
    fn apply(&mut self, target: usize, region: &Region, scheme: &Scheme, env: &ApplyEnv)
    -> Applied;

    /// The region's priority for the scheme, `0..=99` (see [`super::default_scheme_score`]).
    /// `None`, consistently, when the operations set has no notion of priority: quotas then
    /// apply in address order.
    fn score(
        &self,
        _target: usize,
        _region: &Region,
        _scheme: &Scheme,
        _env: &ApplyEnv,
    ) -> Option<u8> {
        None
    }

    /// False for a target that is gone; its regions are skipped.
    fn target_valid(&self, _target: usize) -> bool {
        true
    }
}

fn is_due(s: &Scheme, passed: u64) -> bool {
    passed >= s.state.next_apply_sis && s.state.activated
}

/// Whether a pass after `passed` sampling intervals applies any of `schemes`.
pub(crate) fn any_due(schemes: &[Scheme], passed: u64) -> bool {
    schemes.iter().any(|s| is_due(s, passed))
}

/// One apply pass's state: the context's values it reads and where its effects go. The kernel
/// keeps these in the context, so that its steps take `(c, t, r, s)`
/// (`damos_apply_scheme(c, t, r, s)`); here they are the pass's, and its steps are methods that
/// take the target, the region and the scheme.
pub struct ApplyPass<'a> {
    pub env: ApplyEnv,
    /// The operations set: applies actions, scores regions, says which targets are valid.
    pub applier: &'a mut dyn SchemeApplier,
    /// Feeds quota goals at charge-window starts.
    pub metrics: &'a mut dyn MetricSource,
    /// Records tried regions when requested.
    pub walk: &'a mut DamosWalk,
}

/// The target a pass is on (upstream's `t`): its index, by which the operations set and
/// `target` filters know it, and its regions.
struct OnTarget<'r> {
    index: usize,
    regions: &'r mut Vec<Region>,
}

impl ApplyPass<'_> {
    /// `kdamond_apply_schemes`: every due, active scheme over every valid target's regions.
    /// Returns whether any scheme was due.
    pub fn run(&mut self, targets: &mut [Target], schemes: &mut [Scheme]) -> bool {
        let passed = self.env.passed_sample_intervals;
        let mut any_due = false;
        for s in schemes.iter_mut().filter(|s| is_due(s, passed)) {
            any_due = true;
            self.adjust_quota(s, targets);
        }
        if !any_due {
            return false;
        }
        // NEW merge-back keeps regions within the un-rounded size limit, so it never undoes the
        // minimum region count.
        let attrs = &self.env.attrs;
        let sz_limit = region_sz_limit(targets, attrs.min_nr_regions, attrs.min_region_sz);
        for (index, t) in targets.iter_mut().enumerate() {
            if self.applier.target_valid(index) {
                let mut t = OnTarget {
                    index,
                    regions: &mut t.regions,
                };
                self.apply_target(&mut t, schemes, sz_limit);
            }
        }
        let nr_schemes = schemes.len();
        // Upstream checks only the time here: an inactive scheme's deadline moves on as well.
        for (si, s) in schemes.iter_mut().enumerate() {
            if passed >= s.state.next_apply_sis {
                self.walk.complete(si, nr_schemes);
                s.set_next_apply_sis(passed, &self.env.attrs);
            }
        }
        true
    }

    /// `damos_apply_target` (NEW): every scheme on each region, then equal neighbours merged
    /// back. Compaction in place: `regions[..done]` is the pass's output, `regions[i..]` still
    /// to visit (splits insert at `i + 1`), so merging back is O(1) per region.
    fn apply_target(&mut self, t: &mut OnTarget, schemes: &mut [Scheme], sz_limit: u64) {
        let (mut done, mut i) = (0, 0);
        while i < t.regions.len() {
            for (si, s) in schemes.iter_mut().enumerate() {
                self.apply_to_region(t, i, si, s);
            }
            let regions = &mut *t.regions;
            let r = regions[i];
            if done > 0 && can_merge_back(&regions[done - 1], &r, sz_limit) {
                rejoin(&mut regions[done - 1], &r);
            } else {
                regions[done] = r;
                done += 1;
            }
            i += 1;
        }
        t.regions.truncate(done);
    }

    /// `damos_adjust_quota`: the charge window, then (if the operations set scores regions) the
    /// score threshold that makes the quota go to the highest-scoring eligible regions first.
    fn adjust_quota(&mut self, s: &mut Scheme, targets: &mut [Target]) {
        if !s.quota.has_limits() {
            return;
        }
        let env = &self.env;
        let min_sz = env.attrs.min_region_sz;
        let window = update_charge_window(
            &mut s.quota,
            &mut s.state.quota,
            env.now_us,
            self.metrics,
            min_sz,
        );
        if window == (ChargeWindow::Started { exceeded: true }) {
            s.stats.qt_exceeds += 1;
        }
        let mut histogram = ScoreHistogram::default();
        for (ti, t) in targets.iter_mut().enumerate() {
            let mut i = 0;
            while i < t.regions.len() {
                let r = t.regions[i];
                if s.pattern.matches(&r, env.nr_accesses_mvsum(&r)) {
                    // NEW: regions the core filters reject do not compete for the quota.
                    let (rejected, allowed) =
                        s.filters.core_filter_out(&mut t.regions, i, ti, min_sz);
                    s.state.core_filters_allowed = allowed;
                    if !rejected {
                        let r = &t.regions[i];
                        match self.applier.score(ti, r, s, env) {
                            Some(score) => histogram.add(score, r.size()),
                            None => {
                                s.state.quota.min_score = 0;
                                return;
                            }
                        }
                    }
                }
                i += 1;
            }
        }
        s.state.quota.min_score = histogram.min_score(s.state.quota.esz);
    }

    /// `damon_do_apply_schemes` for scheme `s` (number `si`) and region `i` of target `t`.
    fn apply_to_region(&mut self, t: &mut OnTarget, i: usize, si: usize, s: &mut Scheme) {
        let min_sz = self.env.attrs.min_region_sz;
        if !is_due(s, self.env.passed_sample_intervals)
            || s.quota.is_full(&s.state.quota, min_sz)
            || skip_charged_region(t, i, &mut s.state.quota, min_sz)
            || (s.max_nr_snapshots != 0 && s.stats.nr_snapshots >= s.max_nr_snapshots)
        {
            return;
        }
        if self.is_eligible(t.index, &t.regions[i], s) {
            self.apply_scheme(t, i, si, s);
        }
        if i + 1 == t.regions.len() {
            s.stats.nr_snapshots += 1;
        }
    }

    /// `damos_valid_target`: the pattern, and the score threshold while a quota is set.
    fn is_eligible(&self, ti: usize, r: &Region, s: &Scheme) -> bool {
        if !s.pattern.matches(r, self.env.nr_accesses_mvsum(r)) {
            return false;
        }
        if !s.quota.is_set(&s.state.quota) {
            return true;
        }
        self.applier
            .score(ti, r, s, &self.env)
            .is_none_or(|score| score >= s.state.quota.min_score)
    }

    /// `damos_apply_scheme`: trim the region to what is left of the quota, let the core filters
    /// decide, have the operations set apply the action, charge the quota, reset the age, count.
    fn apply_scheme(&mut self, t: &mut OnTarget, i: usize, si: usize, s: &mut Scheme) {
        let env = &self.env;
        let min_sz = env.attrs.min_region_sz;
        let regions = &mut *t.regions;
        let st = &s.state.quota;
        if s.quota.is_set(st) && st.charged_sz.saturating_add(regions[i].size()) > st.esz {
            let sz = align_down(st.esz.saturating_sub(st.charged_sz), min_sz);
            if sz == 0 {
                // Tried with nothing left to try on.
                s.stats.update(0, 0, 0);
                return;
            }
            let right = split_region_at(&mut regions[i], sz);
            regions.insert(i + 1, right);
        }
        let (rejected, allowed) = s.filters.core_filter_out(regions, i, t.index, min_sz);
        s.state.core_filters_allowed = allowed;
        if rejected {
            // Not counted anywhere (docs/algorithms.md#upstream-behaviours).
            return;
        }
        // Measured after the filters, which may have split the region further: upstream measures
        // before, and so charges and counts bytes of the split-off part that is visited (and
        // charged) again next.
        let sz = regions[i].size();
        let applied = self.applier.apply(t.index, &regions[i], s, env);
        if self.walk.wants(si) {
            let r = &regions[i];
            self.walk.record(
                si,
                TriedRegion {
                    start: r.start,
                    end: r.end,
                    nr_accesses: env.nr_accesses_mvsum(r),
                    age: r.age,
                    sz_filter_passed: applied.sz_ops_filter_passed,
                },
            );
        }
        let st = &mut s.state.quota;
        st.total_charged_ns = st.total_charged_ns.saturating_add(applied.elapsed_ns);
        s.quota.charge(st, sz, applied.sz_applied);
        if s.quota.is_full(st, min_sz) {
            // The resume marker (NEW: the exclusive end, not end + 1).
            st.charge_target_from = Some(t.index);
            st.charge_addr_from = regions[i].end;
        }
        // Whether or not the operations set succeeded: the region's pattern is now stale.
        if s.action != Action::Stat {
            regions[i].age = 0;
        }
        s.stats
            .update(sz, applied.sz_applied, applied.sz_ops_filter_passed);
    }
}

/// Merging loses nothing when both regions carry the same statistics, and were read, and
/// written, alike (or a region written in one part would be reported, and filtered, as
/// written all over).
fn can_merge_back(prev: &Region, r: &Region, sz_limit: u64) -> bool {
    prev.end == r.start
        && prev.age == r.age
        && prev.last_nr_accesses == r.last_nr_accesses
        && prev.nr_accesses == r.nr_accesses
        && (prev.read_samples > 0) == (r.read_samples > 0)
        && (prev.write_samples > 0) == (r.write_samples > 0)
        && r.end - prev.start <= sz_limit
}

/// `damos_skip_charged_region`: after a window ran out of quota, the next one resumes where it
/// stopped instead of starting over at the first regions. Regions before the marker are skipped;
/// one straddling it is split and its left part skipped (NEW: the right part is visited next).
fn skip_charged_region(t: &mut OnTarget, i: usize, st: &mut QuotaState, min_sz: u64) -> bool {
    let Some(marker_target) = st.charge_target_from else {
        return false;
    };
    if t.index != marker_target {
        return true;
    }
    if i + 1 == t.regions.len() {
        st.charge_target_from = None;
        st.charge_addr_from = 0;
        return true;
    }
    let addr = st.charge_addr_from;
    let r = &mut t.regions[i];
    if addr != 0 && r.end <= addr {
        return true;
    }
    if addr != 0 && r.start < addr {
        let mut sz_to_skip = align_down(addr - r.start, min_sz);
        if sz_to_skip == 0 {
            if r.size() <= min_sz {
                return true;
            }
            sz_to_skip = min_sz;
        }
        let right = split_region_at(r, sz_to_skip);
        t.regions.insert(i + 1, right);
        return true;
    }
    st.charge_target_from = None;
    st.charge_addr_from = 0;
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mvsum_matches_the_context_formula() {
        // Upstream's kunit test damon_test_nr_accesses_mvsum, through the pass's environment.
        let attrs = Attrs {
            sample_interval_us: 1,
            aggr_interval_us: 10,
            ..Attrs::default()
        };
        for (passed, next_aggr, nr, last, want) in crate::context::NR_ACCESSES_MVSUM_VECTORS {
            let env = ApplyEnv {
                attrs,
                passed_sample_intervals: passed,
                next_aggregation_sis: next_aggr,
                now_us: 0,
            };
            let r = Region {
                nr_accesses: nr,
                last_nr_accesses: last,
                ..Region::new(0, 4096)
            };
            assert_eq!(env.nr_accesses_mvsum(&r), want);
        }
    }

    fn skip(index: usize, regions: &mut Vec<Region>, i: usize, st: &mut QuotaState) -> bool {
        skip_charged_region(&mut OnTarget { index, regions }, i, st, 4096)
    }

    #[test]
    fn resume_marker_skips_then_splits_then_clears() {
        let mut regions: Vec<Region> = (0..4u64)
            .map(|i| Region::new(i * 8192, (i + 1) * 8192))
            .collect();
        let mut st = QuotaState {
            charge_target_from: Some(1),
            charge_addr_from: 12288,
            ..QuotaState::default()
        };
        assert!(skip(0, &mut regions, 0, &mut st), "other target");
        assert!(skip(1, &mut regions, 0, &mut st), "below the marker");
        // [8192, 16384) straddles 12288: its first page is skipped and split off.
        assert!(skip(1, &mut regions, 1, &mut st));
        assert_eq!((regions[1].end, regions[2].start), (12288, 12288));
        assert!(!skip(1, &mut regions, 2, &mut st), "at the marker");
        assert_eq!(st.charge_target_from, None);
        // Reaching the target's last region clears the marker and skips that region.
        st.charge_target_from = Some(0);
        st.charge_addr_from = 0;
        let last = regions.len() - 1;
        assert!(skip(0, &mut regions, last, &mut st));
        assert_eq!(st.charge_target_from, None);
    }
}
