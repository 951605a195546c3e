//! One live signal checked against the thing's policy, as Ditto's
//! `LiveSignalEnforcement` checks it, and what each reader may see of it.
//!
//! - **Messages** (`things/live/messages/{subject}`): the sender needs
//!   WRITE on the message resource (`message:/inbox/messages/{subject}`,
//!   `/outbox/…`, `/features/{id}/inbox/…`), else 403
//!   `messages:send.notallowed`; readers need READ on it. The payload is
//!   shown whole or not at all.
//! - **Live commands** (`things/live/commands/{action}`): the sender is
//!   checked as for the twin command (`ThingCommandEnforcement`: READ
//!   somewhere at or below a retrieved path, WRITE on a written one,
//!   Ditto's 404/403 of the resource otherwise); readers need READ on the
//!   command's path, and the response is cut to what the *sender* may
//!   read (`filterResponse`).
//! - **Live events** (`things/live/events/{action}`): the sender needs
//!   WRITE on the path (403 `things:event.notallowed`); readers see them
//!   as twin events: READ at or below the path, the value cut to the
//!   leaves they may read.
//!
//! A thing that does not exist, or whose policy is gone, is Ditto's 404
//! `things:thing.notfound` for all three (`authorizeSignalWithMissingEnforcer`).

use crate::error::DittoError;
use crate::id::ThingId;
use crate::pointer::JsonPointer;
use crate::policy::{Enforcer, Permission, Timestamp};
use crate::protocol::{Channel, Criterion, Envelope, Group, Topic};
use crate::service::{Caller, ThingWrite, Twins};
use crate::thing::ThingResource;
use std::sync::Arc;

/// What a subscriber asks for, as Ditto's `StreamingType` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Messages,
    LiveCommands,
    LiveEvents,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Messages, Kind::LiveCommands, Kind::LiveEvents];

    /// The kind of a live topic, `None` for anything else.
    pub fn of(topic: &Topic) -> Option<Kind> {
        if (topic.group, topic.channel) != (Group::Things, Channel::Live) {
            return None;
        }
        match topic.criterion {
            Criterion::Messages => Some(Kind::Messages),
            Criterion::Commands => Some(Kind::LiveCommands),
            Criterion::Events => Some(Kind::LiveEvents),
            _ => None,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A live signal its sender may send, with the policy that decides who
/// may read it.
pub struct Audience {
    pub kind: Kind,
    pub thing_id: ThingId,
    pub topic: Topic,
    /// The signal as sent (with its correlation id).
    pub envelope: Envelope,
    enforcer: Arc<Enforcer>,
    /// `message` or `thing`: the policy resource type the path is in.
    resource_type: &'static str,
    pointer: JsonPointer,
}

impl Audience {
    /// What `reader` may see of the signal, or `None` for nothing.
    pub fn envelope_for(&self, reader: &Caller) -> Option<Envelope> {
        let who = self.enforcer.caller(&reader.subjects, Timestamp::now());
        if self.kind != Kind::LiveEvents {
            return who
                .has_permission(self.resource_type, &self.pointer, Permission::Read)
                .then(|| self.envelope.clone());
        }
        let value = match &self.envelope.value {
            Some(value) => Some(who.view("thing", &self.pointer, value)?),
            None if who.has_permission_on_any_level_below(
                "thing",
                &self.pointer,
                Permission::Read,
            ) =>
            {
                None
            }
            None => return None,
        };
        Some(Envelope { value, ..self.envelope.clone() })
    }

    /// A live command's response as its sender may see it: the value cut
    /// to what the sender may read at the command's path. Messages'
    /// responses are the device's own and pass whole.
    pub fn response_for(&self, sender: &Caller, mut response: Envelope) -> Envelope {
        if self.kind == Kind::LiveCommands {
            if let Some(value) = response.value.take() {
                let who = self.enforcer.caller(&sender.subjects, Timestamp::now());
                response.value = who.view("thing", &self.pointer, &value);
            }
        }
        response
    }
}

impl Twins {
    /// Checks that `caller` may send the live signal `envelope` (its topic
    /// already read as `topic`, of kind `kind`).
    pub async fn authorize_live(
        &self,
        caller: &Caller,
        topic: Topic,
        kind: Kind,
        envelope: Envelope,
    ) -> Result<Audience, DittoError> {
        let id = topic
            .entity_id()
            .ok_or_else(|| crate::protocol::unknown_topic_path(&envelope.topic))?;
        let thing_id = ThingId::parse(&id)?;
        let thing =
            self.thing(&thing_id).await?.ok_or_else(|| DittoError::thing_not_found(&thing_id))?;
        let enforcer = self
            .enforcer_of(&thing)
            .await?
            .ok_or_else(|| DittoError::thing_not_found(&thing_id))?;
        let pointer = JsonPointer::parse(&envelope.path)?;
        let who = enforcer.caller(&caller.subjects, Timestamp::now());
        let resource_type = match kind {
            // A claim message asks the device for access: anyone may
            // send one (Ditto's `LiveSignalEnforcement` lets it through).
            Kind::Messages if is_claim(&topic, &pointer) => "message",
            Kind::Messages => {
                if topic.action.trim_matches('/').is_empty() {
                    return Err(DittoError::subject_invalid(&topic.action));
                }
                if !is_message_path(&pointer) {
                    return Err(crate::protocol::unknown_path(&envelope.path));
                }
                if !who.has_permission("message", &pointer, Permission::Write) {
                    return Err(DittoError::message_send_not_allowed(&thing_id));
                }
                "message"
            }
            Kind::LiveEvents => {
                if !who.has_permission("thing", &pointer, Permission::Write) {
                    return Err(DittoError::event_send_not_allowed(&thing_id));
                }
                "thing"
            }
            Kind::LiveCommands => {
                let resource = ThingResource::from_pointer(&pointer)?
                    .ok_or_else(|| crate::protocol::unknown_path(&envelope.path))?;
                let null = serde_json::Value::Null;
                let value = envelope.value.as_ref().unwrap_or(&null);
                let write = match topic.action.as_str() {
                    "retrieve" => {
                        if !who.has_permission_on_any_level_below(
                            "thing",
                            &pointer,
                            Permission::Read,
                        ) {
                            return Err(crate::service::not_accessible(&thing_id, &resource));
                        }
                        None
                    }
                    "merge" => Some(ThingWrite::Merge(value)),
                    "delete" => Some(ThingWrite::Delete),
                    "create" | "modify" => Some(ThingWrite::Put(value)),
                    _ => return Err(crate::protocol::unknown_command(&envelope.topic)),
                };
                if let Some(write) = write {
                    let allowed = match write {
                        ThingWrite::Merge(patch) => who.may_merge("thing", &pointer, patch),
                        _ => who.has_permission("thing", &pointer, Permission::Write),
                    };
                    if !allowed {
                        return Err(crate::service::not_modifiable(&thing_id, &resource, write));
                    }
                }
                "thing"
            }
        };
        Ok(Audience { kind, thing_id, topic, envelope, enforcer, resource_type, pointer })
    }
}

/// Ditto's claim message: the subject `claim` to `/inbox/claim`.
fn is_claim(topic: &Topic, pointer: &JsonPointer) -> bool {
    topic.action == super::CLAIM_SUBJECT
        && pointer.levels().iter().map(String::as_str).eq(["inbox", "claim"])
}

/// `/{inbox|outbox}/messages/{subject…}`, optionally under
/// `/features/{featureId}`: where Ditto's message commands live.
fn is_message_path(pointer: &JsonPointer) -> bool {
    let levels = pointer.levels();
    let rest = match levels {
        [features, _, rest @ ..] if features == "features" => rest,
        rest => rest,
    };
    matches!(rest, [direction, messages, _, ..]
        if (direction == "inbox" || direction == "outbox") && messages == "messages")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_paths_are_where_ditto_puts_them() {
        for path in
            ["/inbox/messages/ask", "/outbox/messages/a/b", "/features/lamp/inbox/messages/toggle"]
        {
            assert!(is_message_path(&JsonPointer::parse(path).unwrap()), "{path}");
        }
        for path in ["/", "/inbox/messages", "/inbox/claim/x", "/features/lamp/messages/x"] {
            assert!(!is_message_path(&JsonPointer::parse(path).unwrap()), "{path}");
        }
    }

    #[test]
    fn only_live_things_topics_have_a_kind() {
        let kind = |text| Kind::of(&Topic::parse(text).unwrap());
        assert_eq!(kind("a/b/things/live/messages/x"), Some(Kind::Messages));
        assert_eq!(kind("a/b/things/live/commands/modify"), Some(Kind::LiveCommands));
        assert_eq!(kind("a/b/things/live/events/modified"), Some(Kind::LiveEvents));
        assert_eq!(kind("a/b/things/live/errors"), None);
        assert_eq!(kind("a/b/things/twin/commands/modify"), None);
    }
}
