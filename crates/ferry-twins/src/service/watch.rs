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
//!   under the thing's policy at the time of the change; what it shows is
//!   cut to the leaves the caller may read, as a `GET` of the thing is
//!   (`view`), with the thing's id and housekeeping always shown. A merge
//!   none of whose leaves the caller may read is not shown at all (Ditto
//!   drops an event whose partial-access filtering left nothing). The
//!   filter sees only what the caller may read, so it cannot be used to
//!   probe hidden values.

use super::events::{ThingAction, ThingEvent};
use super::things::{readable_thing, view};
use super::{Caller, Twins};
use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::id::ThingId;
use crate::pointer::JsonPointer;
use crate::policy::{Permission, Timestamp};
use crate::rql::{Filter, Scope, Semantics, TimePlaceholders};
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
                    Filter::parse(text, Scope::THINGS).map_err(|error| error.to_ditto_error())
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
        let Some(mut thing) = readable_thing(&who, &partial_thing(event)) else {
            return Ok(None);
        };
        if let Some(extra_fields) = &watch.extra_fields {
            let extra = self.extra_fields(caller, &event.thing_id, extra_fields, now).await?;
            if let Value::Object(members) = &mut thing {
                fill_from(members, extra);
            }
        }
        if let Some(filter) = &watch.filter {
            let now = TimePlaceholders::at(std::time::SystemTime::now());
            if !filter.matches(&thing, Semantics::Things, &now) {
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
