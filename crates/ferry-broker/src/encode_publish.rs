//! A delivery's PUBLISH on the wire: from the message's shared encoding
//! (`encode_once.rs`) when the delivery differs from it only in flags and
//! packet id, encoded on its own when it differs in more, or when no other
//! delivery can share it.

use crate::message::Message;
use bytes::BytesMut;
use ferry_mqtt::{Packet, ProtocolVersion, Publish, QoS};
use std::sync::Arc;
use std::time::Instant;

/// How one delivery of a message must look on the wire.
pub(crate) struct PublishShape<'a> {
    pub version: ProtocolVersion,
    pub qos: QoS,
    pub retain: bool,
    pub dup: bool,
    pub packet_id: u16,
    pub subscription_ids: &'a [u32],
    /// `Some((alias, send_topic))` when a topic alias is used toward the client.
    pub topic_alias: Option<(u16, bool)>,
}

/// Appends the PUBLISH for `message` in `shape` to `out`; returns the number
/// of bytes appended (0 only if the codec refused the packet, which it
/// cannot for a message that was itself decoded within our limits).
pub(crate) fn encode_publish(
    message: &Arc<Message>,
    shape: &PublishShape<'_>,
    now: Instant,
    out: &mut BytesMut,
) -> usize {
    let expiry_untouched = message
        .properties
        .message_expiry_interval
        .is_none_or(|_| now.saturating_duration_since(message.received_at).as_secs() == 0);
    let v5 = shape.version.is_v5();
    let per_subscriber = v5 && (!shape.subscription_ids.is_empty() || shape.topic_alias.is_some());
    // A message this delivery alone holds has no other delivery to share a
    // template with (a retained message, or one with other subscribers
    // still to serve, is held elsewhere too, and nothing can take a new
    // hold on it but through this one): encoding it straight into `out`
    // saves the template's allocation and a copy of the payload. Devices
    // and point-to-point messages, one subscriber each, are nearly all
    // like this.
    let unshared = Arc::strong_count(message) == 1;
    if per_subscriber || !expiry_untouched || unshared {
        return encode_fresh(message, shape, now, out);
    }
    let encoded = message.encoded.get_or_encode(v5, shape.qos, || {
        let mut buf = BytesMut::new();
        let packet = Packet::Publish(publish_packet(message, shape.qos, false, false, 1, now));
        encode_packet(&packet, shape.version, &mut buf);
        buf.freeze()
    });
    encoded.append_to(out, shape.retain, shape.dup, shape.packet_id)
}

fn encode_fresh(
    message: &Message,
    shape: &PublishShape<'_>,
    now: Instant,
    out: &mut BytesMut,
) -> usize {
    let mut publish =
        publish_packet(message, shape.qos, shape.retain, shape.dup, shape.packet_id, now);
    // Properties are set only when there is something to set: writing
    // through them allocates their box, even to write "none".
    if shape.version.is_v5() {
        if !shape.subscription_ids.is_empty() {
            publish.properties.subscription_identifiers = shape.subscription_ids.to_vec();
        }
        if let Some((alias, send_topic)) = shape.topic_alias {
            publish.properties.topic_alias = Some(alias);
            if !send_topic {
                publish.topic = Default::default();
            }
        }
    }
    let start = out.len();
    encode_packet(&Packet::Publish(publish), shape.version, out);
    out.len() - start
}

fn publish_packet(
    message: &Message,
    qos: QoS,
    retain: bool,
    dup: bool,
    packet_id: u16,
    now: Instant,
) -> Publish {
    let mut properties = message.properties.clone();
    if let Some(remaining) = message.remaining_expiry_secs(now) {
        properties.message_expiry_interval = Some(remaining);
    }
    Publish {
        dup,
        qos,
        retain,
        topic: message.topic.clone(),
        packet_id: if qos == QoS::AtMostOnce { 0 } else { packet_id },
        properties,
        payload: message.payload.clone(),
    }
}

fn encode_packet(packet: &Packet, version: ProtocolVersion, out: &mut BytesMut) {
    // A message we accepted was at most our maximum packet size, so it can
    // always be re-encoded; a failure here is a codec bug, not bad input.
    if let Err(error) = packet.encode(version, out) {
        tracing::error!(%error, "failed to encode an outgoing PUBLISH");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_mqtt::{ByteStr, Properties};

    fn message() -> Message {
        let mut properties = Properties::default();
        properties.content_type = Some(ByteStr::from("text/plain"));
        properties.user_properties.push((ByteStr::from("k"), ByteStr::from("v")));
        Message::new(
            ByteStr::from("devices/7/telemetry"),
            Bytes::from(vec![0x5A; 300]),
            QoS::ExactlyOnce,
            false,
            properties,
            1,
        )
    }

    #[test]
    fn a_message_held_once_encodes_as_its_shared_template_would() {
        let now = Instant::now();
        for version in [ProtocolVersion::V31, ProtocolVersion::V311, ProtocolVersion::V5] {
            for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
                for (retain, dup) in [(false, false), (true, false), (false, true), (true, true)] {
                    // DUP is never set on QoS 0 (§3.3.1.1): only stored
                    // deliveries are resent, and QoS 0 ones are never stored.
                    if dup && qos == QoS::AtMostOnce {
                        continue;
                    }
                    let shape = PublishShape {
                        version,
                        qos,
                        retain,
                        dup,
                        packet_id: 0x1234,
                        subscription_ids: &[],
                        topic_alias: None,
                    };
                    let unshared = Arc::new(message());
                    let mut alone = BytesMut::new();
                    encode_publish(&unshared, &shape, now, &mut alone);
                    assert!(!unshared.encoded.is_encoded(version.is_v5(), qos), "no template made");

                    let shared = Arc::new(message());
                    let _other_subscriber = Arc::clone(&shared);
                    let mut from_template = BytesMut::new();
                    encode_publish(&shared, &shape, now, &mut from_template);
                    assert!(shared.encoded.is_encoded(version.is_v5(), qos), "template made");

                    assert!(!alone.is_empty());
                    assert_eq!(
                        alone, from_template,
                        "{version:?} {qos:?} retain {retain} dup {dup}"
                    );
                }
            }
        }
    }
}
