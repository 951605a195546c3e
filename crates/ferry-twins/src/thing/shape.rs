//! What each part of a thing may hold, checked and put in Ditto's order.
//!
//! Ditto reads a thing through its model classes and writes it back out,
//! so what it stores is normalised: the thing's fields in the order
//! `thingId, policyId, definition, attributes, features`, a feature's in the
//! order `definition, properties, desiredProperties`, and fields it does not
//! know dropped without a word (`ImmutableThingFromCopyBuilder`,
//! `ImmutableFeatureFromScratchBuilder`). These functions do the same on
//! `serde_json` values. A `null` where an object or a definition goes is
//! kept, as Ditto keeps its `Null*` objects and writes them as `null`.

use crate::error::DittoError;
use crate::id::{validate_key, validate_keys, PolicyId, ThingId};
use serde_json::{Map, Value};

/// A type mismatch inside a thing body, worded as Ditto's
/// `AbstractJsonFieldDefinition` words it.
fn not_of_type(value: &Value, pointer: &str, java_type: &str) -> DittoError {
    DittoError::json_parse(format!("Value <{value}> for <{pointer}> is not of type <{java_type}>!"))
}

/// The user document of a thing from a PUT or POST body (already stripped
/// of nothing: `_policy` and the like are simply not copied), with
/// `thingId` set to `thing_id`.
pub(crate) fn thing_document(
    body: &Map<String, Value>,
    thing_id: &ThingId,
) -> Result<Map<String, Value>, DittoError> {
    let mut document = Map::new();
    document.insert("thingId".into(), Value::String(thing_id.to_string()));
    if let Some(policy_id) = body.get("policyId") {
        match policy_id {
            Value::String(text) => {
                PolicyId::parse(text)?;
                document.insert("policyId".into(), policy_id.clone());
            }
            Value::Null => {}
            other => return Err(not_of_type(other, "/policyId", "String")),
        }
    }
    if let Some(definition) = body.get("definition") {
        document.insert("definition".into(), thing_definition(definition)?);
    }
    if let Some(value) = body.get("attributes") {
        if !value.is_object() && !value.is_null() {
            return Err(not_of_type(value, "/attributes", "JsonObject"));
        }
        validate_keys(value)?;
        document.insert("attributes".into(), value.clone());
    }
    if let Some(value) = body.get("features") {
        let features = match value {
            Value::Object(_) => features(value)?,
            Value::Null => Value::Null,
            other => return Err(not_of_type(other, "/features", "JsonObject")),
        };
        document.insert("features".into(), features);
    }
    Ok(document)
}

/// A thing's `definition`: one identifier, or `null`.
pub(crate) fn thing_definition(value: &Value) -> Result<Value, DittoError> {
    match value {
        Value::String(text) => {
            check_definition_identifier(text)?;
            Ok(value.clone())
        }
        Value::Null => Ok(Value::Null),
        other => Err(DittoError::definition_identifier_not_a_string(&other.to_string())),
    }
}

/// `attributes`, `properties` and `desiredProperties`: an object whose keys
/// are all valid.
pub(crate) fn key_checked_object(value: &Value) -> Result<Value, DittoError> {
    if !value.is_object() {
        return Err(DittoError::json_invalid(value));
    }
    validate_keys(value)?;
    Ok(value.clone())
}

/// One attribute or property value: anything, with valid keys.
pub(crate) fn key_checked_value(value: &Value) -> Result<Value, DittoError> {
    validate_keys(value)?;
    Ok(value.clone())
}

/// `features`: an object of features by id.
pub(crate) fn features(value: &Value) -> Result<Value, DittoError> {
    let Value::Object(map) = value else {
        return Err(DittoError::json_invalid(value));
    };
    let mut features = Map::new();
    for (id, feature_value) in map {
        validate_key(id)?;
        features.insert(id.clone(), feature(id, feature_value)?);
    }
    Ok(Value::Object(features))
}

/// One feature: `null`, or an object of which only `definition`,
/// `properties` and `desiredProperties` are kept.
pub(crate) fn feature(id: &str, value: &Value) -> Result<Value, DittoError> {
    let map = match value {
        Value::Object(map) => map,
        Value::Null => return Ok(Value::Null),
        other => {
            return Err(DittoError::json_parse(format!(
                "The Feature value is not an object for Feature with ID '{id}': {other}"
            )))
        }
    };
    let mut feature = Map::new();
    if let Some(definition) = map.get("definition") {
        let definition = match definition {
            Value::Array(_) => feature_definition(definition)?,
            Value::Null => Value::Null,
            other => return Err(not_of_type(other, "/definition", "JsonArray")),
        };
        feature.insert("definition".into(), definition);
    }
    for key in ["properties", "desiredProperties"] {
        if let Some(properties) = map.get(key) {
            if !properties.is_object() && !properties.is_null() {
                return Err(not_of_type(properties, &format!("/{key}"), "JsonObject"));
            }
            validate_keys(properties)?;
            feature.insert(key.into(), properties.clone());
        }
    }
    Ok(Value::Object(feature))
}

/// A feature's `definition`: a non-empty array of identifiers
/// (`ImmutableFeatureDefinition.fromJson`).
pub(crate) fn feature_definition(value: &Value) -> Result<Value, DittoError> {
    let Value::Array(identifiers) = value else {
        return Err(DittoError::json_invalid(value));
    };
    if identifiers.is_empty() {
        return Err(DittoError::feature_definition_empty());
    }
    for identifier in identifiers {
        if !identifier.is_string() {
            return Err(DittoError::definition_identifier_not_a_string(&identifier.to_string()));
        }
    }
    for identifier in identifiers.iter().filter_map(Value::as_str) {
        check_definition_identifier(identifier)?;
    }
    Ok(value.clone())
}

/// Ditto's `ImmutableDefinitionIdentifier.ofParsed`: `namespace:name:version`
/// with each part of `[_a-zA-Z0-9\-.]+`, or a `java.net.URL` whose protocol
/// is HTTP(S) and whose host is not empty.
fn check_definition_identifier(text: &str) -> Result<(), DittoError> {
    let is_part = |part: &str| {
        !part.is_empty()
            && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    let parts: Vec<&str> = text.split(':').collect();
    let triple = parts.len() == 3 && parts.iter().all(|part| is_part(part));
    if triple || is_http_url(text) {
        Ok(())
    } else {
        Err(DittoError::definition_identifier_invalid(text))
    }
}

fn is_http_url(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_and_port = authority.rsplit('@').next().unwrap_or("");
    let host = match host_and_port.rsplit_once(':') {
        // An IPv6 literal keeps its colons inside brackets.
        Some((host, port))
            if !host_and_port.ends_with(']') && port.chars().all(|c| c.is_ascii_digit()) =>
        {
            host
        }
        _ => host_and_port,
    };
    !host.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id() -> ThingId {
        ThingId::parse("org.acme:t").unwrap()
    }

    #[test]
    fn a_thing_body_is_put_in_dittos_order_and_unknown_fields_dropped() {
        let body = json!({
            "features": {"f": {"properties": {"a": 1}, "extra": 1, "definition": ["a:b:1"]}},
            "attributes": {"x": 1},
            "unknown": true,
            "_policy": {},
            "definition": "a:b:1",
            "policyId": "org.acme:p",
        });
        let document = thing_document(body.as_object().unwrap(), &id()).unwrap();
        assert_eq!(
            serde_json::to_string(&document).unwrap(),
            r#"{"thingId":"org.acme:t","policyId":"org.acme:p","definition":"a:b:1","attributes":{"x":1},"features":{"f":{"definition":["a:b:1"],"properties":{"a":1}}}}"#
        );
    }

    #[test]
    fn a_thing_body_with_wrong_types_is_refused() {
        let cases = [
            (
                json!({"attributes": 5}),
                "json.invalid",
                "Value <5> for </attributes> is not of type <JsonObject>!",
            ),
            (
                json!({"features": []}),
                "json.invalid",
                "Value <[]> for </features> is not of type <JsonObject>!",
            ),
            (
                json!({"policyId": 1}),
                "json.invalid",
                "Value <1> for </policyId> is not of type <String>!",
            ),
            (json!({"policyId": "nope"}), "policies:id.invalid", "Policy ID 'nope' is not valid!"),
            (
                json!({"features": {"f": 1}}),
                "json.invalid",
                "The Feature value is not an object for Feature with ID 'f': 1",
            ),
            (
                json!({"features": {"a/b": {}}}),
                "json.key.invalid",
                "The JSON key <a/b> is invalid!",
            ),
            (
                json!({"attributes": {"a": {"ö": 1}}}),
                "json.key.invalid",
                "The JSON key <ö> is invalid!",
            ),
            (
                json!({"definition": "nope"}),
                "things:definition.identifier.invalid",
                "Definition identifier <nope> is invalid!",
            ),
            (
                json!({"features": {"f": {"properties": []}}}),
                "json.invalid",
                "Value <[]> for </properties> is not of type <JsonObject>!",
            ),
        ];
        for (body, code, message) in cases {
            let error = thing_document(body.as_object().unwrap(), &id()).unwrap_err();
            assert_eq!((error.error, error.message.as_str()), (code, message), "{body}");
            assert_eq!(error.status, 400);
        }
    }

    #[test]
    fn nulls_are_kept_as_ditto_keeps_its_null_objects() {
        let body = json!({"definition": null, "attributes": null, "features": {"f": null, "g": {"definition": null}}});
        let document = thing_document(body.as_object().unwrap(), &id()).unwrap();
        assert_eq!(document["definition"], Value::Null);
        assert_eq!(document["features"], json!({"f": null, "g": {"definition": null}}));
    }

    #[test]
    fn definition_identifiers() {
        for valid in [
            "org.eclipse.ditto:lamp:1.0.0",
            "a:b:c",
            "a_b:c-d:1.2-SNAPSHOT",
            "https://example.com/models/lamp-1.0.0.tm.jsonld",
            "http://localhost:8080/x",
            "HTTPS://user@example.com:443",
        ] {
            assert!(check_definition_identifier(valid).is_ok(), "{valid}");
        }
        for invalid in [
            "",
            "a:b",
            "a:b:c:d",
            "a::c",
            "a:b:c d",
            "ftp://example.com/x",
            "https://",
            "https:///x",
            "urn:x",
        ] {
            let error = check_definition_identifier(invalid).unwrap_err();
            assert_eq!(error.error, "things:definition.identifier.invalid", "{invalid}");
        }
    }

    #[test]
    fn feature_definitions() {
        assert_eq!(
            feature_definition(&json!(["a:b:1", "https://x.org/m"])).unwrap(),
            json!(["a:b:1", "https://x.org/m"])
        );
        assert_eq!(
            feature_definition(&json!([])).unwrap_err().error,
            "things:feature.definition.empty"
        );
        let error = feature_definition(&json!(["a:b:1", 5])).unwrap_err();
        assert_eq!(error.error, "things:definition.identifier.invalid");
        assert_eq!(error.message, "Definition identifier <5> is invalid!");
        assert_eq!(
            error.description.as_deref(),
            Some("The provided identifier is not a JSON string, please adjust it accordingly.")
        );
        assert_eq!(feature_definition(&json!("a:b:1")).unwrap_err().error, "json.invalid");
    }
}
