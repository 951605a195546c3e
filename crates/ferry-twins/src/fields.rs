//! `fields=`: Ditto's field selector, parsed once and applied to every read.
//!
//! The selector is a comma list of JSON pointers; `a/b(c,d/e)` stands for
//! `a/b/c,a/b/d/e` and groups nest. Parsing follows Ditto's
//! `ImmutableJsonFieldSelectorFactory`: an empty selector, or one with more
//! `(` than `)` or the other way round, is `json.fieldselector.invalid`;
//! a group is only recognised when its `(` comes before its first `)`
//! (`abc)(` is the one-level pointer `abc)(`); `abc()` is `abc`; the caller
//! URL-decodes the query first.
//!
//! Applying it follows `ImmutableJsonObject.get(JsonFieldSelector)`:
//!
//! - only the pointers that exist in the value take part, a pointer into an
//!   array existing when any object in the array has the rest of it;
//! - the result is built in the order of the first existing pointer under
//!   each key, not in the value's order (`fields=attributes,thingId` puts
//!   `attributes` first);
//! - a selected array keeps its non-object elements and filters each object
//!   element with the rest of the selector;
//! - when nothing exists the result is `{}`.
//!
//! `features/*/…` (and `_metadata/features/*/…`) select every feature; the
//! wildcard is expanded against the feature ids of the value at hand, as
//! Ditto's `ThingsModelFactory.expandFeatureIdWildcards` does.
//!
//! Speed: the selector's trie is built once at parse time. A read checks
//! each pointer's existence (a walk of its depth) and, in the common case
//! where all exist and no wildcard is used, filters with that trie
//! directly; only a partial match or a wildcard builds a trie for the
//! request.

use crate::error::DittoError;
use crate::pointer::JsonPointer;
use serde_json::{Map, Value};
use std::borrow::Cow;

const WILDCARD: &str = "*";

/// A parsed `fields=` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSelector {
    pointers: Vec<JsonPointer>,
    trie: Trie,
    has_wildcard: bool,
}

/// The top-level fields of what a selector is applied to. A thing's
/// housekeeping fields (`_revision`, `_metadata` …) are not stored in its
/// document, so a thing offers them through this instead of building a
/// JSON object holding everything on each read.
pub trait FieldSource {
    fn field(&self, key: &str) -> Option<Cow<'_, Value>>;

    /// The feature ids to expand `features/*` with, in the features' order.
    fn feature_ids(&self) -> Vec<String> {
        match self.field("features").as_deref() {
            Some(Value::Object(features)) => features.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }
}

impl FieldSource for Map<String, Value> {
    fn field(&self, key: &str) -> Option<Cow<'_, Value>> {
        self.get(key).map(Cow::Borrowed)
    }
}

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, DittoError> {
        let unbalanced =
            text.contains('(') && text.matches('(').count() != text.matches(')').count();
        if text.is_empty() || unbalanced {
            return Err(DittoError::json_field_selector_invalid(text));
        }
        let mut pointers = Vec::new();
        flatten(text, &JsonPointer::root(), &mut pointers)?;
        Ok(FieldSelector::from_pointers(pointers))
    }

    /// A selector of the given pointers, in their order, duplicates and
    /// empty pointers dropped (an empty pointer selects nothing in Ditto).
    pub fn from_pointers(pointers: Vec<JsonPointer>) -> Self {
        let mut unique: Vec<JsonPointer> = Vec::with_capacity(pointers.len());
        for pointer in pointers {
            if !pointer.is_root() && !unique.contains(&pointer) {
                unique.push(pointer);
            }
        }
        let has_wildcard = unique.iter().any(|p| wildcard_at(p).is_some());
        FieldSelector { trie: Trie::build(&unique), pointers: unique, has_wildcard }
    }

    pub fn pointers(&self) -> &[JsonPointer] {
        &self.pointers
    }

    /// Whether a top-level field is asked for, e.g. `_policy`, which the
    /// caller has to fetch before projecting.
    pub fn selects_top_level(&self, key: &str) -> bool {
        self.pointers.iter().any(|p| p.first() == Some(key))
    }

    /// The selected part of an object value; any other value is returned
    /// whole, as Ditto applies selectors to objects only.
    pub fn project(&self, value: &Value) -> Value {
        match value {
            Value::Object(map) => self.project_source(map),
            other => other.clone(),
        }
    }

    /// The selected part of a value relative to a thing's `/features`, so
    /// that `*/properties` means every feature's properties.
    pub fn project_features(&self, features: &Value) -> Value {
        let Value::Object(map) = features else {
            return features.clone();
        };
        if !self.has_wildcard_relative_to_features() {
            return self.project_source(map);
        }
        let ids: Vec<String> = map.keys().cloned().collect();
        let prefix = JsonPointer::from_levels(["features"]);
        let expanded = self
            .pointers
            .iter()
            .flat_map(|p| expand(&prefix.join(p), &ids))
            .map(|p| p.skip(1))
            .collect();
        FieldSelector::from_pointers(expanded).project_source(map)
    }

    fn has_wildcard_relative_to_features(&self) -> bool {
        self.pointers.iter().any(|p| p.first() == Some(WILDCARD))
    }

    /// The selected part of a [`FieldSource`], as a JSON object.
    pub fn project_source<S: FieldSource + ?Sized>(&self, source: &S) -> Value {
        if self.has_wildcard {
            let ids = source.feature_ids();
            let expanded = self.pointers.iter().flat_map(|p| expand(p, &ids)).collect();
            return FieldSelector::from_pointers(expanded).project_expanded(source);
        }
        self.project_expanded(source)
    }

    fn project_expanded<S: FieldSource + ?Sized>(&self, source: &S) -> Value {
        let existing: Vec<&JsonPointer> =
            self.pointers.iter().filter(|p| exists(source, p)).collect();
        let result = if existing.len() == self.pointers.len() {
            filter_source(source, &self.trie)
        } else if existing.is_empty() {
            Map::new()
        } else {
            let pointers: Vec<JsonPointer> = existing.into_iter().cloned().collect();
            filter_source(source, &Trie::build(&pointers))
        };
        Value::Object(result)
    }
}

/// Ditto's `flattenToJsonPointers` over `splitAroundComma`.
fn flatten(text: &str, prefix: &JsonPointer, out: &mut Vec<JsonPointer>) -> Result<(), DittoError> {
    for raw in split_around_comma(text) {
        match (raw.find('('), raw.find(')')) {
            (Some(open), Some(close)) if open < close => {
                let root = prefix.join(&JsonPointer::parse(&raw[..open])?);
                // Ditto takes everything between the first '(' and the
                // last character, trusting that it is the matching ')'.
                let inner = raw.get(open + 1..raw.len() - 1).unwrap_or("");
                flatten(inner, &root, out)?;
            }
            _ => out.push(prefix.join(&JsonPointer::parse(raw)?)),
        }
    }
    Ok(())
}

fn split_around_comma(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Where a pointer holds a feature-id wildcard: level 1 of
/// `features/*/…`, level 2 of `_metadata/features/*/…`.
fn wildcard_at(pointer: &JsonPointer) -> Option<usize> {
    let levels = pointer.levels();
    match levels {
        [first, second, ..] if first == "features" && second == WILDCARD => Some(1),
        [first, second, third, ..]
            if first == "_metadata" && second == "features" && third == WILDCARD =>
        {
            Some(2)
        }
        _ => None,
    }
}

fn expand(pointer: &JsonPointer, feature_ids: &[String]) -> Vec<JsonPointer> {
    let Some(at) = wildcard_at(pointer) else {
        return vec![pointer.clone()];
    };
    let levels = pointer.levels();
    feature_ids
        .iter()
        .map(|id| {
            let mut expanded = levels.to_vec();
            expanded[at] = id.clone();
            JsonPointer::from_levels(expanded)
        })
        .collect()
}

/// Ditto's `containsFlatteningArrays`.
fn exists<S: FieldSource + ?Sized>(source: &S, pointer: &JsonPointer) -> bool {
    let levels = pointer.levels();
    match levels.split_first() {
        None => false,
        Some((first, rest)) => source.field(first).is_some_and(|v| value_contains(&v, rest)),
    }
}

fn value_contains(value: &Value, levels: &[String]) -> bool {
    let Some((first, rest)) = levels.split_first() else {
        return true;
    };
    match value {
        Value::Object(map) => map.get(first).is_some_and(|v| value_contains(v, rest)),
        Value::Array(items) => items.iter().any(|item| {
            item.as_object().and_then(|m| m.get(first)).is_some_and(|v| value_contains(v, rest))
        }),
        _ => false,
    }
}

/// Ditto's `JsonFieldSelectorTrie`: children in first-insertion order; a
/// node without children selects its whole value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Trie {
    children: Vec<(String, Trie)>,
}

impl Trie {
    fn build(pointers: &[JsonPointer]) -> Trie {
        let mut trie = Trie::default();
        for pointer in pointers {
            trie.add(pointer.levels());
        }
        trie
    }

    fn add(&mut self, levels: &[String]) {
        let Some((first, rest)) = levels.split_first() else {
            return;
        };
        match self.children.iter().position(|(key, _)| key == first) {
            Some(i) => {
                let child = &mut self.children[i].1;
                if rest.is_empty() {
                    // A shorter pointer selects the whole value.
                    *child = Trie::default();
                } else if !child.children.is_empty() {
                    child.add(rest);
                }
                // else: the whole value is already selected.
            }
            None => {
                let mut child = Trie::default();
                child.add(rest);
                self.children.push((first.clone(), child));
            }
        }
    }
}

fn filter_source<S: FieldSource + ?Sized>(source: &S, trie: &Trie) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, child) in &trie.children {
        if let Some(value) = source.field(key) {
            out.insert(key.clone(), filter_value(&value, child));
        }
    }
    out
}

/// Ditto's `filterByTrie` below the top: lenient, since existence was
/// checked per pointer before.
fn filter_value(value: &Value, trie: &Trie) -> Value {
    if trie.children.is_empty() {
        return value.clone();
    }
    match value {
        Value::Object(map) => Value::Object(filter_object(map, trie)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| match item {
                    Value::Object(map) => Value::Object(filter_object(map, trie)),
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn filter_object(map: &Map<String, Value>, trie: &Trie) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, child) in &trie.children {
        if let Some(value) = map.get(key) {
            out.insert(key.clone(), filter_value(value, child));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pointers(text: &str) -> Vec<String> {
        FieldSelector::parse(text).unwrap().pointers().iter().map(ToString::to_string).collect()
    }

    // ImmutableJsonFieldSelectorFactoryTest
    #[test]
    fn parses_groups_as_ditto_does() {
        assert_eq!(
            pointers("thingId,attributes(someAttr/subel,foo),owner"),
            ["/thingId", "/attributes/someAttr/subel", "/attributes/foo", "/owner"]
        );
        assert_eq!(
            pointers("one,two(subfield1,sub2),three(foo,bar/baz),four"),
            ["/one", "/two/subfield1", "/two/sub2", "/three/foo", "/three/bar/baz", "/four"]
        );
        assert_eq!(
            pointers("one,two(subfield1,sub2(foo,bar/baz)),four,five/key"),
            ["/one", "/two/subfield1", "/two/sub2/foo", "/two/sub2/bar/baz", "/four", "/five/key"]
        );
        assert_eq!(
            pointers("attributes/complex(some,serialNo)"),
            ["/attributes/complex/some", "/attributes/complex/serialNo"]
        );
        assert_eq!(pointers("abc()"), ["/abc"]);
        assert_eq!(pointers("abc)("), ["/abc)("]);
        assert_eq!(pointers("a,a,/a/"), ["/a"]);
        assert_eq!(pointers("a,,b"), ["/a", "/b"]);
    }

    #[test]
    fn refuses_empty_and_unbalanced_selectors() {
        for text in ["", "thingId,attributes(someAttr/subsel,owner", "abc(def(foo)"] {
            let error = FieldSelector::parse(text).unwrap_err();
            assert_eq!(error.error, "json.fieldselector.invalid", "{text}");
            assert_eq!(error.message, format!("The field selector <{text}> is invalid!"));
            assert_eq!(error.status, 400);
        }
        assert_eq!(FieldSelector::parse("a//b").unwrap_err().error, "json.pointer.invalid");
    }

    fn project(selector: &str, value: Value) -> Value {
        FieldSelector::parse(selector).unwrap().project(&value)
    }

    #[test]
    fn projects_existing_fields_in_selector_order() {
        let thing = json!({
            "thingId": "ns:t", "policyId": "ns:p",
            "attributes": {"manufacturer": "ACME", "complex": {"some": 1, "serialNo": 2, "other": 3}},
        });
        assert_eq!(
            serde_json::to_string(&project(
                "attributes/complex(serialNo,some),thingId",
                thing.clone()
            ))
            .unwrap(),
            r#"{"attributes":{"complex":{"serialNo":2,"some":1}},"thingId":"ns:t"}"#
        );
        assert_eq!(
            project("attributes/missing,policyId", thing.clone()),
            json!({"policyId": "ns:p"})
        );
        assert_eq!(project("features,_revision", thing.clone()), json!({}));
        // The order is that of the first pointer that exists under a key.
        assert_eq!(
            serde_json::to_string(&project(
                "attributes/nope/x,thingId,attributes/manufacturer",
                thing.clone()
            ))
            .unwrap(),
            r#"{"thingId":"ns:t","attributes":{"manufacturer":"ACME"}}"#
        );
        // A shorter pointer wins over a longer one, in either order.
        assert_eq!(
            project("attributes/complex/some,attributes", thing.clone())["attributes"],
            thing["attributes"]
        );
        assert_eq!(
            project("attributes,attributes/complex/some", thing.clone())["attributes"],
            thing["attributes"]
        );
        // Scalars are not descended into.
        assert_eq!(project("thingId/x", thing), json!({}));
    }

    #[test]
    fn arrays_are_flattened() {
        let value = json!({"list": [{"x": 1, "y": 2}, {"y": 3}, 5, {"x": {"z": 1}}]});
        assert_eq!(
            project("list/x", value.clone()),
            json!({"list": [{"x": 1}, {}, 5, {"x": {"z": 1}}]})
        );
        assert_eq!(project("list/z", value), json!({}));
    }

    #[test]
    fn feature_wildcards_expand_against_the_features() {
        let thing = json!({
            "thingId": "ns:t",
            "features": {
                "lamp": {"properties": {"on": true, "color": "red"}},
                "switch": {"properties": {"on": false}},
                "meter": {"properties": {"kwh": 3}},
            },
        });
        assert_eq!(
            project("features/*/properties/on", thing.clone()),
            json!({"features": {"lamp": {"properties": {"on": true}}, "switch": {"properties": {"on": false}}}})
        );
        assert_eq!(
            project("thingId,features/*/definition", thing.clone()),
            json!({"thingId": "ns:t"})
        );
        let features =
            FieldSelector::parse("*/properties/on").unwrap().project_features(&thing["features"]);
        assert_eq!(
            features,
            json!({"lamp": {"properties": {"on": true}}, "switch": {"properties": {"on": false}}})
        );
        assert_eq!(project("features/*/properties/on", json!({"thingId": "x"})), json!({}));
    }

    #[test]
    fn metadata_feature_wildcards_expand_too() {
        struct WithMetadata(Map<String, Value>, Value);
        impl FieldSource for WithMetadata {
            fn field(&self, key: &str) -> Option<Cow<'_, Value>> {
                match key {
                    "_metadata" => Some(Cow::Borrowed(&self.1)),
                    _ => self.0.field(key),
                }
            }
        }
        let doc = json!({"features": {"a": {}, "b": {}}});
        let metadata = json!({"features": {"a": {"properties": {"x": {"unit": "C"}}}, "b": {}}});
        let source = WithMetadata(doc.as_object().unwrap().clone(), metadata);
        let selector = FieldSelector::parse("_metadata/features/*/properties").unwrap();
        assert_eq!(
            selector.project_source(&source),
            json!({"_metadata": {"features": {"a": {"properties": {"x": {"unit": "C"}}}}}})
        );
    }

    #[test]
    fn non_objects_are_returned_whole_and_top_level_fields_are_known() {
        let selector = FieldSelector::parse("_policy,attributes/a").unwrap();
        assert_eq!(selector.project(&json!(5)), json!(5));
        assert!(selector.selects_top_level("_policy"));
        assert!(!selector.selects_top_level("a"));
    }
}
