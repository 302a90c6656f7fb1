//! udamon's monitoring core: DAMON's algorithms as a deterministic library.
//!
//! The core never touches the operating system. Given attributes, a seed and an
//! [`Operations`] implementation it produces the same regions every time, which is what lets
//! the kernel's kunit vectors (docs/algorithms.md#kunit) test it, and what lets the
//! simulated address space run a terabyte-sized workload faster than real time.
//!
//! - [`region`]: regions and targets;
//! - [`attrs`]: intervals and region-count bounds, with upstream's validation;
//! - [`context`]: the monitoring loop as a step machine in sampling intervals;
//! - [`adjust`]: adaptive regions adjustment (merge, split, minimum region count);
//! - [`absent`]: cutting memory that holds no pages out of accessed regions;
//! - [`probe`]: where the guided adjustment cuts idle memory (ladders, exploration);
//! - [`density`]: the test by which sampled sources tell regions' sample densities apart;
//! - [`recent_samples`]: where a target's samples fell over its last few windows;
//! - [`page_samples`]: where a target's samples fell, by page and time, over a minute;
//! - `pending_samples`: a window's samples, counted into the regions when they are next read;
//! - [`touched`]: the pages of a range touched, estimated from how often samples repeat a page;
//! - [`access_history`]: which memory was accessed in each recent window;
//! - [`working_set`]: a target's working sets over horizons, the one answer every view gives;
//! - [`layout`]: regions from address ranges (three-regions construction, `set_regions`);
//! - [`tuning`]: monitoring intervals auto-tuning and the feedback loop;
//! - [`ops`]: the operations interface and clocks; [`callbacks`]: hooks into the loop;
//! - [`damos`]: operation schemes (patterns, quotas, goals, watermarks, filters);
//! - `testing` (the `testing` feature): the test kit of this crate and of those built on it.
//!
//! Every upstream kunit vector is a test named after it, except four with no
//! counterpart here: `damon_test_ops_registration` (operations are trait objects, not a global
//! registry), `damon_test_is_last_region` (regions are a vector),
//! `damon_test_commit_target_regions` (there is no commit of user-given regions into a running
//! context yet), and the OLD-only `damon_test_moving_sum` (the NEW on-demand moving sum is tested
//! instead).

pub mod absent;
pub mod access_history;
pub mod adjust;
pub mod attrs;
pub mod callbacks;
pub mod context;
pub mod damos;
pub mod density;
pub mod layout;
mod normal;
pub mod ops;
pub mod page_samples;
mod pending_samples;
pub mod probe;
pub mod rand;
pub mod recent_samples;
pub mod region;
mod region_index;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod touched;
pub mod tuning;
pub mod working_set;

pub use attrs::{Adjustment, Attrs, AttrsError, IntervalsGoal, PAGE_SIZE, REGION_BYTES};
pub use callbacks::{CallbackError, Callbacks, Flow, NoCallbacks, RunError};
pub use context::{Context, StopReason};
pub use ops::{Clock, Operations, OpsError, TargetMemory, VirtualClock};
pub use rand::Prng;
pub use region::{AddrRange, Region, SampledAccess, SampledSpan, Target};
