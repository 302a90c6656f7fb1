//! udamon's Linux operations: monitoring live processes.
//!
//! - [`decode`]: recover the data address of a sampled user instruction (x86-64);
//! - [`perf`]: perf_event_open sampling sources and their ring buffers;
//! - [`maps`]: `/proc/PID/maps` parsing;
//! - [`executed`]: the path a process was executed by, naming its executable in reports;
//! - [`vaddr`]: the operations on live processes, driven by sample timestamps;
//! - [`paddr`]: the host's physical memory as one target, from processes' samples (root);
//! - [`actions`]: DAMOS actions on live processes (`process_madvise` through a pidfd);
//! - [`metrics`]: system and process metrics for quota goals and watermarks;
//! - [`referenced`]: the kernel's accessed bits per mapping, an opt-in second opinion;
//! - [`discover`]: which processes `udamon serve` monitors, and who may ask it to;
//! - [`pods`]: the Kubernetes pod and container a cgroup is, and their names;
//! - [`proc_stat`]: the fields udamon reads of `/proc/PID/stat`;
//! - [`proc_status`]: the ids and capability sets udamon reads of `/proc/PID/status`;
//! - [`symbolize`]: naming sampled instruction pointers (function, mapping) while recording.

pub mod actions;
pub mod decode;
pub mod discover;
pub mod executed;
pub mod maps;
pub mod metrics;
pub mod paddr;
pub mod perf;
pub mod pods;
pub mod proc_stat;
pub mod proc_status;
pub mod referenced;
pub mod symbolize;
pub mod vaddr;
