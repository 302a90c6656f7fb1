//! The operations interface (upstream's `damon_operations`): everything that depends on what is
//! monitored and how accesses are observed. The core calls these; it never touches the OS.
//!
//! An implementation pairs an address space (a simulated workload, a live process) with an access
//! source (accessed-bit style probes of one sampling address per region, or sampled addresses).

use crate::context::Context;
use crate::damos::{Applied, ApplyEnv, Scheme, default_scheme_score};
use crate::region::Region;

/// Why an operations set could not do its work; carried to the user as a one-line message.
pub type OpsError = Box<dyn std::error::Error + Send + Sync + 'static>;

pub trait Operations {
    /// A short name for records and messages (`sim`, `vaddr/cpuclock`, ...).
    fn name(&self) -> &str;

    /// Build initial regions for every target that has none (`ops.init`).
    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError>;

    /// Refresh the targets' monitored ranges; called every update interval (`ops.update`).
    fn update(&mut self, _ctx: &mut Context) -> Result<(), OpsError> {
        Ok(())
    }

    /// Before a sampling interval starts: choose sampling addresses and arm the probes.
    /// The interval is [`Context::interval_us`]. Optional, as the kernel's operations are:
    /// sampled sources arm nothing per region and leave it out.
    fn prepare_access_checks(&mut self, _ctx: &mut Context) {}

    /// After the interval ends: count accessed regions (`nr_accesses += 1` at most once per
    /// region). Sampled sources use [`Context::record_sampled_accesses`] so that the cost
    /// follows the number of samples, not the number of regions (their samples reach the
    /// regions before anything next reads or changes them, not in the interval).
    fn check_accesses(&mut self, ctx: &mut Context);

    /// Before a window is reported (after its merge and sample-informed cuts): tell the context
    /// which parts of accessed regions hold no memory ([`Context::cut_absent`]), so that they
    /// are reported as what they were: not accessed. Operations that cannot read residency do
    /// nothing.
    fn check_residency(&mut self, _ctx: &mut Context) {}

    /// False once the target (by index) is gone; monitoring stops when no target is valid.
    fn target_valid(&self, _ctx: &Context, _target: usize) -> bool {
        true
    }

    /// DAMOS: apply `scheme.action` to `region` of target `target` (upstream's
    /// `apply_scheme`), honouring the scheme's operations-layer filters, and say how many
    /// bytes it really took effect on. By default an operations set cannot act: nothing is
    /// applied.
    fn apply_scheme(
        &mut self,
        _target: usize,
        _region: &Region,
        _scheme: &Scheme,
        _env: &ApplyEnv,
    ) -> Applied {
        Applied::default()
    }

    /// DAMOS prioritisation: the region's score for the scheme, 0..=99. By default, upstream
    /// vaddr's choice (cold score for pageout, hot for hot migration, 99 otherwise).
    fn scheme_score(
        &self,
        _target: usize,
        region: &Region,
        scheme: &Scheme,
        env: &ApplyEnv,
    ) -> Option<u8> {
        let nr_accesses = env.nr_accesses_mvsum(region);
        Some(default_scheme_score(
            scheme,
            nr_accesses,
            region.age,
            &env.attrs,
        ))
    }

    /// Called once when monitoring ends.
    fn cleanup(&mut self, _ctx: &mut Context) {}
}

/// What an operations set observed about a target's memory, for records and reports: what is
/// resident, what schemes took out of memory, and what came back because it was touched again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetMemory {
    pub resident_bytes: u64,
    /// Bytes currently out of memory because a scheme paged them out.
    pub paged_out_bytes: u64,
    /// Bytes paged out by a scheme and touched again since monitoring started (cumulative).
    pub refaulted_bytes: u64,
}

/// How time passes between preparing and checking accesses. The core counts time in sampling
/// intervals; a clock decides whether an interval takes real time or none.
pub trait Clock {
    /// Return once time `t_us` (on the context's time line) has been reached.
    fn wait_until(&mut self, t_us: u64);
}

/// Virtual time: intervals pass as fast as the CPU allows (simulations, replays of samples that
/// already arrived).
#[derive(Debug, Default, Clone, Copy)]
pub struct VirtualClock;

impl Clock for VirtualClock {
    fn wait_until(&mut self, _t_us: u64) {}
}
