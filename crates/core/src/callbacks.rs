//! Hooks into the monitoring loop: recording, schemes and progress reporting hang off these.

use crate::context::Context;
use std::ops::ControlFlow;

/// Every method has a default that does nothing, so an implementation picks what it needs.
/// Returning `ControlFlow::Break(())` stops monitoring after the current step.
pub trait Callbacks {
    /// After every sampling interval's access check.
    fn after_sampling(&mut self, _ctx: &Context) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// At every aggregation boundary, with the completed window's merged regions, before their
    /// `nr_accesses` are reset (what upstream's `damon_aggregated` tracepoint reports).
    fn after_aggregation(&mut self, _ctx: &Context) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// Once, before monitoring terminates.
    fn before_terminate(&mut self, _ctx: &Context) {}
}

/// No hooks.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCallbacks;

impl Callbacks for NoCallbacks {}

/// Several callbacks, called in order; the first `Break` stops monitoring.
impl<A: Callbacks, B: Callbacks> Callbacks for (A, B) {
    fn after_sampling(&mut self, ctx: &Context) -> ControlFlow<()> {
        self.0.after_sampling(ctx)?;
        self.1.after_sampling(ctx)
    }

    fn after_aggregation(&mut self, ctx: &Context) -> ControlFlow<()> {
        self.0.after_aggregation(ctx)?;
        self.1.after_aggregation(ctx)
    }

    fn before_terminate(&mut self, ctx: &Context) {
        self.0.before_terminate(ctx);
        self.1.before_terminate(ctx);
    }
}
