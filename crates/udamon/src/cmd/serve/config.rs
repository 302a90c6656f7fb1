//! What `udamon serve` does, from its command line and, optionally, a TOML file (docs/serve.md,
//! "Configuration"): the file gives whatever the command line does not, and SIGHUP reads it
//! again. Every problem is one line that names the file and the key.
//!
//! Whoever can write the file chooses what a root service monitors, where it writes and what
//! it reads, so the file must belong to serve's own user or root and be writable by no one
//! else. Each selector is asked for by someone, whom the processes it takes are checked
//! against (docs/serve.md, "Who may have what monitored"): the command line's by whoever
//! started serve, the file's by the file's owner.

use crate::cli::{MonitoringArgs, Overrides, ServeArgs};
use crate::units::{
    parse_interval_us, parse_record_mode, parse_rescan_us, parse_size, parse_socket_mode,
};
use anyhow::{Result, bail};
use serde::Deserialize;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use udamon_exporter::{Listen, WebConfig};
use udamon_linux::discover::Credentials;

/// The configuration file: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub listen: Option<String>,
    pub listen_mode: Option<String>,
    pub web_config: Option<PathBuf>,
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
    pub host_root: Option<PathBuf>,
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
    /// The records' permissions, in octal ("0640").
    pub mode: Option<String>,
}

/// Records kept, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsConfig {
    pub dir: PathBuf,
    pub every_us: Option<u64>,
    pub max_bytes: Option<u64>,
    pub retain_bytes: u64,
    pub mode: u32,
}

/// A selector as given, before its regular expression is compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    Pid(u32),
    Cgroup(PathBuf),
    Match(String),
}

/// The serve configuration, resolved: command line first, then the file.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: Listen,
    /// The exporter-toolkit's web configuration: TLS and basic authentication.
    pub web_config: Option<PathBuf>,
    pub control: PathBuf,
    /// The selectors, each with who asked for it.
    pub selectors: Vec<(Wanted, Credentials)>,
    pub rescan_us: u64,
    /// The command line's monitoring flags (with the file's schemes when it names none).
    pub monitoring: MonitoringArgs,
    /// The file's intervals and region bounds: the defaults beneath the command line's.
    pub file_overrides: Overrides,
    pub records: Option<RecordsConfig>,
    /// Processes with series of their own besides those named (docs/serve.md, "Metrics").
    pub process_series: usize,
    /// Where the host's root file system is seen (the container runtime's state under it).
    pub host_root: PathBuf,
    /// The physical memory of the processes served is monitored too.
    pub host: bool,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9580";
const DEFAULT_RESCAN_US: u64 = 2_000_000;
const DEFAULT_PROCESS_SERIES: usize = 50;
/// Rotation defaults: hourly, as damo splits its records, and 1 GiB of records in all.
const DEFAULT_ROTATE_US: u64 = 3_600_000_000;
const DEFAULT_RETAIN_BYTES: u64 = 1 << 30;

/// The records' default permissions: serve's user only.
pub const DEFAULT_RECORD_MODE: u32 = 0o600;

/// The metrics socket's default permissions: serve's user only, as the control socket's.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;

/// The web configuration at `path`, which must belong to serve's user or root and be
/// writable by no one else: whoever writes it chooses who may read the metrics.
pub fn read_web_config(path: &Path) -> Result<WebConfig> {
    owner(path, "who may read the metrics")?;
    WebConfig::read(path).map_err(|e| anyhow::anyhow!(e))
}

/// Who asked for the selectors of the configuration file at `path`: its owner, who must be
/// serve's own user or root, with the file writable by no one else (`chooses`: what its
/// writer would choose, for messages).
fn owner(path: &Path, chooses: &str) -> Result<Credentials> {
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let mine = Credentials::of_this_process();
    if meta.uid() != mine.uid && meta.uid() != 0 {
        bail!(
            "{} belongs to uid {}: serve takes a configuration only from its own user or root \
             (whoever writes it chooses {chooses}); chown it",
            path.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "{} may be written by other users (mode {:04o}): they could choose {chooses}; \
             chmod go-w it",
            path.display(),
            meta.mode() & 0o7777
        );
    }
    Ok(if meta.uid() == mine.uid {
        mine
    } else {
        Credentials::of_user(0, 0)
    })
}

/// Reads the configuration file.
pub fn read_file(path: &Path) -> Result<File> {
    let text = crate::small_file::read_text(path, "configuration file")?;
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
        let (file, file_owner) = match &args.config {
            Some(path) => {
                let owner = owner(path, "what serve monitors")?;
                (read_file(path)?, owner)
            }
            None => (File::default(), Credentials::of_this_process()),
        };
        let named = |key: &str| match &args.config {
            Some(p) => format!("{}: {key}", p.display()),
            None => key.to_string(),
        };
        let listen_text = args
            .listen
            .clone()
            .or(file.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen = match listen_text.strip_prefix("unix:") {
            Some(path) if !path.is_empty() => Listen::Unix {
                path: PathBuf::from(path),
                mode: match (args.listen_mode, &file.listen_mode) {
                    (Some(mode), _) => mode,
                    (None, Some(text)) => parse_socket_mode(text)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", named("listen_mode")))?,
                    (None, None) => DEFAULT_SOCKET_MODE,
                },
            },
            _ => Listen::Tcp(listen_text.parse::<SocketAddr>().map_err(|_| {
                anyhow::anyhow!(
                    "{}: '{listen_text}' is not an address and port such as {DEFAULT_LISTEN}, \
                     nor unix:PATH",
                    named("listen")
                )
            })?),
        };
        if matches!(listen, Listen::Tcp(_))
            && (args.listen_mode.is_some() || file.listen_mode.is_some())
        {
            bail!(
                "{}: a mode is for a unix socket: give listen as unix:PATH",
                named("listen_mode")
            );
        }
        let duration = |key: &str, text: &Option<String>| -> Result<Option<u64>> {
            text.as_deref()
                .map(|t| parse_interval_us(t).map_err(|e| anyhow::anyhow!("{}: {e}", named(key))))
                .transpose()
        };
        let file_overrides = Overrides {
            sample_us: duration("sample", &file.sample)?,
            aggr_us: duration("aggr", &file.aggr)?,
            update_us: duration("update", &file.update)?,
            min_regions: file.min_regions,
            max_regions: file.max_regions,
        };
        let mut monitoring = args.monitoring.clone();
        monitoring.schemes = monitoring.schemes.or(file.schemes);
        let rescan_us = match (&args.rescan, &file.rescan) {
            (Some(us), _) => *us,
            (None, Some(text)) => {
                parse_rescan_us(text).map_err(|e| anyhow::anyhow!("{}: {e}", named("rescan")))?
            }
            (None, None) => DEFAULT_RESCAN_US,
        };
        let records = match (&args.record_dir, file.records) {
            (Some(dir), _) => Some(RecordsConfig {
                dir: dir.clone(),
                every_us: args.rotate_every.or(Some(DEFAULT_ROTATE_US)),
                max_bytes: args.rotate_size,
                retain_bytes: args.retain.unwrap_or(DEFAULT_RETAIN_BYTES),
                mode: args.record_mode.unwrap_or(DEFAULT_RECORD_MODE),
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
                    mode: match (args.record_mode, &r.mode) {
                        (Some(mode), _) => mode,
                        (None, Some(text)) => parse_record_mode(text)
                            .map_err(|e| anyhow::anyhow!("{}: {e}", named("records.mode")))?,
                        (None, None) => DEFAULT_RECORD_MODE,
                    },
                })
            }
            (None, None) => None,
        };
        let wanted = |pids: Vec<u32>, cgroups: Vec<PathBuf>, matches: Vec<String>| {
            let pids = pids.into_iter().map(Wanted::Pid);
            let cgroups = cgroups.into_iter().map(Wanted::Cgroup);
            pids.chain(cgroups)
                .chain(matches.into_iter().map(Wanted::Match))
                .collect::<Vec<_>>()
        };
        let by_command_line = Credentials::of_this_process();
        let selectors: Vec<(Wanted, Credentials)> =
            wanted(args.pid.clone(), args.cgroup.clone(), args.r#match.clone())
                .into_iter()
                .map(|w| (w, by_command_line.clone()))
                .chain(
                    wanted(file.pids, file.cgroups, file.matches)
                        .into_iter()
                        .map(|w| (w, file_owner.clone())),
                )
                .collect();
        if selectors.is_empty() && !args.idle {
            bail!(
                "nothing to serve: give --pid, --cgroup or --match (or targets in --config), \
                 or --idle to start empty and add targets with `udamon ctl add`"
            );
        }
        Ok(Config {
            listen,
            web_config: args.web_config.clone().or(file.web_config),
            control: args
                .control
                .clone()
                .or(file.control)
                .unwrap_or_else(super::socket::default_path),
            selectors,
            rescan_us,
            monitoring,
            file_overrides,
            records,
            process_series: args
                .process_series
                .or(file.process_series)
                .unwrap_or(DEFAULT_PROCESS_SERIES),
            host_root: args
                .host_root
                .clone()
                .or(file.host_root)
                .unwrap_or_else(|| PathBuf::from("/")),
            host: args.host || file.host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Config;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn the_files_intervals_sit_beneath_the_command_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.toml");
        let file = "pids = [1]\nsample = \"10ms\"\naggr = \"1s\"\nmax_regions = 300\n";
        std::fs::write(&path, file).unwrap();
        let path = path.to_str().unwrap();
        let cli = Cli::try_parse_from(["udamon", "serve", "--config", path, "--aggr-us", "2s"]);
        let Command::Serve(args) = cli.unwrap().command else {
            unreachable!("parsed as serve")
        };
        let config = Config::resolve(&args).unwrap();
        let defaults = udamon_sim::default_attrs();
        let attrs = config
            .monitoring
            .resolve(&config.file_overrides.apply_to(&defaults), None)
            .unwrap()
            .attrs;
        assert_eq!(attrs.sample_interval_us, 10_000, "the file's");
        assert_eq!(attrs.aggr_interval_us, 2_000_000, "the command line's");
        assert_eq!(attrs.max_nr_regions, 300, "the file's");
        assert_eq!(attrs.min_nr_regions, defaults.min_nr_regions, "the default");
    }
}
