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
