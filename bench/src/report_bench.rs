//! `udamon report heatmap` and `udamon report mappings` on large records: time and peak memory
//! for a 128 MiB and a 1 GiB record, side by side. The readers stream, so peak memory must not
//! grow with the file. Then
//! `udamon report wss` on a 128 MiB record of a sampled source: the default `--horizon auto`
//! (which reads the record once per horizon it tries) against one window's (`--horizon 0`).
//!
//! The records are synthetic but shaped like a monitor's: 1,000 regions per snapshot over 4 GiB,
//! a hot band that moves every 1,000 snapshots, a warm band, cold memory, and 100 mappings over
//! the span, announced again (one of them grown) every 1,000 snapshots. Each report runs as a
//! child process (the release `udamon` binary beside this one) and is measured with `wait4`.
//!
//! Run: `cargo build --release -p udamon && cargo run --release -p udamon-bench --bin report-bench`

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use udamon_record::model::{
    AccessSource, Event, EventKind, Header, HostInfo, Intervals, MappingRecord, RegionStat,
    Snapshot, TargetInfo, TargetSnapshot,
};
use udamon_record::{FORMAT_VERSION, RecordReader, RecordWriter, WriterOptions};
use udamon_report::dist::DistOptions;
use udamon_report::wss::{WssFilter, choose_horizon};

const REGIONS: u64 = 1000;
const SPAN: u64 = 4 << 30;

fn header() -> Header {
    Header {
        format_version: FORMAT_VERSION,
        udamon_version: "bench".into(),
        access_source: AccessSource {
            name: "sim".into(),
            reason: "synthetic benchmark record".into(),
        },
        intervals: Intervals {
            sample_us: 5000,
            aggr_us: 100_000,
            update_us: 1_000_000,
        },
        min_nr_regions: 10,
        max_nr_regions: REGIONS as u32,
        seed: 0,
        targets: vec![TargetInfo {
            pid: None,
            cmdline: "synthetic".into(),
            parent: None,
        }],
        host: HostInfo::default(),
        start_time_unix_ns: 0,
        adjustment: String::new(),
    }
}

/// Snapshot `i`; `sampled`: accessed regions carry a sample each, as a sampled source's do.
fn snapshot(i: u64, sampled: bool) -> Snapshot {
    let size = SPAN / REGIONS;
    let hot = (i / 1000) % 10; // the hot tenth moves every 1,000 snapshots
    let regions = (0..REGIONS)
        .map(|r| {
            let tenth = r * 10 / REGIONS;
            let nr_accesses = if tenth == hot {
                20
            } else if tenth == 9 - hot {
                3
            } else {
                0
            };
            let jitter = (r * 7919 + i * 104_729) % 4096 * 4096 % (size / 2);
            RegionStat {
                start: (1 << 40) + r * size + if r == 0 { 0 } else { jitter },
                end: (1 << 40)
                    + (r + 1) * size
                    + if r + 1 == REGIONS {
                        0
                    } else {
                        (((r + 1) * 7919 + i * 104_729) % 4096 * 4096) % (size / 2)
                    },
                nr_accesses,
                age: (i % 50) as u32,
                raw_samples: u32::from(sampled && nr_accesses > 0),
                read_samples: 0,
                write_samples: 0,
                touched_bytes: None,
            }
        })
        .collect();
    Snapshot {
        start_ns: i * 100_000_000,
        end_ns: (i + 1) * 100_000_000,
        sample_us: 5000,
        aggr_us: 100_000,
        targets: vec![TargetSnapshot { target: 0, regions }],
    }
}

/// The target's 100 mappings at snapshot `i`: equal parts of the span, the last growing.
fn mappings(i: u64) -> Event {
    const NR: u64 = 100;
    let size = SPAN / NR;
    let mappings = (0..NR)
        .map(|m| MappingRecord {
            start: (1 << 40) + m * size,
            end: (1 << 40) + (m + 1) * size
                - if m + 1 == NR {
                    4096 * (9 - i / 1000 % 10)
                } else {
                    0
                },
            perms: if m % 3 == 0 { "r-xp" } else { "rw-p" }.into(),
            offset: 0,
            name: format!("/usr/lib/lib{}.so", m % 20),
        })
        .collect();
    Event {
        time_ns: i * 100_000_000,
        kind: EventKind::Mappings {
            target: 0,
            mappings,
        },
    }
}

/// Writes snapshots (and mappings events) until the file reaches `bytes`; returns the snapshot
/// count.
fn write_record(path: &Path, bytes: u64, sampled: bool) -> u64 {
    let mut w =
        RecordWriter::create(path, &header(), WriterOptions { compress: false }).expect("create");
    let mut i = 0;
    while w.bytes_written() < bytes {
        if i % 1000 == 0 {
            w.write_event(&mappings(i)).expect("write");
        }
        w.write_snapshot(&snapshot(i, sampled)).expect("write");
        i += 1;
    }
    w.finish().expect("finish");
    i
}

/// Runs `udamon report ARGS FILE` and returns (seconds, peak RSS in KiB).
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its rusage"
)]
fn measure(udamon: &Path, args: &[&str], record: &Path) -> (f64, u64) {
    let start = Instant::now();
    let child = Command::new(udamon)
        .arg("report")
        .args(args)
        .arg(record)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run udamon");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with pointers to locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert!(
        pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "udamon report failed"
    );
    (start.elapsed().as_secs_f64(), usage.ru_maxrss as u64)
}

fn main() {
    let exe = std::env::current_exe().expect("own path");
    let udamon: PathBuf = exe.with_file_name("udamon");
    assert!(
        udamon.exists(),
        "build it first: cargo build --release -p udamon"
    );
    let dir = tempfile::tempdir_in(exe.parent().expect("target dir")).expect("temp dir");

    let mut records = Vec::new();
    for mib in [128u64, 1024] {
        let path = dir.path().join(format!("{mib}.data"));
        let snapshots = write_record(&path, mib << 20, false);
        records.push((mib, path, snapshots));
    }
    for (report, args) in [
        ("heatmap", &["heatmap", "--no-color"][..]),
        ("mappings", &["mappings"][..]),
    ] {
        println!("# udamon report {report} on large records (release build)\n");
        println!("| record | snapshots | regions per snapshot | time | MiB/s | peak RSS |");
        println!("|---:|---:|---:|---:|---:|---:|");
        let mut results = Vec::new();
        for (mib, path, snapshots) in &records {
            let (secs, rss_kib) = measure(&udamon, args, path);
            println!(
                "| {mib} MiB | {snapshots} | {REGIONS} | {secs:.1} s | {:.0} | {:.1} MiB |",
                *mib as f64 / secs,
                rss_kib as f64 / 1024.0
            );
            results.push((secs, rss_kib));
        }
        let (small, big) = (results[0], results[1]);
        println!("\nRatios (1 GiB / 128 MiB):");
        println!(
            "- time: {:.2} (8 = linear in the file size)",
            big.0 / small.0
        );
        println!(
            "- peak memory: {:.2} (1.0 = independent of the file size)\n",
            big.1 as f64 / small.1 as f64
        );
    }
    for (_, path, _) in &records {
        std::fs::remove_file(path).expect("remove record");
    }
    println!("\n# udamon report wss on a 128 MiB record of a sampled source (release build)\n");
    let path = dir.path().join("sampled.data");
    let snapshots = write_record(&path, 128 << 20, true);
    println!("{snapshots} snapshots of {REGIONS} regions; a sample in every accessed region\n");
    println!("| horizon | time | peak RSS |");
    println!("|---|---:|---:|");
    let mut times = Vec::new();
    for (name, args) in [
        ("0 (one window)", &["wss", "--horizon", "0"][..]),
        ("auto (the default)", &["wss"][..]),
    ] {
        let (secs, rss_kib) = measure(&udamon, args, &path);
        println!(
            "| {name} | {secs:.1} s | {:.1} MiB |",
            rss_kib as f64 / 1024.0
        );
        times.push(secs);
    }
    let open = || RecordReader::open(&path);
    let header = open().expect("the record").header().clone();
    let filter = WssFilter::default();
    let chosen =
        choose_horizon(&header, open, &filter, DistOptions::default().skip).expect("a horizon");
    println!(
        "\nRatio auto / one window: {:.2} (each horizon tried is a pass over the record; auto \
         chose {} s)",
        times[1] / times[0],
        chosen as f64 / 1e9
    );
}
