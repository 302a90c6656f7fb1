//! Adaptive regions adjustment (docs/algorithms.md#merge, #split): merge adjacent regions of
//! similar access frequency, split regions at random points, and keep the region count within the
//! bounds.
//!
//! Every pass is linear over a target's region vector. Behaviour follows upstream's NEW era:
//! ages are counted only on the first merge pass, splits above half the maximum are partial, and
//! `apply_min_nr_regions` enforces the minimum strictly. Upstream's function-static split state
//! (`last_nr_regions`, `rotation`) lives in [`SplitState`], one per context.
//!
//! Beyond upstream, in the guided adjustment (docs/algorithms.md#guided; the context turns it
//! off for `Adjustment::Faithful`): [`split_at_sampled_extents`]. A region counts as accessed
//! when any sample falls in it (or any check finds its page accessed), so a region straddling
//! touched and never-touched memory reports all of it accessed, and random 10–90 % cuts find
//! the edge only slowly. A region whose accesses were all seen within a span that leaves a
//! large part of it unseen (the sample addresses of sampled sources, the accessed sampling
//! addresses of accessed-bit ones: [`Region::sampled`]) is cut at the span's edge (aligned
//! outward to `min_region_sz`), largest unseen parts first, within `max_nr_regions`: before
//! the window is reported where evenly spread accesses would hardly have missed that part (the
//! window's, or with sampled sources those with the recent windows' of
//! [`crate::recent_samples`]), so that reports and schemes see it idle, and after the report
//! wherever the part is large, so that the next window measures it apart. Regions seen
//! accessed and idle ones stay apart in the merge ([`MergeRule::keep_seen_apart`]), and idle
//! memory is probed ([`crate::probe`]), for accessed-bit sources.
//!
//! For sampled sources, merging is by sample density ([`MergeRule::density_alpha`], the test
//! of [`crate::density`]) rather than by DAMON's threshold over counts that sampling keeps
//! small, and a merged region keeps the intervals in which either part got a sample
//! ([`merge_two`]): a region that got samples in a window reports accessed in it, through every
//! merge and split.

use crate::density;
use crate::rand::Prng;
use crate::recent_samples::RecentSamples;
use crate::region::{AddrRange, Region, Target, align_down, align_up};

/// `damon_region_sz_limit`: the largest size a merge may produce, so that at least
/// `min_nr_regions` regions remain.
pub fn region_sz_limit(targets: &[Target], min_nr_regions: u32, min_region_sz: u64) -> u64 {
    let total: u64 = targets.iter().map(Target::total_size).sum();
    sz_limit_of(total, min_nr_regions, min_region_sz)
}

/// [`region_sz_limit`] of regions `total` bytes in all.
fn sz_limit_of(total: u64, min_nr_regions: u32, min_region_sz: u64) -> u64 {
    let limit = if min_nr_regions == 0 {
        total
    } else {
        total / min_nr_regions as u64
    };
    limit.max(min_region_sz)
}

/// `damon_merge_two_regions`: `l` absorbs its right neighbour `r`, with size-weighted averages of
/// `nr_accesses` and `age`. `last_nr_accesses` keeps the left value, as upstream does
/// (docs/algorithms.md#merge).
///
/// Regions holding samples (sampled sources) count the sampling intervals in which a sample fell
/// in them, which grows with their size rather than being a rate: the merged region's count is
/// the intervals in which a sample fell in either, estimated as if the two were independent
/// (`a + b - a·b/max_nr`, at least the larger of the two). An average would report a region
/// that got samples as not accessed at all (1 interval in 4 MiB averaged with 26 MiB of none
/// is 0).
pub fn merge_two(l: &mut Region, r: &Region, max_nr: u32) {
    let nr_accesses = if l.raw_samples > 0 || r.raw_samples > 0 {
        intervals_with_either(l.nr_accesses, r.nr_accesses, max_nr)
    } else {
        size_weighted(l, r, |x| x.nr_accesses)
    };
    absorb(l, r, nr_accesses);
}

/// Rejoins two adjacent regions with equal statistics, such as the pieces of one region that a
/// scheme split (DAMOS merge-back): the count stays what it is.
pub fn rejoin(l: &mut Region, r: &Region) {
    debug_assert_eq!(l.nr_accesses, r.nr_accesses);
    absorb(l, r, l.nr_accesses);
}

fn size_weighted(l: &Region, r: &Region, value: impl Fn(&Region) -> u32) -> u32 {
    let (sl, sr) = (l.size() as u128, r.size() as u128);
    ((value(l) as u128 * sl + value(r) as u128 * sr) / (sl + sr)) as u32
}

/// `l` takes in `r` with `nr_accesses`: the age averaged by size, the samples and spans summed.
fn absorb(l: &mut Region, r: &Region, nr_accesses: u32) {
    l.nr_accesses = nr_accesses;
    l.age = size_weighted(l, r, |x| x.age);
    l.raw_samples = l.raw_samples.saturating_add(r.raw_samples);
    l.read_samples = l.read_samples.saturating_add(r.read_samples);
    l.write_samples = l.write_samples.saturating_add(r.write_samples);
    l.sampled = l.sampled.hull(r.sampled);
    l.end = r.end;
}

/// Of `max_nr` sampling intervals, how many had a sample in either of two regions that had one
/// in `a` and `b` intervals, if the two were sampled independently.
fn intervals_with_either(a: u32, b: u32, max_nr: u32) -> u32 {
    let both = (a as u64 * b as u64)
        .checked_div(max_nr as u64)
        .unwrap_or(0);
    let either = (a as u64 + b as u64).saturating_sub(both);
    (either.min(max_nr.max(a).max(b) as u64) as u32)
        .max(a)
        .max(b)
}

/// When two adjacent regions are alike enough to merge, and when a region's access count moved
/// enough to restart its age.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MergeRule {
    /// DAMON's threshold: counts that differ by at most this are alike, and a count that moved
    /// by more restarts the region's age.
    pub threshold: u32,
    /// The most intervals a region can count in a window (`aggr / sample`).
    pub max_nr: u32,
    /// Sampled sources: regions are alike unless the [`density`] test at this level tells
    /// their sample densities apart (the window's samples and the recent windows'; the
    /// threshold still restarts ages). `None`: DAMON's rule, for accessed-bit sources.
    pub density_alpha: Option<f64>,
    /// The guided adjustment, accessed-bit sources: a region seen accessed in the window and
    /// one that was not are never alike, however close their counts (a region with a few
    /// accessed pages merged into idle memory averages them away). Dropped, as DAMON's
    /// threshold is raised, while too many regions remain.
    pub keep_seen_apart: bool,
}

impl MergeRule {
    /// DAMON's rule with `threshold`.
    pub fn damon(threshold: u32, max_nr: u32) -> Self {
        MergeRule {
            threshold,
            max_nr,
            density_alpha: None,
            keep_seen_apart: false,
        }
    }

    /// Whether `l` and `r`, holding `l_samples` and `r_samples` samples, are alike.
    fn alike(&self, l: &Region, l_samples: u32, r: &Region, r_samples: u32) -> bool {
        match self.density_alpha {
            Some(alpha) => density::alike(l_samples, l.size(), r_samples, r.size(), alpha),
            None => {
                l.nr_accesses.abs_diff(r.nr_accesses) <= self.threshold
                    && !(self.keep_seen_apart && (l.nr_accesses == 0) != (r.nr_accesses == 0))
            }
        }
    }

    /// The rule of the next pass when too many regions remain: DAMON doubles the threshold; the
    /// density test asks for ten times stronger evidence, and the last pass for none.
    fn looser(self) -> Self {
        MergeRule {
            threshold: self.threshold.saturating_mul(2).max(1),
            density_alpha: self
                .density_alpha
                .map(|a| if a < 1e-5 { 0.0 } else { a / 10.0 }),
            keep_seen_apart: false,
            ..self
        }
    }

    /// Whether a looser pass could still merge more (DAMON stops once the threshold passes the
    /// highest possible count).
    fn can_loosen(&self) -> bool {
        match self.density_alpha {
            Some(alpha) => alpha > 0.0,
            None => {
                self.keep_seen_apart || self.threshold.saturating_mul(2).max(1) / 2 < self.max_nr
            }
        }
    }
}

/// The bytes of some regions, and the largest of them: what the minimum-count pass needs,
/// found by the merge as it writes the regions rather than by a pass of its own (at page
/// granularity over 16 GiB every pass over the regions streams 235 MB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sizes {
    pub total: u64,
    pub largest: u64,
}

impl Sizes {
    pub fn of<'a>(regions: impl IntoIterator<Item = &'a Region>) -> Sizes {
        let mut sizes = Sizes::default();
        for r in regions {
            sizes.add(r.size());
        }
        sizes
    }

    fn add(&mut self, size: u64) {
        self.total += size;
        self.largest = self.largest.max(size);
    }

    fn and(self, other: Sizes) -> Sizes {
        Sizes {
            total: self.total + other.total,
            largest: self.largest.max(other.largest),
        }
    }
}

/// `damon_merge_regions_of`: one pass over a target, in place; `recent` holds the target's
/// samples of its recent windows (sampled sources). Returns the sizes of the regions left.
pub fn merge_regions_of(
    regions: &mut Vec<Region>,
    rule: MergeRule,
    sz_limit: u64,
    count_age: bool,
    recent: Option<&RecentSamples>,
) -> Sizes {
    // The samples each region holds for the density test: the window's and, where there are
    // any, the recent windows' (a warm region's few samples a window cannot tell it from
    // never-touched memory beside it, its samples over several windows can).
    let mut past = recent
        .filter(|_| rule.density_alpha.is_some())
        .map(RecentSamples::counter);
    let mut samples = |r: &Region| {
        let range = AddrRange::new(r.start, r.end);
        let recent = past.as_mut().map_or(0, |c| c.count(range));
        r.raw_samples.saturating_add(recent)
    };
    let mut kept = 0usize;
    // The samples of `regions[kept - 1]`.
    let mut kept_samples = 0u32;
    let mut sizes = Sizes::default();
    for i in 0..regions.len() {
        let mut r = regions[i];
        if count_age {
            let changed_much = r.nr_accesses.abs_diff(r.last_nr_accesses) > rule.threshold;
            // NEW: starting or stopping to be accessed at all also restarts the age.
            let idle_flip = (r.nr_accesses == 0) != (r.last_nr_accesses == 0);
            r.age = if changed_much || idle_flip {
                0
            } else {
                r.age.saturating_add(1)
            };
        }
        let r_samples = samples(&r);
        if kept > 0 {
            let prev = &mut regions[kept - 1];
            if prev.end == r.start
                && prev.size() + r.size() <= sz_limit
                && rule.alike(prev, kept_samples, &r, r_samples)
            {
                merge_two(prev, &r, rule.max_nr);
                kept_samples = kept_samples.saturating_add(r_samples);
                continue;
            }
        }
        if kept > 0 {
            // Nothing merges into it any more.
            sizes.add(regions[kept - 1].size());
        }
        regions[kept] = r;
        kept_samples = r_samples;
        kept += 1;
    }
    regions.truncate(kept);
    if let Some(last) = regions.last() {
        sizes.add(last.size());
    }
    sizes
}

/// `kdamond_merge_regions`: merge by `rule`, loosening it while the region count stays above
/// `max_nr_regions` (best effort; ages are counted only on the first pass). `recent` gives
/// each target's samples of its recent windows, by target index (sampled sources). Returns
/// the sizes of the regions left, of every target.
pub fn merge_regions<'r>(
    targets: &mut [Target],
    mut rule: MergeRule,
    sz_limit: u64,
    max_nr_regions: u32,
    recent: impl Fn(usize) -> Option<&'r RecentSamples>,
) -> Sizes {
    let mut count_age = true;
    loop {
        let mut nr_regions = 0usize;
        let mut sizes = Sizes::default();
        for (ti, t) in targets.iter_mut().enumerate() {
            let of = merge_regions_of(&mut t.regions, rule, sz_limit, count_age, recent(ti));
            sizes = sizes.and(of);
            nr_regions += t.regions.len();
        }
        count_age = false;
        if !(nr_regions > max_nr_regions as usize && rule.can_loosen()) {
            return sizes;
        }
        rule = rule.looser();
    }
}

/// `damon_split_region_at`: `r` keeps `[start, start + sz)`; the returned right piece copies its
/// statistics. Raw sample counts are shared in proportion to size, since they are additive,
/// and the read and write samples in proportion to them ([`Region::give_samples`]).
///
/// Where the window's accesses were seen ([`Region::sampled`]) says more: samples go to the
/// side they fell on, and a piece that got none of them was accessed in no interval so far, so
/// its `nr_accesses` is 0 (left with the region's count, it would carry it into reports,
/// schemes and `last_nr_accesses`). It keeps the region's age, as every split piece does: an
/// age of 0 would be averaged into the cold memory it merges with next, and cold memory beside
/// hot memory, which gets such pieces every window, would never grow old.
pub fn split_region_at(r: &mut Region, sz: u64) -> Region {
    debug_assert!(
        sz > 0 && sz < r.size(),
        "split size {sz} outside region {r:?}"
    );
    let mut right = *r;
    let size = r.size();
    right.start = r.start + sz;
    r.end = right.start;
    let (left_span, right_span) = (r.sampled_within(), right.sampled_within());
    // Where the sampled span shows that every sample fell on one side, they all go there; where
    // samples fell on both sides, each keeps at least one.
    let by_size = (r.raw_samples as u128 * sz as u128 / size as u128) as u32;
    let left_samples = match (left_span, right_span) {
        (Some(_), None) => r.raw_samples,
        (None, Some(_)) => 0,
        (Some(_), Some(_)) if r.raw_samples >= 2 => by_size.clamp(1, r.raw_samples - 1),
        _ => by_size,
    };
    r.give_samples(&mut right, r.raw_samples - left_samples);
    if left_span.is_some() != right_span.is_some() {
        let unsampled = if left_span.is_none() {
            &mut *r
        } else {
            &mut right
        };
        unsampled.nr_accesses = 0;
    }
    r.sampled = left_span.into();
    right.sampled = right_span.into();
    right
}

/// How sure a sample-informed cut must be that the part it cuts off went untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleEvidence {
    /// Cuts that the window's report and schemes see: the part cut off is reported not
    /// accessed, so it must be unlikely that a region touched evenly all over would have left
    /// it without a sample by chance (below [`CHANCE_OF_AN_EMPTY_GAP`]). The samples weighed
    /// are the window's, or the window's and those of the recent windows where those leave a
    /// part of the region unsampled too: a warm part's one sample in a window cannot show the
    /// rest of the region untouched, its samples over several windows can.
    Report,
    /// Cuts made after the window was reported, to measure the part apart in the next window:
    /// a wrong cut costs one region for a while, so an unsampled side larger than a quarter of
    /// the region is enough.
    Refine,
}

/// The largest chance, for a region touched evenly all over, that an unsampled side this large
/// is empty by luck, at which [`IdleEvidence::Report`] still cuts it off as untouched.
pub const CHANCE_OF_AN_EMPTY_GAP: f64 = 0.02;

/// Whether `gap` bytes of a region of `size` bytes, beside the span of `samples` samples, are
/// worth a region of their own: more than a quarter of the region (less would mostly cut
/// between samples of evenly touched memory), and, when the cut is `reported`, large enough
/// that `samples` uniform samples would all miss it with a chance below
/// [`CHANCE_OF_AN_EMPTY_GAP`].
fn idle_gap(gap: u64, size: u64, samples: u32, reported: bool) -> bool {
    let large = gap * 4 > size;
    let miss = 1.0 - gap as f64 / size as f64;
    large && (!reported || miss.powi(samples.min(i32::MAX as u32) as i32) < CHANCE_OF_AN_EMPTY_GAP)
}

/// An unsampled side of a region that may be cut off as idle.
#[derive(Debug, Clone, Copy)]
struct IdleSide {
    /// The bytes cut off.
    bytes: u64,
    /// Where the cut is.
    at: u64,
}

/// Where region `r` may be cut off as idle for `evidence`, with `recent` its target's samples
/// of the recent windows: per side (left, right), the largest unsampled part that the evidence
/// allows.
fn idle_sides(
    r: &Region,
    recent: Option<&RecentSamples>,
    min_sz: u64,
    evidence: IdleEvidence,
) -> [Option<IdleSide>; 2] {
    let Some(span) = r.sampled_within() else {
        return [None, None];
    };
    let reported = evidence == IdleEvidence::Report;
    // The unsampled part beside `s` on one side.
    let beside = |s: AddrRange, left: bool| {
        if left {
            let lo = align_down(s.start, min_sz).max(r.start);
            IdleSide {
                bytes: lo - r.start,
                at: lo,
            }
        } else {
            let hi = align_up(s.end, min_sz).min(r.end);
            IdleSide {
                bytes: r.end - hi,
                at: hi,
            }
        }
    };
    let idle = |s: AddrRange, samples: u32, left: bool| {
        let side = beside(s, left);
        (side.bytes >= min_sz && idle_gap(side.bytes, r.size(), samples, reported)).then_some(side)
    };
    let mut sides = [idle(span, r.seen(), true), idle(span, r.seen(), false)];
    if !reported {
        return sides;
    }
    // Where the window's samples are too few to tell, the window's and the recent windows'
    // together may not be: their span is narrower, so the part beside it smaller, but they
    // weigh more. The lookup is worth it only beside a part large enough to be cut at all.
    let undecided = |i: usize| sides[i].is_none() && beside(span, i == 0).bytes * 4 > r.size();
    if !(undecided(0) || undecided(1)) {
        return sides;
    }
    let Some((past, n)) = recent.and_then(|h| h.within(AddrRange::new(r.start, r.end))) else {
        return sides;
    };
    let (both, samples) = (span.hull(past), r.seen().saturating_add(n));
    for (i, side) in sides.iter_mut().enumerate() {
        if side.is_none() {
            *side = idle(both, samples, i == 0);
        }
    }
    sides
}

/// Sample-informed split (udamon, sampled sources only): a region whose window's samples all
/// fell in part of it is cut at that span's edges, aligned outward to `min_sz`, where the part
/// left out is idle enough for `evidence` (see [`IdleEvidence`]; `recent` gives each target's
/// samples of the recent windows, by target index, which only reported cuts weigh). The
/// largest parts go first while the region count stays within `max_nr_regions`. Regions
/// without a sampled span (accessed-bit sources) are left alone.
pub fn split_at_sampled_extents<'r>(
    targets: &mut [Target],
    max_nr_regions: u32,
    min_sz: u64,
    evidence: IdleEvidence,
    recent: impl Fn(usize) -> Option<&'r RecentSamples>,
) {
    let nr: usize = targets.iter().map(Target::nr_regions).sum();
    let budget = (max_nr_regions as usize).saturating_sub(nr);
    if budget == 0 {
        return;
    }
    // Every idle side of every target, by target.
    let mut cuts: Vec<(usize, IdleSide)> = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        // Most regions got no sample: a cheap test keeps the pass a plain scan over them.
        for r in t.regions.iter().filter(|r| r.sampled.is_some()) {
            let sides = idle_sides(r, recent(ti), min_sz, evidence);
            cuts.extend(sides.into_iter().flatten().map(|side| (ti, side)));
        }
    }
    if cuts.is_empty() {
        return;
    }
    // Stable: among equal gaps the lower address goes first.
    cuts.sort_by_key(|(_, side)| std::cmp::Reverse(side.bytes));
    cuts.truncate(budget);
    cuts.sort_unstable_by_key(|&(ti, side)| (ti, side.at));
    for target_cuts in cuts.chunk_by(|a, b| a.0 == b.0) {
        let at: Vec<u64> = target_cuts.iter().map(|(_, side)| side.at).collect();
        insert_cuts(&mut targets[target_cuts[0].0].regions, &at);
    }
}

/// Cuts `regions` at the addresses `cuts` (ascending, each inside a region and none twice), in
/// place: from the back, so that every region moves once and the vector keeps its buffer.
pub(crate) fn insert_cuts(regions: &mut Vec<Region>, cuts: &[u64]) {
    let old_len = regions.len();
    regions.resize(old_len + cuts.len(), Region::default());
    let mut write = regions.len();
    let mut pending = cuts.len();
    for read in (0..old_len).rev() {
        if pending == 0 {
            break;
        }
        let mut r = regions[read];
        let mut inside = pending;
        while inside > 0 && cuts[inside - 1] > r.start {
            inside -= 1;
        }
        // Pieces from the right: each cut, the highest first, takes the part above it.
        for &at in cuts[inside..pending].iter().rev() {
            let sz = at - r.start;
            let right = split_region_at(&mut r, sz);
            write -= 1;
            regions[write] = right;
        }
        write -= 1;
        regions[write] = r;
        pending = inside;
    }
    debug_assert_eq!(pending, 0, "a cut outside every region");
}

/// A random cut point: 10 % to 90 % of `size`, aligned down to `min_sz`; `None` when that
/// rounds to nothing or to the whole region.
fn random_cut(rng: &mut Prng, size: u64, min_sz: u64) -> Option<u64> {
    let k = rng.in_range(1, 10);
    let sz = align_down((k as u128 * size as u128 / 10) as u64, min_sz);
    (sz != 0 && sz < size).then_some(sz)
}

/// `damon_split_regions_of`: split every region into up to `nr_subs` pieces at random points.
pub fn split_regions_of(regions: &mut Vec<Region>, nr_subs: u32, min_sz: u64, rng: &mut Prng) {
    split_regions_of_where(regions, nr_subs, min_sz, rng, |_| true);
}

/// [`split_regions_of`] of the regions `splits` picks; the others stay whole.
fn split_regions_of_where(
    regions: &mut Vec<Region>,
    nr_subs: u32,
    min_sz: u64,
    rng: &mut Prng,
    splits: impl Fn(&Region) -> bool,
) {
    let mut out = Vec::with_capacity(regions.len() * nr_subs as usize);
    for &r in regions.iter() {
        if !splits(&r) {
            out.push(r);
            continue;
        }
        let mut left = r;
        // Pieces cut off the right end, in reverse address order.
        let mut right_pieces: Vec<Region> = Vec::new();
        let mut i = 0;
        while i + 1 < nr_subs && left.size() > 2 * min_sz {
            if let Some(sz) = random_cut(rng, left.size(), min_sz) {
                right_pieces.push(split_region_at(&mut left, sz));
            }
            i += 1;
        }
        out.push(left);
        out.extend(right_pieces.into_iter().rev());
    }
    *regions = out;
}

/// `damon_split_some_regions` (NEW): split one region in every `step`, rotating the offset per
/// call so that all regions get their turn while the count is above half the maximum.
fn split_some_regions(
    targets: &mut [Target],
    step: usize,
    state: &mut SplitState,
    min_sz: u64,
    rng: &mut Prng,
    splits: impl Fn(&Region) -> bool,
) {
    let offset = (state.rotation % step as u64) as usize;
    state.rotation = state.rotation.wrapping_add(1);
    let mut idx = 0usize;
    for t in targets.iter_mut() {
        let mut out = Vec::with_capacity(t.regions.len() + t.regions.len() / step + 1);
        for &r in t.regions.iter() {
            let mut left = r;
            if !splits(&r) {
                out.push(left);
                continue;
            }
            let chosen = idx % step == offset;
            idx += 1;
            if chosen
                && left.size() >= 2 * min_sz
                && let Some(sz) = random_cut(rng, left.size(), min_sz)
            {
                let right = split_region_at(&mut left, sz);
                out.push(left);
                out.push(right);
                continue;
            }
            out.push(left);
        }
        t.regions = out;
    }
}

/// Split heuristics state that upstream keeps in function-static variables, per context here.
#[derive(Debug, Clone, Default)]
pub struct SplitState {
    pub last_nr_regions: usize,
    pub rotation: u64,
}

/// `kdamond_split_regions` (NEW): runs once per aggregation, after the reset.
pub fn split_regions(
    targets: &mut [Target],
    max_nr_regions: u32,
    min_sz: u64,
    state: &mut SplitState,
    rng: &mut Prng,
) {
    split_regions_where(targets, max_nr_regions, min_sz, state, rng, |_| true);
}

/// [`split_regions`] of the regions `splits` picks (the guided adjustment splits regions seen
/// accessed at random, and probes idle ones instead); how much to split follows the count of
/// all regions, as upstream's.
pub fn split_regions_where(
    targets: &mut [Target],
    max_nr_regions: u32,
    min_sz: u64,
    state: &mut SplitState,
    rng: &mut Prng,
    splits: impl Fn(&Region) -> bool + Copy,
) {
    let nr: usize = targets.iter().map(Target::nr_regions).sum();
    let max = max_nr_regions as usize;
    if nr < max {
        if nr > max / 2 {
            let step = max / (max - nr);
            split_some_regions(targets, step.max(1), state, min_sz, rng, splits);
        } else {
            // A stable region count hints that a region's middle may differ from its ends.
            let nr_subs = if state.last_nr_regions == nr && nr < max / 3 {
                3
            } else {
                2
            };
            for t in targets.iter_mut() {
                split_regions_of_where(&mut t.regions, nr_subs, min_sz, rng, splits);
            }
        }
    }
    state.last_nr_regions = nr;
}

/// `damon_apply_min_nr_regions` (NEW): split every region larger than the size limit, so that
/// `min_nr_regions` holds strictly. Returns the limit, aligned up to `min_region_sz`.
pub fn apply_min_nr_regions(
    targets: &mut [Target],
    min_nr_regions: u32,
    min_region_sz: u64,
) -> u64 {
    let sizes = Sizes::of(targets.iter().flat_map(|t| &t.regions));
    apply_min_nr_regions_of(targets, min_nr_regions, min_region_sz, sizes)
}

/// [`apply_min_nr_regions`] of targets whose regions' sizes are `sizes` already (the merge
/// found them).
pub fn apply_min_nr_regions_of(
    targets: &mut [Target],
    min_nr_regions: u32,
    min_region_sz: u64,
    Sizes { total, largest }: Sizes,
) -> u64 {
    debug_assert_eq!(
        Sizes::of(targets.iter().flat_map(|t| &t.regions)),
        Sizes { total, largest }
    );
    let limit = align_up(
        sz_limit_of(total, min_nr_regions, min_region_sz),
        min_region_sz,
    );
    if largest <= limit {
        return limit;
    }
    for t in targets.iter_mut() {
        if t.regions.iter().all(|r| r.size() <= limit) {
            continue;
        }
        let mut out = Vec::with_capacity(t.regions.len());
        for &r in t.regions.iter() {
            let mut rest = r;
            while rest.size() > limit {
                let right = split_region_at(&mut rest, limit);
                out.push(rest);
                rest = right;
            }
            out.push(rest);
        }
        t.regions = out;
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::AddrRange;

    fn region(start: u64, end: u64, nr: u32) -> Region {
        Region {
            nr_accesses: nr,
            ..Region::new(start, end)
        }
    }

    /// Upstream's kunit test `damon_test_split_at`: both pieces keep the region's monitoring
    /// results.
    ///
    /// old:    [0,            100)
    /// expect: [0, 25)[25,    100)
    #[test]
    fn damon_test_split_at() {
        let mut r = Region {
            nr_accesses: 42,
            last_nr_accesses: 15,
            age: 10,
            ..Region::new(0, 100)
        };
        let right = split_region_at(&mut r, 25);
        assert_eq!((r.start, r.end), (0, 25));
        assert_eq!((right.start, right.end), (25, 100));
        assert_eq!(
            (right.nr_accesses, right.last_nr_accesses, right.age),
            (r.nr_accesses, r.last_nr_accesses, r.age)
        );
    }

    /// Upstream's kunit test `damon_test_merge_two`: the merged region's `nr_accesses` and age
    /// are the size-weighted means, (10·100 + 20·200) / 300 = 16 and (9·100 + 21·200) / 300 =
    /// 17, and one region remains.
    ///
    /// old:    [0, 100)[100,      300)
    /// expect: [0,                300)
    #[test]
    fn damon_test_merge_two() {
        let mut l = Region {
            age: 9,
            ..region(0, 100, 10)
        };
        let r = Region {
            age: 21,
            ..region(100, 300, 20)
        };
        merge_two(&mut l, &r, 100);
        assert_eq!((l.start, l.end, l.nr_accesses, l.age), (0, 300, 16, 17));
    }

    /// Upstream's kunit test `damon_test_merge_regions_of`: threshold 9, size limit 9999.
    #[test]
    fn damon_test_merge_regions_of() {
        let input = [
            (0, 100, 0),
            (100, 112, 0),  // merges with [0, 100): the same count
            (114, 122, 10), // a hole (112-114) before it: nothing merges across
            (122, 130, 10), // merges with [114, 122)
            (130, 156, 20), // 10 from both neighbours, above 9: stays apart
            (156, 170, 30), // as does this one
            (170, 184, 1),
            (184, 230, 2),   // merges with [170, 184)
            (230, 10170, 5), // not with [170, 230): 60 + 9940 = 10000 bytes, above 9999
        ];
        let mut regions: Vec<Region> = input.iter().map(|&(s, e, n)| region(s, e, n)).collect();
        merge_regions_of(&mut regions, MergeRule::damon(9, 100), 9999, true, None);
        let got: Vec<(u64, u64)> = regions.iter().map(|r| (r.start, r.end)).collect();
        // old:    0-100-112  114-122-130-156-170-184-230-10170
        // expect: 0-----112  114-----130-156-170-----230-10170
        assert_eq!(
            got,
            [
                (0, 112),
                (114, 130),
                (130, 156),
                (156, 170),
                (170, 230),
                (230, 10170)
            ]
        );
    }

    /// Upstream's kunit test `damon_test_split_regions_of`: the cuts are random, so only upper
    /// bounds are checked upstream; we also check that coverage is unchanged.
    #[test]
    fn damon_test_split_regions_of() {
        let mut rng = Prng::seeded(3);
        for _ in 0..100 {
            // [0, 22) in at most 2 pieces.
            let mut t = Target::with_regions(None, &[AddrRange::new(0, 22)]);
            split_regions_of(&mut t.regions, 2, 1, &mut rng);
            assert!(t.nr_regions() <= 2);
            // [0, 220) in at most 4 pieces.
            let mut t = Target::with_regions(None, &[AddrRange::new(0, 220)]);
            split_regions_of(&mut t.regions, 4, 1, &mut rng);
            assert!(t.nr_regions() <= 4);
            assert_eq!(t.total_size(), 220);
            // Three regions in at most 4 pieces each, on a minimum region size of 5 (upstream's
            // check of that, `size % 5 >= 0`, always holds; ours checks the alignment).
            let ranges = [
                AddrRange::new(0, 220),
                AddrRange::new(300, 400),
                AddrRange::new(500, 700),
            ];
            let mut t = Target::with_regions(None, &ranges);
            split_regions_of(&mut t.regions, 4, 5, &mut rng);
            assert!(t.nr_regions() <= 12);
            assert!(t.regions.iter().all(|r| (r.start % 5, r.end % 5) == (0, 0)));
        }
    }

    /// Upstream's kunit test `damon_test_split_above_half_progresses`: with more than half of
    /// the maximum region count (760 of 1500), splitting still makes progress, within the
    /// maximum, instead of stopping.
    #[test]
    fn damon_test_split_above_half_progresses() {
        let mut t = Target::new(None);
        for i in 0..760u64 {
            t.regions.push(Region {
                nr_accesses: if i % 2 == 0 { 100 } else { 0 },
                age: 5,
                ..Region::new(100 * i, 100 * i + 100)
            });
        }
        let mut targets = [t];
        let mut state = SplitState::default();
        split_regions(&mut targets, 1500, 1, &mut state, &mut Prng::seeded(9));
        let after = targets[0].nr_regions();
        assert!(after > 760 && after <= 1500, "{after} regions after split");
        // step = 1500 / 740 = 2: about half of the regions were split once.
        assert_eq!(after, 760 + 380);
    }

    /// Upstream's kunit test `damon_test_apply_min_nr_regions`: one region [0, sz) split so
    /// that there are at least `min_nr` regions; the returned size limit, and the count.
    #[test]
    fn damon_test_apply_min_nr_regions() {
        for (sz, min_sz, min_nr, want_limit, want_nr) in [
            // The common case: ten regions of 1.
            (10, 1, 10, 1, 10),
            // No size limit of zero: 10 bytes make at most ten regions.
            (10, 1, 15, 1, 10),
            // The limit is aligned to the minimum region size: 10 / 2 = 5, up to 6.
            //
            // old:    [0,        10)
            // expect: [0,   6)[6, 10)
            (10, 2, 2, 6, 2),
            // When the minimum count and the minimum region size conflict, the size wins.
            (10, 2, 10, 2, 5),
        ] {
            let mut targets = [Target::with_regions(None, &[AddrRange::new(0, sz)])];
            let limit = apply_min_nr_regions(&mut targets, min_nr, min_sz);
            assert_eq!(limit, want_limit, "sz {sz} min_sz {min_sz} min_nr {min_nr}");
            assert_eq!(targets[0].nr_regions(), want_nr);
        }
    }

    fn sampled(start: u64, end: u64, span: (u64, u64), samples: u32) -> Region {
        Region {
            nr_accesses: 1,
            raw_samples: samples,
            sampled: Some(AddrRange::new(span.0, span.1)).into(),
            ..Region::new(start, end)
        }
    }

    #[test]
    fn sampled_split_cuts_large_unsampled_sides_at_aligned_edges() {
        const P: u64 = 4096;
        // Samples in pages 10..20 (the span's edges fall inside pages 10 and 19): the 10 pages
        // to the left are not more than a quarter of the region, the 80 to the right are.
        let r = sampled(0, 100 * P, (10 * P + 8, 19 * P + 9), 6);
        let mut targets = [Target {
            pid: None,
            regions: vec![r, Region::new(100 * P, 200 * P)],
        }];
        split_at_sampled_extents(&mut targets, 10, P, IdleEvidence::Refine, |_| None);
        let got: Vec<_> = targets[0]
            .regions
            .iter()
            .map(|r| (r.start / P, r.end / P, r.raw_samples, r.sampled.is_some()))
            .collect();
        assert_eq!(
            got,
            [(0, 20, 6, true), (20, 100, 0, false), (100, 200, 0, false)],
            "the samples stay with the sampled piece; a region without samples is left alone"
        );
        let counts: Vec<_> = targets[0].regions.iter().map(|r| r.nr_accesses).collect();
        assert_eq!(
            counts,
            [1, 0, 0],
            "the cut-off piece was accessed in no interval"
        );
    }

    #[test]
    fn reported_cuts_need_a_gap_that_few_samples_would_miss_by_chance() {
        const P: u64 = 4096;
        let cut = |samples, evidence| {
            // Samples within the first 30 pages of 100: 70 % of the region unsampled.
            let mut targets = [Target {
                pid: None,
                regions: vec![sampled(0, 100 * P, (0, 30 * P), samples)],
            }];
            split_at_sampled_extents(&mut targets, 10, P, evidence, |_| None);
            targets[0].nr_regions() == 2
        };
        // Evenly spread samples all miss 70 % of a region with a chance of 0.3^n.
        assert!(
            !cut(3, IdleEvidence::Report),
            "0.3^3 = 2.7 %: could be luck"
        );
        assert!(cut(4, IdleEvidence::Report), "0.3^4 = 0.8 %: idle");
        assert!(
            cut(1, IdleEvidence::Refine),
            "refining needs only a large side"
        );
    }

    #[test]
    fn reported_cuts_weigh_the_recent_windows_samples_too() {
        const P: u64 = 4096;
        // This window: one sample, in page 5 of 100; 94 pages unsampled on the right miss it
        // by chance in 6 % of windows.
        let cut_at = |past: &[u64]| {
            let mut recent = RecentSamples::default();
            recent.add(past.iter().copied());
            recent.complete_window();
            let mut targets = [Target {
                pid: None,
                regions: vec![sampled(0, 100 * P, (5 * P, 5 * P + 1), 1)],
            }];
            split_at_sampled_extents(&mut targets, 10, P, IdleEvidence::Report, |t| {
                [&recent][..].get(t).copied()
            });
            let r = &targets[0].regions;
            (r.len() == 2).then(|| (r[1].start / P, r[1].nr_accesses))
        };
        assert_eq!(cut_at(&[]), None, "one sample could miss them by luck");
        assert_eq!(
            cut_at(&[2 * P, 8 * P, 15 * P + 9]),
            Some((16, 0)),
            "four samples within 16 pages miss the other 84 by chance in 0.07 %"
        );
        assert_eq!(
            cut_at(&[2 * P, 8 * P, 90 * P]),
            None,
            "a part sampled in a recent window is not reported idle on their evidence"
        );
        assert_eq!(
            cut_at(&[150 * P, 200 * P, 300 * P]),
            None,
            "samples outside the region weigh nothing"
        );
    }

    #[test]
    fn sampled_split_prefers_the_largest_gaps_within_the_region_bound() {
        const P: u64 = 4096;
        let mut targets = [Target {
            pid: None,
            regions: vec![
                sampled(0, 100 * P, (0, P), 3), // 99 pages unsampled on the right
                sampled(100 * P, 200 * P, (199 * P, 200 * P), 3), // 99 on the left
                sampled(200 * P, 300 * P, (200 * P, 250 * P), 3), // 50 on the right
            ],
        }];
        split_at_sampled_extents(&mut targets, 4, P, IdleEvidence::Refine, |_| None);
        let cuts: Vec<_> = targets[0].regions.iter().map(|r| r.start / P).collect();
        assert_eq!(
            cuts,
            [0, 1, 100, 200],
            "one cut allowed, at the first 99-page gap"
        );
        split_at_sampled_extents(&mut targets, 4, P, IdleEvidence::Refine, |_| None);
        assert_eq!(targets[0].nr_regions(), 4, "no budget left");
    }

    #[test]
    fn split_and_merge_keep_the_sampled_span_and_samples() {
        let mut r = sampled(0, 100, (60, 70), 5);
        let right = split_region_at(&mut r, 50);
        assert_eq!((r.raw_samples, r.sampled.get()), (0, None));
        assert_eq!(
            (right.raw_samples, right.sampled.get()),
            (5, Some(AddrRange::new(60, 70)))
        );
        assert_eq!(
            (r.nr_accesses, right.nr_accesses),
            (0, 1),
            "the piece without samples was accessed in no interval"
        );
        let mut both_sides = sampled(0, 100, (10, 90), 5);
        let other = split_region_at(&mut both_sides, 50);
        assert_eq!((both_sides.nr_accesses, other.nr_accesses), (1, 1));
        let mut l = Region {
            read_samples: 2,
            ..sampled(0, 50, (10, 20), 2)
        };
        let right = Region {
            read_samples: 1,
            write_samples: 5,
            ..right
        };
        merge_two(&mut l, &right, 20);
        assert_eq!(
            (
                l.raw_samples,
                l.read_samples,
                l.write_samples,
                l.sampled.get()
            ),
            (7, 3, 5, Some(AddrRange::new(10, 70))),
            "samples of each kind add up"
        );
        // Accessed-bit regions have no span; samples are shared by size.
        let mut r = Region {
            raw_samples: 10,
            read_samples: 10,
            write_samples: 2,
            ..Region::new(0, 100)
        };
        let right = split_region_at(&mut r, 30);
        assert_eq!((r.raw_samples, right.raw_samples), (3, 7));
        assert_eq!((r.sampled.get(), right.sampled.get()), (None, None));
        assert_eq!(
            [
                (r.read_samples, r.write_samples),
                (right.read_samples, right.write_samples)
            ],
            [(3, 1), (7, 1)],
            "each kind shared as the samples are"
        );
    }

    #[test]
    fn seen_and_unseen_stay_apart_until_too_many_regions_remain() {
        let rule = MergeRule {
            keep_seen_apart: true,
            ..MergeRule::damon(2, 20)
        };
        // Counts within the threshold of each other, but one region was seen accessed.
        let regions = || vec![region(0, 10, 0), region(10, 20, 1), region(20, 30, 0)];
        let mut targets = [Target {
            pid: None,
            regions: regions(),
        }];
        merge_regions(&mut targets, rule, u64::MAX, 10, |_| None);
        assert_eq!(targets[0].nr_regions(), 3);
        merge_regions(&mut targets, MergeRule::damon(2, 20), u64::MAX, 10, |_| {
            None
        });
        assert_eq!(targets[0].nr_regions(), 1, "DAMON's rule merges them");
        // Above the maximum, the rule gives way as DAMON's threshold does.
        let mut targets = [Target {
            pid: None,
            regions: regions(),
        }];
        merge_regions(&mut targets, rule, u64::MAX, 1, |_| None);
        assert_eq!(targets[0].nr_regions(), 1);
    }

    #[test]
    fn merge_raises_threshold_above_max() {
        // 40 regions of alternating frequency, max 10: the threshold doubles until merges fit.
        let mut t = Target::new(None);
        for i in 0..40u64 {
            t.regions
                .push(region(i * 10, i * 10 + 10, if i % 2 == 0 { 0 } else { 8 }));
        }
        let mut targets = [t];
        merge_regions(&mut targets, MergeRule::damon(0, 20), u64::MAX, 10, |_| {
            None
        });
        assert_eq!(targets[0].nr_regions(), 1);
        assert_eq!(targets[0].total_size(), 400);
    }

    #[test]
    fn merge_keeps_ages_counted_once() {
        let mut t = Target::new(None);
        for i in 0..4u64 {
            t.regions.push(Region {
                age: 3,
                last_nr_accesses: 5,
                ..region(i * 10, i * 10 + 10, 5 + i as u32 * 4)
            });
        }
        let mut targets = [t];
        // Two passes happen (4 > max 1); ages must not be incremented twice.
        merge_regions(&mut targets, MergeRule::damon(3, 100), u64::MAX, 1, |_| {
            None
        });
        assert!(
            targets[0].regions.iter().all(|r| r.age <= 4),
            "{:?}",
            targets[0].regions
        );
    }
}
