//! The `udamon` command end to end on simulated workloads: the demo, recording, every report,
//! conversion, and the errors a user meets (bad workload files, damaged or foreign records).

mod common;

use assert_cmd::Command;
use common::report_json;
use predicates::str::contains;
use serde_json::Value;
use std::fs;
use std::path::Path;
use udamon_core::AddrRange;
use udamon_sim::Workload;

fn udamon() -> Command {
    let mut cmd = Command::cargo_bin("udamon").expect("the udamon binary is built");
    cmd.env_remove("NO_COLOR").env("COLUMNS", "100");
    cmd
}

fn record(dir: &Path, sim: &str) -> std::path::PathBuf {
    let out = dir.join("rec.data");
    udamon()
        .args(["record", "--sim", sim, "-o"])
        .arg(&out)
        .assert()
        .success()
        .stderr(contains("snapshots"));
    out
}

/// Byte-weighted mean access frequency (Hz) of a snapshot's regions within `range`.
fn mean_hz(snapshot: &Value, range: AddrRange) -> f64 {
    let (mut weighted, mut bytes) = (0.0, 0.0);
    for t in snapshot["targets"].as_array().unwrap() {
        for r in t["regions"].as_array().unwrap() {
            let (s, e) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
            let overlap = e.min(range.end).saturating_sub(s.max(range.start)) as f64;
            weighted += overlap * r["access_hz"].as_f64().unwrap();
            bytes += overlap;
        }
    }
    assert!(bytes > 0.0, "no region covers {range:?}");
    weighted / bytes
}

#[test]
fn demo_shows_a_heatmap_and_the_working_set() {
    udamon()
        .args(["demo", "--no-color"])
        .assert()
        .success()
        .stdout(contains("heatmap of target 0"))
        .stdout(contains("legend"))
        .stdout(contains("percentile"))
        .stderr(contains("240 snapshots"));
}

/// The demo's hot, warm and cold areas and its phase change show in the recorded regions.
#[test]
fn demo_record_matches_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let file = record(dir.path(), "builtin:demo");
    let w = Workload::builtin("demo").unwrap();
    let range = |name: &str| w.regions().iter().find(|r| r.name == name).unwrap().range;
    // 8 s: hot_a is the hot set; 20 s: it moved to hot_b (the change is at 12 s).
    let early = report_json(&["access", "--snapshot", "80"], &file);
    let late = report_json(&["access", "--snapshot", "200"], &file);
    let (hot_a, hot_b, warm, cold) = (range("hot_a"), range("hot_b"), range("warm"), range("cold"));
    // Every hot page is touched in every 5 ms interval (200 Hz); a warm page in about one in
    // four (1 - (1 - 4 KiB / 256 MiB)^n for its share n of the accesses: about 58 Hz).
    assert!(
        mean_hz(&early, hot_a) > 180.0,
        "hot_a {}",
        mean_hz(&early, hot_a)
    );
    assert!(
        (30.0..90.0).contains(&mean_hz(&early, warm)),
        "warm {}",
        mean_hz(&early, warm)
    );
    assert!(
        mean_hz(&early, cold) < 0.05 * mean_hz(&early, hot_a),
        "cold stays cold"
    );
    assert!(
        mean_hz(&early, hot_b) < 0.1 * mean_hz(&early, hot_a),
        "hot_b idle before the change"
    );
    assert!(
        mean_hz(&late, hot_b) > 5.0 * mean_hz(&late, hot_a),
        "the hot set moved to hot_b"
    );
}

#[test]
fn every_report_reads_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let file = record(dir.path(), "builtin:stairs");
    let wss = report_json(&["wss", "--range", "50", "51", "1"], &file);
    let median = wss["distributions"][0]["percentiles"][0]["value"]
        .as_u64()
        .unwrap();
    assert!(
        (9 << 20..=11 << 20).contains(&median),
        "median wss of stairs {median}"
    );
    udamon()
        .args(["report", "heatmap", "--no-color"])
        .arg(&file)
        .assert()
        .success()
        .stdout(contains("legend"));
    udamon()
        .args(["report", "nr_regions"])
        .arg(&file)
        .assert()
        .success()
        .stdout(contains("avr"));
    udamon()
        .args(["report", "access"])
        .arg(&file)
        .assert()
        .success();
    let raw = udamon()
        .args(["report", "raw"])
        .arg(&file)
        .output()
        .unwrap();
    let lines = String::from_utf8(raw.stdout).unwrap();
    assert!(
        lines.lines().count() > 300,
        "a header line and a line per frame"
    );
    assert!(
        lines
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
    );
    let info = report_json(&["info"], &file);
    assert_eq!(info["nr_snapshots"], 300);
    assert_eq!(info["header"]["access_source"]["name"], "sim");
    let png = dir.path().join("map.png");
    udamon()
        .args(["report", "heatmap", "-o"])
        .arg(&png)
        .arg(&file)
        .assert()
        .success();
    assert_eq!(&fs::read(&png).unwrap()[1..4], b"PNG");
    udamon()
        .args(["report", "heatmap", "-o", "map.jpg"])
        .arg(&file)
        .assert()
        .failure()
        .stderr(contains("use .png or .svg"));
}

#[test]
fn converts_to_damo_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = record(dir.path(), "builtin:zigzag");
    let damo = dir.path().join("rec.json_compressed");
    udamon()
        .arg("convert")
        .arg(&file)
        .arg("-o")
        .arg(&damo)
        .assert()
        .success();
    assert_eq!(fs::read(&damo).unwrap()[0], 0x78, "a zlib stream");
    let ours = report_json(&["wss", "--sortby", "time"], &file);
    let theirs = report_json(&["wss", "--sortby", "time"], &damo);
    assert_eq!(ours["distributions"], theirs["distributions"]);
}

#[test]
fn a_bad_workload_file_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.cfg");
    fs::write(&cfg, "a, 4096\n\nphase\n1000\nb, 1, 64, 1\n").unwrap();
    let out = udamon()
        .args(["record", "--sim"])
        .arg(&cfg)
        .arg("-o")
        .arg(dir.path().join("x"))
        .assert()
        .failure();
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("bad.cfg:5:"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}

#[test]
fn a_damaged_record_keeps_its_good_frames() {
    let dir = tempfile::tempdir().unwrap();
    let file = record(dir.path(), "builtin:stairs");
    let full = report_json(&["info"], &file);
    let bytes = fs::read(&file).unwrap();
    fs::write(&file, &bytes[..bytes.len() - 40]).unwrap();
    let cut = report_json(&["info"], &file);
    assert_eq!(
        cut["nr_snapshots"], full["nr_snapshots"],
        "only the final event was cut"
    );
    assert!(
        cut["damage"][0].as_str().unwrap().contains("truncated"),
        "{}",
        cut["damage"]
    );
    udamon()
        .args(["report", "wss"])
        .arg(&file)
        .assert()
        .success()
        .stderr(contains("warning"));
}

#[test]
fn unreadable_inputs_get_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.data");
    fs::write(&empty, b"").unwrap();
    let png = dir.path().join("picture.png");
    fs::write(&png, b"\x89PNG\r\n\x1a\n....").unwrap();
    for (file, words) in [(&empty, "empty"), (&png, "not a udamon or damo record")] {
        let out = udamon()
            .args(["report", "wss"])
            .arg(file)
            .assert()
            .failure();
        let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert!(stderr.contains(words), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    udamon()
        .args(["report", "info", "/nonexistent/udamon.data"])
        .assert()
        .failure()
        .stderr(contains("/nonexistent/udamon.data"));
}

#[test]
fn monitoring_options_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.data");
    udamon()
        .args([
            "record",
            "--sim",
            "builtin:stairs",
            "--min-regions",
            "2",
            "-o",
        ])
        .arg(&out)
        .assert()
        .failure()
        .stderr(contains("at least 3"));
    udamon()
        .args([
            "record",
            "--sim",
            "builtin:stairs",
            "--monitoring_intervals",
            "10ms",
            "200ms",
            "2s",
            "--duration",
            "4s",
            "-o",
        ])
        .arg(&out)
        .assert()
        .success();
    let info = report_json(&["info"], &out);
    assert_eq!(info["header"]["intervals"]["aggr_us"], 200_000);
    assert_eq!(info["nr_snapshots"], 20, "4 s of 200 ms windows");
}

#[test]
fn schemes_apply_on_a_simulated_workload_and_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let schemes = dir.path().join("prcl.json");
    fs::write(
        &schemes,
        r#"[{"action": "pageout", "access_pattern": {"nr_accesses": {"min": "0 %", "max": "0 %"},
                                                   "age": {"min": "2 s", "max": "max"}}}]"#,
    )
    .unwrap();
    let out = dir.path().join("z.data");
    udamon()
        .args([
            "record",
            "--sim",
            "builtin:zigzag",
            "--tried-regions",
            "--schemes",
        ])
        .arg(&schemes)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let report = report_json(&["schemes"], &out);
    let stats = &report["schemes"][0]["stats"];
    assert_eq!(report["schemes"][0]["action"], "pageout");
    // zigzag's idle 100 MiB region is paged out each time it idles past 2 s.
    assert!(
        stats["sz_applied"].as_u64().unwrap() >= 100 << 20,
        "{stats}"
    );
    assert!(
        report["targets"][0]["peak_paged_out_bytes"]
            .as_u64()
            .unwrap()
            >= 90 << 20
    );
    assert!(
        report["schemes"][0]["tried_regions"]["passes"]
            .as_u64()
            .unwrap()
            > 0
    );

    fs::write(
        &schemes,
        r#"[{"action": "pageout", "access_pattern": {"age": {"min": "30", "max": "max"}}}]"#,
    )
    .unwrap();
    let bad = udamon()
        .args(["record", "--sim", "builtin:zigzag", "--schemes"])
        .arg(&schemes)
        .arg("-o")
        .arg(&out)
        .assert()
        .failure();
    let stderr = String::from_utf8(bad.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains("schemes[0]: access_pattern.age.min: \"30\" has no unit"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    udamon()
        .args(["report", "schemes"])
        .arg(dir.path().join("z.data"))
        .assert()
        .success();
}

#[test]
fn recording_over_an_existing_record_keeps_it_as_old() {
    let dir = tempfile::tempdir().unwrap();
    let first = record(dir.path(), "builtin:stairs");
    let stairs = fs::read(&first).unwrap();
    udamon()
        .args(["record", "--sim", "builtin:zigzag", "-o"])
        .arg(&first)
        .assert()
        .success()
        .stderr(contains("kept the previous"));
    assert_eq!(fs::read(dir.path().join("rec.data.old")).unwrap(), stairs);
    assert_eq!(
        report_json(&["info"], &first)["header"]["targets"][0]["cmdline"],
        "zigzag.cfg"
    );
}

#[test]
fn wss_horizon_auto_keeps_damos_window_for_a_simulation_and_refuses_nonsense() {
    let dir = tempfile::tempdir().unwrap();
    let file = record(dir.path(), "builtin:stairs");
    // The sim source counts accesses by checks, as DAMON: auto is each snapshot's own window,
    // and there are no samples to state.
    let auto = report_json(&["wss", "--sortby", "time"], &file);
    let own = report_json(&["wss", "--sortby", "time", "--horizon", "0"], &file);
    assert_eq!(auto, own);
    assert!(auto.get("evidence").is_none(), "{auto}");
    let longer = report_json(&["wss", "--sortby", "time", "--horizon", "2s"], &file);
    assert_ne!(longer, own, "a 2 s horizon unites windows");
    udamon()
        .args(["report", "wss", "--horizon", "soon"])
        .arg(&file)
        .assert()
        .failure()
        .stderr(contains("or auto"));
}

/// The type bytes of a udamon record's frames, from their heads (the format's layout).
fn frame_types(record: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut at = 8;
    while at + 9 <= record.len() {
        assert_eq!(
            &record[at..at + 4],
            b"\xF9UDF",
            "a frame starts at byte {at}"
        );
        let len = u32::from_le_bytes(record[at + 5..at + 9].try_into().unwrap()) as usize;
        types.push(record[at + 4]);
        at += 9 + len + 4;
    }
    assert_eq!(at, record.len(), "the last frame ends the file");
    types
}

#[test]
fn records_are_compressed_unless_told_not_to_and_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, flag: Option<&str>| {
        let out = dir.path().join(name);
        udamon()
            .args([
                "record",
                "--sim",
                "builtin:stairs",
                "--duration",
                "5s",
                "-o",
            ])
            .arg(&out)
            .args(flag)
            .assert()
            .success();
        out
    };
    let compressed = write("default.data", None);
    let plain = write("plain.data", Some("--no-compress"));
    // The flag of when compression was not the default still works, and means the default.
    let asked = write("asked.data", Some("--compress"));
    let is_compressed = |t: &u8| t & 0x80 != 0;
    let (compressed_types, plain_types) = (
        frame_types(&fs::read(&compressed).unwrap()),
        frame_types(&fs::read(&plain).unwrap()),
    );
    assert!(compressed_types.iter().any(is_compressed));
    assert!(!plain_types.iter().any(is_compressed));
    assert_eq!(
        frame_types(&fs::read(&asked).unwrap()),
        compressed_types,
        "--compress writes what the default writes"
    );
    assert!(fs::metadata(&compressed).unwrap().len() < fs::metadata(&plain).unwrap().len());
    // Every snapshot and event reads back the same, compressed or not.
    let raw = |path: &Path| {
        let out = udamon().args(["report", "raw"]).arg(path).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            // The header says when the record started.
            .filter(|l| !l.starts_with("{\"frame\":\"header\""))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (a, b) = (raw(&compressed), raw(&plain));
    assert!(a.len() > 10, "{} frames", a.len());
    assert_eq!(a, b);
    udamon()
        .args([
            "record",
            "--sim",
            "builtin:stairs",
            "--compress",
            "--no-compress",
            "-o",
        ])
        .arg(dir.path().join("both.data"))
        .assert()
        .failure()
        .stderr(contains("cannot be used with"));
}

/// Ctrl-C or SIGTERM stop a simulated run as they stop a live one: the record ends with its
/// stop event (it was left without one, as by SIGKILL).
#[test]
fn a_signal_stops_a_simulation_with_a_complete_record() {
    let dir = tempfile::tempdir().unwrap();
    // Ten hours of virtual time: minutes of real time, far longer than the test waits.
    let cfg = dir.path().join("long.cfg");
    std::fs::write(&cfg, "a, 10485760\n\nlong\n36000000\na, 1, 4096, 1\n").unwrap();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let out = dir.path().join(format!("sim-{signal}.data"));
        let mut run = std::process::Command::new(udamon().get_program())
            .args(["record", "--sim"])
            .arg(&cfg)
            .arg("-o")
            .arg(&out)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::fs::metadata(&out).map_or(0, |m| m.len()) < 4096 {
            assert!(std::time::Instant::now() < deadline, "nothing recorded");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { libc::kill(run.id() as libc::pid_t, signal) }, 0);
        assert!(run.wait().unwrap().success(), "signal {signal}");
        let info = common::info(&out);
        assert_eq!(info["finished"], true, "signal {signal}: {info}");
        let stops = info["events"]["lifecycle"].to_string();
        assert!(stops.contains("interrupted by a signal"), "{stops}");
    }
}

#[test]
fn a_warning_that_holds_for_every_horizon_is_given_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("short.data");
    // 1 s of 100 ms windows: fewer snapshots than the 20 that wss skips as warm-up.
    udamon()
        .args([
            "record",
            "--sim",
            "builtin:stairs",
            "--duration",
            "1s",
            "-o",
        ])
        .arg(&file)
        .assert()
        .success();
    let out = udamon()
        .args(["report", "wss"])
        .arg(&file)
        .arg("--horizons")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warm-up")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].starts_with("# warning: "), "{text}");
    let rows = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(rows, 7, "a row per default horizon: {text}");
}
