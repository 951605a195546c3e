//! Entity ids and JSON keys as Ditto accepts them.
//!
//! A thing or policy id is `namespace:name` (Ditto's `RegexPatterns.ID_REGEX`):
//! the namespace is empty or dotted Java-package style (`[a-zA-Z]\w*` segments
//! joined by `.` or `-`), the name is at least one character that is neither
//! a `/` nor in U+0000–U+001F or U+007F–U+00FF, and the whole id is at most
//! 256 UTF-16 units long (`AbstractPatternValidator.MAX_LENGTH`, counted as
//! Java's `String.length()` counts). The namespace holds no `:`, so the first
//! colon is the delimiter and the name may hold more.
//!
//! Feature ids and the keys of attributes and properties follow the same
//! name rule (`NoControlCharactersNoSlashesValidator`), refused with
//! `json.key.invalid`. That the Latin-1 range U+0080–U+00FF is refused too
//! (`ä`, `ß`, `é` …) is Ditto's choice, kept so that ids and keys valid here
//! are valid there.

use crate::error::DittoError;
use std::fmt;

/// The longest id or key Ditto accepts, in UTF-16 units.
pub const ID_LENGTH_MAX: usize = 256;

/// The namespace of a thing created by `POST /things` without
/// `?namespace=`: Ditto's `ThingId.DEFAULT_NAMESPACE`, the empty one, so the
/// generated id reads `:<uuid>`.
pub const DEFAULT_NAMESPACE: &str = "";

const REASON_TOO_LONG: &str = "Not allowed to exceed length of 256.";
const REASON_BAD_CHARACTERS: &str = "Neither slashes nor any control characters are allowed.";

/// What Ditto's `CONTROL_CHARS` class holds: C0 controls, DEL, and the whole
/// Latin-1 supplement.
fn is_refused_char(c: char) -> bool {
    matches!(c as u32, 0x00..=0x1F | 0x7F..=0xFF)
}

/// Java's `String.length()`: UTF-16 units, so a character outside the BMP
/// counts twice.
pub(crate) fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

fn is_valid_namespace(namespace: &str) -> bool {
    if namespace.is_empty() {
        return true;
    }
    namespace.split(['.', '-']).all(|segment| {
        let mut chars = segment.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c == '/' || is_refused_char(c))
}

/// Why a key is refused, in the words Ditto's validator uses, or `None`
/// when it is fine.
fn key_problem(key: &str) -> Option<&'static str> {
    if utf16_len(key) > ID_LENGTH_MAX {
        Some(REASON_TOO_LONG)
    } else if !is_valid_name(key) {
        Some(REASON_BAD_CHARACTERS)
    } else {
        None
    }
}

/// Checks one attribute or property key, or a feature id (Ditto's
/// `JsonKeyValidator` and `ImmutableFeature`'s id check).
pub fn validate_key(key: &str) -> Result<(), DittoError> {
    match key_problem(key) {
        Some(reason) => Err(DittoError::json_key_invalid(key, reason)),
        None => Ok(()),
    }
}

/// Checks every key of an object, recursing into objects but not arrays,
/// as Ditto's `JsonKeyValidator.validateJsonKeys` does.
pub fn validate_keys(value: &serde_json::Value) -> Result<(), DittoError> {
    if let serde_json::Value::Object(map) = value {
        for (key, inner) in map {
            validate_key(key)?;
            validate_keys(inner)?;
        }
    }
    Ok(())
}

/// A parsed `namespace:name`; the two typed ids wrap it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct NamespacedId {
    text: String,
    colon: usize,
}

impl NamespacedId {
    fn parse(text: &str) -> Option<Self> {
        if utf16_len(text) > ID_LENGTH_MAX {
            return None;
        }
        let colon = text.find(':')?;
        let valid = is_valid_namespace(&text[..colon]) && is_valid_name(&text[colon + 1..]);
        valid.then(|| NamespacedId { text: text.to_string(), colon })
    }

    fn namespace(&self) -> &str {
        &self.text[..self.colon]
    }

    fn name(&self) -> &str {
        &self.text[self.colon + 1..]
    }
}

macro_rules! namespaced_id {
    ($(#[$doc:meta])* $ty:ident, $invalid:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $ty(NamespacedId);

        impl $ty {
            pub fn parse(text: &str) -> Result<Self, DittoError> {
                NamespacedId::parse(text)
                    .map($ty)
                    .ok_or_else(|| DittoError::$invalid(text))
            }

            /// The id from its two parts, checked as a whole as Ditto's
            /// `of(namespace, name)` does.
            pub fn from_parts(namespace: &str, name: &str) -> Result<Self, DittoError> {
                $ty::parse(&format!("{namespace}:{name}"))
            }

            pub fn namespace(&self) -> &str {
                self.0.namespace()
            }

            pub fn name(&self) -> &str {
                self.0.name()
            }

            pub fn as_str(&self) -> &str {
                &self.0.text
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0.text)
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0.text)
            }
        }
    };
}

namespaced_id!(
    /// A thing's id, `namespace:name`.
    ThingId,
    thing_id_invalid
);

namespaced_id!(
    /// A policy's id, `namespace:name`, under the same rules as a thing's.
    PolicyId,
    policy_id_invalid
);

impl ThingId {
    /// A new id with a random name, for `POST /things`: a version 4 UUID
    /// in `namespace`, or in [`DEFAULT_NAMESPACE`] when none is given
    /// (Ditto's `ThingId.generateRandom`). A namespace that is not valid is
    /// refused with `things:id.invalid` for the whole id.
    pub fn generate(namespace: Option<&str>) -> Result<Self, DittoError> {
        ThingId::from_parts(namespace.unwrap_or(DEFAULT_NAMESPACE), &random_uuid())
    }
}

/// A version 4 UUID in its canonical lowercase form.
pub(crate) fn random_uuid() -> String {
    let mut bytes = [0u8; 16];
    // Not user input: the operating system's random source failing means
    // the machine cannot create anything safely, and there is no answer
    // Ditto gives for it.
    getrandom::fill(&mut bytes).expect("the operating system provides random bytes");
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

const ID_HREF: &str = "https://www.eclipse.dev/ditto/basic-namespaces-and-names.html#namespaced-id";
const ID_DESCRIPTION: &str =
    "It must conform to the namespaced entity ID notation (see Ditto documentation)";

impl DittoError {
    /// Ditto's `ThingIdInvalidException` (`things:id.invalid`, 400).
    pub fn thing_id_invalid(id: &str) -> Self {
        DittoError::new(
            400,
            "things:id.invalid",
            format!("Thing ID '{id}' is not valid!"),
            ID_DESCRIPTION.to_string(),
        )
        .with_href(ID_HREF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // The cases of Ditto's ThingIdTest, PolicyIdTest and
    // AbstractNamespacedEntityIdTest.
    #[test]
    fn valid_ids() {
        let long_name = "a".repeat(ID_LENGTH_MAX - "ns:".len());
        let valid = [
            "ns:name",
            ":name",
            "org.eclipse.ditto:thing",
            "org.eclipse.ditto_42:thing",
            "org-eclipse-ditto:thing",
            "org.eclipse-ditto.x:thing",
            "a:b:c",
            "ns:name with spaces",
            "ns:%2F",
            "ns:😀",
            "ns:日本",
            "ns:!#$%&'()*+,;=?@[]{}~",
        ];
        for id in valid {
            let parsed = ThingId::parse(id).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(parsed.as_str(), id);
        }
        ThingId::parse(&format!("ns:{long_name}")).unwrap();
        let parsed = ThingId::parse("org.acme:a:b").unwrap();
        assert_eq!((parsed.namespace(), parsed.name()), ("org.acme", "a:b"));
    }

    #[test]
    fn invalid_ids() {
        let too_long = format!("ns:{}", "a".repeat(ID_LENGTH_MAX - 2));
        // A character outside the BMP counts twice, as in Java.
        let too_long_utf16 = format!("ns:{}😀", "a".repeat(ID_LENGTH_MAX - 4));
        let invalid = [
            "",
            "ns",
            "ns:",
            ":",
            "ns:a/b",
            "1ns:name",
            "_ns:name",
            "ns.:name",
            ".ns:name",
            "ns..x:name",
            "ns.1x:name",
            "n$s:name",
            "ns:nä",
            "ns:ß",
            "ns:a\u{0}",
            "ns:tab\there",
            "ns:\u{7f}",
            too_long.as_str(),
            too_long_utf16.as_str(),
        ];
        for id in invalid {
            let error = ThingId::parse(id).unwrap_err();
            assert_eq!(error.error, "things:id.invalid", "{id}");
            assert_eq!(error.status, 400);
            assert_eq!(error.message, format!("Thing ID '{id}' is not valid!"));
        }
    }

    // RegexPatternsTest's tables, names and namespaces crossed as Ditto's
    // test crosses them.
    #[test]
    fn dittos_regex_pattern_tables() {
        let invalid_names = [
            "/", "//", "/abc", "abc/", "//abc", "abc//", "abc/abc", "abc//abc", "§", "°", "´",
            "\t", "\n", "3°C", "´a", "§1", "foo/bar",
        ];
        let valid_names = [
            "!\"$%&()=?`*+~'#_-:.;,|<>\\{}[]^",
            " ",
            "        ",
            "a b c",
            "a",
            "a!",
            "$a",
            "&a",
            "?a",
            "a.:b?c(de)-f%g\"h\"\\jk|lm#p",
            "\"a\"",
            "{\"property\":123}",
            "foo%3A",
            "$foo",
        ];
        let invalid_namespaces = [
            "org.eclipse.",
            ".org.eclipse",
            "_org.eclipse",
            "org._eclipse",
            "1org.eclipse",
            "org.1eclipse",
            "org.ec lipse",
            "org.",
            ".org",
            "$test",
            "-foo",
            "foo.-bar",
            "foo--bar",
        ];
        let valid_namespaces =
            ["", "ditto.eclipseprojects.io", "com.google", "Foo.bar_122_", "foo-bar.io"];
        for namespace in valid_namespaces {
            for name in valid_names {
                assert!(ThingId::from_parts(namespace, name).is_ok(), "{namespace}:{name}");
            }
            for name in invalid_names {
                assert!(ThingId::from_parts(namespace, name).is_err(), "{namespace}:{name}");
            }
        }
        for namespace in invalid_namespaces {
            assert!(ThingId::from_parts(namespace, "a").is_err(), "{namespace}");
        }
        for name in valid_names {
            validate_key(name).unwrap();
        }
        for name in invalid_names {
            assert!(validate_key(name).is_err(), "{name}");
        }
    }

    #[test]
    fn policy_ids_share_the_rules_and_have_their_own_error() {
        assert!(PolicyId::parse("org.acme:p1").is_ok());
        let error = PolicyId::parse("no-colon").unwrap_err();
        assert_eq!(error.error, "policies:id.invalid");
        assert_eq!(error.message, "Policy ID 'no-colon' is not valid!");
        assert_eq!(
            error.description.as_deref(),
            Some("It must conform to the namespaced entity ID notation (see Ditto documentation)")
        );
        assert_eq!(error.href, Some(ID_HREF));
    }

    #[test]
    fn generated_ids_are_uuids_in_the_default_or_given_namespace() {
        let id = ThingId::generate(None).unwrap();
        assert_eq!(id.namespace(), "");
        assert!(id.as_str().starts_with(':'));
        let name = id.name();
        assert_eq!(name.len(), 36);
        assert_eq!(&name[14..15], "4", "version 4");
        assert!(matches!(&name[19..20], "8" | "9" | "a" | "b"), "RFC 4122 variant");
        assert_ne!(ThingId::generate(None).unwrap(), id);

        assert_eq!(ThingId::generate(Some("org.acme")).unwrap().namespace(), "org.acme");
        let error = ThingId::generate(Some("9bad")).unwrap_err();
        assert_eq!(error.error, "things:id.invalid");
    }

    #[test]
    fn keys() {
        for key in ["a", "a b", "x.y", "_private", "*", "😀", "~"] {
            validate_key(key).unwrap();
        }
        let error = validate_key("a/b").unwrap_err();
        assert_eq!(error.error, "json.key.invalid");
        assert_eq!(error.message, "The JSON key <a/b> is invalid!");
        assert_eq!(error.description.as_deref(), Some(REASON_BAD_CHARACTERS));
        assert!(validate_key("").is_err());
        assert!(validate_key("ä").is_err());
        assert!(validate_key("\n").is_err());
        let long = "k".repeat(ID_LENGTH_MAX + 1);
        assert_eq!(validate_key(&long).unwrap_err().description.as_deref(), Some(REASON_TOO_LONG));
    }

    #[test]
    fn keys_are_checked_through_objects_but_not_arrays() {
        validate_keys(&json!({"a": {"b": [{"c/d": 1}]}})).unwrap();
        let error = validate_keys(&json!({"a": {"b\u{1}": 1}})).unwrap_err();
        assert_eq!(error.error, "json.key.invalid");
    }
}
