//! Things as the service holds them: loaded through the cache, shown to a
//! caller as the policy lets them see it, and changed by the caller's
//! commands. What every thing operation and search result goes through.
//!
//! Where it follows Ditto:
//! - **Enforcement** (`ThingCommandEnforcement`): a read needs READ
//!   somewhere at or below the resource, else the resource's not-found
//!   error (404); PUT and DELETE need WRITE on the whole resource, else
//!   its not-modifiable error (`ThingCommandToModifyExceptionRegistry`,
//!   403; deleting the thing is `things:thing.notdeletable`); a merge needs
//!   WRITE on every leaf of the patch (`Caller::may_merge`), else
//!   `things:thing.notmodifiable` (MergeThing has no entry in the registry).
//!   A thing whose policy is gone answers as
//!   `errorForExistingThingWithDeletedPolicy`.
//! - **Creation** (`ThingEnforcerActor.loadPolicyEnforcerForCreateThing`):
//!   `_copyPolicyFrom`, else `_policy`, else an existing `policyId`, else a
//!   default policy for the caller's first subject. A new policy must not
//!   exist yet (`things:thing.notcreatable`, 400) and must let its creator
//!   WRITE `policy:/` (else `things:thing.notcreatable` with the policy
//!   service's 403); every way, the caller needs WRITE on `thing:/` under
//!   the policy (`things:thing.notmodifiable`). A referenced or copied
//!   policy the caller cannot read is `policies:policy.notfound`. The new
//!   policy and the thing are one commit group, so neither exists alone.
//! - **Preconditions** (`ConditionalHeadersValidator`, then
//!   `ThingConditionValidator`): `If-Match` compares strongly, `If-None-Match`
//!   weakly; both are skipped for a read or delete of a resource that does
//!   not exist; a failed `If-None-Match` on a read is 304, anything else
//!   412. `condition=` needs READ on every field it names (412
//!   `things:condition.failed`), is ignored on a create, and is evaluated
//!   on the whole thing with Ditto's things semantics.

use super::events::{ThingAction, ThingEvent};
use super::if_equal::{self, IfEqual};
use super::read_through::read_through;
use super::{store_failure, CachedPolicy, Caller, PolicyResource, Twins};
use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::id::{PolicyId, ThingId};
use crate::pointer::JsonPointer;
use crate::policy::{requester, Enforcer, Permission, Policy, SubjectId, Timestamp};
use crate::rql::{Filter, Scope, Semantics, TimePlaceholders};
use crate::store::{Expect, PolicyRecord, StoreError, ThingRecord, Write};
use crate::thing::{
    CompactThing, EntityTag, MetadataHeaders, Thing, ThingBody, ThingLimits, ThingResource,
};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

/// The fields of a thing a caller gets even where the policy hides the
/// rest of it, as Ditto's `THING_QUERY_COMMAND_RESPONSE_ALLOWLIST`: the id
/// and the housekeeping, which carry no user data and which a reader needs
/// to make sense of an answer.
const ALWAYS_SHOWN: [&str; 5] = ["thingId", "_namespace", "_revision", "_modified", "_created"];

impl Twins {
    /// The thing `id`, from the cache or the store.
    pub async fn thing(&self, id: &ThingId) -> Result<Option<Arc<Thing>>, DittoError> {
        let on_hit = |cached: Arc<CompactThing>| Ok(Some(Arc::new(Thing::from_compact(&cached)?)));
        let load = async {
            let read = self.store.thing(id.as_str()).await;
            let Some(record) =
                read.map_err(|error| store_failure(error, DittoError::thing_unavailable(id)))?
            else {
                return Ok((None, None));
            };
            let thing = Arc::new(Thing::from_stored(&record.doc)?);
            let compact = Arc::new(thing.to_compact());
            Ok((Some(thing), Some(compact)))
        };
        read_through(&self.things, id.as_str(), on_hit, load).await
    }

    /// The compiled policy a thing names, if it names one that exists.
    pub async fn enforcer_of(&self, thing: &Thing) -> Result<Option<Arc<Enforcer>>, DittoError> {
        let Some(policy_id) = thing.policy_id() else { return Ok(None) };
        Ok(self.policy(policy_id.as_str()).await?.map(|cached| cached.enforcer.clone()))
    }
}

/// What `caller` may see of `resource` of `thing` under `enforcer`, with
/// `fields=` applied first (as Ditto filters the response it built), or
/// `None` when it may see nothing there (the API's 404).
pub fn view(
    enforcer: &Enforcer,
    caller: &Caller,
    thing: &Thing,
    resource: &ThingResource,
    fields: Option<&FieldSelector>,
    now: Timestamp,
) -> Result<Option<Value>, DittoError> {
    let who = enforcer.caller(&caller.subjects, now);
    let pointer = resource.pointer();
    if !who.has_permission_on_any_level_below("thing", &pointer, crate::policy::Permission::Read) {
        return Ok(None);
    }
    let value = thing.retrieve(resource, fields)?;
    let Some(shown) = who.view("thing", &pointer, &value) else { return Ok(None) };
    Ok(Some(match resource {
        ThingResource::Thing => with_always_shown(&value, shown),
        _ => shown,
    }))
}

/// A reader's view of a whole thing (`shown`, cut from `whole`) with the
/// fields every reader gets added back, in the thing's own order.
pub(crate) fn with_always_shown(whole: &Value, shown: Value) -> Value {
    let Value::Object(whole) = whole else { return shown };
    let mut shown = match shown {
        Value::Object(shown) => shown,
        other => return other,
    };
    let mut ordered = serde_json::Map::new();
    for (key, field) in whole {
        if ALWAYS_SHOWN.contains(&key.as_str()) {
            ordered.insert(key.clone(), field.clone());
        } else if let Some(kept) = shown.remove(key) {
            ordered.insert(key.clone(), kept);
        }
    }
    Value::Object(ordered)
}

/// `If-Match` or `If-None-Match`: `*`, or entity tags as written
/// (`"rev:3"`, `W/"hash:…"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagMatch {
    raw: String,
    any: bool,
    /// (weak, opaque tag with its quotes)
    tags: Vec<(bool, String)>,
}

impl TagMatch {
    pub fn parse(raw: &str) -> TagMatch {
        let raw = raw.trim().to_owned();
        let any = raw == "*";
        let tags = raw
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty() && *tag != "*")
            .map(|tag| match tag.strip_prefix("W/") {
                Some(opaque) => (true, opaque.to_owned()),
                None => (false, tag.to_owned()),
            })
            .collect();
        TagMatch { raw, any, tags }
    }

    /// `If-Match` holds: `*` for any existing resource, else one tag equal
    /// to the current one, neither weak (Ferry's tags are all strong).
    fn matches_strongly(&self, current: Option<&EntityTag>) -> bool {
        let Some(current) = current else { return false };
        self.any || self.tags.iter().any(|(weak, tag)| !weak && tag == current.as_str())
    }

    /// `If-None-Match` holds: `*` only for a missing resource, else no tag
    /// equal to the current one, weakness ignored.
    fn matches_none(&self, current: Option<&EntityTag>) -> bool {
        let Some(current) = current else { return true };
        !self.any && !self.tags.iter().any(|(_, tag)| tag == current.as_str())
    }
}

/// The preconditions a request carries.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    pub if_match: Option<TagMatch>,
    pub if_none_match: Option<TagMatch>,
    /// `condition=` (query parameter or header), as written.
    pub condition: Option<String>,
    /// `live-channel-condition` of a retrieve, as written: not a
    /// precondition, but whether to ask the device instead
    /// (`Retrieved::live_channel_matched`).
    pub live_channel_condition: Option<String>,
    pub if_equal: IfEqual,
    /// Not a precondition: what the request asks the change's event's
    /// subscribers to acknowledge, carried on that event.
    pub acks: Option<Arc<crate::acks::EventAcks>>,
    /// Not a precondition either: what the request puts in, removes from
    /// or reads of `_metadata` (`thing/metadata_headers.rs`).
    pub metadata: MetadataHeaders,
    /// The request's `correlation-id`, for the change's event.
    pub correlation_id: Option<Arc<str>>,
}

/// A refusal, with the resource's current entity tag where Ditto sends
/// one along (a failed precondition carries `ETag`).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub error: DittoError,
    pub etag: Option<EntityTag>,
}

impl From<DittoError> for Refused {
    fn from(error: DittoError) -> Self {
        Refused { error, etag: None }
    }
}

/// What a read returns: the caller's view and the resource's tag.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieved {
    pub value: Value,
    pub etag: Option<EntityTag>,
    /// The answer to `get-metadata` (`ditto-metadata`), as the caller may
    /// see it.
    pub metadata: Option<Value>,
    /// Whether the thing met the `live-channel-condition`, when one was
    /// given.
    pub live_channel_matched: Option<bool>,
}

/// A change asked of a thing.
#[derive(Debug, Clone, Copy)]
pub enum ThingWrite<'a> {
    /// PUT the value at the resource (creating the thing if it is the
    /// thing and missing).
    Put(&'a Value),
    /// PATCH with a merge patch (RFC 7396).
    Merge(&'a Value),
    Delete,
    /// POST: create a thing with a generated id; it must not exist.
    Post(&'a ThingBody),
}

/// How a change landed, for the answer's status.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// 201 with this body.
    Created(Value),
    /// 204.
    Modified,
    /// 204.
    Deleted,
}

/// What a write answers: how it landed and the resource's tag after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub written: Written,
    pub etag: Option<EntityTag>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Category {
    Query,
    Modify,
    Delete,
}

/// How many times a write is tried again when another node changed the
/// same thing between its read and its write.
const CONFLICT_RETRIES: usize = 3;

impl Twins {
    /// GET of a thing resource: the caller's view, after the preconditions.
    pub async fn retrieve_thing(
        &self,
        caller: &Caller,
        thing_id: &ThingId,
        resource: &ThingResource,
        fields: Option<&FieldSelector>,
        conditions: &Conditions,
    ) -> Result<Retrieved, Refused> {
        let thing =
            self.thing(thing_id).await?.ok_or_else(|| DittoError::thing_not_found(thing_id))?;
        let Some(enforcer) = self.enforcer_of(&thing).await? else {
            return Err(policy_gone(&thing, false).into());
        };
        let now = Timestamp::now();
        let who = enforcer.caller(&caller.subjects, now);
        if !who.has_permission_on_any_level_below("thing", &resource.pointer(), Permission::Read) {
            return Err(not_accessible(thing_id, resource).into());
        }
        let filter = parsed_condition(conditions.condition.as_deref())?;
        let live_filter = parsed_condition(conditions.live_channel_condition.as_deref())?;
        for filter in filter.iter().chain(&live_filter) {
            condition_readable(filter, &enforcer, caller, now)?;
        }
        let etag = thing.entity_tag(resource);
        check_preconditions(conditions, etag.as_ref(), Category::Query)?;
        if let Some(filter) = &filter {
            condition_holds(filter, &thing)?;
        }
        let live_channel_matched = live_filter.as_ref().map(|filter| condition_met(filter, &thing));
        let mut value = view(&enforcer, caller, &thing, resource, fields, now)?
            .ok_or_else(|| not_accessible(thing_id, resource))?;
        let metadata = match &conditions.metadata {
            MetadataHeaders::Get(paths) => {
                let found = thing.metadata_of(resource, paths)?;
                // Read as `fields=_metadata` reads it: at `thing:/_metadata/…`.
                let at = JsonPointer::from_levels(["_metadata"]).join(&resource.pointer());
                Some(who.view("thing", &at, &found).unwrap_or_else(|| Value::Object(Map::new())))
            }
            _ => None,
        };
        if *resource == ThingResource::Thing
            && fields.is_some_and(|f| f.selects_top_level("_policy"))
        {
            if let (Some(policy), Value::Object(shown)) =
                (self.policy_view(caller, &thing).await, &mut value)
            {
                shown.insert("_policy".into(), policy);
            }
        }
        Ok(Retrieved { value, etag, metadata, live_channel_matched })
    }

    /// The caller's view of the thing's policy, for `fields=_policy`:
    /// nothing when it may not read it.
    async fn policy_view(&self, caller: &Caller, thing: &Thing) -> Option<Value> {
        let policy_id = thing.policy_id()?;
        self.retrieve_policy(caller, policy_id.as_str(), &PolicyResource::Policy)
            .await
            .ok()
            .map(|retrieved| retrieved.value)
    }

    /// `GET /things?ids=…`: the caller's view of each thing it may read,
    /// in the order asked; the others are left out, as Ditto does.
    pub async fn retrieve_things(
        &self,
        caller: &Caller,
        thing_ids: &[ThingId],
        fields: Option<&FieldSelector>,
    ) -> Result<Vec<Value>, DittoError> {
        let mut found = Vec::with_capacity(thing_ids.len());
        let conditions = Conditions::default();
        for thing_id in thing_ids {
            match self
                .retrieve_thing(caller, thing_id, &ThingResource::Thing, fields, &conditions)
                .await
            {
                Ok(retrieved) => found.push(retrieved.value),
                Err(refused) if refused.error.status == 404 => {}
                Err(refused) => return Err(refused.error),
            }
        }
        Ok(found)
    }

    /// PUT, PATCH, DELETE or POST of a thing resource, as one
    /// read-modify-write under the thing's write lock (see `write_policy`):
    /// committed expecting the revision it was made from, tried again on a
    /// conflict, cached and announced (`subscribe`) after the commit.
    pub async fn write_thing(
        &self,
        caller: &Caller,
        thing_id: &ThingId,
        resource: &ThingResource,
        write: ThingWrite<'_>,
        conditions: &Conditions,
    ) -> Result<Outcome, Refused> {
        let _lock = self.write_lock("thing", thing_id.as_str()).await;
        for _ in 0..CONFLICT_RETRIES {
            let now = Timestamp::now();
            let current = self.thing(thing_id).await?;
            let mut planned = match current {
                None => {
                    self.plan_create(caller, thing_id, resource, write, conditions, now).await?
                }
                Some(current) => {
                    if let ThingWrite::Post(_) = write {
                        return Err(DittoError::thing_conflict(thing_id).into());
                    }
                    self.plan_change(caller, current, resource, write, conditions, now).await?
                }
            };
            planned.event.correlation_id = conditions.correlation_id.clone();
            planned.event.originator = caller.subjects.first().map(|subject| Arc::from(&**subject));
            // In the change's own group: the journal holds what committed.
            planned.writes.extend(self.journal_entry(&planned.event));
            match self.store.commit_journaled(planned.writes).await {
                Ok(committed) => {
                    planned.event.journal = committed.events.first().copied();
                    if let Some((policy_id, cached)) = planned.policy {
                        self.policies.insert(policy_id, Some(cached));
                    }
                    if let Some(policy) = &planned.timed_policy {
                        self.policy_changed(policy.policy_id(), Some(policy));
                    }
                    let etag = match planned.after {
                        Some(After { compact, etag }) => {
                            self.things.insert(thing_id.as_str().to_owned(), compact);
                            etag
                        }
                        None => {
                            self.things.remove(thing_id.as_str());
                            None
                        }
                    };
                    // Sent with the lock still held: the next write of this
                    // thing cannot announce itself before this one.
                    planned.event.acks = conditions.acks.clone();
                    let _ = self.events.send(planned.event);
                    if let Some(acks) = &conditions.acks {
                        self.acks.published(acks);
                    }
                    return Ok(Outcome { written: planned.written, etag });
                }
                Err(StoreError::Conflict { .. }) => {
                    // Another node wrote it: read it again and redo.
                    self.things.remove(thing_id.as_str());
                    if let Some((policy_id, _)) = &planned.policy {
                        self.policies.remove(policy_id.as_str());
                    }
                }
                Err(error) => {
                    return Err(store_failure(error, DittoError::thing_unavailable(thing_id)).into())
                }
            }
        }
        Err(DittoError::thing_unavailable(thing_id).into())
    }

    /// A write to a thing that does not exist: only PUT and POST of the
    /// whole thing create one; everything else is the thing's 404.
    async fn plan_create(
        &self,
        caller: &Caller,
        thing_id: &ThingId,
        resource: &ThingResource,
        write: ThingWrite<'_>,
        conditions: &Conditions,
        now: Timestamp,
    ) -> Result<Planned, Refused> {
        let body = match (resource, write) {
            (ThingResource::Thing, ThingWrite::Put(value)) => ThingBody::for_put(thing_id, value)?,
            (ThingResource::Thing, ThingWrite::Post(body)) => body.clone(),
            _ => return Err(DittoError::thing_not_found(thing_id).into()),
        };
        // `If-Match` fails and `If-None-Match: *` holds on what is not there.
        check_preconditions(conditions, None, Category::Modify)?;
        self.plan_creation(caller, body, conditions, now).await
    }

    async fn plan_creation(
        &self,
        caller: &Caller,
        mut body: ThingBody,
        conditions: &Conditions,
        now: Timestamp,
    ) -> Result<Planned, Refused> {
        let thing_id = body.thing_id().clone();
        let mut writes = Vec::with_capacity(2);
        let mut new_policy = None;
        let enforcer = if let Some(source) = body.copy_policy_from().map(str::to_owned) {
            let source = self.resolve_policy_reference(caller, &source).await?;
            let copied =
                self.retrieve_policy(caller, source.as_str(), &PolicyResource::Policy).await?.value;
            let policy_id =
                body.policy_id().map_or_else(|| thing_id.as_str().to_owned(), |id| id.to_string());
            let (policy, cached) = self
                .new_policy(caller, &thing_id, &policy_id, without_policy_id(copied), now)
                .await?;
            let enforcer = cached.enforcer.clone();
            new_policy = Some((policy, cached));
            enforcer
        } else if let Some(inline) = body.inline_policy().cloned() {
            let policy_id = body
                .policy_id()
                .map(|id| id.to_string())
                .or_else(|| inline.get("policyId").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| thing_id.as_str().to_owned());
            let (policy, cached) = self
                .new_policy(
                    caller,
                    &thing_id,
                    &policy_id,
                    without_policy_id(Value::Object(inline)),
                    now,
                )
                .await?;
            let enforcer = cached.enforcer.clone();
            new_policy = Some((policy, cached));
            enforcer
        } else if let Some(policy_id) = body.policy_id() {
            // An existing policy: the caller must be able to read it, as
            // Ditto retrieves it with the caller's headers.
            self.retrieve_policy(caller, policy_id.as_str(), &PolicyResource::Policy).await?;
            self.policy(policy_id.as_str())
                .await?
                .ok_or_else(|| DittoError::policy_not_found(policy_id.as_str()))?
                .enforcer
                .clone()
        } else {
            let creator = caller
                .subjects
                .first()
                .ok_or_else(|| DittoError::thing_not_creatable_without_subject(&thing_id))?;
            let creator = SubjectId::parse(creator)?;
            let mut policy = Policy::default_for_thing(thing_id.as_str(), creator)?;
            if self.policy(thing_id.as_str()).await?.is_some() {
                return Err(DittoError::thing_not_creatable_policy_existing(
                    &thing_id,
                    thing_id.as_str(),
                )
                .into());
            }
            stamp_new(&mut policy, now);
            let cached = self.resolve(&policy).await?;
            let enforcer = cached.enforcer.clone();
            new_policy = Some((policy, cached));
            enforcer
        };
        let who = enforcer.caller(&caller.subjects, now);
        if !who.has_permission("thing", &JsonPointer::root(), Permission::Write) {
            return Err(DittoError::thing_not_modifiable(&thing_id).into());
        }
        let mut cached_policy = None;
        let mut timed_policy = None;
        if let Some((policy, cached)) = new_policy {
            let policy_id = PolicyId::parse(policy.policy_id())?;
            if body.policy_id().is_none() {
                body.set_policy_id(&policy_id);
            }
            writes.push(Write::Policy {
                record: policy_record(&policy, now),
                expect: Expect::Absent,
            });
            cached_policy = Some((policy_id.to_string(), cached));
            timed_policy = policy.has_timed_subjects().then_some(policy);
        }
        let mut thing = Thing::create(body, &now, &self.config.thing_limits)?;
        let document = Value::Object(thing.document().clone());
        let write = ThingWrite::Put(&document);
        let limits = &self.config.thing_limits;
        with_metadata(
            &mut thing,
            &ThingResource::Thing,
            write,
            Some(&document),
            conditions,
            limits,
        )?;
        let document = thing.to_json(None, None);
        let event = event(
            &thing,
            thing.revision(),
            now,
            ThingAction::Created,
            JsonPointer::root(),
            Some(document.clone()),
        );
        let after = After::of(&thing, &ThingResource::Thing);
        writes.push(Write::Thing { record: thing_record(thing), expect: Expect::Absent });
        Ok(Planned {
            writes,
            after: Some(after),
            policy: cached_policy,
            timed_policy,
            event,
            written: Written::Created(document),
        })
    }

    /// A policy a creation makes (inline or copied): valid as a policy PUT
    /// would be (else `things:policy.invalid`), not existing yet, its
    /// imports readable by the creator, and letting its creator WRITE
    /// `policy:/` (imports resolved), as the policies service requires of
    /// a `CreatePolicy`.
    async fn new_policy(
        &self,
        caller: &Caller,
        thing_id: &ThingId,
        policy_id: &str,
        body: Value,
        now: Timestamp,
    ) -> Result<(Policy, Arc<CachedPolicy>), DittoError> {
        let body = match caller.subjects.first() {
            Some(requester) => requester::in_body(&body, requester::Holds::Policy, requester),
            None => Cow::Borrowed(&body),
        };
        let mut policy = Policy::create(policy_id, &body, &self.config.policy_limits, now)
            .map_err(|error| {
                if error.error == "policies:policy.modificationinvalid" {
                    DittoError::thing_policy_without_writer(thing_id)
                } else if error.status == 400 {
                    DittoError::thing_policy_invalid(thing_id, &error)
                } else {
                    error
                }
            })?;
        if self.policy(policy_id).await?.is_some() {
            return Err(DittoError::thing_not_creatable_policy_existing(thing_id, policy_id));
        }
        let refused = |cause: DittoError| {
            DittoError::thing_not_creatable_policy_refused(thing_id, policy_id, &cause)
        };
        self.check_imports_readable(caller, policy.imports()).await.map_err(refused)?;
        stamp_new(&mut policy, now);
        let cached = self.resolve(&policy).await?;
        if !cached.enforcer.caller(&caller.subjects, now).has_permission(
            "policy",
            &JsonPointer::root(),
            Permission::Write,
        ) {
            return Err(refused(DittoError::policy_not_creatable(policy_id)));
        }
        Ok((policy, cached))
    }

    /// `_copyPolicyFrom`: a policy id, or `{{ ref:things/<thingId>/policyId }}`,
    /// the policy id of a thing the caller may read it of.
    async fn resolve_policy_reference(
        &self,
        caller: &Caller,
        source: &str,
    ) -> Result<PolicyId, Refused> {
        let reference = source
            .trim()
            .strip_prefix("{{")
            .and_then(|rest| rest.strip_suffix("}}"))
            .map(str::trim)
            .and_then(|inner| inner.strip_prefix("ref:things/"))
            .and_then(|inner| inner.strip_suffix("/policyId"));
        let Some(referenced) = reference else {
            return Ok(PolicyId::parse(source)?);
        };
        let referenced = ThingId::parse(referenced)?;
        let retrieved = self
            .retrieve_thing(
                caller,
                &referenced,
                &ThingResource::PolicyId,
                None,
                &Conditions::default(),
            )
            .await?;
        let text = retrieved.value.as_str().unwrap_or_default();
        Ok(PolicyId::parse(text)?)
    }

    /// A write to an existing thing.
    async fn plan_change(
        &self,
        caller: &Caller,
        current: Arc<Thing>,
        resource: &ThingResource,
        write: ThingWrite<'_>,
        conditions: &Conditions,
        now: Timestamp,
    ) -> Result<Planned, Refused> {
        let thing_id = current.id();
        let Some(enforcer) = self.enforcer_of(&current).await? else {
            return Err(policy_gone(&current, true).into());
        };
        let who = enforcer.caller(&caller.subjects, now);
        let pointer = resource.pointer();
        let allowed = match write {
            ThingWrite::Merge(patch) => who.may_merge("thing", &pointer, patch),
            _ => who.has_permission("thing", &pointer, Permission::Write),
        };
        if !allowed {
            return Err(not_modifiable(thing_id, resource, write).into());
        }
        let filter = parsed_condition(conditions.condition.as_deref())?;
        if let Some(filter) = &filter {
            condition_readable(filter, &enforcer, caller, now)?;
        }
        let category =
            if let ThingWrite::Delete = write { Category::Delete } else { Category::Modify };
        check_preconditions(conditions, current.entity_tag(resource).as_ref(), category)?;
        if let Some(filter) = &filter {
            condition_holds(filter, &current)?;
        }
        let minimized;
        let write = match (conditions.if_equal, write) {
            (IfEqual::Update, write) => write,
            (_, ThingWrite::Put(value))
                if if_equal::put_changes_nothing(&current, resource, value) =>
            {
                return Err(if_equal::skipped().into());
            }
            (_, ThingWrite::Merge(patch))
                if if_equal::merge_changes_nothing(&current, resource, patch) =>
            {
                return Err(if_equal::skipped().into());
            }
            (IfEqual::SkipMinimizingMerge, ThingWrite::Merge(patch)) => {
                match if_equal::minimized_patch(&current, resource, patch) {
                    Some(patch) => {
                        minimized = patch;
                        ThingWrite::Merge(&minimized)
                    }
                    None => ThingWrite::Merge(patch),
                }
            }
            (_, write) => write,
        };
        let limits = &self.config.thing_limits;
        let revision = current.revision();
        // The cache made this thing for this write alone: taken, not copied.
        let mut thing = Arc::unwrap_or_clone(current);
        let (written, action, value) = match write {
            ThingWrite::Put(value) => match thing.modify(resource, value, &now, limits)? {
                crate::thing::Written::Created(stored) => {
                    (Written::Created(stored.clone()), ThingAction::Created, Some(stored))
                }
                crate::thing::Written::Modified => {
                    let stored = thing.retrieve(resource, None).unwrap_or_else(|_| value.clone());
                    (Written::Modified, ThingAction::Modified, Some(stored))
                }
            },
            ThingWrite::Merge(patch) => {
                thing.merge(resource, patch, &now, limits)?;
                (Written::Modified, ThingAction::Merged, Some(patch.clone()))
            }
            ThingWrite::Delete | ThingWrite::Post(_) => match thing.delete(resource, &now)? {
                crate::thing::Deleted::Thing => {
                    let expect = Expect::Revision(revision);
                    let write = Write::DeleteThing { id: thing.id().as_str().to_owned(), expect };
                    let event =
                        event(&thing, revision + 1, now, ThingAction::Deleted, pointer, None);
                    return Ok(Planned {
                        writes: vec![write],
                        after: None,
                        policy: None,
                        timed_policy: None,
                        event,
                        written: Written::Deleted,
                    });
                }
                crate::thing::Deleted::Resource => (Written::Deleted, ThingAction::Deleted, None),
            },
        };
        with_metadata(&mut thing, resource, write, value.as_ref(), conditions, limits)?;
        let event = event(&thing, thing.revision(), now, action, pointer, value);
        let after = Some(After::of(&thing, resource));
        let writes =
            vec![Write::Thing { record: thing_record(thing), expect: Expect::Revision(revision) }];
        Ok(Planned { writes, after, policy: None, timed_policy: None, event, written })
    }
}

/// The metadata headers of a write applied to the thing it wrote:
/// `put-metadata` with what was written (a merge's patch without what it
/// deleted; a delete writes nothing, as Ditto's delete commands carry no
/// value), `delete-metadata` whatever the write.
fn with_metadata(
    thing: &mut Thing,
    resource: &ThingResource,
    write: ThingWrite<'_>,
    written: Option<&Value>,
    conditions: &Conditions,
    limits: &ThingLimits,
) -> Result<(), DittoError> {
    match (&conditions.metadata, write, written) {
        (MetadataHeaders::Put(entries), ThingWrite::Merge(_), Some(patch)) => {
            let written = merge_written(patch, *resource == ThingResource::Thing);
            thing.put_metadata(resource, entries, &written, limits)
        }
        (MetadataHeaders::Put(entries), ThingWrite::Put(_), Some(value)) => {
            thing.put_metadata(resource, entries, value, limits)
        }
        (MetadataHeaders::Delete(paths), _, _) => thing.delete_metadata(resource, paths),
        _ => Ok(()),
    }
}

/// What a merge patch writes: its members without the nulls that delete
/// (and, on the whole thing, without `_policy` and the like, which are not
/// the document's).
fn merge_written(patch: &Value, whole_thing: bool) -> Value {
    let Value::Object(members) = patch else {
        return patch.clone();
    };
    let kept = members
        .iter()
        .filter(|(key, value)| !(value.is_null() || (whole_thing && key.starts_with('_'))))
        .map(|(key, value)| (key.clone(), merge_written(value, false)))
        .collect();
    Value::Object(kept)
}

/// A write made ready: what to commit, and what to cache and announce
/// once it is committed.
struct Planned {
    writes: Vec<Write>,
    /// The thing after the write; `None` when it is deleted.
    after: Option<After>,
    policy: Option<(String, Arc<CachedPolicy>)>,
    /// The new policy, when it has subjects that expire or are announced:
    /// for the announcements' agenda once it is stored.
    timed_policy: Option<Policy>,
    event: ThingEvent,
    written: Written,
}

/// What a write leaves for the cache and the caller: the thing in the
/// cache's form, and the written resource's entity tag. Taken before the
/// thing goes into its record, which takes its document.
struct After {
    compact: Arc<CompactThing>,
    etag: Option<EntityTag>,
}

impl After {
    fn of(thing: &Thing, resource: &ThingResource) -> After {
        After { compact: Arc::new(thing.to_compact()), etag: thing.entity_tag(resource) }
    }
}

fn event(
    thing: &Thing,
    revision: u64,
    timestamp: Timestamp,
    action: ThingAction,
    path: JsonPointer,
    value: Option<Value>,
) -> ThingEvent {
    ThingEvent {
        thing_id: thing.id().clone(),
        policy_id: thing.policy_id(),
        revision,
        timestamp,
        action,
        path,
        value,
        journal: None,
        acks: None,
        correlation_id: None,
        originator: None,
    }
}

fn thing_record(thing: Thing) -> ThingRecord {
    ThingRecord {
        id: thing.id().as_str().to_owned(),
        policy_id: thing.policy_id().map(|id| id.as_str().to_owned()),
        revision: thing.revision(),
        created: thing.created().to_string(),
        modified: thing.modified().to_string(),
        doc: Arc::new(thing.into_stored()),
    }
}

fn policy_record(policy: &Policy, now: Timestamp) -> PolicyRecord {
    PolicyRecord {
        id: policy.policy_id().to_owned(),
        revision: policy.housekeeping.revision,
        created: policy.housekeeping.created.unwrap_or(now).to_string(),
        modified: now.to_string(),
        doc: Arc::new(policy.to_json()),
    }
}

/// A new policy's housekeeping: revision 1, created and modified `now`.
fn stamp_new(policy: &mut Policy, now: Timestamp) {
    policy.housekeeping.revision = 1;
    policy.housekeeping.created = Some(now);
    policy.housekeeping.modified = Some(now);
}

/// A policy body without its `policyId`: the id a creation gives it wins
/// (Ditto sets it on the builder).
fn without_policy_id(mut value: Value) -> Value {
    if let Value::Object(map) = &mut value {
        map.shift_remove("policyId");
    }
    value
}

/// A thing whose policy no longer exists.
fn policy_gone(thing: &Thing, write: bool) -> DittoError {
    let policy_id = thing.policy_id().map(|id| id.as_str().to_owned()).unwrap_or_default();
    DittoError::thing_policy_deleted(thing.id(), &policy_id, write)
}

/// The 404 of a resource the caller may not read anything of
/// (`ThingCommandToAccessExceptionRegistry`).
pub(crate) fn not_accessible(thing_id: &ThingId, resource: &ThingResource) -> DittoError {
    match resource {
        ThingResource::Thing => DittoError::thing_not_found(thing_id),
        ThingResource::PolicyId => DittoError::policy_id_not_found(thing_id),
        ThingResource::Definition => DittoError::thing_definition_not_found(thing_id),
        ThingResource::Attributes => DittoError::attributes_not_found(thing_id),
        ThingResource::Attribute(path) => DittoError::attribute_not_found(thing_id, path),
        ThingResource::Features => DittoError::features_not_found(thing_id),
        ThingResource::Feature(id) => DittoError::feature_not_found(thing_id, id),
        ThingResource::FeatureDefinition(id) => {
            DittoError::feature_definition_not_found(thing_id, id)
        }
        ThingResource::FeatureProperties(id) => {
            DittoError::feature_properties_not_found(thing_id, id)
        }
        ThingResource::FeatureProperty(id, path) => {
            DittoError::feature_property_not_found(thing_id, id, path)
        }
        ThingResource::FeatureDesiredProperties(id) => {
            DittoError::feature_desired_properties_not_found(thing_id, id)
        }
        ThingResource::FeatureDesiredProperty(id, path) => {
            DittoError::feature_desired_property_not_found(thing_id, id, path)
        }
    }
}

/// The 403 of a write the caller may not make
/// (`ThingCommandToModifyExceptionRegistry`; a merge falls back to the
/// thing's).
pub(crate) fn not_modifiable(
    thing_id: &ThingId,
    resource: &ThingResource,
    write: ThingWrite<'_>,
) -> DittoError {
    if let ThingWrite::Merge(_) = write {
        return DittoError::thing_not_modifiable(thing_id);
    }
    let path = resource.pointer();
    match resource {
        ThingResource::Thing => match write {
            ThingWrite::Delete => DittoError::thing_not_deletable(thing_id),
            _ => DittoError::thing_not_modifiable(thing_id),
        },
        ThingResource::PolicyId => DittoError::policy_id_not_modifiable(thing_id),
        ThingResource::Definition => DittoError::thing_definition_not_modifiable(thing_id),
        ThingResource::Attributes => DittoError::attributes_not_modifiable(thing_id),
        ThingResource::Attribute(_) => DittoError::attribute_not_modifiable(thing_id, &path),
        ThingResource::Features => DittoError::features_not_modifiable(thing_id),
        ThingResource::Feature(id) => DittoError::feature_not_modifiable(thing_id, id),
        ThingResource::FeatureDefinition(id) => {
            DittoError::feature_definition_not_modifiable(thing_id, id)
        }
        ThingResource::FeatureProperties(id) => {
            DittoError::feature_properties_not_modifiable(thing_id, id)
        }
        ThingResource::FeatureProperty(id, _) => {
            DittoError::feature_property_not_modifiable(thing_id, id, &path)
        }
        ThingResource::FeatureDesiredProperties(id) => {
            DittoError::feature_desired_properties_not_modifiable(thing_id, id)
        }
        ThingResource::FeatureDesiredProperty(id, _) => {
            DittoError::feature_desired_property_not_modifiable(thing_id, id, &path)
        }
    }
}

/// `If-Match` then `If-None-Match` against the resource's current tag.
fn check_preconditions(
    conditions: &Conditions,
    current: Option<&EntityTag>,
    category: Category,
) -> Result<(), Refused> {
    if current.is_none() && category != Category::Modify {
        return Ok(());
    }
    let refused = |error| Refused { error, etag: current.cloned() };
    let actual = current.map(EntityTag::as_str);
    if let Some(if_match) = &conditions.if_match {
        if !if_match.matches_strongly(current) {
            return Err(refused(DittoError::thing_precondition_failed(
                "if-match",
                &if_match.raw,
                actual,
            )));
        }
    }
    if let Some(if_none_match) = &conditions.if_none_match {
        if !if_none_match.matches_none(current) {
            return Err(refused(if category == Category::Query {
                DittoError::thing_precondition_not_modified(&if_none_match.raw, actual)
            } else {
                DittoError::thing_precondition_failed("if-none-match", &if_none_match.raw, actual)
            }));
        }
    }
    Ok(())
}

fn parsed_condition(condition: Option<&str>) -> Result<Option<Filter>, DittoError> {
    condition
        .map(|text| {
            Filter::parse(text, Scope::THINGS).map_err(|error| error.to_condition_error(text))
        })
        .transpose()
}

/// The caller must be able to read every field the condition names, or
/// the condition would leak what it cannot see.
fn condition_readable(
    filter: &Filter,
    enforcer: &Enforcer,
    caller: &Caller,
    now: Timestamp,
) -> Result<(), DittoError> {
    let who = enforcer.caller(&caller.subjects, now);
    let mut pointers = Vec::new();
    condition_fields(filter, &mut pointers);
    if pointers.iter().all(|pointer| who.has_permission("thing", pointer, Permission::Read)) {
        Ok(())
    } else {
        Err(DittoError::thing_condition_not_readable())
    }
}

fn condition_fields(filter: &Filter, into: &mut Vec<JsonPointer>) {
    match filter {
        Filter::And(all) | Filter::Or(all) => all.iter().for_each(|f| condition_fields(f, into)),
        Filter::Not(inner) => condition_fields(inner, into),
        Filter::Compare { field, .. }
        | Filter::In { field, .. }
        | Filter::Like { field, .. }
        | Filter::Exists(field)
        | Filter::Empty(field) => into.push(field.pointer().clone()),
    }
}

fn condition_holds(filter: &Filter, thing: &Thing) -> Result<(), DittoError> {
    if condition_met(filter, thing) {
        Ok(())
    } else {
        Err(DittoError::thing_condition_failed())
    }
}

fn condition_met(filter: &Filter, thing: &Thing) -> bool {
    let placeholders = TimePlaceholders::at(std::time::SystemTime::now());
    filter.matches(&thing.to_stored(), Semantics::Things, &placeholders)
}
