//! The part of a record a report reads: damo's `--address_range` and `--time_range`, and
//! `--target`. Reports see only the snapshots whose window overlaps the time range, with their
//! regions cut to the address range, and only the target asked for; events pass through, since
//! they say what happened to the targets, except those about other targets.

use anyhow::{Result, bail};
use udamon_core::AddrRange;
use udamon_record::model::{Frame, Snapshot};
use udamon_report::time_window::TimeWindow;

/// Which snapshots and addresses a report reads; the default is all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selection {
    pub address: Option<AddrRange>,
    pub time_ns: Option<TimeWindow>,
    /// Only this target (its index in the record).
    pub target: Option<u32>,
}

impl Selection {
    /// From the command line's pairs (addresses, and microseconds of time); a pair must not be
    /// empty.
    pub fn new(address: Option<&[u64]>, time_us: Option<&[u64]>) -> Result<Selection> {
        let address = match address {
            Some(&[start, end]) if start >= end => {
                bail!("--address-range: the start {start:#x} must be below the end {end:#x}")
            }
            Some(&[start, end]) => Some(AddrRange::new(start, end)),
            _ => None,
        };
        let time_ns = match time_us {
            Some(&[start, end]) if start >= end => {
                bail!("--time-range: the start must be before the end")
            }
            Some(&[start, end]) => Some(TimeWindow::new(start * 1000, end.saturating_mul(1000))),
            _ => None,
        };
        Ok(Selection {
            address,
            time_ns,
            target: None,
        })
    }

    /// `frame` as the report sees it, or `None` for a snapshot outside the time range and an
    /// event about another target.
    pub fn keep(&self, frame: Frame) -> Option<Frame> {
        match frame {
            Frame::Snapshot(s) => self.snapshot(s).map(Frame::Snapshot),
            Frame::Event(e) => match (self.target, e.kind.target()) {
                (Some(want), Some(about)) if want != about => None,
                _ => Some(Frame::Event(e)),
            },
        }
    }

    fn snapshot(&self, mut s: Snapshot) -> Option<Snapshot> {
        if let Some(window) = self.time_ns
            && !TimeWindow::of(&s).overlaps(window)
        {
            return None;
        }
        if let Some(want) = self.target {
            s.targets.retain(|t| t.target == want);
        }
        if let Some(AddrRange { start, end }) = self.address {
            for target in &mut s.targets {
                target.regions.retain(|r| r.start < end && r.end > start);
                for r in &mut target.regions {
                    (r.start, r.end) = (r.start.max(start), r.end.min(end));
                }
            }
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_record::model::{RegionStat, TargetSnapshot};

    fn snapshot(start_ns: u64, regions: &[(u64, u64)]) -> Frame {
        Frame::Snapshot(Snapshot {
            start_ns,
            end_ns: start_ns + 100,
            sample_us: 5,
            aggr_us: 100,
            targets: vec![TargetSnapshot {
                target: 0,
                regions: regions
                    .iter()
                    .map(|&(start, end)| RegionStat {
                        start,
                        end,
                        nr_accesses: 1,
                        age: 2,
                        raw_samples: 0,
                        read_samples: 0,
                        write_samples: 0,
                        touched_bytes: None,
                    })
                    .collect(),
            }],
        })
    }

    fn regions(frame: Option<Frame>) -> Vec<(u64, u64)> {
        match frame {
            Some(Frame::Snapshot(s)) => s.targets[0]
                .regions
                .iter()
                .map(|r| (r.start, r.end))
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn regions_are_cut_to_the_address_range() {
        let sel = Selection::new(Some(&[0x1800, 0x3800]), None).unwrap();
        let frame = snapshot(0, &[(0x0, 0x1000), (0x1000, 0x2000), (0x2000, 0x4000)]);
        assert_eq!(
            regions(sel.keep(frame)),
            [(0x1800, 0x2000), (0x2000, 0x3800)]
        );
    }

    #[test]
    fn snapshots_overlapping_the_time_range_are_kept() {
        let sel = Selection::new(None, Some(&[1, 2])).unwrap(); // 1000..2000 ns
        assert!(
            sel.keep(snapshot(800, &[(0, 4096)])).is_none(),
            "ends at 900"
        );
        assert!(sel.keep(snapshot(950, &[(0, 4096)])).is_some());
        assert!(sel.keep(snapshot(1900, &[(0, 4096)])).is_some());
        assert!(sel.keep(snapshot(2000, &[(0, 4096)])).is_none());
        assert!(Selection::default().keep(snapshot(7, &[(1, 2)])).is_some());
    }

    #[test]
    fn a_target_is_kept_with_the_events_about_it() {
        use udamon_record::model::{Event, EventKind};
        let sel = Selection {
            target: Some(1),
            ..Selection::default()
        };
        let Some(Frame::Snapshot(s)) = sel.keep(snapshot(0, &[(0, 4096)])) else {
            panic!("snapshots stay");
        };
        assert!(s.targets.is_empty(), "target 0 is left out");
        let exit = |target| {
            Frame::Event(Event {
                time_ns: 1,
                kind: EventKind::Exit {
                    target,
                    status: None,
                },
            })
        };
        assert!(sel.keep(exit(0)).is_none());
        assert!(sel.keep(exit(1)).is_some());
        let stop = Frame::Event(Event {
            time_ns: 2,
            kind: EventKind::Stopped {
                reason: "done".into(),
            },
        });
        assert!(sel.keep(stop).is_some(), "events about no target stay");
    }

    #[test]
    fn empty_ranges_are_refused() {
        let e = Selection::new(Some(&[0x2000, 0x1000]), None).unwrap_err();
        assert!(e.to_string().contains("must be below the end"), "{e}");
        assert!(Selection::new(None, Some(&[5, 5])).is_err());
    }
}
