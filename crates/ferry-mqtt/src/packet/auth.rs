use crate::{Properties, ReasonCode};

/// AUTH (§3.15), 5.0 only: extended authentication exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub reason_code: ReasonCode,
    pub properties: Properties,
}
