//! The reports that show a record another way than its own text report: damo's styles of
//! `report access`, `report footprints`, and `report html`.

use crate::cli::{AccessStyle, AccessStyleArgs, DistArgs, Horizon, InputArgs};
use crate::output::{Output, emit};
use anyhow::{Context as _, Result, bail};
use std::path::{Path, PathBuf};
use udamon_report::access::AccessReport;
use udamon_report::dist::RenderOptions;
use udamon_report::styles::{self, Style, StyleOptions, TemperatureWeights};
use udamon_report::{footprints, html, plot, wss};

/// `report access --style STYLE` (anything but `detailed`).
pub fn styled(report: &AccessReport, args: &AccessStyleArgs, json: bool) -> Result<()> {
    let style = match args.style {
        AccessStyle::Detailed => unreachable!("the detailed style is report access's own"),
        AccessStyle::TemperatureSzHist => Style::TemperatureSzHist,
        AccessStyle::RecencySzHist => Style::RecencySzHist,
        AccessStyle::TemperaturePercentiles => Style::TemperaturePercentiles,
        AccessStyle::RecencyPercentiles => Style::RecencyPercentiles,
        AccessStyle::Hot => Style::Hot,
        AccessStyle::Cold => Style::Cold,
    };
    let [size, access_rate, age] = args.temperature_weights[..] else {
        bail!("--temperature_weights takes SIZE RATE AGE");
    };
    let opts = StyleOptions {
        weights: TemperatureWeights {
            size,
            access_rate,
            age,
        },
        percentiles: match args.percentiles_range.as_deref() {
            None => styles::DEFAULT_PERCENTILES.to_vec(),
            Some(list) => percentiles_range(list)?,
        },
    };
    emit(
        &styles::style(report, style, &opts),
        json,
        styles::render_text,
    )
}

/// damo's `--percentiles_range`: up to three numbers are Python's `range(...)`, more a list.
fn percentiles_range(list: &[u32]) -> Result<Vec<u32>> {
    let mut out: Vec<u32> = match *list {
        [stop] => (0..stop).collect(),
        [start, stop] => (start..stop).collect(),
        [start, stop, step] if step > 0 => (start..stop).step_by(step as usize).collect(),
        [_, _, _] => bail!("--percentiles_range: the step must be at least 1"),
        _ => list.to_vec(),
    };
    out.sort_unstable();
    out.dedup();
    if out.is_empty() || out.iter().any(|&p| p > 100) {
        bail!("--percentiles_range: give percentiles from 0 to 100, e.g. 0 101 25");
    }
    Ok(out)
}

/// `report footprints`.
pub fn footprints(input: &InputArgs, dist: &DistArgs, horizon: Horizon) -> Result<()> {
    let (record, header, frames) = input.open()?;
    let mut passes = record.passes(frames);
    let filter = wss::WssFilter {
        horizon,
        ..wss::WssFilter::default()
    };
    let opts = dist.options()?;
    let wss = wss::wss(&header, &mut passes, &filter, &opts)?;
    let report = footprints::footprints(&header, &mut passes, wss, &opts)?;
    record.warn_damage();
    if let Some(path) = &dist.plot {
        return write_image(&report, path, input.path());
    }
    let opts = RenderOptions {
        all_values: dist.all,
        ..RenderOptions::default()
    };
    emit(&report, input.json, |report| {
        footprints::render_text(report, &opts)
    })
}

/// `report html`: the page, written by the rule for outputs.
pub fn html(input: &InputArgs, out: Option<&Path>) -> Result<()> {
    if input.json {
        bail!(
            "report html writes a web page, not JSON: drop --json (the page's reports each take \
             --json on their own, e.g. `udamon report wss --json`)"
        );
    }
    let (record, header, mut frames) = input.open()?;
    // Read once to the end, so that the reader's damage is known for the page.
    frames.by_ref().for_each(drop);
    let dest = out.map_or_else(|| default_page(input.path()), Path::to_path_buf);
    // The page names the record by its file name: a shared page tells nothing of the
    // directories it was made in.
    let name = input.path().file_name().map_or_else(
        || input.path().display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let page = html::html(
        &header,
        || record.frames(),
        &name,
        record.damage(),
        &html::HtmlOptions::default(),
    )?;
    record.warn_damage();
    let output = Output::create(&dest, &[input.path()])?;
    std::fs::write(output.path(), page)
        .with_context(|| format!("cannot write {}", dest.display()))?;
    output.commit()?;
    eprintln!("udamon: wrote {}", dest.display());
    Ok(())
}

/// `FILE.html` beside the record (`udamon.data` gives `udamon.html`).
fn default_page(record: &Path) -> PathBuf {
    record.with_extension("html")
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
