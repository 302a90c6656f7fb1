//! A simulated workload as record and serve take it: loaded from a spec, and named in a
//! record.

use anyhow::{Context as _, Result};
use std::path::Path;
use udamon_record::model::{AccessSource, TargetInfo};
use udamon_sim::Workload;

/// Loads `builtin:NAME` or a masim-format file.
pub fn load_workload(spec: &str) -> Result<Workload> {
    match spec.strip_prefix("builtin:") {
        Some(name) => Workload::builtin(name).with_context(|| {
            format!(
                "no built-in workload '{name}': use one of {}",
                udamon_sim::BUILTIN_NAMES.join(", ")
            )
        }),
        None => {
            let path = Path::new(spec);
            let text = crate::small_file::read_text(path, "workload file")?;
            let name = path
                .file_name()
                .map_or_else(|| spec.to_string(), |n| n.to_string_lossy().into_owned());
            Ok(Workload::parse(&text, &name)?)
        }
    }
}

/// How a record names a simulated workload and its source; `time` says how time passes.
pub fn sim_identity(name: &str, time: &str) -> (TargetInfo, AccessSource) {
    (
        TargetInfo {
            pid: None,
            cmdline: name.to_string(),
            parent: None,
        },
        AccessSource {
            name: "sim".to_string(),
            reason: format!("simulated workload '{name}' (masim format) in {time}"),
        },
    )
}
