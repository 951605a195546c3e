use crate::{Properties, ReasonCode};

/// DISCONNECT (§3.14). In 3.1.1 it has no body (reason Success, no properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    pub reason_code: ReasonCode,
    pub properties: Properties,
}
