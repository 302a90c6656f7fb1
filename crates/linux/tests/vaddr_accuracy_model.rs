//! The vaddr accuracy workloads (static, stairs, zigzag) under a model of address sampling:
//! many address-space layouts in about a second, deterministic. The live tests
//! (`vaddr_accuracy.rs`) run each workload once per source in real time; here the default
//! attributes for sampled sources and the core's rules for them
//! (`adjust::split_at_sampled_extents` and its recent-samples evidence) meet the same pass
//! criteria over 40 layouts, so that a change that helps one layout and hurts another shows.
//!
//! The model follows what the live runs show: a process with a program and heap (55-950 MiB
//! apart under ASLR, which sets the merge size limit), the workload's mapping below a few MiB of
//! libraries, a stack; a sample every tick (250 Hz) or, for cpuclock, at 85 % of its nominal
//! rate with jitter (what the cpu-clock event delivers on the test VM), each at a random
//! address of the memory the workload touches at that moment, now and then (1 in 1,000) in the
//! libraries. The workload first fills its mapping (3 GB/s), as the live one does, then runs
//! its pattern; snapshots count from then.

#[path = "workload/snapshots.rs"]
mod snapshots;

use snapshots::{Collect, MIB, Snap, median};
use udamon_core::layout::{initial_ranges, set_regions};
use udamon_core::{
    AddrRange, Context, Operations, OpsError, Prng, SampledAccess, Target, VirtualClock,
};
use udamon_linux::perf::{AccessSource, CpuClock, Rate};
use udamon_linux::vaddr::{DEFAULT_CPUCLOCK_HZ, TICK_HZ, sampled_attrs};

const PAGE: u64 = 4096;
const LAYOUTS: u64 = 40;

#[derive(Clone, Copy)]
enum Pattern {
    /// A 64 MiB hot area, then 256 MiB warm with 30 % of the samples (warm accesses miss the
    /// caches more often, so they take more time per access than the hot ones), then 704 MiB
    /// never touched.
    Static,
    /// Ten 10 MiB steps, 3 s each.
    Stairs,
    /// Two 100 MiB areas, alternating every 1.5 s, for 6 s.
    Zigzag,
}

impl Pattern {
    fn mapping_size(self) -> u64 {
        match self {
            Pattern::Static => 1024 * MIB,
            Pattern::Stairs => 100 * MIB,
            Pattern::Zigzag => 200 * MIB,
        }
    }

    fn duration_us(self) -> u64 {
        match self {
            Pattern::Static => 20_000_000,
            Pattern::Stairs => 30_000_000,
            Pattern::Zigzag => 6_000_000,
        }
    }

    /// The offset in the mapping of a sample at `t_us` into the pattern.
    fn sample(self, t_us: u64, rng: &mut Prng) -> u64 {
        match self {
            Pattern::Static if rng.unit() < 0.7 => rng.in_range(0, 64 * MIB),
            Pattern::Static => 64 * MIB + rng.in_range(0, 256 * MIB),
            Pattern::Stairs => (t_us / 3_000_000).min(9) * 10 * MIB + rng.in_range(0, 10 * MIB),
            Pattern::Zigzag => (t_us / 1_500_000) % 2 * 100 * MIB + rng.in_range(0, 100 * MIB),
        }
    }
}

#[derive(Clone, Copy)]
enum Sampler {
    Tick,
    CpuClock,
}

impl Sampler {
    /// Microseconds to the next sample.
    fn period_us(self, rng: &mut Prng) -> f64 {
        match self {
            Sampler::Tick => 1e6 / TICK_HZ as f64,
            Sampler::CpuClock => 1e6 / (0.85 * DEFAULT_CPUCLOCK_HZ as f64) * (0.5 + rng.unit()),
        }
    }

    fn source(self) -> AccessSource {
        match self {
            Sampler::Tick => AccessSource::Tick,
            Sampler::CpuClock => AccessSource::CpuClock(CpuClock {
                rate: Rate::Frequency(DEFAULT_CPUCLOCK_HZ),
                ..CpuClock::default()
            }),
        }
    }
}

/// A simulated process: its mappings, and the samples its workload leaves.
struct SampledProcess {
    pattern: Pattern,
    sampler: Sampler,
    mappings: Vec<AddrRange>,
    mapping: u64,
    libs: AddrRange,
    fill_us: u64,
    end_us: u64,
    next_sample_us: f64,
    rng: Prng,
}

impl SampledProcess {
    fn new(pattern: Pattern, sampler: Sampler, layout: u64) -> Self {
        let mut rng = Prng::seeded(layout);
        let program = 0x5555_0000_0000 + rng.in_range(0, 1 << 16) * PAGE;
        let heap = program + 2 * MIB + (55 + rng.in_range(0, 900)) * MIB;
        let libs_end = 0x7f00_0000_0000 + rng.in_range(0, 1 << 16) * PAGE;
        let libs = AddrRange::new(libs_end - 6 * MIB, libs_end);
        let mapping = libs.start - pattern.mapping_size();
        let stack = 0x7ffd_0000_0000 + rng.in_range(0, 1 << 16) * PAGE;
        let fill_us = pattern.mapping_size() * 1_000_000 / (3000 * MIB);
        SampledProcess {
            pattern,
            sampler,
            mappings: vec![
                AddrRange::new(program, program + 2 * MIB),
                AddrRange::new(heap, heap + 33 * PAGE),
                AddrRange::new(mapping, libs.start),
                libs,
                AddrRange::new(stack, stack + 33 * PAGE),
            ],
            mapping,
            libs,
            fill_us,
            end_us: fill_us + pattern.duration_us(),
            next_sample_us: 0.0,
            rng,
        }
    }

    fn sample_at(&mut self, t_us: u64) -> u64 {
        let size = self.pattern.mapping_size();
        if self.rng.unit() < 0.001 {
            self.rng.in_range(self.libs.start, self.libs.end)
        } else if t_us < self.fill_us {
            self.mapping + size * t_us / self.fill_us
        } else {
            self.mapping + self.pattern.sample(t_us - self.fill_us, &mut self.rng)
        }
    }
}

impl Operations for SampledProcess {
    fn name(&self) -> &str {
        "sampled-process"
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        ctx.add_target(Target::new(Some(1)));
        let ranges = initial_ranges(&self.mappings, PAGE);
        set_regions(&mut ctx.targets_mut()[0].regions, &ranges, PAGE)?;
        Ok(())
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        let end_us = ctx.interval_us().1 as f64;
        let mut addrs = Vec::new();
        while self.next_sample_us < end_us {
            addrs.push(SampledAccess::at(
                self.sample_at(self.next_sample_us as u64),
            ));
            self.next_sample_us += self.sampler.period_us(&mut self.rng);
        }
        ctx.record_sampled_accesses(0, &mut addrs);
    }

    fn target_valid(&self, ctx: &Context, _target: usize) -> bool {
        ctx.now_us() < self.end_us
    }
}

/// Runs `pattern` on `layout` and returns the mapping's start and the snapshots of the windows
/// that lie within the pattern (after the fill).
fn run(pattern: Pattern, sampler: Sampler, layout: u64) -> (u64, Vec<Snap>) {
    let mut process = SampledProcess::new(pattern, sampler, layout);
    let mut collect = Collect::default();
    let mut ctx = Context::new(sampled_attrs(&sampler.source()), layout).unwrap();
    ctx.start(&mut process).unwrap();
    ctx.run(&mut process, &mut VirtualClock, &mut collect)
        .unwrap();
    let (from, to) = (process.fill_us, process.end_us);
    let during = collect.0.into_iter();
    let during = during.filter(|s| s.start_us >= from && s.end_us <= to);
    (process.mapping, during.collect())
}

const SAMPLERS: [(&str, Sampler); 2] = [("tick", Sampler::Tick), ("cpuclock", Sampler::CpuClock)];

#[test]
fn never_touched_memory_is_reported_idle_in_99_percent_of_byte_snapshots() {
    let mut failures = Vec::new();
    for (name, sampler) in SAMPLERS {
        let mut shares = Vec::new();
        for layout in 0..LAYOUTS {
            let (at, snaps) = run(Pattern::Static, sampler, layout);
            let area = |from: u64, to: u64| AddrRange::new(at + from * MIB, at + to * MIB);
            let (hot, warm, cold) = (area(0, 64), area(64, 320), area(320, 1024));
            let accessed: u64 = snaps.iter().map(|s| s.accessed_bytes_in(cold)).sum();
            let share = accessed as f64 / (cold.size() as f64 * snaps.len() as f64);
            shares.push(share * 100.0);
            if share > 0.01 {
                failures.push(format!("{name} layout {layout}: {:.2} %", share * 100.0));
            }
            let mean = |a| snaps.iter().map(|s| s.mean_accesses_in(a)).sum::<f64>();
            let (h, w, c) = (mean(hot), mean(warm), mean(cold));
            if !(h > w && w > c) {
                failures.push(format!("{name} layout {layout}: hot {h} warm {w} cold {c}"));
            }
        }
        let worst = shares.iter().cloned().fold(0.0, f64::max);
        let mean = shares.iter().sum::<f64>() / shares.len() as f64;
        eprintln!(
            "{name}: never-touched memory reported accessed in {mean:.3} % of byte-snapshots \
             on average over {LAYOUTS} layouts, at worst {worst:.3} %"
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn working_sets_of_stairs_and_zigzag_are_one_area() {
    let mut failures = Vec::new();
    for (name, sampler) in SAMPLERS {
        for (pattern, label, band) in [
            (Pattern::Stairs, "stairs", 9 * MIB..=11 * MIB),
            (Pattern::Zigzag, "zigzag", 90 * MIB..=110 * MIB),
        ] {
            let wss_median = |layout| {
                median(
                    run(pattern, sampler, layout)
                        .1
                        .iter()
                        .map(Snap::wss)
                        .collect(),
                )
            };
            let medians: Vec<u64> = (0..LAYOUTS / 2).map(wss_median).collect();
            let mib = |m: &u64| format!("{:.1}", *m as f64 / MIB as f64);
            let shown: Vec<String> = medians.iter().map(mib).collect();
            eprintln!(
                "{name} {label}: median working sets (MiB) {}",
                shown.join(" ")
            );
            if let Some(m) = medians.iter().find(|m| !band.contains(m)) {
                failures.push(format!("{name} {label}: median working set {} MiB", mib(m)));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
