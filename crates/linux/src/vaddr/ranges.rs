//! The address ranges a process's regions cover: [`udamon_core::layout::initial_ranges`] (the
//! three-regions construction) over `/proc/PID/maps`.

use crate::maps::Maps;
use udamon_core::attrs::SAMPLED_MAX_REGIONS;
use udamon_core::layout::initial_ranges;
use udamon_core::{AddrRange, Attrs};

/// The ranges to monitor for `maps`, aligned to `min_sz`; empty for a process without mappings
/// (a zombie).
pub fn monitoring_ranges(maps: &Maps, min_sz: u64) -> Vec<AddrRange> {
    initial_ranges(&maps.vma_ranges(), min_sz)
}

/// Where the region bound asks for finer regions than the sampled sources' default (`attrs`'
/// minimum above [`SAMPLED_MAX_REGIONS`]) but `ranges` are mostly holes between `maps`'
/// mappings (a JavaScript engine's reservations lie scattered over terabytes): a note that
/// the regions are that much coarser than the bound suggests. DAMON's three regions keep those
/// holes, and at the bound each region takes its share of them.
pub fn coarse_regions_note(ranges: &[AddrRange], maps: &Maps, attrs: &Attrs) -> Option<String> {
    let span: u64 = ranges.iter().map(|r| r.size()).sum();
    let mapped: u64 = maps.vma_ranges().iter().map(|r| r.size()).sum();
    let regions = u64::from(attrs.max_nr_regions.max(1));
    let mean = span / regions;
    let mostly_holes = span / MOSTLY_HOLES > mapped;
    (attrs.min_nr_regions > SAMPLED_MAX_REGIONS && mostly_holes && mean > MAX_FINE_REGION).then(
        || {
            format!(
                "{regions} regions over {} GiB of address space, {} MiB of it mapped (the holes \
                 between mappings stay in it, as DAMON's three regions keep them): regions of {} \
                 MiB on average, not the granularity the bound asks for",
                span >> 30,
                mapped >> 20,
                mean >> 20
            )
        },
    )
}

/// How many times its mapped bytes a span is that holds mostly holes.
const MOSTLY_HOLES: u64 = 16;

/// The largest mean region size a bound finer than the default is taken to want (1 MiB).
const MAX_FINE_REGION: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn maps(text: &str) -> Maps {
        Maps::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn three_regions_cut_the_two_largest_gaps() {
        let m = maps(
            "1000-3000 r-xp 0 00:00 0 /bin/x\n\
             3000-5000 rw-p 0 00:00 0 [heap]\n\
             100000-140000 rw-p 0 00:00 0\n\
             7f0000000-7f0010000 rw-p 0 00:00 0 [stack]\n\
             ffffffffff600000-ffffffffff601000 --xp 0 00:00 0 [vsyscall]\n",
        );
        assert_eq!(
            monitoring_ranges(&m, 4096),
            [
                AddrRange::new(0x1000, 0x5000),
                AddrRange::new(0x100000, 0x140000),
                AddrRange::new(0x7f0000000, 0x7f0010000)
            ]
        );
    }

    #[test]
    fn fewer_than_two_gaps_gives_one_range_per_group() {
        let m = maps(
            "1000-3000 r-xp 0 00:00 0 /bin/x\n\
             3000-5000 rw-p 0 00:00 0 [heap]\n\
             100000-140000 rw-p 0 00:00 0\n",
        );
        assert_eq!(
            monitoring_ranges(&m, 4096),
            [
                AddrRange::new(0x1000, 0x5000),
                AddrRange::new(0x100000, 0x140000)
            ]
        );
        assert!(monitoring_ranges(&Maps::default(), 4096).is_empty());
    }

    #[test]
    fn a_fine_bound_over_a_span_mostly_of_holes_is_noted_with_its_regions_size() {
        // node: a heap, reservations 16 TiB apart, the stack.
        let node = maps(
            "1000000-21000000 rw-p 0 00:00 0 [heap]\n\
             100000000000-100020000000 rw-p 0 00:00 0\n\
             200000000000-200020000000 rw-p 0 00:00 0\n\
             300000000000-300020000000 rw-p 0 00:00 0\n\
             400000000000-400010000000 rw-p 0 00:00 0\n\
             7ffff0000000-7ffff0021000 rw-p 0 00:00 0 [stack]\n",
        );
        let bound = |n: u32| Attrs {
            min_nr_regions: n,
            max_nr_regions: n,
            ..Attrs::default()
        };
        let ranges = monitoring_ranges(&node, 4096);
        let note = coarse_regions_note(&ranges, &node, &bound(262_144)).expect("noted");
        // The three regions cut the two largest holes (64 TiB above the reservations, 16 TiB
        // between two): 48 TiB are left, 2,304 MiB of them mapped.
        assert!(
            note.starts_with("262144 regions over 49152 GiB of address space, 2304 MiB of it")
                && note.contains("regions of 192 MiB on average"),
            "{note}"
        );
        assert_eq!(
            coarse_regions_note(&ranges, &node, &bound(60)),
            None,
            "the default bound's regions adapt"
        );
        // memcached: its memory in one run of mappings, a region a page.
        let memcached = maps(
            "1000-3000 r-xp 0 00:00 0 /bin/x\n\
             7f0000000000-7f0080000000 rw-p 0 00:00 0\n\
             7ffff0000000-7ffff0021000 rw-p 0 00:00 0 [stack]\n",
        );
        let ranges = monitoring_ranges(&memcached, 4096);
        assert_eq!(
            coarse_regions_note(&ranges, &memcached, &bound(524_288)),
            None
        );
    }
}
