//! `udamon record` on process trees, end to end: `record -- CMD` monitors every process the
//! command forks (each a target of its own, with its own regions, exec and exit), `--pid PID
//! --children` the running descendants too, and the reports name each target by pid and
//! command.

mod common;
#[path = "../../record/tests/common/skip.rs"]
mod skip;

use common::{build_workload, info, is_root, raw_snapshots, udamon};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The tree workload of udamon-linux's tests: a parent forking two children that write over
/// areas of their own, one after re-executing itself (see tree.c).
fn tree() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| build_workload("tree"))
}

/// The children's areas the workload reported: pid → (start, end).
fn areas(report: &Path) -> BTreeMap<u64, (u64, u64)> {
    let text = std::fs::read_to_string(report).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() == 4 && f[0] == "area").then(|| {
                let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
                (f[1].parse().unwrap(), (hex(f[2]), hex(f[3])))
            })
        })
        .collect()
}

/// The record's snapshots, from `udamon report raw`.
fn snapshots(record: &Path) -> Vec<Value> {
    raw_snapshots(&[], record)
}

/// Asserts that the record has three targets (the parent first) whose children each saw most
/// of their own area accessed in at least two snapshots, and that every process's exit is
/// recorded. Returns `report info`.
fn assert_tree_recorded(record: &Path, report: &Path) -> Value {
    let info = info(record);
    let targets = info["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 3, "{info:#}");
    for t in &targets[1..] {
        assert_eq!(t["parent"], 0, "forked by the parent: {t}");
    }
    for t in targets {
        assert!(t["ended_ns"].is_u64(), "every process's exit: {t}");
    }
    let areas = areas(report);
    assert_eq!(areas.len(), 2, "both children reported their areas");
    let snapshots = snapshots(record);
    for (pid, (start, end)) in areas {
        let t = targets
            .iter()
            .position(|t| t["pid"] == pid)
            .unwrap_or_else(|| panic!("no target for child {pid}: {info:#}"));
        let accessed: Vec<u64> = snapshots
            .iter()
            .filter_map(|s| {
                let target = s["targets"].as_array()?.iter().find(|x| x["target"] == t)?;
                let bytes = target["regions"]
                    .as_array()?
                    .iter()
                    .filter(|r| r["nr_accesses"].as_u64() > Some(0));
                Some(
                    bytes
                        .map(|r| {
                            let (s, e) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
                            e.min(end).saturating_sub(s.max(start))
                        })
                        .sum::<u64>(),
                )
            })
            .collect();
        let most = accessed.iter().filter(|&&b| b * 2 > end - start).count();
        assert!(
            most >= 2,
            "target {t} (pid {pid}): accessed bytes of its {} byte area per snapshot: {accessed:?}",
            end - start
        );
    }
    info
}

fn record_follows_every_forked_process(source: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree.data");
    let report = dir.path().join("areas");
    udamon()
        .args(["record", "--access-source", source, "-o"])
        .arg(&out)
        .arg("--")
        .arg(tree())
        .arg(&report)
        .arg("3")
        .timeout(Duration::from_secs(30))
        .assert()
        .success();
    let info = assert_tree_recorded(&out, &report);
    let targets = info["targets"].as_array().unwrap();
    assert_eq!(targets[0]["exit_status"], 0, "the command's status");
    assert_eq!(info["header"]["targets"].as_array().unwrap().len(), 1);
    let execs: Vec<bool> = targets.iter().map(|t| t["exec"].is_string()).collect();
    assert_eq!(
        execs,
        [true, false, true],
        "the command's exec and the re-executing child's: {info:#}"
    );
    // The reports name the added targets by pid and command.
    let child_pid = targets[1]["pid"].as_u64().unwrap();
    let text = per_target_wss(&out);
    assert!(
        text.contains(&format!(
            "# target 1, pid {child_pid}: {}",
            tree().display()
        )),
        "{text}"
    );
    let access = udamon()
        .args(["report", "access"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(access.status.success());
    // A converted record keeps a damo record per process.
    let damo = dir.path().join("tree.json_compressed");
    udamon()
        .args(["convert", "--format", "json_compressed"])
        .arg(&out)
        .arg("-o")
        .arg(&damo)
        .assert()
        .success();
    let back = common::info(&damo);
    assert_eq!(back["targets"].as_array().unwrap().len(), 3, "{back:#}");
}

#[test]
fn cpuclock_record_follows_every_forked_process() {
    record_follows_every_forked_process("cpuclock");
}

#[test]
fn tick_record_follows_every_forked_process() {
    if !is_root() {
        skip::skipped("the tick source needs root");
        return;
    }
    record_follows_every_forked_process("tick");
}

/// A `sh -c` that execs its command is named by the command from then on: the shell was gone
/// within a millisecond, yet every report called the target `sh -c ...`.
#[test]
fn a_target_is_named_by_the_program_it_execd() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("exec.data");
    udamon()
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "exec sleep 1.5"])
        .timeout(Duration::from_secs(30))
        .assert()
        .success();
    let info = info(&out);
    let target = &info["targets"][0];
    assert_eq!(target["cmdline"], "sh -c exec sleep 1.5", "{info:#}");
    assert_eq!(target["exec"], "sleep 1.5", "its command line: {info:#}");
    let pid = target["pid"].as_u64().unwrap();
    let text = per_target_wss(&out);
    assert!(
        text.contains(&format!("# target 0, pid {pid}: sleep 1.5\n")),
        "{text}"
    );
}

#[test]
fn pid_with_children_attaches_to_the_running_tree() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree.data");
    let report = dir.path().join("areas");
    let mut parent = std::process::Command::new(tree())
        .arg(&report)
        .arg("3")
        .spawn()
        .unwrap();
    let start = Instant::now();
    while areas(&report).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no areas reported"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    udamon()
        .args(["record", "--access-source", "cpuclock", "--children", "-o"])
        .arg(&out)
        .arg("--pid")
        .arg(parent.id().to_string())
        .timeout(Duration::from_secs(30))
        .assert()
        .success();
    assert!(parent.wait().unwrap().success());
    let info = assert_tree_recorded(&out, &report);
    assert_eq!(
        info["header"]["targets"].as_array().unwrap().len(),
        3,
        "the running children are in the header"
    );
}

#[test]
fn children_is_refused_without_pid_and_with_a_command() {
    for args in [&["--children"][..], &["--children", "--", "true"]] {
        let out = udamon().arg("record").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stderr);
        // A usage error: one line, what is wrong first.
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text.starts_with("udamon: error: ")
                && text.lines().count() == 1
                && (text.contains("--pid <PID>") || text.contains("COMMAND")),
            "{args:?}: {text}"
        );
    }
}

/// `report wss --per-target` of a record, every window counted: the text that names each target.
fn per_target_wss(record: &std::path::Path) -> String {
    let wss = udamon()
        .args(["report", "wss", "--per-target", "--exclude_samples", "0"])
        .arg(record)
        .output()
        .unwrap();
    String::from_utf8_lossy(&wss.stdout).into_owned()
}
