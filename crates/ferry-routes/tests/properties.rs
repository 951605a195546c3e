//! Properties: the parser never panics, whatever it is given, and the
//! canonical text of a parsed route parses back to the same route.

use ferry_routes::{Condition, Message, Route};
use proptest::prelude::*;

const PAYLOAD: &[u8] = br#"{"a": 1, "b": {"c": [true, null, "x"]}, "s": "Text", "n": -2.5}"#;

fn message() -> Message<'static> {
    Message {
        topic: "a/b/c",
        payload: PAYLOAD,
        qos: 1,
        client_id: "c1",
        username: Some("u"),
        content_type: None,
        user_properties: &[("site", "x"), ("a b", "y")],
    }
}

/// Pieces of the language, so that arbitrary sequences reach deep into the
/// parser more often than arbitrary characters do.
const PIECES: &[&str] = &[
    "FROM",
    "a/#",
    "+/b",
    "WHERE",
    "INTO",
    "e",
    "$body",
    "$topic",
    "$user",
    "$qos",
    "$clientId",
    "$username",
    "$contentType",
    ".",
    "a",
    "b",
    "c",
    "[",
    "]",
    "0",
    "2",
    "'x'",
    "\"y\"",
    "'",
    "(",
    ")",
    ",",
    "AND",
    "or",
    "NOT",
    "=",
    "!=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "LOWER",
    "upper",
    "IS_DEFINED",
    "STARTS_WITH",
    "ENDS_WITH",
    "CONTAINS",
    "LENGTH",
    "1e3",
    "-2.5",
    "true",
    "FALSE",
    "null",
    "$",
    "-",
    "1.",
    "#",
];

fn pieces() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(PIECES), prop::bool::ANY), 0..40).prop_map(|v| {
        v.iter()
            .map(|(piece, space)| if *space { format!("{piece} ") } else { piece.to_string() })
            .collect()
    })
}

/// What a parsed route must satisfy: its canonical text parses back to it
/// and is a fixed point, and evaluating it does not panic.
fn check_route(route: &Route) {
    let text = route.to_string();
    let again = Route::parse(route.name(), &text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(&again, route, "{text}");
    assert_eq!(again.to_string(), text);
    if let Some(condition) = route.condition() {
        condition.matches(&message());
        condition.matches(&Message { payload: b"not json", ..message() });
    }
}

fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn operand() -> impl Strategy<Value = String> {
    let reference = prop_oneof![
        Just("$topic".to_owned()),
        (0..5usize).prop_map(|i| format!("$TOPIC[{i}]")),
        Just("$qos".to_owned()),
        Just("$clientid".to_owned()),
        Just("$username".to_owned()),
        Just("$contentType".to_owned()),
        "[a-z][a-z-]{0,4}".prop_map(|name| format!("$user.{name}")),
        "[ -~]{0,5}".prop_map(|name| format!("$user[{}]", quoted(&name))),
        prop::collection::vec(
            prop_oneof![
                "[a-zA-Z_][a-z0-9_-]{0,4}".prop_map(|key| format!(".{key}")),
                (0..3usize).prop_map(|i| format!("[{i}]")),
                "[ -~é]{0,5}".prop_map(|key| format!("[{}]", quoted(&key))),
            ],
            0..4
        )
        .prop_map(|steps| format!("$body{}", steps.concat())),
    ];
    prop_oneof![
        1 => (-1e6f64..1e6).prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_filter("finite", |n| n.is_finite()).prop_map(|n| format!("{n:e}")),
        1 => "[a-zA-Z '\"é]{0,8}".prop_map(|s| quoted(&s)),
        1 => "[a-z']{0,8}".prop_map(|s| format!("\"{}\"", s.replace('"', "\"\""))),
        1 => Just("true".to_owned()),
        1 => Just("FALSE".to_owned()),
        1 => Just("Null".to_owned()),
        4 => reference,
    ]
}

fn condition() -> impl Strategy<Value = String> {
    let op = prop::sample::select(&["=", "!=", "<>", "<", "<=", ">", ">="][..]);
    let leaf = prop_oneof![
        (operand(), op, operand()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        operand(),
    ];
    leaf.prop_recursive(5, 48, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} AND {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} or {b}")),
            inner.clone().prop_map(|a| format!("NOT {a}")),
            inner.clone().prop_map(|a| format!("({a})")),
            (inner.clone(), operand()).prop_map(|(a, b)| format!("({a}) = {b}")),
            inner.clone().prop_map(|a| format!("is_defined({a})")),
            inner.clone().prop_map(|a| format!("LENGTH(LOWER({a}))")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("STARTS_WITH({a}, {b})")),
        ]
    })
}

proptest! {
    #[test]
    fn the_parser_never_panics_on_any_string(text in any::<String>()) {
        let _ = Condition::parse("r", &text);
        if let Ok(route) = Route::parse("r", &text) {
            check_route(&route);
        }
    }

    #[test]
    fn the_parser_never_panics_on_pieces_of_the_language(text in pieces()) {
        let _ = Condition::parse("r", &text);
        if let Ok(route) = Route::parse("r", &text) {
            check_route(&route);
        }
        if let Ok(route) = Route::parse("r", &format!("FROM # WHERE {text} INTO e")) {
            check_route(&route);
        }
    }

    #[test]
    fn well_formed_conditions_parse_and_print_back(text in condition()) {
        let route = format!("FROM a/+/# WHERE {text} INTO cloud");
        let route = Route::parse("r", &route).unwrap_or_else(|e| panic!("{route}: {e}"));
        check_route(&route);
    }
}
