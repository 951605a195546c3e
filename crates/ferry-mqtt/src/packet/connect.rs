use crate::{ByteStr, Properties, ProtocolVersion, QoS};
use bytes::Bytes;

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
}

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
