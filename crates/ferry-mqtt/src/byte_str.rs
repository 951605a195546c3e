use bytes::Bytes;
use std::{borrow::Borrow, fmt, ops::Deref};

/// An immutable UTF-8 string that shares its storage with the packet it was
/// decoded from.
///
/// Topics, client ids and property strings arrive inside a `Bytes` frame;
/// copying each into a `String` would cost an allocation per field on the
/// publish path. `ByteStr` keeps a slice of the frame instead, and checks
/// UTF-8 once, at construction.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ByteStr(Bytes);

/// Why bytes are not an MQTT UTF-8 string (MQTT 5 §1.5.4, 3.1.1 §1.5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StrError {
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("string contains U+0000")]
    NullCharacter,
    #[error("string is longer than 65535 bytes")]
    TooLong,
}

impl ByteStr {
    /// Validates `bytes` as an MQTT string: UTF-8, no U+0000, at most 65535 bytes.
    pub fn from_bytes(bytes: Bytes) -> Result<ByteStr, StrError> {
        if bytes.len() > u16::MAX as usize {
            return Err(StrError::TooLong);
        }
        let text = std::str::from_utf8(&bytes).map_err(|_| StrError::InvalidUtf8)?;
        if text.contains('\0') {
            return Err(StrError::NullCharacter);
        }
        Ok(ByteStr(bytes))
    }

    /// Wraps a string literal without copying. Not validated: the caller
    /// vouches that it has no U+0000 and at most 65535 bytes.
    pub const fn from_static(text: &'static str) -> ByteStr {
        ByteStr(Bytes::from_static(text.as_bytes()))
    }

    /// The string, borrowed.
    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor of `ByteStr` either validated `self.0` as
        // UTF-8 (`from_bytes`) or built it from a `&str`/`String` (`From`
        // impls, `from_static`), and `Bytes` is immutable, so the bytes are
        // still valid UTF-8 here. Tested by `tests::as_str_round_trips`.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The UTF-8 bytes, sharing storage with the frame.
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// The UTF-8 bytes, without copying.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

impl Deref for ByteStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for ByteStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// Hashed as its `str`, as `Borrow<str>` requires: a set of `ByteStr` looked
/// up by `&str` must find it. (`Bytes` hashes as a byte slice, length first,
/// which a `str` does not.)
impl std::hash::Hash for ByteStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl AsRef<str> for ByteStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for ByteStr {
    fn from(text: &str) -> ByteStr {
        ByteStr(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl From<String> for ByteStr {
    fn from(text: String) -> ByteStr {
        ByteStr(Bytes::from(text))
    }
}

impl PartialEq<str> for ByteStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ByteStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for ByteStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ByteStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_of_byte_strs_is_found_by_str() {
        let set: std::collections::HashSet<ByteStr> = [ByteStr::from("a/b")].into();
        assert!(set.contains("a/b"));
        assert!(!set.contains("a/c"));
    }

    #[test]
    fn as_str_round_trips() {
        let s = ByteStr::from_bytes(Bytes::from_static("a/ü/€".as_bytes())).unwrap();
        assert_eq!(s.as_str(), "a/ü/€");
        assert_eq!(ByteStr::from("x").as_str(), "x");
        assert_eq!(ByteStr::from(String::from("yz")).as_str(), "yz");
    }

    #[test]
    fn rejects_invalid_strings() {
        assert_eq!(
            ByteStr::from_bytes(Bytes::from_static(&[0xC3, 0x28])),
            Err(StrError::InvalidUtf8)
        );
        assert_eq!(ByteStr::from_bytes(Bytes::from_static(b"a\0b")), Err(StrError::NullCharacter));
        assert_eq!(ByteStr::from_bytes(Bytes::from(vec![b'a'; 65536])), Err(StrError::TooLong));
    }
}
