//! Will messages: published when a connection ends without a normal
//! DISCONNECT, after the will delay if the client asked for one.

use crate::broker::Broker;
use crate::durable::record::Record;
use crate::message::Message;
use crate::session::Session;
use ferry_mqtt::Will;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::AbortHandle;

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

/// Publishes the session's pending will after `delay`, if it is still
/// pending then: a reconnect clears it, and the end of the session publishes
/// it early (§3.1.3.2.2).
pub(crate) fn schedule(broker: Arc<Broker>, session: Arc<Session>, delay: Duration) -> AbortHandle {
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let will = session.lock().pending_will.take();
        if let Some(message) = will {
            broker.publish(*message);
            if let Some(store) = broker.store_for(&session) {
                store.note(Record::WillDone { session: session.id });
            }
        }
    })
    .abort_handle()
}
