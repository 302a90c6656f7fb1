//! `udamon report code` on live records of the `code` workload (udamon-linux's
//! tests/workload/code.c, built `-O2 -g`): its two functions, one reading an anonymous buffer
//! and one writing a file's shared mapping, are named and told apart; a stripped copy still
//! names its mapping and says why functions are missing; an exec to another binary loaded at
//! the same address switches symbol tables; generated code is named from the perf map.

mod common;

use common::{
    build_workload_as, info, range_args, report_json, report_text, udamon, workload_area,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The workload with symbols, and a stripped copy.
fn code() -> &'static (PathBuf, PathBuf) {
    static PATHS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PATHS.get_or_init(|| {
        let with = build_workload_as("code", "debug", &["-O2", "-g"]);
        let stripped = with.with_file_name("code-stripped");
        let tmp = with.with_file_name(format!("code-stripped.{}", std::process::id()));
        let status = std::process::Command::new("strip")
            .arg("-o")
            .arg(&tmp)
            .arg(&with)
            .status()
            .expect("binutils' strip");
        assert!(status.success());
        std::fs::rename(&tmp, &stripped).unwrap();
        (with, stripped)
    })
}

/// Records `program ARGS` with cpuclock (no privilege needed) into `dir/name`.
fn record(dir: &Path, name: &str, program: &Path, args: &[&str]) -> PathBuf {
    let out = dir.join(name);
    udamon()
        .args(["record", "--access-source", "cpuclock", "-o"])
        .arg(&out)
        .arg("--")
        .arg(program)
        .args(args)
        .assert()
        .success();
    out
}

/// The report's rows as (function, samples, reads, writes).
fn rows(report: &Value) -> Vec<(String, u64, u64, u64)> {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap_or("?").to_string(),
                f["samples"].as_u64().unwrap(),
                f["reads"].as_u64().unwrap(),
                f["writes"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn two_functions_on_two_buffers_are_named_and_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let areas = dir.path().join("areas");
    let rec = record(
        dir.path(),
        "rec",
        &code().0,
        &["run", "3", areas.to_str().unwrap()],
    );
    let (anon_start, anon_end) = range_args(workload_area(&areas, "anon"));
    let (file_start, file_end) = range_args(workload_area(&areas, "file"));

    let anon = report_json(&["code", "--address-range", &anon_start, &anon_end], &rec);
    let top = &rows(&anon)[0];
    assert_eq!(top.0, "read_anon_buffer", "{anon}");
    assert!(top.1 >= 20, "{anon}");
    assert_eq!((top.2, top.3), (top.1, 0), "loads only: {anon}");

    let file = report_json(&["code", "--address-range", &file_start, &file_end], &rec);
    let top = &rows(&file)[0];
    assert_eq!(top.0, "write_file_buffer", "{file}");
    assert!(top.1 >= 20, "{file}");
    assert_eq!((top.2, top.3), (0, top.1), "stores only: {file}");

    // So do the mappings, by name: the file's (deleted once mapped) and anonymous memory.
    let file = report_json(&["code", "--mapping", "/tmp/udamon-code-"], &rec);
    assert_eq!(rows(&file)[0].0, "write_file_buffer", "{file}");
    assert!(file["scope"].as_str().unwrap().contains("udamon-code-"));
    let anon = report_json(&["code", "--mapping", "[anon]"], &rec);
    assert_eq!(rows(&anon)[0].0, "read_anon_buffer", "{anon}");

    // The filters tell them apart too, over all of memory (each window's hottest regions, the
    // default, can be the written buffer's alone in every window of a short run).
    let all_memory = ["--address-range", "0", "0x7fffffffffff"];
    let writes = rows(&report_json(
        &[&["code", "--writes"][..], &all_memory].concat(),
        &rec,
    ));
    assert_eq!(writes[0].0, "write_file_buffer");
    let reads = rows(&report_json(
        &[&["code", "--reads"][..], &all_memory].concat(),
        &rec,
    ));
    assert_eq!(reads[0].0, "read_anon_buffer");
    assert!(
        reads.iter().all(|r| r.0 != "write_file_buffer"),
        "{reads:?}"
    );

    // The goal: at least 95 % of the samples of a binary with symbols are named.
    let all = report_json(&["code", "--address-range", "0", "0x7fffffffffff"], &rec);
    let named = all["named_share"].as_f64().unwrap();
    assert!(named >= 0.95, "{named}: {all}");
    assert_eq!(all["samples"], all["samples_recorded"], "{all}");

    // Every recovered sample is kept.
    let info = info(&rec);
    let recovered = &info["events"]["last_source_stats"]["recovered"];
    assert_eq!(&all["samples_recorded"], recovered, "{all}");

    // Threads and CPUs: the workload's one thread (its pid) took every sample, each on a CPU
    // of this machine.
    let pid = info["header"]["targets"][0]["pid"]
        .as_u64()
        .unwrap()
        .to_string();
    let everywhere = |args: &[&str]| {
        let mut all = vec!["code", "--address-range", "0", "0x7fffffffffff"];
        all.extend_from_slice(args);
        report_json(&all, &rec)["samples"].as_u64().unwrap()
    };
    let total = all["samples"].as_u64().unwrap();
    assert_eq!(everywhere(&["--tid", &pid]), total);
    assert_eq!(everywhere(&["--tid", "1"]), 0);
    let nr_cpus = info["header"]["host"]["nr_cpus"].as_u64().unwrap();
    let per_cpu: u64 = (0..nr_cpus)
        .map(|cpu| everywhere(&["--cpu", &cpu.to_string()]))
        .sum();
    assert_eq!(per_cpu, total);
}

#[test]
fn a_stripped_binary_names_its_mapping_and_says_why_functions_are_missing() {
    let dir = tempfile::tempdir().unwrap();
    let areas = dir.path().join("areas");
    let stripped = &code().1;
    let rec = record(
        dir.path(),
        "rec",
        stripped,
        &["run", "2", areas.to_str().unwrap()],
    );
    let text = report_text(&["code"], &rec);
    let object = stripped.to_str().unwrap();
    assert!(text.contains(&format!("? ({object})")), "{text}");
    assert!(
        text.contains(&format!("no function names in {object}: ")) && text.contains("stripped"),
        "{text}"
    );
}

#[test]
fn an_exec_switches_symbol_tables() {
    let dir = tempfile::tempdir().unwrap();
    let areas = dir.path().join("areas");
    let (with, stripped) = code();
    let rec = record(
        dir.path(),
        "rec",
        with,
        &[
            "exec",
            "2",
            areas.to_str().unwrap(),
            stripped.to_str().unwrap(),
        ],
    );
    // Both programs ran without address randomization, so the same IPs held named code
    // before the exec and unnamed code after it: each gets a site of its own.
    let raw = report_text(&["raw"], &rec);
    let mut named = std::collections::BTreeSet::new();
    let mut unnamed = std::collections::BTreeSet::new();
    for line in raw.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["kind"] != "samples" {
            continue;
        }
        for site in v["sites"].as_array().unwrap() {
            let ip = site["ip"].as_u64().unwrap();
            if site["object"] == with.to_str().unwrap() && site["function"].is_string() {
                named.insert(ip);
            } else if site["object"] == stripped.to_str().unwrap() {
                assert!(site["function"].is_null(), "{site}");
                unnamed.insert(ip);
            }
        }
    }
    assert!(
        named.intersection(&unnamed).next().is_some(),
        "no IP seen in both programs: {named:?} {unnamed:?}"
    );
    let functions = rows(&report_json(
        &["code", "--address-range", "0", "0x7fffffffffff"],
        &rec,
    ));
    assert!(functions.iter().any(|f| f.0 == "read_anon_buffer"));
    assert!(functions.iter().any(|f| f.0 == "?"), "{functions:?}");
}

/// The objects that hold the workload's two functions, and the mappings report's rows.
fn workload_names(rec: &Path) -> (Vec<String>, String) {
    let all = report_json(&["code", "--address-range", "0", "0x7fffffffffff"], rec);
    let mut objects: Vec<String> = all["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["function"]
                .as_str()
                .is_some_and(|f| f.ends_with("_buffer"))
        })
        .map(|f| f["object"].as_str().unwrap().to_string())
        .collect();
    objects.dedup();
    let text = report_text(&["mappings"], rec);
    let rows = text.lines().filter(|l| !l.starts_with('#'));
    (objects, rows.collect::<Vec<_>>().join("\n"))
}

/// As Debian's `/usr/bin/redis-server` is a link to `redis-check-rdb`: maps name the file, the
/// user ran the link, and the code sites, the mappings and the kernel's accessed bits per
/// mapping are named by the link.
#[test]
fn a_program_run_through_a_symbolic_link_is_named_by_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let areas = dir.path().join("areas");
    let link = dir.path().join("linked-code");
    std::os::unix::fs::symlink(&code().0, &link).unwrap();
    let rec = dir.path().join("rec");
    udamon()
        .args([
            "record",
            "--access-source",
            "cpuclock",
            "--referenced",
            "1s",
            "-o",
        ])
        .arg(&rec)
        .arg("--")
        .arg(&link)
        .args(["run", "3", areas.to_str().unwrap()])
        .assert()
        .success();
    let (objects, mappings) = workload_names(&rec);
    let link = link.to_str().unwrap();
    assert_eq!(objects, [link], "{mappings}");
    let file = code().0.to_str().unwrap();
    assert!(
        mappings.contains(link) && !mappings.contains(file),
        "{mappings}"
    );
    // So do the kernel's accessed bits per mapping.
    let referenced: Vec<String> = report_text(&["raw"], &rec)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|v| v["kind"] == "referenced")
        .flat_map(|v| v["mappings"].as_array().unwrap().clone())
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert!(referenced.iter().any(|n| n == link), "{referenced:?}");
    assert!(referenced.iter().all(|n| n != file), "{referenced:?}");
}

/// argv[0] is the program's to choose: it names the executable only when it is the same file,
/// and the path execve was given comes first. Both execs follow perl's, which passes the path
/// as given (bash's `exec` makes a relative one absolute).
#[test]
fn a_lying_argv0_does_not_rename_the_executable() {
    let dir = tempfile::tempdir().unwrap();
    let areas = dir.path().join("areas");
    let link = dir.path().join("linked-code");
    std::os::unix::fs::symlink(&code().0, &link).unwrap();
    // Another program that exists.
    let liar = code().1.to_str().unwrap();
    let run = |exec: &str| {
        let script = "chdir shift; my $path = shift; exec {$path} @ARGV or die \"$path: $!\"";
        let dir = dir.path().to_str().unwrap();
        let areas = areas.to_str().unwrap();
        let args = ["-e", script, dir, exec, liar, "run", "1", areas];
        workload_names(&record(dir.as_ref(), "rec", Path::new("perl"), &args))
    };

    let (objects, mappings) = run(link.to_str().unwrap());
    assert_eq!(objects, [link.to_str().unwrap()], "{mappings}");
    assert!(!mappings.contains(liar), "{mappings}");

    // A relative path says nothing once the working directory may have changed: argv[0] is
    // all there is, and it names another file.
    let (objects, mappings) = run("./linked-code");
    assert_eq!(objects, [code().0.to_str().unwrap()], "{mappings}");
    assert!(!mappings.contains(liar), "{mappings}");
}

#[test]
fn jit_code_is_named_from_the_perf_map() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record(dir.path(), "rec", &code().0, &["jit", "2"]);
    let report = report_json(&["code"], &rec);
    let top = &report["functions"][0];
    assert_eq!(top["function"], "jit_sum", "{report}");
    assert_eq!(top["object"], "[anon]", "{report}");
    assert!(top["samples"].as_u64().unwrap() >= 20, "{report}");
}

#[test]
fn a_record_without_samples_gets_a_one_line_error_saying_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let rec = common::sim_record(
        dir.path(),
        "sim.data",
        "builtin:demo",
        &["--duration", "2s"],
    );
    let out = udamon()
        .args(["report", "code"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(text.trim_end().lines().count(), 1, "{text}");
    assert!(
        text.contains("no samples") && text.contains("sampled source"),
        "{text}"
    );
}
