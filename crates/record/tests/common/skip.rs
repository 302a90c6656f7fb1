//! Tests that skip (all or part of what they check) because the machine lacks something say
//! so here: on stderr, which cargo shows only for failing tests, and in a log that
//! `scripts/test` prints at its end, so that a green run tells what it did not check.
//!
//! Shared by every crate's tests (`#[path]`); the log is `target/tmp/skipped-tests.log`.

#![allow(dead_code)] // each test binary skips for its own reasons

use std::io::Write;

/// Where skips are logged: cargo's directory for tests' temporary files, `target/tmp`.
pub fn log_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.log")
}

/// Records that the running test skipped something, and why (a sentence: "the tick source
/// needs root").
pub fn skipped(why: &str) {
    skipped_to(&log_path(), why);
}

/// [`skipped`], logged to `log`.
pub fn skipped_to(log: &std::path::Path, why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    let binary = std::env::args()
        .next()
        .and_then(|a| {
            let name = std::path::Path::new(&a)
                .file_name()?
                .to_string_lossy()
                .into_owned();
            // Test binaries are NAME-HASH.
            Some(
                name.rsplit_once('-')
                    .map_or(name.clone(), |(n, _)| n.to_string()),
            )
        })
        .unwrap_or_default();
    let line = format!("{binary}::{test}: {}", why.replace('\n', " "));
    eprintln!("skipped: {line}");
    // One write per line with O_APPEND: test threads and binaries log at once.
    if let Ok(mut log) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = log.write_all(format!("{line}\n").as_bytes());
    }
}
