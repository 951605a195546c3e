//! What can be wrong with an RQL text, and the Ditto error each use of RQL
//! answers with.
//!
//! Ditto turns the same failure into different errors depending on where
//! the RQL came from, so the mapping is a choice of the caller:
//! [`RqlError::to_ditto_error`] for search filters, search options and
//! event filters, [`RqlError::to_condition_error`] for `condition=`.

use crate::error::DittoError;

/// One failure, with Ditto's message for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RqlError {
    pub kind: ErrorKind,
    /// Byte offset into the text where the problem was found.
    pub offset: usize,
    /// Ditto's message: its parser's, its field factory's, or its
    /// validator's, as close as Ferry can reproduce it.
    pub message: String,
}

/// Which of Ditto's checks refused the text; this decides the error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// Ditto's `ParserException`: the text is not RQL, a number does not
    /// fit a Java `long`/`int`, or (Ferry only) a limit was exceeded.
    Syntax,
    /// Ditto's field expression factory: `Unknown property name: x`.
    UnknownProperty,
    /// Ditto's criteria factory: `like`/`ilike` need a string.
    LikeNeedsString,
    /// Ditto's `JsonPointerInvalidException`: two slashes in a row in the
    /// property (the property's text is kept for `condition=`'s message).
    InvalidPointer(String),
    /// Ditto's `InvalidOptionException`, with the description it sets
    /// when it is not the default one.
    InvalidOption { description: Option<&'static str> },
}

const RQL_INVALID: &str = "rql.expression.invalid";
const RQL_INVALID_DESCRIPTION: &str =
    "Ensure that all opening parentheses have also closing ones and that the RQL expression is valid.";
const OPTION_INVALID: &str = "thing-search:search.option.invalid";
const OPTION_INVALID_DESCRIPTION: &str = "At least one provided option is invalid.";
const CONDITION_INVALID: &str = "things:condition.invalid";
const CONDITION_INVALID_DESCRIPTION: &str =
    "The provided condition is not valid. Please check the value of your condition header.";
const POINTER_INVALID_DESCRIPTION: &str = "Consecutive slashes in JSON pointers are not supported.";

impl RqlError {
    pub(crate) fn new(kind: ErrorKind, offset: usize, message: impl Into<String>) -> Self {
        RqlError { kind, offset, message: message.into() }
    }

    /// The error of a search (`filter=`, `option=`) or of an event filter:
    /// Ditto's `InvalidRqlExpressionException` for anything wrong with the
    /// filter and for option syntax (its cursor logic parses the options
    /// first and maps the parser's failure so), and
    /// `thing-search:search.option.invalid` for option values.
    pub fn to_ditto_error(&self) -> DittoError {
        match &self.kind {
            ErrorKind::InvalidOption { description } => DittoError::new(
                400,
                OPTION_INVALID,
                self.message.clone(),
                description.unwrap_or(OPTION_INVALID_DESCRIPTION).to_string(),
            ),
            ErrorKind::InvalidPointer(_) => DittoError::new(
                400,
                RQL_INVALID,
                self.message.clone(),
                POINTER_INVALID_DESCRIPTION.to_string(),
            ),
            _ => DittoError::new(
                400,
                RQL_INVALID,
                self.message.clone(),
                RQL_INVALID_DESCRIPTION.to_string(),
            ),
        }
    }

    /// The error of a `condition=`: Ditto's enforcement parses the
    /// condition and checks its pointers first and answers
    /// `things:condition.invalid`; unknown fields and bad `like` values are
    /// only found later, when the criteria are built, and answer
    /// `rql.expression.invalid` (ThingCommandEnforcement,
    /// ThingConditionValidator).
    pub fn to_condition_error(&self, condition: &str) -> DittoError {
        match &self.kind {
            ErrorKind::Syntax => DittoError::new(
                400,
                CONDITION_INVALID,
                format!("The specified condition '{condition}' is invalid."),
                if self.message.is_empty() {
                    CONDITION_INVALID_DESCRIPTION.to_string()
                } else {
                    self.message.clone()
                },
            ),
            ErrorKind::InvalidPointer(property) => DittoError::new(
                400,
                CONDITION_INVALID,
                format!("The specified condition '{property}' is invalid."),
                POINTER_INVALID_DESCRIPTION.to_string(),
            ),
            _ => self.to_ditto_error(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_to_dittos_codes_by_use() {
        let syntax = RqlError::new(ErrorKind::Syntax, 3, "Invalid input");
        assert_eq!(syntax.to_ditto_error().error, "rql.expression.invalid");
        let condition = syntax.to_condition_error("eq(a");
        assert_eq!(condition.error, "things:condition.invalid");
        assert_eq!(condition.status, 400);
        assert_eq!(condition.message, "The specified condition 'eq(a' is invalid.");
        assert_eq!(condition.description.as_deref(), Some("Invalid input"));

        let unknown = RqlError::new(ErrorKind::UnknownProperty, 3, "Unknown property name: x");
        assert_eq!(unknown.to_condition_error("eq(x,1)").error, "rql.expression.invalid");

        let option = RqlError::new(ErrorKind::InvalidOption { description: None }, 0, "m");
        let error = option.to_ditto_error();
        assert_eq!(error.error, "thing-search:search.option.invalid");
        assert_eq!(error.description.as_deref(), Some(OPTION_INVALID_DESCRIPTION));
    }
}
