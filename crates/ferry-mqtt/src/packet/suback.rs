use crate::{Properties, ReasonCode};

/// SUBACK (§3.9): one reason code per filter of the SUBSCRIBE, in order. In
/// 3.1.1 only Granted QoS 0/1/2 and 0x80 exist; the encoder writes any
/// other error as 0x80.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAck {
    pub packet_id: u16,
    pub properties: Properties,
    pub reason_codes: Vec<ReasonCode>,
}
