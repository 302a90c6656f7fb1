//! Writing udamon records: the signature and header at creation, then one frame per snapshot or
//! event, each handed to the OS in a single `write_all` as soon as it is made. Nothing is kept
//! back in memory, so a monitor killed at any moment leaves a file readable up to its last
//! complete frame.

use crate::codec;
use crate::error::RecordError;
use crate::frame::{self, COMPRESSED, FrameType, MAX_PAYLOAD};
use crate::model::{Event, EventKind, Header, Snapshot};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The version of the record format this crate writes, stored in `Header::format_version`.
/// Version 2 added the `target_added` event: a version 1 reader would skip it as damage and
/// meet snapshots of targets it was never told of. Version 3 added regions' read and write
/// samples to snapshots: a version 2 reader would skip every snapshot that holds them as damage.
pub const FORMAT_VERSION: u32 = 4;

/// zstd's default level: fast enough for a monitor, and higher levels gain little on snapshots.
const ZSTD_LEVEL: i32 = 3;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterOptions {
    /// Compress each frame with zstd (kept uncompressed when that does not make it smaller).
    pub compress: bool,
}

pub struct RecordWriter<W: Write = File> {
    out: W,
    path: PathBuf,
    /// Reused buffers: the encoded payload, its compressed form, and the whole frame.
    payload: Vec<u8>,
    packed: Vec<u8>,
    frame: Vec<u8>,
    compressor: Option<zstd::bulk::Compressor<'static>>,
    failed: bool,
    bytes_written: u64,
    /// Targets the header lists.
    header_targets: usize,
}

impl RecordWriter<File> {
    /// Creates (or truncates) `path` and writes the signature and `header`. The header is
    /// written with `format_version` set to [`FORMAT_VERSION`].
    pub fn create(
        path: impl AsRef<Path>,
        header: &Header,
        options: WriterOptions,
    ) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|e| RecordError::io(path, e))?;
        RecordWriter::new(file, path, header, options)
    }
}

impl<W: Write> RecordWriter<W> {
    /// Writes a record to any byte sink; `name` is used in error messages.
    pub fn new(
        out: W,
        name: impl Into<PathBuf>,
        header: &Header,
        options: WriterOptions,
    ) -> Result<Self, RecordError> {
        let path = name.into();
        let compressor = if options.compress {
            Some(zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| RecordError::io(&path, e))?)
        } else {
            None
        };
        let mut w = RecordWriter {
            out,
            path,
            payload: Vec::new(),
            packed: Vec::new(),
            frame: Vec::new(),
            compressor,
            failed: false,
            bytes_written: 0,
            header_targets: header.targets.len(),
        };
        let header = Header {
            format_version: FORMAT_VERSION,
            ..header.clone()
        };
        w.payload.clear();
        serde_json::to_writer(&mut w.payload, &header)
            .map_err(|e| w.encode_error("the header", e))?;
        w.frame.clear();
        w.frame.extend_from_slice(&frame::MAGIC);
        w.emit(FrameType::Header)?;
        Ok(w)
    }

    pub fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), RecordError> {
        self.check_usable()?;
        codec::check_snapshot_size(snapshot).map_err(|reason| RecordError::Encode {
            path: self.path.clone(),
            what: "a snapshot",
            reason: reason.into(),
        })?;
        self.payload.clear();
        codec::encode_snapshot(&mut self.payload, snapshot);
        self.frame.clear();
        self.emit(FrameType::Snapshot)
    }

    /// Writes an event: a JSON event frame, except for sample batches, their call stacks and
    /// the simulator's ground truth, which take binary frames of their own (they are the bulk
    /// of a record, or new kinds that older readers must be able to skip).
    pub fn write_event(&mut self, event: &Event) -> Result<(), RecordError> {
        self.check_usable()?;
        self.payload.clear();
        let kind = match &event.kind {
            EventKind::Samples {
                target,
                window_ns,
                sites,
                samples,
            } => {
                codec::encode_samples(
                    &mut self.payload,
                    event.time_ns,
                    *target,
                    *window_ns,
                    sites,
                    samples,
                );
                FrameType::Samples
            }
            EventKind::Stacks {
                target,
                stacks,
                samples,
            } => {
                codec::encode_stacks(&mut self.payload, event.time_ns, *target, stacks, samples);
                FrameType::Stacks
            }
            EventKind::Truth {
                target,
                window_ns,
                extents,
            } => {
                codec::encode_truth(
                    &mut self.payload,
                    event.time_ns,
                    *target,
                    *window_ns,
                    extents,
                );
                FrameType::Truth
            }
            _ => {
                serde_json::to_writer(&mut self.payload, event)
                    .map_err(|e| self.encode_error("an event", e))?;
                FrameType::Event
            }
        };
        self.frame.clear();
        self.emit(kind)
    }

    /// How many targets the header lists.
    pub fn header_targets(&self) -> usize {
        self.header_targets
    }

    /// Bytes handed to the OS so far, signature included.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and returns the sink. (Every frame already reached the OS; call `sync_all` on a
    /// returned `File` to also survive a power loss.)
    pub fn finish(mut self) -> Result<W, RecordError> {
        self.check_usable()?;
        self.out
            .flush()
            .map_err(|e| RecordError::io(&self.path, e))?;
        Ok(self.out)
    }

    fn check_usable(&self) -> Result<(), RecordError> {
        if self.failed {
            return Err(RecordError::WriterFailed {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    fn encode_error(&self, what: &'static str, e: serde_json::Error) -> RecordError {
        RecordError::Encode {
            path: self.path.clone(),
            what,
            reason: e.to_string(),
        }
    }

    /// Appends the frame for `self.payload` to `self.frame` (which may already hold the
    /// signature) and writes it all at once.
    fn emit(&mut self, kind: FrameType) -> Result<(), RecordError> {
        // Readers refuse what decompresses beyond the limit, compressed or not.
        if self.payload.len() > MAX_PAYLOAD {
            return Err(RecordError::FrameTooLarge {
                path: self.path.clone(),
                len: self.payload.len(),
                max: MAX_PAYLOAD,
            });
        }
        let mut type_byte = kind as u8;
        let mut body: &[u8] = &self.payload;
        if let Some(compressor) = &mut self.compressor {
            codec::compress(compressor, &self.payload, &mut self.packed)
                .map_err(|e| RecordError::io(&self.path, e))?;
            if self.packed.len() < self.payload.len() {
                type_byte |= COMPRESSED;
                body = &self.packed;
            }
        }
        frame::put_frame(&mut self.frame, type_byte, body);
        // A failed write may leave a torn frame at the end of the file. Refusing further writes
        // keeps it there, where readers report a truncated tail, instead of in the middle.
        let result = self
            .out
            .write_all(&self.frame)
            .and_then(|()| self.out.flush());
        if let Err(e) = result {
            self.failed = true;
            return Err(RecordError::io(&self.path, e));
        }
        self.bytes_written += self.frame.len() as u64;
        Ok(())
    }
}
