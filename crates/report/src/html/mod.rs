//! `report html`: a record as one self-contained web page, to open in a browser or share.
//!
//! Everything is inlined (the data, the script, the style, the charts as SVG) and the page's
//! content security policy lets it load nothing, so that it opens anywhere, offline, and
//! tells no one it was opened. The panels are the reports' own results, made by the same
//! functions as the text reports and printed with the same formats, so that every number
//! on the page is the one `udamon report ...` prints:
//!
//! - the heatmap ([`crate::heatmap`], every area, gaps collapsed), drawn by the page's script
//!   with zoom and pan in time and address; hovering shows the region under the pointer in
//!   the nearest kept window (its size, access rate and age as `report access` prints them),
//!   its mapping and the functions that touched that mapping (`report code --mapping`);
//! - the working set by horizon (`report wss --horizons`) and over time (`report wss`), and the
//!   footprints (`report footprints`);
//! - mappings (`report mappings`), code (`report code`), scheme activity (`report schemes`);
//! - the record's info and its source's health (`report info`).
//!
//! The page stays small whatever the record's length: the heatmap is binned to at most
//! [`HtmlOptions::cells`] cells and windows are kept for hovering up to
//! [`HtmlOptions::regions`] regions; the page says how much was left out.

mod data;

use crate::code::{self, CodeOptions, CodeReport};
use crate::dist::{self, DistOptions, SortBy, Unit};
use crate::dist_image::{NamedLines, Plotted};
use crate::footprints;
use crate::heatmap::{self, AddressSelection, HeatUnit, HeatmapOptions};
use crate::horizon::Horizon;
use crate::info::{self, InfoReport};
use crate::mappings::{self, MappingsOptions, MappingsReport};
use crate::plot::{self, Drawing, ImageOptions};
use crate::schemes::{self, SchemesOptions, SchemesReport};
use crate::wss::{self, WssFilter};
use crate::{ReportError, Result, human, reopen, target_name};
use std::fmt::Write as _;
use udamon_record::model::{Frame, Header};

/// How much of a record the page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtmlOptions {
    /// Heatmap cells over all targets shown (a byte each).
    pub cells: usize,
    /// Regions of the windows kept for hovering, over all targets (about 7 bytes each).
    pub regions: usize,
    /// Targets with a heatmap of their own (the first ones, in record order).
    pub targets: usize,
    /// Address columns of a heatmap.
    pub cols: usize,
    /// Mappings whose functions hovering shows (the hottest ones).
    pub mapping_functions: usize,
}

impl Default for HtmlOptions {
    /// About 6 MiB of page at most, whatever the record's length.
    fn default() -> Self {
        HtmlOptions {
            cells: 2_000_000,
            regions: 300_000,
            targets: 8,
            cols: 1000,
            mapping_functions: 8,
        }
    }
}

/// The working-set horizons of the page's curve, as `report wss --horizons` takes them.
const HORIZONS_S: [u64; 7] = [0, 1, 2, 5, 10, 30, 60];
/// Characters of a mapping's name shown, wrapped: a path's last part, the file, is what tells
/// mappings apart, so names are not cut at the text reports' width.
const NAME_CHARS: usize = 1024;

/// Functions shown per mapping when hovering.
const FUNCTIONS_PER_MAPPING: usize = 5;
/// Size of the page's charts, in pixels.
const CHART: ImageOptions = ImageOptions {
    width: 900,
    height: 380,
};

/// The page of the record `open` yields afresh for each report; `name` is how the page calls
/// it, `damage` what the reader found wrong with it.
pub fn html<I, E, F>(
    header: &Header,
    mut open: F,
    name: &str,
    damage: Vec<String>,
    opts: &HtmlOptions,
) -> Result<String>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    let info = info::info(header, reopen(&mut open)?, damage);
    if info.nr_snapshots == 0 {
        return Err(ReportError::NoSnapshots);
    }
    let mut page = Page::default();
    let shown: Vec<u32> = info
        .targets
        .iter()
        .filter(|t| t.snapshots > 0 && t.nr_regions.is_some_and(|r| r.max > 0))
        .map(|t| t.target)
        .take(opts.targets)
        .collect();
    if shown.is_empty() {
        return Err(ReportError::NoRegions);
    }
    let with_regions = info
        .targets
        .iter()
        .filter(|t| t.nr_regions.is_some_and(|r| r.max > 0))
        .count();
    if with_regions > shown.len() {
        page.notes.push(format!(
            "The heatmap shows the first {} of the record's {with_regions} targets with regions.",
            shown.len()
        ));
    }

    let mut targets = heatmaps(header, &mut open, &info, &shown, opts, &mut page)?;

    // Windows kept for hovering: every k-th, so that their regions fit the budget.
    let most_regions = info.nr_regions.map_or(1, |r| r.max.max(1)) as usize;
    let every = (info.nr_snapshots * most_regions)
        .div_ceil(opts.regions.max(1))
        .max(1);
    data::keep_windows(reopen(&mut open)?, every, &mut targets);
    if every > 1 {
        page.notes.push(format!(
            "Hovering shows the regions of the nearest kept window: one window in {every} is kept ({} of {}).",
            info.nr_snapshots.div_ceil(every),
            info.nr_snapshots
        ));
    }

    // The working set, the footprints.
    let filter = WssFilter::default();
    let horizons_ns = affordable_horizons(&info);
    if horizons_ns.len() < HORIZONS_S.len() {
        page.notes.push(format!(
            "The working set by horizon stops at {}: the longer horizons of `udamon report wss \
             --horizons` take minutes on a record this long (each snapshot unites the regions of \
             every window within the horizon).",
            human::duration(horizons_ns.last().copied().unwrap_or(0))
        ));
    }
    let curve_opts = DistOptions {
        percentiles: vec![10.0, 50.0, 90.0],
        per_target: false,
        ..DistOptions::default()
    };
    let horizons: Vec<Horizon> = horizons_ns.iter().map(|&ns| Horizon::Span(ns)).collect();
    let curve = wss::curve(header, &mut open, &filter, &horizons, &curve_opts)?;
    let over_time = DistOptions {
        sort_by: SortBy::Time,
        ..DistOptions::default()
    };
    let chosen = WssFilter {
        horizon: Horizon::Auto,
        ..filter
    };
    let wss_report = wss::wss(header, &mut open, &chosen, &over_time)?;
    let footprints = footprints::footprints(header, &mut open, wss_report.clone(), &over_time)?;

    let mappings = optional(mappings::mappings(
        header,
        &mut open,
        &MappingsOptions::default(),
    ))?;
    let code = optional(code::code(reopen(&mut open)?, &CodeOptions::default()))?;
    let mut functions = Vec::new();
    if code.is_some()
        && let Some(m) = &mappings
    {
        for name in hottest_names(m, opts.mapping_functions) {
            let scope = CodeOptions {
                mapping: Some(name.clone()),
                ..CodeOptions::default()
            };
            let report = code::code(reopen(&mut open)?, &scope)?;
            functions.push(data::MappingFunctions::new(
                name,
                &report,
                FUNCTIONS_PER_MAPPING,
            ));
        }
    }
    let schemes = optional(schemes::schemes(
        header,
        reopen(&mut open)?,
        &SchemesOptions::default(),
    ))?;

    let data = data::PageData {
        udamon_version: env!("CARGO_PKG_VERSION"),
        record: name.to_string(),
        viridis: crate::color::VIRIDIS.to_vec(),
        targets,
        functions,
    };
    page.body(&info, name, &data);
    page.heatmap_section(&data);
    page.wss_section(&curve, &wss_report)?;
    page.footprints_section(&footprints)?;
    page.mappings_section(mappings.as_ref());
    page.code_section(code.as_ref());
    page.schemes_section(schemes.as_ref())?;
    page.info_section(&info);
    Ok(page.finish(name, &data))
}

/// The heatmap of each of the `shown` targets, each its share of the page's cells, one row
/// per window at most; what binning or leaving out hides is said in `page`'s notes.
fn heatmaps<I, E, F>(
    header: &Header,
    open: &mut F,
    info: &info::InfoReport,
    shown: &[u32],
    opts: &HtmlOptions,
    page: &mut Page,
) -> Result<Vec<data::Target>>
where
    F: FnMut() -> std::result::Result<I, E>,
    I: IntoIterator<Item = Frame>,
    E: std::error::Error + Send + Sync + 'static,
{
    let cols = opts.cols.max(16);
    let rows_budget = (opts.cells / shown.len() / cols).max(16);
    let mut targets = Vec::new();
    for &t in shown {
        let summary = info.targets.iter().find(|s| s.target == t);
        let windows = summary.map_or(0, |s| s.snapshots).max(1);
        let rows = windows.min(rows_budget);
        let hopts = HeatmapOptions {
            target: Some(t),
            address: AddressSelection::All,
            time_range: None,
            rows,
            cols,
            unit: HeatUnit::Hz,
            collapse_gaps: true,
            limit: (rows, cols),
        };
        let map = heatmap::heatmap(header, &mut *open, &hopts)?;
        if windows > rows {
            page.notes.push(format!(
                "The heatmap of target {t} holds {rows} time rows of {} each: the record has {windows} windows, binned as `report heatmap --resol {rows} {cols}` bins them.",
                human::duration(map.row_ns().round() as u64)
            ));
        }
        let name = summary.map_or_else(
            || format!("target {t}"),
            |s| target_name(t, s.pid, s.cmdline.as_deref()),
        );
        targets.push(data::Target::new(t, name, &map));
    }
    Ok(targets)
}

/// Regions × windows that the working set by horizon may unite over the whole record (about
/// fifteen seconds of CPU).
const HORIZON_WORK: f64 = 2e9;

/// The horizons of [`HORIZONS_S`] whose working set the record affords: each snapshot unites
/// the regions of every window within the horizon.
fn affordable_horizons(info: &InfoReport) -> Vec<u64> {
    let windows = info.nr_snapshots as f64;
    let regions = info.nr_regions.map_or(1, |r| r.max.max(1)) as f64;
    let aggr_ns = info.aggr_us.map_or(100_000, |a| a.min.max(1)) as f64 * 1000.0;
    // One window is always shown: it is what each snapshot holds.
    let longer = HORIZONS_S[1..]
        .iter()
        .map(|s| s * 1_000_000_000)
        .take_while(|&h| windows * regions * (h as f64 / aggr_ns) <= HORIZON_WORK);
    std::iter::once(0).chain(longer).collect()
}

/// A report's result, or `None` when the record lacks what it needs (mappings, samples,
/// schemes); other errors stay errors.
fn optional<T>(result: Result<T>) -> Result<Option<T>> {
    match result {
        Ok(r) => Ok(Some(r)),
        Err(
            ReportError::NoMappings
            | ReportError::NoSamples
            | ReportError::NoSchemes
            | ReportError::NoSnapshots,
        ) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The distinct names of the mappings with the most hot bytes, hottest first.
fn hottest_names(report: &MappingsReport, n: usize) -> Vec<String> {
    let mut by_hot: Vec<(&str, u64)> = Vec::new();
    for m in &report.mappings {
        match by_hot.iter_mut().find(|(name, _)| *name == m.name) {
            Some(entry) => entry.1 += m.hot_bytes,
            None => by_hot.push((&m.name, m.hot_bytes)),
        }
    }
    by_hot.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    by_hot
        .into_iter()
        .filter(|(_, hot)| *hot > 0)
        .take(n)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// HTML-escapes text.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page being written: its sections, and notes on what it left out.
#[derive(Default)]
struct Page {
    html: String,
    nav: Vec<(&'static str, &'static str)>,
    notes: Vec<String>,
}

impl Page {
    fn section(&mut self, id: &'static str, title: &'static str, intro: &str) {
        self.nav.push((id, title));
        let _ = write!(
            self.html,
            "<section id=\"{id}\"><h2>{title}</h2><p class=\"intro\">{intro}</p>"
        );
    }

    fn end(&mut self) {
        self.html.push_str("</section>\n");
    }

    fn pre(&mut self, class: &str, text: &str) {
        let _ = write!(self.html, "<pre class=\"{class}\">{}</pre>", esc(text));
    }

    fn chart(&mut self, drawing: &impl Drawing) -> Result<()> {
        let svg = plot::svg(drawing, &CHART)?;
        let _ = write!(self.html, "<div class=\"chart\">{svg}</div>");
        Ok(())
    }

    /// A table of text cells; `numeric` says which columns are numbers (right-aligned).
    fn table(&mut self, class: &str, head: &[&str], numeric: &[bool], rows: &[Vec<String>]) {
        let _ = write!(
            self.html,
            "<div class=\"scroll\"><table class=\"{class}\"><thead><tr>"
        );
        for (h, &num) in head.iter().zip(numeric) {
            let align = if num { " class=\"num\"" } else { "" };
            let _ = write!(self.html, "<th{align}>{}</th>", esc(h));
        }
        self.html.push_str("</tr></thead><tbody>");
        for row in rows {
            self.html.push_str("<tr>");
            for (cell, &num) in row.iter().zip(numeric) {
                let align = if num { " class=\"num\"" } else { "" };
                let _ = write!(self.html, "<td{align}>{}</td>", esc(cell));
            }
            self.html.push_str("</tr>");
        }
        self.html.push_str("</tbody></table></div>");
    }

    fn body(&mut self, info: &InfoReport, name: &str, data: &data::PageData) {
        let h = &info.header;
        let _ = writeln!(
            self.html,
            "<header><h1>udamon report: {}</h1><p class=\"summary\">{} snapshots over {}, \
             access source {} · {} target(s) · udamon {}</p></header>",
            esc(name),
            info.nr_snapshots,
            esc(&human::duration(info.duration_ns)),
            esc(&h.access_source.name),
            info.targets.len(),
            esc(data.udamon_version),
        );
    }

    fn heatmap_section(&mut self, data: &data::PageData) {
        self.section(
            "heatmap",
            "Heatmap",
            "Access frequency over time (left to right) and address (low at the bottom), every \
             area of the target with never-monitored gaps collapsed (white lines), as <code>udamon \
             report heatmap</code> bins it. Wheel: zoom; drag: pan; double click: reset; hover: \
             the region, its mapping and the functions that touched it.",
        );
        self.html
            .push_str("<div class=\"controls\"><label>target <select id=\"heat-target\">");
        for (i, t) in data.targets.iter().enumerate() {
            let _ = write!(self.html, "<option value=\"{i}\">{}</option>", esc(&t.name));
        }
        self.html.push_str(
            "</select></label> <button id=\"zoom-in\">zoom in</button> \
             <button id=\"zoom-out\">zoom out</button> <button id=\"time-in\">time +</button> \
             <button id=\"time-out\">time −</button> <button id=\"reset\">reset</button> \
             <span id=\"heat-view\"></span></div>\
             <div class=\"heat\"><canvas id=\"heat-canvas\" width=\"1200\" height=\"520\"></canvas>\
             <div id=\"tooltip\" hidden></div></div>",
        );
        self.end();
    }

    fn wss_section(
        &mut self,
        curve: &[(u64, dist::DistReport)],
        over_time: &dist::DistReport,
    ) -> Result<()> {
        self.section(
            "wss",
            "Working set",
            "How many bytes the workload touched within each span of time (<code>udamon report \
             wss --horizons</code>, for the horizons it lists), and per window over the record (<code>udamon report \
             wss</code>, its horizon chosen as there).",
        );
        self.pre("report", &wss::render_curve(curve));
        let lines: Vec<(String, Vec<(f64, f64)>)> = vec![(
            "median".into(),
            curve
                .iter()
                .filter_map(|(h, r)| {
                    let median = r.distributions.first()?.percentiles.get(1)?.value;
                    Some((*h as f64 / 1e9, median as f64))
                })
                .collect(),
        )];
        self.chart(&NamedLines {
            what: Plotted {
                metric: "working set (median)",
                note: "",
                unit: Unit::Bytes,
                sort_by: SortBy::Time,
                x_desc: Some("horizon (s)"),
            },
            lines,
        })?;
        self.chart(over_time)?;
        self.pre(
            "report",
            &dist::render_text(over_time, &dist::RenderOptions::default()),
        );
        self.end();
        Ok(())
    }

    fn footprints_section(&mut self, report: &footprints::FootprintsReport) -> Result<()> {
        self.section(
            "footprints",
            "Footprints",
            "Mapped (vsz) and resident (rss) bytes against the working set (wss), as \
             <code>udamon report footprints</code> counts them.",
        );
        self.chart(report)?;
        self.pre(
            "report",
            &footprints::render_text(report, &dist::RenderOptions::default()),
        );
        self.end();
        Ok(())
    }

    fn mappings_section(&mut self, report: Option<&MappingsReport>) {
        self.section(
            "mappings",
            "Mappings",
            "Each mapping's hot, warm and cold bytes and its working set (ws), means over the \
             snapshots it existed in (<code>udamon report mappings</code>).",
        );
        let Some(report) = report else {
            self.html.push_str(
                "<p class=\"none\">The record holds no mappings: udamon records them for live \
                 processes.</p>",
            );
            self.end();
            return;
        };
        let sampled = report.mappings.iter().any(|m| m.samples > 0.0);
        let resident = report.mappings.iter().any(|m| m.resident_bytes.is_some());
        let mut head = vec!["target"];
        head.extend(mappings::row_columns(resident, sampled).iter().map(|c| c.0));
        head.push("name");
        let numeric: Vec<bool> = head
            .iter()
            .map(|h| !matches!(*h, "address range" | "perm" | "name"))
            .collect();
        let rows: Vec<Vec<String>> = report
            .mappings
            .iter()
            .map(|m| {
                let mut row = vec![m.target.to_string()];
                row.extend(m.row_cells(resident, sampled));
                row.push(human::one_line(&m.name, NAME_CHARS));
                row
            })
            .collect();
        self.table("mappings", &head, &numeric, &rows);
        self.end();
    }

    fn code_section(&mut self, report: Option<&CodeReport>) {
        self.section(
            "code",
            "Code",
            "The functions whose instructions touched each window's hottest memory, reads and \
             writes apart (<code>udamon report code</code>).",
        );
        let Some(report) = report else {
            self.html.push_str(
                "<p class=\"none\">The record holds no samples: record a live process with a \
                 sampled source (tick, cpuclock or pmu).</p>",
            );
            self.end();
            return;
        };
        let _ = write!(
            self.html,
            "<p>{} of the record's {} samples touched {}; {:.1} % of them in named functions.</p>",
            report.samples,
            report.samples_recorded,
            esc(&report.scope),
            report.named_share * 100.0
        );
        let rows: Vec<Vec<String>> = report
            .functions
            .iter()
            .take(code::TEXT_ROWS)
            .map(|f| {
                vec![
                    format!("{:.1}%", f.share * 100.0),
                    f.samples.to_string(),
                    f.reads.to_string(),
                    f.writes.to_string(),
                    data::function_name(f),
                ]
            })
            .collect();
        self.table(
            "code",
            &["share", "samples", "reads", "writes", "function (object)"],
            &[true, true, true, true, false],
            &rows,
        );
        self.end();
    }

    fn schemes_section(&mut self, report: Option<&SchemesReport>) -> Result<()> {
        self.section(
            "schemes",
            "Schemes",
            "What each operation scheme tried and applied over time, and the memory it saved \
             (<code>udamon report schemes</code>).",
        );
        match report {
            None => self.html.push_str(
                "<p class=\"none\">No scheme ran in this record (record with --schemes \
                 FILE).</p>",
            ),
            Some(report) => {
                let lines = report
                    .schemes
                    .iter()
                    .map(|s| {
                        let name = format!(
                            "scheme {} ({})",
                            s.scheme,
                            s.action.as_deref().unwrap_or("?")
                        );
                        let points = s
                            .series
                            .iter()
                            .map(|r| (r.end_ns as f64 / 1e9, r.sz_applied as f64))
                            .collect();
                        (name, points)
                    })
                    .collect();
                self.chart(&NamedLines {
                    what: Plotted {
                        metric: "bytes applied per row",
                        note: "",
                        unit: Unit::Bytes,
                        sort_by: SortBy::Time,
                        x_desc: None,
                    },
                    lines,
                })?;
                self.pre("report", &schemes::render_text(report));
            }
        }
        self.end();
        Ok(())
    }

    fn info_section(&mut self, info: &InfoReport) {
        self.section(
            "info",
            "Record",
            "What the record says about itself and its access source's health (<code>udamon \
             report info</code>).",
        );
        if let Some(counters) = &info.events.last_source_stats {
            let rows: Vec<Vec<String>> = counters
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| vec![k.clone(), v.to_string()])
                .collect();
            self.html.push_str("<h3>Source health</h3>");
            self.table("health", &["counter", "value"], &[false, true], &rows);
        }
        self.pre("report", &info::render_text(info));
        self.end();
    }

    fn finish(self, name: &str, data: &data::PageData) -> String {
        // No `<` at all inside the script element: `</script>` would end it, and `<!--` with
        // `<script` after it (in a command line, a mapping's name) would make the parser look
        // past the element's end and swallow the page's own script. JSON allows `\u003c`.
        let json = serde_json::to_string(data)
            .expect("page data serializes")
            .replace('<', "\\u003c");
        let mut nav = String::new();
        for (id, title) in &self.nav {
            let _ = write!(nav, "<a href=\"#{id}\">{title}</a>");
        }
        let notes = if self.notes.is_empty() {
            String::new()
        } else {
            let items: String = self
                .notes
                .iter()
                .map(|n| format!("<li>{}</li>", esc(n)))
                .collect();
            format!("<aside id=\"notes\"><strong>Downsampled:</strong><ul>{items}</ul></aside>")
        };
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
             script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>udamon report: {title}</title><style>{css}</style></head>\n<body>\
             <nav>{nav}</nav><main>{notes}{body}</main>\
             <footer>Made by udamon {version}. Every number on this page is the one \
             <code>udamon report</code> prints for the same record.</footer>\
             <pre id=\"selftest\" hidden></pre>\
             <script type=\"application/json\" id=\"udamon-data\">{json}</script>\
             <script>{js}</script></body></html>\n",
            title = esc(name),
            css = include_str!("page.css"),
            body = self.html,
            version = esc(data.udamon_version),
            js = include_str!("page.js"),
        )
    }
}
