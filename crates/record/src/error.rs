//! What can go wrong with a record: errors that stop reading or writing ([`RecordError`]) and
//! damage found inside a file that reading survives ([`Damage`]).
//!
//! Every message names the file and says what to do, because users meet them on the command
//! line, usually long after the record was made.

use std::fmt;
use std::io;
use std::path::PathBuf;
use thiserror::Error;

/// Reading or writing a record failed as a whole.
#[derive(Debug, Error)]
pub enum RecordError {
    // The OS error is part of the message and not also a `source()`, so that a printed chain
    // says it once.
    #[error("{}: {cause}", path.display())]
    Io { path: PathBuf, cause: io::Error },

    #[error("{}: empty file, nothing was recorded", path.display())]
    Empty { path: PathBuf },

    #[error("{}: not a udamon or damo record (starts with {start})", path.display())]
    NotARecord { path: PathBuf, start: String },

    #[error(
        "{}: this is a {found} file, not a udamon record; read it with `open_any`, which reads \
         every supported format",
        path.display()
    )]
    NotUdamon { path: PathBuf, found: &'static str },

    #[error("{}: corrupt record header ({reason}); the file cannot be read", path.display())]
    CorruptHeader { path: PathBuf, reason: String },

    #[error(
        "{}: written in record format version {version}, newer than this udamon reads (up to \
         {supported}); use a newer udamon",
        path.display()
    )]
    NewerFormat {
        path: PathBuf,
        version: u32,
        supported: u32,
    },

    #[error("{}: cannot read this damo record: {reason}", path.display())]
    Damo { path: PathBuf, reason: String },

    #[error(
        "{}: a frame of {len} bytes is larger than the format allows ({max} bytes); record \
         fewer regions per snapshot",
        path.display()
    )]
    FrameTooLarge {
        path: PathBuf,
        len: usize,
        max: usize,
    },

    #[error("{}: cannot encode {what}: {reason}", path.display())]
    Encode {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },

    #[error("{}: an earlier write failed, so nothing more is written", path.display())]
    WriterFailed { path: PathBuf },
}

impl RecordError {
    pub(crate) fn io(path: impl Into<PathBuf>, cause: io::Error) -> Self {
        RecordError::Io {
            path: path.into(),
            cause,
        }
    }

    /// An equal error (`io::Error` cannot be cloned; the copy keeps its kind and message), for
    /// handing a failure to a caller while keeping the original.
    pub(crate) fn duplicate(&self) -> RecordError {
        use RecordError::*;
        match self {
            Io { path, cause } => Io {
                path: path.clone(),
                cause: io::Error::new(cause.kind(), cause.to_string()),
            },
            Empty { path } => Empty { path: path.clone() },
            NotARecord { path, start } => NotARecord {
                path: path.clone(),
                start: start.clone(),
            },
            NotUdamon { path, found } => NotUdamon {
                path: path.clone(),
                found,
            },
            CorruptHeader { path, reason } => CorruptHeader {
                path: path.clone(),
                reason: reason.clone(),
            },
            NewerFormat {
                path,
                version,
                supported,
            } => NewerFormat {
                path: path.clone(),
                version: *version,
                supported: *supported,
            },
            Damo { path, reason } => Damo {
                path: path.clone(),
                reason: reason.clone(),
            },
            FrameTooLarge { path, len, max } => FrameTooLarge {
                path: path.clone(),
                len: *len,
                max: *max,
            },
            Encode { path, what, reason } => Encode {
                path: path.clone(),
                what,
                reason: reason.clone(),
            },
            WriterFailed { path } => WriterFailed { path: path.clone() },
        }
    }
}

/// Damage found while reading: the reader skipped it and went on with the next good data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset in the file where the damaged frame (or line, or block) starts.
    pub offset: u64,
    pub kind: DamageKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DamageKind {
    /// The file ends `bytes` bytes into a frame: the writer stopped (was killed) mid-write.
    TruncatedTail { bytes: u64 },
    /// A complete frame whose checksum does not match; `skipped` bytes up to the next good
    /// frame (or the end of the file).
    ChecksumMismatch { skipped: u64 },
    /// A frame header whose length field cannot be right (beyond the format's limit, or
    /// running over the next good frame).
    BadLength { length: u64, skipped: u64 },
    /// Bytes that are not a frame at all.
    Garbage { skipped: u64 },
    /// A frame that checks but whose type this reader does not know (a newer writer).
    UnknownFrameType { frame_type: u8, skipped: u64 },
    /// Data that checks (or has no checksum) but cannot be decoded.
    Undecodable { reason: String, skipped: u64 },
    /// Reading the file failed; nothing after `offset` was read.
    ReadError { message: String },
    /// The header frame is damaged (`reason`); the frames after it were read without it.
    HeaderLost { reason: String, skipped: u64 },
    /// Strings longer than a reader keeps (see [`crate::texts`]), cut: how many, and the bytes
    /// they lost. Not damage, but what a report did not see; one entry for the whole record.
    TextCut { strings: u64, bytes: u64 },
    /// More damaged places than [`DamageLog`] lists, from `offset` on: how many, and the bytes
    /// they skipped.
    More { places: u64, skipped: u64 },
}

impl DamageKind {
    /// The bytes this damage made the reader skip.
    fn skipped(&self) -> u64 {
        match self {
            DamageKind::TruncatedTail { bytes: skipped }
            | DamageKind::ChecksumMismatch { skipped }
            | DamageKind::BadLength { skipped, .. }
            | DamageKind::Garbage { skipped }
            | DamageKind::UnknownFrameType { skipped, .. }
            | DamageKind::Undecodable { skipped, .. }
            | DamageKind::HeaderLost { skipped, .. }
            | DamageKind::More { skipped, .. } => *skipped,
            DamageKind::ReadError { .. } | DamageKind::TextCut { .. } => 0,
        }
    }
}

/// The damage a reader found: the first [`DamageLog::LISTED`] places one by one, then one
/// [`DamageKind::More`] that counts the rest, so that a file damaged at every other frame costs
/// a reader (and a report listing its damage) no more than a few entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DamageLog {
    list: Vec<Damage>,
}

impl DamageLog {
    /// Places listed one by one.
    pub const LISTED: usize = 100;

    pub fn push(&mut self, damage: Damage) {
        if let DamageKind::TextCut { strings, bytes } = damage.kind {
            let earlier = self.list.iter_mut().find_map(|d| match &mut d.kind {
                DamageKind::TextCut { strings, bytes } => Some((strings, bytes)),
                _ => None,
            });
            if let Some((all_strings, all_bytes)) = earlier {
                *all_strings += strings;
                *all_bytes += bytes;
                return;
            }
        }
        if self.list.len() < Self::LISTED {
            self.list.push(damage);
            return;
        }
        let skipped = damage.kind.skipped();
        match self.list.last_mut() {
            Some(Damage {
                kind:
                    DamageKind::More {
                        places,
                        skipped: sum,
                    },
                ..
            }) => {
                *places += 1;
                *sum += skipped;
            }
            _ => self.list.push(Damage {
                offset: damage.offset,
                kind: DamageKind::More { places: 1, skipped },
            }),
        }
    }

    pub fn as_slice(&self) -> &[Damage] {
        &self.list
    }

    pub fn into_vec(self) -> Vec<Damage> {
        self.list
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: ", self.offset)?;
        match &self.kind {
            DamageKind::TruncatedTail { bytes } => write!(
                f,
                "truncated tail: the file ends {bytes} bytes into a frame (the writer stopped \
                 mid-write); everything before it is intact"
            ),
            DamageKind::ChecksumMismatch { skipped } => write!(
                f,
                "checksum mismatch: skipped {skipped} bytes to the next good frame"
            ),
            DamageKind::BadLength { length, skipped } => write!(
                f,
                "impossible frame length {length}: skipped {skipped} bytes to the next good frame"
            ),
            DamageKind::Garbage { skipped } => {
                write!(f, "{skipped} bytes that are not a frame were skipped")
            }
            DamageKind::UnknownFrameType {
                frame_type,
                skipped,
            } => write!(
                f,
                "unknown frame type {frame_type:#04x} (written by a newer udamon?): skipped \
                 {skipped} bytes"
            ),
            DamageKind::Undecodable { reason, skipped } => {
                write!(f, "cannot decode ({reason}): skipped {skipped} bytes")
            }
            DamageKind::HeaderLost { reason, skipped } => write!(
                f,
                "damaged record header ({reason}): skipped {skipped} bytes and salvaged the \
                 frames after it; the targets, host and start time are unknown"
            ),
            DamageKind::More { places, skipped } => write!(
                f,
                "and {places} more damaged places from here on, skipping {skipped} bytes in all"
            ),
            DamageKind::TextCut { strings, bytes } => write!(
                f,
                "{strings} strings from here on were longer than a report keeps and were cut \
                 ({bytes} bytes not read into memory; each cut one ends with …)"
            ),
            DamageKind::ReadError { message } => {
                write!(
                    f,
                    "read error ({message}); the rest of the file was not read"
                )
            }
        }
    }
}

/// The first bytes of a file, printable, for "this is not a record" messages.
pub(crate) fn describe_start(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(16)];
    let escaped: String = shown.escape_ascii().to_string();
    format!("\"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_messages_are_one_line_and_name_the_offset() {
        let kinds = [
            DamageKind::TruncatedTail { bytes: 7 },
            DamageKind::ChecksumMismatch { skipped: 9 },
            DamageKind::BadLength {
                length: 1 << 40,
                skipped: 3,
            },
            DamageKind::Garbage { skipped: 5 },
            DamageKind::UnknownFrameType {
                frame_type: 0x09,
                skipped: 20,
            },
            DamageKind::Undecodable {
                reason: "bad varint".into(),
                skipped: 4,
            },
            DamageKind::ReadError {
                message: "I/O error".into(),
            },
            DamageKind::HeaderLost {
                reason: "the header frame fails its checksum".into(),
                skipped: 300,
            },
            DamageKind::More {
                places: 3,
                skipped: 40,
            },
        ];
        for kind in kinds {
            let msg = Damage { offset: 1234, kind }.to_string();
            assert!(msg.starts_with("byte 1234: "), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    #[test]
    fn a_log_lists_the_first_places_and_counts_the_rest() {
        let mut log = DamageLog::default();
        for i in 0..DamageLog::LISTED as u64 + 5000 {
            log.push(Damage {
                offset: i * 10,
                kind: DamageKind::Garbage { skipped: 2 },
            });
        }
        let list = log.as_slice();
        assert_eq!(list.len(), DamageLog::LISTED + 1);
        let last = &list[DamageLog::LISTED];
        assert_eq!(last.offset, DamageLog::LISTED as u64 * 10);
        assert_eq!(
            last.kind,
            DamageKind::More {
                places: 5000,
                skipped: 10_000
            }
        );
    }

    #[test]
    fn start_of_a_binary_file_is_escaped() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0";
        assert_eq!(
            describe_start(png),
            r#""\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR""#
        );
    }
}
