//! The comb policy on hand-assembled code: which instruction a sample is attributed to, and the
//! address computed for it. Bytes were produced with GNU as and checked with objdump.

mod decode_support;

use decode_support::{BASE, program, recover, regs_at};
use udamon_linux::decode::{
    Access, AccessKind, AddressDecoder, DropReason, Origin, Recovered, SAMPLE_REGS_USER_MASK,
    SamplePoint, SegmentBases, Unresolved, UserRegs,
};

const DF: u64 = 1 << 10;

fn data(addr: u64, access: Access, from: Origin) -> Recovered {
    Recovered {
        addr,
        kind: AccessKind::Data,
        access,
        from,
    }
}

fn stack(addr: u64, access: Access, from: Origin) -> Recovered {
    Recovered {
        addr,
        kind: AccessKind::Stack,
        access,
        from,
    }
}

#[test]
fn skid_attributes_the_sample_to_the_instruction_before_ip() {
    let (mut code, at) = program(&[
        &[0x49, 0x01, 0x04, 0xff], // add %rax,(%r15,%rdi,8)
        &[0x48, 0x39, 0xf7],       // cmp %rsi,%rdi      <- IP
    ]);
    let mut regs = regs_at(at[1]);
    regs.r15 = 0x7f00_0000_0000;
    regs.di = 3;
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(data(0x7f00_0000_0018, Access::ReadWrite, Origin::Prev))
    );
    // The instruction at IP has no memory operand: without skid handling there is nothing.
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::NotExecuted),
        Err(DropReason::NoMemoryOperand)
    );
}

#[test]
fn clobbered_base_falls_back_to_the_instruction_at_ip() {
    let (mut code, at) = program(&[
        &[0x48, 0x8b, 0x00],       // mov (%rax),%rax
        &[0x48, 0x8b, 0x4b, 0x08], // mov 0x8(%rbx),%rcx   <- IP
    ]);
    let regs = regs_at(at[1]);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(data(regs.bx + 8, Access::Read, Origin::Cur))
    );
}

#[test]
fn clobbered_index_without_fallback_is_dropped_as_clobbered() {
    let (mut code, at) = program(&[
        &[0x0f, 0xb6, 0x04, 0x02], // movzbl (%rdx,%rax,1),%eax  (writes its own index)
        &[0x48, 0x83, 0xc1, 0x01], // add $0x1,%rcx              <- IP
    ]);
    let regs = regs_at(at[1]);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Err(DropReason::Clobbered)
    );
}

#[test]
fn instructions_that_overwrite_their_address_registers_count_as_clobbered() {
    let (mut code, at) = program(&[
        &[0x48, 0x87, 0x00],       // xchg %rax,(%rax)
        &[0x90],                   // nop                 <- IP 1
        &[0xc9],                   // leave
        &[0x90],                   // nop                 <- IP 2
        &[0xc8, 0x10, 0x00, 0x00], // enter $0x10,$0x0
        &[0x90],                   // nop                 <- IP 3
        &[0x5c],                   // pop %rsp (loads RSP: no increment to undo)
        &[0x90],                   // nop                 <- IP 4
    ]);
    for ip in [at[1], at[3], at[5], at[7]] {
        assert_eq!(
            recover(&mut code, &regs_at(ip), SamplePoint::UserBoundary),
            Err(DropReason::Clobbered),
            "IP {ip:#x}"
        );
    }
}

#[test]
fn forward_jump_target_is_not_attributed_to_the_instruction_before_it() {
    let (mut code, at) = program(&[
        &[0xeb, 0x02], // jmp 1f
        &[0x8b, 0x0e], // mov (%rsi),%ecx
        &[0xff, 0xc0], // 1: inc %eax          <- IP
        &[0xc3],       // ret
    ]);
    let regs = regs_at(at[2]);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Err(DropReason::BranchTarget)
    );

    // The same code with the jump replaced by a 2-byte nop: now it is attributed.
    code.bytes[(at[0] - BASE) as usize..][..2].copy_from_slice(&[0x66, 0x90]); // xchg %ax,%ax
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(data(regs.si, Access::Read, Origin::Prev))
    );
}

#[test]
fn loop_head_and_call_target_are_branch_targets() {
    let (mut code, at) = program(&[
        &[0x8b, 0x0e],                   // mov (%rsi),%ecx
        &[0xff, 0xc0],                   // 2: inc %eax          <- IP 1
        &[0x39, 0xc8],                   // cmp %ecx,%eax
        &[0x75, 0xfa],                   // jne 2b
        &[0xe8, 0x02, 0x00, 0x00, 0x00], // call 3f
        &[0x8b, 0x0e],                   // mov (%rsi),%ecx
        &[0xff, 0xc0],                   // 3: inc %eax          <- IP 2
        &[0xc3],                         // ret
    ]);
    for ip in [at[1], at[6]] {
        assert_eq!(
            recover(&mut code, &regs_at(ip), SamplePoint::UserBoundary),
            Err(DropReason::BranchTarget),
            "IP {ip:#x}"
        );
    }
}

#[test]
fn branch_target_falls_back_to_the_instruction_at_ip() {
    let (mut code, at) = program(&[
        &[0xeb, 0x02],       // jmp 1f
        &[0x8b, 0x0e],       // mov (%rsi),%ecx
        &[0x48, 0x8b, 0x18], // 1: mov (%rax),%rbx    <- IP
    ]);
    let regs = regs_at(at[2]);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(data(regs.ax, Access::Read, Origin::Cur))
    );
}

#[test]
fn after_a_return_or_call_the_previous_instruction_is_not_used() {
    let (mut code, at) = program(&[
        &[0xc3],                         // ret
        &[0x48, 0x8b, 0x18],             // mov (%rax),%rbx      <- IP 1
        &[0xe8, 0x00, 0x00, 0x00, 0x00], // call .+5
        &[0x90],                         // nop                  <- IP 2
    ]);
    let regs = regs_at(at[1]);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(data(regs.ax, Access::Read, Origin::Cur))
    );
    assert_eq!(
        recover(&mut code, &regs_at(at[3]), SamplePoint::UserBoundary),
        Err(DropReason::AfterBranch)
    );
}

#[test]
fn push_and_pop_are_stack_references_with_rsp_corrected() {
    let (mut code, at) = program(&[
        &[0x53],                   // push %rbx
        &[0x5b],                   // pop %rbx
        &[0xff, 0x74, 0x24, 0x08], // push 0x8(%rsp)
        &[0x8f, 0x44, 0x24, 0x08], // pop 0x8(%rsp)
        &[0x90],                   // nop
    ]);
    let sp = regs_at(0).sp;
    let prev = |code: &mut decode_support::Code, ip| {
        recover(code, &regs_at(ip), SamplePoint::UserBoundary)
    };
    // After push %rbx, RSP points at the slot just written.
    assert_eq!(
        prev(&mut code, at[1]),
        Ok(stack(sp, Access::Write, Origin::Prev))
    );
    // After pop %rbx, the slot read is just below RSP.
    assert_eq!(
        prev(&mut code, at[2]),
        Ok(stack(sp - 8, Access::Read, Origin::Prev))
    );
    // push 0x8(%rsp) read 8 above the RSP it started with, which is 8 above today's RSP; the
    // explicit operand is preferred over the stack slot.
    assert_eq!(
        prev(&mut code, at[3]),
        Ok(data(sp + 16, Access::Read, Origin::Prev))
    );
    // pop 0x8(%rsp) computes its destination with the already incremented RSP.
    assert_eq!(
        prev(&mut code, at[4]),
        Ok(data(sp + 8, Access::Write, Origin::Prev))
    );
    // As the instruction about to run, push %rbx writes below RSP.
    assert_eq!(
        recover(&mut code, &regs_at(at[0]), SamplePoint::NotExecuted),
        Ok(stack(sp - 8, Access::Write, Origin::Cur))
    );
}

#[test]
fn rep_movsb_at_ip_gives_the_current_element() {
    let (mut code, at) = program(&[
        &[0x48, 0x8b, 0x0b], // mov (%rbx),%rcx
        &[0xf3, 0xa4],       // rep movsb          <- IP (interrupted midway)
        &[0x90],             // nop
    ]);
    let mut regs = regs_at(at[1]);
    regs.si = 0x7f00_0000_1000;
    regs.di = 0x7f00_0000_9000;
    // The previous instruction has a usable operand, but a sample on a rep string instruction
    // is almost always inside it; it copies an element each step, so one sample in two gives
    // the destination it writes and the other the source it reads.
    let mut decoder = AddressDecoder::new();
    let mut sample = || {
        decoder.recover(
            &mut code,
            &regs,
            SegmentBases::default(),
            SamplePoint::UserBoundary,
        )
    };
    let (first, second) = (sample(), sample());
    assert_eq!(first, Ok(data(regs.si, Access::Read, Origin::Cur)));
    assert_eq!(second, Ok(data(regs.di, Access::Write, Origin::Cur)));
    assert_eq!(sample(), first, "in turn");
}

#[test]
fn rep_cmpsb_at_ip_gives_both_compared_elements_in_turn() {
    let (mut code, at) = program(&[
        &[0xf3, 0xa6], // repz cmpsb %es:(%rdi),%ds:(%rsi)   <- IP
        &[0x90],       // nop
    ]);
    let mut regs = regs_at(at[0]);
    regs.si = 0x7f00_0000_1000;
    regs.di = 0x7f00_0000_9000;
    let mut decoder = AddressDecoder::new();
    let mut addrs: Vec<u64> = (0..4)
        .map(|_| {
            decoder
                .recover(
                    &mut code,
                    &regs,
                    SegmentBases::default(),
                    SamplePoint::UserBoundary,
                )
                .unwrap()
                .addr
        })
        .collect();
    addrs.sort_unstable();
    assert_eq!(addrs, [regs.si, regs.si, regs.di, regs.di]);
}

#[test]
fn completed_string_instructions_step_back_one_element_according_to_df() {
    let (mut code, at) = program(&[
        &[0xf3, 0xa4], // rep movsb
        &[0x90],       // nop                <- IP 1
        &[0x48, 0xab], // stos %rax,%es:(%rdi)
        &[0x90],       // nop                <- IP 2
    ]);
    let up = regs_at(at[1]);
    let down = UserRegs {
        flags: up.flags | DF,
        ..up
    };
    let sample = |code: &mut decode_support::Code, regs: &UserRegs| {
        recover(code, regs, SamplePoint::UserBoundary)
    };
    assert_eq!(
        sample(&mut code, &up),
        Ok(data(up.di - 1, Access::Write, Origin::Prev))
    );
    assert_eq!(
        sample(&mut code, &down),
        Ok(data(up.di + 1, Access::Write, Origin::Prev))
    );

    let up = UserRegs { ip: at[3], ..up };
    let down = UserRegs { ip: at[3], ..down };
    assert_eq!(
        sample(&mut code, &up),
        Ok(data(up.di - 8, Access::Write, Origin::Prev))
    );
    assert_eq!(
        sample(&mut code, &down),
        Ok(data(up.di + 8, Access::Write, Origin::Prev))
    );
}

#[test]
fn rip_relative_operands_use_the_instructions_own_next_ip() {
    let (mut code, at) = program(&[
        &[0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00], // mov 0x10(%rip),%rax
        &[0x90],                                     // nop
    ]);
    let target = at[0] + 7 + 0x10;
    assert_eq!(
        recover(&mut code, &regs_at(at[1]), SamplePoint::UserBoundary),
        Ok(data(target, Access::Read, Origin::Prev))
    );
    assert_eq!(
        recover(&mut code, &regs_at(at[0]), SamplePoint::NotExecuted),
        Ok(data(target, Access::Read, Origin::Cur))
    );
}

#[test]
fn fs_and_gs_operands_need_the_segment_bases() {
    let (mut code, at) = program(&[
        &[0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00], // mov %fs:0x28,%rax
        &[0x90],                                                 // nop    <- IP
        &[0x65, 0x48, 0x8b, 0x13],                               // mov %gs:(%rbx),%rdx
    ]);
    let regs = regs_at(at[1]);
    let bases = SegmentBases {
        fs: Some(0x7f12_3456_7000),
        gs: Some(0x7f99_0000_0000),
    };
    let mut decoder = AddressDecoder::new();
    assert_eq!(
        decoder.recover(&mut code, &regs, bases, SamplePoint::UserBoundary),
        Ok(data(0x7f12_3456_7028, Access::Read, Origin::Prev))
    );
    assert_eq!(
        decoder.recover(
            &mut code,
            &regs,
            SegmentBases::default(),
            SamplePoint::UserBoundary
        ),
        Err(DropReason::Unresolved(Unresolved::Segment))
    );
    let regs = regs_at(at[2]);
    assert_eq!(
        decoder.recover(&mut code, &regs, bases, SamplePoint::NotExecuted),
        Ok(data(0x7f99_0000_0000 + regs.bx, Access::Read, Origin::Cur))
    );
    let fs_only = SegmentBases { gs: None, ..bases };
    assert_eq!(
        decoder.recover(&mut code, &regs, fs_only, SamplePoint::NotExecuted),
        Err(DropReason::Unresolved(Unresolved::Segment))
    );
}

#[test]
fn lea_nop_and_prefetch_do_not_access_memory() {
    let (mut code, at) = program(&[
        &[0x48, 0x8d, 0x58, 0x08],       // lea 0x8(%rax),%rbx
        &[0x66, 0x0f, 0x1f, 0x04, 0x00], // nopw (%rax,%rax,1)
        &[0x0f, 0x18, 0x08],             // prefetcht0 (%rax)
        &[0x90],                         // nop
    ]);
    for ip in [at[1], at[2], at[3]] {
        assert_eq!(
            recover(&mut code, &regs_at(ip), SamplePoint::UserBoundary),
            Err(DropReason::NoMemoryOperand),
            "IP {ip:#x}"
        );
    }
}

#[test]
fn addr32_operands_wrap_at_four_gib() {
    let (mut code, at) = program(&[
        &[0x67, 0x8b, 0x18], // mov (%eax),%ebx
        &[0x90],             // nop
    ]);
    let mut regs = regs_at(at[1]);
    regs.ax = 0x1234_5678_9abc_def0;
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(data(0x9abc_def0, Access::Read, Origin::Prev))
    );
}

#[test]
fn vector_gathers_are_unresolved() {
    let (mut code, at) = program(&[
        &[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88], // vpgatherdd %ymm2,(%rax,%ymm1,4),%ymm0
        &[0x90],                               // nop
    ]);
    for (ip, point) in [
        (at[0], SamplePoint::NotExecuted),
        (at[1], SamplePoint::UserBoundary),
    ] {
        assert_eq!(
            recover(&mut code, &regs_at(ip), point),
            Err(DropReason::Unresolved(Unresolved::Vsib))
        );
    }
}

#[test]
fn kernel_entry_samples_use_the_instruction_at_ip_unless_after_a_syscall() {
    let (mut code, at) = program(&[
        &[0x0f, 0x05],       // syscall
        &[0x48, 0x8b, 0x18], // mov (%rax),%rbx    <- IP 1
        &[0x48, 0x8b, 0x0e], // mov (%rsi),%rcx    <- IP 2
    ]);
    let regs = regs_at(at[1]);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::KernelEntry),
        Err(DropReason::InSyscall)
    );
    // A page fault on IP 2: the faulting instruction is the one at IP, not the one before.
    let regs = regs_at(at[2]);
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::KernelEntry),
        Ok(data(regs.si, Access::Read, Origin::Cur))
    );
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(data(regs.ax, Access::Read, Origin::Prev))
    );
    // The scheduler tick: in a system call after one, an instruction boundary otherwise.
    assert_eq!(
        recover(&mut code, &regs_at(at[1]), SamplePoint::Tick),
        Err(DropReason::InSyscall)
    );
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::Tick),
        Ok(data(regs.ax, Access::Read, Origin::Prev))
    );
}

#[test]
fn unreadable_or_invalid_code_is_reported() {
    let (mut code, at) = program(&[
        &[0x06], // (push %es: invalid in 64-bit mode)   <- IP
        &[0x06],
    ]);
    assert_eq!(
        recover(&mut code, &regs_at(at[0]), SamplePoint::NotExecuted),
        Err(DropReason::DecodeFailed)
    );
    assert_eq!(
        recover(&mut code, &regs_at(0x10_0000), SamplePoint::UserBoundary),
        Err(DropReason::CodeUnreadable)
    );
}

#[test]
fn drop_reasons_have_distinct_stable_names_and_dense_indices() {
    for (i, reason) in DropReason::ALL.iter().enumerate() {
        assert_eq!(reason.index(), i);
        assert_eq!(reason.to_string(), reason.name());
        assert!(
            reason
                .name()
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
        );
    }
    let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), DropReason::COUNT);
}

#[test]
fn perf_register_order_follows_the_kernel_enum() {
    // enum perf_event_x86_regs: AX..FLAGS are bits 0..=9, R8..R15 are bits 16..=23.
    let expected: u64 = (0..=9).chain(16..=23).map(|bit| 1u64 << bit).sum();
    assert_eq!(SAMPLE_REGS_USER_MASK, expected);
    assert_eq!(UserRegs::COUNT, 18);

    let values: [u64; UserRegs::COUNT] = std::array::from_fn(|i| 100 + i as u64);
    let regs = UserRegs::from_perf(&values);
    let in_order = [
        regs.ax, regs.bx, regs.cx, regs.dx, regs.si, regs.di, regs.bp, regs.sp, regs.ip,
        regs.flags, regs.r8, regs.r9, regs.r10, regs.r11, regs.r12, regs.r13, regs.r14, regs.r15,
    ];
    assert_eq!(in_order, values);
    assert!(!regs.direction_flag());
    assert!(UserRegs { flags: DF, ..regs }.direction_flag());
}

#[test]
fn a_pointer_chase_gives_the_pointer_it_loaded_when_nothing_else_does() {
    let (mut code, at) = program(&[
        &[0x48, 0x8b, 0x40, 0x08], // mov 0x8(%rax),%rax   (p = p->next)
        &[0x48, 0x85, 0xc0],       // test %rax,%rax        <- IP
    ]);
    let mut regs = regs_at(at[1]);
    regs.ax = 0x7f00_1234_5678;
    assert_eq!(
        recover(&mut code, &regs, SamplePoint::UserBoundary),
        Ok(Recovered {
            addr: 0x7f00_1234_5678,
            kind: AccessKind::Chased,
            access: Access::Read,
            from: Origin::Prev,
        }),
        "the next node, where the chase goes next"
    );
    // A byte load into its own index register loads a number, not a pointer.
    let (mut code, at) = program(&[
        &[0x0f, 0xb6, 0x04, 0x02], // movzbl (%rdx,%rax,1),%eax
        &[0x48, 0x85, 0xc0],       // test %rax,%rax        <- IP
    ]);
    assert_eq!(
        recover(&mut code, &regs_at(at[1]), SamplePoint::UserBoundary),
        Err(DropReason::Clobbered)
    );
}
