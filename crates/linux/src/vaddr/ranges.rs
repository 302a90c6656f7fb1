//! The address ranges a process's regions cover: [`udamon_core::layout::initial_ranges`] (the
//! three-regions construction) over `/proc/PID/maps`.

use crate::maps::Maps;
use udamon_core::AddrRange;
use udamon_core::layout::initial_ranges;

/// The ranges to monitor for `maps`, aligned to `min_sz`; empty for a process without mappings
/// (a zombie).
pub fn monitoring_ranges(maps: &Maps, min_sz: u64) -> Vec<AddrRange> {
    initial_ranges(&maps.vma_ranges(), min_sz)
}

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
}
