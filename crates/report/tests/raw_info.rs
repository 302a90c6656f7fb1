//! raw (JSON lines that parse back into the same frames) and info (header facts, counts, events,
//! damage).

mod common;

use common::*;
use udamon_record::model::{EventKind, Frame};
use udamon_report::info::{info, render_text};
use udamon_report::raw::write_raw;

#[test]
fn raw_lines_parse_back_into_the_frames() {
    let header = header(1);
    let frames = banded_frames();
    let mut out = Vec::new();
    let summary = write_raw(&header, frames.clone(), &mut out).unwrap();
    assert_eq!(summary.snapshots, NR_BANDED as usize);
    assert_eq!(summary.events, 2);
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + frames.len());
    let head: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(head["frame"], "header");
    assert_eq!(head["intervals"]["aggr_us"], AGGR_US);
    let back: Vec<Frame> = lines[1..]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(back, frames);
}

#[test]
fn info_summarises_the_record() {
    let header = header(2);
    let mut frames = banded_frames();
    frames.push(event(
        NR_BANDED * AGGR_NS,
        EventKind::Exit {
            target: 0,
            status: Some(0),
        },
    ));
    let damage = vec!["frame 61: checksum mismatch; the 1 frame after it was dropped".to_string()];
    let report = info(&header, frames, damage.clone());
    assert_eq!(report.nr_snapshots, NR_BANDED as usize);
    assert_eq!(report.duration_ns, NR_BANDED * AGGR_NS);
    // Regions per banded snapshot: 2 hot + 3 warm + 4 cold + 2 far.
    let regions = report.nr_regions.unwrap();
    assert_eq!((regions.min, regions.max), (11, 11));
    // Both of the header's targets, the second in no snapshot.
    assert_eq!(report.targets.len(), 2);
    assert_eq!(report.targets[1].snapshots, 0);
    let span = report.targets[0].address_span.unwrap();
    assert_eq!((span.min, span.max), (HOT.0, FAR.1));
    assert_eq!(report.events.total, 3);
    assert_eq!(report.events.by_kind["mappings_changed"], 1);
    assert_eq!(report.damage, damage);

    let text = render_text(&report);
    for want in [
        "access source: sim (simulated workload)",
        "sample 5 ms, aggr 100 ms, update 1 s",
        "2023-11-14 22:13:20 UTC",
        "snapshots: 60 over 6 s",
        "monitoring stopped: workload finished",
        "target 0 exited with status 0",
        "1: pid 1001, workload-1; in no snapshot",
        "checksum mismatch",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn info_of_an_empty_record_says_so() {
    let text = render_text(&info(&header(1), Vec::new(), Vec::new()));
    assert!(text.contains("snapshots: 0"), "{text}");
    assert!(text.contains("damage: none found"), "{text}");
}

#[test]
fn info_says_when_the_monitor_never_stopped() {
    let mut frames = banded_frames();
    let stopped = frames
        .iter()
        .position(|f| matches!(f, Frame::Event(e) if matches!(e.kind, EventKind::Stopped { .. })))
        .expect("the banded record ends with a stop");
    let finished = info(&header(1), frames.clone(), Vec::new());
    assert_eq!(finished.finished, Some(true));
    assert!(!render_text(&finished).contains("unfinished"));

    frames.remove(stopped);
    let killed = info(&header(1), frames, Vec::new());
    assert_eq!(killed.finished, Some(false));
    let text = render_text(&killed);
    assert!(
        text.contains("unfinished: no stop event; the monitor was killed (e.g. by SIGKILL)"),
        "{text}"
    );
}

#[test]
fn info_on_a_damo_record_makes_nothing_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.json");
    std::fs::write(
        &path,
        r#"[{"target_id": 0, "snapshots": [{"start_time": 0, "end_time": 100000000,
            "regions": [{"start": 4096, "end": 8192, "nr_accesses": {"samples": 1}}]}]}]"#,
    )
    .unwrap();
    let mut record = udamon_record::open_any(&path).unwrap();
    let header = record.header().clone();
    let report = info(&header, record.by_ref(), Vec::new());
    assert_eq!(report.finished, None, "damo records have no stop event");
    let text = render_text(&report);
    for made_up in [
        "1970",
        "seed",
        "host: ?",
        "udamon ",
        "unfinished",
        "regions 10 to",
    ] {
        assert!(!text.contains(made_up), "{made_up:?} in:\n{text}");
    }
    assert!(text.contains("started: unknown"), "{text}");
    assert!(text.contains("host: unknown"), "{text}");
}

#[test]
fn command_lines_stay_on_one_line() {
    let mut h = header(1);
    h.targets[0].cmdline = format!("sh -c 'echo a\necho b' {}", "x".repeat(1000));
    let frames = vec![event(
        1,
        EventKind::Exec {
            target: 0,
            comm: "a\nb".into(),
            command: None,
        },
    )];
    let text = render_text(&info(&h, frames, Vec::new()));
    let line = text
        .lines()
        .find(|l| l.contains("sh -c"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(r"'echo a\necho b'"), "{line}");
    assert!(line.contains('…') && line.len() < 400, "{line}");
    assert!(text.contains(r"exec'd a\nb"), "{text}");
}
