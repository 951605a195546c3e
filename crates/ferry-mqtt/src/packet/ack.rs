use crate::{Properties, ReasonCode};

/// PUBACK, PUBREC, PUBREL and PUBCOMP (§3.4–3.7) share one shape. In 3.1.1
/// the reason code is always Success and there are no properties. In 5.0 the
/// encoder omits the reason code and properties when they are Success and
/// empty, as the spec allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubAck {
    pub packet_id: u16,
    pub reason_code: ReasonCode,
    pub properties: Properties,
}

impl PubAck {
    pub fn new(packet_id: u16, reason_code: ReasonCode) -> PubAck {
        PubAck { packet_id, reason_code, properties: Properties::default() }
    }
}
