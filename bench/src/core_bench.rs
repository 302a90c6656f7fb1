//! The monitoring core's costs, measured on the real `Context` in virtual time:
//!
//! 1. one aggregation (merge + split + reset) per region, at 1 k to 1 M regions;
//! 2. one sampled address delivered by an access source (`record_sampled_accesses`);
//! 3. the core's share of one core while monitoring 20 k regions with 5 ms sampling, 100 ms
//!    aggregation and 1,000 sampled addresses per second, against upstream's 40-72 % for 20 k
//!    regions (seed `001_de38b0df64bb5966.txt`); and whether the cost of a sampling interval
//!    follows the samples in it or the number of regions;
//! 5. the working set at page resolution (`udamon_core::working_set`): what the record's
//!    per-region estimates and serve's three horizons add to each window at the live defaults,
//!    on a sparse set of pages of a server-sized heap;
//! 6. page granularity (one region a page, the seed's `--monitoring_nr_regions_range` at the
//!    page count) over 1 to 16 GiB: a sampling interval's CPU, a window's, and the heap each
//!    region takes at its peak.
//!
//! Sample addresses are generated before timing starts, so only the core's work is measured.
//! Times are the thread's CPU time. Run: `cargo run --release -p udamon-bench --bin core-bench
//! [--smoke] [SECTION...]` (all sections when none is named; `--smoke` runs each at its smallest
//! size and for a moment, which the tests do so that the benchmark cannot rot).

mod cpu;

use cpu::thread_cpu_ns;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use udamon_core::{
    AddrRange, Attrs, Callbacks, Context, Flow, NoCallbacks, Operations, OpsError, Prng,
    SampledAccess, Target, VirtualClock,
};

const PAGE: u64 = 4096;

/// `--smoke`: every section at its smallest size, briefly.
static SMOKE: AtomicBool = AtomicBool::new(false);

fn smoke() -> bool {
    SMOKE.load(Ordering::Relaxed)
}

/// `full`, or `small` under `--smoke`.
fn scaled<T>(full: T, small: T) -> T {
    if smoke() { small } else { full }
}

/// The heap in use and its peak since counting started ([`count_heap_from_now`]): what section 6
/// charges to regions. Counting is off until then, so that sections 1 to 5 run with one relaxed
/// load an allocation more than the allocator's own work (three atomic updates an allocation
/// cost section 1, which allocates a vector for every region it splits, 6 ns a region).
struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static HEAP: AtomicIsize = AtomicIsize::new(0);
static HEAP_PEAK: AtomicIsize = AtomicIsize::new(0);

fn count(delta: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        let now = HEAP.fetch_add(delta, Ordering::Relaxed) + delta;
        HEAP_PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call goes to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Counts the heap from now on (memory allocated before and freed since counts negative, so
/// that the peak is never overstated), starting a new peak; returns the count now.
fn count_heap_from_now() -> isize {
    COUNTING.store(true, Ordering::Relaxed);
    let now = HEAP.load(Ordering::Relaxed);
    HEAP_PEAK.store(now, Ordering::Relaxed);
    now
}

/// A sampled access source replaying pre-generated addresses: `per_interval` samples each
/// sampling interval, 90 % of them in a hot tenth of the address space.
struct ReplayedSamples {
    span: AddrRange,
    addrs: Vec<u64>,
    per_interval: usize,
    cursor: usize,
    batch: Vec<SampledAccess>,
}

impl ReplayedSamples {
    fn new(span: AddrRange, per_interval: usize, intervals: usize, seed: u64) -> Self {
        let mut rng = Prng::seeded(seed);
        let hot_end = span.start + span.size() / 10;
        let addrs = (0..per_interval * intervals)
            .map(|_| {
                if rng.unit() < 0.9 {
                    rng.in_range(span.start, hot_end)
                } else {
                    rng.in_range(span.start, span.end)
                }
            })
            .collect();
        ReplayedSamples {
            span,
            addrs,
            per_interval,
            cursor: 0,
            batch: Vec::with_capacity(per_interval),
        }
    }
}

impl Operations for ReplayedSamples {
    fn name(&self) -> &str {
        "replay"
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        ctx.targets_mut()[0] = Target::with_regions(None, &[self.span]);
        Ok(())
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        let end = (self.cursor + self.per_interval).min(self.addrs.len());
        self.batch.clear();
        self.batch.extend(
            self.addrs[self.cursor..end]
                .iter()
                .map(|&a| SampledAccess::at(a)),
        );
        self.cursor = end;
        ctx.record_sampled_accesses(0, &mut self.batch);
    }
}

/// The baseline: an accessed-bit style source that, like upstream's, picks and checks one
/// sampling address in every region every interval (here without any page-table work, so only
/// the per-region loop is measured).
struct PerRegionChecks {
    span: AddrRange,
}

impl Operations for PerRegionChecks {
    fn name(&self) -> &str {
        "per-region"
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        ctx.targets_mut()[0] = Target::with_regions(None, &[self.span]);
        Ok(())
    }

    fn prepare_access_checks(&mut self, ctx: &mut Context) {
        ctx.randomize_sampling_addrs();
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        let hot_end = self.span.start + self.span.size() / 10;
        for (r, addr) in ctx.regions_with_sampling_addrs(0) {
            r.nr_accesses += u32::from(addr < hot_end);
        }
    }
}

/// A context held at about `nr_regions` regions: the size limit forbids merging below it and
/// the maximum allows splitting above it.
fn context(nr_regions: u64, sample_us: u64, aggr_us: u64) -> (Context, AddrRange) {
    let attrs = Attrs {
        sample_interval_us: sample_us,
        aggr_interval_us: aggr_us,
        min_nr_regions: nr_regions as u32,
        max_nr_regions: 2 * nr_regions as u32,
        ..Attrs::default()
    };
    let mut ctx = Context::new(attrs, 42).expect("valid attributes");
    ctx.add_target(Target::new(None));
    (
        ctx,
        AddrRange::new(1 << 40, (1 << 40) + nr_regions * 16 * PAGE),
    )
}

/// Runs `steps` sampling intervals; returns CPU ns spent and the mean region count.
fn run_steps(ctx: &mut Context, ops: &mut ReplayedSamples, steps: usize) -> (u64, f64) {
    let (mut regions, mut cpu) = (0usize, 0u64);
    for _ in 0..steps {
        let t0 = thread_cpu_ns();
        let flow = ctx
            .step(ops, &mut VirtualClock, &mut NoCallbacks)
            .expect("replay cannot fail");
        cpu += thread_cpu_ns() - t0;
        let _ = black_box(flow);
        regions += ctx.nr_regions();
    }
    (cpu, regions as f64 / steps as f64)
}

fn aggregation_cost_per_region(nr_regions: u64) -> f64 {
    // aggregation == sampling: every step is a full aggregation; no samples, so the work is the
    // merge, the minimum-regions pass, the reset and the split.
    let (mut ctx, span) = context(nr_regions, 1000, 1000);
    let steps = (2_000_000 / nr_regions).clamp(5, 200) as usize;
    let mut ops = ReplayedSamples::new(span, 0, 0, 1);
    ctx.start(&mut ops).expect("start");
    run_steps(&mut ctx, &mut ops, 3); // warm up: reach the steady region count
    let (cpu, mean_regions) = run_steps(&mut ctx, &mut ops, steps);
    cpu as f64 / steps as f64 / mean_regions
}

fn cost_per_sample(nr_regions: u64) -> f64 {
    let per_interval = 10_000;
    let intervals = 50;
    let (mut ctx, span) = context(nr_regions, 5000, 1_000_000_000);
    let mut ops = ReplayedSamples::new(span, per_interval, intervals, 2);
    ctx.start(&mut ops).expect("start");
    let cpu = run_counting(&mut ctx, &mut ops, intervals);
    cpu as f64 / (per_interval * intervals) as f64
}

/// CPU seconds per monitored second over `seconds` of virtual time at 5 ms / 100 ms, with
/// `samples_per_s` sampled addresses per second; and the mean region count.
fn monitoring_share(nr_regions: u64, samples_per_s: usize, seconds: usize) -> (f64, f64) {
    let intervals = seconds * 200;
    let (mut ctx, span) = context(nr_regions, 5000, 100_000);
    let mut ops = ReplayedSamples::new(span, samples_per_s / 200, intervals, 3);
    ctx.start(&mut ops).expect("start");
    let (cpu, regions) = run_all(&mut ctx, &mut ops, intervals);
    (cpu as f64 / (seconds as f64 * 1e9), regions)
}

/// CPU ns of one sampling interval that ends no aggregation window (the window is made
/// longer than the run), with `per_interval` sampled addresses in it.
fn interval_cost(nr_regions: u64, per_interval: usize) -> f64 {
    let intervals = scaled(20_000, 200);
    let (mut ctx, span) = context(nr_regions, 5000, 1_000_000_000);
    let mut ops = ReplayedSamples::new(span, per_interval, intervals, 4);
    ctx.start(&mut ops).expect("start");
    let cpu = run_counting(&mut ctx, &mut ops, intervals);
    cpu as f64 / intervals as f64
}

/// Sampling intervals in a window at DAMON's defaults (5 ms, 100 ms).
const WINDOW_INTERVALS: usize = 20;

/// Runs `steps` sampling intervals of a context whose window never ends, and counts the
/// samples kept into the regions every [`WINDOW_INTERVALS`], as the window's pass would
/// ([`Context::record_sampled_accesses`]); returns the CPU ns of both.
fn run_counting(ctx: &mut Context, ops: &mut dyn Operations, steps: usize) -> u64 {
    let t0 = thread_cpu_ns();
    for i in 0..steps {
        let _ = black_box(
            ctx.step(ops, &mut VirtualClock, &mut NoCallbacks)
                .expect("step"),
        );
        if (i + 1) % WINDOW_INTERVALS == 0 || i + 1 == steps {
            black_box(ctx.targets_mut());
        }
    }
    thread_cpu_ns() - t0
}

/// CPU ns of one sampling interval of the per-region baseline.
fn baseline_interval_cost(nr_regions: u64) -> f64 {
    let intervals = (scaled(200_000_000, 2_000_000) / nr_regions).clamp(10, 20_000) as usize;
    let (mut ctx, span) = context(nr_regions, 5000, 1_000_000_000);
    let mut ops = PerRegionChecks { span };
    ctx.start(&mut ops).expect("start");
    let (cpu, _) = run_all(&mut ctx, &mut ops, intervals);
    cpu as f64 / intervals as f64
}

/// Runs `steps` sampling intervals under one timer; returns CPU ns and the final region count.
fn run_all(ctx: &mut Context, ops: &mut dyn Operations, steps: usize) -> (u64, f64) {
    let t0 = thread_cpu_ns();
    for _ in 0..steps {
        let _ = black_box(
            ctx.step(ops, &mut VirtualClock, &mut NoCallbacks)
                .expect("step"),
        );
    }
    (thread_cpu_ns() - t0, ctx.nr_regions() as f64)
}

/// Samples on `pages` (random pages of `span`), `per_interval` each sampling interval: a
/// key-value server's hot items scattered over its heap.
struct SparseSamples {
    span: AddrRange,
    pages: Vec<u64>,
    per_interval: usize,
    rng: Prng,
    batch: Vec<SampledAccess>,
}

impl Operations for SparseSamples {
    fn name(&self) -> &str {
        "sparse"
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        ctx.targets_mut()[0] = Target::with_regions(None, &[self.span]);
        Ok(())
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        self.batch.clear();
        for _ in 0..self.per_interval {
            let page = self.pages[self.rng.in_range(0, self.pages.len() as u64) as usize];
            self.batch.push(SampledAccess::read(page * PAGE + 64));
        }
        ctx.record_sampled_accesses(0, &mut self.batch);
    }
}

/// Times, at every window, the record's per-region estimates and serve's three horizons.
struct TimedEstimates {
    record_ns: u64,
    serve_ns: u64,
    windows: u64,
    left: u64,
}

impl Callbacks for TimedEstimates {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        let t0 = thread_cpu_ns();
        black_box(ctx.window_touched_bytes(0));
        let t1 = thread_cpu_ns();
        // The horizons serve exports, as serve asks them.
        black_box(ctx.working_sets(0, &[0, 10_000_000, 60_000_000]));
        self.serve_ns += thread_cpu_ns() - t1;
        self.record_ns += t1 - t0;
        self.windows += 1;
        self.left -= 1;
        Ok(if self.left == 0 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

/// At the live defaults (5 ms sampling, 400 ms windows, 20 to 60 regions), `samples_per_s`
/// samples on `hot_pages` random pages of a 176 MiB heap for `seconds`: CPU ns per window of
/// the monitoring loop, of the record's estimates and of serve's horizons.
fn estimate_cost(samples_per_s: usize, hot_pages: u64, seconds: u64) -> (f64, f64, f64) {
    let span = AddrRange::new(1 << 40, (1 << 40) + (176 << 20));
    let mut rng = Prng::seeded(5);
    let heap_pages = span.size() / PAGE;
    let pages = (0..hot_pages)
        .map(|_| span.start / PAGE + rng.in_range(0, heap_pages))
        .collect();
    let mut ops = SparseSamples {
        span,
        pages,
        per_interval: samples_per_s / 200,
        rng,
        batch: Vec::new(),
    };
    let mut ctx = Context::new(
        Attrs {
            sample_interval_us: 5000,
            aggr_interval_us: 400_000,
            min_nr_regions: 20,
            max_nr_regions: 60,
            ..Attrs::default()
        },
        7,
    )
    .expect("valid attributes");
    ctx.add_target(Target::new(None));
    let windows = seconds * 5 / 2;
    let mut timed = TimedEstimates {
        record_ns: 0,
        serve_ns: 0,
        windows: 0,
        left: windows,
    };
    let t0 = thread_cpu_ns();
    ctx.run(&mut ops, &mut VirtualClock, &mut timed)
        .expect("replay cannot fail");
    let all = thread_cpu_ns() - t0;
    let n = timed.windows.max(1) as f64;
    let loop_ns = (all - timed.record_ns - timed.serve_ns) as f64 / n;
    (
        loop_ns,
        timed.record_ns as f64 / n,
        timed.serve_ns as f64 / n,
    )
}

fn main() {
    let mut sections = Vec::new();
    for a in std::env::args().skip(1) {
        if a == "--smoke" {
            SMOKE.store(true, Ordering::Relaxed);
        } else {
            sections.push(a.parse::<u32>().expect(
                "give section numbers (1 to 4: the loop, 5: the estimates, 6: page granularity) \
                 or --smoke",
            ));
        }
    }
    let want = |n: u32| sections.is_empty() || sections.contains(&n);
    println!("# udamon core benchmark (release build, thread CPU time)\n");
    if (1..=4).any(want) {
        numbered_sections();
    }
    if want(5) {
        estimate_section();
    }
    if want(6) {
        page_granularity_section();
    }
}

fn numbered_sections() {
    println!("## 1. One aggregation (merge + split + reset), per region\n");
    println!("| regions | ns per region | ratio to 1 k |");
    println!("|---:|---:|---:|");
    let base = aggregation_cost_per_region(1_000);
    for n in scaled(&[1_000u64, 10_000, 100_000, 1_000_000][..], &[1_000, 2_000]) {
        let n = *n;
        let c = if n == 1_000 {
            base
        } else {
            aggregation_cost_per_region(n)
        };
        println!("| {n} | {c:.1} | {:.2} |", c / base);
    }

    println!("\n## 2. One sampled address delivered by an access source\n");
    println!("| regions | ns per sampled address |");
    println!("|---:|---:|");
    for &n in scaled(&[1_000u64, 20_000, 1_000_000][..], &[1_000]) {
        println!("| {n} | {:.1} |", cost_per_sample(n));
    }

    let seconds = scaled(60, 1);
    println!(
        "\n## 3. Monitoring at 5 ms sampling, 100 ms aggregation ({seconds} s of virtual time)\n"
    );
    println!("| regions (min) | samples/s | core CPU share of one core | regions at the end |");
    println!("|---:|---:|---:|---:|");
    let mut share_20k = 0.0;
    let cases = scaled(
        &[(20_000u64, 1_000usize), (20_000, 10_000), (200_000, 1_000)][..],
        &[(1_000, 1_000), (1_000, 10_000), (2_000, 1_000)],
    );
    for (i, &(n, s)) in cases.iter().enumerate() {
        let (share, regions) = monitoring_share(n, s, seconds);
        if i == 0 {
            share_20k = share;
        }
        println!("| {n} | {s} | {:.3} % | {regions:.0} |", share * 100.0);
    }

    println!("\n## 4. One sampling interval (no aggregation in it)\n");
    println!(
        "| regions | samples in the interval | udamon ns per interval | per-region baseline ns | baseline / udamon |"
    );
    println!("|---:|---:|---:|---:|---:|");
    // Ten and a hundred times the regions of the first, then ten times its samples.
    let cases = scaled(
        [
            (20_000u64, 5usize),
            (200_000, 5),
            (2_000_000, 5),
            (20_000, 50),
        ],
        [(1_000, 5), (10_000, 5), (100_000, 5), (1_000, 50)],
    );
    let costs: Vec<f64> = cases.iter().map(|&(n, k)| interval_cost(n, k)).collect();
    let mut baselines = Vec::new();
    for ((n, k), c) in cases.iter().zip(&costs) {
        let b = baseline_interval_cost(*n);
        baselines.push(b);
        println!("| {n} | {k} | {c:.0} | {b:.0} | {:.0} |", b / c);
    }

    println!("\nRatios:");
    println!(
        "- core CPU share at 20 k regions, 1,000 samples/s: {:.3} % of one core; upstream's kdamond \
         spends 40-72 % on 20 k regions: udamon/upstream = 1/{:.0} (goal: under 1 %)",
        share_20k * 100.0,
        0.40 / share_20k
    );
    println!(
        "- interval cost, 200 k / 20 k regions, same samples: {:.2}; 2 M / 20 k: {:.2} \
         (1.0 = independent of the region count; the per-region baseline: {:.2} and {:.2})",
        costs[1] / costs[0],
        costs[2] / costs[0],
        baselines[1] / baselines[0],
        baselines[2] / baselines[0]
    );
    println!(
        "- interval cost, 50 / 5 samples, same regions: {:.2} (10 = proportional to the samples)",
        costs[3] / costs[0]
    );
}

fn estimate_section() {
    println!(
        "\n## 5. The working set at page resolution, per 400 ms window (live defaults, {} s)\n",
        scaled(120, 2)
    );
    println!(
        "| samples/s | touched pages | loop µs | record's estimates µs | serve's 3 horizons µs | estimates / loop | estimates' share of one core |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut worst_share: f64 = 0.0;
    let cases = scaled(
        &[(500usize, 6_000u64), (2_000, 6_000), (2_000, 45_000)][..],
        &[(500, 600)],
    );
    for &(rate, hot) in cases {
        let (lp, rec, srv) = estimate_cost(rate, hot, scaled(120, 2));
        let share = (rec + srv) / 400_000_000.0;
        worst_share = worst_share.max(share);
        println!(
            "| {rate} | {hot} | {:.1} | {:.1} | {:.1} | {:.2} | {:.3} % |",
            lp / 1e3,
            rec / 1e3,
            srv / 1e3,
            (rec + srv) / lp,
            share * 100.0
        );
    }

    println!(
        "\n- the working-set estimates (record and serve together) at the live defaults: at \
         most {:.3} % of one core",
        worst_share * 100.0
    );
}

/// What page granularity over `span_bytes` costs at 5 ms sampling, `aggr_us` windows and
/// `samples_per_s` samples (90 % in a hot tenth), over `seconds` of virtual time.
struct PageCost {
    regions: usize,
    /// CPU ns of the first count of samples into the regions, which builds the lookup index.
    first_count_ns: u64,
    /// Mean and most CPU ns of a later sampling interval that ends no window.
    interval_ns: f64,
    interval_max_ns: u64,
    /// CPU ns per sample of counting a later window's samples into the regions, timed on its
    /// own just before the window ends (where the window's pass would count them).
    count_ns_per_sample: f64,
    /// Mean CPU ns of a sampling interval that ends a window (merge, split, reset, history).
    window_ns: f64,
    /// CPU seconds per monitored second.
    share: f64,
    /// The heap's peak over the run, less what was in use before the context, per region.
    peak_bytes_per_region: f64,
}

fn page_granularity(span_bytes: u64, aggr_us: u64, samples_per_s: usize, seconds: u64) -> PageCost {
    let pages = span_bytes / PAGE;
    let span = AddrRange::new(1 << 40, (1 << 40) + span_bytes);
    let intervals = (seconds * 200) as usize;
    let per_interval = samples_per_s / 200;
    let window_intervals = (aggr_us / 5000) as usize;
    let mut ops = ReplayedSamples::new(span, per_interval, intervals, 6);
    let before = count_heap_from_now();
    let attrs = Attrs {
        sample_interval_us: 5000,
        aggr_interval_us: aggr_us,
        min_nr_regions: pages as u32,
        max_nr_regions: pages as u32,
        ..Attrs::default()
    };
    let mut ctx = Context::new(attrs, 42).expect("valid attributes");
    ctx.add_target(Target::new(None));
    ctx.start(&mut ops).expect("start");
    let (mut interval_cpu, mut interval_n, mut interval_max) = (0u64, 0u64, 0u64);
    let (mut window_cpu, mut window_n) = (0u64, 0u64);
    let (mut first_count_ns, mut count_cpu, mut counted) = (None, 0u64, 0usize);
    for i in 0..intervals {
        let ends_window = (i + 1) % window_intervals == 0;
        if ends_window {
            // The window's samples so far; those of its last interval are counted in its pass.
            let t0 = thread_cpu_ns();
            black_box(ctx.targets_mut());
            let cpu = thread_cpu_ns() - t0;
            if first_count_ns.is_none() {
                first_count_ns = Some(cpu);
            } else {
                count_cpu += cpu;
                counted += per_interval * (window_intervals - 1);
            }
        }
        let t0 = thread_cpu_ns();
        let flow = ctx
            .step(&mut ops, &mut VirtualClock, &mut NoCallbacks)
            .expect("replay cannot fail");
        let cpu = thread_cpu_ns() - t0;
        let _ = black_box(flow);
        if ends_window {
            assert!(
                ctx.at_window_start(),
                "a window of {window_intervals} intervals"
            );
            window_cpu += cpu;
            window_n += 1;
        } else {
            interval_cpu += cpu;
            interval_n += 1;
            interval_max = interval_max.max(cpu);
        }
    }
    let regions = ctx.nr_regions();
    let peak = (HEAP_PEAK.load(Ordering::Relaxed) - before).max(0);
    let first_count_ns = first_count_ns.unwrap_or(0);
    PageCost {
        regions,
        interval_ns: interval_cpu as f64 / interval_n.max(1) as f64,
        interval_max_ns: interval_max,
        count_ns_per_sample: count_cpu as f64 / counted.max(1) as f64,
        window_ns: window_cpu as f64 / window_n.max(1) as f64,
        first_count_ns,
        share: (first_count_ns + count_cpu + interval_cpu + window_cpu) as f64
            / (seconds as f64 * 1e9),
        peak_bytes_per_region: peak as f64 / regions.max(1) as f64,
    }
}

fn page_granularity_section() {
    let seconds = scaled(5, 1);
    println!(
        "\n## 6. Page granularity: one region a page, 5 ms sampling, 1,000 samples/s ({seconds} s \
         of virtual time)\n"
    );
    println!(
        "| monitored | regions | window | first count ms (builds the index) | ns per later \
         sampling interval (mean) | most | ns per sample counted at the window | ms per \
         window's last interval | share of one core | peak heap bytes per region |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // Smoke: past the 131,072 regions that a constant once capped monitoring at.
    let sizes = scaled(&[1u64 << 30, 4 << 30, 16 << 30][..], &[1 << 30]);
    let mut costs = Vec::new();
    for &bytes in sizes {
        for aggr_us in [100_000u64, 1_000_000] {
            let c = page_granularity(bytes, aggr_us, 1_000, seconds);
            println!(
                "| {} MiB | {} | {} ms | {:.1} | {:.0} | {} | {:.0} | {:.1} | {:.2} % | {:.1} |",
                bytes >> 20,
                c.regions,
                aggr_us / 1000,
                c.first_count_ns as f64 / 1e6,
                c.interval_ns,
                c.interval_max_ns,
                c.count_ns_per_sample,
                c.window_ns / 1e6,
                c.share * 100.0,
                c.peak_bytes_per_region
            );
            costs.push(c);
        }
    }
    let (first, last) = (&costs[0], &costs[costs.len() - 2]);
    println!(
        "\n- a sampling interval at {} regions / at {}: {:.2} (1.0 = flat in the monitored size; \
         goal: within 2x, each under 1 ms)",
        last.regions,
        first.regions,
        last.interval_ns / first.interval_ns
    );
    println!(
        "- a sample counted at the window, at {} regions / at {}: {:.2}",
        last.regions,
        first.regions,
        last.count_ns_per_sample / first.count_ns_per_sample
    );
    println!(
        "- a window at {} regions / at {}: {:.2} (the aggregation walks every region)",
        last.regions,
        first.regions,
        last.window_ns / first.window_ns
    );
}
