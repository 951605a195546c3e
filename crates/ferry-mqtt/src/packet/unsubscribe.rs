use crate::{ByteStr, Properties};

/// UNSUBSCRIBE (§3.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsubscribe {
    pub packet_id: u16,
    pub properties: Properties,
    /// At least one.
    pub filters: Vec<ByteStr>,
}
