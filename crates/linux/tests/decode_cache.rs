//! The per-IP decode cache: hits read no code, invalidation forgets exactly what it must, and
//! the number of cached IPs stays bounded.

mod decode_support;

use decode_support::{BASE, Code, program, regs_at};
use udamon_linux::decode::{
    Access, AccessKind, AddressDecoder, DropReason, Origin, Recovered, SamplePoint, SegmentBases,
};

fn sample(decoder: &mut AddressDecoder, code: &mut Code, ip: u64) -> Result<Recovered, DropReason> {
    decoder.recover(
        code,
        &regs_at(ip),
        SegmentBases::default(),
        SamplePoint::UserBoundary,
    )
}

/// `mov (%rbx),%rcx` followed by `nop`: a sample at the nop gives RBX.
fn load_then_nop() -> (Code, u64) {
    let (code, at) = program(&[
        &[0x48, 0x8b, 0x0b], // mov (%rbx),%rcx
        &[0x90],             // nop      <- IP
    ]);
    (code, at[1])
}

#[test]
fn a_cached_ip_reads_no_code() {
    let (mut code, ip) = load_then_nop();
    let mut decoder = AddressDecoder::new();
    let first = sample(&mut decoder, &mut code, ip);
    assert_eq!(first.map(|r| r.addr), Ok(regs_at(ip).bx));
    assert!(code.reads > 0);
    assert_eq!(decoder.cached_ips(), 1);

    let reads = code.reads;
    // Different registers, same IP: the address follows the registers, the code is not re-read.
    let mut regs = regs_at(ip);
    regs.bx = 0x1234_5000;
    let again = decoder.recover(
        &mut code,
        &regs,
        SegmentBases::default(),
        SamplePoint::UserBoundary,
    );
    assert_eq!(
        again,
        Ok(Recovered {
            addr: 0x1234_5000,
            kind: AccessKind::Data,
            access: Access::Read,
            from: Origin::Prev,
        })
    );
    assert_eq!(code.reads, reads);
}

#[test]
fn invalidation_forgets_ips_whose_code_changed() {
    let (mut code, ip) = load_then_nop();
    let mut decoder = AddressDecoder::new();
    assert!(sample(&mut decoder, &mut code, ip).is_ok());

    // The code is replaced (say, munmap and a new mapping) by `lea (%rbx),%rcx`.
    let at = (ip - 3 - BASE) as usize;
    code.bytes[at..at + 3].copy_from_slice(&[0x48, 0x8d, 0x0b]);
    // Until told, the decoder keeps its analysis.
    assert!(sample(&mut decoder, &mut code, ip).is_ok());

    // Ranges the analysis did not read change nothing: far away, or ending exactly where the
    // 4 KiB branch-target window before IP starts.
    decoder.invalidate_range(0x7f00_0000_0000, 0x7f00_0000_1000);
    decoder.invalidate_range(ip - 8192, ip - 4096);
    assert!(sample(&mut decoder, &mut code, ip).is_ok());

    // A range that ends within the branch-target window before IP forgets it.
    decoder.invalidate_range(ip - 8192, ip - 4000);
    assert_eq!(
        sample(&mut decoder, &mut code, ip),
        Err(DropReason::NoMemoryOperand)
    );
    // So does one that starts within the window after IP.
    code.bytes[at..at + 3].copy_from_slice(&[0x48, 0x8b, 0x0b]);
    decoder.invalidate_range(ip + 4000, ip + 8192);
    assert!(sample(&mut decoder, &mut code, ip).is_ok());

    // invalidate_all forgets everything.
    code.bytes[at..at + 3].copy_from_slice(&[0x48, 0x8d, 0x0b]);
    decoder.invalidate_all();
    assert_eq!(decoder.cached_ips(), 0);
    assert_eq!(
        sample(&mut decoder, &mut code, ip),
        Err(DropReason::NoMemoryOperand)
    );
}

#[test]
fn unreadable_code_is_not_cached() {
    let (mut code, ip) = load_then_nop();
    let mut gone = Code {
        bytes: Vec::new(),
        ..code.clone()
    };
    let mut decoder = AddressDecoder::new();
    assert_eq!(
        sample(&mut decoder, &mut gone, ip),
        Err(DropReason::CodeUnreadable)
    );
    assert_eq!(decoder.cached_ips(), 0);
    assert!(sample(&mut decoder, &mut code, ip).is_ok());
}

#[test]
fn the_cache_is_bounded_and_keeps_ips_in_use() {
    // 200 one-byte instructions: each is a distinct IP.
    let nops = [0x90u8; 200];
    let (mut code, at) = program(&[&[0x48, 0x8b, 0x0b], &nops]); // mov (%rbx),%rcx; nop × 200
    let hot = at[1];
    let mut decoder = AddressDecoder::with_max_entries(8);
    assert!(sample(&mut decoder, &mut code, hot).is_ok());
    for ip in at[1] + 1..at[1] + 200 {
        assert_eq!(
            sample(&mut decoder, &mut code, ip),
            Err(DropReason::NoMemoryOperand)
        );
        assert!(decoder.cached_ips() <= 8, "{} cached", decoder.cached_ips());
        // The hot IP is sampled again between new ones and must stay cached.
        let reads = code.reads;
        assert!(sample(&mut decoder, &mut code, hot).is_ok());
        assert_eq!(code.reads, reads, "hot IP re-decoded after {ip:#x}");
    }
    // The first cold IP has long been evicted.
    let reads = code.reads;
    let _ = sample(&mut decoder, &mut code, at[1] + 1);
    assert!(code.reads > reads);
}
