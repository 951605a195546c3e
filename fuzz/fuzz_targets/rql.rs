//! Parses the input as an RQL filter, and as a search's filter and
//! options together; every filter that parses is evaluated against a
//! fixed thing under both of Ditto's semantics, with placeholders resolved
//! and not. Nothing may panic, and a filter's canonical text must parse
//! back to an equal filter, as `Filter`'s `Display` promises.
#![no_main]

use ferry_twins::rql::limits::MAX_INPUT_BYTES;
use ferry_twins::rql::{
    Filter, NoPlaceholders, Placeholders, Scope, SearchQuery, Semantics, TimePlaceholders,
};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use std::time::{Duration, UNIX_EPOCH};

const THING: &str = r#"{"thingId": "org.eclipse:thing-1", "policyId": "org.eclipse:p", "_revision": 7,
    "_modified": "2024-06-01T12:00:00Z", "_metadata": {"attributes": {"a": {"by": "me"}}},
    "attributes": {"a": 5, "b": "5", "c": [1, "x", {"k": "v"}, [2, [null]]], "d": {"e": {"f": true}},
        "g": [{"h": 1}, {"h": [2, 3]}, 4], "s": "Äpfel\nzwei", "n": null, "u": 18446744073709551615, "z": 1.5e-7},
    "features": {"x": {"definition": ["d:1"], "properties": {"y": 21.5}, "desiredProperties": {}},
        "*": {"properties": {"y": "star"}}, "e": {}}}"#;

/// Answers `topic:action` as an event filter's placeholder would.
struct EventPlaceholders(TimePlaceholders);

impl Placeholders for EventPlaceholders {
    fn resolve(&self, prefix: &str, name: &str) -> Option<&str> {
        match (prefix, name) {
            ("topic", "action") => Some("modified"),
            _ => self.0.resolve(prefix, name),
        }
    }
}

const EVENT_SCOPE: Scope<'static> =
    Scope { placeholder_fields: &["topic:action", "topic:channel"] };

fn evaluate(filter: &Filter) {
    static THING_JSON: OnceLock<serde_json::Value> = OnceLock::new();
    let thing =
        THING_JSON.get_or_init(|| serde_json::from_str(THING).expect("the fixed thing is JSON"));
    let time = EventPlaceholders(TimePlaceholders::at(
        UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
    ));
    for semantics in [Semantics::Things, Semantics::Search] {
        filter.matches(thing, semantics, &NoPlaceholders);
        filter.matches(thing, semantics, &time);
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(query) = SearchQuery::parse(Some(text), Some(text)) {
        assert!(query.options.page_size() <= 200);
    }
    for scope in [Scope::THINGS, EVENT_SCOPE] {
        let Ok(filter) = Filter::parse(text, scope) else { continue };
        evaluate(&filter);
        // The canonical form escapes what the input may have written raw,
        // so it can outgrow the length limit the input was within.
        let canonical = filter.to_string();
        if canonical.len() <= MAX_INPUT_BYTES {
            assert_eq!(Filter::parse(&canonical, scope).as_ref(), Ok(&filter), "{canonical}");
        }
    }
});
