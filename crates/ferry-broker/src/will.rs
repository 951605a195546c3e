//! Will messages: published when a connection ends without a normal
//! DISCONNECT, after the will delay if the client asked for one.

use crate::message::Message;
use ferry_mqtt::Will;

/// A will waiting for its connection to end.
pub(crate) struct PendingWill {
    /// Boxed: a message with its properties is large, and a will sits in
    /// every connection and session whether or not it is ever published.
    pub message: Box<Message>,
    pub delay_secs: u32,
}

impl PendingWill {
    pub(crate) fn from_connect(will: Will, origin_session: u64) -> PendingWill {
        let delay_secs = will.properties.will_delay_interval.unwrap_or(0);
        let mut properties = will.properties;
        properties.will_delay_interval = None;
        PendingWill {
            message: Box::new(Message::new(
                will.topic,
                will.payload,
                will.qos,
                will.retain,
                properties,
                origin_session,
            )),
            delay_secs,
        }
    }
}
