//! `report code`: the functions whose instructions touched the hot memory, from the samples a
//! sampled source recorded (each with its data address, code site, thread, CPU, and whether
//! it read or wrote; see `samples` in the record format).
//!
//! By default the memory is each window's hottest regions: those whose access rate is at least
//! [`HOT_SHARE`] of the window's highest. A window's samples frame follows its snapshot, so one
//! pass pairs them, keeping only each target's last snapshot. An address range replaces the
//! hottest regions. Memory is bounded by the code the record names (its sites and functions),
//! never by its length.

use crate::mappings::Layouts;
use crate::time_window::TimeWindow;
use crate::{ReportError, Result, human};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use udamon_core::AddrRange;
use udamon_record::model::{CodeSite, Event, EventKind, Frame, RegionStat, SampleFact};

/// A region is among a window's hottest when its access rate is at least this share of the
/// window's highest.
pub const HOT_SHARE: f64 = 0.5;

/// Which samples count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeOptions {
    /// Data addresses in this range instead of the hottest regions.
    pub address: Option<AddrRange>,
    /// The mappings whose name contains this (`[heap]`, `libc`, ...) instead of the hottest
    /// regions, as the record's `mappings` events give them.
    pub mapping: Option<String>,
    /// Windows overlapping this time.
    pub time_ns: Option<TimeWindow>,
    /// Only these threads / CPUs (empty: all).
    pub tids: Vec<u32>,
    pub cpus: Vec<u32>,
    /// Only samples that read / that wrote (both: either).
    pub reads: bool,
    pub writes: bool,
}

/// One function (or, without a name, one mapping) and the samples of its instructions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Why there is no function name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    pub samples: u64,
    /// Of the samples in scope.
    pub share: f64,
    /// Samples that read (including read-modify-writes), and that wrote.
    pub reads: u64,
    pub writes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CodeReport {
    /// What memory was looked at, in words.
    pub scope: String,
    /// Every sample the record holds, and those in scope and through the filters.
    pub samples_recorded: u64,
    pub samples: u64,
    /// Of `samples`: the share whose instruction has a function name.
    pub named_share: f64,
    /// By samples, most first.
    pub functions: Vec<FunctionRow>,
}

#[derive(Default)]
struct Count {
    samples: u64,
    reads: u64,
    writes: u64,
}

/// Where a site's samples add up: its function in its object, or the object alone.
type Key = (Option<String>, Option<String>);

/// The report over `frames`; fails when they hold no samples.
pub fn code(frames: impl IntoIterator<Item = Frame>, opts: &CodeOptions) -> Result<CodeReport> {
    let mut tally = Tally::default();
    let walked = walk(frames, opts, |hit, _| tally.add(hit))?;
    Ok(tally.report(&walked))
}

/// The code report of a record that is still growing (a live view): frames go in as they
/// come, and the report covers those seen so far (a window's samples count once the frame
/// after them has come, which may carry their call stacks).
pub struct LiveCode {
    walker: Walker,
    tally: Tally,
}

impl LiveCode {
    pub fn new(opts: &CodeOptions) -> LiveCode {
        LiveCode {
            walker: Walker::new(opts),
            tally: Tally::default(),
        }
    }

    pub fn observe(&mut self, frame: Frame) {
        let tally = &mut self.tally;
        self.walker.feed(frame, &mut |hit, _| tally.add(hit));
    }

    /// The report so far; `None` before the first sample.
    pub fn report(&self) -> Option<CodeReport> {
        (self.walker.walked.recorded > 0).then(|| self.tally.report(&self.walker.walked))
    }
}

/// Samples counted by function.
#[derive(Default)]
struct Tally {
    counts: HashMap<Key, Count>,
    missing: HashMap<Key, String>,
}

impl Tally {
    fn add(&mut self, hit: &Hit<'_>) {
        let site = hit.site;
        let key = (
            site.and_then(|c| c.function.clone()),
            site.and_then(|c| c.object.clone()),
        );
        let count = self.counts.entry(key.clone()).or_default();
        count.samples += 1;
        count.reads += hit.sample.access.reads() as u64;
        count.writes += hit.sample.access.writes() as u64;
        if key.0.is_none() && !self.missing.contains_key(&key) {
            let why = site.map_or_else(
                || LOST_SITE.into(),
                |c| c.missing.clone().unwrap_or_default(),
            );
            self.missing.insert(key, why);
        }
    }

    fn report(&self, walked: &Walked) -> CodeReport {
        let in_scope = walked.samples;
        let named: u64 = self
            .counts
            .iter()
            .filter(|(k, _)| k.0.is_some())
            .map(|(_, c)| c.samples)
            .sum();
        let share = |n: u64| n as f64 / in_scope.max(1) as f64;
        let mut functions: Vec<FunctionRow> = self
            .counts
            .iter()
            .map(|(key, c)| FunctionRow {
                missing: self.missing.get(key).cloned(),
                function: key.0.clone(),
                object: key.1.clone(),
                samples: c.samples,
                share: share(c.samples),
                reads: c.reads,
                writes: c.writes,
            })
            .collect();
        functions.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.function.cmp(&b.function))
                .then_with(|| a.object.cmp(&b.object))
        });
        CodeReport {
            scope: walked.scope.clone(),
            samples_recorded: walked.recorded,
            samples: in_scope,
            named_share: share(named),
            functions,
        }
    }
}

/// Why a sample's site has no description.
pub(crate) const LOST_SITE: &str = "the record lost this code site's description (damage)";

/// One sample in scope, as [`walk`] hands it over.
pub(crate) struct Hit<'a> {
    pub sample: &'a SampleFact,
    /// Its code site; `None` when the record lost the site's description.
    pub site: Option<&'a CodeSite>,
    /// The code-site indexes of its callers, innermost first; `None` when the record has no
    /// call stack for it.
    pub callers: Option<&'a [u32]>,
    /// Its share of the memory in scope: the bytes of the part of its region (in its window's
    /// snapshot) that lies in scope, divided among the samples in scope that fell there. Over
    /// a window these add up to the memory in scope that samples touched.
    pub bytes: f64,
}

/// What [`walk`] saw besides the samples in scope.
pub(crate) struct Walked {
    /// The memory looked at, in words.
    pub scope: String,
    /// Every sample the record holds, and those in scope and through the filters.
    pub recorded: u64,
    pub samples: u64,
    /// Windows whose samples were looked at.
    pub windows: u64,
    /// Whether the record keeps call stacks.
    pub stacks: bool,
}

/// The record's code sites and call stacks as far as it has been read.
#[derive(Default)]
pub(crate) struct Tables {
    pub sites: HashMap<u32, CodeSite>,
    pub stacks: HashMap<u32, Vec<u32>>,
}

/// Hands every sample of `frames` in scope and through `opts`' filters to `visit`, with the
/// tables that name its site and callers; fails when the frames hold no samples.
pub(crate) fn walk(
    frames: impl IntoIterator<Item = Frame>,
    opts: &CodeOptions,
    mut visit: impl FnMut(&Hit<'_>, &Tables),
) -> Result<Walked> {
    let mut w = Walker::new(opts);
    for frame in frames {
        w.feed(frame, &mut visit);
    }
    w.finish(&mut visit)
}

/// [`walk`]'s state between frames.
pub(crate) struct Walker {
    opts: CodeOptions,
    tables: Tables,
    /// Each target's last snapshot: its end and regions.
    last_snapshot: BTreeMap<u32, (u64, Vec<RegionStat>)>,
    layouts: Layouts,
    walked: Walked,
    /// The end of the last window counted in `walked.windows`.
    last_window: Option<u64>,
    /// A window's samples, waiting for the next frame: its call stacks, if the record has them.
    pending: Option<Event>,
}

impl Walker {
    pub(crate) fn new(opts: &CodeOptions) -> Walker {
        Walker {
            opts: opts.clone(),
            tables: Tables::default(),
            last_snapshot: BTreeMap::new(),
            layouts: Layouts::default(),
            walked: Walked {
                scope: scope_text(opts),
                recorded: 0,
                samples: 0,
                windows: 0,
                stacks: false,
            },
            last_window: None,
            pending: None,
        }
    }

    /// Takes in the next frame.
    pub(crate) fn feed(&mut self, frame: Frame, visit: &mut impl FnMut(&Hit<'_>, &Tables)) {
        if let Frame::Event(Event {
            time_ns,
            kind:
                EventKind::Stacks {
                    target,
                    stacks,
                    samples,
                },
        }) = frame
        {
            self.walked.stacks = true;
            for stack in stacks {
                self.tables.stacks.insert(stack.index, stack.sites);
            }
            if let Some(e) = self.pending.take() {
                let theirs = matches!(&e.kind, EventKind::Samples { target: t, samples: s, .. }
                    if *t == target && e.time_ns == time_ns && s.len() == samples.len());
                self.samples(e, theirs.then_some(samples.as_slice()), visit);
            }
            return;
        }
        if let Some(e) = self.pending.take() {
            self.samples(e, None, visit);
        }
        self.layouts.observe(&frame);
        match frame {
            Frame::Snapshot(s) => {
                for t in s.targets {
                    self.last_snapshot.insert(t.target, (s.end_ns, t.regions));
                }
            }
            Frame::Event(e) if matches!(e.kind, EventKind::Samples { .. }) => {
                self.pending = Some(e)
            }
            Frame::Event(_) => {}
        }
    }

    /// After the last frame: what was walked; fails when there were no samples.
    pub(crate) fn finish(mut self, visit: &mut impl FnMut(&Hit<'_>, &Tables)) -> Result<Walked> {
        if let Some(e) = self.pending.take() {
            self.samples(e, None, visit);
        }
        if self.walked.recorded == 0 {
            return Err(ReportError::NoSamples);
        }
        if self.opts.mapping.is_some() && self.layouts.is_empty() {
            return Err(ReportError::NoMappings);
        }
        Ok(self.walked)
    }

    /// One samples event, with the stack index of each of its samples when known.
    fn samples(
        &mut self,
        e: Event,
        stacks: Option<&[u32]>,
        visit: &mut impl FnMut(&Hit<'_>, &Tables),
    ) {
        let EventKind::Samples {
            target,
            window_ns,
            sites: new_sites,
            samples,
        } = e.kind
        else {
            return;
        };
        for site in new_sites {
            self.tables.sites.insert(site.index, site);
        }
        self.walked.recorded += samples.len() as u64;
        let opts = &self.opts;
        let start_ns = e.time_ns.saturating_sub(window_ns);
        if opts
            .time_ns
            .is_some_and(|w| !w.overlaps(TimeWindow::new(start_ns, e.time_ns)))
        {
            return;
        }
        // The window's own snapshot, written just before its samples.
        let regions = match self.last_snapshot.get(&target) {
            Some((end_ns, regions)) if *end_ns == e.time_ns => regions.as_slice(),
            _ => &[],
        };
        let scope = match (opts.address, &opts.mapping) {
            (Some(range), _) => vec![range],
            (None, Some(name)) => self
                .layouts
                .covering(target, 0, u64::MAX)
                .iter()
                .filter(|m| m.name.contains(name.as_str()))
                .map(|m| AddrRange::new(m.start, m.end))
                .collect(),
            (None, None) if regions.is_empty() => return,
            (None, None) => hottest(regions),
        };
        if self.last_window.replace(e.time_ns) != Some(e.time_ns) {
            self.walked.windows += 1;
        }
        // Each sample in scope, with the piece of memory it stands for: its region's part in
        // the scope range that holds it.
        let chosen: Vec<(usize, Option<AddrRange>)> = samples
            .iter()
            .enumerate()
            .filter(|(_, s)| opts.wants(s))
            .filter_map(|(i, s)| {
                let range = scope[containing(&scope, s.addr)?];
                let piece = containing(regions, s.addr).map(|r| {
                    let r = &regions[r];
                    AddrRange::new(r.start.max(range.start), r.end.min(range.end))
                });
                Some((i, piece))
            })
            .collect();
        let mut per_piece: HashMap<AddrRange, u64> = HashMap::new();
        for piece in chosen.iter().filter_map(|c| c.1) {
            *per_piece.entry(piece).or_default() += 1;
        }
        for (i, piece) in chosen {
            let sample = &samples[i];
            let callers = stacks
                .and_then(|s| self.tables.stacks.get(&s[i]))
                .map(Vec::as_slice);
            let bytes = piece.map_or(0.0, |p| p.size() as f64 / per_piece[&p] as f64);
            self.walked.samples += 1;
            let hit = Hit {
                sample,
                site: self.tables.sites.get(&sample.site),
                callers,
                bytes,
            };
            visit(&hit, &self.tables);
        }
    }
}

fn scope_text(opts: &CodeOptions) -> String {
    match (opts.address, &opts.mapping) {
        (Some(range), _) => {
            format!(
                "data addresses {}-{}",
                human::hex(range.start),
                human::hex(range.end)
            )
        }
        (None, Some(name)) => format!("the mappings named like {name:?}"),
        (None, None) => format!(
            "each window's hottest regions (access rate at least {:.0} % of the window's highest)",
            HOT_SHARE * 100.0
        ),
    }
}

impl CodeOptions {
    fn wants(&self, s: &SampleFact) -> bool {
        let access = match (self.reads, self.writes) {
            (true, false) => s.access.reads(),
            (false, true) => s.access.writes(),
            (true, true) => s.access.reads() || s.access.writes(),
            (false, false) => true,
        };
        access
            && (self.tids.is_empty() || self.tids.contains(&s.tid))
            && (self.cpus.is_empty() || self.cpus.contains(&s.cpu))
    }
}

/// The ranges of a window's hottest regions (in address order, as the snapshot holds them).
fn hottest(regions: &[RegionStat]) -> Vec<AddrRange> {
    let max = regions.iter().map(|r| r.nr_accesses).max().unwrap_or(0);
    if max == 0 {
        return Vec::new();
    }
    regions
        .iter()
        .filter(|r| r.nr_accesses as f64 >= HOT_SHARE * max as f64)
        .map(RegionStat::range)
        .collect()
}

/// Something with an address range.
trait Ranged {
    fn span(&self) -> AddrRange;
}

impl Ranged for AddrRange {
    fn span(&self) -> AddrRange {
        *self
    }
}

impl Ranged for RegionStat {
    fn span(&self) -> AddrRange {
        self.range()
    }
}

/// The index of the one of the sorted, disjoint `ranges` that holds `addr`.
fn containing(ranges: &[impl Ranged], addr: u64) -> Option<usize> {
    let i = ranges.partition_point(|r| r.span().end <= addr);
    ranges.get(i).filter(|r| r.span().start <= addr).map(|_| i)
}

/// Rows of text that a long list is cut to.
pub const TEXT_ROWS: usize = 30;

pub fn render_text(report: &CodeReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# code touching {}: {} of the record's {} samples, {:.1} % of them in named functions",
        report.scope,
        report.samples,
        report.samples_recorded,
        report.named_share * 100.0
    );
    if report.samples == 0 {
        let _ = writeln!(
            out,
            "# no sample in scope: widen the filters or give an --address-range"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "# {:>6} {:>8} {:>8} {:>8}  function (object)",
        "share", "samples", "reads", "writes"
    );
    for f in report.functions.iter().take(TEXT_ROWS) {
        let object = object_name(f);
        let name = match &f.function {
            Some(function) => format!("{function} ({object})"),
            None => format!("? ({object})"),
        };
        let _ = writeln!(
            out,
            "  {:>5.1}% {:>8} {:>8} {:>8}  {}",
            f.share * 100.0,
            f.samples,
            f.reads,
            f.writes,
            human::one_line(&name, human::TEXT_CHARS)
        );
    }
    if report.functions.len() > TEXT_ROWS {
        let _ = writeln!(
            out,
            "# {} more (--json lists them all)",
            report.functions.len() - TEXT_ROWS
        );
    }
    let mut why: Vec<(&str, &str)> = report
        .functions
        .iter()
        .filter_map(|f| Some((object_name(f), f.missing.as_deref()?)))
        .filter(|(_, why)| !why.is_empty())
        .collect();
    why.sort_unstable();
    why.dedup();
    for (object, why) in why {
        let _ = writeln!(out, "# no function names in {object}: {why}");
    }
    out
}

fn object_name(row: &FunctionRow) -> &str {
    row.object.as_deref().unwrap_or("an unknown mapping")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_frames::snapshot;
    use udamon_record::model::SampleAccess;

    fn site(index: u32, function: Option<&str>) -> CodeSite {
        CodeSite {
            index,
            ip: 0x1000 + index as u64,
            function: function.map(Into::into),
            object: Some("/bin/prog".into()),
            missing: function.is_none().then(|| "stripped".into()),
        }
    }

    fn sample(addr: u64, site: u32, tid: u32, access: SampleAccess) -> SampleFact {
        SampleFact {
            addr,
            site,
            tid,
            cpu: tid % 2,
            access,
        }
    }

    fn samples(time_ns: u64, sites: Vec<CodeSite>, samples: Vec<SampleFact>) -> Frame {
        Frame::Event(Event {
            time_ns,
            kind: EventKind::Samples {
                target: 0,
                window_ns: 100,
                sites,
                samples,
            },
        })
    }

    fn frames() -> Vec<Frame> {
        use SampleAccess::*;
        vec![
            // Hot: 0x1000-0x2000 (10) and 0x3000-0x4000 (6); cold: 0x2000-0x3000 (1).
            snapshot(
                100,
                &[
                    (0x1000, 0x2000, 10),
                    (0x2000, 0x3000, 1),
                    (0x3000, 0x4000, 6),
                ],
            ),
            samples(
                100,
                vec![
                    site(0, Some("reader")),
                    site(1, Some("writer")),
                    site(2, None),
                ],
                vec![
                    sample(0x1100, 0, 7, Read),
                    sample(0x1200, 0, 7, Read),
                    sample(0x2100, 2, 7, Read),
                    sample(0x3100, 1, 8, Write),
                    sample(0x3200, 1, 8, ReadWrite),
                ],
            ),
            // The next window: only 0x2000-0x3000 is hot, and a site is reused.
            snapshot(200, &[(0x1000, 0x2000, 0), (0x2000, 0x3000, 4)]),
            samples(
                200,
                vec![],
                vec![sample(0x2200, 2, 7, Read), sample(0x1300, 0, 7, Read)],
            ),
        ]
    }

    fn rows(r: &CodeReport) -> Vec<(Option<&str>, u64, u64, u64)> {
        r.functions
            .iter()
            .map(|f| (f.function.as_deref(), f.samples, f.reads, f.writes))
            .collect()
    }

    #[test]
    fn functions_of_each_windows_hottest_regions_with_reads_and_writes_apart() {
        let r = code(frames(), &CodeOptions::default()).unwrap();
        assert_eq!((r.samples_recorded, r.samples), (7, 5));
        assert_eq!(
            rows(&r),
            [
                (Some("reader"), 2, 2, 0),
                (Some("writer"), 2, 1, 2),
                (None, 1, 1, 0)
            ]
        );
        assert!((r.named_share - 0.8).abs() < 1e-9);
        assert_eq!(r.functions[2].missing.as_deref(), Some("stripped"));
        let text = render_text(&r);
        assert!(text.contains("reader (/bin/prog)"), "{text}");
        assert!(
            text.contains("no function names in /bin/prog: stripped"),
            "{text}"
        );
    }

    #[test]
    fn filters_narrow_the_samples() {
        let only = |opts: CodeOptions| code(frames(), &opts).unwrap();
        let writes = only(CodeOptions {
            writes: true,
            ..CodeOptions::default()
        });
        assert_eq!(rows(&writes), [(Some("writer"), 2, 1, 2)]);
        let reads = only(CodeOptions {
            reads: true,
            ..CodeOptions::default()
        });
        assert_eq!(rows(&reads)[0], (Some("reader"), 2, 2, 0));
        assert_eq!(reads.functions.len(), 3, "a read-modify-write reads too");
        let tid = only(CodeOptions {
            tids: vec![8],
            ..CodeOptions::default()
        });
        assert_eq!(rows(&tid), [(Some("writer"), 2, 1, 2)]);
        let cpu = only(CodeOptions {
            cpus: vec![1],
            ..CodeOptions::default()
        });
        assert_eq!(cpu.samples, 3, "tid 7 ran on CPU 1");
        let range = only(CodeOptions {
            address: Some(AddrRange::new(0x1000, 0x2000)),
            ..CodeOptions::default()
        });
        assert_eq!(
            rows(&range),
            [(Some("reader"), 3, 3, 0)],
            "every window, hot or not"
        );
        let late = only(CodeOptions {
            time_ns: Some(TimeWindow::new(150, 200)),
            ..CodeOptions::default()
        });
        assert_eq!(rows(&late), [(None, 1, 1, 0)]);
    }

    #[test]
    fn a_live_report_fed_frame_by_frame_is_the_records() {
        let mut all = frames();
        all.push(snapshot(300, &[(0x1000, 0x2000, 1)]));
        let mut live = LiveCode::new(&CodeOptions::default());
        assert!(live.report().is_none(), "no samples yet");
        for frame in all.clone() {
            live.observe(frame);
        }
        assert_eq!(
            live.report(),
            Some(code(all, &CodeOptions::default()).unwrap())
        );
    }

    #[test]
    fn samples_of_a_site_lost_to_damage_say_so() {
        let frames = vec![
            snapshot(100, &[(0x1000, 0x2000, 10)]),
            samples(100, vec![], vec![sample(0x1100, 9, 7, SampleAccess::Read)]),
        ];
        let r = code(frames, &CodeOptions::default()).unwrap();
        let row = &r.functions[0];
        assert_eq!(
            (row.function.as_deref(), row.object.as_deref()),
            (None, None)
        );
        assert!(
            row.missing.as_deref().unwrap().contains("damage"),
            "{row:?}"
        );
    }

    #[test]
    fn a_record_without_samples_is_refused() {
        let e = code(
            vec![snapshot(100, &[(0, 4096, 1)])],
            &CodeOptions::default(),
        );
        assert!(matches!(e, Err(ReportError::NoSamples)));
    }
}
