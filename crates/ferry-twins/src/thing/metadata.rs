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
//! touched that leaf. Every write replaces the mirror below the path it
//! wrote; a merge re-stamps only the leaves its patch names and drops the
//! entries of what it deleted; a delete drops the entries below the path.
//! Empty objects carry no entry, and a metadata object left empty is
//! removed, so `_metadata` never holds more than the thing has leaves.
//! The leading underscore keeps the entry apart from the keys a client
//! will set with `put-metadata` (`unit`, `issuedAt` …), which lie beside
//! it at the same leaf.

use crate::policy::Timestamp;
use serde_json::{Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// A thing's `_metadata` as a cached thing holds it: serialized. Parsed,
/// every level and every leaf of it is a JSON object of its own (an
/// `IndexMap` of a few hundred bytes), which for a small thing is more
/// memory than the thing itself; and it is read only by writes,
/// `fields=_metadata` and shadows, which parse it for the moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata(Box<str>);

impl Metadata {
    pub fn from_map(map: &Map<String, Value>) -> Metadata {
        if map.is_empty() {
            return Metadata::default();
        }
        // A map of JSON values always serializes.
        Metadata(serde_json::to_string(map).unwrap_or_default().into_boxed_str())
    }

    /// The metadata as a JSON object.
    pub fn to_map(&self) -> Map<String, Value> {
        if self.0.is_empty() {
            return Map::new();
        }
        // Written by `from_map`, so it parses; if it did not, the
        // metadata would be lost rather than the thing.
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// Changes the metadata in its parsed form.
    pub fn update(&mut self, change: impl FnOnce(&mut Map<String, Value>)) {
        let mut map = self.to_map();
        change(&mut map);
        *self = Metadata::from_map(&map);
    }
}

/// The key of the per-leaf modification time inside `_metadata`.
pub const LEAF_MODIFIED_KEY: &str = "_modified";

/// Now, at the precision Ditto stamps with: `Instant.now()` on the JVMs
/// Ditto runs on reads the clock to the microsecond, so `_created` and
/// `_modified` never carry nine fraction digits there.
pub fn now() -> Timestamp {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    Timestamp::from_unix(seconds, since_epoch.subsec_micros() * 1_000)
}

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
    if levels.is_empty() {
        *meta = match mirrored {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        return;
    }
    at_parent(meta, levels, &mut |parent, key| match mirrored.clone() {
        Some(entry) => {
            parent.insert(key.to_string(), entry);
        }
        None => {
            parent.shift_remove(key);
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
        *node = mirror(merged, now).unwrap_or_else(|| Value::Object(Map::new()));
        return;
    };
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    let Value::Object(map) = node else {
        return;
    };
    drop_leaf_entry(map);
    // Keys the merge removed, by null or by regex, take their metadata along.
    map.retain(|key, _| merged.contains_key(key));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serialized_metadata_reads_back_as_written_in_order() {
        let map = json!({"b": {"_modified": "t"}, "a": {"x": {"_modified": "u"}}});
        let map = map.as_object().unwrap().clone();
        let mut meta = Metadata::from_map(&map);
        assert_eq!(meta.to_map(), map);
        assert_eq!(meta.to_map().keys().collect::<Vec<_>>(), ["b", "a"]);
        meta.update(|m| {
            m.shift_remove("b");
        });
        assert_eq!(Value::Object(meta.to_map()), json!({"a": {"x": {"_modified": "u"}}}));
        meta.update(Map::clear);
        assert_eq!(meta, Metadata::default());
        assert!(meta.to_map().is_empty());
    }

    #[test]
    fn now_has_at_most_microseconds() {
        let text = now().to_string();
        let fraction = text.split('.').nth(1).map_or(0, |f| f.trim_end_matches('Z').len());
        assert!(fraction <= 6, "{text}");
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
}
