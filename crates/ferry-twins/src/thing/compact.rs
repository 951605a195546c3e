//! A thing as the cache holds it: its document serialized.
//!
//! Parsed, every JSON object of a document is an `IndexMap` of a few
//! hundred bytes (each entry is 104 bytes, a `Value` 72, each key and
//! string its own allocation), so a small twin took ~1.7 KB in the cache
//! for ~350 bytes of JSON. The cache holds 100,000 twins by default, so
//! it keeps the serialized text instead and each use parses it: about a
//! microsecond for a small twin, against a kilobyte and more per cached
//! twin (measured in docs/benchmarks.md, "Memory per hot twin"). The
//! `_metadata` was already held serialized for the same reason.

use super::{metadata::Metadata, Thing};
use crate::error::DittoError;
use crate::id::ThingId;
use crate::policy::Timestamp;
use serde_json::{Map, Value};

#[derive(Debug)]
pub struct CompactThing {
    id: ThingId,
    document: Box<str>,
    revision: u64,
    created: Timestamp,
    modified: Timestamp,
    /// `_metadata` serialized (`""` when empty).
    metadata: Box<str>,
}

impl Thing {
    /// The thing in the cache's form.
    pub fn to_compact(&self) -> CompactThing {
        CompactThing {
            id: self.id.clone(),
            // A map of JSON values always serializes.
            document: serde_json::to_string(&self.document).unwrap_or_default().into_boxed_str(),
            revision: self.revision,
            created: self.created,
            modified: self.modified,
            metadata: self.metadata.serialized(),
        }
    }

    /// The thing back from the cache's form.
    pub fn from_compact(compact: &CompactThing) -> Result<Thing, DittoError> {
        let document: Map<String, Value> = serde_json::from_str(&compact.document)
            .map_err(|error| DittoError::json_invalid(format!("a cached thing: {error}")))?;
        Ok(Thing {
            id: compact.id.clone(),
            document,
            revision: compact.revision,
            created: compact.created,
            modified: compact.modified,
            metadata: Metadata::from_serialized(compact.metadata.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_thing_comes_back_from_its_compact_form_as_it_was() {
        let stored = json!({
            "thingId": "org.acme:s1",
            "policyId": "org.acme:s1",
            "attributes": {"b": 1, "a": [true, null, "x"]},
            "features": {"f": {"properties": {"v": 2.5}, "desiredProperties": {}}},
            "_revision": 7,
            "_created": "2026-11-25T10:00:00.000001Z",
            "_modified": "2026-11-26T10:00:00.000002Z",
            "_metadata": {"attributes": {"b": {"_modified": "2026-11-26T10:00:00.000002Z"}}},
        });
        let thing = Thing::from_stored(&stored).unwrap();
        let back = Thing::from_compact(&thing.to_compact()).unwrap();
        assert_eq!(back, thing);
        assert_eq!(back.to_stored(), stored, "the keys keep their order");
    }
}
