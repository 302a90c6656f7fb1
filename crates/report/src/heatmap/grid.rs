//! The heatmap's second pass: spreads each snapshot's region frequencies over the time × address
//! cells they overlap, weighted by overlapped time × overlapped bytes, as damo does. A cell's value
//! is the weighted average over the part of it that regions covered, so a half-covered cell at an
//! edge is not darkened by the uncovered half; a cell nothing covered has no value.

use super::axis::AddressAxis;
use crate::time_window::TimeWindow;
use udamon_core::AddrRange;

pub(crate) struct Grid {
    rows: usize,
    cols: usize,
    t0: u64,
    t1: u64,
    row_ns: f64,
    col_bytes: f64,
    /// Σ frequency × bytes × ns per cell, row-major.
    sum: Vec<f64>,
    /// Σ bytes × ns per cell.
    weight: Vec<f64>,
    /// One snapshot's Σ frequency × bytes and Σ bytes per column, reused.
    col_sum: Vec<f64>,
    col_weight: Vec<f64>,
}

impl Grid {
    pub(crate) fn new(rows: usize, cols: usize, shown: TimeWindow, axis_len: u64) -> Grid {
        let TimeWindow {
            start_ns: t0,
            end_ns: t1,
        } = shown;
        Grid {
            rows,
            cols,
            t0,
            t1,
            row_ns: (t1 - t0) as f64 / rows as f64,
            col_bytes: axis_len as f64 / cols as f64,
            sum: vec![0.0; rows * cols],
            weight: vec![0.0; rows * cols],
            col_sum: vec![0.0; cols],
            col_weight: vec![0.0; cols],
        }
    }

    /// Adds one snapshot covering `start_ns..end_ns`; `regions` yields (start, end, frequency).
    pub(crate) fn add(
        &mut self,
        axis: &AddressAxis,
        snapshot: TimeWindow,
        regions: impl Iterator<Item = (u64, u64, f64)>,
    ) {
        let TimeWindow { start_ns, end_ns } = snapshot;
        let (ws, we) = (start_ns.max(self.t0), end_ns.min(self.t1));
        if ws >= we {
            return;
        }
        let (mut lo, mut hi) = (self.cols, 0);
        for (start, end, freq) in regions {
            axis.pieces(AddrRange::new(start, end), |from, to| {
                let (from, to) = (from as f64, to as f64);
                let c0 = ((from / self.col_bytes).floor() as usize).min(self.cols - 1);
                let c1 = ((to / self.col_bytes).ceil() as usize).clamp(c0 + 1, self.cols);
                for c in c0..c1 {
                    let left = c as f64 * self.col_bytes;
                    let overlap = to.min(left + self.col_bytes) - from.max(left);
                    if overlap > 0.0 {
                        self.col_sum[c] += freq * overlap;
                        self.col_weight[c] += overlap;
                        lo = lo.min(c);
                        hi = hi.max(c + 1);
                    }
                }
            });
        }
        if lo >= hi {
            return;
        }
        let (from, to) = ((ws - self.t0) as f64, (we - self.t0) as f64);
        let r0 = ((from / self.row_ns).floor() as usize).min(self.rows - 1);
        let r1 = ((to / self.row_ns).ceil() as usize).clamp(r0 + 1, self.rows);
        for r in r0..r1 {
            let top = r as f64 * self.row_ns;
            let dt = to.min(top + self.row_ns) - from.max(top);
            if dt <= 0.0 {
                continue;
            }
            let row = r * self.cols;
            for c in lo..hi {
                self.sum[row + c] += self.col_sum[c] * dt;
                self.weight[row + c] += self.col_weight[c] * dt;
            }
        }
        self.col_sum[lo..hi].fill(0.0);
        self.col_weight[lo..hi].fill(0.0);
    }

    /// The sums behind the cells, row-major: Σ frequency × bytes × ns and Σ bytes × ns; sums
    /// of grids over the same axis and columns add up to the grid of the time they cover.
    pub(crate) fn into_sums(self) -> (Vec<f64>, Vec<f64>) {
        (self.sum, self.weight)
    }

    /// Cell values, row-major; `None` where nothing was monitored.
    pub(crate) fn finish(self) -> Vec<Option<f64>> {
        self.sum
            .iter()
            .zip(&self.weight)
            .map(|(&s, &w)| (w > 0.0).then(|| s / w))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_overlap_weighted_averages() {
        let axis = AddressAxis::new([AddrRange::new(0, 100)], 0);
        let mut grid = Grid::new(2, 2, TimeWindow::new(0, 20), axis.len());
        // Row 0 (0..10 ns): 0..75 at 4 Hz, 75..100 at 8 Hz.
        grid.add(
            &axis,
            TimeWindow::new(0, 10),
            [(0, 75, 4.0), (75, 100, 8.0)].into_iter(),
        );
        // Row 1, first half only (10..15): all at 2 Hz; second half: nothing monitored.
        grid.add(&axis, TimeWindow::new(10, 15), [(0, 50, 2.0)].into_iter());
        let cells = grid.finish();
        assert_eq!(cells[0], Some(4.0));
        // Column 1 of row 0: 25 bytes at 4, 25 at 8.
        assert_eq!(cells[1], Some(6.0));
        // Half of row 1's time is uncovered: the average is over the covered part.
        assert_eq!(cells[2], Some(2.0));
        assert_eq!(cells[3], None);
    }
}
