//! The size limit of a thing (Ditto's `ditto.limits.things.max-size`).
//!
//! Ditto refuses a change whose resulting thing, written as compact JSON,
//! is longer than the limit, 100 KiB (102 400) by default, and measures it
//! as Java's `String.length()` of that JSON: UTF-16 units, not bytes
//! (`ThingCommandSizeValidator`, called by every modifying strategy). A
//! limit of zero switches the check off, as Ditto's `-1` does. Ferry
//! measures the user document without the housekeeping fields; Ditto's
//! strategies mostly do the same (`thing.toJson()` leaves hidden fields
//! out), so the thresholds agree to within the few bytes Ditto's own
//! estimates add.
//!
//! There are no separate limits for attributes or features in Ditto: each
//! write is measured as the whole thing it leaves behind.

use crate::error::DittoError;
use serde_json::{Map, Value};

/// Ditto's `DEFAULT_ENTITY_MAX_SIZE`.
pub const DEFAULT_THING_SIZE_MAX_BYTES: u64 = 100 * 1024;

/// The limits a thing is written under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThingLimits {
    /// The longest a thing's JSON may be, in UTF-16 units; 0 for no limit.
    pub size_max_bytes: u64,
}

impl Default for ThingLimits {
    fn default() -> Self {
        ThingLimits { size_max_bytes: DEFAULT_THING_SIZE_MAX_BYTES }
    }
}

impl ThingLimits {
    /// Refuses a document above the limit with `things:thing.toolarge`.
    pub fn check(&self, document: &Map<String, Value>) -> Result<(), DittoError> {
        if self.size_max_bytes == 0 {
            return Ok(());
        }
        let size = json_size(document)?;
        if size > self.size_max_bytes {
            return Err(DittoError::thing_too_large(size, self.size_max_bytes));
        }
        Ok(())
    }
}

/// The length of `document`'s compact JSON in UTF-16 units, counted as it
/// is written, so measuring allocates nothing.
pub fn json_size(document: &Map<String, Value>) -> Result<u64, DittoError> {
    let mut counter = Utf16Counter(0);
    serde_json::to_writer(&mut counter, document).map_err(DittoError::json_invalid)?;
    Ok(counter.0)
}

/// Counts UTF-16 units of the UTF-8 written to it: one per character
/// start, one more for a four-byte character (a surrogate pair in Java).
struct Utf16Counter(u64);

impl std::io::Write for Utf16Counter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        for &byte in bytes {
            if byte & 0xC0 != 0x80 {
                self.0 += 1;
            }
            if byte >= 0xF0 {
                self.0 += 1;
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn measures_utf16_units_of_compact_json() {
        assert_eq!(json_size(&map(json!({"a": 1}))).unwrap(), 7);
        // é is two bytes in UTF-8 and one unit in UTF-16; 😀 four and two.
        assert_eq!(
            json_size(&map(json!({"a": "é😀"}))).unwrap(),
            r#"{"a":""}"#.len() as u64 + 1 + 2
        );
    }

    #[test]
    fn refuses_above_the_limit_only() {
        let limits = ThingLimits { size_max_bytes: 7 };
        limits.check(&map(json!({"a": 1}))).unwrap();
        let error = limits.check(&map(json!({"a": 10}))).unwrap_err();
        assert_eq!(error.error, "things:thing.toolarge");
        assert_eq!(error.status, 413);
        ThingLimits { size_max_bytes: 0 }.check(&map(json!({"a": "x".repeat(200_000)}))).unwrap();
        assert_eq!(ThingLimits::default().size_max_bytes, 102_400);
    }
}
