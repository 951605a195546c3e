use super::{reason_tail, PacketType};
use crate::{wire::Reader, DecodeError, EncodeError, Properties, ProtocolVersion, ReasonCode};
use bytes::BytesMut;

/// DISCONNECT (§3.14). In 3.1.1 it has no body (reason Success, no properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    pub reason_code: ReasonCode,
    pub properties: Properties,
}

impl Disconnect {
    pub(crate) fn decode(
        mut r: Reader,
        version: ProtocolVersion,
    ) -> Result<Disconnect, DecodeError> {
        let (reason_code, properties) = if version.is_v5() {
            reason_tail::decode(&mut r, PacketType::Disconnect)?
        } else {
            (ReasonCode::Success, Properties::default())
        };
        r.finish()?;
        Ok(Disconnect { reason_code, properties })
    }

    /// In 3.1.1 DISCONNECT is empty, so the reason and properties are dropped.
    pub(crate) fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        if version.is_v5() {
            reason_tail::len(self.reason_code, &self.properties, PacketType::Disconnect)
        } else {
            Ok(0)
        }
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        if version.is_v5() {
            reason_tail::write(self.reason_code, &self.properties, buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    fn disconnect(reason_code: ReasonCode, properties: Properties) -> Packet {
        Packet::Disconnect(Disconnect { reason_code, properties })
    }

    #[test]
    fn v311_disconnect_is_empty() {
        assert_wire(&[0xE0, 0], V311, &disconnect(ReasonCode::Success, Properties::default()));
        assert_eq!(decode_err(&[0xE0, 1, 0], V311), DecodeError::TrailingBytes(1));
        let props =
            PropertyValues { reason_string: Some("bye".into()), ..PropertyValues::default() }
                .into();
        assert_eq!(encode(&disconnect(ReasonCode::ServerShuttingDown, props), V311), [0xE0, 0]);
    }

    #[test]
    fn v5_disconnect() {
        let normal = disconnect(ReasonCode::NORMAL_DISCONNECTION, Properties::default());
        assert_wire(&[0xE0, 0], V5, &normal);
        assert_decodes(&[0xE0, 1, 0], V5, &normal);
        assert_decodes(&[0xE0, 2, 0, 0], V5, &normal);
        let will = disconnect(ReasonCode::DisconnectWithWillMessage, Properties::default());
        assert_wire(&[0xE0, 1, 4], V5, &will);
        let props =
            PropertyValues { reason_string: Some("x".into()), ..PropertyValues::default() }.into();
        assert_wire(
            &[0xE0, 6, 0x8B, 4, 0x1F, 0, 1, b'x'],
            V5,
            &disconnect(ReasonCode::ServerShuttingDown, props),
        );
    }

    #[test]
    fn v5_rejections() {
        assert_eq!(
            decode_err(&[0xE0, 1, 0x01], V5),
            DecodeError::InvalidReasonCode { packet: PacketType::Disconnect, code: 0x01 }
        );
        assert_eq!(
            decode_err(&[0xE0, 5, 0, 3, 0x23, 0, 1], V5),
            DecodeError::PropertyNotAllowed { property: 0x23, packet: PacketType::Disconnect }
        );
        // Cut short as well as misplaced: malformed first.
        assert_eq!(
            decode_err(&[0xE0, 4, 0, 2, 0x23, 0], V5),
            DecodeError::Truncated("topic alias")
        );
        assert_eq!(decode_err(&[0xE0, 3, 0, 0, 0], V5), DecodeError::TrailingBytes(1));
    }
}
