//! Fuzzing every kind of file udamon reads: records (udamon's, plain and compressed, and damo's
//! json, json_compressed, perf_script and legacy binary), workload (masim) files and scheme
//! files. A seeded mutator (so that a failure repeats) damages real inputs — flipped bits,
//! cut, repeated or inserted bytes, odd numbers in text — and every case must end without a
//! panic, with every error and every damage message on one line.
//!
//! Records and workloads go through the library (fast: thousands of cases), each record then
//! through the reports; a handful of each kind, and the scheme files (parsed only by the
//! binary), go through the `udamon` command. `UDAMON_FUZZ_SEED=N cargo test -p udamon --test
//! fuzz` explores other cases; a failure names the kind and case to repeat with that seed.

mod common;

use common::{sim_record, udamon};
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use udamon_record::model::{Event, EventKind, Frame, Header, RegionStat, Snapshot};
use udamon_record::{RecordWriter, WriterOptions, open_any};
use udamon_report::dist::DistOptions;
use udamon_report::heatmap::{self, HeatmapOptions};
use udamon_report::{access, info, nr_regions, raw, schemes};
use udamon_sim::Workload;

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);

/// The fixed seed of a test, or `UDAMON_FUZZ_SEED` to explore other cases.
fn seed(fixed: u64) -> u64 {
    std::env::var("UDAMON_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(fixed)
        | 1
}

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Numbers that find edges in text formats.
const ODD_NUMBERS: [&str; 10] = [
    "0",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "1e308",
    "NaN",
    "-0",
    "4294967296",
    "0.5",
];

/// `input` with one to four random mutations.
fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        let at = rng.below(len + 1);
        match rng.below(8) {
            0 if len > 0 => out[at.min(len - 1)] ^= 1 << rng.below(8),
            1 if len > 0 => out[at.min(len - 1)] = [0, 0xff, 0x7f, 0x80, b'\n', b'"'][rng.below(6)],
            2 => out.truncate(at),
            3 => {
                let end = (at + 1 + rng.below(64)).min(len);
                out.drain(at..end);
            }
            4 => {
                let end = (at + 1 + rng.below(256)).min(len);
                let copy = out[at..end].to_vec();
                out.splice(at..at, copy);
            }
            5 => {
                let bytes: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
                out.splice(at..at, bytes);
            }
            6 => {
                // A run of digits becomes an odd number.
                if let Some(start) = (at..len).find(|&i| out[i].is_ascii_digit()) {
                    let end = (start..len)
                        .find(|&i| !out[i].is_ascii_digit())
                        .unwrap_or(len);
                    let odd = ODD_NUMBERS[rng.below(ODD_NUMBERS.len())].as_bytes();
                    out.splice(start..end, odd.iter().copied());
                }
            }
            _ if len > 1 => {
                let (a, b) = (rng.below(len), rng.below(len));
                out.swap(a, b);
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out
}

fn assert_one_line(kind: &str, case: usize, message: &str) {
    assert!(
        !message.contains('\n') && !message.is_empty(),
        "{kind} case {case}: not one line: {message:?}"
    );
}

/// Runs `f`; a panic fails the test naming the case, which the seed makes repeatable.
fn no_panic<T>(kind: &str, case: usize, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| panic!("{kind} case {case} panicked (seeded: rerun to repeat)"))
}

/// Reads a record and runs the reports on it: no panic, every message one line.
fn read_record(kind: &str, case: usize, path: &Path) {
    let mut record = match open_any(path) {
        Ok(r) => r,
        Err(e) => return assert_one_line(kind, case, &e.to_string()),
    };
    let header = record.header().clone();
    let frames: Vec<Frame> = record.by_ref().collect();
    for d in record.damage() {
        assert_one_line(kind, case, &d.to_string());
    }
    let report_errors = [
        access::access(&header, frames.clone(), &access::AccessOptions::default())
            .err()
            .map(|e| e.to_string()),
        nr_regions::nr_regions(&header, frames.clone(), &DistOptions::default())
            .err()
            .map(|e| e.to_string()),
        schemes::schemes(&header, frames.clone(), &schemes::SchemesOptions::default())
            .err()
            .map(|e| e.to_string()),
        heatmap::heatmap(
            &header,
            || Ok::<_, std::io::Error>(frames.clone()),
            &HeatmapOptions {
                rows: 16,
                cols: 16,
                ..HeatmapOptions::image()
            },
        )
        .err()
        .map(|e| e.to_string()),
        raw::write_raw(&header, frames.clone(), std::io::sink())
            .err()
            .map(|e| e.to_string()),
    ];
    for e in report_errors.iter().flatten() {
        assert_one_line(kind, case, e);
    }
    let text = info::render_text(&info::info(&header, frames, Vec::new()));
    assert!(text.lines().count() > 3, "{kind} case {case}: {text}");
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../record/tests/data")
        .join(name)
}

/// A udamon record of a few snapshots and events, as the writer makes it.
fn udamon_record(compress: bool) -> Vec<u8> {
    let header: Header = serde_json::from_value(serde_json::json!({
        "format_version": 2, "udamon_version": "0.1.0",
        "access_source": {"name": "sim", "reason": "fuzz"},
        "intervals": {"sample_us": 5000, "aggr_us": 100000, "update_us": 1000000},
        "min_nr_regions": 10, "max_nr_regions": 1000, "seed": 1,
        "targets": [{"pid": 7, "cmdline": "w"}],
        "host": {"hostname": "h", "kernel": "k", "nr_cpus": 1, "page_size": 4096,
                 "mem_total_bytes": 1048576},
        "start_time_unix_ns": 1
    }))
    .unwrap();
    let mut w = RecordWriter::new(Vec::new(), "fuzz", &header, WriterOptions { compress }).unwrap();
    for i in 0..6u64 {
        let regions = (0..8)
            .map(|r| RegionStat {
                start: 0x1000_0000 + r * 0x10_0000,
                end: 0x1000_0000 + (r + 1) * 0x10_0000,
                nr_accesses: (r * i % 21) as u32,
                age: i as u32,
                raw_samples: 0,
                read_samples: 0,
                write_samples: 0,
                touched_bytes: None,
            })
            .collect();
        w.write_snapshot(&Snapshot {
            start_ns: i * 100_000_000,
            end_ns: (i + 1) * 100_000_000,
            sample_us: 5000,
            aggr_us: 100_000,
            targets: vec![udamon_record::model::TargetSnapshot { target: 0, regions }],
        })
        .unwrap();
        w.write_event(&Event {
            time_ns: (i + 1) * 100_000_000,
            kind: EventKind::Exec {
                target: 0,
                comm: format!("w{i}"),
                command: None,
            },
        })
        .unwrap();
    }
    w.write_event(&Event {
        time_ns: 600_000_000,
        kind: EventKind::Stopped {
            reason: "done".into(),
        },
    })
    .unwrap();
    w.finish().unwrap()
}

/// A short simulated record made by the command, with scheme statistics in it.
fn cli_record(dir: &Path, schemes: &Path) -> Vec<u8> {
    let schemes = schemes.to_str().expect("a UTF-8 temp path");
    let args = ["--duration", "1s", "--schemes", schemes];
    fs::read(sim_record(dir, "cli.data", "builtin:stairs", &args)).unwrap()
}

const SCHEMES: &str = r#"[{"action": "pageout",
  "access_pattern": {"sz_bytes": {"min": "4 KiB", "max": "max"},
                     "nr_accesses": {"min": "0 %", "max": "0 %"},
                     "age": {"min": "500 ms", "max": "max"}},
  "quotas": {"time_ms": "10 ms", "sz_bytes": "128 MiB", "reset_interval_ms": "1 s",
             "weights": {"sz_permil": 0, "nr_accesses_permil": 0, "age_permil": 1000}},
  "filters": [{"filter_type": "anon", "matching": true, "allow": false}]}]"#;

#[test]
fn damaged_records_and_workloads_never_panic_and_say_what_is_wrong_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let schemes = dir.path().join("s.json");
    fs::write(&schemes, SCHEMES).unwrap();
    let seeds: Vec<(&str, Vec<u8>, usize)> = vec![
        ("udamon record", udamon_record(false), 1200),
        ("compressed udamon record", udamon_record(true), 600),
        (
            "recorded udamon record",
            cli_record(dir.path(), &schemes),
            600,
        ),
        ("damo json", fs::read(data("min.json")).unwrap(), 600),
        (
            "damo json_compressed",
            fs::read(data("min.json_compressed")).unwrap(),
            300,
        ),
        (
            "damo perf_script",
            fs::read(data("min.perf_script")).unwrap(),
            600,
        ),
        ("damo binary", fs::read(data("min.record_v2")).unwrap(), 600),
    ];
    let mut rng = Rng(seed(0x05ee_d0f0_da40));
    let path = dir.path().join("case");
    let mut cases = 0;
    for (kind, seed, n) in &seeds {
        for case in 0..*n {
            let input = mutate(&mut rng, seed);
            fs::write(&path, &input).unwrap();
            no_panic(kind, case, || read_record(kind, case, &path));
            cases += 1;
        }
    }

    let workloads = ["stairs", "zigzag", "demo"].map(|name| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../sim/workloads")
            .join(format!("{name}.cfg"));
        fs::read(path).unwrap()
    });
    for (i, seed) in workloads.iter().cycle().take(1500).enumerate() {
        let input = mutate(&mut rng, seed);
        fs::write(&path, &input).unwrap();
        if let Err(e) = no_panic("workload", i, || Workload::from_file(&path)) {
            assert_one_line("workload", i, &e.to_string());
        }
        cases += 1;
    }
    assert!(cases >= 6000, "{cases} cases");
}

/// The command: one `udamon: error:` line for whatever damaged input it meets, never a panic.
#[test]
fn the_command_says_what_is_wrong_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(seed(0x0c11_f022));
    let good_schemes = dir.path().join("good.json");
    fs::write(&good_schemes, SCHEMES).unwrap();
    let record = udamon_record(false);
    let workload =
        fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/workloads/stairs.cfg"))
            .unwrap();
    let check = |what: &str, case: usize, out: std::process::Output| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked"),
            "{what} case {case} panicked: {stderr}"
        );
        if !out.status.success() {
            let errors: Vec<&str> = stderr
                .lines()
                .filter(|l| !l.starts_with("udamon: warning"))
                .collect();
            assert_eq!(errors.len(), 1, "{what} case {case}: {stderr}");
            assert!(
                errors[0].starts_with("udamon: error: "),
                "{what} case {case}: {stderr}"
            );
        }
    };
    for case in 0..12 {
        let input = dir.path().join(format!("r{case}.data"));
        fs::write(&input, mutate(&mut rng, &record)).unwrap();
        for args in [vec!["report", "info"], vec!["report", "heatmap"]] {
            check(
                "record",
                case,
                udamon().args(&args).arg(&input).output().unwrap(),
            );
        }
        let out = dir.path().join(format!("r{case}.json_compressed"));
        check(
            "convert",
            case,
            udamon()
                .arg("convert")
                .arg(&input)
                .arg("-o")
                .arg(&out)
                .output()
                .unwrap(),
        );
    }
    for case in 0..12 {
        let schemes = dir.path().join(format!("s{case}.json"));
        fs::write(&schemes, mutate(&mut rng, SCHEMES.as_bytes())).unwrap();
        let cfg = dir.path().join(format!("w{case}.cfg"));
        fs::write(&cfg, mutate(&mut rng, &workload)).unwrap();
        for (sim, schemes) in [
            (Path::new("builtin:stairs"), &schemes),
            (&cfg, &good_schemes),
        ] {
            check(
                "schemes or workload",
                case,
                udamon()
                    .args(["record", "--duration", "200ms", "--sim"])
                    .arg(sim)
                    .arg("--schemes")
                    .arg(schemes)
                    .arg("-o")
                    .arg(dir.path().join(format!("o{case}.data")))
                    .output()
                    .unwrap(),
            );
        }
    }
}
