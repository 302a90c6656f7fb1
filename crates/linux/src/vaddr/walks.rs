//! Page-table walks shared by every process a monitor serves: one time budget for the whole
//! host, rather than one per process, so that the walks of a thousand processes cost what
//! those of a few do.
//!
//! Each process's residency check and footprint walk ask for their usual per-window share
//! ([`super::residency::WALK_BUDGET`], [`super::footprint::WALK_BUDGET`]) and get what the
//! host's budget has left; what a walk took is charged after it. A walk, once granted any
//! time, finishes the piece it started, so it may take more than it was granted: the budget
//! goes into debt by the difference, and grants nothing until the debt is repaid. Forgiving it
//! let a hundred windows a second each overrun a sliver of budget by a whole piece (a busy
//! fleet walked half again its rate). The budget refills at its rate and holds at most one
//! second of it, so a burst of walks after a quiet spell stays bounded too. Memory never
//! walked is still walked at once whatever it costs (see [`super::residency`]), and charged:
//! the repeated walks wait their turn.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A host-wide time budget for page-table walks; cheap to clone, for one thread.
#[derive(Debug, Clone)]
pub struct WalkBudget(Rc<RefCell<Bucket>>);

#[derive(Debug)]
struct Bucket {
    /// Walking time granted per second.
    rate: Duration,
    /// Seconds of walking time left; negative while walks that overran are repaid.
    left: f64,
    refilled: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let earned = self.rate.as_secs_f64() * now.duration_since(self.refilled).as_secs_f64();
        self.left = (self.left + earned).min(self.rate.as_secs_f64());
        self.refilled = now;
    }

    fn grant(&mut self, want: Duration, now: Instant) -> Duration {
        self.refill(now);
        want.min(Duration::from_secs_f64(self.left.max(0.0)))
    }

    fn charge(&mut self, took: Duration) {
        self.left -= took.as_secs_f64();
    }
}

impl WalkBudget {
    /// A budget of `rate` walking time per second of real time.
    pub fn new(rate: Duration) -> WalkBudget {
        WalkBudget(Rc::new(RefCell::new(Bucket {
            rate,
            left: rate.as_secs_f64(),
            refilled: Instant::now(),
        })))
    }

    /// At most `want`, as far as the budget has time left now (nothing while in debt).
    pub(super) fn grant(&self, want: Duration) -> Duration {
        self.0.borrow_mut().grant(want, Instant::now())
    }

    /// Charges a walk that took `took`.
    pub(super) fn charge(&self, took: Duration) {
        self.0.borrow_mut().charge(took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn walks_share_what_the_budget_holds() {
        let budget = WalkBudget::new(2 * MS);
        let other = budget.clone();
        assert!(budget.grant(MS) <= MS);
        other.charge(MS + MS / 2);
        // Spent by the other process's walk: little or nothing left until it refills.
        assert!(budget.grant(MS) < MS);
    }

    #[test]
    fn an_overrun_is_repaid_before_the_next_grant_and_a_quiet_spell_saves_one_second() {
        let t0 = Instant::now();
        let mut b = Bucket {
            rate: 2 * MS,
            left: 0.002,
            refilled: t0,
        };
        assert_eq!(b.grant(MS, t0), MS);
        // A walk granted 1 ms took 5: 3 ms of debt, repaid at 2 ms a second.
        b.charge(5 * MS);
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        assert_eq!(b.grant(MS, at(1.0)), Duration::ZERO);
        assert_eq!(b.grant(MS, at(1.4)), Duration::ZERO);
        // Repaid at 1.5 s; half a second later, 1 ms earned.
        let granted = b.grant(2 * MS, at(2.0)).as_secs_f64();
        assert!((granted - 0.001).abs() < 1e-9, "{granted}");
        // After a quiet minute: one second's worth, not sixty.
        assert_eq!(b.grant(Duration::from_secs(1), at(62.0)), 2 * MS);
    }
}
