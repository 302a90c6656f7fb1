//! Shared by the CLI tests: the udamon binary, building udamon-linux's C test workloads,
//! simulated records, and reading a record's reports as JSON.
#![allow(dead_code)] // each test binary uses a different subset

pub mod screen;
pub mod serve;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn udamon() -> Command {
    Command::cargo_bin("udamon").expect("the udamon binary is built")
}

/// `udamon`, given more of the CPU than the machine's other work when run as root (nice -10,
/// for it and the workload it starts): samples come with the CPU time a workload gets, so the
/// tests that compare them with what the workload did hold on a busy machine this way.
pub fn favoured_udamon() -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(udamon().get_program());
    if is_root() {
        // SAFETY: setpriority is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpriority(libc::PRIO_PROCESS, 0, -10);
                Ok(())
            });
        }
    }
    Command::from_std(cmd)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Builds udamon-linux's test workload `NAME.c` (see its source for what it does) into the
/// target's temporary directory; the binary is renamed into place so that test binaries
/// building it at the same time never run a half-written one.
/// udamon-linux's `patterns` workload (the access patterns of the live tests), built once per
/// test binary.
pub fn patterns() -> &'static Path {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| build_workload("patterns"))
}

pub fn build_workload(name: &str) -> PathBuf {
    build_workload_as(name, "cli", &["-O2"])
}

/// [`build_workload`] with the compiler's `flags`, into `NAME-SUFFIX`.
pub fn build_workload_as(name: &str, suffix: &str, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../linux/tests/workload")
        .join(format!("{name}.c"));
    build_c(&src, &format!("{name}-{suffix}"), flags)
}

/// Builds the benchmarks' workload `bench/workloads/NAME.c` (see its source), as
/// [`build_workload`] does udamon-linux's.
pub fn build_bench_workload(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/workloads")
        .join(format!("{name}.c"));
    build_c(&src, &format!("{name}-cli"), &["-O2"])
}

/// Compiles `src` with `flags` into `out` in the target's temporary directory.
fn build_c(src: &Path, out: &str, flags: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out = dir.join(out);
    // Tests of one binary build the same workload at once: each into its own file, then
    // renamed over the others' (atomically: a test never runs a half-written binary).
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let build = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tmp = out.clone().into_os_string();
    tmp.push(format!(".{}.{build}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let status = std::process::Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(src)
        .status()
        .expect("a C compiler (cc) builds the test workload");
    assert!(status.success(), "building {} failed", src.display());
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// `udamon record --sim SIM ARGS -o DIR/NAME`, which must succeed; the record's path.
pub fn sim_record(dir: &Path, name: &str, sim: &str, args: &[&str]) -> PathBuf {
    let out = dir.join(name);
    udamon()
        .args(["record", "--sim", sim])
        .args(args)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    out
}

/// `udamon report ARGS FILE`'s output, which must succeed.
pub fn report_text(args: &[&str], file: &Path) -> String {
    let out = udamon()
        .arg("report")
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `udamon report ARGS FILE --json`, parsed.
pub fn report_json(args: &[&str], file: &Path) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&report_text(&all, file)).unwrap()
}

/// The snapshots of `udamon report raw ARGS FILE`, parsed.
pub fn raw_snapshots(args: &[&str], file: &Path) -> Vec<Value> {
    let mut all = vec!["raw"];
    all.extend_from_slice(args);
    report_text(&all, file)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["frame"] == "snapshot")
        .collect()
}

/// `udamon report info --json FILE`.
pub fn info(file: &Path) -> Value {
    report_json(&["info"], file)
}

/// One sample of a Prometheus text exposition.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a Prometheus text exposition, parsed by a Prometheus parser
/// (`prometheus-parse`), which fails the test on text it cannot read.
pub fn parse_prometheus(text: &str) -> Vec<Sample> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("a valid exposition");
    scrape
        .samples
        .into_iter()
        .map(|s| Sample {
            name: s.metric,
            labels: s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            value: match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            },
        })
        .collect()
}

/// The `area NAME START END` line (hex addresses) a test workload wrote to `file`.
pub fn workload_area(file: &Path, name: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(file).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("area {name} ")))
        .unwrap_or_else(|| panic!("no area {name} in {text}"));
    let f: Vec<&str> = line.split(' ').collect();
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    (hex(f[2]), hex(f[3]))
}

/// An area as the two arguments of `--address-range`.
pub fn range_args((start, end): (u64, u64)) -> (String, String) {
    (format!("{start:#x}"), format!("{end:#x}"))
}

/// The one line of error a failed command printed (it must have failed, and said no more).
pub fn one_line_error(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "it succeeded");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}
