//! What udamon itself costs while top runs: the whole process's CPU and resident memory
//! (/proc/self), and the share of a core the display thread spends (its own CPU clock), so
//! that the user sees the monitor's overhead and the view's apart.

use std::time::{Duration, Instant};

/// How often the numbers are taken.
pub const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    /// The process's CPU time over the last period, in percent of one core.
    pub cpu_percent: f64,
    pub rss_bytes: u64,
    /// The display thread's CPU time over the last period, in percent of one core.
    pub draw_percent: f64,
}

/// Takes [`Usage`] every [`EVERY`]; call [`Meter::tick`] from the display thread.
pub struct Meter {
    at: Instant,
    process_ns: u64,
    thread_ns: u64,
    pub usage: Usage,
}

impl Meter {
    pub fn new() -> Meter {
        Meter {
            at: Instant::now(),
            process_ns: cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            thread_ns: cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
            usage: Usage::default(),
        }
    }

    /// Takes the numbers again when a period has passed; true when it did.
    pub fn tick(&mut self) -> bool {
        let wall = self.at.elapsed();
        if wall < EVERY {
            return false;
        }
        let (process, thread) = (
            cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
        );
        let share = |ns: u64| ns as f64 * 100.0 / wall.as_nanos().max(1) as f64;
        self.usage = Usage {
            cpu_percent: share(process.saturating_sub(self.process_ns)),
            rss_bytes: rss_bytes(),
            draw_percent: share(thread.saturating_sub(self.thread_ns)),
        };
        (self.at, self.process_ns, self.thread_ns) = (Instant::now(), process, thread);
        true
    }
}

/// A CPU-time clock of this process or thread, in ns.
fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This process's resident bytes (/proc/self/statm).
fn rss_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    udamon_linux::metrics::statm_resident_pages(&text).unwrap_or(0) * udamon_core::PAGE_SIZE
}
