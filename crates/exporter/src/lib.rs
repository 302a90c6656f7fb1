//! udamon serve's Prometheus metrics (docs/serve.md, "Metrics").
//!
//! - [`observe`]: what one target's aggregation window says (working set over a few
//!   horizons, estimated access bandwidth, idle-time percentiles, scheme counters), computed
//!   from the core's context;
//! - [`aggregate`]: a cgroup's processes together (working set, bandwidth, idle-time
//!   percentiles over all their bytes), for the per-cgroup series;
//! - [`Exporter`]: the registry of every served target's series, updated from the monitoring
//!   threads and withdrawn when a target goes, encoded in the OpenMetrics text format by the
//!   `prometheus-client` crate;
//! - [`Server`]: `GET /metrics` over HTTP (`hyper` on a single-threaded `tokio` runtime), on
//!   a thread of its own, with what each client can take bounded, on TCP or a unix socket;
//! - [`WebConfig`]: TLS and basic authentication, from the exporter-toolkit's web
//!   configuration file.

mod exporter;
mod groups;
mod observe;
mod server;
mod web;

pub use exporter::{CgroupLabels, Exporter, PodLabels, TargetLabels};
pub use groups::{GroupObservation, aggregate};
pub use observe::{
    HORIZONS, IDLE_QUANTILES, Observation, SchemeCounters, idle_quantiles, observe, observe_idle,
    observe_touched,
};
pub use server::{
    EXCHANGE_TIMEOUT, Endpoint, HEAD_TIMEOUT, Listen, Log, MAX_CONNECTIONS, MAX_HEAD_BYTES, Server,
};
pub use web::WebConfig;
