use crate::{ByteStr, Properties, QoS};

/// SUBSCRIBE (§3.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    pub packet_id: u16,
    pub properties: Properties,
    /// At least one.
    pub filters: Vec<(ByteStr, SubscriptionOptions)>,
}

/// The options byte of one SUBSCRIBE entry (§3.8.3.1). In 3.1.1 only `qos` is
/// on the wire and the rest decode as their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriptionOptions {
    pub qos: QoS,
    pub no_local: bool,
    pub retain_as_published: bool,
    pub retain_handling: RetainHandling,
}

/// When retained messages are sent for a new subscription (§3.8.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum RetainHandling {
    #[default]
    SendOnSubscribe = 0,
    SendIfNewSubscription = 1,
    DoNotSend = 2,
}
