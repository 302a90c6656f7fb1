//! DAMOS filters (docs/algorithms.md#damos-filters): include or exclude memory inside matching
//! regions by what it is.
//!
//! `addr`, `target`, `reads` and `writes` filters are about regions and are evaluated here, in
//! the core; the others only the operations set can evaluate, with [`Filters::ops_allow`]: page
//! by page those about pages (anonymous, active, young, ...), region by region those about the
//! window's samples that only it keeps (`tid`, `cpu`).

use crate::adjust::split_region_at;
use crate::region::{AddrRange, Region, align_down};

/// What a filter tests, with its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterKind {
    /// Anonymous memory.
    Anon,
    /// Memory on the active LRU list.
    Active,
    /// Memory charged to the cgroup at this path.
    Memcg { path: String },
    /// Memory accessed since the last check (checking also clears the accessed state).
    Young,
    /// Memory in huge pages of a size in `[min, max]`, bytes.
    HugepageSize { min: u64, max: u64 },
    /// Memory not mapped.
    Unmapped,
    /// Addresses in the range (core).
    Addr(AddrRange),
    /// The monitoring target with this list index (core).
    Target { idx: usize },
    /// Regions that got a sample of a reading instruction in the window so far (core; sampled
    /// sources only).
    Reads,
    /// Regions that got a sample of a writing instruction in the window so far (core; sampled
    /// sources only).
    Writes,
    /// Regions that got a sample from this thread in the window so far (sampled sources only).
    Tid(u32),
    /// Regions that got a sample taken on this CPU in the window so far (sampled sources only).
    Cpu(u32),
}

impl FilterKind {
    /// The sysfs/damo type keyword.
    pub fn name(&self) -> &'static str {
        match self {
            FilterKind::Anon => "anon",
            FilterKind::Active => "active",
            FilterKind::Memcg { .. } => "memcg",
            FilterKind::Young => "young",
            FilterKind::HugepageSize { .. } => "hugepage_size",
            FilterKind::Unmapped => "unmapped",
            FilterKind::Addr(_) => "addr",
            FilterKind::Target { .. } => "target",
            FilterKind::Reads => "reads",
            FilterKind::Writes => "writes",
            FilterKind::Tid(_) => "tid",
            FilterKind::Cpu(_) => "cpu",
        }
    }

    /// Handled by the core (`addr`, `target`, `reads`, `writes`) rather than the operations set.
    pub fn is_core(&self) -> bool {
        matches!(
            self,
            FilterKind::Addr(_)
                | FilterKind::Target { .. }
                | FilterKind::Reads
                | FilterKind::Writes
        )
    }
}

/// One filter: it *hits* memory when "is of the kind" equals `matching`, and then `allow`
/// decides whether that memory is included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub kind: FilterKind,
    pub matching: bool,
    pub allow: bool,
}

impl Filter {
    pub fn new(kind: FilterKind, matching: bool, allow: bool) -> Self {
        Filter {
            kind,
            matching,
            allow,
        }
    }

    /// `damos_filter_match` for a core filter on region `idx` of a target (list index
    /// `target_idx`). An `addr` filter splits a region that straddles one of its bounds, both
    /// aligned *down* to `min_region_sz`: the part before the bound is judged now, the rest is a
    /// new region right after it, judged when the walk reaches it (NEW; OLD skipped it).
    /// Operations-layer kinds never hit here.
    pub fn matches_region(
        &self,
        regions: &mut Vec<Region>,
        idx: usize,
        target_idx: usize,
        min_region_sz: u64,
    ) -> bool {
        let is_of_kind = match &self.kind {
            FilterKind::Target { idx: t } => *t == target_idx,
            FilterKind::Reads => regions[idx].read_samples > 0,
            FilterKind::Writes => regions[idx].write_samples > 0,
            FilterKind::Addr(range) => {
                let start = align_down(range.start, min_region_sz);
                let end = align_down(range.end, min_region_sz);
                let r = &mut regions[idx];
                if start <= r.start && r.end <= end {
                    true
                } else if r.end <= start || end <= r.start {
                    false
                } else if r.start < start {
                    let right = split_region_at(r, start - r.start);
                    regions.insert(idx + 1, right);
                    false
                } else {
                    let right = split_region_at(r, end - r.start);
                    regions.insert(idx + 1, right);
                    true
                }
            }
            _ => return false,
        };
        is_of_kind == self.matching
    }
}

/// A scheme's filters, kept in two groups (core and operations layer), each in insertion order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filters {
    core: Vec<Filter>,
    ops: Vec<Filter>,
}

impl Filters {
    /// `damos_add_filter`: appended to its group.
    pub fn push(&mut self, filter: Filter) {
        if filter.kind.is_core() {
            self.core.push(filter);
        } else {
            self.ops.push(filter);
        }
    }

    pub fn core(&self) -> &[Filter] {
        &self.core
    }

    pub fn ops(&self) -> &[Filter] {
        &self.ops
    }

    pub fn is_empty(&self) -> bool {
        self.core.is_empty() && self.ops.is_empty()
    }

    /// What happens to a region no core filter hit: rejected if the last core filter allows
    /// (memory it did not allow is the rest) — unless operations-layer filters exist, which then
    /// decide.
    pub fn core_default_reject(&self) -> bool {
        self.ops.is_empty() && self.core.last().is_some_and(|f| f.allow)
    }

    /// What happens to memory no operations-layer filter hit: rejected if the last one allows.
    pub fn ops_default_reject(&self) -> bool {
        self.ops.last().is_some_and(|f| f.allow)
    }

    /// The operations layer's verdict on one piece of memory: the first filter that hits decides,
    /// otherwise the default. `is_of_kind` answers whether the memory is of a filter's kind.
    /// Skip this when the core filters already allowed the region
    /// ([`super::SchemeState::core_filters_allowed`]).
    pub fn ops_allow(&self, mut is_of_kind: impl FnMut(&FilterKind) -> bool) -> bool {
        for f in &self.ops {
            if is_of_kind(&f.kind) == f.matching {
                return f.allow;
            }
        }
        !self.ops_default_reject()
    }

    /// `damos_core_filter_out`: whether the core filters reject region `idx` (which an `addr`
    /// filter may split first). Returns `(rejected, allowed_by_a_filter)`.
    pub(crate) fn core_filter_out(
        &self,
        regions: &mut Vec<Region>,
        idx: usize,
        target_idx: usize,
        min_region_sz: u64,
    ) -> (bool, bool) {
        for f in &self.core {
            if f.matches_region(regions, idx, target_idx, min_region_sz) {
                return (!f.allow, f.allow);
            }
        }
        (self.core_default_reject(), false)
    }
}

impl FromIterator<Filter> for Filters {
    fn from_iter<I: IntoIterator<Item = Filter>>(iter: I) -> Self {
        let mut filters = Filters::default();
        for f in iter {
            filters.push(f);
        }
        filters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(start: u64, end: u64, matching: bool, allow: bool) -> Filter {
        Filter::new(
            FilterKind::Addr(AddrRange::new(start, end)),
            matching,
            allow,
        )
    }

    #[test]
    fn groups_keep_insertion_order() {
        let filters: Filters = [
            Filter::new(FilterKind::Anon, true, true),
            addr(0, 10, true, false),
            Filter::new(FilterKind::Young, true, false),
            Filter::new(FilterKind::Target { idx: 1 }, false, true),
        ]
        .into_iter()
        .collect();
        let names = |fs: &[Filter]| fs.iter().map(|f| f.kind.name()).collect::<Vec<_>>();
        assert_eq!(names(filters.core()), ["addr", "target"]);
        assert_eq!(names(filters.ops()), ["anon", "young"]);
    }

    #[test]
    fn first_hit_decides_then_the_default() {
        // Reject young memory, allow anonymous memory: file memory that is not young is what
        // the last filter did not allow, so it is rejected.
        let filters: Filters = [
            Filter::new(FilterKind::Young, true, false),
            Filter::new(FilterKind::Anon, true, true),
        ]
        .into_iter()
        .collect();
        let verdict = |young: bool, anon: bool| {
            filters.ops_allow(|k| match k {
                FilterKind::Young => young,
                FilterKind::Anon => anon,
                _ => unreachable!("only young and anon filters"),
            })
        };
        assert!(!verdict(true, true), "young anon: the first filter rejects");
        assert!(verdict(false, true));
        assert!(
            !verdict(false, false),
            "default: opposite of the last filter"
        );
        // A non-matching filter hits memory *not* of its kind.
        let filters: Filters = [Filter::new(FilterKind::Anon, false, false)]
            .into_iter()
            .collect();
        assert!(!filters.ops_allow(|_| false), "file memory rejected");
        assert!(filters.ops_allow(|_| true), "anon allowed by default");
    }

    #[test]
    fn reads_and_writes_filters_judge_the_regions_samples_in_the_core() {
        let filters: Filters = [
            Filter::new(FilterKind::Writes, true, false),
            Filter::new(FilterKind::Tid(7), true, true),
            Filter::new(FilterKind::Reads, true, true),
            Filter::new(FilterKind::Cpu(1), true, true),
        ]
        .into_iter()
        .collect();
        let names = |fs: &[Filter]| fs.iter().map(|f| f.kind.name()).collect::<Vec<_>>();
        assert_eq!(names(filters.core()), ["writes", "reads"]);
        assert_eq!(
            names(filters.ops()),
            ["tid", "cpu"],
            "only vaddr keeps threads and CPUs"
        );
        let region = |read_samples, write_samples| Region {
            raw_samples: read_samples + write_samples,
            read_samples,
            write_samples,
            ..Region::new(0, 4096)
        };
        let mut regions = vec![region(3, 0), region(3, 1), region(0, 0)];
        assert_eq!(
            filters.core_filter_out(&mut regions, 0, 0, 4096),
            (false, true),
            "read only: allowed by the reads filter"
        );
        assert_eq!(
            filters.core_filter_out(&mut regions, 1, 0, 4096),
            (true, false),
            "written: rejected by the first filter"
        );
        assert_eq!(
            filters.core_filter_out(&mut regions, 2, 0, 4096),
            (false, false),
            "no samples: the operations-layer filters decide"
        );
        let never_written = Filter::new(FilterKind::Writes, false, true);
        assert!(never_written.matches_region(&mut regions, 0, 0, 4096));
        assert!(!never_written.matches_region(&mut regions, 1, 0, 4096));
    }

    #[test]
    fn core_filters_split_and_report_allowance() {
        let filters: Filters = [addr(4096, 8192, true, true)].into_iter().collect();
        let mut regions = vec![Region::new(0, 12288)];
        // Starts before the range: the part before it is not of the kind; with an allow
        // filter last, the default rejects it.
        assert_eq!(
            filters.core_filter_out(&mut regions, 0, 0, 4096),
            (true, false)
        );
        assert_eq!(regions.len(), 2);
        assert_eq!(
            filters.core_filter_out(&mut regions, 1, 0, 4096),
            (false, true)
        );
        assert_eq!(
            regions.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(),
            [(0, 4096), (4096, 8192), (8192, 12288)]
        );
        // The range bounds are aligned down: [100, 5000) acts as [0, 4096).
        let f = addr(100, 5000, true, false);
        let mut regions = vec![Region::new(0, 4096)];
        assert!(f.matches_region(&mut regions, 0, 0, 4096));
        // Target filters compare the list index.
        let f = Filter::new(FilterKind::Target { idx: 2 }, true, false);
        assert!(f.matches_region(&mut regions, 0, 2, 4096));
        assert!(!f.matches_region(&mut regions, 0, 1, 4096));
        assert!(!Filter::new(FilterKind::Anon, true, true).matches_region(&mut regions, 0, 0, 1));
    }
}
