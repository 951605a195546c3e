//! Evaluating conditions: each operator, function and reference, and the
//! three-valued logic around undefined values.

use ferry_routes::limits::MAX_BODY_BYTES;
use ferry_routes::{Body, Condition, Message};

const PAYLOAD: &str = r#"{
    "temp": 51.5, "unit": "C", "ok": true, "none": null, "n": 5, "big": 1e3, "neg": -2.5,
    "list": [10, "x", {"k": "v"}], "nested": {"a": {"b": "deep"}}, "a.b": 1,
    "name": "Ünïcode", "empty": ""
}"#;

const PROPERTIES: &[(&str, &str)] = &[("site", "plant-1"), ("site", "plant-2"), ("x-tag", "a")];

fn message(payload: &[u8]) -> Message<'_> {
    Message {
        topic: "plant-1/line/3/temp",
        payload,
        qos: 1,
        client_id: "sensor-7",
        username: Some("alice"),
        content_type: Some("application/json"),
        user_properties: PROPERTIES,
    }
}

fn check(payload: &[u8], cases: &[(&str, bool)]) {
    for &(text, expected) in cases {
        let condition = Condition::parse("r", text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(condition.matches(&message(payload)), expected, "{text}");
    }
}

#[test]
fn comparisons() {
    check(
        PAYLOAD.as_bytes(),
        &[
            ("$body.temp > 50", true),
            ("$body.temp > 51.5", false),
            ("$body.temp >= 51.5", true),
            ("$body.temp < 60", true),
            ("$body.temp <= 51.4", false),
            ("$body.temp = 51.5", true),
            ("$body.temp != 51.5", false),
            ("$body.temp <> 51", true),
            ("$body.big = 1e3", true),
            ("$body.big = 1000", true),
            ("$body.neg = -2.5", true),
            ("$body.neg < -2", true),
            // Strings: case-sensitive, ordered by code point.
            ("$body.unit = 'C'", true),
            ("$body.unit = 'c'", false),
            ("$body.unit < 'D'", true),
            ("'B' < 'a'", true),
            ("'' < 'a'", true),
            ("$body.ok = true", true),
            ("$body.ok != false", true),
            ("$body.none = null", true),
            ("$body.none != null", false),
            // No coercion: different types are unequal and unordered.
            ("$body.n = '5'", false),
            ("$body.n != '5'", true),
            ("$body.n < '6'", false),
            ("NOT ($body.n < '6')", true),
            ("$body.ok = 'true'", false),
            ("$body.none = 0", false),
            ("true < false", false),
            ("true >= true", false),
            // Objects and arrays compare structurally.
            ("$body.nested = $body.nested", true),
            ("$body.nested != $body.list", true),
            ("$body.nested < $body.nested", false),
        ],
    );
}

#[test]
fn three_valued_logic() {
    check(
        PAYLOAD.as_bytes(),
        &[
            ("$body.missing = 1", false),
            ("NOT ($body.missing = 1)", false),
            ("$body.missing != 1", false),
            ("$body.missing = null", false),
            ("NOT ($body.missing = null)", false),
            ("IS_DEFINED($body.missing)", false),
            ("NOT IS_DEFINED($body.missing)", true),
            ("IS_DEFINED($body.none)", true),
            // undefined OR true = true; undefined AND true = undefined.
            ("$body.missing = 1 OR $body.n = 5", true),
            ("$body.missing = 1 AND $body.n = 5", false),
            ("NOT ($body.missing = 1 AND $body.n = 5)", false),
            // undefined AND false = false; undefined OR false = undefined.
            ("NOT ($body.missing = 1 AND $body.n = 6)", true),
            ("NOT ($body.missing = 1 OR $body.n = 6)", false),
            ("NOT ($body.missing = 1 OR $body.n = 5)", false),
            // Non-booleans count as undefined in logic and never match.
            ("$body.n AND true", false),
            ("NOT ($body.n AND true)", false),
            ("$body.n OR true", true),
            ("NOT $body.n", false),
            ("$body.ok", true),
            ("NOT $body.ok", false),
            ("true", true),
            ("false", false),
            ("null", false),
            ("1", false),
            ("'true'", false),
            ("$body.n = 5 AND $body.ok AND $qos = 1", true),
            ("$body.n = 6 OR false OR $qos = 1", true),
        ],
    );
}

#[test]
fn references() {
    check(
        PAYLOAD.as_bytes(),
        &[
            ("$body.nested.a.b = 'deep'", true),
            ("$body.list[0] = 10", true),
            ("$body.list[1] = 'x'", true),
            ("$body.list[2].k = 'v'", true),
            ("IS_DEFINED($body.list[3])", false),
            ("$body['a.b'] = 1", true),
            ("IS_DEFINED($body.a.b)", false),
            ("IS_DEFINED($body.list.k)", false),
            ("IS_DEFINED($body.unit[0])", false),
            ("IS_DEFINED($body)", true),
            // Topic levels count from 0.
            ("$topic = 'plant-1/line/3/temp'", true),
            ("$topic[0] = 'plant-1'", true),
            ("$topic[2] = '3'", true),
            ("$topic[3] = 'temp'", true),
            ("IS_DEFINED($topic[4])", false),
            // The first user property of a name.
            ("$user.site = 'plant-1'", true),
            ("$user.site = 'plant-2'", false),
            ("$user.x-tag = 'a'", true),
            ("$user['x-tag'] = 'a'", true),
            ("$user.Site = 'plant-1'", false),
            ("IS_DEFINED($user.nope)", false),
            ("$contentType = 'application/json'", true),
            ("$qos = 1", true),
            ("$qos >= 1", true),
            ("$qos = '1'", false),
            ("$clientId = 'sensor-7'", true),
            ("$username = 'alice'", true),
            ("$user.site = $topic[0]", true),
        ],
    );
    let bare = Message { topic: "a//b", client_id: "c", ..Message::default() };
    for (text, expected) in [
        ("IS_DEFINED($username)", false),
        ("IS_DEFINED($contentType)", false),
        ("$topic[1] = ''", true),
        ("$qos = 0", true),
    ] {
        assert_eq!(Condition::parse("r", text).unwrap().matches(&bare), expected, "{text}");
    }
}

#[test]
fn functions() {
    check(
        PAYLOAD.as_bytes(),
        &[
            ("STARTS_WITH($topic, 'plant-')", true),
            ("STARTS_WITH($topic, 'line')", false),
            ("ENDS_WITH($topic, '/temp')", true),
            ("CONTAINS($topic, 'line')", true),
            ("CONTAINS($topic, 'LINE')", false),
            ("CONTAINS($topic, '')", true),
            ("LOWER($body.unit) = 'c'", true),
            ("UPPER('abc') = 'ABC'", true),
            ("LOWER(UPPER($body.name)) = 'ünïcode'", true),
            ("LENGTH($body.name) = 7", true),
            ("LENGTH($body.empty) = 0", true),
            ("LENGTH($body.list) = 3", true),
            ("IS_DEFINED(LENGTH($body.n))", false),
            ("IS_DEFINED(LOWER($body.n))", false),
            ("STARTS_WITH($body.n, '5')", false),
            ("NOT STARTS_WITH($body.n, '5')", false),
            ("NOT CONTAINS($body.missing, 'a')", false),
            ("IS_DEFINED(IS_DEFINED($body.missing))", true),
            ("IS_DEFINED(null)", true),
        ],
    );
}

#[test]
fn a_payload_that_is_not_json_makes_body_undefined() {
    let big = format!("\"{}\"", "a".repeat(MAX_BODY_BYTES - 2));
    let too_big = format!("\"{}\"", "a".repeat(MAX_BODY_BYTES - 1));
    for payload in [&b"not json"[..], b"", b"{\"a\": 1", b"\xff\xfe", too_big.as_bytes()] {
        check(
            payload,
            &[
                ("IS_DEFINED($body)", false),
                ("NOT IS_DEFINED($body.a)", true),
                ("$body = 'not json'", false),
                ("NOT ($body.a = 1)", false),
                ("$topic[0] = 'plant-1'", true),
                ("$body.a = 1 OR $qos = 1", true),
            ],
        );
    }
    check(big.as_bytes(), &[("LENGTH($body) = 262142", true)]);
    check(b"5", &[("$body = 5", true)]);
    check(b" [1, 2] ", &[("$body[1] = 2", true)]);
}

#[test]
fn one_body_serves_every_route_of_a_message() {
    let message = message(PAYLOAD.as_bytes());
    let body = Body::new(message.payload);
    let hot = Condition::parse("hot", "$body.temp > 50").unwrap();
    let celsius = Condition::parse("celsius", "$body.unit = 'C'").unwrap();
    let cold = Condition::parse("cold", "$body.temp < 0").unwrap();
    assert!(hot.matches_with_body(&message, &body));
    assert!(celsius.matches_with_body(&message, &body));
    assert!(!cold.matches_with_body(&message, &body));
}
