//! How the command line becomes monitoring settings: values that would make monitoring never
//! end (zero intervals, rates, durations) or record nothing (a duration shorter than one
//! window) are refused with one line before anything starts or any file is written, and the
//! defaults the help shows are the ones a record gets.

mod common;

use common::{report_json, sim_record, udamon};
use predicates::str::contains;

/// `udamon record ARGS -o DIR/r.data` fails with one line containing `why`, and writes no file.
fn refused(args: &[&str], why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.data");
    let assert = udamon()
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(&out)
        .assert()
        .failure()
        .stderr(contains(why));
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let error_lines = stderr.lines().filter(|l| l.contains("error")).count();
    assert_eq!(error_lines, 1, "{args:?}: {stderr}");
    assert!(!out.exists(), "{args:?} wrote {}", out.display());
}

#[test]
fn zero_intervals_are_refused() {
    let sim = ["--sim", "builtin:stairs"];
    refused(&[&sim[..], &["--sample-us", "0"]].concat(), "longer than 0");
    refused(&[&sim[..], &["--aggr-us", "0s"]].concat(), "longer than 0");
    refused(&[&sim[..], &["--update-us", "0"]].concat(), "longer than 0");
    refused(
        &[&sim[..], &["--monitoring_intervals", "0", "0", "0"]].concat(),
        "longer than 0",
    );
    refused(&[&sim[..], &["--duration", "0"]].concat(), "longer than 0");
}

/// A live command is not even started: it would create its marker file.
#[test]
fn live_monitoring_with_zero_values_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let marker = marker.to_str().unwrap();
    for flags in [
        &["--sample-us", "0"][..],
        &["--sample-rate", "0"],
        &["--duration", "10"],
    ] {
        let why = if flags[1] == "10" {
            "shorter than one aggregation interval"
        } else {
            "than 0"
        };
        refused(&[flags, &["--", "touch", marker]].concat(), why);
        assert!(
            !std::path::Path::new(marker).exists(),
            "{flags:?} ran the command"
        );
    }
}

#[test]
fn a_duration_without_a_unit_that_records_nothing_is_refused() {
    refused(
        &["--sim", "builtin:stairs", "--duration", "10"],
        "--duration 10us is shorter than one aggregation interval (100ms)",
    );
    let dir = tempfile::tempdir().unwrap();
    let out = sim_record(
        dir.path(),
        "r.data",
        "builtin:stairs",
        &["--duration", "1s"],
    );
    assert_eq!(report_json(&["info"], &out)["nr_snapshots"], 10);
}

/// The help's defaults for simulations are what a simulated record's header says.
#[test]
fn the_help_shows_the_defaults_a_simulation_gets() {
    let help = udamon().args(["record", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap().replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let dir = tempfile::tempdir().unwrap();
    let out = sim_record(
        dir.path(),
        "r.data",
        "builtin:stairs",
        &["--duration", "2s"],
    );
    let header = &report_json(&["info"], &out)["header"];
    let ms = |key: &str| header["intervals"][key].as_u64().unwrap() / 1000;
    let aggr = format!(
        "one snapshot of the regions per interval [default: {}ms for simulations",
        ms("aggr_us")
    );
    assert!(help.contains(&aggr), "{aggr} not in: {help}");
    let max = format!(
        "Upper bound on the number of regions [default: {} for simulations",
        header["max_nr_regions"]
    );
    assert!(help.contains(&max), "{max} not in: {help}");
}

/// Schemes whose watermarks never let them act (free memory is always above 0 %) hold
/// monitoring back for the whole run; `--duration` still ends it.
#[test]
fn the_duration_ends_a_run_waiting_for_the_watermarks() {
    let dir = tempfile::tempdir().unwrap();
    let schemes = dir.path().join("schemes.json");
    std::fs::write(
        &schemes,
        r#"[{"action": "pageout",
             "access_pattern": {"sz_bytes": {"min": "4 KiB", "max": "max"},
                                "nr_accesses": {"min": "0 %", "max": "0 %"},
                                "age": {"min": "5 s", "max": "max"}},
             "watermarks": {"metric": "free_mem_rate", "interval_us": "1 s",
                            "high_permil": "0 %", "mid_permil": "0 %", "low_permil": "0 %"}}]"#,
    )
    .unwrap();
    // A live process: watermarks read the host's free memory, which is above 0 ‰, so every
    // scheme is inactive and monitoring waits from the start. (A simulation has no free memory
    // to read, and its watermarks hold nothing back.)
    let out = dir.path().join("r.data");
    udamon()
        .args(["record", "--duration", "2s", "--schemes"])
        .arg(&schemes)
        .arg("-o")
        .arg(&out)
        .args(["--", "sleep", "4"])
        .assert()
        .success()
        .stderr(contains("monitoring waits: the watermarks of every scheme"))
        .stderr(contains("the requested duration elapsed"));
    // The record says why it holds no snapshots.
    let info = report_json(&["info"], &out);
    assert_eq!(info["events"]["by_kind"]["note"], 1, "{info}");
}
