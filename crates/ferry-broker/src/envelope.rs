//! The batch envelope: many messages in one MQTT 5 PUBLISH, for uplinks
//! whose link pays per packet (`ferry-routes`' `mqtt` endpoint packs it; a
//! receiving Ferry unpacks it when the PUBLISH says so by its content type).
//!
//! The format, so that any receiver can unpack it (docs/routes.md): the
//! envelope PUBLISH has Content Type `application/vnd.ferry.batch`, and its
//! payload is a sequence of complete MQTT 5.0 PUBLISH packets, one after
//! another with nothing between: each with its fixed header (QoS 0, so no
//! packet identifier; DUP 0; RETAIN as the message's), its topic, its
//! properties and its payload. The messages take the envelope's QoS.

use bytes::{Bytes, BytesMut};
use ferry_mqtt::{Packet, ProtocolVersion, Publish, QoS};

/// The Content Type that marks an envelope.
pub const BATCH_CONTENT_TYPE: &str = "application/vnd.ferry.batch";

/// Messages one envelope may hold: bounds the work (and the allocations) a
/// single PUBLISH can cause, far above what a batch of 256 KiB holds.
pub const MAX_MESSAGES: usize = 65_536;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvelopeError {
    #[error("message {index} of the envelope: {reason}")]
    Message { index: usize, reason: String },
    #[error("more than {MAX_MESSAGES} messages in one envelope")]
    TooMany,
}

/// Whether `publish` is an envelope.
pub fn is_envelope(publish: &Publish) -> bool {
    publish.properties.content_type.as_ref().is_some_and(|kind| kind.as_str() == BATCH_CONTENT_TYPE)
}

/// Appends `message` to an envelope's payload, as a QoS 0 PUBLISH.
pub fn pack(message: &Publish, payload: &mut BytesMut) -> Result<(), ferry_mqtt::EncodeError> {
    let inner = Publish { dup: false, qos: QoS::AtMostOnce, packet_id: 0, ..message.clone() };
    inner.encode(ProtocolVersion::V5, payload)
}

/// The messages of an envelope's payload, in order, each still QoS 0 (the
/// caller gives them the envelope's). A malformed one fails the whole
/// envelope: half of it is never taken.
pub fn unpack(payload: &Bytes) -> Result<Vec<Publish>, EnvelopeError> {
    let mut rest = BytesMut::from(payload.as_ref());
    let mut messages = Vec::new();
    while !rest.is_empty() {
        let index = messages.len();
        if index == MAX_MESSAGES {
            return Err(EnvelopeError::TooMany);
        }
        let bad = |reason: String| EnvelopeError::Message { index, reason };
        // The envelope's own size already passed the broker's packet limit.
        match Packet::decode(&mut rest, ProtocolVersion::V5, u32::MAX) {
            Ok(Some(Packet::Publish(publish))) => {
                if publish.qos != QoS::AtMostOnce {
                    return Err(bad("not QoS 0".into()));
                }
                if publish.topic.is_empty() || publish.properties.topic_alias.is_some() {
                    return Err(bad("a topic alias instead of a topic".into()));
                }
                messages.push(publish);
            }
            Ok(Some(other)) => return Err(bad(format!("a {:?} packet", other.packet_type()))),
            Ok(None) => return Err(bad("cut short".into())),
            Err(error) => return Err(bad(error.to_string())),
        }
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_mqtt::Properties;

    fn message(topic: &str, payload: &'static [u8], retain: bool) -> Publish {
        let mut properties = Properties::default();
        properties.user_properties.push(("k".into(), "v".into()));
        Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain,
            topic: topic.into(),
            packet_id: 7,
            properties,
            payload: Bytes::from_static(payload),
        }
    }

    #[test]
    fn messages_come_out_as_they_went_in_at_qos_0() {
        let messages = [message("a/1", b"one", false), message("b", b"", true)];
        let mut payload = BytesMut::new();
        for message in &messages {
            pack(message, &mut payload).unwrap();
        }
        let unpacked = unpack(&payload.freeze()).unwrap();
        assert_eq!(unpacked.len(), 2);
        for (out, original) in unpacked.iter().zip(&messages) {
            assert_eq!(
                (&out.topic, &out.payload, out.retain),
                (&original.topic, &original.payload, original.retain)
            );
            assert_eq!(out.properties.user_properties, original.properties.user_properties);
            assert_eq!((out.qos, out.packet_id), (QoS::AtMostOnce, 0));
        }
        assert_eq!(unpack(&Bytes::new()).unwrap(), Vec::new());
    }

    #[test]
    fn a_damaged_envelope_is_refused_whole() {
        let mut payload = BytesMut::new();
        pack(&message("a", b"x", false), &mut payload).unwrap();
        let whole = payload.clone().freeze();
        let cut = whole.slice(..whole.len() - 1);
        assert!(matches!(unpack(&cut), Err(EnvelopeError::Message { index: 0, .. })));
        let mut qos1 = BytesMut::new();
        message("a", b"x", false).encode(ProtocolVersion::V5, &mut qos1).unwrap();
        assert!(matches!(unpack(&qos1.freeze()), Err(EnvelopeError::Message { index: 0, .. })));
        let mut with_ping = payload;
        Packet::PingReq.encode(ProtocolVersion::V5, &mut with_ping).unwrap();
        assert!(matches!(
            unpack(&with_ping.freeze()),
            Err(EnvelopeError::Message { index: 1, .. })
        ));
    }
}
