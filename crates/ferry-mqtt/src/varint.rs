//! Variable Byte Integer (MQTT 5 §1.5.5, 3.1.1 §2.2.3): 7 bits per byte,
//! least significant group first, high bit set while more bytes follow.

use bytes::{BufMut, BytesMut};

/// The largest value four bytes can carry, and so the largest remaining
/// length, property length and subscription identifier.
pub(crate) const MAX: u32 = 268_435_455;

/// Why bytes are not a variable byte integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The input ends while the last byte read still has its continuation bit.
    Incomplete,
    /// The fourth byte has its continuation bit set: the spec caps the
    /// encoding at four bytes.
    TooLong,
}

/// Parses a variable byte integer at the start of `bytes`, returning the value
/// and how many bytes it took.
///
/// Non-minimal encodings (e.g. `0x80 0x00` for 0) are accepted: both
/// specifications only bound the length, and rejecting them would refuse
/// packets some clients send.
pub(crate) fn parse(bytes: &[u8]) -> Result<(u32, usize), VarintError> {
    let mut value: u32 = 0;
    for (index, &byte) in bytes.iter().take(4).enumerate() {
        // index ≤ 3, so the shift is at most 21 and 7 + 21 bits fit in u32.
        value |= u32::from(byte & 0x7F) << (7 * index);
        if byte & 0x80 == 0 {
            return Ok((value, index + 1));
        }
    }
    if bytes.len() >= 4 {
        Err(VarintError::TooLong)
    } else {
        Err(VarintError::Incomplete)
    }
}

/// The number of bytes [`put`] writes for `value` (which must be ≤ [`MAX`]).
pub(crate) fn len(value: usize) -> usize {
    match value {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        _ => 4,
    }
}

/// Appends `value`, which the caller has checked is ≤ [`MAX`].
pub(crate) fn put(buf: &mut BytesMut, value: usize) {
    debug_assert!(value <= MAX as usize);
    let mut rest = value;
    loop {
        // Truncation to the low 7 bits is the point of the cast.
        let mut byte = (rest & 0x7F) as u8;
        rest >>= 7;
        if rest > 0 {
            byte |= 0x80;
        }
        buf.put_u8(byte);
        if rest == 0 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_boundaries_round_trip() {
        // The boundary table of MQTT 5 §1.5.5.
        let cases: &[(usize, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7F]),
            (128, &[0x80, 0x01]),
            (16_383, &[0xFF, 0x7F]),
            (16_384, &[0x80, 0x80, 0x01]),
            (2_097_151, &[0xFF, 0xFF, 0x7F]),
            (2_097_152, &[0x80, 0x80, 0x80, 0x01]),
            (268_435_455, &[0xFF, 0xFF, 0xFF, 0x7F]),
        ];
        for &(value, wire) in cases {
            let mut buf = BytesMut::new();
            put(&mut buf, value);
            assert_eq!(&buf[..], wire, "{value}");
            assert_eq!(len(value), wire.len());
            assert_eq!(parse(wire), Ok((value as u32, wire.len())));
        }
    }

    #[test]
    fn accepts_non_minimal_encoding() {
        assert_eq!(parse(&[0x80, 0x00]), Ok((0, 2)));
        assert_eq!(parse(&[0xFF, 0x80, 0x80, 0x00]), Ok((127, 4)));
    }

    #[test]
    fn rejects_fifth_byte_and_reports_incomplete() {
        assert_eq!(parse(&[0xFF, 0xFF, 0xFF, 0xFF]), Err(VarintError::TooLong));
        assert_eq!(parse(&[0xFF, 0xFF, 0xFF, 0xFF, 0x01]), Err(VarintError::TooLong));
        assert_eq!(parse(&[]), Err(VarintError::Incomplete));
        assert_eq!(parse(&[0x80, 0x80]), Err(VarintError::Incomplete));
    }
}
