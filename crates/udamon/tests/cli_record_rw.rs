//! Reads and writes told apart on a live process, and schemes that filter on them and on the
//! CPU: udamon-linux's `code` workload (tests/workload/code.c, built `-O2 -g`) reads an
//! anonymous buffer in one function and writes a file's shared mapping in another, pinned to
//! one CPU. Sampling is random: the checks are on clear majorities, never on exact counts.

mod common;

use common::{build_workload_as, report_json, report_text, udamon};
use serde_json::Value;
use std::path::Path;

/// From when regions have followed the buffers' bounds (three 400 ms windows).
const SETTLED_NS: u64 = 1_200_000_000;

/// An address range `[start, end)`.
type Area = (u64, u64);

/// The "area NAME START END" line the workload wrote.
fn area(file: &Path, name: &str) -> Area {
    let text = std::fs::read_to_string(file).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("area {name} ")))
        .unwrap_or_else(|| panic!("no area {name} in {text}"));
    let f: Vec<&str> = line.split(' ').collect();
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    (hex(f[2]), hex(f[3]))
}

/// The bytes `[start, end)` shares with `area`.
fn overlap(start: u64, end: u64, area: Area) -> u64 {
    end.min(area.1).saturating_sub(start.max(area.0))
}

fn count(v: &Value, key: &str) -> u64 {
    // The record leaves out counts of 0.
    v[key].as_u64().unwrap_or(0)
}

/// The first CPU this process may run on.
fn a_cpu() -> u32 {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .unwrap() as u32
    }
}

#[test]
fn regions_count_reads_and_writes_apart_and_schemes_filter_on_them_and_on_the_cpu() {
    let code = build_workload_as("code", "rw", &["-O2", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    let (areas, rec, schemes) = (
        dir.path().join("areas"),
        dir.path().join("rec"),
        dir.path().join("schemes.json"),
    );
    let cpu = a_cpu();
    let filter = |f: &str| format!(r#"{{"action": "stat", "filters": [{f}]}}"#);
    let list = [
        filter(r#"{"filter_type": "writes", "matching": true, "allow": true}"#),
        filter(r#"{"filter_type": "reads", "matching": true, "allow": true}"#),
        filter(&format!(
            r#"{{"filter_type": "cpu", "cpu": {cpu}, "matching": true, "allow": true}}"#
        )),
        filter(&format!(
            r#"{{"filter_type": "cpu", "cpu": {}, "matching": true, "allow": true}}"#,
            cpu + 1
        )),
    ];
    std::fs::write(&schemes, format!("[{}]", list.join(",\n"))).unwrap();
    udamon()
        .args(["record", "--access-source", "cpuclock", "--tried-regions"])
        .arg("--schemes")
        .arg(&schemes)
        .arg("-o")
        .arg(&rec)
        .args(["--", "taskset", "-c", &cpu.to_string()])
        .arg(&code)
        .arg("run")
        .arg("5")
        .arg(&areas)
        .assert()
        .success();
    let (reader, writer) = (area(&areas, "anon"), area(&areas, "file"));

    // Each region's read and write samples, shared among the areas by the bytes it holds of
    // each (a region can reach over both for a window). The first windows are left out: their
    // regions, still large, merge the two buffers' alike sample densities into regions that
    // were both read and written, and parts split off those share their counts in proportion.
    let frames: Vec<Value> = report_text(&["raw"], &rec)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let [mut reads, mut writes] = [[0.0f64; 2]; 2];
    // Per scheme: the tried bytes in each area, and the bytes its operations-layer filters let
    // through.
    let mut tried = [[0u64; 3]; 4];
    let settled = |f: &Value| count(f, "time_ns").max(count(f, "end_ns")) > SETTLED_NS;
    for f in frames.iter().filter(|f| settled(f)) {
        if f["frame"] == "snapshot" {
            for r in f["targets"][0]["regions"].as_array().unwrap() {
                let (start, end) = (count(r, "start"), count(r, "end"));
                for (i, a) in [reader, writer].into_iter().enumerate() {
                    let share = overlap(start, end, a) as f64 / (end - start) as f64;
                    reads[i] += count(r, "read_samples") as f64 * share;
                    writes[i] += count(r, "write_samples") as f64 * share;
                }
            }
        } else if f["kind"] == "scheme_tried_regions" {
            let t = &mut tried[f["scheme"].as_u64().unwrap() as usize];
            for r in f["regions"].as_array().unwrap() {
                let (start, end) = (count(r, "start"), count(r, "end"));
                t[0] += overlap(start, end, reader);
                t[1] += overlap(start, end, writer);
                t[2] += count(r, "sz_filter_passed");
            }
        }
    }
    assert!(
        reads[0] >= 20.0 && reads[0] > 5.0 * writes[0],
        "the read buffer: {} read and {} write samples",
        reads[0],
        writes[0]
    );
    assert!(
        writes[1] >= 20.0 && writes[1] > 5.0 * reads[1],
        "the written buffer: {} read and {} write samples",
        reads[1],
        writes[1]
    );
    let [to_written, to_read, on_the_cpu, elsewhere] = tried;
    assert!(
        to_written[1] > 3 * to_written[0],
        "the writes filter lets through the written buffer: {to_written:?}"
    );
    assert!(
        to_read[0] > 3 * to_read[1],
        "the reads filter lets through the read buffer: {to_read:?}"
    );
    assert!(
        on_the_cpu[2] > 0,
        "the samples came from CPU {cpu}: {on_the_cpu:?}"
    );
    assert_eq!(
        elsewhere[2],
        0,
        "no sample came from CPU {}: {elsewhere:?}",
        cpu + 1
    );

    // `report access --writes` shows the regions of the snapshot with write samples, all of them.
    let regions = |args: &[&str]| {
        let mut all = vec!["access", "--snapshot", "5"];
        all.extend_from_slice(args);
        report_json(&all, &rec)["targets"][0]["regions"]
            .as_array()
            .unwrap()
            .clone()
    };
    let written: Vec<Value> = regions(&[])
        .into_iter()
        .filter(|r| count(r, "write_samples") > 0)
        .collect();
    assert!(!written.is_empty(), "a window with writes");
    assert_eq!(regions(&["--writes"]), written);
}
