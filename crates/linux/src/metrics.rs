//! System and process metrics for DAMOS quota goals and watermarks, read from `/proc` and
//! `/sys`: memory pressure (PSI), NUMA node memory, LRU list sizes, cgroup memory per node and
//! the monitored processes' resident sets.

use std::path::PathBuf;
use udamon_core::PAGE_SIZE;
use udamon_core::damos::{LruMem, MetricSource, NodeMem, free_mem_rate};

/// The `total=` of the `some` line of `/proc/pressure/memory`, µs.
pub fn psi_some_total_us(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// A `Key:   N kB` line of `/proc/meminfo` or a node's `meminfo` (`Node 0 Key: N kB`), bytes.
pub fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut rest = line;
        if let Some(r) = rest.strip_prefix("Node ") {
            // Skip the node number.
            rest = r
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start();
        }
        let value = rest.strip_prefix(key)?.strip_prefix(':')?;
        let mut fields = value.split_whitespace();
        let n: u64 = fields.next()?.parse().ok()?;
        Some(match fields.next() {
            Some("kB") => n * 1024,
            _ => n,
        })
    })
}

/// The resident pages (second field) of `/proc/PID/statm`.
pub fn statm_resident_pages(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// A cgroup's anonymous plus file memory on node `nid` from its `memory.numa_stat`, bytes.
pub fn numa_stat_used(text: &str, nid: u32) -> Option<u64> {
    let node = format!("N{nid}=");
    let mut total = None;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        if !matches!(fields.next(), Some("anon" | "file")) {
            continue;
        }
        let v: u64 = fields
            .find_map(|f| f.strip_prefix(node.as_str()))?
            .parse()
            .ok()?;
        total = Some(total.unwrap_or(0) + v);
    }
    total
}

/// Metrics of the running system and the processes `pids` (by target index).
#[derive(Debug, Clone)]
pub struct ProcMetrics {
    pids: Vec<u32>,
}

impl ProcMetrics {
    pub fn new(pids: Vec<u32>) -> ProcMetrics {
        ProcMetrics { pids }
    }
}

fn read(path: impl Into<PathBuf>) -> Option<String> {
    std::fs::read_to_string(path.into()).ok()
}

impl MetricSource for ProcMetrics {
    fn some_mem_psi_total_us(&mut self) -> u64 {
        read("/proc/pressure/memory")
            .and_then(|t| psi_some_total_us(&t))
            .unwrap_or(0)
    }

    fn node_mem(&mut self, nid: u32) -> Option<NodeMem> {
        let text = read(format!("/sys/devices/system/node/node{nid}/meminfo"))?;
        Some(NodeMem {
            total: meminfo_bytes(&text, "MemTotal")?,
            free: meminfo_bytes(&text, "MemFree")?,
        })
    }

    fn memcg_node_used(&mut self, nid: u32, memcg_path: &str) -> Option<u64> {
        let path = memcg_path.trim_start_matches('/');
        let text = read(format!("/sys/fs/cgroup/{path}/memory.numa_stat"))?;
        numa_stat_used(&text, nid)
    }

    fn lru_mem(&mut self) -> LruMem {
        let text = read("/proc/meminfo").unwrap_or_default();
        LruMem {
            active: meminfo_bytes(&text, "Active").unwrap_or(0),
            inactive: meminfo_bytes(&text, "Inactive").unwrap_or(0),
        }
    }

    fn target_rss(&mut self, target: usize) -> Option<u64> {
        let pid = self.pids.get(target)?;
        let text = read(format!("/proc/{pid}/statm"))?;
        Some(statm_resident_pages(&text)? * PAGE_SIZE)
    }

    /// System-wide, from `/proc/meminfo` (node 0 alone is not the system on NUMA machines).
    fn free_mem_rate(&mut self) -> Option<u64> {
        let text = read("/proc/meminfo")?;
        Some(free_mem_rate(
            meminfo_bytes(&text, "MemFree")?,
            meminfo_bytes(&text, "MemTotal")?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_total_comes_from_the_some_line() {
        let text = "some avg10=0.00 avg60=0.12 avg300=0.03 total=123456\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=999\n";
        assert_eq!(psi_some_total_us(text), Some(123_456));
        assert_eq!(psi_some_total_us("full total=1\n"), None);
    }

    #[test]
    fn meminfo_keys_are_exact_and_in_bytes() {
        let text = "MemTotal:       24684084 kB\nMemFree:        20669192 kB\n\
                    Active:          1090756 kB\nActive(anon):     100 kB\n\
                    Inactive:        2494744 kB\nHugePages_Total:       0\n";
        assert_eq!(meminfo_bytes(text, "MemTotal"), Some(24_684_084 * 1024));
        assert_eq!(meminfo_bytes(text, "Active"), Some(1_090_756 * 1024));
        assert_eq!(meminfo_bytes(text, "Inactive"), Some(2_494_744 * 1024));
        assert_eq!(meminfo_bytes(text, "HugePages_Total"), Some(0), "no unit");
        assert_eq!(meminfo_bytes(text, "SwapTotal"), None);
        let node = "Node 0 MemTotal:        9922764 kB\nNode 0 MemFree:         5907924 kB\n";
        assert_eq!(meminfo_bytes(node, "MemFree"), Some(5_907_924 * 1024));
        assert_eq!(
            meminfo_bytes("Node 12 MemTotal: 4 kB\n", "MemTotal"),
            Some(4096)
        );
    }

    #[test]
    fn statm_and_numa_stat_parse() {
        assert_eq!(statm_resident_pages("2000 513 100 5 0 300 0\n"), Some(513));
        assert_eq!(statm_resident_pages("2000\n"), None);
        let numa = "anon N0=4096 N1=8192\nfile N0=100 N1=0\nkernel_stack N0=5 N1=5\n";
        assert_eq!(numa_stat_used(numa, 0), Some(4196));
        assert_eq!(numa_stat_used(numa, 1), Some(8192));
        assert_eq!(numa_stat_used(numa, 2), None, "no such node");
    }

    #[test]
    fn reads_this_process_and_system() {
        let mut m = ProcMetrics::new(vec![std::process::id()]);
        assert!(m.target_rss(0).is_some_and(|r| r > 0));
        assert_eq!(m.target_rss(1), None);
        let rate = m.free_mem_rate();
        assert!(rate.is_some_and(|r| r <= 1000), "{rate:?}");
        let lru = m.lru_mem();
        assert!(lru.active + lru.inactive > 0);
    }
}
