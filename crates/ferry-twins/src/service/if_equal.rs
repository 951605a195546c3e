//! Ditto's `if-equal` header (since Ditto 3.3): what a modify or merge
//! does when it would leave the resource as it is. Devices often resend
//! the same state; `skip` answers them 412 without a write, a new
//! revision or an event, and `skip-minimizing-merge` also trims a merge
//! to the parts that change, so its event carries only those.
//!
//! Follows Ditto's `IfEqualPreconditionHeader`: the comparison ignores
//! the thing's `thingId` and, on the new side, the `_`-fields a request
//! may carry (an inline `_policy`); objects compare without regard to
//! the order of their keys; a create is never skipped.

use crate::error::DittoError;
use crate::merge::merge_patch;
use crate::thing::{Thing, ThingResource};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IfEqual {
    /// Write whatever the resource holds (Ditto's default).
    #[default]
    Update,
    /// Refuse (412) a write that would change nothing.
    Skip,
    /// As `Skip`, and trim a merge patch to what it changes.
    SkipMinimizingMerge,
}

impl IfEqual {
    /// The header's value, trimmed and in any case, as Ditto's enum
    /// validator reads it.
    pub fn parse(raw: &str) -> Result<IfEqual, DittoError> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "update" => Ok(IfEqual::Update),
            "skip" => Ok(IfEqual::Skip),
            "skip-minimizing-merge" => Ok(IfEqual::SkipMinimizingMerge),
            _ => {
                let mut error =
                    DittoError::header_invalid("if-equal", raw, "enum value of type 'IfEqual'");
                error.description =
                    Some("The value must be one of: <update|skip|skip-minimizing-merge>.".into());
                Err(error)
            }
        }
    }
}

/// Ditto's `ThingPreconditionFailedException` for a write `if-equal`
/// skipped.
pub fn skipped() -> DittoError {
    DittoError::new(
        412,
        "things:precondition.failed",
        "The previous value was equal to the new value and the 'if-equal' header was set to 'skip'.",
        "Your changes were not applied, which is probably the expected outcome.".to_string(),
    )
}

/// Whether putting `value` at `resource` would leave `current` as it is.
pub fn put_changes_nothing(current: &Thing, resource: &ThingResource, value: &Value) -> bool {
    let Some(previous) = previous(current, resource) else { return false };
    previous == comparable_new(resource, value)
}

/// Whether merging `patch` at `resource` would leave `current` as it is.
pub fn merge_changes_nothing(current: &Thing, resource: &ThingResource, patch: &Value) -> bool {
    let Some(previous) = previous(current, resource) else { return false };
    if !patch.is_object() {
        return previous == *patch;
    }
    if !previous.is_object() {
        return false;
    }
    let mut merged = previous.clone();
    match merge_patch(&mut merged, &comparable_new(resource, patch)) {
        Ok(()) => merged == previous,
        Err(_) => false,
    }
}

/// `patch` reduced to what it changes at `resource` (Ditto's
/// `JsonMergePatch.compute(old, patch, false)`): keys whose value is
/// already there are left out, keys the thing lacks are kept. `None` when
/// the resource does not exist yet (the patch stays whole).
pub fn minimized_patch(current: &Thing, resource: &ThingResource, patch: &Value) -> Option<Value> {
    let previous = previous(current, resource)?;
    Some(difference(&previous, patch).unwrap_or_else(|| Value::Object(Map::new())))
}

fn difference(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return Some(new.clone());
    };
    let mut changed = Map::new();
    for (key, value) in new {
        match old.get(key) {
            Some(before) => {
                if let Some(diff) = difference(before, value) {
                    changed.insert(key.clone(), diff);
                }
            }
            None => {
                changed.insert(key.clone(), value.clone());
            }
        }
    }
    (!changed.is_empty()).then_some(Value::Object(changed))
}

/// The resource as the comparison sees it, or `None` when it is missing.
fn previous(current: &Thing, resource: &ThingResource) -> Option<Value> {
    let mut value = current.retrieve(resource, None).ok()?;
    if *resource == ThingResource::Thing {
        if let Value::Object(thing) = &mut value {
            thing.shift_remove("thingId");
        }
    }
    Some(value)
}

fn comparable_new(resource: &ThingResource, value: &Value) -> Value {
    match (resource, value) {
        (ThingResource::Thing, Value::Object(thing)) => Value::Object(
            thing
                .iter()
                .filter(|(key, _)| *key != "thingId" && !key.starts_with('_'))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        _ => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_header_takes_ditto_s_three_options_in_any_case() {
        assert_eq!(IfEqual::parse("update").unwrap(), IfEqual::Update);
        assert_eq!(IfEqual::parse(" SKIP ").unwrap(), IfEqual::Skip);
        assert_eq!(IfEqual::parse("skip-minimizing-merge").unwrap(), IfEqual::SkipMinimizingMerge);
        let error = IfEqual::parse("never").unwrap_err();
        assert_eq!((error.status, error.error), (400, "header.invalid"));
        assert_eq!(
            error.message,
            "The value 'never' of the header 'if-equal' is not a valid enum value of type 'IfEqual'."
        );
    }

    #[test]
    fn a_minimized_patch_keeps_only_what_changes() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": "x"});
        let patch = json!({"a": 1, "b": {"c": 2, "d": 4}, "f": null, "e": null});
        assert_eq!(difference(&old, &patch), Some(json!({"b": {"d": 4}, "f": null, "e": null})));
        assert_eq!(difference(&old, &json!({"a": 1})), None);
        assert_eq!(difference(&json!(1), &json!({"a": 1})), Some(json!({"a": 1})));
    }
}
