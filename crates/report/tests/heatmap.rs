//! The heatmap on the banded workload: the hottest area is picked, the never-monitored hole is
//! collapsed, the bands' heat is ordered, the phase change lands on its row, and the terminal,
//! PNG and SVG renderings are what they claim.

mod common;

use common::*;
use std::cell::Cell;
use std::convert::Infallible;
use udamon_record::model::{Frame, Snapshot};
use udamon_report::ReportError;
use udamon_report::heatmap::term::{TermStyle, render};
use udamon_report::heatmap::{AddressSelection, Heatmap, HeatmapOptions, heatmap};
use udamon_report::plot::{Format, ImageOptions, write};
use udamon_report::time_window::TimeWindow;

type Frames<'a> = std::iter::Cloned<std::slice::Iter<'a, Frame>>;

fn opener<'a>(frames: &'a [Frame]) -> impl FnMut() -> Result<Frames<'a>, Infallible> + 'a {
    move || Ok(frames.iter().cloned())
}

/// One row per snapshot; 88 columns make 0.5 MiB columns over the 44 MiB shown.
fn options() -> HeatmapOptions {
    HeatmapOptions {
        rows: NR_BANDED as usize,
        cols: 88,
        ..HeatmapOptions::terminal(None)
    }
}

fn build(opts: &HeatmapOptions) -> Result<Heatmap, ReportError> {
    let frames = banded_frames();
    heatmap(&header(1), opener(&frames), opts)
}

/// Average of the cells of `rows` × the columns whose addresses lie in `band`.
fn band_heat(map: &Heatmap, rows: std::ops::Range<usize>, band: (u64, u64)) -> f64 {
    let cols: Vec<usize> = (0..map.cols)
        .filter(|&c| {
            let a = map.axis.address_at((c as f64 + 0.5) * map.col_bytes());
            band.0 <= a && a < band.1
        })
        .collect();
    assert!(!cols.is_empty());
    let cells: Vec<f64> = rows
        .flat_map(|r| cols.iter().map(move |&c| (r, c)))
        .map(|(r, c)| map.cell(r, c).expect("a monitored cell"))
        .collect();
    cells.iter().sum::<f64>() / cells.len() as f64
}

#[test]
fn picks_the_hottest_area_and_collapses_the_hole() {
    let map = build(&options()).unwrap();
    assert_eq!(map.target, 0);
    assert_eq!(map.areas.len(), 2, "the banded area and the far one");
    assert_eq!(map.area, Some(0));
    assert_eq!((map.axis.start(), map.axis.end()), (HOT.0, COLD.1));
    assert_eq!(
        map.axis.len(),
        (HOT.1 - HOT.0) + (WARM.1 - WARM.0) + (COLD.1 - COLD.0)
    );
    let gaps = map.axis.gaps();
    assert_eq!(gaps.len(), 1);
    assert_eq!((gaps[0].start, gaps[0].end), HOLE);
    for c in 0..map.cols {
        assert!(
            (0..map.rows).any(|r| map.cell(r, c).is_some()),
            "column {c} is empty"
        );
    }
    assert_eq!((map.start_ns, map.end_ns), (0, NR_BANDED * AGGR_NS));
}

#[test]
fn without_collapsing_the_hole_shows_as_empty_columns() {
    let map = build(&HeatmapOptions {
        address: AddressSelection::Range {
            start: HOT.0,
            end: COLD.1,
        },
        collapse_gaps: false,
        ..options()
    })
    .unwrap();
    let empty = (0..map.cols)
        .filter(|&c| (0..map.rows).all(|r| map.cell(r, c).is_none()))
        .count();
    // The hole is 16 of 60 MiB; columns straddling its edges are partly covered.
    let hole_cols = (HOLE.1 - HOLE.0) as f64 / map.col_bytes();
    assert!(
        empty as f64 >= hole_cols - 2.0 && empty as f64 <= hole_cols,
        "{empty} empty columns"
    );
}

#[test]
fn bands_are_ordered_and_the_phase_change_is_on_its_row() {
    let map = build(&options()).unwrap();
    let phase = PHASES_AT as usize;
    let (hot, warm, cold) = (
        band_heat(&map, 0..phase, HOT),
        band_heat(&map, 0..phase, WARM),
        band_heat(&map, 0..phase, COLD),
    );
    assert!(hot > warm && warm > cold, "{hot} {warm} {cold}");
    // 18, 8 and 1 accesses per 100 ms window.
    assert_eq!((hot, warm, cold), (180.0, 80.0, 10.0));
    let after = (
        band_heat(&map, phase..map.rows, HOT),
        band_heat(&map, phase..map.rows, COLD),
    );
    assert_eq!(after, (10.0, 180.0));
    let first_cold_hot = (0..map.rows)
        .find(|&r| map.cell(r, map.cols - 1) > map.cell(r, 0))
        .unwrap();
    assert_eq!(first_cold_hot, phase);
    assert_eq!(map.max, 180.0);
}

#[test]
fn time_and_address_ranges_narrow_the_picture() {
    let map = build(&HeatmapOptions {
        time_range: Some(TimeWindow::new(PHASES_AT * AGGR_NS, NR_BANDED * AGGR_NS)),
        rows: 10,
        ..options()
    })
    .unwrap();
    assert_eq!(map.start_ns, PHASES_AT * AGGR_NS);
    assert!(map.cell(0, map.cols - 1) > map.cell(0, 0));

    let map = build(&HeatmapOptions {
        address: AddressSelection::All,
        ..options()
    })
    .unwrap();
    assert_eq!((map.axis.start(), map.axis.end()), (HOT.0, FAR.1));
    assert_eq!(map.axis.gaps().len(), 2);

    let map = build(&HeatmapOptions {
        address: AddressSelection::Range {
            start: WARM.0 + MIB,
            end: COLD.0 + MIB,
        },
        ..options()
    })
    .unwrap();
    assert_eq!(
        (map.axis.start(), map.axis.end()),
        (WARM.0 + MIB, COLD.0 + MIB)
    );
    assert_eq!(map.axis.len(), 8 * MIB);
}

#[test]
fn reads_the_record_twice_and_reports_bad_requests() {
    let frames = banded_frames();
    let opens = Cell::new(0);
    let open = || {
        opens.set(opens.get() + 1);
        Ok::<_, Infallible>(frames.clone())
    };
    heatmap(&header(1), open, &options()).unwrap();
    assert_eq!(opens.get(), 2);

    let err = build(&HeatmapOptions {
        target: Some(3),
        ..options()
    })
    .unwrap_err();
    assert!(err.to_string().contains("0 (workload-0)"), "{err}");
    let err = build(&HeatmapOptions {
        address: AddressSelection::Range {
            start: 0,
            end: 0x1000,
        },
        ..options()
    })
    .unwrap_err();
    assert!(matches!(err, ReportError::NothingInRange { .. }), "{err}");
    let err = build(&HeatmapOptions {
        time_range: Some(TimeWindow::new(
            NR_BANDED * AGGR_NS * 2,
            NR_BANDED * AGGR_NS * 3,
        )),
        ..options()
    })
    .unwrap_err();
    assert!(matches!(err, ReportError::EmptyTimeRange { .. }), "{err}");
    // Snapshots of no length: no time range was given, so none is named (it said "the time
    // range 0-18446744073709551615 ns").
    let instant: Vec<Frame> = banded_frames()
        .into_iter()
        .map(|f| match f {
            Frame::Snapshot(s) => Frame::Snapshot(Snapshot {
                start_ns: 0,
                end_ns: 0,
                ..s
            }),
            other => other,
        })
        .collect();
    let Err(err) = heatmap(&header(1), opener(&instant), &options()) else {
        panic!("a heatmap of no time");
    };
    assert!(matches!(err, ReportError::NoTimeSpan), "{err}");
    assert!(!err.to_string().contains("18446744073709551615"), "{err}");
    let err = build(&HeatmapOptions {
        cols: 0,
        ..options()
    })
    .unwrap_err();
    assert!(matches!(err, ReportError::Resolution { .. }), "{err}");
}

#[test]
fn plain_terminal_text_has_axes_legend_and_digits() {
    let map = build(&options()).unwrap();
    let text = render(&map, TermStyle { color: false });
    assert!(!text.contains('\x1b'), "escapes in plain mode");
    assert!(text.contains("# legend: 0 1 2 3 4 5 6 7 8 9"), "{text}");
    // Time runs down here and across in images (each as damo draws it): both name their axes.
    for axis in [
        "time runs down, addresses run right",
        "# x: addresses ",
        "# y: time ",
    ] {
        assert!(text.contains(axis), "missing {axis:?} in:\n{text}");
    }
    assert!(text.contains("up to 180 Hz, in steps of 20 Hz"), "{text}");
    assert!(text.contains("0x10000000"), "{text}");
    assert!(text.contains("16 MiB at 0x10c00000"), "{text}");
    let grid: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.len() > map.cols && l[l.len() - map.cols..].bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    assert_eq!(grid.len(), map.rows);
    let first = grid[0];
    let cells = &first[first.len() - map.cols..];
    // 180 Hz → 9, 80 Hz → 4, 10 Hz → 1 on a 180 Hz scale in steps of 20 Hz.
    assert!(
        cells.starts_with("99999999") && cells.ends_with("1111"),
        "{first}"
    );
    assert!(cells.contains("4444"), "{first}");
    assert!(first.starts_with("0.0 s "), "{first}");
    // The collapsed hole is marked on the tick lines, at the warm/cold boundary (column 24).
    let tick = text
        .lines()
        .find(|l| l.contains('/') && !l.starts_with('#'))
        .unwrap();
    let margin = first.len() - map.cols;
    assert_eq!(tick.find('/'), Some(margin + 24), "{tick}");
}

#[test]
fn colour_terminal_text_uses_256_colour_backgrounds() {
    let map = build(&options()).unwrap();
    let text = render(&map, TermStyle { color: true });
    assert!(text.contains("\x1b[48;5;"));
    assert!(text.contains("\x1b[0m"));
    let legend = text.lines().find(|l| l.starts_with("# legend:")).unwrap();
    assert_eq!(legend.matches("\x1b[48;5;").count(), 10);
}

#[test]
fn terminal_options_fit_the_width() {
    let frames = banded_frames();
    let map = heatmap(
        &header(1),
        opener(&frames),
        &HeatmapOptions::terminal(Some(60)),
    )
    .unwrap();
    let text = render(&map, TermStyle { color: false });
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.len() <= 60, "{} chars: {line}", line.len());
    }
}

fn image_dir() -> (Option<tempfile::TempDir>, std::path::PathBuf) {
    // Set UDAMON_REPORT_IMAGE_DIR to keep the images for a look.
    match std::env::var_os("UDAMON_REPORT_IMAGE_DIR") {
        Some(dir) => (None, dir.into()),
        None => {
            let tmp = tempfile::tempdir().unwrap();
            let path = tmp.path().to_path_buf();
            (Some(tmp), path)
        }
    }
}

#[test]
fn png_has_the_requested_size_and_many_colours() {
    let map = build(&HeatmapOptions::image()).unwrap();
    let (_keep, dir) = image_dir();
    let path = dir.join("heatmap.png");
    let opts = ImageOptions {
        width: 900,
        height: 600,
    };
    write(&map, &path, Format::Png, &opts).unwrap();
    let decoder = png::Decoder::new(std::fs::File::open(&path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (900, 600));
    let bytes = &buf[..info.buffer_size()];
    let channels = info.color_type.samples();
    let mut colours: Vec<&[u8]> = bytes.chunks(channels).collect();
    colours.sort();
    colours.dedup();
    // The bands, the colour bar's ramp and anti-aliased text.
    assert!(colours.len() > 50, "{} colours", colours.len());
}

#[test]
fn svg_has_labels_cells_and_a_scale() {
    let map = build(&HeatmapOptions::image()).unwrap();
    let (_keep, dir) = image_dir();
    let path = dir.join("heatmap.svg");
    write(&map, &path, Format::Svg, &ImageOptions::default()).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
    for want in [
        "Time (s)",
        "Address (",
        "Access frequency (Hz)",
        "0x10000000",
        "gap 16 MiB",
    ] {
        assert!(svg.contains(want), "missing {want}");
    }
    // Equal neighbours merge: 2 phases × 3 bands × 500 columns plus the colour bar at most.
    let rects = svg.matches("<rect").count();
    assert!(rects > 255 && rects < 2 * 3 * 500 + 300, "{rects} rects");
}

#[test]
fn a_huge_resolution_is_bounded_by_what_the_output_shows() {
    let huge = (100_000, 100_000);
    let image = build(&HeatmapOptions {
        rows: huge.0,
        cols: huge.1,
        ..HeatmapOptions::image()
    })
    .unwrap();
    let pixels = ImageOptions::default();
    assert_eq!(
        (image.rows, image.cols),
        (pixels.height as usize, pixels.width as usize)
    );
    assert_eq!(image.cells.len(), image.rows * image.cols);
    let term = build(&HeatmapOptions {
        rows: huge.0,
        cols: huge.1,
        ..HeatmapOptions::terminal(Some(100))
    })
    .unwrap();
    assert!(
        term.rows <= 1000 && term.cols <= 160,
        "{}x{}",
        term.rows,
        term.cols
    );
    let small = build(&HeatmapOptions {
        rows: 7,
        cols: 9,
        ..HeatmapOptions::image()
    })
    .unwrap();
    assert_eq!(
        (small.rows, small.cols),
        (7, 9),
        "within the limit as asked"
    );
}
