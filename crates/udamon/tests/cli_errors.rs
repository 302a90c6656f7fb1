//! The errors a user meets keep the user guide's promise: one `udamon: error:` line that says
//! what is wrong and what to do; status 2 for a command line that does not parse, 1 for
//! anything else; `--help` and `--version` are not errors.

mod common;
#[path = "../../record/tests/common/skip.rs"]
mod skip;

use common::{one_line_error, udamon};

/// Runs udamon with `args`; returns its exit status and stderr.
fn run(args: &[&str]) -> (i32, String) {
    let out = udamon().args(args).output().unwrap();
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `stderr` is exactly one line, the one starting `udamon: error:`.
fn one_error_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr:?}");
    assert!(lines[0].starts_with("udamon: error: "), "{stderr:?}");
    lines[0]
}

#[test]
fn usage_errors_are_one_line_with_status_2_and_clap_tips() {
    let (code, err) = run(&["record", "--pid", "abc"]);
    assert_eq!(code, 2);
    let line = one_error_line(&err);
    assert!(
        line.contains("invalid value 'abc' for '--pid <PID>'"),
        "{line}"
    );
    assert!(line.ends_with("see `udamon record --help`"), "{line}");

    let (code, err) = run(&["report", "acces"]);
    assert_eq!(code, 2);
    let line = one_error_line(&err);
    assert!(
        line.contains("a similar subcommand exists: 'access'"),
        "{line}"
    );
    assert!(line.ends_with("see `udamon report --help`"), "{line}");

    // clap lists missing arguments on lines of their own: they join the one line.
    let (code, err) = run(&["record", "--children"]);
    assert_eq!(code, 2);
    let line = one_error_line(&err);
    assert!(
        line.contains("the following required arguments were not provided: --pid <PID>"),
        "{line}"
    );

    let (code, err) = run(&["report", "nr_regions", "--no-such-flag"]);
    assert_eq!(code, 2);
    let line = one_error_line(&err);
    assert!(
        line.contains("unexpected argument '--no-such-flag'"),
        "{line}"
    );
    assert!(
        line.ends_with("see `udamon report nr_regions --help`"),
        "{line}"
    );
}

#[test]
fn help_and_version_succeed() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["record", "--help"],
        &["report", "-h"],
    ] {
        let out = udamon().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty(), "{args:?} prints to stdout");
        assert!(out.stderr.is_empty(), "{args:?}");
    }
}

/// An OS error is said once, not once by the error and again by its source.
#[test]
fn io_errors_say_the_os_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let cases: [&[&str]; 3] = [
        &["report", "info", missing],
        &["record", "--sim", missing, "-o", "/dev/null"],
        &["convert", missing, "-o", "/dev/null"],
    ];
    for args in cases {
        let (code, err) = run(args);
        assert_eq!(code, 1, "{args:?}");
        let line = one_error_line(&err);
        assert_eq!(
            line.matches("No such file or directory").count(),
            1,
            "{args:?}: {line}"
        );
        assert!(line.contains(missing), "names the file: {line}");
    }
}

/// A report that cannot be written (a full disk) says why once.
#[test]
fn write_errors_say_the_os_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.data");
    udamon()
        .args(["record", "--sim", "builtin:stairs", "-o"])
        .arg(&rec)
        .assert()
        .success();
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        skip::skipped("no /dev/full here");
        return;
    };
    for report in ["raw", "wss", "info"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_udamon"))
            .args(["report", report])
            .arg(&rec)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{report}");
        let err = String::from_utf8(out.stderr).unwrap();
        let line = one_error_line(&err);
        assert_eq!(
            line.matches("No space left on device").count(),
            1,
            "{report}: {line}"
        );
    }
}

#[test]
fn scheme_file_mistakes_name_the_file_scheme_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let schemes = dir.path().join("s.json");
    std::fs::write(&schemes, r#"[{"action": "stat"}, {"action": 7}]"#).unwrap();
    let out = dir.path().join("r.data");
    let (code, err) = run(&[
        "record",
        "--sim",
        "builtin:demo",
        "--schemes",
        schemes.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    let line = one_error_line(&err);
    assert!(
        line.contains("s.json: schemes[1]: action: invalid type: integer `7`, expected a string"),
        "{line}"
    );
}

/// The pids `/proc` shows, with their `/proc/PID/stat` text.
fn processes() -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            Some((
                pid,
                std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
            ))
        })
        .collect()
}

#[test]
fn a_kernel_thread_is_called_one() {
    // A kernel thread has PF_KTHREAD (0x200000) in stat's flags, the 7th field after the name.
    let kthread = processes().into_iter().find(|(_, stat)| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(6)?.parse::<u64>().ok())
            .is_some_and(|flags| flags & 0x0020_0000 != 0)
    });
    let Some((pid, _)) = kthread else {
        skip::skipped("no kernel thread is visible in this pid namespace");
        return;
    };
    let (code, err) = run(&["record", "--pid", &pid.to_string(), "-o", "/dev/null"]);
    assert_eq!(code, 1);
    let line = one_error_line(&err);
    assert!(
        line.contains(&format!(
            "process {pid} is a kernel thread: it has no user memory"
        )),
        "{line}"
    );
}

/// A process whose memory map this user may not read: the advice fits who is asking (root is
/// not told to run as root).
#[test]
fn a_refused_process_gets_advice_that_fits_the_user() {
    let refused = processes().into_iter().map(|(pid, _)| pid).find(|pid| {
        std::fs::read(format!("/proc/{pid}/maps"))
            .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
    });
    let Some(pid) = refused else {
        skip::skipped("this user may read every process's memory map here");
        return;
    };
    let (code, err) = run(&["record", "--pid", &pid.to_string(), "-o", "/dev/null"]);
    assert_eq!(code, 1);
    let line = one_error_line(&err);
    assert!(
        line.contains(&format!("no permission to read /proc/{pid}/maps")),
        "{line}"
    );
    if common::is_root() {
        assert!(
            !line.contains("run as"),
            "root is not told to run as root: {line}"
        );
        assert!(line.contains("refuses even root"), "{line}");
    } else {
        assert!(
            line.contains("run as the process's owner or as root"),
            "{line}"
        );
    }
}

/// The small ones: a command that is not there, an empty one, and values that would break the
/// one line (a file name with a newline and an escape sequence, a huge one).
#[test]
fn commands_and_values_that_would_mislead_are_named_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.data");
    let out = out.to_str().unwrap();
    let (code, err) = run(&["record", "-o", out, "--", "nosuchcommand-udamon"]);
    assert_eq!(code, 1);
    let line = one_error_line(&err);
    assert!(
        line.contains("cannot run nosuchcommand-udamon: not found in PATH"),
        "{line}"
    );
    let (code, err) = run(&["record", "-o", out, ""]);
    assert_eq!(code, 1);
    assert!(
        one_error_line(&err).contains("the command is empty"),
        "{err}"
    );
    let odd = dir.path().join("a\nb\x1b[31m");
    let (code, err) = run(&["report", "info", odd.to_str().unwrap()]);
    assert_eq!(code, 1);
    let line = one_error_line(&err);
    assert!(line.contains("a\\nb\\u{1b}[31m"), "{line}");
    let long = dir
        .path()
        .join("x".repeat(200))
        .join("y".repeat(200))
        .join("z".repeat(200));
    let long = long.to_str().unwrap().repeat(4);
    let (_, err) = run(&["report", "info", &long]);
    assert!(one_error_line(&err).chars().count() < 1100, "{err}");
}

/// A report run without naming its record looks for `udamon.data`; when there is none, the
/// error says that it looked for the default and how to name a record.
#[test]
fn a_report_without_its_record_says_it_looked_for_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = udamon()
        .current_dir(dir.path())
        .args(["report", "wss"])
        .output()
        .unwrap();
    let stderr = one_line_error(&out);
    assert!(
        stderr.contains("no record named udamon.data here") && stderr.contains("udamon record"),
        "{stderr}"
    );
}
