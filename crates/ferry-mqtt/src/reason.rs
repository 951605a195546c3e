/// MQTT 5 reason codes (§2.4). MQTT 3.1.1 return codes are mapped onto these
/// by the encoder and decoder, so the broker speaks one vocabulary.
///
/// Several codes share a value in the spec (0x00 is Success, Normal
/// disconnection and Granted QoS 0); one variant stands for each value and the
/// aliases are associated constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReasonCode {
    Success = 0x00,
    GrantedQoS1 = 0x01,
    GrantedQoS2 = 0x02,
    DisconnectWithWillMessage = 0x04,
    NoMatchingSubscribers = 0x10,
    NoSubscriptionExisted = 0x11,
    ContinueAuthentication = 0x18,
    ReAuthenticate = 0x19,
    UnspecifiedError = 0x80,
    MalformedPacket = 0x81,
    ProtocolError = 0x82,
    ImplementationSpecificError = 0x83,
    UnsupportedProtocolVersion = 0x84,
    ClientIdentifierNotValid = 0x85,
    BadUserNameOrPassword = 0x86,
    NotAuthorized = 0x87,
    ServerUnavailable = 0x88,
    ServerBusy = 0x89,
    Banned = 0x8A,
    ServerShuttingDown = 0x8B,
    BadAuthenticationMethod = 0x8C,
    KeepAliveTimeout = 0x8D,
    SessionTakenOver = 0x8E,
    TopicFilterInvalid = 0x8F,
    TopicNameInvalid = 0x90,
    PacketIdentifierInUse = 0x91,
    PacketIdentifierNotFound = 0x92,
    ReceiveMaximumExceeded = 0x93,
    TopicAliasInvalid = 0x94,
    PacketTooLarge = 0x95,
    MessageRateTooHigh = 0x96,
    QuotaExceeded = 0x97,
    AdministrativeAction = 0x98,
    PayloadFormatInvalid = 0x99,
    RetainNotSupported = 0x9A,
    QoSNotSupported = 0x9B,
    UseAnotherServer = 0x9C,
    ServerMoved = 0x9D,
    SharedSubscriptionsNotSupported = 0x9E,
    ConnectionRateExceeded = 0x9F,
    MaximumConnectTime = 0xA0,
    SubscriptionIdentifiersNotSupported = 0xA1,
    WildcardSubscriptionsNotSupported = 0xA2,
}

impl ReasonCode {
    pub const NORMAL_DISCONNECTION: ReasonCode = ReasonCode::Success;
    pub const GRANTED_QOS0: ReasonCode = ReasonCode::Success;

    pub fn from_u8(value: u8) -> Option<ReasonCode> {
        use ReasonCode::*;
        Some(match value {
            0x00 => Success,
            0x01 => GrantedQoS1,
            0x02 => GrantedQoS2,
            0x04 => DisconnectWithWillMessage,
            0x10 => NoMatchingSubscribers,
            0x11 => NoSubscriptionExisted,
            0x18 => ContinueAuthentication,
            0x19 => ReAuthenticate,
            0x80 => UnspecifiedError,
            0x81 => MalformedPacket,
            0x82 => ProtocolError,
            0x83 => ImplementationSpecificError,
            0x84 => UnsupportedProtocolVersion,
            0x85 => ClientIdentifierNotValid,
            0x86 => BadUserNameOrPassword,
            0x87 => NotAuthorized,
            0x88 => ServerUnavailable,
            0x89 => ServerBusy,
            0x8A => Banned,
            0x8B => ServerShuttingDown,
            0x8C => BadAuthenticationMethod,
            0x8D => KeepAliveTimeout,
            0x8E => SessionTakenOver,
            0x8F => TopicFilterInvalid,
            0x90 => TopicNameInvalid,
            0x91 => PacketIdentifierInUse,
            0x92 => PacketIdentifierNotFound,
            0x93 => ReceiveMaximumExceeded,
            0x94 => TopicAliasInvalid,
            0x95 => PacketTooLarge,
            0x96 => MessageRateTooHigh,
            0x97 => QuotaExceeded,
            0x98 => AdministrativeAction,
            0x99 => PayloadFormatInvalid,
            0x9A => RetainNotSupported,
            0x9B => QoSNotSupported,
            0x9C => UseAnotherServer,
            0x9D => ServerMoved,
            0x9E => SharedSubscriptionsNotSupported,
            0x9F => ConnectionRateExceeded,
            0xA0 => MaximumConnectTime,
            0xA1 => SubscriptionIdentifiersNotSupported,
            0xA2 => WildcardSubscriptionsNotSupported,
            _ => return None,
        })
    }

    /// Codes of 0x80 and above report a failure (§2.4).
    pub fn is_error(self) -> bool {
        self as u8 >= 0x80
    }

    /// The granted-QoS code of a SUBACK entry.
    pub fn granted(qos: crate::QoS) -> ReasonCode {
        match qos {
            crate::QoS::AtMostOnce => ReasonCode::Success,
            crate::QoS::AtLeastOnce => ReasonCode::GrantedQoS1,
            crate::QoS::ExactlyOnce => ReasonCode::GrantedQoS2,
        }
    }

    /// The MQTT 3.1.1 CONNACK return code (§3.2.2.3) closest to this reason.
    pub fn to_v3_connack(self) -> u8 {
        use ReasonCode::*;
        match self {
            Success => 0,
            UnsupportedProtocolVersion => 1,
            ClientIdentifierNotValid => 2,
            BadUserNameOrPassword => 4,
            NotAuthorized | Banned | BadAuthenticationMethod => 5,
            _ => 3,
        }
    }

    /// Inverse of [`ReasonCode::to_v3_connack`] for the six defined codes.
    pub fn from_v3_connack(code: u8) -> Option<ReasonCode> {
        use ReasonCode::*;
        Some(match code {
            0 => Success,
            1 => UnsupportedProtocolVersion,
            2 => ClientIdentifierNotValid,
            3 => ServerUnavailable,
            4 => BadUserNameOrPassword,
            5 => NotAuthorized,
            _ => return None,
        })
    }
}
