//! Building the C test workloads with the system C compiler, into the target's temporary
//! directory; each workload module calls it once per test binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `tests/workload/NAME.c` with `flags` and returns the binary's path. The binary is
/// written under a temporary name and renamed, so that test binaries building it at the same
/// time never run a half-written one.
pub fn build_c(name: &str, flags: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out = dir.join(name);
    let tmp = dir.join(format!("{name}.{}", std::process::id()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workload")
        .join(format!("{name}.c"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler {cc:?} to build the test workload: {e}")
        });
    assert!(status.success(), "building {} failed", src.display());
    std::fs::rename(&tmp, &out).unwrap();
    out
}
