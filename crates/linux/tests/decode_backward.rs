//! Backward decoding: finding the instruction that ends at IP, on adversarial hand-made bytes,
//! across page boundaries, and on this test binary's own machine code.

mod decode_support;

use std::collections::BTreeSet;
use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::FileExt;

use decode_support::{BASE, Code, PAGE, PREAMBLE, program, recover, regs_at};
use iced_x86::{Decoder, DecoderOptions};
use udamon_linux::decode::{
    Access, AccessKind, CodeReader, DropReason, Origin, Recovered, SamplePoint,
    previous_instruction,
};

/// The instruction a forward decode from `from` decodes last, if it lands exactly on `ip`.
fn landing_from(code: &Code, from: u64, ip: u64) -> Option<u64> {
    let bytes = &code.bytes[(from - code.base) as usize..(ip - code.base) as usize];
    let mut last = None;
    // An instruction running past `ip` does not fit in `bytes` and decodes as invalid.
    for ins in Decoder::with_ip(64, bytes, from, DecoderOptions::NONE) {
        if ins.is_invalid() {
            return None;
        }
        last = Some(ins.ip());
    }
    last
}

#[test]
fn voting_picks_the_real_boundary_when_the_bytes_before_are_ambiguous() {
    let (mut code, at) = program(&[
        &[0xb9, 0x00, 0x00, 0x00, 0xb0], // mov $0xb0000000,%ecx
        // movabs $0x078b909090909090,%rax: its last bytes read `nop; nop; mov (%rdi),%eax`, and
        // a run entering at the 0xb0 above reads `mov $0x48,%al; mov $0x90909090,%eax; ...`.
        &[0x48, 0xb8, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x8b, 0x07],
        &[0x90], // nop   <- IP
    ]);
    let ip = at[2];
    let candidates: BTreeSet<u64> = (ip - 64..ip)
        .filter_map(|s| landing_from(&code, s, ip))
        .collect();
    assert!(candidates.contains(&at[1]));
    assert!(
        candidates.contains(&(ip - 2)),
        "the decoy `mov (%rdi),%eax` must be reachable"
    );

    assert_eq!(previous_instruction(&mut code, ip), Ok(at[1]));
    // Picking the decoy would give the address in RDI.
    assert_eq!(
        recover(&mut code, &regs_at(ip), SamplePoint::UserBoundary),
        Err(DropReason::NoMemoryOperand)
    );
}

/// Code at [`BASE`] (page-padded with `int3`) whose previous page is unreadable.
fn page_start_code(bytes: &[u8]) -> Code {
    let mut bytes = bytes.to_vec();
    bytes.resize(PAGE, 0xcc);
    Code {
        base: BASE,
        bytes,
        reads: 0,
    }
}

#[test]
fn the_longest_run_does_not_decide_alone() {
    // movabs $0xb848c29090909090,%rax. Entered at its 9th byte, it reads as another movabs
    // that ends at the 9th byte of the next one, so a run entering there stays out of step
    // for ever; entered anywhere else, the nops and `ret $0xb848` lead back into step.
    const TRAP: [u8; 10] = [0x48, 0xb8, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc2, 0x48, 0xb8];
    let mut bytes = vec![0x48, 0xb8]; // tail of an instruction that began on the previous page
    for _ in 0..6 {
        bytes.extend_from_slice(&TRAP);
    }
    let last = BASE + bytes.len() as u64;
    bytes.extend_from_slice(&[0x48, 0x8d, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00]); // lea 0x0(%rax,%rax,1),%rax
    let ip = BASE + bytes.len() as u64;
    bytes.push(0x90); // nop   <- IP
    let mut code = page_start_code(&bytes);

    // The run from the first readable byte (the longest) ends on a decoy inside the last TRAP.
    assert_eq!(landing_from(&code, BASE, ip), Some(last - 2));
    assert_eq!(previous_instruction(&mut code, ip), Ok(last));
}

#[test]
fn starts_inside_the_last_instructions_do_not_vote() {
    // Only 16 bytes before IP are readable. Most start offsets among them fall inside the
    // movabs and land on the decoy `mov (%rdi),%eax` in its immediate.
    let bytes = [
        0x48, 0x8b, 0x4b, 0x08, // mov 0x8(%rbx),%rcx
        0x31, 0xc0, //             xor %eax,%eax
        0x48, 0xb8, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x8b,
        0x07, // movabs $0x078b909090909090,%rax
        0x90, //                   nop   <- IP
    ];
    let ip = BASE + 16;
    let mut code = page_start_code(&bytes);
    let decoy_votes = (BASE..ip)
        .filter(|&s| landing_from(&code, s, ip) == Some(ip - 2))
        .count();
    assert!(decoy_votes > 8, "{decoy_votes} starts land on the decoy");
    assert_eq!(previous_instruction(&mut code, ip), Ok(BASE + 6));
}

#[test]
fn an_instruction_across_a_page_boundary_is_found() {
    // The page before BASE holds PREAMBLE padding then a 7-byte load starting 3 bytes before
    // BASE; BASE holds its last 4 bytes and a nop.
    let mut bytes = vec![0xcc; PAGE - PREAMBLE.len() - 3];
    bytes.extend_from_slice(PREAMBLE);
    bytes.extend_from_slice(&[0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00]); // mov 0x10(%rip),%rax
    bytes.push(0x90); // nop   <- IP
    bytes.resize(2 * PAGE, 0xcc);
    let mut code = Code {
        base: BASE - PAGE as u64,
        bytes,
        reads: 0,
    };
    let load = BASE - 3;
    let ip = load + 7;
    assert_eq!(previous_instruction(&mut code, ip), Ok(load));
    assert_eq!(
        recover(&mut code, &regs_at(ip), SamplePoint::UserBoundary),
        Ok(Recovered {
            addr: ip + 0x10,
            kind: AccessKind::Data,
            access: Access::Read,
            from: Origin::Prev,
        })
    );
}

#[test]
fn an_unreadable_previous_page_limits_decoding_to_the_current_page() {
    // Code starts at a page start; the page before is not mapped.
    let mut bytes = vec![
        0x48, 0x8b, 0x4b, 0x08, // mov 0x8(%rbx),%rcx
        0x48, 0x8b, 0x18, //       mov (%rax),%rbx      <- IP 1
        0x90, //                   nop                  <- IP 2
    ];
    bytes.resize(PAGE, 0xcc);
    let mut code = Code {
        base: BASE,
        bytes,
        reads: 0,
    };
    assert_eq!(previous_instruction(&mut code, BASE + 4), Ok(BASE));
    assert_eq!(previous_instruction(&mut code, BASE + 7), Ok(BASE + 4));
    assert_eq!(
        previous_instruction(&mut code, BASE),
        Err(DropReason::CodeUnreadable)
    );
    // At the page start nothing before IP can be read, so the instruction at IP is used.
    let regs = regs_at(BASE);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(Recovered {
            addr: regs.bx + 8,
            kind: AccessKind::Data,
            access: Access::Read,
            from: Origin::Cur,
        })
    );
}

/// Reads this process's own memory.
struct SelfMem(File);

impl CodeReader for SelfMem {
    fn read_code(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.0.read_exact_at(buf, addr).is_ok()
    }
}

/// Memory-heavy code for the real-code test: loads, stores, read-modify-writes, indexing.
#[inline(never)]
fn churn(data: &mut [u64], order: &[usize]) -> u64 {
    let mut acc = 0u64;
    for (k, &i) in order.iter().enumerate() {
        let j = i % data.len();
        data[j] = data[j].wrapping_add(k as u64);
        let other = j.wrapping_mul(7) % data.len();
        acc = acc.wrapping_add(data[other] ^ (acc >> 3));
        if acc & 1 == 0 {
            data[other] = acc;
        }
    }
    acc
}

#[test]
fn backward_decoding_agrees_with_a_linear_decode_of_real_code() {
    let mut data: Vec<u64> = (0..1024).collect();
    let order: Vec<usize> = (0..4096).map(|i| i * 31 + 7).collect();
    black_box(churn(black_box(&mut data), black_box(&order)));

    let start = churn as fn(&mut [u64], &[usize]) -> u64 as usize as u64;
    let mut mem = SelfMem(File::open("/proc/self/mem").expect("open /proc/self/mem"));
    // Linear decoding from a function start is exact until data or padding that does not decode;
    // 2 KiB covers `churn` and whatever the linker put after it.
    let mut bytes = vec![0u8; 2048];
    assert!(
        mem.read_code(start, &mut bytes),
        "read own code at {start:#x}"
    );
    let mut boundaries = Vec::new();
    for ins in Decoder::with_ip(64, &bytes, start, DecoderOptions::NONE) {
        if ins.is_invalid() {
            break;
        }
        boundaries.push(ins.ip());
    }
    assert!(
        boundaries.len() > 100,
        "only {} instructions decoded",
        boundaries.len()
    );

    // The first few boundaries have the previous function's tail (or padding) in their window.
    let mut checked = 0;
    for pair in boundaries[4..].windows(2) {
        let (prev, ip) = (pair[0], pair[1]);
        assert_eq!(
            previous_instruction(&mut mem, ip),
            Ok(prev),
            "instruction before {ip:#x} (function at {start:#x})"
        );
        checked += 1;
    }
    assert!(checked > 100);
}
