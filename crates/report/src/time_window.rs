//! A stretch of a record's time line: the time a report reads (`--time-range`), a snapshot's
//! window, the time a heatmap shows.

use udamon_record::model::Snapshot;

/// `[start_ns, end_ns)`, in ns from the record's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl TimeWindow {
    /// All of a record's time.
    pub const ALL: TimeWindow = TimeWindow::new(0, u64::MAX);

    pub const fn new(start_ns: u64, end_ns: u64) -> TimeWindow {
        TimeWindow { start_ns, end_ns }
    }

    /// The window a snapshot's regions were aggregated over.
    pub fn of(snapshot: &Snapshot) -> TimeWindow {
        TimeWindow::new(snapshot.start_ns, snapshot.end_ns)
    }

    pub fn is_empty(self) -> bool {
        self.start_ns >= self.end_ns
    }

    /// Whether the two windows share some time.
    pub fn overlaps(self, other: TimeWindow) -> bool {
        self.start_ns < other.end_ns && self.end_ns > other.start_ns
    }

    /// The shortest window that holds both.
    pub fn hull(self, other: TimeWindow) -> TimeWindow {
        TimeWindow::new(
            self.start_ns.min(other.start_ns),
            self.end_ns.max(other.end_ns),
        )
    }

    /// The time the two share (empty when they share none).
    pub fn within(self, other: TimeWindow) -> TimeWindow {
        TimeWindow::new(
            self.start_ns.max(other.start_ns),
            self.end_ns.min(other.end_ns),
        )
    }
}
