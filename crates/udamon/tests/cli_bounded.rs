//! Memory bounded by the input's real size, whatever a record or damo file claims: every
//! report on crafted inputs — a 5 KB record whose one frame claims 12 million regions, twenty
//! such frames, frames at the format's limits, a record naming a million targets, a damo
//! `json_compressed` of a few hundred KB that inflates to 100 MB — ends (with a report or a clear
//! error, never an abort) having used under 256 MiB.
//!
//! Each report runs under a 2 GiB address-space limit, so that a regression fails fast instead
//! of taking the machine's memory, and its peak resident memory is read from `wait4`.

mod common;

use common::udamon;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// What every report must stay under.
const LIMIT_BYTES: u64 = 256 << 20;

/// A LEB128 varint.
fn leb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A frame of the udamon format (`crates/record`'s documentation): sync, type, length,
/// payload, CRC-32 of type, length and payload.
fn frame(type_byte: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_le_bytes();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[type_byte]);
    crc.update(&len);
    crc.update(payload);
    let mut out = b"\xF9UDF".to_vec();
    out.push(type_byte);
    out.extend_from_slice(&len);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out
}

/// A frame with a zstd-compressed payload, as the writer makes them.
fn packed(type_byte: u8, raw: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    leb(raw.len() as u64, &mut payload);
    payload.extend_from_slice(&zstd::bulk::compress(raw, 3).unwrap());
    frame(type_byte | 0x80, &payload)
}

fn record(frames: impl IntoIterator<Item = Vec<u8>>) -> Vec<u8> {
    let header = serde_json::json!({
        "format_version": 3, "udamon_version": "0.1.0",
        "access_source": {"name": "sim", "reason": "crafted"},
        "intervals": {"sample_us": 5000, "aggr_us": 100000, "update_us": 1000000},
        "min_nr_regions": 10, "max_nr_regions": 1000, "seed": 1,
        "targets": [{"pid": 7, "cmdline": "w"}],
        "host": {"hostname": "h", "kernel": "k", "nr_cpus": 1, "page_size": 4096,
                 "mem_total_bytes": 1},
        "start_time_unix_ns": 1
    });
    let mut out = b"\x89UDAMON\n".to_vec();
    out.extend(frame(1, header.to_string().as_bytes()));
    out.extend(frames.into_iter().flatten());
    out
}

/// Snapshot `i` of `targets` targets (numbered from `first_target`), each with `regions`
/// adjacent accessed pages: five bytes a region, which zstd packs into almost nothing.
fn snapshot(i: u64, first_target: u64, targets: u64, regions: u64) -> Vec<u8> {
    let mut raw = Vec::new();
    for v in [i * 100_000_000, 100_000_000, 5000, 100_000, targets] {
        leb(v, &mut raw);
    }
    for t in 0..targets {
        for v in [first_target + t, regions, 12] {
            leb(v, &mut raw);
        }
        for _ in 0..regions {
            raw.extend_from_slice(&[2, 1, 1, 0, 0]);
        }
    }
    packed(2, &raw)
}

fn event(json: serde_json::Value) -> Vec<u8> {
    packed(3, json.to_string().as_bytes())
}

/// A damo `json_compressed` file whose one record lists `inflated` bytes of regions.
fn inflating_damo(inflated: usize) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(
        br#"[{"target_id": 42, "snapshots": [{"start_time": 0, "end_time": 1, "regions": ["#,
    )
    .unwrap();
    let chunk = br#"{"start": 4096, "end": 8192}, "#.repeat(1 << 15);
    for _ in 0..inflated / chunk.len() {
        z.write_all(&chunk).unwrap();
    }
    z.write_all(br#"{"start": 4096, "end": 8192}]}]}]"#)
        .unwrap();
    z.finish().unwrap()
}

/// Runs `udamon report ARGS FILE` under the address-space limit; its peak resident memory in
/// bytes, its exit status and its stderr.
fn run_report(args: &[&str], file: &Path) -> (u64, i32, String) {
    let mut cmd = std::process::Command::new(udamon().get_program());
    cmd.arg("report").args(args).arg(file);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4, which gives its peak memory"
    )]
    let mut child = cmd.spawn().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid, and wait4 reaps our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    (usage.ru_maxrss as u64 * 1024, code, stderr)
}

/// Every report on `file` stays under the limit and ends with a report or one clear error.
fn every_report_is_bounded(file: &Path, reports: &[&[&str]]) {
    for args in reports {
        let (rss, code, stderr) = run_report(args, file);
        let what = format!("report {} on {}", args.join(" "), file.display());
        assert!(
            code == 0 || code == 1,
            "{what}: exit {code} (killed or aborted): {stderr}"
        );
        if code == 1 {
            let errors: Vec<&str> = stderr
                .lines()
                .filter(|l| !l.starts_with("udamon: warning"))
                .collect();
            assert_eq!(errors.len(), 1, "{what}: {stderr}");
            assert!(errors[0].starts_with("udamon: error: "), "{what}: {stderr}");
        }
        assert!(rss < LIMIT_BYTES, "{what}: {} MiB at its peak", rss >> 20);
        eprintln!("{what}: {} MiB", rss >> 20);
    }
}

const ALL: [&[&str]; 11] = [
    &["info"],
    &["access"],
    &["access", "--snapshot", "0", "--json"],
    &["wss", "--horizon", "60s"],
    &["nr_regions"],
    &["heatmap"],
    &["mappings"],
    &["referenced"],
    &["schemes"],
    &["code"],
    &["raw"],
];

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn frames_claiming_millions_of_regions_cost_no_more_than_the_format_allows() {
    let dir = tempfile::tempdir().unwrap();
    // The issue's input: 5.5 KB, one frame of 12 million regions (report access took 6.2 GB).
    let one = record([snapshot(0, 0, 1, 12_000_000)]);
    assert!(one.len() < 8 << 10, "{} bytes", one.len());
    let one = write(dir.path(), "one.data", &one);
    every_report_is_bounded(&one, &ALL);
    let text = common::report_text(&["info"], &one);
    assert!(text.contains("above the format's limit"), "{text}");
    // Twenty of them (report wss aborted allocating 2 GiB).
    let twenty = record((0..20).map(|i| snapshot(i, 0, 1, 12_000_000)));
    let twenty = write(dir.path(), "twenty.data", &twenty);
    every_report_is_bounded(&twenty, &[&["wss", "--horizon", "60s"], &["access"]]);
}

#[test]
fn frames_at_the_format_limits_stay_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let limit = udamon_record::MAX_SNAPSHOT_REGIONS as u64;
    // The most regions a snapshot may hold, every window; the whole file is a few KB.
    let frames = (0..2).map(|i| snapshot(i, 0, 1, limit));
    let file = write(dir.path(), "limit.data", &record(frames));
    every_report_is_bounded(&file, &ALL);
    // ... each of them at a new place, under a mapping with a name as long as a path can be
    // (every region names it).
    let name = format!(
        "/{}",
        "n".repeat(udamon_record::model::MAX_MAPPING_NAME - 1)
    );
    let mapping = event(serde_json::json!({
        "time_ns": 0, "kind": "mappings", "target": 0,
        "mappings": [{"start": 0, "end": u64::MAX, "perms": "rw-p", "offset": 0, "name": name}]
    }));
    // More windows than a horizon may keep at this size: the oldest are forgotten.
    let shifted = (0..24).map(|i| {
        let mut raw = Vec::new();
        for v in [i * 100_000_000, 100_000_000, 5000, 100_000, 1, 0, limit, 12] {
            leb(v, &mut raw);
        }
        // Every other page, starting further up each window.
        leb(2 * (1 + i * 2 * limit), &mut raw);
        raw.extend_from_slice(&[1, 1, 0, 0]);
        for _ in 1..limit {
            raw.extend_from_slice(&[2, 1, 1, 0, 0]);
        }
        packed(2, &raw)
    });
    let file = write(
        dir.path(),
        "shifted.data",
        &record(std::iter::once(mapping).chain(shifted)),
    );
    let reports: [&[&str]; 5] = [
        &["access"],
        &["access", "--json"],
        &["wss", "--horizon", "60s"],
        &["heatmap"],
        &["referenced"],
    ];
    every_report_is_bounded(&file, &reports);
}

#[test]
fn a_record_naming_millions_of_targets_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let limit = udamon_record::MAX_SNAPSHOT_TARGETS as u64;
    // Snapshots of the most targets a snapshot may hold, new ones each time, never announced;
    // and an announcement of target 4,000,000,000.
    let added = event(serde_json::json!({
        "time_ns": 0, "kind": "target_added", "target": 4_000_000_000u32, "pid": 1,
        "cmdline": "x"
    }));
    let frames = (0..4).map(|i| snapshot(i, i * limit, limit, 1));
    let file = write(
        dir.path(),
        "targets.data",
        &record(std::iter::once(added).chain(frames)),
    );
    every_report_is_bounded(&file, &ALL);
}

#[test]
fn mappings_of_many_targets_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // Three targets of 80,000 mappings each (a real process has at most some tens of
    // thousands), with long names; snapshots of the first at the format's limit.
    let name = format!("/{}", "n".repeat(100));
    let events = (0..3u32).map(|target| {
        let mappings: Vec<serde_json::Value> = (0..80_000u64)
            .map(|i| {
                serde_json::json!({"start": (i + 1) * 4096, "end": (i + 2) * 4096,
                                   "perms": "rw-p", "offset": 0, "name": name})
            })
            .collect();
        event(serde_json::json!({
            "time_ns": 0, "kind": "mappings", "target": target, "mappings": mappings
        }))
    });
    let limit = udamon_record::MAX_SNAPSHOT_REGIONS as u64;
    let frames = (0..2).map(|i| snapshot(i, 0, 1, limit));
    let file = write(dir.path(), "mappings.data", &record(events.chain(frames)));
    every_report_is_bounded(&file, &[&["access"], &["mappings"], &["heatmap"]]);
}

#[test]
fn a_damo_file_that_inflates_far_is_refused_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "big.json_compressed", &inflating_damo(96 << 20));
    every_report_is_bounded(&file, &[&["wss"]]);
    let (_, code, stderr) = run_report(&["info"], &file);
    assert_eq!(code, 1);
    assert!(stderr.contains("more than udamon loads"), "{stderr}");
}

/// A zigzag varint, as the samples frame writes its deltas.
fn zigzag(v: i64, out: &mut Vec<u8>) {
    leb(((v << 1) ^ (v >> 63)) as u64, out);
}

/// A samples frame of `sites` code sites numbered from `first`, each named by a function of
/// `name_len` bytes, and one sample at each.
fn samples_with_long_names(first: u64, sites: u64, name_len: usize) -> Vec<u8> {
    let mut raw = Vec::new();
    for v in [100_000_000, 100_000_000, 0, sites] {
        leb(v, &mut raw);
    }
    for s in 0..sites {
        zigzag(if s == 0 { first as i64 } else { 1 }, &mut raw);
        zigzag(0x1000, &mut raw);
        let name = format!("{}{}", first + s, "f".repeat(name_len));
        leb(name.len() as u64 + 2, &mut raw);
        raw.extend_from_slice(name.as_bytes());
        leb(0, &mut raw);
        leb(0, &mut raw);
    }
    leb(sites, &mut raw);
    for s in 0..sites {
        for v in [if s == 0 { 0x1000 } else { 0 }, i64::from(s > 0), 0] {
            zigzag(v, &mut raw);
        }
        leb(0, &mut raw);
    }
    packed(4, &raw)
}

/// The issue's inputs: targets announced with command lines of 15 MB each, and code sites
/// with 1 MB function names, in files of a few hundred KB (`report info` took 9.45 GB, `report
/// code` 3.9 GB). A reader keeps a bounded start of each string and says how many it cut.
#[test]
fn long_strings_in_a_small_file_are_cut_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let cmdline = "A".repeat(15_000_000);
    let mut frames = vec![snapshot(0, 0, 1, 100)];
    frames.extend((1..=40).map(|target| {
        event(serde_json::json!({
            "time_ns": 50_000_000, "kind": "target_added", "target": target,
            "pid": 1000 + target, "parent": 0, "cmdline": cmdline,
        }))
    }));
    frames.extend((0..40).map(|i| samples_with_long_names(i * 15, 15, 1_000_000)));
    frames.push(snapshot(1, 0, 1, 100));
    let bytes = record(frames);
    assert!(bytes.len() < 1 << 20, "{} bytes", bytes.len());
    let file = write(dir.path(), "strings.data", &bytes);
    every_report_is_bounded(&file, &ALL);
    let text = common::report_text(&["info"], &file);
    assert!(
        text.contains("strings from here on were longer than a report keeps"),
        "{text}"
    );
}
