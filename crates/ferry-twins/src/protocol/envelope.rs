//! One Ditto protocol message (`JsonifiableAdaptable` in Ditto's code):
//! `{"topic","headers","path","value","fields","extra","status",
//! "revision","timestamp"}`, in that order on the wire.
//!
//! Reading follows Ditto's `ProtocolFactory.jsonifiableAdaptableFromJson`:
//! the message must be a JSON object (`json.invalid` otherwise) with a
//! string `topic` (`json.field.missing`); `path` defaults to `/`;
//! `headers` keys are compared case-insensitively, so they are kept in
//! lower case. A `value` of `null` is a value (a property set to null),
//! which is why `value` is not a plain `Option` in serde's sense.

use crate::error::DittoError;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Messages larger than this are refused before parsing: a thing is at
/// most 100 KiB by default (`ThingLimits`), and a command carries at most
/// one thing and its policy.
pub const MAX_ENVELOPE_BYTES: usize = 1024 * 1024;

/// The header naming who caused a signal: the first subject of the
/// command's caller, as Ditto stamps commands, events and live messages.
pub const ORIGINATOR: &str = "ditto-originator";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub topic: String,
    #[serde(default)]
    pub headers: Map<String, Value>,
    #[serde(default = "root_path")]
    pub path: String,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

fn root_path() -> String {
    "/".to_owned()
}

/// A field that is present is `Some`, even when it is `null`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Envelope {
    /// A message with `topic` and `path` and nothing else.
    pub fn new(topic: impl Into<String>, path: impl Into<String>) -> Envelope {
        Envelope {
            topic: topic.into(),
            headers: Map::new(),
            path: path.into(),
            value: None,
            fields: None,
            extra: None,
            status: None,
            revision: None,
            timestamp: None,
        }
    }

    /// Reads a message as Ditto does, its header names in lower case.
    pub fn parse(bytes: &[u8]) -> Result<Envelope, DittoError> {
        if bytes.len() > MAX_ENVELOPE_BYTES {
            return Err(DittoError::json_invalid(format_args!(
                "the message has {} bytes, more than the {MAX_ENVELOPE_BYTES} allowed",
                bytes.len()
            )));
        }
        let value: Value = serde_json::from_slice(bytes).map_err(DittoError::json_invalid)?;
        let Value::Object(object) = &value else {
            return Err(DittoError::json_invalid("a Ditto protocol message is a JSON object"));
        };
        if !object.get("topic").is_some_and(Value::is_string) {
            return Err(DittoError::json_field_missing(
                "JSON did not include required </topic> field!",
            ));
        }
        let mut envelope: Envelope =
            serde_json::from_value(value).map_err(DittoError::json_invalid)?;
        if envelope.headers.keys().any(|key| key.bytes().any(|b| b.is_ascii_uppercase())) {
            envelope.headers = std::mem::take(&mut envelope.headers)
                .into_iter()
                .map(|(key, value)| (key.to_ascii_lowercase(), value))
                .collect();
        }
        Ok(envelope)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an envelope serialises: it holds JSON values only")
    }

    /// A header as text: a string as it is, anything else as its JSON.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(|value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }

    pub fn correlation_id(&self) -> Option<String> {
        self.header("correlation-id")
    }

    /// Whether a response is wanted (`response-required`, true unless
    /// `false`).
    pub fn response_required(&self) -> bool {
        self.header("response-required").is_none_or(|value| !value.eq_ignore_ascii_case("false"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_value_is_a_value_and_a_missing_one_is_not() {
        let set = Envelope::parse(
            br#"{"topic":"a/b/things/twin/commands/modify","path":"/attributes/x","value":null}"#,
        )
        .unwrap();
        assert_eq!(set.value, Some(Value::Null));
        let none = Envelope::parse(br#"{"topic":"a/b/things/twin/commands/delete"}"#).unwrap();
        assert_eq!(none.value, None);
        assert_eq!(none.path, "/");
    }

    #[test]
    fn header_names_are_kept_in_lower_case() {
        let envelope =
            Envelope::parse(br#"{"topic":"a/b/things/twin/commands/retrieve","headers":{"Correlation-Id":"c1","response-required":false}}"#)
                .unwrap();
        assert_eq!(envelope.correlation_id().as_deref(), Some("c1"));
        assert!(!envelope.response_required());
    }

    #[test]
    fn what_is_not_an_envelope_is_refused_with_dittos_errors() {
        assert_eq!(Envelope::parse(b"{").unwrap_err().error, "json.invalid");
        assert_eq!(Envelope::parse(b"[1]").unwrap_err().error, "json.invalid");
        assert_eq!(Envelope::parse(b"{\"path\":\"/\"}").unwrap_err().error, "json.field.missing");
    }

    #[test]
    fn fields_are_written_in_dittos_order_and_absent_ones_left_out() {
        let mut envelope = Envelope::new("a/b/things/twin/commands/modify", "/");
        envelope.status = Some(204);
        envelope.headers.insert("correlation-id".into(), "c".into());
        assert_eq!(
            String::from_utf8(envelope.to_bytes()).unwrap(),
            r#"{"topic":"a/b/things/twin/commands/modify","headers":{"correlation-id":"c"},"path":"/","status":204}"#
        );
    }
}
