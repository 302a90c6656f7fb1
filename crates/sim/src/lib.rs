//! udamon's simulated address space: a workload in masim's configuration format, run in virtual
//! time, monitored through the same [`udamon_core::Operations`] interface as a live process, with
//! the ground truth of what it touched.
//!
//! - [`config`]: the workload file format and its parser ([`Workload`], [`ConfigError`]);
//! - [`layout`]: where regions live in the simulated address space, and the initial regions;
//! - [`model`]: the access model: which pages a window of virtual time touches, and the ground
//!   truth working set;
//! - [`memory`]: what is resident, paged out by schemes and huge-page backed, and refaults;
//! - [`actions`]: DAMOS actions and operations-layer filters on that memory;
//! - [`ops`]: [`SimOps`], the operations set, and [`SimOptions`];
//! - [`builtin`]: workloads shipped with udamon (`stairs`, `zigzag`, `demo`).
//!
//! ```
//! use udamon_core::{Attrs, Context, NoCallbacks, StopReason, VirtualClock};
//! use udamon_sim::{SimOps, SimOptions, Workload};
//!
//! let workload = Workload::parse("a, 64m\n\nhot\n300\na, 1, 0, 1\n", "example").unwrap();
//! let mut ops = SimOps::new(workload, SimOptions::default());
//! let mut ctx = Context::new(Attrs::default(), 42).unwrap();
//! let stop = ctx.run(&mut ops, &mut VirtualClock, &mut NoCallbacks).unwrap();
//! assert_eq!(stop, StopReason::NoValidTarget); // the workload ended after 300 ms
//! assert_eq!(ctx.now_us(), 300_000);
//! assert_eq!(ctx.targets().len(), 1); // `init` added the simulated process as a target
//! ```

pub mod actions;
pub mod config;
pub mod layout;
pub mod memory;
pub mod model;
pub mod ops;

pub use config::{ConfigError, Pattern, Phase, RwMode, Workload, WorkloadRegion};
pub use memory::Residency;
pub use model::{Extent, Touched};
pub use ops::{SimOps, SimOptions};

use udamon_core::Attrs;

/// The monitoring attributes of a simulation unless told otherwise: DAMON's defaults (5 ms
/// sampling, 100 ms aggregation, 10..1000 regions), with the update interval of damo's
/// `record` (1 s) rather than the kernel's 60 s.
pub fn default_attrs() -> Attrs {
    Attrs {
        ops_update_interval_us: 1_000_000,
        ..Attrs::default()
    }
}

/// Names of the built-in workloads, for [`builtin`].
pub const BUILTIN_NAMES: [&str; 6] = ["demo", "stairs", "zigzag", "needle", "scattered", "moving"];

/// The text of a built-in workload (a `.cfg` suffix is accepted):
///
/// - `stairs`: ten 10 MiB regions swept together for 5 s, then one after another for 2.5 s
///   each (30 s), like masim's `stairs_30secs.cfg`;
/// - `zigzag`: two 100 MiB regions swept together for 5 s, then alternately for 2.5 s each,
///   six times (35 s), like masim's `zigzag_30secs.cfg`;
/// - `demo`: a hot, a warm and a cold area, a working set that moves halfway through, and a
///   sequential scan that steps through eight chunks (24 s); what `udamon record` and
///   `udamon demo` monitor when given no target;
///
/// and three that stress the region adjustment with small hot areas in huge idle memory
/// (docs/algorithms.md#guided), every page of a hot area touched in every sampling interval:
///
/// - `needle`: one 64 MiB hot area in a 1 TiB address space (60 s);
/// - `scattered`: 100 hot areas of 1 MiB scattered over 64 GiB (60 s);
/// - `moving`: a 256 MiB hot area that moves every 10 s across 256 GiB (60 s).
///
/// The texts are valid masim configurations too.
pub fn builtin(name: &str) -> Option<&'static str> {
    match name.strip_suffix(".cfg").unwrap_or(name) {
        "demo" => Some(include_str!("../workloads/demo.cfg")),
        "stairs" => Some(include_str!("../workloads/stairs.cfg")),
        "zigzag" => Some(include_str!("../workloads/zigzag.cfg")),
        "needle" => Some(include_str!("../workloads/needle.cfg")),
        "scattered" => Some(include_str!("../workloads/scattered.cfg")),
        "moving" => Some(include_str!("../workloads/moving.cfg")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_unknown_names_are_none() {
        for name in BUILTIN_NAMES {
            let w = Workload::builtin(name).unwrap();
            assert_eq!(w.name(), format!("{name}.cfg"));
            assert_eq!(builtin(&format!("{name}.cfg")), builtin(name));
        }
        assert!(builtin("nope").is_none());
        assert!(Workload::builtin("nope").is_none());
    }

    #[test]
    fn builtins_have_the_documented_shapes() {
        let stairs = Workload::builtin("stairs").unwrap();
        assert_eq!(stairs.regions().len(), 10);
        assert!(stairs.regions().iter().all(|r| r.size == 10 << 20));
        assert_eq!(stairs.phases().len(), 11);
        assert_eq!(stairs.cycle_us(), 30_000_000);
        // After the initial phase, phase i sweeps region i alone.
        for (i, p) in stairs.phases()[1..].iter().enumerate() {
            assert_eq!(p.patterns.len(), 1);
            assert_eq!(p.patterns[0].region, i);
        }
        let zigzag = Workload::builtin("zigzag").unwrap();
        assert_eq!(zigzag.regions().len(), 2);
        assert!(zigzag.regions().iter().all(|r| r.size == 100 << 20));
        assert_eq!(zigzag.cycle_us(), 35_000_000);
        let demo = Workload::builtin("demo").unwrap();
        assert!((20_000_000..=30_000_000).contains(&demo.cycle_us()));
        let hot_bytes = |w: &Workload| -> u64 {
            w.regions()
                .iter()
                .filter(|r| r.name.starts_with("hot"))
                .map(|r| r.size)
                .sum()
        };
        let total = |w: &Workload| -> u64 { w.regions().iter().map(|r| r.size).sum() };
        let needle = Workload::builtin("needle").unwrap();
        assert_eq!((total(&needle), hot_bytes(&needle)), (1 << 40, 64 << 20));
        assert_eq!(needle.cycle_us(), 60_000_000);
        let scattered = Workload::builtin("scattered").unwrap();
        assert_eq!(
            (total(&scattered), hot_bytes(&scattered)),
            (64 << 30, 100 << 20)
        );
        assert_eq!(scattered.phases()[0].patterns.len(), 100);
        let moving = Workload::builtin("moving").unwrap();
        assert_eq!(total(&moving), 256 << 30);
        assert_eq!(moving.phases().len(), 6);
        assert!(moving.phases().iter().all(|p| p.duration_ms == 10_000
            && p.patterns.len() == 1
            && moving.regions()[p.patterns[0].region].size == 256 << 20));
    }
}
