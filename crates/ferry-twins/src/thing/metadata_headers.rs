//! Ditto's metadata headers: what a request asks of `_metadata` besides
//! its own work (`basic-metadata`).
//!
//! - `put-metadata: [{"key": "/features/lamp/properties/color/r/issuedBy",
//!   "value": …}, {"key": "*/unit", "value": "°C"}]` on a write sets each
//!   value at its key, relative to the written resource; `*/…` at every
//!   leaf the write wrote, and the other wildcards of
//!   `metadata_wildcards.rs` at every key of their level.
//! - `get-metadata: a/b,c/*/d` on a read answers the metadata at those
//!   paths in the response header `ditto-metadata`; `*` alone answers all.
//! - `delete-metadata: …` on a write removes the metadata at those paths;
//!   `*` alone removes all below the resource.
//!
//! The values are checked as Ditto's header validators check them
//! (`MetadataHeadersValueValidator`, `JsonFieldSelectorValidator`): a
//! malformed one is `header.invalid` (400) with the parser's complaint as
//! description, whatever the request. Only one of the three headers may be
//! given (`things:metadata.headersconflict`, `MetadataHeaderChecker`).
//!
//! Ferry keeps `_modified` at every leaf of `_metadata` by itself
//! (`metadata.rs`), so a key may not name it, nor a value hold it.

use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::pointer::JsonPointer;
use serde_json::Value;

/// Entries of `put-metadata`, or paths of `get-metadata` or
/// `delete-metadata`, one request may give. Each may stand for every leaf
/// of the thing, so this bounds the work of one request to entries ×
/// leaves; Ditto has no limit but its header size.
pub const METADATA_ENTRIES_MAX: usize = 100;

pub const PUT_METADATA: &str = "put-metadata";
pub const GET_METADATA: &str = "get-metadata";
pub const DELETE_METADATA: &str = "delete-metadata";
/// The response header answering `get-metadata`.
pub const DITTO_METADATA: &str = "ditto-metadata";

/// The metadata a request asks for.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MetadataHeaders {
    #[default]
    None,
    /// `put-metadata`, in the order Ditto applies it: wildcard keys before
    /// specific ones, so that a specific key wins, each group by key.
    Put(Vec<MetadataEntry>),
    Get(Vec<JsonPointer>),
    Delete(Vec<JsonPointer>),
}

/// One `put-metadata` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataEntry {
    pub key: JsonPointer,
    pub value: Value,
}

/// Whether a key has a wildcard level, as Ditto tells it: `/*/` somewhere
/// in the key as a pointer, so a last level `*` is a plain key.
pub fn has_wildcard(key: &JsonPointer) -> bool {
    let levels = key.levels();
    levels.len() > 1 && levels[..levels.len() - 1].iter().any(|level| level == "*")
}

impl MetadataHeaders {
    /// The metadata headers of a request, `header` looking one up by name.
    /// `retrieve`: the request reads (only `get-metadata` counts), else it
    /// writes (only `put-metadata` or `delete-metadata`).
    pub fn read(
        header: impl Fn(&str) -> Option<String>,
        retrieve: bool,
    ) -> Result<MetadataHeaders, DittoError> {
        let put = header(PUT_METADATA).map(|text| parse_put(&text)).transpose()?;
        let get = header(GET_METADATA).map(|text| parse_paths(GET_METADATA, &text)).transpose()?;
        let delete =
            header(DELETE_METADATA).map(|text| parse_paths(DELETE_METADATA, &text)).transpose()?;
        let given = [put.is_some(), get.is_some(), delete.is_some()];
        if given.iter().filter(|given| **given).count() > 1 {
            return Err(DittoError::metadata_headers_conflict(retrieve));
        }
        Ok(match (retrieve, put, get, delete) {
            (true, _, Some(paths), _) => MetadataHeaders::Get(paths),
            (false, Some(entries), _, _) => MetadataHeaders::Put(entries),
            (false, _, _, Some(paths)) => MetadataHeaders::Delete(paths),
            _ => MetadataHeaders::None,
        })
    }
}

/// `put-metadata`: a JSON array whose objects each have a `key` (a
/// non-empty pointer) and a `value`; other elements are skipped, as in
/// Ditto. Sorted as Ditto's `TreeSet` of them orders them.
fn parse_put(text: &str) -> Result<Vec<MetadataEntry>, DittoError> {
    let invalid = |reason: String| {
        DittoError::metadata_header_invalid(PUT_METADATA, text, "MetadataHeaders", reason)
    };
    let parsed: Value = serde_json::from_str(text).map_err(|_| {
        invalid(format!("Failed to parse JSON string '{text}'! {JSON_DESCRIPTION}"))
    })?;
    let elements = match parsed {
        Value::Array(elements) => elements,
        Value::Null => Vec::new(),
        _ => {
            return Err(invalid(format!("<{text}> is not a valid JSON array! {JSON_DESCRIPTION}")))
        }
    };
    let mut entries = Vec::new();
    for element in elements.iter().filter_map(Value::as_object) {
        let missing = |field: &str| {
            invalid(format!(
                "Metadata header entry JSON object did not include required </{field}> field! Check if all required JSON fields were set."
            ))
        };
        let key = match element.get("key") {
            None => return Err(missing("key")),
            Some(Value::String(key)) => key,
            Some(other) => {
                return Err(invalid(format!(
                    "Value <{other}> for </key> is not of type <String>! {JSON_DESCRIPTION}"
                )))
            }
        };
        let value = element.get("value").ok_or_else(|| missing("value"))?;
        let pointer = JsonPointer::parse(key)?;
        if pointer.is_root() {
            return Err(invalid(format!(
                "The metadata header key <{key}> is invalid! The path of a metadata header key must not be empty!"
            )));
        }
        if pointer.levels().iter().any(|level| level == super::metadata::LEAF_MODIFIED_KEY)
            || holds_modified_key(value)
        {
            return Err(invalid(RESERVED.to_string()));
        }
        entries.push(MetadataEntry { key: pointer, value: value.clone() });
    }
    if entries.len() > METADATA_ENTRIES_MAX {
        return Err(invalid(too_many(entries.len())));
    }
    entries.sort_by_cached_key(|entry| {
        (!has_wildcard(&entry.key), entry.key.to_string(), entry.value.to_string())
    });
    entries.dedup();
    Ok(entries)
}

/// `get-metadata` and `delete-metadata`: a field selector of paths.
fn parse_paths(name: &'static str, text: &str) -> Result<Vec<JsonPointer>, DittoError> {
    let invalid =
        |reason: String| DittoError::metadata_header_invalid(name, text, "field selector", reason);
    let selector = FieldSelector::parse(text).map_err(|error| {
        invalid(format!("{} {}", error.message, error.description.unwrap_or_default()))
    })?;
    let paths = selector.pointers().to_vec();
    if paths.len() > METADATA_ENTRIES_MAX {
        return Err(invalid(too_many(paths.len())));
    }
    let deleting_own =
        |path: &JsonPointer| path.levels().iter().any(|l| l == super::metadata::LEAF_MODIFIED_KEY);
    if name == DELETE_METADATA && paths.iter().any(deleting_own) {
        return Err(invalid(RESERVED.to_string()));
    }
    Ok(paths)
}

fn holds_modified_key(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, inner)| {
            key == super::metadata::LEAF_MODIFIED_KEY || holds_modified_key(inner)
        }),
        Value::Array(values) => values.iter().any(holds_modified_key),
        _ => false,
    }
}

fn too_many(count: usize) -> String {
    format!(
        "{count} metadata entries are more than the {METADATA_ENTRIES_MAX} one request may give."
    )
}

/// `JsonParseException`'s default description.
const JSON_DESCRIPTION: &str =
    "Check if the JSON was valid (e.g. on https://jsonlint.com) and if it was in required format.";

const RESERVED: &str =
    "The metadata key '_modified' is Ferry's own: the time of the last change of a value.";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(headers: &[(&str, &str)], retrieve: bool) -> Result<MetadataHeaders, DittoError> {
        let headers: Vec<(String, String)> =
            headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        MetadataHeaders::read(
            |name| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            retrieve,
        )
    }

    fn pointer(text: &str) -> JsonPointer {
        JsonPointer::parse(text).unwrap()
    }

    #[test]
    fn entries_are_ordered_as_ditto_applies_them() {
        let put = r#"[{"key":"/b","value":2},{"key":"*/unit","value":"C"},{"key":"/a","value":1},
                      3,{"key":"/a","value":1}]"#;
        let MetadataHeaders::Put(entries) = read(&[(PUT_METADATA, put)], false).unwrap() else {
            panic!("a put");
        };
        let keys: Vec<String> = entries.iter().map(|e| e.key.to_string()).collect();
        assert_eq!(keys, ["/*/unit", "/a", "/b"]);
        assert_eq!(entries[1].value, json!(1));
        // Each header counts only where Ditto reads it.
        assert_eq!(read(&[(PUT_METADATA, put)], true).unwrap(), MetadataHeaders::None);
        assert_eq!(
            read(&[(GET_METADATA, "a/b,c(d,e)")], true).unwrap(),
            MetadataHeaders::Get(vec![pointer("a/b"), pointer("c/d"), pointer("c/e")])
        );
        assert_eq!(read(&[(GET_METADATA, "*")], false).unwrap(), MetadataHeaders::None);
    }

    #[test]
    fn malformed_headers_are_dittos_header_invalid() {
        let cases = [
            (PUT_METADATA, "nope", "Failed to parse JSON string 'nope'!"),
            (PUT_METADATA, "{}", "<{}> is not a valid JSON array!"),
            (PUT_METADATA, r#"[{"value":1}]"#, "did not include required </key> field!"),
            (PUT_METADATA, r#"[{"key":"a"}]"#, "did not include required </value> field!"),
            (
                PUT_METADATA,
                r#"[{"key":1,"value":1}]"#,
                "Value <1> for </key> is not of type <String>!",
            ),
            (PUT_METADATA, r#"[{"key":"/","value":1}]"#, "must not be empty!"),
            (PUT_METADATA, r#"[{"key":"a/_modified","value":1}]"#, "Ferry's own"),
            (PUT_METADATA, r#"[{"key":"a","value":{"_modified":1}}]"#, "Ferry's own"),
            (DELETE_METADATA, "a/_modified", "Ferry's own"),
            (GET_METADATA, "a(b", "The field selector <a(b> is invalid!"),
        ];
        for (name, value, reason) in cases {
            let error = read(&[(name, value)], name == GET_METADATA).unwrap_err();
            assert_eq!((error.status, error.error), (400, "header.invalid"), "{value}");
            assert!(error
                .message
                .starts_with(&format!("The value '{value}' of the header '{name}'")));
            let description = error.description.unwrap();
            assert!(description.contains(reason), "{value}: {description}");
        }
        let many: Vec<Value> = (0..=METADATA_ENTRIES_MAX)
            .map(|n| json!({"key": format!("k{n}"), "value": n}))
            .collect();
        let error = read(&[(PUT_METADATA, &Value::Array(many).to_string())], false).unwrap_err();
        assert!(error.description.unwrap().contains("more than the 100"));
    }

    #[test]
    fn only_one_metadata_header_at_a_time() {
        let both = [(PUT_METADATA, "[]"), (DELETE_METADATA, "a")];
        let error = read(&both, false).unwrap_err();
        assert_eq!((error.status, error.error), (400, "things:metadata.headersconflict"));
        assert_eq!(
            error.message,
            "Metadata of the Thing could not be created, modified or deleted."
        );
        let error = read(&[(GET_METADATA, "a"), (PUT_METADATA, "[]")], true).unwrap_err();
        assert_eq!(error.message, "Metadata of the Thing could not be retrieved.");
    }
}
