//! Process trees from `/proc`: a process's running descendants (for attaching to a whole tree)
//! and command lines (for naming targets).

use std::collections::BTreeMap;

/// The command line of process `pid`, arguments separated by spaces; empty when it cannot be
/// read (the process exited, or it is a kernel thread).
pub fn proc_cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            let text = String::from_utf8_lossy(&b).replace('\0', " ");
            text.trim_end().to_string()
        })
        .unwrap_or_default()
}

/// The running descendants of `pid` as (pid, parent pid), every parent before its children.
///
/// Walks `/proc/PID/task/*/children` where the kernel has it (CONFIG_PROC_CHILDREN); otherwise
/// the parent pids of every process in `/proc`. A process that exits during the walk is left
/// out; one forked during it may be missed.
pub fn descendants(pid: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut by_parent: Option<BTreeMap<u32, Vec<u32>>> = None;
    let mut queue = vec![pid];
    while let Some(parent) = queue.pop() {
        let children = match children_files(parent) {
            Some(c) => c,
            None => by_parent
                .get_or_insert_with(parents_from_stat)
                .get(&parent)
                .cloned()
                .unwrap_or_default(),
        };
        for child in children {
            out.push((child, parent));
            queue.push(child);
        }
    }
    out
}

/// The children of `pid`'s threads from `/proc/PID/task/*/children`; `None` when the kernel
/// has no such files.
fn children_files(pid: u32) -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut children = Vec::new();
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        any = true;
        children.extend(
            text.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    if !any {
        return None;
    }
    children.sort_unstable();
    children.dedup();
    Some(children)
}

/// Every process's children, from the parent pid in `/proc/PID/stat`.
fn parents_from_stat() -> BTreeMap<u32, Vec<u32>> {
    let mut by_parent: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for pid in crate::proc_stat::pids() {
        if let Some(stat) = crate::proc_stat::ProcStat::read(pid) {
            by_parent.entry(stat.ppid).or_default().push(pid);
        }
    }
    by_parent
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_shells_sleeping_children_are_its_descendants() {
        let mut sh = Command::new("sh")
            .args(["-c", "sleep 5 & sleep 5 & wait"])
            .spawn()
            .unwrap();
        let pid = sh.id();
        let sleeping = |found: &[(u32, u32)]| {
            // A child found before its exec still runs sh.
            found.len() == 2 && found.iter().all(|&(c, _)| proc_cmdline(c) == "sleep 5")
        };
        let mut found = Vec::new();
        let mut asleep = false;
        for _ in 0..250 {
            found = descendants(pid);
            asleep = sleeping(&found);
            if asleep {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for &(child, _) in &found {
            // SAFETY: signalling a process; no memory is involved.
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
        }
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(asleep, "{found:?}");
        assert!(found.iter().all(|&(_, parent)| parent == pid));
        assert_eq!(proc_cmdline(u32::MAX), "");
    }
}
