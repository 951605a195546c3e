//! Fixed header framing (§2.1) and dispatch to the per-packet codecs in
//! [`crate::packet`].

use crate::{
    packet::{PacketType, Publish},
    varint::{self, VarintError},
    wire::Reader,
    Auth, ConnAck, Connect, DecodeError, Disconnect, EncodeError, Packet, ProtocolVersion, PubAck,
    QoS, SubAck, Subscribe, UnsubAck, Unsubscribe,
};
use bytes::{Buf, BufMut, BytesMut};

/// The fixed header flags of PUBREL, SUBSCRIBE and UNSUBSCRIBE (§2.1.3).
const FLAGS_0010: u8 = 0b0010;

impl PacketType {
    /// The packet type of a fixed header's high nibble; `None` for the
    /// reserved type 0 and for values above 15.
    pub fn from_u8(value: u8) -> Option<PacketType> {
        use PacketType::*;
        Some(match value {
            1 => Connect,
            2 => ConnAck,
            3 => Publish,
            4 => PubAck,
            5 => PubRec,
            6 => PubRel,
            7 => PubComp,
            8 => Subscribe,
            9 => SubAck,
            10 => Unsubscribe,
            11 => UnsubAck,
            12 => PingReq,
            13 => PingResp,
            14 => Disconnect,
            15 => Auth,
            _ => return None,
        })
    }
}

/// Checks the first byte of a fixed header. Done before the rest of the
/// frame arrives so that garbage is refused without buffering it.
fn check_first_byte(first: u8, version: ProtocolVersion) -> Result<PacketType, DecodeError> {
    let packet = PacketType::from_u8(first >> 4).ok_or(DecodeError::ReservedPacketType)?;
    let flags = first & 0x0F;
    let flags_ok = match packet {
        PacketType::Publish => {
            let qos = QoS::from_u8((flags & 0b0110) >> 1).ok_or(DecodeError::InvalidQoS)?;
            // MQTT-3.3.1-2: DUP must be 0 for QoS 0.
            !(qos == QoS::AtMostOnce && flags & 0b1000 != 0)
        }
        // 3.1 reserves no flag bits, and its clients set DUP and QoS 1 on
        // a PUBREL, SUBSCRIBE or UNSUBSCRIBE they retry; Mosquitto checks
        // these bits from 3.1.1 on only, and so does Ferry.
        _ if version == ProtocolVersion::V31 => true,
        // Whose flags these are is known once the CONNECT names its
        // version: `Connect::decode` checks them.
        PacketType::Connect => true,
        PacketType::PubRel | PacketType::Subscribe | PacketType::Unsubscribe => flags == FLAGS_0010,
        _ => flags == 0,
    };
    if !flags_ok {
        return Err(DecodeError::InvalidHeaderFlags { packet, flags });
    }
    if packet == PacketType::Auth && !version.is_v5() {
        return Err(DecodeError::UnexpectedPacket { packet, version: version as u8 });
    }
    Ok(packet)
}

impl Packet {
    /// Decodes one packet from the front of `buf`.
    ///
    /// Returns `Ok(None)` and leaves `buf` untouched when the frame is not
    /// complete yet. A frame whose declared size exceeds `max_packet_size` is
    /// refused as soon as its fixed header is readable, before its body
    /// arrives. CONNECT is decoded whatever `version` is (it names its own).
    ///
    /// On success exactly the frame is removed from `buf`. After an error the
    /// connection is unusable and the contents of `buf` are unspecified.
    pub fn decode(
        buf: &mut BytesMut,
        version: ProtocolVersion,
        max_packet_size: u32,
    ) -> Result<Option<Packet>, DecodeError> {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let packet = check_first_byte(first, version)?;
        let (remaining, len_bytes) = match varint::parse(buf.get(1..).unwrap_or_default()) {
            Ok(parsed) => parsed,
            Err(VarintError::Incomplete) => return Ok(None),
            Err(VarintError::TooLong) => return Err(DecodeError::MalformedRemainingLength),
        };
        // remaining ≤ 268_435_455: saturating only matters below 32-bit usize.
        let total =
            (1 + len_bytes).saturating_add(usize::try_from(remaining).unwrap_or(usize::MAX));
        if total > usize::try_from(max_packet_size).unwrap_or(usize::MAX) {
            return Err(DecodeError::PacketTooLarge { size: total, max: max_packet_size });
        }
        if buf.len() < total {
            return Ok(None);
        }
        let mut body = buf.split_to(total).freeze();
        body.advance(1 + len_bytes);
        Packet::decode_body(packet, first & 0x0F, Reader::new(body), version).map(Some)
    }

    fn decode_body(
        packet: PacketType,
        flags: u8,
        body: Reader,
        version: ProtocolVersion,
    ) -> Result<Packet, DecodeError> {
        Ok(match packet {
            PacketType::Connect => Packet::Connect(Box::new(Connect::decode(body, flags)?)),
            PacketType::ConnAck => Packet::ConnAck(ConnAck::decode(body, version)?),
            PacketType::Publish => Packet::Publish(Publish::decode(body, flags, version)?),
            PacketType::PubAck => Packet::PubAck(PubAck::decode(body, packet, version)?),
            PacketType::PubRec => Packet::PubRec(PubAck::decode(body, packet, version)?),
            PacketType::PubRel => Packet::PubRel(PubAck::decode(body, packet, version)?),
            PacketType::PubComp => Packet::PubComp(PubAck::decode(body, packet, version)?),
            PacketType::Subscribe => Packet::Subscribe(Subscribe::decode(body, version)?),
            PacketType::SubAck => Packet::SubAck(SubAck::decode(body, version)?),
            PacketType::Unsubscribe => Packet::Unsubscribe(Unsubscribe::decode(body, version)?),
            PacketType::UnsubAck => Packet::UnsubAck(UnsubAck::decode(body, version)?),
            PacketType::PingReq => {
                body.finish()?;
                Packet::PingReq
            }
            PacketType::PingResp => {
                body.finish()?;
                Packet::PingResp
            }
            PacketType::Disconnect => Packet::Disconnect(Disconnect::decode(body, version)?),
            PacketType::Auth => Packet::Auth(Auth::decode(body)?),
        })
    }

    /// Appends the encoded packet to `buf`.
    ///
    /// 3.1.1 has no properties and fewer reason codes: properties are
    /// dropped, CONNACK codes go through [`crate::ReasonCode::to_v3_connack`],
    /// SUBACK failures become 0x80, and the reason codes of acknowledgements,
    /// UNSUBACK and DISCONNECT are dropped. CONNECT is encoded in its own
    /// `protocol`. On error nothing is appended.
    pub fn encode(&self, version: ProtocolVersion, buf: &mut BytesMut) -> Result<(), EncodeError> {
        put_fixed_header(buf, self.first_byte(), self.remaining_len(version)?);
        match self {
            Packet::Connect(connect) => connect.write_body(buf),
            Packet::ConnAck(connack) => connack.write_body(version, buf),
            Packet::Publish(publish) => publish.write_body(version, buf),
            Packet::PubAck(ack)
            | Packet::PubRec(ack)
            | Packet::PubRel(ack)
            | Packet::PubComp(ack) => ack.write_body(version, buf),
            Packet::Subscribe(subscribe) => subscribe.write_body(version, buf),
            Packet::SubAck(suback) => suback.write_body(version, buf),
            Packet::Unsubscribe(unsubscribe) => unsubscribe.write_body(version, buf),
            Packet::UnsubAck(unsuback) => unsuback.write_body(version, buf),
            Packet::PingReq | Packet::PingResp => {}
            Packet::Disconnect(disconnect) => disconnect.write_body(version, buf),
            Packet::Auth(auth) => auth.write_body(buf),
        }
        Ok(())
    }

    /// The number of bytes [`Packet::encode`] would append: 0 when it would
    /// refuse the packet.
    pub fn encoded_len(&self, version: ProtocolVersion) -> usize {
        match self.remaining_len(version) {
            Ok(remaining) => 1 + varint::len(remaining) + remaining,
            Err(_) => 0,
        }
    }

    fn first_byte(&self) -> u8 {
        let packet = self.packet_type();
        let flags = match self {
            Packet::Publish(publish) => publish.header_flags(),
            Packet::PubRel(_) | Packet::Subscribe(_) | Packet::Unsubscribe(_) => FLAGS_0010,
            _ => 0,
        };
        ((packet as u8) << 4) | flags
    }

    /// The remaining length, after checking that everything fits its field.
    fn remaining_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        let len = match self {
            Packet::Connect(connect) => connect.body_len()?,
            Packet::ConnAck(connack) => connack.body_len(version)?,
            Packet::Publish(publish) => publish.body_len(version)?,
            Packet::PubAck(ack)
            | Packet::PubRec(ack)
            | Packet::PubRel(ack)
            | Packet::PubComp(ack) => ack.body_len(self.packet_type(), version)?,
            Packet::Subscribe(subscribe) => subscribe.body_len(version)?,
            Packet::SubAck(suback) => suback.body_len(version)?,
            Packet::Unsubscribe(unsubscribe) => unsubscribe.body_len(version)?,
            Packet::UnsubAck(unsuback) => unsuback.body_len(version)?,
            Packet::PingReq | Packet::PingResp => 0,
            Packet::Disconnect(disconnect) => disconnect.body_len(version)?,
            Packet::Auth(_) if !version.is_v5() => {
                return Err(EncodeError::Invalid("AUTH", "exists only in MQTT 5"))
            }
            Packet::Auth(auth) => auth.body_len()?,
        };
        fits_remaining_length(len)
    }
}

impl Publish {
    /// Encodes this PUBLISH as [`Packet::encode`] would, without moving it
    /// into a `Packet` (which would mean cloning it to encode a message
    /// that is kept).
    pub fn encode(&self, version: ProtocolVersion, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let first_byte = ((PacketType::Publish as u8) << 4) | self.header_flags();
        put_fixed_header(buf, first_byte, fits_remaining_length(self.body_len(version)?)?);
        self.write_body(version, buf);
        Ok(())
    }

    /// Encodes this PUBLISH up to its payload, which must follow it: for a
    /// writer that stores or sends the payload from where it already is
    /// (a log record in two parts, vectored I/O) instead of copying it in.
    pub fn encode_head(
        &self,
        version: ProtocolVersion,
        buf: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        let first_byte = ((PacketType::Publish as u8) << 4) | self.header_flags();
        let remaining = fits_remaining_length(self.body_len(version)?)?;
        buf.reserve(1 + varint::len(remaining) + remaining - self.payload.len());
        buf.put_u8(first_byte);
        varint::put(buf, remaining);
        self.write_head(version, buf);
        Ok(())
    }
}

fn fits_remaining_length(len: usize) -> Result<usize, EncodeError> {
    if len > varint::MAX as usize {
        return Err(EncodeError::PacketTooLarge(len));
    }
    Ok(len)
}

/// The first byte and the remaining length, with room reserved for the body.
fn put_fixed_header(buf: &mut BytesMut, first_byte: u8, remaining: usize) {
    buf.reserve(1 + varint::len(remaining) + remaining);
    buf.put_u8(first_byte);
    varint::put(buf, remaining);
}

/// Where the 2-byte packet identifier sits in an encoded PUBLISH of QoS 1 or
/// 2, so a broker can encode a message once and patch the id per subscriber.
/// `None` for QoS 0 or a buffer that is not a complete PUBLISH.
///
/// The PUBLISH must start at `encoded[0]`; bytes after its frame are ignored.
pub fn publish_packet_id_offset(encoded: &[u8]) -> Option<usize> {
    let (&first, rest) = encoded.split_first()?;
    if PacketType::from_u8(first >> 4) != Some(PacketType::Publish) {
        return None;
    }
    match QoS::from_u8((first & 0b0110) >> 1)? {
        QoS::AtMostOnce => return None,
        QoS::AtLeastOnce | QoS::ExactlyOnce => {}
    }
    let (remaining, len_bytes) = varint::parse(rest).ok()?;
    let header_len = 1 + len_bytes;
    let total = header_len.checked_add(usize::try_from(remaining).ok()?)?;
    if encoded.len() < total {
        return None;
    }
    let topic_len: [u8; 2] = encoded.get(header_len..header_len + 2)?.try_into().ok()?;
    let topic_len = usize::from(u16::from_be_bytes(topic_len));
    let offset = header_len + 2 + topic_len;
    // The id must lie inside the frame, not in whatever follows it.
    (offset + 2 <= total).then_some(offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, ByteStr, Properties, ReasonCode};
    use bytes::Bytes;
    use ProtocolVersion::*;

    #[test]
    fn ping() {
        for version in [V31, V311, V5] {
            assert_wire(&[0xC0, 0], version, &Packet::PingReq);
            assert_wire(&[0xD0, 0], version, &Packet::PingResp);
            assert_eq!(decode_err(&[0xC0, 1, 0], version), DecodeError::TrailingBytes(1));
            assert_eq!(decode_err(&[0xD0, 2, 0, 0], version), DecodeError::TrailingBytes(2));
        }
    }

    #[test]
    fn a_publish_encodes_by_reference_and_in_parts_as_its_packet_does() {
        let properties = PropertyValues {
            message_expiry_interval: Some(60),
            user_properties: vec![("k".into(), "v".into())],
            ..PropertyValues::default()
        };
        for (qos, dup, retain, properties) in [
            (QoS::AtMostOnce, false, true, Properties::default()),
            (QoS::AtLeastOnce, true, false, Properties::from(properties.clone())),
            (QoS::ExactlyOnce, false, true, Properties::from(properties)),
        ] {
            let publish = Publish {
                dup,
                qos,
                retain,
                topic: ByteStr::from("a/b"),
                packet_id: if qos == QoS::AtMostOnce { 0 } else { 7 },
                properties,
                payload: Bytes::from_static(b"payload"),
            };
            for version in [V311, V5] {
                let (mut by_reference, mut as_packet) = (BytesMut::new(), BytesMut::new());
                publish.encode(version, &mut by_reference).unwrap();
                Packet::Publish(publish.clone()).encode(version, &mut as_packet).unwrap();
                assert_eq!(by_reference, as_packet);
                let mut head = BytesMut::new();
                publish.encode_head(version, &mut head).unwrap();
                head.extend_from_slice(&publish.payload);
                assert_eq!(head, as_packet, "the head and the payload after it");
            }
        }
    }

    #[test]
    fn reserved_type_and_auth_before_v5() {
        assert_eq!(decode_err(&[0x00, 0], V5), DecodeError::ReservedPacketType);
        assert_eq!(
            decode_err(&[0xF0, 0], V311),
            DecodeError::UnexpectedPacket { packet: PacketType::Auth, version: 4 }
        );
        // Refused from the first byte, before the rest of the frame.
        let mut buf = BytesMut::from(&[0x00][..]);
        assert_eq!(Packet::decode(&mut buf, V5, 10), Err(DecodeError::ReservedPacketType));
    }

    #[test]
    fn fixed_header_flags() {
        for (first, packet) in [
            (0x60, PacketType::PubRel),
            (0x80, PacketType::Subscribe),
            (0xA0, PacketType::Unsubscribe),
            (0x63, PacketType::PubRel),
            (0x21, PacketType::ConnAck),
            (0x42, PacketType::PubAck),
            (0x58, PacketType::PubRec),
            (0x72, PacketType::PubComp),
            (0x91, PacketType::SubAck),
            (0xB2, PacketType::UnsubAck),
            (0xC2, PacketType::PingReq),
            (0xD1, PacketType::PingResp),
            (0xE2, PacketType::Disconnect),
            (0xF1, PacketType::Auth),
            // DUP with QoS 0.
            (0x38, PacketType::Publish),
            (0x39, PacketType::Publish),
        ] {
            let mut buf = BytesMut::from(&[first][..]);
            assert_eq!(
                Packet::decode(&mut buf, V5, 1024),
                Err(DecodeError::InvalidHeaderFlags { packet, flags: first & 0x0F }),
                "{first:#x}"
            );
        }
        for first in [0x36, 0x3E, 0x37] {
            assert_eq!(decode_err(&[first, 0], V311), DecodeError::InvalidQoS);
        }
        // 3.1's retried PUBREL, SUBSCRIBE and UNSUBSCRIBE carry DUP.
        for first in [0x6A, 0x8A, 0xAA] {
            assert!(matches!(
                decode_err(&[first, 0], V311),
                DecodeError::InvalidHeaderFlags { .. }
            ));
        }
        assert_eq!(
            decode(&[0x6A, 2, 0, 5], V31),
            Ok(Packet::PubRel(PubAck::new(5, ReasonCode::Success)))
        );
    }

    #[test]
    fn remaining_length_limits() {
        let mut buf = BytesMut::from(&[0x30, 0xFF, 0xFF, 0xFF, 0xFF][..]);
        assert_eq!(
            Packet::decode(&mut buf, V311, u32::MAX),
            Err(DecodeError::MalformedRemainingLength)
        );
        let mut buf = BytesMut::from(&[0x30, 0x80, 0x80, 0x80, 0x80, 0x01][..]);
        assert_eq!(
            Packet::decode(&mut buf, V311, u32::MAX),
            Err(DecodeError::MalformedRemainingLength)
        );
        // The largest remaining length is fine: the frame is just incomplete.
        let mut buf = BytesMut::from(&[0x30, 0xFF, 0xFF, 0xFF, 0x7F][..]);
        assert_eq!(Packet::decode(&mut buf, V311, u32::MAX), Ok(None));
        assert_eq!(buf.len(), 5);
        // A non-minimal remaining length is accepted.
        assert_eq!(decode(&[0xC0, 0x80, 0x00], V311), Ok(Packet::PingReq));
    }

    #[test]
    fn packet_too_large_from_the_header_alone() {
        let mut buf = BytesMut::from(&[0x30, 0xFF, 0xFF, 0xFF, 0x7F][..]);
        assert_eq!(
            Packet::decode(&mut buf, V5, 1000),
            Err(DecodeError::PacketTooLarge { size: 268_435_460, max: 1000 })
        );
        // 3 header bytes + 1024: one byte over.
        let mut buf = BytesMut::from(&[0x30, 0x80, 0x08][..]);
        assert_eq!(
            Packet::decode(&mut buf, V5, 1026),
            Err(DecodeError::PacketTooLarge { size: 1027, max: 1026 })
        );
        assert_eq!(Packet::decode(&mut buf, V5, 1027), Ok(None));
        assert_eq!(
            DecodeError::PacketTooLarge { size: 1, max: 0 }.reason_code(),
            ReasonCode::PacketTooLarge
        );
        // The limit counts the fixed header too.
        let mut buf = BytesMut::from(&[0xC0, 0][..]);
        assert!(Packet::decode(&mut buf, V5, 1).is_err());
        let mut buf = BytesMut::from(&[0xC0, 0][..]);
        assert_eq!(Packet::decode(&mut buf, V5, 2), Ok(Some(Packet::PingReq)));
    }

    #[test]
    fn consumes_one_frame_at_a_time() {
        let mut buf = BytesMut::from(&[0xC0, 0, 0x40, 2, 0, 1, 0xD0][..]);
        assert_eq!(Packet::decode(&mut buf, V311, 100), Ok(Some(Packet::PingReq)));
        assert_eq!(
            Packet::decode(&mut buf, V311, 100),
            Ok(Some(Packet::PubAck(crate::PubAck::new(1, ReasonCode::Success))))
        );
        assert_eq!(Packet::decode(&mut buf, V311, 100), Ok(None));
        assert_eq!(&buf[..], &[0xD0]);
        assert_eq!(Packet::decode(&mut BytesMut::new(), V311, 100), Ok(None));
    }

    fn qos1_publish(topic: &str, properties: Properties) -> Packet {
        Packet::Publish(Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain: false,
            topic: ByteStr::from(topic),
            packet_id: 0,
            properties,
            payload: Bytes::from_static(b"payload"),
        })
    }

    #[test]
    fn publish_packet_id_offset_patches_the_id() {
        let props =
            PropertyValues { message_expiry_interval: Some(9), ..PropertyValues::default() }.into();
        for (version, props) in [(V311, Properties::default()), (V5, props)] {
            // Encoded once with a placeholder id 0, patched per subscriber.
            let encoded = encode(&qos1_publish("a/b", props), version);
            let offset = publish_packet_id_offset(&encoded).unwrap();
            assert_eq!(offset, 2 + 2 + 3);
            let mut patched = encoded.clone();
            patched[offset..offset + 2].copy_from_slice(&0x0102u16.to_be_bytes());
            let Packet::Publish(p) = decode(&patched, version).unwrap() else { panic!() };
            assert_eq!(p.packet_id, 0x0102);
        }
        // A long topic makes a 2-byte remaining length.
        let long = "t".repeat(200);
        let encoded = encode(&qos1_publish(&long, Properties::default()), V311);
        assert_eq!(publish_packet_id_offset(&encoded), Some(3 + 2 + 200));
    }

    #[test]
    fn publish_packet_id_offset_refusals() {
        let encoded = encode(&qos1_publish("a/b", Properties::default()), V311);
        for end in 0..encoded.len() {
            assert_eq!(publish_packet_id_offset(&encoded[..end]), None, "{end}");
        }
        assert_eq!(publish_packet_id_offset(&[0x30, 3, 0, 1, b'a']), None);
        assert_eq!(publish_packet_id_offset(&[0x36, 5, 0, 1, b'a', 0, 1]), None);
        assert_eq!(publish_packet_id_offset(&[0x40, 2, 0, 1]), None);
        // Topic length pointing past the frame, into the next one.
        assert_eq!(publish_packet_id_offset(&[0x32, 4, 0, 2, b'a', b'b', 0xC0, 0]), None);
        assert_eq!(publish_packet_id_offset(&[0x32, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]), None);
    }

    #[test]
    fn v31_connection_uses_the_v311_format() {
        let ack = Packet::PubAck(crate::PubAck::new(3, ReasonCode::Success));
        assert_wire(&[0x40, 2, 0, 3], V31, &ack);
        assert_eq!(
            decode_err(&[0xF0, 0], V31),
            DecodeError::UnexpectedPacket { packet: PacketType::Auth, version: 3 }
        );
    }

    #[test]
    fn encode_appends_after_existing_bytes() {
        let mut buf = BytesMut::from(&b"xy"[..]);
        Packet::PingReq.encode(V5, &mut buf).unwrap();
        assert_eq!(&buf[..], &[b'x', b'y', 0xC0, 0]);
    }
}
