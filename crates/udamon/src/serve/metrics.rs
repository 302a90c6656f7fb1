//! The served targets' windows as Prometheus metrics: the exporter as the serving loop's
//! [`Sink`].

use super::target::{Labels, Sink, Told};
use udamon_core::Context;
use udamon_exporter::{Exporter, TargetLabels, observe};

pub struct ExporterSink(pub Exporter);

fn labels_of(labels: &Labels) -> TargetLabels {
    TargetLabels {
        pid: labels.id.to_string(),
        comm: labels.comm.clone(),
        cgroup: labels.cgroup.clone(),
    }
}

impl Sink for ExporterSink {
    fn window(&self, labels: &Labels, ctx: &Context, told: &Told) {
        let observation = observe(ctx, 0)
            .with_source_counters(told.counters.clone())
            .with_resident_bytes(told.resident_bytes);
        self.0.update(&labels_of(labels), &observation);
    }

    fn gone(&self, labels: &Labels) {
        self.0.remove(&labels_of(labels));
    }
}
