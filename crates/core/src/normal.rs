//! The standard normal distribution's tails: the approximation that the statistical tests of
//! [`crate::density`] and [`crate::touched`] fall back on where their exact sums would run over
//! thousands of terms (tests of many samples, asked of every region every window).

/// P(Z <= z) for a standard normal Z.
pub fn below(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' Chebyshev fit, within 1.2e-7 relative).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_match_the_tables() {
        assert!((below(0.0) - 0.5).abs() < 1e-7);
        assert!((below(1.96) - 0.975_002).abs() < 1e-6);
        assert!((below(-2.326_348) - 0.01).abs() < 1e-6);
        assert!(below(-10.0) < 1e-22 && below(-10.0) > 0.0);
    }
}
