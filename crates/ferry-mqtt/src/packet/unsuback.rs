use crate::{Properties, ReasonCode};

/// UNSUBACK (§3.11). 3.1.1 has no payload: `reason_codes` is empty there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsubAck {
    pub packet_id: u16,
    pub properties: Properties,
    pub reason_codes: Vec<ReasonCode>,
}
