//! Property tests: every valid packet survives encode → decode unchanged,
//! and no input makes the decoder panic.
//!
//! The generators only build packets that are valid in the version they
//! target (3.1.1 packets have default properties and reasons 3.1.1 can
//! express), since the encoder drops what a version cannot carry.

use bytes::{Bytes, BytesMut};
use ferry_mqtt::{
    packet::PacketType, publish_packet_id_offset, Auth, ByteStr, ConnAck, Connect, Disconnect,
    Packet, Properties, ProtocolVersion, PubAck, Publish, QoS, ReasonCode, RetainHandling, SubAck,
    Subscribe, SubscriptionOptions, UnsubAck, Unsubscribe, Will,
};
use proptest::{collection::vec, option, prelude::*, sample::select};

const V311: ProtocolVersion = ProtocolVersion::V311;
const V5: ProtocolVersion = ProtocolVersion::V5;

// ---------------------------------------------------------------- strings

/// Any MQTT string: no U+0000, but other control characters and non-ASCII.
fn text() -> impl Strategy<Value = ByteStr> {
    prop_oneof!["[a-zA-Z0-9 _-]{0,12}", "[^\u{0}]{0,8}",].prop_map(ByteStr::from)
}

fn bytes() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..24).prop_map(Bytes::from)
}

fn topic_name() -> impl Strategy<Value = ByteStr> {
    prop_oneof![
        "[a-z0-9$]{0,4}(/[a-z0-9]{0,4}){0,3}".prop_filter("nonempty", |t| !t.is_empty()),
        "[^+#\u{0}]{1,10}",
    ]
    .prop_map(ByteStr::from)
}

fn plain_filter() -> impl Strategy<Value = String> {
    let level = prop_oneof![Just("+".to_string()), "[a-z0-9]{0,3}", "[^+#/\u{0}]{1,3}"];
    (vec(level, 1..5), any::<bool>()).prop_map(|(levels, hash)| {
        let mut filter = levels.join("/");
        if filter.is_empty() {
            filter.push('a');
        }
        if hash {
            filter.push_str("/#");
        }
        filter
    })
}

/// A valid topic filter and whether it is a shared subscription.
fn topic_filter() -> impl Strategy<Value = (ByteStr, bool)> {
    prop_oneof![
        4 => plain_filter().prop_map(|f| (ByteStr::from(f), false)),
        1 => Just((ByteStr::from("#"), false)),
        2 => ("[a-z0-9]{1,5}", plain_filter())
            .prop_map(|(group, f)| (ByteStr::from(format!("$share/{group}/{f}")), true)),
    ]
}

// ------------------------------------------------------------- properties

/// Builds a `Properties` from up to `max` generated entries, keeping those
/// whose identifier is in `allowed` (a later entry of the same identifier
/// replaces an earlier one, so nothing is duplicated).
fn properties(allowed: &'static [u8], max: usize) -> BoxedStrategy<Properties> {
    let entry = (0..27usize, any::<u32>(), any::<u16>(), text(), text(), bytes(), topic_name());
    vec(entry, 0..=max)
        .prop_map(move |entries| {
            let mut p = Properties::default();
            let flag = |n: u32| (n % 2) as u8;
            for (which, n32, n16, s1, s2, b, topic) in entries {
                let id = [
                    0x01, 0x02, 0x03, 0x08, 0x09, 0x0B, 0x11, 0x12, 0x13, 0x15, 0x16, 0x17, 0x18,
                    0x19, 0x1A, 0x1C, 0x1F, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29,
                    0x2A,
                ][which];
                if !allowed.contains(&id) {
                    continue;
                }
                match id {
                    0x01 => p.payload_format_indicator = Some(flag(n32)),
                    0x02 => p.message_expiry_interval = Some(n32),
                    0x03 => p.content_type = Some(s1),
                    0x08 => p.response_topic = Some(topic),
                    0x09 => p.correlation_data = Some(b),
                    0x0B => {
                        let sub_id = 1 + n32 % 268_435_455;
                        // Repeats are allowed in PUBLISH only (which has 0x23).
                        if allowed.contains(&0x23) {
                            p.subscription_identifiers.push(sub_id);
                        } else {
                            p.subscription_identifiers = vec![sub_id];
                        }
                    }
                    0x11 => p.session_expiry_interval = Some(n32),
                    0x12 => p.assigned_client_identifier = Some(s1),
                    0x13 => p.server_keep_alive = Some(n16),
                    0x15 => p.authentication_method = Some(s1),
                    0x16 => p.authentication_data = Some(b),
                    0x17 => p.request_problem_information = Some(flag(n32)),
                    0x18 => p.will_delay_interval = Some(n32),
                    0x19 => p.request_response_information = Some(flag(n32)),
                    0x1A => p.response_information = Some(s1),
                    0x1C => p.server_reference = Some(s1),
                    0x1F => p.reason_string = Some(s1),
                    0x21 => p.receive_maximum = Some(n16.max(1)),
                    0x22 => p.topic_alias_maximum = Some(n16),
                    0x23 => p.topic_alias = Some(n16.max(1)),
                    0x24 => p.maximum_qos = Some(flag(n32)),
                    0x25 => p.retain_available = Some(flag(n32)),
                    0x26 => p.user_properties.push((s1, s2)),
                    0x27 => p.maximum_packet_size = Some(n32.max(1)),
                    0x28 => p.wildcard_subscription_available = Some(flag(n32)),
                    0x29 => p.subscription_identifier_available = Some(flag(n32)),
                    _ => p.shared_subscription_available = Some(flag(n32)),
                }
            }
            // CONNECT refuses authentication data without a method.
            if p.authentication_data.is_some() && p.authentication_method.is_none() {
                p.authentication_method = Some(ByteStr::from("m"));
            }
            p
        })
        .boxed()
}

const CONNECT_PROPS: &[u8] = &[0x11, 0x15, 0x16, 0x17, 0x19, 0x21, 0x22, 0x26, 0x27];
const WILL_PROPS: &[u8] = &[0x01, 0x02, 0x03, 0x08, 0x09, 0x18, 0x26];
const CONNACK_PROPS: &[u8] = &[
    0x11, 0x12, 0x13, 0x15, 0x16, 0x1A, 0x1C, 0x1F, 0x21, 0x22, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29,
    0x2A,
];
const PUBLISH_PROPS: &[u8] = &[0x01, 0x02, 0x03, 0x08, 0x09, 0x0B, 0x23, 0x26];
const ACK_PROPS: &[u8] = &[0x1F, 0x26];
const SUBSCRIBE_PROPS: &[u8] = &[0x0B, 0x26];
const UNSUBSCRIBE_PROPS: &[u8] = &[0x26];
const DISCONNECT_PROPS: &[u8] = &[0x11, 0x1C, 0x1F, 0x26];
const AUTH_PROPS: &[u8] = &[0x15, 0x16, 0x1F, 0x26];

/// Properties for `version`: always empty before 5.0.
fn props_for(
    version: ProtocolVersion,
    allowed: &'static [u8],
    max: usize,
) -> BoxedStrategy<Properties> {
    if version.is_v5() {
        properties(allowed, max)
    } else {
        Just(Properties::default()).boxed()
    }
}

/// Reason codes MQTT 5 allows in `packet`.
fn reason(packet: PacketType) -> impl Strategy<Value = ReasonCode> {
    let allowed: Vec<ReasonCode> =
        (0..=255u8).filter_map(ReasonCode::from_u8).filter(|r| r.is_allowed_in(packet)).collect();
    select(allowed)
}

fn qos() -> impl Strategy<Value = QoS> {
    select(vec![QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce])
}

fn packet_id() -> impl Strategy<Value = u16> {
    1..=u16::MAX
}

// ---------------------------------------------------------------- packets

fn connect(version: ProtocolVersion) -> impl Strategy<Value = Packet> {
    let protocols = if version.is_v5() {
        vec![ProtocolVersion::V5]
    } else {
        vec![ProtocolVersion::V31, ProtocolVersion::V311]
    };
    let will = (topic_name(), bytes(), qos(), any::<bool>(), props_for(version, WILL_PROPS, 4))
        .prop_map(|(topic, payload, qos, retain, properties)| Will {
            topic,
            payload,
            qos,
            retain,
            properties,
        });
    (
        select(protocols),
        any::<bool>(),
        any::<u16>(),
        props_for(version, CONNECT_PROPS, 5),
        text(),
        option::of(will),
        option::of(text()),
        option::of(bytes()),
        any::<bool>(),
    )
        .prop_map(
            |(
                protocol,
                clean_start,
                keep_alive,
                properties,
                client_id,
                will,
                username,
                mut password,
                bridge,
            )| {
                if !protocol.is_v5() && username.is_none() {
                    password = None;
                }
                Packet::Connect(Box::new(Connect {
                    protocol,
                    clean_start,
                    keep_alive,
                    properties,
                    client_id,
                    will,
                    username,
                    password,
                    // Only 3.1 and 3.1.1 keep it.
                    bridge: bridge && !protocol.is_v5(),
                }))
            },
        )
}

fn connack(version: ProtocolVersion) -> BoxedStrategy<Packet> {
    let reasons = if version.is_v5() {
        reason(PacketType::ConnAck).boxed()
    } else {
        (0..=5u8).prop_map(|code| ReasonCode::from_v3_connack(code).unwrap()).boxed()
    };
    (any::<bool>(), reasons, props_for(version, CONNACK_PROPS, 6))
        .prop_map(|(session_present, reason_code, properties)| {
            Packet::ConnAck(ConnAck {
                session_present: session_present && reason_code == ReasonCode::Success,
                reason_code,
                properties,
            })
        })
        .boxed()
}

fn publish(version: ProtocolVersion) -> impl Strategy<Value = Packet> {
    (
        any::<bool>(),
        qos(),
        any::<bool>(),
        topic_name(),
        any::<bool>(),
        packet_id(),
        props_for(version, PUBLISH_PROPS, 5),
        vec(any::<u8>(), 0..64),
    )
        .prop_map(
            move |(dup, qos, retain, topic, empty_topic, id, mut properties, payload)| {
                // An empty topic needs a topic alias, which only 5.0 has.
                let topic = if empty_topic && version.is_v5() {
                    properties.topic_alias.get_or_insert(1);
                    ByteStr::default()
                } else {
                    topic
                };
                let qos0 = qos == QoS::AtMostOnce;
                Packet::Publish(Publish {
                    dup: dup && !qos0,
                    qos,
                    retain,
                    topic,
                    packet_id: if qos0 { 0 } else { id },
                    properties,
                    payload: Bytes::from(payload),
                })
            },
        )
}

fn pub_ack(version: ProtocolVersion, packet: PacketType) -> BoxedStrategy<Packet> {
    let reasons =
        if version.is_v5() { reason(packet).boxed() } else { Just(ReasonCode::Success).boxed() };
    (packet_id(), reasons, props_for(version, ACK_PROPS, 3))
        .prop_map(move |(packet_id, reason_code, properties)| {
            let ack = PubAck { packet_id, reason_code, properties };
            match packet {
                PacketType::PubAck => Packet::PubAck(ack),
                PacketType::PubRec => Packet::PubRec(ack),
                PacketType::PubRel => Packet::PubRel(ack),
                _ => Packet::PubComp(ack),
            }
        })
        .boxed()
}

fn subscribe(version: ProtocolVersion) -> impl Strategy<Value = Packet> {
    let entry = (
        topic_filter(),
        qos(),
        any::<bool>(),
        any::<bool>(),
        select(vec![
            RetainHandling::SendOnSubscribe,
            RetainHandling::SendIfNewSubscription,
            RetainHandling::DoNotSend,
        ]),
    )
        .prop_map(move |((filter, shared), qos, no_local, rap, retain_handling)| {
            let options = if version.is_v5() {
                SubscriptionOptions {
                    qos,
                    no_local: no_local && !shared,
                    retain_as_published: rap,
                    retain_handling,
                }
            } else {
                SubscriptionOptions { qos, ..SubscriptionOptions::default() }
            };
            (filter, options)
        });
    (packet_id(), props_for(version, SUBSCRIBE_PROPS, 3), vec(entry, 1..5)).prop_map(
        |(packet_id, properties, filters)| {
            Packet::Subscribe(Subscribe { packet_id, properties, filters })
        },
    )
}

fn suback(version: ProtocolVersion) -> impl Strategy<Value = Packet> {
    let reasons = if version.is_v5() {
        reason(PacketType::SubAck).boxed()
    } else {
        select(vec![
            ReasonCode::Success,
            ReasonCode::GrantedQoS1,
            ReasonCode::GrantedQoS2,
            ReasonCode::UnspecifiedError,
        ])
        .boxed()
    };
    (packet_id(), props_for(version, ACK_PROPS, 3), vec(reasons, 1..6)).prop_map(
        |(packet_id, properties, reason_codes)| {
            Packet::SubAck(SubAck { packet_id, properties, reason_codes })
        },
    )
}

fn unsubscribe(version: ProtocolVersion) -> impl Strategy<Value = Packet> {
    (packet_id(), props_for(version, UNSUBSCRIBE_PROPS, 3), vec(topic_filter(), 1..5)).prop_map(
        |(packet_id, properties, filters)| {
            let filters = filters.into_iter().map(|(filter, _)| filter).collect();
            Packet::Unsubscribe(Unsubscribe { packet_id, properties, filters })
        },
    )
}

fn unsuback(version: ProtocolVersion) -> BoxedStrategy<Packet> {
    if version.is_v5() {
        (packet_id(), properties(ACK_PROPS, 3), vec(reason(PacketType::UnsubAck), 0..6))
            .prop_map(|(packet_id, properties, reason_codes)| {
                Packet::UnsubAck(UnsubAck { packet_id, properties, reason_codes })
            })
            .boxed()
    } else {
        packet_id()
            .prop_map(|packet_id| {
                Packet::UnsubAck(UnsubAck {
                    packet_id,
                    properties: Properties::default(),
                    reason_codes: Vec::new(),
                })
            })
            .boxed()
    }
}

fn disconnect(version: ProtocolVersion) -> BoxedStrategy<Packet> {
    if version.is_v5() {
        (reason(PacketType::Disconnect), properties(DISCONNECT_PROPS, 4))
            .prop_map(|(reason_code, properties)| {
                Packet::Disconnect(Disconnect { reason_code, properties })
            })
            .boxed()
    } else {
        Just(Packet::Disconnect(Disconnect {
            reason_code: ReasonCode::Success,
            properties: Properties::default(),
        }))
        .boxed()
    }
}

fn auth() -> impl Strategy<Value = Packet> {
    (reason(PacketType::Auth), properties(AUTH_PROPS, 4))
        .prop_map(|(reason_code, properties)| Packet::Auth(Auth { reason_code, properties }))
}

/// Any packet valid in `version`.
fn packet(version: ProtocolVersion) -> BoxedStrategy<Packet> {
    let mut all = vec![
        connect(version).boxed(),
        connack(version),
        publish(version).boxed(),
        pub_ack(version, PacketType::PubAck),
        pub_ack(version, PacketType::PubRec),
        pub_ack(version, PacketType::PubRel),
        pub_ack(version, PacketType::PubComp),
        subscribe(version).boxed(),
        suback(version).boxed(),
        unsubscribe(version).boxed(),
        unsuback(version),
        Just(Packet::PingReq).boxed(),
        Just(Packet::PingResp).boxed(),
        disconnect(version),
    ];
    if version.is_v5() {
        all.push(auth().boxed());
    }
    proptest::strategy::Union::new(all).boxed()
}

// ------------------------------------------------------------------ tests

/// `publish_packet_id_offset` finds the packet id of an encoded PUBLISH.
fn assert_packet_id_offset(packet: &Packet, encoded: &[u8]) -> Result<(), TestCaseError> {
    let id = publish_packet_id_offset(encoded).and_then(|at| encoded.get(at..at + 2));
    match packet {
        Packet::Publish(publish) if publish.qos != QoS::AtMostOnce => {
            prop_assert_eq!(id, Some(&publish.packet_id.to_be_bytes()[..]));
        }
        _ => prop_assert_eq!(id, None),
    }
    Ok(())
}

/// Encodes, checks `encoded_len`, and decodes back with the tightest limit.
fn assert_round_trip(packet: &Packet, version: ProtocolVersion) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::new();
    packet.encode(version, &mut buf).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(packet.encoded_len(version), buf.len());
    assert_packet_id_offset(packet, &buf)?;
    let max = u32::try_from(buf.len()).unwrap();
    let decoded = Packet::decode(&mut buf, version, max);
    prop_assert_eq!(decoded, Ok(Some(packet.clone())));
    prop_assert!(buf.is_empty());
    Ok(())
}

/// Decodes every packet of `input` until an error or the end; each decoded
/// packet must survive re-encoding. Mirrors the fuzz target.
fn decode_all(input: &[u8], version: ProtocolVersion) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::from(input);
    while let Ok(Some(packet)) = Packet::decode(&mut buf, version, u32::MAX) {
        let mut again = BytesMut::new();
        packet.encode(version, &mut again).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(packet.encoded_len(version), again.len());
        assert_packet_id_offset(&packet, &again)?;
        prop_assert_eq!(Packet::decode(&mut again, version, u32::MAX), Ok(Some(packet)));
        prop_assert!(again.is_empty());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn v311_packets_round_trip(packet in packet(V311)) {
        assert_round_trip(&packet, V311)?;
    }

    #[test]
    fn v5_packets_round_trip(packet in packet(V5)) {
        assert_round_trip(&packet, V5)?;
    }

    #[test]
    fn v31_connection_round_trips_v311_packets(packet in packet(V311)) {
        // But for 3.1's CONNACK, which has no session present flag.
        let packet = match packet {
            Packet::ConnAck(ack) => Packet::ConnAck(ConnAck { session_present: false, ..ack }),
            other => other,
        };
        assert_round_trip(&packet, ProtocolVersion::V31)?;
    }

    /// Split anywhere, a stream of packets decodes to the same packets.
    #[test]
    fn streams_decode_across_any_split(
        packets in vec(packet(V5), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut wire = BytesMut::new();
        for packet in &packets {
            packet.encode(V5, &mut wire).unwrap();
        }
        let cut = cut.index(wire.len() + 1);
        let mut buf = BytesMut::from(&wire[..cut]);
        let mut decoded = Vec::new();
        while let Some(packet) = Packet::decode(&mut buf, V5, u32::MAX).unwrap() {
            decoded.push(packet);
        }
        buf.extend_from_slice(&wire[cut..]);
        while let Some(packet) = Packet::decode(&mut buf, V5, u32::MAX).unwrap() {
            decoded.push(packet);
        }
        prop_assert_eq!(decoded, packets);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn random_bytes_never_panic(input in vec(any::<u8>(), 0..300)) {
        decode_all(&input, V311)?;
        decode_all(&input, V5)?;
    }

    /// Random bodies behind a well-formed fixed header reach the packet
    /// decoders far more often than fully random input.
    #[test]
    fn random_bodies_never_panic(first in any::<u8>(), body in vec(any::<u8>(), 0..200)) {
        let mut input = vec![first, body.len() as u8 & 0x7F];
        input.extend_from_slice(&body);
        decode_all(&input, V311)?;
        decode_all(&input, V5)?;
    }

    #[test]
    fn mutated_packets_never_panic(
        packet in packet(V5),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        for version in [V311, V5] {
            let mut wire = BytesMut::new();
            if packet.encode(version, &mut wire).is_err() {
                continue;
            }
            let mut wire = wire.to_vec();
            for (at, byte) in &edits {
                let at = at.index(wire.len());
                wire[at] = *byte;
            }
            decode_all(&wire, version)?;
        }
    }
}
