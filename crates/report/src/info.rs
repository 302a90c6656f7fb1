//! What a record says about itself: the header (access source and why, intervals, host, start
//! time), the targets (the header's and those added while monitoring ran, each with its pid,
//! parent, command line, when it started and ended and its exit status), how many snapshots over
//! how long, region counts, what happened (events), and any damage the reader found.

use crate::human;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use udamon_record::model::{EventKind, Frame, Header, HostInfo, TargetInfo, Targets};

/// Notes listed in full; further ones are only counted.
const MAX_NOTES: usize = 10;

/// Smallest and largest of something seen across snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MinMax {
    pub min: u64,
    pub max: u64,
}

impl MinMax {
    fn add(slot: &mut Option<MinMax>, v: u64) {
        let m = slot.get_or_insert(MinMax { min: v, max: v });
        m.min = m.min.min(v);
        m.max = m.max.max(v);
    }
}

/// One target: who it is, its life and its regions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetSummary {
    pub target: u32,
    pub pid: Option<u32>,
    /// The target of the process that forked this one.
    pub parent: Option<u32>,
    /// The command line it started with (`None` for a target no frame announced).
    pub cmdline: Option<String>,
    /// The program it exec'd last, if it did: its command line (the kernel's 15-byte name of
    /// it in records that lack the command line).
    pub exec: Option<String>,
    /// When it joined monitoring (`None` for targets monitored from the start).
    pub added_ns: Option<u64>,
    /// When it exited or was dropped, if it did before monitoring stopped.
    pub ended_ns: Option<u64>,
    /// Its exit status, when known (a spawned command's; a forked process's is not).
    pub exit_status: Option<i32>,
    pub snapshots: usize,
    pub nr_regions: Option<MinMax>,
    /// Lowest start and highest end of its regions over the record.
    pub address_span: Option<MinMax>,
}

/// A lifecycle event, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Happening {
    pub time_ns: u64,
    pub what: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventSummary {
    pub total: usize,
    pub by_kind: BTreeMap<String, usize>,
    /// Exec, exit, dropped targets and the stop, in order.
    pub lifecycle: Vec<Happening>,
    /// The access source's counters as last reported.
    pub last_source_stats: Option<BTreeMap<String, u64>>,
    pub notes: Vec<Happening>,
    pub notes_left_out: usize,
    /// Whether a `stopped` event ended the record.
    pub stopped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InfoReport {
    pub header: Header,
    pub nr_snapshots: usize,
    pub first_start_ns: Option<u64>,
    pub last_end_ns: Option<u64>,
    pub duration_ns: u64,
    /// Regions per snapshot, all targets together.
    pub nr_regions: Option<MinMax>,
    /// Intervals in force across snapshots (they vary under interval auto-tuning).
    pub sample_us: Option<MinMax>,
    pub aggr_us: Option<MinMax>,
    pub targets: Vec<TargetSummary>,
    pub events: EventSummary,
    /// What the reader found wrong with the file, as it said it.
    pub damage: Vec<String>,
    /// Whether monitoring finished (the record ends with a `stopped` event): false while the
    /// monitor is still writing it ([`InfoReport::writer`]) and when it was killed (SIGKILL) or
    /// crashed. `None` for records not written by udamon (damo's), which have no such event.
    pub finished: Option<bool>,
    /// The monitor writing the record right now, if one is (the caller finds out: it is not in
    /// the record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<Writer>,
}

/// A monitor still writing a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Writer {
    /// Its process, when the system says.
    pub pid: Option<u32>,
}

/// Summarises the record; `damage` is whatever the reader reported about the file.
pub fn info(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    damage: Vec<String>,
) -> InfoReport {
    let mut report = InfoReport {
        header: header.clone(),
        nr_snapshots: 0,
        first_start_ns: None,
        last_end_ns: None,
        duration_ns: 0,
        nr_regions: None,
        sample_us: None,
        aggr_us: None,
        targets: Vec::new(),
        events: EventSummary::default(),
        damage,
        finished: None,
        writer: None,
    };
    let mut known = Targets::new(header);
    let mut targets: BTreeMap<u32, TargetSummary> = (0..header.targets.len() as u32)
        .map(|t| {
            (
                t,
                TargetSummary::new(t, header.targets.get(t as usize), None),
            )
        })
        .collect();
    for frame in frames {
        known.observe(&frame);
        match frame {
            Frame::Snapshot(s) => {
                report.nr_snapshots += 1;
                report.first_start_ns.get_or_insert(s.start_ns);
                report.last_end_ns = Some(s.end_ns);
                MinMax::add(&mut report.nr_regions, s.nr_regions() as u64);
                MinMax::add(&mut report.sample_us, s.sample_us);
                MinMax::add(&mut report.aggr_us, s.aggr_us);
                for t in &s.targets {
                    let sum = targets
                        .entry(t.target)
                        .or_insert_with(|| TargetSummary::new(t.target, known.get(t.target), None));
                    sum.snapshots += 1;
                    MinMax::add(&mut sum.nr_regions, t.regions.len() as u64);
                    let lo = t.regions.iter().map(|r| r.start).min();
                    let hi = t.regions.iter().map(|r| r.end).max();
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        MinMax::add(&mut sum.address_span, lo);
                        MinMax::add(&mut sum.address_span, hi);
                    }
                }
            }
            Frame::Event(e) => {
                life(&mut targets, &known, e.time_ns, &e.kind);
                add_event(&mut report.events, e.time_ns, e.kind);
            }
        }
    }
    report.duration_ns = match (report.first_start_ns, report.last_end_ns) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    report.targets = targets.into_values().collect();
    report.finished = written_by_udamon(header).then_some(report.events.stopped);
    report
}

/// Whether udamon wrote the header: records read from damo (and headers salvaged from damaged
/// records) leave its version empty, and their seed, region bounds, host and start time are
/// unknown rather than the zeros and defaults they hold.
fn written_by_udamon(header: &Header) -> bool {
    !header.udamon_version.is_empty()
}

/// A fact of the header, or `unknown` where the record did not say (an empty string, a 0).
fn known<T: PartialEq + Default + ToString>(value: T) -> String {
    if value == T::default() {
        "unknown".to_string()
    } else {
        value.to_string()
    }
}

impl TargetSummary {
    fn new(target: u32, info: Option<&TargetInfo>, added_ns: Option<u64>) -> Self {
        TargetSummary {
            target,
            pid: info.and_then(|i| i.pid),
            parent: info.and_then(|i| i.parent),
            cmdline: info.map(|i| i.cmdline.clone()),
            exec: None,
            added_ns,
            ended_ns: None,
            exit_status: None,
            snapshots: 0,
            nr_regions: None,
            address_span: None,
        }
    }
}

/// What an event tells of a target's life: its start, exec and end.
fn life(
    targets: &mut BTreeMap<u32, TargetSummary>,
    known: &Targets,
    time_ns: u64,
    kind: &EventKind,
) {
    let target = match *kind {
        EventKind::TargetAdded { target, .. }
        | EventKind::Exec { target, .. }
        | EventKind::Exit { target, .. }
        | EventKind::TargetDropped { target, .. } => target,
        _ => return,
    };
    let sum = targets
        .entry(target)
        .or_insert_with(|| TargetSummary::new(target, known.get(target), None));
    match kind {
        EventKind::TargetAdded { .. } => {
            *sum = TargetSummary::new(target, known.get(target), Some(time_ns));
        }
        EventKind::Exec { .. } => sum.exec = kind.exec_command().map(str::to_string),
        EventKind::Exit { status, .. } => {
            sum.ended_ns = Some(time_ns);
            sum.exit_status = *status;
        }
        _ => {
            sum.ended_ns.get_or_insert(time_ns);
        }
    }
}

fn add_event(sum: &mut EventSummary, time_ns: u64, kind: EventKind) {
    sum.total += 1;
    let exec_command = kind.exec_command().map(str::to_string);
    let name = match &kind {
        EventKind::TargetAdded { .. } => "target_added",
        EventKind::MappingsChanged { .. } => "mappings_changed",
        EventKind::Mappings { .. } => "mappings",
        EventKind::Resident { .. } => "resident",
        EventKind::Exec { .. } => "exec",
        EventKind::Exit { .. } => "exit",
        EventKind::TargetDropped { .. } => "target_dropped",
        EventKind::SourceStats { .. } => "source_stats",
        EventKind::SchemeStats { .. } => "scheme_stats",
        EventKind::SchemeTriedRegions { .. } => "scheme_tried_regions",
        EventKind::TargetMemory { .. } => "target_memory",
        EventKind::Referenced { .. } => "referenced",
        EventKind::Stopped { .. } => "stopped",
        EventKind::Note { .. } => "note",
        EventKind::Samples { .. } => "samples",
        EventKind::Stacks { .. } => "stacks",
        EventKind::Truth { .. } => "truth",
    };
    *sum.by_kind.entry(name.to_string()).or_default() += 1;
    let what = match kind {
        EventKind::MappingsChanged { .. }
        | EventKind::Mappings { .. }
        | EventKind::Resident { .. }
        | EventKind::SchemeStats { .. }
        | EventKind::SchemeTriedRegions { .. }
        | EventKind::TargetMemory { .. }
        | EventKind::Referenced { .. }
        | EventKind::Samples { .. }
        | EventKind::Stacks { .. }
        | EventKind::Truth { .. } => None,
        EventKind::TargetAdded {
            target,
            pid,
            parent,
            cmdline,
        } => {
            let pid = pid.map_or_else(String::new, |p| format!(" pid {p}"));
            let by = parent.map_or_else(String::new, |p| format!(", forked by target {p}"));
            let cmdline = human::one_line(&cmdline, human::TEXT_CHARS);
            Some(format!("target {target} added:{pid} {cmdline}{by}"))
        }
        EventKind::Exec { target, .. } => Some(format!(
            "target {target} exec'd {}",
            human::one_line(
                exec_command.as_deref().unwrap_or_default(),
                human::TEXT_CHARS
            )
        )),
        EventKind::Exit { target, status } => Some(match status {
            Some(s) => format!("target {target} exited with status {s}"),
            None => format!("target {target} exited"),
        }),
        EventKind::TargetDropped { target, reason } => Some(format!(
            "target {target} dropped: {}",
            human::one_line(&reason, human::TEXT_CHARS)
        )),
        EventKind::SourceStats { counters } => {
            sum.last_source_stats = Some(counters);
            None
        }
        EventKind::Stopped { reason } => {
            sum.stopped = true;
            Some(format!(
                "monitoring stopped: {}",
                human::one_line(&reason, human::TEXT_CHARS)
            ))
        }
        EventKind::Note { text } => {
            if sum.notes.len() < MAX_NOTES {
                sum.notes.push(Happening {
                    time_ns,
                    what: human::one_line(&text, human::TEXT_CHARS),
                });
            } else {
                sum.notes_left_out += 1;
            }
            None
        }
    };
    if let Some(what) = what {
        sum.lifecycle.push(Happening { time_ns, what });
    }
}

fn range_text(m: Option<MinMax>, fmt: impl Fn(u64) -> String) -> String {
    match m {
        None => "none".to_string(),
        Some(m) if m.min == m.max => fmt(m.min),
        Some(m) => format!("{} to {}", fmt(m.min), fmt(m.max)),
    }
}

/// One line per target: `N: pid P (forked by target T), CMDLINE; from A to B, exit status S; in
/// K snapshots, ...`, where a target that exec'd is named by what it exec'd last (`X, exec'd
/// from CMDLINE`), as the other reports name it.
fn render_target(out: &mut String, s: &TargetSummary) {
    let pid = s.pid.map_or_else(|| "-".to_string(), |p| p.to_string());
    let _ = write!(out, "  {}: pid {pid}", s.target);
    if let Some(p) = s.parent {
        let _ = write!(out, " (forked by target {p})");
    }
    let started = s.cmdline.as_deref().map_or_else(
        || "(never announced)".to_string(),
        |c| human::one_line(c, human::TEXT_CHARS),
    );
    match &s.exec {
        Some(exec) => {
            let exec = human::one_line(exec, human::TEXT_CHARS);
            let _ = write!(out, ", {exec}, exec'd from {started}");
        }
        None => {
            let _ = write!(out, ", {started}");
        }
    }
    if s.added_ns.is_some() || s.ended_ns.is_some() {
        let at = |t: Option<u64>, none: &str| t.map_or(none.to_string(), human::duration);
        let _ = write!(
            out,
            "; from {} to {}",
            at(s.added_ns, "the start"),
            at(s.ended_ns, "the end")
        );
    }
    match (s.ended_ns, s.exit_status) {
        (Some(_), Some(status)) => {
            let _ = write!(out, ", exit status {status}");
        }
        (Some(_), None) => {
            let _ = write!(out, ", exit status unknown");
        }
        _ => {}
    }
    if s.snapshots == 0 {
        let _ = match (s.added_ns, s.ended_ns) {
            // A helper a monitored process ran for a few milliseconds.
            (Some(added), Some(ended)) => write!(
                out,
                "; gone within {}, before its first snapshot: not monitored",
                human::duration(ended.saturating_sub(added))
            ),
            _ => write!(out, "; in no snapshot"),
        };
    } else {
        let _ = write!(
            out,
            "; in {} snapshots, {} regions",
            s.snapshots,
            range_text(s.nr_regions, |v| v.to_string())
        );
        if let Some(span) = s.address_span {
            let _ = write!(
                out,
                ", addresses {}-{}",
                human::hex(span.min),
                human::hex(span.max)
            );
        }
    }
    out.push('\n');
}

pub fn render_text(report: &InfoReport) -> String {
    let mut out = String::new();
    header_text(&mut out, &report.header);
    let _ = writeln!(out, "targets:");
    for s in &report.targets {
        render_target(&mut out, s);
    }
    snapshots_text(&mut out, report);
    events_text(&mut out, &report.events);
    state_text(&mut out, report);
    out
}

/// What the header says: the writer, the access source, the intervals, the host.
fn header_text(out: &mut String, h: &Header) {
    let us = |v: u64| human::duration(v.saturating_mul(1000));
    let udamon = written_by_udamon(h);
    if udamon {
        let _ = writeln!(
            out,
            "record format {} written by udamon {}",
            h.format_version, h.udamon_version
        );
    }
    let _ = writeln!(
        out,
        "access source: {} ({})",
        h.access_source.name,
        human::one_line(&h.access_source.reason, human::TEXT_CHARS)
    );
    let known_us = |v: u64| if v == 0 { known(v) } else { us(v) };
    let _ = write!(
        out,
        "intervals: sample {}, aggr {}, update {}",
        known_us(h.intervals.sample_us),
        known_us(h.intervals.aggr_us),
        known_us(h.intervals.update_us),
    );
    if udamon {
        let _ = write!(
            out,
            "; regions {} to {}; seed {}",
            h.min_nr_regions, h.max_nr_regions, h.seed
        );
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "started: {}",
        if h.start_time_unix_ns == 0 {
            known(0)
        } else {
            human::utc_datetime(h.start_time_unix_ns)
        }
    );
    let host = &h.host;
    if host == &HostInfo::default() {
        let _ = writeln!(out, "host: unknown");
    } else {
        let size = |v: u64| if v == 0 { known(v) } else { human::size(v) };
        let _ = writeln!(
            out,
            "host: {} (kernel {}, {} cpus, page size {}, memory {})",
            known(host.hostname.as_str()),
            known(host.kernel.as_str()),
            known(host.nr_cpus),
            size(host.page_size),
            size(host.mem_total_bytes)
        );
    }
}

/// How many snapshots, over how long, and the ranges of their regions and intervals.
fn snapshots_text(out: &mut String, report: &InfoReport) {
    let us = |v: u64| human::duration(v.saturating_mul(1000));
    let _ = writeln!(
        out,
        "snapshots: {} over {}",
        report.nr_snapshots,
        human::duration(report.duration_ns)
    );
    if report.nr_snapshots > 0 {
        let _ = writeln!(
            out,
            "regions per snapshot: {}",
            range_text(report.nr_regions, |v| v.to_string())
        );
        let _ = writeln!(
            out,
            "intervals in snapshots: sample {}, aggr {}",
            range_text(report.sample_us, us),
            range_text(report.aggr_us, us)
        );
    }
}

/// The events by kind, the lifecycle and the notes, and the access source's last counters.
fn events_text(out: &mut String, ev: &EventSummary) {
    let kinds: Vec<String> = ev.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let _ = writeln!(
        out,
        "events: {}{}",
        ev.total,
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        }
    );
    for item in ev.lifecycle.iter().chain(&ev.notes) {
        let _ = writeln!(out, "  at {}: {}", human::duration(item.time_ns), item.what);
    }
    if ev.notes_left_out > 0 {
        let _ = writeln!(out, "  ... and {} more notes", ev.notes_left_out);
    }
    if let Some(counters) = &ev.last_source_stats {
        let list: Vec<String> = counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "access source counters: {}", list.join(", "));
    }
}

/// Whether the record is whole: still written, unfinished, or damaged.
fn state_text(out: &mut String, report: &InfoReport) {
    if let Some(writer) = report.writer {
        let by = writer
            .pid
            .map(|p| format!(" (pid {p})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "still being written: a monitor{by} is writing this record now; it holds what was \
             written so far"
        );
    } else if report.finished == Some(false) {
        let _ = writeln!(
            out,
            "unfinished: no stop event; the monitor was killed (e.g. by SIGKILL) or crashed, and \
             the record holds what it wrote until then"
        );
    }
    if report.damage.is_empty() {
        let _ = writeln!(out, "damage: none found");
    } else {
        let _ = writeln!(out, "damage:");
        for d in &report.damage {
            let _ = writeln!(out, "  {d}");
        }
    }
}
