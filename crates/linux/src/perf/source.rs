//! What to sample: the access sources, their parameters, and the `perf_event_attr` each needs.

use super::SAMPLE_REGS_USER;
use super::error::PerfError;
use super::pmu::PmuKind;
use super::record::MAX_CALL_STACK;
use super::tracefs;
use perf_event_open_sys::bindings as b;

/// How often to sample: a frequency the kernel turns into a period (for the hrtimer software
/// events that period is simply 1/F of CPU time), or a fixed period in event counts (nanoseconds
/// for cpu-clock/task-clock, occurrences for tracepoints and PMU events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Frequency(u64),
    Period(u64),
}

/// The software clock a [`CpuClock`] source samples on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockEvent {
    /// `PERF_COUNT_SW_CPU_CLOCK`: a per-CPU hrtimer, running while the target runs.
    #[default]
    CpuClock,
    /// `PERF_COUNT_SW_TASK_CLOCK`: the same, counted in the task's own run time.
    TaskClock,
}

/// The software-clock source (`swsample`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuClock {
    pub event: ClockEvent,
    pub rate: Rate,
    /// Also sample while the target runs kernel code (`exclude_kernel=0`): needs root or
    /// CAP_PERFMON at `perf_event_paranoid>=2`. The user registers are still those of the
    /// interrupted user context.
    pub include_kernel: bool,
}

impl Default for CpuClock {
    /// 1 kHz cpu-clock, user mode only: about 1–2 % target overhead in a VM
    /// (docs/sources/sampled.md).
    fn default() -> Self {
        CpuClock {
            event: ClockEvent::CpuClock,
            rate: Rate::Frequency(1000),
            include_kernel: false,
        }
    }
}

/// A precise memory-sampling PMU event: the parameters of damo's `--perf_event <sample freq>
/// <sample phys addr> <type> <config> <config1> <config2>` (seed 000), plus `precise_ip`.
/// [`detect_pmu`](super::detect_pmu) fills them in for the machine's PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmuEvent {
    pub kind: PmuKind,
    /// `perf_event_attr.type`: the PMU's dynamic type from sysfs (`.../devices/<pmu>/type`).
    pub pmu_type: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    /// Skid constraint: 2 for PEBS (as kernel DAMON's perf-event patches use), 0 for IBS.
    pub precise_ip: u8,
    pub rate: Rate,
    /// Also request `PERF_SAMPLE_PHYS_ADDR` (needs privilege on most kernels).
    pub phys_addr: bool,
    pub include_kernel: bool,
}

/// The access source of a [`Sampler`](super::Sampler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessSource {
    CpuClock(CpuClock),
    /// The scheduler-tick tracepoint, sampling every tick that interrupts the target (period 1).
    Tick,
    Pmu(PmuEvent),
}

/// A resolved event: everything `perf_event_attr` needs except the per-open settings.
#[derive(Debug, Clone)]
pub(crate) struct EventSpec {
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub rate: Rate,
    pub precise_ip: u8,
    pub sample_type: u64,
    pub exclude_kernel: bool,
    /// Name for error messages.
    pub name: String,
    /// What to do instead when the event is unsupported.
    pub advice: &'static str,
}

const BASE_SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IP | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME) as u64;

impl AccessSource {
    /// Resolves the source into an event. For [`AccessSource::Tick`] this reads the tracepoint
    /// id from tracefs, mounting tracefs if it is not mounted; that is reported in `notes`.
    pub(crate) fn resolve(&self, notes: &mut Vec<String>) -> Result<EventSpec, PerfError> {
        let spec = match *self {
            AccessSource::CpuClock(c) => EventSpec {
                type_: b::PERF_TYPE_SOFTWARE,
                config: match c.event {
                    ClockEvent::CpuClock => b::PERF_COUNT_SW_CPU_CLOCK,
                    ClockEvent::TaskClock => b::PERF_COUNT_SW_TASK_CLOCK,
                } as u64,
                config1: 0,
                config2: 0,
                rate: c.rate,
                precise_ip: 0,
                sample_type: BASE_SAMPLE_TYPE | b::PERF_SAMPLE_REGS_USER as u64,
                exclude_kernel: !c.include_kernel,
                name: match c.event {
                    ClockEvent::CpuClock => "cpu-clock sampling",
                    ClockEvent::TaskClock => "task-clock sampling",
                }
                .to_string()
                    + if c.include_kernel {
                        " of kernel mode"
                    } else {
                        ""
                    },
                advice: "udamon needs Linux 5.13 or later built with perf events (CONFIG_PERF_EVENTS)",
            },
            AccessSource::Tick => {
                super::open::require_kernel_sampling(
                    "the tick source (tracepoint irq_vectors:local_timer_entry)",
                )?;
                let (group, name) = tracefs::TICK_TRACEPOINT;
                EventSpec {
                    type_: b::PERF_TYPE_TRACEPOINT,
                    config: tracefs::tracepoint_id(group, name, notes)?,
                    config1: 0,
                    config2: 0,
                    rate: Rate::Period(1),
                    precise_ip: 0,
                    sample_type: BASE_SAMPLE_TYPE | b::PERF_SAMPLE_REGS_USER as u64,
                    // The tracepoint fires in the kernel's interrupt handler.
                    exclude_kernel: false,
                    name: "the tick source (tracepoint irq_vectors:local_timer_entry)".into(),
                    advice: "use --access-source cpuclock",
                }
            }
            AccessSource::Pmu(p) => EventSpec {
                type_: p.pmu_type,
                config: p.config,
                config1: p.config1,
                config2: p.config2,
                rate: p.rate,
                precise_ip: p.precise_ip,
                sample_type: BASE_SAMPLE_TYPE
                    | b::PERF_SAMPLE_ADDR as u64
                    | if p.phys_addr {
                        b::PERF_SAMPLE_PHYS_ADDR as u64
                    } else {
                        0
                    },
                exclude_kernel: !p.include_kernel,
                name: format!(
                    "{} memory sampling (type {} config {:#x} config1 {:#x} config2 {:#x} precise_ip {})",
                    p.kind, p.pmu_type, p.config, p.config1, p.config2, p.precise_ip
                ),
                advice: "use --access-source tick (root) or cpuclock",
            },
        };
        match spec.rate {
            Rate::Frequency(0) | Rate::Period(0) => Err(PerfError::Config(
                "the sample frequency or period must not be 0".into(),
            )),
            _ => Ok(spec),
        }
    }
}

/// Per-open settings of an event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenSettings {
    /// Spawn mode: start disabled, enable when the child execs.
    pub enable_on_exec: bool,
    /// Inherit into child processes too, not only into new threads.
    pub follow_forks: bool,
    /// Wake pollers when this many bytes are in the ring.
    pub wakeup_bytes: u32,
}

impl EventSpec {
    pub(crate) fn attr(&self, s: OpenSettings) -> b::perf_event_attr {
        let mut a = b::perf_event_attr {
            type_: self.type_,
            size: std::mem::size_of::<b::perf_event_attr>() as u32,
            config: self.config,
            sample_type: self.sample_type,
            ..Default::default()
        };
        match self.rate {
            Rate::Frequency(f) => {
                a.__bindgen_anon_1.sample_freq = f;
                a.set_freq(1);
            }
            Rate::Period(p) => a.__bindgen_anon_1.sample_period = p,
        }
        a.__bindgen_anon_3.config1 = self.config1;
        a.__bindgen_anon_4.config2 = self.config2;
        if self.sample_type & b::PERF_SAMPLE_REGS_USER as u64 != 0 {
            a.sample_regs_user = SAMPLE_REGS_USER;
        }
        if self.sample_type & b::PERF_SAMPLE_CALLCHAIN as u64 != 0 {
            // User frames only: kernel frames name no code of the target, and unprivileged
            // users may not have them.
            a.set_exclude_callchain_kernel(1);
            a.sample_max_stack = MAX_CALL_STACK as u16;
        }
        a.set_precise_ip(self.precise_ip.into());
        a.set_exclude_kernel(self.exclude_kernel.into());
        a.set_exclude_hv(1);
        a.set_disabled(s.enable_on_exec.into());
        a.set_enable_on_exec(s.enable_on_exec.into());
        a.set_inherit(1);
        a.set_inherit_thread((!s.follow_forks).into());
        // Timestamps on the clock the rest of udamon (and the workload) uses.
        a.set_use_clockid(1);
        a.clockid = libc::CLOCK_MONOTONIC;
        a.set_watermark(1);
        a.__bindgen_anon_2.wakeup_watermark = s.wakeup_bytes;
        // Side-band records: exec (and thread renames), every new mapping (data too), forks and
        // exits, each with pid/tid/time so they can be ordered against samples.
        a.set_sample_id_all(1);
        a.set_comm(1);
        a.set_comm_exec(1);
        a.set_mmap(1);
        a.set_mmap2(1);
        a.set_mmap_data(1);
        a.set_task(1);
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> OpenSettings {
        OpenSettings {
            enable_on_exec: true,
            follow_forks: false,
            wakeup_bytes: 4096,
        }
    }

    #[test]
    fn cpuclock_attr_is_user_only_with_regs() {
        let spec = AccessSource::CpuClock(CpuClock::default())
            .resolve(&mut Vec::new())
            .unwrap();
        let a = spec.attr(settings());
        assert_eq!(a.type_, b::PERF_TYPE_SOFTWARE);
        assert_eq!(a.config, b::PERF_COUNT_SW_CPU_CLOCK as u64);
        assert_eq!(a.freq(), 1);
        assert_eq!(unsafe { a.__bindgen_anon_1.sample_freq }, 1000);
        assert_eq!(a.exclude_kernel(), 1);
        assert_eq!(a.sample_regs_user, SAMPLE_REGS_USER);
        assert_ne!(a.sample_type & b::PERF_SAMPLE_REGS_USER as u64, 0);
        assert_eq!(a.sample_type & b::PERF_SAMPLE_ADDR as u64, 0);
        assert_eq!(
            (
                a.disabled(),
                a.enable_on_exec(),
                a.inherit(),
                a.inherit_thread()
            ),
            (1, 1, 1, 1)
        );
        assert_eq!((a.use_clockid(), a.clockid), (1, libc::CLOCK_MONOTONIC));
        assert_eq!(
            (
                a.comm_exec(),
                a.mmap2(),
                a.mmap_data(),
                a.task(),
                a.sample_id_all()
            ),
            (1, 1, 1, 1, 1)
        );
    }

    #[test]
    fn task_clock_with_period_and_kernel() {
        let spec = AccessSource::CpuClock(CpuClock {
            event: ClockEvent::TaskClock,
            rate: Rate::Period(250_000),
            include_kernel: true,
        })
        .resolve(&mut Vec::new())
        .unwrap();
        let a = spec.attr(OpenSettings {
            enable_on_exec: false,
            follow_forks: true,
            wakeup_bytes: 1,
        });
        assert_eq!(a.config, b::PERF_COUNT_SW_TASK_CLOCK as u64);
        assert_eq!(
            (a.freq(), unsafe { a.__bindgen_anon_1.sample_period }),
            (0, 250_000)
        );
        assert_eq!(
            (a.exclude_kernel(), a.disabled(), a.inherit_thread()),
            (0, 0, 0)
        );
    }

    #[test]
    fn pmu_attr_asks_for_the_data_address() {
        let p = PmuEvent {
            kind: PmuKind::IntelPebs,
            pmu_type: 4,
            config: 0x1cd,
            config1: 0x1f,
            config2: 0,
            precise_ip: 2,
            rate: Rate::Frequency(5000),
            phys_addr: true,
            include_kernel: false,
        };
        let a = AccessSource::Pmu(p)
            .resolve(&mut Vec::new())
            .unwrap()
            .attr(settings());
        assert_eq!((a.type_, a.config, a.precise_ip()), (4, 0x1cd, 2));
        assert_eq!(unsafe { a.__bindgen_anon_3.config1 }, 0x1f);
        assert_ne!(a.sample_type & b::PERF_SAMPLE_ADDR as u64, 0);
        assert_ne!(a.sample_type & b::PERF_SAMPLE_PHYS_ADDR as u64, 0);
        assert_eq!(a.sample_regs_user, 0);
    }

    #[test]
    fn zero_rate_is_rejected() {
        let c = CpuClock {
            rate: Rate::Frequency(0),
            ..CpuClock::default()
        };
        let e = AccessSource::CpuClock(c)
            .resolve(&mut Vec::new())
            .unwrap_err();
        assert!(e.to_string().contains("must not be 0"), "{e}");
    }
}
