//! `udamon report TYPE [FILE]`: every report reads any supported record format, streaming.

use crate::cli::{
    AccessStyle, DistArgs, HeatmapArgs, Horizon, InputArgs, RegionOrder, ReportArgs, ReportKind,
    SortBy,
};
use crate::cmd::report_views;
use crate::input::{Frames, Input};
use crate::output::{Output, print, print_json};
use crate::select::Selection;
use anyhow::{Context as _, Result, bail};
use std::io::IsTerminal;
use std::path::Path;
use udamon_report::dist::{self, DistOptions, RenderOptions};
use udamon_report::heatmap::{self, AddressSelection, HeatmapOptions, term};
use udamon_report::working_set::Basis;
use udamon_report::{
    access, accuracy, code, info, mappings, nr_regions, percentile, plot, pprof, raw, referenced,
    schemes, stacks, wss,
};

/// `report wss --horizons` without values: one window, then spans from a second to a minute.
const DEFAULT_HORIZONS_S: [u64; 7] = [0, 1, 2, 5, 10, 30, 60];

pub fn run(args: &ReportArgs) -> Result<()> {
    match &args.kind {
        ReportKind::Access {
            input,
            snapshot,
            sort_regions_by,
            sort_regions_dsc,
            reads,
            writes,
            style,
        } => {
            let (record, header, frames) = input.open()?;
            let opts = access::AccessOptions {
                snapshot: *snapshot,
                target: None,
                reads: *reads,
                writes: *writes,
            };
            let mut report = access::access(&header, frames, &opts)?;
            sort_regions(&mut report, *sort_regions_by, *sort_regions_dsc);
            record.warn_damage();
            if style.style != AccessStyle::Detailed {
                return report_views::styled(&report, style, input.json);
            }
            if input.json {
                print_json(&report)
            } else {
                Ok(print(&access::render_text(&report))?)
            }
        }
        ReportKind::Wss {
            input,
            dist,
            acc_thres,
            sz_thres,
            horizon,
            horizons,
            whole_regions,
        } => {
            let (record, header, frames) = input.open()?;
            let filter = wss::WssFilter {
                acc_thres: *acc_thres,
                sz_thres: *sz_thres,
                horizon_ns: match horizon {
                    Horizon::Span(us) => us * 1000,
                    Horizon::Auto => 0,
                },
                basis: if *whole_regions {
                    Basis::Regions
                } else {
                    Basis::Pages
                },
            };
            if let Some(horizons) = horizons {
                if dist.plot.is_some() {
                    bail!("--plot draws one horizon's working set: give --horizon, not --horizons");
                }
                let horizons_ns: Vec<u64> = match horizons.as_slice() {
                    [] => DEFAULT_HORIZONS_S
                        .iter()
                        .map(|s| s * 1_000_000_000)
                        .collect(),
                    given => given.iter().map(|us| us * 1000).collect(),
                };
                let opts = DistOptions {
                    percentiles: vec![10.0, 50.0, 90.0],
                    per_target: false,
                    ..dist.options()?
                };
                let curve = wss::curve(&header, || record.frames(), &filter, &horizons_ns, &opts)?;
                record.warn_damage();
                return if input.json {
                    print_json(&curve)
                } else {
                    Ok(print(&wss::render_curve(&curve))?)
                };
            }
            let report = match horizon {
                Horizon::Auto => {
                    wss::wss_auto(&header, || record.frames(), &filter, &dist.options()?)?
                }
                Horizon::Span(_) => wss::wss(&header, frames, &filter, &dist.options()?)?,
            };
            record.warn_damage();
            print_dist(&report, dist, input)
        }
        ReportKind::Footprints {
            input,
            dist,
            horizon,
        } => report_views::footprints(input, dist, *horizon),
        ReportKind::Html { input, out } => report_views::html(input, out.as_deref()),
        ReportKind::NrRegions { input, dist } => {
            let (record, header, frames) = input.open()?;
            let report = nr_regions::nr_regions(&header, frames, &dist.options()?)?;
            record.warn_damage();
            print_dist(&report, dist, input)
        }
        ReportKind::Heatmap { input, heatmap } => {
            let (record, header, _) = input.open()?;
            let opts = heatmap.options(&record.selection())?;
            let map = heatmap::heatmap(&header, || record.frames(), &opts)?;
            record.warn_damage();
            if input.json {
                return print_json(&map);
            }
            match &heatmap.output {
                Some(path) => write_image(&map, path, input.path()),
                None => {
                    let color = !heatmap.no_color
                        && std::io::stdout().is_terminal()
                        && std::env::var_os("NO_COLOR").is_none();
                    Ok(print(&term::render(&map, term::TermStyle { color }))?)
                }
            }
        }
        ReportKind::Schemes { input, bucket } => {
            let (record, header, frames) = input.open()?;
            let opts = schemes::SchemesOptions {
                bucket_ns: bucket.map(|us| us * 1000),
                ..schemes::SchemesOptions::default()
            };
            let report = schemes::schemes(&header, frames, &opts)?;
            record.warn_damage();
            if input.json {
                print_json(&report)
            } else {
                Ok(print(&schemes::render_text(&report))?)
            }
        }
        ReportKind::Mappings {
            input,
            cold_after,
            exclude_samples,
            horizon,
        } => {
            let (record, header, frames) = input.open()?;
            let opts = mappings::MappingsOptions {
                cold_after_ns: cold_after * 1000,
                skip: *exclude_samples,
                horizon_ns: horizon * 1000,
            };
            let report = mappings::mappings(&header, frames, &opts)?;
            record.warn_damage();
            if input.json {
                print_json(&report)
            } else {
                Ok(print(&mappings::render_text(&report))?)
            }
        }
        ReportKind::Referenced { input } => {
            let (record, _, frames) = input.open()?;
            let report = referenced::referenced(frames)?;
            record.warn_damage();
            if input.json {
                print_json(&report)
            } else {
                Ok(print(&referenced::render_text(&report))?)
            }
        }
        ReportKind::Code {
            input,
            mapping,
            tid,
            cpu,
            reads,
            writes,
            folded,
            pprof,
        } => {
            let (record, _, frames) = input.open()?;
            let selection = record.selection();
            let opts = code::CodeOptions {
                address: selection.address,
                mapping: mapping.clone(),
                time_ns: selection.time_ns,
                tids: tid.clone(),
                cpus: cpu.clone(),
                reads: *reads,
                writes: *writes,
            };
            if *folded || pprof.is_some() {
                let profile = stacks::stack_profile(frames, &opts)?;
                record.warn_damage();
                if !profile.has_stacks {
                    eprintln!(
                        "udamon: the record has no call stacks (record with --call-stacks): \
                         each stack is the sampled function alone"
                    );
                }
                return match pprof {
                    Some(path) => write_pprof(&profile, path, input.path()),
                    None => Ok(print(&stacks::render_folded(&profile))?),
                };
            }
            let report = code::code(frames, &opts)?;
            record.warn_damage();
            if input.json {
                print_json(&report)
            } else {
                Ok(print(&code::render_text(&report))?)
            }
        }
        ReportKind::Accuracy { input, acc_thres } => {
            let (record, _, frames) = input.open()?;
            let opts = accuracy::AccuracyOptions {
                address: record.selection().address,
                acc_thres: *acc_thres,
            };
            let report = accuracy::accuracy(frames, &opts)?;
            record.warn_damage();
            if input.json {
                print_json(&report)
            } else {
                Ok(print(&accuracy::render_text(&report))?)
            }
        }
        ReportKind::Raw { input } => {
            let (record, header, frames) = input.open()?;
            let stdout = std::io::stdout().lock();
            match raw::write_raw(&header, frames, std::io::BufWriter::new(stdout)) {
                Err(e) if is_broken_pipe(&e) => return Ok(()),
                other => other?,
            };
            record.warn_damage();
            Ok(())
        }
        ReportKind::Info { input } => {
            let (record, header, mut frames) = input.open()?;
            // Read every frame first so that the damage list is complete.
            let report = info::info(&header, frames.by_ref(), Vec::new());
            let report = info::InfoReport {
                damage: record.damage(),
                ..report
            };
            if input.json {
                print_json(&report)
            } else {
                Ok(print(&info::render_text(&report))?)
            }
        }
    }
}

impl InputArgs {
    /// The record, as much of it as the report is to read.
    pub(crate) fn open(&self) -> Result<(Input, udamon_record::model::Header, Frames)> {
        let selection = Selection::new(
            self.range.address_range.as_deref(),
            self.range.time_range.as_deref(),
        )?;
        Input::open_selected(self.path(), selection)
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
    if input.json {
        return print_json(report);
    }
    let opts = RenderOptions {
        all_values: args.all,
        ..RenderOptions::default()
    };
    Ok(print(&dist::render_text(report, &opts))?)
}

impl DistArgs {
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
        opts.target = Some(self.target);
        if let Some((start, end)) = selection.address {
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

/// Draws a report into the image `path` names (PNG or SVG), by the output rule.
pub(crate) fn write_image(drawing: &impl plot::Drawing, path: &Path, record: &Path) -> Result<()> {
    let Some(format) = plot::Format::of(path) else {
        bail!(
            "{}: the image format comes from the extension: use .png or .svg",
            path.display()
        );
    };
    let output = Output::create(path, &[record])?;
    plot::write(
        drawing,
        output.path(),
        format,
        &plot::ImageOptions::default(),
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    output.commit()?;
    eprintln!("udamon: wrote {}", path.display());
    Ok(())
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
