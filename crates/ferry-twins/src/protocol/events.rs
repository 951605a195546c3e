//! A committed change of a thing as Ditto's twin event
//! (`{ns}/{name}/things/twin/events/{created|modified|merged|deleted}`,
//! with the changed `path`, the written `value`, the `revision`, the
//! `timestamp` and the headers Ditto's events carry), and what each reader
//! may see of it: as Ditto's enforcement of signals, a reader needs READ
//! somewhere at or below the event's path, and gets only the parts of the
//! value it may read.

use super::envelope::Envelope;
use crate::policy::{Enforcer, Permission, Timestamp};
use crate::service::{with_always_shown, Caller, ThingAction, ThingEvent, Twins};
use std::sync::Arc;

/// An event with the policy that decides who sees it, ready to be shown
/// to any number of readers without waiting for anything.
pub struct EventView {
    pub event: ThingEvent,
    enforcer: Option<Arc<Enforcer>>,
}

impl EventView {
    /// The event with its thing's policy as it is now (the event's own,
    /// as a deleted thing has no other). A policy that cannot be read
    /// shows the event to nobody.
    pub async fn load(twins: &Twins, event: ThingEvent) -> EventView {
        let enforcer = match &event.policy_id {
            Some(policy_id) => match twins.policy(policy_id.as_str()).await {
                Ok(cached) => cached.map(|cached| cached.enforcer.clone()),
                Err(error) => {
                    tracing::warn!(thing_id = %event.thing_id, %error, "an event's policy could not be read: the event is shown to nobody");
                    None
                }
            },
            None => None,
        };
        EventView { event, enforcer }
    }

    /// What `caller` may see of the event, or `None` for nothing.
    pub fn envelope_for(&self, caller: &Caller) -> Option<Envelope> {
        let enforcer = self.enforcer.as_ref()?;
        let event = &self.event;
        let who = enforcer.caller(&caller.subjects, Timestamp::now());
        if !who.has_permission_on_any_level_below("thing", &event.path, Permission::Read) {
            return None;
        }
        let value = match &event.value {
            Some(value) if event.path.is_root() => {
                Some(with_always_shown(value, who.view("thing", &event.path, value)?))
            }
            Some(value) => Some(who.view("thing", &event.path, value)?),
            None => None,
        };
        let id = &event.thing_id;
        let mut envelope = Envelope::new(
            format!(
                "{}/{}/things/twin/events/{}",
                id.namespace(),
                id.name(),
                event.action.as_str()
            ),
            event.path.to_string(),
        );
        envelope.value = value;
        if let Some(id) = &event.correlation_id {
            envelope.headers.insert("correlation-id".into(), id.as_ref().into());
        }
        if let Some(originator) = &event.originator {
            envelope.headers.insert(super::ORIGINATOR.into(), originator.as_ref().into());
        }
        // What Ditto's events carry besides: an event is answered by
        // nobody and asks no acknowledgement, and says what its value is
        // (a merge's is a JSON merge patch) in protocol version 2.
        let content_type = match event.action {
            ThingAction::Merged => "application/merge-patch+json",
            _ => "application/json",
        };
        let headers = &mut envelope.headers;
        headers.insert("response-required".into(), false.into());
        headers.insert("requested-acks".into(), serde_json::Value::Array(Vec::new()));
        headers.insert("content-type".into(), content_type.into());
        headers.insert("version".into(), 2.into());
        envelope.revision = Some(event.revision);
        envelope.timestamp = Some(event.timestamp.to_string());
        Some(envelope)
    }
}
