//! perf_event_open sampling sources for one target process, and their ring buffers.
//!
//! Three access sources (docs/sources/sampled.md):
//! - [`AccessSource::CpuClock`]: a software hrtimer event (cpu-clock or task-clock) sampling the
//!   target's user registers at a chosen rate; unprivileged for one's own processes
//!   (`exclude_kernel=1` passes `kernel.perf_event_paranoid=2`);
//! - [`AccessSource::Tick`]: the `irq_vectors:local_timer_entry` tracepoint, i.e. a free ride on
//!   the kernel's scheduler tick (about 250 samples/s per busy CPU; root or CAP_PERFMON);
//! - [`AccessSource::Pmu`]: precise memory samples carrying the data address (Intel PEBS
//!   `mem-loads`, AMD IBS op), detected from sysfs by [`detect_pmu`].
//!
//! A [`Sampler`] attaches to a running process or spawns one, opens one event per (thread × CPU)
//! with `inherit` (so threads created later are followed), funnels them into one ring buffer per
//! CPU, and turns the ring contents into typed [`PerfRecord`]s: samples with the raw user
//! registers in [`SAMPLE_REGS_USER`] order, plus exec, mmap, fork, exit, lost and throttle
//! records so the monitor can track the target's life. [`ProcessMemory`] reads the target's code
//! bytes for the instruction decoder.
//!
//! A [`CpuSampler`] opens the source once per CPU for every process instead (root or
//! CAP_PERFMON), for a monitor of a whole host: its records carry their pid, for the caller to
//! hand each to its process's monitoring.
//!
//! Submodules: `error` (one-line actionable errors), `source` (what to sample and the
//! `perf_event_attr` for it), `open` (the system call, privilege checks and errno mapping),
//! `record` (record layouts, parsed from bytes), `ring` (the mmap'ed ring buffer), `sampler`
//! (attach/spawn, poll, drain), `cpu_wide` (one event per CPU for every process), `spawn` (fork, open, exec), `pmu` (sysfs detection), `tracefs`
//! (the tick tracepoint id), `memory` (process_vm_readv).

mod cpu_wide;
mod error;
mod memory;
mod open;
mod pmu;
mod record;
mod ring;
mod sampler;
mod source;
mod spawn;
mod tracefs;

pub use cpu_wide::CpuSampler;
pub use error::PerfError;
pub use memory::ProcessMemory;
pub use pmu::{DEFAULT_LDLAT, PmuKind, SYSFS_DEVICES, detect_pmu, detect_pmu_in};
pub use record::{MAX_CALL_STACK, PerfRecord, Sample};
pub use sampler::{ChildExit, Counters, PollOutcome, Sampler, SamplerConfig};
pub use source::{AccessSource, ClockEvent, CpuClock, PmuEvent, Rate};
pub use tracefs::TICK_TRACEPOINT;

/// `sample_regs_user` mask: bit `i` requests register `i` of `enum perf_event_x86_regs`
/// (AX=0, BX, CX, DX, SI, DI, BP, SP, IP, FLAGS=9, then the segment registers 10..=15, which are
/// not requested, then R8=16 .. R15=23). The kernel writes the requested registers in ascending
/// bit order, so [`Sample::regs`] holds, in this order:
/// AX BX CX DX SI DI BP SP IP FLAGS R8 R9 R10 R11 R12 R13 R14 R15 (indexes in [`reg`]).
/// These are all the general-purpose registers an x86-64 effective address can use, plus IP and
/// FLAGS (the direction flag of string instructions). XMM registers are not available for
/// software events (EOPNOTSUPP), and fs_base/gs_base are not perf registers at all.
pub const SAMPLE_REGS_USER: u64 = 0x3ff | (0xff << 16);

/// Number of registers in [`SAMPLE_REGS_USER`] and in [`Sample::regs`].
pub const NR_SAMPLE_REGS: usize = SAMPLE_REGS_USER.count_ones() as usize;

/// `Sample::abi` values (`enum perf_sample_regs_abi`).
pub const REGS_ABI_NONE: u64 = 0;
pub const REGS_ABI_32: u64 = 1;
pub const REGS_ABI_64: u64 = 2;

/// Index of each register in [`Sample::regs`].
pub mod reg {
    pub const AX: usize = 0;
    pub const BX: usize = 1;
    pub const CX: usize = 2;
    pub const DX: usize = 3;
    pub const SI: usize = 4;
    pub const DI: usize = 5;
    pub const BP: usize = 6;
    pub const SP: usize = 7;
    pub const IP: usize = 8;
    pub const FLAGS: usize = 9;
    pub const R8: usize = 10;
    pub const R9: usize = 11;
    pub const R10: usize = 12;
    pub const R11: usize = 13;
    pub const R12: usize = 14;
    pub const R13: usize = 15;
    pub const R14: usize = 16;
    pub const R15: usize = 17;
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_event_open_sys::bindings as b;

    /// The documented order follows from the kernel's register numbering.
    #[test]
    fn register_indexes_follow_mask_order() {
        let slot = |r: u32| (SAMPLE_REGS_USER & ((1u64 << r) - 1)).count_ones() as usize;
        assert_eq!(NR_SAMPLE_REGS, 18);
        for (kernel, ours) in [
            (b::PERF_REG_X86_AX, reg::AX),
            (b::PERF_REG_X86_DI, reg::DI),
            (b::PERF_REG_X86_SP, reg::SP),
            (b::PERF_REG_X86_IP, reg::IP),
            (b::PERF_REG_X86_FLAGS, reg::FLAGS),
            (b::PERF_REG_X86_R8, reg::R8),
            (b::PERF_REG_X86_R15, reg::R15),
        ] {
            assert!(SAMPLE_REGS_USER & (1 << kernel) != 0);
            assert_eq!(slot(kernel), ours);
        }
        for seg in b::PERF_REG_X86_CS..=b::PERF_REG_X86_GS {
            assert_eq!(SAMPLE_REGS_USER & (1 << seg), 0);
        }
    }
}
