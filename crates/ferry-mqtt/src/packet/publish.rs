use crate::{ByteStr, Properties, QoS};
use bytes::Bytes;

/// PUBLISH (§3.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    pub dup: bool,
    pub qos: QoS,
    pub retain: bool,
    /// May be empty only in 5.0 with a topic alias property.
    pub topic: ByteStr,
    /// 0 for QoS 0 (absent on the wire); nonzero otherwise.
    pub packet_id: u16,
    pub properties: Properties,
    pub payload: Bytes,
}
