//! Every command example in README.md and docs/ runs: the `sh` blocks' `udamon` lines are run,
//! in order, against this build, in a directory holding the records and workload files they
//! name; a scheme file shown in the docs is recorded on a simulation. Lines that need a live
//! process the docs only stand for (`--pid 1234`, `./myservice`), a record only such a run
//! makes, and the service (`serve`, `ctl`) are skipped, each with its reason printed.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `file` as the docs name it, from the repository's root.
fn page(file: &Path) -> String {
    file.strip_prefix(repository())
        .unwrap_or(file)
        .display()
        .to_string()
}

/// README.md and every page under docs/.
fn doc_files() -> Vec<PathBuf> {
    let root = repository();
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The fenced blocks of `text` whose info string is `lang`, as (first line number, body).
fn blocks<'t>(text: &'t str, lang: &str) -> Vec<(usize, Vec<&'t str>)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, bool, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((i + 2, info.trim() == lang, Vec::new())),
            (Some(_), Some(_)) => {
                let (first, wanted, body) = open.take().unwrap();
                if wanted {
                    out.push((first, body));
                }
            }
            (Some((_, _, body)), None) => body.push(line),
            (None, None) => {}
        }
    }
    out
}

/// A command line of an example: the words before its comment and before a pipe into another
/// program (whose input is the command's output; the command itself is what is tested).
fn words(line: &str) -> Option<Vec<String>> {
    let command = line
        .split(" #")
        .next()
        .unwrap()
        .split(" | ")
        .next()
        .unwrap();
    let words = shlex::split(command.trim())?;
    (!words.is_empty()).then_some(words)
}

/// Why an example cannot run here, if it cannot.
fn skip_reason(words: &[String]) -> Option<&'static str> {
    if words[0] != "udamon" {
        return Some("not a udamon command (building and the test suite)");
    }
    if words.get(1).is_some_and(|w| w == "top") {
        return Some("top draws on a terminal: tests/cli_top.rs runs it in one (tmux)");
    }
    if matches!(words.get(1).map(String::as_str), Some("serve" | "ctl")) {
        return Some(
            "serve runs until stopped, and ctl talks to it: tests/cli_serve.rs runs them both",
        );
    }
    if words
        .iter()
        .any(|w| w == "1234" || w.starts_with("./myservice"))
    {
        return Some("pid 1234 and ./myservice stand for the reader's own process and program");
    }
    if words.iter().any(|w| w == "svc.data") {
        return Some("svc.data is made by the live recording above it");
    }
    if words.iter().any(|w| w == "live.data") {
        return Some(
            "live.data stands for a record of a live process (simulations have no mappings)",
        );
    }
    None
}

/// The files the examples read: `rec.data` (the demo), a workload file `my.cfg`, a damo record
/// `damon.data`, and the docs' scheme files, in a fresh directory.
fn inputs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        common::udamon()
            .current_dir(dir.path())
            .args(args)
            .assert()
            .success();
    };
    run(&["record", "--sim", "builtin:demo", "-o", "rec.data"]);
    fs::write(
        dir.path().join("my.cfg"),
        udamon_sim::builtin("stairs").unwrap(),
    )
    .unwrap();
    run(&["convert", "rec.data", "-o", "damon.data"]);
    dir
}

#[test]
fn every_command_example_runs() {
    let (mut ran, mut skipped) = (0, 0);
    for file in doc_files() {
        let text = fs::read_to_string(&file).unwrap();
        let dir = inputs();
        for (first, body) in blocks(&text, "sh") {
            for (i, line) in body.iter().enumerate() {
                let Some(mut words) = words(line) else {
                    continue;
                };
                let at = format!("{}:{}", page(&file), first + i);
                // `cargo run --release -- ARGS` is this binary with ARGS.
                if words.starts_with(&["cargo".into(), "run".into()]) {
                    let args = words.iter().position(|w| w == "--").map_or(0, |i| i + 1);
                    words = std::iter::once("udamon".to_string())
                        .chain(words[args..].iter().cloned())
                        .collect();
                }
                if let Some(why) = skip_reason(&words) {
                    eprintln!("skipped {at}: {line}\n  ({why})");
                    skipped += 1;
                    continue;
                }
                let out = common::udamon()
                    .current_dir(dir.path())
                    .env("COLUMNS", "100")
                    .args(&words[1..])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{at}: `{line}` failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                ran += 1;
            }
        }
    }
    eprintln!("{ran} examples ran, {skipped} skipped");
    assert!(ran >= 25, "the docs hold more examples than {ran}");
}

/// A scheme file shown in the docs records on a simulation: its watermarks, which read the
/// system's free memory, do not hold a simulation (which has none) paused.
#[test]
fn every_scheme_file_example_records_on_a_simulation() {
    let mut examples = 0;
    for file in doc_files() {
        let text = fs::read_to_string(&file).unwrap();
        for (first, body) in blocks(&text, "json") {
            let json = body.join("\n");
            if !json.trim_start().starts_with("[{\"action\"") {
                continue; // a record's event, not a scheme file
            }
            examples += 1;
            let dir = tempfile::tempdir().unwrap();
            let schemes = dir.path().join("schemes.json");
            fs::write(&schemes, &json).unwrap();
            let out = dir.path().join("s.data");
            common::udamon()
                .args(["record", "--sim", "builtin:demo", "--schemes"])
                .arg(&schemes)
                .arg("-o")
                .arg(&out)
                .assert()
                .success();
            let info = common::info(&out);
            let snapshots = info["nr_snapshots"].as_u64().unwrap();
            assert!(
                snapshots >= 200,
                "{}:{first}: {snapshots} snapshots of the demo's 240",
                page(&file)
            );
            let report = common::report_json(&["schemes"], &out);
            let tried = report["schemes"][0]["stats"]["nr_tried"].as_u64().unwrap();
            assert!(tried > 0, "the scheme ran: {report}");
        }
    }
    assert!(examples >= 1, "docs/schemes.md shows a scheme file");
}

/// Every option `udamon record --help` lists is in the user guide.
#[test]
fn the_guide_names_every_record_option() {
    let help = common::udamon()
        .args(["record", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let guide =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/user-guide.md"))
            .unwrap();
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let named = |flag: &str| {
        guide
            .match_indices(flag)
            .any(|(i, _)| !guide[i + flag.len()..].starts_with(is_name))
    };
    let flags: Vec<&str> = help
        .split(|c: char| !is_name(c))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .collect();
    assert!(flags.contains(&"--dry-run"), "{help}");
    let missing: Vec<&&str> = flags.iter().filter(|f| !named(f)).collect();
    assert!(missing.is_empty(), "not in docs/user-guide.md: {missing:?}");
}

/// Every report `udamon report --help` lists has its row in the user guide's table of reports.
#[test]
fn the_guide_lists_every_report() {
    let help = common::udamon()
        .args(["report", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let guide = fs::read_to_string(repository().join("docs/user-guide.md")).unwrap();
    let reports: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(reports.contains(&"schemes"), "{help}");
    for report in reports {
        assert!(
            guide.contains(&format!("| `{report}` |")),
            "report {report} has no row in docs/user-guide.md"
        );
    }
}

/// The image's footer says what a row and a column hold: time runs along x, so a column is a
/// span of time and a row a range of addresses.
#[test]
fn the_heatmap_footer_names_rows_and_columns_the_right_way_round() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.data");
    let svg = dir.path().join("map.svg");
    common::udamon()
        .args(["record", "--sim", "builtin:demo", "-o"])
        .arg(&rec)
        .assert()
        .success();
    common::udamon()
        .args(["report", "heatmap", "--resol", "100", "50", "-o"])
        .arg(&svg)
        .arg(&rec)
        .assert()
        .success();
    let svg = fs::read_to_string(&svg).unwrap();
    // 24 s over 100 columns; the demo's hottest range over 50 rows.
    assert!(
        svg.contains("240 ms per column; "),
        "{}",
        &svg[svg.len().saturating_sub(2000)..]
    );
    assert!(svg.contains(" per row; white"));
}
