//! udamon's records: a streaming, crash-safe file format for monitoring results, the recorder
//! that writes it from the monitoring loop, and interoperability with damo's formats.
//!
//! - [`model`]: what a record holds (header, snapshots, events), whatever the encoding;
//! - [`writer`] / [`reader`]: udamon's own format; [`recorder`]: writing it from the core's loop;
//! - [`damo`]: damo's `json`, `json_compressed`, `perf_script` and legacy binary formats;
//! - [`detect`]: format detection by content and [`open_any`], one frame stream for any input;
//! - [`error`]: errors that stop reading or writing, and damage that reading survives.
//!
//! # The udamon record format (version 4)
//!
//! A record is the 8-byte signature `89 55 44 41 4D 4F 4E 0A` (`\x89UDAMON\n`) followed by
//! frames: first one header frame, then one frame per snapshot and per event, in time order.
//! Every frame is self-delimiting and checksummed:
//!
//! ```text
//! offset  size  field
//! 0       4     sync marker F9 55 44 46 ("\xF9UDF")
//! 4       1     type: 1 header, 2 snapshot, 3 event, 4 samples, 5 stacks, 6 truth; bit 7
//!               (0x80) set = payload compressed
//! 5       4     payload length N, u32 little-endian (at most 16 MiB)
//! 9       N     payload
//! 9+N     4     CRC-32 (IEEE, as zlib's crc32) of bytes 4 .. 9+N (type, length and payload),
//!               u32 little-endian
//! ```
//!
//! A compressed payload is `LEB128(uncompressed length) ++ one zstd frame`; the writer compresses
//! when asked (`udamon serve` does, and `record` unless `--no-compress`), and per frame only when
//! that makes the frame smaller.
//!
//! Limits, which bound what a reader holds however far a small compressed frame would inflate:
//! a payload is at most [`MAX_PAYLOAD`] (16 MiB) stored and decompressed; a snapshot holds
//! at most [`MAX_SNAPSHOT_REGIONS`] regions and [`MAX_SNAPSHOT_TARGETS`] targets.
//! The writer refuses frames beyond them, and readers take such frames for damage.
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
//! then, only when one of the sections below has anything to say, a flags number (bit 0: read
//! and write samples follow, bit 1: touched pages follow) and the sections in that order:
//!   read and write samples: per target, per region with raw_samples > 0:
//!               read_samples, write_samples
//!   touched pages: per target, per region with nr_accesses > 0: touched_pages
//! ```
//!
//! `read_samples` and `write_samples` count, of the region's raw samples, those whose instruction
//! read and those whose instruction wrote memory (a read-modify-write counts in both, a sample of
//! unknown kind in neither). `touched_pages` is the region's bytes estimated touched in the
//! window, in 4 KiB pages, from its samples' repeats ([`model::RegionStat::touched_bytes`]).
//! Version 3 added the read and write samples, without the flags number; version 4 the touched
//! pages and the flags. A snapshot with neither section is the same in every version; an older
//! reader refuses a newer record rather than take its snapshots for damage, and a record whose
//! header is lost is read as version 4, frame by frame as version 3 where that fails.
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
//!
//! ## Samples
//!
//! Records from sampled sources (`tick`, `cpuclock`, `pmu`) keep every recovered sample, not only
//! the per-region counts: one samples frame (type 4) per target per aggregation window, written
//! after the window's snapshot. It reads as an event of kind `samples` (this is how `report raw`
//! shows it, and how a reader that does not care skips it: no report but `report code` looks at
//! it; `convert` to damo leaves it out). Its payload is binary, every number a LEB128 varint:
//!
//! ```text
//! end_ns, window length in ns, target, nr_sites,
//! per new code site: zigzag(index - previous index), zigzag(ip - previous ip),
//!                    function, object, missing     (each: 0 = none, 1 = the previous site's in
//!                                   this frame, else length + 2, UTF-8 bytes)
//! nr_samples,
//! per sample: zigzag(addr - previous addr), zigzag(site - previous site),
//!             zigzag(tid - previous tid), cpu << 2 | access
//! ```
//!
//! `access` is 1 read, 2 write, 3 both, 0 unknown (PMU samples give an address without the
//! instruction); "previous" values start at 0. Samples are in address order, which keeps their
//! address differences small: a sample takes 4 to 7 bytes.
//!
//! Code sites form a table that grows through the record: a sampled instruction pointer gets an
//! index the first time it is seen, and the frame that first uses the index describes it: the IP,
//! the function it lies in (symbolized when it was recorded, so reports work after the binary is
//! gone or rebuilt), the file or mapping that holds it, and when no function was found, why. An
//! exec gives the process's IPs new indexes, since the same address now holds other code. Indexes
//! are explicit, so a damaged frame loses its sites' names and no other frame's. A udamon older
//! than samples frames skips them as frames of an unknown type (a warning) and reads the rest.
//!
//! ```json
//! {"frame":"event","time_ns":800000000,"kind":"samples","target":0,"window_ns":400000000,
//!  "sites":[{"index":0,"ip":93824992235584,"function":"sum_buffer","object":"/usr/bin/prog"}],
//!  "samples":[{"addr":140737337950208,"site":0,"tid":4242,"cpu":1,"access":"read"}]}
//! ```
//!
//! ## Call stacks
//!
//! Records made with call stacks follow each samples frame with a stacks frame (type 5) for the
//! same target and time, read as an event of kind `stacks`:
//!
//! ```text
//! end_ns, target, nr_stacks,
//! per new stack: zigzag(index - previous index), depth,
//!                per frame: zigzag(site - previous frame's site)
//! nr_samples,
//! per sample (in the samples frame's order): stack index
//! ```
//!
//! A stack is the code sites of a sample's return addresses, innermost first; stacks form a
//! table that grows through the record like the code sites'. Readers that do not know stacks
//! frames skip them and keep the samples (docs/record-format.md).
//!
//! ## Ground truth
//!
//! Records of simulated workloads follow each window's snapshot with a truth frame (type 6)
//! per target, read as an event of kind `truth`: where the workload touched memory in the
//! window ([`model::TouchedExtent`]).
//!
//! ```text
//! end_ns, window length in ns, target, nr_extents,
//! per extent: zigzag(start - previous end), end - start, touched bytes
//! ```
//!
//! Readers from before truth frames skip them as frames of an unknown type.

pub mod damo;
pub mod detect;
pub mod error;
pub mod model;
pub mod reader;
pub mod recorder;
pub mod texts;
pub mod writer;

mod codec;
mod frame;
mod varint;

pub use detect::{AnyRecord, Format, detect_format, open_any};
pub use error::{Damage, DamageKind, DamageLog, RecordError};
pub use frame::{MAGIC, MAX_PAYLOAD, MAX_SNAPSHOT_REGIONS, MAX_SNAPSHOT_TARGETS};
pub use reader::RecordReader;
pub use recorder::{Recorder, fill_snapshot, snapshot_from_context, snapshot_with_touched};
pub use writer::{FORMAT_VERSION, RecordWriter, WriterOptions};
