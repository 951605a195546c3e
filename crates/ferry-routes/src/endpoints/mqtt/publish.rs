//! A routed message as the PUBLISH that carries it upstream: its topic
//! rewritten, its properties carried as Mosquitto's and edgeHub's bridges
//! carry them, and checked against what the remote accepts.

use super::connection::RemoteLimits;
use super::topic_map::OutboundRewrite;
use bytes::BytesMut;
use ferry_broker::endpoint::RoutedMessage;
use ferry_broker::envelope;
use ferry_mqtt::{ByteStr, Properties, ProtocolVersion, Publish, QoS};
use std::sync::Arc;
use std::time::Instant;

/// Why a message cannot go to the remote at all: counted under this
/// reason and dropped, never retried, since sending it again would fail
/// the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsendable {
    /// Its own MQTT 5 Message Expiry Interval ran out while it was queued.
    Expired,
    /// Bigger than the remote's Maximum Packet Size, or than MQTT allows.
    TooLarge,
    /// The rewrite left no topic (it was exactly `strip_prefix`).
    NoTopic,
}

impl Unsendable {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Unsendable::Expired => "ttl",
            Unsendable::TooLarge => "too_large",
            Unsendable::NoTopic => "invalid_topic",
        }
    }
}

/// The most an envelope's payload holds: as a batch's default
/// `max_bytes`, so one batch usually goes as one envelope.
const ENVELOPE_BYTES_MAX: usize = 256 << 10;

/// Room for an envelope's fixed header, packet id and properties.
const ENVELOPE_OVERHEAD: usize = 64;

/// How messages are sent on one connection.
#[derive(Debug, Clone)]
pub(crate) struct Outbound {
    pub version: ProtocolVersion,
    pub rewrite: Arc<OutboundRewrite>,
    /// The endpoint's QoS, lowered to the remote's Maximum QoS.
    pub qos: QoS,
    pub limits: RemoteLimits,
}

impl Outbound {
    /// Appends the PUBLISH of `routed` to `wire`. The message's own QoS
    /// does not matter: it was stored to be forwarded, and the endpoint's
    /// QoS is what the uplink promises.
    pub(crate) fn encode(
        &self,
        routed: &RoutedMessage,
        packet_id: u16,
        dup: bool,
        now: Instant,
        wire: &mut BytesMut,
    ) -> Result<(), Unsendable> {
        let mut publish = self.publish(routed, now)?;
        publish.dup = dup && self.qos != QoS::AtMostOnce;
        publish.packet_id = if self.qos == QoS::AtMostOnce { 0 } else { packet_id };
        self.put(&publish, wire)
    }

    /// Appends one batch envelope (`ferry_broker::envelope`) to `wire`,
    /// packed with the messages at the front of `messages` while it stays
    /// under `ENVELOPE_BYTES_MAX` and the remote's maximum packet size, and
    /// says how many went in. A message that cannot go at all ends the
    /// envelope; when it is the first, nothing is written and it is
    /// returned as `Err`, for the caller to drop.
    pub(crate) fn encode_envelope(
        &self,
        topic: &ByteStr,
        messages: &[RoutedMessage],
        packet_id: u16,
        dup: bool,
        now: Instant,
        wire: &mut BytesMut,
    ) -> Result<usize, Unsendable> {
        let limit = ENVELOPE_BYTES_MAX
            .min(self.limits.maximum_packet_size as usize)
            .saturating_sub(ENVELOPE_OVERHEAD + topic.len());
        let mut payload = BytesMut::new();
        let mut packed = 0;
        for routed in messages {
            let inner = match self.publish(routed, now) {
                Ok(inner) => inner,
                Err(unsendable) if packed == 0 => return Err(unsendable),
                Err(_) => break,
            };
            let before = payload.len();
            if envelope::pack(&inner, &mut payload).is_err() {
                payload.truncate(before);
                if packed == 0 {
                    return Err(Unsendable::TooLarge);
                }
                break;
            }
            if payload.len() > limit && packed > 0 {
                payload.truncate(before);
                break;
            }
            packed += 1;
        }
        let mut properties = Properties::default();
        properties.content_type = Some(ByteStr::from_static(envelope::BATCH_CONTENT_TYPE));
        let publish = Publish {
            dup: dup && self.qos != QoS::AtMostOnce,
            qos: self.qos,
            retain: false,
            topic: topic.clone(),
            packet_id: if self.qos == QoS::AtMostOnce { 0 } else { packet_id },
            properties,
            payload: payload.freeze(),
        };
        self.put(&publish, wire)?;
        Ok(packed)
    }

    /// The PUBLISH that carries `routed` (QoS, DUP and packet id to be
    /// set by the caller).
    fn publish(&self, routed: &RoutedMessage, now: Instant) -> Result<Publish, Unsendable> {
        let message = &routed.message;
        if message.is_expired(now) {
            return Err(Unsendable::Expired);
        }
        let topic = self.rewrite.apply(&message.topic).ok_or(Unsendable::NoTopic)?;
        Ok(Publish {
            dup: false,
            qos: self.qos,
            // Kept, as bridges do: a retained reading stays the last word
            // upstream too. A remote without retain would disconnect us
            // for it (MQTT-3.3.1-13), so there it is dropped.
            retain: message.retain && self.limits.retain_available,
            topic,
            packet_id: 0,
            properties: self.properties(routed, now),
            payload: message.payload.clone(),
        })
    }

    /// Appends `publish` to `wire` if the remote takes its size.
    fn put(&self, publish: &Publish, wire: &mut BytesMut) -> Result<(), Unsendable> {
        let start = wire.len();
        if publish.encode(self.version, wire).is_err() {
            wire.truncate(start);
            return Err(Unsendable::TooLarge);
        }
        let size = u32::try_from(wire.len() - start).unwrap_or(u32::MAX);
        if size > self.limits.maximum_packet_size {
            wire.truncate(start);
            return Err(Unsendable::TooLarge);
        }
        Ok(())
    }

    /// MQTT 5: the properties that describe the message travel with it
    /// (the broker already took off the per-hop ones, topic alias and
    /// subscription identifiers), with the expiry interval counted down by
    /// the time it spent here (MQTT-3.3.2-6). MQTT 3.1.1 has none.
    fn properties(&self, routed: &RoutedMessage, now: Instant) -> Properties {
        let message = &routed.message;
        if !self.version.is_v5() {
            return Properties::default();
        }
        let mut properties = message.properties.clone();
        if let Some(remaining) = message.remaining_expiry_secs(now) {
            // Only touched when set: writing allocates the properties' box.
            properties.message_expiry_interval = Some(remaining.max(1));
        }
        properties
    }
}
