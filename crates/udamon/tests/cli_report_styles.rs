//! damo's styles of `report access` and `report footprints`, on simulated records: the styles
//! print what damo prints for the same snapshot (checked against damo itself when it is
//! installed: `UDAMON_DAMO`, as scripts/test sets it), and footprints agree with `report wss`.

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn demo_record(dir: &Path) -> PathBuf {
    sim_record(dir, "demo.data", "builtin:demo", &["--duration", "6s"])
}

/// The lines of a style's block: from its `<...>` legend (or `# total`) to `total size:`.
fn block(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with('<') || l.starts_with("# total"))
        .unwrap_or_else(|| panic!("no block in {text}"));
    let end = lines[start..]
        .iter()
        .position(|l| l.starts_with("total size:"))
        .map_or(lines.len(), |i| start + i + 1);
    lines[start..end]
        .iter()
        .map(|l| l.trim_end().to_string())
        .collect()
}

#[test]
fn the_histogram_and_percentile_styles_print_what_damo_prints() {
    let Some(damo) = std::env::var_os("UDAMON_DAMO") else {
        eprintln!("skipped: no damo to compare with (scripts/test installs it as UDAMON_DAMO)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let record = demo_record(dir.path());
    let converted = dir.path().join("demo.json_compressed");
    udamon()
        .arg("convert")
        .arg(&record)
        .arg("-o")
        .arg(&converted)
        .assert()
        .success();
    let last = (raw_snapshots(&[], &record).len() - 1).to_string();
    for style in [
        "temperature-sz-hist",
        "recency-sz-hist",
        "temperature-percentiles",
        "recency-percentiles",
    ] {
        let ours = report_text(&["access", "--style", style], &record);
        let out = std::process::Command::new(&damo)
            .args(["report", "access", "--style", style, "--snapshot_idx"])
            .args([&last, &last])
            .arg("-i")
            .arg(&converted)
            .output()
            .unwrap();
        assert!(out.status.success(), "damo failed on {style}");
        let theirs = String::from_utf8(out.stdout).unwrap();
        // damo heads its idle times "(us)" over values it prints with their own units; ours
        // leaves out the wrong unit, and is otherwise the same to the byte.
        let theirs: Vec<String> = block(&theirs)
            .into_iter()
            .filter(|l| !l.starts_with("snapshot time:"))
            .map(|l| l.replacen("<idle time (us)>", "<idle time>", 1))
            .collect();
        assert_eq!(block(&ours), theirs, "{style}:\n{ours}");
    }
}

#[test]
fn styles_count_every_byte_of_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let record = demo_record(dir.path());
    let access = report_json(&["access"], &record);
    let total = access["total_bytes"].as_u64().unwrap();
    let hist = report_json(&["access", "--style", "temperature-sz-hist"], &record);
    let view = &hist["targets"][0]["view"];
    assert_eq!(view["kind"], "histogram");
    let bins = view["bins"].as_array().unwrap();
    assert_eq!(bins.len(), 10);
    let binned: u64 = bins.iter().map(|b| b["bytes"].as_u64().unwrap()).sum();
    assert_eq!(binned, total, "every region falls in a bin");

    // Hot: from the hottest down, and the same regions as the detailed style.
    let hot = report_json(&["access", "--style", "hot"], &record);
    let regions = hot["targets"][0]["view"]["regions"].as_array().unwrap();
    let temps: Vec<f64> = regions
        .iter()
        .map(|r| r["temperature"].as_f64().unwrap())
        .collect();
    assert!(temps.windows(2).all(|w| w[0] >= w[1]), "{temps:?}");
    assert_eq!(
        regions.len(),
        access["targets"][0]["regions"].as_array().unwrap().len()
    );
    let cold = report_text(&["access", "--style", "cold"], &record);
    let hot_text = report_text(&["access", "--style", "hot"], &record);
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.contains("| "))
            .map(String::from)
            .collect()
    };
    let mut reversed = rows(&cold);
    reversed.reverse();
    assert_eq!(rows(&hot_text).len(), reversed.len());
    assert_eq!(
        rows(&hot_text).first(),
        reversed.first(),
        "the hottest region is the coldest list's last"
    );

    // Percentiles as asked, damo's way.
    let p = report_json(
        &[
            "access",
            "--style",
            "recency-percentiles",
            "--percentiles_range",
            "0",
            "101",
            "50",
        ],
        &record,
    );
    let shown: Vec<u64> = p["targets"][0]["view"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[0].as_u64().unwrap())
        .collect();
    assert_eq!(shown, [0, 50, 100]);
    // Like damo's, the option takes any number of values: the record comes before it.
    let e = udamon()
        .args(["report", "access"])
        .arg(&record)
        .args(["--style", "hot", "--percentiles_range", "0", "200", "50"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&e.get_output().stderr).into_owned();
    assert!(stderr.contains("from 0 to 100"), "{stderr}");
}

#[test]
fn footprints_put_the_working_set_of_report_wss_beside_the_resident_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let record = demo_record(dir.path());
    let fp = report_json(&["footprints"], &record);
    let metrics: Vec<&str> = fp["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["rss", "wss"], "a simulation has no mappings");
    assert!(fp["missing"][0].as_str().unwrap().starts_with("vsz"));
    let wss = report_json(&["wss"], &record);
    assert_eq!(
        fp["metrics"][1]["distributions"], wss["distributions"],
        "the same working set as report wss"
    );
    // The simulation's resident memory grows as its scan touches new memory.
    let rss: Vec<u64> = fp["metrics"][0]["distributions"][0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_u64().unwrap())
        .collect();
    assert!(rss.iter().all(|&v| v > 0));

    let table = report_text(
        &[
            "footprints",
            "--all",
            "--sortby",
            "time",
            "--exclude_samples",
            "0",
        ],
        &record,
    );
    let rows: Vec<&str> = table.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), raw_snapshots(&[], &record).len(), "{table}");
    let header = table.lines().find(|l| l.contains("time")).unwrap();
    assert!(header.contains("rss") && header.contains("wss"), "{header}");

    let png = dir.path().join("fp.png");
    udamon()
        .args(["report", "footprints", "--sortby", "time", "--plot"])
        .arg(&png)
        .arg(&record)
        .assert()
        .success();
    assert!(std::fs::metadata(&png).unwrap().len() > 1000);
}
