//! udamon's reports on a record: what a damo user finds under `damo report`, computed from the
//! record data model (`udamon_record::model`) so that any reader (udamon's format, damo's formats)
//! feeds them.
//!
//! Each report is a function that consumes a `&Header` and the frames (an iterator, or for
//! two-pass reports a closure that opens a fresh iterator), returns a plain data struct that
//! serialises to JSON, and has a text renderer beside it. Memory stays bounded by what the report
//! shows (a grid, one value per snapshot), never by the size of the record.
//!
//! - [`access`]: one snapshot's regions, damo's `report access`; [`styles`]: damo's other
//!   styles of it (temperature and idle-time histograms and percentiles, hot and cold).
//! - [`accuracy`]: a simulated record against the simulator's ground truth.
//! - [`wss`] and [`nr_regions`]: distributions and time series over snapshots ([`dist`]);
//!   [`working_set`]: a record's working sets replayed at page resolution.
//! - [`footprints`]: mapped and resident bytes against the working set.
//! - [`heatmap`]: time × address access-frequency grid, rendered for terminals and as PNG/SVG.
//! - [`live`]: a record as it grows, for `udamon top`: the same views, fed frame by frame.
//! - [`raw`]: every frame as a JSON line.
//! - [`info`]: what the record says about itself.
//! - [`html`]: all of them on one self-contained web page.
//! - [`schemes`]: what DAMOS schemes did, the memory they saved and the refaults that cost.
//! - [`referenced`]: the kernel's accessed bits (`record --referenced`) against udamon's
//!   working set over the same intervals.
//! - [`code`]: the functions whose instructions touched the hot memory, reads and writes apart;
//!   [`stacks`] and [`pprof`]: the same samples by call stack, as folded stacks and a pprof
//!   profile.

pub mod access;
pub mod accuracy;
pub mod code;
pub mod color;
pub mod dist;
pub mod dist_image;
pub mod footprints;
pub mod heatmap;
pub mod horizon;
pub mod html;
pub mod human;
pub mod info;
pub mod live;
pub mod mappings;
pub mod nr_regions;
pub mod percentile;
pub mod plot;
pub mod pprof;
pub mod raw;
pub mod referenced;
pub mod schemes;
pub mod stacks;
pub mod styles;
#[cfg(test)]
mod test_frames;
pub mod time_window;
pub mod typeset;
pub mod working_set;
pub mod wss;

use std::error::Error;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(
        "the record has no snapshots, so there is nothing to report (monitoring may have stopped before its first aggregation interval ended)"
    )]
    NoSnapshots,
    #[error(
        "snapshot index {index} is out of range: the record has {count} snapshots (use 0 to {last}, or negative indexes counting from the end, -1 being the last)",
        last = count.saturating_sub(1)
    )]
    SnapshotIndex { index: i64, count: usize },
    #[error("target {target} has no regions in the record; targets with regions: {present}")]
    NoSuchTarget { target: u32, present: String },
    #[error("the record's snapshots hold no regions, so there is nothing to draw")]
    NoRegions,
    #[error("invalid percentiles: {0}")]
    Percentiles(String),
    #[error("the address range {start:#x}-{end:#x} is empty: give a start below the end")]
    EmptyAddressRange { start: u64, end: u64 },
    #[error(
        "the time range {start_ns}-{end_ns} ns holds no snapshot of the record: give a range within the record's time span"
    )]
    EmptyTimeRange { start_ns: u64, end_ns: u64 },
    #[error(
        "the record's snapshots span no time (each ends where it starts, or at time 0), so there is no time axis to draw"
    )]
    NoTimeSpan,
    #[error(
        "target {target} has no region in {start:#x}-{end:#x}: pick an address range from the heatmap guide"
    )]
    NothingInRange { target: u32, start: u64, end: u64 },
    #[error("the heatmap resolution must be at least 1x1, got {rows}x{cols}")]
    Resolution { rows: usize, cols: usize },
    #[error("no scheme ran in this record: record with --schemes FILE")]
    NoSchemes,
    #[error(
        "the record holds none of the kernel's accessed bits: record a live process with --referenced PERIOD (e.g. 2s)"
    )]
    NoReferenced,
    #[error(
        "the record holds no mappings: udamon records them for live processes (records made before it did, and simulations, have none)"
    )]
    NoMappings,
    #[error(
        "the record holds no samples: record a live process with a sampled source (tick, cpuclock or pmu) with this udamon"
    )]
    NoSamples,
    #[error(
        "the record's regions lie in more than {max} separate address ranges, more than udamon keeps for a report (a crafted or damaged record?): report on part of it (--address-range, --time-range, --target, or a shorter --horizon)"
    )]
    TooFragmented { max: usize },
    #[error(
        "the record's mappings take more than {mib} MiB to sum up, more than udamon keeps for a report (a crafted or damaged record?): report on part of it (--target, --time-range)"
    )]
    TooManyMappings { mib: usize },
    #[error(
        "the record holds no ground truth: record a simulated workload with `udamon record --sim` (this udamon or later keeps it)"
    )]
    NoTruth,
    #[error("invalid time rows: {0}")]
    Buckets(String),
    #[error("could not read the record: {0}")]
    Source(Box<dyn Error + Send + Sync>),
    // The OS error is part of the message and not also a `source()`, so that a printed chain
    // says it once.
    #[error("could not write the report: {0}")]
    Write(std::io::Error),
    #[error("could not draw the heatmap image {path}: {message}")]
    Image { path: String, message: String },
}

impl From<std::io::Error> for ReportError {
    fn from(e: std::io::Error) -> Self {
        ReportError::Write(e)
    }
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;

/// How text reports name a target: `target N, pid P: COMMAND`, with what the record tells of
/// it (a target added while monitoring ran is named by its `TargetAdded` event, see
/// [`udamon_record::model::Targets`]).
pub(crate) fn target_name(target: u32, pid: Option<u32>, cmdline: Option<&str>) -> String {
    let mut who = format!("target {target}");
    if let Some(pid) = pid {
        who.push_str(&format!(", pid {pid}"));
    }
    if let Some(cmd) = cmdline.filter(|c| !c.is_empty()) {
        who.push_str(&format!(": {}", human::one_line(cmd, human::TEXT_CHARS)));
    }
    who
}

/// Opens the record's frames again for a second pass, mapping the reader's error into ours.
pub(crate) fn reopen<I, E, F>(open: &mut F) -> Result<I>
where
    F: FnMut() -> std::result::Result<I, E>,
    E: Error + Send + Sync + 'static,
{
    open().map_err(|e| ReportError::Source(Box::new(e)))
}
