//! Shared by the DAMOS action tests: the `schemes.c` workload (cold and hot, file-backed and
//! anonymous memory), and a monitoring run of it with schemes through the library (attach,
//! context, schemes), with the workload's own residency counts before and after.
#![allow(dead_code)] // each test binary uses a different subset

use crate::workload::build_c;
use std::io::{BufRead, BufReader, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use udamon_core::damos::{AccessPattern, Action, Scheme, SchemeStats};
use udamon_core::{Callbacks, Context, Flow};
use udamon_linux::actions::check_action;
use udamon_linux::metrics::ProcMetrics;
use udamon_linux::perf::{AccessSource, CpuClock, SamplerConfig};
use udamon_linux::vaddr::{self, VaddrEvent, monotonic_us, sampled_attrs};

pub const MIB: u64 = 1 << 20;

/// The tests of one binary run one at a time: each keeps a CPU busy.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// The workload binary (see schemes.c).
fn build() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| build_c("schemes", &["-O1"]))
}

/// A file of `mib` MiB on disk (not tmpfs: shmem pages would need swap), written and synced
/// so that its page cache is clean and can be dropped.
fn data_file(dir: &Path, name: &str, mib: u64) -> PathBuf {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0x5au8; MIB as usize];
    for _ in 0..mib {
        f.write_all(&chunk).unwrap();
    }
    f.sync_all().unwrap();
    path
}

/// Pages in memory per area, as the workload's mincore sees them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resident {
    pub cold_file: u64,
    pub hot_file: u64,
    pub hot_anon: u64,
    pub cold_anon: u64,
}

/// The running workload.
pub struct Workload {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// (name, start, len) of each area.
    pub areas: Vec<(String, u64, u64)>,
    _dir: tempfile::TempDir,
}

impl Workload {
    /// Starts the workload with a 64 MiB cold file, an 8 MiB hot file and 16 MiB anonymous
    /// areas, running `seconds`.
    pub fn start(seconds: u32) -> Workload {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let cold = data_file(dir.path(), "cold", 64);
        let hot = data_file(dir.path(), "hot", 8);
        let mut child = Command::new(build())
            .arg(&cold)
            .arg(&hot)
            .arg(seconds.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut areas = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "workload ended early"
            );
            let f: Vec<&str> = line.split_whitespace().collect();
            match f[..] {
                ["ready"] => break,
                [name, addr, len] => {
                    let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
                    areas.push((name.to_string(), addr, len.parse().unwrap()));
                }
                _ => panic!("unexpected workload output {line:?}"),
            }
        }
        Workload {
            child,
            stdin,
            stdout,
            areas,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn area(&self, name: &str) -> (u64, u64) {
        let a = self.areas.iter().find(|a| a.0 == name).unwrap();
        (a.1, a.1 + a.2)
    }

    pub fn resident(&mut self) -> Resident {
        self.ask(b"count\n")
    }

    /// Reads the cold file again, page by page, and then counts.
    pub fn reread_cold_file(&mut self) -> Resident {
        self.ask(b"reread\n")
    }

    fn ask(&mut self, line: &[u8]) -> Resident {
        self.stdin.write_all(line).unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let n: Vec<u64> = line
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        assert_eq!(n.len(), 4, "{line:?}");
        Resident {
            cold_file: n[0],
            hot_file: n[1],
            hot_anon: n[2],
            cold_anon: n[3],
        }
    }

    /// `AnonHugePages` of the mapping that contains `addr`, bytes (from smaps).
    pub fn anon_huge_bytes(&self, addr: u64) -> u64 {
        let smaps = std::fs::read_to_string(format!("/proc/{}/smaps", self.pid())).unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((s, e)) = range.split_once('-')
                && let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16))
            {
                inside = s <= addr && addr < e;
            } else if inside && let Some(v) = line.strip_prefix("AnonHugePages:") {
                return v
                    .trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap()
                    * 1024;
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scheme for regions of any size with `nr_accesses` in `[min, max]` (sampling intervals
/// per aggregation) and at least `min_age` aggregation intervals old.
pub fn scheme(action: Action, nr_accesses: (u32, u32), min_age: u32) -> Scheme {
    Scheme::new(
        AccessPattern {
            min_sz_region: 0,
            max_sz_region: u64::MAX,
            min_nr_accesses: nr_accesses.0,
            max_nr_accesses: nr_accesses.1,
            min_age_region: min_age,
            max_age_region: u32::MAX,
        },
        action,
    )
}

/// Stops after a while, keeping the first scheme's statistics after every aggregation.
struct Run {
    until_us: u64,
    stats: Vec<(u64, SchemeStats)>,
}

impl Callbacks for Run {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if let Some(s) = ctx.schemes().first() {
            self.stats.push((ctx.now_us(), s.stats));
        }
        if ctx.now_us() >= self.until_us {
            Ok(ControlFlow::Break(()))
        } else {
            Ok(ControlFlow::Continue(()))
        }
    }
}

/// What a monitoring run with schemes saw.
pub struct Outcome {
    /// The first scheme's statistics after each aggregation, with the time (µs).
    pub stats: Vec<(u64, SchemeStats)>,
    pub notes: Vec<String>,
    /// The memory the operations reported for the target at the end.
    pub memory: Option<udamon_core::TargetMemory>,
}

impl Outcome {
    pub fn last(&self) -> SchemeStats {
        self.stats.last().map(|s| s.1).unwrap_or_default()
    }
}

/// Attaches to the workload and monitors it for `seconds` with `schemes`.
pub fn monitor(w: &Workload, schemes: Vec<Scheme>, seconds: f64, dry_run: bool) -> Outcome {
    let config = SamplerConfig {
        source: AccessSource::CpuClock(CpuClock::default()),
        ..SamplerConfig::default()
    };
    let (mut ops, mut clock) = vaddr::attach(&[w.pid()], &config).unwrap();
    ops.set_dry_run(dry_run);
    let mut ctx = Context::new(sampled_attrs(&config.source), 7).unwrap();
    for t in ops.targets() {
        ctx.add_target(t);
    }
    for s in schemes {
        check_action(s.action).unwrap();
        ctx.add_scheme(s).unwrap();
    }
    ctx.set_metric_source(Box::new(ProcMetrics::new(ops.pids())));
    let start = monotonic_us();
    ctx.set_start_time_us(start);
    let mut run = Run {
        until_us: start + (seconds * 1e6) as u64,
        stats: Vec::new(),
    };
    ctx.run(&mut ops, &mut clock, &mut run).unwrap();
    let notes = ops
        .take_events()
        .into_iter()
        .filter_map(VaddrEvent::into_note)
        .collect();
    Outcome {
        stats: run.stats,
        notes,
        memory: ctx.target_memory(0),
    }
}

/// Whether the system has swap (anonymous pageout depends on it).
pub fn has_swap() -> bool {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    udamon_linux::metrics::meminfo_bytes(&text, "SwapTotal").unwrap_or(0) > 0
}
