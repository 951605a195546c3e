//! Packet::decode and Packet::encode (to be split by the codec implementation).
use crate::{DecodeError, EncodeError, Packet, ProtocolVersion};
use bytes::BytesMut;

impl Packet {
    /// Decodes one packet from the front of `buf`.
    ///
    /// Returns `Ok(None)` and leaves `buf` untouched when the frame is not
    /// complete yet. A frame whose declared size exceeds `max_packet_size` is
    /// refused as soon as its fixed header is readable, before its body
    /// arrives. CONNECT is decoded whatever `version` is (it names its own).
    pub fn decode(
        buf: &mut BytesMut,
        version: ProtocolVersion,
        max_packet_size: u32,
    ) -> Result<Option<Packet>, DecodeError> {
        todo!("{buf:?} {version:?} {max_packet_size}")
    }

    /// Appends the encoded packet to `buf`.
    pub fn encode(&self, version: ProtocolVersion, buf: &mut BytesMut) -> Result<(), EncodeError> {
        todo!("{buf:?} {version:?}")
    }

    /// The number of bytes [`Packet::encode`] would append.
    pub fn encoded_len(&self, version: ProtocolVersion) -> usize {
        todo!("{version:?}")
    }
}

/// Where the 2-byte packet identifier sits in an encoded PUBLISH of QoS 1 or
/// 2, so a broker can encode a message once and patch the id per subscriber.
/// `None` for QoS 0 or a buffer that is not a complete PUBLISH.
pub fn publish_packet_id_offset(encoded: &[u8]) -> Option<usize> {
    todo!("{encoded:?}")
}
