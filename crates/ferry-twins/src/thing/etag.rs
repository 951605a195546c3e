//! Entity tags, as Ditto's `EntityTagBuilder` makes them.
//!
//! The thing itself is tagged with its revision, `"rev:42"`. A sub-resource
//! is tagged with a hash of its value, `"hash:…"`: Ditto prints the Java
//! `hashCode()` of its model object in hex. Clients only compare these
//! tags, never compute them, so Ferry does not imitate Java's hash codes;
//! it uses a 64-bit FNV-1a hash of the value's structure, in which an
//! object's key order does not count (as in Java's map hash codes), so
//! equal JSON always gives an equal tag, and a 64-bit tag makes a wrong
//! `If-Match` hit less likely than Ditto's 32 bits.

use serde_json::Value;
use std::fmt;

/// A strong entity tag, quotes included, as it goes into an `ETag` header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntityTag(String);

impl EntityTag {
    /// The tag of a whole thing (or policy) at a revision.
    pub fn revision(revision: u64) -> Self {
        EntityTag(format!("\"rev:{revision}\""))
    }

    /// The tag of a sub-resource's value.
    pub fn of_value(value: &Value) -> Self {
        EntityTag(format!("\"hash:{:x}\"", structural_hash(value)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EntityTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// A type tag first, so that `"1"`, `1` and `[1]` differ.
fn structural_hash(value: &Value) -> u64 {
    match value {
        Value::Null => fnv(FNV_OFFSET, b"n"),
        Value::Bool(b) => fnv(FNV_OFFSET, if *b { b"t" } else { b"f" }),
        Value::Number(n) => fnv(fnv(FNV_OFFSET, b"#"), n.to_string().as_bytes()),
        Value::String(s) => fnv(fnv(FNV_OFFSET, b"s"), s.as_bytes()),
        Value::Array(items) => items.iter().fold(fnv(FNV_OFFSET, b"["), |hash, item| {
            fnv(hash, &structural_hash(item).to_le_bytes())
        }),
        Value::Object(map) => {
            let entries = map.iter().fold(0u64, |sum, (key, inner)| {
                let entry =
                    fnv(fnv(FNV_OFFSET, key.as_bytes()), &structural_hash(inner).to_le_bytes());
                sum.wrapping_add(entry)
            });
            fnv(fnv(FNV_OFFSET, b"{"), &entries.to_le_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn revision_tags() {
        assert_eq!(EntityTag::revision(42).as_str(), "\"rev:42\"");
    }

    #[test]
    fn hash_tags_follow_the_value_not_its_key_order() {
        let a = EntityTag::of_value(&json!({"x": 1, "y": [1, 2]}));
        let b = EntityTag::of_value(&json!({"y": [1, 2], "x": 1}));
        assert_eq!(a, b);
        assert!(a.as_str().starts_with("\"hash:") && a.as_str().ends_with('"'));
        let distinct = [
            json!(1),
            json!("1"),
            json!([1]),
            json!({"x": 2}),
            json!(null),
            json!([2, 1]),
            json!([1, 2]),
        ];
        let tags: std::collections::HashSet<_> = distinct.iter().map(EntityTag::of_value).collect();
        assert_eq!(tags.len(), distinct.len());
    }
}
