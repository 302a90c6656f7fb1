//! The operations interface (upstream's `damon_operations`): everything that depends on what is
//! monitored and how accesses are observed. The core calls these; it never touches the OS.
//!
//! An implementation pairs an address space (a simulated workload, a live process) with an access
//! source (accessed-bit style probes of one sampling address per region, or sampled addresses).

use crate::context::Context;

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
    /// The interval is `[ctx.interval_start_us(), ctx.interval_end_us())`.
    fn prepare_access_checks(&mut self, ctx: &mut Context);

    /// After the interval ends: count accessed regions (`nr_accesses += 1` at most once per
    /// region). Sampled sources use [`Context::record_sampled_accesses`] so that the cost
    /// follows the number of samples, not the number of regions.
    fn check_accesses(&mut self, ctx: &mut Context);

    /// False once the target (by index) is gone; monitoring stops when no target is valid.
    fn target_valid(&self, _ctx: &Context, _target: usize) -> bool {
        true
    }

    /// Called once when monitoring ends.
    fn cleanup(&mut self, _ctx: &mut Context) {}
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
