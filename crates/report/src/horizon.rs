//! How far back a working set looks: one type from the command line (`--horizon`) to the
//! estimate, for every report that takes a horizon (`wss`, `footprints`, `mappings`, `html`).
//! `auto` stays `auto` until a report resolves it from the record's evidence
//! ([`crate::wss::span_of`]); no number stands for it on the way.

/// A working set's horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Horizon {
    /// The shortest horizon that holds enough samples, for a record of a sampled source; each
    /// snapshot's own window for others ([`crate::wss::choose_horizon`]).
    Auto,
    /// The windows that ended within this many nanoseconds before a snapshot's end (0: the
    /// snapshot's own window, as damo counts).
    Span(u64),
}

impl Horizon {
    /// Each snapshot's own window.
    pub const WINDOW: Horizon = Horizon::Span(0);

    /// A horizon of `seconds`.
    pub const fn seconds(seconds: u64) -> Horizon {
        Horizon::Span(seconds * 1_000_000_000)
    }
}
