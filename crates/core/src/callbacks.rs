//! Hooks into the monitoring loop: recording, schemes and progress reporting hang off these.
//!
//! A hook says whether monitoring goes on ([`ControlFlow`]) or fails with an error of its own
//! (a record that cannot be written): the error ends the loop and comes back from
//! [`Context::run`](crate::Context::run) as [`RunError::Callback`], so that a hook never has to
//! keep it aside for its owner to find.

use crate::context::Context;
use crate::ops::OpsError;
use std::ops::ControlFlow;
use thiserror::Error;

/// Why a callback could not do its work; it stops monitoring.
pub type CallbackError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a hook returns: go on, stop (`Ok(ControlFlow::Break(()))`), or fail.
pub type Flow = Result<ControlFlow<()>, CallbackError>;

/// Why a monitoring run ended early.
#[derive(Debug, Error)]
pub enum RunError {
    /// The operations set failed (a process's mappings could not be read, ...).
    #[error(transparent)]
    Ops(OpsError),
    /// A callback failed (the record could not be written, ...).
    #[error(transparent)]
    Callback(CallbackError),
}

/// Every method has a default that does nothing, so an implementation picks what it needs.
pub trait Callbacks {
    /// Between two steps, with the context to change: where a running monitor takes new
    /// intervals, region bounds or schemes (upstream commits them to a running kdamond the same
    /// way, between its loop's iterations). A break stops monitoring; an error stops it too.
    fn control(&mut self, _ctx: &mut Context) -> Flow {
        Ok(ControlFlow::Continue(()))
    }

    /// After every sampling interval's access check. A break stops monitoring after the
    /// current step; an error stops it at once.
    fn after_sampling(&mut self, _ctx: &Context) -> Flow {
        Ok(ControlFlow::Continue(()))
    }

    /// After a step spent waiting, because every scheme's watermarks hold monitoring back
    /// (upstream's `after_wmarks_check`): time moved on, but no sampling interval passed. A
    /// break stops monitoring; an error stops it too.
    fn after_wait(&mut self, _ctx: &Context) -> Flow {
        Ok(ControlFlow::Continue(()))
    }

    /// At every aggregation boundary, with the completed window's merged regions, before their
    /// `nr_accesses` are reset (what upstream's `damon_aggregated` tracepoint reports).
    fn after_aggregation(&mut self, _ctx: &Context) -> Flow {
        Ok(ControlFlow::Continue(()))
    }

    /// Once, before monitoring terminates.
    fn before_terminate(&mut self, _ctx: &Context) -> Result<(), CallbackError> {
        Ok(())
    }
}

/// No hooks.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCallbacks;

impl Callbacks for NoCallbacks {}

/// Several callbacks, called in order; the first break or error stops monitoring, and the
/// rest are not called for that hook.
impl<A: Callbacks, B: Callbacks> Callbacks for (A, B) {
    fn control(&mut self, ctx: &mut Context) -> Flow {
        match self.0.control(ctx)? {
            ControlFlow::Continue(()) => self.1.control(ctx),
            stop => Ok(stop),
        }
    }

    fn after_sampling(&mut self, ctx: &Context) -> Flow {
        match self.0.after_sampling(ctx)? {
            ControlFlow::Continue(()) => self.1.after_sampling(ctx),
            stop => Ok(stop),
        }
    }

    fn after_wait(&mut self, ctx: &Context) -> Flow {
        match self.0.after_wait(ctx)? {
            ControlFlow::Continue(()) => self.1.after_wait(ctx),
            stop => Ok(stop),
        }
    }

    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        match self.0.after_aggregation(ctx)? {
            ControlFlow::Continue(()) => self.1.after_aggregation(ctx),
            stop => Ok(stop),
        }
    }

    /// Both run, even when the first fails: each has its own ending to do.
    fn before_terminate(&mut self, ctx: &Context) -> Result<(), CallbackError> {
        let first = self.0.before_terminate(ctx);
        let second = self.1.before_terminate(ctx);
        first.and(second)
    }
}
