use crate::{packet::PacketType, DecodeError, EncodeError};

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
    /// DISCONNECT 0x00.
    pub const NORMAL_DISCONNECTION: ReasonCode = ReasonCode::Success;
    /// SUBACK 0x00.
    pub const GRANTED_QOS0: ReasonCode = ReasonCode::Success;

    /// The reason code of a byte; `None` for values the spec leaves undefined.
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

    /// Whether MQTT 5 allows this code in a packet of type `packet`: the
    /// Packets column of the reason code table, §2.4 Table 2-6 (which the
    /// tables of §3 repeat packet by packet). Packets without a reason code
    /// allow none. `tests::table_2_6` pins every cell.
    pub fn is_allowed_in(self, packet: PacketType) -> bool {
        use ReasonCode::*;
        match packet {
            PacketType::ConnAck => matches!(
                self,
                Success
                    | UnspecifiedError
                    | MalformedPacket
                    | ProtocolError
                    | ImplementationSpecificError
                    | UnsupportedProtocolVersion
                    | ClientIdentifierNotValid
                    | BadUserNameOrPassword
                    | NotAuthorized
                    | ServerUnavailable
                    | ServerBusy
                    | Banned
                    | BadAuthenticationMethod
                    | TopicNameInvalid
                    | PacketTooLarge
                    | QuotaExceeded
                    | PayloadFormatInvalid
                    | RetainNotSupported
                    | QoSNotSupported
                    | UseAnotherServer
                    | ServerMoved
                    | ConnectionRateExceeded
            ),
            PacketType::PubAck | PacketType::PubRec => matches!(
                self,
                Success
                    | NoMatchingSubscribers
                    | UnspecifiedError
                    | ImplementationSpecificError
                    | NotAuthorized
                    | TopicNameInvalid
                    | PacketIdentifierInUse
                    | QuotaExceeded
                    | PayloadFormatInvalid
            ),
            PacketType::PubRel | PacketType::PubComp => {
                matches!(self, Success | PacketIdentifierNotFound)
            }
            PacketType::SubAck => matches!(
                self,
                Success
                    | GrantedQoS1
                    | GrantedQoS2
                    | UnspecifiedError
                    | ImplementationSpecificError
                    | NotAuthorized
                    | TopicFilterInvalid
                    | PacketIdentifierInUse
                    | QuotaExceeded
                    | SharedSubscriptionsNotSupported
                    | SubscriptionIdentifiersNotSupported
                    | WildcardSubscriptionsNotSupported
            ),
            PacketType::UnsubAck => matches!(
                self,
                Success
                    | NoSubscriptionExisted
                    | UnspecifiedError
                    | ImplementationSpecificError
                    | NotAuthorized
                    | TopicFilterInvalid
                    | PacketIdentifierInUse
            ),
            PacketType::Disconnect => matches!(
                self,
                Success
                    | DisconnectWithWillMessage
                    | UnspecifiedError
                    | MalformedPacket
                    | ProtocolError
                    | ImplementationSpecificError
                    | NotAuthorized
                    | ServerBusy
                    | ServerShuttingDown
                    | BadAuthenticationMethod
                    | KeepAliveTimeout
                    | SessionTakenOver
                    | TopicFilterInvalid
                    | TopicNameInvalid
                    | ReceiveMaximumExceeded
                    | TopicAliasInvalid
                    | PacketTooLarge
                    | MessageRateTooHigh
                    | QuotaExceeded
                    | AdministrativeAction
                    | PayloadFormatInvalid
                    | RetainNotSupported
                    | QoSNotSupported
                    | UseAnotherServer
                    | ServerMoved
                    | SharedSubscriptionsNotSupported
                    | ConnectionRateExceeded
                    | MaximumConnectTime
                    | SubscriptionIdentifiersNotSupported
                    | WildcardSubscriptionsNotSupported
            ),
            PacketType::Auth => matches!(self, Success | ContinueAuthentication | ReAuthenticate),
            PacketType::Connect
            | PacketType::Publish
            | PacketType::Subscribe
            | PacketType::Unsubscribe
            | PacketType::PingReq
            | PacketType::PingResp => false,
        }
    }

    /// Decodes an MQTT 5 reason code byte of `packet`.
    pub(crate) fn decode_for(packet: PacketType, code: u8) -> Result<ReasonCode, DecodeError> {
        ReasonCode::from_u8(code)
            .filter(|reason| reason.is_allowed_in(packet))
            .ok_or(DecodeError::InvalidReasonCode { packet, code })
    }

    /// Refuses to encode a code the peer's decoder would reject.
    pub(crate) fn check_for(self, packet: PacketType) -> Result<(), EncodeError> {
        if self.is_allowed_in(packet) {
            Ok(())
        } else {
            Err(EncodeError::Invalid("reason code", "not allowed in this packet type"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_u8_inverts_the_discriminant() {
        for code in 0..=255u8 {
            if let Some(reason) = ReasonCode::from_u8(code) {
                assert_eq!(reason as u8, code);
            }
        }
    }

    #[test]
    fn v3_connack_codes_round_trip() {
        for code in 0..=5 {
            assert_eq!(ReasonCode::from_v3_connack(code).unwrap().to_v3_connack(), code);
        }
        assert_eq!(ReasonCode::from_v3_connack(6), None);
    }

    /// MQTT 5.0 §2.4, Table 2-6 (Reason Codes), transcribed: each code
    /// with the packets its "MQTT Control Packets" column names. 0x00
    /// appears three times in the spec (Success, Normal disconnection,
    /// Granted QoS 0); its packets are merged here.
    const TABLE_2_6: &[(u8, &[PacketType])] = {
        use PacketType::*;
        &[
            (0x00, &[ConnAck, PubAck, PubRec, PubRel, PubComp, SubAck, UnsubAck, Disconnect, Auth]),
            (0x01, &[SubAck]),
            (0x02, &[SubAck]),
            (0x04, &[Disconnect]),
            (0x10, &[PubAck, PubRec]),
            (0x11, &[UnsubAck]),
            (0x18, &[Auth]),
            (0x19, &[Auth]),
            (0x80, &[ConnAck, PubAck, PubRec, SubAck, UnsubAck, Disconnect]),
            (0x81, &[ConnAck, Disconnect]),
            (0x82, &[ConnAck, Disconnect]),
            (0x83, &[ConnAck, PubAck, PubRec, SubAck, UnsubAck, Disconnect]),
            (0x84, &[ConnAck]),
            (0x85, &[ConnAck]),
            (0x86, &[ConnAck]),
            (0x87, &[ConnAck, PubAck, PubRec, SubAck, UnsubAck, Disconnect]),
            (0x88, &[ConnAck]),
            (0x89, &[ConnAck, Disconnect]),
            (0x8A, &[ConnAck]),
            (0x8B, &[Disconnect]),
            (0x8C, &[ConnAck, Disconnect]),
            (0x8D, &[Disconnect]),
            (0x8E, &[Disconnect]),
            (0x8F, &[SubAck, UnsubAck, Disconnect]),
            (0x90, &[ConnAck, PubAck, PubRec, Disconnect]),
            (0x91, &[PubAck, PubRec, SubAck, UnsubAck]),
            (0x92, &[PubRel, PubComp]),
            (0x93, &[Disconnect]),
            (0x94, &[Disconnect]),
            (0x95, &[ConnAck, Disconnect]),
            (0x96, &[Disconnect]),
            (0x97, &[ConnAck, PubAck, PubRec, SubAck, Disconnect]),
            (0x98, &[Disconnect]),
            (0x99, &[ConnAck, PubAck, PubRec, Disconnect]),
            (0x9A, &[ConnAck, Disconnect]),
            (0x9B, &[ConnAck, Disconnect]),
            (0x9C, &[ConnAck, Disconnect]),
            (0x9D, &[ConnAck, Disconnect]),
            (0x9E, &[SubAck, Disconnect]),
            (0x9F, &[ConnAck, Disconnect]),
            (0xA0, &[Disconnect]),
            (0xA1, &[SubAck, Disconnect]),
            (0xA2, &[SubAck, Disconnect]),
        ]
    };

    /// Every cell of Table 2-6: for each of the 256 byte values and each
    /// of the 15 packet types, allowed exactly when the table says so, and
    /// a code exactly when the table has a row for it.
    #[test]
    fn table_2_6() {
        use PacketType::*;
        let packets = [
            Connect,
            ConnAck,
            Publish,
            PubAck,
            PubRec,
            PubRel,
            PubComp,
            Subscribe,
            SubAck,
            Unsubscribe,
            UnsubAck,
            PingReq,
            PingResp,
            Disconnect,
            Auth,
        ];
        for code in 0..=255u8 {
            let row = TABLE_2_6.iter().find(|(value, _)| *value == code);
            let reason = ReasonCode::from_u8(code);
            assert_eq!(reason.is_some(), row.is_some(), "code {code:#04x}");
            let (Some(reason), Some((_, allowed))) = (reason, row) else { continue };
            for packet in packets {
                assert_eq!(
                    reason.is_allowed_in(packet),
                    allowed.contains(&packet),
                    "{reason:?} ({code:#04x}) in {packet:?}"
                );
            }
        }
    }

    #[test]
    fn allowed_sets_match_the_spec_tables() {
        let count = |packet| {
            (0..=255u8).filter_map(ReasonCode::from_u8).filter(|r| r.is_allowed_in(packet)).count()
        };
        assert_eq!(count(PacketType::ConnAck), 22);
        assert_eq!(count(PacketType::PubAck), 9);
        assert_eq!(count(PacketType::PubRec), 9);
        assert_eq!(count(PacketType::PubRel), 2);
        assert_eq!(count(PacketType::PubComp), 2);
        assert_eq!(count(PacketType::SubAck), 12);
        assert_eq!(count(PacketType::UnsubAck), 7);
        assert_eq!(count(PacketType::Disconnect), 30);
        assert_eq!(count(PacketType::Auth), 3);
        assert_eq!(count(PacketType::Publish), 0);
    }
}
