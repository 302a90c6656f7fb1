//! The user-space registers that perf records with `PERF_SAMPLE_REGS_USER` on x86-64, and
//! the mapping from iced-x86 register names to them.

use iced_x86::Register;

/// `perf_event_attr.sample_regs_user` for address recovery.
///
/// Bits follow the kernel's `enum perf_event_x86_regs`: AX=0, BX=1, CX=2, DX=3, SI=4, DI=5,
/// BP=6, SP=7, IP=8, FLAGS=9, CS=10, SS=11, DS=12, ES=13, FS=14, GS=15, R8=16 … R15=23.
/// The mask selects AX..FLAGS and R8..R15 (18 registers). The segment selectors are left
/// out: the kernel rejects DS/ES/FS/GS for 64-bit tasks (`EINVAL`), and CS/SS carry no
/// address information in 64-bit mode. The FS/GS *bases* are not perf registers at all; see
/// [`SegmentBases`](super::SegmentBases).
pub const SAMPLE_REGS_USER_MASK: u64 = 0x00ff_03ff;

/// Value of the direction flag (DF) in RFLAGS.
const FLAGS_DF: u64 = 1 << 10;

/// The user registers of one sample.
///
/// Build it from a perf record with [`UserRegs::from_perf`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserRegs {
    pub ax: u64,
    pub bx: u64,
    pub cx: u64,
    pub dx: u64,
    pub si: u64,
    pub di: u64,
    pub bp: u64,
    pub sp: u64,
    pub ip: u64,
    pub flags: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
}

impl UserRegs {
    /// Number of registers selected by [`SAMPLE_REGS_USER_MASK`].
    pub const COUNT: usize = SAMPLE_REGS_USER_MASK.count_ones() as usize;

    /// Builds the registers from the `regs[]` array of a perf sample taken with
    /// [`SAMPLE_REGS_USER_MASK`]: perf writes the selected registers in increasing bit order,
    /// so the array is AX BX CX DX SI DI BP SP IP FLAGS R8 … R15.
    pub fn from_perf(values: &[u64; Self::COUNT]) -> Self {
        let [
            ax,
            bx,
            cx,
            dx,
            si,
            di,
            bp,
            sp,
            ip,
            flags,
            r8,
            r9,
            r10,
            r11,
            r12,
            r13,
            r14,
            r15,
        ] = *values;
        Self {
            ax,
            bx,
            cx,
            dx,
            si,
            di,
            bp,
            sp,
            ip,
            flags,
            r8,
            r9,
            r10,
            r11,
            r12,
            r13,
            r14,
            r15,
        }
    }

    /// Whether string instructions step downwards (RFLAGS.DF set).
    pub fn direction_flag(&self) -> bool {
        self.flags & FLAGS_DF != 0
    }

    pub(crate) fn gpr(&self, reg: Gpr) -> u64 {
        match reg {
            Gpr::Ax => self.ax,
            Gpr::Bx => self.bx,
            Gpr::Cx => self.cx,
            Gpr::Dx => self.dx,
            Gpr::Si => self.si,
            Gpr::Di => self.di,
            Gpr::Bp => self.bp,
            Gpr::Sp => self.sp,
            Gpr::R8 => self.r8,
            Gpr::R9 => self.r9,
            Gpr::R10 => self.r10,
            Gpr::R11 => self.r11,
            Gpr::R12 => self.r12,
            Gpr::R13 => self.r13,
            Gpr::R14 => self.r14,
            Gpr::R15 => self.r15,
        }
    }
}

/// A 64-bit general-purpose register; an address template refers to registers this way so that
/// the warm path reads [`UserRegs`] without going through iced-x86.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gpr {
    Ax,
    Bx,
    Cx,
    Dx,
    Si,
    Di,
    Bp,
    Sp,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
}

impl Gpr {
    /// The full register behind any part of a general-purpose register (AL, AX, EAX → RAX).
    pub(crate) fn of(reg: Register) -> Option<Self> {
        Some(match reg.full_register() {
            Register::RAX => Self::Ax,
            Register::RBX => Self::Bx,
            Register::RCX => Self::Cx,
            Register::RDX => Self::Dx,
            Register::RSI => Self::Si,
            Register::RDI => Self::Di,
            Register::RBP => Self::Bp,
            Register::RSP => Self::Sp,
            Register::R8 => Self::R8,
            Register::R9 => Self::R9,
            Register::R10 => Self::R10,
            Register::R11 => Self::R11,
            Register::R12 => Self::R12,
            Register::R13 => Self::R13,
            Register::R14 => Self::R14,
            Register::R15 => Self::R15,
            _ => return None,
        })
    }

    /// This register's bit in a set of registers kept as a `u16`.
    pub(crate) fn bit(self) -> u16 {
        1 << self as u16
    }
}
