//! Compiling the benchmarks' C workloads with the system C compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `src` with `cc FLAGS` into `dir/out` and returns the binary's path.
pub fn build(src: &Path, flags: &[&str], dir: &Path, out: &str) -> PathBuf {
    let out = dir.join(out);
    let status = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(src)
        .status()
        .expect("cannot run the C compiler cc: install gcc or clang");
    assert!(status.success(), "building {} failed", src.display());
    out
}
