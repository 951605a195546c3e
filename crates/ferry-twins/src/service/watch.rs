//! What one subscriber sees of the change feed: a subscription's options
//! ([`Watch`]: `ids`, `namespaces`, `filter`, `extraFields`, `fields`) and
//! the caller's policy turn a committed [`ThingEvent`] into a
//! [`VisibleEvent`], or into nothing. SSE (`http/sse.rs`) sends its partial
//! thing; the Ditto protocol's events send its value.
//!
//! Where it follows Ditto:
//! - **The partial thing** (`ThingEventToThingConverter`): `thingId`,
//!   `_revision` and `_modified` of the event, with the value written set
//!   at its path; a whole thing created or modified is that thing (a
//!   creation also has `_created`); a merge sets its patch with `null`s
//!   dropped (a `null` value becomes `{}`); a deletion is the housekeeping
//!   alone, so a deleted thing arrives as `{"thingId":…}`.
//! - **extraFields** (`mergeThingWithExtraFields`): the caller's view of
//!   those fields of the thing as it is now, merged under the partial
//!   thing (what the event carries wins).
//! - **filter** (`StreamingSession.matchesFilter`): RQL with the things
//!   service's semantics, on the partial thing with its extra fields.
//! - **fields** (`ThingsSseRouteBuilder.toNonemptyValue`): a projection of
//!   that; without it, the hidden fields (`_revision`, `_modified`,
//!   `_created`, `_metadata`, `_namespace`) are left out, as Ditto's
//!   `Thing.toJson` leaves them out. A projection that selects nothing
//!   drops the event.
//! - **Policies**: an event reaches a caller who may READ something at or
//!   below the path it changed (Ditto's read-granted and partial subjects),
//!   under the policy the thing had at the change (a deleted thing has no
//!   other), as that policy reads when the event is sent: a reader whose
//!   access was revoked since is not sent old events on resuming. What it
//!   shows is cut to the leaves the caller may read, as a `GET` of the
//!   thing is (`view`), with the thing's id and housekeeping always shown.
//!   A merge none of whose leaves the caller may read is not shown at all
//!   (Ditto drops an event whose partial-access filtering left nothing).
//!   The filter sees only what the caller may read, so it cannot be used
//!   to probe hidden values.

use super::events::{ThingAction, ThingEvent};
use super::things::{view, with_always_shown};
use super::{Caller, Twins};
use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::id::ThingId;
use crate::pointer::JsonPointer;
use crate::policy::{Permission, Timestamp};
use crate::rql::{Filter, Placeholders, Scope, Semantics, TimePlaceholders};
use crate::thing::ThingResource;
use serde_json::{Map, Value};

/// The fields a thing's JSON leaves out unless `fields` asks for them
/// (Ditto's `FieldType.HIDDEN`).
const HIDDEN: [&str; 5] = ["_revision", "_modified", "_created", "_metadata", "_namespace"];

/// A subscription's options: which events, and what of each.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// Only these things; empty for every thing.
    pub ids: Vec<ThingId>,
    /// Only things in these namespaces; empty for every namespace.
    pub namespaces: Vec<String>,
    pub filter: Option<Filter>,
    pub fields: Option<FieldSelector>,
    pub extra_fields: Option<FieldSelector>,
}

impl Watch {
    /// The options from a request's query parameters, as Ditto's gateway
    /// reads them (`parameterMap`: the last of a repeated name counts):
    /// `ids` and `namespaces` comma-separated, `filter` RQL (else
    /// `rql.expression.invalid`), `fields` and `extraFields` selectors.
    pub fn parse(params: &[(String, String)]) -> Result<Watch, DittoError> {
        let param = |name: &str| {
            params.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
        };
        let list = |name: &str| -> Vec<&str> {
            param(name)
                .map(|text| text.split(',').filter(|item| !item.is_empty()).collect())
                .unwrap_or_default()
        };
        let selector = |name: &str| param(name).map(FieldSelector::parse).transpose();
        Ok(Watch {
            ids: list("ids").into_iter().map(ThingId::parse).collect::<Result<_, _>>()?,
            namespaces: list("namespaces").into_iter().map(str::to_owned).collect(),
            filter: param("filter")
                .map(|text| {
                    Filter::parse(text, EVENT_SCOPE).map_err(|error| error.to_ditto_error())
                })
                .transpose()?,
            fields: selector("fields")?,
            extra_fields: selector("extraFields")?,
        })
    }

    /// The options of a stream of one thing (`/things/{thingId}[/path]`):
    /// that thing only and, below the thing, the one resource as the
    /// selected field, as Ditto's route puts them.
    pub fn of_thing(mut self, thing_id: ThingId, resource: &JsonPointer) -> Watch {
        self.ids = vec![thing_id];
        if !resource.is_root() {
            self.fields = Some(FieldSelector::from_pointers(vec![resource.clone()]));
        }
        self
    }

    /// Whether the event is of a thing this subscription is about.
    pub fn selects(&self, event: &ThingEvent) -> bool {
        (self.ids.is_empty() || self.ids.contains(&event.thing_id))
            && (self.namespaces.is_empty()
                || self.namespaces.iter().any(|namespace| namespace == event.thing_id.namespace()))
    }
}

/// The placeholders an event filter may read as fields
/// (`eq(topic:action,'modified')`), as Ditto's streams and connection
/// targets register them.
const EVENT_SCOPE: Scope<'static> = Scope {
    placeholder_fields: &[
        "topic:namespace",
        "topic:entityName",
        "topic:group",
        "topic:channel",
        "topic:criterion",
        "topic:action",
        "resource:type",
        "resource:path",
    ],
};

/// What those placeholders stand for in one twin event, and the time.
struct EventPlaceholders<'a> {
    event: &'a ThingEvent,
    path: String,
    time: TimePlaceholders,
}

impl<'a> EventPlaceholders<'a> {
    fn of(event: &'a ThingEvent) -> Self {
        EventPlaceholders {
            event,
            path: event.path.to_string(),
            time: TimePlaceholders::at(std::time::SystemTime::now()),
        }
    }
}

impl Placeholders for EventPlaceholders<'_> {
    fn resolve(&self, prefix: &str, name: &str) -> Option<&str> {
        match (prefix, name) {
            ("topic", "namespace") => Some(self.event.thing_id.namespace()),
            ("topic", "entityName") => Some(self.event.thing_id.name()),
            ("topic", "group") => Some("things"),
            ("topic", "channel") => Some("twin"),
            ("topic", "criterion") => Some("events"),
            ("topic", "action") => Some(self.event.action.as_str()),
            ("resource", "type") => Some("thing"),
            ("resource", "path") => Some(&self.path),
            _ => self.time.resolve(prefix, name),
        }
    }
}

/// What a caller may see of one event.
#[derive(Debug, Clone, PartialEq)]
pub struct VisibleEvent {
    /// The partial thing, with its extra fields, cut to what the caller may
    /// read and projected by `fields`: what SSE sends.
    pub thing: Value,
    /// The value written, cut to what the caller may read; `None` for a
    /// deletion.
    pub value: Option<Value>,
}

impl Twins {
    /// What `caller`, subscribed with `watch`, sees of `event`: nothing
    /// when the subscription does not select it, the caller may read
    /// nothing of what changed, or the filter does not match.
    pub async fn visible_event(
        &self,
        caller: &Caller,
        event: &ThingEvent,
        watch: &Watch,
    ) -> Result<Option<VisibleEvent>, DittoError> {
        if !watch.selects(event) {
            return Ok(None);
        }
        let Some(policy_id) = &event.policy_id else { return Ok(None) };
        let Some(policy) = self.policy(policy_id.as_str()).await? else { return Ok(None) };
        let now = Timestamp::now();
        let who = policy.enforcer.caller(&caller.subjects, now);
        if !who.has_permission_on_any_level_below("thing", &event.path, Permission::Read) {
            return Ok(None);
        }
        let value = event.value.as_ref().and_then(|value| who.view("thing", &event.path, value));
        if event.action == ThingAction::Merged
            && !is_empty(event.value.as_ref())
            && is_empty(value.as_ref())
        {
            return Ok(None);
        }
        let partial = partial_thing(event);
        let Some(shown) = who.view("thing", &JsonPointer::root(), &partial) else {
            return Ok(None);
        };
        let mut thing = with_always_shown(&partial, shown);
        if let Some(extra_fields) = &watch.extra_fields {
            let extra = self.extra_fields(caller, &event.thing_id, extra_fields, now).await?;
            if let Value::Object(members) = &mut thing {
                fill_from(members, extra);
            }
        }
        if let Some(filter) = &watch.filter {
            let placeholders = EventPlaceholders::of(event);
            if !filter.matches(&thing, Semantics::Things, &placeholders) {
                return Ok(None);
            }
        }
        let thing = match &watch.fields {
            Some(fields) => fields.project(&thing),
            None => without_hidden(thing),
        };
        if watch.fields.is_some() && is_empty(Some(&thing)) {
            return Ok(None);
        }
        Ok(Some(VisibleEvent { thing, value }))
    }

    /// The caller's view of `fields` of the thing as it is now; `{}` when
    /// it is gone or the caller may read none of it.
    async fn extra_fields(
        &self,
        caller: &Caller,
        thing_id: &ThingId,
        fields: &FieldSelector,
        now: Timestamp,
    ) -> Result<Value, DittoError> {
        let empty = || Value::Object(Map::new());
        let Some(thing) = self.thing(thing_id).await? else { return Ok(empty()) };
        let Some(enforcer) = self.enforcer_of(&thing).await? else { return Ok(empty()) };
        Ok(view(&enforcer, caller, &thing, &ThingResource::Thing, Some(fields), now)?
            .unwrap_or_else(empty))
    }

    /// Counts a subscriber that fell behind the feed and lost events; the
    /// caller closes or resynchronises it.
    pub fn note_lagged(&self, thing_events_missed: u64) {
        self.lagged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!(
            missed = thing_events_missed,
            "a twin event subscriber fell behind the change feed"
        );
    }

    /// Event subscribers that fell behind the feed since the start.
    pub fn lagged_subscribers(&self) -> u64 {
        self.lagged.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Ditto's thing of an event (`ThingEventToThingConverter`), with the
/// hidden housekeeping that `fields` and `filter` may name.
fn partial_thing(event: &ThingEvent) -> Value {
    let mut thing = Map::new();
    thing.insert("thingId".into(), Value::String(event.thing_id.as_str().to_owned()));
    let written = match (event.action, &event.value) {
        (ThingAction::Deleted, _) | (_, None) => None,
        (ThingAction::Merged, Some(patch)) => Some(nested(&event.path, without_nulls(patch))),
        (_, Some(value)) => Some(nested(&event.path, value.clone())),
    };
    if let Some(written) = written {
        fill_from(&mut thing, written);
    }
    let timestamp = Value::String(event.timestamp.to_string());
    thing.insert("_revision".into(), Value::from(event.revision));
    thing.insert("_modified".into(), timestamp.clone());
    if event.action == ThingAction::Created && event.path.is_root() {
        thing.insert("_created".into(), timestamp);
    }
    Value::Object(thing)
}

/// `value` set at `path` in otherwise empty objects.
fn nested(path: &JsonPointer, value: Value) -> Value {
    path.levels()
        .iter()
        .rev()
        .fold(value, |inner, level| Value::Object(Map::from_iter([(level.clone(), inner)])))
}

/// A merge patch as Ditto's converter shows it
/// (`filterNullValuesInJsonValue`): `null` members dropped, at every depth
/// of objects; a `null` patch is `{}`; arrays as they are.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Null => Value::Object(Map::new()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(_, member)| !member.is_null())
                .map(|(key, member)| (key.clone(), without_nulls(member)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Adds to `target` what `source` has and it lacks, object by object: the
/// target wins (Ditto's `JsonFactory.newObject(base, extra)`).
fn fill_from(target: &mut Map<String, Value>, source: Value) {
    let Value::Object(source) = source else { return };
    for (key, value) in source {
        match target.get_mut(&key) {
            None => {
                target.insert(key, value);
            }
            Some(Value::Object(inner)) => fill_from(inner, value),
            Some(_) => {}
        }
    }
}

fn without_hidden(mut thing: Value) -> Value {
    if let Value::Object(fields) = &mut thing {
        fields.retain(|key, _| !HIDDEN.contains(&key.as_str()));
    }
    thing
}

/// No value, or an empty object: nothing to show.
fn is_empty(value: Option<&Value>) -> bool {
    match value {
        None => true,
        Some(Value::Object(members)) => members.is_empty(),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{Conditions, ThingWrite, TwinsConfig};
    use crate::store::sqlite::SqliteStore;
    use crate::store::Store;
    use serde_json::json;

    fn twins(dir: &tempfile::TempDir) -> Twins {
        let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
        Twins::new(Store::Sqlite(store), TwinsConfig::default())
    }

    fn caller(subject: &str) -> Caller {
        Caller::new(vec![subject.to_owned()])
    }

    fn watch(query: &[(&str, &str)]) -> Result<Watch, DittoError> {
        let pairs: Vec<(String, String)> =
            query.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        Watch::parse(&pairs)
    }

    /// Makes a change as `who` and answers the event the feed sent for it.
    async fn change(
        twins: &Twins,
        who: &Caller,
        id: &str,
        path: &str,
        write: ThingWrite<'_>,
    ) -> ThingEvent {
        let mut feed = twins.subscribe();
        let resource = ThingResource::parse(path).unwrap().unwrap();
        let id = ThingId::parse(id).unwrap();
        twins.write_thing(who, &id, &resource, write, &Conditions::default()).await.unwrap();
        feed.recv().await.unwrap()
    }

    async fn seen(twins: &Twins, who: &Caller, event: &ThingEvent, watch: &Watch) -> Option<Value> {
        twins.visible_event(who, event, watch).await.unwrap().map(|visible| visible.thing)
    }

    fn event(action: ThingAction, path: &str, value: Option<Value>) -> ThingEvent {
        ThingEvent {
            thing_id: ThingId::parse("ns:x").unwrap(),
            revision: 5,
            timestamp: Timestamp::parse("2026-11-26T00:00:00Z").unwrap(),
            action,
            path: JsonPointer::parse(path).unwrap(),
            value,
            policy_id: None,
            journal: None,
            acks: None,
            correlation_id: None,
            originator: None,
        }
    }

    #[test]
    fn partial_things_are_dittos_conversion_of_the_event() {
        let housekeeping = json!({"_revision": 5, "_modified": "2026-11-26T00:00:00Z"});
        let with = |mut thing: Value| {
            thing.as_object_mut().unwrap().extend(housekeeping.as_object().unwrap().clone());
            thing
        };
        let modified =
            event(ThingAction::Modified, "/features/lamp/properties/on", Some(json!(true)));
        assert_eq!(
            partial_thing(&modified),
            with(json!({"thingId": "ns:x", "features": {"lamp": {"properties": {"on": true}}}}))
        );
        let merged = event(
            ThingAction::Merged,
            "/attributes",
            Some(json!({"a": null, "b": {"c": null, "d": [null]}, "e": 1})),
        );
        assert_eq!(
            partial_thing(&merged),
            with(json!({"thingId": "ns:x", "attributes": {"b": {"d": [null]}, "e": 1}}))
        );
        let merged_null = event(ThingAction::Merged, "/attributes/a", Some(Value::Null));
        assert_eq!(
            partial_thing(&merged_null),
            with(json!({"thingId": "ns:x", "attributes": {"a": {}}}))
        );
        assert_eq!(
            partial_thing(&event(ThingAction::Deleted, "/", None)),
            with(json!({"thingId": "ns:x"}))
        );
        let created = event(
            ThingAction::Created,
            "/",
            Some(json!({"thingId": "ns:x", "policyId": "ns:x", "attributes": {}})),
        );
        let mut expected = with(json!({"thingId": "ns:x", "policyId": "ns:x", "attributes": {}}));
        expected["_created"] = json!("2026-11-26T00:00:00Z");
        assert_eq!(partial_thing(&created), expected);
    }

    #[test]
    fn options_are_read_as_dittos_gateway_reads_them() {
        let parsed = watch(&[
            ("ids", "a:b,,c:d"),
            ("namespaces", "x,y"),
            ("fields", "thingId"),
            ("fields", "attributes"),
        ])
        .unwrap();
        assert_eq!(parsed.ids.len(), 2);
        assert_eq!(parsed.namespaces, ["x", "y"]);
        assert_eq!(parsed.fields, Some(FieldSelector::parse("attributes").unwrap()));
        let error = |query| watch(query).unwrap_err().error;
        assert_eq!(error(&[("filter", "eq(a")]), "rql.expression.invalid");
        assert_eq!(error(&[("ids", "no-namespace")]), "things:id.invalid");
        assert_eq!(error(&[("extraFields", "a(b")]), "json.fieldselector.invalid");
        let one = watch(&[("fields", "thingId")]).unwrap().of_thing(
            ThingId::parse("a:b").unwrap(),
            &JsonPointer::parse("/attributes/x").unwrap(),
        );
        assert_eq!(one.fields, Some(FieldSelector::parse("attributes/x").unwrap()));
        assert!(one.selects(&ThingEvent {
            thing_id: ThingId::parse("a:b").unwrap(),
            ..event(ThingAction::Deleted, "/", None)
        }));
        assert!(!one.selects(&event(ThingAction::Deleted, "/", None)));
    }

    #[tokio::test]
    async fn a_partial_reader_sees_its_leaves_of_what_changed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        let (alice, bob) = (caller("nginx:alice"), caller("nginx:bob"));
        let everything = Watch::default();
        let body = json!({
            "_policy": {"entries": {
                "OWNER": {"subjects": {"nginx:alice": {"type": "t"}},
                          "resources": {"thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                        "policy:/": {"grant": ["READ", "WRITE"], "revoke": []}}},
                "GUEST": {"subjects": {"nginx:bob": {"type": "t"}},
                          "resources": {"thing:/attributes/public": {"grant": ["READ"], "revoke": []}}}}},
            "attributes": {"public": 1, "secret": 2},
        });
        let created = change(&twins, &alice, "ns:x", "", ThingWrite::Put(&body)).await;
        assert_eq!(
            seen(&twins, &bob, &created, &everything).await,
            Some(json!({"thingId": "ns:x", "attributes": {"public": 1}}))
        );
        let visible = twins.visible_event(&alice, &created, &everything).await.unwrap().unwrap();
        assert_eq!(visible.thing["attributes"], json!({"public": 1, "secret": 2}));

        let secret =
            change(&twins, &alice, "ns:x", "attributes/secret", ThingWrite::Put(&json!(3))).await;
        assert_eq!(seen(&twins, &bob, &secret, &everything).await, None);
        let patch = json!({"attributes": {"secret": 4}});
        let merged = change(&twins, &alice, "ns:x", "", ThingWrite::Merge(&patch)).await;
        assert_eq!(seen(&twins, &bob, &merged, &everything).await, None);
        let patch = json!({"attributes": {"secret": 5, "public": 6}});
        let merged = change(&twins, &alice, "ns:x", "", ThingWrite::Merge(&patch)).await;
        let visible = twins.visible_event(&bob, &merged, &everything).await.unwrap().unwrap();
        assert_eq!(visible.thing, json!({"thingId": "ns:x", "attributes": {"public": 6}}));
        assert_eq!(visible.value, Some(json!({"attributes": {"public": 6}})));
        // A filter on what bob may not read matches nothing, rather than
        // telling him what is there.
        let probe = watch(&[("filter", "eq(attributes/secret,5)")]).unwrap();
        assert_eq!(seen(&twins, &bob, &merged, &probe).await, None);
        assert!(seen(&twins, &alice, &merged, &probe).await.is_some());
        // Extra fields are bob's view of them too.
        let enriched = watch(&[("extraFields", "attributes"), ("fields", "attributes")]).unwrap();
        let public =
            change(&twins, &alice, "ns:x", "attributes/public", ThingWrite::Put(&json!(7))).await;
        assert_eq!(
            seen(&twins, &bob, &public, &enriched).await,
            Some(json!({"attributes": {"public": 7}}))
        );
        // Nothing for someone the policy does not name.
        assert_eq!(seen(&twins, &caller("nginx:carol"), &public, &everything).await, None);
    }

    #[tokio::test]
    async fn extra_fields_fill_in_under_the_event_and_fields_project_it() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        let ditto = caller("nginx:ditto");
        let body = json!({"attributes": {"room": "kitchen", "floor": 1}});
        change(&twins, &ditto, "ns:x", "", ThingWrite::Put(&body)).await;
        let floor =
            change(&twins, &ditto, "ns:x", "attributes/floor", ThingWrite::Put(&json!(2))).await;
        let enriched =
            watch(&[("extraFields", "attributes"), ("filter", r#"eq(attributes/room,"kitchen")"#)])
                .unwrap();
        assert_eq!(
            seen(&twins, &ditto, &floor, &enriched).await,
            Some(json!({"thingId": "ns:x", "attributes": {"floor": 2, "room": "kitchen"}}))
        );
        let projected = watch(&[("fields", "_revision,attributes/room")]).unwrap();
        assert_eq!(seen(&twins, &ditto, &floor, &projected).await, Some(json!({"_revision": 2})));
        let nothing = watch(&[("fields", "features")]).unwrap();
        assert_eq!(seen(&twins, &ditto, &floor, &nothing).await, None);
        let elsewhere = watch(&[("namespaces", "other")]).unwrap();
        assert_eq!(seen(&twins, &ditto, &floor, &elsewhere).await, None);
    }

    #[tokio::test]
    async fn the_journal_replays_what_the_feed_sent() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        let ditto = caller("nginx:ditto");
        let created = change(&twins, &ditto, "ns:x", "", ThingWrite::Put(&json!({}))).await;
        let deleted = change(&twins, &ditto, "ns:x", "", ThingWrite::Delete).await;
        let (Some(first), Some(second)) = (created.journal, deleted.journal) else {
            panic!("journal places: {created:?} {deleted:?}")
        };
        assert!(second > first);
        assert_eq!(twins.journal_after(0, 10).await.unwrap(), [created, deleted.clone()]);
        assert_eq!(twins.journal_after(first, 10).await.unwrap(), [deleted]);
        assert_eq!(twins.prune_journal().await.unwrap(), 0, "within the retention");
    }
}
