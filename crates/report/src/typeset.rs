//! Text in bitmap images, set the way a typesetter would: every glyph of a line on one baseline
//! and at its exact (fractional) advance, the whole line rasterized into one coverage buffer and
//! then painted once.
//!
//! plotters' own bitmap text places each glyph separately, rounding its offsets to whole pixels
//! from the top of the glyph's box: a period or comma lands a pixel or two above the baseline
//! (a dot at mid-height in `3.844`), and advances truncated one by one make the gaps between
//! letters uneven (`0x7f 90`, `m s`). [`Typeset`] wraps a backend and takes over its text,
//! in the same DejaVu Sans that [`crate::plot`] registers; everything else passes through.

use ab_glyph::{Font, FontRef, Glyph, PxScale, ScaleFont, point};
use plotters::prelude::DrawingBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};
use std::sync::OnceLock;

/// The embedded font, parsed once.
fn font() -> &'static FontRef<'static> {
    static FONT: OnceLock<FontRef<'static>> = OnceLock::new();
    FONT.get_or_init(|| {
        FontRef::try_from_slice(dejavu::sans::regular()).expect("DejaVu Sans parses")
    })
}

/// A line of text laid out at a pixel size: its glyphs on the baseline, its box.
pub struct Line {
    glyphs: Vec<Glyph>,
    /// Width (the sum of advances and kerning) and height (ascent to descent), in pixels.
    pub width: f32,
    pub height: f32,
}

impl Line {
    /// Lays `text` out at `size` pixels (plotters' meaning: ascent to descent), with the top of
    /// its box at y = 0 and the baseline at the font's ascent.
    pub fn new(text: &str, size: f64) -> Line {
        let font = font().as_scaled(PxScale::from(size as f32));
        let mut x = 0f32;
        let mut previous = None;
        let mut glyphs = Vec::with_capacity(text.len());
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = previous {
                x += font.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(font.scale(), point(x, font.ascent())));
            x += font.h_advance(id);
            previous = Some(id);
        }
        Line {
            glyphs,
            width: x,
            height: font.ascent() - font.descent(),
        }
    }

    /// The line's coverage, `(width, height, alpha per pixel)` row-major, each pixel the sum of
    /// the glyphs over it (neighbours that share a pixel add up), at most 1.
    pub fn coverage(&self) -> (usize, usize, Vec<f32>) {
        let (w, h) = (
            self.width.ceil() as usize + 1,
            self.height.ceil() as usize + 1,
        );
        let mut alpha = vec![0f32; w * h];
        for glyph in &self.glyphs {
            let Some(outline) = font().outline_glyph(glyph.clone()) else {
                continue; // a space
            };
            let bounds = outline.px_bounds();
            outline.draw(|x, y, c| {
                let px = bounds.min.x as i64 + i64::from(x);
                let py = bounds.min.y as i64 + i64::from(y);
                if (0..w as i64).contains(&px) && (0..h as i64).contains(&py) {
                    let a = &mut alpha[py as usize * w + px as usize];
                    *a = (*a + c).min(1.0);
                }
            });
        }
        (w, h, alpha)
    }
}

/// A backend whose text is set by [`Line`]; everything else goes to the wrapped backend.
pub struct Typeset<B>(pub B);

impl<B: DrawingBackend> DrawingBackend for Typeset<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.blit_bitmap(pos, size, src)
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let line = Line::new(text, style.size());
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -line.width / 2.0,
            HPos::Right => -line.width,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0.0,
            VPos::Center => -line.height / 2.0,
            VPos::Bottom => -line.height,
        };
        let (dx, dy) = (dx.round() as i32, dy.round() as i32);
        let transform = style.transform();
        let (w, h) = self.get_size();
        let (lw, lh, alpha) = line.coverage();
        for y in 0..lh {
            for x in 0..lw {
                let a = alpha[y * lw + x];
                if a <= 0.0 {
                    continue;
                }
                let (tx, ty) = transform.transform(x as i32 + dx, y as i32 + dy);
                let (px, py) = (pos.0 + tx, pos.1 + ty);
                if px >= 0 && py >= 0 && px < w as i32 && py < h as i32 {
                    let shade = BackendColor {
                        alpha: color.alpha * f64::from(a),
                        rgb: color.rgb,
                    };
                    self.0.draw_pixel((px, py), shade)?;
                }
            }
        }
        Ok(())
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let line = Line::new(text, style.size());
        Ok((line.width.ceil() as u32, line.height.ceil() as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ink of each column of a line's coverage: Σ alpha.
    fn columns(line: &Line) -> (Vec<f32>, usize, usize, Vec<f32>) {
        let (w, h, alpha) = line.coverage();
        let ink = (0..w)
            .map(|x| (0..h).map(|y| alpha[y * w + x]).sum())
            .collect();
        (ink, w, h, alpha)
    }

    /// The lowest row with ink in columns `x0..x1`.
    fn bottom(alpha: &[f32], w: usize, h: usize, x0: usize, x1: usize) -> usize {
        (0..h)
            .rev()
            .find(|&y| (x0..x1).any(|x| alpha[y * w + x] > 0.3))
            .expect("ink")
    }

    #[test]
    fn a_period_sits_on_the_baseline_with_the_digits() {
        let line = Line::new("3.8", 13.0);
        let (ink, w, h, alpha) = columns(&line);
        // The glyphs, as runs of inked columns.
        let mut runs = Vec::new();
        let mut start = None;
        for (x, &v) in ink.iter().enumerate().chain([(w, &0.0)]) {
            match (start, v > 0.05) {
                (None, true) => start = Some(x),
                (Some(s), false) => {
                    runs.push((s, x));
                    start = None;
                }
                _ => {}
            }
        }
        assert_eq!(runs.len(), 3, "three glyphs apart: {runs:?}");
        let bottoms: Vec<usize> = runs
            .iter()
            .map(|&(a, b)| bottom(&alpha, w, h, a, b))
            .collect();
        // Round digits overshoot the baseline by a fraction of a pixel; a flat period does not.
        assert!(
            bottoms.iter().all(|&b| b.abs_diff(bottoms[0]) <= 1),
            "one baseline: {bottoms:?}"
        );
    }

    #[test]
    fn equal_letters_are_spaced_evenly() {
        // Ten zeros: the ink's centre of each is one advance from the last, to a fraction of a
        // pixel (plotters' truncated advances were off by up to a whole pixel).
        let size = 13.0;
        let line = Line::new("0000000000", size);
        let (ink, ..) = columns(&line);
        let advance = line.width / 10.0;
        let centres: Vec<f32> = (0..10)
            .map(|i| {
                let (a, b) = (
                    (i as f32 * advance) as usize,
                    ((i + 1) as f32 * advance) as usize,
                );
                let total: f32 = ink[a..b].iter().sum();
                ink[a..b]
                    .iter()
                    .enumerate()
                    .map(|(x, v)| (a + x) as f32 * v)
                    .sum::<f32>()
                    / total
            })
            .collect();
        for pair in centres.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(
                (gap - advance).abs() < 0.35,
                "gap {gap} against an advance of {advance}: {centres:?}"
            );
        }
    }

    #[test]
    fn descenders_stay_inside_the_box() {
        // `[anon]` and `libcrypto.so.3` reach below the baseline: nothing of them is cut.
        for text in ["[anon]", "libcrypto.so.3", "170,880 KiB"] {
            let line = Line::new(text, 13.0);
            let (w, h, alpha) = line.coverage();
            let last_row: f32 = (0..w).map(|x| alpha[(h - 1) * w + x]).sum();
            assert!(last_row < 0.01, "{text}: ink on the last row");
            assert!(alpha.iter().sum::<f32>() > 10.0, "{text}: inked");
        }
    }
}
