//! Reading udamon records as a stream of frames with bounded memory (one frame at a time).
//!
//! Damage does not stop reading: a frame that fails its checks is recorded as [`Damage`] and the
//! reader scans forward for the next sync marker that starts a frame which checks, then goes on
//! from there. A damaged header frame is salvaged the same way: the frames after it read under
//! [`Header::salvaged`] (its intervals taken from the first snapshot), and the damage says what
//! was lost. Only a record with no frame that checks is refused.

use crate::codec;
use crate::detect;
use crate::error::{Damage, DamageKind, DamageLog, RecordError, describe_start};
use crate::frame::{
    self, COMPRESSED, FRAME_HEAD_LEN, FRAME_OVERHEAD, FrameType, MAGIC, MAX_PAYLOAD,
    MAX_SNAPSHOT_TARGETS, SYNC,
};
use crate::model::{Event, EventKind, Frame, Header};
use crate::texts::Texts;
use crate::writer::FORMAT_VERSION;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// How much a resynchronising scan reads at a time.
const SCAN_CHUNK: usize = 64 << 10;

pub struct RecordReader<R = BufReader<File>> {
    frames: FrameSource<R>,
    path: PathBuf,
    header: Header,
    /// Offset of the next frame to read.
    pos: u64,
    damage: DamageLog,
    done: bool,
    /// Frames read ahead while salvaging a record whose header is damaged.
    peeked: Option<std::vec::IntoIter<Frame>>,
    targets: KnownTargets,
    /// What is kept of the record's strings.
    texts: Texts,
}

/// The target indexes a record has named so far: those its header and `target_added` events
/// announced, and at most [`MAX_SNAPSHOT_TARGETS`] more (a record whose announcement was
/// damaged still reads). Reports keep something per target, so a frame naming yet another
/// target beyond that is damage: millions of made-up targets would cost them gigabytes.
#[derive(Debug, Default)]
struct KnownTargets {
    announced: BTreeSet<u32>,
    unannounced: BTreeSet<u32>,
}

impl KnownTargets {
    fn new(header: &Header) -> Self {
        KnownTargets {
            announced: (0..header.targets.len() as u32).collect(),
            unannounced: BTreeSet::new(),
        }
    }

    /// Takes in the targets `frame` names; `Err` names one too many.
    fn admit(&mut self, frame: &Frame) -> Result<(), String> {
        let mut admit = |target: u32| {
            if self.announced.contains(&target) || self.unannounced.contains(&target) {
                Ok(())
            } else if self.unannounced.len() < MAX_SNAPSHOT_TARGETS {
                self.unannounced.insert(target);
                Ok(())
            } else {
                Err(format!(
                    "names target {target}, which was never announced, after {MAX_SNAPSHOT_TARGETS} others that were not"
                ))
            }
        };
        match frame {
            Frame::Snapshot(s) => s.targets.iter().try_for_each(|t| admit(t.target)),
            Frame::Event(Event {
                kind: EventKind::TargetAdded { target, .. },
                ..
            }) => {
                self.unannounced.remove(target);
                self.announced.insert(*target);
                Ok(())
            }
            Frame::Event(e) => e.kind.target().map_or(Ok(()), admit),
        }
    }
}

/// Frame-level access to the bytes: probing an offset, scanning for the next frame, payloads.
struct FrameSource<R> {
    src: R,
    /// Where `src` currently is, to avoid needless seeks on the sequential path.
    stream_pos: u64,
    /// Reused buffers: the frame's payload followed by its CRC, and a decompressed payload.
    payload: Vec<u8>,
    raw: Vec<u8>,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
}

/// What lies at an offset.
enum Probe {
    /// Nothing: the end of the file.
    End,
    /// A frame that checks; its payload (and CRC) is in `payload`; the next one starts at `next`.
    Frame {
        type_byte: u8,
        next: u64,
    },
    /// The file ends inside what may be a frame. `length` when the length field was read.
    Incomplete {
        length: Option<u64>,
    },
    NotSync,
    BadLength(u64),
    Checksum,
}

impl RecordReader<BufReader<File>> {
    /// Opens a udamon record and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| RecordError::io(path, e))?;
        RecordReader::from_reader(BufReader::new(file), path)
    }
}

impl<R: Read + Seek> RecordReader<R> {
    /// Reads a record from any seekable source; `name` is used in messages.
    pub fn from_reader(mut src: R, name: impl Into<PathBuf>) -> Result<Self, RecordError> {
        let path = name.into();
        src.seek(SeekFrom::Start(0))
            .map_err(|e| RecordError::io(&path, e))?;
        let mut start = vec![0u8; detect::SNIFF_LEN];
        let n = read_full(&mut src, &mut start).map_err(|e| RecordError::io(&path, e))?;
        let start = &start[..n];
        if n == 0 {
            return Err(RecordError::Empty { path });
        }
        if !start.starts_with(&MAGIC) {
            if MAGIC.starts_with(start) {
                return Err(RecordError::CorruptHeader {
                    path,
                    reason: format!("the file ends after {n} bytes, inside the signature"),
                });
            }
            return Err(match detect::sniff(start) {
                Some(format) => RecordError::NotUdamon {
                    path,
                    found: format.name(),
                },
                None => RecordError::NotARecord {
                    path,
                    start: describe_start(start),
                },
            });
        }
        let mut frames = FrameSource {
            src,
            stream_pos: n as u64,
            payload: Vec::new(),
            raw: Vec::new(),
            decompressor: None,
        };
        let mut texts = Texts::default();
        let read = read_header(&mut frames, &mut texts, &path, MAGIC.len() as u64);
        let (header, pos, lost) = match read {
            Ok((header, pos)) => (header, pos, None),
            Err(RecordError::CorruptHeader { path, reason }) => {
                let at = MAGIC.len() as u64;
                match frames
                    .resync(at + 1)
                    .map_err(|e| RecordError::io(&path, e))?
                {
                    Ok(next) => (Header::salvaged(), next, Some((reason, next - at))),
                    Err(_) => return Err(RecordError::CorruptHeader { path, reason }),
                }
            }
            Err(e) => return Err(e),
        };
        let mut reader = RecordReader {
            targets: KnownTargets::new(&header),
            frames,
            path,
            header,
            pos,
            damage: DamageLog::default(),
            done: false,
            peeked: None,
            texts,
        };
        reader.note_cut(MAGIC.len() as u64);
        if let Some((reason, skipped)) = lost {
            reader.damage.push(Damage {
                offset: MAGIC.len() as u64,
                kind: DamageKind::HeaderLost { reason, skipped },
            });
            reader.salvage_intervals();
        }
        Ok(reader)
    }

    /// Tells the strings of the frame at `at` that were cut, if any.
    fn note_cut(&mut self, at: u64) {
        if let Some((strings, bytes)) = self.texts.take_cut() {
            self.damage.push(Damage {
                offset: at,
                kind: DamageKind::TextCut { strings, bytes },
            });
        }
    }

    /// Without its header, a record's intervals are those of its first snapshot (the frames
    /// read to find it are kept for the iterator).
    fn salvage_intervals(&mut self) {
        let mut read = Vec::new();
        while let Some(frame) = self.next() {
            let snapshot = match &frame {
                Frame::Snapshot(s) => Some((s.sample_us, s.aggr_us)),
                Frame::Event(_) => None,
            };
            read.push(frame);
            if let Some((sample_us, aggr_us)) = snapshot {
                self.header.intervals.sample_us = sample_us;
                self.header.intervals.aggr_us = aggr_us;
                break;
            }
        }
        self.peeked = Some(read.into_iter());
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The format the record says it is written in; `None` when its header was lost.
    fn format_version(&self) -> Option<u32> {
        let lost = matches!(
            self.damage.as_slice().first(),
            Some(Damage {
                kind: DamageKind::HeaderLost { .. },
                ..
            })
        );
        (!lost).then_some(self.header.format_version)
    }

    /// Damage found so far (all of it once the iterator is exhausted).
    pub fn damage(&self) -> &[Damage] {
        self.damage.as_slice()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Decodes the frame just probed; `len` is its whole length, skipped when it is damaged.
    fn decode(&mut self, type_byte: u8, len: u64) -> Result<Frame, DamageKind> {
        let undecodable = |reason: String| DamageKind::Undecodable {
            reason,
            skipped: len,
        };
        let Some(kind) = FrameType::from_byte(type_byte) else {
            return Err(DamageKind::UnknownFrameType {
                frame_type: type_byte,
                skipped: len,
            });
        };
        let version = self.format_version();
        let payload = self.frames.payload(type_byte).map_err(undecodable)?;
        match kind {
            FrameType::Snapshot => {
                let snapshot = codec::decode_snapshot(payload, version)
                    .map_err(|e| undecodable(format!("snapshot: {e}")))?;
                snapshot
                    .check()
                    .map_err(|e| undecodable(format!("snapshot: {e}")))?;
                Ok(Frame::Snapshot(snapshot))
            }
            FrameType::Event => {
                let event: Event = self
                    .texts
                    .json(payload)
                    .map_err(|e| undecodable(format!("event: {e}")))?;
                event
                    .kind
                    .check()
                    .map_err(|e| undecodable(format!("event: {e}")))?;
                Ok(Frame::Event(event))
            }
            FrameType::Samples => codec::decode_samples(payload, &mut self.texts)
                .map(Frame::Event)
                .map_err(|e| undecodable(format!("samples: {e}"))),
            FrameType::Stacks => codec::decode_stacks(payload)
                .map(Frame::Event)
                .map_err(|e| undecodable(format!("stacks: {e}"))),
            FrameType::Truth => {
                let event =
                    codec::decode_truth(payload).map_err(|e| undecodable(format!("truth: {e}")))?;
                event
                    .kind
                    .check()
                    .map_err(|e| undecodable(format!("truth: {e}")))?;
                Ok(Frame::Event(event))
            }
            FrameType::Header => Err(undecodable(
                "a second record header (were two records concatenated?)".into(),
            )),
        }
    }

    fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        while !self.done {
            let at = self.pos;
            let probe = self.frames.probe(at)?;
            let bad = match probe {
                Probe::End => {
                    self.done = true;
                    return Ok(None);
                }
                Probe::Frame { type_byte, next } => {
                    self.pos = next;
                    let decoded = self.decode(type_byte, next - at);
                    self.note_cut(at);
                    let decoded = decoded.and_then(|frame| {
                        self.targets
                            .admit(&frame)
                            .map(|()| frame)
                            .map_err(|reason| DamageKind::Undecodable {
                                reason,
                                skipped: next - at,
                            })
                    });
                    match decoded {
                        Ok(frame) => return Ok(Some(frame)),
                        Err(kind) => {
                            self.damage.push(Damage { offset: at, kind });
                            continue;
                        }
                    }
                }
                bad => bad,
            };
            let found = self.frames.resync(at + 1)?;
            let skipped = match found {
                Ok(next) | Err(next) => next - at,
            };
            let kind = match (bad, found) {
                (Probe::Incomplete { .. }, Err(_)) => DamageKind::TruncatedTail { bytes: skipped },
                (
                    Probe::Incomplete {
                        length: Some(length),
                    },
                    Ok(_),
                )
                | (Probe::BadLength(length), _) => DamageKind::BadLength { length, skipped },
                (Probe::Checksum, _) => DamageKind::ChecksumMismatch { skipped },
                _ => DamageKind::Garbage { skipped },
            };
            self.damage.push(Damage { offset: at, kind });
            match found {
                Ok(next) => self.pos = next,
                Err(_) => self.done = true,
            }
        }
        Ok(None)
    }
}

impl<R: Read + Seek> FrameSource<R> {
    fn seek_to(&mut self, pos: u64) -> io::Result<()> {
        if pos != self.stream_pos {
            self.src.seek(SeekFrom::Start(pos))?;
            self.stream_pos = pos;
        }
        Ok(())
    }

    /// Looks at the bytes at `at`; on success the payload and CRC are in `self.payload`.
    fn probe(&mut self, at: u64) -> io::Result<Probe> {
        self.seek_to(at)?;
        let mut head = [0u8; FRAME_HEAD_LEN];
        let n = read_full(&mut self.src, &mut head)?;
        self.stream_pos += n as u64;
        if n == 0 {
            return Ok(Probe::End);
        }
        let sync_len = n.min(SYNC.len());
        if head[..sync_len] != SYNC[..sync_len] {
            return Ok(Probe::NotSync);
        }
        if n < FRAME_HEAD_LEN {
            return Ok(Probe::Incomplete { length: None });
        }
        let type_byte = head[4];
        let len_bytes = [head[5], head[6], head[7], head[8]];
        let len = u32::from_le_bytes(len_bytes) as u64;
        if len > MAX_PAYLOAD as u64 {
            return Ok(Probe::BadLength(len));
        }
        // read_to_end grows the buffer with the data actually there, so a damaged length
        // field costs no more memory than the file holds.
        self.payload.clear();
        let got = (&mut self.src)
            .take(len + 4)
            .read_to_end(&mut self.payload)? as u64;
        self.stream_pos += got;
        if got < len + 4 {
            return Ok(Probe::Incomplete { length: Some(len) });
        }
        let (payload, crc) = self.payload.split_at(len as usize);
        let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if frame::frame_crc(type_byte, len_bytes, payload) != crc {
            return Ok(Probe::Checksum);
        }
        Ok(Probe::Frame {
            type_byte,
            next: at + FRAME_OVERHEAD as u64 + len,
        })
    }

    /// Scans from `from` for the next offset where a frame checks. `Err(end)` when there is
    /// none before the end of the file at `end`.
    fn resync(&mut self, from: u64) -> io::Result<Result<u64, u64>> {
        let mut chunk = vec![0u8; SCAN_CHUNK];
        let mut at = from;
        loop {
            self.seek_to(at)?;
            let n = read_full(&mut self.src, &mut chunk)?;
            self.stream_pos += n as u64;
            if n < SYNC.len() {
                return Ok(Err(at + n as u64));
            }
            match chunk[..n].windows(SYNC.len()).position(|w| w == SYNC) {
                Some(i) => {
                    let candidate = at + i as u64;
                    if let Probe::Frame { .. } = self.probe(candidate)? {
                        return Ok(Ok(candidate));
                    }
                    at = candidate + 1;
                }
                // Keep the last bytes: a marker may straddle two chunks.
                None => at += (n - (SYNC.len() - 1)) as u64,
            }
        }
    }

    /// The payload of the frame just probed, decompressed if needed.
    fn payload(&mut self, type_byte: u8) -> Result<&[u8], String> {
        let stored = &self.payload[..self.payload.len() - 4];
        if type_byte & COMPRESSED == 0 {
            return Ok(stored);
        }
        if self.decompressor.is_none() {
            let d = zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?;
            self.decompressor = Some(d);
        }
        let d = self.decompressor.as_mut().expect("created above");
        codec::decompress(d, stored, &mut self.raw)?;
        Ok(&self.raw)
    }
}

/// Reads the header frame at `at`; returns it with the offset of the first frame after it.
fn read_header<R: Read + Seek>(
    frames: &mut FrameSource<R>,
    texts: &mut Texts,
    path: &Path,
    at: u64,
) -> Result<(Header, u64), RecordError> {
    let corrupt = |path: &Path, reason: String| RecordError::CorruptHeader {
        path: path.to_path_buf(),
        reason,
    };
    let probe = frames.probe(at).map_err(|e| RecordError::io(path, e))?;
    let (type_byte, next) = match probe {
        Probe::Frame { type_byte, next } => (type_byte, next),
        Probe::End => {
            return Err(corrupt(
                path,
                "the file ends right after the signature; the monitor stopped before \
                 writing the header"
                    .into(),
            ));
        }
        Probe::Incomplete { .. } => {
            return Err(corrupt(
                path,
                "the file ends inside the header frame".into(),
            ));
        }
        Probe::NotSync => return Err(corrupt(path, "no frame after the signature".into())),
        Probe::BadLength(len) => {
            return Err(corrupt(path, format!("impossible header length {len}")));
        }
        Probe::Checksum => {
            return Err(corrupt(path, "the header frame fails its checksum".into()));
        }
    };
    if FrameType::from_byte(type_byte) != Some(FrameType::Header) {
        return Err(corrupt(path, "the first frame is not a header".into()));
    }
    let payload = frames
        .payload(type_byte)
        .map_err(|reason| corrupt(path, reason))?;
    let header: Header = texts
        .json(payload)
        .map_err(|e| corrupt(path, format!("undecodable header: {e}")))?;
    if header.format_version > FORMAT_VERSION {
        return Err(RecordError::NewerFormat {
            path: path.to_path_buf(),
            version: header.format_version,
            supported: FORMAT_VERSION,
        });
    }
    Ok((header, next))
}

impl<R: Read + Seek> Iterator for RecordReader<R> {
    type Item = Frame;

    fn next(&mut self) -> Option<Frame> {
        if let Some(frame) = self.peeked.as_mut().and_then(Iterator::next) {
            return Some(frame);
        }
        match self.next_frame() {
            Ok(frame) => frame,
            Err(e) => {
                self.damage.push(Damage {
                    offset: self.pos,
                    kind: DamageKind::ReadError {
                        message: e.to_string(),
                    },
                });
                self.done = true;
                None
            }
        }
    }
}

/// Reads until `buf` is full or the source ends; returns the bytes read.
pub(crate) fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
