//! One record on disk: `crc32c (u32 LE) | length (u32 LE) | payload`.
//!
//! The CRC covers the length and the payload, so a torn write (a header
//! without its payload, or a payload half on disk) and a flipped bit are
//! both caught, and a garbage length cannot send a reader past the end.

/// Bytes before the payload.
pub const HEADER_LEN: usize = 8;

/// The header of the record whose payload is `parts` one after the other.
pub fn header(parts: &[&[u8]]) -> [u8; HEADER_LEN] {
    // The caller has checked the length against the configured limit,
    // which is below u32::MAX.
    let len = (parts.iter().map(|part| part.len()).sum::<usize>() as u32).to_le_bytes();
    let crc = parts.iter().fold(crc32c::crc32c(&len), |crc, part| crc32c::crc32c_append(crc, part));
    let mut header = [0; HEADER_LEN];
    header[..4].copy_from_slice(&crc.to_le_bytes());
    header[4..].copy_from_slice(&len);
    header
}

/// Appends one record to `buf`, its payload being `parts` one after the
/// other.
#[cfg(test)]
fn encode(parts: &[&[u8]], buf: &mut Vec<u8>) {
    buf.extend_from_slice(&header(parts));
    for part in parts {
        buf.extend_from_slice(part);
    }
}

/// What is at the start of `bytes`.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// An intact record and its total size on disk.
    Record { payload: &'a [u8], size: usize },
    /// Fewer bytes than the header or the payload it announces: the end of
    /// what was written, or a torn write.
    Incomplete,
    /// A length over `max_payload`, or a CRC mismatch: damaged bytes.
    Invalid(&'static str),
}

/// Reads the record at the start of `bytes`, accepting payloads up to
/// `max_payload` bytes.
pub fn decode(bytes: &[u8], max_payload: usize) -> Decoded<'_> {
    let Some((header, rest)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Decoded::Incomplete;
    };
    let crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let len_bytes = [header[4], header[5], header[6], header[7]];
    let len = u32::from_le_bytes(len_bytes) as usize;
    if len > max_payload {
        return Decoded::Invalid("length over the record limit");
    }
    let Some(payload) = rest.get(..len) else {
        return Decoded::Incomplete;
    };
    if crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload) != crc {
        return Decoded::Invalid("CRC mismatch");
    }
    Decoded::Record { payload, size: HEADER_LEN + len }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_size() {
        let mut buf = Vec::new();
        encode(&[b"hello"], &mut buf);
        encode(&[], &mut buf);
        encode(&[b"hel", b"", b"lo"], &mut buf);
        assert_eq!(decode(&buf, 16), Decoded::Record { payload: b"hello", size: 13 });
        assert_eq!(decode(&buf[13..], 16), Decoded::Record { payload: b"", size: 8 });
        assert_eq!(decode(&buf[21..], 16), Decoded::Record { payload: b"hello", size: 13 });
    }

    #[test]
    fn every_truncation_is_incomplete() {
        let mut buf = Vec::new();
        encode(&[b"payload"], &mut buf);
        for cut in 0..buf.len() {
            assert_eq!(decode(&buf[..cut], 64), Decoded::Incomplete, "cut at {cut}");
        }
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let mut buf = Vec::new();
        encode(&[b"payload"], &mut buf);
        for bit in 0..buf.len() * 8 {
            let mut damaged = buf.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            // A flip in the length may also make the record look longer
            // than the bytes there are: incomplete, which a reader treats
            // as the end; never an intact record.
            assert!(
                !matches!(decode(&damaged, 64), Decoded::Record { .. }),
                "bit {bit} went unnoticed"
            );
        }
    }

    #[test]
    fn a_length_over_the_limit_is_invalid_before_any_read() {
        let mut buf = Vec::new();
        encode(&[&[7; 100]], &mut buf);
        assert_eq!(decode(&buf, 99), Decoded::Invalid("length over the record limit"));
    }
}
