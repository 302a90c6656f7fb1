//! damo's legacy binary `record` format (damo up to v2.0.1, and the pre-mainline in-kernel
//! recording feature): native-endian Python `struct` fields, which on x86-64 and arm64 Linux
//! means little-endian, 8-byte `l`/`L`, 4-byte `i`/`I`, no padding.
//!
//! ```text
//! file     := ("damon_recfmt_ver" i32:version)? block*     (no signature: version 0)
//! block    := i64:sec i64:nsec u32:nr_targets target*      (end time of the snapshot)
//! target   := id u32:nr_regions (u64:start u64:end u32:nr_accesses)*
//! id       := i32 in version 1, u64 in versions 0 and 2
//! ```
//!
//! Ages are not stored. The format has no sync markers, so reading stops at the first damaged
//! block.

use super::{TargetRecord, TargetSnap, target_label};
use crate::error::{Damage, DamageKind, RecordError};
use crate::model::{RegionStat, check_regions};
use std::collections::HashMap;
use std::path::Path;

pub const SIGNATURE: &[u8; 16] = b"damon_recfmt_ver";

/// Sizes of one region, and of a block's fixed part.
const REGION_LEN: usize = 20;
const BLOCK_HEAD_LEN: usize = 20;

pub(super) fn read(
    path: &Path,
    bytes: &[u8],
) -> Result<(Vec<TargetRecord>, Vec<Damage>), RecordError> {
    let (version, mut pos) = match bytes.strip_prefix(SIGNATURE.as_slice()) {
        Some(rest) if rest.len() >= 4 => {
            (i32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]), 20)
        }
        Some(_) => {
            return Err(RecordError::Damo {
                path: path.to_path_buf(),
                reason: "the file ends inside the format version".into(),
            });
        }
        None => (0, 0),
    };
    if !(0..=2).contains(&version) {
        return Err(RecordError::Damo {
            path: path.to_path_buf(),
            reason: format!("unknown legacy record format version {version} (known: 0, 1, 2)"),
        });
    }
    let mut records: Vec<TargetRecord> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut damage = Vec::new();
    while pos < bytes.len() {
        let mut c = Cursor { bytes, pos };
        match read_block(&mut c, version) {
            Ok(block) => {
                let at = pos;
                pos = c.pos;
                if let Err(reason) = check_block(&block) {
                    damage.push(Damage {
                        offset: at as u64,
                        kind: DamageKind::Undecodable {
                            reason,
                            skipped: (pos - at) as u64,
                        },
                    });
                    continue;
                }
                for (id, regions) in block.targets {
                    if is_fake(&regions) {
                        continue;
                    }
                    let index = *index_of.entry(id.clone()).or_insert_with(|| {
                        records.push(TargetRecord {
                            label: target_label(Some(&id), None),
                            ..TargetRecord::default()
                        });
                        records.len() - 1
                    });
                    records[index].snapshots.push(TargetSnap {
                        start_ns: None,
                        end_ns: block.end_ns,
                        sample_us: None,
                        aggr_us: None,
                        regions,
                    });
                }
            }
            Err(problem) => {
                let rest = (bytes.len() - pos) as u64;
                let kind = match problem {
                    Problem::Truncated => DamageKind::TruncatedTail { bytes: rest },
                    Problem::Invalid(reason) => DamageKind::Undecodable {
                        reason,
                        skipped: rest,
                    },
                };
                damage.push(Damage {
                    offset: pos as u64,
                    kind,
                });
                break;
            }
        }
    }
    Ok((records, damage))
}

/// A target's regions in a block: the format keeps only their bounds and `nr_accesses`.
type Regions = Vec<RegionStat>;

struct Block {
    end_ns: u64,
    targets: Vec<(String, Regions)>,
}

enum Problem {
    Truncated,
    Invalid(String),
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Problem> {
        let b = self
            .bytes
            .get(self.pos..self.pos + N)
            .ok_or(Problem::Truncated)?;
        self.pos += N;
        Ok(b.try_into().expect("N bytes"))
    }

    fn u32(&mut self) -> Result<u32, Problem> {
        self.take().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, Problem> {
        self.take().map(u64::from_le_bytes)
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
}

/// damo's fake snapshot (see `is_fake_region`), with -1 stored unsigned.
fn is_fake(regions: &Regions) -> bool {
    matches!(
        regions[..],
        [RegionStat {
            start: 0,
            end: 0,
            nr_accesses: u32::MAX,
            ..
        }]
    )
}

/// [`check_regions`] for every target of a block but damo's fake snapshot.
fn check_block(block: &Block) -> Result<(), String> {
    for (id, regions) in block.targets.iter().filter(|(_, r)| !is_fake(r)) {
        check_regions(regions.iter().map(RegionStat::range))
            .map_err(|e| format!("target {id}: {e}"))?;
    }
    Ok(())
}

fn read_block(c: &mut Cursor, version: i32) -> Result<Block, Problem> {
    if c.remaining() < BLOCK_HEAD_LEN {
        return Err(Problem::Truncated);
    }
    let sec = c.u64()? as i64;
    let nsec = c.u64()? as i64;
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(Problem::Invalid(format!(
            "impossible snapshot time {sec} s {nsec} ns"
        )));
    }
    let end_ns = (sec as u64)
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(nsec as u64))
        .ok_or_else(|| Problem::Invalid(format!("snapshot time {sec} s out of range")))?;
    let nr_targets = c.u32()? as usize;
    let mut targets = Vec::new();
    for _ in 0..nr_targets {
        let id = if version == 1 {
            (c.u32()? as i32).to_string()
        } else {
            c.u64()?.to_string()
        };
        let nr_regions = c.u32()? as usize;
        if nr_regions * REGION_LEN > c.remaining() {
            return Err(Problem::Truncated);
        }
        let mut regions = Vec::with_capacity(nr_regions);
        for _ in 0..nr_regions {
            regions.push(RegionStat::new(c.u64()?, c.u64()?, c.u32()?));
        }
        targets.push((id, regions));
    }
    Ok(Block { end_ns, targets })
}

/// Whether `bytes` plausibly start a version-0 file (no signature): the first block's time and
/// counts must be sane and its first regions well-formed. Random or foreign data fails this
/// almost surely (the nanoseconds field alone passes with probability 2^-34).
pub(crate) fn plausible_v0(bytes: &[u8]) -> bool {
    let mut c = Cursor { bytes, pos: 0 };
    let check = |c: &mut Cursor| -> Result<bool, Problem> {
        let sec = c.u64()? as i64;
        let nsec = c.u64()?;
        let nr_targets = c.u32()?;
        if sec < 0 || nsec >= 1_000_000_000 || !(1..=4096).contains(&nr_targets) {
            return Ok(false);
        }
        let _id = c.u64()?;
        let nr_regions = c.u32()?;
        if nr_regions == 0 {
            return Ok(false);
        }
        for _ in 0..nr_regions.min(8) {
            let (start, end, _) = (c.u64()?, c.u64()?, c.u32()?);
            if start > end {
                return Ok(false);
            }
        }
        Ok(true)
    };
    check(&mut c).unwrap_or(false)
}
