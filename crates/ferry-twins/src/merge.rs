//! JSON merge patch (RFC 7396), with Ditto's regex deletes.
//!
//! A patch that is an object merges into the target key by key: `null`
//! removes the key, an object merges deeper, anything else replaces. A
//! patch that is not an object replaces the target whole. Ditto adds one
//! extension (`JsonMergePatch.determineToBeNulledKeysByRegex`): a key
//! written `{{ ~regex~ }}` (or `{{ /regex/ }}`) whose value is `null`
//! removes every key of the target object at that level that the regex
//! matches in full, as Java's `Matcher.matches()` does; the deletes happen
//! before the patch's other keys are merged, so a key the patch names
//! explicitly is set after its regex delete. A regex key with any other
//! value is an ordinary key.
//!
//! Where Ditto departs from the RFC by stripping `null`s only one level
//! deep when a patch object lands on a missing key, this follows the RFC
//! (appendix A: `{"a":{"bb":{"ccc":null}}}` on `{}` gives `{"a":{"bb":{}}}`).

use crate::error::DittoError;
use regex_automata::meta::Regex;
use serde_json::{Map, Value};

/// Applies `patch` to `target` in place. Fails only on a regex delete
/// whose regex does not compile.
pub fn merge_patch(target: &mut Value, patch: &Value) -> Result<(), DittoError> {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target_map) = target {
        delete_by_regex_keys(target_map, patch_map)?;
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.shift_remove(key);
            } else {
                let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                merge_patch(slot, value)?;
            }
        }
    }
    Ok(())
}

/// The regex inside a `{{ ~regex~ }}` or `{{ /regex/ }}` key, if `key` is
/// one.
fn key_regex(key: &str) -> Option<&str> {
    let inner = key.strip_prefix("{{")?.strip_suffix("}}")?.trim();
    let delimited = |d: char| inner.len() >= 2 && inner.starts_with(d) && inner.ends_with(d);
    (delimited('~') || delimited('/')).then(|| &inner[1..inner.len() - 1])
}

fn delete_by_regex_keys(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), DittoError> {
    for (key, value) in patch {
        let Some(regex) = key_regex(key).filter(|_| value.is_null()) else {
            continue;
        };
        // Anchored on both ends: Java's matches() wants the whole key.
        let regex = Regex::new(&format!("^(?:{regex})$")).map_err(|e| {
            DittoError::thing_merge_invalid(format!(
                "The regex <{regex}> in the merge patch is invalid: {e}"
            ))
        })?;
        target.retain(|target_key, _| !regex.is_match(target_key.as_str()));
    }
    Ok(())
}

impl DittoError {
    /// Ditto's `ThingMergeInvalidException` (`things:merge.invalid`, 400),
    /// with the message of what went wrong, as Ditto's `fromMessage` gives.
    pub fn thing_merge_invalid(message: impl Into<String>) -> Self {
        DittoError::new(
            400,
            "things:merge.invalid",
            message,
            "The provided JSON Merge Patch cannot be applied at the given path.".to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(target: Value, patch: Value) -> Value {
        let mut target = target;
        merge_patch(&mut target, &patch).unwrap();
        target
    }

    /// RFC 7396, appendix A, every row.
    #[test]
    fn rfc_7396_appendix_a() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (json!({"a":"b","b":"c"}), json!({"a":null}), json!({"b":"c"})),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (json!({"a":{"b":"c"}}), json!({"a":{"b":"d","c":null}}), json!({"a":{"b":"d"}})),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (json!({}), json!({"a":{"bb":{"ccc":null}}}), json!({"a":{"bb":{}}})),
        ];
        for (target, patch, expected) in cases {
            assert_eq!(merged(target.clone(), patch.clone()), expected, "{target} + {patch}");
        }
    }

    #[test]
    fn keeps_the_targets_key_order_and_appends_new_keys() {
        let result = merged(json!({"z":1,"a":2}), json!({"b":3,"z":4}));
        assert_eq!(serde_json::to_string(&result).unwrap(), r#"{"z":4,"a":2,"b":3}"#);
    }

    #[test]
    fn regex_keys_delete_matching_keys_at_their_level() {
        let target = json!({"history": {"2022-01": 1, "2022-02": 2, "2023-01": 3}, "2022-x": true});
        let patch = json!({"history": {"{{ ~2022-.*~ }}": null}});
        assert_eq!(
            merged(target.clone(), patch),
            json!({"history": {"2023-01": 3}, "2022-x": true})
        );
        let slashes = json!({"history": {"{{/2023-0[1-9]/}}": null, "2023-05": 5}});
        assert_eq!(
            merged(target, slashes),
            json!({"history": {"2022-01": 1, "2022-02": 2, "2023-05": 5}, "2022-x": true})
        );
    }

    #[test]
    fn regex_matches_whole_keys_only() {
        let result = merged(json!({"abc": 1, "b": 2}), json!({"{{ ~b~ }}": null}));
        assert_eq!(result, json!({"abc": 1}));
    }

    #[test]
    fn a_regex_key_with_a_value_is_an_ordinary_key() {
        let result = merged(json!({"a": 1}), json!({"{{ ~a~ }}": 2}));
        assert_eq!(result, json!({"a": 1, "{{ ~a~ }}": 2}));
    }

    #[test]
    fn an_invalid_regex_is_a_merge_error() {
        let error = merge_patch(&mut json!({}), &json!({"{{ ~(~ }}": null})).unwrap_err();
        assert_eq!(error.error, "things:merge.invalid");
        assert_eq!(error.status, 400);
    }
}
