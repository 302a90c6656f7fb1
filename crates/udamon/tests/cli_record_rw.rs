//! Reads and writes told apart on a live process, and schemes that filter on them and on the
//! CPU: udamon-linux's `code` workload (tests/workload/code.c, built `-O2 -g`) reads an
//! anonymous buffer in one function and writes a file's shared mapping in another, pinned to
//! one CPU. Sampling is random: the checks are on clear majorities of the samples, and on
//! regions counting exactly the samples that fell in them.

mod common;

use common::{build_workload_as, favoured_udamon, report_json, report_text, workload_area};
use serde_json::Value;
use std::collections::HashMap;

/// From when regions have followed the buffers' bounds (three 400 ms windows).
const SETTLED_NS: u64 = 1_200_000_000;

/// An address range `[start, end)`.
type Area = (u64, u64);

/// The bytes `[start, end)` shares with `area`.
fn overlap(start: u64, end: u64, area: Area) -> u64 {
    end.min(area.1).saturating_sub(start.max(area.0))
}

/// The address ranges that `ranges` cover, adjacent ones joined, in address order.
fn union(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if last.1 >= start => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
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
    favoured_udamon()
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
    let (reader, writer) = (workload_area(&areas, "anon"), workload_area(&areas, "file"));

    // The samples tell the loads of one buffer from the stores to the other, and each
    // region's read and write counts are its samples of each kind. The first windows are
    // left out: the start-up memsets wrote both buffers, and regions were still following the
    // mappings made then (a region split mid-window shares its counts by bytes).
    let frames: Vec<Value> = report_text(&["raw"], &rec)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let settled = |f: &&Value| count(f, "time_ns").max(count(f, "end_ns")) > SETTLED_NS;
    let samples: HashMap<u64, &Vec<Value>> = frames
        .iter()
        .filter(settled)
        .filter(|f| f["kind"] == "samples")
        .map(|f| (count(f, "time_ns"), f["samples"].as_array().unwrap()))
        .collect();
    // Samples of [reader, writer] by kind: [reads, writes].
    let [mut reads, mut writes] = [[0u64; 2]; 2];
    for s in samples.values().copied().flatten() {
        let addr = count(s, "addr");
        for (i, a) in [reader, writer].into_iter().enumerate() {
            if (a.0..a.1).contains(&addr) {
                match s["access"].as_str() {
                    Some("read") => reads[i] += 1,
                    Some("write") => writes[i] += 1,
                    other => panic!("a sample in a buffer of unknown access {other:?}"),
                }
            }
        }
    }
    assert!(
        reads[0] >= 20 && reads[0] > 5 * writes[0],
        "the read buffer: {} read and {} write samples",
        reads[0],
        writes[0]
    );
    assert!(
        writes[1] >= 20 && writes[1] > 5 * reads[1],
        "the written buffer: {} read and {} write samples",
        reads[1],
        writes[1]
    );
    // Each window's regions: (start, end) → (read samples, write samples).
    let mut windows = HashMap::new();
    for f in frames.iter().filter(settled) {
        if f["frame"] != "snapshot" {
            continue;
        }
        let end_ns = count(f, "end_ns");
        let window = samples.get(&end_ns).map_or(&[][..], |s| &s[..]);
        let mut kinds = HashMap::new();
        for r in f["targets"][0]["regions"].as_array().unwrap() {
            let (start, end) = (count(r, "start"), count(r, "end"));
            let (read, write) = (count(r, "read_samples"), count(r, "write_samples"));
            let of_kind = |kind: &str| {
                window
                    .iter()
                    .filter(|s| (start..end).contains(&count(s, "addr")) && s["access"] == kind)
                    .count() as u64
            };
            assert_eq!(
                (read, write),
                (of_kind("read"), of_kind("write")),
                "the region [{start:#x}, {end:#x}) of the window ending at {end_ns} ns: \
                 its read and write counts, and its samples of each kind"
            );
            kinds.insert((start, end), (read, write));
        }
        windows.insert(end_ns, kinds);
    }

    // The regions each scheme was tried on in the window of a snapshot, with the bytes its
    // operations-layer filters let through.
    let mut matched = [0; 4];
    let mut written_bytes_tried = 0;
    let mut passed = [0; 4];
    for f in frames.iter().filter(settled) {
        if f["kind"] != "scheme_tried_regions" {
            continue;
        }
        let Some(kinds) = windows.get(&count(f, "time_ns")) else {
            continue;
        };
        let scheme = count(f, "scheme") as usize;
        matched[scheme] += 1;
        let mut tried: Vec<(u64, u64)> = Vec::new();
        for r in f["regions"].as_array().unwrap() {
            let (start, end) = (count(r, "start"), count(r, "end"));
            tried.push((start, end));
            passed[scheme] += count(r, "sz_filter_passed");
            if scheme == 0 {
                written_bytes_tried += overlap(start, end, writer);
            }
        }
        let want: Vec<(u64, u64)> = kinds
            .iter()
            .filter(|&(_, &(read, write))| match scheme {
                0 => write > 0,
                1 => read > 0,
                _ => true,
            })
            .map(|(&range, _)| range)
            .collect();
        // The snapshot is taken after the DAMOS pass merged back alike neighbours.
        assert_eq!(
            union(tried),
            union(want),
            "scheme {scheme} at {} ns: the regions of its kind, all of them",
            f["time_ns"]
        );
    }
    assert!(
        matched.iter().all(|&n| n >= 3),
        "tried regions of several windows: {matched:?}"
    );
    // The written buffer is written all over in every window.
    let written_bytes = (writer.1 - writer.0) * matched[0] as u64;
    assert!(
        written_bytes_tried * 2 > written_bytes,
        "the writes filter lets through the written buffer: {written_bytes_tried} of {written_bytes} bytes"
    );
    assert!(passed[2] > 0, "the samples came from CPU {cpu}: {passed:?}");
    assert_eq!(
        passed[3],
        0,
        "no sample came from CPU {}: {passed:?}",
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
