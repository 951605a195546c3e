//! `_created`, `_modified` and `_metadata`: what a thing records about its
//! own changes.
//!
//! Timestamps are written as Java's `Instant.toString()` writes Ditto's
//! (`2024-05-01T12:00:00.123456Z`): UTC, a fraction only when it is not
//! zero, in groups of three digits, at the microsecond precision of the
//! JVM clock Ditto runs on.
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

use serde_json::{Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// The key of the per-leaf modification time inside `_metadata`.
pub const LEAF_MODIFIED_KEY: &str = "_modified";

/// A point in time, held in the form Ditto writes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(String);

impl Timestamp {
    pub fn now() -> Self {
        Timestamp::from_system_time(SystemTime::now())
    }

    pub fn from_system_time(time: SystemTime) -> Self {
        let micros = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_micros()).map_or(i64::MIN, |m| -m),
        };
        Timestamp::from_unix_micros(micros)
    }

    pub fn from_unix_micros(micros: i64) -> Self {
        let seconds = micros.div_euclid(1_000_000);
        let fraction_micros = micros.rem_euclid(1_000_000);
        let days = seconds.div_euclid(86_400);
        let second_of_day = seconds.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let (hour, minute, second) =
            (second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
        let fraction = if fraction_micros == 0 {
            String::new()
        } else if fraction_micros % 1000 == 0 {
            format!(".{:03}", fraction_micros / 1000)
        } else {
            format!(".{fraction_micros:06}")
        };
        Timestamp(format!(
            "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z"
        ))
    }

    /// A timestamp read back from a stored thing, trusted as written.
    pub(crate) fn from_stored(text: String) -> Self {
        Timestamp(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a
/// day count from 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn leaf_entry(now: &Timestamp) -> Value {
    let mut entry = Map::new();
    entry.insert(LEAF_MODIFIED_KEY.into(), Value::String(now.0.clone()));
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
    use std::time::Duration;

    #[test]
    fn timestamps_read_as_java_instants() {
        assert_eq!(Timestamp::from_unix_micros(0).as_str(), "1970-01-01T00:00:00Z");
        assert_eq!(
            Timestamp::from_unix_micros(1_714_564_800_123_000).as_str(),
            "2024-05-01T12:00:00.123Z"
        );
        assert_eq!(
            Timestamp::from_unix_micros(1_714_564_800_123_456).as_str(),
            "2024-05-01T12:00:00.123456Z"
        );
        assert_eq!(
            Timestamp::from_unix_micros(951_782_400_000_000).as_str(),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(Timestamp::from_unix_micros(-1).as_str(), "1969-12-31T23:59:59.999999Z");
        let time = UNIX_EPOCH + Duration::new(1_700_000_000, 5_000_999);
        assert_eq!(Timestamp::from_system_time(time).as_str(), "2023-11-14T22:13:20.005Z");
    }

    fn ts(n: i64) -> Timestamp {
        Timestamp::from_unix_micros(n * 1_000_000)
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
        let stamp = |t: &Timestamp| json!({"_modified": t.as_str()});
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
        let stamp = |t: &Timestamp| json!({"_modified": t.as_str()});
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
