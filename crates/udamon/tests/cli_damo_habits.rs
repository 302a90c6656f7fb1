//! What a damo user types works: `--address_range`/`--time_range` on reports,
//! `report record_info`, `access --sort_regions_by`, `wss --plot`, and a positional target for
//! `record`.

mod common;

use common::{raw_snapshots, report_json, sim_record, udamon};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The demo workload's record (24 s of 100 ms windows) in `dir`.
fn demo(dir: &Path) -> PathBuf {
    sim_record(dir, "demo.data", "builtin:demo", &[])
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

#[test]
fn time_and_address_ranges_select_what_reports_read() {
    let dir = tempfile::tempdir().unwrap();
    let rec = demo(dir.path());
    let all = raw_snapshots(&[], &rec);
    assert_eq!(all.len(), 240);
    // damo's spelling and udamon's select the same.
    let timed = raw_snapshots(&["--time_range", "5s", "10s"], &rec);
    assert_eq!(timed, raw_snapshots(&["--time-range", "5s", "10s"], &rec));
    assert_eq!(timed.len(), 50, "the windows overlapping 5-10 s");
    assert!(
        timed
            .iter()
            .all(|s| u(&s["start_ns"]) >= 5_000_000_000 && u(&s["end_ns"]) <= 10_000_000_000)
    );

    let (start, end) = (0x7eff_9000_0000_u64, 0x7eff_b000_0000_u64);
    let cut = raw_snapshots(
        &[
            "--address_range",
            &format!("{start:#x}"),
            &format!("{end:#x}"),
        ],
        &rec,
    );
    assert_eq!(cut.len(), 240);
    for s in &cut {
        let regions = s["targets"][0]["regions"].as_array().unwrap();
        let bytes: u64 = regions.iter().map(|r| u(&r["end"]) - u(&r["start"])).sum();
        assert_eq!(
            bytes,
            end - start,
            "the range is all mapped and cut to its edges"
        );
        assert!(
            regions
                .iter()
                .all(|r| u(&r["start"]) >= start && u(&r["end"]) <= end)
        );
    }
    // Every report reads through the selection: nr_regions counts the selected snapshots.
    let nr = report_json(
        &[
            "nr_regions",
            "--exclude_samples",
            "0",
            "--time_range",
            "5s",
            "10s",
        ],
        &rec,
    );
    assert!(nr.to_string().contains("\"nr_snapshots\":50"), "{nr}");
    udamon()
        .args([
            "report",
            "heatmap",
            "--address_range",
            &format!("{start:#x}"),
            &format!("{end:#x}"),
            "--time_range",
            "1s",
            "2s",
        ])
        .arg(&rec)
        .assert()
        .success();
    let out = udamon()
        .args(["report", "wss", "--time_range", "10s", "5s"])
        .arg(&rec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("udamon: error: --time-range: the start must be before the end")
    );
}

#[test]
fn record_info_is_info() {
    let dir = tempfile::tempdir().unwrap();
    let rec = demo(dir.path());
    assert_eq!(
        report_json(&["record_info"], &rec),
        report_json(&["info"], &rec)
    );
}

#[test]
fn access_sorts_regions_as_damo_does() {
    let dir = tempfile::tempdir().unwrap();
    let rec = demo(dir.path());
    let regions = |args: &[&str]| -> Vec<Value> {
        let mut all = vec!["access"];
        all.extend_from_slice(args);
        report_json(&all, &rec)["targets"][0]["regions"]
            .as_array()
            .unwrap()
            .clone()
    };
    let key =
        |rs: &[Value], k: &str| -> Vec<f64> { rs.iter().map(|r| r[k].as_f64().unwrap()).collect() };
    let sorted = |v: &[f64]| v.windows(2).all(|w| w[0] <= w[1]);
    let by_address = regions(&[]);
    assert!(
        sorted(&key(&by_address, "start")),
        "address order by default"
    );
    let by_size = regions(&["--sort_regions_by", "size"]);
    assert!(sorted(&key(&by_size, "size")));
    assert_ne!(by_size, by_address, "the demo's regions differ in size");
    let mut down = key(
        &regions(&["--sort-regions-by", "access_rate", "--sort_regions_dsc"]),
        "access_percent",
    );
    down.reverse();
    assert!(sorted(&down));
    assert!(sorted(&key(
        &regions(&["--sort_regions_by", "age"]),
        "age_ns"
    )));
}

/// damo's `record TARGET`: a pid, or a command line in one argument.
#[test]
fn a_positional_target_is_a_pid_or_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let cmd_rec = dir.path().join("cmd.data");
    udamon()
        .args(["record", "sleep 0.2", "-o"])
        .arg(&cmd_rec)
        .assert()
        .success();
    let info = common::info(&cmd_rec);
    assert_eq!(info["targets"][0]["cmdline"], "sleep 0.2");
    assert_eq!(info["targets"][0]["exit_status"], 0);

    let mut sleeper = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    let pid_rec = dir.path().join("pid.data");
    let out = udamon()
        .args([
            "record",
            &sleeper.id().to_string(),
            "--duration",
            "500ms",
            "-o",
        ])
        .arg(&pid_rec)
        .output()
        .unwrap();
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(common::info(&pid_rec)["targets"][0]["pid"], sleeper.id());

    let out = udamon()
        .args(["record", "1234", "--pid", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a target given twice is a usage error"
    );
}

#[test]
fn wss_and_nr_regions_plot_as_damo_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = demo(dir.path());
    let png = dir.path().join("wss.png");
    udamon()
        .args(["report", "wss", "--plot"])
        .arg(&png)
        .arg(&file)
        .assert()
        .success();
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let svg = dir.path().join("nr.svg");
    udamon()
        .args(["report", "nr_regions", "--sortby", "time", "--plot"])
        .arg(&svg)
        .arg(&file)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("nr_regions by time (s)"), "{}", &text[..200]);
    // The output rule holds for plots: the record is not overwritten, an unknown format is
    // refused before anything is written.
    let out = udamon()
        .args(["report", "wss", "--plot"])
        .arg(&file)
        .arg(&file)
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let jpg = dir.path().join("wss.jpg");
    udamon()
        .args(["report", "wss", "--plot"])
        .arg(&jpg)
        .arg(&file)
        .assert()
        .failure()
        .stderr(predicates::str::contains("use .png or .svg"));
    assert!(!jpg.exists());
}
