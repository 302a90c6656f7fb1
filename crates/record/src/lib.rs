//! udamon's records: a streaming, crash-safe file format for monitoring results, the recorder
//! that writes it from the monitoring loop, and interoperability with damo's formats.
//!
//! - [`model`]: what a record holds (header, snapshots, events), whatever the encoding;
//! - [`writer`] / [`reader`]: udamon's own format; [`recorder`]: writing it from the core's loop;
//! - [`damo`]: damo's `json`, `json_compressed`, `perf_script` and legacy binary formats;
//! - [`detect`]: format detection by content and [`open_any`], one frame stream for any input;
//! - [`error`]: errors that stop reading or writing, and damage that reading survives.
//!
//! # The udamon record format (version 2)
//!
//! A record is the 8-byte signature `89 55 44 41 4D 4F 4E 0A` (`\x89UDAMON\n`) followed by
//! frames: first one header frame, then one frame per snapshot and per event, in time order.
//! Every frame is self-delimiting and checksummed:
//!
//! ```text
//! offset  size  field
//! 0       4     sync marker F9 55 44 46 ("\xF9UDF")
//! 4       1     type: 1 header, 2 snapshot, 3 event; bit 7 (0x80) set = payload compressed
//! 5       4     payload length N, u32 little-endian (at most 64 MiB)
//! 9       N     payload
//! 9+N     4     CRC-32 (IEEE, as zlib's crc32) of bytes 4 .. 9+N (type, length and payload),
//!               u32 little-endian
//! ```
//!
//! A compressed payload is `LEB128(uncompressed length) ++ one zstd frame`; the writer compresses
//! only when asked, and per frame only when that makes the frame smaller.
//!
//! Header and event payloads are JSON (serde's encoding of [`model::Header`] and
//! [`model::Event`]). Version 2 added the `target_added` event (targets that join while
//! monitoring runs, see [`model::Targets`]); version 1 records read the same way. Snapshot payloads are binary, every number an unsigned LEB128 varint:
//!
//! ```text
//! start_ns, end_ns - start_ns, sample_us, aggr_us, nr_targets,
//! per target:  target index, nr_regions, shift,
//!   per region: zigzag((start >> shift) - (previous end >> shift)),
//!               (end - start) >> shift, nr_accesses, age, raw_samples
//! ```
//!
//! `shift` is the number of low zero bits common to all of the target's region boundaries (12 for
//! page-aligned regions); the first region's "previous end" is 0; differences wrap modulo 2^64,
//! which keeps the encoding lossless for any input. Adjacent page-aligned regions with small
//! counters take 6 to 8 bytes each (measured by `examples/record_size.rs`).
//!
//! Frames are written with one `write` each, as they are made, so a killed monitor leaves a
//! file whose every complete frame reads back. A reader that meets a frame that does not check
//! (a torn last frame, a flipped bit) reports it as [`Damage`] with its byte offset and scans for
//! the next sync marker that starts a frame which checks. Frame types it does not know are
//! skipped the same way, which lets later versions add frame types.

pub mod damo;
pub mod detect;
pub mod error;
pub mod model;
pub mod reader;
pub mod recorder;
pub mod writer;

mod codec;
mod frame;
mod varint;

pub use detect::{AnyRecord, Format, detect_format, open_any};
pub use error::{Damage, DamageKind, RecordError};
pub use reader::RecordReader;
pub use recorder::{Recorder, fill_snapshot, snapshot_from_context};
pub use writer::{FORMAT_VERSION, RecordWriter, WriterOptions};
