//! `_created`, `_modified` and `_metadata`: what a thing records about its
//! own changes.
//!
//! Timestamps are the crate's [`Timestamp`], written as Java's
//! `Instant.toString()` writes Ditto's (`2024-05-01T12:00:00.123456Z`), and
//! taken at the microsecond precision of Ditto's clock ([`now`]).
//!
//! `_metadata` mirrors the thing's structure, as Ditto's does: the
//! metadata of `/features/lamp/properties/on` lives at
//! `_metadata/features/lamp/properties/on`. Ferry keeps one entry there by
//! itself, at every leaf (a value that is not an object: a scalar, an
//! array or `null`): `{"_modified": "<timestamp>"}`, the last time a write
//! touched that leaf. Every write replaces these entries below the path it
//! wrote; a merge re-stamps only the leaves its patch names and drops the
//! entries of what it deleted; a delete drops everything below the path.
//! Empty objects carry no entry, and a metadata object left empty is
//! removed.
//!
//! Beside them lies what clients put with Ditto's metadata headers
//! (`metadata_headers.rs`): `{"_modified": …, "unit": "°C"}` at a leaf.
//! As in Ditto, a write keeps it (a PUT of `{}` clears it, as Ditto's
//! strategy does), and a delete, or a merge setting `null`, drops it with
//! the value. Where the two collide (a client's key named like a child
//! the value now has) the thing's structure wins. `_modified` itself is
//! never a client's to set or remove.

use crate::error::DittoError;
use crate::pointer::JsonPointer;
use crate::policy::Timestamp;
use serde_json::{Map, Value};

/// A thing's `_metadata`: serialized as a cached thing holds it, parsed
/// once a write changes it. Parsed, every level and every leaf of it is a
/// JSON object of its own (an `IndexMap` of a few hundred bytes), which for
/// a small thing is more memory than the thing itself; and it is read only
/// by writes, `fields=_metadata` and shadows. A write parses it once and
/// keeps it parsed for the store's record, which takes the map, and the
/// cache, which takes it serialized ([`Metadata::serialized`]).
#[derive(Debug, Clone)]
pub struct Metadata(Form);

#[derive(Debug, Clone)]
enum Form {
    Serialized(Box<str>),
    Parsed(Map<String, Value>),
}

impl Default for Metadata {
    fn default() -> Metadata {
        Metadata(Form::Serialized(Box::default()))
    }
}

/// Two metadata are equal when they hold the same entries, whatever their
/// form.
impl PartialEq for Metadata {
    fn eq(&self, other: &Metadata) -> bool {
        match (&self.0, &other.0) {
            (Form::Serialized(ours), Form::Serialized(theirs)) => ours == theirs,
            _ => self.to_map() == other.to_map(),
        }
    }
}

impl Metadata {
    pub fn from_map(map: Map<String, Value>) -> Metadata {
        Metadata(Form::Parsed(map))
    }

    /// The metadata in the form the cache keeps: `""` when empty.
    pub fn from_serialized(text: Box<str>) -> Metadata {
        Metadata(Form::Serialized(text))
    }

    /// The metadata serialized, as the cache keeps it: `""` when empty.
    pub fn serialized(&self) -> Box<str> {
        match &self.0 {
            Form::Serialized(text) => text.clone(),
            Form::Parsed(map) if map.is_empty() => Box::default(),
            // A map of JSON values always serializes.
            Form::Parsed(map) => serde_json::to_string(map).unwrap_or_default().into_boxed_str(),
        }
    }

    /// The metadata as a JSON object.
    pub fn to_map(&self) -> Map<String, Value> {
        match &self.0 {
            Form::Serialized(text) => parse(text),
            Form::Parsed(map) => map.clone(),
        }
    }

    /// The metadata as a JSON object, taken.
    pub fn into_map(self) -> Map<String, Value> {
        match self.0 {
            Form::Serialized(text) => parse(&text),
            Form::Parsed(map) => map,
        }
    }

    /// Changes the metadata in its parsed form, which it then keeps.
    pub fn update(&mut self, change: impl FnOnce(&mut Map<String, Value>)) {
        if let Form::Serialized(text) = &self.0 {
            self.0 = Form::Parsed(parse(text));
        }
        if let Form::Parsed(map) = &mut self.0 {
            change(map);
        }
    }
}

fn parse(text: &str) -> Map<String, Value> {
    if text.is_empty() {
        return Map::new();
    }
    // Written by `serialized`, so it parses; if it did not, the metadata
    // would be lost rather than the thing.
    serde_json::from_str(text).unwrap_or_default()
}

/// The key of the per-leaf modification time inside `_metadata`.
pub const LEAF_MODIFIED_KEY: &str = "_modified";

fn leaf_entry(now: &Timestamp) -> Value {
    let mut entry = Map::new();
    entry.insert(LEAF_MODIFIED_KEY.into(), Value::String(now.to_string()));
    Value::Object(entry)
}

/// The metadata of a freshly written value: an entry at each leaf, `None`
/// when the value has no leaves (an empty object, or objects of those).
pub(crate) fn mirror(value: &Value, now: &Timestamp) -> Option<Value> {
    match value {
        Value::Object(map) => {
            let mirrored: Map<String, Value> = map
                .iter()
                .filter_map(|(key, inner)| mirror(inner, now).map(|m| (key.clone(), m)))
                .collect();
            (!mirrored.is_empty()).then_some(Value::Object(mirrored))
        }
        _ => Some(leaf_entry(now)),
    }
}

/// `node` without Ferry's own entries: what clients put there, `None`
/// when that is nothing.
fn client_part(node: &Value) -> Option<Value> {
    match node {
        Value::Object(map) => client_metadata(map),
        other => Some(other.clone()),
    }
}

/// What clients put in (a level of) a thing's metadata, Ferry's entries
/// left out; of the whole, what the size limit counts, as Ditto's metadata
/// holds nothing else.
pub(crate) fn client_metadata(meta: &Map<String, Value>) -> Option<Value> {
    let kept: Map<String, Value> = meta
        .iter()
        .filter(|(key, value)| !(key.as_str() == LEAF_MODIFIED_KEY && value.is_string()))
        .filter_map(|(key, value)| client_part(value).map(|value| (key.clone(), value)))
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

/// Ferry's own entries of `node` alone (each `_modified` with the objects
/// leading to it), `None` when it has none.
fn own_part(node: &Value) -> Option<Value> {
    let Value::Object(map) = node else {
        return None;
    };
    let kept: Map<String, Value> = map
        .iter()
        .filter_map(|(key, value)| {
            if key == LEAF_MODIFIED_KEY && value.is_string() {
                return Some((key.clone(), value.clone()));
            }
            own_part(value).map(|value| (key.clone(), value))
        })
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

/// `ours` (entries that follow the thing's structure) with `theirs` added
/// where it does not collide; `collided` tells whether anything of
/// `theirs` gave way: a value where `ours` has an object, or the reverse.
fn layered(ours: Value, theirs: Value, collided: &mut bool) -> Value {
    match (ours, theirs) {
        (Value::Object(mut ours), Value::Object(theirs)) => {
            for (key, their) in theirs {
                match ours.get_mut(&key) {
                    None => {
                        ours.insert(key, their);
                    }
                    Some(our) => *our = layered(std::mem::take(our), their, collided),
                }
            }
            Value::Object(ours)
        }
        (ours, _) => {
            *collided = true;
            ours
        }
    }
}

/// What `ours` and `theirs` make together, either possibly absent.
fn combined(ours: Option<Value>, theirs: Option<Value>) -> Option<Value> {
    match (ours, theirs) {
        (Some(ours), Some(theirs)) => Some(layered(ours, theirs, &mut false)),
        (ours, theirs) => ours.or(theirs),
    }
}

/// A node that was a leaf and now has children loses its leaf entry; an
/// object under the same key is the mirror of a child named `_modified`.
fn drop_leaf_entry(node: &mut Map<String, Value>) {
    if node.get(LEAF_MODIFIED_KEY).is_some_and(Value::is_string) {
        node.shift_remove(LEAF_MODIFIED_KEY);
    }
}

/// Runs `at_target` on the metadata object holding the last level of
/// `levels`, creating the objects on the way, dropping the leaf entries of
/// what are now inner nodes, and removing objects left empty.
fn at_parent(
    meta: &mut Map<String, Value>,
    levels: &[String],
    at_target: &mut dyn FnMut(&mut Map<String, Value>, &str),
) {
    let Some((first, rest)) = levels.split_first() else {
        return;
    };
    drop_leaf_entry(meta);
    if rest.is_empty() {
        at_target(meta, first);
        return;
    }
    let child = meta.entry(first.clone()).or_insert_with(|| Value::Object(Map::new()));
    if !child.is_object() {
        *child = Value::Object(Map::new());
    }
    let now_empty = match child {
        Value::Object(child_map) => {
            at_parent(child_map, rest, at_target);
            child_map.is_empty()
        }
        _ => false,
    };
    if now_empty {
        meta.shift_remove(first);
    }
}

/// After `value` was written at `levels` (or deleted there, when `None`).
pub(crate) fn record_write(
    meta: &mut Map<String, Value>,
    levels: &[String],
    value: Option<&Value>,
    now: &Timestamp,
) {
    let mirrored = value.and_then(|v| mirror(v, now));
    // Ditto keeps a client's metadata across a write, but a write of `{}`
    // sets the metadata there to `{}`, and a delete removes it.
    let clears = value.is_none_or(|v| v.as_object().is_some_and(Map::is_empty));
    if levels.is_empty() {
        let kept = if clears { None } else { client_part(&Value::Object(std::mem::take(meta))) };
        *meta = match combined(mirrored, kept) {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        return;
    }
    at_parent(meta, levels, &mut |parent, key| {
        let kept = if clears { None } else { parent.get(key).and_then(client_part) };
        match combined(mirrored.clone(), kept) {
            Some(entry) => {
                parent.insert(key.to_string(), entry);
            }
            None => {
                parent.shift_remove(key);
            }
        }
    });
}

/// After `patch` was merged at `levels`, leaving `merged` there (`None`
/// when the patch deleted it).
pub(crate) fn record_merge(
    meta: &mut Map<String, Value>,
    levels: &[String],
    patch: &Value,
    merged: Option<&Value>,
    now: &Timestamp,
) {
    let Some(merged) = merged else {
        record_write(meta, levels, None, now);
        return;
    };
    if levels.is_empty() {
        let mut root = Value::Object(std::mem::take(meta));
        reconcile(&mut root, patch, merged, now);
        if let Value::Object(map) = root {
            *meta = map;
        }
        return;
    }
    at_parent(meta, levels, &mut |parent, key| {
        let node = parent.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
        reconcile(node, patch, merged, now);
        if node.as_object().is_some_and(Map::is_empty) {
            parent.shift_remove(key);
        }
    });
}

fn reconcile(node: &mut Value, patch: &Value, merged: &Value, now: &Timestamp) {
    let (Value::Object(patch), Value::Object(merged)) = (patch, merged) else {
        let kept = client_part(node);
        *node = combined(mirror(merged, now), kept).unwrap_or_else(|| Value::Object(Map::new()));
        return;
    };
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    let Value::Object(map) = node else {
        return;
    };
    drop_leaf_entry(map);
    // A key the patch sets to null takes its metadata along. Other keys the
    // thing does not have (a client's, or removed by a regex) lose only
    // Ferry's entries.
    map.retain(|key, value| {
        if merged.contains_key(key) {
            return true;
        }
        if patch.get(key).is_some_and(Value::is_null) {
            return false;
        }
        match client_part(value) {
            Some(kept) => {
                *value = kept;
                true
            }
            None => false,
        }
    });
    for (key, patch_value) in patch {
        let Some(merged_value) = merged.get(key).filter(|_| !patch_value.is_null()) else {
            continue;
        };
        let child = map.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
        reconcile(child, patch_value, merged_value, now);
        if child.as_object().is_some_and(Map::is_empty) {
            map.shift_remove(key);
        }
    }
}

/// `put-metadata`: `value` set at `levels`, the objects on the way made,
/// Ferry's entries below kept. Refused (and nothing changed) when `value`
/// would take the place of an object that holds Ferry's entries.
pub(crate) fn put(
    meta: &mut Map<String, Value>,
    levels: &[String],
    value: &Value,
) -> Result<(), DittoError> {
    put_below(meta, levels, value, levels)
}

fn put_below(
    map: &mut Map<String, Value>,
    rest: &[String],
    value: &Value,
    whole: &[String],
) -> Result<(), DittoError> {
    let Some((first, rest)) = rest.split_first() else {
        return Ok(());
    };
    if rest.is_empty() {
        let new = match map.get(first).and_then(own_part) {
            None => value.clone(),
            Some(ours) => {
                let mut collided = !value.is_object();
                let new = layered(ours, value.clone(), &mut collided);
                if collided {
                    return Err(DittoError::metadata_not_modifiable(&JsonPointer::from_levels(
                        whole,
                    )));
                }
                new
            }
        };
        map.insert(first.clone(), new);
        return Ok(());
    }
    let child = map.entry(first.clone()).or_insert_with(|| Value::Object(Map::new()));
    if !child.is_object() {
        *child = Value::Object(Map::new());
    }
    match child {
        Value::Object(inner) => put_below(inner, rest, value, whole),
        _ => Ok(()),
    }
}

/// `delete-metadata`: what clients put at `levels` removed, Ferry's
/// entries kept, objects left empty removed.
pub(crate) fn delete(meta: &mut Map<String, Value>, levels: &[String]) {
    let Some((first, rest)) = levels.split_first() else {
        *meta = match own_part(&Value::Object(std::mem::take(meta))) {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        return;
    };
    let Some(child) = meta.get_mut(first) else {
        return;
    };
    let emptied = if rest.is_empty() {
        match own_part(child) {
            Some(ours) => {
                *child = ours;
                false
            }
            None => true,
        }
    } else if let Value::Object(inner) = child {
        delete(inner, rest);
        inner.is_empty()
    } else {
        false
    };
    if emptied {
        meta.shift_remove(first);
    }
}

/// The metadata at `levels`, for `get-metadata`.
pub(crate) fn get<'a>(meta: &'a Map<String, Value>, levels: &[String]) -> Option<&'a Value> {
    let (first, rest) = levels.split_first()?;
    rest.iter().try_fold(meta.get(first)?, |node, level| node.as_object()?.get(level))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serialized_metadata_reads_back_as_written_in_order() {
        let map = json!({"b": {"_modified": "t"}, "a": {"x": {"_modified": "u"}}});
        let map = map.as_object().unwrap().clone();
        let mut meta = Metadata::from_serialized(Metadata::from_map(map.clone()).serialized());
        assert_eq!(meta.to_map(), map);
        assert_eq!(meta.to_map().keys().collect::<Vec<_>>(), ["b", "a"]);
        meta.update(|m| {
            m.shift_remove("b");
        });
        assert_eq!(Value::Object(meta.to_map()), json!({"a": {"x": {"_modified": "u"}}}));
        meta.update(Map::clear);
        assert_eq!(meta, Metadata::default());
        assert!(meta.to_map().is_empty());
        assert_eq!(&*meta.serialized(), "", "an empty metadata is kept as nothing");
    }

    fn ts(n: i64) -> Timestamp {
        Timestamp::from_unix(n, 0)
    }

    fn levels(path: &str) -> Vec<String> {
        crate::pointer::JsonPointer::parse(path).unwrap().levels().to_vec()
    }

    #[test]
    fn a_write_mirrors_its_leaves_and_replaces_what_was_below() {
        let t1 = ts(1);
        let t2 = ts(2);
        let mut meta = Map::new();
        record_write(
            &mut meta,
            &[],
            Some(&json!({"thingId": "a:b", "attributes": {"x": 1, "o": {}}})),
            &t1,
        );
        let stamp = |t: &Timestamp| json!({"_modified": t.to_string()});
        assert_eq!(
            Value::Object(meta.clone()),
            json!({"thingId": stamp(&t1), "attributes": {"x": stamp(&t1)}})
        );

        // A leaf that becomes an object loses its own entry.
        record_write(&mut meta, &levels("attributes/x/y"), Some(&json!([1])), &t2);
        assert_eq!(meta["attributes"], json!({"x": {"y": stamp(&t2)}}));

        record_write(&mut meta, &levels("attributes/x/y"), None, &t2);
        assert_eq!(
            Value::Object(meta),
            json!({"thingId": stamp(&t1)}),
            "empty metadata objects are pruned"
        );
    }

    #[test]
    fn a_merge_restamps_only_what_the_patch_names() {
        let (t1, t2) = (ts(1), ts(2));
        let stamp = |t: &Timestamp| json!({"_modified": t.to_string()});
        let mut meta = Map::new();
        let before = json!({"attributes": {"a": 1, "b": 2, "c": {"d": 3}}});
        record_write(&mut meta, &levels("attributes"), Some(&before["attributes"]), &t1);

        let patch = json!({"a": 10, "b": null, "c": {"e": 4}});
        let merged = json!({"a": 10, "c": {"d": 3, "e": 4}});
        record_merge(&mut meta, &levels("attributes"), &patch, Some(&merged), &t2);
        assert_eq!(
            meta["attributes"],
            json!({"a": stamp(&t2), "c": {"d": stamp(&t1), "e": stamp(&t2)}})
        );

        record_merge(&mut meta, &levels("attributes/c"), &json!(null), None, &t2);
        assert_eq!(meta["attributes"], json!({"a": stamp(&t2)}));
    }

    #[test]
    fn what_clients_put_lives_beside_the_stamps_and_follows_the_value() {
        let (t1, t2) = (ts(1), ts(2));
        let stamp = |t: &Timestamp| t.to_string();
        let mut meta = Map::new();
        let attributes = json!({"a": 1, "o": {"x": 2}});
        record_write(&mut meta, &levels("attributes"), Some(&attributes), &t1);
        put(&mut meta, &levels("attributes/a/unit"), &json!("C")).unwrap();
        put(&mut meta, &levels("attributes/o/about"), &json!({"by": "me"})).unwrap();
        assert_eq!(meta["attributes"]["a"], json!({"_modified": stamp(&t1), "unit": "C"}));

        // A write keeps it and re-stamps; a value where the thing now has
        // an object gives way.
        record_write(&mut meta, &levels("attributes/a"), Some(&json!({"unit": 5})), &t2);
        assert_eq!(meta["attributes"]["a"], json!({"unit": {"_modified": stamp(&t2)}}));
        record_write(&mut meta, &levels("attributes/o"), Some(&json!({"x": 3})), &t2);
        assert_eq!(
            meta["attributes"]["o"],
            json!({"x": {"_modified": stamp(&t2)}, "about": {"by": "me"}})
        );
        // A merge re-stamps what it names and drops what it sets to null.
        let patch = json!({"o": {"x": 4}, "a": null});
        let merged = json!({"o": {"x": 4}});
        record_merge(&mut meta, &levels("attributes"), &patch, Some(&merged), &t1);
        assert_eq!(
            meta["attributes"],
            json!({"o": {"x": {"_modified": stamp(&t1)}, "about": {"by": "me"}}})
        );
        // A write of {} clears it, as Ditto's does (and empty objects go).
        record_write(&mut meta, &levels("attributes/o"), Some(&json!({})), &t1);
        assert!(!meta.contains_key("attributes"));
    }

    #[test]
    fn putting_and_deleting_never_touch_the_stamps() {
        let t1 = ts(1);
        let mut meta = Map::new();
        record_write(&mut meta, &[], Some(&json!({"attributes": {"a": 1, "b": 2}})), &t1);
        let before = meta.clone();
        // An object at a stamped place keeps the stamps below it; anything
        // else there is refused.
        put(&mut meta, &levels("attributes"), &json!({"about": "x"})).unwrap();
        assert_eq!(meta["attributes"]["a"], before["attributes"]["a"]);
        assert_eq!(meta["attributes"]["about"], json!("x"));
        for (path, value) in [("attributes", json!("flat")), ("attributes", json!({"a": 1}))] {
            let error = put(&mut meta, &levels(path), &value).unwrap_err();
            assert_eq!(error.error, "things:metadata.notmodifiable");
        }
        delete(&mut meta, &levels("attributes"));
        assert_eq!(meta, before);
        put(&mut meta, &levels("attributes/b/unit"), &json!("u")).unwrap();
        assert_eq!(get(&meta, &levels("attributes/b/unit")), Some(&json!("u")));
        delete(&mut meta, &[]);
        assert_eq!(meta, before);
        assert_eq!(client_metadata(&meta), None);
    }
}
