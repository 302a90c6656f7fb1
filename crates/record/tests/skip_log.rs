//! What `scripts/test` prints at its end about skipped checks comes from the log that
//! `common/skip.rs` writes: one line per skip, naming the test binary, the test and why.

#[path = "common/skip.rs"]
mod skip;

#[test]
fn a_skip_is_logged_with_the_test_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skipped.log");
    let why = "a reason only this test gives";
    skip::skipped_to(&path, why);
    skip::skipped_to(&path, why);
    let log = std::fs::read_to_string(&path).unwrap();
    assert_eq!(log.lines().count(), 2, "appended: {log}");
    assert!(skip::log_path().starts_with(env!("CARGO_TARGET_TMPDIR")));
    let line = log
        .lines()
        .find(|l| l.ends_with(why))
        .unwrap_or_else(|| panic!("not logged: {log}"));
    assert_eq!(
        line,
        format!("skip_log::a_skip_is_logged_with_the_test_and_the_reason: {why}")
    );
}
