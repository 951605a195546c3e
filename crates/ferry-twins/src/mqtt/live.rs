//! Live signals over MQTT: the broker as an outlet of the live hub, and a
//! client's live signals and responses into it.
//!
//! A live signal is published on `{prefix}/things/{thingId}/live/
//! {messages|commands|events}/{subject or action}`, each subscriber
//! getting it only if its subjects may READ it (`live/signal.rs`). It is
//! QoS 1 with its worth as the Message Expiry Interval: a call's timeout
//! (a device that comes back later finds no stale command in its
//! session), or a persistent message's TTL. Such a message waits in an
//! offline persistent session's queue, in memory: it survives the
//! device's reconnect, not a restart of Ferry, since signals do not go
//! through the durable log (the sender can poll the outcome and send
//! again; storing every live signal would cost a disk write for what is
//! mostly answered within seconds).

use super::TwinTopics;
use crate::live::{Audience, Kind, Outlet, Route, Sending};
use crate::protocol::{error_response, Envelope};
use crate::service::Caller;
use ferry_auth::Principal;
use ferry_broker::Message;
use ferry_mqtt::QoS;
use std::sync::Arc;
use std::time::Duration;

impl Outlet for TwinTopics {
    fn publish(&self, audience: &Arc<Audience>, expiry: Option<Duration>) {
        let Some(broker) = self.broker.upgrade() else { return };
        let topic = &audience.topic;
        let criterion = match audience.kind {
            Kind::Messages => "messages",
            Kind::LiveCommands => "commands",
            Kind::LiveEvents => "events",
        };
        let name = format!(
            "{}/things/{}/live/{criterion}/{}",
            self.settings.prefix, audience.thing_id, topic.action
        );
        if !ferry_mqtt::topic::is_valid_topic_name(&name) {
            tracing::debug!(topic = %name, "no MQTT topic for a live signal whose id or subject holds a wildcard");
            return;
        }
        self.publish_view(&broker, &name, QoS::AtLeastOnce, expiry, |caller| {
            audience.envelope_for(caller)
        });
    }
}

/// Where a client's live call is answered: where its command would be.
pub(super) struct Asked<'a> {
    pub command: &'a Arc<Message>,
    pub principal: &'a Arc<Principal>,
    pub reply_to: Option<String>,
}

impl TwinTopics {
    /// A client's live message: a response goes to the call waiting for
    /// it; a signal goes out through the hub, and the response to it, when
    /// one is wanted, comes back to the client as a command's would.
    /// Returns what to answer at once (an error).
    pub(super) async fn apply_live(
        &self,
        route: Route,
        caller: &Caller,
        envelope: Envelope,
        asked: Asked<'_>,
    ) -> Option<Envelope> {
        let (topic, kind) = match route {
            Route::Response => {
                self.twins.answer_live(envelope);
                return None;
            }
            Route::Signal(topic, kind) => (topic, kind),
        };
        let headers = envelope.headers.clone();
        let sent =
            self.twins.send_live(caller, topic.clone(), kind, envelope, Sending::default()).await;
        match sent {
            Err(error) => Some(error_response(Some(&topic), &headers, &error)),
            Ok(None) => None,
            Ok(Some(call)) => {
                let me = self.me.upgrade()?;
                let (command, principal) = (asked.command.clone(), asked.principal.clone());
                let reply_to = asked.reply_to;
                // Waits beside the client's worker, which goes on with the
                // client's next messages; pending calls are bounded by the
                // hub.
                tokio::spawn(async move {
                    if let Some(response) = call.response().await {
                        me.respond(&command, reply_to, &principal, response);
                    }
                });
                None
            }
        }
    }
}
