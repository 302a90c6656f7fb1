//! The served targets' windows as Prometheus metrics: the exporter as the monitoring loop's
//! [`Sink`].
//!
//! **Bounded label sets.** Every served process counts in its cgroup's series
//! (`udamon_cgroup_*`, labelled by the cgroup alone), whatever their number. Series of a
//! process of its own (labelled `pid`, `comm`, `cgroup`) exist only for the processes named
//! (`--pid`, `udamon ctl add`) and for the `process_series` largest others by resident memory,
//! chosen again at every publication: a host of ten thousand processes exports as many series
//! as one of a hundred. A process that drops out of the largest loses its series (its
//! counters start again if it comes back, which Prometheus reads as a reset).

use super::engine::Sink;
use super::target::Labels;
use std::collections::{BTreeMap, BTreeSet};
use udamon_exporter::{Exporter, Observation, TargetLabels, aggregate};
use udamon_report::human::{TEXT_CHARS, one_line};

pub struct ExporterSink {
    pub exporter: Exporter,
    /// Processes with series of their own besides those named.
    pub process_series: usize,
    /// The targets whose series are exported now.
    exported: BTreeSet<Labels>,
}

impl ExporterSink {
    pub fn new(exporter: Exporter, process_series: usize) -> Self {
        ExporterSink {
            exporter,
            process_series,
            exported: BTreeSet::new(),
        }
    }
}

/// A target's label values, escaped as reports escape text: a process names itself (prctl)
/// and a cgroup's owner names it, and either could otherwise put terminal escapes on the
/// screen of whoever reads the metrics.
fn labels_of(labels: &Labels) -> TargetLabels {
    let printable = |text: &str| one_line(text, TEXT_CHARS);
    TargetLabels {
        pid: labels.id.to_string(),
        comm: printable(&labels.comm),
        cgroup: printable(&labels.cgroup),
    }
}

/// The targets that get series of their own: every one named, and the `n` largest others by
/// resident memory (by monitored memory where residency is unknown).
fn with_own_series<'a>(
    targets: &[(&'a Labels, &'a Observation)],
    n: usize,
) -> BTreeSet<&'a Labels> {
    let mut others: Vec<&(&Labels, &Observation)> =
        targets.iter().filter(|(l, _)| !l.named).collect();
    others.sort_by_key(|(l, o)| {
        (
            std::cmp::Reverse(o.resident_bytes.unwrap_or(o.monitored_bytes)),
            *l,
        )
    });
    targets
        .iter()
        .filter(|(l, _)| l.named)
        .chain(others.into_iter().take(n))
        .map(|(l, _)| *l)
        .collect()
}

impl Sink for ExporterSink {
    fn publish(&mut self, targets: &[(&Labels, &Observation)], served: usize) {
        let chosen = with_own_series(targets, self.process_series);
        for (labels, obs) in targets {
            if chosen.contains(labels) {
                self.exporter.update(&labels_of(labels), obs);
            }
        }
        let now: BTreeSet<Labels> = chosen.into_iter().cloned().collect();
        for gone in self.exported.difference(&now) {
            self.exporter.remove(&labels_of(gone));
        }
        self.exported = now;
        let mut cgroups: BTreeMap<&String, Vec<&Observation>> = BTreeMap::new();
        for (labels, obs) in targets {
            if !labels.cgroup.is_empty() {
                cgroups.entry(&labels.cgroup).or_default().push(obs);
            }
        }
        let groups: Vec<(String, udamon_exporter::GroupObservation)> = cgroups
            .into_iter()
            .map(|(cgroup, members)| (cgroup.clone(), aggregate(members)))
            .collect();
        self.exporter
            .publish_cgroups(groups.iter().map(|(c, g)| (c, g)));
        self.exporter.set_targets(served);
    }

    fn publish_host(&mut self, host: &Observation, samples: &[u64]) {
        self.exporter.update_host(host, samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::target::TargetId;

    fn labels(pid: u32, named: bool) -> Labels {
        Labels {
            id: TargetId::Pid(pid),
            comm: "p".into(),
            cgroup: "/c".into(),
            named,
        }
    }

    fn resident(bytes: u64) -> Observation {
        Observation {
            resident_bytes: Some(bytes),
            ..Observation::default()
        }
    }

    #[test]
    fn the_named_and_the_largest_processes_get_series_of_their_own() {
        let (a, b, c, d) = (
            labels(1, false),
            labels(2, true),
            labels(3, false),
            labels(4, false),
        );
        let (small, big, bigger) = (resident(1), resident(100), resident(200));
        let targets = [(&a, &big), (&b, &small), (&c, &bigger), (&d, &small)];
        let chosen = with_own_series(&targets, 2);
        assert_eq!(chosen, [&a, &b, &c].into_iter().collect());
        assert_eq!(with_own_series(&targets, 0), [&b].into_iter().collect());
    }

    #[test]
    fn label_values_carry_no_terminal_escapes() {
        let named = Labels {
            comm: "\x1b]52;c;aGk=\x07\u{9b}8m".into(),
            cgroup: "/a\x1b[8m".into(),
            ..labels(1, true)
        };
        let got = labels_of(&named);
        for value in [&got.comm, &got.cgroup] {
            assert!(!value.chars().any(char::is_control), "{value:?}");
        }
        assert_eq!(got.comm, "\\u{1b}]52;c;aGk=\\u{7}\\u{9b}8m");
    }
}
