//! Helpers shared by the unit tests of every packet.

use crate::{DecodeError, Packet, ProtocolVersion};
use bytes::BytesMut;

/// Decodes `wire`, which must hold exactly one complete frame.
pub(crate) fn decode(wire: &[u8], version: ProtocolVersion) -> Result<Packet, DecodeError> {
    let mut buf = BytesMut::from(wire);
    let packet = Packet::decode(&mut buf, version, u32::MAX)?.expect("a complete frame");
    assert!(buf.is_empty(), "decode left {} bytes", buf.len());
    Ok(packet)
}

/// Encodes `packet` and checks `encoded_len` against what was written.
pub(crate) fn encode(packet: &Packet, version: ProtocolVersion) -> Vec<u8> {
    let mut buf = BytesMut::new();
    packet.encode(version, &mut buf).expect("encodable");
    assert_eq!(packet.encoded_len(version), buf.len(), "encoded_len of {packet:?}");
    buf.to_vec()
}

/// `wire` decodes to `expected`, is `Ok(None)` at every shorter prefix, and
/// `expected` encodes back to exactly `wire`.
pub(crate) fn assert_wire(wire: &[u8], version: ProtocolVersion, expected: &Packet) {
    assert_decodes(wire, version, expected);
    assert_eq!(encode(expected, version), wire, "encoding of {expected:?}");
}

/// Like [`assert_wire`] for input that is valid but not in the encoder's
/// canonical form (e.g. an optional field spelled out).
pub(crate) fn assert_decodes(wire: &[u8], version: ProtocolVersion, expected: &Packet) {
    assert_eq!(decode(wire, version).as_ref(), Ok(expected));
    assert_incomplete_prefixes(wire, version);
}

/// Every proper prefix of a valid frame is incomplete, and stays in the buffer.
pub(crate) fn assert_incomplete_prefixes(wire: &[u8], version: ProtocolVersion) {
    for end in 0..wire.len() {
        let mut buf = BytesMut::from(&wire[..end]);
        assert_eq!(Packet::decode(&mut buf, version, u32::MAX), Ok(None), "prefix of {end} bytes");
        assert_eq!(&buf[..], &wire[..end], "prefix of {end} bytes was consumed");
    }
}

/// Shorthand for the error of decoding `wire`.
pub(crate) fn decode_err(wire: &[u8], version: ProtocolVersion) -> DecodeError {
    decode(wire, version).expect_err("should be rejected")
}

/// Prefixes `body` with a fixed header of type-and-flags byte `first`.
pub(crate) fn frame(first: u8, body: &[u8]) -> Vec<u8> {
    let mut wire = vec![first];
    let mut len = body.len();
    loop {
        let mut byte = (len % 128) as u8;
        len /= 128;
        if len > 0 {
            byte |= 0x80;
        }
        wire.push(byte);
        if len == 0 {
            break;
        }
    }
    wire.extend_from_slice(body);
    wire
}
