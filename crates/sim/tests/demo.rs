//! The built-in demo shows what it promises: per phase, the monitored access frequency of the
//! hot area, the scan chunk being scanned, the warm area and the cold area are clearly apart.

use udamon_core::testing::EachWindow;
use udamon_core::{AddrRange, Attrs, Context, StopReason, VirtualClock};
use udamon_sim::{SimOps, SimOptions, Workload};

/// The size-weighted mean `nr_accesses` over each of `ranges` in the window just aggregated.
fn heat(ctx: &Context, ranges: &[AddrRange]) -> Vec<f64> {
    ranges
        .iter()
        .map(|range| {
            let weighted: f64 = ctx.targets()[0]
                .regions
                .iter()
                .map(|r| {
                    r.end
                        .min(range.end)
                        .saturating_sub(r.start.max(range.start)) as f64
                        * r.nr_accesses as f64
                })
                .sum();
            weighted / range.size() as f64
        })
        .collect()
}

#[test]
fn demo_has_hot_warm_cold_a_moving_working_set_and_a_scan() {
    let workload = Workload::builtin("demo").unwrap();
    assert_eq!(workload.cycle_us(), 24_000_000);
    let index = |name: &str| {
        workload
            .regions()
            .iter()
            .position(|r| r.name == name)
            .unwrap()
    };
    let ranges: Vec<AddrRange> = workload.regions().iter().map(|r| r.range).collect();
    // Per aggregation window: the mean heat of each workload region.
    let mut windows: Vec<((u64, u64), Vec<f64>)> = Vec::new();
    let mut ops = SimOps::new(workload.clone(), SimOptions::default());
    let mut ctx = Context::new(Attrs::default(), 7).unwrap();
    let mut each_window =
        EachWindow(|ctx: &Context| windows.push((ctx.window_us(), heat(ctx, &ranges))));
    let stop = ctx
        .run(&mut ops, &mut VirtualClock, &mut each_window)
        .unwrap();
    assert_eq!(stop, StopReason::NoValidTarget);

    // Per 5 ms sampling interval at the default rate, from the weights (2500 : 100 : 44): the
    // hot area gets ~473k random accesses over 16384 pages (every page touched: 20 of 20
    // samples), the warm area ~18.9k over 65536 pages (a page touched with probability
    // 1 - e^-0.289 = 0.25: ~5 of 20), the scan sweeps ~8.3k of its chunk's 16384 pages (~10 of
    // 20).
    for (phase, p) in workload.phases().iter().enumerate() {
        let start = phase as u64 * 3_000_000;
        // Leave the first second of each phase for adaptive regions adjustment to settle.
        let settled: Vec<&Vec<f64>> = windows
            .iter()
            .filter(|((t0, t1), _)| *t0 >= start + 1_000_000 && *t1 <= start + 3_000_000)
            .map(|(_, means)| means)
            .collect();
        assert_eq!(settled.len(), 20);
        let mean =
            |region: usize| settled.iter().map(|m| m[region]).sum::<f64>() / settled.len() as f64;
        let (hot, idle_hot) = if phase < 4 {
            ("hot_a", "hot_b")
        } else {
            ("hot_b", "hot_a")
        };
        let scan = index(&format!("scan{phase}"));
        assert_eq!(p.patterns[2].region, scan);
        let (hot, idle_hot, warm, cold, scan) = (
            mean(index(hot)),
            mean(index(idle_hot)),
            mean(index("warm")),
            mean(index("cold")),
            mean(scan),
        );
        let report = format!(
            "phase {phase}: hot {hot:.2} scan {scan:.2} warm {warm:.2} cold {cold:.2} idle hot {idle_hot:.2}"
        );
        assert!(hot >= 18.0, "{report}");
        assert!((7.0..=13.0).contains(&scan), "{report}");
        assert!((3.5..=6.5).contains(&warm), "{report}");
        assert!(cold < 0.5, "{report}");
        // Regions straddling the idle hot area and its warm or scanned neighbour lend it a
        // little frequency; it stays far below the warm area.
        assert!(idle_hot < warm / 2.0, "{report}");
    }
}
