//! Numbers and names for people: sizes in binary units, durations, frequencies, addresses and
//! dates, in damo's style where damo has one (`4.000 KiB`, `1 h 10 m 33.2 s`), and text from a
//! record (command lines) made to fit on one line.

const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// A byte count: `512 B`, `4.000 KiB`, `1.500 GiB` (three decimals, as damo prints sizes).
pub fn size(bytes: u64) -> String {
    in_units(bytes, |value| format!("{value:.3}"))
}

/// A byte count, compact for axis labels: `4 KiB`, `1.5 GiB`.
pub fn size_short(bytes: u64) -> String {
    in_units(bytes, |value| trimmed(value, 1))
}

/// `bytes` below 1 KiB as `N B`; otherwise in the largest binary unit that leaves at least 1,
/// the value written by `number`.
fn in_units(bytes: u64, number: impl Fn(f64) -> String) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{} {}", number(value), UNITS[unit])
}

/// `value` with at most `decimals` decimals, trailing zeros dropped: `1.2`, `3`, `0.05`.
pub fn trimmed(value: f64, decimals: usize) -> String {
    let s = format!("{value:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A rate or percentage with about three significant digits: `200`, `12.5`, `0.33`.
pub fn number(value: f64) -> String {
    let magnitude = value.abs();
    let decimals = if magnitude >= 100.0 {
        0
    } else if magnitude >= 10.0 {
        1
    } else if magnitude >= 1.0 {
        2
    } else {
        3
    };
    trimmed(value, decimals)
}

/// A duration: `0 s`, `250 us`, `700 ms`, `1.2 s`, `3 m 5 s`, `1 h 10 m 33.2 s`.
pub fn duration(ns: u64) -> String {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    match ns {
        0 => "0 s".to_string(),
        n if n < US => format!("{n} ns"),
        n if n < MS => format!("{} us", trimmed(n as f64 / US as f64, 3)),
        n if n < S => format!("{} ms", trimmed(n as f64 / MS as f64, 3)),
        n if n < 60 * S => format!("{} s", trimmed(n as f64 / S as f64, 3)),
        n => {
            let hours = n / (3600 * S);
            let minutes = n % (3600 * S) / (60 * S);
            let seconds = trimmed((n % (60 * S)) as f64 / S as f64, 3);
            if hours > 0 {
                format!("{hours} h {minutes} m {seconds} s")
            } else {
                format!("{minutes} m {seconds} s")
            }
        }
    }
}

/// Seconds with a fixed number of decimals, for time axes: `12.5 s`.
pub fn seconds(ns: u64, decimals: usize) -> String {
    format!("{:.decimals$} s", ns as f64 / 1e9)
}

/// The decimals a time axis needs so that labels `step_ns` apart stay distinct.
pub fn seconds_decimals(step_ns: f64) -> usize {
    let step_s = step_ns / 1e9;
    (0..6)
        .find(|&d| {
            let scaled = step_s * 10f64.powi(d as i32);
            scaled >= 1.0 && (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .or_else(|| (0..6).find(|&d| step_s * 10f64.powi(d as i32) >= 10.0))
        .unwrap_or(6)
}

/// Characters of a command line in text reports: a screenful, after which one is cut.
pub const TEXT_CHARS: usize = 160;

/// Text from a record (a command line, a reason) on one line of at most `max_chars`
/// characters: control characters are escaped (a newline shows as `\n`), and a longer text
/// is cut with `…`, so that it neither breaks a report's lines nor overflows an image title.
pub fn one_line(text: &str, max_chars: usize) -> String {
    // Only as much of `text` is looked at as is shown: it may be megabytes long.
    let mut shown = text.chars().flat_map(|c| {
        let escape = c.is_control();
        let escaped = c.escape_default().take(if escape { usize::MAX } else { 0 });
        escaped.chain(std::iter::once(c).take(usize::from(!escape)))
    });
    let mut out: String = shown.by_ref().take(max_chars).collect();
    if shown.next().is_some() {
        out.pop();
        out.push('…');
    }
    out
}

/// An address in hex, as damo and /proc/pid/maps show them.
pub fn hex(addr: u64) -> String {
    format!("{addr:#x}")
}

/// A wall-clock time in UTC: `2025-06-01 12:34:56 UTC`.
pub fn utc_datetime(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_damo() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(4096), "4.000 KiB");
        assert_eq!(size(3 << 29), "1.500 GiB");
        assert_eq!(size(u64::MAX), "16.000 EiB");
        assert_eq!(size_short(3 << 29), "1.5 GiB");
        assert_eq!(size_short(64 << 20), "64 MiB");
    }

    #[test]
    fn durations_are_readable() {
        assert_eq!(duration(0), "0 s");
        assert_eq!(duration(500), "500 ns");
        assert_eq!(duration(700_000_000), "700 ms");
        assert_eq!(duration(1_200_000_000), "1.2 s");
        assert_eq!(duration(185_000_000_000), "3 m 5 s");
        assert_eq!(duration(4_233_200_000_000), "1 h 10 m 33.2 s");
    }

    #[test]
    fn numbers_keep_three_significant_digits() {
        assert_eq!(number(200.0), "200");
        assert_eq!(number(12.54), "12.5");
        assert_eq!(number(1.0 / 3.0), "0.333");
        assert_eq!(number(0.0), "0");
    }

    #[test]
    fn time_axis_decimals_distinguish_steps() {
        assert_eq!(seconds_decimals(2e9), 0);
        assert_eq!(seconds_decimals(1.5e9), 1);
        assert_eq!(seconds_decimals(0.1e9), 1);
        assert_eq!(seconds_decimals(0.125e9), 3);
        assert_eq!(seconds(1_500_000_000, 1), "1.5 s");
    }

    #[test]
    fn text_from_a_record_stays_on_one_bounded_line() {
        assert_eq!(one_line("sh -c 'a\nb'\t", 40), "sh -c 'a\\nb'\\t");
        assert_eq!(one_line("abcdef", 6), "abcdef");
        assert_eq!(one_line("abcdefg", 6), "abcde…");
        assert_eq!(one_line("ab\ncd", 4), "ab\\…");
        let long = "x".repeat(10_000);
        assert_eq!(one_line(&long, TEXT_CHARS).chars().count(), TEXT_CHARS);
        assert_eq!(one_line("é€", 2), "é€");
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_datetime(0), "1970-01-01 00:00:00 UTC");
        // 2000-03-01 is day 11017: checks the leap-year and March-based arithmetic.
        assert_eq!(
            utc_datetime((11_017 * 86_400 + 3_661) * 1_000_000_000),
            "2000-03-01 01:01:01 UTC"
        );
    }
}
