//! Every command that writes a file follows one rule (docs/user-guide.md, "Output files"): it
//! never writes over its input or into a directory's place, and keeps every previous output.

mod common;

use common::{sim_record, udamon};
use predicates::prelude::*;
use predicates::str::contains;
use std::fs;
use std::path::{Path, PathBuf};

/// A short simulated record at `dir/NAME`.
fn record(dir: &Path, name: &str) -> PathBuf {
    sim_record(dir, name, "builtin:stairs", &["--duration", "2s"])
}

fn one_line_error(out: &std::process::Output) -> String {
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn convert_refuses_its_own_input_however_it_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record(dir.path(), "v.data");
    let before = fs::read(&rec).unwrap();
    let link = dir.path().join("link.data");
    std::os::unix::fs::symlink(&rec, &link).unwrap();
    for (out, format) in [
        ("v.data", "json-compressed"),
        ("v.data", "udamon"),
        ("./v.data", "udamon"),
        ("link.data", "udamon"),
    ] {
        let run = udamon()
            .current_dir(dir.path())
            .args(["convert", "v.data", "--format", format, "-o", out])
            .output()
            .unwrap();
        let stderr = one_line_error(&run);
        assert!(stderr.contains("is the input"), "{out}: {stderr}");
        assert_eq!(fs::read(&rec).unwrap(), before, "{out} --format {format}");
    }
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 2, "nothing else written: {names:?}");
}

#[test]
fn record_refuses_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("kept"), "x").unwrap();
    let run = udamon()
        .args([
            "record",
            "--sim",
            "builtin:stairs",
            "--duration",
            "1s",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(one_line_error(&run).contains("is a directory"));
    assert!(out.join("kept").is_file());
    assert!(!dir.path().join("out.old").exists());
}

#[test]
fn every_command_keeps_every_previous_output() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record(dir.path(), "r.data");
    let first = fs::read(&rec).unwrap();
    record(dir.path(), "r.data");
    record(dir.path(), "r.data");
    assert_eq!(fs::read(dir.path().join("r.data.old")).unwrap(), first);
    assert!(dir.path().join("r.data.old.1").is_file(), "the second run");

    let png = dir.path().join("h.png");
    let json = dir.path().join("r.json_compressed");
    for _ in 0..2 {
        udamon()
            .args(["report", "heatmap"])
            .arg(&rec)
            .arg("-o")
            .arg(&png)
            .assert()
            .success();
        udamon()
            .arg("convert")
            .arg(&rec)
            .arg("-o")
            .arg(&json)
            .assert()
            .success();
    }
    for out in [&png, &json] {
        let mut old = out.clone().into_os_string();
        old.push(".old");
        assert_eq!(fs::read(out).unwrap(), fs::read(&old).unwrap());
    }
    udamon()
        .arg("convert")
        .arg(&rec)
        .arg("-o")
        .arg(&json)
        .assert()
        .success()
        .stderr(contains("kept the previous").and(contains(".old.1")));
}

#[test]
fn record_never_writes_over_the_files_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("stairs.cfg");
    fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../sim/workloads/stairs.cfg"),
        &workload,
    )
    .unwrap();
    let schemes = dir.path().join("schemes.json");
    fs::write(&schemes, r#"[{"action": "stat"}]"#).unwrap();
    for (sim, out) in [
        (workload.to_str().unwrap(), &workload),
        ("builtin:stairs", &schemes),
    ] {
        let before = fs::read(out).unwrap();
        udamon()
            .args(["record", "--sim", sim, "--duration", "1s", "--schemes"])
            .arg(&schemes)
            .arg("-o")
            .arg(out)
            .assert()
            .failure()
            .stderr(contains("is the input"));
        assert_eq!(
            fs::read(out).unwrap(),
            before,
            "{} is untouched",
            out.display()
        );
    }
}
