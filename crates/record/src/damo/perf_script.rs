//! damo's `perf_script` text: one line per region per snapshot, as `perf script` prints the
//! `damon:damon_aggregated` tracepoint (damo writes `kdamond.x xxxx xxxx` in place of the
//! command, pid and CPU). `trace-cmd report` lines (`damon_aggregated:` without the `damon:`
//! prefix) are read too, and `damon_monitor_intervals_tune` lines set the sampling interval of
//! the snapshots that follow, as in damo (`_damo_records.parse_damon_trace`).
//!
//! ```text
//! kdamond.x xxxx xxxx 1.100000: damon:damon_aggregated: target_id=42 nr_regions=2 4096-1052672: 20 0
//! ```
//!
//! A snapshot is complete once `nr_regions` lines of its target have been read. Lines of other
//! events (including `damos_before_apply`, which lists regions a scheme tried, not monitoring
//! results) are ignored.

use super::{TargetRecord, TargetSnap, is_fake_region, target_label};
use crate::error::{Damage, DamageKind, RecordError};
use crate::model::{RegionStat, check_regions};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::BufRead;
use std::path::Path;

/// A snapshot whose lines are still being read.
struct Pending {
    offset: u64,
    end_ns: u64,
    nr_regions: usize,
    sample_us: Option<u64>,
    regions: Vec<RegionStat>,
    fake: bool,
}

struct Aggregated<'a> {
    end_ns: u64,
    target_id: &'a str,
    nr_regions: usize,
    region: RegionStat,
    fake: bool,
}

enum Line<'a> {
    Aggregated(Aggregated<'a>),
    IntervalsTune { sample_us: u64 },
    Other,
}

/// The longest line read.
const MAX_LINE_BYTES: u64 = 64 << 10;

pub(super) fn read(
    path: &Path,
    mut text: impl BufRead,
) -> Result<(Vec<TargetRecord>, Vec<Damage>), RecordError> {
    let mut records: Vec<TargetRecord> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let mut damage = Vec::new();
    let mut sample_us = None;
    let mut line = Vec::new();
    let mut offset = 0u64;
    // Regions the file may still add: damo's layout is read whole, so bounded as damo's JSON.
    let mut regions_left = super::json::MAX_LOADED_BYTES / size_of::<RegionStat>();
    let damo_error = |reason: String| RecordError::Damo {
        path: path.to_path_buf(),
        reason,
    };
    loop {
        line.clear();
        let n = std::io::Read::take(&mut text, MAX_LINE_BYTES)
            .read_until(b'\n', &mut line)
            .map_err(|e| RecordError::io(path, e))?;
        if n == 0 {
            break;
        }
        if n as u64 == MAX_LINE_BYTES && !line.ends_with(b"\n") {
            return Err(damo_error(format!(
                "a line at byte {offset} is longer than {} KiB, which perf script never writes",
                MAX_LINE_BYTES >> 10
            )));
        }
        let line_offset = offset;
        offset += n as u64;
        let Ok(s) = std::str::from_utf8(&line) else {
            continue;
        };
        let a = match parse_line(s) {
            Ok(Line::Aggregated(a)) => a,
            Ok(Line::IntervalsTune { sample_us: si }) => {
                sample_us = Some(si);
                continue;
            }
            Ok(Line::Other) => continue,
            Err(reason) => {
                damage.push(Damage {
                    offset: line_offset,
                    kind: DamageKind::Undecodable {
                        reason,
                        skipped: n as u64,
                    },
                });
                continue;
            }
        };
        let p = match pending.entry(a.target_id.to_string()) {
            Entry::Occupied(mut e) => {
                let p = e.get_mut();
                if p.end_ns != a.end_ns || p.nr_regions != a.nr_regions {
                    // A new snapshot began before the last one had all its regions.
                    damage.push(incomplete(p, a.target_id, line_offset - p.offset));
                    *p = new_pending(&a, line_offset, sample_us);
                }
                e.into_mut()
            }
            Entry::Vacant(e) => e.insert(new_pending(&a, line_offset, sample_us)),
        };
        regions_left = regions_left
            .checked_sub(1)
            .ok_or_else(|| damo_error(super::json::TOO_LARGE.to_string()))?;
        p.regions.push(a.region);
        p.fake &= a.fake;
        if p.regions.len() >= p.nr_regions {
            let done = pending.remove(a.target_id).expect("just used");
            if done.fake {
                continue;
            }
            if let Err(reason) = check_regions(done.regions.iter().map(RegionStat::range)) {
                damage.push(Damage {
                    offset: done.offset,
                    kind: DamageKind::Undecodable {
                        reason: format!("snapshot of target {}: {reason}", a.target_id),
                        skipped: offset - done.offset,
                    },
                });
                continue;
            }
            let index = *index_of.entry(a.target_id.to_string()).or_insert_with(|| {
                records.push(TargetRecord {
                    label: target_label(Some(a.target_id), None),
                    ..TargetRecord::default()
                });
                records.len() - 1
            });
            records[index].snapshots.push(TargetSnap {
                start_ns: None,
                end_ns: done.end_ns,
                sample_us: done.sample_us,
                aggr_us: None,
                regions: done.regions,
            });
        }
    }
    let mut tails: Vec<(String, Pending)> = pending.into_iter().collect();
    tails.sort_by_key(|(_, p)| p.offset);
    for (_, p) in tails {
        damage.push(Damage {
            offset: p.offset,
            kind: DamageKind::TruncatedTail {
                bytes: offset - p.offset,
            },
        });
    }
    damage.sort_by_key(|d| d.offset);
    Ok((records, damage))
}

fn new_pending(a: &Aggregated, offset: u64, sample_us: Option<u64>) -> Pending {
    Pending {
        offset,
        end_ns: a.end_ns,
        nr_regions: a.nr_regions,
        sample_us,
        regions: Vec::with_capacity(a.nr_regions.min(1 << 16)),
        fake: true,
    }
}

fn incomplete(p: &Pending, target_id: &str, skipped: u64) -> Damage {
    Damage {
        offset: p.offset,
        kind: DamageKind::Undecodable {
            reason: format!(
                "snapshot of target {target_id} has {} of its {} regions",
                p.regions.len(),
                p.nr_regions
            ),
            skipped,
        },
    }
}

fn parse_line(line: &str) -> Result<Line<'_>, String> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let Some((i, event)) = tokens.iter().enumerate().find_map(|(i, t)| {
        let name = t.strip_suffix(':')?;
        let name = name.strip_prefix("damon:").unwrap_or(name);
        matches!(name, "damon_aggregated" | "damon_monitor_intervals_tune").then_some((i, name))
    }) else {
        return Ok(Line::Other);
    };
    let time = i
        .checked_sub(1)
        .and_then(|j| tokens[j].strip_suffix(':'))
        .ok_or("no timestamp before the event name")?;
    let end_ns = seconds_to_ns(time).ok_or_else(|| format!("bad timestamp {time:?}"))?;
    let fields = &tokens[i + 1..];
    if event == "damon_monitor_intervals_tune" {
        let sample_us = field(fields, 0, "sample_us")?;
        return Ok(Line::IntervalsTune { sample_us });
    }
    if !(4..=5).contains(&fields.len()) {
        return Err(format!(
            "expected 4 or 5 fields after the event, found {}",
            fields.len()
        ));
    }
    let target_id = fields[0].strip_prefix("target_id=").ok_or("no target_id")?;
    let nr_regions: usize = field(fields, 1, "nr_regions")?;
    let (start, end) = fields[2]
        .strip_suffix(':')
        .and_then(|r| r.split_once('-'))
        .ok_or_else(|| format!("bad region {:?}", fields[2]))?;
    let start: u64 = start
        .parse()
        .map_err(|_| format!("bad region start {start:?}"))?;
    let end: u64 = end.parse().map_err(|_| format!("bad region end {end:?}"))?;
    let nr_accesses: i64 = fields[3]
        .parse()
        .map_err(|_| format!("bad nr_accesses {:?}", fields[3]))?;
    // Kernels before 5.16 do not print the age.
    let age: i64 = match fields.get(4) {
        Some(a) => a.parse().map_err(|_| format!("bad age {a:?}"))?,
        None => 0,
    };
    let fake = is_fake_region(start, end, nr_accesses);
    let nr_accesses = if fake {
        0
    } else {
        u32::try_from(nr_accesses).map_err(|_| format!("bad nr_accesses {nr_accesses}"))?
    };
    let age = if fake {
        0
    } else {
        u32::try_from(age).map_err(|_| format!("bad age {age}"))?
    };
    Ok(Line::Aggregated(Aggregated {
        end_ns,
        target_id,
        nr_regions,
        region: RegionStat {
            age,
            ..RegionStat::new(start, end, nr_accesses)
        },
        fake,
    }))
}

/// `name=value` at `fields[i]`.
fn field<T: std::str::FromStr>(fields: &[&str], i: usize, name: &str) -> Result<T, String> {
    fields
        .get(i)
        .and_then(|f| f.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no valid {name}"))
}

/// `"1.100000"` seconds to nanoseconds, exactly (no floating point).
fn seconds_to_ns(t: &str) -> Option<u64> {
    let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32)
    };
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_script_and_trace_cmd_lines() {
        let perf = "kdamond.0  4452 [000] 82877.315633: damon:damon_aggregated: \
                    target_id=18446623435582458880 nr_regions=17 140731667070976-140731668037632: 0 3";
        let Ok(Line::Aggregated(a)) = parse_line(perf) else {
            panic!("not parsed")
        };
        assert_eq!(a.end_ns, 82_877_315_633_000);
        assert_eq!(a.target_id, "18446623435582458880");
        assert_eq!(a.nr_regions, 17);
        assert_eq!(
            (a.region.start, a.region.end),
            (140731667070976, 140731668037632)
        );
        assert_eq!((a.region.nr_accesses, a.region.age), (0, 3));

        let trace_cmd = "kdamond.0-129062 [005] ..... 101005.778382: damon_aggregated:     \
                         target_id=0 nr_regions=11 8360624128-8371830784: 0 974";
        let Ok(Line::Aggregated(a)) = parse_line(trace_cmd) else {
            panic!("not parsed")
        };
        assert_eq!((a.target_id, a.region.age), ("0", 974));

        let old_kernel = "k 1 [0] 5.5: damon:damon_aggregated: target_id=1 nr_regions=1 0-4096: 7";
        let Ok(Line::Aggregated(a)) = parse_line(old_kernel) else {
            panic!("not parsed")
        };
        assert_eq!((a.region.nr_accesses, a.region.age), (7, 0));

        let tune = "k 1 [0] 92713.218210: damon:damon_monitor_intervals_tune: sample_us=80000";
        assert!(matches!(
            parse_line(tune),
            Ok(Line::IntervalsTune { sample_us: 80000 })
        ));
        assert!(matches!(parse_line("# perf header"), Ok(Line::Other)));
        assert!(
            parse_line("k 1 [0] 5.5: damon:damon_aggregated: target_id=1 nr_regions=x 0-1: 1 1")
                .is_err()
        );
    }

    #[test]
    fn timestamps_are_exact() {
        assert_eq!(seconds_to_ns("1.1"), Some(1_100_000_000));
        assert_eq!(seconds_to_ns("0.000001"), Some(1_000));
        assert_eq!(seconds_to_ns("12"), Some(12_000_000_000));
        assert_eq!(seconds_to_ns("1.x"), None);
    }
}
