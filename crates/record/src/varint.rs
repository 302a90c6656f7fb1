//! LEB128 variable-length integers and zigzag signed deltas: the compact number encoding of
//! snapshot frames (most region values fit in one or two bytes).

/// Appends `v` as unsigned LEB128: 7 bits per byte, low bits first, high bit set on every byte
/// but the last.
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads unsigned LEB128 values from a byte slice, refusing overlong or truncated encodings.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// Why a payload could not be decoded.
pub type DecodeError = &'static str;

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Reads the count of the items that follow, each taking at least `min_bytes` of the
    /// payload: `error` where what is left cannot hold that many, so that nobody allocates
    /// for a count a corrupt or crafted payload claims.
    pub fn count(&mut self, min_bytes: usize, error: DecodeError) -> Result<usize, DecodeError> {
        let n = self.u64()? as usize;
        if n > self.remaining() / min_bytes {
            return Err(error);
        }
        Ok(n)
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err("the payload ends inside a number");
            };
            self.pos += 1;
            let bits = (b & 0x7f) as u64;
            // The tenth byte may only carry the top bit of a u64.
            if shift == 63 && bits > 1 {
                return Err("a number does not fit in 64 bits");
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a number does not fit in 64 bits")
    }

    /// The next `n` bytes as they are (a string's bytes after its length).
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err("the payload ends inside a string");
        }
        let bytes = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.u64()?).map_err(|_| "a 32-bit field holds a larger number")
    }
}

/// A signed difference folded so that small magnitudes of either sign stay small.
pub fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

pub fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb128_matches_the_standard_examples() {
        // The examples of the DWARF specification (7.6): 2, 127, 128, 129, 130, 12857.
        let cases: [(u64, &[u8]); 6] = [
            (2, &[2]),
            (127, &[127]),
            (128, &[0x80, 1]),
            (129, &[0x81, 1]),
            (130, &[0x82, 1]),
            (12857, &[0xb9, 0x64]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            assert_eq!(Cursor::new(bytes).u64(), Ok(v));
        }
    }

    #[test]
    fn extremes_round_trip_and_overflow_is_refused() {
        for v in [0, 1, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            let mut c = Cursor::new(&out);
            assert_eq!(c.u64(), Ok(v));
            assert_eq!(c.remaining(), 0);
        }
        let mut out = Vec::new();
        put_u64(&mut out, u64::MAX);
        assert_eq!(out.len(), 10);
        out[9] = 0x02; // a 65th bit
        assert!(Cursor::new(&out).u64().is_err());
        assert!(Cursor::new(&[0xff; 11]).u64().is_err());
        assert!(Cursor::new(&[0x80]).u64().is_err());
        let mut big = Vec::new();
        put_u64(&mut big, u32::MAX as u64 + 1);
        assert!(Cursor::new(&big).u32().is_err());
    }

    #[test]
    fn a_count_the_rest_cannot_hold_is_refused() {
        // A count of 3, then 6 bytes: room for three items of two bytes, not of three.
        let payload = [3, 0, 0, 0, 0, 0, 0];
        assert_eq!(Cursor::new(&payload).count(2, "too many"), Ok(3));
        assert_eq!(Cursor::new(&payload).count(3, "too many"), Err("too many"));
        let mut huge = Vec::new();
        put_u64(&mut huge, u64::MAX);
        assert_eq!(Cursor::new(&huge).count(1, "too many"), Err("too many"));
    }

    #[test]
    fn zigzag_keeps_small_values_small() {
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(-2), 3);
        for d in [i64::MIN, -12345, 0, 77, i64::MAX] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
    }
}
