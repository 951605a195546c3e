//! Payload layout of every benchmark message.
//!
//! ```text
//! 0..4    publisher id   u32 big-endian
//! 4..8    sequence       u32 big-endian, from 0, per publisher
//! 8..16   send time      u64 big-endian, ns on the process clock (crate::clock)
//! 16..    zero padding up to the requested payload size
//! ```
//!
//! 16 bytes is the payload size of the Open MQTT Benchmark, so its scenarios
//! run with their own size and still carry everything needed to count loss,
//! duplicates, reordering and latency. The Mosquitto article's 6-byte payload
//! cannot carry this header; such runs use 16 bytes and say so.

use thiserror::Error;

/// Bytes taken by the header; the smallest payload a scenario accepts.
pub const HEADER_LEN: usize = 16;

/// The header of one benchmark payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Index of the publisher connection in its scenario.
    pub publisher: u32,
    /// Per-publisher sequence number, from 0 without gaps.
    pub seq: u32,
    /// When the message was sent (closed loop) or was due to be sent (open
    /// loop), in ns on the process clock.
    pub sent_ns: u64,
}

/// A payload that is not one of ours.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("payload of {0} bytes is shorter than the {HEADER_LEN}-byte benchmark header")]
pub struct ShortPayload(pub usize);

impl Header {
    /// Writes the header over the first [`HEADER_LEN`] bytes of `payload`;
    /// the padding after it is left as it is.
    ///
    /// # Panics
    /// If `payload` is shorter than [`HEADER_LEN`]; scenarios check the size
    /// when they parse their arguments.
    pub fn write(&self, payload: &mut [u8]) {
        payload[0..4].copy_from_slice(&self.publisher.to_be_bytes());
        payload[4..8].copy_from_slice(&self.seq.to_be_bytes());
        payload[8..16].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// Reads the header at the start of a received payload.
    pub fn read(payload: &[u8]) -> Result<Header, ShortPayload> {
        let header: &[u8; HEADER_LEN] = payload
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(ShortPayload(payload.len()))?;
        let (publisher, rest) = header.split_at(4);
        let (seq, sent) = rest.split_at(4);
        Ok(Header {
            publisher: u32::from_be_bytes(publisher.try_into().unwrap_or_default()),
            seq: u32::from_be_bytes(seq.try_into().unwrap_or_default()),
            sent_ns: u64::from_be_bytes(sent.try_into().unwrap_or_default()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_keeps_padding() {
        let header = Header { publisher: 0xDEAD_BEEF, seq: 7, sent_ns: u64::MAX - 3 };
        let mut payload = vec![0xAA; 40];
        header.write(&mut payload);
        assert_eq!(Header::read(&payload), Ok(header));
        assert!(payload[HEADER_LEN..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn header_is_big_endian_at_fixed_offsets() {
        let mut payload = [0u8; HEADER_LEN];
        Header { publisher: 1, seq: 2, sent_ns: 3 }.write(&mut payload);
        assert_eq!(payload, [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3]);
    }

    #[test]
    fn short_payload_is_refused() {
        assert_eq!(Header::read(&[0; 15]), Err(ShortPayload(15)));
        assert_eq!(Header::read(b""), Err(ShortPayload(0)));
    }
}
