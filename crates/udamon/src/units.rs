//! Parsing durations and sizes as users type them: `5ms`, `1s`, `2M`, `1.5GiB`, `0x7f00...`,
//! with damo's number parser (so that the command line and scheme files agree) plus hex.

use udamon_record::damo::number::{Num, Unit};

/// The longest duration udamon takes anywhere (100 years): longer ones are typing mistakes,
/// and time lines in microseconds keep room to add them.
pub const MAX_DURATION_US: u64 = 100 * 365 * 24 * 3600 * 1_000_000;

/// A duration in microseconds. A bare number is microseconds (DAMON's unit); otherwise a
/// number with a unit: ns, us, ms, s, m, h (e.g. `5ms`, `1.5 s`). At most
/// [`MAX_DURATION_US`]: the number parser saturates what does not fit, which must not pass
/// for a duration.
pub fn parse_duration_us(s: &str) -> Result<u64, String> {
    let us = Num::Text(s.to_string())
        .u64(Unit::Microseconds)
        .map_err(|_| {
            format!("'{s}' is not a duration: use e.g. 5ms, 100ms, 1s, or microseconds")
        })?;
    check_duration_us(s, us)
}

/// Refuses a duration longer than [`MAX_DURATION_US`], naming it as it was given.
pub fn check_duration_us(given: &str, us: u64) -> Result<u64, String> {
    if us > MAX_DURATION_US {
        return Err(format!(
            "'{given}' is longer than udamon takes ({}h, 100 years): give e.g. 10s, 30m or 24h",
            MAX_DURATION_US / 3_600_000_000
        ));
    }
    Ok(us)
}

/// How often serve scans for targets: from [`MIN_RESCAN_US`] (each scan reads every process
/// of `/proc` for `--match`) to an hour. The command line and the configuration file both
/// take it through here.
pub fn parse_rescan_us(s: &str) -> Result<u64, String> {
    let us = parse_duration_us(s)?;
    if !(MIN_RESCAN_US..=MAX_RESCAN_US).contains(&us) {
        return Err(format!(
            "'{s}' is not a rescan period: give {} to {}, e.g. 2s",
            format_duration_us(MIN_RESCAN_US),
            format_duration_us(MAX_RESCAN_US)
        ));
    }
    Ok(us)
}

pub const MIN_RESCAN_US: u64 = 100_000;
pub const MAX_RESCAN_US: u64 = 3_600_000_000;

/// An interval or a run's length: a duration longer than 0 (a zero interval would never let
/// time pass, and monitoring would never end).
pub fn parse_interval_us(s: &str) -> Result<u64, String> {
    match parse_duration_us(s)? {
        0 => Err(format!(
            "'{s}' is no time at all: give a duration longer than 0, e.g. 5ms, 100ms, 1s"
        )),
        us => Ok(us),
    }
}

/// A sampling rate in Hz, more than 0.
pub fn parse_rate_hz(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) | Err(_) => Err(format!(
            "'{s}' is not a sampling rate: give samples per second, more than 0, e.g. 500"
        )),
        Ok(hz) => Ok(hz),
    }
}

/// A duration as the help and messages show it, in the largest unit that keeps it whole
/// (`400ms`, `1s`, `250us`): what [`parse_duration_us`] reads back.
pub fn format_duration_us(us: u64) -> String {
    match us {
        0 => "0".to_string(),
        _ if us.is_multiple_of(1_000_000) => format!("{}s", us / 1_000_000),
        _ if us.is_multiple_of(1000) => format!("{}ms", us / 1000),
        _ => format!("{us}us"),
    }
}

/// A size or address in bytes: a bare or `0x` hex number, or a number with a unit
/// (K/KB/KiB = 1024, M, G, T).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| format!("'{s}' is not a hex number"));
    }
    Num::Text(s.to_string())
        .u64(Unit::Bytes)
        .map_err(|_| format!("'{s}' is not a size: use e.g. 4096, 4K, 2M, 1.5G or 0x1000"))
}

/// Records' permissions in octal (`600`, `0640`): read and write bits only, the owner's
/// always.
pub fn parse_record_mode(text: &str) -> Result<u32, String> {
    let digits = text.trim().trim_start_matches("0o");
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode & !0o666 == 0 && mode & 0o600 == 0o600 => Ok(mode),
        _ => Err(format!(
            "'{text}' is not a record mode: give octal read and write bits with the owner's \
             (600, 640 or 644)"
        )),
    }
}

/// A unix socket's permissions in octal (`600`, `0660`): who may connect, the owner always.
pub fn parse_socket_mode(text: &str) -> Result<u32, String> {
    let digits = text.trim().trim_start_matches("0o");
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode & !0o777 == 0 && mode & 0o600 == 0o600 => Ok(mode),
        _ => Err(format!(
            "'{text}' is not a socket mode: give octal permission bits with the owner's read \
             and write (600, 660 or 666)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_us("5000"), Ok(5000));
        assert_eq!(parse_duration_us("5ms"), Ok(5000));
        assert_eq!(parse_duration_us("1.5s"), Ok(1_500_000));
        assert_eq!(parse_duration_us("100 us"), Ok(100));
        assert!(
            parse_duration_us("5 parsecs")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(parse_duration_us("fast").is_err());
    }

    #[test]
    fn intervals_and_rates_are_more_than_zero() {
        assert_eq!(parse_interval_us("5ms"), Ok(5000));
        assert!(
            parse_interval_us("0")
                .unwrap_err()
                .contains("longer than 0")
        );
        assert!(
            parse_interval_us("0s")
                .unwrap_err()
                .contains("longer than 0")
        );
        assert_eq!(parse_rate_hz("250"), Ok(250));
        assert!(parse_rate_hz("0").unwrap_err().contains("more than 0"));
        assert!(parse_rate_hz("fast").is_err());
    }

    #[test]
    fn durations_that_overflow_are_refused() {
        for text in [
            "99999999999h",
            "18446744073709551616",
            "18446744073709551615",
            "max",
            "101 years",
        ] {
            assert!(parse_duration_us(text).is_err(), "{text}");
        }
        let e = parse_duration_us("99999999999h").unwrap_err();
        assert!(e.contains("longer than udamon takes"), "{e}");
        assert_eq!(parse_duration_us("876000h"), Ok(MAX_DURATION_US));
        assert!(parse_interval_us("876001h").is_err());
    }

    #[test]
    fn a_rescan_period_is_bounded() {
        assert_eq!(parse_rescan_us("2s"), Ok(2_000_000));
        for text in ["0s", "0", "1ms", "2h", "99999999999h"] {
            assert!(parse_rescan_us(text).is_err(), "{text}");
        }
    }

    #[test]
    fn formatted_durations_read_back() {
        for (us, text) in [
            (400_000, "400ms"),
            (1_000_000, "1s"),
            (250, "250us"),
            (0, "0"),
        ] {
            assert_eq!(format_duration_us(us), text);
            assert_eq!(parse_duration_us(text), Ok(us));
        }
        assert_eq!(format_duration_us(1_500_000), "1500ms");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2MB"), Ok(2 << 20));
        assert_eq!(parse_size("0x7f00"), Ok(0x7f00));
        assert!(parse_size("3 apples").unwrap_err().contains("not a size"));
    }
}
