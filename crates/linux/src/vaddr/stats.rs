//! Counters of a sampled access source: what happened to every sample, for the record's
//! `SourceStats` events and `report info`.

use crate::decode::DropReason;
use std::collections::BTreeMap;

/// Running totals since monitoring started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SourceStats {
    /// Samples of a monitored process.
    pub samples: u64,
    /// Data addresses recovered (or delivered by the PMU) and counted.
    pub recovered: u64,
    /// Implicit stack references (push, pop, call, ret): recovered but kept out of the regions.
    pub stack: u64,
    /// Of `recovered`: pointers that a load put into its own address register, counted where
    /// they point (the next node of a linked structure).
    pub chased: u64,
    /// Samples without an address, by [`DropReason::index`].
    pub dropped: [u64; DropReason::COUNT],
    /// Samples of 32-bit code (compat mode): the decoder only knows 64-bit code.
    pub abi32: u64,
    /// Samples without user registers or data address (e.g. taken while in a kernel thread).
    pub no_user_regs: u64,
    /// Records the kernel dropped because a ring buffer was full.
    pub lost: u64,
    /// Times the kernel throttled sampling.
    pub throttled: u64,
    /// Recovered addresses outside every mapping of the process (wrong, or a mapping gone).
    pub outside_mapped: u64,
    /// Recovered addresses outside the monitored regions (e.g. in a mapping created since the
    /// last regions update, or in one of the two gaps that the three regions leave out).
    pub outside_regions: u64,
    /// Bytes of accessed regions reported not accessed because they held no present page,
    /// summed over windows.
    pub absent_bytes_cut: u64,
    /// Physical views: recovered addresses whose page had no frame to count (not in memory,
    /// or frames hidden from a user without CAP_SYS_ADMIN).
    pub no_frame: u64,
}

impl SourceStats {
    /// Samples dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum::<u64>() + self.abi32 + self.no_user_regs
    }

    /// Every counter by a stable snake_case name; drops are `dropped_<reason>`.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for (name, v) in [
            ("samples", self.samples),
            ("recovered", self.recovered),
            ("stack", self.stack),
            ("chased", self.chased),
            ("dropped_abi32", self.abi32),
            ("dropped_no_user_regs", self.no_user_regs),
            ("lost", self.lost),
            ("throttled", self.throttled),
            ("outside_mapped", self.outside_mapped),
            ("outside_regions", self.outside_regions),
            ("absent_bytes_cut", self.absent_bytes_cut),
            ("no_frame", self.no_frame),
        ] {
            m.insert(name.to_string(), v);
        }
        for reason in DropReason::ALL {
            m.insert(
                format!("dropped_{}", reason.name()),
                self.dropped[reason.index()],
            );
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_name_every_drop_reason() {
        let mut s = SourceStats {
            samples: 10,
            abi32: 1,
            ..SourceStats::default()
        };
        s.dropped[DropReason::Clobbered.index()] = 3;
        let c = s.counters();
        assert_eq!(c["samples"], 10);
        assert_eq!(c["dropped_clobbered"], 3);
        assert_eq!(c["dropped_abi32"], 1);
        assert_eq!(c.len(), 12 + DropReason::COUNT);
        assert_eq!(s.dropped_total(), 4);
    }
}
