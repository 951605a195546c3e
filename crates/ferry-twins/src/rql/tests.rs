//! The parser against Ditto's own test cases (`RqlPredicateParserTest`,
//! `RqlOptionsParserTest`), the evaluator against the semantics table in
//! the module docs, and properties: parsing never panics, and printing a
//! filter then parsing it gives it back.

use super::field::Usage;
use super::limits::{MAX_DEPTH, MAX_INPUT_BYTES, MAX_IN_VALUES, MAX_NODES};
use super::*;
use proptest::prelude::*;
use serde_json::json;
use std::time::{Duration, UNIX_EPOCH};

fn parse(text: &str) -> Result<Filter, RqlError> {
    Filter::parse(text, Scope::THINGS)
}

fn field(text: &str) -> Field {
    Field::classify(text, Usage::Exists, Scope::THINGS, 0).unwrap()
}

fn compare_value(text: &str) -> Value {
    match parse(text).unwrap() {
        Filter::Compare { value, .. } => value,
        other => panic!("{text} is {other:?}"),
    }
}

#[test]
fn parses_dittos_valid_cases_to_their_canonical_form() {
    let cases = [
        ("eq(thingId,123)", "eq(thingId,123)"),
        ("ne(thingId,123)", "ne(thingId,123)"),
        ("gt(attributes/width,123)", "gt(attributes/width,123)"),
        ("ge(attributes/width,123)", "ge(attributes/width,123)"),
        ("lt(attributes/width,123)", "lt(attributes/width,123)"),
        ("le(attributes/width,123)", "le(attributes/width,123)"),
        (r#"eq(thingId,"te\"st")"#, r#"eq(thingId,"te\"st")"#),
        (r"eq(thingId,'te\'st')", r#"eq(thingId,"te'st")"#),
        (r#"like(attributes/w,"test*")"#, r#"like(attributes/w,"test*")"#),
        (r"like(attributes/w,'test*')", r#"like(attributes/w,"test*")"#),
        (r#"ilike(attributes/w,"TEST*")"#, r#"ilike(attributes/w,"TEST*")"#),
        (r#"in(attributes/a,"test",1,true)"#, r#"in(attributes/a,"test",1,true)"#),
        (
            r#"and(eq(thingId,123),eq(policyId,"super"),or(eq(thingId,854)))"#,
            r#"and(eq(thingId,123),eq(policyId,"super"),or(eq(thingId,854)))"#,
        ),
        ("not(eq(thingId,123))", "not(eq(thingId,123))"),
        (r#"eq(thingId," ")"#, r#"eq(thingId," ")"#),
        ("eq(thingId,' ')", r#"eq(thingId," ")"#),
        ("eq(thingId,true)", "eq(thingId,true)"),
        ("eq(thingId,false)", "eq(thingId,false)"),
        (r#"eq(thingId,"true")"#, r#"eq(thingId,"true")"#),
        ("eq(thingId,-123)", "eq(thingId,-123)"),
        ("eq(thingId,0)", "eq(thingId,0)"),
        ("eq(thingId,+5)", "eq(thingId,5)"),
        ("eq(thingId,123.7)", "eq(thingId,123.7)"),
        ("eq(thingId,-123.7)", "eq(thingId,-123.7)"),
        ("eq(thingId,0.7)", "eq(thingId,0.7)"),
        ("eq(thingId,-0.7)", "eq(thingId,-0.7)"),
        ("eq(thingId,5.0)", "eq(thingId,5.0)"),
        ("eq(thingId,null)", "eq(thingId,null)"),
        (r#"in(attributes/a,null,"test",null)"#, r#"in(attributes/a,null,"test",null)"#),
        ("exists(features/scanner)", "exists(features/scanner)"),
        ("empty(attributes/tags)", "empty(attributes/tags)"),
        ("not(empty(attributes/tags))", "not(empty(attributes/tags))"),
        ("lt(_modified,time:now)", "lt(_modified,time:now)"),
        ("eq(/thingId,1)", "eq(thingId,1)"),
        // White space where Ditto's rules take it: before the text, after
        // a literal, after the comma between operands.
        (" \t\neq(thingId,1)", "eq(thingId,1)"),
        ("eq(thingId,1 )", "eq(thingId,1)"),
        (r#"eq(thingId,"a" )"#, r#"eq(thingId,"a")"#),
        ("and(eq(thingId,1), eq(thingId,2))", "and(eq(thingId,1),eq(thingId,2))"),
        ("in(thingId,1 ,2)", "in(thingId,1,2)"),
        // Escapes in properties and strings.
        (r"eq(attributes/a\u002cb,1)", r"eq(attributes/a\u002cb,1)"),
        (r"eq(attributes/a\/b,1)", "eq(attributes/a/b,1)"),
        (r#"eq(thingId,"\ud83d\ude00\t")"#, "eq(thingId,\"😀\t\")"),
        (r#"eq(thingId,"\ud83d")"#, "eq(thingId,\"\u{fffd}\")"),
        // A Java long's extremes.
        ("eq(_revision,-9223372036854775808)", "eq(_revision,-9223372036854775808)"),
        ("eq(_revision,9223372036854775807)", "eq(_revision,9223372036854775807)"),
    ];
    for (text, canonical) in cases {
        let filter = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(filter.to_string(), canonical, "{text}");
        assert_eq!(parse(canonical).unwrap(), filter, "{canonical}");
    }
}

#[test]
fn reads_values_as_ditto_does() {
    assert_eq!(compare_value(r#"eq(thingId,"abc\nyz")"#), Value::String("abc\nyz".into()));
    assert_eq!(compare_value(r"eq(thingId,'abc\nyz')"), Value::String("abc\nyz".into()));
    assert_eq!(compare_value("eq(thingId,123)"), Value::Int(123));
    assert_eq!(compare_value("eq(thingId,123.0)"), Value::Float(123.0));
    let complex = r#"eq(attributes/complex,"!#$%&'()*+,/:;=?@[\\]{|} äaZ0")"#;
    assert_eq!(compare_value(complex), Value::String("!#$%&'()*+,/:;=?@[\\]{|} äaZ0".into()));
    assert_eq!(
        compare_value("lt(_modified,time:now)"),
        Value::Placeholder(Placeholder { prefix: "time".into(), name: "now".into() })
    );
}

#[test]
fn refuses_dittos_invalid_cases_as_syntax_errors() {
    let cases = [
        r#"eq/(thingId,"te\"st")"#,
        r#"eq(thingId;"te\"st")"#,
        "like(attributes/w,123*)",
        r#"not(eq(thingId,123),eq(policyId,"super"))"#,
        "",
        "or(ASDF(thingId,123))",
        "eq(thingId, 123())",
        "eq(thingId, 123.0())",
        r#"eq(policyId,"super"))"#,
        "and(eq(thingId, 123), )",
        "and(   ,eq(thingId, 123))",
        r#"and(eq(thingId,123)xx,eq(policyId,"super"))"#,
        "eq(thingId, 123",
        "(thingId, 123)",
        "eaq(thingId, 123)",
        "eq(thingId,test)",
        "eq(thingId,-0)",
        "eq(thingId, 0123)",
        "eq(thingId,0123)",
        "eq(thingId,-0123)",
        "eq(thingId,012.7)",
        "eq(thingId,-012.7)",
        "eq(thingId,-.7)",
        r#"eq(thingId,"abc"")"#,
        "eq(thingId,.7)",
        "eq(thingId,.)",
        "eq(thingId,12.7.8)",
        "eq(thingId,127.)",
        "eq(thingId,1e5)",
        r#"exists("features/scanner")"#,
        r#"exists(features/scanner,"test")"#,
        r#"empty("attributes/tags")"#,
        r#"empty(attributes/tags,"test")"#,
        "eq(thingId,foo:bar)",
        // White space where Ditto's rules do not take it.
        "eq(thingId, 1)",
        "eq(thingId,1) ",
        "eq (thingId,1)",
        "and(eq(thingId,1) ,eq(thingId,2))",
        "in(thingId, 1)",
        "EQ(thingId,1)",
        // Escapes Ditto does not know.
        r#"eq(thingId,"\q")"#,
        r#"eq(thingId,'\"')"#,
        r#"eq(thingId,"\u12")"#,
        r"eq(attributes/a\,b,1)",
        "in(thingId)",
        "and()",
        "eq(thingId,'a)",
    ];
    for text in cases {
        let error = parse(text).expect_err(text);
        assert_eq!(error.kind, ErrorKind::Syntax, "{text}: {error}");
        assert_eq!(error.to_ditto_error().error, "rql.expression.invalid", "{text}");
        assert_eq!(error.to_condition_error(text).error, "things:condition.invalid", "{text}");
    }
}

#[test]
fn reports_where_and_what_in_parboileds_shape() {
    let error = parse("eq(thingId,test)").unwrap_err();
    assert_eq!(error.offset, 11);
    assert_eq!(
        error.message,
        "Invalid input 't', expected a number, a string, time:…, true, false or null (line 1, column 12):\n\
         eq(thingId,test)\n           ^"
    );
    let error = parse("eq(thingId, 123").unwrap_err();
    assert_eq!(error.offset, 11);
    let error = parse("eq(thingId,123").unwrap_err();
    assert!(error.message.starts_with("Unexpected end of input, expected"), "{}", error.message);
    assert_eq!(error.offset, 14);
    let error = parse("and(eq(thingId,1)xx,eq(thingId,2))").unwrap_err();
    assert_eq!(error.offset, 17);
    assert!(
        error.message.starts_with("Invalid input 'x', expected ',' or ')'"),
        "{}",
        error.message
    );
    let error = parse("and(eq(thingId,1),\n  eq(thingId 2))").unwrap_err();
    // A property runs to the next `,` or `)`, spaces included.
    assert!(
        error.message.contains("(line 2, column 15):\n  eq(thingId 2))\n              ^"),
        "{}",
        error.message
    );

    let error = parse("eq(thingId,12356143287134097863590813406135981332472031847)").unwrap_err();
    assert_eq!(error.kind, ErrorKind::Syntax);
    assert_eq!(
        error.message,
        "Unknown error during parsing predicate: For input string: \"12356143287134097863590813406135981332472031847\""
    );
}

#[test]
fn refuses_fields_and_values_as_dittos_criteria_do() {
    let error = parse("eq(foo,1)").unwrap_err();
    assert_eq!(error.kind, ErrorKind::UnknownProperty);
    assert_eq!(error.message, "Unknown property name: foo");
    assert_eq!(error.offset, 3);
    // condition= answers rql.expression.invalid for these: Ditto finds
    // them after its enforcement has accepted the syntax.
    assert_eq!(error.to_condition_error("eq(foo,1)").error, "rql.expression.invalid");

    for text in [
        "eq(features/x,1)",
        "exists(attributes)",
        "eq(features/x/properties,1)",
        "in(topic:action,1)",
    ] {
        assert_eq!(parse(text).unwrap_err().kind, ErrorKind::UnknownProperty, "{text}");
    }
    let error = parse("like(thingId,1)").unwrap_err();
    assert_eq!(error.kind, ErrorKind::LikeNeedsString);
    assert_eq!(error.message, "In the like predicate only string values are allowed.");
    assert_eq!(parse("ilike(thingId,time:now)").unwrap_err().kind, ErrorKind::LikeNeedsString);

    let error = parse("eq(attributes/a//b,1)").unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidPointer("attributes/a//b".into()));
    let condition = error.to_condition_error("eq(attributes/a//b,1)");
    assert_eq!(condition.error, "things:condition.invalid");
    assert_eq!(condition.message, "The specified condition 'attributes/a//b' is invalid.");
}

#[test]
fn reports_in_dittos_order() {
    // A syntax error anywhere beats a bad field before it.
    assert_eq!(parse("and(eq(foo,1),eq(thingId 1))").unwrap_err().kind, ErrorKind::Syntax);
    // A bad pointer beats an unknown field before it; among the rest, the
    // first one wins.
    assert!(matches!(
        parse("and(eq(foo,1),eq(attributes/a//b,1))").unwrap_err().kind,
        ErrorKind::InvalidPointer(_)
    ));
    assert_eq!(
        parse("and(eq(foo,1),eq(bar,1))").unwrap_err().message,
        "Unknown property name: foo"
    );
}

#[test]
fn placeholder_fields_only_where_the_scope_allows() {
    let scope = Scope { placeholder_fields: &["topic:action", "resource:path"] };
    let filter = Filter::parse("exists(topic:action)", scope).unwrap();
    assert_eq!(filter.to_string(), "exists(topic:action)");
    assert!(parse("exists(topic:action)").is_err());
}

#[test]
fn every_limit_is_a_clear_error() {
    let deep = format!("{}exists(thingId){}", "not(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    let error = parse(&deep).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Syntax);
    assert!(error.message.contains("deeper than 64"), "{}", error.message);
    let ok =
        format!("{}exists(thingId){}", "not(".repeat(MAX_DEPTH - 1), ")".repeat(MAX_DEPTH - 1));
    parse(&ok).unwrap();

    let wide = format!("or({}exists(x))", "exists(x),".repeat(MAX_NODES));
    assert!(parse(&wide).unwrap_err().message.contains("more than 4096 operators"));

    let many = format!("in(thingId{})", ",1".repeat(MAX_IN_VALUES + 1));
    assert!(parse(&many).unwrap_err().message.contains("more than 10000 values"));
    parse(&format!("in(thingId{})", ",1".repeat(MAX_IN_VALUES))).unwrap();

    let long = format!(r#"eq(thingId,"{}")"#, "a".repeat(MAX_INPUT_BYTES));
    assert!(parse(&long).unwrap_err().message.contains("at most 65536"));
    // Far past the depth limit: refused, not a stack overflow.
    let deeper = "not(".repeat(MAX_INPUT_BYTES / 4);
    assert_eq!(parse(&deeper).unwrap_err().kind, ErrorKind::Syntax);

    let sort = format!("sort({})", vec!["+thingId"; 33].join(","));
    assert!(SearchQuery::parse(None, Some(&sort))
        .unwrap_err()
        .message
        .contains("more than 32 fields"));
    let error = parse(&format!("eq(thingId,1{}.5)", "0".repeat(400))).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Syntax);
}

fn thing() -> serde_json::Value {
    json!({
        "thingId": "org.eclipse:thing-1",
        "policyId": "org.eclipse:policy-1",
        "definition": "org.eclipse:def:1.0",
        "_revision": 7,
        "_created": "2024-01-01T00:00:00Z",
        "_modified": "2024-06-01T12:00:00Z",
        "attributes": {
            "location": "kitchen", "count": 5, "ratio": 0.5, "five": "5", "flag": true, "off": false,
            "none": null, "tags": ["a", "b"], "empty_s": "", "empty_a": [], "empty_o": {},
            "nested": {"x": {"y": 1}}, "matrix": [[1, 2], [3, [4]]],
            "list": [{"name": "n1", "v": 1}, {"name": "n2", "v": [2, 3]}, 7],
            "big": 9_007_199_254_740_993_u64, "name": "Äpfel", "ml": "a\nb", "emoji": "😀",
            "float_int": 5.0, "small": 0.000015
        },
        "features": {
            "temp": {
                "definition": ["d:1"],
                "properties": {"value": 21.5, "unit": "C"},
                "desiredProperties": {"value": 20}
            },
            "hum": {"properties": {"value": 40}},
            "bare": {}
        },
        "_metadata": {"attributes": {"location": {"issuedBy": "me"}}}
    })
}

/// Evaluates `text` under both semantics: (things, search).
fn eval_with(text: &str, placeholders: &dyn Placeholders) -> (bool, bool) {
    let filter = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let thing = thing();
    (
        filter.matches(&thing, Semantics::Things, placeholders),
        filter.matches(&thing, Semantics::Search, placeholders),
    )
}

#[test]
fn evaluates_each_operator_and_semantic_point() {
    // (filter, under Semantics::Things, under Semantics::Search)
    let cases = [
        // Comparisons, numbers exact across integer and double.
        (r#"eq(attributes/location,"kitchen")"#, true, true),
        ("eq(attributes/count,5)", true, true),
        ("eq(attributes/count,5.0)", true, true),
        ("eq(attributes/float_int,5)", true, true),
        ("eq(attributes/ratio,0.5)", true, true),
        ("gt(attributes/count,4)", true, true),
        ("gt(attributes/count,5)", false, false),
        ("ge(attributes/count,5)", true, true),
        ("lt(attributes/count,5.5)", true, true),
        ("le(attributes/count,4.99)", false, false),
        ("eq(attributes/big,9007199254740993)", true, true),
        ("eq(attributes/big,9007199254740992.0)", false, false),
        ("eq(_revision,7)", true, true),
        // Strings order lexicographically.
        (r#"gt(attributes/location,"a")"#, true, true),
        (r#"lt(attributes/location,"kitcheo")"#, true, true),
        (r#"gt(_modified,"2024-01-01")"#, true, true),
        // UTF-16 (Java) against code point (MongoDB) order.
        ("gt(attributes/emoji,\"\u{fffd}\")", false, true),
        // Coercion: Ditto's evaluator reads numeric strings as numbers
        // and compares other mixed types by their Java texts.
        ("eq(attributes/five,5)", true, false),
        (r#"eq(attributes/count,"5")"#, true, false),
        (r#"eq(attributes/count,"5.00")"#, true, false),
        (r#"gt(attributes/count,"4e0")"#, true, false),
        (r#"eq(attributes/flag,"true")"#, true, false),
        ("gt(attributes/location,5)", true, false),
        ("eq(attributes/flag,1)", false, false),
        (r#"eq(attributes/small,"0.000015")"#, true, false),
        // Arrays match by any element, and paths pass through arrays.
        (r#"eq(attributes/tags,"b")"#, true, true),
        (r#"ne(attributes/tags,"b")"#, false, false),
        (r#"ne(attributes/tags,"c")"#, true, true),
        (r#"eq(attributes/list/name,"n2")"#, true, true),
        ("eq(attributes/list/v,3)", true, true),
        ("eq(attributes/matrix,4)", true, true),
        ("eq(attributes/nested/x/y,1)", true, true),
        ("eq(attributes/nested,1)", false, false),
        // ne and a missing field.
        ("ne(attributes/missing,1)", true, false),
        ("not(eq(attributes/missing,1))", true, true),
        ("ne(attributes/count,4)", true, true),
        // null.
        ("eq(attributes/none,null)", true, true),
        ("eq(attributes/missing,null)", false, false),
        ("eq(attributes/count,null)", false, false),
        ("ne(attributes/none,null)", false, false),
        ("ge(attributes/none,null)", false, true),
        ("gt(attributes/none,null)", false, false),
        // in.
        (r#"in(attributes/location,"x","kitchen")"#, true, true),
        ("in(attributes/count,1,2)", false, false),
        ("in(attributes/count,1,5.0)", true, true),
        (r#"in(attributes/count,"5")"#, true, false),
        ("in(attributes/missing,null)", false, true),
        ("in(attributes/none,null)", false, true),
        (r#"in(attributes/tags,"z","a")"#, true, true),
        // like and ilike.
        (r#"like(attributes/location,"kit*")"#, true, true),
        (r#"like(attributes/location,"*CHEN")"#, false, false),
        (r#"ilike(attributes/location,"*CHEN")"#, true, true),
        (r#"like(attributes/location,"k?tchen")"#, true, true),
        (r#"like(attributes/location,"kitchen?")"#, false, false),
        (r#"like(thingId,"org.eclipse:*")"#, true, true),
        (r#"like(attributes/count,"5")"#, true, false),
        (r#"like(attributes/small,"1.5E-5")"#, true, false),
        (r#"like(attributes/flag,"tr*")"#, true, false),
        (r#"ilike(attributes/name,"äpfel")"#, false, true),
        (r#"like(attributes/ml,"a*")"#, false, false),
        (r#"like(attributes/ml,"a\nb")"#, true, true),
        (r#"like(attributes/tags,"b")"#, true, true),
        (r#"like(attributes/none,"*")"#, false, false),
        // exists and empty.
        ("exists(attributes/none)", true, true),
        ("exists(attributes/missing)", false, false),
        ("exists(attributes/list/name)", true, true),
        ("empty(attributes/none)", true, true),
        ("empty(attributes/empty_s)", true, true),
        ("empty(attributes/empty_a)", true, true),
        ("empty(attributes/empty_o)", true, true),
        ("empty(attributes/missing)", true, true),
        ("empty(attributes/count)", false, false),
        ("empty(attributes/off)", false, false),
        ("empty(attributes/tags)", false, false),
        ("empty(attributes/list/name)", false, false),
        ("not(empty(attributes/tags))", true, true),
        // Features.
        ("eq(features/temp/properties/value,21.5)", true, true),
        ("eq(features/temp/desiredProperties/value,20)", true, true),
        (r#"eq(features/temp/definition,"d:1")"#, true, true),
        ("exists(features/bare)", true, true),
        ("exists(features/nope)", false, false),
        ("empty(features/bare)", true, true),
        ("empty(features/temp)", false, false),
        ("empty(features/nope)", true, true),
        ("exists(features/temp/definition)", true, true),
        ("exists(features/hum/properties)", true, true),
        ("exists(features/hum/desiredProperties)", false, false),
        ("empty(features/hum/desiredProperties)", true, true),
        ("empty(features/temp/properties)", false, false),
        // features/*: any feature in search, a feature named `*` in
        // Ditto's evaluator.
        ("eq(features/*/properties/value,40)", false, true),
        ("gt(features/*/properties/value,100)", false, false),
        ("exists(features/*/properties/unit)", false, true),
        ("exists(features/*)", false, true),
        ("empty(features/*/desiredProperties)", true, true),
        ("empty(features/*/properties)", true, true),
        ("empty(features/*)", true, false),
        // Top-level fields.
        (r#"eq(_namespace,"org.eclipse")"#, true, true),
        ("exists(_namespace)", true, true),
        (r#"eq(policyId,"org.eclipse:policy-1")"#, true, true),
        (r#"like(definition,"org.eclipse:def:*")"#, true, true),
        ("exists(_metadata)", true, true),
        // Metadata.
        (r#"eq(_metadata/attributes/location/issuedBy,"me")"#, true, true),
        ("exists(_metadata/attributes/location)", true, true),
        ("empty(_metadata/attributes/nope)", true, true),
        // Logic.
        ("and(eq(attributes/count,5),exists(features/temp))", true, true),
        ("and(eq(attributes/count,5),exists(features/nope))", false, false),
        ("or(eq(attributes/count,6),exists(features/temp))", true, true),
        ("not(or(eq(attributes/count,6),exists(features/nope)))", true, true),
        // Unresolved placeholders are null.
        ("eq(thingId,time:now)", false, false),
        ("ne(thingId,time:now)", true, true),
    ];
    for (text, things, search) in cases {
        assert_eq!(eval_with(text, &NoPlaceholders), (things, search), "{text} (things, search)");
    }
}

#[test]
fn resolves_time_placeholders_at_one_instant() {
    let time = TimePlaceholders::at(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
    assert_eq!(time.resolve("time", "now"), Some("2023-11-14T22:13:20.123Z"));
    assert_eq!(time.resolve("time", "now_epoch_millis"), Some("1700000000123"));
    assert_eq!(time.resolve("time", "now-1h"), None);
    let whole = TimePlaceholders::at(UNIX_EPOCH + Duration::from_secs(951_782_400));
    assert_eq!(whole.resolve("time", "now"), Some("2000-02-29T00:00:00Z"));

    let later = TimePlaceholders::at(UNIX_EPOCH + Duration::from_secs(1_750_000_000));
    assert_eq!(eval_with("lt(_modified,time:now)", &later), (true, true));
    assert_eq!(eval_with("gt(_modified,time:now)", &later), (false, false));
    assert_eq!(eval_with("lt(_modified,time:now)", &time), (false, false));
    // The epoch millis are a string: a number only to Ditto's evaluator.
    assert_eq!(eval_with("lt(_revision,time:now_epoch_millis)", &later), (true, false));
}

#[test]
fn placeholder_fields_evaluate_through_the_resolver() {
    struct Topic;
    impl Placeholders for Topic {
        fn resolve(&self, prefix: &str, name: &str) -> Option<&str> {
            (prefix == "topic" && name == "action").then_some("modified")
        }
    }
    let scope = Scope { placeholder_fields: &["topic:action", "topic:channel"] };
    let thing = thing();
    let check =
        |text: &str| Filter::parse(text, scope).unwrap().matches(&thing, Semantics::Things, &Topic);
    assert!(check(r#"eq(topic:action,"modified")"#));
    assert!(check(r#"like(topic:action,"mod*")"#));
    assert!(check("exists(topic:action)"));
    assert!(!check("exists(topic:channel)"));
    assert!(check("empty(topic:channel)"));
    assert!(check(r#"and(eq(topic:action,"modified"),eq(attributes/count,5))"#));
}

#[test]
fn a_non_object_thing_matches_only_absence() {
    let filter = parse("empty(attributes/a)").unwrap();
    assert!(filter.matches(&json!([1, 2]), Semantics::Things, &NoPlaceholders));
    assert!(!parse("exists(thingId)").unwrap().matches(
        &json!(null),
        Semantics::Search,
        &NoPlaceholders
    ));
}

// ---- properties ----

fn key() -> impl Strategy<Value = String> {
    // Keys with every character the RQL text must escape, and `~`.
    "[a-zA-Z0-9 _,)(\"\\\\~*'-]{1,6}"
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(key(), 1..4).prop_map(|levels| levels.join("/"))
}

fn field_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "thingId",
            "_namespace",
            "policyId",
            "_revision",
            "_created",
            "_modified",
            "definition",
            "_metadata"
        ])
        .prop_map(str::to_string),
        path().prop_map(|p| format!("attributes/{p}")),
        path().prop_map(|p| format!("_metadata/{p}")),
        (prop_oneof![key(), Just("*".to_string())], path())
            .prop_map(|(id, p)| format!("features/{id}/properties/{p}")),
        key().prop_map(|id| format!("features/{id}/desiredProperties/x")),
        key().prop_map(|id| format!("features/{id}/definition")),
    ]
}

fn any_field() -> impl Strategy<Value = Field> {
    field_text().prop_map(|text| Field::classify(&text, Usage::Filter, Scope::THINGS, 0).unwrap())
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        prop::num::f64::NORMAL.prop_map(Value::Float),
        Just(Value::Float(0.0)),
        "\\PC{0,8}".prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\'é😀]{0,4}".prop_map(Value::String),
        "[a-z_0-9 ]{0,8}"
            .prop_map(|name| Value::Placeholder(Placeholder { prefix: "time".into(), name })),
    ]
}

fn leaf() -> impl Strategy<Value = Filter> {
    prop_oneof![
        (
            prop::sample::select(vec![
                CompareOp::Eq,
                CompareOp::Ne,
                CompareOp::Gt,
                CompareOp::Ge,
                CompareOp::Lt,
                CompareOp::Le
            ]),
            any_field(),
            value()
        )
            .prop_map(|(op, field, value)| Filter::Compare { op, field, value }),
        (any_field(), prop::collection::vec(value(), 1..4))
            .prop_map(|(field, values)| Filter::In { field, values }),
        (any_field(), "[a-z*?\"\\\\\n]{0,6}", any::<bool>())
            .prop_map(|(field, p, i)| Filter::Like { field, pattern: LikePattern::new(p, i) }),
        field_text().prop_map(|t| Filter::Exists(field(&t))),
        prop::sample::select(vec![
            "features/x",
            "features/*",
            "features/x/properties",
            "attributes/"
        ])
        .prop_map(|t| Filter::Empty(field(t))),
    ]
}

fn filter() -> impl Strategy<Value = Filter> {
    leaf().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Filter::And),
            prop::collection::vec(inner.clone(), 1..4).prop_map(Filter::Or),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
}

proptest! {
    #[test]
    fn printing_then_parsing_gives_the_filter_back(filter in filter()) {
        let text = filter.to_string();
        prop_assert_eq!(parse(&text), Ok(filter), "{}", text);
    }

    #[test]
    fn evaluation_never_panics(filter in filter()) {
        let thing = thing();
        for semantics in [Semantics::Things, Semantics::Search] {
            filter.matches(&thing, semantics, &NoPlaceholders);
        }
    }

    #[test]
    fn parsing_never_panics(text in "[a-z(),\"'\\\\ 0-9.+\\-:/*_]{0,60}") {
        let _ = parse(&text);
        let _ = SearchQuery::parse(Some(&text), Some(&text));
    }

    #[test]
    fn parsing_anything_never_panics(text in "\\PC{0,40}") {
        let _ = parse(&text);
        let _ = SearchQuery::parse(None, Some(&text));
    }

    #[test]
    fn parsing_near_misses_never_panics(filter in filter(), cut in any::<prop::sample::Index>(), insert in "[(),\"\\\\ ]") {
        let mut text = filter.to_string();
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.insert_str(at, &insert);
        let _ = parse(&text);
        text.truncate(at);
        let _ = parse(&text);
    }
}
