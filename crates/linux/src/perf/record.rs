//! perf ring-buffer records: their layouts (perf_event_open(2), `enum perf_event_type`) and the
//! typed records udamon uses, parsed from the bytes of one record.

use super::NR_SAMPLE_REGS;
use perf_event_open_sys::bindings as b;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// One sample of the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub pid: u32,
    pub tid: u32,
    /// CLOCK_MONOTONIC, nanoseconds.
    pub time_ns: u64,
    /// The CPU whose ring buffer held the sample (the CPU it was taken on).
    pub cpu: u32,
    /// Where the sample was taken: a user IP, or a kernel IP for kernel-mode samples (the tick
    /// tracepoint always gives a kernel IP; the user IP is then `regs[reg::IP]`).
    pub ip: u64,
    /// The sample was taken in kernel mode (`PERF_RECORD_MISC_KERNEL`).
    pub in_kernel: bool,
    /// `REGS_ABI_64` when `regs` holds the user registers; `REGS_ABI_NONE` when there were none
    /// (no user context, or a source without registers such as `pmu`), `regs` is then all zero.
    pub abi: u64,
    /// The interrupted user context's registers, in [`SAMPLE_REGS_USER`](super::SAMPLE_REGS_USER)
    /// order (see [`reg`](super::reg)).
    pub regs: [u64; NR_SAMPLE_REGS],
    /// The data address, for `pmu` sources (`PERF_SAMPLE_ADDR`).
    pub addr: Option<u64>,
    /// The physical data address, when asked for and provided.
    pub phys_addr: Option<u64>,
    /// The user call chain (`PERF_SAMPLE_CALLCHAIN`), when asked for, innermost first: the
    /// interrupted instruction pointer, then the return addresses found by walking the frame
    /// pointers; at most [`MAX_CALL_STACK`]. Empty (no allocation) without call chains.
    pub callchain: Vec<u64>,
}

/// Most user frames a sample's call chain keeps (`perf_event_attr.sample_max_stack`). Each
/// frame costs 8 bytes in the ring and a site in the record; 32 frames hold the interesting
/// part of almost every program's stack (deep recursion is cut, its innermost frames kept),
/// and stay well under the kernel's `perf_event_max_stack` (127 by default).
pub const MAX_CALL_STACK: usize = 32;

/// `PERF_CONTEXT_*` markers in a call chain start at this value (`PERF_CONTEXT_MAX` = -4095):
/// they say which mode the frames after them belong to.
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;

/// A record from the ring buffer. Every record carries the CLOCK_MONOTONIC time at which the
/// kernel wrote it, so records from different CPUs can be merged in time order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfRecord {
    Sample(Sample),
    /// The ring was full and the kernel dropped `lost` records (samples and side-band records).
    Lost {
        lost: u64,
        time_ns: u64,
    },
    /// The thread `tid` of `pid` executed a new program; `comm` is its new name (the basename
    /// of the executed file, at most 15 bytes). Mappings seen so far are gone.
    Exec {
        pid: u32,
        tid: u32,
        comm: String,
        time_ns: u64,
    },
    /// A thread renamed itself (prctl PR_SET_NAME, pthread_setname_np).
    Comm {
        pid: u32,
        tid: u32,
        comm: String,
        time_ns: u64,
    },
    /// A new mapping (code or data; also emitted for mprotect and brk changes). Unmappings are
    /// not reported by perf: re-read /proc/PID/maps to see them.
    Mmap {
        pid: u32,
        tid: u32,
        addr: u64,
        len: u64,
        /// Offset into the file, in bytes.
        pgoff: u64,
        /// `PROT_*` bits.
        prot: u32,
        /// `MAP_*` bits.
        flags: u32,
        /// The backing file, or a pseudo-name (`//anon`, `[heap]`, `[stack]`, `/memfd:x`...).
        path: PathBuf,
        time_ns: u64,
    },
    /// A new thread (`pid == ppid`) or process was created by `ptid`.
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time_ns: u64,
    },
    /// Thread `tid` of `pid` exited (the process is gone when all its threads have).
    Exit {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time_ns: u64,
    },
    /// The kernel throttled sampling (too many samples per tick for
    /// `kernel.perf_event_max_sample_rate`) until the matching `Unthrottle`.
    Throttle {
        time_ns: u64,
    },
    Unthrottle {
        time_ns: u64,
    },
}

impl PerfRecord {
    pub fn time_ns(&self) -> u64 {
        match *self {
            PerfRecord::Sample(Sample { time_ns, .. })
            | PerfRecord::Lost { time_ns, .. }
            | PerfRecord::Exec { time_ns, .. }
            | PerfRecord::Comm { time_ns, .. }
            | PerfRecord::Mmap { time_ns, .. }
            | PerfRecord::Fork { time_ns, .. }
            | PerfRecord::Exit { time_ns, .. }
            | PerfRecord::Throttle { time_ns }
            | PerfRecord::Unthrottle { time_ns } => time_ns,
        }
    }
}

/// What the events were opened with, which fixes the record layouts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    /// A subset of [`SUPPORTED_SAMPLE_TYPE`], always with TID and TIME (so that the
    /// `sample_id_all` trailer of non-sample records is exactly pid, tid, time).
    pub sample_type: u64,
}

pub(crate) const SUPPORTED_SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_ADDR
    | b::PERF_SAMPLE_CALLCHAIN
    | b::PERF_SAMPLE_REGS_USER
    | b::PERF_SAMPLE_PHYS_ADDR) as u64;

/// Size of the `struct sample_id` trailer for our sample types: {u32 pid, tid; u64 time}.
const TRAILER: usize = 16;
const HEADER: usize = 8;

/// A cursor over native-endian fields.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u64(&mut self) -> Option<u64> {
        let (v, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_ne_bytes(*v))
    }

    fn u32(&mut self) -> Option<u32> {
        let (v, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_ne_bytes(*v))
    }

    /// A NUL-terminated string in a NUL-padded field that takes the rest.
    fn cstr(&self) -> &[u8] {
        let end = self.0.iter().position(|&c| c == 0).unwrap_or(self.0.len());
        &self.0[..end]
    }
}

/// The record type in the header of `rec`, and its size (both from the first 8 bytes).
pub(crate) fn header(rec: &[u8; HEADER]) -> (u32, u16, usize) {
    let ty = u32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]);
    let misc = u16::from_ne_bytes([rec[4], rec[5]]);
    let size = u16::from_ne_bytes([rec[6], rec[7]]);
    (ty, misc, size as usize)
}

/// Parses one complete record (header included) read from CPU `cpu`'s ring. `None` for record
/// types udamon does not use and for records too short for their type.
pub(crate) fn parse(rec: &[u8], layout: Layout, cpu: u32) -> Option<PerfRecord> {
    let (ty, misc, _) = header(rec.first_chunk::<HEADER>()?);
    let body = &rec[HEADER..];
    if ty == b::PERF_RECORD_SAMPLE {
        return parse_sample(body, misc, layout, cpu).map(PerfRecord::Sample);
    }
    // Every other record ends with the sample_id trailer (sample_id_all).
    let split = body.len().checked_sub(TRAILER)?;
    let (body, trailer) = body.split_at(split);
    let mut t = Fields(trailer);
    let (_pid, _tid, time_ns) = (t.u32()?, t.u32()?, t.u64()?);
    let mut f = Fields(body);
    Some(match ty {
        b::PERF_RECORD_LOST => {
            let _id = f.u64()?;
            PerfRecord::Lost {
                lost: f.u64()?,
                time_ns,
            }
        }
        b::PERF_RECORD_COMM => {
            let (pid, tid) = (f.u32()?, f.u32()?);
            let comm = String::from_utf8_lossy(f.cstr()).into_owned();
            if u32::from(misc) & b::PERF_RECORD_MISC_COMM_EXEC != 0 {
                PerfRecord::Exec {
                    pid,
                    tid,
                    comm,
                    time_ns,
                }
            } else {
                PerfRecord::Comm {
                    pid,
                    tid,
                    comm,
                    time_ns,
                }
            }
        }
        b::PERF_RECORD_MMAP | b::PERF_RECORD_MMAP2 => {
            let (pid, tid) = (f.u32()?, f.u32()?);
            let (addr, len, pgoff) = (f.u64()?, f.u64()?, f.u64()?);
            let (prot, flags) = if ty == b::PERF_RECORD_MMAP2 {
                // maj, min, ino, ino_generation (or a build id of the same size), prot, flags
                f.0 = f.0.get(24..)?;
                (f.u32()?, f.u32()?)
            } else if u32::from(misc) & b::PERF_RECORD_MISC_MMAP_DATA != 0 {
                (libc::PROT_READ as u32, 0)
            } else {
                ((libc::PROT_READ | libc::PROT_EXEC) as u32, 0)
            };
            PerfRecord::Mmap {
                pid,
                tid,
                addr,
                len,
                pgoff,
                prot,
                flags,
                path: PathBuf::from(OsStr::from_bytes(f.cstr())),
                time_ns,
            }
        }
        b::PERF_RECORD_FORK | b::PERF_RECORD_EXIT => {
            let (pid, ppid, tid, ptid) = (f.u32()?, f.u32()?, f.u32()?, f.u32()?);
            if ty == b::PERF_RECORD_FORK {
                PerfRecord::Fork {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time_ns,
                }
            } else {
                PerfRecord::Exit {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time_ns,
                }
            }
        }
        b::PERF_RECORD_THROTTLE => PerfRecord::Throttle { time_ns },
        b::PERF_RECORD_UNTHROTTLE => PerfRecord::Unthrottle { time_ns },
        _ => return None,
    })
}

/// The process a record is about, read without parsing the rest (nothing allocated): what a
/// sampler of every process checks before it parses a record of one it does not serve.
/// `None` for records about no process in particular (lost, throttled) and for records too
/// short to tell.
pub(crate) fn pid(rec: &[u8], layout: Layout) -> Option<u32> {
    let (ty, _, _) = header(rec.first_chunk::<HEADER>()?);
    let body = &rec[HEADER..];
    let at = match ty {
        // IP comes before TID when sampled.
        b::PERF_RECORD_SAMPLE if layout.sample_type & b::PERF_SAMPLE_IP as u64 != 0 => 8,
        b::PERF_RECORD_SAMPLE => 0,
        b::PERF_RECORD_COMM
        | b::PERF_RECORD_MMAP
        | b::PERF_RECORD_MMAP2
        | b::PERF_RECORD_FORK
        | b::PERF_RECORD_EXIT => 0,
        _ => return None,
    };
    Fields(body.get(at..)?).u32()
}

/// `PERF_RECORD_SAMPLE`: the fields present are those of `sample_type`, in the kernel's fixed
/// order (IP, TID, TIME, ADDR, ..., CALLCHAIN, ..., REGS_USER, ..., PHYS_ADDR). Only the user
/// part of a call chain is kept.
fn parse_sample(body: &[u8], misc: u16, layout: Layout, cpu: u32) -> Option<Sample> {
    let st = layout.sample_type;
    let has = |bit: u32| st & bit as u64 != 0;
    let mut f = Fields(body);
    let mut s = Sample {
        pid: 0,
        tid: 0,
        time_ns: 0,
        cpu,
        ip: 0,
        in_kernel: u32::from(misc) & b::PERF_RECORD_MISC_CPUMODE_MASK == b::PERF_RECORD_MISC_KERNEL,
        abi: super::REGS_ABI_NONE,
        regs: [0; NR_SAMPLE_REGS],
        addr: None,
        phys_addr: None,
        callchain: Vec::new(),
    };
    if has(b::PERF_SAMPLE_IP) {
        s.ip = f.u64()?;
    }
    if has(b::PERF_SAMPLE_TID) {
        (s.pid, s.tid) = (f.u32()?, f.u32()?);
    }
    if has(b::PERF_SAMPLE_TIME) {
        s.time_ns = f.u64()?;
    }
    if has(b::PERF_SAMPLE_ADDR) {
        s.addr = Some(f.u64()?);
    }
    if has(b::PERF_SAMPLE_CALLCHAIN) {
        let nr = f.u64()?;
        let mut user = false;
        for _ in 0..nr {
            let ip = f.u64()?;
            if ip >= PERF_CONTEXT_MAX {
                user = ip == PERF_CONTEXT_USER;
            } else if user && s.callchain.len() < MAX_CALL_STACK {
                s.callchain.push(ip);
            }
        }
    }
    if has(b::PERF_SAMPLE_REGS_USER) {
        s.abi = f.u64()?;
        if s.abi != super::REGS_ABI_NONE {
            for r in &mut s.regs {
                *r = f.u64()?;
            }
        }
    }
    if has(b::PERF_SAMPLE_PHYS_ADDR) {
        s.phys_addr = Some(f.u64()?);
    }
    Some(s)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a record as the kernel lays it out: header, then the given 8-byte-aligned body.
    pub(crate) fn record(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        assert_eq!(body.len() % 8, 0);
        let mut r = Vec::new();
        r.extend_from_slice(&ty.to_ne_bytes());
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&((HEADER + body.len()) as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r
    }

    fn trailer(pid: u32, tid: u32, time: u64) -> Vec<u8> {
        [
            &pid.to_ne_bytes()[..],
            &tid.to_ne_bytes(),
            &time.to_ne_bytes(),
        ]
        .concat()
    }

    /// A NUL-terminated string padded to a multiple of 8 bytes.
    fn padded(s: &[u8]) -> Vec<u8> {
        let mut v = s.to_vec();
        v.push(0);
        v.resize(v.len().div_ceil(8) * 8, 0);
        v
    }

    fn u64s(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    const REGS_LAYOUT: Layout = Layout {
        sample_type: (b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_REGS_USER) as u64,
    };

    pub(crate) fn sample_bytes(pid: u32, tid: u32, time: u64, ip: u64) -> Vec<u8> {
        let mut body = u64s(&[ip]);
        body.extend(trailer(pid, tid, time)); // pid, tid, time: the same layout as the sample
        body.extend(u64s(&[super::super::REGS_ABI_64]));
        body.extend(u64s(
            &(0..NR_SAMPLE_REGS as u64)
                .map(|i| 100 + i)
                .collect::<Vec<_>>(),
        ));
        record(
            b::PERF_RECORD_SAMPLE,
            b::PERF_RECORD_MISC_USER as u16,
            &body,
        )
    }

    pub(crate) fn layout() -> Layout {
        REGS_LAYOUT
    }

    #[test]
    fn the_pid_is_read_without_parsing() {
        assert_eq!(
            pid(&sample_bytes(10, 11, 12345, 0x401000), REGS_LAYOUT),
            Some(10)
        );
        let no_ip = Layout {
            sample_type: (b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME) as u64,
        };
        let bare = record(b::PERF_RECORD_SAMPLE, 0, &trailer(7, 8, 9));
        assert_eq!(pid(&bare, no_ip), Some(7));
        let exit = [u64s(&[]), trailer(42, 41, 0), trailer(42, 41, 5)].concat();
        assert_eq!(
            pid(&record(b::PERF_RECORD_EXIT, 0, &exit), REGS_LAYOUT),
            Some(42)
        );
        let lost = [u64s(&[1, 3]), trailer(0, 0, 5)].concat();
        assert_eq!(
            pid(&record(b::PERF_RECORD_LOST, 0, &lost), REGS_LAYOUT),
            None
        );
        assert_eq!(pid(&[1, 2, 3], REGS_LAYOUT), None);
    }

    #[test]
    fn sample_with_user_regs() {
        let rec = sample_bytes(10, 11, 12345, 0x401000);
        let Some(PerfRecord::Sample(s)) = parse(&rec, REGS_LAYOUT, 1) else {
            panic!()
        };
        assert_eq!(
            (s.pid, s.tid, s.time_ns, s.ip, s.cpu),
            (10, 11, 12345, 0x401000, 1)
        );
        assert!(!s.in_kernel);
        assert_eq!(s.abi, super::super::REGS_ABI_64);
        assert_eq!(s.regs[0], 100);
        assert_eq!(s.regs[NR_SAMPLE_REGS - 1], 100 + NR_SAMPLE_REGS as u64 - 1);
        assert_eq!(s.addr, None);
        // A record cut short is rejected rather than read past its end.
        assert_eq!(parse(&rec[..rec.len() - 8], REGS_LAYOUT, 1), None);
    }

    #[test]
    fn user_call_chain_without_kernel_frames() {
        let layout = Layout {
            sample_type: (b::PERF_SAMPLE_IP
                | b::PERF_SAMPLE_TID
                | b::PERF_SAMPLE_TIME
                | b::PERF_SAMPLE_CALLCHAIN
                | b::PERF_SAMPLE_REGS_USER) as u64,
        };
        let kernel_context = -128i64 as u64;
        let mut body = u64s(&[0xffff_ffff_8100_0000]);
        body.extend(trailer(1, 2, 3));
        body.extend(u64s(&[
            6,
            kernel_context,
            0xffff_ffff_8100_0000,
            PERF_CONTEXT_USER,
            0x401000,
            0x402000,
            0x403000,
        ]));
        body.extend(u64s(&[super::super::REGS_ABI_64]));
        body.extend(u64s(&[7; NR_SAMPLE_REGS]));
        let rec = record(
            b::PERF_RECORD_SAMPLE,
            b::PERF_RECORD_MISC_KERNEL as u16,
            &body,
        );
        let Some(PerfRecord::Sample(s)) = parse(&rec, layout, 0) else {
            panic!()
        };
        assert_eq!(s.callchain, [0x401000, 0x402000, 0x403000]);
        assert_eq!(s.regs[0], 7, "the registers follow the chain");
        // A record cut short is rejected rather than read past its end.
        assert_eq!(
            parse(&rec[..rec.len() - 8 * NR_SAMPLE_REGS], layout, 0),
            None
        );
    }

    #[test]
    fn sample_without_user_context() {
        let mut body = u64s(&[0xffff_ffff_8100_0000]);
        body.extend(trailer(1, 2, 3));
        body.extend(u64s(&[super::super::REGS_ABI_NONE]));
        let rec = record(
            b::PERF_RECORD_SAMPLE,
            b::PERF_RECORD_MISC_KERNEL as u16,
            &body,
        );
        let Some(PerfRecord::Sample(s)) = parse(&rec, REGS_LAYOUT, 0) else {
            panic!()
        };
        assert!(s.in_kernel);
        assert_eq!(
            (s.abi, s.regs),
            (super::super::REGS_ABI_NONE, [0; NR_SAMPLE_REGS])
        );
    }

    #[test]
    fn pmu_sample_with_addresses() {
        let layout = Layout {
            sample_type: (b::PERF_SAMPLE_IP
                | b::PERF_SAMPLE_TID
                | b::PERF_SAMPLE_TIME
                | b::PERF_SAMPLE_ADDR
                | b::PERF_SAMPLE_PHYS_ADDR) as u64,
        };
        let mut body = u64s(&[0x401000]);
        body.extend(trailer(7, 8, 9));
        body.extend(u64s(&[0x7f00_0000_1234, 0x1_2345_6000]));
        let rec = record(
            b::PERF_RECORD_SAMPLE,
            b::PERF_RECORD_MISC_USER as u16,
            &body,
        );
        let Some(PerfRecord::Sample(s)) = parse(&rec, layout, 0) else {
            panic!()
        };
        assert_eq!((s.pid, s.tid, s.time_ns), (7, 8, 9));
        assert_eq!(
            (s.addr, s.phys_addr),
            (Some(0x7f00_0000_1234), Some(0x1_2345_6000))
        );
        assert_eq!(s.abi, super::super::REGS_ABI_NONE);
    }

    #[test]
    fn comm_exec_and_rename() {
        let mut body = [&5u32.to_ne_bytes()[..], &6u32.to_ne_bytes()].concat();
        body.extend(padded(b"memloop2"));
        body.extend(trailer(5, 6, 77));
        let exec = record(
            b::PERF_RECORD_COMM,
            b::PERF_RECORD_MISC_COMM_EXEC as u16,
            &body,
        );
        assert_eq!(
            parse(&exec, REGS_LAYOUT, 0),
            Some(PerfRecord::Exec {
                pid: 5,
                tid: 6,
                comm: "memloop2".into(),
                time_ns: 77
            })
        );
        let rename = record(b::PERF_RECORD_COMM, 0, &body);
        assert!(matches!(
            parse(&rename, REGS_LAYOUT, 0),
            Some(PerfRecord::Comm { tid: 6, .. })
        ));
    }

    #[test]
    fn mmap2_with_prot_and_path() {
        let mut body = [&5u32.to_ne_bytes()[..], &5u32.to_ne_bytes()].concat();
        body.extend(u64s(&[0x7f00_0000_0000, 0x21000, 0x1000]));
        body.extend([&8u32.to_ne_bytes()[..], &1u32.to_ne_bytes()].concat()); // maj, min
        body.extend(u64s(&[1234, 0])); // ino, ino_generation
        let prot = (libc::PROT_READ | libc::PROT_EXEC) as u32;
        body.extend(
            [
                &prot.to_ne_bytes()[..],
                &(libc::MAP_PRIVATE as u32).to_ne_bytes(),
            ]
            .concat(),
        );
        body.extend(padded(b"/usr/lib/libc.so.6"));
        body.extend(trailer(5, 5, 99));
        let rec = record(b::PERF_RECORD_MMAP2, b::PERF_RECORD_MISC_USER as u16, &body);
        assert_eq!(
            parse(&rec, REGS_LAYOUT, 0),
            Some(PerfRecord::Mmap {
                pid: 5,
                tid: 5,
                addr: 0x7f00_0000_0000,
                len: 0x21000,
                pgoff: 0x1000,
                prot,
                flags: libc::MAP_PRIVATE as u32,
                path: "/usr/lib/libc.so.6".into(),
                time_ns: 99
            })
        );
    }

    #[test]
    fn task_lost_and_throttle_records() {
        let mut body = [5u32, 1, 9, 5]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect::<Vec<_>>();
        body.extend(u64s(&[1000]));
        body.extend(trailer(5, 9, 1000));
        let fork = record(b::PERF_RECORD_FORK, 0, &body);
        assert_eq!(
            parse(&fork, REGS_LAYOUT, 0),
            Some(PerfRecord::Fork {
                pid: 5,
                ppid: 1,
                tid: 9,
                ptid: 5,
                time_ns: 1000
            })
        );
        let exit = record(b::PERF_RECORD_EXIT, 0, &body);
        assert!(matches!(
            parse(&exit, REGS_LAYOUT, 0),
            Some(PerfRecord::Exit { tid: 9, .. })
        ));

        let mut body = u64s(&[42, 17]); // id, lost
        body.extend(trailer(0, 0, 5));
        let lost = record(b::PERF_RECORD_LOST, 0, &body);
        assert_eq!(
            parse(&lost, REGS_LAYOUT, 0),
            Some(PerfRecord::Lost {
                lost: 17,
                time_ns: 5
            })
        );

        let mut body = u64s(&[6, 42, 42]); // time, id, stream_id
        body.extend(trailer(0, 0, 6));
        let th = record(b::PERF_RECORD_THROTTLE, 0, &body);
        assert_eq!(
            parse(&th, REGS_LAYOUT, 0),
            Some(PerfRecord::Throttle { time_ns: 6 })
        );
        let un = record(b::PERF_RECORD_UNTHROTTLE, 0, &body);
        assert_eq!(
            parse(&un, REGS_LAYOUT, 0),
            Some(PerfRecord::Unthrottle { time_ns: 6 })
        );
    }

    #[test]
    fn unknown_and_truncated_records_are_skipped() {
        let unknown = record(b::PERF_RECORD_KSYMBOL, 0, &[0; 32]);
        assert_eq!(parse(&unknown, REGS_LAYOUT, 0), None);
        let short = record(b::PERF_RECORD_FORK, 0, &[0; 8]);
        assert_eq!(parse(&short, REGS_LAYOUT, 0), None);
    }
}
