//! Errors of the sampling sources: one line each, saying what is wrong and what to do.

use std::io;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PerfError {
    #[error("process {0} does not exist (it may have exited)")]
    NoSuchProcess(u32),

    #[error(
        "no permission to sample process {pid} (owned by uid {owner}, we are uid {me}): run as the process's owner or as root"
    )]
    NotPermitted { pid: u32, owner: u32, me: u32 },

    #[error(
        "process {0} runs with other credentials than its owner (setuid or file capabilities) or is not dumpable (prctl PR_SET_DUMPABLE 0), so only root may sample it: run as root"
    )]
    NotDumpable(u32),

    #[error(
        "{what} needs root or CAP_PERFMON while kernel.perf_event_paranoid is {paranoid}: run as root, or use --access-source cpuclock (user-mode only)"
    )]
    KernelSamplingDenied { what: &'static str, paranoid: i32 },

    #[error(
        "unprivileged perf events are disabled here (kernel.perf_event_paranoid is {paranoid}): run as root or with CAP_PERFMON, or ask an administrator to run `sysctl kernel.perf_event_paranoid=2`"
    )]
    ParanoidTooHigh { paranoid: i32 },

    #[error(
        "sampling every process needs root or CAP_PERFMON (kernel.perf_event_paranoid is {paranoid}): run as root, or monitor your own processes with `udamon record --pid`"
    )]
    CpuWideDenied { paranoid: String },

    #[error("{event} is not supported by this kernel or machine ({cause}): {advice}")]
    Unsupported {
        event: String,
        cause: io::Error,
        advice: &'static str,
    },

    #[error("{0}")]
    NoPmu(String),

    #[error(
        "sample frequency {freq} Hz is above kernel.perf_event_max_sample_rate ({max}): use at most {max} Hz"
    )]
    FrequencyTooHigh { freq: u64, max: u64 },

    #[error("invalid sampler settings: {0}")]
    Config(String),

    #[error(
        "cannot map a {kib} KiB perf ring buffer: over the locked-memory limit (kernel.perf_event_mlock_kb per CPU, then `ulimit -l`): use fewer ring pages or run as root"
    )]
    RingLimit { kib: usize },

    #[error(
        "too many open files for {events} perf events (threads × CPUs): raise the limit with `ulimit -n`"
    )]
    TooManyFiles { events: usize },

    #[error("tracefs: {0}")]
    Tracefs(String),

    #[error("cannot run {program}: {cause}")]
    Spawn { program: String, cause: io::Error },

    #[error("cannot run {program}: {}", not_found(program))]
    NotFound { program: String },

    #[error("{context}: {cause}")]
    Io { context: String, cause: io::Error },
}

/// Where a program that could not be found was looked for.
fn not_found(program: &str) -> &'static str {
    if program.is_empty() {
        "the command is empty: give a program to run"
    } else if program.contains('/') {
        "no such executable file"
    } else {
        "not found in PATH (give its path, or add its directory to PATH)"
    }
}

impl PerfError {
    pub(crate) fn io(context: impl Into<String>, cause: io::Error) -> PerfError {
        PerfError::Io {
            context: context.into(),
            cause,
        }
    }
}
