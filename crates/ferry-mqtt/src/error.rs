use crate::{packet::PacketType, ProtocolVersion, ReasonCode, StrError};

/// Why a byte sequence is not a valid MQTT packet. Each error maps to the
/// reason code the receiver answers with ([`DecodeError::reason_code`]);
/// the connection that sent it is then closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("remaining length is not a valid variable byte integer")]
    MalformedRemainingLength,
    #[error("packet of {size} bytes exceeds the maximum of {max}")]
    PacketTooLarge { size: usize, max: u32 },
    #[error("reserved packet type 0")]
    ReservedPacketType,
    #[error("invalid fixed header flags {flags:#06b} for {packet:?}")]
    InvalidHeaderFlags { packet: PacketType, flags: u8 },
    #[error("{packet:?} is not valid in protocol version {version}")]
    UnexpectedPacket { packet: PacketType, version: u8 },
    #[error("packet ends before its {0} field")]
    Truncated(&'static str),
    #[error("{0} trailing bytes after the packet's last field")]
    TrailingBytes(usize),
    #[error("invalid protocol name")]
    InvalidProtocolName,
    #[error("unsupported protocol level {0}")]
    UnsupportedProtocolVersion(u8),
    #[error("reserved bit set in {0}")]
    ReservedBitSet(&'static str),
    #[error("invalid QoS 3")]
    InvalidQoS,
    #[error("will flags set without the will flag")]
    InvalidWillFlags,
    #[error("password present without a user name")]
    PasswordWithoutUsername,
    #[error("invalid string in {field}: {error}")]
    InvalidString { field: &'static str, error: StrError },
    #[error("packet identifier 0 in {0:?}")]
    ZeroPacketId(PacketType),
    #[error("invalid topic name {0:?}")]
    InvalidTopicName(String),
    #[error("invalid topic filter {0:?}")]
    InvalidTopicFilter(String),
    #[error("{0:?} has no topic filters")]
    NoTopicFilters(PacketType),
    #[error("invalid reason code {code:#04x} in {packet:?}")]
    InvalidReasonCode { packet: PacketType, code: u8 },
    #[error("unknown property identifier {0:#04x}")]
    UnknownProperty(u8),
    #[error("property {property:#04x} is not allowed in {packet:?}")]
    PropertyNotAllowed { property: u8, packet: PacketType },
    #[error("property {0:#04x} appears more than once")]
    DuplicateProperty(u8),
    #[error("invalid value for property {0:#04x}")]
    InvalidPropertyValue(u8),
    /// Topic Alias 0, which §3.3.2.3.4 forbids: Topic Alias invalid
    /// (0x94), the code of every alias the receiver cannot accept.
    #[error("topic alias 0")]
    ZeroTopicAlias,
    /// A variable byte integer inside the packet (property length,
    /// subscription identifier) has a fifth byte.
    #[error("{0} is not a valid variable byte integer")]
    MalformedVariableInteger(&'static str),
    /// A rule the spec calls a Protocol Error that no other variant covers:
    /// retain handling 3, No Local on a shared subscription, authentication
    /// data without a method, session present on a failed CONNACK, an MQTT 5
    /// PUBLISH with neither a topic name nor a topic alias.
    #[error("protocol error: {0}")]
    ProtocolViolation(&'static str),
    /// A CONNECT the server answers with a CONNACK before it closes:
    /// `reason`, in the CONNACK format of `format`. Which faults are
    /// answered, and how, is `Connect::decode`'s call; every other fault
    /// in a CONNECT closes the connection without one.
    #[error("{cause}")]
    AnsweredConnect { cause: Box<DecodeError>, reason: ReasonCode, format: ProtocolVersion },
}

impl DecodeError {
    /// This fault of a CONNECT, answered with CONNACK `reason` in the
    /// format of `format`.
    pub(crate) fn answered(self, reason: ReasonCode, format: ProtocolVersion) -> DecodeError {
        DecodeError::AnsweredConnect { cause: Box::new(self), reason, format }
    }

    /// The CONNACK to send before closing, for a CONNECT that gets one:
    /// its reason code and the protocol version whose format it takes.
    pub fn connack(&self) -> Option<(ReasonCode, ProtocolVersion)> {
        match self {
            DecodeError::AnsweredConnect { reason, format, .. } => Some((*reason, *format)),
            _ => None,
        }
    }

    /// The reason code to send in CONNACK or DISCONNECT (5.0) before closing.
    pub fn reason_code(&self) -> ReasonCode {
        // Exhaustive on purpose: a new variant must decide its reason code.
        match self {
            DecodeError::AnsweredConnect { reason, .. } => *reason,
            DecodeError::PacketTooLarge { .. } => ReasonCode::PacketTooLarge,
            DecodeError::UnsupportedProtocolVersion(_) | DecodeError::InvalidProtocolName => {
                ReasonCode::UnsupportedProtocolVersion
            }
            DecodeError::InvalidTopicName(_) => ReasonCode::TopicNameInvalid,
            DecodeError::ZeroTopicAlias => ReasonCode::TopicAliasInvalid,
            // MQTT 5 §3.8.3 and §3.10.3 call an empty SUBSCRIBE or
            // UNSUBSCRIBE payload a Protocol Error, not a Malformed Packet.
            DecodeError::UnexpectedPacket { .. }
            | DecodeError::NoTopicFilters(_)
            | DecodeError::DuplicateProperty(_)
            | DecodeError::InvalidPropertyValue(_)
            | DecodeError::ProtocolViolation(_) => ReasonCode::ProtocolError,
            // The spec calls a misplaced property malformed (§2.2.2.2), and
            // is silent on the other two; Mosquitto answers all three as
            // protocol errors (its msg_sequence suite compares the bytes),
            // and Ferry does too, but in SUBSCRIBE and UNSUBSCRIBE, where
            // Mosquitto too calls them malformed.
            DecodeError::PropertyNotAllowed {
                packet: PacketType::Subscribe | PacketType::Unsubscribe,
                ..
            } => ReasonCode::MalformedPacket,
            DecodeError::PropertyNotAllowed { .. }
            | DecodeError::InvalidReasonCode { .. }
            | DecodeError::ZeroPacketId(
                PacketType::Publish
                | PacketType::PubAck
                | PacketType::PubRec
                | PacketType::PubRel
                | PacketType::PubComp,
            ) => ReasonCode::ProtocolError,
            DecodeError::MalformedRemainingLength
            | DecodeError::ReservedPacketType
            | DecodeError::InvalidHeaderFlags { .. }
            | DecodeError::Truncated(_)
            | DecodeError::TrailingBytes(_)
            | DecodeError::ReservedBitSet(_)
            | DecodeError::InvalidQoS
            | DecodeError::InvalidWillFlags
            | DecodeError::PasswordWithoutUsername
            | DecodeError::InvalidString { .. }
            | DecodeError::ZeroPacketId(_)
            | DecodeError::InvalidTopicFilter(_)
            | DecodeError::UnknownProperty(_)
            | DecodeError::MalformedVariableInteger(_) => ReasonCode::MalformedPacket,
        }
    }
}

/// Why a packet could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("packet of {0} bytes exceeds the MQTT limit of 268435455")]
    PacketTooLarge(usize),
    #[error("{0} cannot be encoded: {1}")]
    Invalid(&'static str, &'static str),
}
