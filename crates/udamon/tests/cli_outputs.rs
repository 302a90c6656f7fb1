//! Every command that writes a file follows one rule (docs/user-guide.md, "Output files"): it
//! never writes over its input or into a directory's place, and keeps every previous output.

mod common;
#[path = "../../record/tests/common/skip.rs"]
mod skip;

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

/// Outputs are made as any file the user writes: 0666 less the umask (they were 0600).
#[test]
fn outputs_respect_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let rec = record(dir.path(), "v.data");
    for (umask, mode) in [(0o022, 0o644), (0o027, 0o640)] {
        let png = dir.path().join(format!("heat-{umask:o}.png"));
        let converted = dir.path().join(format!("v-{umask:o}.json_compressed"));
        let runs: [&[&std::ffi::OsStr]; 2] = [
            &[
                "report".as_ref(),
                "heatmap".as_ref(),
                rec.as_os_str(),
                "-o".as_ref(),
                png.as_os_str(),
            ],
            &[
                "convert".as_ref(),
                rec.as_os_str(),
                "-o".as_ref(),
                converted.as_os_str(),
            ],
        ];
        for args in runs {
            let mut cmd = std::process::Command::new(udamon().get_program());
            cmd.args(args);
            // SAFETY: umask is async-signal-safe and cannot fail.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(umask);
                    Ok(())
                });
            }
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for file in [&png, &converted] {
            let got = fs::metadata(file).unwrap().permissions().mode() & 0o777;
            assert_eq!(got, mode, "{} under umask {umask:o}", file.display());
        }
    }
}

/// Root writing into a shared directory (sticky, like /tmp) where another user planted a link
/// to a file of root's, or a file of their own, at the output's name: neither is followed nor
/// replaced, and the error says why in one line.
#[test]
fn outputs_refuse_what_another_user_planted() {
    use std::os::unix::fs::PermissionsExt;
    if unsafe { libc::geteuid() } != 0 {
        skip::skipped("planting another user's files needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = record(dir.path(), "v.data");
    let victim = dir.path().join("shadow");
    fs::write(&victim, "root's secret").unwrap();
    let shared = dir.path().join("tmp");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let link = shared.join("r.data");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let planted = shared.join("heat.png");
    fs::write(&planted, "").unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    let runs: [Vec<&std::ffi::OsStr>; 3] = [
        vec![
            "record".as_ref(),
            "--sim".as_ref(),
            "builtin:stairs".as_ref(),
            "--duration".as_ref(),
            "1s".as_ref(),
            "-o".as_ref(),
            link.as_os_str(),
        ],
        vec![
            "convert".as_ref(),
            rec.as_os_str(),
            "-o".as_ref(),
            link.as_os_str(),
        ],
        vec![
            "report".as_ref(),
            "heatmap".as_ref(),
            rec.as_os_str(),
            "-o".as_ref(),
            planted.as_os_str(),
        ],
    ];
    for args in runs {
        let out = udamon().args(&args).output().unwrap();
        let stderr = one_line_error(&out);
        assert!(stderr.contains("another user's"), "{stderr}");
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's secret");
    assert!(!dir.path().join("shadow.old").exists());
    assert_eq!(fs::metadata(&planted).unwrap().len(), 0);
}

/// A record names processes (and with `--host`, physical frames): it is its user's alone.
#[test]
fn records_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let rec = record(dir.path(), "v.data");
    assert_eq!(
        fs::metadata(&rec).unwrap().permissions().mode() & 0o777,
        0o600
    );
}
