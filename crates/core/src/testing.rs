//! The test kit of the core and of every crate built on it (the `testing` feature: add
//! `udamon-core = { path = "..", features = ["testing"] }` to a crate's `[dev-dependencies]`).
//!
//! What tests write again and again, written once, as ripgrep's `testutil` does for its
//! searcher: an operations set whose accesses a test states in a sentence ([`TestOps`]), and
//! the callbacks that end a run or watch it ([`StopAfterWindows`], [`StopAt`], [`EachWindow`],
//! [`EachInterval`]). The doubles feed the context the way real sources do, so a test of the
//! loop takes the paths the live and simulated sources take: accessed-bit checks through
//! [`Context::count_checked_accesses`], samples through [`Context::record_sampled_accesses`].
//!
//! Callbacks combine as a pair, the first first: `(EachWindow(|ctx| ..), StopAfterWindows(30))`
//! keeps what 30 windows showed and stops.

use crate::callbacks::{Callbacks, Flow};
use crate::context::Context;
use crate::damos::{Action, Applied, ApplyEnv, Scheme};
use crate::ops::{Operations, OpsError, VirtualClock};
use crate::rand::Prng;
use crate::region::{AddrRange, Region, Target};
use std::ops::ControlFlow;

/// What an accessed-bit check asks a test: was the page at `addr`, in target `target`,
/// accessed during the sampling interval that ended at `now_us`? `rng` is the context's, for
/// tests that decide by chance.
pub struct Check<'a> {
    pub target: usize,
    pub addr: u64,
    pub now_us: u64,
    pub rng: &'a mut Prng,
}

type Accessed<'a> = Box<dyn FnMut(Check) -> bool + 'a>;
type Hook<'a> = Box<dyn FnMut(&mut Context) + 'a>;

/// How a [`TestOps`] observes accesses.
enum Source<'a> {
    /// Accessed-bit style: a random sampling address per region before each interval, checked
    /// after it.
    Checked(Accessed<'a>),
    /// Sampled addresses: the hook records the interval's samples on the context.
    Sampled(Hook<'a>),
}

/// An operations set over fixed address ranges whose accesses a closure states.
///
/// `init` gives every target that has no regions yet one region per range of `spans` (keeping
/// its pid); a target added with regions keeps them. By default targets stay valid, updates
/// only count, and schemes take effect on nothing.
pub struct TestOps<'a> {
    spans: Vec<AddrRange>,
    source: Source<'a>,
    residency: Option<Hook<'a>>,
    reset_on_update: bool,
    acting: bool,
    valid_until_us: u64,
    /// How many times `update` was called.
    pub updates: u32,
    /// With [`TestOps::acting`]: every region a scheme was applied to, with its target and
    /// the action, in order.
    pub applied: Vec<(usize, AddrRange, Action)>,
}

impl<'a> TestOps<'a> {
    fn new(spans: &[AddrRange], source: Source<'a>) -> Self {
        TestOps {
            spans: spans.to_vec(),
            source,
            residency: None,
            reset_on_update: false,
            acting: false,
            valid_until_us: u64::MAX,
            updates: 0,
            applied: Vec::new(),
        }
    }

    /// An accessed-bit source: a region counts as accessed in an interval when `accessed`
    /// says its sampling address was.
    pub fn checked(spans: &[AddrRange], accessed: impl FnMut(Check) -> bool + 'a) -> Self {
        TestOps::new(spans, Source::Checked(Box::new(accessed)))
    }

    /// An accessed-bit source whose pages in `hot` are accessed in every interval, and no
    /// others.
    pub fn hot_ranges(spans: &[AddrRange], hot: &[AddrRange]) -> Self {
        let hot = hot.to_vec();
        TestOps::checked(spans, move |c| hot.iter().any(|h| h.contains(c.addr)))
    }

    /// A sampled source: after each interval, `samples` records that interval's samples on
    /// the context ([`Context::record_sampled_accesses`]); it may also add targets or report
    /// memory, as live sources do.
    pub fn sampled(spans: &[AddrRange], samples: impl FnMut(&mut Context) + 'a) -> Self {
        TestOps::new(spans, Source::Sampled(Box::new(samples)))
    }

    /// Before each window is reported, `check` tells the context what holds no memory
    /// ([`Context::cut_absent`]).
    pub fn residency(mut self, check: impl FnMut(&mut Context) + 'a) -> Self {
        self.residency = Some(Box::new(check));
        self
    }

    /// Every update sets each target's regions back to one per span, as for an address space
    /// that was replaced: each window then starts from the same regions.
    pub fn reset_on_update(mut self) -> Self {
        self.reset_on_update = true;
        self
    }

    /// Schemes take effect on the whole of every region they are applied to, and each
    /// application is kept in [`TestOps::applied`].
    pub fn acting(mut self) -> Self {
        self.acting = true;
        self
    }

    /// Targets are valid until `t_us` on the context's time line; then monitoring stops.
    pub fn valid_until_us(mut self, t_us: u64) -> Self {
        self.valid_until_us = t_us;
        self
    }

    fn regions_of(&self, pid: Option<u32>) -> Target {
        Target::with_regions(pid, &self.spans)
    }
}

impl Operations for TestOps<'_> {
    fn name(&self) -> &str {
        match self.source {
            Source::Checked(_) => "test/checked",
            Source::Sampled(_) => "test/sampled",
        }
    }

    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        for t in ctx.targets_mut() {
            if t.regions.is_empty() {
                *t = self.regions_of(t.pid);
            }
        }
        Ok(())
    }

    fn update(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        self.updates += 1;
        if self.reset_on_update {
            for t in ctx.targets_mut() {
                *t = self.regions_of(t.pid);
            }
        }
        Ok(())
    }

    fn prepare_access_checks(&mut self, ctx: &mut Context) {
        if let Source::Checked(_) = self.source {
            ctx.randomize_sampling_addrs();
        }
    }

    fn check_accesses(&mut self, ctx: &mut Context) {
        match &mut self.source {
            Source::Checked(accessed) => {
                let now_us = ctx.now_us();
                ctx.count_checked_accesses(|target, _, addr, rng| {
                    accessed(Check {
                        target,
                        addr,
                        now_us,
                        rng,
                    })
                });
            }
            Source::Sampled(samples) => samples(ctx),
        }
    }

    fn check_residency(&mut self, ctx: &mut Context) {
        if let Some(check) = &mut self.residency {
            check(ctx);
        }
    }

    fn target_valid(&self, ctx: &Context, _target: usize) -> bool {
        ctx.now_us() < self.valid_until_us
    }

    fn apply_scheme(
        &mut self,
        target: usize,
        region: &Region,
        scheme: &Scheme,
        _env: &ApplyEnv,
    ) -> Applied {
        if !self.acting {
            return Applied::default();
        }
        let range = AddrRange::new(region.start, region.end);
        self.applied.push((target, range, scheme.action));
        Applied {
            sz_applied: region.size(),
            ..Applied::default()
        }
    }
}

/// Stops a run after this many more aggregation windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopAfterWindows(pub u64);

impl Callbacks for StopAfterWindows {
    fn after_aggregation(&mut self, _ctx: &Context) -> Flow {
        self.0 = self.0.saturating_sub(1);
        Ok(if self.0 == 0 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

/// Stops a run once the context's time reaches this (µs), whether the last step sampled or
/// only waited for the watermarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopAt(pub u64);

impl StopAt {
    fn check(&self, ctx: &Context) -> Flow {
        Ok(if ctx.now_us() >= self.0 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

impl Callbacks for StopAt {
    fn after_sampling(&mut self, ctx: &Context) -> Flow {
        self.check(ctx)
    }

    fn after_wait(&mut self, ctx: &Context) -> Flow {
        self.check(ctx)
    }
}

/// Calls the closure at every aggregation, with the completed window's regions; never stops.
pub struct EachWindow<F: FnMut(&Context)>(pub F);

impl<F: FnMut(&Context)> Callbacks for EachWindow<F> {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        (self.0)(ctx);
        Ok(ControlFlow::Continue(()))
    }
}

/// Calls the closure after every sampling interval's access check; never stops. (A sampled
/// source's samples reach the regions later: [`Context::record_sampled_accesses`].)
pub struct EachInterval<F: FnMut(&Context)>(pub F);

impl<F: FnMut(&Context)> Callbacks for EachInterval<F> {
    fn after_sampling(&mut self, ctx: &Context) -> Flow {
        (self.0)(ctx);
        Ok(ControlFlow::Continue(()))
    }
}

/// Steps a started context `n` sampling intervals in virtual time; panics if monitoring stops
/// or fails before.
pub fn steps(ctx: &mut Context, ops: &mut dyn Operations, callbacks: &mut dyn Callbacks, n: u64) {
    for i in 0..n {
        let flow = ctx.step(ops, &mut VirtualClock, callbacks);
        match flow {
            Ok(ControlFlow::Continue(())) => {}
            other => panic!("step {i} of {n}: monitoring ended: {other:?}"),
        }
    }
}
