//! What a running target's changes do to its series: new intervals (`udamon ctl tune`, the
//! intervals auto-tuning), a removed scheme, memory no longer known.

use std::ops::ControlFlow;
use udamon_core::{Attrs, Callbacks, Context, Flow, Target, VirtualClock};
use udamon_exporter::{Exporter, Observation, SchemeCounters, TargetLabels, observe};

mod common;

use common::{Areas, MIB};

/// Takes 50 ms sampling and 1 s aggregation at 3 s, as `udamon ctl tune` does between steps,
/// and observes the window that ends at 5 s.
#[derive(Default)]
struct RetuneThenObserve {
    retuned: bool,
    seen: Option<Observation>,
}

impl Callbacks for RetuneThenObserve {
    fn control(&mut self, ctx: &mut Context) -> Flow {
        if !self.retuned && ctx.now_us() >= 3_000_000 {
            self.retuned = true;
            let attrs = Attrs {
                sample_interval_us: 50_000,
                aggr_interval_us: 1_000_000,
                ..*ctx.attrs()
            };
            ctx.set_attrs(attrs)?;
        }
        Ok(ControlFlow::Continue(()))
    }
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if ctx.now_us() < 5_000_000 {
            return Ok(ControlFlow::Continue(()));
        }
        self.seen = Some(observe(ctx, 0));
        Ok(ControlFlow::Break(()))
    }
}

#[test]
fn memory_never_accessed_stays_out_of_the_working_set_when_the_intervals_change() {
    let attrs = Attrs {
        min_nr_regions: 4,
        ..Attrs::default()
    };
    let mut ctx = Context::new(attrs, 7).unwrap();
    ctx.add_target(Target::new(None));
    let mut cb = RetuneThenObserve::default();
    ctx.run(
        &mut Areas { second_until_us: 0 },
        &mut VirtualClock,
        &mut cb,
    )
    .unwrap();
    let o = cb.seen.unwrap();
    // Longer sampling intervals made the sampling intervals passed so far look like 32 s of
    // monitoring, and the 3 MiB idle since the start like memory that went idle since.
    assert_eq!(o.working_set_bytes, [MIB, MIB, MIB], "{o:?}");
}

fn labels() -> TargetLabels {
    TargetLabels {
        pid: "1".to_string(),
        comm: "app".to_string(),
        cgroup: String::new(),
        pod: Default::default(),
    }
}

fn pageout(index: usize, tried_regions: u64) -> SchemeCounters {
    SchemeCounters {
        index,
        action: "pageout".to_string(),
        tried_regions,
        tried_bytes: 0,
        applied_regions: 0,
        applied_bytes: 0,
        quota_exceeds: 0,
    }
}

fn window() -> Observation {
    Observation {
        working_set_bytes: vec![0; 3],
        idle_seconds: vec![0.0; 6],
        ..Observation::default()
    }
}

fn series<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .collect()
}

#[test]
fn a_removed_scheme_takes_its_series_and_the_next_one_counts_its_own() {
    let exporter = Exporter::new();
    let mut o = window();
    o.schemes = vec![pageout(0, 1000), pageout(1, 5)];
    exporter.update(&labels(), &o);
    // `udamon ctl remove-scheme 0`: the second scheme is now the first.
    o.schemes = vec![pageout(0, 6)];
    exporter.update(&labels(), &o);
    let text = exporter.render();
    let tried = series(&text, "udamon_scheme_tried_regions_total");
    assert_eq!(tried.len(), 1, "{tried:#?}");
    assert!(
        tried[0].contains("scheme=\"0\"") && tried[0].ends_with(" 6"),
        "{tried:#?}"
    );
}

#[test]
fn memory_no_longer_known_is_not_shown() {
    let exporter = Exporter::new();
    let mut o = window();
    o.resident_bytes = Some(123);
    o.refaulted_bytes = Some(7);
    exporter.update(&labels(), &o);
    o.resident_bytes = None;
    o.refaulted_bytes = None;
    exporter.update(&labels(), &o);
    let text = exporter.render();
    assert!(series(&text, "udamon_resident_bytes").is_empty(), "{text}");
    assert!(
        series(&text, "udamon_refaulted_bytes_total").is_empty(),
        "{text}"
    );
}
