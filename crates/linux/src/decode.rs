//! Data-address recovery for a sampled user-space x86-64 instruction.
//!
//! A timer sample gives the user registers and IP, not the address the task was touching.
//! Most such samples are taken just *after* the stalled instruction retired ("skid"), so the
//! instruction at IP is usually not the one that was waiting for memory. The "comb" policy used
//! here (measured on real programs: 99.6–100 % of prev addresses exactly right):
//!
//! 1. *prev*: find the instruction that ends at IP by backward decoding with voting, and compute
//!    its memory operand's address from the sampled registers, which hold the values *after* it
//!    ran. Stack operands are corrected by the instruction's stack-pointer increment and string
//!    operands by one element (DF-aware). Drop it when it is a branch, when IP is the target of a
//!    nearby direct branch (then it need not be what ran before IP), or when it overwrote a
//!    register of its own address ("clobbered", e.g. `mov (%rax),%rax`).
//! 2. *cur*: otherwise, the memory operand of the instruction at IP with the same registers.
//! 3. *chase*: otherwise, if prev was a 64-bit load that overwrote its own address register
//!    (`mov 8(%rax),%rax`, a step along a linked structure), the pointer it loaded: the next
//!    node, which the program touches next ([`AccessKind::Chased`]). Pointer-chasing code
//!    otherwise gives no address at all.
//!
//! A rep-prefixed string instruction at IP is tried as *cur* first: an interrupted `rep movs`
//! keeps IP on itself with live RSI/RDI, so a sample there is almost always inside it. It
//! touches two elements per step, so successive samples there give its two operands in turn:
//! a copy's source shows as well as its destination.
//!
//! Decoding is the expensive part (tens of microseconds for a new IP), so [`AddressDecoder`]
//! caches everything static about an IP; a cache hit plus the address computation does not
//! allocate.

mod cache;
mod operand;
mod regs;
mod scan;

use std::fmt;

use iced_x86::InstructionInfoFactory;

use cache::BoundedMap;
use operand::{Operand, analyze};
pub use regs::{SAMPLE_REGS_USER_MASK, UserRegs};

/// Reads the monitored task's machine code.
///
/// Analysing a new IP makes a handful of reads of at most 4 KiB each; only the 15-byte read at
/// IP may cross a page boundary. Nothing is read on a cache hit.
pub trait CodeReader {
    /// Fills all of `buf` with the bytes at `addr`; `false` if any of them cannot be read (a
    /// partial read is a failure).
    fn read_code(&mut self, addr: u64, buf: &mut [u8]) -> bool;
}

/// Where the task was when the sample was taken; decides which instruction the registers
/// belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplePoint {
    /// In user mode, between instructions: a timer sample of user code (cpu-clock, task-clock,
    /// the scheduler tick). The instruction before IP has usually just retired: comb policy.
    UserBoundary,
    /// The instruction at IP has not run yet and was the reason for the stop (e.g. a page-fault
    /// sample): only the instruction at IP is used.
    NotExecuted,
    /// In the kernel, with the user registers saved at kernel entry. If the instruction before
    /// IP entered the kernel on purpose (`syscall`, `int`), there is no data address
    /// ([`DropReason::InSyscall`]); otherwise the instruction at IP faulted or was interrupted
    /// before running, and is used as for [`SamplePoint::NotExecuted`].
    KernelEntry,
    /// The scheduler tick's user registers: the task was in a system call
    /// ([`DropReason::InSyscall`]) when the instruction before IP entered the kernel on purpose,
    /// and otherwise interrupted between two user instructions, as for
    /// [`SamplePoint::UserBoundary`].
    Tick,
}

/// FS and GS segment bases of the sampled thread. They are not perf registers; without them,
/// `%fs:`/`%gs:` operands (TLS, the stack canary) are [`Unresolved::Segment`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentBases {
    pub fs: Option<u64>,
    pub gs: Option<u64>,
}

/// What kind of memory the recovered address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// An explicit operand, or a string instruction's element.
    Data,
    /// An implicit stack reference: push, pop, call, ret, leave, enter.
    Stack,
    /// The pointer that a load just put into its own address register (`mov (%rax),%rax`, a
    /// linked structure's step): where the program goes next, not the address it read, which
    /// the overwritten register no longer tells. Used only when neither instruction gives an
    /// address; the caller should check that it points into data memory.
    Chased,
}

/// Whether the instruction reads, writes or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

/// Which instruction the address came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The instruction ending at IP (just retired).
    Prev,
    /// The instruction at IP.
    Cur,
}

/// A recovered data address.
///
/// An instruction with several memory operands (`movs`, `push (%rax)`) yields one: the first
/// [`AccessKind::Data`] operand in iced-x86's order (for `movs`, the destination), else its stack
/// reference; except that an interrupted rep string instruction at IP yields its two operands
/// in turn, one per sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Recovered {
    pub addr: u64,
    pub kind: AccessKind,
    pub access: Access,
    pub from: Origin,
}

/// Why a memory operand's address could not be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unresolved {
    /// An `%fs:`/`%gs:` operand without the matching [`SegmentBases`] entry.
    Segment,
    /// A vector gather/scatter: its index is a vector register, which perf does not sample.
    Vsib,
}

/// Why a sample gave no address.
///
/// Under [`SamplePoint::UserBoundary`] both instructions may fail; the reason reported is
/// prev's if it had a memory access that could not be used ([`DropReason::Clobbered`],
/// [`DropReason::BranchTarget`], [`DropReason::Unresolved`]) or if cur is
/// [`DropReason::NoMemoryOperand`], and cur's otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The instruction does not access memory (including `lea`, `nop (%rax)`, prefetches).
    NoMemoryOperand,
    /// The instruction before IP is a jump, call or return, so it did not fall through to IP.
    AfterBranch,
    /// IP is the target of a nearby direct branch, so the instruction before it by address need
    /// not be the one that ran.
    BranchTarget,
    /// The instruction before IP overwrote a register of its own address.
    Clobbered,
    Unresolved(Unresolved),
    /// Sampled inside a system call or software interrupt: the user registers do not tell what
    /// the kernel was touching.
    InSyscall,
    /// The code bytes could not be read (the task exited, or the page is not readable).
    CodeUnreadable,
    /// No valid instruction at IP, or none ending at IP.
    DecodeFailed,
}

impl DropReason {
    /// Number of distinct reasons (the length of [`DropReason::ALL`]).
    pub const COUNT: usize = 9;

    /// Every reason, in [`DropReason::index`] order.
    pub const ALL: [DropReason; Self::COUNT] = [
        Self::NoMemoryOperand,
        Self::AfterBranch,
        Self::BranchTarget,
        Self::Clobbered,
        Self::Unresolved(Unresolved::Segment),
        Self::Unresolved(Unresolved::Vsib),
        Self::InSyscall,
        Self::CodeUnreadable,
        Self::DecodeFailed,
    ];

    /// A stable snake_case name, for counters in records.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoMemoryOperand => "no_memory_operand",
            Self::AfterBranch => "after_branch",
            Self::BranchTarget => "branch_target",
            Self::Clobbered => "clobbered",
            Self::Unresolved(Unresolved::Segment) => "unresolved_segment",
            Self::Unresolved(Unresolved::Vsib) => "unresolved_vsib",
            Self::InSyscall => "in_syscall",
            Self::CodeUnreadable => "code_unreadable",
            Self::DecodeFailed => "decode_failed",
        }
    }

    /// Position in [`DropReason::ALL`], for per-reason counter arrays.
    pub fn index(self) -> usize {
        match self {
            Self::NoMemoryOperand => 0,
            Self::AfterBranch => 1,
            Self::BranchTarget => 2,
            Self::Clobbered => 3,
            Self::Unresolved(Unresolved::Segment) => 4,
            Self::Unresolved(Unresolved::Vsib) => 5,
            Self::InSyscall => 6,
            Self::CodeUnreadable => 7,
            Self::DecodeFailed => 8,
        }
    }

    /// prev had a memory access but it could not be attributed.
    fn lost_access(self) -> bool {
        matches!(
            self,
            Self::Clobbered | Self::BranchTarget | Self::Unresolved(_)
        )
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything static about one IP.
#[derive(Clone, Copy, Debug)]
struct Entry {
    cur: Result<Operand, DropReason>,
    /// Already includes the branch-target check.
    prev: Result<Operand, DropReason>,
    /// When prev is a pointer load that overwrote its own address register: the pointer.
    chase: Option<Operand>,
    prev_enters_kernel: bool,
    rep_string_at_ip: bool,
    /// The rep string instruction's other operand, when it has one.
    cur_partner: Option<Operand>,
}

/// Recovers data addresses from samples of one address space, caching the analysis of each
/// sampled IP.
///
/// Keep one per monitored process (the cache is keyed by code address only) and tell it when
/// code changes: [`AddressDecoder::invalidate_all`] on exec, and
/// [`AddressDecoder::invalidate_range`] on munmap and on new executable mappings.
///
/// The cache holds at most `max_entries` IPs, in two generations of `max_entries / 2`: when the
/// young one fills up, the old one is discarded, and IPs sampled again since the last turnover
/// survive. An IP takes 80 bytes in a hash table (its address and a 72-byte entry); with table
/// slack the cache stays under about 5.3 MiB at [`AddressDecoder::DEFAULT_MAX_ENTRIES`], reached
/// only by a program that has had that many distinct IPs sampled. Failures to read the code at IP are not
/// cached (they are usually a task that just exited); every other outcome is.
pub struct AddressDecoder {
    cache: BoundedMap<Entry>,
    info: InstructionInfoFactory,
    scratch: Box<[u8]>,
    /// Which of a rep string instruction's operands the next sample in one gives.
    partner_turn: bool,
}

impl Default for AddressDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl AddressDecoder {
    /// Default bound on cached IPs.
    pub const DEFAULT_MAX_ENTRIES: usize = 32_768;

    pub fn new() -> Self {
        Self::with_max_entries(Self::DEFAULT_MAX_ENTRIES)
    }

    /// A decoder caching at most `max_entries` IPs (at least 2).
    pub fn with_max_entries(max_entries: usize) -> Self {
        Self {
            cache: BoundedMap::new(max_entries),
            info: InstructionInfoFactory::new(),
            scratch: vec![0; scan::BRANCH_SCRATCH].into_boxed_slice(),
            partner_turn: false,
        }
    }

    /// The data address of the sample with user registers `regs`; the IP is `regs.ip` (for a
    /// sample taken in the kernel, the user IP, not the sampled kernel IP). `bases` are only
    /// needed for `%fs:`/`%gs:` operands. On a cache hit this reads no code and does not
    /// allocate.
    pub fn recover<R: CodeReader + ?Sized>(
        &mut self,
        code: &mut R,
        regs: &UserRegs,
        bases: SegmentBases,
        point: SamplePoint,
    ) -> Result<Recovered, DropReason> {
        let entry = self.entry(code, regs.ip)?;
        // The instruction at IP's operand; in turn, one of a rep string instruction's two.
        let cur = match entry.cur_partner {
            Some(partner) if entry.rep_string_at_ip => {
                self.partner_turn = !self.partner_turn;
                if self.partner_turn {
                    Ok(partner)
                } else {
                    entry.cur
                }
            }
            _ => entry.cur,
        };
        let resolve = |op: Result<Operand, DropReason>, from| {
            let op = op?;
            let addr = op.address(regs, bases).map_err(DropReason::Unresolved)?;
            Ok(Recovered {
                addr,
                kind: op.kind,
                access: op.access,
                from,
            })
        };
        match point {
            SamplePoint::KernelEntry | SamplePoint::Tick if entry.prev_enters_kernel => {
                Err(DropReason::InSyscall)
            }
            SamplePoint::UserBoundary | SamplePoint::Tick => {
                if entry.rep_string_at_ip
                    && let ok @ Ok(_) = resolve(cur, Origin::Cur)
                {
                    return ok;
                }
                let prev = match resolve(entry.prev, Origin::Prev) {
                    Ok(found) => return Ok(found),
                    Err(reason) => reason,
                };
                let cur = match resolve(cur, Origin::Cur) {
                    Ok(found) => return Ok(found),
                    Err(reason) => reason,
                };
                if let Some(chase) = entry.chase {
                    return resolve(Ok(chase), Origin::Prev);
                }
                Err(
                    if prev.lost_access() || cur == DropReason::NoMemoryOperand {
                        prev
                    } else {
                        cur
                    },
                )
            }
            SamplePoint::NotExecuted | SamplePoint::KernelEntry => resolve(cur, Origin::Cur),
        }
    }

    /// Forgets every cached IP (after exec, or when unsure what changed).
    pub fn invalidate_all(&mut self) {
        self.cache.clear();
    }

    /// Forgets every cached IP whose analysis read code in `start..end`. An IP's analysis reads
    /// up to 4 KiB on either side of it (the branch-target scan), so IPs that close to the range
    /// go too.
    pub fn invalidate_range(&mut self, start: u64, end: u64) {
        self.cache.remove_range(
            start.saturating_sub(scan::BRANCH_WINDOW),
            end.saturating_add(scan::BRANCH_WINDOW),
        );
    }

    /// Number of IPs cached.
    pub fn cached_ips(&self) -> usize {
        self.cache.len()
    }

    fn entry<R: CodeReader + ?Sized>(
        &mut self,
        code: &mut R,
        ip: u64,
    ) -> Result<Entry, DropReason> {
        if let Some(entry) = self.cache.get(ip) {
            return Ok(entry);
        }
        let (cur, rep_string_at_ip, cur_partner) = match scan::instruction_at(code, ip) {
            Ok(ins) => {
                let a = analyze(&ins, &mut self.info);
                (a.cur, a.rep_string, a.cur_partner)
            }
            Err(DropReason::CodeUnreadable) => return Err(DropReason::CodeUnreadable),
            Err(reason) => (Err(reason), false, None),
        };
        let (prev, chase, prev_enters_kernel) = match scan::previous_instruction(code, ip) {
            Ok(ins) => {
                let a = analyze(&ins, &mut self.info);
                if a.prev_needs_branch_check
                    && scan::is_direct_branch_target(code, ip, &mut self.scratch)
                {
                    (Err(DropReason::BranchTarget), None, a.enters_kernel)
                } else {
                    (a.prev, a.chase, a.enters_kernel)
                }
            }
            Err(reason) => (Err(reason), None, false),
        };
        let entry = Entry {
            cur,
            prev,
            chase,
            prev_enters_kernel,
            rep_string_at_ip,
            cur_partner,
        };
        self.cache.insert(ip, entry);
        Ok(entry)
    }
}

/// The address of the instruction that ends exactly at `ip`, found by backward decoding with
/// voting (the method behind [`Origin::Prev`]); for validation tools and tests.
pub fn previous_instruction<R: CodeReader + ?Sized>(
    code: &mut R,
    ip: u64,
) -> Result<u64, DropReason> {
    scan::previous_instruction(code, ip).map(|ins| ins.ip())
}
