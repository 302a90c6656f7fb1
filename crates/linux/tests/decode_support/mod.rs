//! Shared helpers for the decode tests: hand-assembled code placed at a fixed address.

#![allow(dead_code)] // each test file uses a different subset

use udamon_linux::decode::{
    AddressDecoder, CodeReader, DropReason, Recovered, SamplePoint, SegmentBases, UserRegs,
};

/// Page-aligned load address of test programs.
pub const BASE: u64 = 0x40_1000;
pub const PAGE: usize = 4096;

/// An ordinary function prologue (39 bytes), so that backward decoding has real code to vote
/// over and the branch-target scan has something to scan.
pub const PREAMBLE: &[u8] = &[
    0x55, //                         push %rbp
    0x48, 0x89, 0xe5, //             mov %rsp,%rbp
    0x41, 0x57, //                   push %r15
    0x41, 0x56, //                   push %r14
    0x49, 0x89, 0xff, //             mov %rdi,%r15
    0x31, 0xc0, //                   xor %eax,%eax
    0xb9, 0x34, 0x12, 0x00, 0x00, // mov $0x1234,%ecx
    0x48, 0x8d, 0x56, 0x10, //       lea 0x10(%rsi),%rdx
    0x48, 0x85, 0xd2, //             test %rdx,%rdx
    0x0f, 0x94, 0xc0, //             sete %al
    0x0f, 0xb6, 0xc0, //             movzbl %al,%eax
    0x48, 0xc1, 0xe0, 0x03, //       shl $3,%rax
    0x48, 0x0f, 0xaf, 0xd1, //       imul %rcx,%rdx
];

/// Code bytes at `base`; everything else is unreadable.
#[derive(Clone)]
pub struct Code {
    pub base: u64,
    pub bytes: Vec<u8>,
    /// Number of `read_code` calls so far.
    pub reads: usize,
}

impl CodeReader for Code {
    fn read_code(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.reads += 1;
        let Some(off) = addr.checked_sub(self.base) else {
            return false;
        };
        let Ok(off) = usize::try_from(off) else {
            return false;
        };
        match self.bytes.get(off..off + buf.len()) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

/// Twice [`PREAMBLE`] followed by `pieces`, at [`BASE`]; returns the code and the address of each
/// piece. Twice, so that the 64 bytes before the first piece are all readable code. The rest of
/// the page is `int3` padding, as memory is readable page by page.
pub fn program(pieces: &[&[u8]]) -> (Code, Vec<u64>) {
    let mut bytes = [PREAMBLE, PREAMBLE].concat();
    let mut addrs = Vec::new();
    for piece in pieces {
        addrs.push(BASE + bytes.len() as u64);
        bytes.extend_from_slice(piece);
    }
    bytes.resize(bytes.len().next_multiple_of(PAGE), 0xcc);
    (
        Code {
            base: BASE,
            bytes,
            reads: 0,
        },
        addrs,
    )
}

/// Registers with every GPR set to a distinct, recognisable value and `ip` as given.
pub fn regs_at(ip: u64) -> UserRegs {
    UserRegs {
        ax: 0x1000_0000,
        bx: 0x2000_0000,
        cx: 0x3000_0000,
        dx: 0x4000_0000,
        si: 0x5000_0000,
        di: 0x6000_0000,
        bp: 0x7ffd_1000,
        sp: 0x7ffd_0000,
        ip,
        flags: 0x246,
        r8: 0x8000_0000,
        r9: 0x9000_0000,
        r10: 0xa000_0000,
        r11: 0xb000_0000,
        r12: 0xc000_0000,
        r13: 0xd000_0000,
        r14: 0xe000_0000,
        r15: 0xf000_0000,
    }
}

/// One recovery with a fresh decoder and no segment bases.
pub fn recover(
    code: &mut Code,
    regs: &UserRegs,
    point: SamplePoint,
) -> Result<Recovered, DropReason> {
    AddressDecoder::new().recover(code, regs, SegmentBases::default(), point)
}
