//! Parses the input as a route (and as a bare condition); when it parses,
//! evaluates the condition against a fixed message with a JSON payload and
//! the same message with a payload that is not JSON. Nothing may panic, and
//! a parsed route's canonical text must parse back to an equal route, as
//! `Route`'s `Display` promises.
#![no_main]

use ferry_routes::limits::MAX_ROUTE_BYTES;
use ferry_routes::{Body, Condition, Message, Route};
use libfuzzer_sys::fuzz_target;

const PAYLOAD: &str = r#"{"temp": 51.5, "unit": "C", "ok": true, "none": null,
    "list": [10, "x", {"k": "v"}], "nested": {"a": {"b": "deep"}}, "a.b": 1, "name": "Ünïcode"}"#;

fn message(payload: &[u8]) -> Message<'_> {
    Message {
        topic: "plant-1/line/3/temp",
        payload,
        qos: 1,
        client_id: "sensor-7",
        username: Some("alice"),
        content_type: Some("application/json"),
        user_properties: &[("site", "plant-1"), ("site", "plant-2"), ("x-tag", "a")],
    }
}

fn evaluate(condition: &Condition) {
    for payload in [PAYLOAD.as_bytes(), b"not json"] {
        let message = message(payload);
        let body = Body::new(payload);
        assert_eq!(condition.matches(&message), condition.matches_with_body(&message, &body));
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(condition) = Condition::parse("fuzz", text) {
        evaluate(&condition);
    }
    let Ok(route) = Route::parse("fuzz", text) else { return };
    if let Some(condition) = route.condition() {
        evaluate(condition);
    }
    // The canonical form parenthesises everything, so it can outgrow the
    // length limit that the original text was within.
    let canonical = route.to_string();
    if canonical.len() <= MAX_ROUTE_BYTES {
        assert_eq!(Route::parse("fuzz", &canonical).as_ref(), Ok(&route), "{canonical}");
    }
});
