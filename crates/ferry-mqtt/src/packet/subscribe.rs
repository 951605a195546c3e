use super::{decode_packet_id, PacketType};
use crate::{
    topic, wire, wire::Reader, ByteStr, DecodeError, EncodeError, Properties, ProtocolVersion, QoS,
};
use bytes::{BufMut, BytesMut};

/// SUBSCRIBE (§3.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    pub packet_id: u16,
    pub properties: Properties,
    /// At least one.
    pub filters: Vec<(ByteStr, SubscriptionOptions)>,
}

/// The options byte of one SUBSCRIBE entry (§3.8.3.1). In 3.1.1 only `qos` is
/// on the wire and the rest decode as their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriptionOptions {
    pub qos: QoS,
    pub no_local: bool,
    pub retain_as_published: bool,
    pub retain_handling: RetainHandling,
}

/// When retained messages are sent for a new subscription (§3.8.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum RetainHandling {
    #[default]
    SendOnSubscribe = 0,
    SendIfNewSubscription = 1,
    DoNotSend = 2,
}

/// Bits of the subscription options byte (§3.8.3.1).
mod option {
    pub(super) const QOS: u8 = 0b0000_0011;
    pub(super) const NO_LOCAL: u8 = 0b0000_0100;
    pub(super) const RETAIN_AS_PUBLISHED: u8 = 0b0000_1000;
    pub(super) const RETAIN_HANDLING_SHIFT: u8 = 4;
    pub(super) const RETAIN_HANDLING: u8 = 0b0011_0000;
    /// Reserved in 5.0; in 3.1.1 everything above the QoS is reserved.
    pub(super) const RESERVED_V5: u8 = 0b1100_0000;
    pub(super) const RESERVED_V3: u8 = !QOS;
}

impl SubscriptionOptions {
    /// Decodes the options byte of `filter`.
    pub fn decode(
        byte: u8,
        filter: &str,
        version: ProtocolVersion,
    ) -> Result<SubscriptionOptions, DecodeError> {
        let reserved = if version.is_v5() { option::RESERVED_V5 } else { option::RESERVED_V3 };
        if byte & reserved != 0 {
            return Err(DecodeError::ReservedBitSet("subscription options"));
        }
        let qos = QoS::from_u8(byte & option::QOS).ok_or(DecodeError::InvalidQoS)?;
        let retain_handling =
            match (byte & option::RETAIN_HANDLING) >> option::RETAIN_HANDLING_SHIFT {
                0 => RetainHandling::SendOnSubscribe,
                1 => RetainHandling::SendIfNewSubscription,
                2 => RetainHandling::DoNotSend,
                _ => return Err(DecodeError::ProtocolViolation("retain handling 3")),
            };
        let no_local = byte & option::NO_LOCAL != 0;
        // MQTT-3.8.3-4: the sender's own messages reach the group anyway.
        if no_local && topic::is_shared_filter(filter) {
            return Err(DecodeError::ProtocolViolation("no local on a shared subscription"));
        }
        Ok(SubscriptionOptions {
            qos,
            no_local,
            retain_as_published: byte & option::RETAIN_AS_PUBLISHED != 0,
            retain_handling,
        })
    }

    /// The options byte; 3.1.1 has only the QoS.
    pub fn to_byte(self, version: ProtocolVersion) -> u8 {
        let mut byte = self.qos as u8;
        if version.is_v5() {
            if self.no_local {
                byte |= option::NO_LOCAL;
            }
            if self.retain_as_published {
                byte |= option::RETAIN_AS_PUBLISHED;
            }
            byte |= (self.retain_handling as u8) << option::RETAIN_HANDLING_SHIFT;
        }
        byte
    }
}

impl Subscribe {
    pub(crate) fn decode(
        mut r: Reader,
        version: ProtocolVersion,
    ) -> Result<Subscribe, DecodeError> {
        let packet_id = decode_packet_id(&mut r, PacketType::Subscribe)?;
        let properties = if version.is_v5() {
            Properties::decode(&mut r, PacketType::Subscribe)?
        } else {
            Properties::default()
        };
        if r.is_empty() {
            return Err(DecodeError::NoTopicFilters(PacketType::Subscribe));
        }
        let mut filters = Vec::new();
        while !r.is_empty() {
            let filter = r.string("topic filter")?;
            if !topic::is_valid_topic_filter(&filter) {
                return Err(DecodeError::InvalidTopicFilter(filter.to_string()));
            }
            let options =
                SubscriptionOptions::decode(r.u8("subscription options")?, &filter, version)?;
            filters.push((filter, options));
        }
        Ok(Subscribe { packet_id, properties, filters })
    }

    pub(crate) fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        if self.filters.is_empty() {
            return Err(EncodeError::Invalid("SUBSCRIBE", "no topic filters"));
        }
        let mut len = 2 + self.properties.wire_len(version)?;
        for (filter, _) in &self.filters {
            len = len.saturating_add(wire::binary_len(filter.as_bytes(), "topic filter")? + 1);
        }
        Ok(len)
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id);
        self.properties.write(version, buf);
        for (filter, options) in &self.filters {
            wire::put_binary(buf, filter.as_bytes());
            buf.put_u8(options.to_byte(version));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    fn options(qos: QoS) -> SubscriptionOptions {
        SubscriptionOptions { qos, ..SubscriptionOptions::default() }
    }

    #[test]
    fn v311_subscribe() {
        let wire = [0x82, 12, 0, 10, 0, 3, b'a', b'/', b'b', 1, 0, 1, b'#', 2];
        let expected = Packet::Subscribe(Subscribe {
            packet_id: 10,
            properties: Properties::default(),
            filters: vec![
                ("a/b".into(), options(QoS::AtLeastOnce)),
                ("#".into(), options(QoS::ExactlyOnce)),
            ],
        });
        assert_wire(&wire, V311, &expected);
    }

    #[test]
    fn v5_subscribe() {
        let wire = [0x82, 11, 0, 10, 2, 0x0B, 5, 0, 3, b'a', b'/', b'+', 0x2D];
        let expected = Packet::Subscribe(Subscribe {
            packet_id: 10,
            properties: PropertyValues {
                subscription_identifiers: vec![5],
                ..PropertyValues::default()
            }
            .into(),
            filters: vec![(
                "a/+".into(),
                SubscriptionOptions {
                    qos: QoS::AtLeastOnce,
                    no_local: true,
                    retain_as_published: true,
                    retain_handling: RetainHandling::DoNotSend,
                },
            )],
        });
        assert_wire(&wire, V5, &expected);
        // 3.1.1 has only the QoS bits.
        let Packet::Subscribe(subscribe) = expected else { panic!() };
        let v3 = encode(&Packet::Subscribe(subscribe), V311);
        assert_eq!(v3, [0x82, 8, 0, 10, 0, 3, b'a', b'/', b'+', 1]);
    }

    #[test]
    fn shared_subscription_rules() {
        let shared =
            |byte: u8| frame(0x82, &[&[0, 1, 0][..], &[0, 9], b"$share/g/", &[byte]].concat());
        // Without a filter after the group.
        assert_eq!(decode_err(&shared(0), V5), DecodeError::InvalidTopicFilter("$share/g/".into()));
        let no_local = frame(0x82, &[&[0, 1, 0][..], &[0, 10], b"$share/g/a", &[0x04]].concat());
        assert_eq!(
            decode_err(&no_local, V5),
            DecodeError::ProtocolViolation("no local on a shared subscription")
        );
        assert_eq!(
            DecodeError::ProtocolViolation("").reason_code(),
            crate::ReasonCode::ProtocolError
        );
    }

    #[test]
    fn rejections() {
        assert_eq!(
            decode_err(&[0x82, 2, 0, 1], V311),
            DecodeError::NoTopicFilters(PacketType::Subscribe)
        );
        assert_eq!(
            decode_err(&[0x82, 3, 0, 1, 0], V5),
            DecodeError::NoTopicFilters(PacketType::Subscribe)
        );
        assert_eq!(
            DecodeError::NoTopicFilters(PacketType::Subscribe).reason_code(),
            crate::ReasonCode::ProtocolError
        );
        assert_eq!(
            decode_err(&[0x82, 2, 0, 0], V311),
            DecodeError::ZeroPacketId(PacketType::Subscribe)
        );
        assert_eq!(
            decode_err(&[0x82, 8, 0, 1, 0, 3, b'a', b'#', b'b', 0], V311),
            DecodeError::InvalidTopicFilter("a#b".into())
        );
        assert_eq!(
            decode_err(&[0x82, 5, 0, 1, 0, 0, 0], V311),
            DecodeError::InvalidTopicFilter("".into())
        );
        assert_eq!(
            decode_err(&[0x82, 5, 0, 1, 0, 1, b'a'], V311),
            DecodeError::Truncated("subscription options")
        );
        for (version, byte, err) in [
            (V311, 0x04, DecodeError::ReservedBitSet("subscription options")),
            (V311, 0x80, DecodeError::ReservedBitSet("subscription options")),
            (V311, 0x03, DecodeError::InvalidQoS),
            (V5, 0x40, DecodeError::ReservedBitSet("subscription options")),
            (V5, 0x80, DecodeError::ReservedBitSet("subscription options")),
            (V5, 0x03, DecodeError::InvalidQoS),
            (V5, 0x30, DecodeError::ProtocolViolation("retain handling 3")),
        ] {
            let props: &[u8] = if version.is_v5() { &[0] } else { &[] };
            let wire = frame(0x82, &[&[0, 1][..], props, &[0, 1, b'a', byte]].concat());
            assert_eq!(decode_err(&wire, version), err, "{version:?} {byte:#x}");
        }
        // One subscription identifier at most, and never 0.
        assert_eq!(
            decode_err(&[0x82, 10, 0, 1, 4, 0x0B, 1, 0x0B, 2, 0, 1, b'a', 0], V5),
            DecodeError::DuplicateProperty(0x0B)
        );
        assert_eq!(
            decode_err(&[0x82, 8, 0, 1, 2, 0x0B, 0, 0, 1, b'a', 0], V5),
            DecodeError::InvalidPropertyValue(0x0B)
        );
        assert_eq!(
            decode_err(&[0x82, 9, 0, 1, 3, 0x1F, 0, 0, 0, 1, b'a', 0], V5),
            DecodeError::PropertyNotAllowed { property: 0x1F, packet: PacketType::Subscribe }
        );
    }

    #[test]
    fn encoder_refuses_empty_and_out_of_range() {
        let mut subscribe =
            Subscribe { packet_id: 1, properties: Properties::default(), filters: vec![] };
        let mut buf = BytesMut::new();
        assert!(Packet::Subscribe(subscribe.clone()).encode(V5, &mut buf).is_err());
        subscribe.filters.push(("a".into(), SubscriptionOptions::default()));
        subscribe.properties.subscription_identifiers.push(268_435_456);
        assert!(Packet::Subscribe(subscribe.clone()).encode(V5, &mut buf).is_err());
        subscribe.properties.subscription_identifiers = vec![0];
        assert!(Packet::Subscribe(subscribe).encode(V5, &mut buf).is_err());
        assert!(buf.is_empty());
    }
}
