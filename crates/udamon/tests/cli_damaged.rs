//! Damaged records through the command: a record cut short as by SIGKILL is reported as
//! unfinished, and one whose header frame is damaged still gives its frames to every report.

mod common;

use common::{report_json, sim_record, udamon};
use predicates::prelude::*;
use predicates::str::contains;
use std::fs;
use std::path::{Path, PathBuf};

fn record(dir: &Path) -> PathBuf {
    sim_record(dir, "r.data", "builtin:stairs", &["--duration", "3s"])
}

#[test]
fn a_record_cut_short_is_reported_as_unfinished() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path());
    assert_eq!(report_json(&["info"], &path)["finished"], true);
    let bytes = fs::read(&path).unwrap();
    // Where a monitor killed mid-run leaves off: before the stop event, inside a frame.
    fs::write(&path, &bytes[..bytes.len() * 2 / 3]).unwrap();
    udamon()
        .args(["report", "info"])
        .arg(&path)
        .assert()
        .success()
        .stdout(
            contains("unfinished: no stop event; the monitor was killed")
                .and(contains("truncated tail")),
        );
    assert_eq!(report_json(&["info"], &path)["finished"], false);
}

/// A record without a stop event is either still being written or was left by a monitor that
/// died: `info` tells which, by the lock a monitor holds on its record while it runs.
#[test]
fn a_record_still_being_written_is_told_from_one_whose_monitor_was_killed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.data");
    let mut monitor = std::process::Command::new(udamon().get_program())
        .args([
            "record",
            "--access-source",
            "cpuclock",
            "--aggr-us",
            "50000",
            "-o",
        ])
        .arg(&path)
        .args(["--", "sleep", "60"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until its first snapshot is on disk.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let snapshots = || {
        let out = udamon()
            .args(["report", "info", "--json"])
            .arg(&path)
            .output()
            .unwrap();
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        info["nr_snapshots"].as_u64().unwrap_or(0)
    };
    while snapshots() == 0 {
        assert!(std::time::Instant::now() < deadline, "no snapshot written");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let live = report_json(&["info"], &path);
    assert_eq!(live["finished"], false);
    assert_eq!(live["writer"]["pid"], monitor.id(), "{live}");
    udamon()
        .args(["report", "info"])
        .arg(&path)
        .assert()
        .success()
        .stdout(
            contains(format!(
                "still being written: a monitor (pid {})",
                monitor.id()
            ))
            .and(contains("killed").not()),
        );
    monitor.kill().unwrap();
    monitor.wait().unwrap();
    let dead = report_json(&["info"], &path);
    assert_eq!(dead["finished"], false);
    assert!(dead.get("writer").is_none(), "{dead}");
    udamon()
        .args(["report", "info"])
        .arg(&path)
        .assert()
        .success()
        .stdout(contains(
            "unfinished: no stop event; the monitor was killed",
        ));
}

#[test]
fn a_damaged_header_leaves_the_frames_readable() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path());
    let snapshots = report_json(&["info"], &path)["nr_snapshots"].clone();
    let mut bytes = fs::read(&path).unwrap();
    bytes[30] ^= 0x20;
    fs::write(&path, &bytes).unwrap();
    assert_eq!(report_json(&["info"], &path)["nr_snapshots"], snapshots);
    udamon()
        .args(["report", "heatmap"])
        .arg(&path)
        .assert()
        .success()
        .stderr(contains("udamon: warning: byte 8: damaged record header"));
    let out = dir.path().join("salvaged.data");
    udamon()
        .arg("convert")
        .arg(&path)
        .args(["--format", "udamon", "-o"])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(report_json(&["info"], &out)["nr_snapshots"], snapshots);
}
