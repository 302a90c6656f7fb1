//! Percentiles as damo computes them (`_damo_dist.py`): the value at index `⌊p/100 · N⌋` of the
//! ascending values, clamped to the last one, so `damo report wss --range 50 51 1` and ours agree.

use crate::{ReportError, Result};

/// damo's default `--range 0 101 25`.
pub const DEFAULT: [f64; 5] = [0.0, 25.0, 50.0, 75.0, 100.0];

/// The `p`-th percentile of ascending `sorted` values; `None` when there are none.
pub fn of_sorted(sorted: &[u64], p: f64) -> Option<u64> {
    let last = sorted.len().checked_sub(1)?;
    let index = (p / 100.0 * sorted.len() as f64).floor() as usize;
    Some(sorted[index.min(last)])
}

/// The percentiles `start, start + step, ...` below `stop`, like damo's `--range start stop step`.
pub fn range(start: f64, stop: f64, step: f64) -> Result<Vec<f64>> {
    if step.is_nan() || step <= 0.0 {
        return Err(ReportError::Percentiles(format!(
            "the step of a percentile range must be positive, got {step}"
        )));
    }
    if start.is_nan() || stop.is_nan() || start >= stop {
        return Err(ReportError::Percentiles(format!(
            "a percentile range needs start < stop, got {start} and {stop}"
        )));
    }
    let count = ((stop - start) / step).ceil() as usize;
    let list: Vec<f64> = (0..count).map(|i| start + i as f64 * step).collect();
    check(&list)?;
    Ok(list)
}

/// Checks that every percentile is within 0..=100.
pub fn check(list: &[f64]) -> Result<()> {
    match list.iter().find(|p| !(0.0..=100.0).contains(*p)) {
        Some(p) => Err(ReportError::Percentiles(format!(
            "percentiles must be within 0 and 100, got {p}"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_floor_of_fraction_and_clamped() {
        let v = [10, 20, 30, 40];
        assert_eq!(of_sorted(&v, 0.0), Some(10));
        assert_eq!(of_sorted(&v, 49.0), Some(20)); // ⌊0.49·4⌋ = 1
        assert_eq!(of_sorted(&v, 50.0), Some(30)); // ⌊0.5·4⌋ = 2
        assert_eq!(of_sorted(&v, 100.0), Some(40)); // 4, clamped to 3
        assert_eq!(of_sorted(&[], 50.0), None);
    }

    #[test]
    fn range_behaves_like_python_range() {
        assert_eq!(range(0.0, 101.0, 25.0).unwrap(), DEFAULT.to_vec());
        assert_eq!(range(50.0, 51.0, 1.0).unwrap(), vec![50.0]);
        assert_eq!(
            range(90.0, 100.0, 2.5).unwrap(),
            vec![90.0, 92.5, 95.0, 97.5]
        );
    }

    #[test]
    fn bad_ranges_are_rejected() {
        assert!(range(0.0, 100.0, 0.0).is_err());
        assert!(range(50.0, 10.0, 1.0).is_err());
        assert!(range(0.0, 201.0, 100.0).is_err());
        assert!(check(&[-1.0]).is_err());
        assert!(check(&[0.0, 99.9, 100.0]).is_ok());
    }
}
