//! The monitoring settings, resolved once from the command line (the low-level flags become the
//! high-level settings here and nowhere else): what is monitored supplies the defaults of
//! whatever the user did not give, the autotune goal is built, the scheme file is loaded against
//! the final intervals, and what the flags mean together is checked, each problem a one-line
//! error. Values that are wrong on their own (a zero interval, a zero rate) are refused while
//! parsing ([`crate::units`]).

use crate::cli::MonitoringArgs;
use crate::schemes_file;
use crate::units::format_duration_us;
use anyhow::{Context as _, Result, bail};
use udamon_core::damos::Scheme;
use udamon_core::{Adjustment, Attrs, IntervalsGoal};

/// Everything a monitoring session needs to know from the command line.
#[derive(Debug)]
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
    /// The settings for monitoring with `defaults` (the attributes of what is monitored:
    /// [`udamon_sim::default_attrs`] or [`udamon_linux::vaddr::sampled_attrs`]) for whatever
    /// the user did not give, stopping after `duration_us` if given.
    pub fn resolve(&self, defaults: &Attrs, duration_us: Option<u64>) -> Result<Settings> {
        let (sample, aggr, update) = match self.monitoring_intervals.as_deref() {
            Some(&[s, a, u]) => (s, a, u),
            _ => (
                self.sample_us.unwrap_or(defaults.sample_interval_us),
                self.aggr_us.unwrap_or(defaults.aggr_interval_us),
                self.update_us.unwrap_or(defaults.ops_update_interval_us),
            ),
        };
        let (min, max) = match self.nr_regions_range.as_deref() {
            Some(&[min, max]) => (min, max),
            _ => (
                self.min_regions.unwrap_or(defaults.min_nr_regions),
                self.max_regions.unwrap_or(defaults.max_nr_regions),
            ),
        };
        let recommended = IntervalsGoal::recommended();
        let attrs = Attrs {
            sample_interval_us: sample,
            aggr_interval_us: aggr,
            ops_update_interval_us: update,
            min_nr_regions: min,
            max_nr_regions: max,
            intervals_goal: if self.autotune {
                // A user who samples faster than the goal's floor keeps that rate reachable.
                IntervalsGoal {
                    min_sample_us: sample.min(recommended.min_sample_us),
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
            ..*defaults
        };
        attrs.validate().context("invalid monitoring attributes")?;
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
