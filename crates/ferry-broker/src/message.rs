//! An application message as the broker holds it: received once, shared by
//! every subscriber it is delivered to.

use crate::encode_once::EncodeOnce;
use bytes::Bytes;
use ferry_mqtt::{ByteStr, Properties, Publish, QoS};
use std::time::{Duration, Instant};

/// A published message. Wrapped in an `Arc` and shared by the queues of
/// every subscriber, so a fan-out to 10,000 clients costs 10,000 pointers,
/// not 10,000 copies.
#[derive(Debug)]
pub struct Message {
    pub topic: ByteStr,
    pub payload: Bytes,
    pub qos: QoS,
    pub retain: bool,
    /// The publish properties that travel with the message (topic alias and
    /// subscription identifiers are per-hop and stripped on receipt).
    pub properties: Properties,
    /// The session that published it, for No Local. 0 for broker-made messages.
    pub origin_session: u64,
    pub received_at: Instant,
    pub(crate) encoded: EncodeOnce,
}

impl Message {
    pub fn new(
        topic: ByteStr,
        payload: Bytes,
        qos: QoS,
        retain: bool,
        mut properties: Properties,
        origin_session: u64,
    ) -> Message {
        // Writing goes through `DerefMut`, which allocates the properties'
        // box: only touch what is there, or every message would pay for one.
        if properties.topic_alias.is_some() {
            properties.topic_alias = None;
        }
        if !properties.subscription_identifiers.is_empty() {
            properties.subscription_identifiers.clear();
        }
        Message {
            topic,
            payload,
            qos,
            retain,
            properties,
            origin_session,
            received_at: Instant::now(),
            encoded: EncodeOnce::default(),
        }
    }

    pub fn from_publish(publish: Publish, origin_session: u64) -> Message {
        Message::new(
            publish.topic,
            publish.payload,
            publish.qos,
            publish.retain,
            publish.properties,
            origin_session,
        )
    }

    /// The same message with another payload (a signal's view of it for
    /// one reader), encoded afresh.
    pub(crate) fn with_payload(&self, payload: Bytes) -> Message {
        Message {
            topic: self.topic.clone(),
            payload,
            qos: self.qos,
            retain: self.retain,
            properties: self.properties.clone(),
            origin_session: self.origin_session,
            received_at: self.received_at,
            encoded: EncodeOnce::default(),
        }
    }

    /// When the Message Expiry Interval runs out, if it has one.
    pub fn expires_at(&self) -> Option<Instant> {
        self.properties
            .message_expiry_interval
            .map(|secs| self.received_at + Duration::from_secs(u64::from(secs)))
    }

    pub fn is_expired(&self, now: Instant) -> bool {
        self.expires_at().is_some_and(|at| at <= now)
    }

    /// The expiry interval to send onward: what is left of it, in whole
    /// seconds (MQTT 5 §3.3.2.3.3 requires the decremented value).
    pub fn remaining_expiry_secs(&self, now: Instant) -> Option<u32> {
        let interval = self.properties.message_expiry_interval?;
        let elapsed = now.saturating_duration_since(self.received_at).as_secs();
        Some(interval.saturating_sub(u32::try_from(elapsed).unwrap_or(u32::MAX)))
    }
}
