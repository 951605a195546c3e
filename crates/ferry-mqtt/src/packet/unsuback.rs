use super::{decode_packet_id, PacketType};
use crate::{wire::Reader, DecodeError, EncodeError, Properties, ProtocolVersion, ReasonCode};
use bytes::{BufMut, BytesMut};

/// UNSUBACK (§3.11). 3.1.1 has no payload: `reason_codes` is empty there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsubAck {
    pub packet_id: u16,
    pub properties: Properties,
    pub reason_codes: Vec<ReasonCode>,
}

impl UnsubAck {
    pub(crate) fn decode(mut r: Reader, version: ProtocolVersion) -> Result<UnsubAck, DecodeError> {
        let packet_id = decode_packet_id(&mut r, PacketType::UnsubAck)?;
        if !version.is_v5() {
            r.finish()?;
            return Ok(UnsubAck {
                packet_id,
                properties: Properties::default(),
                reason_codes: Vec::new(),
            });
        }
        let properties = Properties::decode(&mut r, PacketType::UnsubAck)?;
        let mut reason_codes = Vec::with_capacity(r.remaining());
        while !r.is_empty() {
            reason_codes.push(ReasonCode::decode_for(PacketType::UnsubAck, r.u8("reason code")?)?);
        }
        Ok(UnsubAck { packet_id, properties, reason_codes })
    }

    /// 3.1.1 has no payload, so the reason codes are dropped there.
    pub(crate) fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        if !version.is_v5() {
            return Ok(2);
        }
        for reason in &self.reason_codes {
            reason.check_for(PacketType::UnsubAck)?;
        }
        Ok((2 + self.properties.wire_len(version)?).saturating_add(self.reason_codes.len()))
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id);
        if version.is_v5() {
            self.properties.write(version, buf);
            buf.extend(self.reason_codes.iter().map(|&reason| reason as u8));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    #[test]
    fn v311_unsuback_has_no_payload() {
        let expected = Packet::UnsubAck(UnsubAck {
            packet_id: 11,
            properties: Properties::default(),
            reason_codes: vec![],
        });
        assert_wire(&[0xB0, 2, 0, 11], V311, &expected);
        let with_codes = Packet::UnsubAck(UnsubAck {
            packet_id: 11,
            properties: Properties::default(),
            reason_codes: vec![ReasonCode::NoSubscriptionExisted],
        });
        assert_eq!(encode(&with_codes, V311), [0xB0, 2, 0, 11]);
        assert_eq!(decode_err(&[0xB0, 3, 0, 11, 0], V311), DecodeError::TrailingBytes(1));
        assert_eq!(
            decode_err(&[0xB0, 2, 0, 0], V311),
            DecodeError::ZeroPacketId(PacketType::UnsubAck)
        );
    }

    #[test]
    fn v5_unsuback() {
        let expected = Packet::UnsubAck(UnsubAck {
            packet_id: 11,
            properties: Properties::default(),
            reason_codes: vec![ReasonCode::Success, ReasonCode::NoSubscriptionExisted],
        });
        assert_wire(&[0xB0, 5, 0, 11, 0, 0, 0x11], V5, &expected);
        assert_eq!(
            decode_err(&[0xB0, 4, 0, 11, 0, 0x01], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::UnsubAck, code: 0x01 }
        );
        assert_eq!(decode_err(&[0xB0, 2, 0, 11], V5), DecodeError::Truncated("property length"));
    }
}
