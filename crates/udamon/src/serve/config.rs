//! What `udamon serve` does, from its command line and, optionally, a TOML file (docs/serve.md,
//! "Configuration"): the file gives whatever the command line does not, and SIGHUP reads it
//! again. Every problem is one line that names the file and the key.

use crate::cli::ServeArgs;
use crate::units::{parse_duration_us, parse_interval_us, parse_size};
use anyhow::{Context as _, Result, bail};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The configuration file: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub listen: Option<String>,
    pub control: Option<PathBuf>,
    #[serde(default)]
    pub pids: Vec<u32>,
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
    #[serde(default, rename = "match")]
    pub matches: Vec<String>,
    pub rescan: Option<String>,
    pub schemes: Option<PathBuf>,
    pub sample: Option<String>,
    pub aggr: Option<String>,
    pub update: Option<String>,
    pub min_regions: Option<u32>,
    pub max_regions: Option<u32>,
    pub process_series: Option<usize>,
    #[serde(default)]
    pub host: bool,
    pub records: Option<Records>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Records {
    pub dir: PathBuf,
    pub rotate_every: Option<String>,
    pub rotate_size: Option<String>,
    pub retain: Option<String>,
}

/// Records kept, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsConfig {
    pub dir: PathBuf,
    pub every_us: Option<u64>,
    pub max_bytes: Option<u64>,
    pub retain_bytes: u64,
}

/// The serve configuration, resolved: command line first, then the file.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub control: PathBuf,
    pub pids: Vec<u32>,
    pub cgroups: Vec<PathBuf>,
    pub matches: Vec<String>,
    pub rescan_us: u64,
    /// The intervals and region bounds, as `record`'s flags give them.
    pub monitoring: crate::cli::MonitoringArgs,
    pub records: Option<RecordsConfig>,
    /// Processes with series of their own besides those named (docs/serve.md, "Metrics").
    pub process_series: usize,
    /// The physical memory of the processes served is monitored too.
    pub host: bool,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9580";
const DEFAULT_RESCAN_US: u64 = 2_000_000;
const DEFAULT_PROCESS_SERIES: usize = 50;
/// Rotation defaults: hourly, as damo splits its records, and 1 GiB of records in all.
const DEFAULT_ROTATE_US: u64 = 3_600_000_000;
const DEFAULT_RETAIN_BYTES: u64 = 1 << 30;

/// The control socket's default path: the runtime directory of the user, or of the system for
/// root.
pub fn default_control() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) => PathBuf::from(dir).join("udamon.sock"),
        None if unsafe_geteuid() == 0 => PathBuf::from("/run/udamon.sock"),
        None => std::env::temp_dir().join(format!("udamon-{}.sock", unsafe_geteuid())),
    }
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// Reads the configuration file.
pub fn read_file(path: &Path) -> Result<File> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let line = e.span().map_or(0, |s| {
            text[..s.start.min(text.len())].matches('\n').count() + 1
        });
        anyhow::anyhow!("{}: line {line}: {}", path.display(), e.message().trim())
    })
}

impl Config {
    /// The command line's settings, completed by the configuration file when there is one.
    pub fn resolve(args: &ServeArgs) -> Result<Config> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => File::default(),
        };
        let named = |key: &str| match &args.config {
            Some(p) => format!("{}: {key}", p.display()),
            None => key.to_string(),
        };
        let listen_text = args
            .listen
            .clone()
            .or(file.listen)
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen: SocketAddr = listen_text.parse().map_err(|_| {
            anyhow::anyhow!(
                "{}: '{listen_text}' is not an address and port such as {DEFAULT_LISTEN}",
                named("listen")
            )
        })?;
        let duration = |key: &str, text: &Option<String>| -> Result<Option<u64>> {
            text.as_deref()
                .map(|t| parse_interval_us(t).map_err(|e| anyhow::anyhow!("{}: {e}", named(key))))
                .transpose()
        };
        let mut monitoring = args.monitoring.clone();
        monitoring.sample_us = monitoring.sample_us.or(duration("sample", &file.sample)?);
        monitoring.aggr_us = monitoring.aggr_us.or(duration("aggr", &file.aggr)?);
        monitoring.update_us = monitoring.update_us.or(duration("update", &file.update)?);
        monitoring.min_regions = monitoring.min_regions.or(file.min_regions);
        monitoring.max_regions = monitoring.max_regions.or(file.max_regions);
        monitoring.schemes = monitoring.schemes.or(file.schemes);
        let rescan_us = match (&args.rescan, &file.rescan) {
            (Some(us), _) => *us,
            (None, Some(text)) => {
                parse_duration_us(text).map_err(|e| anyhow::anyhow!("{}: {e}", named("rescan")))?
            }
            (None, None) => DEFAULT_RESCAN_US,
        };
        let records = match (&args.record_dir, file.records) {
            (Some(dir), _) => Some(RecordsConfig {
                dir: dir.clone(),
                every_us: args.rotate_every.or(Some(DEFAULT_ROTATE_US)),
                max_bytes: args.rotate_size,
                retain_bytes: args.retain.unwrap_or(DEFAULT_RETAIN_BYTES),
            }),
            (None, Some(r)) => {
                let size = |key: &str, text: &Option<String>| -> Result<Option<u64>> {
                    text.as_deref()
                        .map(|t| parse_size(t).map_err(|e| anyhow::anyhow!("{}: {e}", named(key))))
                        .transpose()
                };
                Some(RecordsConfig {
                    dir: r.dir,
                    every_us: duration("records.rotate_every", &r.rotate_every)?
                        .or(Some(DEFAULT_ROTATE_US)),
                    max_bytes: size("records.rotate_size", &r.rotate_size)?,
                    retain_bytes: size("records.retain", &r.retain)?
                        .unwrap_or(DEFAULT_RETAIN_BYTES),
                })
            }
            (None, None) => None,
        };
        let mut pids = args.pid.clone();
        pids.extend(file.pids);
        let mut cgroups = args.cgroup.clone();
        cgroups.extend(file.cgroups);
        let mut matches = args.r#match.clone();
        matches.extend(file.matches);
        if pids.is_empty() && cgroups.is_empty() && matches.is_empty() && !args.idle {
            bail!(
                "nothing to serve: give --pid, --cgroup or --match (or targets in --config), \
                 or --idle to start empty and add targets with `udamon ctl add`"
            );
        }
        Ok(Config {
            listen,
            control: args
                .control
                .clone()
                .or(file.control)
                .unwrap_or_else(default_control),
            pids,
            cgroups,
            matches,
            rescan_us,
            monitoring,
            records,
            process_series: args
                .process_series
                .or(file.process_series)
                .unwrap_or(DEFAULT_PROCESS_SERIES),
            host: args.host || file.host,
        })
    }
}
