use super::{decode_packet_id, PacketType};
use crate::{wire::Reader, DecodeError, EncodeError, Properties, ProtocolVersion, ReasonCode};
use bytes::{BufMut, BytesMut};

/// SUBACK (§3.9): one reason code per filter of the SUBSCRIBE, in order. In
/// 3.1.1 only Granted QoS 0/1/2 and 0x80 exist; the encoder writes any
/// other error as 0x80.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAck {
    pub packet_id: u16,
    pub properties: Properties,
    pub reason_codes: Vec<ReasonCode>,
}

/// The one failure code of a 3.1.1 SUBACK (§3.9.3).
const V3_FAILURE: u8 = 0x80;

impl SubAck {
    pub(crate) fn decode(mut r: Reader, version: ProtocolVersion) -> Result<SubAck, DecodeError> {
        let packet_id = decode_packet_id(&mut r, PacketType::SubAck)?;
        let properties = if version.is_v5() {
            Properties::decode(&mut r, PacketType::SubAck)?
        } else {
            Properties::default()
        };
        let mut reason_codes = Vec::with_capacity(r.remaining());
        while !r.is_empty() {
            let code = r.u8("reason code")?;
            let reason = if version.is_v5() {
                ReasonCode::decode_for(PacketType::SubAck, code)?
            } else {
                match code {
                    0x00 => ReasonCode::Success,
                    0x01 => ReasonCode::GrantedQoS1,
                    0x02 => ReasonCode::GrantedQoS2,
                    V3_FAILURE => ReasonCode::UnspecifiedError,
                    _ => {
                        return Err(DecodeError::InvalidReasonCode {
                            packet: PacketType::SubAck,
                            code,
                        })
                    }
                }
            };
            reason_codes.push(reason);
        }
        Ok(SubAck { packet_id, properties, reason_codes })
    }

    pub(crate) fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        if version.is_v5() {
            for reason in &self.reason_codes {
                reason.check_for(PacketType::SubAck)?;
            }
        }
        Ok((2 + self.properties.wire_len(version)?).saturating_add(self.reason_codes.len()))
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id);
        self.properties.write(version, buf);
        for &reason in &self.reason_codes {
            let code = match reason {
                _ if version.is_v5() => reason as u8,
                ReasonCode::Success | ReasonCode::GrantedQoS1 | ReasonCode::GrantedQoS2 => {
                    reason as u8
                }
                _ => V3_FAILURE,
            };
            buf.put_u8(code);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    fn suback(properties: Properties, reason_codes: Vec<ReasonCode>) -> Packet {
        Packet::SubAck(SubAck { packet_id: 10, properties, reason_codes })
    }

    #[test]
    fn v311_suback() {
        let codes =
            vec![ReasonCode::GrantedQoS1, ReasonCode::UnspecifiedError, ReasonCode::Success];
        assert_wire(&[0x90, 5, 0, 10, 1, 0x80, 0], V311, &suback(Properties::default(), codes));
        // Every 5.0 failure is 0x80 in 3.1.1.
        let v5_only =
            suback(Properties::default(), vec![ReasonCode::NotAuthorized, ReasonCode::GrantedQoS2]);
        assert_eq!(encode(&v5_only, V311), [0x90, 4, 0, 10, 0x80, 2]);
        assert_eq!(
            decode_err(&[0x90, 3, 0, 10, 3], V311),
            DecodeError::InvalidReasonCode { packet: PacketType::SubAck, code: 3 }
        );
        assert_eq!(
            decode_err(&[0x90, 3, 0, 0, 1], V311),
            DecodeError::ZeroPacketId(PacketType::SubAck)
        );
    }

    #[test]
    fn v5_suback() {
        let codes = vec![ReasonCode::Success, ReasonCode::GrantedQoS1, ReasonCode::QuotaExceeded];
        assert_wire(&[0x90, 6, 0, 10, 0, 0, 1, 0x97], V5, &suback(Properties::default(), codes));
        let props =
            PropertyValues { reason_string: Some("r".into()), ..PropertyValues::default() }.into();
        assert_wire(
            &[0x90, 8, 0, 10, 4, 0x1F, 0, 1, b'r', 0xA2],
            V5,
            &suback(props, vec![ReasonCode::WildcardSubscriptionsNotSupported]),
        );
        assert_eq!(
            decode_err(&[0x90, 4, 0, 10, 0, 0x11], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::SubAck, code: 0x11 }
        );
        let wrong = suback(Properties::default(), vec![ReasonCode::NoSubscriptionExisted]);
        assert!(matches!(wrong.encode(V5, &mut BytesMut::new()), Err(EncodeError::Invalid(..))));
    }
}
