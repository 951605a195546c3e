//! Wildcards in the keys of `put-metadata` and the paths of
//! `get-metadata` and `delete-metadata` (`basic-metadata`, "Wildcard
//! reference").
//!
//! Which wildcards a resource takes is Ditto's `MetadataWildcardValidator`,
//! its patterns kept as written (below, without their look-aheads, which
//! the regex engine lacks). What a wildcard stands for, against the value
//! at the resource (the value written, or the one there for a read):
//!
//! - `*/rest` on the thing or a resource below a feature's level: every
//!   leaf of the value (a value that is not an object), `rest` appended;
//! - any other `*` (`features/*/properties/*/unit`, `attributes/*/unit`,
//!   `*/properties/*/unit` on `/features`, `properties/*/unit` on a
//!   feature): every key of the object at that place.
//!
//! Ditto's `MetadataFieldsWildcardResolver` agrees for the thing's level;
//! Ferry differs where it does not make sense: it keeps every level of
//! `rest` (Ditto only the first one after `*/` and `attributes/*/`), and it
//! expands a read's wildcards against the value at the resource, not the
//! whole thing, so that they find what lies below a sub-resource.

use super::metadata_headers::has_wildcard;
use crate::error::DittoError;
use crate::pointer::JsonPointer;
use regex_automata::meta::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// Metadata paths one request's wildcards may expand to. Each is a value
/// set, read or removed; ten thousand sets of even the smallest value
/// are more than a thing of Ditto's default 100 KiB limit holds, so a
/// request that needs more would be refused anyway.
pub const METADATA_PATHS_MAX: usize = 10_000;

/// Where a resource lies, which decides the wildcards it takes.
enum Level {
    Thing,
    Features,
    Feature,
    Other,
}

impl Level {
    fn of(resource: &JsonPointer) -> Level {
        match resource.levels() {
            [] => Level::Thing,
            [features] if features == "features" => Level::Features,
            [features, _] if features == "features" => Level::Feature,
            _ => Level::Other,
        }
    }
}

// Ditto's patterns: `P` properties or desired properties, `N` Java's
// `(?!\*).*` (empty, or not starting with `*`), `M` its `(?!\*/).*`.
const P: &str = "(?:properties|desiredProperties)";
const N: &str = r"(?:[^*].*)?";
const M: &str = r"(?:[^*].*|\*(?:[^/].*)?)?";

/// Ditto's regexes by name, each matching a whole key such as
/// `/features/*/properties/*/unit`.
struct Patterns {
    thing: Vec<Regex>,
    features: Vec<Regex>,
    feature: Vec<Regex>,
    leaf: Regex,
}

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let regex = |pattern: String| {
        // The patterns are constants, so a failure is a bug found by the
        // tests, never by a request.
        Regex::new(&format!("^/?{pattern}$")).expect("a metadata wildcard pattern compiles")
    };
    let thing_features_and_properties = format!(r"features/\*/{P}/\*/{N}");
    let thing_features_with_id_only = format!(r"features/\*/{P}/{N}/{N}");
    let thing_features_with_properties_only = format!(r"features/{N}/{P}/\*/{M}");
    let thing_features_definition = format!(r"features/\*/definition/{N}");
    let attributes = format!(r"attributes/\*/{N}");
    let leaf = format!(r"\*/{M}");
    let features = format!(r"\*/{P}/\*/{N}");
    let features_with_id_only = format!(r"\*/{P}/{N}/{N}");
    let features_with_properties_only = format!(r"{N}/{P}/\*/{N}");
    let features_definition = format!(r"\*/definition/{N}");
    let feature_property = format!(r"{P}/\*/{N}");
    Patterns {
        thing: [
            thing_features_and_properties,
            thing_features_with_properties_only,
            thing_features_with_id_only,
            thing_features_definition,
            attributes,
            leaf.clone(),
        ]
        .into_iter()
        .map(regex)
        .collect(),
        features: [
            features,
            features_with_properties_only.clone(),
            features_with_id_only.clone(),
            features_definition,
        ]
        .into_iter()
        .map(regex)
        .collect(),
        feature: [feature_property, features_with_id_only, features_with_properties_only]
            .into_iter()
            .map(regex)
            .collect(),
        leaf: regex(leaf),
    }
});

/// Appends to `out` the paths (relative to `resource`) that `key` stands
/// for in `value`, the value at `resource`: `key` itself when it has no
/// wildcard. `header` names the header for its errors.
pub fn expand(
    resource: &JsonPointer,
    key: &JsonPointer,
    value: &Value,
    header: &str,
    out: &mut Vec<JsonPointer>,
) -> Result<(), DittoError> {
    if !has_wildcard(key) {
        return push(out, key.clone(), header);
    }
    let expression = key.to_string();
    let patterns = &*PATTERNS;
    let level = Level::of(resource);
    let accepted = match level {
        Level::Thing => &patterns.thing,
        Level::Features => &patterns.features,
        Level::Feature => &patterns.feature,
        Level::Other => std::slice::from_ref(&patterns.leaf),
    };
    if !accepted.iter().any(|regex| regex.is_match(&expression)) {
        return Err(DittoError::metadata_wildcard_invalid(&expression, header));
    }
    let leaves_wanted = matches!(level, Level::Thing | Level::Other) && key.first() == Some("*");
    if leaves_wanted {
        let rest = key.skip(1);
        let mut leaves = Vec::new();
        collect_leaves(value, &JsonPointer::root(), &mut leaves);
        for leaf in leaves {
            push(out, leaf.join(&rest), header)?;
        }
        return Ok(());
    }
    substitute(key.levels(), 0, value, &JsonPointer::root(), header, out)
}

/// Every path below `at` to a value that is not an object; an empty object
/// has none.
fn collect_leaves(value: &Value, at: &JsonPointer, out: &mut Vec<JsonPointer>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                collect_leaves(inner, &at.child(key.clone()), out);
            }
        }
        _ => out.push(at.clone()),
    }
}

/// `levels` from `index` on, each `*` before the last level replaced by
/// each key of the object `value` has there; nothing where it has none.
fn substitute(
    levels: &[String],
    index: usize,
    value: &Value,
    at: &JsonPointer,
    header: &str,
    out: &mut Vec<JsonPointer>,
) -> Result<(), DittoError> {
    let Some(level) = levels.get(index) else {
        return push(out, at.clone(), header);
    };
    let is_last = index + 1 == levels.len();
    if level != "*" || is_last {
        let inner = value.get(level).unwrap_or(&Value::Null);
        return substitute(levels, index + 1, inner, &at.child(level.clone()), header, out);
    }
    if let Value::Object(map) = value {
        for (key, inner) in map {
            substitute(levels, index + 1, inner, &at.child(key.clone()), header, out)?;
        }
    }
    Ok(())
}

fn push(out: &mut Vec<JsonPointer>, path: JsonPointer, header: &str) -> Result<(), DittoError> {
    if out.len() >= METADATA_PATHS_MAX {
        return Err(DittoError::metadata_too_many_paths(header, METADATA_PATHS_MAX));
    }
    out.push(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pointer(text: &str) -> JsonPointer {
        JsonPointer::parse(text).unwrap()
    }

    fn expanded(resource: &str, key: &str, value: &Value) -> Result<Vec<String>, DittoError> {
        let mut out = Vec::new();
        expand(&pointer(resource), &pointer(key), value, "put-metadata", &mut out)?;
        Ok(out.iter().map(JsonPointer::to_string).collect())
    }

    fn thing() -> Value {
        json!({
            "thingId": "ns:t",
            "attributes": {"a": 1, "o": {"x": true, "e": {}}},
            "features": {
                "lamp": {"definition": ["d:1"], "properties": {"on": true, "color": {"r": 1, "g": 2}}},
                "fan": {"properties": {"speed": 3}},
            }
        })
    }

    #[test]
    fn a_leaf_wildcard_stands_for_every_leaf_written() {
        let leaves = expanded("/", "*/unit", &thing()).unwrap();
        assert_eq!(
            leaves,
            [
                "/thingId/unit",
                "/attributes/a/unit",
                "/attributes/o/x/unit",
                "/features/lamp/definition/unit",
                "/features/lamp/properties/on/unit",
                "/features/lamp/properties/color/r/unit",
                "/features/lamp/properties/color/g/unit",
                "/features/fan/properties/speed/unit",
            ]
        );
        let color = json!({"r": 1, "g": 2});
        let below = expanded("/features/lamp/properties/color", "*/by/whom", &color).unwrap();
        assert_eq!(below, ["/r/by/whom", "/g/by/whom"]);
        assert_eq!(expanded("/attributes/a", "*/unit", &json!(1)).unwrap(), ["/unit"]);
    }

    #[test]
    fn other_wildcards_stand_for_every_key_of_their_level() {
        let thing = thing();
        let cases: [(&str, &str, &Value, &[&str]); 6] = [
            (
                "/",
                "features/*/properties/*/unit",
                &thing,
                &[
                    "/features/lamp/properties/on/unit",
                    "/features/lamp/properties/color/unit",
                    "/features/fan/properties/speed/unit",
                ],
            ),
            (
                "/",
                "features/*/properties/on/unit",
                &thing,
                &["/features/lamp/properties/on/unit", "/features/fan/properties/on/unit"],
            ),
            (
                "/",
                "features/lamp/properties/*/unit",
                &thing,
                &["/features/lamp/properties/on/unit", "/features/lamp/properties/color/unit"],
            ),
            ("/", "attributes/*/unit", &thing, &["/attributes/a/unit", "/attributes/o/unit"]),
            (
                "/features",
                "*/definition/by",
                &thing["features"],
                &["/lamp/definition/by", "/fan/definition/by"],
            ),
            (
                "/features/lamp",
                "properties/*/by",
                &thing["features"]["lamp"],
                &["/properties/on/by", "/properties/color/by"],
            ),
        ];
        for (resource, key, value, want) in cases {
            assert_eq!(expanded(resource, key, value).unwrap(), want, "{resource} {key}");
        }
        // No wildcard, or `*` as the last level: the key as it is.
        assert_eq!(expanded("/attributes", "a/*", &json!({})).unwrap(), ["/a/*"]);
    }

    #[test]
    fn wildcards_a_resource_does_not_take_are_dittos_header_invalid() {
        let cases = [
            ("/", "*/*/unit"),
            ("/", "features/*/*/unit"),
            ("/", "attributes/*/*"),
            ("/features", "*/unit"),
            ("/features/lamp", "*/unit"),
            ("/attributes", "a/*/unit"),
        ];
        for (resource, key) in cases {
            let error = expanded(resource, key, &thing()).unwrap_err();
            assert_eq!(error.error, "header.invalid", "{resource} {key}");
            assert_eq!(
                error.message,
                format!("The wildcard expression '/{key}' in header 'put-metadata' is not valid.")
            );
        }
    }

    #[test]
    fn expansion_is_bounded() {
        let many: serde_json::Map<String, Value> =
            (0..=METADATA_PATHS_MAX).map(|n| (format!("k{n}"), json!(n))).collect();
        let error = expanded("/attributes", "*/unit", &Value::Object(many)).unwrap_err();
        assert_eq!(error.error, "header.invalid");
    }
}
