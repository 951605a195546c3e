use super::{decode_packet_id, PacketType};
use crate::{
    topic, wire, wire::Reader, ByteStr, DecodeError, EncodeError, Properties, ProtocolVersion,
};
use bytes::{BufMut, BytesMut};

/// UNSUBSCRIBE (§3.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsubscribe {
    pub packet_id: u16,
    pub properties: Properties,
    /// At least one.
    pub filters: Vec<ByteStr>,
}

impl Unsubscribe {
    pub(crate) fn decode(
        mut r: Reader,
        version: ProtocolVersion,
    ) -> Result<Unsubscribe, DecodeError> {
        let packet_id = decode_packet_id(&mut r, PacketType::Unsubscribe)?;
        let properties = if version.is_v5() {
            Properties::decode(&mut r, PacketType::Unsubscribe)?
        } else {
            Properties::default()
        };
        if r.is_empty() {
            return Err(DecodeError::NoTopicFilters(PacketType::Unsubscribe));
        }
        let mut filters = Vec::new();
        while !r.is_empty() {
            let filter = r.string("topic filter")?;
            if !topic::is_valid_topic_filter(&filter) {
                return Err(DecodeError::InvalidTopicFilter(filter.to_string()));
            }
            filters.push(filter);
        }
        Ok(Unsubscribe { packet_id, properties, filters })
    }

    pub(crate) fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        if self.filters.is_empty() {
            return Err(EncodeError::Invalid("UNSUBSCRIBE", "no topic filters"));
        }
        let mut len = 2 + self.properties.wire_len(version)?;
        for filter in &self.filters {
            len = len.saturating_add(wire::binary_len(filter.as_bytes(), "topic filter")?);
        }
        Ok(len)
    }

    pub(crate) fn write_body(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id);
        self.properties.write(version, buf);
        for filter in &self.filters {
            wire::put_binary(buf, filter.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{test_support::*, Packet};
    use ProtocolVersion::*;

    #[test]
    fn unsubscribe() {
        let expected = Packet::Unsubscribe(Unsubscribe {
            packet_id: 11,
            properties: Properties::default(),
            filters: vec!["a/b".into(), "$share/g/#".into()],
        });
        #[rustfmt::skip]
        let v3 = [0xA2, 19, 0, 11, 0, 3, b'a', b'/', b'b', 0, 10, b'$', b's', b'h', b'a', b'r', b'e', b'/', b'g', b'/', b'#'];
        assert_wire(&v3, V311, &expected);
        let mut v5 = v3.to_vec();
        v5.insert(4, 0);
        v5[1] += 1;
        assert_wire(&v5, V5, &expected);
    }

    #[test]
    fn rejections() {
        assert_eq!(
            decode_err(&[0xA2, 2, 0, 1], V311),
            DecodeError::NoTopicFilters(PacketType::Unsubscribe)
        );
        assert_eq!(
            decode_err(&[0xA2, 3, 0, 1, 0], V5),
            DecodeError::NoTopicFilters(PacketType::Unsubscribe)
        );
        assert_eq!(
            decode_err(&[0xA2, 5, 0, 0, 0, 1, b'a'], V311),
            DecodeError::ZeroPacketId(PacketType::Unsubscribe)
        );
        assert_eq!(
            decode_err(&[0xA2, 6, 0, 1, 0, 2, b'a', b'+'], V311),
            DecodeError::InvalidTopicFilter("a+".into())
        );
        assert_eq!(
            decode_err(&[0xA2, 4, 0, 1, 0, 1], V311),
            DecodeError::Truncated("topic filter")
        );
        assert_eq!(
            decode_err(&[0xA2, 8, 0, 1, 2, 0x0B, 1, 0, 1, b'a'], V5),
            DecodeError::PropertyNotAllowed { property: 0x0B, packet: PacketType::Unsubscribe }
        );
    }
}
