//! The thing: its JSON document, its housekeeping, and what can be done to
//! each of its resources, with Ditto's answers.
//!
//! A [`Thing`] holds the user document as JSON in Ditto's field order
//! (`thingId, policyId, definition, attributes, features`) next to its
//! housekeeping: `_revision` (one more per change), `_created`,
//! `_modified` and `_metadata` ([`metadata`]). The housekeeping is not part
//! of the document a read returns; `fields=` asks for it by name.
//!
//! The operations follow Ditto's things command strategies
//! (`things/service/…/persistence/actors/strategies/commands`):
//!
//! - [`Thing::retrieve`] checks each level from the top and answers the
//!   first one missing (`things:feature.notfound` before
//!   `things:feature.properties.notfound` before
//!   `things:feature.property.notfound`).
//! - [`Thing::modify`] is PUT: [`Written::Created`] (201) when the resource
//!   did not exist, [`Written::Modified`] (204) when it did, always 204 for
//!   `policyId` and the thing. Everything below a feature needs the feature
//!   to exist; an attribute does not need `attributes` to.
//! - [`Thing::merge`] is PATCH with a merge patch (RFC 7396, [`crate::merge`]):
//!   always 204, and it creates what is missing on the way, features
//!   included, since Ditto merges `{"features":{"f":{…}}}` into the whole
//!   thing. The result is checked as a PUT of the whole thing would be.
//! - [`Thing::delete`] answers the not-found of the level that is missing;
//!   `policyId` cannot be deleted.
//!
//! Every write checks the size limit ([`ThingLimits`]) on the resulting
//! document before it takes effect; a refused write changes nothing.
//! Deciding whether a caller may do any of this is the policy module's
//! job, and `_policy` / `_copyPolicyFrom` in a body are left to the caller
//! ([`ThingBody`]).

mod body;
mod compact;
mod errors;
pub mod etag;
pub mod metadata;
pub mod metadata_headers;
mod metadata_wildcards;
mod resource;
mod shape;
mod size;

pub use body::ThingBody;
pub use compact::CompactThing;
pub use etag::EntityTag;
pub use metadata_headers::{MetadataEntry, MetadataHeaders};
pub use resource::{ThingResource, UNKNOWN_RESOURCE_BODY};
pub use size::ThingLimits;

use crate::error::DittoError;
use crate::fields::{FieldSelector, FieldSource};
use crate::id::{PolicyId, ThingId};
use crate::merge::merge_patch;
use crate::pointer::JsonPointer;
use crate::policy::Timestamp;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// What a PUT did, which decides between 201 and 204.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// The resource is new; the value as stored is the 201's body.
    Created(Value),
    Modified,
}

/// What a DELETE removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// The whole thing: the caller removes the entity from its store.
    Thing,
    /// A part of the thing, already removed from it.
    Resource,
}

/// One thing, held as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Thing {
    id: ThingId,
    document: Map<String, Value>,
    revision: u64,
    created: Timestamp,
    modified: Timestamp,
    metadata: metadata::Metadata,
}

impl Thing {
    /// A new thing at revision 1, created and modified `now`.
    pub fn create(
        body: ThingBody,
        now: &Timestamp,
        limits: &ThingLimits,
    ) -> Result<Self, DittoError> {
        limits.check(&body.document)?;
        let mut metadata = Map::new();
        metadata::record_write(
            &mut metadata,
            &[],
            Some(&Value::Object(body.document.clone())),
            now,
        );
        Ok(Thing {
            id: body.thing_id,
            document: body.document,
            revision: 1,
            created: *now,
            modified: *now,
            metadata: metadata::Metadata::from_map(metadata),
        })
    }

    pub fn id(&self) -> &ThingId {
        &self.id
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn created(&self) -> &Timestamp {
        &self.created
    }

    pub fn modified(&self) -> &Timestamp {
        &self.modified
    }

    pub fn policy_id(&self) -> Option<PolicyId> {
        self.document
            .get("policyId")
            .and_then(Value::as_str)
            .and_then(|id| PolicyId::parse(id).ok())
    }

    /// The user document, as `GET` without `fields=` returns it.
    pub fn document(&self) -> &Map<String, Value> {
        &self.document
    }

    /// `_metadata`, parsed for the caller.
    pub fn metadata(&self) -> Map<String, Value> {
        self.metadata.to_map()
    }

    /// The whole thing as `GET /things/{id}` answers: the document, or its
    /// `fields=` selection, which may name `_revision`, `_created`,
    /// `_modified`, `_metadata`, `_namespace` and, when the caller fetched
    /// it, `_policy`.
    pub fn to_json(&self, fields: Option<&FieldSelector>, policy: Option<&Value>) -> Value {
        match fields {
            None => Value::Object(self.document.clone()),
            Some(selector) => selector.project_source(&ThingFields { thing: self, policy }),
        }
    }

    /// The value of a resource, selected by `fields=` when given.
    pub fn retrieve(
        &self,
        resource: &ThingResource,
        fields: Option<&FieldSelector>,
    ) -> Result<Value, DittoError> {
        if *resource == ThingResource::Thing {
            return Ok(self.to_json(fields, None));
        }
        let value = self.existing(resource)?;
        Ok(match (fields, resource) {
            (None, _) => value.clone(),
            (Some(selector), ThingResource::Features) => selector.project_features(value),
            (Some(selector), _) => selector.project(value),
        })
    }

    /// The value at a resource, or the not-found error of the first level
    /// that is missing.
    fn existing(&self, resource: &ThingResource) -> Result<&Value, DittoError> {
        let id = &self.id;
        let document = &self.document;
        match resource {
            ThingResource::Thing => Err(DittoError::thing_not_found(id)),
            ThingResource::PolicyId => {
                document.get("policyId").ok_or_else(|| DittoError::policy_id_not_found(id))
            }
            ThingResource::Definition => {
                document.get("definition").ok_or_else(|| DittoError::thing_definition_not_found(id))
            }
            ThingResource::Attributes => {
                document.get("attributes").ok_or_else(|| DittoError::attributes_not_found(id))
            }
            ThingResource::Attribute(path) => {
                let attributes = document
                    .get("attributes")
                    .ok_or_else(|| DittoError::attributes_not_found(id))?;
                path.get(attributes).ok_or_else(|| DittoError::attribute_not_found(id, path))
            }
            ThingResource::Features => {
                document.get("features").ok_or_else(|| DittoError::features_not_found(id))
            }
            ThingResource::Feature(feature_id) => self.feature(feature_id),
            ThingResource::FeatureDefinition(feature_id) => {
                child(self.feature(feature_id)?, "definition")
                    .ok_or_else(|| DittoError::feature_definition_not_found(id, feature_id))
            }
            ThingResource::FeatureProperties(feature_id) => {
                child(self.feature(feature_id)?, "properties")
                    .ok_or_else(|| DittoError::feature_properties_not_found(id, feature_id))
            }
            ThingResource::FeatureProperty(feature_id, path) => {
                let properties = child(self.feature(feature_id)?, "properties")
                    .ok_or_else(|| DittoError::feature_properties_not_found(id, feature_id))?;
                path.get(properties)
                    .ok_or_else(|| DittoError::feature_property_not_found(id, feature_id, path))
            }
            ThingResource::FeatureDesiredProperties(feature_id) => {
                child(self.feature(feature_id)?, "desiredProperties")
                    .ok_or_else(|| DittoError::feature_desired_properties_not_found(id, feature_id))
            }
            ThingResource::FeatureDesiredProperty(feature_id, path) => {
                let properties =
                    child(self.feature(feature_id)?, "desiredProperties").ok_or_else(|| {
                        DittoError::feature_desired_properties_not_found(id, feature_id)
                    })?;
                path.get(properties).ok_or_else(|| {
                    DittoError::feature_desired_property_not_found(id, feature_id, path)
                })
            }
        }
    }

    fn feature(&self, feature_id: &str) -> Result<&Value, DittoError> {
        self.document
            .get("features")
            .and_then(|features| child(features, feature_id))
            .ok_or_else(|| DittoError::feature_not_found(&self.id, feature_id))
    }

    /// PUT `value` at `resource`.
    pub fn modify(
        &mut self,
        resource: &ThingResource,
        value: &Value,
        now: &Timestamp,
        limits: &ThingLimits,
    ) -> Result<Written, DittoError> {
        if *resource == ThingResource::Thing {
            let mut body = ThingBody::for_put(&self.id, value)?;
            if body.policy_id().is_none() {
                if let Some(policy_id) = self.policy_id() {
                    body.set_policy_id(&policy_id);
                }
            }
            limits.check(&body.document)?;
            let written = Value::Object(body.document.clone());
            self.metadata.update(|meta| metadata::record_write(meta, &[], Some(&written), now));
            self.document = body.document;
            self.count_change(now);
            return Ok(Written::Modified);
        }
        if let Some(feature_id) = resource_feature_below(resource) {
            self.feature(feature_id)?;
        }
        let stored = self.shaped(resource, value)?;
        let existed = self.existing(resource).is_ok();
        let pointer = resource.pointer();
        let mut document = self.document.clone();
        if let Some((last, parents)) = pointer.levels().split_last() {
            with_object_at(&mut document, parents, |parent| {
                parent.insert(last.clone(), stored.clone())
            });
        }
        reorder(&mut document, THING_ORDER);
        if let Some(feature_id) = resource_feature_below(resource) {
            let feature_levels = ["features".to_string(), feature_id.to_string()];
            if let Some(feature) = object_at_existing(&mut document, &feature_levels) {
                reorder(feature, FEATURE_ORDER);
            }
        }
        limits.check(&document)?;
        self.metadata
            .update(|meta| metadata::record_write(meta, pointer.levels(), Some(&stored), now));
        self.document = document;
        self.count_change(now);
        Ok(if existed || *resource == ThingResource::PolicyId {
            Written::Modified
        } else {
            Written::Created(stored)
        })
    }

    /// A value checked for a resource and in the form it is stored in.
    fn shaped(&self, resource: &ThingResource, value: &Value) -> Result<Value, DittoError> {
        match resource {
            ThingResource::Thing => Ok(value.clone()),
            ThingResource::PolicyId => match value.as_str() {
                Some(text) => PolicyId::parse(text).map(|_| value.clone()),
                None => Err(DittoError::policy_id_invalid(&value.to_string())),
            },
            ThingResource::Definition => shape::thing_definition(value),
            ThingResource::Attributes
            | ThingResource::FeatureProperties(_)
            | ThingResource::FeatureDesiredProperties(_) => shape::key_checked_object(value),
            ThingResource::Attribute(_)
            | ThingResource::FeatureProperty(..)
            | ThingResource::FeatureDesiredProperty(..) => shape::key_checked_value(value),
            ThingResource::Features => shape::features(value),
            ThingResource::Feature(feature_id) => shape::feature(feature_id, value),
            ThingResource::FeatureDefinition(_) => shape::feature_definition(value),
        }
    }

    /// PATCH `patch` at `resource` as a merge patch.
    pub fn merge(
        &mut self,
        resource: &ThingResource,
        patch: &Value,
        now: &Timestamp,
        limits: &ThingLimits,
    ) -> Result<(), DittoError> {
        let patch = self.checked_patch(resource, patch)?;
        let pointer = resource.pointer();
        let mut merged = Value::Object(self.document.clone());
        match pointer.levels().split_last() {
            None => merge_patch(&mut merged, &patch)?,
            Some((last, parents)) => {
                if let Value::Object(root) = &mut merged {
                    with_object_at(root, parents, |parent| {
                        if patch.is_null() {
                            parent.shift_remove(last);
                            Ok(())
                        } else {
                            merge_patch(parent.entry(last.clone()).or_insert(Value::Null), &patch)
                        }
                    })?;
                }
            }
        }
        let Value::Object(merged) = merged else {
            return Err(DittoError::thing_merge_invalid(MERGE_INVALID_MESSAGE));
        };
        let document = shape::thing_document(&merged, &self.id)?;
        limits.check(&document)?;
        let merged_here = pointer.get(&Value::Object(document.clone())).cloned();
        self.metadata.update(|meta| {
            metadata::record_merge(meta, pointer.levels(), &patch, merged_here.as_ref(), now)
        });
        self.document = document;
        self.count_change(now);
        Ok(())
    }

    /// The checks Ditto's route and `MergeThing` make before merging, and
    /// the patch without what is not the document's to merge.
    fn checked_patch(&self, resource: &ThingResource, patch: &Value) -> Result<Value, DittoError> {
        match resource {
            ThingResource::Thing => {
                let map = match patch {
                    Value::Object(map) => map,
                    Value::Null => {
                        return Err(DittoError::thing_merge_invalid(
                            "The provided json value can not be applied at this resource",
                        ))
                    }
                    _ => return Err(DittoError::thing_merge_invalid(MERGE_INVALID_MESSAGE)),
                };
                match map.get("thingId") {
                    Some(Value::Null) => return Err(DittoError::thing_id_not_deletable()),
                    Some(in_body) if in_body.as_str() != Some(self.id.as_str()) => {
                        return Err(DittoError::thing_id_not_settable_on_put_or_patch())
                    }
                    _ => {}
                }
                if map.get("policyId").is_some_and(Value::is_null) {
                    return Err(DittoError::policy_id_not_deletable());
                }
                // `_policy`, `_copyPolicyFrom` and housekeeping fields are
                // not the document's; the caller has taken what it needs.
                let document_only = map
                    .iter()
                    .filter(|(key, _)| !key.starts_with('_'))
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect();
                Ok(Value::Object(document_only))
            }
            ThingResource::PolicyId if patch.is_null() => {
                Err(DittoError::policy_id_not_deletable())
            }
            ThingResource::PolicyId => self.shaped(resource, patch),
            _ => {
                crate::id::validate_keys(patch)?;
                Ok(patch.clone())
            }
        }
    }

    /// DELETE `resource`.
    pub fn delete(
        &mut self,
        resource: &ThingResource,
        now: &Timestamp,
    ) -> Result<Deleted, DittoError> {
        let id = &self.id;
        match resource {
            ThingResource::Thing => return Ok(Deleted::Thing),
            ThingResource::PolicyId => return Err(DittoError::policy_id_not_deletable()),
            ThingResource::Attribute(path) => {
                let exists = self.document.get("attributes").and_then(|a| path.get(a)).is_some();
                if !exists {
                    return Err(DittoError::attribute_not_found(id, path));
                }
            }
            ThingResource::FeatureProperty(feature_id, path) => {
                let feature = self.feature(feature_id)?;
                if child(feature, "properties").and_then(|p| path.get(p)).is_none() {
                    return Err(DittoError::feature_property_not_found(id, feature_id, path));
                }
            }
            ThingResource::FeatureDesiredProperty(feature_id, path) => {
                let feature = self.feature(feature_id)?;
                if child(feature, "desiredProperties").and_then(|p| path.get(p)).is_none() {
                    return Err(DittoError::feature_desired_property_not_found(
                        id, feature_id, path,
                    ));
                }
            }
            _ => {
                self.existing(resource)?;
            }
        }
        let pointer = resource.pointer();
        if let Some((last, parents)) = pointer.levels().split_last() {
            if let Some(parent) = object_at_existing(&mut self.document, parents) {
                parent.shift_remove(last);
            }
        }
        self.metadata.update(|meta| metadata::record_write(meta, pointer.levels(), None, now));
        self.count_change(now);
        Ok(Deleted::Resource)
    }

    /// `put-metadata` after a write at `resource` that wrote `written`
    /// there: each entry's value set at its key below the resource, a
    /// wildcard key at every place of `written` it stands for
    /// (`metadata_wildcards.rs`), in the entries' order. The thing with
    /// what clients put in its metadata must stay within the size limit,
    /// as Ditto checks it. A refused entry changes nothing.
    pub fn put_metadata(
        &mut self,
        resource: &ThingResource,
        entries: &[MetadataEntry],
        written: &Value,
        limits: &ThingLimits,
    ) -> Result<(), DittoError> {
        let base = resource.pointer();
        let mut sets = Vec::new();
        for entry in entries {
            let mut paths = Vec::new();
            let header = metadata_headers::PUT_METADATA;
            metadata_wildcards::expand(&base, &entry.key, written, header, &mut paths)?;
            if sets.len() + paths.len() > metadata_wildcards::METADATA_PATHS_MAX {
                let max = metadata_wildcards::METADATA_PATHS_MAX;
                return Err(DittoError::metadata_too_many_paths(header, max));
            }
            sets.extend(paths.into_iter().map(|path| (base.join(&path), &entry.value)));
        }
        let mut meta = self.metadata.to_map();
        for (path, value) in sets {
            metadata::put(&mut meta, path.levels(), value)?;
        }
        let mut measured = self.document.clone();
        if let Some(clients) = metadata::client_metadata(&meta) {
            measured.insert("_metadata".into(), clients);
        }
        limits.check(&measured)?;
        self.metadata = metadata::Metadata::from_map(meta);
        Ok(())
    }

    /// `delete-metadata` with a write at `resource`: what clients put at
    /// each path below it removed; `*` alone removes all of it.
    pub fn delete_metadata(
        &mut self,
        resource: &ThingResource,
        paths: &[JsonPointer],
    ) -> Result<(), DittoError> {
        let base = resource.pointer();
        let targets = self.metadata_paths(resource, paths, metadata_headers::DELETE_METADATA)?;
        self.metadata.update(|meta| match targets {
            None => metadata::delete(meta, base.levels()),
            Some(targets) => {
                for target in targets {
                    metadata::delete(meta, base.join(&target).levels());
                }
            }
        });
        Ok(())
    }

    /// `get-metadata` on a read of `resource`: the metadata at each path
    /// below it, at that path of the answer (`ditto-metadata`); `*` alone
    /// answers all of it.
    pub fn metadata_of(
        &self,
        resource: &ThingResource,
        paths: &[JsonPointer],
    ) -> Result<Value, DittoError> {
        let base = resource.pointer();
        let meta = self.metadata.to_map();
        let targets = self.metadata_paths(resource, paths, metadata_headers::GET_METADATA)?;
        let Some(targets) = targets else {
            let all = metadata::get(&meta, base.levels()).cloned();
            return Ok(all.unwrap_or_else(|| Value::Object(Map::new())));
        };
        let mut found = Map::new();
        for target in targets {
            if let Some(value) = metadata::get(&meta, base.join(&target).levels()) {
                if let Some((last, parents)) = target.levels().split_last() {
                    with_object_at(&mut found, parents, |parent| {
                        parent.insert(last.clone(), value.clone())
                    });
                }
            }
        }
        Ok(Value::Object(found))
    }

    /// The paths below `resource` that `paths` stand for in the value
    /// there; `None` for a lone `*`, all of it (Ditto's
    /// `containsExactlySingleWildcard`).
    fn metadata_paths(
        &self,
        resource: &ThingResource,
        paths: &[JsonPointer],
        header: &str,
    ) -> Result<Option<Vec<JsonPointer>>, DittoError> {
        if let [only] = paths {
            if only.levels() == ["*"] {
                return Ok(None);
            }
        }
        if !paths.iter().any(metadata_headers::has_wildcard) {
            return Ok(Some(paths.to_vec()));
        }
        // The value the wildcards stand for keys of: the resource's, `{}`
        // when there is none (a delete's), the document for the thing.
        let value: Cow<'_, Value> = match resource {
            ThingResource::Thing => Cow::Owned(Value::Object(self.document.clone())),
            _ => self
                .existing(resource)
                .map_or_else(|_| Cow::Owned(Value::Object(Map::new())), Cow::Borrowed),
        };
        let base = resource.pointer();
        let mut targets = Vec::new();
        for path in paths {
            metadata_wildcards::expand(&base, path, &value, header, &mut targets)?;
        }
        Ok(Some(targets))
    }

    /// The entity tag of a resource as it is now, `None` when it does not
    /// exist.
    pub fn entity_tag(&self, resource: &ThingResource) -> Option<EntityTag> {
        match resource {
            ThingResource::Thing => Some(EntityTag::revision(self.revision)),
            _ => self.existing(resource).ok().map(EntityTag::of_value),
        }
    }

    /// The thing as a store keeps it: the document with `_revision`,
    /// `_created`, `_modified` and `_metadata` after it.
    pub fn to_stored(&self) -> Value {
        self.clone().into_stored()
    }

    /// [`Thing::to_stored`], taking the thing's document rather than
    /// copying it.
    pub fn into_stored(self) -> Value {
        let mut stored = self.document;
        stored.insert("_revision".into(), Value::from(self.revision));
        stored.insert("_created".into(), Value::String(self.created.to_string()));
        stored.insert("_modified".into(), Value::String(self.modified.to_string()));
        stored.insert("_metadata".into(), Value::Object(self.metadata.into_map()));
        Value::Object(stored)
    }

    /// A thing read back from [`Thing::to_stored`]'s form.
    pub fn from_stored(stored: &Value) -> Result<Self, DittoError> {
        let map = stored.as_object().ok_or_else(|| DittoError::json_invalid(stored))?;
        let id_text = map
            .get("thingId")
            .and_then(Value::as_str)
            .ok_or_else(|| DittoError::json_invalid("a stored thing without thingId"))?;
        let id = ThingId::parse(id_text)?;
        let timestamp = |key: &str| {
            map.get(key).and_then(Value::as_str).and_then(Timestamp::parse).ok_or_else(|| {
                DittoError::json_invalid(format!("a stored thing without a valid {key}"))
            })
        };
        Ok(Thing {
            document: shape::thing_document(map, &id)?,
            revision: map
                .get("_revision")
                .and_then(Value::as_u64)
                .ok_or_else(|| DittoError::json_invalid("a stored thing without _revision"))?,
            created: timestamp("_created")?,
            modified: timestamp("_modified")?,
            metadata: map
                .get("_metadata")
                .and_then(Value::as_object)
                .map(|meta| metadata::Metadata::from_map(meta.clone()))
                .unwrap_or_default(),
            id,
        })
    }

    fn count_change(&mut self, now: &Timestamp) {
        self.revision += 1;
        self.modified = *now;
    }
}

/// `ThingMergeInvalidException`'s default message.
const MERGE_INVALID_MESSAGE: &str =
    "The provided JSON Merge Patch is invalid, it must conform to RFC7396.";

/// The feature a resource below a feature needs to exist for a PUT.
fn resource_feature_below(resource: &ThingResource) -> Option<&str> {
    match resource {
        ThingResource::FeatureDefinition(id)
        | ThingResource::FeatureProperties(id)
        | ThingResource::FeatureProperty(id, _)
        | ThingResource::FeatureDesiredProperties(id)
        | ThingResource::FeatureDesiredProperty(id, _) => Some(id),
        _ => None,
    }
}

fn child<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.as_object()?.get(key)
}

/// Runs `f` on the object at `levels`, made on the way: what is missing or
/// not an object becomes `{}`, as writing below it requires.
fn with_object_at<R>(
    map: &mut Map<String, Value>,
    levels: &[String],
    f: impl FnOnce(&mut Map<String, Value>) -> R,
) -> R {
    let Some((first, rest)) = levels.split_first() else {
        return f(map);
    };
    let slot = map.entry(first.clone()).or_insert(Value::Null);
    if let Value::Object(inner) = slot {
        return with_object_at(inner, rest, f);
    }
    let mut inner = Map::new();
    let result = with_object_at(&mut inner, rest, f);
    *slot = Value::Object(inner);
    result
}

fn object_at_existing<'a>(
    mut map: &'a mut Map<String, Value>,
    levels: &[String],
) -> Option<&'a mut Map<String, Value>> {
    for level in levels {
        map = map.get_mut(level)?.as_object_mut()?;
    }
    Some(map)
}

/// Puts the keys Ditto orders (`ORDER`) first, in its order, after a write
/// may have appended one at the end.
fn reorder(map: &mut Map<String, Value>, order: &[&str]) {
    let mut rest = std::mem::take(map);
    for key in order {
        if let Some(value) = rest.shift_remove(*key) {
            map.insert((*key).to_string(), value);
        }
    }
    map.extend(rest);
}

const THING_ORDER: &[&str] = &["thingId", "policyId", "definition", "attributes", "features"];
const FEATURE_ORDER: &[&str] = &["definition", "properties", "desiredProperties"];

/// A thing's top-level fields for `fields=`, housekeeping included,
/// without building a JSON object of everything.
struct ThingFields<'a> {
    thing: &'a Thing,
    policy: Option<&'a Value>,
}

impl FieldSource for ThingFields<'_> {
    fn field(&self, key: &str) -> Option<Cow<'_, Value>> {
        let thing = self.thing;
        match key {
            "_revision" => Some(Cow::Owned(Value::from(thing.revision))),
            "_created" => Some(Cow::Owned(Value::String(thing.created.to_string()))),
            "_modified" => Some(Cow::Owned(Value::String(thing.modified.to_string()))),
            "_namespace" => Some(Cow::Owned(Value::String(thing.id.namespace().into()))),
            "_metadata" => Some(Cow::Owned(Value::Object(thing.metadata.to_map()))),
            "_policy" => self.policy.map(Cow::Borrowed),
            _ => thing.document.get(key).map(Cow::Borrowed),
        }
    }
}

#[cfg(test)]
mod tests;
