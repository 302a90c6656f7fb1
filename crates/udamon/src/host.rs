//! Facts about this machine for a record's header, read from /proc; a fact that cannot be read
//! is left empty rather than failing the recording.

use std::fs;
use udamon_record::model::HostInfo;

pub fn host_info() -> HostInfo {
    let read = |path: &str| {
        fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let mem_total_kib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    HostInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        nr_cpus: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        page_size: udamon_core::PAGE_SIZE,
        mem_total_bytes: mem_total_kib * 1024,
    }
}

/// Wall-clock now, in nanoseconds since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
