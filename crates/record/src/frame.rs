//! The byte layout of udamon's record format: the file signature and the self-delimiting,
//! checksummed frame (see the crate documentation for the full description).

/// The first 8 bytes of every udamon record. The leading 0x89 and the trailing newline catch
/// transfers that strip the 8th bit or rewrite line ends, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"\x89UDAMON\n";

/// Every frame starts with these 4 bytes; a reader that lost its place scans for them.
pub const SYNC: [u8; 4] = *b"\xF9UDF";

/// Sync marker, type byte and the little-endian u32 payload length.
pub const FRAME_HEAD_LEN: usize = 9;

/// Bytes of a frame besides its payload: the head and the trailing CRC-32.
pub const FRAME_OVERHEAD: usize = FRAME_HEAD_LEN + 4;

/// Largest payload, as stored and after decompression: what a reader holds for one frame, whatever
/// the frame claims. A snapshot of [`MAX_SNAPSHOT_REGIONS`] regions takes 2 to 12 MiB.
pub const MAX_PAYLOAD: usize = 16 << 20;

/// Most regions in one snapshot, all its targets together: the format's own bound, whatever a
/// monitor may keep (its bound is the host's memory, `udamon_core::REGION_BYTES` a region), so
/// that a crafted record cannot make a report hold millions of regions. Bounds what one
/// snapshot costs a report (40 bytes a region), however small its frame compresses; `udamon
/// record` refuses region bounds above it.
pub const MAX_SNAPSHOT_REGIONS: usize = 1 << 18;

/// Most targets in one snapshot: processes monitored at the same time.
pub const MAX_SNAPSHOT_TARGETS: usize = 1 << 16;

/// Set in the type byte when the payload is `varint(uncompressed length) ++ zstd frame`.
pub const COMPRESSED: u8 = 0x80;

/// The frame kinds (the low 7 bits of the type byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    Header = 1,
    Snapshot = 2,
    Event = 3,
    /// A batch of samples ([`EventKind::Samples`](crate::model::EventKind::Samples)), binary.
    Samples = 4,
    /// The call stacks of a samples frame's samples
    /// ([`EventKind::Stacks`](crate::model::EventKind::Stacks)), binary.
    Stacks = 5,
    /// The simulator's ground truth of a window
    /// ([`EventKind::Truth`](crate::model::EventKind::Truth)), binary.
    Truth = 6,
}

impl FrameType {
    pub fn from_byte(type_byte: u8) -> Option<FrameType> {
        match type_byte & !COMPRESSED {
            1 => Some(FrameType::Header),
            2 => Some(FrameType::Snapshot),
            3 => Some(FrameType::Event),
            4 => Some(FrameType::Samples),
            5 => Some(FrameType::Stacks),
            6 => Some(FrameType::Truth),
            _ => None,
        }
    }
}

/// The checksum of a frame: CRC-32 (IEEE) over the type byte, the length field and the payload,
/// so that a damaged type or length is caught as surely as a damaged payload.
pub fn frame_crc(type_byte: u8, len: [u8; 4], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[type_byte]);
    h.update(&len);
    h.update(payload);
    h.finalize()
}

/// Appends one whole frame to `out`. The caller checks `payload.len() <= MAX_PAYLOAD`.
pub fn put_frame(out: &mut Vec<u8>, type_byte: u8, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    let len = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&SYNC);
    out.push(type_byte);
    out.extend_from_slice(&len);
    out.extend_from_slice(payload);
    out.extend_from_slice(&frame_crc(type_byte, len, payload).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout() {
        let mut out = Vec::new();
        put_frame(&mut out, FrameType::Event as u8, b"abc");
        assert_eq!(out.len(), FRAME_OVERHEAD + 3);
        assert_eq!(&out[..4], &SYNC);
        assert_eq!(out[4], 3);
        assert_eq!(&out[5..9], &[3, 0, 0, 0]);
        assert_eq!(&out[9..12], b"abc");
        // The CRC covers type, length and payload: compare with a CRC of those bytes alone.
        let crc = crc32fast::hash(&out[4..12]);
        assert_eq!(&out[12..], &crc.to_le_bytes());
    }

    #[test]
    fn type_byte_carries_the_compression_flag() {
        assert_eq!(
            FrameType::from_byte(2 | COMPRESSED),
            Some(FrameType::Snapshot)
        );
        assert_eq!(FrameType::from_byte(1), Some(FrameType::Header));
        assert_eq!(FrameType::from_byte(0x7f), None);
    }
}
