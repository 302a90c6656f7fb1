//! Page-table walks shared by every process a monitor serves: one time budget for the whole
//! host, rather than one per process, so that the walks of a thousand processes cost what
//! those of a few do.
//!
//! Each process's residency check and footprint walk ask for their usual per-window share
//! ([`super::residency::WALK_BUDGET`], [`super::footprint::WALK_BUDGET`]) and get what the
//! host's budget has left; what a walk took is charged after it. The budget refills at its
//! rate and holds at most one second of it, so a burst of walks after a quiet spell stays
//! bounded too. Memory never walked is still walked at once whatever it costs (see
//! [`super::residency`]): only the repeated walks wait their turn.

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
    left: Duration,
    refilled: Instant,
}

impl WalkBudget {
    /// A budget of `rate` walking time per second of real time.
    pub fn new(rate: Duration) -> WalkBudget {
        WalkBudget(Rc::new(RefCell::new(Bucket {
            rate,
            left: rate,
            refilled: Instant::now(),
        })))
    }

    /// At most `want`, as far as the budget has time left now.
    pub(super) fn grant(&self, want: Duration) -> Duration {
        let mut b = self.0.borrow_mut();
        let now = Instant::now();
        let earned = b.rate.mul_f64(now.duration_since(b.refilled).as_secs_f64());
        b.left = (b.left + earned).min(b.rate);
        b.refilled = now;
        want.min(b.left)
    }

    /// Charges a walk that took `took`.
    pub(super) fn charge(&self, took: Duration) {
        let mut b = self.0.borrow_mut();
        b.left = b.left.saturating_sub(took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_share_what_the_budget_holds() {
        let budget = WalkBudget::new(Duration::from_millis(2));
        let other = budget.clone();
        assert!(budget.grant(Duration::from_millis(1)) <= Duration::from_millis(1));
        other.charge(Duration::from_millis(5));
        // Spent by the other process's walk: little or nothing left until it refills.
        assert!(budget.grant(Duration::from_millis(1)) < Duration::from_micros(500));
        std::thread::sleep(Duration::from_millis(1100));
        // A second later the budget is back, but never beyond one second's worth.
        assert_eq!(
            budget.grant(Duration::from_secs(1)),
            Duration::from_millis(2)
        );
    }
}
