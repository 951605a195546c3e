use super::{decode_packet_id, reason_tail, PacketType};
use crate::{wire::Reader, DecodeError, EncodeError, Properties, ProtocolVersion, ReasonCode};
use bytes::{BufMut, BytesMut};

/// PUBACK, PUBREC, PUBREL and PUBCOMP (§3.4–3.7) share one shape. In 3.1.1
/// the reason code is always Success and there are no properties. In 5.0 the
/// encoder omits the reason code and properties when they are Success and
/// empty, as the spec allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubAck {
    pub packet_id: u16,
    pub reason_code: ReasonCode,
    pub properties: Properties,
}

impl PubAck {
    /// An acknowledgement without properties.
    pub fn new(packet_id: u16, reason_code: ReasonCode) -> PubAck {
        PubAck { packet_id, reason_code, properties: Properties::default() }
    }
}

impl PubAck {
    /// Decodes the body of a PUBACK, PUBREC, PUBREL or PUBCOMP (`packet`).
    pub(crate) fn decode(
        mut r: Reader,
        packet: PacketType,
        version: ProtocolVersion,
    ) -> Result<PubAck, DecodeError> {
        let packet_id = decode_packet_id(&mut r, packet)?;
        let (reason_code, properties) = if version.is_v5() {
            reason_tail::decode(&mut r, packet)?
        } else {
            (ReasonCode::Success, Properties::default())
        };
        r.finish()?;
        Ok(PubAck { packet_id, reason_code, properties })
    }

    /// In 3.1.1 only the packet id goes on the wire: the reason code and
    /// properties have nowhere to go and are dropped.
    pub(crate) fn body_len(
        &self,
        packet: PacketType,
        version: ProtocolVersion,
    ) -> Result<usize, EncodeError> {
        if version.is_v5() {
            Ok(2 + reason_tail::len(self.reason_code, &self.properties, packet)?)
        } else {
            Ok(2)
        }
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id);
        if version.is_v5() {
            reason_tail::write(self.reason_code, &self.properties, buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    const KINDS: [(u8, PacketType); 4] = [
        (0x40, PacketType::PubAck),
        (0x50, PacketType::PubRec),
        (0x62, PacketType::PubRel),
        (0x70, PacketType::PubComp),
    ];

    fn packet(kind: PacketType, ack: PubAck) -> Packet {
        match kind {
            PacketType::PubAck => Packet::PubAck(ack),
            PacketType::PubRec => Packet::PubRec(ack),
            PacketType::PubRel => Packet::PubRel(ack),
            _ => Packet::PubComp(ack),
        }
    }

    #[test]
    fn v311_acks() {
        for (first, kind) in KINDS {
            assert_wire(
                &[first, 2, 0, 7],
                V311,
                &packet(kind, PubAck::new(7, ReasonCode::Success)),
            );
            assert_eq!(decode_err(&[first, 2, 0, 0], V311), DecodeError::ZeroPacketId(kind));
            assert_eq!(decode_err(&[first, 3, 0, 7, 0], V311), DecodeError::TrailingBytes(1));
            assert_eq!(
                decode_err(&[first, 1, 0], V311),
                DecodeError::Truncated("packet identifier")
            );
            // 3.1.1 has no reason codes: they are dropped.
            let failed = packet(kind, PubAck::new(7, ReasonCode::UnspecifiedError));
            assert_eq!(encode(&failed, V311), [first, 2, 0, 7]);
        }
    }

    #[test]
    fn v5_short_forms() {
        for (first, kind) in KINDS {
            let success = packet(kind, PubAck::new(7, ReasonCode::Success));
            assert_wire(&[first, 2, 0, 7], V5, &success);
            // Spelled-out forms of the same packet are accepted too.
            assert_decodes(&[first, 3, 0, 7, 0], V5, &success);
            assert_decodes(&[first, 4, 0, 7, 0, 0], V5, &success);
            assert_eq!(decode_err(&[first, 2, 0, 0], V5), DecodeError::ZeroPacketId(kind));
        }
    }

    #[test]
    fn v5_reason_codes_and_properties() {
        let puback = Packet::PubAck(PubAck::new(7, ReasonCode::NoMatchingSubscribers));
        assert_wire(&[0x40, 3, 0, 7, 0x10], V5, &puback);
        let pubrel = Packet::PubRel(PubAck::new(7, ReasonCode::PacketIdentifierNotFound));
        assert_wire(&[0x62, 3, 0, 7, 0x92], V5, &pubrel);
        let mut with_reason = PubAck::new(7, ReasonCode::QuotaExceeded);
        with_reason.properties.reason_string = Some("e".into());
        assert_wire(&[0x50, 8, 0, 7, 0x97, 4, 0x1F, 0, 1, b'e'], V5, &Packet::PubRec(with_reason));
        // Success with properties keeps the reason code byte.
        let mut success = PubAck::new(7, ReasonCode::Success);
        success.properties.user_properties.push(("a".into(), "b".into()));
        assert_wire(
            &[0x70, 11, 0, 7, 0, 7, 0x26, 0, 1, b'a', 0, 1, b'b'],
            V5,
            &Packet::PubComp(success),
        );
    }

    #[test]
    fn v5_rejections() {
        assert_eq!(
            decode_err(&[0x40, 3, 0, 7, 0x92], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::PubAck, code: 0x92 }
        );
        assert_eq!(
            decode_err(&[0x62, 3, 0, 7, 0x10], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::PubRel, code: 0x10 }
        );
        assert_eq!(
            decode_err(&[0x70, 3, 0, 7, 0x05], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::PubComp, code: 0x05 }
        );
        assert_eq!(
            decode_err(&[0x40, 7, 0, 7, 0, 3, 0x23, 0, 1], V5),
            DecodeError::PropertyNotAllowed { property: 0x23, packet: PacketType::PubAck }
        );
        assert_eq!(decode_err(&[0x40, 5, 0, 7, 0, 0, 9], V5), DecodeError::TrailingBytes(1));
        assert_eq!(
            decode_err(&[0x40, 5, 0, 7, 0, 2, 0x1F], V5),
            DecodeError::Truncated("properties")
        );
        let wrong = Packet::PubRel(PubAck::new(7, ReasonCode::QuotaExceeded));
        assert!(matches!(wrong.encode(V5, &mut BytesMut::new()), Err(EncodeError::Invalid(..))));
    }
}
