//! JSON pointers as Ditto reads them: `/features/temp/properties/value`.
//!
//! Ditto's `JsonPointer.ofParsed` is looser than RFC 6901 in two ways its
//! users rely on: the leading slash may be left out, and a trailing slash
//! is ignored; two slashes in a row are an error. Only `~0` is unescaped
//! (to `~`): Ditto keys cannot hold a `/`, so `~1` stays as written.

use crate::error::DittoError;
use std::fmt;

/// The levels of a pointer; the empty pointer is the root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JsonPointer {
    levels: Vec<String>,
}

impl JsonPointer {
    pub fn root() -> Self {
        JsonPointer::default()
    }

    pub fn parse(text: &str) -> Result<Self, DittoError> {
        if text.contains("//") {
            return Err(DittoError::json_pointer_invalid(text));
        }
        let levels = text
            .split('/')
            .filter(|level| !level.is_empty())
            .map(|level| level.replace("~0", "~"))
            .collect();
        Ok(JsonPointer { levels })
    }

    pub fn from_levels<I, S>(levels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        JsonPointer { levels: levels.into_iter().map(Into::into).collect() }
    }

    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    pub fn is_root(&self) -> bool {
        self.levels.is_empty()
    }

    pub fn first(&self) -> Option<&str> {
        self.levels.first().map(String::as_str)
    }

    pub fn last(&self) -> Option<&str> {
        self.levels.last().map(String::as_str)
    }

    /// The pointer without its first `n` levels.
    pub fn skip(&self, n: usize) -> JsonPointer {
        JsonPointer { levels: self.levels.iter().skip(n).cloned().collect() }
    }

    /// The pointer without its last level; the root's parent is the root.
    pub fn parent(&self) -> JsonPointer {
        let keep = self.levels.len().saturating_sub(1);
        JsonPointer { levels: self.levels[..keep].to_vec() }
    }

    pub fn join(&self, other: &JsonPointer) -> JsonPointer {
        let mut levels = self.levels.clone();
        levels.extend(other.levels.iter().cloned());
        JsonPointer { levels }
    }

    pub fn child(&self, level: impl Into<String>) -> JsonPointer {
        let mut levels = self.levels.clone();
        levels.push(level.into());
        JsonPointer { levels }
    }

    /// Whether `self` is `other` or lies beneath it.
    pub fn starts_with(&self, other: &JsonPointer) -> bool {
        self.levels.starts_with(&other.levels)
    }

    /// The value at this pointer inside `value`, if every level exists.
    /// Levels index objects only, as in Ditto, where arrays are leaves.
    pub fn get<'a>(&self, value: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        self.levels.iter().try_fold(value, |inner, level| inner.as_object()?.get(level))
    }
}

impl fmt::Display for JsonPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.levels.is_empty() {
            return f.write_str("/");
        }
        for level in &self.levels {
            write!(f, "/{}", level.replace('~', "~0"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_as_ditto_does() {
        let cases = [
            ("", vec![]),
            ("/", vec![]),
            ("a", vec!["a"]),
            ("/a/b", vec!["a", "b"]),
            ("a/b/", vec!["a", "b"]),
            ("/a~0b/c~1d", vec!["a~b", "c~1d"]),
        ];
        for (text, levels) in cases {
            assert_eq!(JsonPointer::parse(text).unwrap().levels(), levels, "{text}");
        }
    }

    #[test]
    fn two_slashes_in_a_row_are_refused() {
        let error = JsonPointer::parse("/a//b").unwrap_err();
        assert_eq!(error.error, "json.pointer.invalid");
        assert_eq!(error.status, 400);
    }

    #[test]
    fn displays_with_a_leading_slash_and_escaped_tildes() {
        assert_eq!(JsonPointer::parse("a~0b/c").unwrap().to_string(), "/a~0b/c");
        assert_eq!(JsonPointer::root().to_string(), "/");
    }

    #[test]
    fn gets_through_objects_only() {
        let value = json!({"a": {"b": [1, 2]}});
        assert_eq!(JsonPointer::parse("a/b").unwrap().get(&value), Some(&json!([1, 2])));
        assert_eq!(JsonPointer::parse("a/b/0").unwrap().get(&value), None);
        assert_eq!(JsonPointer::root().get(&value), Some(&value));
    }

    #[test]
    fn relations() {
        let p = JsonPointer::parse("/features/x/properties").unwrap();
        assert!(p.starts_with(&JsonPointer::parse("/features").unwrap()));
        assert!(!p.starts_with(&JsonPointer::parse("/feat").unwrap()));
        assert_eq!(p.parent().to_string(), "/features/x");
        assert_eq!(p.skip(2).to_string(), "/properties");
        assert_eq!(p.child("a").last(), Some("a"));
    }
}
