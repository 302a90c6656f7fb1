//! A target's working set: the memory it touched within a horizon, computed here once for
//! every view (reports, `top`, serve's metrics), so that a number means the same everywhere.
//!
//! [`working_sets`] answers "bytes touched within each of these horizons" from what both the
//! live monitor and a record's replay keep alike: the windows' accessed ranges
//! ([`AccessHistory`]) and the samples ([`PageSamples`]), with the mappings' resident bytes. Its
//! answers hold three invariants, whatever the samples' noise:
//!
//! - **Monotone in the horizon**: the pages touched within 10 s are among those touched within
//!   60 s, so no horizon reads above a longer one, for the target and for each of its
//!   mappings. Each horizon is estimated on its own evidence first; where two disagree with
//!   that order, they are pooled (isotonic regression weighted by each estimate's precision, so
//!   the horizon with more samples weighs more), and their intervals narrowed by what the
//!   order implies (a shorter horizon's low end is a longer one's too). Every answer is taken
//!   within a fixed ladder of horizons ([`RUNGS_US`]), so that the horizons serve exports read
//!   the same whichever others are asked beside them, in every view.
//! - **Never above what is resident**: no mapping counts beyond its resident bytes, and the
//!   target (code included) not beyond its own.
//!
//! Physical memory ([`AddressSpace::Physical`], the host) is estimated as one memory: one
//! process's pages lie all over it, so no region of DAMON's tells touched frames apart, and
//! its regions' pieces would each count whole on the one sample they drew. Its bound is the
//! memory in use.
//!
//! A horizon's own estimate, piece by piece ([`estimate_cells`]):
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

use crate::access_history::AccessHistory;
use crate::attrs::{PAGE_SIZE, SAMPLED_MAX_REGIONS, SAMPLED_MIN_REGIONS};
use crate::density;
use crate::page_samples::{MAX_EVIDENCE_US, PageSamples};
use crate::region::AddrRange;
use crate::touched::{Touched, Unbounded};

/// The ladder of horizons (µs; 0 is the window itself) that every answer is taken within: the
/// horizons serve exports. A horizon between two rungs is held between their answers (and
/// pooled with the others asked between them).
pub const RUNGS_US: [u64; 3] = [0, 10_000_000, LONGEST_US];

/// The longest horizon answered: as long as samples are kept.
pub const LONGEST_US: u64 = crate::page_samples::KEEP_US;

/// How the bytes of the memory accessed within a horizon are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Basis {
    /// At page resolution from the samples' repeats (the default; sources without samples
    /// count whole regions).
    #[default]
    Pages,
    /// Every accessed region whole, as DAMON and damo count.
    Regions,
}

/// What a target's addresses are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AddressSpace {
    /// A process's virtual memory.
    #[default]
    Virtual,
    /// The host's physical memory (see the module documentation).
    Physical,
}

impl AddressSpace {
    /// The address space of a record made by access source `name` (`record --host`'s are
    /// named `paddr/...`).
    pub fn of_source(name: &str) -> AddressSpace {
        if name.starts_with("paddr") {
            AddressSpace::Physical
        } else {
            AddressSpace::Virtual
        }
    }
}

/// What one target's working sets are estimated from.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// Which memory DAMON's rule saw accessed, window by window.
    pub history: &'a AccessHistory,
    /// Where the data samples fell.
    pub data: &'a PageSamples,
    /// The sampled instructions' pages.
    pub code: &'a PageSamples,
    /// The mappings' resident bytes (sorted, disjoint; empty when unknown).
    pub resident: &'a [ResidentRange],
    /// The target's resident bytes (the memory in use, for the host), when known.
    pub resident_total: Option<u64>,
    /// The mappings' resident bytes summed, as of their walk ([`walked_total`]): the bound
    /// where `resident_total` is unknown, which keeps a runtime that reserves far more than it
    /// touches (V8) within what it holds, even in mappings made since the walk.
    pub walked_total: Option<u64>,
    /// The aggregation window's length: the shortest horizon.
    pub window_us: u64,
    pub space: AddressSpace,
    pub basis: Basis,
}

/// One target's working set over a horizon.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkingSet {
    /// The horizon asked for (0: the window).
    pub horizon_us: u64,
    /// The memory accessed within the horizon, with each piece's estimate in pages: the
    /// accessed cells (sorted, disjoint), then the code mappings counted through their sampled
    /// instructions; sorted by start.
    pub cells: Vec<(AddrRange, Touched)>,
    /// The estimate in pages, summed over the cells.
    pub total: Touched,
    /// The part of `total` that is code counted through its sampled instructions.
    pub code: Touched,
}

impl WorkingSet {
    pub fn bytes(&self) -> u64 {
        to_bytes(self.total.pages)
    }

    pub fn low_bytes(&self) -> u64 {
        to_bytes(self.total.low)
    }

    pub fn high_bytes(&self) -> u64 {
        to_bytes(self.total.high)
    }

    pub fn code_bytes(&self) -> u64 {
        to_bytes(self.code.pages)
    }

    /// The estimate's pages within each of `ranges` (sorted, disjoint: a target's regions),
    /// each cell's pages shared out by the overlap: one walk over both.
    pub fn pages_in_each(&self, ranges: &[AddrRange]) -> Vec<f64> {
        let mut cells = self.cells.iter().peekable();
        ranges
            .iter()
            .map(|&range| {
                // A cell ending before this range ends before every later one too.
                while cells.next_if(|(c, _)| c.end <= range.start).is_some() {}
                cells
                    .clone()
                    .take_while(|(c, _)| c.start < range.end)
                    .map(|(c, t)| t.pages * c.overlap(range) as f64 / c.size().max(1) as f64)
                    .sum()
            })
            .collect()
    }

    /// The estimate's bytes within `range` (a mapping, say): each cell's share by its overlap.
    pub fn bytes_within(&self, range: AddrRange) -> u64 {
        let pages: f64 = self
            .cells
            .iter()
            .map(|(c, t)| t.pages * c.overlap(range) as f64 / c.size().max(1) as f64)
            .sum();
        to_bytes(pages)
    }
}

/// The resident bytes of walked mappings, summed (`None` before a walk).
pub fn walked_total(resident: &[ResidentRange]) -> Option<u64> {
    (!resident.is_empty()).then(|| resident.iter().map(|m| m.resident_bytes).sum())
}

/// Pages (an estimate's unit) as bytes.
pub fn to_bytes(pages: f64) -> u64 {
    (pages * PAGE_SIZE as f64).round() as u64
}

/// The working sets over each of `horizons_us` (0: the window; any order) at `now_us`, the
/// latest window's end: one answer per horizon asked, in the order asked, holding the
/// invariants of the module documentation.
pub fn working_sets(evidence: &Evidence, now_us: u64, horizons_us: &[u64]) -> Vec<WorkingSet> {
    let effective = |h: u64| h.max(evidence.window_us).max(1);
    // The rungs and the horizons asked, by effective length: one estimate each.
    // Whole counts of the cells of nested horizons are in order already: without samples, the
    // horizons asked alone.
    let sampled =
        evidence.basis == Basis::Pages && !(evidence.data.is_empty() && evidence.code.is_empty());
    let rungs_us: &[u64] = if sampled { &RUNGS_US } else { &[] };
    let mut ladder: Vec<(u64, bool)> = rungs_us.iter().map(|&h| (effective(h), true)).collect();
    ladder.extend(horizons_us.iter().map(|&h| (effective(h), false)));
    ladder.sort_unstable_by_key(|&(h, rung)| (h, !rung));
    ladder.dedup_by_key(|x| x.0);
    let mut estimates: Vec<Vec<Cell>> = ladder
        .iter()
        .map(|&(h, _)| one_horizon(evidence, now_us, h))
        .collect();
    let rungs: Vec<bool> = ladder.iter().map(|x| x.1).collect();
    make_monotone(&mut estimates, &rungs, evidence);
    // Pooling one mapping's horizons can lift a horizon whose other mappings were not lowered:
    // one factor for all keeps both the order and the target's bound.
    if let Some(bound) = evidence.resident_total.or(evidence.walked_total) {
        let allowed = bound as f64 / PAGE_SIZE as f64;
        let most = estimates
            .iter()
            .map(|cells| cells.iter().map(|c| c.touched.pages).sum::<f64>())
            .fold(0.0, f64::max);
        if most > allowed {
            for c in estimates.iter_mut().flatten() {
                c.touched = c.touched.scaled(allowed / most);
            }
        }
    }
    let index: Vec<usize> = horizons_us
        .iter()
        .map(|&h| {
            ladder
                .iter()
                .position(|x| x.0 == effective(h))
                .expect("every horizon asked is on the ladder")
        })
        .collect();
    // The ladder's estimates are the answers' cells: each taken, not copied, by the last
    // answer that needs it (a record's snapshot may hold hundreds of thousands).
    let mut last_use = vec![usize::MAX; ladder.len()];
    for (k, &i) in index.iter().enumerate() {
        last_use[i] = k;
    }
    horizons_us
        .iter()
        .zip(index)
        .enumerate()
        .map(|(k, (&h, i))| {
            let cells = if last_use[i] == k {
                std::mem::take(&mut estimates[i])
            } else {
                estimates[i].clone()
            };
            let parts = cells.iter().map(|c| c.touched);
            let mut total = Touched::sum(parts.clone());
            if !total.is_settled()
                && let Some(pooled) = pooled_data(evidence, now_us, ladder[i].0)
            {
                total = with_pooled(total, parts, pooled);
            }
            let mut total = with_method_error(total);
            if let Some(bound) = evidence.resident_total.or(evidence.walked_total) {
                // The interval too stops at what the target holds.
                total.high = total
                    .high
                    .min(bound as f64 / PAGE_SIZE as f64)
                    .max(total.pages);
            }
            WorkingSet {
                horizon_us: h,
                total,
                code: Touched::sum(cells.iter().filter(|c| c.code).map(|c| c.touched)),
                cells: cells.into_iter().map(|c| (c.range, c.touched)).collect(),
            }
        })
        .collect()
}

/// A piece of a working set: accessed memory, or a code mapping counted through its sampled
/// instructions.
#[derive(Debug, Clone, Copy)]
struct Cell {
    range: AddrRange,
    touched: Touched,
    code: bool,
}

/// What a horizon's data samples say taken as one memory: Chao's estimate over the memory seen
/// accessed, and the most pages they allow with the inequality between pages that their counts
/// clearly show ([`PageSamples::pooled_evidence`]). None for whole-region counts and sources
/// without samples.
fn pooled_data(ev: &Evidence, now_us: u64, horizon_us: u64) -> Option<(Touched, f64)> {
    if ev.basis != Basis::Pages || ev.data.is_empty() {
        return None;
    }
    let cells = ev.history.accessed_within(horizon_us);
    (!cells.is_empty()).then(|| {
        ev.data
            .pooled_evidence(&cells, now_us, horizon_us, Unbounded::Point)
    })
}

/// `total`, the unsettled sum of `parts` (a horizon's pieces), with what the horizon's data
/// samples say together (`pooled`, from [`pooled_data`]). Chao's low end bounds the total from
/// below however unequally pages draw samples. Where the pooled count agrees with the pieces'
/// sum (memory touched all over, each piece counted whole on samples too few to bound it), the
/// noise of one piece's repeats is not its neighbour's, and the low ends add as independent
/// errors ([`Touched::sum_agreeing`]): but only as far as the pooled samples allow. A server's
/// keys scattered over its heap (Redis reading a hundredth of its keys, whose hash chains reach
/// all over it) give pieces that each count whole on a few samples that never repeat, while
/// all of them together repeat often enough to show a third of that touched: a low end added
/// as independent errors claimed 1.56 times the kernel's figure (docs/benchmarks.md).
fn with_pooled(
    mut total: Touched,
    parts: impl IntoIterator<Item = Touched> + Clone,
    (pooled, shown_high): (Touched, f64),
) -> Touched {
    let agreeing = Touched::sum_agreeing(parts);
    if pooled.high >= total.pages * (1.0 - METHOD_ERROR)
        && pooled.pages >= total.low
        && agreeing.low <= shown_high
    {
        total = agreeing;
    }
    total.low = total.low.max(pooled.low).min(total.pages);
    total
}

/// The least error a working set's interval carries, relative to it: what the samples' counts
/// cannot show. The memory DAMON's rule saw accessed is not all the kernel's accessed bits
/// count (pages touched between two regions' samples, by the kernel on the program's behalf,
/// near a region's edge), and on programs that touch all of their memory the whole regions
/// read 0.88 to 1.08 of the accessed bits (docs/benchmarks.md, "Kernel as judge"): a
/// point estimate of 0.88 of the truth must still hold it.
pub const METHOD_ERROR: f64 = 0.15;

/// `total`'s interval widened by [`METHOD_ERROR`]: at least that far either side of the count,
/// and its high end, however far the samples let it reach (all of the memory seen accessed,
/// counted whole), that much beyond it, since DAMON's whole count falls short alike.
fn with_method_error(total: Touched) -> Touched {
    Touched {
        low: total.low.min(total.pages * (1.0 - METHOD_ERROR)),
        high: total.high.max(total.pages) * (1.0 + METHOD_ERROR),
        ..total
    }
}

/// One horizon's estimate on its own evidence: the accessed cells, then the code mappings
/// counted through their instructions, bounded by what is resident.
fn one_horizon(ev: &Evidence, now_us: u64, horizon_us: u64) -> Vec<Cell> {
    let cells = ev.history.accessed_within(horizon_us);
    let mut estimates = match (ev.basis, ev.space) {
        (Basis::Regions, _) => cells
            .iter()
            .map(|c| Touched::whole(c.size() as f64 / PAGE_SIZE as f64))
            .collect(),
        (Basis::Pages, AddressSpace::Virtual) => {
            // Regions finer than a sampled source's default bound: the pages beside the sampled
            // ones are estimated in the pieces that bound would give (count_unseen_pages).
            let fine = ev.history.nr_regions() > SAMPLED_MAX_REGIONS as usize;
            estimate_cells(ev.data, &cells, now_us, horizon_us, ev.resident, fine)
        }
        (Basis::Pages, AddressSpace::Physical) => {
            estimate_scattered(ev.data, &cells, now_us, horizon_us)
        }
    };
    let mut ranges = cells;
    let mut code = vec![false; ranges.len()];
    if ev.basis == Basis::Pages && ev.space == AddressSpace::Virtual {
        // Instructions' pages are not data's: a region accessed through its data samples may
        // span a library's text too, and count none of the pages its code was fetched from.
        let fetched = estimate_code(ev.code, now_us, horizon_us, ev.resident);
        if !fetched.is_empty() {
            for (range, touched) in fetched {
                ranges.push(range);
                estimates.push(touched);
                code.push(true);
            }
            let mut order: Vec<usize> = (0..ranges.len()).collect();
            order.sort_by_key(|&i| ranges[i]);
            ranges = order.iter().map(|&i| ranges[i]).collect();
            estimates = order.iter().map(|&i| estimates[i]).collect();
            code = order.iter().map(|&i| code[i]).collect();
        }
    }
    bound_by_resident(&ranges, &mut estimates, ev.resident);
    if let Some(total) = ev.resident_total.or(ev.walked_total) {
        bound_total(&mut estimates, total);
    }
    ranges
        .into_iter()
        .zip(estimates)
        .zip(code)
        .map(|((range, touched), code)| Cell {
            range,
            touched,
            code,
        })
        .collect()
}

/// The cells of physical memory estimated as one memory (see the module documentation), each
/// taking its share by the samples it drew within the evidence span.
fn estimate_scattered(
    samples: &PageSamples,
    cells: &[AddrRange],
    now_us: u64,
    horizon_us: u64,
) -> Vec<Touched> {
    if cells.is_empty() {
        return Vec::new();
    }
    if samples.is_empty() {
        return cells
            .iter()
            .map(|c| Touched::whole(c.size() as f64 / PAGE_SIZE as f64))
            .collect();
    }
    let pooled = samples.estimate_own(cells, now_us, horizon_us, Unbounded::Point);
    let counts: Vec<u64> = cells
        .iter()
        .map(|&c| samples.count(c, now_us, horizon_us))
        .collect();
    let all = counts.iter().sum::<u64>().max(1) as f64;
    // Each cell its own samples, so that the cells' sum counts each sample once.
    counts
        .iter()
        .map(|&n| Touched {
            samples: n,
            ..pooled.scaled(n as f64 / all)
        })
        .collect()
}

/// Makes `estimates` (per horizon, shortest first; `rungs` marks the ladder's) monotone in the
/// horizon for each mapping of `ev.resident` (and for the memory outside them), and so for
/// their sum: the rungs' answers pooled where they disagree with the order, each other
/// horizon's held between the rungs around it and pooled with its neighbours there.
fn make_monotone(estimates: &mut [Vec<Cell>], rungs: &[bool], ev: &Evidence) {
    let groups = ev.resident.len() + 1;
    let group_of = |r: AddrRange| -> usize {
        let i = ev.resident.partition_point(|m| m.range.end <= r.start);
        match ev.resident.get(i) {
            Some(m) if m.range.start < r.end => i,
            _ => ev.resident.len(),
        }
    };
    // Per horizon, each cell's group, and the group's cells in order.
    let members: Vec<Vec<Vec<usize>>> = estimates
        .iter()
        .map(|cells| {
            let mut by_group: Vec<Vec<usize>> = vec![Vec::new(); groups];
            for (i, c) in cells.iter().enumerate() {
                by_group[group_of(c.range)].push(i);
            }
            by_group
        })
        .collect();
    // Per group, per horizon: the estimate summed over the group's cells.
    let mut sums = vec![vec![Touched::default(); estimates.len()]; groups];
    for (h, by_group) in members.iter().enumerate() {
        for (g, cells) in by_group.iter().enumerate() {
            if !cells.is_empty() {
                sums[g][h] = Touched::sum(cells.iter().map(|&i| estimates[h][i].touched));
            }
        }
    }
    for (g, raw) in sums.iter().enumerate() {
        let fitted = monotone_fit(raw, rungs);
        for (h, (before, after)) in raw.iter().zip(&fitted).enumerate() {
            if before == after {
                continue;
            }
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
            let (rp, rl, rh) = (
                ratio(after.pages, before.pages),
                ratio(after.low, before.low),
                ratio(after.high, before.high),
            );
            let in_group = &members[h][g];
            let bytes: u64 = in_group.iter().map(|&i| estimates[h][i].range.size()).sum();
            for &i in in_group {
                let Cell {
                    range: r,
                    touched: t,
                    ..
                } = &mut estimates[h][i];
                if before.pages > 0.0 {
                    t.pages *= rp;
                } else {
                    // Nothing counted here yet: the pooled count spread by size.
                    t.pages = after.pages * r.size() as f64 / bytes.max(1) as f64;
                }
                let share = t.pages / after.pages.max(f64::MIN_POSITIVE);
                t.low = if before.low > 0.0 {
                    t.low * rl
                } else {
                    after.low * share
                };
                t.high = if before.high > 0.0 {
                    t.high * rh
                } else {
                    after.high * share
                };
                t.low = t.low.min(t.pages);
                t.high = t.high.max(t.pages);
            }
        }
    }
}

/// `raw` (one estimate per horizon, shortest first) made monotone: pooled where out of order
/// ([`isotonic`] over the rungs), each horizon off the rungs held between the rungs around it,
/// and the intervals narrowed by the order (what bounds a shorter horizon from below bounds a
/// longer one; what bounds a longer one from above bounds a shorter one).
fn monotone_fit(raw: &[Touched], rungs: &[bool]) -> Vec<Touched> {
    let mut fitted = raw.to_vec();
    let on_rungs: Vec<usize> = (0..raw.len()).filter(|&i| rungs[i]).collect();
    let rung_values = isotonic(&on_rungs.iter().map(|&i| raw[i]).collect::<Vec<_>>());
    for (&i, &v) in on_rungs.iter().zip(&rung_values) {
        fitted[i].pages = v;
    }
    // Each run of horizons between two rungs: pooled among themselves, within the rungs.
    let mut i = 0;
    while i < raw.len() {
        if rungs[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < raw.len() && !rungs[i] {
            i += 1;
        }
        let below = start.checked_sub(1).map_or(0.0, |j| fitted[j].pages);
        let above = fitted.get(i).map_or(f64::INFINITY, |t| t.pages);
        let values = isotonic(&raw[start..i]);
        for (k, v) in (start..i).zip(values) {
            fitted[k].pages = v.clamp(below, above.max(below));
        }
    }
    for t in fitted.iter_mut() {
        t.low = t.low.min(t.pages);
        t.high = t.high.max(t.pages);
    }
    for k in 1..fitted.len() {
        fitted[k].low = fitted[k].low.max(fitted[k - 1].low).min(fitted[k].pages);
    }
    for k in (0..fitted.len().saturating_sub(1)).rev() {
        fitted[k].high = fitted[k].high.min(fitted[k + 1].high).max(fitted[k].pages);
    }
    fitted
}

/// The estimates' counts made non-decreasing (shortest horizon first). Where a longer
/// horizon reads below a shorter one that counted its memory whole (DAMON's count, its samples
/// too few to bound it), and the longer one's own interval holds that count, the longer one
/// takes it: its samples do not rule it out, and over a long span pages that seldom draw a
/// sample show up as repeats of others, so that its count falls short. Otherwise the two are
/// pooled, adjacent violators as in isotonic regression, each weighing by its precision: the
/// inverse square of its interval's width (at least 2 % of it, so that a count without an
/// interval does not outweigh every other without limit); a short horizon's count extrapolated
/// from a few samples weighs little.
fn isotonic(estimates: &[Touched]) -> Vec<f64> {
    struct Block {
        mean: f64,
        weight: f64,
        members: usize,
        /// The highest count the newest member's interval allows.
        high: f64,
        /// Whether the newest member counted its memory whole.
        whole: bool,
    }
    let mut blocks: Vec<Block> = Vec::with_capacity(estimates.len());
    for t in estimates {
        let width = (t.high - t.low).max(0.02 * t.pages).max(1.0);
        let mut block = Block {
            mean: t.pages,
            weight: 1.0 / (width * width),
            members: 1,
            high: t.high,
            whole: t.is_whole_count(),
        };
        while let Some(last) = blocks.last() {
            if last.mean <= block.mean {
                break;
            }
            if last.whole && last.mean <= block.high {
                block.mean = last.mean;
                break;
            }
            let last = blocks.pop().expect("looked at above");
            let weight = last.weight + block.weight;
            block = Block {
                mean: (last.mean * last.weight + block.mean * block.weight) / weight,
                weight,
                members: last.members + block.members,
                ..block
            };
        }
        blocks.push(block);
    }
    blocks
        .into_iter()
        .flat_map(|b| std::iter::repeat_n(b.mean, b.members))
        .collect()
}

/// One mapping's resident bytes, as of its last walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentRange {
    pub range: AddrRange,
    pub resident_bytes: u64,
    /// Whether it holds code (its permissions allow execution): its text may count touched
    /// with no instruction of it sampled ([`estimate_code`]).
    pub executable: bool,
}

/// The estimated touched pages of each of `cells` (sorted, disjoint ranges that DAMON's rule
/// saw accessed in the `horizon_us` before `now_us`), from `samples`, bounded by `resident`
/// (sorted, disjoint; empty when unknown). Cells of a source without samples (`samples`
/// empty) are counted whole, as DAMON counts them.
fn estimate_cells(
    samples: &PageSamples,
    cells: &[AddrRange],
    now_us: u64,
    horizon_us: u64,
    resident: &[ResidentRange],
    fine: bool,
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
    let memory = resident_within(cells, resident);
    pool_alike_neighbours(
        samples,
        cells,
        &memory,
        &mut estimates,
        &counts,
        now_us,
        horizon_us,
    );
    let in_horizon: Vec<u64> = cells
        .iter()
        .map(|&c| samples.count(c, now_us, horizon_us))
        .collect();
    borrow_neighbours_density(cells, &memory, &mut estimates, &counts, &in_horizon);
    count_unseen_pages(
        samples,
        cells,
        &mut estimates,
        now_us,
        horizon_us,
        resident,
        fine,
    );
    bound_by_resident(cells, &mut estimates, resident);
    estimates
}

/// Makes `estimates` (of `cells`) count the pages that the horizon's data samples, taken as
/// one memory, show touched beyond what the pieces can hold. DAMON's rule sees memory accessed
/// only where a sample fell, so with regions of a page (DAMON's page granularity, as seed 000
/// monitors memcached) each piece is the page its sample hit, and the pieces sum to the
/// sampled pages: megabytes, where the kernel finds gigabytes touched (docs/benchmarks.md,
/// "Page granularity at the seed's scale"). The unseen pages lie in the mappings the samples
/// fell in: Chao's estimate over their memory counts them, bounded by what those mappings
/// hold, and each piece takes its share by its own count. Its interval's high end is Chao's
/// only where that count is settled: otherwise the hot pages' repeats (a server's hash table
/// and lists) bound it far below the pages each read once beside them (its items), and the
/// high end is all the memory of those mappings, which DAMON's regions of the default bounds
/// would have counted whole (docs/benchmarks.md, "Page granularity judged against the
/// kernel"). Where the regions are `fine` (more than a sampled source's default bound, each
/// narrower than a piece of it), the count is taken in the pieces that bound would give
/// ([`estimate_in_default_pieces`]), whatever the pooled count: Chao's
/// count over all of the mappings takes an interpreter's hot pages' repeats for the list it
/// reads all over, and read 0.01-0.02 of the kernel on CPython, where the default regions read
/// 0.75-0.98. Where the pieces are DAMON's adaptive regions of the default bound, their own
/// intervals reach what the samples show and nothing changes.
fn count_unseen_pages(
    samples: &PageSamples,
    cells: &[AddrRange],
    estimates: &mut [Touched],
    now_us: u64,
    horizon_us: u64,
    resident: &[ResidentRange],
    fine: bool,
) {
    let held: f64 = estimates.iter().map(|e| e.high).sum();
    let counted: f64 = estimates.iter().map(|e| e.pages).sum();
    let around = mappings_around(cells, resident);
    if around.is_empty() || counted <= 0.0 {
        return;
    }
    let memory: u64 = resident_within(&around, resident).iter().sum();
    let most = memory as f64 / PAGE_SIZE as f64;
    // Regions are fine ones only where they are narrower than the default pieces: a bound of
    // a region a page over a span of terabytes (a JavaScript engine's reservations and the
    // holes between them) leaves regions of hundreds of megabytes, each a cell that a piece
    // would take a sliver of.
    let cells_mean = cells.iter().map(|c| c.size()).sum::<u64>() / cells.len() as u64;
    let fine = fine && cells_mean < default_piece_bytes(&around);
    let pooled = samples.estimate_pooled(&around, now_us, horizon_us, Unbounded::Point);
    // Fine pieces are counted in the default ones even where the samples show no more than
    // they hold: pieces of a few pages each hold a sampled page or two, and their own
    // intervals end there, far below what the default pieces allow.
    if !fine && pooled.low.min(most) <= held {
        return;
    }
    // An unsettled pooled count bounds nothing above: the pages no sample hit may be any of
    // the memory around, as the pieces would allow were they DAMON's regions, not pages.
    let high = if pooled.is_settled() {
        pooled.high
    } else {
        most
    };
    let (pages, low, high) = (pooled.pages.min(most), pooled.low.min(most), high.min(most));
    // The high end lies in each mapping by its memory, not by the samples the pieces in it
    // drew: a mapping of items each read once draws few samples beside one of hot structures,
    // and may hold most of the pages no sample hit. Within a mapping, its pieces share it by
    // their counts.
    let claimed = claimed_per_mapping(cells, estimates, resident, |e| e.pages);
    let mut high_of = vec![0.0f64; cells.len()];
    let mut covered = vec![0.0f64; cells.len()];
    for_each_overlap(cells, resident, |c, m, share| {
        if claimed[m] > 0.0 {
            let mapping_pages = resident[m].resident_bytes as f64 / PAGE_SIZE as f64;
            high_of[c] += high * (mapping_pages / most) * estimates[c].pages * share / claimed[m];
        }
        covered[c] += share;
    });
    let by_pieces = if fine {
        estimate_in_default_pieces(
            samples, cells, estimates, now_us, horizon_us, &around, resident,
        )
    } else {
        vec![None; cells.len()]
    };
    for (i, e) in estimates.iter_mut().enumerate() {
        let share = e.pages / counted;
        // No piece's interval narrower than the pooled one: the pieces' shares are of one
        // estimate, and err together.
        let by_memory = high_of[i] + high * share * (1.0 - covered[i]).max(0.0);
        let pooled = Touched {
            pages: pages * share,
            low: low * share,
            high: by_memory.max(high * share),
            ..*e
        };
        // The default pieces' count, with an interval that holds the pooled one: each rests
        // on what the other assumes away (pieces touched alike all over; pages sampled alike).
        *e = match by_pieces[i] {
            Some(p) => Touched {
                pages: p.pages,
                low: p.low.min(pooled.low),
                high: p.high.max(pooled.high),
                ..*e
            },
            None => pooled,
        };
    }
}

/// Each of `cells`' share of the estimate of the piece of `around` it lies in, the pieces
/// being those DAMON's regions would be at the sampled sources' default bounds: `around` cut
/// into [`SAMPLED_MAX_REGIONS`] pieces of one size, neighbours whose samples show them touched
/// alike merged ([`density::alike`]) up to a [`SAMPLED_MIN_REGIONS`]th of it, as DAMON merges
/// regions. `None` for a cell in no piece that holds a sample in the horizon.
fn estimate_in_default_pieces(
    samples: &PageSamples,
    cells: &[AddrRange],
    estimates: &[Touched],
    now_us: u64,
    horizon_us: u64,
    around: &[AddrRange],
    resident: &[ResidentRange],
) -> Vec<Option<Touched>> {
    let total: u64 = around.iter().map(|r| r.size()).sum();
    let size = default_piece_bytes(around).div_ceil(PAGE_SIZE).max(1) * PAGE_SIZE;
    let mut slices = Vec::new();
    for r in around {
        let mut at = r.start;
        while at < r.end {
            let end = (at + size).min(r.end);
            slices.push(AddrRange::new(at, end));
            at = end;
        }
    }
    let span_us = horizon_us.max(MAX_EVIDENCE_US);
    let counts: Vec<u32> = slices
        .iter()
        .map(|&p| samples.count(p, now_us, span_us).min(u64::from(u32::MAX)) as u32)
        .collect();
    let memory = resident_within(&slices, resident);
    let largest = total / u64::from(SAMPLED_MIN_REGIONS);
    // Runs of slices merged: [start, end) of `slices`.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < slices.len() {
        let (mut n, mut bytes, mut span) = (counts[start], memory[start], slices[start].size());
        let mut end = start + 1;
        while end < slices.len()
            && slices[end - 1].end == slices[end].start
            && span + slices[end].size() <= largest
            && density::alike(n, bytes, counts[end], memory[end], POOL_ALPHA)
        {
            n += counts[end];
            bytes += memory[end];
            span += slices[end].size();
            end += 1;
        }
        runs.push((start, end));
        start = end;
    }
    let pieces: Vec<AddrRange> = runs
        .iter()
        .map(|&(s, e)| AddrRange::new(slices[s].start, slices[e - 1].end))
        .collect();
    let mut coarse: Vec<Touched> = pieces
        .iter()
        .map(|&p| {
            if samples.count(p, now_us, horizon_us) > 0 {
                samples.estimate(p, now_us, horizon_us)
            } else {
                Touched::default()
            }
        })
        .collect();
    bound_by_resident(&pieces, &mut coarse, resident);
    let piece_of = |c: &AddrRange| pieces.partition_point(|p| p.end <= c.start);
    let mut in_piece = vec![0.0f64; pieces.len()];
    for (c, e) in cells.iter().zip(estimates) {
        if let Some(t) = in_piece.get_mut(piece_of(c)) {
            *t += e.pages;
        }
    }
    cells
        .iter()
        .zip(estimates)
        .map(|(c, e)| {
            let k = piece_of(c);
            let t = *in_piece.get(k)?;
            (t > 0.0 && coarse[k].pages > 0.0).then(|| coarse[k].scaled(e.pages / t))
        })
        .collect()
}

/// The size of a piece that the sampled sources' default bound would cut `around` into.
fn default_piece_bytes(around: &[AddrRange]) -> u64 {
    around.iter().map(|r| r.size()).sum::<u64>() / u64::from(SAMPLED_MAX_REGIONS)
}

/// Per mapping of `resident`, what `part` of the `estimates` of `cells` lies in it (each cell's
/// by the share of it that overlaps the mapping).
fn claimed_per_mapping(
    cells: &[AddrRange],
    estimates: &[Touched],
    resident: &[ResidentRange],
    part: impl Fn(&Touched) -> f64,
) -> Vec<f64> {
    let mut claimed = vec![0.0f64; resident.len()];
    for_each_overlap(cells, resident, |c, m, share| {
        claimed[m] += part(&estimates[c]) * share;
    });
    claimed
}

/// The walked mappings that `cells` (sorted, disjoint) overlap, in order, each once.
fn mappings_around(cells: &[AddrRange], resident: &[ResidentRange]) -> Vec<AddrRange> {
    let mut around: Vec<AddrRange> = Vec::new();
    for_each_overlap(cells, resident, |_, m, _| {
        let range = resident[m].range;
        if around.last() != Some(&range) {
            around.push(range);
        }
    });
    around
}

/// The bytes of memory in each of `cells`: its share of the resident bytes of the mappings of
/// `resident` it overlaps, spread evenly over each mapping; a cell overlapping none (a mapping
/// made since the walk, or no walk) counts its size. A region's range can reach over gaps of
/// address space that hold nothing (a runtime's mappings scattered over terabytes): shares and
/// densities go by the memory a cell holds, not by its addresses.
pub fn resident_within(cells: &[AddrRange], resident: &[ResidentRange]) -> Vec<u64> {
    let mut memory = vec![0.0f64; cells.len()];
    let mut covered = vec![false; cells.len()];
    for_each_overlap(cells, resident, |c, m, share| {
        let mapping = &resident[m];
        let bytes = share * cells[c].size() as f64;
        memory[c] += bytes * mapping.resident_bytes as f64 / mapping.range.size().max(1) as f64;
        covered[c] = true;
    });
    cells
        .iter()
        .zip(memory)
        .zip(covered)
        .map(|((c, m), covered)| if covered { m.round() as u64 } else { c.size() })
        .collect()
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
    memory: &[u64],
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
        let bytes: u64 = nearby.iter().map(|&j| memory[j]).sum();
        if bytes == 0 {
            continue;
        }
        let density = |f: &dyn Fn(&Touched) -> f64| {
            nearby.iter().map(|&j| f(&own[j])).sum::<f64>() * PAGE_SIZE as f64 / bytes as f64
        };
        let pages = memory[i] as f64 / PAGE_SIZE as f64;
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
    memory: &[u64],
    estimates: &mut [Touched],
    counts: &[u64],
    now_us: u64,
    horizon_us: u64,
) {
    let clamp = |n: u64| n.min(u64::from(u32::MAX)) as u32;
    let mut start = 0;
    while start < cells.len() {
        let (mut n, mut size) = (counts[start], memory[start]);
        let mut end = start + 1;
        while end < cells.len()
            && density::alike(clamp(n), size, clamp(counts[end]), memory[end], POOL_ALPHA)
        {
            n += counts[end];
            size += memory[end];
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
                let share = memory[i] as f64 / size.max(1) as f64;
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
fn bound_by_resident(cells: &[AddrRange], estimates: &mut [Touched], resident: &[ResidentRange]) {
    if resident.is_empty() {
        return;
    }
    // Each cell's factor for what `part` of its estimate (the count, the high end) puts in the
    // mappings: its overlaps' scales, weighted by the overlaps. A cell partly outside every
    // mapping walked reaches into a gap between mappings, which holds no memory; one wholly
    // outside lies in a mapping made since the walk, and keeps its estimate.
    let factors = |part: &dyn Fn(&Touched) -> f64| -> Vec<f64> {
        let claimed = claimed_per_mapping(cells, estimates, resident, part);
        let scale: Vec<f64> = resident
            .iter()
            .zip(&claimed)
            .map(|(m, &pages)| {
                let allowed = m.resident_bytes as f64 / PAGE_SIZE as f64;
                if pages > allowed {
                    allowed / pages
                } else {
                    1.0
                }
            })
            .collect();
        let mut factor = vec![0.0f64; cells.len()];
        let mut covered = vec![0.0f64; cells.len()];
        for_each_overlap(cells, resident, |c, m, share| {
            factor[c] += share * scale[m];
            covered[c] += share;
        });
        factor
            .into_iter()
            .zip(covered)
            .map(|(f, covered)| if covered > 0.0 { f.min(1.0) } else { 1.0 })
            .collect()
    };
    // Where the count is cut, the high end is cut no further than the high ends claimed in
    // the mappings need: a hot mapping's count may claim more than it holds while the high
    // end lies in memory beside it (count_unseen_pages), and cutting it with the count would
    // put the interval below what the mappings can hold.
    let count = factors(&|e| e.pages);
    let high = factors(&|e| e.high);
    for ((e, f), h) in estimates.iter_mut().zip(count).zip(high) {
        if f < 1.0 {
            let bounded_high = e.high * f.max(h);
            *e = e.scaled(f);
            e.high = bounded_high.max(e.pages);
        }
    }
}

/// The code touched in the `horizon_us` before `now_us`, from `ips` (the sampled instructions'
/// addresses): the instructions the CPU fetched touched their pages as data accesses touch
/// theirs, and the kernel's accessed bits count both. The mappings of `resident` that hold a
/// sampled instruction in the evidence span are the cells, estimated as one memory (code of
/// one program touched alike) and shared among them by their sampled pages; each bounded by
/// its resident bytes. Where the samples set no upper bound, the point estimate counts, not
/// the mappings whole ([`Unbounded::Point`]). Every executable mapping's resident text bounds
/// its cell's interval from above, sampled or not (a cell counting nothing for those no
/// instruction was sampled in): the samples find the code the time goes to, never the cold
/// paths run once in the horizon, and the kernel marks a shared library's text referenced by
/// the folio, for whichever process touched it (a JVM's libc, 1.2 MiB of its 9.8 MiB, with no
/// instruction sampled in it). Nothing where the mappings are unknown.
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
    let mut code: Vec<(AddrRange, Touched)> = Vec::new();
    if !cells.is_empty() {
        let ranges: Vec<AddrRange> = cells.iter().map(|c| c.0).collect();
        let pooled = ips.estimate_pooled(&ranges, now_us, horizon_us, Unbounded::Point);
        let in_span: Vec<u64> = ranges
            .iter()
            .map(|&r| ips.count(r, now_us, span_us))
            .collect();
        let all: u64 = in_span.iter().sum::<u64>().max(1);
        // Each mapping its own samples, so that the mappings' sum counts each sample once.
        let mut estimates: Vec<Touched> = in_span
            .iter()
            .zip(&cells)
            .map(|(&n, &(_, own))| Touched {
                samples: own,
                ..pooled.scaled(n as f64 / all as f64)
            })
            .collect();
        bound_by_resident(&ranges, &mut estimates, resident);
        code = ranges.into_iter().zip(estimates).collect();
    }
    let unsampled = resident.iter().filter(|m| {
        m.executable && m.resident_bytes > 0 && !cells.iter().any(|&(r, _)| r == m.range)
    });
    code.extend(unsampled.map(|m| (m.range, Touched::default())));
    code.sort_by_key(|&(r, _)| r);
    // The high end reaches the mapping's resident pages.
    let ranges: Vec<AddrRange> = code.iter().map(|&(r, _)| r).collect();
    let memory = resident_within(&ranges, resident);
    for ((_, e), m) in code.iter_mut().zip(memory) {
        e.high = e.high.max(m as f64 / PAGE_SIZE as f64);
    }
    code
}

/// Scales `estimates` down so that together they count at most `resident_bytes` (a target's
/// whole resident memory).
fn bound_total(estimates: &mut [Touched], resident_bytes: u64) {
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
            let overlap = cell.overlap(resident[k].range);
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
                executable: false,
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
            executable: false,
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
        let together = estimate_cells(&h, &cells, now, 2_000_000, &[], false);
        let total = |e: &[Touched]| e.iter().map(|t| t.pages).sum::<f64>();
        let truth = hot.len() as f64;
        assert!(
            (total(&together) / truth - 1.0).abs() < 0.25,
            "{} for {truth}",
            total(&together)
        );
        // Alone, the pieces' estimates rest on too few repeats to bound them; together they
        // are bounded, each within five times its estimate.
        assert!(alone.iter().all(|t| !t.is_settled()), "{alone:?}");
        for (a, t) in alone.iter().zip(&together) {
            assert!(
                spread(t) < spread(a) && t.high < 5.0 * t.pages,
                "{t:?} alone {a:?}"
            );
        }
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
        let e = estimate_cells(&h, &cells, t, 2_000_000, &[], false);
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
        let sizes: Vec<u64> = cells.iter().map(|c| c.size()).collect();
        let (counts, in_horizon) = ([90, 1, 90, 1, 0], [90, 0, 90, 0, 0]);
        borrow_neighbours_density(&cells, &sizes, &mut e, &counts, &in_horizon);
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

        // The second piece's range reaching over a gap of address space that holds 200 pages
        // of memory: a tenth of those, not of its addresses.
        let mut memory = sizes.clone();
        memory[1] = 200 * P;
        let mut e = vec![sparse, old, sparse, old, Touched::default()];
        borrow_neighbours_density(&cells, &memory, &mut e, &counts, &in_horizon);
        assert!((e[1].pages - 20.0).abs() < 1e-9, "{:?}", e[1]);
    }

    #[test]
    fn a_cell_s_memory_is_what_the_mappings_it_overlaps_hold() {
        let resident = [
            ResidentRange {
                range: AddrRange::new(100 * P, 200 * P),
                resident_bytes: 50 * P,
                executable: false,
            },
            ResidentRange {
                range: AddrRange::new(1_000_000 * P, 1_000_010 * P),
                resident_bytes: 10 * P,
                executable: false,
            },
        ];
        let cells = [
            // Half of the first mapping.
            AddrRange::new(150 * P, 250 * P),
            // A region reaching over a gap of a million pages to the second mapping.
            AddrRange::new(250 * P, 1_000_010 * P),
            // Beyond every mapping walked: a mapping made since, counted by its size.
            AddrRange::new(2_000_000 * P, 2_000_004 * P),
        ];
        assert_eq!(
            resident_within(&cells, &resident),
            vec![25 * P, 10 * P, 4 * P]
        );
    }

    #[test]
    fn code_counts_the_pages_its_sampled_instructions_lie_in() {
        // A loop in 3 pages of a 64-page text mapping, sampled 600 times over 30 s; nothing
        // sampled in the library beside it, nor in the data after it.
        let (ips, now) = sampled(&[10, 11, 12], 30, 8, 31);
        let text = ResidentRange {
            range: AddrRange::new(0, 64 * P),
            resident_bytes: 64 * P,
            executable: true,
        };
        let lib = ResidentRange {
            range: AddrRange::new(100 * P, 200 * P),
            resident_bytes: 50 * P,
            executable: true,
        };
        let data = ResidentRange {
            range: AddrRange::new(300 * P, 400 * P),
            resident_bytes: 100 * P,
            executable: false,
        };
        let code = estimate_code(&ips, now, 10_000_000, &[text, lib, data]);
        assert_eq!(code.len(), 2, "{code:?}");
        assert_eq!(code[0].0, text.range);
        assert!((code[0].1.pages - 3.0).abs() < 0.5, "{code:?}");
        // The cold paths the samples never find (and what the kernel counts of a shared
        // library's text by the folio) may be anywhere in its resident text, in the library
        // no instruction was sampled in too.
        assert_eq!(code[0].1.high, 64.0, "{code:?}");
        assert_eq!(code[1].0, lib.range);
        assert_eq!((code[1].1.pages, code[1].1.high), (0.0, 50.0), "{code:?}");
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
            executable: false,
        };
        let code = estimate_code(&h, 8_000_000, 10_000_000, &[lib]);
        assert_eq!(code.len(), 1, "{code:?}");
        let t = code[0].1;
        assert!(t.pages >= 8.0 && t.pages < 0.5 * t.high, "{t:?}");
        assert!(!t.is_settled(), "{t:?}");
        // Data memory that DAMON's rule saw accessed, with the same samples, counts all that
        // its samples' spread allows.
        let data = estimate_cells(&h, &[lib.range], 8_000_000, 10_000_000, &[lib], false);
        assert_eq!(data[0].pages, data[0].high, "{data:?}");
        assert!(data[0].pages > 2.0 * t.pages, "{data:?}");
    }

    /// Data mappings of `ranges`, every page of them resident.
    fn all_resident(ranges: &[AddrRange]) -> Vec<ResidentRange> {
        ranges
            .iter()
            .map(|&range| ResidentRange {
                range,
                resident_bytes: range.size(),
                executable: false,
            })
            .collect()
    }

    /// A target of `regions` (pages) each accessed in every window, sampled on `hot(rng)`
    /// pages, `per_window` samples a window for `seconds`, with `resident`.
    struct Run {
        history: AccessHistory,
        data: PageSamples,
        code: PageSamples,
        resident: Vec<ResidentRange>,
        resident_total: Option<u64>,
        now: u64,
    }

    impl Run {
        fn new(
            regions: &[AddrRange],
            seconds: u64,
            per_window: u64,
            seed: u64,
            mut page: impl FnMut(&mut crate::Prng, u64) -> u64,
        ) -> Run {
            let mut rng = crate::Prng::seeded(seed);
            let mut run = Run {
                history: AccessHistory::new(LONGEST_US, 1 << 20),
                data: PageSamples::default(),
                code: PageSamples::default(),
                resident: Vec::new(),
                resident_total: None,
                now: 0,
            };
            for _ in 0..seconds * 5 / 2 {
                run.now += 400_000;
                let addrs: Vec<u64> = (0..per_window)
                    .map(|_| page(&mut rng, run.now) * P)
                    .collect();
                let marked: Vec<(AddrRange, bool)> = regions
                    .iter()
                    .map(|&r| (r, addrs.iter().any(|&a| r.start <= a && a < r.end)))
                    .collect();
                run.data.add(run.now, addrs);
                run.data.settle(run.now);
                run.code.settle(run.now);
                run.history.push(run.now, marked);
            }
            run
        }

        fn evidence(&self, space: AddressSpace) -> Evidence<'_> {
            Evidence {
                history: &self.history,
                data: &self.data,
                code: &self.code,
                resident: &self.resident,
                resident_total: self.resident_total,
                walked_total: walked_total(&self.resident),
                window_us: 400_000,
                space,
                basis: Basis::Pages,
            }
        }

        fn ask(&self, horizons: &[u64]) -> Vec<WorkingSet> {
            working_sets(&self.evidence(AddressSpace::Virtual), self.now, horizons)
        }
    }

    #[test]
    fn isotonic_pools_what_is_out_of_order_by_precision() {
        let t = |pages: f64, width: f64| Touched {
            pages,
            low: pages - width / 2.0,
            high: pages + width / 2.0,
            ..Touched::default()
        };
        // old: 160 (wide) above 66 (narrow); new: both near 66, the precise one weighs more.
        let fit = isotonic(&[t(40.0, 10.0), t(160.0, 200.0), t(66.0, 20.0)]);
        assert_eq!(fit[0], 40.0);
        assert_eq!(fit[1], fit[2]);
        assert!(fit[1] > 66.0 && fit[1] < 70.0, "{fit:?}");
        // A longer horizon whose interval holds the shorter one's whole count takes it: dense
        // memory counted whole over 2 s, short by Chao's count over 10 s. A count extrapolated
        // from a few samples is pooled instead.
        let whole = Touched {
            low: 200.0,
            ..Touched::whole(320.0)
        };
        assert_eq!(isotonic(&[whole, t(250.0, 160.0)]), [320.0, 320.0]);
        let fit = isotonic(&[t(320.0, 300.0), t(250.0, 160.0)]);
        assert!(fit[0] == fit[1] && fit[1] < 290.0, "{fit:?}");
        let ordered = [t(1.0, 1.0), t(2.0, 1.0), t(3.0, 1.0)];
        assert_eq!(isotonic(&ordered), [1.0, 2.0, 3.0], "in order: unchanged");
    }

    #[test]
    fn horizons_are_monotone_for_the_target_and_each_mapping() {
        // Two mappings; the first touched on a few pages that change every window (a short
        // horizon sees too few repeats), the second touched all over.
        let regions: Vec<AddrRange> = (0..8)
            .map(|i| AddrRange::new(i * 1024 * P, (i + 1) * 1024 * P))
            .collect();
        for seed in 0..8 {
            let mut run = Run::new(&regions, 70, 40, seed, |rng, now| {
                if rng.in_range(0, 2) == 0 {
                    rng.in_range(0, 4096)
                } else {
                    4096 + (now / 400_000 % 50) * 7 + rng.in_range(0, 3)
                }
            });
            run.resident = vec![
                ResidentRange {
                    range: AddrRange::new(0, 4096 * P),
                    resident_bytes: 4096 * P,
                    executable: false,
                },
                ResidentRange {
                    range: AddrRange::new(4096 * P, 8192 * P),
                    resident_bytes: 4096 * P,
                    executable: false,
                },
            ];
            let horizons = [
                0, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
            ];
            let ws = run.ask(&horizons);
            for pair in ws.windows(2) {
                assert!(
                    pair[0].bytes() <= pair[1].bytes(),
                    "seed {seed}: {} s {} > {} s {}",
                    pair[0].horizon_us,
                    pair[0].bytes(),
                    pair[1].horizon_us,
                    pair[1].bytes()
                );
                for m in &run.resident {
                    assert!(
                        pair[0].bytes_within(m.range) <= pair[1].bytes_within(m.range) + 1,
                        "seed {seed}, mapping {:?}",
                        m.range
                    );
                }
                assert!(pair[0].total.low <= pair[0].total.pages);
                assert!(pair[0].total.pages <= pair[0].total.high);
            }
            // A horizon reads the same whichever others are asked beside it.
            let alone = run.ask(&[10_000_000]);
            assert_eq!(alone[0].bytes(), ws[4].bytes(), "seed {seed}");
        }
    }

    #[test]
    fn a_dense_target_s_interval_carries_the_method_s_error() {
        // Every page of 4,096 touched, 5,000 samples: hardly any sampling error; the interval
        // still holds the 10 % the accessed cells may miss or add.
        let regions = [AddrRange::new(0, 4096 * P)];
        let run = Run::new(&regions, 20, 200, 7, |rng, _| rng.in_range(0, 4096));
        let ws = &run.ask(&[10_000_000])[0];
        let t = ws.total;
        assert!((t.pages / 4096.0 - 1.0).abs() < 0.02, "{t:?}");
        assert!(
            t.low <= 0.9 * t.pages + 1e-6 && t.high >= 1.1 * t.pages - 1e-6,
            "{t:?}"
        );
        assert!(ws.total.is_settled());
    }

    #[test]
    fn the_method_s_error_reaches_beyond_the_memory_seen_accessed() {
        // An interval whose high end is all the memory seen accessed: DAMON's whole count
        // falls short of the accessed bits alike, so the high end goes that much beyond it.
        let t = with_method_error(Touched {
            pages: 80.0,
            low: 70.0,
            high: 100.0,
            ..Touched::default()
        });
        assert_eq!((t.low, t.pages), (68.0, 80.0));
        assert!(
            (t.high - 100.0 * (1.0 + METHOD_ERROR)).abs() < 1e-9,
            "{t:?}"
        );
    }

    #[test]
    fn at_page_granularity_the_pages_no_sample_hit_are_counted_too() {
        // One region a page over 4,096 pages, every other page touched: DAMON's rule sees the
        // pages the samples hit (about three in four of the touched ones in 10 s); the samples'
        // repeats over the mapping count the rest.
        let regions: Vec<AddrRange> = (0..4096)
            .map(|i| AddrRange::new(i * P, (i + 1) * P))
            .collect();
        let mut run = Run::new(&regions, 10, 120, 11, |rng, _| rng.in_range(0, 2048) * 2);
        let truth = 2048.0;
        let hit = run.ask(&[10_000_000])[0].total.seen;
        assert!(hit < 0.85 * truth, "{hit} pages hit");
        run.resident = vec![ResidentRange {
            range: AddrRange::new(0, 4096 * P),
            resident_bytes: 4096 * P,
            executable: false,
        }];
        let ws = &run.ask(&[10_000_000])[0];
        let t = ws.total;
        assert!(t.low <= truth && truth <= t.high, "{t:?}");
        assert!((t.pages / truth - 1.0).abs() < 0.1, "{t:?}");
        // The mapping's row holds all of it.
        let row = ws.bytes_within(AddrRange::new(0, 4096 * P));
        assert_eq!(row, ws.bytes());
    }

    #[test]
    fn at_page_granularity_items_read_once_beside_hot_structures_are_within_the_interval() {
        // A server at one region a page: half its samples on 400 hot pages (its hash table),
        // half on 16,384 items' pages, each touched in the horizon and drawing a sample
        // seldom. The hot pages' repeats bound Chao's count over both mappings far below the
        // items; the interval must still reach them, in the mapping that holds them.
        let table = AddrRange::new(0, 400 * P);
        let items = AddrRange::new(1024 * P, (1024 + 16_384) * P);
        let regions: Vec<AddrRange> = (0..400)
            .chain(1024..1024 + 16_384)
            .map(|i| AddrRange::new(i * P, (i + 1) * P))
            .collect();
        let mut run = Run::new(&regions, 10, 40, 18, |rng, _| {
            if rng.in_range(0, 2) == 0 {
                rng.in_range(0, 400)
            } else {
                rng.in_range(1024, 1024 + 16_384)
            }
        });
        run.resident = all_resident(&[table, items]);
        let ws = &run.ask(&[10_000_000])[0];
        let t = ws.total;
        let truth = 16_784.0;
        assert!(t.low <= truth && truth <= t.high, "{t:?}");
        assert!(!t.is_settled(), "{t:?}");
        let held = |r: AddrRange| -> f64 {
            ws.cells
                .iter()
                .filter(|(c, _)| r.start <= c.start && c.end <= r.end)
                .map(|(_, t)| t.high)
                .sum()
        };
        assert!(held(items) >= 16_384.0 * 0.9, "{}", held(items));
    }

    #[test]
    fn at_page_granularity_memory_read_all_over_beside_a_hot_interpreter_counts_as_at_the_default_bound()
     {
        // CPython slicing a large list: nine samples in ten on 64 pages of the interpreter's
        // own, one in ten on a 16,384-page list read all over. At one region a page the
        // pieces are the sampled pages, and the interpreter's repeats bound Chao's count over
        // both mappings to a few hundred pages; the regions of a sampled source's default
        // bound would hold the list in a few large regions, each counted whole on its samples
        // that never repeat (or by their spread). At one region a page the estimate is taken
        // in such pieces, and reads near what two regions read.
        let hot = AddrRange::new(0, 64 * P);
        let list = AddrRange::new(1024 * P, (1024 + 16_384) * P);
        let pages =
            |r: AddrRange| (r.start / P..r.end / P).map(|i| AddrRange::new(i * P, (i + 1) * P));
        let fine: Vec<AddrRange> = pages(hot).chain(pages(list)).collect();
        let draw = |rng: &mut crate::Prng, _| {
            if rng.in_range(0, 10) == 0 {
                rng.in_range(1024, 1024 + 16_384)
            } else {
                rng.in_range(0, 64)
            }
        };
        let resident = all_resident(&[hot, list]);
        let truth = 16_448.0;
        let estimate = |regions: &[AddrRange]| {
            let mut run = Run::new(regions, 10, 20, 19, draw);
            run.resident = resident.clone();
            run.ask(&[10_000_000])[0].total
        };
        let (pages, two) = (estimate(&fine), estimate(&[hot, list]));
        for t in [pages, two] {
            assert!(t.low <= truth && truth <= t.high, "{t:?}");
        }
        assert!((two.pages / truth - 1.0).abs() < 0.1, "{two:?}");
        assert!(pages.pages > 0.6 * two.pages, "{pages:?} against {two:?}");
    }

    #[test]
    fn at_a_few_pages_a_region_items_read_all_over_beside_hot_structures_are_within_the_interval() {
        // As the interpreter beside its list above, with regions of four pages: the cells hold
        // more than the samples' pooled count reaches, which used to end the estimate at the
        // cells' own intervals (144 pages, at most 166, where 16,448 were touched).
        let hot = AddrRange::new(0, 64 * P);
        let list = AddrRange::new(1024 * P, (1024 + 16_384) * P);
        let quads = |r: AddrRange| {
            (r.start / P / 4..r.end / P / 4).map(|i| AddrRange::new(i * 4 * P, (i + 1) * 4 * P))
        };
        let regions: Vec<AddrRange> = quads(hot).chain(quads(list)).collect();
        let mut run = Run::new(&regions, 10, 20, 19, |rng, _| {
            if rng.in_range(0, 20) == 0 {
                rng.in_range(1024, 1024 + 16_384)
            } else {
                rng.in_range(0, 64)
            }
        });
        run.resident = all_resident(&[hot, list]);
        let truth = 16_448.0;
        for ws in run.ask(&[2_000_000, 10_000_000]) {
            let t = ws.total;
            assert!(t.low <= truth && truth <= t.high, "{t:?}");
            assert!(t.pages > 0.1 * truth, "{t:?}");
        }
    }

    #[test]
    fn many_regions_wider_than_the_default_pieces_are_counted_as_regions() {
        // A region a page over a span mostly of holes (a JavaScript engine's reservations):
        // 64 regions of 100,000 pages, the samples in the first, 98,000 pages of it touched
        // beside 64 hot ones. Taken in the default pieces, each a sixth of that region, the
        // region read one piece (16,667 pages) or the sampled pages alone (69).
        let regions: Vec<AddrRange> = (0..64)
            .map(|i| AddrRange::new(i * 100_000 * P, (i + 1) * 100_000 * P))
            .collect();
        let mut run = Run::new(&regions, 10, 40, 5, |rng, _| {
            if rng.in_range(0, 5) == 0 {
                rng.in_range(1000, 99_000)
            } else {
                rng.in_range(0, 64)
            }
        });
        run.resident = vec![ResidentRange {
            range: AddrRange::new(0, 1_000_000 * P),
            resident_bytes: 200_000 * P,
            executable: false,
        }];
        let truth = 98_064.0;
        for ws in run.ask(&[2_000_000, 10_000_000]) {
            let t = ws.total;
            assert!(t.low <= truth && truth <= t.high, "{t:?}");
            assert!((t.pages / truth - 1.0).abs() < 0.25, "{t:?}");
        }
    }

    #[test]
    fn scattered_and_dense_memory_each_read_near_the_truth_within_their_interval() {
        // 64 regions of 1,024 pages. Scattered: 800 hot pages over them, each region's few
        // samples seldom repeating, all of them together often. Dense: every page touched,
        // its pieces counted whole on samples that agree together: settled.
        let regions: Vec<AddrRange> = (0..64)
            .map(|i| AddrRange::new(i * 1024 * P, (i + 1) * 1024 * P))
            .collect();
        let mut rng = crate::Prng::seeded(8);
        let hot: Vec<u64> = (0..800).map(|_| rng.in_range(0, 64 * 1024)).collect();
        let sparse = Run::new(&regions, 12, 40, 9, |rng, _| {
            hot[rng.in_range(0, hot.len() as u64) as usize]
        });
        let mut distinct = hot.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let truth = distinct.len() as f64;
        let t = sparse.ask(&[2_000_000])[0].total;
        assert!(t.low <= truth && truth <= t.high, "{t:?} for {truth}");
        assert!((t.pages / truth - 1.0).abs() < 0.25, "{t:?} for {truth}");
        let dense = Run::new(&regions, 40, 400, 10, |rng, _| rng.in_range(0, 64 * 1024));
        let t = dense.ask(&[30_000_000])[0].total;
        assert!(t.is_settled() && t.pages > 0.9 * 65_536.0, "{t:?}");
    }

    #[test]
    fn pieces_counted_whole_take_no_low_end_that_the_pooled_samples_rule_out() {
        // Redis's narrow phase, 2 s: fifty pieces of 2,000 pages, each counted whole on a few
        // samples that never repeat; all the samples together repeat enough to allow no more
        // than 12,000 pages, where the kernel found 9,800.
        let piece = Touched {
            pages: 2000.0,
            low: 100.0,
            high: 2000.0,
            seen: 10.0,
            samples: 10,
            evidence_us: 0,
        };
        let parts = vec![piece; 50];
        let total = Touched::sum(parts.clone());
        let pooled = Touched {
            pages: 7000.0,
            low: 4000.0,
            high: 90_000.0,
            ..Touched::default()
        };
        let ruled_out = with_pooled(total, parts.clone(), (pooled, 12_000.0));
        assert!(ruled_out.low <= 12_000.0, "{ruled_out:?}");
        assert!(ruled_out.low >= pooled.low, "{ruled_out:?}");
        assert_eq!(ruled_out.pages, total.pages);
        // Where the pooled samples allow all of it, the pieces' noise cancels.
        let allowed = with_pooled(total, parts.clone(), (pooled, 100_000.0));
        assert_eq!(allowed, Touched::sum_agreeing(parts));
        assert!(allowed.low > 0.8 * allowed.pages, "{allowed:?}");
    }

    #[test]
    fn no_horizon_counts_more_than_the_target_has_resident() {
        let regions = [AddrRange::new(0, 65_536 * P)];
        let mut run = Run::new(&regions, 20, 50, 3, |rng, _| rng.in_range(0, 65_536));
        let unbounded = run.ask(&[0, 10_000_000, 60_000_000]);
        assert!(unbounded[2].bytes() > 200 << 20, "{:?}", unbounded[2].total);
        run.resident_total = Some(100 << 20);
        for ws in run.ask(&[0, 10_000_000, 60_000_000]) {
            assert!(ws.high_bytes() <= 100 << 20, "{:?}", ws.total);
        }
    }

    #[test]
    fn code_beside_data_in_one_region_counts_and_stays_within_the_mapping() {
        // A region over a whole mapping accessed through data samples; the instructions
        // fetched from two of its pages count too, and the mapping's bound holds both.
        let mapping = AddrRange::new(0, 64 * P);
        let mut run = Run::new(&[mapping], 10, 10, 4, |rng, _| rng.in_range(0, 64));
        for t in 1..=25 {
            run.code.add(t * 400_000, [P, 2 * P]);
        }
        run.code.settle(run.now);
        run.resident = vec![ResidentRange {
            range: mapping,
            resident_bytes: 64 * P,
            executable: false,
        }];
        let ws = &run.ask(&[10_000_000])[0];
        assert!(ws.code_bytes() >= P, "{ws:?}");
        assert!(ws.bytes() <= 64 * P);
    }

    #[test]
    fn physical_memory_is_estimated_as_one_memory() {
        // 2,000 frames touched, scattered over 64 regions of 4 GiB: each region draws a few
        // samples that seldom repeat within it, and the frames are counted over all of them.
        let regions: Vec<AddrRange> = (0..64)
            .map(|i| AddrRange::new(i * 16_384 * P, (i + 1) * 16_384 * P))
            .collect();
        let mut frames_rng = crate::Prng::seeded(5);
        let frames: Vec<u64> = (0..2000)
            .map(|_| frames_rng.in_range(0, 64 * 16_384))
            .collect();
        let run = Run::new(&regions, 30, 60, 6, |rng, _| {
            frames[rng.in_range(0, frames.len() as u64) as usize]
        });
        let host = working_sets(
            &run.evidence(AddressSpace::Physical),
            run.now,
            &[10_000_000],
        );
        let pages = host[0].total.pages;
        assert!((pages / 2000.0 - 1.0).abs() < 0.25, "{:?}", host[0].total);
        // Every sample counted once: 60 a window, 25 windows in 10 s.
        assert_eq!(host[0].total.samples, 60 * 25, "{:?}", host[0].total);
    }

    #[test]
    fn without_samples_cells_count_whole() {
        let cells = [AddrRange::new(0, 10 * P), AddrRange::new(20 * P, 21 * P)];
        let e = estimate_cells(&PageSamples::default(), &cells, 1_000_000, 0, &[], false);
        assert_eq!(e, vec![whole(10), whole(1)]);
    }
}
