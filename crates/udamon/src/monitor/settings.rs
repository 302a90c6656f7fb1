//! The monitoring settings, resolved once from the command line (the low-level flags become the
//! high-level settings here and nowhere else): what is monitored supplies the defaults of
//! whatever the user did not give, the autotune goal is built, the scheme file is loaded against
//! the final intervals, and what the flags mean together is checked, each problem a one-line
//! error. Values that are wrong on their own (a zero interval, a zero rate) are refused while
//! parsing ([`crate::units`]); [`check_attrs`] bounds the attributes wherever they come from
//! (flags, serve's configuration, `udamon ctl tune`).

use crate::cli::{MonitoringArgs, Overrides};
use crate::schemes_file;
use crate::units::{MAX_DURATION_US, check_duration_us, format_duration_us};
use anyhow::{Context as _, Result, bail};
use udamon_core::damos::Scheme;
use udamon_core::{Adjustment, Attrs, IntervalsGoal, REGION_BYTES};
use udamon_record::MAX_SNAPSHOT_REGIONS;

/// Everything a monitoring session needs to know from the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub attrs: Attrs,
    pub seed: u64,
    /// The scheme file's schemes, their rates and ages converted with `attrs`.
    pub schemes: Vec<Scheme>,
    /// Record each apply pass's tried regions.
    pub tried_regions: bool,
    /// Stop after this long (on the context's time line).
    pub duration_us: Option<u64>,
}

impl MonitoringArgs {
    /// The intervals and region bounds given, damo's triples (`--monitoring-intervals`,
    /// `--nr-regions-range`) taken apart.
    fn overrides(&self) -> Overrides {
        let [sample_us, aggr_us, update_us] = match self.monitoring_intervals.as_deref() {
            Some(&[s, a, u]) => [Some(s), Some(a), Some(u)],
            _ => [self.sample_us, self.aggr_us, self.update_us],
        };
        let [min_regions, max_regions] = match self.nr_regions_range.as_deref() {
            Some(&[min, max]) => [Some(min), Some(max)],
            _ => [self.min_regions, self.max_regions],
        };
        Overrides {
            sample_us,
            aggr_us,
            update_us,
            min_regions,
            max_regions,
        }
    }

    /// [`Self::resolve`] for live processes: every scheme's action must be one that a process
    /// can be given (the error names the schemes file and the first scheme refused).
    pub fn resolve_live(&self, defaults: &Attrs, duration_us: Option<u64>) -> Result<Settings> {
        let settings = self.resolve(defaults, duration_us)?;
        if let Some(path) = self.schemes.as_deref() {
            check_live(&settings.schemes)
                .map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))?;
        }
        Ok(settings)
    }

    /// The settings for monitoring with `defaults` (the attributes of what is monitored:
    /// [`udamon_sim::default_attrs`] or [`udamon_linux::vaddr::sampled_attrs`]) for whatever
    /// the user did not give, stopping after `duration_us` if given.
    pub fn resolve(&self, defaults: &Attrs, duration_us: Option<u64>) -> Result<Settings> {
        let base = self.overrides().apply_to(defaults);
        let recommended = IntervalsGoal::recommended();
        let attrs = Attrs {
            intervals_goal: if self.autotune {
                // A user who samples faster than the goal's floor keeps that rate reachable.
                IntervalsGoal {
                    min_sample_us: base.sample_interval_us.min(recommended.min_sample_us),
                    ..recommended
                }
            } else {
                IntervalsGoal::default()
            },
            adjustment: if self.faithful {
                Adjustment::Faithful
            } else {
                defaults.adjustment
            },
            ..base
        };
        check_attrs(&attrs)?;
        // Every command that resolves these flags writes a record (serve, which writes none,
        // checks its targets' attributes with `check_attrs` alone).
        if attrs.max_nr_regions as usize > MAX_SNAPSHOT_REGIONS {
            bail!(
                "invalid monitoring attributes: a record holds at most {MAX_SNAPSHOT_REGIONS} \
                 regions a snapshot (asked for {}): give fewer regions, or monitor with `udamon \
                 serve`, which keeps no record",
                attrs.max_nr_regions
            );
        }
        if let Some(d) = duration_us {
            check_duration_us(&format_duration_us(d), d)
                .map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
        }
        let aggr = attrs.aggr_interval_us;
        if let Some(d) = duration_us.filter(|&d| d < aggr) {
            bail!(
                "--duration {} is shorter than one aggregation interval ({}), so nothing would \
                 be recorded: give at least that, with a unit (e.g. --duration 10s; a bare \
                 number is microseconds)",
                format_duration_us(d),
                format_duration_us(aggr)
            );
        }
        let schemes = match &self.schemes {
            // Rates and ages in the file become counts of these intervals.
            Some(path) => schemes_file::load(path, &attrs)?,
            None => Vec::new(),
        };
        Ok(Settings {
            attrs,
            seed: self.seed,
            schemes,
            tried_regions: self.tried_regions,
            duration_us,
        })
    }
}

/// The shortest interval taken: a loop stepping every microsecond pins a core and writes
/// tens of MB of record a second.
pub const MIN_INTERVAL_US: u64 = 100;
/// The longest sampling interval (DAMON's autotuning goes up to this): a target takes control
/// requests between two samples, so this is also how long one may wait for an answer.
pub const MAX_SAMPLE_US: u64 = 10_000_000;
/// The longest aggregation and update intervals.
pub const MAX_INTERVAL_US: u64 = 3_600_000_000;
// Any interval is a duration udamon takes.
const _: () = assert!(MAX_INTERVAL_US < MAX_DURATION_US);
/// Checks monitoring attributes, wherever they come from: each interval from
/// [`MIN_INTERVAL_US`] to its maximum, regions that fit in the memory the host has available
/// ([`check_region_memory`]), and what the core requires of them together (sampling within
/// aggregation, at least 3 regions, ...). One line per problem.
pub fn check_attrs(attrs: &Attrs) -> Result<()> {
    for (name, us, max) in [
        ("sampling", attrs.sample_interval_us, MAX_SAMPLE_US),
        ("aggregation", attrs.aggr_interval_us, MAX_INTERVAL_US),
        ("update", attrs.ops_update_interval_us, MAX_INTERVAL_US),
    ] {
        if !(MIN_INTERVAL_US..=max).contains(&us) {
            bail!(
                "invalid monitoring attributes: the {name} interval {} is out of range: give {} \
                 to {}",
                format_duration_us(us),
                format_duration_us(MIN_INTERVAL_US),
                format_duration_us(max)
            );
        }
    }
    attrs.validate().context("invalid monitoring attributes")?;
    check_region_memory(attrs, mem_available_bytes())
}

/// Regions are bounded by memory, not by a count: `attrs`'s most regions, at
/// [`REGION_BYTES`] each, must fit in half of `available` bytes (the host's `MemAvailable`;
/// the other half for the samples, the record and everything else). Unknown (`None`), anything
/// goes.
pub fn check_region_memory(attrs: &Attrs, available: Option<u64>) -> Result<()> {
    let need = attrs.region_memory_bytes();
    if let Some(available) = available.filter(|&a| need > a / 2) {
        bail!(
            "invalid monitoring attributes: {} regions may take {} MiB ({REGION_BYTES} bytes \
             each), more than half of the {} MiB this host has available: give at most {} \
             regions",
            attrs.max_nr_regions,
            need >> 20,
            available >> 20,
            available / 2 / REGION_BYTES
        );
    }
    Ok(())
}

/// The host's `MemAvailable`, in bytes.
fn mem_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

impl Overrides {
    /// `attrs` with these changes.
    pub fn apply_to(&self, attrs: &Attrs) -> Attrs {
        Attrs {
            sample_interval_us: self.sample_us.unwrap_or(attrs.sample_interval_us),
            aggr_interval_us: self.aggr_us.unwrap_or(attrs.aggr_interval_us),
            ops_update_interval_us: self.update_us.unwrap_or(attrs.ops_update_interval_us),
            min_nr_regions: self.min_regions.unwrap_or(attrs.min_nr_regions),
            max_nr_regions: self.max_regions.unwrap_or(attrs.max_nr_regions),
            ..*attrs
        }
    }
}

/// Whether every scheme's action can be done to a live process (some are the simulation's
/// alone); the first that cannot, as `schemes[i]: why`.
pub fn check_live(schemes: &[Scheme]) -> Result<(), String> {
    for (i, scheme) in schemes.iter().enumerate() {
        udamon_linux::actions::check_action(scheme.action)
            .map_err(|why| format!("schemes[{i}]: {why}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use udamon_core::{Adjustment, Attrs};

    /// The record command's monitoring flags from `flags`, resolved with `defaults`.
    fn resolve(flags: &[&str], defaults: &Attrs) -> anyhow::Result<super::Settings> {
        let cli = Cli::try_parse_from(["udamon", "record"].iter().chain(flags)).unwrap();
        let Command::Record(args) = cli.command else {
            unreachable!("parsed as record")
        };
        args.monitoring.resolve(defaults, args.duration)
    }

    fn live() -> Attrs {
        udamon_linux::vaddr::sampled_attrs(&udamon_linux::perf::AccessSource::Tick)
    }

    #[test]
    fn more_regions_than_a_record_holds_are_refused_in_one_plain_line() {
        let many = (udamon_record::MAX_SNAPSHOT_REGIONS + 1).to_string();
        let e = resolve(&["--min-regions", "10", "--max-regions", &many], &live())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("(asked for {many})")), "{e}");
        assert!(!e.contains("  ") && !e.contains('\n'), "{e:?}");
    }

    #[test]
    fn the_defaults_fill_what_is_not_given() {
        let s = resolve(&["--aggr-us", "800ms", "--max-regions", "90"], &live()).unwrap();
        let d = live();
        assert_eq!(s.attrs.sample_interval_us, d.sample_interval_us);
        assert_eq!(s.attrs.aggr_interval_us, 800_000);
        assert_eq!(s.attrs.ops_update_interval_us, d.ops_update_interval_us);
        assert_eq!(s.attrs.min_nr_regions, d.min_nr_regions);
        assert_eq!(s.attrs.max_nr_regions, 90);
        let sim = resolve(&[], &udamon_sim::default_attrs()).unwrap();
        assert_eq!(sim.attrs, udamon_sim::default_attrs());
        assert_eq!(sim.attrs.adjustment, Adjustment::Guided);
        let faithful = resolve(&["--faithful"], &udamon_sim::default_attrs()).unwrap();
        assert_eq!(faithful.attrs.adjustment, Adjustment::Faithful);
        let damo = resolve(&["--monitoring_intervals", "1ms", "20ms", "2s"], &live()).unwrap();
        assert_eq!(
            (
                damo.attrs.sample_interval_us,
                damo.attrs.aggr_interval_us,
                damo.attrs.ops_update_interval_us
            ),
            (1000, 20_000, 2_000_000)
        );
    }

    #[test]
    fn autotune_keeps_a_faster_sampling_reachable() {
        let s = resolve(&["--autotune", "--sample-us", "2ms"], &live()).unwrap();
        assert!(s.attrs.intervals_goal.enabled());
        assert_eq!(s.attrs.intervals_goal.min_sample_us, 2000);
        let s = resolve(&["--autotune"], &live()).unwrap();
        assert_eq!(
            s.attrs.intervals_goal,
            udamon_core::IntervalsGoal::recommended()
        );
    }

    #[test]
    fn a_duration_shorter_than_a_window_is_refused() {
        let sim = udamon_sim::default_attrs();
        let e = resolve(&["--duration", "10"], &sim).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("--duration 10us is shorter than one aggregation interval (100ms)"));
        assert!(!text.contains('\n'), "one line: {text}");
        assert!(resolve(&["--duration", "100ms"], &sim).is_ok());
        // The window that counts is the one in force, not the default.
        assert!(resolve(&["--duration", "100ms", "--aggr-us", "1s"], &sim).is_err());
    }

    #[test]
    fn regions_are_bounded_by_memory_and_records_by_their_format() {
        let sim = udamon_sim::default_attrs();
        // The seed's experiment asks for page granularity: refused at 100,000 regions once.
        let s = resolve(&["--monitoring_nr_regions_range", "200000", "200000"], &sim).unwrap();
        assert_eq!(s.attrs.max_nr_regions, 200_000);
        // Page granularity over 16 GiB fits a host with a few GiB free, not one with 512 MiB.
        let pages = udamon_core::Attrs {
            min_nr_regions: 4 << 20,
            max_nr_regions: 4 << 20,
            ..sim
        };
        assert!(super::check_region_memory(&pages, Some(4 << 30)).is_ok());
        assert!(super::check_region_memory(&pages, None).is_ok());
        let e = super::check_region_memory(&pages, Some(512 << 20)).unwrap_err();
        let text = format!("{e:#}");
        let fits = (256 << 20) / udamon_core::REGION_BYTES;
        assert!(
            text.contains("4194304 regions") && text.contains(&format!("at most {fits} regions")),
            "{text}"
        );
        // A record cannot hold them: refused before anything starts, saying what to do.
        let e = resolve(&["--monitoring_nr_regions_range", "1000", "300000"], &sim).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("262144") && text.contains("serve"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }

    #[test]
    fn absurd_intervals_and_region_bounds_are_refused() {
        let sim = udamon_sim::default_attrs();
        for flags in [
            &["--sample-us", "1", "--aggr-us", "1", "--update-us", "1"][..],
            &["--monitoring_intervals", "1us", "1us", "1us"],
            &["--sample-us", "1h", "--aggr-us", "2h"],
            &["--update-us", "2h"],
            &["--max-regions", "4294967295"],
        ] {
            let e = resolve(flags, &sim).unwrap_err();
            let text = format!("{e:#}");
            assert!(
                text.contains("out of range") || text.contains("at most"),
                "{flags:?}: {text}"
            );
            assert!(!text.contains('\n'), "one line: {text}");
        }
        assert!(resolve(&["--sample-us", "100us", "--aggr-us", "1h"], &sim).is_ok());
        // The same check for attributes from anywhere else (serve's ctl tune).
        let mut attrs = sim;
        attrs.sample_interval_us = 0;
        assert!(super::check_attrs(&attrs).is_err());
    }

    #[test]
    fn zero_intervals_rates_and_durations_are_refused_while_parsing() {
        for flags in [
            &["--sample-us", "0"][..],
            &["--aggr-us", "0ms"],
            &["--update-us", "0"],
            &["--monitoring_intervals", "0", "0", "0"],
            &["--duration", "0"],
            &["--sample-rate", "0"],
        ] {
            let e = Cli::try_parse_from(["udamon", "record"].iter().chain(flags)).unwrap_err();
            assert!(
                e.to_string().contains("more than 0") || e.to_string().contains("longer than 0"),
                "{flags:?}: {e}"
            );
        }
    }
}
