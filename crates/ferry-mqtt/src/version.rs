/// The protocol level a client asked for in CONNECT. It decides the wire
/// format of every later packet on the connection, so the decoder and the
/// encoder take it as a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ProtocolVersion {
    /// MQTT 3.1, protocol name `MQIsdp`. Same wire format as 3.1.1 for our purposes.
    V31 = 3,
    /// MQTT 3.1.1, protocol name `MQTT`.
    V311 = 4,
    /// MQTT 5.0: properties and reason codes on every packet.
    V5 = 5,
}

impl ProtocolVersion {
    /// Whether packets carry properties and reason codes.
    pub fn is_v5(self) -> bool {
        self == ProtocolVersion::V5
    }

    /// The version as people write it, for logs: `3.1`, `3.1.1`, `5.0`.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolVersion::V31 => "3.1",
            ProtocolVersion::V311 => "3.1.1",
            ProtocolVersion::V5 => "5.0",
        }
    }

    /// The version of a CONNECT protocol level byte.
    pub fn from_level(level: u8) -> Option<ProtocolVersion> {
        match level {
            3 => Some(ProtocolVersion::V31),
            4 => Some(ProtocolVersion::V311),
            5 => Some(ProtocolVersion::V5),
            _ => None,
        }
    }
}
