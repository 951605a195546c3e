//! MQTT 5 properties (§2.2.2). One struct serves every packet type; the
//! decoder rejects a property that the packet type does not allow, and a
//! property that appears twice where the spec allows it once.

use crate::{
    packet::PacketType,
    topic, varint,
    wire::{self, Reader},
    ByteStr, DecodeError, EncodeError, ProtocolVersion,
};
use bytes::{BufMut, Bytes, BytesMut};

/// The MQTT 5 properties of a packet: the [`PropertyValues`] behind a box
/// that is only allocated once a property is set. MQTT 3.1.1 packets, and
/// most MQTT 5 ones, carry none.
///
/// Why a box: a packet moves by value from the decoder through the broker
/// to the message it becomes, and with the values inline (about 470 bytes)
/// every move copied them — a fifth of the broker's CPU per QoS 0 message
/// went to memmove. Fields read through `Deref` (an empty set reads as all
/// `None`) and are set through `DerefMut`, which allocates the box — even
/// to write `None` or an empty list, so set a field only when there is
/// something to set.
#[derive(Clone, Default)]
pub struct Properties(Option<Box<PropertyValues>>);

/// The values read when no property is set.
static NONE: PropertyValues = PropertyValues::NONE;

impl std::ops::Deref for Properties {
    type Target = PropertyValues;

    fn deref(&self) -> &PropertyValues {
        self.0.as_deref().unwrap_or(&NONE)
    }
}

impl std::ops::DerefMut for Properties {
    fn deref_mut(&mut self) -> &mut PropertyValues {
        self.0.get_or_insert_with(Box::default)
    }
}

impl Properties {
    /// Drops the reason string and user properties, which a sender may
    /// leave out to keep a packet within the receiver's Maximum Packet
    /// Size (e.g. [MQTT-3.2.2-19], [MQTT-3.14.2-3]).
    pub fn drop_diagnostics(&mut self) {
        if let Some(values) = self.0.as_mut() {
            values.reason_string = None;
            values.user_properties.clear();
        }
    }
}

impl From<PropertyValues> for Properties {
    fn from(values: PropertyValues) -> Properties {
        if values == NONE {
            Properties(None)
        } else {
            Properties(Some(Box::new(values)))
        }
    }
}

impl PartialEq for Properties {
    /// By value: a box of empty values equals no box.
    fn eq(&self, other: &Properties) -> bool {
        **self == **other
    }
}

impl Eq for Properties {}

impl std::fmt::Debug for Properties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// Every MQTT 5 property, each `None`/empty when absent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PropertyValues {
    /// 0x01, PUBLISH and will: 0 = unspecified bytes, 1 = UTF-8.
    pub payload_format_indicator: Option<u8>,
    /// 0x02, PUBLISH and will, seconds.
    pub message_expiry_interval: Option<u32>,
    /// 0x03, PUBLISH and will.
    pub content_type: Option<ByteStr>,
    /// 0x08, PUBLISH and will.
    pub response_topic: Option<ByteStr>,
    /// 0x09, PUBLISH and will.
    pub correlation_data: Option<Bytes>,
    /// 0x0B: at most one in SUBSCRIBE; any number in PUBLISH to a client. 1..=268_435_455.
    pub subscription_identifiers: Vec<u32>,
    /// 0x11, CONNECT, CONNACK, DISCONNECT, seconds.
    pub session_expiry_interval: Option<u32>,
    /// 0x12, CONNACK.
    pub assigned_client_identifier: Option<ByteStr>,
    /// 0x13, CONNACK, seconds.
    pub server_keep_alive: Option<u16>,
    /// 0x15, CONNECT, CONNACK, AUTH.
    pub authentication_method: Option<ByteStr>,
    /// 0x16, CONNECT, CONNACK, AUTH.
    pub authentication_data: Option<Bytes>,
    /// 0x17, CONNECT: 0 or 1.
    pub request_problem_information: Option<u8>,
    /// 0x18, will properties, seconds.
    pub will_delay_interval: Option<u32>,
    /// 0x19, CONNECT: 0 or 1.
    pub request_response_information: Option<u8>,
    /// 0x1A, CONNACK.
    pub response_information: Option<ByteStr>,
    /// 0x1C, CONNACK, DISCONNECT.
    pub server_reference: Option<ByteStr>,
    /// 0x1F, every acknowledgement, DISCONNECT, AUTH.
    pub reason_string: Option<ByteStr>,
    /// 0x21, CONNECT, CONNACK: nonzero.
    pub receive_maximum: Option<u16>,
    /// 0x22, CONNECT, CONNACK.
    pub topic_alias_maximum: Option<u16>,
    /// 0x23, PUBLISH: nonzero.
    pub topic_alias: Option<u16>,
    /// 0x24, CONNACK: 0 or 1.
    pub maximum_qos: Option<u8>,
    /// 0x25, CONNACK: 0 or 1.
    pub retain_available: Option<u8>,
    /// 0x26, every packet with properties; order preserved, repeats allowed.
    pub user_properties: Vec<(ByteStr, ByteStr)>,
    /// 0x27, CONNECT, CONNACK: nonzero.
    pub maximum_packet_size: Option<u32>,
    /// 0x28, CONNACK: 0 or 1.
    pub wildcard_subscription_available: Option<u8>,
    /// 0x29, CONNACK: 0 or 1.
    pub subscription_identifier_available: Option<u8>,
    /// 0x2A, CONNACK: 0 or 1.
    pub shared_subscription_available: Option<u8>,
}

impl PropertyValues {
    /// No property set.
    pub const NONE: PropertyValues = PropertyValues {
        payload_format_indicator: None,
        message_expiry_interval: None,
        content_type: None,
        response_topic: None,
        correlation_data: None,
        subscription_identifiers: Vec::new(),
        session_expiry_interval: None,
        assigned_client_identifier: None,
        server_keep_alive: None,
        authentication_method: None,
        authentication_data: None,
        request_problem_information: None,
        will_delay_interval: None,
        request_response_information: None,
        response_information: None,
        server_reference: None,
        reason_string: None,
        receive_maximum: None,
        topic_alias_maximum: None,
        topic_alias: None,
        maximum_qos: None,
        retain_available: None,
        user_properties: Vec::new(),
        maximum_packet_size: None,
        wildcard_subscription_available: None,
        subscription_identifier_available: None,
        shared_subscription_available: None,
    };
}

/// Property identifiers (MQTT 5 §2.2.2.2).
pub mod id {
    /// Payload Format Indicator.
    pub const PAYLOAD_FORMAT_INDICATOR: u8 = 0x01;
    /// Message Expiry Interval.
    pub const MESSAGE_EXPIRY_INTERVAL: u8 = 0x02;
    /// Content Type.
    pub const CONTENT_TYPE: u8 = 0x03;
    /// Response Topic.
    pub const RESPONSE_TOPIC: u8 = 0x08;
    /// Correlation Data.
    pub const CORRELATION_DATA: u8 = 0x09;
    /// Subscription Identifier.
    pub const SUBSCRIPTION_IDENTIFIER: u8 = 0x0B;
    /// Session Expiry Interval.
    pub const SESSION_EXPIRY_INTERVAL: u8 = 0x11;
    /// Assigned Client Identifier.
    pub const ASSIGNED_CLIENT_IDENTIFIER: u8 = 0x12;
    /// Server Keep Alive.
    pub const SERVER_KEEP_ALIVE: u8 = 0x13;
    /// Authentication Method.
    pub const AUTHENTICATION_METHOD: u8 = 0x15;
    /// Authentication Data.
    pub const AUTHENTICATION_DATA: u8 = 0x16;
    /// Request Problem Information.
    pub const REQUEST_PROBLEM_INFORMATION: u8 = 0x17;
    /// Will Delay Interval.
    pub const WILL_DELAY_INTERVAL: u8 = 0x18;
    /// Request Response Information.
    pub const REQUEST_RESPONSE_INFORMATION: u8 = 0x19;
    /// Response Information.
    pub const RESPONSE_INFORMATION: u8 = 0x1A;
    /// Server Reference.
    pub const SERVER_REFERENCE: u8 = 0x1C;
    /// Reason String.
    pub const REASON_STRING: u8 = 0x1F;
    /// Receive Maximum.
    pub const RECEIVE_MAXIMUM: u8 = 0x21;
    /// Topic Alias Maximum.
    pub const TOPIC_ALIAS_MAXIMUM: u8 = 0x22;
    /// Topic Alias.
    pub const TOPIC_ALIAS: u8 = 0x23;
    /// Maximum QoS.
    pub const MAXIMUM_QOS: u8 = 0x24;
    /// Retain Available.
    pub const RETAIN_AVAILABLE: u8 = 0x25;
    /// User Property.
    pub const USER_PROPERTY: u8 = 0x26;
    /// Maximum Packet Size.
    pub const MAXIMUM_PACKET_SIZE: u8 = 0x27;
    /// Wildcard Subscription Available.
    pub const WILDCARD_SUBSCRIPTION_AVAILABLE: u8 = 0x28;
    /// Subscription Identifier Available.
    pub const SUBSCRIPTION_IDENTIFIER_AVAILABLE: u8 = 0x29;
    /// Shared Subscription Available.
    pub const SHARED_SUBSCRIPTION_AVAILABLE: u8 = 0x2A;
}

use id::*;

/// A set of property identifiers; every identifier is below 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PropertySet(u64);

impl PropertySet {
    const fn of(ids: &[u8]) -> PropertySet {
        let mut bits = 0u64;
        let mut index = 0;
        while index < ids.len() {
            bits |= 1 << ids[index];
            index += 1;
        }
        PropertySet(bits)
    }

    fn contains(self, id: u8) -> bool {
        id < 64 && self.0 & (1 << id) != 0
    }

    /// The properties MQTT 5 allows in `packet` (§2.2.2.2 table).
    pub(crate) fn allowed_in(packet: PacketType) -> PropertySet {
        match packet {
            PacketType::Connect => CONNECT,
            PacketType::ConnAck => CONNACK,
            PacketType::Publish => PUBLISH,
            PacketType::PubAck
            | PacketType::PubRec
            | PacketType::PubRel
            | PacketType::PubComp
            | PacketType::SubAck
            | PacketType::UnsubAck => ACK,
            PacketType::Subscribe => SUBSCRIBE,
            PacketType::Unsubscribe => UNSUBSCRIBE,
            PacketType::Disconnect => DISCONNECT,
            PacketType::Auth => AUTH,
            PacketType::PingReq | PacketType::PingResp => PropertySet(0),
        }
    }
}

/// Every identifier this version of the spec defines.
const KNOWN: PropertySet = PropertySet::of(&[
    PAYLOAD_FORMAT_INDICATOR,
    MESSAGE_EXPIRY_INTERVAL,
    CONTENT_TYPE,
    RESPONSE_TOPIC,
    CORRELATION_DATA,
    SUBSCRIPTION_IDENTIFIER,
    SESSION_EXPIRY_INTERVAL,
    ASSIGNED_CLIENT_IDENTIFIER,
    SERVER_KEEP_ALIVE,
    AUTHENTICATION_METHOD,
    AUTHENTICATION_DATA,
    REQUEST_PROBLEM_INFORMATION,
    WILL_DELAY_INTERVAL,
    REQUEST_RESPONSE_INFORMATION,
    RESPONSE_INFORMATION,
    SERVER_REFERENCE,
    REASON_STRING,
    RECEIVE_MAXIMUM,
    TOPIC_ALIAS_MAXIMUM,
    TOPIC_ALIAS,
    MAXIMUM_QOS,
    RETAIN_AVAILABLE,
    USER_PROPERTY,
    MAXIMUM_PACKET_SIZE,
    WILDCARD_SUBSCRIPTION_AVAILABLE,
    SUBSCRIPTION_IDENTIFIER_AVAILABLE,
    SHARED_SUBSCRIPTION_AVAILABLE,
]);

const CONNECT: PropertySet = PropertySet::of(&[
    SESSION_EXPIRY_INTERVAL,
    AUTHENTICATION_METHOD,
    AUTHENTICATION_DATA,
    REQUEST_PROBLEM_INFORMATION,
    REQUEST_RESPONSE_INFORMATION,
    RECEIVE_MAXIMUM,
    TOPIC_ALIAS_MAXIMUM,
    USER_PROPERTY,
    MAXIMUM_PACKET_SIZE,
]);

/// The will properties of a CONNECT (§3.1.3.2).
pub(crate) const WILL: PropertySet = PropertySet::of(&[
    PAYLOAD_FORMAT_INDICATOR,
    MESSAGE_EXPIRY_INTERVAL,
    CONTENT_TYPE,
    RESPONSE_TOPIC,
    CORRELATION_DATA,
    WILL_DELAY_INTERVAL,
    USER_PROPERTY,
]);

const CONNACK: PropertySet = PropertySet::of(&[
    SESSION_EXPIRY_INTERVAL,
    ASSIGNED_CLIENT_IDENTIFIER,
    SERVER_KEEP_ALIVE,
    AUTHENTICATION_METHOD,
    AUTHENTICATION_DATA,
    RESPONSE_INFORMATION,
    SERVER_REFERENCE,
    REASON_STRING,
    RECEIVE_MAXIMUM,
    TOPIC_ALIAS_MAXIMUM,
    MAXIMUM_QOS,
    RETAIN_AVAILABLE,
    USER_PROPERTY,
    MAXIMUM_PACKET_SIZE,
    WILDCARD_SUBSCRIPTION_AVAILABLE,
    SUBSCRIPTION_IDENTIFIER_AVAILABLE,
    SHARED_SUBSCRIPTION_AVAILABLE,
]);

const PUBLISH: PropertySet = PropertySet::of(&[
    PAYLOAD_FORMAT_INDICATOR,
    MESSAGE_EXPIRY_INTERVAL,
    CONTENT_TYPE,
    RESPONSE_TOPIC,
    CORRELATION_DATA,
    SUBSCRIPTION_IDENTIFIER,
    TOPIC_ALIAS,
    USER_PROPERTY,
]);

/// PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK and UNSUBACK.
const ACK: PropertySet = PropertySet::of(&[REASON_STRING, USER_PROPERTY]);

const SUBSCRIBE: PropertySet = PropertySet::of(&[SUBSCRIPTION_IDENTIFIER, USER_PROPERTY]);

const UNSUBSCRIBE: PropertySet = PropertySet::of(&[USER_PROPERTY]);

const DISCONNECT: PropertySet =
    PropertySet::of(&[SESSION_EXPIRY_INTERVAL, SERVER_REFERENCE, REASON_STRING, USER_PROPERTY]);

const AUTH: PropertySet =
    PropertySet::of(&[AUTHENTICATION_METHOD, AUTHENTICATION_DATA, REASON_STRING, USER_PROPERTY]);

/// One property value as it goes on the wire, so that measuring, checking
/// and writing share a single list of the fields ([`Properties::visit`]).
enum Value<'a> {
    Byte(u8),
    U16(u16),
    U32(u32),
    Varint(u32),
    Binary(&'a [u8]),
    Pair(&'a [u8], &'a [u8]),
}

impl Value<'_> {
    /// Encoded size without the identifier byte.
    fn len(&self) -> usize {
        match self {
            Value::Byte(_) => 1,
            Value::U16(_) => 2,
            Value::U32(_) => 4,
            Value::Varint(value) => varint::len(*value as usize),
            // Saturating: lengths are only trusted after `check`.
            Value::Binary(bytes) => bytes.len().saturating_add(2),
            Value::Pair(key, value) => key.len().saturating_add(value.len()).saturating_add(4),
        }
    }

    fn check(&self) -> Result<(), EncodeError> {
        match self {
            Value::Varint(value) if !(1..=varint::MAX).contains(value) => {
                Err(EncodeError::Invalid("subscription identifier", "outside 1..=268435455"))
            }
            Value::Binary(bytes) => wire::binary_len(bytes, "property").map(drop),
            Value::Pair(key, value) => {
                wire::binary_len(key, "user property")?;
                wire::binary_len(value, "user property").map(drop)
            }
            _ => Ok(()),
        }
    }

    fn write(&self, buf: &mut BytesMut) {
        match self {
            Value::Byte(value) => buf.put_u8(*value),
            Value::U16(value) => buf.put_u16(*value),
            Value::U32(value) => buf.put_u32(*value),
            Value::Varint(value) => varint::put(buf, *value as usize),
            Value::Binary(bytes) => wire::put_binary(buf, bytes),
            Value::Pair(key, value) => {
                wire::put_binary(buf, key);
                wire::put_binary(buf, value);
            }
        }
    }
}

impl Properties {
    /// Whether no property is set, i.e. nothing would go on the wire but the
    /// zero property length.
    pub fn is_empty(&self) -> bool {
        self.0.as_deref().is_none_or(|values| *values == NONE)
    }

    /// Reads a property length and that many bytes of properties, allowing
    /// those MQTT 5 permits in `packet`.
    pub(crate) fn decode(
        reader: &mut Reader,
        packet: PacketType,
    ) -> Result<Properties, DecodeError> {
        Properties::decode_allowed(reader, PropertySet::allowed_in(packet), packet)
    }

    /// Reads the will properties of a CONNECT.
    pub(crate) fn decode_will(reader: &mut Reader) -> Result<Properties, DecodeError> {
        Properties::decode_allowed(reader, WILL, PacketType::Connect)
    }

    fn decode_allowed(
        reader: &mut Reader,
        allowed: PropertySet,
        packet: PacketType,
    ) -> Result<Properties, DecodeError> {
        let len = reader.varint("property length")?;
        // Reading from a block of exactly `len` bytes makes a property that
        // runs past the declared length fail as truncated.
        let mut block = reader.sub_reader(len as usize, "properties")?;
        let mut props = Properties::default();
        // The first rule broken (a property misplaced, repeated or out of
        // range), reported once the whole block has been read: a block
        // that is also cut short or holds an unknown identifier is
        // malformed first, as Mosquitto, which reads every property before
        // it checks any, has it.
        let mut broken_rule = None;
        while !block.is_empty() {
            // A Variable Byte Integer in the spec, but every identifier is one
            // byte long (§2.2.2.2), so a byte with the high bit set is unknown.
            let id = block.u8("property identifier")?;
            if !KNOWN.contains(id) {
                return Err(DecodeError::UnknownProperty(id));
            }
            let read = if allowed.contains(id) {
                props.decode_one(id, &mut block, packet)
            } else {
                Properties::default()
                    .decode_one(id, &mut block, packet)
                    .and(Err(DecodeError::PropertyNotAllowed { property: id, packet }))
            };
            match read {
                Err(
                    error @ (DecodeError::PropertyNotAllowed { .. }
                    | DecodeError::DuplicateProperty(_)
                    | DecodeError::InvalidPropertyValue(_)
                    | DecodeError::ZeroTopicAlias),
                ) => {
                    broken_rule.get_or_insert(error);
                }
                read => read?,
            }
        }
        broken_rule.map_or(Ok(props), Err)
    }

    fn decode_one(
        &mut self,
        id: u8,
        r: &mut Reader,
        packet: PacketType,
    ) -> Result<(), DecodeError> {
        match id {
            PAYLOAD_FORMAT_INDICATOR => once(
                &mut self.payload_format_indicator,
                flag(r.u8("payload format indicator")?, id)?,
                id,
            ),
            MESSAGE_EXPIRY_INTERVAL => {
                once(&mut self.message_expiry_interval, r.u32("message expiry interval")?, id)
            }
            CONTENT_TYPE => once(&mut self.content_type, r.string("content type")?, id),
            RESPONSE_TOPIC => {
                let topic = r.string("response topic")?;
                // §3.3.2.3.5: a Response Topic is a topic name, so no wildcards.
                if !topic::is_valid_topic_name(&topic) {
                    return Err(DecodeError::InvalidPropertyValue(id));
                }
                once(&mut self.response_topic, topic, id)
            }
            CORRELATION_DATA => once(&mut self.correlation_data, r.binary("correlation data")?, id),
            SUBSCRIPTION_IDENTIFIER => {
                let value = r.varint("subscription identifier")?;
                if value == 0 {
                    return Err(DecodeError::InvalidPropertyValue(id));
                }
                // A server forwards one PUBLISH carrying the identifiers of
                // every matching subscription; elsewhere it appears once.
                if packet != PacketType::Publish && !self.subscription_identifiers.is_empty() {
                    return Err(DecodeError::DuplicateProperty(id));
                }
                self.subscription_identifiers.push(value);
                Ok(())
            }
            SESSION_EXPIRY_INTERVAL => {
                once(&mut self.session_expiry_interval, r.u32("session expiry interval")?, id)
            }
            ASSIGNED_CLIENT_IDENTIFIER => once(
                &mut self.assigned_client_identifier,
                r.string("assigned client identifier")?,
                id,
            ),
            SERVER_KEEP_ALIVE => once(&mut self.server_keep_alive, r.u16("server keep alive")?, id),
            AUTHENTICATION_METHOD => {
                once(&mut self.authentication_method, r.string("authentication method")?, id)
            }
            AUTHENTICATION_DATA => {
                once(&mut self.authentication_data, r.binary("authentication data")?, id)
            }
            REQUEST_PROBLEM_INFORMATION => once(
                &mut self.request_problem_information,
                flag(r.u8("request problem information")?, id)?,
                id,
            ),
            WILL_DELAY_INTERVAL => {
                once(&mut self.will_delay_interval, r.u32("will delay interval")?, id)
            }
            REQUEST_RESPONSE_INFORMATION => once(
                &mut self.request_response_information,
                flag(r.u8("request response information")?, id)?,
                id,
            ),
            RESPONSE_INFORMATION => {
                once(&mut self.response_information, r.string("response information")?, id)
            }
            SERVER_REFERENCE => once(&mut self.server_reference, r.string("server reference")?, id),
            REASON_STRING => once(&mut self.reason_string, r.string("reason string")?, id),
            RECEIVE_MAXIMUM => {
                once(&mut self.receive_maximum, nonzero_u16(r.u16("receive maximum")?, id)?, id)
            }
            TOPIC_ALIAS_MAXIMUM => {
                once(&mut self.topic_alias_maximum, r.u16("topic alias maximum")?, id)
            }
            TOPIC_ALIAS => match r.u16("topic alias")? {
                0 => Err(DecodeError::ZeroTopicAlias),
                alias => once(&mut self.topic_alias, alias, id),
            },
            MAXIMUM_QOS => once(&mut self.maximum_qos, flag(r.u8("maximum qos")?, id)?, id),
            RETAIN_AVAILABLE => {
                once(&mut self.retain_available, flag(r.u8("retain available")?, id)?, id)
            }
            USER_PROPERTY => {
                let key = r.string("user property")?;
                let value = r.string("user property")?;
                self.user_properties.push((key, value));
                Ok(())
            }
            MAXIMUM_PACKET_SIZE => {
                let value = r.u32("maximum packet size")?;
                if value == 0 {
                    return Err(DecodeError::InvalidPropertyValue(id));
                }
                once(&mut self.maximum_packet_size, value, id)
            }
            WILDCARD_SUBSCRIPTION_AVAILABLE => once(
                &mut self.wildcard_subscription_available,
                flag(r.u8("wildcard subscription available")?, id)?,
                id,
            ),
            SUBSCRIPTION_IDENTIFIER_AVAILABLE => once(
                &mut self.subscription_identifier_available,
                flag(r.u8("subscription identifier available")?, id)?,
                id,
            ),
            SHARED_SUBSCRIPTION_AVAILABLE => once(
                &mut self.shared_subscription_available,
                flag(r.u8("shared subscription available")?, id)?,
                id,
            ),
            _ => Err(DecodeError::UnknownProperty(id)),
        }
    }

    /// Calls `f` with every property that is set, in identifier order.
    fn visit(&self, f: impl FnMut(u8, Value<'_>)) {
        if let Some(values) = self.0.as_deref() {
            values.visit(f);
        }
    }

    /// Size of the properties without their length prefix. Saturates rather
    /// than overflows: the caller compares the total against the MQTT limit.
    fn content_len(&self) -> usize {
        let mut len = 0usize;
        self.visit(|_, value| len = len.saturating_add(value.len()).saturating_add(1));
        len
    }

    /// Size on the wire in `version`, length prefix included: nothing in
    /// 3.1.1, which has no properties. Refuses values that cannot be encoded.
    ///
    /// The encoder writes every property that is set, whether or not the
    /// packet type allows it: choosing properties is the caller's business.
    pub(crate) fn wire_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        if !version.is_v5() {
            return Ok(0);
        }
        let mut checked = Ok(());
        self.visit(|_, value| {
            if checked.is_ok() {
                checked = value.check();
            }
        });
        checked?;
        let len = self.content_len();
        if len > varint::MAX as usize {
            return Err(EncodeError::PacketTooLarge(len));
        }
        Ok(varint::len(len) + len)
    }

    /// Appends the properties in `version`, after [`Properties::wire_len`]
    /// accepted them.
    pub(crate) fn write(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        if !version.is_v5() {
            return;
        }
        varint::put(buf, self.content_len());
        self.visit(|id, value| {
            buf.put_u8(id);
            value.write(buf);
        });
    }
}

impl PropertyValues {
    /// Calls `f` with every property that is set, in identifier order. The
    /// single place that lists the fields for encoding.
    fn visit(&self, mut f: impl FnMut(u8, Value<'_>)) {
        fn bytes(s: &Option<ByteStr>) -> Option<&[u8]> {
            s.as_ref().map(|s| s.as_bytes().as_ref())
        }
        if let Some(v) = self.payload_format_indicator {
            f(PAYLOAD_FORMAT_INDICATOR, Value::Byte(v));
        }
        if let Some(v) = self.message_expiry_interval {
            f(MESSAGE_EXPIRY_INTERVAL, Value::U32(v));
        }
        if let Some(v) = bytes(&self.content_type) {
            f(CONTENT_TYPE, Value::Binary(v));
        }
        if let Some(v) = bytes(&self.response_topic) {
            f(RESPONSE_TOPIC, Value::Binary(v));
        }
        if let Some(v) = &self.correlation_data {
            f(CORRELATION_DATA, Value::Binary(v));
        }
        for &v in &self.subscription_identifiers {
            f(SUBSCRIPTION_IDENTIFIER, Value::Varint(v));
        }
        if let Some(v) = self.session_expiry_interval {
            f(SESSION_EXPIRY_INTERVAL, Value::U32(v));
        }
        if let Some(v) = bytes(&self.assigned_client_identifier) {
            f(ASSIGNED_CLIENT_IDENTIFIER, Value::Binary(v));
        }
        if let Some(v) = self.server_keep_alive {
            f(SERVER_KEEP_ALIVE, Value::U16(v));
        }
        if let Some(v) = bytes(&self.authentication_method) {
            f(AUTHENTICATION_METHOD, Value::Binary(v));
        }
        if let Some(v) = &self.authentication_data {
            f(AUTHENTICATION_DATA, Value::Binary(v));
        }
        if let Some(v) = self.request_problem_information {
            f(REQUEST_PROBLEM_INFORMATION, Value::Byte(v));
        }
        if let Some(v) = self.will_delay_interval {
            f(WILL_DELAY_INTERVAL, Value::U32(v));
        }
        if let Some(v) = self.request_response_information {
            f(REQUEST_RESPONSE_INFORMATION, Value::Byte(v));
        }
        if let Some(v) = bytes(&self.response_information) {
            f(RESPONSE_INFORMATION, Value::Binary(v));
        }
        if let Some(v) = bytes(&self.server_reference) {
            f(SERVER_REFERENCE, Value::Binary(v));
        }
        if let Some(v) = bytes(&self.reason_string) {
            f(REASON_STRING, Value::Binary(v));
        }
        if let Some(v) = self.receive_maximum {
            f(RECEIVE_MAXIMUM, Value::U16(v));
        }
        if let Some(v) = self.topic_alias_maximum {
            f(TOPIC_ALIAS_MAXIMUM, Value::U16(v));
        }
        if let Some(v) = self.topic_alias {
            f(TOPIC_ALIAS, Value::U16(v));
        }
        if let Some(v) = self.maximum_qos {
            f(MAXIMUM_QOS, Value::Byte(v));
        }
        if let Some(v) = self.retain_available {
            f(RETAIN_AVAILABLE, Value::Byte(v));
        }
        for (key, value) in &self.user_properties {
            f(USER_PROPERTY, Value::Pair(key.as_bytes(), value.as_bytes()));
        }
        if let Some(v) = self.maximum_packet_size {
            f(MAXIMUM_PACKET_SIZE, Value::U32(v));
        }
        if let Some(v) = self.wildcard_subscription_available {
            f(WILDCARD_SUBSCRIPTION_AVAILABLE, Value::Byte(v));
        }
        if let Some(v) = self.subscription_identifier_available {
            f(SUBSCRIPTION_IDENTIFIER_AVAILABLE, Value::Byte(v));
        }
        if let Some(v) = self.shared_subscription_available {
            f(SHARED_SUBSCRIPTION_AVAILABLE, Value::Byte(v));
        }
    }
}

/// Stores a property that may appear at most once.
fn once<T>(slot: &mut Option<T>, value: T, id: u8) -> Result<(), DecodeError> {
    if slot.is_some() {
        return Err(DecodeError::DuplicateProperty(id));
    }
    *slot = Some(value);
    Ok(())
}

/// A Byte property whose only values are 0 and 1.
fn flag(value: u8, id: u8) -> Result<u8, DecodeError> {
    if value > 1 {
        return Err(DecodeError::InvalidPropertyValue(id));
    }
    Ok(value)
}

fn nonzero_u16(value: u16, id: u8) -> Result<u16, DecodeError> {
    if value == 0 {
        return Err(DecodeError::InvalidPropertyValue(id));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Packet, Publish, QoS};

    #[test]
    fn an_empty_set_is_no_box_and_reads_as_none() {
        let none = Properties::default();
        assert!(none.0.is_none() && none.is_empty());
        assert_eq!(none.topic_alias, None);
        assert!(none.user_properties.is_empty());
        assert_eq!(none, Properties::from(PropertyValues::default()), "no values, no box");
        assert!(Properties::from(PropertyValues::default()).0.is_none());

        let mut set = none.clone();
        set.topic_alias = Some(3);
        assert!(set.0.is_some() && !set.is_empty());
        set.topic_alias = None;
        assert!(set.is_empty(), "emptied again");
        assert_eq!(set, none, "equal by value, box or not");
    }

    #[test]
    fn decoding_no_properties_allocates_nothing() {
        let mut wire = BytesMut::new();
        let publish = Publish {
            dup: false,
            qos: QoS::AtMostOnce,
            retain: false,
            topic: "t".into(),
            packet_id: 0,
            properties: Properties::default(),
            payload: "p".into(),
        };
        Packet::Publish(publish).encode(ProtocolVersion::V5, &mut wire).unwrap();
        match Packet::decode(&mut wire, ProtocolVersion::V5, 1 << 20).unwrap() {
            Some(Packet::Publish(p)) => assert!(p.properties.0.is_none()),
            other => panic!("{other:?}"),
        }
    }

    /// The point of the box: a packet stays small enough to move cheaply.
    #[test]
    fn packets_stay_small() {
        assert_eq!(std::mem::size_of::<Properties>(), 8);
        let size = std::mem::size_of::<Packet>();
        assert!(size <= 128, "Packet is {size} bytes");
    }
}
