//! Telling record formats apart by their content (never by file name), and opening any of them
//! as one stream of frames, so that every report works on every supported input.

use crate::damo::binary;
use crate::damo::{self, DamoFormat};
use crate::error::{Damage, RecordError, describe_start};
use crate::frame::MAGIC;
use crate::model::{Frame, Header};
use crate::reader::{RecordReader, read_full};
use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// How much of a file is looked at to decide its format.
pub(crate) const SNIFF_LEN: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Udamon,
    Damo(DamoFormat),
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Udamon => "udamon record",
            Format::Damo(d) => d.name(),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The format of the file at `path`, from its first bytes.
pub fn detect_format(path: impl AsRef<Path>) -> Result<Format, RecordError> {
    let path = path.as_ref();
    let mut file = File::open(path).map_err(|e| RecordError::io(path, e))?;
    let mut start = vec![0u8; SNIFF_LEN];
    let n = read_full(&mut file, &mut start).map_err(|e| RecordError::io(path, e))?;
    let start = &start[..n];
    if n == 0 {
        return Err(RecordError::Empty {
            path: path.to_path_buf(),
        });
    }
    sniff(start).ok_or_else(|| RecordError::NotARecord {
        path: path.to_path_buf(),
        start: describe_start(start),
    })
}

/// The format that `start` (a file's first bytes) begins, if any.
pub(crate) fn sniff(start: &[u8]) -> Option<Format> {
    // A file shorter than the signature that agrees with it is a udamon record cut short.
    if start.starts_with(&MAGIC) || MAGIC.starts_with(start) {
        return Some(Format::Udamon);
    }
    if start.starts_with(binary::SIGNATURE) {
        return Some(Format::Damo(DamoFormat::Binary));
    }
    // zlib (RFC 1950): deflate with a 32 KiB window and a header checksum; then the text
    // inside must look like JSON, which rules out text that merely starts with 'x'.
    if let [0x78, flg, ..] = start
        && (0x7800u16 | *flg as u16).is_multiple_of(31)
    {
        let mut inflated = [0u8; 64];
        let mut z = flate2::read::ZlibDecoder::new(start);
        let n = read_full(&mut z, &mut inflated).unwrap_or(0);
        return looks_like_json(&inflated[..n]).then_some(Format::Damo(DamoFormat::JsonCompressed));
    }
    if looks_like_json(start) {
        return Some(Format::Damo(DamoFormat::Json));
    }
    if !start.contains(&0) && start.windows(16).any(|w| w == b"damon_aggregated") {
        return Some(Format::Damo(DamoFormat::PerfScript));
    }
    if binary::plausible_v0(start) {
        return Some(Format::Damo(DamoFormat::Binary));
    }
    None
}

fn looks_like_json(text: &[u8]) -> bool {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    matches!(
        text.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'[' | b'{')
    )
}

/// A record of any supported format, read as frames. udamon records stream; damo records are
/// read whole when opened.
pub struct AnyRecord {
    format: Format,
    header: Header,
    path: PathBuf,
    frames: Frames,
}

enum Frames {
    Udamon(Box<RecordReader>),
    Loaded {
        frames: std::vec::IntoIter<Frame>,
        damage: Vec<Damage>,
    },
}

/// Opens a record of any supported format, detected from its content.
pub fn open_any(path: impl AsRef<Path>) -> Result<AnyRecord, RecordError> {
    let path = path.as_ref();
    let format = detect_format(path)?;
    let (header, frames) = match format {
        Format::Udamon => {
            let file = File::open(path).map_err(|e| RecordError::io(path, e))?;
            let reader = RecordReader::from_reader(BufReader::new(file), path)?;
            (reader.header().clone(), Frames::Udamon(Box::new(reader)))
        }
        Format::Damo(d) => {
            let records = damo::read(path, d)?;
            let frames = Frames::Loaded {
                frames: records.frames.into_iter(),
                damage: records.damage,
            };
            (records.header, frames)
        }
    };
    Ok(AnyRecord {
        format,
        header,
        path: path.to_path_buf(),
        frames,
    })
}

impl AnyRecord {
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Damage found so far; complete once the frames are exhausted.
    pub fn damage(&self) -> &[Damage] {
        match &self.frames {
            Frames::Udamon(r) => r.damage(),
            Frames::Loaded { damage, .. } => damage,
        }
    }
}

impl Iterator for AnyRecord {
    type Item = Frame;

    fn next(&mut self) -> Option<Frame> {
        match &mut self.frames {
            Frames::Udamon(r) => r.next(),
            Frames::Loaded { frames, .. } => frames.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing_by_content() {
        assert_eq!(sniff(b"\x89UDAMON\n\xF9UDF"), Some(Format::Udamon));
        assert_eq!(sniff(b"\x89UDA"), Some(Format::Udamon));
        assert_eq!(
            sniff(b"damon_recfmt_ver\x02\0\0\0"),
            Some(Format::Damo(DamoFormat::Binary))
        );
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, b"[{\"snapshots\": []}]").unwrap();
        let zjson = z.finish().unwrap();
        assert_eq!(
            sniff(&zjson),
            Some(Format::Damo(DamoFormat::JsonCompressed))
        );
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, b"not json").unwrap();
        assert_eq!(sniff(&z.finish().unwrap()), None);
        assert_eq!(sniff(b"x^ is not zlib"), None);
        assert_eq!(
            sniff(b"\n  [{\"kdamond_idx\""),
            Some(Format::Damo(DamoFormat::Json))
        );
        assert_eq!(
            sniff(b"kdamond.x xxxx xxxx 1.1: damon:damon_aggregated: target_id=1"),
            Some(Format::Damo(DamoFormat::PerfScript))
        );
        assert_eq!(
            sniff(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x01\0\0\0\x01\0"),
            None
        );
        assert_eq!(sniff(b"hello, world\n"), None);
    }

    #[test]
    fn legacy_v0_without_signature_is_recognised() {
        // One block: 1.1 s, one target (id 42) with one region [4096, 8192) accessed 3 times.
        let mut v0 = Vec::new();
        v0.extend_from_slice(&1i64.to_le_bytes());
        v0.extend_from_slice(&100_000_000i64.to_le_bytes());
        v0.extend_from_slice(&1u32.to_le_bytes());
        v0.extend_from_slice(&42u64.to_le_bytes());
        v0.extend_from_slice(&1u32.to_le_bytes());
        v0.extend_from_slice(&4096u64.to_le_bytes());
        v0.extend_from_slice(&8192u64.to_le_bytes());
        v0.extend_from_slice(&3u32.to_le_bytes());
        assert_eq!(sniff(&v0), Some(Format::Damo(DamoFormat::Binary)));
        v0[8..16].copy_from_slice(&2_000_000_000i64.to_le_bytes());
        assert_eq!(sniff(&v0), None);
    }
}
