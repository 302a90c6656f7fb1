//! Reports as images (plotters): PNG or SVG by the file's extension, at one size, with text in
//! DejaVu Sans, embedded (from the `dejavu` crate) so that no system font is needed, and set
//! in PNGs by [`crate::typeset`]. Each report that can be drawn implements [`Drawing`].

use crate::typeset::Typeset;
use crate::{ReportError, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;

/// Image size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageOptions {
    pub width: u32,
    pub height: u32,
}

impl Default for ImageOptions {
    fn default() -> Self {
        ImageOptions {
            width: 1200,
            height: 800,
        }
    }
}

/// The image formats, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Svg,
}

impl Format {
    /// The format `path`'s extension names (`.png` or `.svg`, any case).
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "png" => Some(Format::Png),
            "svg" => Some(Format::Svg),
            _ => None,
        }
    }
}

/// The result of drawing on a backend.
pub type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A report that draws itself on any plotters backend.
pub trait Drawing {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB>;
}

/// Draws `drawing` into a `format` image at `path`.
pub fn write(
    drawing: &impl Drawing,
    path: &Path,
    format: Format,
    opts: &ImageOptions,
) -> Result<()> {
    let failed = |message: String| ReportError::Image {
        path: path.display().to_string(),
        message,
    };
    if !font_ready() {
        return Err(failed("the embedded font could not be loaded".into()));
    }
    let size = (opts.width, opts.height);
    match format {
        Format::Png => {
            let root = Typeset(BitMapBackend::new(path, size)).into_drawing_area();
            drawing.draw(&root).map_err(|e| failed(e.to_string()))?;
            root.present().map_err(|e| failed(e.to_string()))
        }
        Format::Svg => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            drawing.draw(&root).map_err(|e| failed(e.to_string()))?;
            root.present().map_err(|e| failed(e.to_string()))
        }
    }
}

/// `drawing` as the text of an SVG image, for pages that inline their images.
pub fn svg(drawing: &impl Drawing, opts: &ImageOptions) -> Result<String> {
    let failed = |message: String| ReportError::Image {
        path: "(inline SVG)".into(),
        message,
    };
    if !font_ready() {
        return Err(failed("the embedded font could not be loaded".into()));
    }
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (opts.width, opts.height)).into_drawing_area();
        drawing.draw(&root).map_err(|e| failed(e.to_string()))?;
        root.present().map_err(|e| failed(e.to_string()))?;
    }
    Ok(text)
}

/// Registers the embedded font as plotters' "sans-serif" once; false if it could not be loaded.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_ok()
    })
}
