//! The perf_event_open system call, the privilege facts that decide whether it may succeed, and
//! the translation of its errno values into actionable errors.

use super::error::PerfError;
use super::source::{EventSpec, Rate};
use crate::proc_status::{ProcStatus, perf_privileged};
use perf_event_open_sys as sys;
use perf_event_open_sys::bindings as b;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Opens `attr` on thread `tid` (following its inherited children) on `cpu`.
pub(crate) fn open_event(attr: &b::perf_event_attr, tid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut attr = *attr;
    // SAFETY: `attr` is a fully initialised perf_event_attr whose `size` matches its type; it
    // asks only for counting and sampling into a ring buffer, nothing that affects memory safety.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            tid,
            cpu,
            -1,
            b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `kernel.perf_event_paranoid`, if readable.
pub(crate) fn paranoid() -> Option<i32> {
    read_trimmed("/proc/sys/kernel/perf_event_paranoid")?
        .parse()
        .ok()
}

/// `kernel.perf_event_max_sample_rate`, if readable.
pub(crate) fn max_sample_rate() -> Option<u64> {
    read_trimmed("/proc/sys/kernel/perf_event_max_sample_rate")?
        .parse()
        .ok()
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Fails early, with the paranoid level in the message, when kernel-mode sampling cannot work.
pub(crate) fn require_kernel_sampling(what: &'static str) -> Result<(), PerfError> {
    if perf_privileged() {
        return Ok(());
    }
    match paranoid() {
        Some(p) if p >= 3 => Err(PerfError::ParanoidTooHigh { paranoid: p }),
        Some(p) if p >= 2 => Err(PerfError::KernelSamplingDenied { what, paranoid: p }),
        _ => Ok(()),
    }
}

/// Checks that can be made before opening anything.
pub(crate) fn check_spec(spec: &EventSpec) -> Result<(), PerfError> {
    if let (Rate::Frequency(freq), Some(max)) = (spec.rate, max_sample_rate())
        && freq > max
    {
        return Err(PerfError::FrequencyTooHigh { freq, max });
    }
    Ok(())
}

/// The error for a failed perf_event_open of `spec` on process `pid`.
pub(crate) fn open_error(e: io::Error, spec: &EventSpec, pid: u32, nr_events: usize) -> PerfError {
    open_failed(e, spec, Some(pid), nr_events)
}

/// The error for a failed perf_event_open of `spec` on a whole CPU (every process).
pub(crate) fn cpu_wide_error(e: io::Error, spec: &EventSpec) -> PerfError {
    let nr_events = online_cpus().map_or(1, |c| c.len());
    open_failed(e, spec, None, nr_events)
}

/// The error for a failed perf_event_open of `spec` on process `pid`, or on whole CPUs (every
/// process) without one, of `nr_events` events in all.
fn open_failed(e: io::Error, spec: &EventSpec, pid: Option<u32>, nr_events: usize) -> PerfError {
    match (e.raw_os_error(), pid) {
        (Some(libc::ESRCH), Some(pid)) => PerfError::NoSuchProcess(pid),
        (Some(libc::EACCES | libc::EPERM), Some(pid)) => permission_error(e, spec, pid),
        (Some(libc::EACCES | libc::EPERM), None) => PerfError::CpuWideDenied {
            paranoid: paranoid().map_or("unknown".into(), |p| p.to_string()),
        },
        (Some(libc::EMFILE | libc::ENFILE), _) => PerfError::TooManyFiles { events: nr_events },
        (Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP | libc::EINVAL | libc::E2BIG), _) => {
            PerfError::Unsupported {
                event: spec.name.clone(),
                cause: e,
                advice: spec.advice,
            }
        }
        _ => {
            let on = pid.map_or("every process".to_string(), |pid| format!("process {pid}"));
            PerfError::io(format!("perf_event_open for {} on {on}", spec.name), e)
        }
    }
}

fn permission_error(e: io::Error, spec: &EventSpec, pid: u32) -> PerfError {
    if !perf_privileged() {
        match paranoid() {
            Some(p) if p >= 3 => return PerfError::ParanoidTooHigh { paranoid: p },
            Some(p) if p >= 2 && !spec.exclude_kernel => {
                return PerfError::KernelSamplingDenied {
                    what: "kernel-mode sampling (exclude_kernel=0)",
                    paranoid: p,
                };
            }
            _ => {}
        }
        // Otherwise the kernel's ptrace_may_access(PTRACE_MODE_READ_REALCREDS) said no.
        if let Some(owner) = ProcStatus::read(pid).and_then(|s| s.uid()) {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            // Our own process refused: it changed credentials (setuid) or is not dumpable.
            if owner == me {
                return PerfError::NotDumpable(pid);
            }
            return PerfError::NotPermitted { pid, owner, me };
        }
        return PerfError::NoSuchProcess(pid);
    }
    PerfError::io(
        format!(
            "perf_event_open for {} on process {pid} was refused although we have CAP_PERFMON (a security module policy?)",
            spec.name
        ),
        e,
    )
}

/// The online CPUs, from `/sys/devices/system/cpu/online` (`0-3,5,7-8`).
pub(crate) fn online_cpus() -> Result<Vec<u32>, PerfError> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path)
        .map_err(|e| PerfError::io(format!("cannot read {path}"), e))?;
    parse_cpu_list(text.trim()).ok_or_else(|| {
        PerfError::io(
            format!("cannot parse {path}: {text:?}"),
            io::ErrorKind::InvalidData.into(),
        )
    })
}

fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-1"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0-2,4,6-7"), Some(vec![0, 1, 2, 4, 6, 7]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn online_cpus_match_the_scheduler() {
        let n = std::thread::available_parallelism().unwrap().get();
        assert!(online_cpus().unwrap().len() >= n);
    }
}
