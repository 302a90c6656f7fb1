//! DAMOS actions on the simulated memory ([`crate::memory`]): what each action changes, what
//! counts as applied, and how the operations-layer filters see simulated memory.
//!
//! Applied bytes are only the bytes whose state really changed, so that quotas are charged for
//! work done, not for asking:
//!
//! - `pageout`: resident bytes become paged out; applied = those bytes. Memory never touched,
//!   already paged out, or outside the workload's regions counts 0. Paging out part of a huge
//!   page splits the whole block.
//! - `willneed`: paged-out bytes become resident again (not refaults); applied = those bytes.
//!   Memory never touched stays untouched (anonymous memory has nothing to read in).
//! - `collapse` and `hugepage`: every whole 2 MiB block of a workload region among the blocks
//!   the region claims ([`udamon_core::damos::huge_page_blocks`], the rule of live processes
//!   too: under a quota those wholly inside it, else those whose middle it holds) becomes
//!   huge-page backed, and so fully resident (pages never touched are filled,
//!   paged-out ones read back, as `MADV_COLLAPSE` does; the simulated kernel's khugepaged acts on
//!   `MADV_HUGEPAGE` at once); applied = 2 MiB per block newly backed. A block is left alone if
//!   the filters reject any of its memory, since a huge page is all or nothing.
//! - `cold`: nothing changes and 0 is applied. `MADV_COLD` only moves pages to the inactive LRU
//!   list, which the model does not have; it matters only under memory pressure.
//! - `stat`: nothing changes and 0 is applied.
//! - `nohugepage`, `lru_prio`, `lru_deprio`, `migrate_hot`, `migrate_cold`: nothing to act on
//!   in this model (no THP policy, no LRU lists, no NUMA nodes); 0 applied and 0 bytes passed
//!   the filters.
//!
//! `sz_ops_filter_passed` is, for every other action, the bytes of the region that the
//! scheme's operations-layer filters allow, measured before the action: the region's size when
//! there are no such filters or a core filter already allowed the region.
//!
//! **Filters.** All the workload's memory is anonymous: masim `malloc`s its regions and copies
//! an init file's content into them. What the filters see, per kind of memory:
//!
//! | memory | `anon` | `unmapped` | `hugepage_size` |
//! |---|---|---|---|
//! | resident | yes | no | 4 KiB, or 2 MiB when huge-page backed |
//! | paged out, or never touched | yes | yes | no folio: not of the kind |
//! | outside the workload's regions (gaps, program image, libraries, stack) | no | yes | not of the kind |
//!
//! The model keeps no LRU lists, accessed bits apart from the access checks, or cgroups, so
//! `active`, `young` and `memcg` filters never find memory of their kind: a filter that
//! excludes active, young or a cgroup's memory excludes nothing, and one that includes only
//! such memory includes nothing. Nor do the access checks take samples: `tid` and `cpu`
//! filters never find memory of their kind either, and `reads` and `writes` (core filters)
//! find regions with no read or write samples.

use crate::memory::{Memory, Pages, Segment};
use udamon_core::damos::{Action, Applied, FilterKind, HUGE_PAGE, Scheme};
use udamon_core::{AddrRange, PAGE_SIZE, Region};

/// Simulated memory as the filters tell it apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gap,
    Unfaulted,
    PagedOut,
    Resident { huge: bool },
}

impl Kind {
    fn is_of(self, filter: &FilterKind) -> bool {
        match filter {
            FilterKind::Anon => self != Kind::Gap,
            FilterKind::Unmapped => !matches!(self, Kind::Resident { .. }),
            FilterKind::HugepageSize { min, max } => match self {
                Kind::Resident { huge } => {
                    (min..=max).contains(&if huge { &HUGE_PAGE } else { &PAGE_SIZE })
                }
                _ => false,
            },
            FilterKind::Active | FilterKind::Young | FilterKind::Memcg { .. } => false,
            // The access checks take no samples: no thread or CPU is known.
            FilterKind::Tid(_) | FilterKind::Cpu(_) => false,
            // Core filters are decided before the operations layer is asked.
            FilterKind::Addr(_)
            | FilterKind::Target { .. }
            | FilterKind::Reads
            | FilterKind::Writes => false,
        }
    }
}

/// The filters' verdict on each kind of memory, for one scheme and region.
struct Verdicts {
    gap: bool,
    unfaulted: bool,
    paged_out: bool,
    resident: bool,
    huge: bool,
}

impl Verdicts {
    fn new(scheme: &Scheme) -> Verdicts {
        let allow = |kind: Kind| {
            scheme.state().core_filters_allowed || scheme.filters.ops_allow(|f| kind.is_of(f))
        };
        Verdicts {
            gap: allow(Kind::Gap),
            unfaulted: allow(Kind::Unfaulted),
            paged_out: allow(Kind::PagedOut),
            resident: allow(Kind::Resident { huge: false }),
            huge: allow(Kind::Resident { huge: true }),
        }
    }

    fn resident(&self, s: &Segment) -> bool {
        if s.huge { self.huge } else { self.resident }
    }

    /// Bytes of a segment the filters allow.
    fn passed(&self, s: &Segment) -> f64 {
        let (unfaulted, out, resident) = s.bytes();
        let pass = |ok: bool, bytes: f64| if ok { bytes } else { 0.0 };
        pass(self.unfaulted, unfaulted)
            + pass(self.paged_out, out)
            + pass(self.resident(s), resident)
    }

    /// Whether the filters allow all of a segment's memory.
    fn all(&self, s: &Segment) -> bool {
        let (unfaulted, out, resident) = s.bytes();
        (unfaulted == 0.0 || self.unfaulted)
            && (out == 0.0 || self.paged_out)
            && (resident == 0.0 || self.resident(s))
    }
}

/// Apply `scheme.action` to `region` of the simulated process, whose memory is `memory`.
pub(crate) fn apply(memory: &mut Memory, region: &Region, scheme: &Scheme) -> Applied {
    if !matches!(
        scheme.action,
        Action::Pageout
            | Action::Willneed
            | Action::Collapse
            | Action::Hugepage
            | Action::Cold
            | Action::Stat
    ) {
        return Applied::default();
    }
    let mut range = AddrRange::new(region.start, region.end);
    if matches!(scheme.action, Action::Collapse | Action::Hugepage) {
        // The blocks the kernel's collapse would take for this region, as on live processes.
        match scheme.huge_page_blocks(range) {
            Some(blocks) => range = blocks,
            None => return Applied::default(),
        }
    }
    let verdicts = Verdicts::new(scheme);
    let overlaps = memory.overlaps(range);
    let mut passed = 0.0;
    let mut workload_bytes = 0u64;
    for &(i, pages) in &overlaps {
        workload_bytes += pages.count() * PAGE_SIZE;
        passed += memory
            .segments(i, pages)
            .map(|s| verdicts.passed(&s))
            .sum::<f64>();
    }
    if verdicts.gap {
        passed += range.size().saturating_sub(workload_bytes) as f64;
    }
    let mut applied = 0.0;
    for &(i, pages) in &overlaps {
        applied += match scheme.action {
            Action::Pageout => page_out(memory, i, pages, &verdicts),
            Action::Willneed => memory.update(i, pages, |s| {
                if !verdicts.paged_out {
                    return 0.0;
                }
                let (_, out, _) = s.bytes();
                s.out = 0.0;
                out
            }),
            Action::Collapse | Action::Hugepage => collapse(memory, i, pages, &verdicts),
            _ => 0.0,
        };
    }
    Applied {
        sz_applied: applied.round() as u64,
        sz_ops_filter_passed: passed.round() as u64,
        elapsed_ns: 0,
    }
}

fn page_out(memory: &mut Memory, i: usize, pages: Pages, verdicts: &Verdicts) -> f64 {
    // Huge pages paged out at the range's edges split their whole block first.
    let blocks = memory.blocks_around(i, pages);
    let split_huge = |memory: &mut Memory, edge: u64, part: Pages| {
        let at_edge = memory.segments(i, Pages::new(edge, edge + 1)).next();
        if part.count() > 0 && at_edge.is_some_and(|s| s.huge && verdicts.huge) {
            memory.update(i, part, |s| {
                s.huge = false;
                0.0
            });
        }
    };
    split_huge(memory, pages.start, Pages::new(blocks.start, pages.start));
    split_huge(memory, pages.end - 1, Pages::new(pages.end, blocks.end));
    memory.update(i, pages, |s| {
        if !verdicts.resident(s) {
            return 0.0;
        }
        let (_, _, resident) = s.bytes();
        s.out = s.faulted;
        s.huge = false;
        resident
    })
}

fn collapse(memory: &mut Memory, i: usize, pages: Pages, verdicts: &Verdicts) -> f64 {
    let blocks: Vec<Pages> = memory.blocks_within(i, pages).collect();
    let mut applied = 0.0;
    for block in blocks {
        let already = memory.segments(i, block).all(|s| s.huge);
        if already || !memory.segments(i, block).all(|s| verdicts.all(&s)) {
            continue;
        }
        memory.update(i, block, |s| {
            s.faulted = 1.0;
            s.out = 0.0;
            s.huge = true;
            0.0
        });
        applied += HUGE_PAGE as f64;
    }
    applied
}
