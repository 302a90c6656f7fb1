//! The errors a user meets keep the user guide's promise: one `udamon: error:` line that says
//! what is wrong and what to do; status 2 for a command line that does not parse, 1 for
//! anything else; `--help` and `--version` are not errors.

mod common;

use common::udamon;

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
