//! Regions and targets: the data model that every other layer reads and writes.
//!
//! A target's regions live in one contiguous, address-sorted vector (docs/algorithms.md#regions: no
//! linked lists), rebuilt by the linear merge and split passes at each aggregation.

/// A monitoring region `[start, end)` and its access statistics (docs/algorithms.md#regions).
///
/// 56 bytes: at page granularity a target has millions of regions, and every byte of a region
/// is a byte of the monitor's memory per monitored page (docs/benchmarks.md, "Page
/// granularity"). The address an accessed-bit check reads lives beside the regions, kept only
/// by the sources that check ([`crate::Context::randomize_sampling_addrs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    /// Sampling intervals of the current aggregation window in which an access was seen.
    pub nr_accesses: u32,
    /// `nr_accesses` of the previous, completed window.
    pub last_nr_accesses: u32,
    /// Aggregation intervals for which the access frequency stayed about the same.
    pub age: u32,
    /// Raw sample addresses that fell in the region during the current window (sampled access
    /// sources only; always 0 for accessed-bit style sources such as `sim`).
    pub raw_samples: u32,
    /// Of `raw_samples`, those whose instruction read memory (a read-modify-write counts here
    /// and in `write_samples`; a sample of unknown kind in neither).
    pub read_samples: u32,
    /// Of `raw_samples`, those whose instruction wrote memory.
    pub write_samples: u32,
    /// Where accesses were seen in the region during the window, from the lowest address to
    /// just past the highest: the sample addresses of sampled sources, or, for accessed-bit
    /// style sources in the guided adjustment, the sampling addresses whose check found the
    /// page accessed. The split step cuts off what lies outside it
    /// ([`crate::adjust::split_at_sampled_extents`]); the window's reset clears it.
    pub sampled: SampledSpan,
}

// A region grows only knowingly: see the cost above.
const _: () = assert!(std::mem::size_of::<Region>() == 56);

impl Region {
    /// A fresh region: no accesses, age 0.
    pub fn new(start: u64, end: u64) -> Self {
        Region {
            start,
            end,
            ..Default::default()
        }
    }

    pub fn size(&self) -> u64 {
        self.end - self.start
    }

    /// True when `[start, end)` and `r` share at least one byte (touching is not intersecting).
    pub fn intersects(&self, r: &AddrRange) -> bool {
        !(self.end <= r.start || r.end <= self.start)
    }

    /// The sampled span within the region's current bounds (`set_regions` and DAMOS may have
    /// trimmed the region since the samples were counted).
    pub fn sampled_within(&self) -> Option<AddrRange> {
        let s = self.sampled.get()?;
        let clipped = AddrRange::new(s.start.max(self.start), s.end.min(self.end));
        (clipped.start < clipped.end).then_some(clipped)
    }

    /// Counts one sample that fell in the region, and widens the sampled span to include it.
    pub fn note_sample(&mut self, sample: SampledAccess) {
        self.raw_samples = self.raw_samples.saturating_add(1);
        self.read_samples = self.read_samples.saturating_add(u32::from(sample.read));
        self.write_samples = self.write_samples.saturating_add(u32::from(sample.write));
        self.sampled.widen(sample.addr);
    }

    /// An accessed-bit check found the page at `sampling_addr` accessed: the interval counts,
    /// and the address widens where accesses were seen.
    pub fn note_accessed_check(&mut self, sampling_addr: u64) {
        self.nr_accesses = self.nr_accesses.saturating_add(1);
        self.sampled.widen(sampling_addr);
    }

    /// How many accesses were seen where [`Region::sampled`] spans: the window's samples, or,
    /// for accessed-bit sources (which keep no samples), the checks that found the page
    /// accessed.
    pub fn seen(&self) -> u32 {
        if self.raw_samples > 0 {
            self.raw_samples
        } else {
            self.nr_accesses
        }
    }

    /// The read and write samples that go with `raw` of the region's raw samples when a part of
    /// it takes them: their share in proportion, since which sample was which kind is not kept
    /// per address. Every sample of a kind goes with all the raw samples, none with none.
    pub fn kind_shares(&self, raw: u32) -> (u32, u32) {
        let share = |n: u32| {
            (u64::from(n) * u64::from(raw))
                .checked_div(u64::from(self.raw_samples))
                .map_or(0, |s| s.min(u64::from(n)) as u32)
        };
        (share(self.read_samples), share(self.write_samples))
    }

    /// Moves to `right` (a piece just split off the region, holding a copy of its counts) its
    /// `right_raw` of the raw samples and its share of the read and write samples. Where the
    /// region had samples, each piece's `nr_accesses` rests on its own: a piece was seen
    /// accessed in at most as many sampling intervals as it holds samples, and in none when it
    /// holds none (kept at the region's count, a piece without a sample would be reported
    /// accessed on no evidence).
    pub fn give_samples(&mut self, right: &mut Region, right_raw: u32) {
        let sampled = self.raw_samples > 0;
        let right_raw = right_raw.min(self.raw_samples);
        let (read, write) = self.kind_shares(right_raw);
        right.raw_samples = right_raw;
        right.read_samples = read;
        right.write_samples = write;
        self.raw_samples -= right_raw;
        self.read_samples -= read;
        self.write_samples -= write;
        if sampled {
            self.rest_count_on_samples();
            right.rest_count_on_samples();
        }
    }

    /// Caps `nr_accesses` at the raw samples, for a region of a sampled source whose samples
    /// were just shared with others (see [`Region::give_samples`]).
    pub fn rest_count_on_samples(&mut self) {
        self.nr_accesses = self.nr_accesses.min(self.raw_samples);
    }
}

/// Where accesses were seen in a region ([`Region::sampled`]): an `Option<AddrRange>` in 16
/// bytes, not 24. An `Option` of two `u64`s has no spare bits for its discriminant, which took
/// a region from 56 bytes to 64 with padding; here none is a start past the end, which no span
/// built from accesses has (each is at least an address and the next).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SampledSpan {
    start: u64,
    end: u64,
}

impl SampledSpan {
    pub const NONE: SampledSpan = SampledSpan {
        start: u64::MAX,
        end: 0,
    };

    pub fn get(self) -> Option<AddrRange> {
        (self.start <= self.end).then_some(AddrRange::new(self.start, self.end))
    }

    pub fn is_some(self) -> bool {
        self.start <= self.end
    }

    pub fn is_none(self) -> bool {
        !self.is_some()
    }

    /// Widens the span to include `addr` (a span of none becomes `[addr, addr + 1)`).
    pub fn widen(&mut self, addr: u64) {
        let point = AddrRange::new(addr, addr.saturating_add(1));
        *self = Some(self.get().map_or(point, |s| s.hull(point))).into();
    }

    /// The smallest span that covers both.
    pub fn hull(self, other: SampledSpan) -> SampledSpan {
        match (self.get(), other.get()) {
            (Some(a), Some(b)) => Some(a.hull(b)).into(),
            (a, b) => a.or(b).into(),
        }
    }
}

impl Default for SampledSpan {
    fn default() -> Self {
        SampledSpan::NONE
    }
}

impl From<Option<AddrRange>> for SampledSpan {
    fn from(span: Option<AddrRange>) -> Self {
        span.map_or(SampledSpan::NONE, |s| {
            debug_assert!(s.start <= s.end, "a span ending before it starts: {s:?}");
            SampledSpan {
                start: s.start,
                end: s.end,
            }
        })
    }
}

impl std::fmt::Debug for SampledSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// One sampled access of a sampled access source: its data address, and whether the
/// instruction read, wrote or both (neither when the source cannot tell, as a PMU sample
/// without the instruction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampledAccess {
    pub addr: u64,
    pub read: bool,
    pub write: bool,
}

impl SampledAccess {
    /// A sample at `addr` of unknown kind.
    pub const fn at(addr: u64) -> Self {
        SampledAccess {
            addr,
            read: false,
            write: false,
        }
    }

    pub const fn read(addr: u64) -> Self {
        SampledAccess {
            addr,
            read: true,
            write: false,
        }
    }

    pub const fn write(addr: u64) -> Self {
        SampledAccess {
            addr,
            read: false,
            write: true,
        }
    }
}

/// A half-open address range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrRange {
    pub start: u64,
    pub end: u64,
}

impl AddrRange {
    pub const fn new(start: u64, end: u64) -> Self {
        AddrRange { start, end }
    }

    pub fn size(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The bytes `self` shares with `other`.
    pub fn overlap(self, other: AddrRange) -> u64 {
        self.end
            .min(other.end)
            .saturating_sub(self.start.max(other.start))
    }

    /// The smallest range that covers both `self` and `other`.
    pub fn hull(self, other: AddrRange) -> AddrRange {
        AddrRange::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A monitoring target: one address space (a process, a simulated workload) and its regions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The process id for process targets; `None` for simulated address spaces.
    pub pid: Option<u32>,
    /// Sorted by address, non-overlapping; holes are allowed.
    pub regions: Vec<Region>,
}

impl Target {
    pub fn new(pid: Option<u32>) -> Self {
        Target {
            pid,
            regions: Vec::new(),
        }
    }

    pub fn with_regions(pid: Option<u32>, ranges: &[AddrRange]) -> Self {
        Target {
            pid,
            regions: ranges.iter().map(|r| Region::new(r.start, r.end)).collect(),
        }
    }

    pub fn nr_regions(&self) -> usize {
        self.regions.len()
    }

    /// Total bytes covered by the regions.
    pub fn total_size(&self) -> u64 {
        self.regions.iter().map(Region::size).sum()
    }

    /// Index of the region containing `addr`, by binary search.
    pub fn region_index_of(&self, addr: u64) -> Option<usize> {
        let i = self.regions.partition_point(|r| r.end <= addr);
        (i < self.regions.len() && self.regions[i].start <= addr).then_some(i)
    }
}

/// Rounds `x` down to a multiple of `a` (`a` > 0).
pub fn align_down(x: u64, a: u64) -> u64 {
    x - x % a
}

/// Rounds `x` up to a multiple of `a` (`a` > 0).
pub fn align_up(x: u64, a: u64) -> u64 {
    align_down(x.saturating_add(a - 1), a)
}

/// `x * n / d` without overflowing in the intermediate product (the kernel's `mult_frac`).
pub fn mult_frac(x: u64, n: u64, d: u64) -> u64 {
    ((x as u128 * n as u128) / d as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_lookup_by_binary_search() {
        let t = Target::with_regions(
            None,
            &[
                AddrRange::new(10, 20),
                AddrRange::new(30, 40),
                AddrRange::new(40, 45),
            ],
        );
        assert_eq!(t.region_index_of(9), None);
        assert_eq!(t.region_index_of(10), Some(0));
        assert_eq!(t.region_index_of(19), Some(0));
        assert_eq!(t.region_index_of(20), None);
        assert_eq!(t.region_index_of(40), Some(2));
        assert_eq!(t.region_index_of(45), None);
    }

    #[test]
    fn a_piece_takes_its_share_of_each_kind_of_sample() {
        let mut r = Region {
            raw_samples: 10,
            read_samples: 7,
            write_samples: 4,
            ..Region::new(0, 100)
        };
        assert_eq!(
            r.kind_shares(10),
            (7, 4),
            "all the samples, all of each kind"
        );
        assert_eq!(r.kind_shares(0), (0, 0));
        let mut right = r;
        r.give_samples(&mut right, 5);
        assert_eq!(
            (right.raw_samples, right.read_samples, right.write_samples),
            (5, 3, 2)
        );
        assert_eq!((r.raw_samples, r.read_samples, r.write_samples), (5, 4, 2));
        let mut none = Region::new(0, 100);
        let mut right = none;
        none.give_samples(&mut right, 3);
        assert_eq!(
            (right.raw_samples, right.read_samples),
            (0, 0),
            "nothing to give"
        );
    }

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(4097, 4096), 4096);
        assert_eq!(align_up(4097, 4096), 8192);
        assert_eq!(align_up(4096, 4096), 4096);
        assert_eq!(mult_frac(u64::MAX, 3, 4), (u64::MAX / 4) * 3 + 2);
    }
}
