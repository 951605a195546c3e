use super::{reason_tail, PacketType};
use crate::{wire::Reader, DecodeError, EncodeError, Properties, ReasonCode};
use bytes::BytesMut;

/// AUTH (§3.15), 5.0 only: extended authentication exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub reason_code: ReasonCode,
    pub properties: Properties,
}

impl Auth {
    /// Decodes an AUTH body; the framing code has refused AUTH before 5.0.
    pub(crate) fn decode(mut r: Reader) -> Result<Auth, DecodeError> {
        let (reason_code, properties) = reason_tail::decode(&mut r, PacketType::Auth)?;
        r.finish()?;
        Ok(Auth { reason_code, properties })
    }

    pub(crate) fn body_len(&self) -> Result<usize, EncodeError> {
        reason_tail::len(self.reason_code, &self.properties, PacketType::Auth)
    }

    pub(crate) fn write_body(&self, buf: &mut BytesMut) {
        reason_tail::write(self.reason_code, &self.properties, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, Packet, ProtocolVersion::*};

    #[test]
    fn auth() {
        let success = Packet::Auth(Auth {
            reason_code: ReasonCode::Success,
            properties: Properties::default(),
        });
        assert_wire(&[0xF0, 0], V5, &success);
        assert_decodes(&[0xF0, 2, 0, 0], V5, &success);
        let props =
            PropertyValues { authentication_method: Some("S".into()), ..PropertyValues::default() }
                .into();
        let cont = Packet::Auth(Auth {
            reason_code: ReasonCode::ContinueAuthentication,
            properties: props,
        });
        assert_wire(&[0xF0, 6, 0x18, 4, 0x15, 0, 1, b'S'], V5, &cont);
    }

    #[test]
    fn rejections() {
        assert_eq!(
            decode_err(&[0xF0, 1, 0x01], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::Auth, code: 0x01 }
        );
        assert_eq!(
            decode_err(&[0xF0, 7, 0x18, 5, 0x11, 0, 0, 0, 1], V5),
            DecodeError::PropertyNotAllowed { property: 0x11, packet: PacketType::Auth }
        );
        let auth = Packet::Auth(Auth {
            reason_code: ReasonCode::Success,
            properties: Properties::default(),
        });
        let mut buf = BytesMut::new();
        assert!(matches!(auth.encode(V311, &mut buf), Err(EncodeError::Invalid(..))));
        assert_eq!(auth.encoded_len(V311), 0);
        assert!(buf.is_empty());
    }
}
