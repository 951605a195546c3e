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

/// The documents' top-level fields that search can filter on by path. The
/// id, the policy id and the timestamps are columns of the thing itself.
const INDEXED: [&str; 4] = ["attributes", "features", "definition", "_metadata"];

/// One leaf of a document.
#[derive(Debug, Clone, PartialEq)]
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
    fn wildcard_paths() {
        assert_eq!(wildcard("features/f"), Some("features/*".into()));
        assert_eq!(wildcard("features/f/properties/a/b"), Some("features/*/properties/a/b".into()));
        assert_eq!(wildcard("attributes/features/x"), None);
    }
}
