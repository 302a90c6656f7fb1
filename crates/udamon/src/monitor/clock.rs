//! A real-time clock for simulations (record watched by top, serve's simulated targets),
//! that a stop flag cuts short.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a wait looks at its stop flag.
const POLL: Duration = Duration::from_millis(200);

/// Real time for a simulation: its time line starts at 0 when it starts, and a stop ends
/// every wait at once.
pub(crate) struct PacedClock {
    origin: Instant,
    stop: Arc<AtomicBool>,
}

impl PacedClock {
    pub(crate) fn new(stop: Arc<AtomicBool>) -> Self {
        PacedClock {
            origin: Instant::now(),
            stop,
        }
    }
}

impl udamon_core::Clock for PacedClock {
    fn wait_until(&mut self, t_us: u64) {
        let due = self.origin + Duration::from_micros(t_us);
        while !self.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= due {
                return;
            }
            std::thread::sleep((due - now).min(POLL));
        }
    }
}
