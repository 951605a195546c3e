//! The error every twin operation answers with, in Ditto's shape.
//!
//! Ditto's clients match on the `error` code (`things:thing.notfound`) and
//! the HTTP status, and show `message` and `description` to people, so all
//! four are part of the contract: each constructor in this crate copies
//! them from the Ditto exception it stands for (`ERROR_CODE`,
//! `MESSAGE_TEMPLATE`, `DEFAULT_DESCRIPTION`, `HttpStatus`).

use serde::Serialize;

/// One Ditto error: `{"status":404,"error":"things:thing.notfound",
/// "message":"…","description":"…"}` on the wire, with `href` when the
/// exception has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{error} ({status}): {message}")]
pub struct DittoError {
    pub status: u16,
    pub error: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub href: Option<&'static str>,
}

impl DittoError {
    pub fn new(
        status: u16,
        error: &'static str,
        message: impl Into<String>,
        description: impl Into<Option<String>>,
    ) -> Self {
        DittoError {
            status,
            error,
            message: message.into(),
            description: description.into(),
            href: None,
        }
    }

    pub fn with_href(mut self, href: &'static str) -> Self {
        self.href = Some(href);
        self
    }

    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Ditto's 401 (`gateway:authentication.failed`) for a request or a
    /// message no authentication vouched for.
    pub fn unauthenticated() -> Self {
        DittoError::new(
            401,
            "gateway:authentication.failed",
            "No applicable authentication provider was found!",
            "Check if your credentials were correct.".to_string(),
        )
    }

    /// The body an HTTP response or a Ditto protocol error carries.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an error serialises: it holds only strings and numbers")
    }

    /// Ditto's `json.invalid`: a body or a value that is not JSON, or not
    /// the JSON the resource takes.
    pub fn json_invalid(detail: impl std::fmt::Display) -> Self {
        DittoError::new(
            400,
            "json.invalid",
            format!("Failed to parse JSON string '{detail}'!"),
            "Check if the JSON was valid (e.g. on https://jsonlint.com) and if it was in required format.".to_string(),
        )
    }

    /// Ditto's `json.invalid` (`JsonParseException` wrapped in
    /// `DittoJsonException`) with the message the parser wrote, for a value
    /// of the wrong JSON type or shape.
    pub fn json_parse(message: impl Into<String>) -> Self {
        DittoError::new(
            400,
            "json.invalid",
            message,
            "Check if the JSON was valid (e.g. on https://jsonlint.com) and if it was in required format.".to_string(),
        )
    }

    /// Ditto's `json.field.missing` (`JsonMissingFieldException`), for a
    /// required field left out.
    pub fn json_field_missing(message: impl Into<String>) -> Self {
        DittoError::new(
            400,
            "json.field.missing",
            message,
            "Check if all required JSON fields were set.".to_string(),
        )
    }

    /// Ditto's `JsonKeyInvalidException` (`json.key.invalid`): a key with a
    /// slash or a control character, or longer than 256 characters;
    /// `reason` is the validator's sentence, which Ditto sends as the
    /// description.
    pub fn json_key_invalid(key: &str, reason: &str) -> Self {
        DittoError::new(
            400,
            "json.key.invalid",
            format!("The JSON key <{key}> is invalid!"),
            reason.to_string(),
        )
    }

    /// Ditto's `JsonFieldSelectorInvalidException`
    /// (`json.fieldselector.invalid`), for an empty `fields=` or one whose
    /// parentheses do not pair up.
    pub fn json_field_selector_invalid(selector: &str) -> Self {
        DittoError::new(
            400,
            "json.fieldselector.invalid",
            format!("The field selector <{selector}> is invalid!"),
            "Check, for example, if the amount of opening parentheses '(' matches the amount of closing ones ')'."
                .to_string(),
        )
    }

    /// Ditto's `json.pointer.invalid`, for a pointer with two slashes in a
    /// row.
    pub fn json_pointer_invalid(pointer: &str) -> Self {
        DittoError::new(
            400,
            "json.pointer.invalid",
            format!("JSON pointer <{pointer}> is invalid!"),
            "Consecutive slashes in JSON pointers are not supported.".to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_as_ditto_does_without_empty_fields() {
        let error = DittoError::new(404, "things:thing.notfound", "gone", None);
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"status":404,"error":"things:thing.notfound","message":"gone"}"#
        );
    }
}
