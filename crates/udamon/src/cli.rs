//! The command line, as clap definitions. Verbs and option names follow damo where a damo user
//! would look for them (`record`, `report access|wss|heatmap|nr_regions`, `-o`,
//! `--monitoring_intervals`), with Rust CLI conventions elsewhere.

use crate::units::{
    format_duration_us, parse_duration_us, parse_interval_us, parse_rate_hz, parse_rescan_us,
    parse_size,
};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use udamon_core::Attrs;
use udamon_linux::perf::AccessSource;
use udamon_linux::vaddr;
pub use udamon_report::horizon::Horizon;

#[derive(Debug, Parser)]
#[command(
    name = "udamon",
    version,
    about = "DAMON in user space: which memory is hot, warm or cold, and how that changes",
    long_about = "udamon monitors data accesses with the Linux kernel's DAMON algorithms, running as \
        an ordinary program: on simulated workloads (masim format) in virtual time, and on live \
        processes. Start with `udamon demo`.",
    after_help = "Durations take units (5ms, 100ms, 1s; a bare number is microseconds). Sizes take \
        units (4K, 2M, 1G, 1.5GiB; a bare number is bytes)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Record the built-in demo workload and show its heatmap and working set: start here.
    Demo(DemoArgs),
    /// Monitor a workload and write a record file (the built-in demo when no target is given).
    Record(RecordArgs),
    /// Show a record: access, wss, footprints, heatmap, nr_regions, schemes, mappings,
    /// referenced, code, html, raw or info.
    Report(ReportArgs),
    /// Watch a workload live in the terminal: the heatmap as windows arrive, the working set,
    /// the hottest mappings and functions (see docs/top.md).
    Top(TopArgs),
    /// Convert a record to damo's json_compressed format (and damo's records to udamon's).
    Convert(ConvertArgs),
    /// Monitor processes until stopped, with Prometheus metrics, rotated records and runtime
    /// control (see docs/serve.md).
    Serve(ServeArgs),
    /// Talk to a running `udamon serve`: list, add and remove targets, tune, schemes, snapshots.
    Ctl(CtlArgs),
}

/// Monitoring attributes, shared by every command that monitors. Whatever is not given takes
/// the defaults of what is monitored (see `monitor::settings`).
///
/// The intervals and region bounds become an [`Overrides`] in one place
/// (`MonitoringArgs::overrides`, in `monitor::settings`) rather than flattening it here: these
/// flags' help states the defaults and sits beside damo's triple spellings
/// (`--monitoring_intervals`), while `ctl tune`'s have no defaults to state, and clap lists a
/// flattened struct's flags together.
#[derive(Debug, Args, Clone)]
pub struct MonitoringArgs {
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us,
        help = default_help("Sampling interval: time between access checks", |a| format_duration_us(a.sample_interval_us)))]
    pub sample_us: Option<u64>,
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us,
        help = default_help("Aggregation interval: one snapshot of the regions per interval", |a| format_duration_us(a.aggr_interval_us)))]
    pub aggr_us: Option<u64>,
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us,
        help = default_help("Update interval: how often the monitored address ranges are refreshed", |a| format_duration_us(a.ops_update_interval_us)))]
    pub update_us: Option<u64>,
    /// damo's spelling of the three intervals: SAMPLE AGGR UPDATE.
    #[arg(
        long = "monitoring_intervals",
        alias = "monitoring-intervals",
        num_args = 3,
        value_names = ["SAMPLE", "AGGR", "UPDATE"],
        value_parser = parse_interval_us,
        conflicts_with_all = ["sample_us", "aggr_us", "update_us"]
    )]
    pub monitoring_intervals: Option<Vec<u64>>,
    #[arg(long, value_name = "N",
        help = default_help("Lower bound on the number of regions (at least 3)", |a| a.min_nr_regions.to_string()))]
    pub min_regions: Option<u32>,
    #[arg(long, value_name = "N",
        help = default_help("Upper bound on the number of regions", |a| a.max_nr_regions.to_string()))]
    pub max_regions: Option<u32>,
    /// damo's spelling of the region bounds: MIN MAX.
    #[arg(
        long = "monitoring_nr_regions_range",
        alias = "monitoring-nr-regions-range",
        num_args = 2,
        value_names = ["MIN", "MAX"],
        conflicts_with_all = ["min_regions", "max_regions"]
    )]
    pub nr_regions_range: Option<Vec<u32>>,
    #[arg(long, alias = "monitoring_intervals_autotune", help = autotune_help())]
    pub autotune: bool,
    /// Operation schemes to apply (damo's JSON schema: a list of schemes, or damo's full
    /// parameters); see docs/schemes.md.
    #[arg(long, value_name = "FILE")]
    pub schemes: Option<PathBuf>,
    /// Record the regions each scheme is applied to at every apply pass (damo's
    /// --schemes_target_regions).
    #[arg(long, alias = "schemes_target_regions", requires = "schemes")]
    pub tried_regions: bool,
    /// Adjust regions as DAMON does and no more (random 10-90 % splits, merges by DAMON's
    /// threshold), to compare with the kernel. By default udamon also cuts regions where
    /// accesses were seen and probes the idle memory around them, which finds small hot areas
    /// in large idle memory within the same region bound (docs/algorithms.md#guided).
    #[arg(long)]
    pub faithful: bool,
    /// Seed of the monitor's random choices; the same seed repeats a simulated run exactly.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
}

/// The sources whose defaults live monitoring takes, as the help names them.
fn live_sources() -> [(String, Attrs); 2] {
    let hz = vaddr::DEFAULT_CPUCLOCK_HZ;
    [
        (
            "tick".to_string(),
            vaddr::sampled_attrs(&AccessSource::Tick),
        ),
        (
            format!("cpuclock at {hz} Hz"),
            vaddr::sampled_attrs(&vaddr::cpuclock_source(hz)),
        ),
    ]
}

/// A monitoring option's help with its defaults, from the attributes the code uses: for
/// simulations, and for live processes (per source when they differ).
fn default_help(what: &str, value: fn(&Attrs) -> String) -> String {
    let sim = value(&udamon_sim::default_attrs());
    let live = live_sources().map(|(name, attrs)| (name, value(&attrs)));
    if live.iter().all(|(_, v)| *v == sim) {
        return format!("{what} [default: {sim}]");
    }
    let live = if live.iter().all(|(_, v)| *v == live[0].1) {
        live[0].1.clone()
    } else {
        let each: Vec<String> = live.iter().map(|(n, v)| format!("{v} for {n}")).collect();
        each.join(", ")
    };
    format!("{what} [default: {sim} for simulations, {live} for live processes]")
}

fn autotune_help() -> String {
    let goal = udamon_core::IntervalsGoal::recommended();
    format!(
        "Tune the intervals automatically towards DAMON's recommended goal ({} % of possible \
         access events observed, sampling between {} and {}; damo's \
         --monitoring_intervals_autotune)",
        goal.access_bp as f64 / 100.0,
        format_duration_us(goal.min_sample_us),
        format_duration_us(goal.max_sample_us),
    )
}

fn record_after_help() -> String {
    let [(tick, t), (cpuclock, c)] = live_sources();
    format!(
        "Live processes: `udamon record -- CMD ARGS...` runs CMD and monitors it and the \
         processes it forks to their exit; `udamon record --pid PID [--children]` monitors a \
         running process (and its descendants). Unless intervals or region bounds are given, \
         sampled sources use {} sampling, aggregation windows of at least {} samples at the \
         nominal rate and at least {} ({} for {cpuclock}, {} for {tick}), {} updates and {}..{} \
         regions. Ctrl-C or SIGTERM stop monitoring with a complete record.",
        format_duration_us(c.sample_interval_us),
        vaddr::SAMPLES_PER_WINDOW,
        format_duration_us(vaddr::MIN_SAMPLED_AGGR_US),
        format_duration_us(c.aggr_interval_us),
        format_duration_us(t.aggr_interval_us),
        format_duration_us(c.ops_update_interval_us),
        c.min_nr_regions,
        c.max_nr_regions,
    )
}

#[derive(Debug, Args)]
#[command(after_help = record_after_help())]
pub struct RecordArgs {
    /// The record file to write.
    #[arg(
        short,
        long = "out",
        value_name = "FILE",
        default_value = "udamon.data"
    )]
    pub out: PathBuf,
    /// Monitor a simulated workload from a masim-format config file, or a built-in one
    /// (`builtin:demo`, `builtin:stairs`, `builtin:zigzag`, `builtin:needle`,
    /// `builtin:scattered`, `builtin:moving`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "command"])]
    pub sim: Option<String>,
    /// Monitor the running process PID, all its threads and threads it creates later
    /// (repeat for several processes).
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Vec<u32>,
    /// Monitor the host's physical memory (root), as kernel DAMON's paddr does: every
    /// process's samples (or only --pid's) translated to physical frames, so that memory
    /// processes share counts once. The record's one target is physical memory.
    #[arg(long, conflicts_with_all = ["sim", "command", "children", "referenced", "call_stacks", "dry_run"])]
    pub host: bool,
    /// With --pid: also monitor every descendant process of PID, running now or forked later,
    /// each as a target of its own (damo's --include_child_tasks).
    #[arg(
        long,
        alias = "include_child_tasks",
        requires = "pid",
        conflicts_with = "command"
    )]
    pub children: bool,
    /// Run this command and monitor it and every process it forks, each as a target of its
    /// own, until they all exit (after `--` when it has options of its own). As damo's target,
    /// a lone number is a pid (`udamon record 1234`) and a command line may come in one
    /// argument (`udamon record "./cmd arg"`).
    #[arg(value_name = "COMMAND")]
    pub command: Vec<OsString>,
    /// How live processes' accesses are observed: `auto` picks a PMU with data addresses if
    /// there is one, else `tick` when root or CAP_PERFMON, else `cpuclock`.
    #[arg(long, value_enum, default_value_t = SourceArg::Auto)]
    pub access_source: SourceArg,
    /// Samples per second of CPU time for `cpuclock` and `pmu` (the tick source samples at the
    /// kernel's tick rate, usually 250 Hz).
    #[arg(long, value_name = "HZ", value_parser = parse_rate_hz, default_value_t = vaddr::DEFAULT_CPUCLOCK_HZ)]
    pub sample_rate: u64,
    /// Stop after this much (virtual, for simulations) time, e.g. 10s or 500ms; at least one
    /// aggregation interval.
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us)]
    pub duration: Option<u64>,
    /// Write frames without zstd compression. Compressed frames are the default: each is
    /// compressed alone, so records stay streamable and crash-safe, and those of live
    /// processes, where mappings and samples take most bytes, come out 2-3 times smaller.
    #[arg(long)]
    pub no_compress: bool,
    /// Accepted for scripts written when compression was not the default.
    #[arg(long, hide = true, conflicts_with = "no_compress")]
    pub compress: bool,
    /// With --schemes on live processes: work out what the schemes would do (regions, bytes
    /// that would change) and record it as notes, without acting; nothing counts as applied.
    #[arg(long, requires = "schemes")]
    pub dry_run: bool,
    /// Live processes: also read the kernel's page-table accessed bits per mapping every
    /// PERIOD (clear_refs, then smaps `Referenced`), an exact second opinion on the working
    /// set; costs about 28 ms of CPU per GiB resident per read (see `udamon report referenced`).
    #[arg(long, value_name = "PERIOD", value_parser = parse_duration_us)]
    pub referenced: Option<u64>,
    /// Live processes: also record each sample's user call stack (up to 31 callers, found by
    /// walking frame pointers: code built with -fno-omit-frame-pointer), for
    /// `udamon report code --folded` and `--pprof`.
    #[arg(long)]
    pub call_stacks: bool,
    #[command(flatten)]
    pub monitoring: MonitoringArgs,
}

impl RecordArgs {
    /// Reads a command of one argument as damo reads its target: a number is a pid (moved to
    /// `--pid`), and a command line is split at white space.
    pub fn resolve_target(&mut self) {
        let [target] = &self.command[..] else {
            return;
        };
        let Some(target) = target.to_str() else {
            return;
        };
        if let Ok(pid) = target.parse::<u32>() {
            self.pid.push(pid);
            self.command.clear();
        } else if target.contains(char::is_whitespace) {
            self.command = target.split_whitespace().map(OsString::from).collect();
        }
    }
}

/// The access sources of live processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SourceArg {
    Auto,
    /// The scheduler tick tracepoint (root or CAP_PERFMON; about 0.4 % overhead).
    Tick,
    /// cpu-clock sampling of user mode (works unprivileged for one's own processes).
    Cpuclock,
    /// Precise memory samples from Intel PEBS or AMD IBS.
    Pmu,
}

impl From<SourceArg> for vaddr::SourceChoice {
    fn from(arg: SourceArg) -> Self {
        match arg {
            SourceArg::Auto => vaddr::SourceChoice::Auto,
            SourceArg::Tick => vaddr::SourceChoice::Tick,
            SourceArg::Cpuclock => vaddr::SourceChoice::CpuClock,
            SourceArg::Pmu => vaddr::SourceChoice::Pmu,
        }
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Keys: q quits, ? lists the others (pause, zoom and pan in address and time, \
    pick a target). The terminal is restored however top ends (q, SIGTERM, a crash). See \
    docs/top.md."
)]
pub struct TopArgs {
    /// Also record what is shown to FILE, as `udamon record -o FILE` would.
    #[arg(short, long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Watch a simulated workload (masim-format file or builtin:NAME), in real time.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "command", "serve"])]
    pub sim: Option<String>,
    /// Watch the running process PID (repeat for several).
    #[arg(long, value_name = "PID", conflicts_with_all = ["command", "serve"])]
    pub pid: Vec<u32>,
    /// With --pid: also every descendant process.
    #[arg(long, requires = "pid")]
    pub children: bool,
    /// Run this command and watch it and the processes it forks (after `--`).
    #[arg(value_name = "COMMAND", conflicts_with = "serve")]
    pub command: Vec<OsString>,
    /// Watch a target of a running `udamon serve`, over its control socket (--control).
    #[arg(long)]
    pub serve: bool,
    /// With --serve: the control socket [default: as serve's].
    #[arg(long, value_name = "PATH", requires = "serve")]
    pub control: Option<PathBuf>,
    /// With --serve: the served target to show first (a pid or sim:N) [default: the first].
    #[arg(long, value_name = "TARGET", requires = "serve")]
    pub target: Option<String>,
    /// How live processes' accesses are observed, as for `record`.
    #[arg(long, value_enum, default_value_t = SourceArg::Auto)]
    pub access_source: SourceArg,
    /// Samples per second of CPU time for `cpuclock` and `pmu`.
    #[arg(long, value_name = "HZ", value_parser = parse_rate_hz, default_value_t = vaddr::DEFAULT_CPUCLOCK_HZ)]
    pub sample_rate: u64,
    /// Live processes: also record each sample's call stack, as for `record`.
    #[arg(long)]
    pub call_stacks: bool,
    /// Stop monitoring after this long (the view stays until q).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us)]
    pub duration: Option<u64>,
    #[command(flatten)]
    pub monitoring: MonitoringArgs,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the record in this file (by default it goes to a temporary file).
    #[arg(short, long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Plain characters instead of colours.
    #[arg(long)]
    pub no_color: bool,
    #[command(flatten)]
    pub monitoring: MonitoringArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub kind: ReportKind,
}

/// Options every report takes.
#[derive(Debug, Args, Clone)]
pub struct InputArgs {
    /// The record to read: udamon's format or damo's (json, json_compressed, perf_script,
    /// legacy binary), detected from the content.
    #[arg(value_name = "FILE", default_value = "udamon.data")]
    pub input: PathBuf,
    /// damo's way to name the input.
    #[arg(
        short = 'i',
        long = "input",
        value_name = "FILE",
        conflicts_with = "input"
    )]
    pub input_flag: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only this target (its index in the record, as `report info` lists them). Reports of one
    /// target (heatmap) take the busiest by default, others all targets.
    #[arg(long, value_name = "INDEX")]
    pub target: Option<u32>,
    #[command(flatten)]
    pub range: RangeArgs,
}

/// The part of the record a report reads (damo's spellings work too).
#[derive(Debug, Args, Clone)]
pub struct RangeArgs {
    /// Only this address range: START END (hex with 0x, or sizes); regions are cut to it.
    /// The heatmap draws it (default: the hottest range).
    #[arg(long, alias = "address_range", num_args = 2, value_names = ["START", "END"], value_parser = parse_size)]
    pub address_range: Option<Vec<u64>>,
    /// Only the snapshots within this time range, from the record's start: START END.
    #[arg(long, alias = "time_range", num_args = 2, value_names = ["START", "END"], value_parser = parse_duration_us)]
    pub time_range: Option<Vec<u64>>,
}

impl InputArgs {
    pub fn path(&self) -> &PathBuf {
        self.input_flag.as_ref().unwrap_or(&self.input)
    }
}

#[derive(Debug, Subcommand)]
pub enum ReportKind {
    /// One snapshot's regions: address range, size, access rate, age.
    Access(AccessArgs),
    /// Working set size: distribution over the record, or over time.
    Wss(WssArgs),
    /// Mapped and resident bytes against the working set, over the record.
    ///
    /// damo's `report footprints` (vsz, rss), with the working set (wss) as `report wss`
    /// counts it; see docs/reports/footprints.md.
    Footprints {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        dist: DistArgs,
        /// The working set over this horizon, as `report wss --horizon`.
        #[arg(long, value_name = "T|auto", value_parser = parse_horizon, default_value = "auto")]
        horizon: Horizon,
    },
    /// Number of regions: distribution over the record, or over time.
    #[command(name = "nr_regions", alias = "nr-regions")]
    NrRegions {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        dist: DistArgs,
    },
    /// Time x address heatmap of access frequency, on the terminal or as PNG/SVG.
    Heatmap {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        heatmap: HeatmapArgs,
    },
    /// What each operation scheme did: statistics, memory saved over time, refault rate.
    Schemes {
        #[command(flatten)]
        input: InputArgs,
        /// Length of each row of the time series (default: about 20 rows over the record).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_us)]
        bucket: Option<u64>,
    },
    /// Per mapping (program, heap, stack, files): its hot, warm and cold bytes.
    Mappings {
        #[command(flatten)]
        input: InputArgs,
        /// Memory idle this long or longer counts as cold; less, as warm.
        #[arg(long, value_name = "DURATION", value_parser = parse_interval_us, default_value = "10s")]
        cold_after: u64,
        /// Skip this many snapshots at the start, while regions adapt (as `report wss`).
        #[arg(
            long = "exclude_samples",
            alias = "exclude-samples",
            value_name = "N",
            default_value_t = 20
        )]
        exclude_samples: usize,
        /// The horizon of the working set shown per mapping (bytes touched in the last T), as
        /// `report wss --horizon` takes it: the rows' working sets add up to its average.
        #[arg(long, value_name = "T|auto", value_parser = parse_horizon, default_value = "10s")]
        horizon: Horizon,
    },
    /// The kernel's accessed bits (record --referenced) against udamon's working set.
    Referenced {
        #[command(flatten)]
        input: InputArgs,
    },
    /// The functions whose instructions touched the hot memory, reads and writes apart.
    ///
    /// The memory is each window's hottest regions, or --address-range, or --mapping; the
    /// samples are those a sampled source (tick, cpuclock, pmu) recorded.
    Code(CodeArgs),
    /// Every report on one self-contained web page, to open in a browser or share.
    ///
    /// An interactive heatmap (zoom, pan, hover), the working set, footprints, mappings, code,
    /// schemes and the record's info, with the text reports' numbers; see docs/reports/html.md.
    Html {
        #[command(flatten)]
        input: InputArgs,
        /// The page to write [default: the record's name with .html].
        #[arg(short, long = "out", value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Precision, recall and working-set error against a simulation's ground truth.
    ///
    /// Per window and summed: the hot set a simulated record (`record --sim`) reports against
    /// what the workload touched, which the record keeps beside the snapshots.
    Accuracy {
        #[command(flatten)]
        input: InputArgs,
        /// A region counts as reported accessed when accessed in at least this many samples.
        #[arg(
            long = "acc_thres",
            alias = "acc-thres",
            value_name = "N",
            default_value_t = 1
        )]
        acc_thres: u32,
    },
    /// Every snapshot and event as JSON lines.
    Raw {
        #[command(flatten)]
        input: InputArgs,
    },
    /// What the record says about itself, its size, and any damage found.
    #[command(alias = "record_info")]
    Info {
        #[command(flatten)]
        input: InputArgs,
    },
}

/// `report access`'s arguments.
#[derive(Debug, Args)]
pub struct AccessArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Which snapshot: 0 is the first, -1 the last.
    #[arg(long, value_name = "INDEX", default_value_t = -1, allow_negative_numbers = true)]
    pub snapshot: i64,
    /// The order of each target's regions (damo's --sort_regions_by).
    #[arg(long, alias = "sort_regions_by", value_enum, default_value_t = RegionOrder::Address)]
    pub sort_regions_by: RegionOrder,
    /// Sort in descending order (damo's --sort_regions_dsc).
    #[arg(long, alias = "sort_regions_dsc")]
    pub sort_regions_dsc: bool,
    /// Only regions that got samples of reading instructions (with --writes: of either).
    #[arg(long)]
    pub reads: bool,
    /// Only regions that got samples of writing instructions (with --reads: of either).
    #[arg(long)]
    pub writes: bool,
    #[command(flatten)]
    pub style: AccessStyleArgs,
}

/// `report wss`'s arguments.
#[derive(Debug, Args)]
pub struct WssArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub dist: DistArgs,
    /// A region is in the working set when accessed in at least this many samples.
    #[arg(
        long = "acc_thres",
        alias = "acc-thres",
        value_name = "N",
        default_value_t = 1
    )]
    pub acc_thres: u32,
    /// ... and at least this large.
    #[arg(long = "sz_thres", alias = "sz-thres", value_name = "SIZE", value_parser = parse_size, default_value = "1")]
    pub sz_thres: u64,
    /// The working set over a horizon: bytes accessed in any window of the last T. `auto`
    /// takes the shortest that holds enough samples for a sampled source, and each
    /// snapshot's own window (damo's) for others; 0 is always the own window.
    #[arg(long, value_name = "T|auto", value_parser = parse_horizon, default_value = "auto")]
    pub horizon: Horizon,
    /// The working set at several horizons (default 0 1s 2s 5s 10s 30s 60s; 0 is one
    /// window): how much memory a program touches within each time span.
    #[arg(long, value_name = "T", value_parser = parse_span, num_args = 0.., conflicts_with = "horizon")]
    pub horizons: Option<Vec<Horizon>>,
    /// Count accessed regions whole, as damo and kernel DAMON do, instead of at page
    /// resolution from the samples' repeats (records of sampled sources).
    #[arg(long)]
    pub whole_regions: bool,
}

/// `report code`'s arguments.
#[derive(Debug, Args)]
pub struct CodeArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The mappings whose name contains NAME (`[heap]`, `libc`, a file's path) instead of
    /// the hottest regions.
    #[arg(long, value_name = "NAME", conflicts_with = "address_range")]
    pub mapping: Option<String>,
    /// Only samples of these threads.
    #[arg(long, value_name = "TID", num_args = 1..)]
    pub tid: Vec<u32>,
    /// Only samples taken on these CPUs.
    #[arg(long, value_name = "CPU", num_args = 1..)]
    pub cpu: Vec<u32>,
    /// Only instructions that read memory (read-modify-writes included).
    #[arg(long)]
    pub reads: bool,
    /// Only instructions that wrote memory (read-modify-writes included).
    #[arg(long)]
    pub writes: bool,
    /// Print folded call stacks (`outer;inner;function SAMPLES` lines) for flame graphs
    /// (inferno-flamegraph, flamegraph.pl, speedscope) instead of the function list.
    #[arg(long, conflicts_with_all = ["pprof", "json"])]
    pub folded: bool,
    /// Write a gzipped pprof profile of hot samples and bytes by call stack to FILE (for
    /// `go tool pprof`, Pyroscope, Parca) instead of printing the function list.
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    pub pprof: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct DistArgs {
    /// Percentiles to show: START STOP STEP (damo's --range).
    #[arg(long, num_args = 3, value_names = ["START", "STOP", "STEP"], default_values_t = [0, 101, 25])]
    pub range: Vec<u32>,
    /// Order of the values: by size (a distribution) or by time (a time series).
    #[arg(long, value_enum, default_value_t = SortBy::Size)]
    pub sortby: SortBy,
    /// Skip this many snapshots at the start, while monitoring settles (damo's default).
    #[arg(
        long = "exclude_samples",
        alias = "exclude-samples",
        value_name = "N",
        default_value_t = 20
    )]
    pub exclude_samples: usize,
    /// Report each target on its own instead of summed.
    #[arg(long)]
    pub per_target: bool,
    /// Print every value, not only percentiles.
    #[arg(long = "all", alias = "all_wss")]
    pub all: bool,
    /// Draw the distribution (or, with --sortby time, the time series) into an image instead
    /// of printing it; .png or .svg.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// `report access --style` and what it takes (damo's options).
#[derive(Debug, Args, Clone)]
pub struct AccessStyleArgs {
    /// How to show the snapshot (damo's --style): every region (detailed), its bytes by
    /// temperature or idle time (temperature-sz-hist, recency-sz-hist), per-byte percentiles
    /// of either (temperature-percentiles, recency-percentiles), or the regions from the
    /// hottest or the coldest (hot, cold).
    #[arg(long, value_enum, default_value_t = AccessStyle::Detailed)]
    pub style: AccessStyle,
    /// Weights of a region's size, access rate (%) and age (us) in its temperature.
    #[arg(long = "temperature_weights", alias = "temperature-weights", num_args = 3,
        value_names = ["SIZE", "RATE", "AGE"], default_values_t = [0, 100, 100],
        allow_negative_numbers = true)]
    pub temperature_weights: Vec<i64>,
    /// Percentiles of the percentile styles: START STOP STEP, or a list of more than three.
    #[arg(long = "percentiles_range", alias = "percentiles-range", num_args = 1..,
        value_name = "P")]
    pub percentiles_range: Option<Vec<u32>>,
}

/// `report access --style`, damo's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccessStyle {
    Detailed,
    TemperatureSzHist,
    #[value(alias = "cold-memory-tail")]
    RecencySzHist,
    TemperaturePercentiles,
    #[value(alias = "idle-time-percentiles")]
    RecencyPercentiles,
    Hot,
    Cold,
}

/// `report access --sort-regions-by`, damo's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RegionOrder {
    Address,
    #[value(name = "access_rate", alias = "access-rate")]
    AccessRate,
    Age,
    Size,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortBy {
    Size,
    Time,
}

#[derive(Debug, Args, Clone)]
pub struct HeatmapArgs {
    /// Write an image instead of printing (the extension picks the format: .png or .svg).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Resolution: TIME_ROWS ADDRESS_COLUMNS (default fits the terminal, 500 500 for images;
    /// at most what the output shows: 800 1200 for images, 1000 160 on a terminal).
    #[arg(long, num_args = 2, value_names = ["ROWS", "COLS"])]
    pub resol: Option<Vec<usize>>,
    /// Plain characters instead of colours (also when NO_COLOR is set or output is not a terminal).
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The record to convert (any supported format).
    #[arg(value_name = "FILE")]
    pub input: PathBuf,
    /// Where to write.
    #[arg(short, long = "out", value_name = "FILE")]
    pub out: PathBuf,
    /// The output format.
    #[arg(long, value_enum, default_value_t = ConvertFormat::JsonCompressed)]
    pub format: ConvertFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConvertFormat {
    /// damo's json_compressed (what damo 3.x reads).
    #[value(name = "json_compressed", alias = "json-compressed")]
    JsonCompressed,
    /// udamon's own record format.
    Udamon,
}

/// A report's `--horizon`: a span, or `auto`.
fn parse_horizon(s: &str) -> Result<Horizon, String> {
    if s == "auto" {
        return Ok(Horizon::Auto);
    }
    parse_span(s).map_err(|e| format!("{e}, or auto"))
}

/// One of `report wss --horizons`.
fn parse_span(s: &str) -> Result<Horizon, String> {
    parse_duration_us(s).map(|us| Horizon::Span(us.saturating_mul(1000)))
}

#[derive(Debug, Args)]
#[command(
    after_help = "Targets are followed as they come and go: a cgroup's processes as they \
    join, fork, leave and exit, and --match's command names at every rescan. SIGTERM or Ctrl-C \
    stop with every record complete; SIGHUP reads --config again (targets, intervals and \
    schemes for targets started from then on). See docs/serve.md."
)]
pub struct ServeArgs {
    /// Monitor this process until it exits (repeatable).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<u32>,
    /// Monitor every process of this cgroup v2 and its descendants (repeatable).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Vec<PathBuf>,
    /// Monitor every process whose command name matches this regular expression (repeatable).
    #[arg(long = "match", value_name = "REGEX")]
    pub r#match: Vec<String>,
    /// Start with no target and wait for `udamon ctl add`.
    #[arg(long)]
    pub idle: bool,
    /// How often cgroups and command names are scanned again, 100ms to 1h [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = parse_rescan_us)]
    pub rescan: Option<u64>,
    /// Serve Prometheus metrics on this address, at /metrics, or on the unix socket
    /// unix:PATH [default: 127.0.0.1:9580].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The permissions of --listen's unix socket, in octal: who may connect [default: 600].
    #[arg(long, value_name = "MODE", value_parser = crate::units::parse_socket_mode)]
    pub listen_mode: Option<u32>,
    /// TLS and basic authentication for the metrics, from the YAML file Prometheus's exporters
    /// read (tls_server_config, basic_auth_users) [default: plain HTTP, no password].
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config: Option<PathBuf>,
    /// The control socket (mode 0600) [default: $XDG_RUNTIME_DIR/udamon.sock, /run/udamon.sock
    /// for root, else $TMPDIR/udamon-UID/udamon.sock].
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Read settings from this TOML file (again on SIGHUP); the command line wins.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Keep records in this directory, one file per target at a time.
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<PathBuf>,
    /// Start a new record after this long [default: 1h].
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us, requires = "record_dir")]
    pub rotate_every: Option<u64>,
    /// Start a new record once one holds this many bytes.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "record_dir")]
    pub rotate_size: Option<u64>,
    /// Remove the oldest finished records while the directory's records hold more [default: 1G].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "record_dir")]
    pub retain: Option<u64>,
    /// Also monitor the physical memory of the processes served (root), as kernel DAMON's
    /// paddr does: memory they share counts once (the `udamon_host_*` series).
    #[arg(long)]
    pub host: bool,
    /// Export series of their own (labelled by pid) for the N processes with the most resident
    /// memory, besides those named by --pid or `ctl add`; every process counts in its cgroup's
    /// series [default: 50].
    #[arg(long, value_name = "N")]
    pub process_series: Option<usize>,
    /// Where the host's root file system is seen, for the container runtime's state that
    /// names Kubernetes pods and containers (a DaemonSet mounts the host's at /host)
    /// [default: /].
    #[arg(long, value_name = "DIR")]
    pub host_root: Option<PathBuf>,
    /// The records' permissions, in octal: they show what serve saw of other users'
    /// processes [default: 600].
    #[arg(long, value_name = "MODE", value_parser = crate::units::parse_record_mode)]
    pub record_mode: Option<u32>,
    /// The access source, as for `record`.
    #[arg(long, value_enum, default_value_t = SourceArg::Auto)]
    pub access_source: SourceArg,
    /// Sampling rate of the cpuclock and pmu sources.
    #[arg(long, value_name = "HZ", value_parser = parse_rate_hz, default_value_t = vaddr::DEFAULT_CPUCLOCK_HZ)]
    pub sample_rate: u64,
    #[command(flatten)]
    pub monitoring: MonitoringArgs,
}

#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The control socket of the running `udamon serve` [default: as serve's].
    #[arg(long, value_name = "PATH", global = true)]
    pub control: Option<PathBuf>,
    #[command(subcommand)]
    pub request: CtlRequest,
}

/// A target as `ctl` names it: a pid, or `sim:N` for a simulated workload.
#[derive(Debug, Subcommand)]
pub enum CtlRequest {
    /// List the served targets.
    Targets,
    /// Serve one more target: a process, or a simulated workload (for trying serve out).
    Add {
        #[arg(
            long,
            value_name = "PID",
            required_unless_present = "sim",
            conflicts_with = "sim"
        )]
        pid: Option<u32>,
        /// builtin:NAME or a masim-format file, simulated in real time.
        #[arg(long, value_name = "WORKLOAD")]
        sim: Option<String>,
        /// Simulate in virtual time, as fast as the CPU goes (soak tests).
        #[arg(long, requires = "sim")]
        fast: bool,
    },
    /// Stop serving a target.
    Remove { target: String },
    /// Change a target's intervals and region bounds; what is not given is kept.
    Tune {
        target: String,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Add the schemes of a file (docs/schemes.md) to a target.
    AddSchemes {
        target: String,
        #[arg(value_name = "FILE")]
        schemes: PathBuf,
    },
    /// Remove a target's scheme by its index (0 is the first).
    RemoveScheme { target: String, index: usize },
    /// A target's last window, as `report access` shows it.
    Snapshot {
        target: String,
        #[arg(long)]
        json: bool,
    },
    /// A target's intervals, region bounds and schemes.
    Status { target: String },
}

/// Overrides of the monitoring attributes' intervals and region bounds; what is not given is
/// kept. The one form they take wherever they come from: `ctl tune`'s flags and what `udamon
/// ctl` sends serve (derived here), `record`'s flags (`MonitoringArgs::overrides`) and
/// serve's configuration file (whose keys are durations with units); one place turns them into
/// attributes (`Overrides::apply_to`, in `monitor::settings`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Args, serde::Deserialize, serde::Serialize,
)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us)]
    pub sample_us: Option<u64>,
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us)]
    pub aggr_us: Option<u64>,
    #[arg(long, value_name = "DURATION", value_parser = parse_interval_us)]
    pub update_us: Option<u64>,
    #[arg(long, value_name = "N")]
    pub min_regions: Option<u32>,
    #[arg(long, value_name = "N")]
    pub max_regions: Option<u32>,
}

impl std::fmt::Display for Overrides {
    /// The changes given, as `ctl tune` takes them: `--aggr-us 200000us --max-regions 300`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let intervals = [
            ("sample-us", self.sample_us),
            ("aggr-us", self.aggr_us),
            ("update-us", self.update_us),
        ];
        let bounds = [
            ("min-regions", self.min_regions),
            ("max-regions", self.max_regions),
        ];
        let mut words = Vec::new();
        for (name, us) in intervals {
            if let Some(us) = us {
                words.push(format!("--{name} {us}us"));
            }
        }
        for (name, n) in bounds {
            if let Some(n) = n {
                words.push(format!("--{name} {n}"));
            }
        }
        if words.is_empty() {
            words.push("(nothing)".to_string());
        }
        write!(f, "{}", words.join(" "))
    }
}
