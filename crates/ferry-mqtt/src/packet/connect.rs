use super::PacketType;
use crate::{
    topic, wire, wire::Reader, ByteStr, DecodeError, EncodeError, Properties, ProtocolVersion, QoS,
    ReasonCode,
};
use bytes::{BufMut, Bytes, BytesMut};

/// CONNECT (§3.1): the first packet of every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    pub protocol: ProtocolVersion,
    /// Clean Start in 5.0, Clean Session in 3.1.1.
    pub clean_start: bool,
    /// Seconds; 0 disables keep-alive.
    pub keep_alive: u16,
    pub properties: Properties,
    /// May be empty: the server then assigns one (5.0) or, in 3.1.1, only with clean session.
    pub client_id: ByteStr,
    pub will: Option<Will>,
    pub username: Option<ByteStr>,
    pub password: Option<Bytes>,
    /// A Mosquitto bridge's 3.1 or 3.1.1 CONNECT: bit 7 of its protocol
    /// level set (Mosquitto's `try_private`, EMQX reads it too). Its
    /// subscriptions then behave as v5's No Local and Retain As Published,
    /// which 3.1.1 cannot ask for, so that two bridged brokers do not send
    /// each other's messages back and forth.
    pub bridge: bool,
}

/// Bit 7 of the protocol level: the client is a bridge (`Connect::bridge`).
const BRIDGE_LEVEL: u8 = 0x80;

/// The will message of a CONNECT, published by the server if the connection
/// ends without a normal DISCONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Will {
    pub topic: ByteStr,
    pub payload: Bytes,
    pub qos: QoS,
    pub retain: bool,
    /// Will properties (5.0): will delay, payload format, expiry, content type,
    /// response topic, correlation data, user properties.
    pub properties: Properties,
}

mod flag {
    pub(super) const RESERVED: u8 = 0x01;
    pub(super) const CLEAN_START: u8 = 0x02;
    pub(super) const WILL: u8 = 0x04;
    pub(super) const WILL_QOS_SHIFT: u8 = 3;
    pub(super) const WILL_QOS_MASK: u8 = 0x18;
    pub(super) const WILL_RETAIN: u8 = 0x20;
    pub(super) const PASSWORD: u8 = 0x40;
    pub(super) const USERNAME: u8 = 0x80;
}

impl ProtocolVersion {
    /// The Protocol Name a CONNECT of this level carries.
    fn protocol_name(self) -> &'static [u8] {
        match self {
            ProtocolVersion::V31 => b"MQIsdp",
            ProtocolVersion::V311 | ProtocolVersion::V5 => b"MQTT",
        }
    }
}

impl Connect {
    /// Decodes a CONNECT body. The protocol level in the packet, not the
    /// connection's, decides the format: CONNECT is what sets it.
    /// `header_flags` are the fixed header's, which 3.1 does not reserve.
    pub(crate) fn decode(mut r: Reader, header_flags: u8) -> Result<Connect, DecodeError> {
        let name = r.binary("protocol name")?;
        // Neither "MQTT" nor "MQIsdp": not a CONNECT of any version
        // [MQTT-3.1.2-1], so there is nobody to answer.
        if name.len() != 4 && name.len() != 6 {
            return Err(DecodeError::InvalidProtocolName);
        }
        let level = r.u8("protocol level")?;
        // Mosquitto takes the bit from a v5 CONNECT too, and ignores it.
        let bridge = level & BRIDGE_LEVEL != 0;
        let unsupported = DecodeError::UnsupportedProtocolVersion(level);
        let Some(version) = ProtocolVersion::from_level(level & !BRIDGE_LEVEL) else {
            // A level no version has, from a client that may speak a later
            // one: answered in MQTT 5's format (0x84), as Mosquitto does.
            let reason = ReasonCode::UnsupportedProtocolVersion;
            return Err(unsupported.answered(reason, ProtocolVersion::V5));
        };
        let protocol = match (&name[..], version) {
            (b"MQTT", v @ (ProtocolVersion::V311 | ProtocolVersion::V5)) => v,
            (b"MQIsdp", ProtocolVersion::V31) => ProtocolVersion::V31,
            // A name and level that do not belong together: 3.1.1's return
            // code 1, which 3.1 and 3.1.1 clients both read.
            (b"MQTT" | b"MQIsdp", _) => {
                let reason = ReasonCode::UnsupportedProtocolVersion;
                return Err(unsupported.answered(reason, ProtocolVersion::V311));
            }
            _ => return Err(DecodeError::InvalidProtocolName),
        };
        // Silent, as the version is known but Mosquitto answers nothing.
        if header_flags != 0 && protocol != ProtocolVersion::V31 {
            let packet = PacketType::Connect;
            return Err(DecodeError::InvalidHeaderFlags { packet, flags: header_flags });
        }
        let v5 = protocol.is_v5();
        let bridge = bridge && !v5;
        // From here on an MQTT 5 client is told why its CONNECT failed where
        // Mosquitto tells it (§4.13.1 lets a server answer or just close):
        // a field cut short or left over is malformed (0x81), a rule broken
        // a protocol error (0x82). Faults in the fixed part (flags, keep
        // alive) and in credentials close silently, as do strings that are
        // not UTF-8; 3.x clients get no answer after the version.
        let answer = |reason: ReasonCode| {
            move |error: DecodeError| {
                if v5 {
                    error.answered(reason, protocol)
                } else {
                    error
                }
            }
        };
        let malformed = answer(ReasonCode::MalformedPacket);

        let flags = r.u8("connect flags")?;
        // 3.1 did not reserve the bit (3.1.1 did, §3.1.2.3); Mosquitto
        // ignores it in a 3.1 CONNECT.
        if flags & flag::RESERVED != 0 && protocol != ProtocolVersion::V31 {
            return Err(DecodeError::ReservedBitSet("connect flags"));
        }
        let has_will = flags & flag::WILL != 0;
        let has_username = flags & flag::USERNAME != 0;
        let has_password = flags & flag::PASSWORD != 0;
        // 5.0 lets a password stand alone, e.g. for token authentication.
        if !v5 && has_password && !has_username {
            return Err(DecodeError::PasswordWithoutUsername);
        }
        let clean_start = flags & flag::CLEAN_START != 0;
        let keep_alive = r.u16("keep alive")?;

        let properties = if v5 {
            Properties::decode(&mut r, PacketType::Connect).map_err(answer_property_fault)?
        } else {
            Properties::default()
        };
        // The will flags are looked at after the properties, so that a
        // fault there is answered whatever the flags say.
        if !has_will && flags & (flag::WILL_QOS_MASK | flag::WILL_RETAIN) != 0 {
            return Err(DecodeError::InvalidWillFlags);
        }
        let will_qos = QoS::from_u8((flags & flag::WILL_QOS_MASK) >> flag::WILL_QOS_SHIFT)
            .ok_or(DecodeError::InvalidQoS)?;
        if properties.authentication_data.is_some() && properties.authentication_method.is_none() {
            let error = DecodeError::ProtocolViolation("authentication data without a method");
            return Err(answer(ReasonCode::ProtocolError)(error));
        }

        // An empty id without clean session (3.1.1), or any empty id in 3.1,
        // is well-formed but answered with CONNACK "identifier rejected"
        // (MQTT-3.1.3-8): the server needs the decoded CONNECT to send that
        // in the right version, so it is not a decode error.
        let client_id = r.string("client identifier").map_err(|error| match error {
            DecodeError::InvalidString { .. } => {
                answer(ReasonCode::ClientIdentifierNotValid)(error)
            }
            error => error,
        })?;

        let will = if has_will {
            let properties = if v5 {
                Properties::decode_will(&mut r).map_err(answer_property_fault)?
            } else {
                Properties::default()
            };
            let topic = r.string("will topic").map_err(|error| match error {
                DecodeError::Truncated(_) => malformed(error),
                error => error,
            })?;
            if topic.is_empty() {
                let error = DecodeError::InvalidTopicName(String::new());
                return Err(answer(ReasonCode::ProtocolError)(error));
            }
            if !topic::is_valid_topic_name(&topic) {
                return Err(DecodeError::InvalidTopicName(topic.to_string()));
            }
            let payload = r.binary("will payload").map_err(malformed)?;
            let retain = flags & flag::WILL_RETAIN != 0;
            Some(Will { topic, payload, qos: will_qos, retain, properties })
        } else {
            None
        };
        let username = if has_username { Some(r.string("user name")?) } else { None };
        let password = if has_password { Some(r.binary("password")?) } else { None };
        r.finish().map_err(malformed)?;
        Ok(Connect {
            protocol,
            clean_start,
            keep_alive,
            properties,
            client_id,
            will,
            username,
            password,
            bridge,
        })
    }

    /// Remaining length of the encoded CONNECT. Like decoding, encoding
    /// follows `self.protocol`, whatever the connection's version.
    pub(crate) fn body_len(&self) -> Result<usize, EncodeError> {
        let protocol = self.protocol;
        if !protocol.is_v5() && self.password.is_some() && self.username.is_none() {
            return Err(EncodeError::Invalid(
                "CONNECT",
                "password without user name before MQTT 5",
            ));
        }
        // Protocol name, level, flags, keep alive.
        let mut len = 2 + protocol.protocol_name().len() + 1 + 1 + 2;
        len += self.properties.wire_len(protocol)?;
        len += wire::binary_len(self.client_id.as_bytes(), "client identifier")?;
        if let Some(will) = &self.will {
            len += will.properties.wire_len(protocol)?;
            len += wire::binary_len(will.topic.as_bytes(), "will topic")?;
            len += wire::binary_len(&will.payload, "will payload")?;
        }
        if let Some(username) = &self.username {
            len += wire::binary_len(username.as_bytes(), "user name")?;
        }
        if let Some(password) = &self.password {
            len += wire::binary_len(password, "password")?;
        }
        Ok(len)
    }

    pub(crate) fn write_body(&self, buf: &mut BytesMut) {
        let protocol = self.protocol;
        wire::put_binary(buf, protocol.protocol_name());
        let bridge = if self.bridge && !protocol.is_v5() { BRIDGE_LEVEL } else { 0 };
        buf.put_u8(protocol as u8 | bridge);
        let mut flags = 0;
        if self.clean_start {
            flags |= flag::CLEAN_START;
        }
        if let Some(will) = &self.will {
            flags |= flag::WILL | (will.qos as u8) << flag::WILL_QOS_SHIFT;
            if will.retain {
                flags |= flag::WILL_RETAIN;
            }
        }
        if self.username.is_some() {
            flags |= flag::USERNAME;
        }
        if self.password.is_some() {
            flags |= flag::PASSWORD;
        }
        buf.put_u8(flags);
        buf.put_u16(self.keep_alive);
        self.properties.write(protocol, buf);
        wire::put_binary(buf, self.client_id.as_bytes());
        if let Some(will) = &self.will {
            will.properties.write(protocol, buf);
            wire::put_binary(buf, will.topic.as_bytes());
            wire::put_binary(buf, &will.payload);
        }
        if let Some(username) = &self.username {
            wire::put_binary(buf, username.as_bytes());
        }
        if let Some(password) = &self.password {
            wire::put_binary(buf, password);
        }
    }
}

/// How an MQTT 5 CONNECT's fault in its properties or its will's is
/// answered: as Mosquitto does, a property cut short or unknown is
/// malformed (0x81), one duplicated, misplaced or out of range a protocol
/// error (0x82), and a string that is not UTF-8 is not answered.
fn answer_property_fault(error: DecodeError) -> DecodeError {
    let reason = match &error {
        DecodeError::Truncated(_)
        | DecodeError::UnknownProperty(_)
        | DecodeError::MalformedVariableInteger(_) => ReasonCode::MalformedPacket,
        DecodeError::PropertyNotAllowed { .. }
        | DecodeError::DuplicateProperty(_)
        | DecodeError::InvalidPropertyValue(_) => ReasonCode::ProtocolError,
        _ => return error,
    };
    error.answered(reason, ProtocolVersion::V5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PropertyValues;
    use crate::{test_support::*, Packet, ReasonCode, StrError};
    use ProtocolVersion::*;

    /// §3.1.2.10's variable header (flags 0xCE: user name, password, will
    /// QoS 1, will, clean session; keep alive 10), with a payload.
    #[rustfmt::skip]
    fn v311_connect() -> Vec<u8> {
        frame(
            0x10,
            &[
                &[0, 4][..], b"MQTT", &[4, 0xCE, 0, 10],
                &[0, 3], b"abc",
                &[0, 3], b"a/b",
                &[0, 2], b"hi",
                &[0, 4], b"user",
                &[0, 4], b"pass",
            ]
            .concat(),
        )
    }

    fn connect_body(level_name: &[u8], level: u8, flags: u8, rest: &[&[u8]]) -> Vec<u8> {
        let mut body =
            [&[0, level_name.len() as u8][..], level_name, &[level, flags, 0, 60]].concat();
        body.extend(rest.concat());
        frame(0x10, &body)
    }

    #[test]
    fn v311_connect_from_the_spec() {
        let expected = Packet::Connect(Box::new(Connect {
            protocol: V311,
            clean_start: true,
            keep_alive: 10,
            properties: Properties::default(),
            client_id: "abc".into(),
            will: Some(Will {
                topic: "a/b".into(),
                payload: Bytes::from_static(b"hi"),
                qos: QoS::AtLeastOnce,
                retain: false,
                properties: Properties::default(),
            }),
            username: Some("user".into()),
            password: Some(Bytes::from_static(b"pass")),
            bridge: false,
        }));
        assert_wire(&v311_connect(), V311, &expected);
        // CONNECT names its own version: the connection's does not matter.
        assert_eq!(decode(&v311_connect(), V5), Ok(expected.clone()));
        // Encoding follows the packet's protocol, not the argument.
        assert_eq!(encode(&expected, V5), v311_connect());
    }

    #[test]
    fn v31_connect() {
        let wire = connect_body(b"MQIsdp", 3, 0x02, &[&[0, 2], b"id"]);
        let Packet::Connect(connect) = decode(&wire, V311).unwrap() else { panic!() };
        assert_eq!(connect.protocol, V31);
        assert_eq!(connect.client_id, "id");
        assert_wire(&wire, V31, &Packet::Connect(connect));
    }

    #[test]
    fn a_bridge_sets_bit_7_of_a_3_1_or_3_1_1_protocol_level() {
        for (name, level, protocol) in [(&b"MQTT"[..], 4, V311), (&b"MQIsdp"[..], 3, V31)] {
            let wire = connect_body(name, level | 0x80, 0x02, &[&[0, 2], b"id"]);
            let Packet::Connect(connect) = decode(&wire, V311).unwrap() else { panic!() };
            assert_eq!((connect.protocol, connect.bridge), (protocol, true));
            assert_wire(&wire, protocol, &Packet::Connect(connect));
        }
        // Taken from a v5 CONNECT too, and ignored there, as Mosquitto does.
        let wire = connect_body(b"MQTT", 5 | 0x80, 0x02, &[&[0], &[0, 2], b"id"]);
        let Packet::Connect(connect) = decode(&wire, V5).unwrap() else { panic!() };
        assert_eq!((connect.protocol, connect.bridge), (V5, false));
    }

    #[test]
    #[rustfmt::skip]
    fn v5_connect_with_properties() {
        let wire = frame(
            0x10,
            &[
                &[0, 4][..], b"MQTT", &[5, 0x76, 0, 60],
                // Session expiry 10, receive maximum 20, user property k=v.
                &[15, 0x11, 0, 0, 0, 10, 0x21, 0, 20, 0x26, 0, 1], b"k", &[0, 1], b"v",
                &[0, 2], b"c1",
                // Will delay 5.
                &[5, 0x18, 0, 0, 0, 5],
                &[0, 1], b"t",
                &[0, 0],
                &[0, 3], b"pwd",
            ]
            .concat(),
        );
        let expected = Packet::Connect(Box::new(Connect {
            protocol: V5,
            clean_start: true,
            keep_alive: 60,
            properties: PropertyValues {
                session_expiry_interval: Some(10),
                receive_maximum: Some(20),
                user_properties: vec![("k".into(), "v".into())],
                ..PropertyValues::default()
            }.into(),
            client_id: "c1".into(),
            will: Some(Will {
                topic: "t".into(),
                payload: Bytes::new(),
                qos: QoS::ExactlyOnce,
                retain: true,
                properties: PropertyValues { will_delay_interval: Some(5), ..PropertyValues::default() }.into(),
            }),
            // 5.0 allows a password without a user name.
            username: None,
            password: Some(Bytes::from_static(b"pwd")),
            bridge: false,
        }));
        assert_wire(&wire, V5, &expected);
    }

    #[test]
    fn protocol_name_and_level() {
        let id: &[&[u8]] = &[&[0, 1], b"x"];
        // Not MQTT's name: nobody to answer.
        for name in [&b"MQTX"[..], b"mqtt", b"MQT", b"MQIsdpx"] {
            assert_eq!(
                decode_err(&connect_body(name, 4, 2, id), V311),
                DecodeError::InvalidProtocolName
            );
        }
        let unsupported = |level| DecodeError::UnsupportedProtocolVersion(level);
        let answered = |level, format| {
            unsupported(level).answered(ReasonCode::UnsupportedProtocolVersion, format)
        };
        // A level no version has: MQTT 5's CONNACK 0x84, whatever the name.
        assert_eq!(decode_err(&connect_body(b"MQTT", 6, 2, id), V311), answered(6, V5));
        assert_eq!(decode_err(&connect_body(b"MQIsdp", 2, 2, id), V311), answered(2, V5));
        // A name and a level of different versions: 3.1.1's return code 1.
        assert_eq!(decode_err(&connect_body(b"MQTT", 3, 2, id), V311), answered(3, V311));
        assert_eq!(decode_err(&connect_body(b"MQIsdp", 4, 2, id), V311), answered(4, V311));
        let error = answered(6, V5);
        assert_eq!(error.reason_code(), ReasonCode::UnsupportedProtocolVersion);
        assert_eq!(error.connack(), Some((ReasonCode::UnsupportedProtocolVersion, V5)));
        assert_eq!(error.to_string(), unsupported(6).to_string());
        assert_eq!(DecodeError::InvalidProtocolName.connack(), None);
    }

    #[test]
    fn header_flags_are_checked_once_the_version_is_known() {
        let id: &[&[u8]] = &[&[0, 1], b"x"];
        let mut v311 = connect_body(b"MQTT", 4, 2, id);
        v311[0] = 0x11;
        assert_eq!(
            decode_err(&v311, V311),
            DecodeError::InvalidHeaderFlags { packet: PacketType::Connect, flags: 1 }
        );
        // 3.1 reserved none, and Mosquitto accepts them there.
        let mut v31 = connect_body(b"MQIsdp", 3, 2, id);
        v31[0] = 0x14;
        let decoded = Packet::decode(&mut bytes::BytesMut::from(&v31[..]), V311, 1024);
        assert!(matches!(decoded, Ok(Some(Packet::Connect(_)))), "{decoded:?}");
    }

    fn protocol_error(cause: DecodeError) -> DecodeError {
        cause.answered(ReasonCode::ProtocolError, V5)
    }

    fn malformed(cause: DecodeError) -> DecodeError {
        cause.answered(ReasonCode::MalformedPacket, V5)
    }

    #[test]
    fn v5_faults_answered_as_mosquitto_answers_them() {
        // A property cut short is malformed before it is misplaced.
        let cut: &[&[u8]] = &[&[2, 0x23, 0], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, cut), V5),
            malformed(DecodeError::Truncated("topic alias"))
        );
        // So is a duplicate followed by a property cut short.
        let twice_then_cut: &[&[u8]] = &[&[8, 0x21, 0, 1, 0x21, 0, 2, 0x11, 0], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, twice_then_cut), V5),
            malformed(DecodeError::Truncated("session expiry interval"))
        );
        let unknown: &[&[u8]] = &[&[2, 0x04, 0], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, unknown), V5),
            malformed(DecodeError::UnknownProperty(0x04))
        );
        // A client identifier that is not UTF-8: 0x85.
        let bad_id: &[&[u8]] = &[&[0], &[0, 3], &[0xED, 0xA0, 0x80]];
        let error = decode_err(&connect_body(b"MQTT", 5, 0x02, bad_id), V5);
        assert_eq!(error.connack(), Some((ReasonCode::ClientIdentifierNotValid, V5)));
        // ... which a 3.1.1 client is not told.
        let error = decode_err(&connect_body(b"MQTT", 4, 0x02, &bad_id[1..]), V311);
        assert!(matches!(error, DecodeError::InvalidString { .. }), "{error:?}");
        // A will cut short: malformed; an empty will topic: a protocol error;
        // a will topic with a wildcard: no answer.
        let no_payload: &[&[u8]] = &[&[0], &[0, 1], b"x", &[0], &[0, 1], b"t"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x06, no_payload), V5),
            malformed(DecodeError::Truncated("will payload"))
        );
        let no_topic: &[&[u8]] = &[&[0], &[0, 1], b"x", &[0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x06, no_topic), V5),
            malformed(DecodeError::Truncated("will topic"))
        );
        let empty_topic: &[&[u8]] = &[&[0], &[0, 1], b"x", &[0], &[0, 0], &[0, 0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x06, empty_topic), V5),
            protocol_error(DecodeError::InvalidTopicName(String::new()))
        );
        let wildcard: &[&[u8]] = &[&[0], &[0, 1], b"x", &[0], &[0, 1], b"#", &[0, 0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x06, wildcard), V5),
            DecodeError::InvalidTopicName("#".into())
        );
        // Bytes after the last field: malformed in 5.0, silent in 3.1.1.
        let extra: &[&[u8]] = &[&[0], &[0, 1], b"x", &[9]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, extra), V5),
            malformed(DecodeError::TrailingBytes(1))
        );
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x02, &extra[1..]), V311),
            DecodeError::TrailingBytes(1)
        );
        // The fixed part and the credentials: no answer.
        let user_cut: &[&[u8]] = &[&[0], &[0, 1], b"x", &[0, 5], b"ab"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x82, user_cut), V5),
            DecodeError::Truncated("user name")
        );
    }

    #[test]
    fn connect_flag_rules() {
        let id: &[&[u8]] = &[&[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x03, id), V311),
            DecodeError::ReservedBitSet("connect flags")
        );
        // 3.1 reserved no bit there.
        let Packet::Connect(connect) = decode(&connect_body(b"MQIsdp", 3, 0x03, id), V311).unwrap()
        else {
            panic!("not a CONNECT")
        };
        assert!(connect.clean_start);
        // Will QoS or retain without the will flag.
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x0A, id), V311),
            DecodeError::InvalidWillFlags
        );
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x22, &[&[0], id[0], id[1]]), V5),
            DecodeError::InvalidWillFlags
        );
        // Will QoS 3.
        let will: &[&[u8]] = &[&[0, 1], b"x", &[0, 1], b"t", &[0, 0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x1E, will), V311),
            DecodeError::InvalidQoS
        );
        // Password without user name: refused before 5.0 only.
        let pass: &[&[u8]] = &[&[0, 1], b"x", &[0, 1], b"p"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x42, pass), V311),
            DecodeError::PasswordWithoutUsername
        );
        assert_eq!(
            decode_err(&connect_body(b"MQIsdp", 3, 0x42, pass), V311),
            DecodeError::PasswordWithoutUsername
        );
        let v5_pass: &[&[u8]] = &[&[0, 0, 1], b"x", &[0, 1], b"p"];
        assert!(decode(&connect_body(b"MQTT", 5, 0x42, v5_pass), V5).is_ok());
    }

    #[test]
    fn will_topic_must_be_a_topic_name() {
        let will: &[&[u8]] = &[&[0, 1], b"x", &[0, 3], b"a/#", &[0, 0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x06, will), V311),
            DecodeError::InvalidTopicName("a/#".into())
        );
        let empty: &[&[u8]] = &[&[0, 1], b"x", &[0, 0], &[0, 0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x06, empty), V311),
            DecodeError::InvalidTopicName("".into())
        );
    }

    #[test]
    fn client_identifier_rules() {
        let invalid: &[&[u8]] = &[&[0, 2, 0xC3, 0x28]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x02, invalid), V311),
            DecodeError::InvalidString { field: "client identifier", error: StrError::InvalidUtf8 }
        );
        // Empty ids are the server's to refuse, with a CONNACK.
        let empty: &[&[u8]] = &[&[0, 0]];
        assert!(decode(&connect_body(b"MQTT", 4, 0x02, empty), V311).is_ok());
        assert!(decode(&connect_body(b"MQTT", 4, 0x00, empty), V311).is_ok());
        assert!(decode(&connect_body(b"MQIsdp", 3, 0x02, empty), V311).is_ok());
        assert!(decode(&connect_body(b"MQTT", 5, 0x00, &[&[0], &[0, 0]]), V5).is_ok());
    }

    #[test]
    fn truncated_and_trailing() {
        let trailing: &[&[u8]] = &[&[0, 1], b"x", &[9]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x02, trailing), V311),
            DecodeError::TrailingBytes(1)
        );
        let no_user: &[&[u8]] = &[&[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 4, 0x82, no_user), V311),
            DecodeError::Truncated("user name")
        );
        assert_eq!(
            decode_err(&frame(0x10, &[0, 4, b'M', b'Q']), V311),
            DecodeError::Truncated("protocol name")
        );
        assert_eq!(
            decode_err(&frame(0x10, &[0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0]), V311),
            DecodeError::Truncated("keep alive")
        );
    }

    #[test]
    fn v5_property_rules() {
        // Topic alias is a PUBLISH property.
        let alias: &[&[u8]] = &[&[3, 0x23, 0, 1], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, alias), V5),
            protocol_error(DecodeError::PropertyNotAllowed {
                property: 0x23,
                packet: PacketType::Connect
            })
        );
        // Session expiry is not a will property.
        let will: &[&[u8]] = &[&[0], &[0, 1], b"x", &[5, 0x11, 0, 0, 0, 1], &[0, 1], b"t", &[0, 0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x06, will), V5),
            protocol_error(DecodeError::PropertyNotAllowed {
                property: 0x11,
                packet: PacketType::Connect
            })
        );
        // Request problem information is 0 or 1.
        let rpi: &[&[u8]] = &[&[2, 0x17, 2], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, rpi), V5),
            protocol_error(DecodeError::InvalidPropertyValue(0x17))
        );
        // Receive maximum and maximum packet size are nonzero.
        let rm: &[&[u8]] = &[&[3, 0x21, 0, 0], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, rm), V5),
            protocol_error(DecodeError::InvalidPropertyValue(0x21))
        );
        let mps: &[&[u8]] = &[&[5, 0x27, 0, 0, 0, 0], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, mps), V5),
            protocol_error(DecodeError::InvalidPropertyValue(0x27))
        );
        let twice: &[&[u8]] = &[&[6, 0x21, 0, 1, 0x21, 0, 2], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, twice), V5),
            protocol_error(DecodeError::DuplicateProperty(0x21))
        );
        // Authentication data needs a method (§3.1.2.11.10).
        let data: &[&[u8]] = &[&[4, 0x16, 0, 1, 7], &[0, 1], b"x"];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x02, data), V5),
            protocol_error(DecodeError::ProtocolViolation("authentication data without a method"))
        );
        // A will Response Topic is a topic name.
        let response: &[&[u8]] =
            &[&[0], &[0, 1], b"x", &[4, 0x08, 0, 1, b'#'], &[0, 1], b"t", &[0, 0]];
        assert_eq!(
            decode_err(&connect_body(b"MQTT", 5, 0x06, response), V5),
            protocol_error(DecodeError::InvalidPropertyValue(0x08))
        );
    }

    #[test]
    fn encoder_refuses_password_without_user_name_before_v5() {
        let mut connect = Connect {
            protocol: V311,
            clean_start: true,
            keep_alive: 0,
            properties: Properties::default(),
            client_id: "x".into(),
            will: None,
            username: None,
            password: Some(Bytes::from_static(b"p")),
            bridge: false,
        };
        let mut buf = BytesMut::new();
        let packet = Packet::Connect(Box::new(connect.clone()));
        assert!(matches!(packet.encode(V311, &mut buf), Err(EncodeError::Invalid(..))));
        assert!(buf.is_empty());
        assert_eq!(packet.encoded_len(V311), 0);
        connect.protocol = V5;
        let packet = Packet::Connect(Box::new(connect));
        assert_eq!(decode(&encode(&packet, V5), V5), Ok(packet));
    }
}
