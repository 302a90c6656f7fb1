//! Reports on a record of a process tree: a target added while monitoring ran (announced by a
//! `TargetAdded` event, beyond the header's list) is named by pid and command like the header's,
//! and `info` tells each target's life.

mod common;

use common::*;
use udamon_record::model::{EventKind, Frame};
use udamon_report::access::{AccessOptions, access, render_text as access_text};
use udamon_report::dist::{DistOptions, RenderOptions, render_text as dist_text};
use udamon_report::heatmap::{HeatmapOptions, heatmap};
use udamon_report::info::{info, render_text as info_text};
use udamon_report::wss::{WssFilter, wss};

/// Target 0 (the header's) all along; target 1, forked by it, from snapshot 2 to its exit
/// after snapshot 4, with regions in its own address space.
fn tree_frames() -> Vec<Frame> {
    let parent = || (0, vec![region(HOT.0, HOT.1, 3), region(WARM.0, WARM.1, 0)]);
    let child = || (1, vec![region(FAR.0, FAR.0 + 8 * MIB, 7)]);
    let mut frames = Vec::new();
    for i in 0..2 {
        frames.push(Frame::Snapshot(snapshot(i, vec![parent()])));
    }
    frames.push(event(
        2 * AGGR_NS + 1,
        EventKind::TargetAdded {
            target: 1,
            pid: Some(2001),
            parent: Some(0),
            cmdline: "workload-0".into(),
        },
    ));
    frames.push(event(
        2 * AGGR_NS + 2,
        EventKind::Exec {
            target: 1,
            comm: "helper".into(),
            command: None,
        },
    ));
    for i in 2..5 {
        frames.push(Frame::Snapshot(snapshot(i, vec![parent(), child()])));
    }
    frames.push(event(
        5 * AGGR_NS,
        EventKind::Exit {
            target: 1,
            status: None,
        },
    ));
    frames.push(Frame::Snapshot(snapshot(5, vec![parent()])));
    frames
}

#[test]
fn info_lists_every_target_with_its_parent_and_life() {
    let h = header(1);
    let report = info(&h, tree_frames(), Vec::new());
    assert_eq!(report.targets.len(), 2);
    let child = &report.targets[1];
    assert_eq!(
        (child.pid, child.parent, child.added_ns, child.ended_ns),
        (
            Some(2001),
            Some(0),
            Some(2 * AGGR_NS + 1),
            Some(5 * AGGR_NS)
        )
    );
    assert_eq!(child.exec.as_deref(), Some("helper"));
    assert_eq!(child.snapshots, 3);
    let text = info_text(&report);
    for want in [
        "0: pid 1000, workload-0; in 6 snapshots",
        "1: pid 2001 (forked by target 0), helper, exec'd from workload-0; from 200 ms to \
         500 ms, exit status unknown; in 3 snapshots",
        "target 1 added: pid 2001 workload-0, forked by target 0",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn access_wss_and_heatmap_name_an_added_target_by_pid_and_command() {
    let h = header(1);
    let opts = AccessOptions {
        snapshot: 3,
        target: Some(1),
        ..AccessOptions::default()
    };
    let report = access(&h, tree_frames(), &opts).unwrap();
    assert_eq!(report.targets[0].pid, Some(2001));
    let text = access_text(&report);
    // Named by the program it exec'd, which the snapshot is of.
    assert!(text.contains("# target 1, pid 2001: helper"), "{text}");

    let opts = DistOptions {
        skip: 0,
        per_target: true,
        ..DistOptions::default()
    };
    let report = wss(&h, reading(tree_frames()), &WssFilter::default(), &opts).unwrap();
    let pids: Vec<_> = report.distributions.iter().map(|d| d.pid).collect();
    assert_eq!(pids, [Some(1000), Some(2001)]);
    let text = dist_text(&report, &RenderOptions::default());
    for want in [
        "# target 0, pid 1000: workload-0",
        "# target 1, pid 2001: helper",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }

    let opts = HeatmapOptions {
        target: Some(1),
        ..HeatmapOptions::terminal(None)
    };
    let map = heatmap(&h, || Ok::<_, std::io::Error>(tree_frames()), &opts).unwrap();
    assert_eq!(
        (map.pid, map.cmdline.as_deref()),
        (Some(2001), Some("helper"))
    );
}

/// A helper that a target ran for a few milliseconds, gone before a snapshot could hold it, is
/// listed as not monitored: it was listed as if it had been ("in 8 snapshots, 0 regions").
#[test]
fn info_says_a_helper_gone_before_any_snapshot_was_not_monitored() {
    let h = header(1);
    let parent = || (0, vec![region(HOT.0, HOT.1, 3)]);
    let frames = vec![
        event(
            AGGR_NS / 10,
            EventKind::TargetAdded {
                target: 1,
                pid: Some(2001),
                parent: Some(0),
                cmdline: "workload-0".into(),
            },
        ),
        event(
            AGGR_NS / 10 + 5_000_000,
            EventKind::Exit {
                target: 1,
                status: None,
            },
        ),
        Frame::Snapshot(snapshot(0, vec![parent()])),
        Frame::Snapshot(snapshot(1, vec![parent()])),
    ];
    let report = info(&h, frames, Vec::new());
    assert_eq!(report.targets[1].snapshots, 0);
    let text = info_text(&report);
    let line = text.lines().find(|l| l.contains("1: pid 2001")).unwrap();
    assert!(
        line.ends_with("gone within 5 ms, before its first snapshot: not monitored"),
        "{text}"
    );
    assert!(
        text.contains("0: pid 1000, workload-0; in 2 snapshots"),
        "{text}"
    );
}
