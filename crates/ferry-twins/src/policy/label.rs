//! The label that names a policy entry (`OWNER`, `DEFAULT`), and the
//! character rules Ditto's validators share with resource keys and subject
//! ids.

use crate::error::DittoError;
use std::fmt;

/// Ditto's `AbstractPatternValidator` limit, counted in UTF-16 units as
/// Java's `String.length` does.
const MAX_LENGTH: usize = 256;

/// Why `text` fails Ditto's `NoControlCharacters[NoSlashes]Validator`, if
/// it does. Ditto's "control characters" are `\x00-\x1F` and `\x7F-\xFF`,
/// so Latin-1 letters such as `ä` count too.
pub(crate) fn control_character_reason(text: &str, slashes_allowed: bool) -> Option<&'static str> {
    if text.encode_utf16().count() > MAX_LENGTH {
        return Some("Not allowed to exceed length of 256.");
    }
    let forbidden = |c: char| {
        matches!(c, '\u{0}'..='\u{1F}' | '\u{7F}'..='\u{FF}') || (!slashes_allowed && c == '/')
    };
    if text.is_empty() || text.chars().any(forbidden) {
        return Some(if slashes_allowed {
            "No control characters are allowed."
        } else {
            "Neither slashes nor any control characters are allowed."
        });
    }
    None
}

/// A validated entry label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(String);

impl Label {
    /// Ditto's `Label.of`: the prefixes `imported` and `nsimported` are
    /// kept for entries an import brings in, then slashes and control
    /// characters are refused.
    pub fn parse(text: &str) -> Result<Self, DittoError> {
        if text.starts_with("imported") || text.starts_with("nsimported") {
            return Err(DittoError::label_invalid(text));
        }
        if let Some(reason) = control_character_reason(text, false) {
            return Err(DittoError::policy_entry_invalid(
                format!("The Policy Label {text} is invalid"),
                reason,
            ));
        }
        Ok(Label(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_dittos_rules() {
        let cases: [(&str, Option<&str>); 8] = [
            ("OWNER", None),
            ("my label-1.x:y", None),
            ("imported-x", Some("policies:label.invalid")),
            ("importedFoo", Some("policies:label.invalid")),
            ("nsimported", Some("policies:label.invalid")),
            ("a/b", Some("policies:entry.invalid")),
            ("tab\there", Some("policies:entry.invalid")),
            ("gr\u{fc}n", Some("policies:entry.invalid")),
        ];
        for (text, error) in cases {
            assert_eq!(Label::parse(text).err().map(|e| e.error), error, "{text}");
        }
        let long = "x".repeat(257);
        let error = Label::parse(&long).unwrap_err();
        assert_eq!(error.description.as_deref(), Some("Not allowed to exceed length of 256."));
        let error = Label::parse("a/b").unwrap_err();
        assert_eq!(error.message, "The Policy Label a/b is invalid");
        assert_eq!(
            error.description.as_deref(),
            Some("Neither slashes nor any control characters are allowed.")
        );
    }
}
