//! Finding instructions in raw x86-64 code: the one at an address, the one that ends at an
//! address (backward decoding by voting), and whether an address is the target of a nearby
//! direct branch.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};

use super::{CodeReader, DropReason};

const PAGE: u64 = 4096;
/// Longest x86 instruction.
const MAX_INSN: usize = 15;
/// How many bytes before IP backward decoding looks at. Against a linear decode of whole
/// `.text` sections, 64 bytes gets 0.007 % (libc), 0.012 % (python) and 0.1 % (a Rust debug
/// build, whose zero-filled immediates sustain a false chain) of boundaries wrong; 256 bytes
/// gets 0, 0 and 0.001 %, for about 256 single-instruction decodes per new IP.
const BACK_BYTES: usize = 256;
/// Decoding needs a few instructions to fall into step with the real boundaries, so start
/// offsets closer than this to IP are not counted as votes.
const MIN_RUN: usize = 16;
/// Half-width of the window searched for direct branches to IP.
pub(crate) const BRANCH_WINDOW: u64 = 4096;
/// Size of the scratch buffer [`is_direct_branch_target`] needs.
pub(crate) const BRANCH_SCRATCH: usize = 2 * BRANCH_WINDOW as usize;
/// No valid instruction starts here (a sentinel in offset tables of at most `BACK_BYTES`).
const NONE: u16 = u16::MAX;

fn page_start(addr: u64) -> u64 {
    addr & !(PAGE - 1)
}

fn decode_one(bytes: &[u8], ip: u64) -> Option<Instruction> {
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let ins = decoder.decode();
    (!ins.is_invalid()).then_some(ins)
}

/// The instruction at `ip`.
pub(crate) fn instruction_at<R: CodeReader + ?Sized>(
    code: &mut R,
    ip: u64,
) -> Result<Instruction, DropReason> {
    let mut buf = [0u8; MAX_INSN];
    let mut len = MAX_INSN;
    if !code.read_code(ip, &mut buf) {
        // The next page may be unmapped while a short instruction still fits in this one.
        len = ((page_start(ip) + PAGE - ip) as usize).min(MAX_INSN);
        if len == MAX_INSN || !code.read_code(ip, &mut buf[..len]) {
            return Err(DropReason::CodeUnreadable);
        }
    }
    decode_one(&buf[..len], ip).ok_or(DropReason::DecodeFailed)
}

/// The instruction that ends exactly at `ip`, by address.
///
/// x86 code cannot be decoded backwards, but forward decoding falls into step with the real
/// instruction boundaries after a few instructions. So decode forward from every start offset
/// in the `BACK_BYTES` bytes before `ip` (except the last `MIN_RUN`) and let each start whose
/// run lands exactly on `ip` vote for the instruction it decoded last; the most votes win, a
/// tie going to the candidate that reached that count first. If the page before `ip`'s page
/// cannot be read, only the bytes of `ip`'s page are used.
pub(crate) fn previous_instruction<R: CodeReader + ?Sized>(
    code: &mut R,
    ip: u64,
) -> Result<Instruction, DropReason> {
    let mut buf = [0u8; BACK_BYTES];
    let lo = ip.saturating_sub(BACK_BYTES as u64);
    let len = (ip - lo) as usize;
    let split = page_start(ip).max(lo);
    let first = (split - lo) as usize;
    if split < ip && !code.read_code(split, &mut buf[first..len]) {
        return Err(DropReason::CodeUnreadable);
    }
    let first = if first > 0 && code.read_code(lo, &mut buf[..first]) {
        0
    } else {
        first
    };
    if first == len {
        return Err(DropReason::CodeUnreadable);
    }
    let bytes = &buf[..len];

    // landing[o]: the start offset of the instruction ending at `len` that a run from `o`
    // reaches, or NONE. Filled from the end, so each run reuses the runs after it.
    let mut decoder = Decoder::with_ip(64, bytes, lo, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    let mut landing = [NONE; BACK_BYTES];
    for o in (first..len).rev() {
        if decoder.set_position(o).is_err() {
            continue;
        }
        decoder.set_ip(lo + o as u64);
        decoder.decode_out(&mut ins);
        if ins.is_invalid() {
            continue;
        }
        let next = o + ins.len();
        landing[o] = if next == len {
            o as u16
        } else if next < len {
            landing[next]
        } else {
            NONE
        };
    }

    let last_start = len.saturating_sub(MIN_RUN).max(first);
    let mut votes = [0u16; BACK_BYTES];
    let mut best: Option<usize> = None;
    for &candidate in &landing[first..=last_start] {
        if candidate == NONE {
            continue;
        }
        let c = usize::from(candidate);
        votes[c] += 1;
        if best.is_none_or(|b| votes[c] > votes[b]) {
            best = Some(c);
        }
    }
    let start = best.ok_or(DropReason::DecodeFailed)?;
    decode_one(&bytes[start..], lo + start as u64).ok_or(DropReason::DecodeFailed)
}

/// Whether a direct `jmp`, `jcc` or `call` within `BRANCH_WINDOW` bytes of `ip` targets `ip`,
/// found by a linear decode of the readable pages around `ip`. When it is, the instruction just
/// before `ip` by address need not be the one that ran before `ip`. `scratch` must hold
/// `BRANCH_SCRATCH` bytes.
pub(crate) fn is_direct_branch_target<R: CodeReader + ?Sized>(
    code: &mut R,
    ip: u64,
    scratch: &mut [u8],
) -> bool {
    let lo = ip.saturating_sub(BRANCH_WINDOW);
    let hi = ip.saturating_add(BRANCH_WINDOW);
    let scratch = &mut scratch[..(hi - lo) as usize];
    // Page-sized pieces of [lo, hi), as offsets into `scratch`.
    let piece = |addr: u64| -> (usize, usize) {
        let start = page_start(addr).max(lo);
        let end = (page_start(addr) + PAGE).min(hi);
        ((start - lo) as usize, (end - lo) as usize)
    };
    let read = |code: &mut R, scratch: &mut [u8], (s, e): (usize, usize)| {
        code.read_code(lo + s as u64, &mut scratch[s..e])
    };

    let (mut from, mut to) = piece(ip);
    if !read(code, scratch, (from, to)) {
        return false;
    }
    while from > 0 {
        let p = piece(lo + from as u64 - 1);
        if !read(code, scratch, p) {
            break;
        }
        from = p.0;
    }
    while to < scratch.len() {
        let p = piece(lo + to as u64);
        if !read(code, scratch, p) {
            break;
        }
        to = p.1;
    }

    let mut decoder = Decoder::with_ip(
        64,
        &scratch[from..to],
        lo + from as u64,
        DecoderOptions::NONE,
    );
    let mut ins = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut ins);
        let direct = matches!(
            ins.flow_control(),
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call
        );
        // Indirect forms report target 0, which `ip` never is for user code.
        if direct && ins.near_branch_target() == ip {
            return true;
        }
    }
    false
}
