use super::PacketType;
use crate::{wire::Reader, DecodeError, EncodeError, Properties, ProtocolVersion, ReasonCode};
use bytes::{BufMut, BytesMut};

/// CONNACK (§3.2). In 3.1.1 the reason code is mapped to and from the six
/// return codes by [`ReasonCode::to_v3_connack`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnAck {
    pub session_present: bool,
    pub reason_code: ReasonCode,
    pub properties: Properties,
}

/// Bit 0 of the Connect Acknowledge Flags; bits 7–1 are reserved.
const SESSION_PRESENT: u8 = 0x01;

impl ConnAck {
    pub(crate) fn decode(mut r: Reader, version: ProtocolVersion) -> Result<ConnAck, DecodeError> {
        let flags = r.u8("connect acknowledge flags")?;
        if flags & !SESSION_PRESENT != 0 {
            return Err(DecodeError::ReservedBitSet("connect acknowledge flags"));
        }
        // 3.1 has no session present flag (`write_body`).
        let session_present = flags & SESSION_PRESENT != 0 && version != ProtocolVersion::V31;
        let code = r.u8("reason code")?;
        let reason_code = if version.is_v5() {
            ReasonCode::decode_for(PacketType::ConnAck, code)?
        } else {
            ReasonCode::from_v3_connack(code)
                .ok_or(DecodeError::InvalidReasonCode { packet: PacketType::ConnAck, code })?
        };
        // MQTT-3.2.2-4 (3.1.1) and MQTT-3.2.2-6 (5.0).
        if session_present && reason_code != ReasonCode::Success {
            return Err(DecodeError::ProtocolViolation(
                "session present with a failure reason code",
            ));
        }
        let properties = if version.is_v5() {
            Properties::decode(&mut r, PacketType::ConnAck)?
        } else {
            Properties::default()
        };
        r.finish()?;
        Ok(ConnAck { session_present, reason_code, properties })
    }

    pub(crate) fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        if self.session_present && self.reason_code != ReasonCode::Success {
            return Err(EncodeError::Invalid(
                "CONNACK",
                "session present with a failure reason code",
            ));
        }
        if version.is_v5() {
            self.reason_code.check_for(PacketType::ConnAck)?;
        }
        Ok(2 + self.properties.wire_len(version)?)
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        // 3.1 has no flags here: the byte is reserved, and Mosquitto sends 0
        // (and reads none).
        let session_present = self.session_present && version != ProtocolVersion::V31;
        buf.put_u8(if session_present { SESSION_PRESENT } else { 0 });
        buf.put_u8(if version.is_v5() {
            self.reason_code as u8
        } else {
            self.reason_code.to_v3_connack()
        });
        self.properties.write(version, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    fn connack(session_present: bool, reason_code: ReasonCode, properties: Properties) -> Packet {
        Packet::ConnAck(ConnAck { session_present, reason_code, properties })
    }

    #[test]
    fn v311_return_codes() {
        assert_wire(
            &[0x20, 2, 1, 0],
            V311,
            &connack(true, ReasonCode::Success, Properties::default()),
        );
        for (code, reason) in [
            (1, ReasonCode::UnsupportedProtocolVersion),
            (2, ReasonCode::ClientIdentifierNotValid),
            (3, ReasonCode::ServerUnavailable),
            (4, ReasonCode::BadUserNameOrPassword),
            (5, ReasonCode::NotAuthorized),
        ] {
            assert_wire(&[0x20, 2, 0, code], V311, &connack(false, reason, Properties::default()));
        }
        // 5.0-only codes are mapped to the nearest 3.1.1 code.
        let banned = connack(false, ReasonCode::Banned, Properties::default());
        assert_eq!(encode(&banned, V311), [0x20, 2, 0, 5]);
        let busy = connack(false, ReasonCode::ServerBusy, Properties::default());
        assert_eq!(encode(&busy, V311), [0x20, 2, 0, 3]);
        // 3.1 has no session present flag.
        let resumed = connack(true, ReasonCode::Success, Properties::default());
        assert_eq!(encode(&resumed, V31), [0x20, 2, 0, 0]);
        // Properties do not exist in 3.1.1.
        let props = PropertyValues { receive_maximum: Some(1), ..PropertyValues::default() }.into();
        assert_eq!(encode(&connack(false, ReasonCode::Success, props), V311), [0x20, 2, 0, 0]);
    }

    #[test]
    fn v5_connack() {
        assert_wire(
            &[0x20, 3, 0, 0, 0],
            V5,
            &connack(false, ReasonCode::Success, Properties::default()),
        );
        let props = PropertyValues {
            receive_maximum: Some(10),
            maximum_qos: Some(1),
            ..PropertyValues::default()
        }
        .into();
        assert_wire(
            &[0x20, 8, 0, 0, 5, 0x21, 0, 10, 0x24, 1],
            V5,
            &connack(false, ReasonCode::Success, props),
        );
        assert_wire(
            &[0x20, 3, 0, 0x8A, 0],
            V5,
            &connack(false, ReasonCode::Banned, Properties::default()),
        );
    }

    #[test]
    fn rejections() {
        assert_eq!(
            decode_err(&[0x20, 2, 0, 6], V311),
            DecodeError::InvalidReasonCode { packet: PacketType::ConnAck, code: 6 }
        );
        assert_eq!(
            decode_err(&[0x20, 3, 0, 0x10, 0], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::ConnAck, code: 0x10 }
        );
        assert_eq!(
            decode_err(&[0x20, 2, 2, 0], V311),
            DecodeError::ReservedBitSet("connect acknowledge flags")
        );
        assert_eq!(
            decode_err(&[0x20, 2, 1, 5], V311),
            DecodeError::ProtocolViolation("session present with a failure reason code")
        );
        assert_eq!(decode_err(&[0x20, 3, 0, 0, 0], V311), DecodeError::TrailingBytes(1));
        assert_eq!(decode_err(&[0x20, 2, 0, 0], V5), DecodeError::Truncated("property length"));
        for (props, id) in [
            (&[2, 0x24, 2][..], 0x24),
            (&[2, 0x25, 2], 0x25),
            (&[2, 0x28, 2], 0x28),
            (&[2, 0x29, 2], 0x29),
            (&[2, 0x2A, 2], 0x2A),
            (&[3, 0x21, 0, 0], 0x21),
            (&[5, 0x27, 0, 0, 0, 0], 0x27),
        ] {
            let wire = frame(0x20, &[&[0, 0][..], props].concat());
            assert_eq!(decode_err(&wire, V5), DecodeError::InvalidPropertyValue(id));
        }
        assert_eq!(
            decode_err(&[0x20, 5, 0, 0, 2, 0x17, 1], V5),
            DecodeError::PropertyNotAllowed { property: 0x17, packet: PacketType::ConnAck }
        );
    }

    #[test]
    fn encoder_refusals() {
        let both = connack(true, ReasonCode::NotAuthorized, Properties::default());
        assert!(matches!(both.encode(V311, &mut BytesMut::new()), Err(EncodeError::Invalid(..))));
        let wrong = connack(false, ReasonCode::GrantedQoS1, Properties::default());
        assert!(matches!(wrong.encode(V5, &mut BytesMut::new()), Err(EncodeError::Invalid(..))));
    }
}
