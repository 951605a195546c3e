//! The records of the broker's durable state: one record per change, so
//! that replaying them in log order (`ledger`) rebuilds every persistent
//! session, retained message and QoS exchange.
//!
//! A record is a kind byte and its fields. Integers are LEB128 varints,
//! strings and byte strings a varint length and the bytes. A message is
//! stored as an MQTT 5 PUBLISH packet: the codec is ours and fuzzed, and
//! 5.0 carries every property a message can have. Session ids are the
//! broker's own (`Session::id`), which recovery keeps, so a record names a
//! session in a few bytes however long its client id.

use crate::routing::{EndpointTarget, LOWEST_PRIORITY};
use bytes::{BufMut, Bytes, BytesMut};
#[cfg(test)]
use ferry_mqtt::ByteStr;
use ferry_mqtt::{DecodeError, Packet, ProtocolVersion, Publish, QoS, SubscriptionOptions};
use smallvec::SmallVec;
use std::sync::Arc;

/// A change to the durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A session with an expiry interval was created, or resumed with a new
    /// interval.
    SessionOpened {
        session: u64,
        client_id: String,
        expiry_secs: u32,
    },
    /// It expired, was replaced by a clean start, or lost its expiry.
    SessionEnded {
        session: u64,
    },
    /// A connection attached: the expiry clock and any delayed will stop.
    Connected {
        session: u64,
    },
    /// The connection went away at this wall-clock time (Unix ms): the
    /// expiry and will-delay clocks run from here, across restarts.
    Disconnected {
        session: u64,
        at_ms: u64,
    },
    Subscribed {
        session: u64,
        subscriptions: Vec<StoredSubscription>,
    },
    Unsubscribed {
        session: u64,
        filters: Vec<String>,
    },
    /// A message to store: retained, and/or queued for persistent sessions.
    Published(Box<Published>),
    /// The deliveries of the messages at these offsets (increasing) to
    /// `session` are over: acknowledged, expired, or dropped by a queue
    /// bound. A connection records the acknowledgements of one read at once.
    Delivered {
        session: u64,
        offsets: Vec<u64>,
    },
    /// The session sent PUBREC for it: from now on only PUBREL is resent,
    /// with this packet id.
    Released {
        session: u64,
        offset: u64,
        packet_id: u16,
    },
    /// A QoS 2 packet id the session published and has not released. In
    /// the log it is part of `Published`; it stands alone in snapshots and
    /// before the PUBREC of a retransmitted PUBLISH (which must not be
    /// sent before the original is stored).
    InboundReceived {
        session: u64,
        packet_id: u16,
    },
    /// The session sent PUBREL: the packet id may be used again.
    InboundReleased {
        session: u64,
        packet_id: u16,
    },
    /// A will waits out its delay interval.
    WillPending {
        session: u64,
        delay_secs: u32,
        message: StoredMessage,
    },
    /// The pending will was published or cancelled.
    WillDone {
        session: u64,
    },
    /// An endpoint is done with the messages at these offsets (increasing):
    /// sent and acknowledged, expired or dropped.
    Forwarded {
        endpoint: String,
        offsets: Vec<u64>,
        /// Their records' size in the log, off the endpoint's disk cap.
        bytes: u64,
    },
    /// The endpoint still has the messages at these offsets, in increasing
    /// order, to send at `priority` (snapshots only).
    EndpointQueued {
        endpoint: String,
        priority: u8,
        offsets: Vec<u64>,
        /// Log bytes to add to the endpoint's count.
        bytes: u64,
    },
    /// Changes nothing: appended so that an answer waits for everything
    /// appended before it (the log answers in order). A batch envelope's
    /// acknowledgement waits so for the records of its messages.
    Barrier,
    /// The session still has the messages at these offsets, in increasing
    /// order, to deliver (snapshots only: the messages stay in the log).
    /// Stored as the first offset and the distances between them, a
    /// couple of bytes each.
    Queued {
        session: u64,
        offsets: Vec<u64>,
    },
}

/// A record encoded for the log: `head` then `tail` are its bytes. The
/// head is a `Vec`: a `Bytes` made from one with room to spare would cost
/// a second allocation, and the log writer's thread, which frees it, was
/// paying for that one too.
pub struct RecordParts {
    pub head: Vec<u8>,
    pub tail: Bytes,
}

/// A message and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub message: StoredMessage,
    /// The publisher's QoS 2 packet id, stored with the message so that
    /// after a crash a retransmission is recognised, or the message is not
    /// there and the retransmission is new: never half of it.
    pub inbound: Option<(u64, u16)>,
    /// The session and offset of a delivery this message takes over: a
    /// shared subscription's member left before acknowledging it and it
    /// went to another. In the same record, so that after a crash it is
    /// with exactly one of them.
    pub moved_from: Option<(u64, u64)>,
    /// The persistent sessions it is queued for.
    /// Inline when there is one: the record is freed on the log writer's
    /// thread, and every allocation freed there costs its owner too.
    pub targets: SmallVec<[Target; 1]>,
    /// The endpoints routes send it to (`routing.rs`).
    pub endpoints: Vec<EndpointTarget>,
    /// The client id of the connection that published it, kept for
    /// endpoints (`{clientid}` in a template) when it has endpoints.
    pub publisher: Option<Arc<str>>,
}

/// One persistent session a message is delivered to, as `Delivery` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub session: u64,
    pub qos: QoS,
    pub retain: bool,
    /// Chosen when the record is made, so a delivery resent after a restart
    /// carries the id the client may already hold (QoS 2 exactly once).
    pub packet_id: u16,
    pub subscription_ids: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubscription {
    pub filter: String,
    pub options: SubscriptionOptions,
    pub identifier: Option<u32>,
}

/// A message as stored: its fields, when it arrived (Unix ms, so that
/// expiry intervals keep running across a restart), and the session that
/// published it (for No Local).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub publish: Publish,
    pub received_at_ms: u64,
    pub origin: u64,
}

impl Published {
    /// Lets go of the message's topic, properties and payload unless it is
    /// retained, the only case the ledger keeps a message: the record goes
    /// on to the log writer's thread, and dropping them there would touch
    /// reference counts the connections' threads keep using.
    pub fn forget_unretained_message(&mut self) {
        let publish = &mut self.message.publish;
        if !publish.retain {
            publish.topic = Default::default();
            publish.properties = Default::default();
            publish.payload = Bytes::new();
        }
    }
}

impl StoredMessage {
    /// The packet id a stored PUBLISH carries: none at QoS 0, a
    /// placeholder otherwise (each target has its own).
    pub fn packet_id(qos: QoS) -> u16 {
        if qos == QoS::AtMostOnce {
            0
        } else {
            1
        }
    }
}

/// A record that cannot be decoded: the log's CRC passed, so this is a
/// bug or a file from a newer Ferry, and recovery stops rather than guess.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("record ends in the middle of {0}")]
    Truncated(&'static str),
    #[error("unknown record kind {0}")]
    UnknownKind(u8),
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("stored message: {0}")]
    Message(#[from] DecodeError),
}

mod kind {
    pub const SESSION_OPENED: u8 = 1;
    pub const SESSION_ENDED: u8 = 2;
    pub const CONNECTED: u8 = 3;
    pub const DISCONNECTED: u8 = 4;
    pub const SUBSCRIBED: u8 = 5;
    pub const UNSUBSCRIBED: u8 = 6;
    pub const PUBLISHED: u8 = 7;
    pub const DELIVERED: u8 = 8;
    pub const RELEASED: u8 = 9;
    pub const INBOUND_RECEIVED: u8 = 10;
    pub const INBOUND_RELEASED: u8 = 11;
    pub const WILL_PENDING: u8 = 12;
    pub const WILL_DONE: u8 = 13;
    pub const QUEUED: u8 = 14;
    /// `Published` with endpoints: a kind of its own, so that records
    /// written before routes existed still read, and a message without
    /// endpoints pays nothing for them.
    pub const PUBLISHED_ROUTED: u8 = 15;
    pub const FORWARDED: u8 = 16;
    pub const ENDPOINT_QUEUED: u8 = 17;
    pub const BARRIER: u8 = 18;
    /// `PUBLISHED_ROUTED` with the publisher's client id after the
    /// endpoints; a kind of its own so that the records written before it
    /// still read (without a client id).
    pub const PUBLISHED_ROUTED_FROM: u8 = 19;
}

impl Record {
    /// `Delivered`, with the offsets put in the order it is stored in.
    pub fn delivered(session: u64, mut offsets: Vec<u64>) -> Record {
        offsets.sort_unstable();
        offsets.dedup();
        Record::Delivered { session, offsets }
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let RecordParts { mut head, tail } = self.encode_parts();
        head.extend_from_slice(&tail);
        head
    }

    /// The record's bytes in two parts to be stored one after the other:
    /// what is encoded here, and the payload of the message it carries
    /// (empty if none), which is shared rather than copied. A message's
    /// PUBLISH is last in every record that has one, so its payload ends
    /// the record.
    pub fn encode_parts(&self) -> RecordParts {
        let capacity = match self {
            Record::Published(published) => {
                // The targets and the message's fields; properties beyond
                // this cost one more allocation.
                128 + 16 * published.targets.len() + published.message.publish.topic.len()
            }
            _ => 32,
        };
        let mut out = BytesMut::with_capacity(capacity);
        let mut tail = Bytes::new();
        match self {
            Record::SessionOpened { session, client_id, expiry_secs } => {
                out.put_u8(kind::SESSION_OPENED);
                put_varint(&mut out, *session);
                put_bytes(&mut out, client_id.as_bytes());
                put_varint(&mut out, u64::from(*expiry_secs));
            }
            Record::SessionEnded { session } => {
                put_session(&mut out, kind::SESSION_ENDED, *session)
            }
            Record::Connected { session } => put_session(&mut out, kind::CONNECTED, *session),
            Record::Disconnected { session, at_ms } => {
                put_session(&mut out, kind::DISCONNECTED, *session);
                put_varint(&mut out, *at_ms);
            }
            Record::Subscribed { session, subscriptions } => {
                put_session(&mut out, kind::SUBSCRIBED, *session);
                put_varint(&mut out, subscriptions.len() as u64);
                for subscription in subscriptions {
                    put_bytes(&mut out, subscription.filter.as_bytes());
                    out.put_u8(subscription.options.to_byte(ProtocolVersion::V5));
                    put_varint(&mut out, u64::from(subscription.identifier.unwrap_or(0)));
                }
            }
            Record::Unsubscribed { session, filters } => {
                put_session(&mut out, kind::UNSUBSCRIBED, *session);
                put_varint(&mut out, filters.len() as u64);
                for filter in filters {
                    put_bytes(&mut out, filter.as_bytes());
                }
            }
            Record::Published(published) => {
                let routed = !published.endpoints.is_empty();
                let publisher = published.publisher.as_deref().filter(|_| routed);
                out.put_u8(match (routed, publisher) {
                    (false, _) => kind::PUBLISHED,
                    (true, None) => kind::PUBLISHED_ROUTED,
                    (true, Some(_)) => kind::PUBLISHED_ROUTED_FROM,
                });
                let (session, packet_id) = published.inbound.unwrap_or((0, 0));
                put_varint(&mut out, session);
                put_varint(&mut out, u64::from(packet_id));
                let (session, offset) = published.moved_from.unwrap_or((0, 0));
                put_varint(&mut out, session);
                put_varint(&mut out, offset);
                put_varint(&mut out, published.targets.len() as u64);
                for target in &published.targets {
                    put_varint(&mut out, target.session);
                    out.put_u8(target.qos as u8 | u8::from(target.retain) << 2);
                    put_varint(&mut out, u64::from(target.packet_id));
                    put_varint(&mut out, target.subscription_ids.len() as u64);
                    for id in &target.subscription_ids {
                        put_varint(&mut out, u64::from(*id));
                    }
                }
                if routed {
                    put_varint(&mut out, published.endpoints.len() as u64);
                    for target in &published.endpoints {
                        put_bytes(&mut out, target.endpoint.as_bytes());
                        out.put_u8(target.priority);
                        put_varint(&mut out, target.expires_at_ms);
                    }
                }
                if let Some(publisher) = publisher {
                    put_bytes(&mut out, publisher.as_bytes());
                }
                tail = put_message(&mut out, &published.message);
            }
            Record::Delivered { session, offsets } => {
                put_session(&mut out, kind::DELIVERED, *session);
                put_offsets(&mut out, offsets);
            }
            Record::Released { session, offset, packet_id } => {
                put_session(&mut out, kind::RELEASED, *session);
                put_varint(&mut out, *offset);
                put_varint(&mut out, u64::from(*packet_id));
            }
            Record::InboundReceived { session, packet_id } => {
                put_session(&mut out, kind::INBOUND_RECEIVED, *session);
                put_varint(&mut out, u64::from(*packet_id));
            }
            Record::InboundReleased { session, packet_id } => {
                put_session(&mut out, kind::INBOUND_RELEASED, *session);
                put_varint(&mut out, u64::from(*packet_id));
            }
            Record::WillPending { session, delay_secs, message } => {
                put_session(&mut out, kind::WILL_PENDING, *session);
                put_varint(&mut out, u64::from(*delay_secs));
                tail = put_message(&mut out, message);
            }
            Record::WillDone { session } => put_session(&mut out, kind::WILL_DONE, *session),
            Record::Queued { session, offsets } => {
                put_session(&mut out, kind::QUEUED, *session);
                put_offsets(&mut out, offsets);
            }
            Record::Forwarded { endpoint, offsets, bytes } => {
                out.put_u8(kind::FORWARDED);
                put_bytes(&mut out, endpoint.as_bytes());
                put_offsets(&mut out, offsets);
                put_varint(&mut out, *bytes);
            }
            Record::Barrier => out.put_u8(kind::BARRIER),
            Record::EndpointQueued { endpoint, priority, offsets, bytes } => {
                out.put_u8(kind::ENDPOINT_QUEUED);
                put_bytes(&mut out, endpoint.as_bytes());
                out.put_u8(*priority);
                put_offsets(&mut out, offsets);
                put_varint(&mut out, *bytes);
            }
        }
        RecordParts { head: out.into(), tail }
    }

    pub fn decode(bytes: &[u8]) -> Result<Record, RecordError> {
        let mut input = Input { bytes };
        let record = match input.u8("kind")? {
            kind::SESSION_OPENED => Record::SessionOpened {
                session: input.varint("session")?,
                client_id: input.string("client id")?,
                expiry_secs: input.u32("expiry")?,
            },
            kind::SESSION_ENDED => Record::SessionEnded { session: input.varint("session")? },
            kind::CONNECTED => Record::Connected { session: input.varint("session")? },
            kind::DISCONNECTED => Record::Disconnected {
                session: input.varint("session")?,
                at_ms: input.varint("time")?,
            },
            kind::SUBSCRIBED => {
                let session = input.varint("session")?;
                let count = input.count("subscriptions")?;
                let mut subscriptions = Vec::with_capacity(count);
                for _ in 0..count {
                    let filter = input.string("filter")?;
                    let byte = input.u8("subscription options")?;
                    let options = SubscriptionOptions::decode(byte, &filter, ProtocolVersion::V5)?;
                    let identifier =
                        Some(input.u32("subscription identifier")?).filter(|&id| id != 0);
                    subscriptions.push(StoredSubscription { filter, options, identifier });
                }
                Record::Subscribed { session, subscriptions }
            }
            kind::UNSUBSCRIBED => {
                let session = input.varint("session")?;
                let count = input.count("filters")?;
                let filters =
                    (0..count).map(|_| input.string("filter")).collect::<Result<_, _>>()?;
                Record::Unsubscribed { session, filters }
            }
            found @ (kind::PUBLISHED | kind::PUBLISHED_ROUTED | kind::PUBLISHED_ROUTED_FROM) => {
                let inbound_session = input.varint("inbound session")?;
                let inbound_id = input.u16("inbound packet id")?;
                let inbound = (inbound_id != 0).then_some((inbound_session, inbound_id));
                let moved_session = input.varint("moved from session")?;
                let moved_offset = input.varint("moved from offset")?;
                let moved_from = (moved_offset != 0).then_some((moved_session, moved_offset));
                let count = input.count("targets")?;
                let mut targets = SmallVec::with_capacity(count);
                for _ in 0..count {
                    let session = input.varint("target session")?;
                    let flags = input.u8("target flags")?;
                    let qos = QoS::from_u8(flags & 0b11).ok_or(RecordError::Invalid {
                        field: "target QoS",
                        reason: format!("{}", flags & 0b11),
                    })?;
                    let packet_id = input.u16("target packet id")?;
                    let ids = input.count("subscription identifiers")?;
                    let subscription_ids = (0..ids)
                        .map(|_| input.u32("subscription identifier"))
                        .collect::<Result<_, _>>()?;
                    targets.push(Target {
                        session,
                        qos,
                        retain: flags & 0b100 != 0,
                        packet_id,
                        subscription_ids,
                    });
                }
                let mut endpoints = Vec::new();
                if found != kind::PUBLISHED {
                    let count = input.count("endpoints")?;
                    for _ in 0..count {
                        let endpoint = input.string("endpoint")?.into();
                        let priority = input.priority()?;
                        let expires_at_ms = input.varint("endpoint expiry")?;
                        endpoints.push(EndpointTarget { endpoint, priority, expires_at_ms });
                    }
                }
                let publisher = match found {
                    kind::PUBLISHED_ROUTED_FROM => Some(input.string("publisher")?.into()),
                    _ => None,
                };
                let message = input.message()?;
                Record::Published(Box::new(Published {
                    message,
                    inbound,
                    moved_from,
                    targets,
                    endpoints,
                    publisher,
                }))
            }
            kind::DELIVERED => Record::Delivered {
                session: input.varint("session")?,
                offsets: input.offsets("delivered offset")?,
            },
            kind::RELEASED => Record::Released {
                session: input.varint("session")?,
                offset: input.varint("offset")?,
                packet_id: input.u16("packet id")?,
            },
            kind::INBOUND_RECEIVED => Record::InboundReceived {
                session: input.varint("session")?,
                packet_id: input.u16("packet id")?,
            },
            kind::INBOUND_RELEASED => Record::InboundReleased {
                session: input.varint("session")?,
                packet_id: input.u16("packet id")?,
            },
            kind::WILL_PENDING => Record::WillPending {
                session: input.varint("session")?,
                delay_secs: input.u32("will delay")?,
                message: input.message()?,
            },
            kind::WILL_DONE => Record::WillDone { session: input.varint("session")? },
            kind::QUEUED => Record::Queued {
                session: input.varint("session")?,
                offsets: input.offsets("queued offset")?,
            },
            kind::FORWARDED => Record::Forwarded {
                endpoint: input.string("endpoint")?,
                offsets: input.offsets("forwarded offset")?,
                bytes: input.varint("forwarded bytes")?,
            },
            kind::BARRIER => Record::Barrier,
            kind::ENDPOINT_QUEUED => Record::EndpointQueued {
                endpoint: input.string("endpoint")?,
                priority: input.priority()?,
                offsets: input.offsets("queued offset")?,
                bytes: input.varint("queued bytes")?,
            },
            other => return Err(RecordError::UnknownKind(other)),
        };
        if !input.bytes.is_empty() {
            return Err(RecordError::Invalid {
                field: "record",
                reason: format!("{} bytes after the last field", input.bytes.len()),
            });
        }
        Ok(record)
    }
}

fn put_session(out: &mut BytesMut, kind: u8, session: u64) {
    out.put_u8(kind);
    put_varint(out, session);
}

fn put_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8(value as u8 | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Increasing offsets as their count, the first, and the distances
/// between them: a couple of bytes each.
fn put_offsets(out: &mut BytesMut, offsets: &[u64]) {
    put_varint(out, offsets.len() as u64);
    let mut previous = 0;
    for &offset in offsets {
        debug_assert!(offset > previous, "offsets must increase");
        put_varint(out, offset - previous);
        previous = offset;
    }
}

fn put_bytes(out: &mut BytesMut, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The message as a 5.0 PUBLISH. Its packet id means nothing here (each
/// target has its own) but QoS > 0 needs one on the wire.
/// Puts the message up to its PUBLISH's payload, and returns the payload,
/// which must follow.
fn put_message(out: &mut BytesMut, message: &StoredMessage) -> Bytes {
    put_varint(out, message.received_at_ms);
    put_varint(out, message.origin);
    let publish = &message.publish;
    let result = if publish.dup || publish.packet_id != StoredMessage::packet_id(publish.qos) {
        Publish { dup: false, packet_id: StoredMessage::packet_id(publish.qos), ..publish.clone() }
            .encode_head(ProtocolVersion::V5, out)
    } else {
        // As it will be stored: no copy to make.
        publish.encode_head(ProtocolVersion::V5, out)
    };
    if let Err(error) = result {
        // The broker received and decoded this message, so it encodes.
        unreachable!("a received message cannot be encoded: {error}");
    }
    publish.payload.clone()
}

struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    fn u8(&mut self, field: &'static str) -> Result<u8, RecordError> {
        let (&first, rest) = self.bytes.split_first().ok_or(RecordError::Truncated(field))?;
        self.bytes = rest;
        Ok(first)
    }

    fn varint(&mut self, field: &'static str) -> Result<u64, RecordError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(field)?;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::Invalid { field, reason: "varint longer than 64 bits".into() })
    }

    fn narrow<T: TryFrom<u64>>(&mut self, field: &'static str) -> Result<T, RecordError> {
        let value = self.varint(field)?;
        T::try_from(value)
            .map_err(|_| RecordError::Invalid { field, reason: format!("{value} out of range") })
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, RecordError> {
        self.narrow(field)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, RecordError> {
        self.narrow(field)
    }

    /// A count of items that each take at least a byte: more than the bytes
    /// left is a damaged record, not a reason to allocate.
    fn priority(&mut self) -> Result<u8, RecordError> {
        let priority = self.u8("endpoint priority")?;
        if priority > LOWEST_PRIORITY {
            return Err(RecordError::Invalid {
                field: "endpoint priority",
                reason: format!("{priority} (at most {LOWEST_PRIORITY})"),
            });
        }
        Ok(priority)
    }

    fn count(&mut self, field: &'static str) -> Result<usize, RecordError> {
        let count: usize = self.narrow(field)?;
        if count > self.bytes.len() {
            return Err(RecordError::Truncated(field));
        }
        Ok(count)
    }

    fn offsets(&mut self, field: &'static str) -> Result<Vec<u64>, RecordError> {
        let count = self.count(field)?;
        let mut offsets = Vec::with_capacity(count);
        let mut previous = 0u64;
        for _ in 0..count {
            let distance = self.varint(field)?;
            match previous.checked_add(distance) {
                Some(offset) if distance > 0 => previous = offset,
                _ => {
                    return Err(RecordError::Invalid {
                        field,
                        reason: format!("{distance} after {previous} is not increasing"),
                    })
                }
            }
            offsets.push(previous);
        }
        Ok(offsets)
    }

    fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], RecordError> {
        let len = self.count(field)?;
        let (bytes, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(bytes)
    }

    fn string(&mut self, field: &'static str) -> Result<String, RecordError> {
        let bytes = self.bytes(field)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| RecordError::Invalid { field, reason: "not UTF-8".into() })
    }

    fn message(&mut self) -> Result<StoredMessage, RecordError> {
        let received_at_ms = self.varint("message time")?;
        let origin = self.varint("message origin")?;
        let mut packet = BytesMut::from(std::mem::take(&mut self.bytes));
        match Packet::decode(&mut packet, ProtocolVersion::V5, u32::MAX)? {
            Some(Packet::Publish(mut publish)) => {
                self.bytes = &[];
                publish.packet_id = 0;
                if !packet.is_empty() {
                    return Err(RecordError::Invalid {
                        field: "message",
                        reason: format!("{} bytes after the PUBLISH", packet.len()),
                    });
                }
                Ok(StoredMessage { publish, received_at_ms, origin })
            }
            Some(other) => Err(RecordError::Invalid {
                field: "message",
                reason: format!("a {:?} packet", other.packet_type()),
            }),
            None => Err(RecordError::Truncated("message")),
        }
    }
}

/// A message as stored, for tests.
#[cfg(test)]
pub(crate) fn message(
    topic: &str,
    payload: &'static [u8],
    qos: QoS,
    retain: bool,
) -> StoredMessage {
    StoredMessage {
        publish: Publish {
            dup: false,
            qos,
            retain,
            topic: ByteStr::from(topic),
            packet_id: 0,
            properties: Default::default(),
            payload: bytes::Bytes::from_static(payload),
        },
        received_at_ms: 1_700_000_000_000,
        origin: 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_mqtt::{PropertyValues, RetainHandling};

    fn every_kind() -> Vec<Record> {
        let mut with_properties = message("a/b", b"hello", QoS::ExactlyOnce, true);
        with_properties.publish.properties = PropertyValues {
            message_expiry_interval: Some(60),
            content_type: Some(ByteStr::from("text/plain")),
            user_properties: vec![(ByteStr::from("k"), ByteStr::from("v"))],
            ..PropertyValues::default()
        }
        .into();
        vec![
            Record::SessionOpened {
                session: 1,
                client_id: "sensor-1".into(),
                expiry_secs: u32::MAX,
            },
            Record::SessionEnded { session: 300 },
            Record::Connected { session: 1 },
            Record::Disconnected { session: 1, at_ms: 1_700_000_000_123 },
            Record::Subscribed {
                session: 1,
                subscriptions: vec![
                    StoredSubscription {
                        filter: "a/#".into(),
                        options: SubscriptionOptions {
                            qos: QoS::ExactlyOnce,
                            no_local: true,
                            retain_as_published: true,
                            retain_handling: RetainHandling::DoNotSend,
                        },
                        identifier: Some(268_435_455),
                    },
                    StoredSubscription {
                        filter: "$share/g/x".into(),
                        options: SubscriptionOptions::default(),
                        identifier: None,
                    },
                ],
            },
            Record::Unsubscribed { session: 1, filters: vec!["a/#".into(), "b".into()] },
            Record::Published(Box::new(Published {
                message: with_properties,
                inbound: Some((9, 65535)),
                moved_from: Some((4, 1 << 33)),
                targets: smallvec::smallvec![
                    Target {
                        session: 1,
                        qos: QoS::AtLeastOnce,
                        retain: false,
                        packet_id: 1,
                        subscription_ids: vec![],
                    },
                    Target {
                        session: u64::MAX,
                        qos: QoS::ExactlyOnce,
                        retain: true,
                        packet_id: 65535,
                        subscription_ids: vec![1, 2, 300_000],
                    },
                ],
                endpoints: Vec::new(),
                publisher: None,
            })),
            Record::Published(Box::new(Published {
                message: message("t", b"", QoS::AtMostOnce, true),
                inbound: None,
                moved_from: None,
                targets: SmallVec::new(),
                endpoints: Vec::new(),
                publisher: None,
            })),
            Record::Published(Box::new(Published {
                message: message("routed", b"r", QoS::AtMostOnce, false),
                inbound: None,
                moved_from: None,
                targets: SmallVec::new(),
                endpoints: vec![
                    EndpointTarget { endpoint: "cloud".into(), priority: 0, expires_at_ms: 0 },
                    EndpointTarget {
                        endpoint: "archive".into(),
                        priority: LOWEST_PRIORITY,
                        expires_at_ms: 1_764_000_000_000,
                    },
                ],
                publisher: None,
            })),
            Record::Published(Box::new(Published {
                message: message("telemetry/7", b"21.5", QoS::AtLeastOnce, false),
                inbound: None,
                moved_from: None,
                targets: SmallVec::new(),
                endpoints: vec![EndpointTarget {
                    endpoint: "cloud".into(),
                    priority: 3,
                    expires_at_ms: 0,
                }],
                publisher: Some("device-7".into()),
            })),
            Record::Forwarded {
                endpoint: "cloud".into(),
                offsets: vec![24, 1 << 40],
                bytes: 2_100,
            },
            Record::Barrier,
            Record::EndpointQueued {
                endpoint: "archive".into(),
                priority: 9,
                offsets: vec![7, 9],
                bytes: 1 << 33,
            },
            Record::Delivered { session: 1, offsets: vec![24, 4_000, 1 << 40] },
            Record::Released { session: 1, offset: u64::MAX, packet_id: 65535 },
            Record::InboundReceived { session: 2, packet_id: 7 },
            Record::InboundReleased { session: 2, packet_id: 7 },
            Record::WillPending {
                session: 3,
                delay_secs: 30,
                message: message("will", b"gone", QoS::AtLeastOnce, false),
            },
            Record::WillDone { session: 3 },
            Record::Queued { session: 4, offsets: vec![1 << 40, (1 << 40) + 1_060, 1 << 41] },
        ]
    }

    #[test]
    fn every_record_kind_round_trips() {
        for record in every_kind() {
            let encoded = record.encode();
            assert_eq!(Record::decode(&encoded).unwrap(), record, "{record:?}");
            let parts = record.encode_parts();
            assert_eq!([&parts.head[..], &parts.tail[..]].concat(), encoded, "{record:?}");
        }
    }

    #[test]
    fn damaged_records_are_errors_never_panics() {
        for record in every_kind() {
            let encoded = record.encode();
            for len in 0..encoded.len() {
                assert!(Record::decode(&encoded[..len]).is_err(), "{record:?} cut at {len}");
            }
            let mut longer = encoded.to_vec();
            longer.push(0);
            assert!(Record::decode(&longer).is_err(), "{record:?} with a byte too many");
        }
        assert!(matches!(Record::decode(&[99]), Err(RecordError::UnknownKind(99))));
        let beyond_lowest = [kind::ENDPOINT_QUEUED, 1, b'e', LOWEST_PRIORITY + 1, 0, 0];
        assert!(Record::decode(&beyond_lowest).is_err());
        // A count far beyond the bytes that follow must not allocate it.
        assert!(Record::decode(&[kind::UNSUBSCRIBED, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]).is_err());
    }
}
