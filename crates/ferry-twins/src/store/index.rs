//! The search index of one thing: every leaf value of its document with
//! the path that leads to it, the form both stores keep in an index table.
//!
//! This is what Ditto learned with MongoDB (its issue #1374): index the
//! flattened leaves under one "wildcard" index rather than one index per
//! field, so that any attribute or property can be searched without a
//! schema. An array's elements are all indexed under the array's own path,
//! which gives RQL's rule that a filter matches an array if it matches any
//! element. Keys cannot hold `/` (Ditto refuses them), so a path is
//! unambiguous.
//!
//! Rows under `features/{id}/…` also carry their path with the feature id
//! replaced by `*`, for filters on `features/*/properties/…`.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The documents' top-level fields that search can filter on by path. The
/// id, the policy id and the timestamps are columns of the thing itself.
const INDEXED: [&str; 4] = ["attributes", "features", "definition", "_metadata"];

/// One leaf of a document.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    /// The path with the feature id as `*`, for rows under `features/`.
    pub wildcard_path: Option<String>,
    pub value: Leaf,
}

/// A leaf value, as the stores compare it: RQL does not convert between
/// types, so each type is kept apart.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
}

impl Leaf {
    /// The type code the stores keep in the row's `kind` column.
    pub fn kind(&self) -> i64 {
        match self {
            Leaf::Null => 0,
            Leaf::Bool(_) => 1,
            Leaf::Number(_) => 2,
            Leaf::String(_) => 3,
        }
    }

    /// The value for the row's `num` column: numbers, and booleans as 0/1.
    pub fn number(&self) -> Option<f64> {
        match self {
            Leaf::Bool(flag) => Some(f64::from(u8::from(*flag))),
            Leaf::Number(number) => Some(*number),
            _ => None,
        }
    }

    /// The value for the row's `str` column.
    pub fn string(&self) -> Option<&str> {
        match self {
            Leaf::String(text) => Some(text),
            _ => None,
        }
    }
}

impl Leaf {
    /// The leaf a row's `kind`, `num` and `str` columns hold.
    pub fn from_columns(kind: i64, num: Option<f64>, text: Option<String>) -> Leaf {
        match kind {
            1 => Leaf::Bool(num.is_some_and(|n| n != 0.0)),
            2 => Leaf::Number(num.unwrap_or(f64::NAN)),
            3 => Leaf::String(text.unwrap_or_default()),
            _ => Leaf::Null,
        }
    }

    /// What identifies the leaf's row: its type and value, a number by
    /// its bits.
    fn key(&self) -> (i64, u64, Option<&str>) {
        (self.kind(), self.number().map_or(0, f64::to_bits), self.string())
    }
}

/// What a write of a thing must change in its index, given the rows it
/// has (`old`, each with what names its row: a row id, or the entry itself
/// where the table has none) and the entries of the new document. Rows
/// that stay the same are left alone: writing one property then touches
/// that property's rows and its `_metadata` row, not every index page of
/// the thing, which is what a rewrite of all its rows cost (measured: most
/// of a modify's time).
#[derive(Debug)]
pub struct Changes<R> {
    /// Rows whose path the new document no longer holds (as often).
    pub removed: Vec<R>,
    /// Entries at paths that have no row to spare.
    pub added: Vec<Entry>,
    /// Rows kept at their path with a new value: updated where they lie,
    /// which leaves alone every index keyed by the thing or the path and
    /// changes only the value's (a delete and an insert would touch all of
    /// them).
    pub rewritten: Vec<(R, Entry)>,
    /// How the paths that hold several values change (see `lists`).
    pub lists: ListChanges,
}

/// Paths that hold several values after a write and did not before
/// (`added`), and the reverse (`removed`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

impl<R> Changes<R> {
    /// The changes as rows to delete and entries to insert, for a store
    /// whose updates cost what a delete and an insert do.
    pub fn into_removed_and_added(self) -> (Vec<R>, Vec<Entry>) {
        let (mut removed, mut added) = (self.removed, self.added);
        for (row, entry) in self.rewritten {
            removed.push(row);
            added.push(entry);
        }
        (removed, added)
    }
}

/// Fills the `thing_lists` table (the paths at which each thing holds
/// several values, see `lists`) from the index, for a store written before
/// the table existed. Rows another node put there first are kept.
pub const LISTS_FROM_INDEX: &str = "INSERT INTO thing_lists (thing, path) \
     SELECT thing, path FROM thing_index GROUP BY thing, path HAVING COUNT(*) > 1 \
     ON CONFLICT DO NOTHING";

/// The paths at which `entries` hold more than one value: an array of
/// several elements, or elements of several arrays. Search keeps them
/// apart (`store/search/sql.rs`): two conditions on one path can be met by
/// one value, or, at such a path only, by two different ones.
pub fn lists<'e>(entries: impl IntoIterator<Item = &'e Entry>) -> BTreeSet<&'e str> {
    let mut seen = HashSet::new();
    let mut lists = BTreeSet::new();
    for entry in entries {
        if !seen.insert(entry.path.as_str()) {
            lists.insert(entry.path.as_str());
        }
    }
    lists
}

pub fn changes<R>(old: Vec<(R, Entry)>, new: Vec<Entry>) -> Changes<R> {
    let lists = {
        let before = self::lists(old.iter().map(|(_, entry)| entry));
        let after = self::lists(&new);
        ListChanges {
            added: after.difference(&before).map(|path| (*path).to_owned()).collect(),
            removed: before.difference(&after).map(|path| (*path).to_owned()).collect(),
        }
    };
    let mut existing: HashMap<Entry, Vec<R>> = HashMap::with_capacity(old.len());
    for (row, entry) in old {
        existing.entry(entry).or_default().push(row);
    }
    let mut fresh = Vec::new();
    for entry in new {
        if existing.get_mut(&entry).and_then(Vec::pop).is_none() {
            fresh.push(entry);
        }
    }
    // What is left of the old rows, by path: each new entry takes one at
    // its path if there is one.
    let mut spare: HashMap<(String, Option<String>), Vec<R>> = HashMap::new();
    for (entry, rows) in existing {
        if !rows.is_empty() {
            spare.entry((entry.path, entry.wildcard_path)).or_default().extend(rows);
        }
    }
    let mut changes =
        Changes { removed: Vec::new(), added: Vec::new(), rewritten: Vec::new(), lists };
    for entry in fresh {
        let key = (entry.path, entry.wildcard_path);
        let row = spare.get_mut(&key).and_then(Vec::pop);
        let entry = Entry { path: key.0, wildcard_path: key.1, value: entry.value };
        match row {
            Some(row) => changes.rewritten.push((row, entry)),
            None => changes.added.push(entry),
        }
    }
    changes.removed = spare.into_values().flatten().collect();
    changes
}

/// Entries are equal when their rows would be: a number by its bits (so
/// NaN equals itself, as its stored row does).
impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.path == other.path
            && self.wildcard_path == other.wildcard_path
            && self.value.key() == other.value.key()
    }
}

impl Eq for Entry {}

impl std::hash::Hash for Entry {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.path.hash(state);
        self.wildcard_path.hash(state);
        self.value.key().hash(state);
    }
}

/// Every leaf of `doc` under the indexed fields.
pub fn entries(doc: &Value) -> Vec<Entry> {
    let mut out = Vec::new();
    let Some(fields) = doc.as_object() else { return out };
    for field in INDEXED {
        if let Some(value) = fields.get(field) {
            let mut path = field.to_owned();
            walk(value, &mut path, &mut out);
        }
    }
    out
}

fn walk(value: &Value, path: &mut String, out: &mut Vec<Entry>) {
    match value {
        Value::Object(fields) => {
            for (key, inner) in fields {
                let len = path.len();
                path.push('/');
                path.push_str(key);
                walk(inner, path, out);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, path, out);
            }
        }
        leaf => out.push(Entry {
            path: path.clone(),
            wildcard_path: wildcard(path),
            value: match leaf {
                Value::Bool(flag) => Leaf::Bool(*flag),
                Value::Number(number) => Leaf::Number(number.as_f64().unwrap_or(f64::NAN)),
                Value::String(text) => Leaf::String(text.clone()),
                _ => Leaf::Null,
            },
        }),
    }
}

/// `features/{id}/rest` as `features/*/rest`.
pub fn wildcard(path: &str) -> Option<String> {
    let rest = path.strip_prefix("features/")?;
    let (_, after_id) = rest.split_once('/').unwrap_or((rest, ""));
    Some(if after_id.is_empty() {
        "features/*".to_owned()
    } else {
        format!("features/*/{after_id}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_of_the_indexed_fields_with_their_paths() {
        let doc = json!({
            "thingId": "org.acme:s1",
            "policyId": "org.acme:s1",
            "definition": "org.acme:Thermo:1.0.0",
            "attributes": {"location": {"floor": 3, "room": "B"}, "tags": ["a", "b"], "on": true, "x": null},
            "features": {"temp": {"properties": {"value": 19.5}, "definition": ["d:1"]}},
        });
        let found: Vec<(String, Option<String>, Leaf)> =
            entries(&doc).into_iter().map(|e| (e.path, e.wildcard_path, e.value)).collect();
        let s = |text: &str| Leaf::String(text.to_owned());
        assert_eq!(
            found,
            vec![
                ("attributes/location/floor".into(), None, Leaf::Number(3.0)),
                ("attributes/location/room".into(), None, s("B")),
                ("attributes/tags".into(), None, s("a")),
                ("attributes/tags".into(), None, s("b")),
                ("attributes/on".into(), None, Leaf::Bool(true)),
                ("attributes/x".into(), None, Leaf::Null),
                (
                    "features/temp/properties/value".into(),
                    Some("features/*/properties/value".into()),
                    Leaf::Number(19.5)
                ),
                ("features/temp/definition".into(), Some("features/*/definition".into()), s("d:1")),
                ("definition".into(), None, s("org.acme:Thermo:1.0.0")),
            ]
        );
    }

    #[test]
    fn a_change_touches_only_the_rows_that_differ() {
        let before = json!({"attributes": {"a": 1, "b": "x", "c": true, "tags": ["t", "t"]}});
        let after = json!({"attributes": {"a": 2, "b": "x", "tags": ["t"], "d": "new"}});
        let old: Vec<(i64, Entry)> =
            entries(&before).into_iter().zip(10..).map(|(e, r)| (r, e)).collect();
        let mut changes = changes(old, entries(&after));
        changes.removed.sort_unstable();
        // a keeps its row (10) with its new value; c's row (12) and one of
        // the two "t" rows (13 or 14) go; d comes.
        assert_eq!(changes.rewritten.len(), 1);
        let (row, entry) = &changes.rewritten[0];
        assert_eq!(
            (*row, entry.path.as_str(), &entry.value),
            (10, "attributes/a", &Leaf::Number(2.0))
        );
        assert_eq!(changes.removed.len(), 2);
        assert!(changes.removed[0] == 12 && [13, 14].contains(&changes.removed[1]));
        assert_eq!(changes.added.len(), 1);
        assert_eq!(
            (changes.added[0].path.as_str(), &changes.added[0].value),
            ("attributes/d", &Leaf::String("new".into()))
        );
        let unchanged = entries(&after).into_iter().zip(1..).map(|(e, r)| (r, e)).collect();
        let none = super::changes(unchanged, entries(&after));
        assert!(none.removed.is_empty() && none.added.is_empty() && none.rewritten.is_empty());
    }

    #[test]
    fn paths_with_several_values_are_lists() {
        let doc = json!({"attributes": {"one": [1], "two": [1, 2], "deep": [{"x": 1}, {"x": [2]}], "n": 3}});
        let found = entries(&doc);
        assert_eq!(
            lists(&found).into_iter().collect::<Vec<_>>(),
            ["attributes/deep/x", "attributes/two"]
        );
        let old = found.iter().cloned().map(|e| ((), e)).collect();
        let after =
            json!({"attributes": {"one": [1, 1], "two": 2, "deep": [{"x": 1}, {"x": [2]}]}});
        let changed = changes(old, entries(&after)).lists;
        assert_eq!(
            changed,
            ListChanges {
                added: vec!["attributes/one".into()],
                removed: vec!["attributes/two".into()]
            }
        );
    }

    #[test]
    fn a_rewritten_row_counts_as_a_removal_and_an_addition_where_rows_have_no_ids() {
        let before = json!({"features": {"f": {"properties": {"v": 1}}}});
        let after = json!({"features": {"f": {"properties": {"v": "one"}}}});
        let old: Vec<(Entry, Entry)> =
            entries(&before).into_iter().map(|e| (e.clone(), e)).collect();
        let (removed, added) = changes(old, entries(&after)).into_removed_and_added();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].value, Leaf::Number(1.0));
        assert_eq!(added.len(), 1);
        assert_eq!(added[0].wildcard_path.as_deref(), Some("features/*/properties/v"));
        assert_eq!(added[0].value, Leaf::String("one".into()));
    }

    #[test]
    fn leaves_come_back_from_their_columns() {
        for leaf in [
            Leaf::Null,
            Leaf::Bool(true),
            Leaf::Bool(false),
            Leaf::Number(2.5),
            Leaf::String("s".into()),
        ] {
            let back =
                Leaf::from_columns(leaf.kind(), leaf.number(), leaf.string().map(str::to_owned));
            assert_eq!(back, leaf);
        }
    }

    #[test]
    fn wildcard_paths() {
        assert_eq!(wildcard("features/f"), Some("features/*".into()));
        assert_eq!(wildcard("features/f/properties/a/b"), Some("features/*/properties/a/b".into()));
        assert_eq!(wildcard("attributes/features/x"), None);
    }
}
