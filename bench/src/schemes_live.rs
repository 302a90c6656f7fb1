//! DAMOS on live processes, side by side in one run:
//!
//! - collapse: a TLB-heavy workload (random 8-byte reads over 1 GiB of anonymous memory, a
//!   fixed number of them) without udamon, with udamon monitoring only, and with a `collapse`
//!   scheme on hot memory; the workload times its own read phase.
//! - pageout: a file-cache-heavy workload (maps a 512 MiB file and reads it once, then reads a
//!   32 MiB hot part over and over, a fixed number of times) without udamon, with monitoring
//!   only, and with a `prcl` scheme (pageout of memory with no access for at least 2 s); the
//!   mean and final resident set (`/proc/PID/statm`, every 100 ms) over the work phase and the
//!   work phase's runtime.
//!
//! The workloads are this binary, re-executed (`schemes-live tlb-work ...`), so that nothing
//! but the bench needs building. udamon monitors through the library with cpu-clock sampling
//! at its defaults (500 Hz, 5 ms sampling, 400 ms aggregation, 20..60 regions); scheme
//! thresholds are set in time and in shares of a window, so that they follow those defaults.
//!
//! Run: `cargo run --release -p udamon-bench --bin schemes-live` (as root: `process_madvise`
//! on another process needs CAP_SYS_NICE).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use udamon_core::damos::{AccessPattern, Action, Scheme};
use udamon_core::{Attrs, Context, NoCallbacks};
use udamon_linux::actions::check_action;
use udamon_linux::metrics::ProcMetrics;
use udamon_linux::perf::{AccessSource, CpuClock, SamplerConfig};
use udamon_linux::vaddr::{self, VaddrEvent, monotonic_us, sampled_attrs};

const MIB: u64 = 1 << 20;
/// udamon's access source here: cpu-clock sampling at its default rate.
fn source() -> AccessSource {
    AccessSource::CpuClock(CpuClock::default())
}

/// The monitoring attributes: the defaults for [`source`].
fn attrs() -> Attrs {
    sampled_attrs(&source())
}
const TLB_MIB: u64 = 1024;
const TLB_READS: u64 = 300_000_000;
const FILE_MIB: u64 = 512;
const HOT_MIB: u64 = 32;
const HOT_PASSES: u64 = 8_000;

fn now_s() -> f64 {
    monotonic_us() as f64 / 1e6
}

/// Anonymous memory, 2 MiB aligned, written once.
fn anon(bytes: u64) -> &'static mut [u64] {
    let len = (bytes + 2 * MIB) as usize;
    // SAFETY: a fresh private anonymous mapping, kept until exit.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let aligned = (p as u64).div_ceil(2 * MIB) * 2 * MIB;
    // SAFETY: inside the mapping, which outlives the program's use of it.
    let s = unsafe { std::slice::from_raw_parts_mut(aligned as *mut u64, (bytes / 8) as usize) };
    for (i, w) in s.iter_mut().enumerate() {
        *w = i as u64;
    }
    s
}

/// The TLB-heavy workload: writes "seconds" of its read phase to `out`.
fn tlb_work(out: &Path) {
    let mem = anon(TLB_MIB * MIB);
    let n = mem.len() as u64;
    let t0 = now_s();
    let (mut x, mut sum) = (0x9e37_79b9_7f4a_7c15u64, 0u64);
    for _ in 0..TLB_READS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum = sum.wrapping_add(mem[(x % n) as usize]);
    }
    std::fs::write(out, format!("{} {sum}\n", now_s() - t0)).unwrap();
}

/// The file-cache-heavy workload: writes "start end" of its work phase to `out`.
fn file_work(file: &Path, out: &Path) {
    let f = std::fs::File::open(file).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: a private read-only mapping of a file nobody writes meanwhile.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: the mapping above.
    let data = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    let mut sum = 0u64;
    for i in (0..len).step_by(4096) {
        sum += data[i] as u64;
    }
    let t0 = now_s();
    let hot = &data[..(HOT_MIB * MIB) as usize];
    for _ in 0..HOT_PASSES {
        for i in (0..hot.len()).step_by(64) {
            sum += hot[i] as u64;
        }
    }
    std::fs::write(out, format!("{t0} {} {sum}\n", now_s())).unwrap();
}

/// How a workload is run.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Alone,
    Monitored,
    Scheme,
}

impl Mode {
    fn name(self, scheme: &str) -> String {
        match self {
            Mode::Alone => "without udamon".into(),
            Mode::Monitored => "udamon, monitoring only".into(),
            Mode::Scheme => format!("udamon + {scheme}"),
        }
    }
}

/// Resident bytes of `pid` every 100 ms until `stop`, with the time (s).
fn watch_rss(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(f64, u64)>> {
    std::thread::spawn(move || {
        let mut m = ProcMetrics::new(vec![pid]);
        let mut out = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if let Some(rss) = udamon_core::damos::MetricSource::target_rss(&mut m, 0) {
                out.push((now_s(), rss));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        out
    })
}

/// What a run observed: resident samples, bytes the scheme applied to, udamon's notes.
struct Run {
    rss: Vec<(f64, u64)>,
    applied: u64,
    notes: Vec<String>,
}

/// Runs this binary with `args` in `mode`.
fn run(args: &[String], mode: Mode, scheme: Option<Scheme>) -> Run {
    let exe = std::env::current_exe().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    if mode == Mode::Alone {
        let mut child = std::process::Command::new(&exe).args(args).spawn().unwrap();
        let w = watch_rss(child.id(), Arc::clone(&stop));
        child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        return Run {
            rss: w.join().unwrap(),
            applied: 0,
            notes: Vec::new(),
        };
    }
    let config = SamplerConfig {
        source: source(),
        ..SamplerConfig::default()
    };
    let (mut ops, mut clock) = vaddr::spawn(&exe, args, &config).unwrap();
    let w = watch_rss(ops.pids()[0], Arc::clone(&stop));
    let mut ctx = Context::new(attrs(), 1).unwrap();
    for t in ops.targets() {
        ctx.add_target(t);
    }
    if let (Mode::Scheme, Some(s)) = (mode, scheme) {
        check_action(s.action).unwrap();
        ctx.add_scheme(s).unwrap();
    }
    ctx.set_metric_source(Box::new(ProcMetrics::new(ops.pids())));
    ctx.set_start_time_us(monotonic_us());
    ctx.run(&mut ops, &mut clock, &mut NoCallbacks).unwrap();
    stop.store(true, Ordering::Relaxed);
    let notes = ops
        .take_events()
        .into_iter()
        .filter_map(VaddrEvent::into_note)
        .collect();
    Run {
        rss: w.join().unwrap(),
        applied: ctx.schemes().first().map_or(0, |s| s.stats.sz_applied),
        notes,
    }
}

fn pattern(nr: (u32, u32), min_age: u32) -> AccessPattern {
    AccessPattern {
        min_sz_region: 0,
        max_sz_region: u64::MAX,
        min_nr_accesses: nr.0,
        max_nr_accesses: nr.1,
        min_age_region: min_age,
        max_age_region: u32::MAX,
    }
}

fn collapse_table(dir: &Path) {
    let out = dir.join("tlb.out");
    let args = vec!["tlb-work".to_string(), out.display().to_string()];
    // Accessed in at least an eighth of a window's sampling intervals, checked every second.
    let per_window = attrs().max_nr_accesses();
    let hot = per_window / 8;
    let mut s = Scheme::new(pattern((hot, u32::MAX), 0), Action::Collapse);
    s.apply_interval_us = 1_000_000;
    println!(
        "### collapse: {TLB_READS} random 8-byte reads over {TLB_MIB} MiB of anonymous memory\n"
    );
    println!("| run | read phase (s) | vs without udamon | collapsed (MiB) |");
    println!("|---|---:|---:|---:|");
    let mut base = 0.0;
    for mode in [Mode::Alone, Mode::Monitored, Mode::Scheme] {
        let r = run(&args, mode, Some(s.clone()));
        let text = std::fs::read_to_string(&out).unwrap();
        let secs: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
        if mode == Mode::Alone {
            base = secs;
        }
        println!(
            "| {} | {secs:.2} | {:.2} | {} |",
            mode.name(&format!("collapse (nr_accesses ≥ {hot}/{per_window})")),
            secs / base,
            r.applied / MIB
        );
        for n in r.notes.iter().take(2) {
            eprintln!("note: {n}");
        }
    }
    println!();
}

fn pageout_table(dir: &Path) {
    let file = dir.join("data");
    {
        let mut f = std::fs::File::create(&file).unwrap();
        let chunk = vec![0x5au8; MIB as usize];
        for _ in 0..FILE_MIB {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    let out = dir.join("file.out");
    let args = vec![
        "file-work".to_string(),
        file.display().to_string(),
        out.display().to_string(),
    ];
    // prcl: no access for at least 2 s.
    let windows = (2_000_000 / attrs().aggr_interval_us) as u32;
    let s = Scheme::new(pattern((0, 0), windows), Action::Pageout);
    println!(
        "### pageout: read a {FILE_MIB} MiB file once, then {HOT_PASSES} passes over {HOT_MIB} MiB of it\n"
    );
    println!(
        "| run | work phase (s) | vs without udamon | mean resident (MiB) | final resident (MiB) | saved, mean | paged out (MiB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let (mut base_t, mut base_rss) = (0.0, 0.0);
    for mode in [Mode::Alone, Mode::Monitored, Mode::Scheme] {
        let r = run(&args, mode, Some(s.clone()));
        let text = std::fs::read_to_string(&out).unwrap();
        let f: Vec<f64> = text
            .split_whitespace()
            .take(2)
            .map(|x| x.parse().unwrap())
            .collect();
        let (t0, t1) = (f[0], f[1]);
        let phase: Vec<u64> = r
            .rss
            .iter()
            .filter(|(t, _)| (t0..=t1).contains(t))
            .map(|&(_, b)| b)
            .collect();
        let mean = phase.iter().sum::<u64>() as f64 / phase.len().max(1) as f64 / MIB as f64;
        let last = phase.last().copied().unwrap_or(0) as f64 / MIB as f64;
        if mode == Mode::Alone {
            (base_t, base_rss) = (t1 - t0, mean);
        }
        println!(
            "| {} | {:.2} | {:.2} | {mean:.0} | {last:.0} | {:.0} % | {} |",
            mode.name("prcl (no access ≥ 2 s)"),
            t1 - t0,
            (t1 - t0) / base_t,
            (1.0 - mean / base_rss) * 100.0,
            r.applied / MIB
        );
        for n in r.notes.iter().take(2) {
            eprintln!("note: {n}");
        }
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("tlb-work") => return tlb_work(Path::new(&args[2])),
        Some("file-work") => return file_work(Path::new(&args[2]), Path::new(&args[3])),
        _ => {}
    }
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    collapse_table(dir.path());
    pageout_table(dir.path());
}
