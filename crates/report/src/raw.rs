//! Every frame of a record as JSON lines, streaming: a header line, then one line per snapshot or
//! event in record order, each tagged with `"frame"` so that `jq 'select(.frame=="event")'` works.

use crate::Result;
use serde::Serialize;
use std::io::Write;
use udamon_record::model::{Frame, Header};

#[derive(Serialize)]
struct HeaderLine<'a> {
    frame: &'static str,
    #[serde(flatten)]
    header: &'a Header,
}

/// Lines written, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RawSummary {
    pub snapshots: usize,
    pub events: usize,
}

/// Writes the header and every frame to `out`, one JSON object per line.
pub fn write_raw<W: Write>(
    header: &Header,
    frames: impl IntoIterator<Item = Frame>,
    mut out: W,
) -> Result<RawSummary> {
    let mut summary = RawSummary::default();
    serde_json::to_writer(
        &mut out,
        &HeaderLine {
            frame: "header",
            header,
        },
    )
    .map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    for frame in frames {
        match &frame {
            Frame::Snapshot(_) => summary.snapshots += 1,
            Frame::Event(_) => summary.events += 1,
        }
        serde_json::to_writer(&mut out, &frame).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(summary)
}
