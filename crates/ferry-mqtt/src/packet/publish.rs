use super::{decode_packet_id, PacketType};
use crate::{
    topic, wire, wire::Reader, ByteStr, DecodeError, EncodeError, Properties, ProtocolVersion, QoS,
};
use bytes::{BufMut, Bytes, BytesMut};

/// PUBLISH (§3.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    pub dup: bool,
    pub qos: QoS,
    pub retain: bool,
    /// May be empty only in 5.0 with a topic alias property.
    pub topic: ByteStr,
    /// 0 for QoS 0 (absent on the wire); nonzero otherwise.
    pub packet_id: u16,
    pub properties: Properties,
    pub payload: Bytes,
}

/// Fixed header flag bits of PUBLISH (§3.3.1).
pub(crate) mod flag {
    pub(crate) const DUP: u8 = 0b1000;
    pub(crate) const QOS_SHIFT: u8 = 1;
    pub(crate) const QOS_MASK: u8 = 0b0110;
    pub(crate) const RETAIN: u8 = 0b0001;
}

impl Publish {
    /// Decodes a PUBLISH body; the fixed header flags were validated by the
    /// framing code, so QoS is 0–2 and DUP is clear for QoS 0.
    pub(crate) fn decode(
        mut r: Reader,
        flags: u8,
        version: ProtocolVersion,
    ) -> Result<Publish, DecodeError> {
        let qos = QoS::from_u8((flags & flag::QOS_MASK) >> flag::QOS_SHIFT)
            .ok_or(DecodeError::InvalidQoS)?;
        let topic = r.string("topic name")?;
        if !topic.is_empty() && !topic::is_valid_topic_name(&topic) {
            return Err(DecodeError::InvalidTopicName(topic.to_string()));
        }
        let packet_id =
            if qos == QoS::AtMostOnce { 0 } else { decode_packet_id(&mut r, PacketType::Publish)? };
        let properties = if version.is_v5() {
            Properties::decode(&mut r, PacketType::Publish)?
        } else {
            Properties::default()
        };
        // An empty topic says "use the topic this alias stands for" (§3.3.2.3.4).
        // Without an alias, 5.0 calls it a Protocol Error (§3.3.2.1); 3.1.1
        // has no aliases, and its topic names are at least one character
        // long (§4.7.3).
        if topic.is_empty() && properties.topic_alias.is_none() {
            return Err(if version.is_v5() {
                DecodeError::ProtocolViolation("empty topic name without a topic alias")
            } else {
                DecodeError::InvalidTopicName(String::new())
            });
        }
        Ok(Publish {
            dup: flags & flag::DUP != 0,
            qos,
            retain: flags & flag::RETAIN != 0,
            topic,
            packet_id,
            properties,
            payload: r.take_rest(),
        })
    }

    pub(crate) fn header_flags(&self) -> u8 {
        let mut flags = (self.qos as u8) << flag::QOS_SHIFT;
        if self.dup {
            flags |= flag::DUP;
        }
        if self.retain {
            flags |= flag::RETAIN;
        }
        flags
    }

    /// Remaining length of the encoded PUBLISH. A packet id of 0 with QoS > 0
    /// is accepted so a broker can encode once with a placeholder and patch
    /// it per subscriber ([`crate::publish_packet_id_offset`]).
    pub(crate) fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        // MQTT-3.3.1-2; a forwarded QoS 0 copy of a DUP message must clear it.
        if self.dup && self.qos == QoS::AtMostOnce {
            return Err(EncodeError::Invalid("PUBLISH", "DUP set with QoS 0"));
        }
        let packet_id_len = if self.qos == QoS::AtMostOnce { 0 } else { 2 };
        Ok(wire::binary_len(self.topic.as_bytes(), "topic name")?
            + packet_id_len
            + self.properties.wire_len(version)?
            + self.payload.len())
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        self.write_head(version, buf);
        buf.put_slice(&self.payload);
    }

    /// The body up to the payload.
    pub(crate) fn write_head(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        wire::put_binary(buf, self.topic.as_bytes());
        if self.qos != QoS::AtMostOnce {
            buf.put_u16(self.packet_id);
        }
        self.properties.write(version, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    fn publish(
        qos: QoS,
        topic: &str,
        packet_id: u16,
        properties: Properties,
        payload: &'static [u8],
    ) -> Packet {
        Packet::Publish(Publish {
            dup: false,
            qos,
            retain: false,
            topic: topic.into(),
            packet_id,
            properties,
            payload: Bytes::from_static(payload),
        })
    }

    #[test]
    fn v311_publish() {
        let wire = [0x32, 9, 0, 3, b'a', b'/', b'b', 0, 10, b'h', b'i'];
        assert_wire(
            &wire,
            V311,
            &publish(QoS::AtLeastOnce, "a/b", 10, Properties::default(), b"hi"),
        );
        let wire = [0x30, 3, 0, 1, b'a'];
        assert_wire(&wire, V311, &publish(QoS::AtMostOnce, "a", 0, Properties::default(), b""));
        let Packet::Publish(flags) = decode(&[0x3D, 5, 0, 1, b'a', 0, 1], V311).unwrap() else {
            panic!()
        };
        assert!(flags.dup && flags.retain && flags.qos == QoS::ExactlyOnce);
        assert_eq!(encode(&Packet::Publish(flags), V311), [0x3D, 5, 0, 1, b'a', 0, 1]);
    }

    #[test]
    fn v5_publish_with_topic_alias_and_empty_topic() {
        let props = PropertyValues { topic_alias: Some(5), ..PropertyValues::default() }.into();
        assert_wire(
            &[0x30, 7, 0, 0, 3, 0x23, 0, 5, b'x'],
            V5,
            &publish(QoS::AtMostOnce, "", 0, props, b"x"),
        );
    }

    #[test]
    fn v5_topic_alias_zero_is_topic_alias_invalid() {
        // §3.3.2.3.4: 0 is not a topic alias; with or without a topic name.
        for wire in
            [&[0x30, 8, 0, 1, b'a', 3, 0x23, 0, 0, b'x'][..], &[0x30, 7, 0, 0, 3, 0x23, 0, 0, b'x']]
        {
            let error = decode_err(wire, V5);
            assert_eq!(error, DecodeError::ZeroTopicAlias);
            assert_eq!(error.reason_code(), crate::ReasonCode::TopicAliasInvalid);
        }
    }

    #[test]
    fn v5_publish_properties() {
        #[rustfmt::skip]
        let wire = frame(0x34, &[
            &[0, 1, b't', 0x12, 0x34][..],
            &[21, 0x01, 1, 0x02, 0, 0, 0, 60, 0x08, 0, 1, b'r', 0x0B, 1, 0x0B, 0x80, 0x01, 0x26, 0, 0, 0, 0],
            b"payload",
        ].concat());
        let props = PropertyValues {
            payload_format_indicator: Some(1),
            message_expiry_interval: Some(60),
            response_topic: Some("r".into()),
            // Several subscription identifiers, order kept (server to client).
            subscription_identifiers: vec![1, 128],
            user_properties: vec![("".into(), "".into())],
            ..PropertyValues::default()
        }
        .into();
        assert_wire(&wire, V5, &publish(QoS::ExactlyOnce, "t", 0x1234, props, b"payload"));
    }

    #[test]
    fn topic_rules() {
        assert_eq!(
            decode_err(&[0x30, 5, 0, 3, b'a', b'/', b'+'], V311),
            DecodeError::InvalidTopicName("a/+".into())
        );
        assert_eq!(
            decode_err(&[0x30, 3, 0, 1, b'#'], V5),
            DecodeError::InvalidTopicName("#".into())
        );
        assert_eq!(decode_err(&[0x30, 2, 0, 0], V311), DecodeError::InvalidTopicName("".into()));
        assert_eq!(
            decode_err(&[0x30, 3, 0, 0, 0], V5),
            DecodeError::ProtocolViolation("empty topic name without a topic alias")
        );
        assert_eq!(
            decode_err(&[0x30, 3, 0, 0, 0], V5).reason_code(),
            crate::ReasonCode::ProtocolError
        );
        assert_eq!(
            DecodeError::InvalidTopicName("".into()).reason_code(),
            crate::ReasonCode::TopicNameInvalid
        );
        assert_eq!(
            decode_err(&[0x30, 4, 0, 2, 0xC3, 0x28], V311),
            DecodeError::InvalidString { field: "topic name", error: crate::StrError::InvalidUtf8 }
        );
        assert_eq!(
            decode_err(&[0x30, 3, 0, 1, 0], V311),
            DecodeError::InvalidString {
                field: "topic name",
                error: crate::StrError::NullCharacter
            }
        );
        assert_eq!(decode_err(&[0x30, 3, 0, 5, b'a'], V311), DecodeError::Truncated("topic name"));
    }

    #[test]
    fn packet_identifier_rules() {
        assert_eq!(
            decode_err(&[0x32, 5, 0, 1, b'a', 0, 0], V311),
            DecodeError::ZeroPacketId(PacketType::Publish)
        );
        assert_eq!(
            decode_err(&[0x34, 4, 0, 1, b'a', 0], V311),
            DecodeError::Truncated("packet identifier")
        );
        // QoS 0 carries no packet id: these two bytes are payload.
        let Packet::Publish(p) = decode(&[0x30, 5, 0, 1, b'a', 0, 0], V311).unwrap() else {
            panic!()
        };
        assert_eq!((p.packet_id, &p.payload[..]), (0, &[0, 0][..]));
    }

    #[test]
    fn v5_property_rules() {
        let with_props = |props: &[u8]| frame(0x30, &[&[0, 1, b't'][..], props].concat());
        assert_eq!(
            decode_err(&with_props(&[5, 0x11, 0, 0, 0, 1]), V5),
            DecodeError::PropertyNotAllowed { property: 0x11, packet: PacketType::Publish }
        );
        assert_eq!(decode_err(&with_props(&[2, 0x05, 0]), V5), DecodeError::UnknownProperty(0x05));
        assert_eq!(decode_err(&with_props(&[2, 0x81, 0]), V5), DecodeError::UnknownProperty(0x81));
        assert_eq!(
            decode_err(&with_props(&[10, 0x02, 0, 0, 0, 1, 0x02, 0, 0, 0, 2]), V5),
            DecodeError::DuplicateProperty(0x02)
        );
        assert_eq!(
            decode_err(&with_props(&[2, 0x0B, 0]), V5),
            DecodeError::InvalidPropertyValue(0x0B)
        );
        assert_eq!(decode_err(&with_props(&[3, 0x23, 0, 0]), V5), DecodeError::ZeroTopicAlias);
        assert_eq!(
            decode_err(&with_props(&[2, 0x01, 2]), V5),
            DecodeError::InvalidPropertyValue(0x01)
        );
        assert_eq!(
            decode_err(&with_props(&[4, 0x08, 0, 1, b'+']), V5),
            DecodeError::InvalidPropertyValue(0x08)
        );
        // The property block runs past the packet.
        assert_eq!(
            decode_err(&with_props(&[9, 0x01, 1]), V5),
            DecodeError::Truncated("properties")
        );
        // A property runs past the block.
        assert_eq!(
            decode_err(&with_props(&[3, 0x02, 0, 0, 0, 0]), V5),
            DecodeError::Truncated("message expiry interval")
        );
        assert_eq!(
            decode_err(&with_props(&[0x80, 0x80, 0x80, 0x80, 0x01]), V5),
            DecodeError::MalformedVariableInteger("property length")
        );
        assert_eq!(
            decode_err(&with_props(&[3, 0x0B, 0x80, 0x80]), V5),
            DecodeError::Truncated("subscription identifier")
        );
        assert_eq!(
            decode_err(&with_props(&[5, 0x0B, 0x80, 0x80, 0x80, 0x80]), V5),
            DecodeError::MalformedVariableInteger("subscription identifier")
        );
        // A protocol error, as Mosquitto answers it.
        assert_eq!(
            DecodeError::PropertyNotAllowed { property: 0x11, packet: PacketType::Publish }
                .reason_code(),
            crate::ReasonCode::ProtocolError
        );
        assert_eq!(
            DecodeError::ZeroPacketId(PacketType::Publish).reason_code(),
            crate::ReasonCode::ProtocolError
        );
        assert_eq!(
            DecodeError::ZeroPacketId(PacketType::Subscribe).reason_code(),
            crate::ReasonCode::MalformedPacket
        );
        assert_eq!(
            DecodeError::DuplicateProperty(2).reason_code(),
            crate::ReasonCode::ProtocolError
        );
    }

    #[test]
    fn decoding_is_zero_copy() {
        let mut buf = BytesMut::from(&[0x30, 6, 0, 1, b't', b'a', b'b', b'c'][..]);
        let start = buf.as_ptr() as usize;
        let end = start + buf.len();
        let Some(Packet::Publish(p)) = Packet::decode(&mut buf, V311, 100).unwrap() else {
            panic!()
        };
        for ptr in [p.topic.as_ptr() as usize, p.payload.as_ptr() as usize] {
            assert!((start..end).contains(&ptr));
        }
    }

    #[test]
    fn encoder_refusals() {
        let mut p = Publish {
            dup: true,
            qos: QoS::AtMostOnce,
            retain: false,
            topic: "t".into(),
            packet_id: 0,
            properties: Properties::default(),
            payload: Bytes::new(),
        };
        let mut buf = BytesMut::new();
        assert!(matches!(
            Packet::Publish(p.clone()).encode(V311, &mut buf),
            Err(EncodeError::Invalid(..))
        ));
        p.dup = false;
        // `From<String>` does not check the length; the encoder must.
        p.topic = ByteStr::from("a".repeat(65_536));
        assert!(matches!(
            Packet::Publish(p.clone()).encode(V311, &mut buf),
            Err(EncodeError::Invalid(..))
        ));
        p.topic = "t".into();
        p.properties.user_properties.push(("k".repeat(70_000).into(), "v".into()));
        assert!(matches!(
            Packet::Publish(p.clone()).encode(V5, &mut buf),
            Err(EncodeError::Invalid(..))
        ));
        // Properties are dropped in 3.1.1, so the same packet encodes there.
        assert!(Packet::Publish(p.clone()).encode(V311, &mut buf).is_ok());
        buf.clear();
        p.properties = Properties::default();
        p.payload = Bytes::from(vec![0u8; 268_435_455]);
        let packet = Packet::Publish(p);
        assert_eq!(
            packet.encode(V311, &mut buf),
            Err(EncodeError::PacketTooLarge(268_435_455 + 3))
        );
        assert_eq!(packet.encoded_len(V311), 0);
        assert!(buf.is_empty());
    }
}
