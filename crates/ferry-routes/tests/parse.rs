//! Parsing routes: what they become, and the exact error, column and
//! message for each way of getting one wrong.

use ferry_routes::{Condition, ErrorKind, Route};

#[test]
fn routes_parse_to_their_canonical_form() {
    let cases = [
        (
            "FROM telemetry/# WHERE $body.temp > 50 AND $user.site = 'plant-1' INTO cloud",
            "FROM telemetry/# WHERE (($body.temp > 50) AND ($user.site = 'plant-1')) INTO cloud",
        ),
        ("from a/+/b into x", "FROM a/+/b INTO x"),
        ("From a Where $Body.X = 1 Into e", "FROM a WHERE ($body.X = 1) INTO e"),
        ("  FROM\ta/b\n WHERE($body.x=1)INTO   e  ", "FROM a/b WHERE ($body.x = 1) INTO e"),
        ("FROM # INTO cloud-2", "FROM # INTO cloud-2"),
        (
            "FROM # WHERE NOT $qos = 0 OR $clientId <> 'c' INTO e",
            "FROM # WHERE ((NOT ($qos = 0)) OR ($clientId != 'c')) INTO e",
        ),
        // AND binds tighter than OR.
        (
            "FROM a WHERE $body.a = 1 OR $body.b = 2 AND $body.c = 3 INTO e",
            "FROM a WHERE (($body.a = 1) OR (($body.b = 2) AND ($body.c = 3))) INTO e",
        ),
        // Parentheses the user wrote stay.
        (
            "FROM a WHERE ($body.a = 1 AND $body.b = 2) AND $body.c = 3 INTO e",
            "FROM a WHERE ((($body.a = 1) AND ($body.b = 2)) AND ($body.c = 3)) INTO e",
        ),
        (
            "FROM a WHERE is_defined($body.x) and starts_with(lower($topic[1]), 'ab') INTO e",
            "FROM a WHERE (IS_DEFINED($body.x) AND STARTS_WITH(LOWER($topic[1]), 'ab')) INTO e",
        ),
        (
            "FROM a WHERE $body.n = 1e3 OR $body.n = -2.5 OR $body.b = TRUE OR $body.z = Null INTO e",
            "FROM a WHERE (($body.n = 1000) OR ($body.n = -2.5) OR ($body.b = true) OR ($body.z = null)) INTO e",
        ),
        ("FROM a WHERE $body.n > 1E+300 INTO e", "FROM a WHERE ($body.n > 1e300) INTO e"),
        ("FROM a WHERE $body.n > 0.0000015 INTO e", "FROM a WHERE ($body.n > 1.5e-6) INTO e"),
        (
            r#"FROM a WHERE $body.list[0]['a.b'].c = "it's" OR $body["x y"] = 'say ''hi''' INTO e"#,
            r#"FROM a WHERE (($body.list[0]['a.b'].c = 'it''s') OR ($body['x y'] = 'say ''hi''')) INTO e"#,
        ),
        (
            r#"FROM a WHERE $USER['it''s'] = "a""b" AND $user.x-site = $ContentType INTO e"#,
            r#"FROM a WHERE (($user['it''s'] = 'a"b') AND ($user.x-site = $contentType)) INTO e"#,
        ),
        // A keyword after `.` is a key.
        ("FROM a WHERE $body.and = $body.INTO INTO e", "FROM a WHERE ($body.and = $body.INTO) INTO e"),
        ("FROM a WHERE $body INTO e", "FROM a WHERE $body INTO e"),
        ("FROM a WHERE NOT NOT true INTO e", "FROM a WHERE (NOT (NOT true)) INTO e"),
        ("FROM a WHERE $username >= $topic INTO e", "FROM a WHERE ($username >= $topic) INTO e"),
    ];
    for (text, canonical) in cases {
        let route = Route::parse("r", text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(route.to_string(), canonical, "{text}");
        assert_eq!(Route::parse("r", canonical), Ok(route), "{canonical}");
    }
}

#[test]
fn route_parts() {
    let route = Route::parse("telemetry", "FROM telemetry/# WHERE $qos = 1 INTO cloud").unwrap();
    assert_eq!(route.name(), "telemetry");
    assert_eq!(route.filter(), "telemetry/#");
    assert_eq!(route.condition(), Some(&Condition::parse("telemetry", "$qos = 1").unwrap()));
    assert_eq!(route.endpoint(), "cloud");
    assert_eq!(Route::parse("all", "FROM # INTO cloud").unwrap().condition(), None);
    // The broker shares its routes among the cores' threads.
    fn shareable<T: Send + Sync>(_: &T) {}
    shareable(&route);
}

const KNOWN_NAMES: &str = "known: $body, $topic, $user, $contentType, $qos, $clientId, $username";
const KNOWN_FUNCTIONS: &str =
    "known: IS_DEFINED, STARTS_WITH, ENDS_WITH, CONTAINS, LOWER, UPPER, LENGTH";

#[test]
fn route_errors_name_the_column_and_the_problem() {
    let deep = format!("FROM a WHERE {}1{} INTO e", "(".repeat(33), ")".repeat(33));
    let long_path = format!("FROM a WHERE $body{} = 1 INTO e", ".a".repeat(17));
    let long = format!("FROM a INTO {}", "e".repeat(5000));
    let cases: Vec<(&str, usize, String)> = vec![
        ("", 1, "a route starts with FROM".into()),
        ("SELECT a INTO e", 1, "a route starts with FROM".into()),
        ("FROM", 5, "expected a topic filter after FROM".into()),
        ("FROM INTO e", 6, "expected a topic filter after FROM".into()),
        (
            "FROM a/#/b INTO e",
            6,
            "'a/#/b' is not a valid MQTT topic filter ('#' only as the last level, '+' only as a whole level)".into(),
        ),
        (
            "FROM $share/g/a INTO e",
            6,
            "a route cannot use a shared subscription ('$share/g/a'): it is the only subscriber of its filter".into(),
        ),
        ("FROM a", 7, "expected WHERE or INTO after the topic filter, found the end of the route".into()),
        ("FROM a TO e", 8, "expected WHERE or INTO after the topic filter, found 'TO'".into()),
        (
            "FROM a WHERE $body.x = 1",
            25,
            "expected AND, OR or INTO after the condition, found the end of the route".into(),
        ),
        (
            "FROM a WHERE $body.x = 1 = 2 INTO e",
            26,
            "expected AND, OR or INTO after the condition, found '='".into(),
        ),
        ("FROM a INTO", 12, "expected an endpoint name after INTO, found the end of the route".into()),
        ("FROM a INTO 'e'", 13, "expected an endpoint name after INTO, found 'e'".into()),
        (
            "FROM a WHERE $qos = 1 INTO e WHERE",
            30,
            "unexpected 'WHERE' after the endpoint name: INTO <endpoint> ends the route".into(),
        ),
        ("FROM a WHERE $body.temp > INTO cloud", 27, "expected a value after '>', found 'INTO'".into()),
        ("FROM a WHERE NOT INTO e", 18, "expected a value after 'NOT', found 'INTO'".into()),
        ("FROM a WHERE temp > 5 INTO e", 14, "expected a value after 'WHERE', found 'temp'".into()),
        ("FROM a WHERE $bdy.x = 1 INTO e", 14, format!("unknown name '$bdy'; {KNOWN_NAMES}")),
        ("FROM a WHERE $ = 1 INTO e", 14, format!("expected a name after '$' ({})", &KNOWN_NAMES[7..])),
        ("FROM a WHERE LOWR($topic) = 'a' INTO e", 14, format!("unknown function 'LOWR'; {KNOWN_FUNCTIONS}")),
        ("FROM a WHERE LOWER($topic, 'a') = 'a' INTO e", 14, "LOWER takes 1 argument, not 2 arguments".into()),
        ("FROM a WHERE CONTAINS($topic) INTO e", 14, "CONTAINS takes 2 arguments, not 1 argument".into()),
        ("FROM a WHERE IS_DEFINED() INTO e", 14, "IS_DEFINED takes 1 argument, not 0 arguments".into()),
        ("FROM a WHERE LENGTH($topic INTO e", 28, "expected ',' or ')', found 'INTO'".into()),
        ("FROM a WHERE $topic = 'abc INTO e", 23, "unterminated string: no closing '".into()),
        (r#"FROM a WHERE $topic = "abc'' INTO e"#, 23, "unterminated string: no closing \"".into()),
        ("FROM a WHERE $body.x = 1.2.3 INTO e", 24, "bad number '1.2.3'".into()),
        ("FROM a WHERE $body.x = 12abc INTO e", 24, "bad number '12abc'".into()),
        ("FROM a WHERE $body.x = 1e999 INTO e", 24, "bad number '1e999'".into()),
        ("FROM a WHERE $body.x = 1. INTO e", 24, "bad number '1.'".into()),
        ("FROM a WHERE $body.x = - 1 INTO e", 24, "unexpected character '-'".into()),
        ("FROM a WHERE $body.x # 1 INTO e", 22, "unexpected character '#'".into()),
        ("FROM a WHERE ($body.x = 1 INTO e", 27, "expected ')', found 'INTO'".into()),
        ("FROM a WHERE $topic[-1] = 'a' INTO e", 21, "expected an index (0, 1, …), found '-1'".into()),
        ("FROM a WHERE $topic['a'] = 'a' INTO e", 21, "expected an index (0, 1, …), found 'a'".into()),
        ("FROM a WHERE $body[1.5] = 'a' INTO e", 20, "expected an index (0, 1, …) or a quoted key, found '1.5'".into()),
        ("FROM a WHERE $body[0 = 'a' INTO e", 22, "expected ']', found '='".into()),
        (
            "FROM a WHERE $topic[99999999999999999999999] = 'a' INTO e",
            21,
            "index 99999999999999999999999 is too large".into(),
        ),
        ("FROM a WHERE $user = 'a' INTO e", 14, "'user' needs a property name: $user.<name> or $user['<name>']".into()),
        ("FROM a WHERE $user[0] = 'a' INTO e", 14, "'user' needs a property name: $user.<name> or $user['<name>']".into()),
        (
            "FROM a WHERE $body. = 1 INTO e",
            21,
            "expected a name after '.' (quote other keys: ['key']), found '='".into(),
        ),
        (&deep, 46, "expressions nest deeper than 32 levels".into()),
        (&long_path, 51, "a $body path has more than 16 steps".into()),
        (&long, 1, "the route is 5012 bytes long; at most 4096 are allowed".into()),
        // Columns count characters, not bytes.
        ("FROM ü/# WHERE $topic = 'é' AND $x = 1 INTO e", 33, format!("unknown name '$x'; {KNOWN_NAMES}")),
    ];
    for (text, column, message) in cases {
        let error = Route::parse("telemetry", text).expect_err(text);
        assert_eq!((error.column, error.kind.to_string()), (column, message.clone()), "{text}");
        assert_eq!(error.route, "telemetry");
        assert_eq!(error.to_string(), format!("route \"telemetry\", column {column}: {message}"));
    }
}

#[test]
fn nesting_up_to_the_limit_parses() {
    let deep = format!("FROM a WHERE {}true{} INTO e", "(".repeat(32), ")".repeat(32));
    Route::parse("r", &deep).unwrap();
    let path = format!("FROM a WHERE $body{} = 1 INTO e", ".a".repeat(16));
    Route::parse("r", &path).unwrap();
    let not = format!("FROM a WHERE {}true INTO e", "NOT ".repeat(33));
    assert_eq!(Route::parse("r", &not).unwrap_err().kind, ErrorKind::TooDeep { max: 32 });
    let calls = format!("FROM a WHERE {}'a'{} INTO e", "LOWER(".repeat(33), ")".repeat(33));
    assert_eq!(Route::parse("r", &calls).unwrap_err().kind, ErrorKind::TooDeep { max: 32 });
}

#[test]
fn a_bare_condition_parses_on_its_own() {
    assert_eq!(Condition::parse("r", "$qos = 1").unwrap().to_string(), "($qos = 1)");
    let error = Condition::parse("r", "$qos = 1 INTO e").unwrap_err();
    assert_eq!(
        (error.column, error.kind.to_string()),
        (10, "expected AND, OR or the end of the condition, found 'INTO'".to_owned())
    );
    let error = Condition::parse("r", "").unwrap_err();
    assert_eq!(
        (error.column, error.kind.to_string()),
        (
            1,
            "expected a value after the start of the condition, found the end of the route"
                .to_owned()
        )
    );
}

/// The fuzz target's hand-written seeds (`fuzz/seeds/route/`) must be what
/// their names say, or the fuzzer starts from error paths only.
#[test]
fn fuzz_seeds_parse_unless_broken() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/route");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        // The crate may be built outside the repository.
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed = Route::parse(&name, &text);
        assert_eq!(parsed.is_err(), name.starts_with("broken_"), "{name}: {parsed:?}");
    }
}
