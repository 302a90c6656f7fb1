//! damo's numbers: plain JSON numbers, or strings in any form damo itself accepts
//! (`_damo_fmt_str.text_to_*`): `"539809434100"`, comma-grouped `"94,827,419,009,024"`,
//! with units (`"5 ms"`, `"1 h 2 m"`, `"1.5 GiB"`, `"12.5 %"`) and `"max"`.

use serde::Deserialize;

/// A number as found in a damo JSON file, not yet interpreted.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a number, or a string such as \"30 s\", \"1 GiB\" or \"max\""
)]
pub enum Num {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Text(String),
}

/// What the number measures, which decides the units its text may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A plain count.
    Count,
    Bytes,
    Nanoseconds,
    Microseconds,
    Percent,
}

impl Num {
    /// The value as a non-negative number in `unit` (fractions are rounded).
    pub fn value(&self, unit: Unit) -> Result<f64, String> {
        let v = match self {
            Num::Unsigned(v) => *v as f64,
            Num::Signed(v) => *v as f64,
            Num::Float(v) => *v,
            Num::Text(t) => parse_text(t, unit)?,
        };
        if v.is_nan() || v < 0.0 {
            return Err(format!("{} is not a non-negative number", self.describe()));
        }
        Ok(v)
    }

    /// The value as an integer in `unit`; exact for integers up to `u64::MAX`.
    pub fn u64(&self, unit: Unit) -> Result<u64, String> {
        if let Num::Unsigned(v) = self {
            return Ok(*v);
        }
        if let Num::Text(t) = self
            && let Some(v) = exact_integer(t)
        {
            return Ok(v);
        }
        // `as` saturates, which is what "max" and out-of-range values should become.
        Ok(self.value(unit)?.round() as u64)
    }

    pub fn u32(&self, unit: Unit) -> Result<u32, String> {
        let v = self.u64(unit)?;
        u32::try_from(v).map_err(|_| format!("{} does not fit in 32 bits", self.describe()))
    }

    fn describe(&self) -> String {
        match self {
            Num::Unsigned(v) => v.to_string(),
            Num::Signed(v) => v.to_string(),
            Num::Float(v) => v.to_string(),
            Num::Text(t) => format!("{t:?}"),
        }
    }
}

/// Integers written as text, with or without comma grouping, parsed without going through
/// floating point (addresses above 2^53 must survive).
fn exact_integer(t: &str) -> Option<u64> {
    let t = t.trim();
    if t == "max" {
        return Some(u64::MAX);
    }
    let digits: String = t.chars().filter(|&c| c != ',').collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

const BYTE_UNITS: [(&str, f64); 19] = [
    ("B", 1.0),
    ("K", KIB),
    ("KB", KIB),
    ("KiB", KIB),
    ("M", KIB * KIB),
    ("MB", KIB * KIB),
    ("MiB", KIB * KIB),
    ("G", KIB * KIB * KIB),
    ("GB", KIB * KIB * KIB),
    ("GiB", KIB * KIB * KIB),
    ("T", KIB * KIB * KIB * KIB),
    ("TB", KIB * KIB * KIB * KIB),
    ("TiB", KIB * KIB * KIB * KIB),
    ("P", KIB * KIB * KIB * KIB * KIB),
    ("PB", KIB * KIB * KIB * KIB * KIB),
    ("PiB", KIB * KIB * KIB * KIB * KIB),
    ("E", KIB * KIB * KIB * KIB * KIB * KIB),
    ("EB", KIB * KIB * KIB * KIB * KIB * KIB),
    ("EiB", KIB * KIB * KIB * KIB * KIB * KIB),
];
const KIB: f64 = 1024.0;

const TIME_UNITS_NS: [(&str, f64); 7] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
    ("m", 60e9),
    ("h", 3600e9),
    ("d", 86400e9),
];

fn plain(t: &str) -> Option<f64> {
    let t = t.trim();
    if t == "max" {
        return Some(u64::MAX as f64);
    }
    let digits: String = t.chars().filter(|&c| c != ',').collect();
    digits.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Splits `"1.5 GiB"` or `"1.5GiB"` into a number and a unit from `units`.
fn with_unit(t: &str, units: &[(&str, f64)]) -> Option<f64> {
    let t = t.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic() || c == '%')?;
    let (number, unit) = t.split_at(split);
    let factor = units.iter().find(|(u, _)| *u == unit.trim())?.1;
    Some(plain(number)? * factor)
}

fn parse_text(t: &str, unit: Unit) -> Result<f64, String> {
    if let Some(v) = plain(t) {
        return Ok(v);
    }
    let parsed = match unit {
        Unit::Count => None,
        Unit::Bytes => with_unit(t, &BYTE_UNITS),
        Unit::Nanoseconds => time_ns(t),
        Unit::Microseconds => time_ns(t).map(|ns| ns / 1e3),
        Unit::Percent => with_unit(t, &[("%", 1.0)]),
    };
    parsed.ok_or_else(|| format!("cannot read {t:?} as a number of {}", unit_name(unit)))
}

/// `"5 ms"`, `"1.500 s"`, or damo's compound `"1 h 2 m 3.5 s"`.
fn time_ns(t: &str) -> Option<f64> {
    let fields: Vec<&str> = t.split_whitespace().collect();
    if fields.len() > 2 {
        if !fields.len().is_multiple_of(2) {
            return None;
        }
        return fields
            .chunks(2)
            .map(|pair| with_unit(&pair.concat(), &TIME_UNITS_NS))
            .sum();
    }
    with_unit(t, &TIME_UNITS_NS)
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Count => "items",
        Unit::Bytes => "bytes",
        Unit::Nanoseconds | Unit::Microseconds => "time",
        Unit::Percent => "percent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Num {
        Num::Text(t.to_string())
    }

    #[test]
    fn damo_string_forms() {
        assert_eq!(text("539809434100").u64(Unit::Count), Ok(539_809_434_100));
        assert_eq!(
            text("94,827,419,009,024").u64(Unit::Bytes),
            Ok(94_827_419_009_024)
        );
        assert_eq!(text("max").u64(Unit::Bytes), Ok(u64::MAX));
        assert_eq!(text("5 ms").u64(Unit::Microseconds), Ok(5000));
        assert_eq!(text("5 ms").u64(Unit::Nanoseconds), Ok(5_000_000));
        assert_eq!(
            text("1 h 2 m 3.5 s").u64(Unit::Nanoseconds),
            Ok(3_723_500_000_000)
        );
        assert_eq!(text("1.5 GiB").u64(Unit::Bytes), Ok(3 << 29));
        assert_eq!(text("0 B").u64(Unit::Bytes), Ok(0));
        assert_eq!(text("143.027 MiB").u64(Unit::Bytes), Ok(149_974_680));
        assert_eq!(text("12.5 %").value(Unit::Percent), Ok(12.5));
        assert_eq!(Num::Float(2.6).u64(Unit::Count), Ok(3));
    }

    #[test]
    fn addresses_above_2_pow_53_are_exact() {
        let addr = (1u64 << 60) + 1;
        assert_eq!(text(&addr.to_string()).u64(Unit::Bytes), Ok(addr));
        assert_eq!(Num::Unsigned(addr).u64(Unit::Bytes), Ok(addr));
    }

    #[test]
    fn nonsense_is_refused_with_the_text() {
        let e = text("five").u64(Unit::Count).unwrap_err();
        assert!(e.contains("\"five\""), "{e}");
        assert!(text("3 parsecs").u64(Unit::Nanoseconds).is_err());
        assert!(Num::Signed(-1).u64(Unit::Count).is_err());
        assert!(text("5000000000").u32(Unit::Count).is_err());
    }
}
