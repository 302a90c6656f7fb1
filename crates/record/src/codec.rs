//! Frame payloads: the compact binary encoding of snapshots and of sample batches, JSON for the
//! rare header and event frames, and the optional zstd wrapping of any payload.

use crate::frame::{MAX_PAYLOAD, MAX_SNAPSHOT_REGIONS, MAX_SNAPSHOT_TARGETS};
use crate::model::{
    CallStack, CodeSite, Event, EventKind, RegionStat, SampleAccess, SampleFact, Snapshot,
    TargetSnapshot, TouchedExtent,
};
use crate::texts::Texts;
use crate::varint::{self, Cursor, DecodeError};

/// The smallest encoding of one region: five one-byte numbers.
const MIN_REGION_BYTES: usize = 5;

/// Appends the binary encoding of `s` (the crate documentation describes it).
pub fn encode_snapshot(out: &mut Vec<u8>, s: &Snapshot) {
    varint::put_u64(out, s.start_ns);
    varint::put_u64(out, s.end_ns.wrapping_sub(s.start_ns));
    varint::put_u64(out, s.sample_us);
    varint::put_u64(out, s.aggr_us);
    varint::put_u64(out, s.targets.len() as u64);
    for t in &s.targets {
        varint::put_u64(out, t.target as u64);
        varint::put_u64(out, t.regions.len() as u64);
        let shift = common_shift(&t.regions);
        varint::put_u64(out, shift as u64);
        let mut prev_end = 0u64;
        for r in &t.regions {
            let start = r.start >> shift;
            let end = r.end >> shift;
            // Wrapping arithmetic keeps the encoding lossless even for unsorted or inverted
            // regions; for sorted ones the gap is small and non-negative.
            varint::put_u64(out, varint::zigzag(start.wrapping_sub(prev_end) as i64));
            varint::put_u64(out, end.wrapping_sub(start));
            varint::put_u64(out, r.nr_accesses as u64);
            varint::put_u64(out, r.age as u64);
            varint::put_u64(out, r.raw_samples as u64);
            prev_end = end;
        }
    }
    // Version 4's sections, after everything a version 2 snapshot holds, each only where it
    // has anything to say, behind a flags number that says which follow (left out, with the
    // sections, when none does: such a snapshot reads as version 2 wrote it): read and write
    // samples (counted among the raw samples, so only regions with raw samples carry them),
    // and the pages estimated touched of regions accessed in the window (sampled sources).
    let regions = || s.targets.iter().flat_map(|t| &t.regions);
    let sampled = || regions().filter(|r| r.raw_samples > 0);
    let accessed = || regions().filter(|r| r.nr_accesses > 0);
    let kinds = sampled().any(|r| r.read_samples > 0 || r.write_samples > 0);
    let touched = accessed().any(|r| r.touched_bytes.is_some());
    let sections = [(kinds, SECTION_KINDS), (touched, SECTION_TOUCHED)]
        .into_iter()
        .filter(|s| s.0)
        .fold(0, |flags, s| flags | s.1);
    if sections != 0 {
        varint::put_u64(out, sections);
    }
    if kinds {
        for r in sampled() {
            varint::put_u64(out, r.read_samples as u64);
            varint::put_u64(out, r.write_samples as u64);
        }
    }
    if touched {
        for r in accessed() {
            varint::put_u64(out, r.touched().div_ceil(TOUCHED_UNIT));
        }
    }
}

/// Flags of a version 4 snapshot's sections.
const SECTION_KINDS: u64 = 1;
const SECTION_TOUCHED: u64 = 2;

/// Touched bytes are written in 4 KiB pages, the unit they are estimated in.
const TOUCHED_UNIT: u64 = 4096;

/// The number of low zero bits shared by every boundary: 12 for page-aligned regions, which
/// saves a byte and a half per region.
fn common_shift(regions: &[RegionStat]) -> u32 {
    let all = regions.iter().fold(0u64, |acc, r| acc | r.start | r.end);
    all.trailing_zeros().min(63)
}

/// Why a snapshot over the format's limits is refused (the numbers are the limits').
const TOO_MANY_REGIONS: DecodeError = "more than 262144 regions, the format's limit for a snapshot";
const TOO_MANY_TARGETS: DecodeError = "more than 65536 targets, the format's limit for a snapshot";

/// Whether a snapshot fits the format's limits; `Err` says which it breaks.
pub fn check_snapshot_size(s: &Snapshot) -> Result<(), DecodeError> {
    if s.targets.len() > MAX_SNAPSHOT_TARGETS {
        return Err(TOO_MANY_TARGETS);
    }
    if s.nr_regions() > MAX_SNAPSHOT_REGIONS {
        return Err(TOO_MANY_REGIONS);
    }
    Ok(())
}

/// Decodes a snapshot of a record of format `version`; `None` when the record's header was
/// lost, which tries the current format, then the one before it.
pub fn decode_snapshot(bytes: &[u8], version: Option<u32>) -> Result<Snapshot, DecodeError> {
    match version {
        Some(v) => decode_snapshot_of(bytes, v),
        None => decode_snapshot_of(bytes, crate::FORMAT_VERSION)
            .or_else(|_| decode_snapshot_of(bytes, crate::FORMAT_VERSION - 1)),
    }
}

fn decode_snapshot_of(bytes: &[u8], version: u32) -> Result<Snapshot, DecodeError> {
    let mut c = Cursor::new(bytes);
    let start_ns = c.u64()?;
    let end_ns = start_ns.wrapping_add(c.u64()?);
    let sample_us = c.u64()?;
    let aggr_us = c.u64()?;
    // Each target takes at least three bytes.
    let nr_targets = c.count(3, "more targets than the payload can hold")?;
    if nr_targets > MAX_SNAPSHOT_TARGETS {
        return Err(TOO_MANY_TARGETS);
    }
    let mut targets = Vec::with_capacity(nr_targets);
    let mut regions_left = MAX_SNAPSHOT_REGIONS;
    for _ in 0..nr_targets {
        let target = c.u32()?;
        let nr_regions = c.u64()? as usize;
        let shift = c.u64()?;
        if shift > 63 {
            return Err("region alignment shift above 63");
        }
        if nr_regions > c.remaining() / MIN_REGION_BYTES {
            return Err("more regions than the payload can hold");
        }
        regions_left = regions_left
            .checked_sub(nr_regions)
            .ok_or(TOO_MANY_REGIONS)?;
        let mut regions = Vec::with_capacity(nr_regions);
        let mut prev_end = 0u64;
        for _ in 0..nr_regions {
            let start = prev_end.wrapping_add(varint::unzigzag(c.u64()?) as u64);
            let end = start.wrapping_add(c.u64()?);
            regions.push(RegionStat {
                start: start << shift,
                end: end << shift,
                nr_accesses: c.u32()?,
                age: c.u32()?,
                raw_samples: c.u32()?,
                read_samples: 0,
                write_samples: 0,
                touched_bytes: None,
            });
            prev_end = end;
        }
        targets.push(TargetSnapshot { target, regions });
    }
    // Version 3 wrote the read and write samples when there were any, without flags.
    let sections = if c.remaining() == 0 {
        0
    } else if version <= 3 {
        SECTION_KINDS
    } else {
        let flags = c.u64()?;
        if flags == 0 || flags & !(SECTION_KINDS | SECTION_TOUCHED) != 0 {
            return Err("unknown snapshot sections");
        }
        flags
    };
    if sections & SECTION_KINDS != 0 {
        let regions = targets.iter_mut().flat_map(|t| &mut t.regions);
        for r in regions.filter(|r| r.raw_samples > 0) {
            r.read_samples = c.u32()?;
            r.write_samples = c.u32()?;
        }
    }
    if sections & SECTION_TOUCHED != 0 {
        let regions = targets.iter_mut().flat_map(|t| &mut t.regions);
        for r in regions.filter(|r| r.nr_accesses > 0) {
            let pages = c.u64()?;
            r.touched_bytes = Some(pages.saturating_mul(TOUCHED_UNIT).min(r.end - r.start));
        }
    }
    if c.remaining() != 0 {
        return Err("bytes left over after the snapshot");
    }
    Ok(Snapshot {
        start_ns,
        end_ns,
        sample_us,
        aggr_us,
        targets,
    })
}

/// The smallest encoding of one sample: four one-byte numbers.
const MIN_SAMPLE_BYTES: usize = 4;

/// Appends the binary encoding of a sample batch (the crate documentation describes it).
pub fn encode_samples(
    out: &mut Vec<u8>,
    time_ns: u64,
    target: u32,
    window_ns: u64,
    sites: &[CodeSite],
    samples: &[SampleFact],
) {
    varint::put_u64(out, time_ns);
    varint::put_u64(out, window_ns);
    varint::put_u64(out, target as u64);
    varint::put_u64(out, sites.len() as u64);
    let mut prev_index = 0u32;
    let mut prev_ip = 0u64;
    let mut prev: Option<&CodeSite> = None;
    for site in sites {
        varint::put_u64(
            out,
            varint::zigzag(site.index.wrapping_sub(prev_index) as i32 as i64),
        );
        varint::put_u64(out, varint::zigzag(site.ip.wrapping_sub(prev_ip) as i64));
        let before = prev.map(site_texts);
        for (i, text) in site_texts(site).into_iter().enumerate() {
            let same = text.is_some() && before.is_some_and(|b| b[i] == text);
            put_text(out, text.as_deref(), same);
        }
        prev_index = site.index;
        prev_ip = site.ip;
        prev = Some(site);
    }
    varint::put_u64(out, samples.len() as u64);
    let (mut prev_addr, mut prev_site, mut prev_tid) = (0u64, 0u32, 0u32);
    for s in samples {
        varint::put_u64(out, varint::zigzag(s.addr.wrapping_sub(prev_addr) as i64));
        varint::put_u64(
            out,
            varint::zigzag(s.site.wrapping_sub(prev_site) as i32 as i64),
        );
        varint::put_u64(
            out,
            varint::zigzag(s.tid.wrapping_sub(prev_tid) as i32 as i64),
        );
        varint::put_u64(out, ((s.cpu as u64) << 2) | s.access as u64);
        (prev_addr, prev_site, prev_tid) = (s.addr, s.site, s.tid);
    }
}

/// A site's strings, in their order in the encoding.
fn site_texts(site: &CodeSite) -> [&Option<String>; 3] {
    [&site.function, &site.object, &site.missing]
}

/// An optional string: 0 for none, 1 for the previous site's (consecutive sites mostly share
/// their file, and often their function), else its length plus two and its UTF-8 bytes.
fn put_text(out: &mut Vec<u8>, text: Option<&str>, same_as_previous: bool) {
    match text {
        None => varint::put_u64(out, 0),
        Some(_) if same_as_previous => varint::put_u64(out, 1),
        Some(t) => {
            varint::put_u64(out, t.len() as u64 + 2);
            out.extend_from_slice(t.as_bytes());
        }
    }
}

/// Undoes [`put_text`]; `previous` is the previous site's string. `budget` is the text a frame
/// may still decode to: a one-byte reference to a long previous string would otherwise let a
/// small payload decode to gigabytes.
fn text(
    c: &mut Cursor<'_>,
    previous: Option<&String>,
    budget: &mut usize,
    texts: &mut Texts,
) -> Result<Option<String>, DecodeError> {
    match c.u64()? {
        0 => Ok(None),
        1 => {
            let previous = previous.ok_or("a string refers to a previous site that has none")?;
            *budget = budget
                .checked_sub(previous.len())
                .ok_or("code sites whose names add up to more than a payload may hold")?;
            Ok(Some(previous.clone()))
        }
        len => {
            let len = usize::try_from(len - 2).map_err(|_| "string longer than the payload")?;
            std::str::from_utf8(c.bytes(len)?)
                .map(|t| Some(texts.keep(t)))
                .map_err(|_| "a string that is not UTF-8")
        }
    }
}

/// Undoes [`encode_samples`] into the event it stands for.
/// Its strings are kept by `texts`.
pub fn decode_samples(bytes: &[u8], texts: &mut Texts) -> Result<Event, DecodeError> {
    let mut c = Cursor::new(bytes);
    let time_ns = c.u64()?;
    let window_ns = c.u64()?;
    let target = c.u32()?;
    // A site takes at least five bytes.
    let nr_sites = c.count(5, "more code sites than the payload can hold")?;
    let mut sites = Vec::with_capacity(nr_sites);
    let mut text_left = MAX_PAYLOAD;
    let (mut index, mut ip) = (0u32, 0u64);
    for _ in 0..nr_sites {
        index = index.wrapping_add(varint::unzigzag(c.u64()?) as u32);
        ip = ip.wrapping_add(varint::unzigzag(c.u64()?) as u64);
        let prev: Option<&CodeSite> = sites.last();
        let function = text(
            &mut c,
            prev.and_then(|p| p.function.as_ref()),
            &mut text_left,
            texts,
        )?;
        let object = text(
            &mut c,
            prev.and_then(|p| p.object.as_ref()),
            &mut text_left,
            texts,
        )?;
        let missing = text(
            &mut c,
            prev.and_then(|p| p.missing.as_ref()),
            &mut text_left,
            texts,
        )?;
        sites.push(CodeSite {
            index,
            ip,
            function,
            object,
            missing,
        });
    }
    let nr_samples = c.count(MIN_SAMPLE_BYTES, "more samples than the payload can hold")?;
    let mut samples = Vec::with_capacity(nr_samples);
    let (mut addr, mut site, mut tid) = (0u64, 0u32, 0u32);
    for _ in 0..nr_samples {
        addr = addr.wrapping_add(varint::unzigzag(c.u64()?) as u64);
        site = site.wrapping_add(varint::unzigzag(c.u64()?) as u32);
        tid = tid.wrapping_add(varint::unzigzag(c.u64()?) as u32);
        let cpu_access = c.u64()?;
        samples.push(SampleFact {
            addr,
            site,
            tid,
            cpu: u32::try_from(cpu_access >> 2).map_err(|_| "CPU number above 2^32")?,
            access: SampleAccess::from_bits(cpu_access),
        });
    }
    if c.remaining() != 0 {
        return Err("bytes left over after the samples");
    }
    Ok(Event {
        time_ns,
        kind: EventKind::Samples {
            target,
            window_ns,
            sites,
            samples,
        },
    })
}

/// Appends the binary encoding of a stacks frame (the crate documentation describes it).
pub fn encode_stacks(
    out: &mut Vec<u8>,
    time_ns: u64,
    target: u32,
    stacks: &[CallStack],
    samples: &[u32],
) {
    varint::put_u64(out, time_ns);
    varint::put_u64(out, target as u64);
    varint::put_u64(out, stacks.len() as u64);
    let (mut prev_index, mut prev_site) = (0u32, 0u32);
    for stack in stacks {
        varint::put_u64(
            out,
            varint::zigzag(stack.index.wrapping_sub(prev_index) as i32 as i64),
        );
        varint::put_u64(out, stack.sites.len() as u64);
        for &site in &stack.sites {
            varint::put_u64(
                out,
                varint::zigzag(site.wrapping_sub(prev_site) as i32 as i64),
            );
            prev_site = site;
        }
        prev_index = stack.index;
    }
    varint::put_u64(out, samples.len() as u64);
    for &stack in samples {
        varint::put_u64(out, stack as u64);
    }
}

/// Undoes [`encode_stacks`] into the event it stands for.
pub fn decode_stacks(bytes: &[u8]) -> Result<Event, DecodeError> {
    let mut c = Cursor::new(bytes);
    let time_ns = c.u64()?;
    let target = c.u32()?;
    // A stack takes at least two bytes, a frame or a sample at least one.
    let nr_stacks = c.count(2, "more stacks than the payload can hold")?;
    let mut stacks = Vec::with_capacity(nr_stacks);
    let (mut index, mut site) = (0u32, 0u32);
    for _ in 0..nr_stacks {
        index = index.wrapping_add(varint::unzigzag(c.u64()?) as u32);
        let depth = c.count(1, "a stack deeper than the payload can hold")?;
        let mut sites = Vec::with_capacity(depth);
        for _ in 0..depth {
            site = site.wrapping_add(varint::unzigzag(c.u64()?) as u32);
            sites.push(site);
        }
        stacks.push(CallStack { index, sites });
    }
    let nr_samples = c.count(1, "more samples than the payload can hold")?;
    let samples = (0..nr_samples)
        .map(|_| c.u32())
        .collect::<Result<Vec<_>, _>>()?;
    if c.remaining() != 0 {
        return Err("bytes left over after the stacks");
    }
    Ok(Event {
        time_ns,
        kind: EventKind::Stacks {
            target,
            stacks,
            samples,
        },
    })
}

/// Appends the binary encoding of a truth frame (the crate documentation describes it).
pub fn encode_truth(
    out: &mut Vec<u8>,
    time_ns: u64,
    target: u32,
    window_ns: u64,
    extents: &[TouchedExtent],
) {
    varint::put_u64(out, time_ns);
    varint::put_u64(out, window_ns);
    varint::put_u64(out, target as u64);
    varint::put_u64(out, extents.len() as u64);
    let mut prev_end = 0u64;
    for e in extents {
        varint::put_u64(out, varint::zigzag(e.start.wrapping_sub(prev_end) as i64));
        varint::put_u64(out, e.end.wrapping_sub(e.start));
        varint::put_u64(out, e.touched_bytes);
        prev_end = e.end;
    }
}

/// Undoes [`encode_truth`] into the event it stands for.
pub fn decode_truth(bytes: &[u8]) -> Result<Event, DecodeError> {
    let mut c = Cursor::new(bytes);
    let time_ns = c.u64()?;
    let window_ns = c.u64()?;
    let target = c.u32()?;
    // An extent takes at least three bytes.
    let nr = c.count(3, "more extents than the payload can hold")?;
    let mut extents = Vec::with_capacity(nr);
    let mut prev_end = 0u64;
    for _ in 0..nr {
        let start = prev_end.wrapping_add(varint::unzigzag(c.u64()?) as u64);
        let end = start.wrapping_add(c.u64()?);
        let touched_bytes = c.u64()?;
        extents.push(TouchedExtent {
            start,
            end,
            touched_bytes,
        });
        prev_end = end;
    }
    if c.remaining() != 0 {
        return Err("bytes left over after the extents");
    }
    Ok(Event {
        time_ns,
        kind: EventKind::Truth {
            target,
            window_ns,
            extents,
        },
    })
}

/// Compresses `raw` into `out` as `varint(raw.len()) ++ zstd frame`.
pub fn compress(
    compressor: &mut zstd::bulk::Compressor<'static>,
    raw: &[u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    out.clear();
    varint::put_u64(out, raw.len() as u64);
    out.extend_from_slice(&compressor.compress(raw)?);
    Ok(())
}

/// Undoes [`compress`] into `out`, refusing to produce more than [`MAX_PAYLOAD`] bytes.
pub fn decompress(
    decompressor: &mut zstd::bulk::Decompressor<'static>,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let mut c = Cursor::new(payload);
    let raw_len = c.u64()? as usize;
    if raw_len > MAX_PAYLOAD {
        return Err(format!(
            "uncompressed size {raw_len} above the format's limit"
        ));
    }
    let data = &payload[payload.len() - c.remaining()..];
    out.clear();
    out.reserve(raw_len);
    decompressor
        .decompress_to_buffer(data, out)
        .map_err(|e| format!("zstd: {e}"))?;
    if out.len() != raw_len {
        return Err(format!(
            "decompressed to {} bytes, the frame says {raw_len}",
            out.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(start: u64, end: u64, nr_accesses: u32, age: u32, raw_samples: u32) -> RegionStat {
        RegionStat {
            start,
            end,
            nr_accesses,
            age,
            raw_samples,
            read_samples: 0,
            write_samples: 0,
            touched_bytes: None,
        }
    }

    #[test]
    fn page_aligned_regions_take_few_bytes() {
        // Adjacent 64 KiB regions: gap 0 and size 1 after the 16-bit shift, and three small
        // counters: 5 bytes each.
        let regions: Vec<_> = (0..100u64)
            .map(|i| {
                region(
                    0x7f00_0000_0000 + i * 65536,
                    0x7f00_0000_0000 + (i + 1) * 65536,
                    3,
                    7,
                    1,
                )
            })
            .collect();
        let s = Snapshot {
            start_ns: 0,
            end_ns: 100_000_000,
            sample_us: 5000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot { target: 0, regions }],
        };
        let mut out = Vec::new();
        encode_snapshot(&mut out, &s);
        // Times and intervals: 1+4+2+3+1; target: 1+1+1; the first region's gap from 0 is
        // 0x7f00_0000 (zigzagged: 32 bits), 5 bytes instead of 1.
        let first_gap_extra = 4;
        assert_eq!(out.len(), 11 + 3 + 100 * 5 + first_gap_extra);
        assert_eq!(decode(&out), Ok(s));
    }

    #[test]
    fn read_and_write_samples_round_trip_and_version_2_snapshots_read_as_none() {
        let regions = vec![
            RegionStat {
                read_samples: 5,
                write_samples: 1,
                ..region(4096, 8192, 2, 3, 6)
            },
            region(8192, 65536, 0, 9, 0),
            RegionStat {
                write_samples: u32::MAX,
                ..region(65536, 69632, 1, 0, u32::MAX)
            },
        ];
        let mut s = Snapshot {
            start_ns: 1,
            end_ns: 2,
            sample_us: 3,
            aggr_us: 4,
            targets: vec![
                TargetSnapshot {
                    target: 0,
                    regions: regions.clone(),
                },
                TargetSnapshot {
                    target: 1,
                    regions: regions[1..2].to_vec(),
                },
            ],
        };
        let mut out = Vec::new();
        encode_snapshot(&mut out, &s);
        assert_eq!(decode(&out), Ok(s.clone()));

        // A version 2 snapshot, as the format documented it: no read or write samples.
        let mut v2 = Vec::new();
        for v in [1, 1, 3, 4, 2] {
            varint::put_u64(&mut v2, v);
        }
        // The shift: the low zero bits of the target's boundaries.
        for (target, regions, shift) in [(0, &regions[..], 12), (1, &regions[1..2], 13)] {
            for v in [target, regions.len() as u64, shift] {
                varint::put_u64(&mut v2, v);
            }
            let mut prev_end = 0;
            for r in regions {
                let gap = varint::zigzag(((r.start >> shift) - prev_end) as i64);
                let size = (r.end - r.start) >> shift;
                for v in [
                    gap,
                    size,
                    r.nr_accesses.into(),
                    r.age.into(),
                    r.raw_samples.into(),
                ] {
                    varint::put_u64(&mut v2, v);
                }
                prev_end = r.end >> shift;
            }
        }
        let old = decode_snapshot(&v2, Some(3)).unwrap();
        for r in s.targets.iter_mut().flat_map(|t| &mut t.regions) {
            (r.read_samples, r.write_samples) = (0, 0);
        }
        assert_eq!(old, s, "counts absent: none");
        out.clear();
        encode_snapshot(&mut out, &s);
        assert_eq!(
            out, v2,
            "without read or write samples, version 2's encoding"
        );
    }

    #[test]
    fn touched_bytes_round_trip_in_pages_and_older_snapshots_have_none() {
        let accessed = |start, end, touched| RegionStat {
            touched_bytes: Some(touched),
            ..region(start, end, 2, 0, 3)
        };
        let s = Snapshot {
            start_ns: 1,
            end_ns: 2,
            sample_us: 3,
            aggr_us: 4,
            targets: vec![TargetSnapshot {
                target: 0,
                regions: vec![
                    accessed(0, 1 << 20, 40960),
                    region(1 << 20, 2 << 20, 0, 4, 0),
                    accessed(2 << 20, 3 << 20, 1 << 20),
                ],
            }],
        };
        let mut out = Vec::new();
        encode_snapshot(&mut out, &s);
        assert_eq!(decode(&out), Ok(s.clone()));
        // A version 3 reader's view of the same regions without the estimate: none.
        let mut v3 = s.clone();
        v3.targets[0]
            .regions
            .iter_mut()
            .for_each(|r| r.touched_bytes = None);
        let mut old = Vec::new();
        encode_snapshot(&mut old, &v3);
        assert_eq!(decode_snapshot(&old, Some(3)), Ok(v3.clone()));
        assert_eq!(
            decode_snapshot(&old, None),
            Ok(v3),
            "header lost: tried as version 3"
        );
        // Unknown sections are damage, not a guess.
        let mut unknown = old.clone();
        unknown.push(4);
        assert!(decode(&unknown).is_err());
    }

    fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
        decode_snapshot(bytes, Some(crate::FORMAT_VERSION))
    }

    #[test]
    fn unsorted_and_inverted_regions_survive() {
        let s = Snapshot {
            start_ns: 5,
            end_ns: 3,
            sample_us: 0,
            aggr_us: u64::MAX,
            targets: vec![TargetSnapshot {
                target: 9,
                regions: vec![
                    region(u64::MAX - 1, u64::MAX, u32::MAX, 0, 0),
                    region(10, 4, 1, u32::MAX, 2),
                    region(0, 0, 0, 0, u32::MAX),
                ],
            }],
        };
        let mut out = Vec::new();
        encode_snapshot(&mut out, &s);
        assert_eq!(decode(&out), Ok(s));
    }

    #[test]
    fn bad_payloads_are_refused() {
        let s = Snapshot {
            start_ns: 1,
            end_ns: 2,
            sample_us: 3,
            aggr_us: 4,
            targets: vec![TargetSnapshot {
                target: 0,
                regions: vec![region(4096, 8192, 1, 1, 1)],
            }],
        };
        let mut out = Vec::new();
        encode_snapshot(&mut out, &s);
        assert!(decode(&out[..out.len() - 1]).is_err());
        let mut longer = out.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        // A huge region count in a tiny payload must not allocate.
        let mut huge = Vec::new();
        for v in [1, 1, 1, 1, 1, 0, u64::MAX >> 1, 0] {
            varint::put_u64(&mut huge, v);
        }
        assert!(decode(&huge).is_err());
    }

    /// A snapshot payload of one target whose `nr_regions` adjacent pages compress to nothing.
    fn many_regions(nr_targets: usize, nr_regions: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [0, 1, 5000, 100_000, nr_targets as u64] {
            varint::put_u64(&mut out, v);
        }
        for t in 0..nr_targets {
            let n = if t == 0 { nr_regions } else { 0 };
            for v in [t as u64, n as u64, 12] {
                varint::put_u64(&mut out, v);
            }
            for _ in 0..n {
                out.extend_from_slice(&[2, 1, 1, 0, 0]);
            }
        }
        out
    }

    #[test]
    fn snapshots_beyond_the_format_limits_are_refused_before_they_are_held() {
        let at_limit = decode(&many_regions(1, MAX_SNAPSHOT_REGIONS)).unwrap();
        assert_eq!(at_limit.nr_regions(), MAX_SNAPSHOT_REGIONS);
        assert_eq!(check_snapshot_size(&at_limit), Ok(()));
        let e = decode(&many_regions(1, MAX_SNAPSHOT_REGIONS + 1)).unwrap_err();
        assert!(e.contains(&MAX_SNAPSHOT_REGIONS.to_string()), "{e}");
        let e = decode(&many_regions(MAX_SNAPSHOT_TARGETS + 1, 0)).unwrap_err();
        assert!(e.contains(&MAX_SNAPSHOT_TARGETS.to_string()), "{e}");
        assert!(decode(&many_regions(MAX_SNAPSHOT_TARGETS, 0)).is_ok());
    }

    #[test]
    fn site_names_repeated_by_reference_cannot_inflate_a_frame() {
        // One site with a 1 MiB name, then sites that repeat it by a one-byte reference: the
        // name is cut where it is read, and each repetition costs no more than the cut name.
        let name = "f".repeat(1 << 20);
        let mut out = Vec::new();
        for v in [0, 0, 0, 18] {
            varint::put_u64(&mut out, v);
        }
        varint::put_u64(&mut out, 0);
        varint::put_u64(&mut out, 0);
        put_text(&mut out, Some(&name), false);
        put_text(&mut out, None, false);
        put_text(&mut out, None, false);
        for _ in 0..17 {
            out.extend_from_slice(&[2, 2, 1, 0, 0]);
        }
        varint::put_u64(&mut out, 0);
        let mut texts = Texts::default();
        let Event {
            kind: EventKind::Samples { sites, .. },
            ..
        } = decode_samples(&out, &mut texts).unwrap()
        else {
            panic!("a samples event")
        };
        assert_eq!(sites.len(), 18);
        for site in &sites {
            let function = site.function.as_deref().unwrap();
            assert!(
                function.len() <= crate::texts::MAX_TEXT,
                "{}",
                function.len()
            );
            assert!(name.starts_with(function.trim_end_matches('…')));
        }
        assert_eq!(texts.take_cut().map(|c| c.0), Some(1));
    }

    #[test]
    fn stacks_round_trip_and_bad_ones_are_refused() {
        let stacks = vec![
            CallStack {
                index: 0,
                sites: vec![],
            },
            CallStack {
                index: 1,
                sites: vec![7, 3, 900],
            },
        ];
        let samples = vec![1, 0, 1, 1];
        let mut out = Vec::new();
        encode_stacks(&mut out, 5_000, 2, &stacks, &samples);
        // time (2), target, nr_stacks; index and depth per stack, a byte per frame but the
        // jump to site 900 (2); count, one byte per sample.
        assert_eq!(out.len(), 2 + 1 + 1 + 2 + (2 + 4) + 1 + 4);
        let expected = Event {
            time_ns: 5_000,
            kind: EventKind::Stacks {
                target: 2,
                stacks,
                samples,
            },
        };
        assert_eq!(decode_stacks(&out), Ok(expected));
        assert!(decode_stacks(&out[..out.len() - 1]).is_err());
        let mut longer = out.clone();
        longer.push(0);
        assert!(decode_stacks(&longer).is_err());
        let mut huge = Vec::new();
        for v in [1, 0, u64::MAX >> 1] {
            varint::put_u64(&mut huge, v);
        }
        assert!(decode_stacks(&huge).is_err(), "must not allocate");
    }

    #[test]
    fn truth_round_trips_and_bad_ones_are_refused() {
        let event = Event {
            time_ns: 900,
            kind: EventKind::Truth {
                target: 0,
                window_ns: 100,
                extents: vec![
                    TouchedExtent {
                        start: 0x7f00_0000_0000,
                        end: 0x7f00_0400_0000,
                        touched_bytes: 0x400_0000,
                    },
                    TouchedExtent {
                        start: 0x7f00_1000_0000,
                        end: 0x7f00_1000_2000,
                        touched_bytes: 777,
                    },
                ],
            },
        };
        let EventKind::Truth {
            target,
            window_ns,
            extents,
        } = &event.kind
        else {
            unreachable!()
        };
        let mut out = Vec::new();
        encode_truth(&mut out, event.time_ns, *target, *window_ns, extents);
        assert!(out.len() < 30, "{} bytes", out.len());
        assert_eq!(decode_truth(&out).unwrap(), event);
        assert!(decode_truth(&out[..out.len() - 1]).is_err());
        let mut long = out.clone();
        long.push(0);
        assert!(decode_truth(&long).is_err());
        // A count the payload cannot hold is refused before allocating for it.
        let mut huge = Vec::new();
        for v in [1, 1, 0, u32::MAX as u64] {
            varint::put_u64(&mut huge, v);
        }
        assert!(decode_truth(&huge).is_err());
    }

    #[test]
    fn compression_round_trips_and_checks_the_size() {
        let mut comp = zstd::bulk::Compressor::new(3).unwrap();
        let mut dec = zstd::bulk::Decompressor::new().unwrap();
        let raw: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
        let mut packed = Vec::new();
        compress(&mut comp, &raw, &mut packed).unwrap();
        assert!(packed.len() < raw.len() / 10);
        let mut out = Vec::new();
        decompress(&mut dec, &packed, &mut out).unwrap();
        assert_eq!(out, raw);
        // A lying size prefix is caught.
        let mut lying = Vec::new();
        varint::put_u64(&mut lying, raw.len() as u64 + 1);
        lying.extend_from_slice(&packed[2..]);
        assert!(decompress(&mut dec, &lying, &mut out).is_err());
    }
}
