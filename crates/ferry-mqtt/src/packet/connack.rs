use crate::{Properties, ReasonCode};

/// CONNACK (§3.2). In 3.1.1 the reason code is mapped to and from the six
/// return codes by [`ReasonCode::to_v3_connack`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnAck {
    pub session_present: bool,
    pub reason_code: ReasonCode,
    pub properties: Properties,
}
