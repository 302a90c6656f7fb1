//! Choosing the access source: what `--access-source auto|tick|cpuclock|pmu` resolves to on
//! this machine, and a sentence saying why, for the record's header.

use crate::perf::{AccessSource, CpuClock, PerfError, Rate, detect_pmu};
use crate::proc_status::perf_privileged;

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceChoice {
    /// The best source available: `pmu` if the machine has precise memory sampling, else `tick`
    /// with root or CAP_PERFMON, else `cpuclock`.
    Auto,
    Tick,
    CpuClock,
    Pmu,
}

/// The default `cpuclock` rate. Every sample costs the target one timer interrupt, about
/// 15–20 µs in this kind of (nested) VM (docs/sources/sampled.md): 1 kHz measured 1–2 %
/// slowdown on CPU-bound and 2.4–5 % on memory-bound code, 250 Hz about 1 %. 500 Hz keeps a
/// memory-bound target near the 2 % budget while giving twice the tick's samples.
pub const DEFAULT_CPUCLOCK_HZ: u64 = 500;

/// The resolved source, with a fallback for `auto` in case the first choice cannot be opened.
#[derive(Debug, Clone)]
pub struct ChosenSource {
    pub source: AccessSource,
    /// Why this source, for the record's header.
    pub reason: String,
    pub fallback: Option<(AccessSource, String)>,
}

/// The short name of a source, as records and `--access-source` spell it.
pub fn source_name(source: &AccessSource) -> &'static str {
    match source {
        AccessSource::CpuClock(_) => "cpuclock",
        AccessSource::Tick => "tick",
        AccessSource::Pmu(_) => "pmu",
    }
}

/// The `cpuclock` source sampling user mode at `hz`.
pub fn cpuclock_source(hz: u64) -> AccessSource {
    AccessSource::CpuClock(CpuClock {
        rate: Rate::Frequency(hz),
        ..CpuClock::default()
    })
}

/// Resolves `choice`; `rate_hz` is the sampling rate of `cpuclock` and `pmu`. Fails for `pmu`
/// on a machine without precise memory sampling (the error says which source to use instead).
pub fn choose_source(choice: SourceChoice, rate_hz: u64) -> Result<ChosenSource, PerfError> {
    let cpuclock_reason = |why: &str| {
        format!(
            "{why}cpu-clock sampling at {rate_hz} Hz of user-mode time, with addresses recovered \
             from the sampled registers"
        )
    };
    Ok(match choice {
        SourceChoice::Tick => ChosenSource {
            source: AccessSource::Tick,
            reason: "requested: the scheduler tick tracepoint, with addresses recovered from the \
                     sampled registers"
                .into(),
            fallback: None,
        },
        SourceChoice::CpuClock => ChosenSource {
            source: cpuclock_source(rate_hz),
            reason: cpuclock_reason("requested: "),
            fallback: None,
        },
        SourceChoice::Pmu => {
            let p = detect_pmu(Rate::Frequency(rate_hz))?;
            ChosenSource {
                source: AccessSource::Pmu(p),
                reason: format!(
                    "requested: {} precise memory samples at {rate_hz} Hz",
                    p.kind
                ),
                fallback: None,
            }
        }
        SourceChoice::Auto => match detect_pmu(Rate::Frequency(rate_hz)) {
            Ok(p) => ChosenSource {
                source: AccessSource::Pmu(p),
                reason: format!(
                    "auto: {} found, precise data addresses at {rate_hz} Hz",
                    p.kind
                ),
                fallback: Some((
                    cpuclock_source(rate_hz),
                    cpuclock_reason("auto: the PMU event could not be opened; "),
                )),
            },
            Err(_) if perf_privileged() => ChosenSource {
                source: AccessSource::Tick,
                reason: "auto: no PMU memory sampling here; with root/CAP_PERFMON the scheduler \
                         tick tracepoint costs no extra interrupts (about 0.4 % overhead)"
                    .into(),
                fallback: Some((
                    cpuclock_source(rate_hz),
                    cpuclock_reason("auto: no PMU memory sampling, the tick tracepoint failed; "),
                )),
            },
            Err(_) => ChosenSource {
                source: cpuclock_source(rate_hz),
                reason: cpuclock_reason(
                    "auto: no PMU memory sampling, and the tick source needs root or \
                     CAP_PERFMON; ",
                ),
                fallback: None,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_choices_resolve_to_their_source() {
        let c = choose_source(SourceChoice::CpuClock, 321).unwrap();
        assert_eq!(c.source, cpuclock_source(321));
        assert!(c.reason.contains("321 Hz"), "{}", c.reason);
        assert_eq!(
            source_name(&choose_source(SourceChoice::Tick, 1).unwrap().source),
            "tick"
        );
    }

    #[test]
    fn auto_prefers_a_pmu_then_tick_when_privileged() {
        let c = choose_source(SourceChoice::Auto, 500).unwrap();
        let want = if detect_pmu(Rate::Frequency(500)).is_ok() {
            "pmu"
        } else if perf_privileged() {
            "tick"
        } else {
            "cpuclock"
        };
        assert_eq!(source_name(&c.source), want, "{}", c.reason);
        assert!(c.reason.starts_with("auto: "));
    }
}
