//! The shadow requests `mqtt.rs` hands over (`$aws/things/…/shadow/…`),
//! applied to the twin service, and the service's publications back.
//!
//! - **Answers** (`…/{op}/accepted`, `…/{op}/rejected`) go to the client
//!   that asked only (a client proving the same user included), as the
//!   Ditto protocol's responses do. AWS shows them to every subscriber
//!   its policy allows; here other readers learn of changes from
//!   `/update/documents` and `/update/delta`, which carry the same state.
//! - **`/update/documents`** (previous and current) after each update
//!   through these topics, and **`/update/delta`** after every committed
//!   change of a shadow's feature from any side (these topics, the Ditto
//!   HTTP API, the Ditto protocol) that leaves desired and reported
//!   differing: each subscriber gets them only when its policy lets it
//!   READ the whole feature.
//! - **A new `/update/delta` subscriber** (a device back from being
//!   offline) is sent the shadow's current delta, to it alone, so it
//!   learns what it missed without a `get` (docs/twins.md says why).
//! - **Enforcement** is the twin API's: an update is a merge patch of the
//!   feature and needs WRITE on every leaf it writes; a get shows what the
//!   caller may READ of the feature; a delete needs WRITE on the feature.
//!   A device held to its own thing (`[twins] mqtt_own_thing`) may use
//!   the shadows of that thing only (its name or its id), else 403.

use super::document::{self, Rejected, RequestHeader, ShadowError, Snapshot, Update};
use super::implicit::{self, Template};
use super::topic::{self, Op, ShadowTopic};
use super::ShadowSettings;
use crate::error::DittoError;
use crate::id::ThingId;
use crate::merge::merge_patch;
use crate::mqtt::{ForSender, MqttSettings};
use crate::pointer::JsonPointer;
use crate::policy::{Enforcer, Permission, Timestamp};
use crate::service::{
    next_event, view, Caller, Conditions, TagMatch, ThingEvent, ThingWrite, Twins,
};
use crate::thing::{EntityTag, Thing, ThingResource};
use bytes::Bytes;
use ferry_auth::Principal;
use ferry_broker::service::{ServiceRequest, Signal};
use ferry_broker::{Broker, Message};
use ferry_mqtt::{ByteStr, Properties, QoS, ReasonCode};
use serde_json::{json, Map, Value};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};

/// How many times an update is made again when another writer changed
/// the thing between reading it and writing (the update names no
/// `version`, so it holds against whatever is current, as in AWS).
const CONFLICT_RETRIES: usize = 3;

pub(crate) struct Shadows {
    twins: Arc<Twins>,
    broker: Weak<Broker>,
    settings: ShadowSettings,
    /// Who a client is to the policies: the Ditto protocol's rule.
    identities: MqttSettings,
    template: Option<Template>,
    /// Changes no `/update/delta` was published for because the feed ran
    /// ahead.
    pub(crate) deltas_missed: AtomicU64,
}

/// What an accepted request publishes.
struct Accepted {
    answer: Value,
    /// `/update/documents` and the thing whose policy decides who reads it.
    documents: Option<(Value, Arc<Thing>)>,
}

impl Shadows {
    /// Serves shadows on `broker` and publishes `/update/delta` from the
    /// change feed until the broker is gone.
    pub(crate) fn start(
        twins: Arc<Twins>,
        broker: &Arc<Broker>,
        identities: MqttSettings,
        settings: ShadowSettings,
        template: Option<Template>,
    ) -> Arc<Shadows> {
        let feed = twins.subscribe();
        let shadows = Arc::new(Shadows {
            twins,
            broker: Arc::downgrade(broker),
            settings,
            identities,
            template,
            deltas_missed: AtomicU64::new(0),
        });
        tokio::spawn(publish_deltas(shadows.clone(), feed));
        shadows
    }

    /// Applies one request and publishes its answer.
    pub(crate) async fn apply(&self, request: ServiceRequest) {
        let ServiceRequest { message, principal, reply } = request;
        let own_thing = self.identities.own_thing(&principal);
        let Some(topic) = ShadowTopic::parse(&message.topic) else {
            tracing::debug!(topic = %message.topic, "a publish under $aws/things that is no shadow request");
            reply.answer(ReasonCode::TopicNameInvalid);
            return;
        };
        let caller = self.identities.caller(Some(&principal));
        let payload = &message.payload;
        let outcome = match own_thing {
            Some(identity)
                if identity.is_none_or(|id| !names_thing(&topic, id, &self.settings)) =>
            {
                let client_token = document::parse_plain(payload).ok().and_then(|h| h.client_token);
                Err(Rejected { error: ShadowError::forbidden(), client_token })
            }
            _ if topic.op == Op::Update => self.update(&caller, &topic, payload).await,
            _ => match document::parse_plain(payload) {
                Err(rejected) => Err(rejected),
                Ok(header) => {
                    let outcome = if topic.op == Op::Get {
                        self.get(&caller, &topic, &header).await
                    } else {
                        self.delete(&caller, &topic, &header).await
                    };
                    let client_token = header.client_token;
                    outcome.map_err(|error| Rejected { error, client_token })
                }
            },
        };
        reply.answer(ReasonCode::Success);
        let seconds = Timestamp::now().unix_seconds();
        match outcome {
            Ok(accepted) => {
                self.answer(&topic, true, &accepted.answer, &principal);
                if let Some((documents, thing)) = accepted.documents {
                    let documents_topic = format!(
                        "{}/update/documents",
                        topic::prefix(topic.thing_name, topic.shadow_name)
                    );
                    self.publish_to_readers(
                        &thing,
                        topic.feature_id(&self.settings),
                        documents_topic,
                        &documents,
                    )
                    .await;
                }
            }
            Err(rejected) => {
                self.answer(&topic, false, &document::rejected(&rejected, seconds), &principal)
            }
        }
    }

    async fn update(
        &self,
        caller: &Caller,
        topic: &ShadowTopic<'_>,
        payload: &[u8],
    ) -> Result<Accepted, Rejected> {
        let update = document::parse_update(payload)?;
        let refuse = |error| Rejected { error, client_token: update.header.client_token.clone() };
        let thing_id = self.thing_id(caller, topic).map_err(refuse)?;
        let feature_id = topic.feature_id(&self.settings);
        let patch = update.feature_patch();
        let failed = |error: &DittoError| refuse(shadow_error(error, topic));
        for _ in 0..CONFLICT_RETRIES {
            let previous = self.twins.thing(&thing_id).await.map_err(|e| failed(&e))?;
            let Some(previous) = previous else {
                let Some(template) = &self.template else {
                    return Err(refuse(ShadowError::thing_not_found()));
                };
                if update.header.version.is_some() {
                    return Err(refuse(ShadowError::version_conflict()));
                }
                check_size(template.feature(feature_id), &patch).map_err(refuse)?;
                let made = implicit::create(
                    &self.twins,
                    caller,
                    &thing_id,
                    template,
                    Some((feature_id, &patch)),
                )
                .await
                .map_err(|refused| failed(&refused.error))?;
                if made {
                    return self
                        .updated(&thing_id, None, &update, 1, feature_id)
                        .await
                        .map_err(refuse);
                }
                continue;
            };
            if update.header.version.is_some_and(|version| version != previous.revision()) {
                return Err(refuse(ShadowError::version_conflict()));
            }
            check_size(feature_of(&previous, feature_id), &patch).map_err(refuse)?;
            // Merged into the thing rather than the feature, so that the
            // write can be made on the revision read: the entity tag of the
            // thing is its revision, a feature's a hash of its value.
            let conditions = at_revision(&previous);
            let thing_patch = json!({"features": {feature_id: &patch}});
            let write = ThingWrite::Merge(&thing_patch);
            let resource = ThingResource::Thing;
            match self.twins.write_thing(caller, &thing_id, &resource, write, &conditions).await {
                Ok(_) => {
                    let version = previous.revision() + 1;
                    return self
                        .updated(&thing_id, Some(&previous), &update, version, feature_id)
                        .await
                        .map_err(refuse);
                }
                Err(refused) if refused.error.status == 412 && update.header.version.is_none() => {}
                Err(refused) => return Err(failed(&refused.error)),
            }
        }
        Err(refuse(ShadowError::internal()))
    }

    /// The answer to an update that made `version`, and its documents.
    async fn updated(
        &self,
        thing_id: &ThingId,
        previous: Option<&Thing>,
        update: &Update,
        version: u64,
        feature_id: &str,
    ) -> Result<Accepted, ShadowError> {
        let seconds = Timestamp::now().unix_seconds();
        let answer = document::update_accepted(update, version, seconds);
        let current = self.twins.thing(thing_id).await.map_err(|_| ShadowError::internal())?;
        let documents = current.map(|current| {
            let before_meta = previous.map(Thing::metadata);
            let before = previous
                .zip(before_meta.as_ref())
                .and_then(|(thing, meta)| snapshot(thing, meta, feature_id));
            let after_meta = current.metadata();
            let after = snapshot(&current, &after_meta, feature_id);
            let token = update.header.client_token.as_deref();
            let documents = after.map(|after| document::documents(before, after, seconds, token));
            (documents, current)
        });
        Ok(Accepted {
            answer,
            documents: documents.and_then(|(documents, thing)| Some((documents?, thing))),
        })
    }

    async fn get(
        &self,
        caller: &Caller,
        topic: &ShadowTopic<'_>,
        header: &RequestHeader,
    ) -> Result<Accepted, ShadowError> {
        let (thing, enforcer) = self.readable_thing(caller, topic).await?;
        let feature_id = topic.feature_id(&self.settings);
        let resource = ThingResource::Feature(feature_id.to_owned());
        let now = Timestamp::now();
        let shown = view(&enforcer, caller, &thing, &resource, None, now)
            .ok()
            .flatten()
            .ok_or_else(|| ShadowError::no_shadow(topic.display_name()))?;
        let meta = thing.metadata();
        let shadow = Snapshot {
            feature: &shown,
            metadata: feature_metadata(&meta, feature_id),
            version: thing.revision(),
        };
        let answer =
            document::get_accepted(shadow, now.unix_seconds(), header.client_token.as_deref());
        Ok(Accepted { answer, documents: None })
    }

    async fn delete(
        &self,
        caller: &Caller,
        topic: &ShadowTopic<'_>,
        header: &RequestHeader,
    ) -> Result<Accepted, ShadowError> {
        let feature_id = topic.feature_id(&self.settings);
        for _ in 0..CONFLICT_RETRIES {
            let (thing, _) = self.readable_thing(caller, topic).await?;
            if feature_of(&thing, feature_id).is_none() {
                return Err(ShadowError::no_shadow(topic.display_name()));
            }
            if header.version.is_some_and(|version| version != thing.revision()) {
                return Err(ShadowError::version_conflict());
            }
            let resource = ThingResource::Feature(feature_id.to_owned());
            // The feature as read, so that a delete is a Ditto
            // `featureDeleted` and removes what the version check saw.
            let tag = thing.entity_tag(&resource).map(|tag| TagMatch::parse(tag.as_str()));
            let conditions = Conditions { if_match: tag, ..Default::default() };
            match self
                .twins
                .write_thing(caller, thing.id(), &resource, ThingWrite::Delete, &conditions)
                .await
            {
                Ok(_) => {
                    let seconds = Timestamp::now().unix_seconds();
                    let token = header.client_token.as_deref();
                    let answer = document::delete_accepted(thing.revision(), seconds, token);
                    return Ok(Accepted { answer, documents: None });
                }
                Err(refused) if refused.error.status == 412 && header.version.is_none() => {}
                Err(refused) => return Err(shadow_error(&refused.error, topic)),
            }
        }
        Err(ShadowError::internal())
    }

    /// The thing a request names, when the caller has subjects at all.
    fn thing_id(&self, caller: &Caller, topic: &ShadowTopic<'_>) -> Result<ThingId, ShadowError> {
        if caller.subjects.is_empty() {
            return Err(ShadowError::unauthorized());
        }
        topic.thing_id(&self.settings).ok_or_else(ShadowError::thing_not_found)
    }

    /// The thing and its policy, when the caller may read something of
    /// it; else AWS's "Thing not found", whether it exists or not.
    async fn readable_thing(
        &self,
        caller: &Caller,
        topic: &ShadowTopic<'_>,
    ) -> Result<(Arc<Thing>, Arc<Enforcer>), ShadowError> {
        let thing_id = self.thing_id(caller, topic)?;
        let failed = |error: DittoError| shadow_error(&error, topic);
        let thing = self.twins.thing(&thing_id).await.map_err(failed)?;
        let thing = thing.ok_or_else(ShadowError::thing_not_found)?;
        let enforcer = self.twins.enforcer_of(&thing).await.map_err(failed)?;
        let enforcer = enforcer.ok_or_else(ShadowError::thing_not_found)?;
        let readable = enforcer
            .caller(&caller.subjects, Timestamp::now())
            .has_permission_on_any_level_below("thing", &JsonPointer::root(), Permission::Read);
        if !readable {
            return Err(ShadowError::thing_not_found());
        }
        Ok((thing, enforcer))
    }

    /// Sends an answer to the client that asked.
    fn answer(
        &self,
        topic: &ShadowTopic<'_>,
        accepted: bool,
        answer: &Value,
        asker: &Arc<Principal>,
    ) {
        let Some(broker) = self.broker.upgrade() else { return };
        let signal = ForSender::new(asker.clone(), json_bytes(answer));
        broker.publish_signal(signal_message(topic.answer_topic(accepted)), &signal);
    }

    /// Publishes `payload` on `topic` to the subscribers whose policy lets
    /// them READ the feature `feature_id` of `thing`.
    async fn publish_to_readers(
        &self,
        thing: &Thing,
        feature_id: &str,
        topic: String,
        payload: &Value,
    ) {
        let Ok(Some(enforcer)) = self.twins.enforcer_of(thing).await else { return };
        let Some(broker) = self.broker.upgrade() else { return };
        let signal = Readers {
            identities: &self.identities,
            enforcer,
            feature: JsonPointer::from_levels(["features", feature_id]),
            now: Timestamp::now(),
            payload: json_bytes(payload),
        };
        broker.publish_signal(signal_message(topic), &signal);
    }

    /// A device subscribing to a shadow's `/update/delta` (after a
    /// reconnect, typically) is sent the shadow's delta as it is now, if
    /// there is one and it may read the feature, so it learns what it
    /// missed without a `get`. Only for a topic name, not a filter with
    /// wildcards; only to the subscribing client.
    pub(crate) fn subscribed(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        filter: &str,
        subscriber: &Arc<Principal>,
    ) {
        if ShadowTopic::of_delta_topic(filter).is_none() {
            return;
        }
        let (shadows, filter, subscriber) = (self.clone(), filter.to_owned(), subscriber.clone());
        runtime.spawn(async move { shadows.publish_current_delta(&filter, subscriber).await });
    }

    async fn publish_current_delta(&self, delta_topic: &str, subscriber: Arc<Principal>) {
        let Some(topic) = ShadowTopic::of_delta_topic(delta_topic) else { return };
        let caller = self.identities.caller(Some(&subscriber));
        if let Some(identity) = self.identities.own_thing(&subscriber) {
            if identity.is_none_or(|id| !names_thing(&topic, id, &self.settings)) {
                return;
            }
        }
        let Ok((thing, enforcer)) = self.readable_thing(&caller, &topic).await else { return };
        let feature_id = topic.feature_id(&self.settings);
        let feature = JsonPointer::from_levels(["features", feature_id]);
        let now = Timestamp::now();
        if !enforcer.caller(&caller.subjects, now).has_permission(
            "thing",
            &feature,
            Permission::Read,
        ) {
            return;
        }
        let meta = thing.metadata();
        let Some(shadow) = snapshot(&thing, &meta, feature_id) else { return };
        let Some(delta) = document::delta_document(shadow, now.unix_seconds()) else { return };
        let Some(broker) = self.broker.upgrade() else { return };
        let signal =
            ToClient { client_id: subscriber.client_id.clone(), payload: json_bytes(&delta) };
        broker.publish_signal(signal_message(delta_topic.to_owned()), &signal);
    }

    /// `/update/delta` for each shadow a committed change touched whose
    /// desired and reported now differ.
    async fn publish_delta(&self, event: &ThingEvent) {
        let Ok(Some(thing)) = self.twins.thing(&event.thing_id).await else { return };
        let Some(thing_name) = topic::thing_name(&event.thing_id, &self.settings) else { return };
        let seconds = Timestamp::now().unix_seconds();
        let meta = thing.metadata();
        for feature_id in changed_features(event) {
            let Some(shadow) = snapshot(&thing, &meta, &feature_id) else { continue };
            let Some(delta) = document::delta_document(shadow, seconds) else { continue };
            let mut names = Vec::with_capacity(2);
            if topic::is_shadow_name(&feature_id) {
                names.push(Some(feature_id.as_str()));
            }
            if feature_id == self.settings.classic_feature {
                names.push(None);
            }
            for name in names {
                let delta_topic = format!("{}/update/delta", topic::prefix(&thing_name, name));
                self.publish_to_readers(&thing, &feature_id, delta_topic, &delta).await;
            }
        }
    }
}

impl ShadowError {
    pub fn unauthorized() -> ShadowError {
        ShadowError { code: 401, message: "Unauthorized".into() }
    }
}

/// Whether a device whose own thing is `identity` may use `topic`'s
/// thing: the name or the id must be the identity.
fn names_thing(topic: &ShadowTopic<'_>, identity: &str, settings: &ShadowSettings) -> bool {
    topic.thing_name == identity
        || topic.thing_id(settings).is_some_and(|id| id.as_str() == identity)
}

/// A Ditto refusal as AWS's error for the same case.
fn shadow_error(error: &DittoError, topic: &ShadowTopic<'_>) -> ShadowError {
    match error.status {
        400 => ShadowError::invalid_node(),
        401 => ShadowError::unauthorized(),
        403 => ShadowError::forbidden(),
        404 if error.error.starts_with("things:feature") => {
            ShadowError::no_shadow(topic.display_name())
        }
        404 => ShadowError::thing_not_found(),
        409 | 412 => ShadowError::version_conflict(),
        413 => ShadowError::too_large(),
        _ => ShadowError::internal(),
    }
}

/// AWS's 8 KB limit, checked on the state the merge would leave.
fn check_size(feature: Option<&Value>, patch: &Value) -> Result<(), ShadowError> {
    let mut merged = feature.cloned().unwrap_or(Value::Object(Default::default()));
    merge_patch(&mut merged, patch).map_err(|_| ShadowError::invalid_node())?;
    if document::state_size(&merged) > document::MAX_STATE_BYTES {
        return Err(ShadowError::too_large());
    }
    Ok(())
}

/// The write is made on the revision it was checked against, or not at
/// all (412), so its `previous` and its size check are exact.
fn at_revision(thing: &Thing) -> Conditions {
    let tag = EntityTag::revision(thing.revision());
    Conditions { if_match: Some(TagMatch::parse(tag.as_str())), ..Default::default() }
}

fn feature_of<'t>(thing: &'t Thing, feature_id: &str) -> Option<&'t Value> {
    thing.document().get("features")?.get(feature_id)
}

fn feature_metadata<'m>(meta: &'m Map<String, Value>, feature_id: &str) -> Option<&'m Value> {
    meta.get("features")?.get(feature_id)
}

/// The whole shadow as it is in `thing`, whose `_metadata` is `meta`, if
/// the feature exists.
fn snapshot<'t>(
    thing: &'t Thing,
    meta: &'t Map<String, Value>,
    feature_id: &str,
) -> Option<Snapshot<'t>> {
    Some(Snapshot {
        feature: feature_of(thing, feature_id)?,
        metadata: feature_metadata(meta, feature_id),
        version: thing.revision(),
    })
}

/// The features a change wrote to: the one below its path, or those its
/// value names when it wrote the thing or all its features.
fn changed_features(event: &ThingEvent) -> Vec<String> {
    let levels = event.path.levels();
    let written = match levels {
        [features, feature_id, ..] if features == "features" => return vec![feature_id.clone()],
        [] => event.value.as_ref().and_then(|thing| thing.get("features")),
        [features] if features == "features" => event.value.as_ref(),
        _ => None,
    };
    written
        .and_then(Value::as_object)
        .map(|features| features.keys().cloned().collect())
        .unwrap_or_default()
}

fn json_bytes(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// A message of the service's, its payload left to each reader's view.
fn signal_message(topic: String) -> Message {
    Message::new(
        ByteStr::from(topic.as_str()),
        Bytes::new(),
        QoS::AtLeastOnce,
        false,
        Properties::default(),
        0,
    )
}

/// A publication shown to readers of one feature only.
struct Readers<'s> {
    identities: &'s MqttSettings,
    enforcer: Arc<Enforcer>,
    feature: JsonPointer,
    now: Timestamp,
    payload: Bytes,
}

impl Signal for Readers<'_> {
    fn view(&self, reader: Option<&Principal>) -> Option<Bytes> {
        let caller = self.identities.caller(reader);
        let who = self.enforcer.caller(&caller.subjects, self.now);
        who.has_permission("thing", &self.feature, Permission::Read).then(|| self.payload.clone())
    }
}

/// A publication for one client only (not others proving the same user,
/// who did not just subscribe).
struct ToClient {
    client_id: Arc<str>,
    payload: Bytes,
}

impl Signal for ToClient {
    fn view(&self, reader: Option<&Principal>) -> Option<Bytes> {
        (reader?.client_id == self.client_id).then(|| self.payload.clone())
    }
}

/// Publishes `/update/delta` for every committed change, until the
/// broker or the feed is gone.
async fn publish_deltas(
    shadows: Arc<Shadows>,
    mut feed: tokio::sync::broadcast::Receiver<ThingEvent>,
) {
    while let Some(event) = next_event(&mut feed, &shadows.deltas_missed, "shadow deltas").await {
        if shadows.broker.strong_count() == 0 {
            return;
        }
        shadows.publish_delta(&event).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::ThingAction;
    use serde_json::json;

    fn event(path: &str, value: Option<Value>) -> ThingEvent {
        ThingEvent {
            thing_id: ThingId::parse("devices:a").unwrap(),
            policy_id: None,
            revision: 2,
            timestamp: Timestamp::from_unix(0, 0),
            action: ThingAction::Merged,
            path: JsonPointer::parse(path).unwrap(),
            value,
            journal: None,
            acks: None,
            correlation_id: None,
            originator: None,
        }
    }

    #[test]
    fn the_features_a_change_touched() {
        assert_eq!(changed_features(&event("/features/lamp/desiredProperties/on", None)), ["lamp"]);
        assert_eq!(changed_features(&event("/features/lamp", None)), ["lamp"]);
        let patch = json!({"features": {"a": {}, "b": {}}, "attributes": {}});
        assert_eq!(changed_features(&event("/", Some(patch))), ["a", "b"]);
        assert_eq!(changed_features(&event("/features", Some(json!({"c": {}})))), ["c"]);
        assert!(changed_features(&event("/attributes/x", Some(json!(1)))).is_empty());
        assert!(changed_features(&event("/features", None)).is_empty());
    }

    #[test]
    fn ditto_refusals_become_aws_errors() {
        let topic = ShadowTopic::parse("$aws/things/a/shadow/name/cfg/update").unwrap();
        let thing_id = ThingId::parse("devices:a").unwrap();
        let cases = [
            (DittoError::thing_not_modifiable(&thing_id), 403, "Forbidden"),
            (DittoError::thing_not_found(&thing_id), 404, "Thing not found"),
            (
                DittoError::feature_not_found(&thing_id, "cfg"),
                404,
                "No shadow exists with name: 'cfg'",
            ),
            (DittoError::thing_unavailable(&thing_id), 500, "Internal service failure"),
        ];
        for (error, code, message) in cases {
            let aws = shadow_error(&error, &topic);
            assert_eq!((aws.code, aws.message.as_str()), (code, message), "{error}");
        }
    }

    #[test]
    fn the_size_limit_holds_on_the_merged_state() {
        let big = "x".repeat(document::MAX_STATE_BYTES);
        let feature = json!({"properties": {"a": big}});
        assert_eq!(check_size(Some(&feature), &json!({})), Err(ShadowError::too_large()));
        assert_eq!(check_size(Some(&feature), &json!({"properties": {"a": null}})), Ok(()));
        assert_eq!(check_size(None, &json!({"desiredProperties": {"on": true}})), Ok(()));
    }

    #[test]
    fn a_device_held_to_its_thing_names_it_by_name_or_id() {
        let settings = ShadowSettings::default();
        let topic = ShadowTopic::parse("$aws/things/dev-1/shadow/get").unwrap();
        assert!(names_thing(&topic, "dev-1", &settings));
        assert!(names_thing(&topic, "devices:dev-1", &settings));
        assert!(!names_thing(&topic, "dev-2", &settings));
    }
}
