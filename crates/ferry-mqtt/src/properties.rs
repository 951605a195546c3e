//! MQTT 5 properties (§2.2.2). One struct serves every packet type; the
//! decoder rejects a property that the packet type does not allow, and a
//! property that appears twice where the spec allows it once.

use crate::ByteStr;
use bytes::Bytes;

/// Every MQTT 5 property, each `None`/empty when absent. MQTT 3.1.1 packets
/// always carry `Properties::default()`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Properties {
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
