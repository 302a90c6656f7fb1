//! The tick source's tracepoint id, read from tracefs. If tracefs is not mounted anywhere it is
//! mounted at `/sys/kernel/tracing` (root only) and a note says so; nothing inside tracefs is
//! ever changed.

use super::error::PerfError;
use std::io;
use std::path::{Path, PathBuf};

/// The tracepoint the tick source samples on: the local APIC timer interrupt, i.e. the scheduler
/// tick (HZ per busy CPU) plus any hrtimer expiries.
pub const TICK_TRACEPOINT: (&str, &str) = ("irq_vectors", "local_timer_entry");

const TRACEFS_DIR: &str = "/sys/kernel/tracing";

/// The id of tracepoint `group:name`, for `perf_event_attr.config`.
pub(crate) fn tracepoint_id(
    group: &str,
    name: &str,
    notes: &mut Vec<String>,
) -> Result<u64, PerfError> {
    let root = match find_mount(&std::fs::read_to_string("/proc/self/mounts").unwrap_or_default()) {
        Some(root) => root,
        None => {
            mount_tracefs()?;
            notes.push(format!(
                "mounted tracefs at {TRACEFS_DIR} (it was not mounted; it stays mounted, no tracing setting was changed)"
            ));
            PathBuf::from(TRACEFS_DIR)
        }
    };
    read_id(&root, group, name)
}

/// The mount point of tracefs in a mounts table, preferring the standard place.
fn find_mount(mounts: &str) -> Option<PathBuf> {
    let mut found: Vec<&str> = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (_, dir, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "tracefs").then_some(dir)
        })
        .collect();
    found.sort_by_key(|d| *d != TRACEFS_DIR);
    // Mount points with spaces are octal-escaped in the table.
    found
        .first()
        .map(|d| PathBuf::from(d.replace("\\040", " ")))
}

fn mount_tracefs() -> Result<(), PerfError> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in constant");
    let (src, dir, fstype) = (c("nodev"), c(TRACEFS_DIR), c("tracefs"));
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call; a
    // null data pointer means no mount options.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dir.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    Err(PerfError::Tracefs(match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => format!(
            "tracefs is not mounted and mounting it at {TRACEFS_DIR} needs root ({e}): run as root, or use --access-source cpuclock"
        ),
        Some(libc::ENODEV) => format!(
            "this kernel has no tracefs ({e}), so the tick tracepoint is unavailable: use --access-source cpuclock"
        ),
        _ => format!("cannot mount tracefs at {TRACEFS_DIR} ({e}): use --access-source cpuclock"),
    }))
}

fn read_id(root: &Path, group: &str, name: &str) -> Result<u64, PerfError> {
    let path = root.join("events").join(group).join(name).join("id");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        PerfError::Tracefs(match e.raw_os_error() {
            Some(libc::ENOENT) => format!(
                "this kernel has no tracepoint {group}:{name} ({} is missing): use --access-source cpuclock",
                path.display()
            ),
            Some(libc::EACCES | libc::EPERM) => format!(
                "cannot read {} ({e}): run as root, or use --access-source cpuclock",
                path.display()
            ),
            _ => format!("cannot read {}: {e}", path.display()),
        })
    })?;
    text.trim().parse().map_err(|_| {
        PerfError::Tracefs(format!(
            "{} holds {:?}, not a tracepoint id",
            path.display(),
            text.trim()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tracefs_preferring_the_standard_place() {
        let mounts = "\
sysfs /sys sysfs rw,nosuid 0 0
tracefs /sys/kernel/debug/tracing tracefs rw 0 0
tracefs /sys/kernel/tracing tracefs rw,nosuid 0 0
";
        assert_eq!(
            find_mount(mounts),
            Some(PathBuf::from("/sys/kernel/tracing"))
        );
        let other = "tracefs /mnt/my\\040trace tracefs rw 0 0\n";
        assert_eq!(find_mount(other), Some(PathBuf::from("/mnt/my trace")));
        assert_eq!(find_mount("proc /proc proc rw 0 0\n"), None);
    }

    #[test]
    fn reads_ids_and_explains_missing_tracepoints() {
        let d = tempfile::tempdir().unwrap();
        let ev = d.path().join("events/irq_vectors/local_timer_entry");
        std::fs::create_dir_all(&ev).unwrap();
        std::fs::write(ev.join("id"), "123\n").unwrap();
        assert_eq!(
            read_id(d.path(), "irq_vectors", "local_timer_entry").unwrap(),
            123
        );
        let e = read_id(d.path(), "irq_vectors", "nope")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no tracepoint irq_vectors:nope") && e.contains("cpuclock"),
            "{e}"
        );
    }
}
