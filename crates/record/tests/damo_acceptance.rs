//! damo itself reads our json_compressed output. Runs when a damo executable is available: the
//! `UDAMON_DAMO` environment variable, else `damo` on PATH (tested with damo 3.4.3,
//! `pip install damo==3.4.3`). Otherwise it prints why it was skipped and passes.
//!
//! The `damo report` commands used here only read the given file (checked with
//! `strace -f -e trace=%file`: nothing under /sys/kernel/mm/damon is opened; damo lists
//! /sys/module at start-up to find DAMON modules, and runs `file -b` on the input).

mod common;
#[path = "common/skip.rs"]
mod skip;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use udamon_record::damo;
use udamon_record::model::{Frame, RegionStat};

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn damo_executable() -> Result<PathBuf, String> {
    let damo = match std::env::var_os("UDAMON_DAMO") {
        Some(p) => PathBuf::from(p),
        None => on_path("damo").ok_or("no UDAMON_DAMO and no damo on PATH")?,
    };
    // damo recognises its input with `file -b`.
    on_path("file").ok_or("damo needs the `file` command, which is not on PATH")?;
    Ok(damo)
}

/// Runs `damo <args>`, asserting success; returns its standard output.
fn run(damo: &Path, args: &[&str]) -> String {
    let out = Command::new(damo).args(args).output().expect("run damo");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "damo {}: {}\n{stdout}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn damo_reports_on_our_json_compressed() {
    let damo = match damo_executable() {
        Ok(d) => d,
        Err(why) => {
            skip::skipped(&format!("the damo acceptance check: {why}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();

    // 30 snapshots (damo's wss and nr_regions skip the first 20) of one process: 1 MiB accessed
    // in every sample, 3 MiB never.
    let f = dir.path().join("simple.json_compressed");
    let mut h = header(1);
    h.targets[0].pid = Some(1234);
    let frames: Vec<Frame> = (0..30u64)
        .map(|i| {
            let region = |start, end, nr_accesses| RegionStat {
                start,
                end,
                nr_accesses,
                age: i as u32,
                raw_samples: nr_accesses / 4,
                read_samples: nr_accesses / 4,
                write_samples: nr_accesses / 8,
                touched_bytes: None,
            };
            Frame::Snapshot(snapshot(
                i,
                vec![(
                    0,
                    vec![
                        region(0x1000_0000, 0x1010_0000, 20),
                        region(0x1010_0000, 0x1040_0000, 0),
                    ],
                )],
            ))
        })
        .collect();
    damo::write_json_compressed_file(&f, &h, || Ok(frames.clone())).unwrap();
    let f = f.to_str().unwrap();

    let access = run(&damo, &["report", "access", "-i", f]);
    assert!(access.contains("total size: 4.000 MiB"), "{access}");
    assert!(access.contains("access 200 hz"), "{access}");
    let wss = run(
        &damo,
        &[
            "report",
            "wss",
            "-i",
            f,
            "--raw_number",
            "--range",
            "50",
            "51",
            "1",
        ],
    );
    assert!(
        wss.lines()
            .any(|l| l.split_whitespace().take(2).eq(["50", "1048576"])),
        "{wss}"
    );
    let heatmap = run(&damo, &["report", "heatmap", "-i", f]);
    assert!(
        heatmap.contains("# x-axis: space [256.000000 MiB"),
        "{heatmap}"
    );
    assert!(heatmap.contains("(0.000-200.000 hz)"), "{heatmap}");
    let nr_regions = run(&damo, &["report", "nr_regions", "-i", f]);
    assert!(nr_regions.lines().any(|l| l == "50\t2"), "{nr_regions}");
    let raw = run(&damo, &["report", "access", "--raw_form", "-i", f]);
    assert!(raw.contains("000010000000-000010100000"), "{raw}");
    assert!(raw.contains("target_id: 1234"), "{raw}");

    // Two targets, events, and snapshots whose intervals auto-tuning changed.
    let f = dir.path().join("multi.json_compressed");
    let mut frames = sample_frames(30);
    for fr in frames.iter_mut().skip(10) {
        if let Frame::Snapshot(s) = fr {
            s.sample_us = 7_300;
            s.aggr_us = 146_000;
        }
    }
    damo::write_json_compressed_file(&f, &header(2), || Ok(frames.clone())).unwrap();
    let f = f.to_str().unwrap();
    for args in [
        &["report", "access", "-i", f][..],
        &["report", "wss", "-i", f],
        &["report", "heatmap", "-i", f],
        &["report", "nr_regions", "-i", f],
        &["report", "record_info", "-i", f],
    ] {
        let out = run(&damo, args);
        assert!(!out.trim().is_empty(), "damo {}: no output", args.join(" "));
    }
}
