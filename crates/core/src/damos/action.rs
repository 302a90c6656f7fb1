//! DAMOS actions (docs/algorithms.md#damos-actions) and their stable lower-case names (upstream's
//! sysfs keywords), and the huge-page blocks that `collapse` acts on, for every operations set
//! alike.

use super::UnknownName;
use crate::region::AddrRange;
use std::fmt;
use std::str::FromStr;

/// What a scheme does to the memory of matching regions. Which ones an operations set supports
/// is its business (docs/algorithms.md#operations); the core only distinguishes `Stat`, which
/// changes nothing and so leaves region ages alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Willneed,
    Cold,
    Pageout,
    Hugepage,
    Nohugepage,
    /// NEW: synchronous huge page collapse (`MADV_COLLAPSE`).
    Collapse,
    LruPrio,
    LruDeprio,
    MigrateHot,
    MigrateCold,
    Stat,
}

/// A PMD-mapped huge page with 4 KiB base pages (x86-64, arm64): what `collapse` makes of
/// memory, one aligned block at a time.
pub const HUGE_PAGE: u64 = 2 << 20;

/// The aligned huge-page blocks a `collapse` of `range` acts on, as one range (`None` if
/// none). A block is all or nothing, and region edges fall anywhere: when acting is `bounded`
/// (a quota, which acting must not cross) only the blocks wholly inside `range`; otherwise each
/// block goes to the range holding its middle, so that random region edges leave no hot block
/// uncollapsed and no block is claimed twice.
pub fn huge_page_blocks(range: AddrRange, bounded: bool) -> Option<AddrRange> {
    let (first, end) = if bounded {
        (range.start.div_ceil(HUGE_PAGE), range.end / HUGE_PAGE)
    } else {
        let half = HUGE_PAGE / 2;
        (
            range.start.saturating_sub(half).div_ceil(HUGE_PAGE),
            range.end.saturating_sub(half).div_ceil(HUGE_PAGE),
        )
    };
    (first < end).then(|| AddrRange::new(first * HUGE_PAGE, end * HUGE_PAGE))
}

impl Action {
    /// Every action, in upstream's (NEW) enum order. Do not rely on positions: upstream renumbered
    /// when `collapse` was inserted.
    pub const ALL: [Action; 11] = [
        Action::Willneed,
        Action::Cold,
        Action::Pageout,
        Action::Hugepage,
        Action::Nohugepage,
        Action::Collapse,
        Action::LruPrio,
        Action::LruDeprio,
        Action::MigrateHot,
        Action::MigrateCold,
        Action::Stat,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Action::Willneed => "willneed",
            Action::Cold => "cold",
            Action::Pageout => "pageout",
            Action::Hugepage => "hugepage",
            Action::Nohugepage => "nohugepage",
            Action::Collapse => "collapse",
            Action::LruPrio => "lru_prio",
            Action::LruDeprio => "lru_deprio",
            Action::MigrateHot => "migrate_hot",
            Action::MigrateCold => "migrate_cold",
            Action::Stat => "stat",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Action {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Action::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                UnknownName::new("DAMOS action", s, &names)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_a_quota_only_blocks_wholly_inside_the_region() {
        let h = HUGE_PAGE;
        let r = AddrRange::new(h / 2, 3 * h + h / 2);
        assert_eq!(huge_page_blocks(r, true), Some(AddrRange::new(h, 3 * h)));
        assert_eq!(
            huge_page_blocks(r, false),
            Some(AddrRange::new(0, 3 * h)),
            "the middle rule reaches before the start"
        );
        assert_eq!(
            huge_page_blocks(AddrRange::new(h / 2, h + h / 2), true),
            None
        );
    }

    #[test]
    fn every_huge_block_is_claimed_by_the_region_holding_its_middle() {
        let m = HUGE_PAGE;
        let claimed =
            |s, e| huge_page_blocks(AddrRange::new(s, e), false).map(|r| (r.start, r.end));
        assert_eq!(claimed(0, m / 2), None);
        assert_eq!(claimed(0, m / 2 + 4096), Some((0, m)));
        assert_eq!(claimed(m / 2 + 4096, 3 * m), Some((m, 3 * m)));
        assert_eq!(claimed(m / 2, m / 2 + 4096), Some((0, m)));
        // Neighbours split the blocks between them without overlap or gap.
        let cut = 5 * m + 12345 / 4096 * 4096;
        let (a, b) = (claimed(m, cut).unwrap(), claimed(cut, 9 * m).unwrap());
        assert_eq!((a.0, a.1, b.0, b.1), (m, 5 * m, 5 * m, 9 * m));
    }

    #[test]
    fn names_round_trip() {
        for a in Action::ALL {
            assert_eq!(a.name().parse::<Action>(), Ok(a));
            assert_eq!(a.to_string(), a.name());
        }
        assert_eq!("migrate_cold".parse(), Ok(Action::MigrateCold));
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = "page_out".parse::<Action>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown DAMOS action `page_out`; valid DAMOS actions: willneed, cold, pageout, \
             hugepage, nohugepage, collapse, lru_prio, lru_deprio, migrate_hot, migrate_cold, stat"
        );
        assert!("Pageout".parse::<Action>().is_err(), "names are lower-case");
    }
}
