//! Topics the process answers itself: the digital twins' Ditto protocol
//! and device-shadow topics. A client's publish under a service's prefix
//! goes to the service instead of to subscribers, and the client's
//! acknowledgement waits for the service's answer, so that a QoS 1 twin
//! command is PUBACKed only once its change is stored (Ditto's
//! `twin-persisted`). What the service sends back — responses, events,
//! commands for devices — it publishes as [`Broker::publish_signal`]:
//! each subscriber gets the view of it that its identity may see, so a
//! twin event carries only the paths its reader's policy lets it read.
//!
//! The broker knows nothing of twins: the service is a trait object the
//! binary installs once, at start. A publish pays one atomic load (is one
//! installed?) and a comparison with each of its few prefixes: no lock, no
//! write to a shared cache line, as the publish path needs on every core.
//!
//! [`Broker::publish_signal`]: crate::broker::Broker::publish_signal

use crate::answer::Answer;
use crate::message::Message;
use bytes::Bytes;
use ferry_auth::Principal;
use ferry_mqtt::ReasonCode;
use std::sync::{Arc, OnceLock};

/// A part of the topic space served inside the process.
pub trait TopicService: Send + Sync {
    /// The topic prefixes it serves, each one or more whole levels
    /// (`ditto`, `$aws/things`): a topic is the service's when it is a
    /// prefix or starts with one followed by `/`.
    fn prefixes(&self) -> Vec<String>;

    /// Takes a client's publish on one of its topics. It must answer
    /// `request.reply` once the publish's effect is durable (or refused);
    /// the client's later publishes are acknowledged only after it.
    fn take(&self, request: ServiceRequest);

    /// A client now subscribes to `filter`, under one of the service's
    /// prefixes: the service may send it what the topic stands for now
    /// (a device shadow's current delta), as a signal for that client.
    /// Called once the subscription is in place, on the client's core: it
    /// must not block.
    fn subscribed(&self, _filter: &str, _subscriber: &Arc<Principal>) {}
}

/// A client's publish to a service.
pub struct ServiceRequest {
    pub message: Arc<Message>,
    /// Who published: the identity authentication proved (a user name
    /// only when verified), or the client id alone.
    pub principal: Arc<Principal>,
    pub reply: ServiceReply,
}

/// The publisher's acknowledgement, owed by the service. Dropped without
/// an answer, it answers `UnspecifiedError`, so a service that fails can
/// never leave a client waiting for a PUBACK that is not coming.
pub struct ServiceReply {
    answer: Option<Answer>,
}

impl ServiceReply {
    pub(crate) fn new(answer: Option<Answer>) -> ServiceReply {
        ServiceReply { answer }
    }

    /// One nobody waits for: a QoS 0 publish.
    pub fn none() -> ServiceReply {
        ServiceReply { answer: None }
    }

    /// Whether the publisher waits for the answer (QoS 1 or 2).
    pub fn is_awaited(&self) -> bool {
        self.answer.is_some()
    }

    /// Sends the PUBACK (or PUBREC) with `reason`.
    pub fn answer(mut self, reason: ReasonCode) {
        self.send(reason);
    }

    fn send(&mut self, reason: ReasonCode) {
        let Some(answer) = self.answer.take() else { return };
        if answer.exactly_once && reason.is_error() {
            // Not taken: a retransmission must be treated as new.
            answer.session.lock().release_inbound(answer.packet_id);
        }
        answer.session.fill_reply(answer.generation, answer.packet(reason));
    }
}

impl Drop for ServiceReply {
    fn drop(&mut self) {
        self.send(ReasonCode::UnspecifiedError);
    }
}

/// What a signal's reader may see of it.
pub trait Signal: Send + Sync {
    /// The payload `reader` gets, or `None` when it may see none of it.
    /// `reader` is `None` for a subscription whose maker is not known
    /// (one restored after a restart, until its client connects again).
    /// Called once per subscriber, under the subscription tree's read
    /// lock: it must not block.
    fn view(&self, reader: Option<&Principal>) -> Option<Bytes>;
}

/// The service in force: installed once, read on every publish.
#[derive(Default)]
pub(crate) struct Services {
    installed: OnceLock<Installed>,
}

struct Installed {
    service: Arc<dyn TopicService>,
    prefixes: Vec<String>,
}

/// A second service for a broker that has one: its topics would change
/// under subscriptions made for the first.
#[derive(Debug, thiserror::Error)]
#[error("a topic service is already installed on this broker")]
pub struct ServiceAlreadyInstalled;

impl Services {
    pub(crate) fn install(
        &self,
        service: Arc<dyn TopicService>,
    ) -> Result<(), ServiceAlreadyInstalled> {
        let installed = Installed { prefixes: service.prefixes(), service };
        self.installed.set(installed).map_err(|_| ServiceAlreadyInstalled)
    }

    pub(crate) fn is_active(&self) -> bool {
        self.installed.get().is_some()
    }

    /// The service a client's publish on `topic` goes to, if any.
    pub(crate) fn for_topic(&self, topic: &str) -> Option<&Arc<dyn TopicService>> {
        let installed = self.installed.get()?;
        installed
            .prefixes
            .iter()
            .any(|prefix| topic_has_prefix(topic, prefix))
            .then_some(&installed.service)
    }

    /// Tells the service whose topics `filter` lies under that `subscriber`
    /// subscribed to it.
    pub(crate) fn subscribed(&self, filter: &str, subscriber: &Arc<Principal>) {
        if let Some(service) = self.for_topic(filter) {
            service.subscribed(filter, subscriber);
        }
    }

    /// Whether a subscription to `filter` can receive a service's signals,
    /// and so must remember who made it.
    pub(crate) fn may_signal(&self, filter: &str) -> bool {
        self.installed.get().is_some_and(|installed| {
            installed.prefixes.iter().any(|prefix| filter_may_match_prefix(filter, prefix))
        })
    }
}

fn topic_has_prefix(topic: &str, prefix: &str) -> bool {
    topic.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether `filter` matches any topic under `prefix` (whole levels). A
/// shared subscription's group is not part of what it matches; a wildcard
/// in the first level does not match a `$` topic (§4.7.2).
fn filter_may_match_prefix(filter: &str, prefix: &str) -> bool {
    let filter = match filter.strip_prefix("$share/") {
        Some(rest) => rest.split_once('/').map_or("", |(_, filter)| filter),
        None => filter,
    };
    let mut levels = filter.split('/');
    for (depth, wanted) in prefix.split('/').enumerate() {
        match levels.next() {
            Some("#") => return depth > 0 || !wanted.starts_with('$'),
            Some("+") if depth == 0 && wanted.starts_with('$') => return false,
            Some("+") => {}
            Some(level) if level == wanted => {}
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_is_under_a_prefix_only_at_a_level_boundary() {
        assert!(topic_has_prefix("ditto", "ditto"));
        assert!(topic_has_prefix("ditto/in", "ditto"));
        assert!(!topic_has_prefix("dittos/in", "ditto"));
        assert!(topic_has_prefix("$aws/things/x/shadow/update", "$aws/things"));
        assert!(!topic_has_prefix("$aws/rules/x", "$aws/things"));
    }

    #[test]
    fn filters_that_can_match_a_prefix() {
        for filter in ["#", "+/out/#", "ditto/#", "ditto/+/x", "ditto", "$share/g/ditto/#"] {
            assert!(filter_may_match_prefix(filter, "ditto"), "{filter}");
        }
        for filter in ["a/#", "dittos/#", "$share/g/a/#", "$SYS/#"] {
            assert!(!filter_may_match_prefix(filter, "ditto"), "{filter}");
        }
        assert!(filter_may_match_prefix("$aws/things/+/shadow/#", "$aws/things"));
        assert!(filter_may_match_prefix("$aws/#", "$aws/things"));
        assert!(!filter_may_match_prefix("#", "$aws/things"));
        assert!(!filter_may_match_prefix("+/things/#", "$aws/things"));
        assert!(!filter_may_match_prefix("$aws", "$aws/things"));
    }
}
