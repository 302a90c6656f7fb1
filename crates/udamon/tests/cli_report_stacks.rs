//! `udamon record --call-stacks` and `udamon report code --folded / --pprof` on live records of
//! the `stacks` workload (udamon-linux's tests/workload/stacks.c, built with frame pointers),
//! whose `caller_a` and `caller_b` call one `touch` on buffers of their own: only the call
//! stacks tell the two buffers' samples apart.

mod common;

use common::{build_workload_as, range_args, report_json, udamon, workload_area};
use prost::Message;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use udamon_report::pprof::Profile;

fn stacks() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        build_workload_as("stacks", "fp", &["-O2", "-g", "-fno-omit-frame-pointer"])
    })
}

/// The sources to record with: cpuclock (no privilege needed), and tick when root.
fn sources() -> Vec<&'static str> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut sources = vec!["cpuclock"];
    sources.extend(root.then_some("tick"));
    sources
}

/// Records the workload for 3 s with `source` into `dir/name`; the record and the workload's
/// buffers, as hex strings.
fn record(
    dir: &Path,
    name: &str,
    source: &str,
    extra: &[&str],
) -> (PathBuf, [(String, String); 2]) {
    let out = dir.join(name);
    let areas = dir.join(format!("{name}.areas"));
    udamon()
        .args(["record", "--access-source", source, "-o"])
        .arg(&out)
        .args(extra)
        .arg("--")
        .arg(stacks())
        .arg("3")
        .arg(&areas)
        .assert()
        .success();
    let area = |name| range_args(workload_area(&areas, name));
    (out, [area("a"), area("b")])
}

/// `report code FILE ARGS`: (stdout, stderr), which must succeed.
fn code(file: &Path, args: &[&str]) -> (String, String) {
    let out = udamon()
        .args(["report", "code"])
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// Folded stacks: the samples of each line's stack.
fn folded(text: &str) -> HashMap<String, u64> {
    text.lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// The samples of the stacks ending `...;caller;touch`.
fn through(stacks: &HashMap<String, u64>, caller: &str) -> u64 {
    let tail = format!(";{caller};touch");
    stacks
        .iter()
        .filter(|(s, _)| s.ends_with(&tail))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn call_stacks_tell_apart_the_callers_of_one_function() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<_> = sources()
        .into_iter()
        .map(|source| {
            (
                source,
                record(dir.path(), source, source, &["--call-stacks"]),
            )
        })
        .collect();
    for (source, (rec, [a, b])) in &records {
        for (range, mine, other) in [(a, "caller_a", "caller_b"), (b, "caller_b", "caller_a")] {
            let (text, stderr) = code(rec, &["--folded", "--address-range", &range.0, &range.1]);
            assert!(!stderr.contains("no call stacks"), "{stderr}");
            let stacks = folded(&text);
            let (mine, other) = (through(&stacks, mine), through(&stacks, other));
            // Sampling noise: a sample early in touch (before its frame is set up) skips a
            // frame.
            assert!(
                mine >= 20 && other * 10 <= mine,
                "{source} {range:?}: {text}"
            );
            assert!(
                text.contains(";main;"),
                "main calls both, outermost first: {text}"
            );
        }
    }

    // The pprof profile over buffer A: named functions, values that add up.
    let (_, (rec, [a, _])) = &records[0];
    let out = dir.path().join("a.pb.gz");
    code(
        rec,
        &[
            "--pprof",
            out.to_str().unwrap(),
            "--address-range",
            &a.0,
            &a.1,
        ],
    );
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let p = Profile::decode(&raw[..]).unwrap();
    let s = &p.string_table;
    let names: Vec<&str> = p
        .function
        .iter()
        .map(|f| s[f.name as usize].as_str())
        .collect();
    for f in ["touch", "caller_a", "main"] {
        assert!(names.contains(&f), "{names:?}");
    }
    let json = report_json(&["code", "--address-range", &a.0, &a.1], rec);
    let samples: i64 = p.sample.iter().map(|x| x.value[0]).sum();
    assert_eq!(samples as u64, json["samples"].as_u64().unwrap());
    let bytes: i64 = p.sample.iter().map(|x| x.value[1]).sum();
    let size =
        i64::from_str_radix(&a.1[2..], 16).unwrap() - i64::from_str_radix(&a.0[2..], 16).unwrap();
    assert!(bytes > 0 && bytes <= size, "{bytes} hot bytes of {size}");
}

#[test]
fn without_call_stacks_each_stack_is_the_sampled_function() {
    let dir = tempfile::tempdir().unwrap();
    let (rec, [a, _]) = record(dir.path(), "rec", "cpuclock", &[]);
    let (text, stderr) = code(&rec, &["--folded", "--address-range", &a.0, &a.1]);
    assert!(stderr.contains("no call stacks"), "{stderr}");
    let stacks = folded(&text);
    assert!(stacks.get("touch").is_some_and(|&n| n >= 20), "{text}");
    assert!(stacks.keys().all(|s| !s.contains(';')), "{text}");
}

#[test]
fn call_stacks_of_a_simulation_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = udamon()
        .args(["record", "--sim", "builtin:demo", "--call-stacks", "-o"])
        .arg(dir.path().join("sim.data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("drop --call-stacks"), "{stderr}");
    assert!(!dir.path().join("sim.data").exists(), "nothing recorded");
}
