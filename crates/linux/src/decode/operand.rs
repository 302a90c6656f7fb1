//! Turns one decoded instruction into address templates: what its memory access is, and how
//! to compute that address from sampled registers, both for the instruction about to run
//! ("cur") and for one that has just run ("prev", whose own register writes are undone or
//! make it unusable).

use iced_x86::{
    CodeSize, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind,
    Register, UsedMemory,
};

use super::regs::{Gpr, UserRegs};
use super::{Access, AccessKind, DropReason, SegmentBases, Unresolved};

/// Which segment base is added to the effective address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Segment {
    /// ES/CS/SS/DS: base 0 in 64-bit mode.
    Flat,
    Fs,
    Gs,
}

/// A memory operand as a formula over the sampled registers:
/// `segment + mask(base + index * scale + disp ± string_step)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Operand {
    base: Option<Gpr>,
    index: Option<Gpr>,
    scale: u8,
    /// Includes RIP-relative targets (resolved at decode time) and stack-pointer corrections.
    disp: u64,
    segment: Segment,
    addr32: bool,
    /// Element size of a completed string instruction: its RSI/RDI have already moved by this
    /// much, in the direction given by DF at sample time.
    string_step: u8,
    pub(crate) kind: AccessKind,
    pub(crate) access: Access,
}

impl Operand {
    /// The operand's linear address under `regs`.
    pub(crate) fn address(&self, regs: &UserRegs, bases: SegmentBases) -> Result<u64, Unresolved> {
        let mut ea = self.disp;
        if let Some(base) = self.base {
            ea = ea.wrapping_add(regs.gpr(base));
        }
        if let Some(index) = self.index {
            ea = ea.wrapping_add(regs.gpr(index).wrapping_mul(u64::from(self.scale)));
        }
        let step = u64::from(self.string_step);
        ea = if regs.direction_flag() {
            ea.wrapping_add(step)
        } else {
            ea.wrapping_sub(step)
        };
        if self.addr32 {
            ea &= u64::from(u32::MAX);
        }
        let base = match self.segment {
            Segment::Flat => 0,
            Segment::Fs => bases.fs.ok_or(Unresolved::Segment)?,
            Segment::Gs => bases.gs.ok_or(Unresolved::Segment)?,
        };
        Ok(ea.wrapping_add(base))
    }
}

/// What address recovery needs to know about one instruction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Analysis {
    /// The access when this instruction is about to run.
    pub(crate) cur: Result<Operand, DropReason>,
    /// The access when this instruction has just run, before any check that it really was the
    /// instruction executed last (see [`Analysis::prev_needs_branch_check`]).
    pub(crate) prev: Result<Operand, DropReason>,
    /// Falls through and touches memory: only then does it matter whether the following
    /// address is a branch target.
    pub(crate) prev_needs_branch_check: bool,
    /// `syscall`, `int n` and the like: the next instruction's address is where a sample
    /// taken in the kernel sees a task that entered the kernel on purpose.
    pub(crate) enters_kernel: bool,
    /// A rep-prefixed string instruction, which a sample usually interrupts midway.
    pub(crate) rep_string: bool,
    /// A string instruction's other memory operand (`movs`: the source, `cmps`: the second),
    /// for the instruction about to run.
    pub(crate) cur_partner: Option<Operand>,
    /// When "prev" is unusable because a 64-bit load overwrote its own address register: the
    /// loaded pointer, in that register ([`AccessKind::Chased`]).
    pub(crate) chase: Option<Operand>,
}

/// Analyses `ins`, decoded in 64-bit mode with its real IP.
pub(crate) fn analyze(ins: &Instruction, factory: &mut InstructionInfoFactory) -> Analysis {
    let info = factory.info(ins);
    let explicit = (0..ins.op_count())
        .filter(|&i| is_memory_kind(ins.op_kind(i)) && info.op_access(i) != OpAccess::NoMemAccess)
        .count();
    // iced lists explicit operands first and implicit (stack) references after them, so the
    // first entry is the data operand when there is one.
    let stack_insn = ins.is_stack_instruction();
    let primary = info
        .used_memory()
        .iter()
        .enumerate()
        .find(|(_, m)| access_of(m.access()).is_some())
        .map(|(i, m)| {
            let kind = if stack_insn && i >= explicit {
                AccessKind::Stack
            } else {
                AccessKind::Data
            };
            (m, kind)
        });

    let mut written = 0u16;
    for used in info.used_registers() {
        if writes(used.access())
            && let Some(gpr) = Gpr::of(used.register())
        {
            written |= gpr.bit();
        }
    }
    let rsp_is_destination = (0..ins.op_count()).any(|i| {
        ins.op_kind(i) == OpKind::Register
            && Gpr::of(ins.op_register(i)) == Some(Gpr::Sp)
            && writes(info.op_access(i))
    });

    let mnemonic = ins.mnemonic();
    let falls_through = ins.flow_control() == FlowControl::Next;
    // movs and cmps touch two elements: the second is the partner of the first.
    let cur_partner = if ins.is_string_instruction() {
        info.used_memory()
            .iter()
            .filter(|m| access_of(m.access()).is_some())
            .nth(1)
            .and_then(|m| template(m, AccessKind::Data).ok())
    } else {
        None
    };
    let template = primary.map(|(m, kind)| template(m, kind));
    let cur = match template {
        None => Err(DropReason::NoMemoryOperand),
        Some(t) => t,
    };
    let prev = if !falls_through {
        Err(DropReason::AfterBranch)
    } else {
        match template {
            None => Err(DropReason::NoMemoryOperand),
            Some(Err(reason)) => Err(reason),
            // They rewrite RSP and RBP wholesale; a stack increment does not describe that.
            Some(Ok(_)) if matches!(mnemonic, Mnemonic::Leave | Mnemonic::Enter) => {
                Err(DropReason::Clobbered)
            }
            Some(Ok(op)) => undo_writes(
                op,
                written,
                ins.stack_pointer_increment(),
                rsp_is_destination,
                ins.is_string_instruction(),
                ins.memory_size().size(),
            ),
        }
    };
    let chase = match (prev, template) {
        (Err(DropReason::Clobbered), Some(Ok(op))) => chased_pointer(ins, &op),
        _ => None,
    };
    Analysis {
        cur,
        prev,
        chase,
        prev_needs_branch_check: falls_through && template.is_some(),
        enters_kernel: matches!(
            mnemonic,
            Mnemonic::Syscall
                | Mnemonic::Sysenter
                | Mnemonic::Int
                | Mnemonic::Int1
                | Mnemonic::Int3
                | Mnemonic::Into
        ),
        rep_string: ins.is_string_instruction()
            && (ins.has_rep_prefix() || ins.has_repe_prefix() || ins.has_repne_prefix()),
        cur_partner,
    }
}

/// For `mov m64, r64` whose destination is a register of its own address `op`: the destination,
/// which now holds the loaded pointer.
fn chased_pointer(ins: &Instruction, op: &Operand) -> Option<Operand> {
    let loads_a_pointer = ins.mnemonic() == Mnemonic::Mov
        && ins.op_count() == 2
        && ins.op_kind(0) == OpKind::Register
        && ins.op_kind(1) == OpKind::Memory
        && ins.memory_size().size() == 8
        && op.segment == Segment::Flat;
    let dest = Gpr::of(ins.op0_register()).filter(|_| loads_a_pointer)?;
    (op.base == Some(dest) || op.index == Some(dest)).then_some(Operand {
        base: Some(dest),
        index: None,
        scale: 1,
        disp: 0,
        segment: Segment::Flat,
        addr32: false,
        string_step: 0,
        kind: AccessKind::Chased,
        access: Access::Read,
    })
}

/// The "cur" template of a used-memory entry.
fn template(m: &UsedMemory, kind: AccessKind) -> Result<Operand, DropReason> {
    if m.vsib_size() != 0 {
        return Err(DropReason::Unresolved(Unresolved::Vsib));
    }
    let reg = |r: Register| -> Result<Option<Gpr>, DropReason> {
        match r {
            Register::None => Ok(None),
            // Only general-purpose registers address memory outside VSIB; anything else means
            // an encoding this module does not model.
            r => Gpr::of(r).map(Some).ok_or(DropReason::DecodeFailed),
        }
    };
    let segment = match m.segment() {
        Register::FS => Segment::Fs,
        Register::GS => Segment::Gs,
        _ => Segment::Flat,
    };
    Ok(Operand {
        base: reg(m.base())?,
        index: reg(m.index())?,
        // iced reports 1, 2, 4 or 8.
        scale: m.scale() as u8,
        disp: m.displacement(),
        segment,
        addr32: m.address_size() == CodeSize::Code32,
        string_step: 0,
        kind,
        access: access_of(m.access()).ok_or(DropReason::NoMemoryOperand)?,
    })
}

/// Rewrites a "cur" template so that it gives the same address from the registers left *after*
/// the instruction ran, or says why that is impossible.
fn undo_writes(
    mut op: Operand,
    written: u16,
    stack_increment: i32,
    rsp_is_destination: bool,
    string_insn: bool,
    element_size: usize,
) -> Result<Operand, DropReason> {
    for reg in [op.base, op.index].into_iter().flatten() {
        if written & reg.bit() == 0 {
            continue;
        }
        match reg {
            // push/pop/call-style: RSP moved by a known amount (iced expresses all stack
            // operands relative to the RSP before the instruction).
            Gpr::Sp if stack_increment != 0 && !rsp_is_destination => {
                op.disp = op.disp.wrapping_sub(i64::from(stack_increment) as u64);
            }
            // String elements are 1 to 8 bytes.
            Gpr::Si | Gpr::Di if string_insn && element_size != 0 => {
                op.string_step = element_size as u8;
            }
            _ => return Err(DropReason::Clobbered),
        }
    }
    Ok(op)
}

fn is_memory_kind(kind: OpKind) -> bool {
    matches!(
        kind,
        OpKind::Memory
            | OpKind::MemorySegSI
            | OpKind::MemorySegESI
            | OpKind::MemorySegRSI
            | OpKind::MemorySegDI
            | OpKind::MemorySegEDI
            | OpKind::MemorySegRDI
            | OpKind::MemoryESDI
            | OpKind::MemoryESEDI
            | OpKind::MemoryESRDI
    )
}

fn writes(access: OpAccess) -> bool {
    matches!(
        access,
        OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

fn access_of(access: OpAccess) -> Option<Access> {
    match access {
        OpAccess::Read | OpAccess::CondRead => Some(Access::Read),
        OpAccess::Write | OpAccess::CondWrite => Some(Access::Write),
        OpAccess::ReadWrite | OpAccess::ReadCondWrite => Some(Access::ReadWrite),
        OpAccess::None | OpAccess::NoMemAccess => None,
    }
}
