//! Parsing durations and sizes as users type them: `5ms`, `1s`, `2M`, `1.5GiB`, `0x7f00...`.

/// A duration in microseconds. A bare number is microseconds (DAMON's unit); otherwise a
/// number with a unit: ns, us, ms, s, m, h (e.g. `5ms`, `1.5s`).
pub fn parse_duration_us(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Ok(us) = s.parse::<u64>() {
        return Ok(us);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        format!("'{s}' is not a duration: use e.g. 5ms, 100ms, 1s, or microseconds")
    })?;
    let scale = match unit.trim() {
        "ns" => 1e-3,
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" | "min" => 60e6,
        "h" => 3600e6,
        other => {
            return Err(format!(
                "'{other}' is not a time unit: use ns, us, ms, s, m or h"
            ));
        }
    };
    Ok((value * scale).round() as u64)
}

/// A size or address in bytes: a bare or `0x` hex number, or a number with a unit
/// (K/KB/KiB = 1024, M, G, T; B is optional).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| format!("'{s}' is not a hex number"));
    }
    if let Ok(b) = s.parse::<u64>() {
        return Ok(b);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size: use e.g. 4096, 4K, 2M, 1.5G or 0x1000"))?;
    let unit = unit
        .trim()
        .trim_end_matches(['B', 'b'])
        .trim_end_matches('i');
    let scale: u64 = match unit.to_ascii_uppercase().as_str() {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("'{s}' has an unknown size unit: use K, M, G or T")),
    };
    Ok((value * scale as f64).round() as u64)
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
                .contains("time unit")
        );
        assert!(parse_duration_us("fast").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2MB"), Ok(2 << 20));
        assert_eq!(parse_size("0x7f00"), Ok(0x7f00));
        assert!(parse_size("3 apples").is_err());
    }
}
