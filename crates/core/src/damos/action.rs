//! DAMOS actions (spec §8.2) and their stable lower-case names (upstream's sysfs keywords).

use super::UnknownName;
use std::fmt;
use std::str::FromStr;

/// What a scheme does to the memory of matching regions. Which ones an operations set supports
/// is its business (spec §6.4); the core only distinguishes `Stat`, which changes nothing and so
/// leaves region ages alone.
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
