//! The heatmap colour ramp: viridis (dark purple → blue → green → yellow), perceptually uniform and
//! readable with colour-blindness, as RGB for images and as the nearest xterm-256 colours for
//! terminals, with damo's ten levels (digits 0-9) for the terminal.

/// Viridis sampled at 0, 1/9, ..., 1 (matplotlib's `_viridis_data`).
pub const VIRIDIS: [(u8, u8, u8); 10] = [
    (68, 1, 84),
    (72, 40, 120),
    (62, 73, 137),
    (49, 104, 142),
    (38, 130, 142),
    (31, 158, 137),
    (53, 183, 121),
    (110, 206, 88),
    (181, 222, 43),
    (253, 231, 37),
];

/// Levels a terminal cell can show, as damo's digits 0-9.
pub const LEVELS: u8 = 10;

/// The colour of `t` in 0..=1 (clamped) on the ramp.
pub fn rgb(t: f64) -> (u8, u8, u8) {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let pos = t * (VIRIDIS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The level of `value` on a scale up to `max`: 0 only for no access at all, so that rarely
/// accessed memory is never shown as cold; 1..=9 split (0, max] evenly.
pub fn level(value: f64, max: f64) -> u8 {
    if value <= 0.0 || max <= 0.0 {
        return 0;
    }
    let step = max / f64::from(LEVELS - 1);
    // Float-to-int casts saturate, so huge ratios land on the top level.
    ((value / step).ceil() as u8).clamp(1, LEVELS - 1)
}

/// The upper bound of `level`'s values on a scale up to `max`.
pub fn level_upper(level: u8, max: f64) -> f64 {
    max * f64::from(level) / f64::from(LEVELS - 1)
}

/// The RGB colour of a terminal level: dark gray for no access, then the ramp.
pub fn level_rgb(level: u8) -> (u8, u8, u8) {
    if level == 0 {
        (38, 38, 38)
    } else {
        rgb(f64::from(level - 1) / f64::from(LEVELS - 2))
    }
}

/// The xterm-256 colour index nearest to `rgb` (6×6×6 cube and gray ramp; the 16 system colours
/// are left out because terminals theme them).
pub fn xterm256((r, g, b): (u8, u8, u8)) -> u8 {
    const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let dist = |c: (u8, u8, u8)| {
        let d = |x: u8, y: u8| (i32::from(x) - i32::from(y)).pow(2);
        d(c.0, r) + d(c.1, g) + d(c.2, b)
    };
    (16..=255u8)
        .min_by_key(|&i| {
            let c = if i >= 232 {
                let v = 8 + 10 * (i - 232);
                (v, v, v)
            } else {
                let k = i - 16;
                (
                    CUBE[usize::from(k / 36)],
                    CUBE[usize::from(k / 6 % 6)],
                    CUBE[usize::from(k % 6)],
                )
            };
            dist(c)
        })
        .unwrap_or(16)
}

/// A text colour readable on `level`'s background.
pub fn level_fg(level: u8) -> u8 {
    let (r, g, b) = level_rgb(level);
    let luma = 0.2126 * f64::from(r) + 0.7152 * f64::from(g) + 0.0722 * f64::from(b);
    if luma > 110.0 { 16 } else { 231 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_ends_and_brightens() {
        assert_eq!(rgb(0.0), VIRIDIS[0]);
        assert_eq!(rgb(1.0), VIRIDIS[9]);
        assert_eq!(rgb(2.0), VIRIDIS[9]);
        let luma =
            |(r, g, b): (u8, u8, u8)| 0.2126 * r as f64 + 0.7152 * g as f64 + 0.0722 * b as f64;
        for i in 0..20 {
            assert!(luma(rgb(i as f64 / 20.0)) < luma(rgb((i + 1) as f64 / 20.0)));
        }
    }

    #[test]
    fn level_zero_is_only_for_no_access() {
        assert_eq!(level(0.0, 200.0), 0);
        assert_eq!(level(0.001, 200.0), 1);
        assert_eq!(level(200.0 / 9.0, 200.0), 1);
        assert_eq!(level(200.0 / 9.0 + 0.01, 200.0), 2);
        assert_eq!(level(200.0, 200.0), 9);
        assert_eq!(level(500.0, 200.0), 9);
        assert_eq!(level_upper(9, 200.0), 200.0);
    }

    #[test]
    fn xterm_colours_are_nearest() {
        assert_eq!(xterm256((0, 0, 0)), 16);
        assert_eq!(xterm256((255, 255, 255)), 231);
        assert_eq!(xterm256((255, 0, 0)), 196);
        assert_eq!(xterm256((128, 128, 128)), 244);
        // The ramp's levels stay distinct in 256 colours.
        let mut seen: Vec<u8> = (0..LEVELS).map(|l| xterm256(level_rgb(l))).collect();
        seen.dedup();
        assert_eq!(seen.len(), usize::from(LEVELS));
    }
}
