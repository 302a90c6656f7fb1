//! Detecting a PMU that gives precise data addresses, from `/sys/bus/event_source/devices`:
//! Intel PEBS load-latency (`cpu/events/mem-loads`, or `cpu_core/` on hybrid parts), AMD IBS op
//! (`ibs_op/`), Arm SPE (`arm_spe_N/`, found but not usable: see [`detect_pmu_in`]).
//!
//! Event strings such as `event=0xcd,umask=0x1,ldlat=3` are encoded into config/config1/config2
//! with the PMU's own `format/<term>` files (`config:0-7`, `config1:0-15`, ...), as perf does.

use super::error::PerfError;
use super::source::{PmuEvent, Rate};
use std::fmt;
use std::path::Path;

pub const SYSFS_DEVICES: &str = "/sys/bus/event_source/devices";

/// The load-latency threshold in cycles for PEBS `mem-loads` (perf mem's default): loads that
/// take longer are sampled.
pub const DEFAULT_LDLAT: u64 = 30;

/// Which kind of precise memory sampling a [`PmuEvent`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmuKind {
    IntelPebs,
    AmdIbs,
    /// Type and config given by the user (damo's `--perf_event`).
    Custom,
}

impl fmt::Display for PmuKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PmuKind::IntelPebs => "Intel PEBS",
            PmuKind::AmdIbs => "AMD IBS",
            PmuKind::Custom => "PMU",
        })
    }
}

/// [`detect_pmu_in`] on the real sysfs.
pub fn detect_pmu(rate: Rate) -> Result<PmuEvent, PerfError> {
    detect_pmu_in(Path::new(SYSFS_DEVICES), rate)
}

/// Finds precise memory sampling under `devices` (normally [`SYSFS_DEVICES`]) and returns the
/// event to open, sampling at `rate`, user mode only:
/// - Intel: `<cpu>/events/mem-loads` with `ldlat` set to [`DEFAULT_LDLAT`], `precise_ip` 2;
/// - AMD: `ibs_op` with config 0 (count cycles), `precise_ip` 0;
/// - Arm SPE is reported as unsupported: it delivers samples as AUX-area trace data, which udamon
///   does not decode.
pub fn detect_pmu_in(devices: &Path, rate: Rate) -> Result<PmuEvent, PerfError> {
    for cpu in ["cpu", "cpu_core"] {
        let dev = devices.join(cpu);
        let Ok(event) = std::fs::read_to_string(dev.join("events/mem-loads")) else {
            continue;
        };
        let pmu_type = read_type(&dev)?;
        let mut config = [0u64; 3];
        for term in event.trim().split(',').filter(|t| !t.is_empty()) {
            let (name, value) = match term.split_once('=') {
                Some((n, v)) => (
                    n.trim(),
                    parse_number(v.trim()).ok_or_else(|| bad(&dev, term))?,
                ),
                None => (term.trim(), 1),
            };
            let value = if name == "ldlat" {
                DEFAULT_LDLAT
            } else {
                value
            };
            let format = std::fs::read_to_string(dev.join("format").join(name))
                .map_err(|_| bad(&dev, &format!("{term} (no format/{name})")))?;
            apply_format(format.trim(), value, &mut config)
                .ok_or_else(|| bad(&dev, format.trim()))?;
        }
        return Ok(PmuEvent {
            kind: PmuKind::IntelPebs,
            pmu_type,
            config: config[0],
            config1: config[1],
            config2: config[2],
            precise_ip: 2,
            rate,
            phys_addr: false,
            include_kernel: false,
        });
    }
    let ibs = devices.join("ibs_op");
    if ibs.join("type").exists() {
        return Ok(PmuEvent {
            kind: PmuKind::AmdIbs,
            pmu_type: read_type(&ibs)?,
            config: 0,
            config1: 0,
            config2: 0,
            precise_ip: 0,
            rate,
            phys_addr: false,
            include_kernel: false,
        });
    }
    let spe = std::fs::read_dir(devices)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("arm_spe"));
    if let Some(spe) = spe {
        return Err(PerfError::NoPmu(format!(
            "Arm SPE is present ({spe} in {}) but delivers its samples as AUX-area trace data, which udamon does not decode: use --access-source tick (root) or cpuclock",
            devices.display()
        )));
    }
    Err(PerfError::NoPmu(format!(
        "no PMU memory sampling here (no ibs_op, no cpu/events/mem-loads, no arm_spe in {}): use --access-source tick (root) or cpuclock",
        devices.display()
    )))
}

fn read_type(dev: &Path) -> Result<u32, PerfError> {
    let path = dev.join("type");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| PerfError::io(format!("cannot read {}", path.display()), e))?;
    text.trim()
        .parse()
        .map_err(|_| bad(dev, &format!("type {:?}", text.trim())))
}

fn bad(dev: &Path, what: &str) -> PerfError {
    PerfError::NoPmu(format!(
        "cannot understand the PMU description in {} ({what}): use --access-source tick (root) or cpuclock, or give the event's type and config explicitly",
        dev.display()
    ))
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Puts `value` into the bits a sysfs format spec names (`config1:0-15`, `config:0-7,32-35`,
/// `config:21`): its low bits fill the listed ranges in order.
fn apply_format(spec: &str, mut value: u64, config: &mut [u64; 3]) -> Option<()> {
    let (field, ranges) = spec.split_once(':')?;
    let word = match field {
        "config" => &mut config[0],
        "config1" => &mut config[1],
        "config2" => &mut config[2],
        _ => return None,
    };
    for range in ranges.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
            None => (range.parse().ok()?, range.parse().ok()?),
        };
        if lo > hi || hi > 63 {
            return None;
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1 << width) - 1
        };
        *word |= (value & mask) << lo;
        value = value.checked_shr(width).unwrap_or(0);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn fake_sysfs() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        // Devices every machine has, which must not be mistaken for a memory-sampling PMU.
        write(d.path(), "software/type", "1\n");
        write(d.path(), "tracepoint/type", "2\n");
        write(d.path(), "breakpoint/type", "5\n");
        d
    }

    const RATE: Rate = Rate::Frequency(4000);

    #[test]
    fn intel_mem_loads_is_encoded_through_the_format_files() {
        let d = fake_sysfs();
        write(d.path(), "cpu/type", "4\n");
        write(
            d.path(),
            "cpu/events/mem-loads",
            "event=0xcd,umask=0x1,ldlat=3\n",
        );
        write(d.path(), "cpu/format/event", "config:0-7\n");
        write(d.path(), "cpu/format/umask", "config:8-15\n");
        write(d.path(), "cpu/format/ldlat", "config1:0-15\n");
        let e = detect_pmu_in(d.path(), RATE).unwrap();
        assert_eq!(e.kind, PmuKind::IntelPebs);
        // The same type/config as `perf mem record` logs (seed 000: type 4, config 0x1cd).
        assert_eq!(
            (e.pmu_type, e.config, e.config1, e.config2),
            (4, 0x1cd, DEFAULT_LDLAT, 0)
        );
        assert_eq!((e.precise_ip, e.rate, e.include_kernel), (2, RATE, false));
    }

    #[test]
    fn hybrid_intel_uses_cpu_core() {
        let d = fake_sysfs();
        write(d.path(), "cpu_core/type", "8\n");
        write(d.path(), "cpu_atom/type", "10\n");
        write(
            d.path(),
            "cpu_core/events/mem-loads",
            "event=0xcd,umask=0x1,ldlat=3",
        );
        write(d.path(), "cpu_core/format/event", "config:0-7");
        write(d.path(), "cpu_core/format/umask", "config:8-15");
        write(d.path(), "cpu_core/format/ldlat", "config1:0-15");
        let e = detect_pmu_in(d.path(), RATE).unwrap();
        assert_eq!((e.pmu_type, e.config), (8, 0x1cd));
    }

    #[test]
    fn amd_ibs_op() {
        let d = fake_sysfs();
        write(d.path(), "cpu/type", "4\n"); // AMD has a cpu PMU, but no mem-loads event
        write(d.path(), "ibs_op/type", "11\n");
        write(d.path(), "ibs_fetch/type", "10\n");
        let e = detect_pmu_in(d.path(), RATE).unwrap();
        assert_eq!(
            (e.kind, e.pmu_type, e.config, e.precise_ip),
            (PmuKind::AmdIbs, 11, 0, 0)
        );
    }

    #[test]
    fn arm_spe_is_found_but_refused() {
        let d = fake_sysfs();
        write(d.path(), "arm_spe_0/type", "9\n");
        let e = detect_pmu_in(d.path(), RATE).unwrap_err().to_string();
        assert!(e.contains("arm_spe_0") && e.contains("AUX"), "{e}");
        assert!(e.contains("--access-source tick (root) or cpuclock"), "{e}");
    }

    #[test]
    fn nothing_found_names_what_is_missing_and_the_alternatives() {
        let d = fake_sysfs();
        write(d.path(), "cpu/type", "4\n");
        let e = detect_pmu_in(d.path(), RATE).unwrap_err();
        assert!(matches!(e, PerfError::NoPmu(_)));
        let e = e.to_string();
        for want in [
            "ibs_op",
            "mem-loads",
            "arm_spe",
            "--access-source tick (root) or cpuclock",
        ] {
            assert!(e.contains(want), "{want} missing from: {e}");
        }
    }

    #[test]
    fn unreadable_description_is_an_error_not_a_guess() {
        let d = fake_sysfs();
        write(d.path(), "cpu/type", "4\n");
        write(d.path(), "cpu/events/mem-loads", "event=0xcd,frobnicate=2");
        write(d.path(), "cpu/format/event", "config:0-7");
        let e = detect_pmu_in(d.path(), RATE).unwrap_err().to_string();
        assert!(e.contains("frobnicate"), "{e}");
    }

    #[test]
    fn format_specs() {
        let mut c = [0; 3];
        apply_format("config:0-7,32-35", 0x5ab, &mut c).unwrap();
        assert_eq!(c[0], 0xab | (0x5 << 32));
        apply_format("config2:21", 1, &mut c).unwrap();
        assert_eq!(c[2], 1 << 21);
        apply_format("config1:0-63", u64::MAX, &mut c).unwrap();
        assert_eq!(c[1], u64::MAX);
        assert!(apply_format("config3:0-7", 1, &mut c).is_none());
        assert!(apply_format("config:7-0", 1, &mut c).is_none());
        assert!(apply_format("config:0-64", 1, &mut c).is_none());
        assert_eq!(parse_number("0x1F"), Some(31));
        assert_eq!(parse_number("30"), Some(30));
    }
}
