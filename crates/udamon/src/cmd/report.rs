//! `udamon report TYPE [FILE]`: every report reads any supported record format, streaming.

use crate::cli::{
    AccessArgs, AccessStyle, CodeArgs, DistArgs, HeatmapArgs, Horizon, InputArgs, RegionOrder,
    ReportArgs, ReportKind, SortBy, WssArgs,
};
use crate::cmd::report_views::{self, write_image};
use crate::input::{Frames, Input};
use crate::output::{Output, emit, print};
use crate::select::Selection;
use anyhow::{Context as _, Result, bail};
use std::io::IsTerminal;
use std::path::Path;
use udamon_core::AddrRange;
use udamon_record::RecordError;
use udamon_report::dist::{self, DistOptions, RenderOptions};
use udamon_report::heatmap::{self, AddressSelection, HeatmapOptions, term};
use udamon_report::working_set::Basis;
use udamon_report::{
    access, accuracy, code, info, mappings, nr_regions, percentile, pprof, raw, referenced,
    schemes, stacks, wss,
};

/// `report wss --horizons` without values: one window, then spans from a second to a minute.
const DEFAULT_HORIZONS_S: [u64; 7] = [0, 1, 2, 5, 10, 30, 60];

pub fn run(args: &ReportArgs) -> Result<()> {
    match &args.kind {
        ReportKind::Access(args) => access_report(args),
        ReportKind::Wss(args) => wss_report(args),
        ReportKind::Footprints {
            input,
            dist,
            horizon,
        } => report_views::footprints(input, dist, *horizon),
        ReportKind::Html { input, out } => report_views::html(input, out.as_deref()),
        ReportKind::NrRegions { input, dist } => nr_regions_report(input, dist),
        ReportKind::Heatmap { input, heatmap } => heatmap_report(input, heatmap),
        ReportKind::Schemes { input, bucket } => schemes_report(input, *bucket),
        ReportKind::Mappings {
            input,
            cold_after,
            exclude_samples,
            horizon,
        } => {
            let opts = mappings::MappingsOptions {
                cold_after_ns: cold_after * 1000,
                skip: *exclude_samples,
                horizon: *horizon,
            };
            mappings_report(input, &opts)
        }
        ReportKind::Referenced { input } => referenced_report(input),
        ReportKind::Code(args) => code_report(args),
        ReportKind::Accuracy { input, acc_thres } => accuracy_report(input, *acc_thres),
        ReportKind::Raw { input } => raw_report(input),
        ReportKind::Info { input } => info_report(input),
    }
}

/// Every report's ending: the damage reading the record met, on stderr, then the report.
fn finish<R: serde::Serialize>(
    record: &Input,
    report: &R,
    json: bool,
    text: impl FnOnce(&R) -> String,
) -> Result<()> {
    record.warn_damage();
    emit(report, json, text)
}

fn access_report(args: &AccessArgs) -> Result<()> {
    let input = &args.input;
    let (record, header, frames) = input.open()?;
    let (snapshot, frames) = from_start(args.snapshot, &record, frames)?;
    let opts = access::AccessOptions {
        snapshot,
        target: input.target,
        reads: args.reads,
        writes: args.writes,
    };
    let mut report = record.check_target(access::access(&header, frames, &opts))?;
    sort_regions(&mut report, args.sort_regions_by, args.sort_regions_dsc);
    if args.style.style != AccessStyle::Detailed {
        record.warn_damage();
        return report_views::styled(&report, &args.style, input.json);
    }
    finish(&record, &report, input.json, access::render_text)
}

fn wss_report(args: &WssArgs) -> Result<()> {
    let input = &args.input;
    let (record, header, frames) = input.open()?;
    let mut passes = record.passes(frames);
    let dist = &args.dist.for_target(input);
    let filter = wss::WssFilter {
        acc_thres: args.acc_thres,
        sz_thres: args.sz_thres,
        horizon: args.horizon,
        basis: if args.whole_regions {
            Basis::Regions
        } else {
            Basis::Pages
        },
    };
    if let Some(horizons) = &args.horizons {
        if dist.plot.is_some() {
            bail!("--plot draws one horizon's working set: give --horizon, not --horizons");
        }
        let horizons: Vec<Horizon> = match horizons.as_slice() {
            [] => DEFAULT_HORIZONS_S
                .iter()
                .map(|&s| Horizon::seconds(s))
                .collect(),
            given => given.to_vec(),
        };
        let opts = DistOptions {
            percentiles: vec![10.0, 50.0, 90.0],
            per_target: false,
            ..dist.options()?
        };
        let curve = wss::curve(&header, &mut passes, &filter, &horizons, &opts);
        let curve = record.check_target(curve)?;
        return finish(&record, &curve, input.json, |c| wss::render_curve(c));
    }
    let report = wss::wss(&header, &mut passes, &filter, &dist.options()?);
    let report = record.check_target(report)?;
    record.warn_damage();
    print_dist(&report, dist, input)
}

fn nr_regions_report(input: &InputArgs, dist: &DistArgs) -> Result<()> {
    let (record, header, frames) = input.open()?;
    let dist = &dist.for_target(input);
    let report = nr_regions::nr_regions(&header, frames, &dist.options()?);
    let report = record.check_target(report)?;
    record.warn_damage();
    print_dist(&report, dist, input)
}

fn heatmap_report(input: &InputArgs, args: &HeatmapArgs) -> Result<()> {
    let (record, header, _) = input.open()?;
    let mut opts = args.options(&record.selection())?;
    // The heatmap picks among the targets itself (and names the others).
    opts.target = input.target;
    let map = heatmap::heatmap(&header, || record.all_targets(), &opts)?;
    if let (Some(path), false) = (&args.output, input.json) {
        record.warn_damage();
        return write_image(&map, path, input.path());
    }
    let color =
        !args.no_color && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    finish(&record, &map, input.json, |map| {
        term::render(map, term::TermStyle { color })
    })
}

fn schemes_report(input: &InputArgs, bucket_us: Option<u64>) -> Result<()> {
    let (record, header, frames) = input.open()?;
    let opts = schemes::SchemesOptions {
        bucket_ns: bucket_us.map(|us| us * 1000),
        ..schemes::SchemesOptions::default()
    };
    let report = record.check_target(schemes::schemes(&header, frames, &opts))?;
    finish(&record, &report, input.json, schemes::render_text)
}

fn mappings_report(input: &InputArgs, opts: &mappings::MappingsOptions) -> Result<()> {
    let (record, header, frames) = input.open()?;
    let report = mappings::mappings(&header, record.passes(frames), opts);
    let report = record.check_target(report)?;
    finish(&record, &report, input.json, mappings::render_text)
}

fn referenced_report(input: &InputArgs) -> Result<()> {
    let (record, header, frames) = input.open()?;
    let report = record.check_target(referenced::referenced(&header, frames))?;
    finish(&record, &report, input.json, referenced::render_text)
}

fn code_report(args: &CodeArgs) -> Result<()> {
    let input = &args.input;
    let (record, _, frames) = input.open()?;
    let selection = record.selection();
    let opts = code::CodeOptions {
        address: selection.address,
        mapping: args.mapping.clone(),
        time_ns: selection.time_ns,
        tids: args.tid.clone(),
        cpus: args.cpu.clone(),
        reads: args.reads,
        writes: args.writes,
    };
    if args.folded || args.pprof.is_some() {
        let profile = record.check_target(stacks::stack_profile(frames, &opts))?;
        record.warn_damage();
        if !profile.has_stacks {
            eprintln!(
                "udamon: the record has no call stacks (record with --call-stacks): each stack \
                 is the sampled function alone"
            );
        }
        return match &args.pprof {
            Some(path) => write_pprof(&profile, path, input.path()),
            None => Ok(print(&stacks::render_folded(&profile))?),
        };
    }
    let report = record.check_target(code::code(frames, &opts))?;
    finish(&record, &report, input.json, code::render_text)
}

fn accuracy_report(input: &InputArgs, acc_thres: u32) -> Result<()> {
    let (record, _, frames) = input.open()?;
    let opts = accuracy::AccuracyOptions {
        address: record.selection().address,
        acc_thres,
    };
    let report = accuracy::accuracy(frames, &opts)?;
    finish(&record, &report, input.json, accuracy::render_text)
}

fn raw_report(input: &InputArgs) -> Result<()> {
    let (record, header, frames) = input.open()?;
    let stdout = std::io::stdout().lock();
    match raw::write_raw(&header, frames, std::io::BufWriter::new(stdout)) {
        Err(e) if is_broken_pipe(&e) => return Ok(()),
        other => other?,
    };
    record.warn_damage();
    Ok(())
}

/// `report info`: the damage found is part of the report, not a warning beside it.
fn info_report(input: &InputArgs) -> Result<()> {
    let (record, header, mut frames) = input.open()?;
    // Read every frame first so that the damage list is complete.
    let report = info::info(&header, frames.by_ref(), Vec::new());
    if let Some(e) = record.missing_target() {
        return Err(e);
    }
    let writer = report.finished.is_some_and(|f| !f);
    let report = info::InfoReport {
        damage: record.damage(),
        writer: writer
            .then(|| crate::input::writer_of(input.path()))
            .flatten()
            .map(|pid| info::Writer { pid }),
        ..report
    };
    emit(&report, input.json, info::render_text)
}

impl InputArgs {
    /// The record, as much of it as the report is to read.
    pub(crate) fn open(&self) -> Result<(Input, udamon_record::model::Header, Frames)> {
        let selection = Selection {
            target: self.target,
            ..Selection::new(
                self.range.address_range.as_deref(),
                self.range.time_range.as_deref(),
            )?
        };
        Input::open_selected(self.path(), selection)
    }
}

/// `report access --snapshot`: a negative index counts from the end, which a reader that keeps
/// one snapshot at a time can only know from the count; the record is counted first.
fn from_start(index: i64, record: &Input, frames: Frames) -> Result<(i64, Frames)> {
    if index >= -1 {
        return Ok((index, frames));
    }
    let count = frames
        .filter(|f| matches!(f, udamon_record::model::Frame::Snapshot(_)))
        .count();
    match i64::try_from(count)?.checked_add(index) {
        Some(i) if i >= 0 => Ok((i, record.frames()?)),
        _ => Err(udamon_report::ReportError::SnapshotIndex { index, count }.into()),
    }
}

impl Input {
    /// A report's result, unless the selected target was not in the record: that is what the
    /// user must hear, rather than an empty report or one that had nothing to count.
    fn check_target<T>(&self, report: udamon_report::Result<T>) -> Result<T> {
        match self.missing_target() {
            Some(e) => Err(e),
            None => Ok(report?),
        }
    }

    /// The record for a report that reads it once or more: `frames`, open already, for the
    /// first pass, and the record afresh for each after (one pass holds it at a time, lest a
    /// damo record, read whole, be held twice).
    pub(crate) fn passes(
        &self,
        frames: Frames,
    ) -> impl FnMut() -> Result<Frames, RecordError> + '_ {
        let mut first = Some(frames);
        move || first.take().map_or_else(|| self.frames(), Ok)
    }

    /// The frames of every target, whatever `--target` selected.
    fn all_targets(&self) -> Result<Frames, udamon_record::RecordError> {
        self.frames_of(None)
    }
}

/// Each target's regions in `order` (damo's `--sort_regions_by`), ascending unless `descending`.
fn sort_regions(report: &mut access::AccessReport, order: RegionOrder, descending: bool) {
    for target in &mut report.targets {
        let regions = &mut target.regions;
        match order {
            RegionOrder::Address => regions.sort_by_key(|r| r.start),
            RegionOrder::AccessRate => {
                regions.sort_by(|a, b| a.access_percent.total_cmp(&b.access_percent))
            }
            RegionOrder::Age => regions.sort_by_key(|r| r.age_ns),
            RegionOrder::Size => regions.sort_by_key(|r| r.size),
        }
        if descending {
            regions.reverse();
        }
    }
}

fn is_broken_pipe(e: &udamon_report::ReportError) -> bool {
    matches!(e, udamon_report::ReportError::Write(io) if io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Prints a distribution report, or draws it when `--plot` names an image.
fn print_dist(report: &dist::DistReport, args: &DistArgs, input: &InputArgs) -> Result<()> {
    if let Some(path) = &args.plot {
        return write_image(report, path, input.path());
    }
    let opts = RenderOptions {
        all_values: args.all,
        ..RenderOptions::default()
    };
    emit(report, input.json, |report| {
        dist::render_text(report, &opts)
    })
}

impl DistArgs {
    /// With `--target`, the distribution of that target, named as such.
    fn for_target(&self, input: &InputArgs) -> DistArgs {
        DistArgs {
            per_target: self.per_target || input.target.is_some(),
            ..self.clone()
        }
    }

    pub(crate) fn options(&self) -> Result<DistOptions> {
        let [start, stop, step] = self.range[..] else {
            bail!("--range takes START STOP STEP")
        };
        Ok(DistOptions {
            skip: self.exclude_samples,
            percentiles: percentile::range(start.into(), stop.into(), step.into())?,
            sort_by: match self.sortby {
                SortBy::Size => dist::SortBy::Size,
                SortBy::Time => dist::SortBy::Time,
            },
            per_target: self.per_target,
        })
    }
}

impl HeatmapArgs {
    /// The heatmap's options; the selected part of the record is what it draws.
    fn options(&self, selection: &Selection) -> Result<HeatmapOptions> {
        let mut opts = match &self.output {
            Some(_) => HeatmapOptions::image(),
            None => HeatmapOptions::terminal(terminal_width()),
        };
        if let Some(AddrRange { start, end }) = selection.address {
            opts.address = AddressSelection::Range { start, end };
        }
        opts.time_range = selection.time_ns;
        if let Some(&[rows, cols]) = self.resol.as_deref() {
            if rows == 0 || cols == 0 {
                bail!("--resol: rows and columns must be at least 1");
            }
            (opts.rows, opts.cols) = (rows, cols);
        }
        Ok(opts)
    }
}

fn terminal_width() -> Option<usize> {
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok())
}

/// Writes `profile` as a gzipped pprof profile to `path`, by the rule for outputs.
fn write_pprof(profile: &stacks::StackProfile, path: &Path, record: &Path) -> Result<()> {
    let comment = format!(
        "udamon report code of {}: {} samples over {} windows",
        record.display(),
        profile.samples,
        profile.windows
    );
    let bytes = pprof::gzipped(&pprof::profile(profile, &comment))?;
    let output = Output::create(path, &[record])?;
    std::fs::write(output.path(), bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    output.commit()?;
    eprintln!("udamon: wrote {}", path.display());
    Ok(())
}
