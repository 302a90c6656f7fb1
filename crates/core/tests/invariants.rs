//! Property tests for the invariants the adaptive regions adjustment promises
//! (docs/algorithms.md#guarantees): regions stay sorted, non-overlapping, aligned, and cover the
//! same ranges through merge and split; `nr_accesses` never exceeds the samples per window; the
//! region count stays in bounds.

use proptest::prelude::*;
use std::ops::ControlFlow;
use udamon_core::adjust::{
    IdleEvidence, MergeRule, apply_min_nr_regions, merge_regions_of, split_at_sampled_extents,
    split_regions_of,
};
use udamon_core::recent_samples::RecentSamples;
use udamon_core::region::align_up;
use udamon_core::testing::{StopAfterWindows, TestOps};
use udamon_core::{
    AddrRange, Attrs, Callbacks, Context, Flow, Prng, Region, SampledAccess, Target, VirtualClock,
};

const PAGE: u64 = 4096;

/// The read and write samples of all `regions`.
fn kind_totals(regions: &[Region]) -> (u32, u32) {
    regions.iter().fold((0, 0), |(r, w), x| {
        (r + x.read_samples, w + x.write_samples)
    })
}

/// Sorted, non-overlapping, page-aligned spans with holes between them.
fn spans() -> impl Strategy<Value = Vec<AddrRange>> {
    prop::collection::vec((1u64..64, 1u64..2048), 1..4).prop_map(|v| {
        let mut at = 16 * PAGE;
        v.into_iter()
            .map(|(gap, pages)| {
                let r = AddrRange::new(at + gap * PAGE, at + (gap + pages) * PAGE);
                at = r.end;
                r
            })
            .collect()
    })
}

/// Regions covering `spans`, cut at random page-aligned points, with random statistics.
fn regions_over(spans: &[AddrRange], cuts: &[u64], stats: &[(u32, u32)]) -> Vec<Region> {
    let mut out = Vec::new();
    let mut k = 0;
    for s in spans {
        let mut start = s.start;
        while start < s.end {
            let pages = (s.end - start) / PAGE;
            let len = (1 + cuts[k % cuts.len()] % pages) * PAGE;
            let (nr, age) = stats[k % stats.len()];
            out.push(Region {
                nr_accesses: nr,
                age,
                last_nr_accesses: age % 21,
                ..Region::new(start, start + len)
            });
            start += len;
            k += 1;
        }
    }
    out
}

/// Coverage as merged ranges, to compare before and after.
fn coverage(regions: &[Region]) -> Vec<AddrRange> {
    let mut out: Vec<AddrRange> = Vec::new();
    for r in regions {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(AddrRange::new(r.start, r.end)),
        }
    }
    out
}

fn assert_well_formed(regions: &[Region], align: u64) -> Result<(), TestCaseError> {
    for r in regions {
        prop_assert!(r.start < r.end, "empty region {:?}", r);
        prop_assert!(
            r.start % align == 0 && r.end % align == 0,
            "unaligned {:?}",
            r
        );
    }
    for w in regions.windows(2) {
        prop_assert!(w[0].end <= w[1].start, "unsorted or overlapping {:?}", w);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn merge_keeps_coverage_bounds_and_evidence(
        spans in spans(),
        cuts in prop::collection::vec(0u64..512, 1..32),
        stats in prop::collection::vec((0u32..=20, 0u32..100), 1..32),
        samples in prop::collection::vec(0u32..30, 1..32),
        threshold in 0u32..=20,
        limit_pages in 1u64..4096,
        by_density in any::<bool>(),
    ) {
        let mut regions = regions_over(&spans, &cuts, &stats);
        // Samples as a sampled source counts them: a region with samples was accessed in at
        // least one interval and at most one interval per sample.
        for (r, &n) in regions.iter_mut().zip(samples.iter().cycle()) {
            r.raw_samples = n;
            (r.read_samples, r.write_samples) = (n / 2, n - n / 3);
            r.nr_accesses = if n == 0 { 0 } else { r.nr_accesses.clamp(1, n) };
        }
        let before = coverage(&regions);
        let n_before = regions.len();
        let total_samples: u32 = regions.iter().map(|r| r.raw_samples).sum();
        let max_region = regions.iter().map(Region::size).max().unwrap();
        let sz_limit = limit_pages * PAGE;
        let rule = MergeRule {
            density_alpha: by_density.then_some(0.05),
            ..MergeRule::damon(threshold, 20)
        };
        let kinds = kind_totals(&regions);
        merge_regions_of(&mut regions, rule, sz_limit, true, None);
        assert_well_formed(&regions, PAGE)?;
        prop_assert_eq!(coverage(&regions), before);
        prop_assert!(regions.len() <= n_before);
        prop_assert_eq!(regions.iter().map(|r| r.raw_samples).sum::<u32>(), total_samples);
        prop_assert_eq!(kind_totals(&regions), kinds);
        for r in &regions {
            prop_assert!(r.nr_accesses <= 20);
            prop_assert!(r.size() <= sz_limit.max(max_region), "merge exceeded the size limit");
            prop_assert!(
                r.raw_samples == 0 || r.nr_accesses > 0,
                "a merge averaged the samples of {:?} away", r
            );
        }
    }

    #[test]
    fn sampled_split_keeps_coverage_alignment_samples_and_bound(
        spans in spans(),
        cuts in prop::collection::vec(0u64..512, 1..32),
        samples in prop::collection::vec((0u64..2048, 0u64..2048, 0u32..20), 1..32),
        read_share in 0u32..=100,
        max_nr in 1u32..200,
        report in any::<bool>(),
        past in prop::collection::vec(0u64..(1 << 25), 0..64),
    ) {
        // Samples of recent windows, anywhere in or around the spans.
        let mut recent = RecentSamples::default();
        recent.add(past.iter().copied());
        recent.complete_window();
        let recent = [recent];
        let evidence = if report { IdleEvidence::Report } else { IdleEvidence::Refine };
        let mut regions = regions_over(&spans, &cuts, &[(3, 4)]);
        for (r, &(a, b, n)) in regions.iter_mut().zip(samples.iter().cycle()) {
            if n > 0 {
                let (lo, hi) = (a.min(b) % r.size(), a.max(b) % r.size());
                r.raw_samples = n;
                (r.read_samples, r.write_samples) = (n * read_share / 100, n - n / 4);
                r.sampled = Some(AddrRange::new(r.start + lo, r.start + hi + 1)).into();
            }
        }
        let before = coverage(&regions);
        let n_before = regions.len();
        let total_samples: u32 = regions.iter().map(|r| r.raw_samples).sum();
        let kinds = kind_totals(&regions);
        let mut targets = [Target { pid: None, regions }];
        split_at_sampled_extents(&mut targets, max_nr, PAGE, evidence, |t| recent.get(t));
        let regions = &targets[0].regions;
        assert_well_formed(regions, PAGE)?;
        prop_assert_eq!(coverage(regions), before);
        prop_assert!(regions.len() <= n_before.max(max_nr as usize), "{} regions", regions.len());
        prop_assert_eq!(regions.iter().map(|r| r.raw_samples).sum::<u32>(), total_samples);
        prop_assert_eq!(kind_totals(regions), kinds, "read and write samples lost or made up");
        for r in regions {
            prop_assert!(
                r.read_samples <= r.raw_samples && r.write_samples <= r.raw_samples,
                "more samples of a kind than samples {:?}", r
            );
            // Every sample stays in a piece whose span lies within it.
            if let Some(s) = r.sampled.get() {
                prop_assert!(r.start <= s.start && s.end <= r.end, "{:?}", r);
            } else {
                prop_assert_eq!(r.raw_samples, 0, "samples in an unsampled piece {:?}", r);
            }
            prop_assert!(
                r.raw_samples == 0 || r.nr_accesses > 0,
                "a split left samples in a piece not accessed {:?}", r
            );
        }
    }

    #[test]
    fn split_keeps_coverage_and_alignment(
        spans in spans(),
        cuts in prop::collection::vec(0u64..512, 1..32),
        nr_subs in 2u32..=3,
        seed in any::<u64>(),
    ) {
        let mut regions = regions_over(&spans, &cuts, &[(3, 4)]);
        let before = coverage(&regions);
        let n_before = regions.len();
        split_regions_of(&mut regions, nr_subs, PAGE, &mut Prng::seeded(seed));
        assert_well_formed(&regions, PAGE)?;
        prop_assert_eq!(coverage(&regions), before);
        prop_assert!(regions.len() <= n_before * nr_subs as usize);
        prop_assert!(regions.iter().all(|r| (r.nr_accesses, r.age) == (3, 4)), "pieces keep statistics");
    }

    #[test]
    fn min_nr_regions_is_enforced_by_size(
        spans in spans(),
        cuts in prop::collection::vec(0u64..512, 1..32),
        min_nr in 3u32..200,
    ) {
        let mut targets = [Target { pid: None, regions: regions_over(&spans, &cuts, &[(0, 0)]) }];
        let before = coverage(&targets[0].regions);
        let total = targets[0].total_size();
        let limit = apply_min_nr_regions(&mut targets, min_nr, PAGE);
        prop_assert_eq!(limit, align_up((total / min_nr as u64).max(PAGE), PAGE));
        assert_well_formed(&targets[0].regions, PAGE)?;
        prop_assert_eq!(coverage(&targets[0].regions), before);
        prop_assert!(targets[0].regions.iter().all(|r| r.size() <= limit));
    }
}

/// An accessed-bit source: each sampled page is accessed with the probability of the first
/// area of `hot` that holds it (0 outside them).
fn random_ops(spans: &[AddrRange], hot: Vec<(AddrRange, f64)>) -> TestOps<'static> {
    TestOps::checked(spans, move |c| {
        let p = hot
            .iter()
            .find(|(h, _)| h.contains(c.addr))
            .map_or(0.0, |&(_, p)| p);
        c.rng.unit() < p
    })
}

/// A sampled source: each interval, `per_interval` sample addresses fall on pages chosen with
/// the weights of `hot` (and anywhere in the spans with the rest of the weight). Some memory
/// holds no pages: a random page-aligned stretch of a span, at times.
fn sampled_ops(
    spans: Vec<AddrRange>,
    hot: Vec<(AddrRange, f64)>,
    per_interval: u32,
) -> TestOps<'static> {
    let in_spans = spans.clone();
    TestOps::sampled(&spans, move |ctx| {
        let rng = ctx.rng();
        let mut addrs = Vec::new();
        for _ in 0..per_interval {
            let u = rng.unit();
            let mut acc = 0.0;
            let area = hot
                .iter()
                .find(|(_, w)| {
                    acc += w;
                    u < acc
                })
                .map(|&(a, _)| a)
                .unwrap_or_else(|| in_spans[rng.in_range(0, in_spans.len() as u64) as usize]);
            let addr = rng.in_range(area.start, area.end);
            let kind = rng.in_range(0, 4);
            addrs.push(SampledAccess {
                addr,
                read: kind & 1 != 0,
                write: kind & 2 != 0,
            });
        }
        ctx.record_sampled_accesses(0, &mut addrs);
    })
    .residency(move |ctx| {
        let rng = ctx.rng();
        if rng.in_range(0, 2) == 0 {
            return;
        }
        let span = spans[rng.in_range(0, spans.len() as u64) as usize];
        let pages = span.size() / PAGE;
        let first = rng.in_range(0, pages);
        let len = rng.in_range(1, pages - first + 1);
        let absent = [AddrRange::new(
            span.start + first * PAGE,
            span.start + (first + len) * PAGE,
        )];
        ctx.cut_absent(0, &absent);
    })
}

/// Checks the invariants at every aggregation; stops at the first that does not hold.
struct Checker {
    spans: Vec<AddrRange>,
    /// The source samples: counts must rest on them.
    sampled: bool,
    failure: Option<String>,
}

impl Checker {
    fn check(&self, ctx: &Context) -> Result<(), String> {
        let attrs = ctx.attrs();
        let regions = &ctx.targets()[0].regions;
        if coverage(regions) != self.spans {
            return Err(format!("coverage changed: {:?}", coverage(regions)));
        }
        for w in regions.windows(2) {
            if w[0].end > w[1].start {
                return Err(format!("overlap {w:?}"));
            }
        }
        if let Some(r) = regions
            .iter()
            .find(|r| r.start % PAGE != 0 || r.end % PAGE != 0)
        {
            return Err(format!("unaligned {r:?}"));
        }
        if let Some(r) = regions
            .iter()
            .find(|r| r.nr_accesses > attrs.max_nr_accesses())
        {
            return Err(format!(
                "nr_accesses above {}: {r:?}",
                attrs.max_nr_accesses()
            ));
        }
        if let Some(r) = regions
            .iter()
            .find(|r| r.raw_samples > 0 && r.nr_accesses == 0)
        {
            return Err(format!("samples but reported not accessed: {r:?}"));
        }
        if let Some(r) = regions
            .iter()
            .find(|r| self.sampled && r.nr_accesses > r.raw_samples)
        {
            return Err(format!(
                "accessed in more intervals than it has samples (or without any): {r:?}"
            ));
        }
        if let Some(r) = regions
            .iter()
            .find(|r| r.read_samples > r.raw_samples || r.write_samples > r.raw_samples)
        {
            return Err(format!("more samples of a kind than samples: {r:?}"));
        }
        if regions.len() > attrs.max_nr_regions as usize {
            return Err(format!(
                "{} regions, above the maximum {}",
                regions.len(),
                attrs.max_nr_regions
            ));
        }
        let total: u64 = regions.iter().map(Region::size).sum();
        let limit = align_up((total / attrs.min_nr_regions as u64).max(PAGE), PAGE);
        if let Some(r) = regions.iter().find(|r| r.size() > limit) {
            return Err(format!(
                "{r:?} above the minimum-regions size limit {limit}"
            ));
        }
        Ok(())
    }
}

impl Callbacks for Checker {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if let Err(e) = self.check(ctx) {
            self.failure = Some(e);
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The whole loop: merge, minimum enforcement, split, over many random windows, with an
    /// accessed-bit source or a sampled one.
    #[test]
    fn loop_keeps_invariants(
        spans in spans(),
        hot in prop::collection::vec((0u64..100, 1u64..30, 0.0f64..=1.0), 0..4),
        min_nr in 3u32..12,
        max_extra in 0u32..100,
        aggr_samples in 1u64..=25,
        seed in any::<u64>(),
        sampled in any::<bool>(),
        per_interval in 0u32..4,
    ) {
        let total_pages = spans.iter().map(|s| s.size() / PAGE).sum::<u64>();
        let first = spans[0].start;
        let hot: Vec<(AddrRange, f64)> = hot
            .into_iter()
            .map(|(at, len, p)| {
                let s = first + (at * total_pages / 100) * PAGE;
                (AddrRange::new(s, s + len * 64 * PAGE), p)
            })
            .collect();
        // The maximum is reachable by merging: two regions per size limit per span, plus one.
        let max_nr = 2 * min_nr + spans.len() as u32 + 1 + max_extra;
        let attrs = Attrs {
            sample_interval_us: 1000,
            aggr_interval_us: 1000 * aggr_samples,
            min_nr_regions: min_nr,
            max_nr_regions: max_nr,
            ..Attrs::default()
        };
        let mut ctx = Context::new(attrs, seed).unwrap();
        ctx.add_target(Target::new(None));
        let checker = Checker { spans: spans.clone(), sampled, failure: None };
        let mut ops = if sampled {
            // Hot areas take their weight of the samples; the rest fall anywhere.
            let total: f64 = hot.iter().map(|h: &(AddrRange, f64)| h.1).sum::<f64>().max(1.0);
            let hot = hot.into_iter().map(|(a, p)| (a, p / total)).collect();
            sampled_ops(spans, hot, per_interval)
        } else {
            random_ops(&spans, hot)
        };
        let mut callbacks = (checker, StopAfterWindows(12));
        ctx.run(&mut ops, &mut VirtualClock, &mut callbacks).unwrap();
        let failure = callbacks.0.failure;
        prop_assert!(failure.is_none(), "{}", failure.unwrap());
    }
}
