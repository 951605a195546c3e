//! The policy as a whole: Ditto's enforcer scenarios
//! (`policies/model/src/test/.../enforcers/testbench/scenarios`), partial
//! views, merge checks, expiry, and the sub-resource commands.

use super::*;
use crate::pointer::JsonPointer;
use serde_json::json;
use std::sync::Arc;

type ResourceSpec<'a> = (&'a str, &'a [&'a str], &'a [&'a str]);

/// A policy of `(label, subjects, [(thing path, grant, revoke)])`, the
/// subjects under Ditto's `google` issuer as the scenarios have them.
fn compile(entries: &[(&str, &[&str], &[ResourceSpec])]) -> Arc<Enforcer> {
    let mut object = Map::new();
    for (label, subjects, resources) in entries {
        let subjects: Map<String, Value> = subjects
            .iter()
            .map(|s| (format!("google:{s}"), json!({"type": "generated"})))
            .collect();
        let resources: Map<String, Value> = resources
            .iter()
            .map(|(path, grant, revoke)| {
                (format!("thing:{path}"), json!({"grant": grant, "revoke": revoke}))
            })
            .collect();
        object.insert(label.to_string(), json!({"subjects": subjects, "resources": resources}));
    }
    let policy = Policy::from_json("benchmark:scenario", &json!({ "entries": object })).unwrap();
    Enforcer::compile(&policy)
}

fn caller<'a>(enforcer: &'a Enforcer, subjects: &[&str]) -> Caller<'a> {
    let ids: Vec<String> = subjects.iter().map(|s| format!("google:{s}")).collect();
    enforcer.caller(&ids, Timestamp::now())
}

fn pointer(text: &str) -> JsonPointer {
    JsonPointer::parse(text).unwrap()
}

fn permissions(names: &[&str]) -> Vec<Permission> {
    names.iter().map(|n| Permission::parse(n).unwrap()).collect()
}

/// `(subjects, path, permissions, partial?, expected)`: `partial` asks
/// Ditto's `hasPermissionsOnResourceOrAnySubresource`, otherwise
/// `hasPermissionsOnResource`.
type Case<'a> = (&'a [&'a str], &'a str, &'a [&'a str], bool, bool);

fn check(enforcer: &Enforcer, group: &str, cases: &[Case]) {
    for (number, (subjects, path, names, partial, expected)) in cases.iter().enumerate() {
        let caller = caller(enforcer, subjects);
        let answer = permissions(names).iter().all(|&p| {
            if *partial {
                caller.has_permission_on_any_level_below("thing", &pointer(path), p)
            } else {
                caller.has_permission("thing", &pointer(path), p)
            }
        });
        assert_eq!(answer, *expected, "{group}{} {subjects:?} {path} {names:?}", number + 1);
    }
}

const RW: &[&str] = &["READ", "WRITE"];
const R: &[&str] = &["READ"];
const W: &[&str] = &["WRITE"];
const NONE: &[&str] = &[];

#[test]
fn scenario1_simple() {
    let enforcer = compile(&[
        ("all", &["sid_all", "sid_write_revoke"], &[("/", RW, NONE)]),
        ("revokeWrite", &["sid_write_revoke"], &[("/", NONE, W)]),
    ]);
    check(
        &enforcer,
        "Scenario1Simple",
        &[
            (&["sid_all"], "/", RW, false, true),
            (&["sid_none"], "/", R, false, false),
            (&["sid_write_revoke"], "/", W, false, false),
            (&["sid_write_revoke"], "/", R, false, true),
        ],
    );
}

#[test]
fn scenario2_nested() {
    let enforcer = compile(&[
        ("attributes", &["sid_attributes_all"], &[("/attributes", RW, NONE)]),
        ("features", &["sid_features_read"], &[("/features", R, NONE)]),
    ]);
    let a: &[&str] = &["sid_attributes_all"];
    let f: &[&str] = &["sid_features_read"];
    check(
        &enforcer,
        "Scenario2Nested",
        &[
            (a, "/", R, true, true),
            (a, "/", W, false, false),
            (a, "/attributes", RW, false, true),
            (a, "/attributes/foo", RW, false, true),
            (a, "/attributes/foo/bar", R, false, true),
            (f, "/", R, false, false),
            (f, "/attributes", R, false, false),
            (f, "/features", W, false, false),
            (f, "/features/foo", W, false, false),
            (f, "/features", R, false, true),
            (f, "/features/foo", R, false, true),
        ],
    );
}

fn scenario3_policy() -> Arc<Enforcer> {
    compile(&[
        ("all", &["a"], &[("/", RW, NONE)]),
        ("attributes-revoked", &["a"], &[("/attributes", NONE, RW)]),
        ("attributes-location-read-allowed", &["a"], &[("/attributes/location", R, NONE)]),
        ("features", &["f"], &[("/features", R, NONE), ("/features/firmware", NONE, R)]),
        ("features-foo", &["x"], &[("/features/foo", RW, NONE)]),
        (
            "features-foo-special-property-revoked",
            &["x"],
            &[("/features/foo/properties/special", NONE, RW)],
        ),
    ])
}

#[test]
fn scenario3_revoke() {
    let (a, f, x): (&[&str], &[&str], &[&str]) = (&["a"], &["f"], &["x"]);
    check(
        &scenario3_policy(),
        "Scenario3Revoke",
        &[
            (a, "/", RW, false, false),
            (a, "/attributes", RW, false, false),
            (a, "/attributes", W, false, false),
            (a, "/attributes", R, true, true),
            (a, "/attributes/location", R, false, true),
            (a, "/attributes/location", W, false, false),
            (f, "/", R, true, true),
            (f, "/", W, false, false),
            (f, "/features", R, false, false),
            (f, "/features", W, false, false),
            (f, "/features/firmware", R, false, false),
            (f, "/features/firmware", R, true, false),
            (x, "/features/foo", R, true, true),
            (x, "/features/foo", W, false, false),
            (x, "/features/foo/properties/special", R, true, false),
            (x, "/features/foo/properties/special/sub", R, true, false),
            (x, "/features/foo/properties/special/sub", W, false, false),
            (x, "/features/foo/properties/some", W, false, true),
        ],
    );
}

#[test]
fn scenario4_multiple_subjects() {
    let enforcer = compile(&[
        ("one", &["sid_1", "sid_2"], &[("/", RW, NONE), ("/attributes", NONE, RW)]),
        ("two", &["gid_3"], &[("/", NONE, W)]),
        (
            "three",
            &["gid_3"],
            &[
                ("/attributes", RW, NONE),
                ("/features", RW, NONE),
                ("/features/foo1", NONE, R),
                ("/features/foo2", NONE, W),
                ("/features/foo3", NONE, RW),
            ],
        ),
        (
            "four",
            &["gid_3", "gid_4"],
            &[
                ("/attributes/nogo1", NONE, RW),
                ("/attributes/nogo2", NONE, RW),
                ("/attributes/nogo1/go1", RW, NONE),
                ("/attributes/nogo2/go2", R, NONE),
            ],
        ),
        (
            "five",
            &["rid_5"],
            &[
                ("/features/public/properties/location", R, NONE),
                ("/features/lamp/properties/config/on", W, NONE),
            ],
        ),
        ("six_read", &["rid_5", "rid_6"], &[("/attributes/read_write", R, NONE)]),
        ("six_write", &["rid_6", "gid_3"], &[("/attributes/read_write", W, NONE)]),
        ("seven_write", &["rid_7"], &[("/attributes", W, NONE)]),
        ("eight", &["uid_8"], &[("/attributes", RW, NONE)]),
        (
            "nine_write_only",
            &["gid_9"],
            &[("/attribute/nogo2/go2", W, NONE), ("/attribute/nogo2", NONE, R)],
        ),
    ]);
    let s135: &[&str] = &["sid_1", "gid_3", "rid_5"];
    let s5: &[&str] = &["rid_5"];
    check(
        &enforcer,
        "Scenario4MultipleSubjects",
        &[
            (s135, "/", R, true, true),
            (s135, "/", W, false, false),
            (s135, "/attributes", W, false, false),
            (s135, "/features", R, true, true),
            (s135, "/features/foo1", R, true, false),
            (s135, "/features/foo1", W, false, true),
            (s135, "/features/foo3", R, true, false),
            (s135, "/attributes/nogo1", R, true, true),
            (s135, "/attributes/nogo2", W, true, false),
            (s135, "/attributes/nogo2/go2", R, true, true),
            (s135, "/features/public/properties/location", R, false, true),
            (s5, "/features/public/properties/location", R, false, true),
            (s5, "/features/public/properties/location", W, false, false),
            (s5, "/features/public", R, true, true),
            (s5, "/features/lamp/properties/config", W, false, false),
            (s5, "/features/lamp/properties/config", R, true, false),
            (s5, "/features/lamp/properties/config/on", W, true, true),
            (s5, "/features/lamp/properties/config/on", R, true, false),
            (&["rid_6"], "/attributes/read_write", RW, true, true),
            (&["gid_3", "rid_5"], "/attributes/read_write", RW, true, true),
            (&["rid_7", "gid_4"], "/attributes", W, false, false),
            (&["uid_8", "gid_4"], "/attributes", R, true, true),
            (&["uid_8", "gid_4"], "/attributes/nogo2", R, true, true),
            (&["uid_8", "gid_4"], "/attributes/nogo2/go2", R, true, true),
            (&["uid_8", "gid_4"], "/attributes", W, false, false),
            (&["uid_8", "gid_4"], "/attributes/nogo1/go1", W, false, true),
            (&["gid_4", "gid_9"], "/attributes/nogo1/go1", RW, false, true),
        ],
    );
}

#[test]
fn scenario5_revoke_elsewhere_does_not_touch_read() {
    let enforcer = compile(&[
        ("all", &["sid"], &[("/", R, NONE)]),
        ("revokeWriteOnPolicy", &["sid"], &[("/policy", NONE, W)]),
    ]);
    check(&enforcer, "Scenario5Simple", &[(&["sid"], "/policy", R, false, true)]);
}

fn json_view_policy() -> Arc<Enforcer> {
    compile(&[
        ("all", &["sid_all", "sid_all_attributes_revoked"], &[("/", RW, NONE)]),
        ("all-attributes", &["sid_all_attributes"], &[("/attributes", RW, NONE)]),
        ("attributes-revoked", &["sid_all_attributes_revoked"], &[("/attributes", NONE, RW)]),
        (
            "attributes-location-read-allowed",
            &["sid_all_attributes_revoked"],
            &[("/attributes/location", R, NONE)],
        ),
        ("features-read", &["sid_features_read"], &[("/features", R, NONE)]),
        (
            "features",
            &["sid_features_read_firmware_read_revoke"],
            &[("/features", R, NONE), ("/features/firmware", NONE, R)],
        ),
        ("features-foo", &["sid_feature_foo"], &[("/features/foo", RW, NONE)]),
        (
            "features-foo-special-property-revoked",
            &["sid_feature_foo"],
            &[("/features/foo/properties/special", NONE, RW)],
        ),
        ("features-revoked", &["sid_all_features_revoked"], &[("/features", NONE, R)]),
        (
            "some-granted-of-each",
            &["sid_some_granted"],
            &[
                ("/attributes/attr2", R, NONE),
                ("/attributes/location", R, NONE),
                ("/features/firmware/properties/modulesVersions/b", R, NONE),
                ("/features/foo/properties/special", R, NONE),
            ],
        ),
        (
            "some-revoked-of-each",
            &["sid_some_revoked"],
            &[
                ("/attributes/location/latitude", NONE, R),
                ("/features/firmware/properties/modulesVersions", NONE, R),
                ("/features/foo/properties/special", NONE, R),
            ],
        ),
        (
            "nonexistent-attribute-granted",
            &["sid_nonexistent"],
            &[("/attributes/location/nonexistentAttribute", R, NONE)],
        ),
    ])
}

fn thing() -> Value {
    json!({
        "attributes": {"attr1": 1, "attr2": "string", "attr3": false,
                       "location": {"latitude": 47.123, "longitude": 42.547}},
        "features": {
            "firmware": {"properties": {"version": "2.0.5", "updated": "2016-11-11T08:39:05Z",
                                        "modulesVersions": {"a": "3.2.0", "b": "42"}}},
            "foo": {"properties": {"ordinary": 123456, "special": "secret"}}
        }
    })
}

/// `THING.get(JsonFieldSelector.newInstance(paths))`.
fn select(value: &Value, paths: &[&str]) -> Value {
    let mut selected = json!({});
    for path in paths {
        let path = pointer(path);
        let Some(found) = path.get(value) else { continue };
        let mut at = &mut selected;
        for level in path.levels() {
            at = at.as_object_mut().unwrap().entry(level.clone()).or_insert(json!({}));
        }
        *at = found.clone();
    }
    selected
}

#[test]
fn json_view_scenarios() {
    let enforcer = json_view_policy();
    let thing = thing();
    let cases: [(&[&str], &[&str]); 10] = [
        (&["sid_all_attributes"], &["/attributes"]),
        (&["sid_features_read"], &["/features"]),
        (&["sid_all_attributes_revoked"], &["/attributes/location", "/features"]),
        (&["sid_features_read_firmware_read_revoke"], &["/features/foo"]),
        (&["sid_feature_foo"], &["/features/foo/properties/ordinary"]),
        (
            &["sid_feature_foo", "sid_all_attributes"],
            &["/attributes", "/features/foo/properties/ordinary"],
        ),
        (&["sid_all_features_revoked", "sid_all"], &["/attributes"]),
        (&["sid_all_features_revoked", "sid_features_read"], &[]),
        (
            &["sid_some_granted"],
            &[
                "/attributes/attr2",
                "/attributes/location",
                "/features/firmware/properties/modulesVersions/b",
                "/features/foo/properties/special",
            ],
        ),
        (
            &["sid_some_granted", "sid_some_revoked"],
            &[
                "/attributes/attr2",
                "/attributes/location/longitude",
                "/features/firmware/properties/modulesVersions/b",
            ],
        ),
    ];
    for (number, (subjects, visible)) in cases.iter().enumerate() {
        let view = caller(&enforcer, subjects).view("thing", &JsonPointer::root(), &thing);
        assert_eq!(view, Some(select(&thing, visible)), "JsonViewScenario{}", number + 1);
    }
}

#[test]
fn json_view_scenarios_below_the_root() {
    let enforcer = json_view_policy();
    let thing = thing();
    let firmware = pointer("/features/firmware");
    let view = caller(&enforcer, &["sid_some_granted", "sid_some_revoked"]).view(
        "thing",
        &firmware,
        firmware.get(&thing).unwrap(),
    );
    assert_eq!(
        view,
        Some(json!({"properties": {"modulesVersions": {"b": "42"}}})),
        "JsonViewScenario11"
    );

    let attributes = pointer("/attributes");
    let view = caller(&enforcer, &["sid_nonexistent"]).view(
        "thing",
        &attributes,
        attributes.get(&thing).unwrap(),
    );
    assert_eq!(view, Some(json!({})), "JsonViewScenario12");
}

#[test]
fn json_view_scenario13_a_feature_granted_to_a_client() {
    let body = json!({"entries": {
        "owner": {"subjects": {"google:owner": {"type": "generated"}},
                  "resources": {"policy:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                "thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                "message:/": {"grant": ["READ", "WRITE"], "revoke": []}}},
        "client": {"subjects": {"google:client": {"type": "generated"}},
                   "resources": {"thing:/features/Gyroscope.0": {"grant": ["READ", "WRITE"], "revoke": []}}}}});
    let enforcer = Enforcer::compile(
        &Policy::from_json("org.eclipse.ditto:JsonViewScenario13", &body).unwrap(),
    );
    let feature = json!({"properties": {"status": {"minRangeValue": -2000, "units": "Deg/s"}}});
    let client = enforcer.caller(&["google:client"], Timestamp::now());
    let at = pointer("/features/Gyroscope.0");
    assert!(client.has_permissions("thing", &at, &[Permission::Read, Permission::Write]));
    assert_eq!(client.view("thing", &at, &feature), Some(feature.clone()));
    assert_eq!(
        client.view(
            "thing",
            &JsonPointer::root(),
            &json!({"features": {"Gyroscope.0": feature.clone()}, "attributes": {"a": 1}})
        ),
        Some(json!({"features": {"Gyroscope.0": feature}}))
    );
    assert_eq!(client.view("thing", &pointer("/attributes"), &json!({"a": 1})), None);
    assert!(!client.has_permission("policy", &JsonPointer::root(), Permission::Read));
}

#[test]
fn nothing_readable_is_none_and_scalars_come_whole() {
    let enforcer = scenario3_policy();
    let f = caller(&enforcer, &["f"]);
    assert_eq!(f.view("thing", &pointer("/attributes"), &json!({"a": 1})), None);
    assert_eq!(
        f.view("thing", &pointer("/features/x/properties/on"), &json!(true)),
        Some(json!(true))
    );
    assert_eq!(caller(&enforcer, &["nobody"]).view("thing", &JsonPointer::root(), &thing()), None);
    // Arrays are leaves: a grant inside one does not reach its items.
    let a = caller(&enforcer, &["a"]);
    assert_eq!(
        a.view(
            "thing",
            &JsonPointer::root(),
            &json!({"attributes": {"location": [1, 2], "x": []}, "y": {}})
        ),
        Some(json!({"attributes": {"location": [1, 2]}, "y": {}}))
    );
}

#[test]
fn resource_types_are_separate_trees() {
    let body = json!({"entries": {"E": {
        "subjects": {"nginx:alice": {"type": "t"}},
        "resources": {"policy:/": {"grant": ["READ"], "revoke": []},
                      "message:/inbox": {"grant": ["WRITE"], "revoke": []}}}}});
    let enforcer = Enforcer::compile(&Policy::from_json("ns:p", &body).unwrap());
    let alice = enforcer.caller(&["nginx:alice"], Timestamp::now());
    assert!(alice.has_permission("policy", &JsonPointer::root(), Permission::Read));
    assert!(!alice.has_permission("thing", &JsonPointer::root(), Permission::Read));
    assert!(alice.has_permission("message", &pointer("/inbox/messages/x"), Permission::Write));
    assert!(!alice.has_permission("message", &pointer("/outbox"), Permission::Write));
    assert!(!alice.has_permission("policy", &JsonPointer::root(), Permission::Execute));
}

#[test]
fn expired_subjects_count_no_more() {
    let body = json!({"entries": {
        "TEMP": {"subjects": {"nginx:alice": {"type": "t", "expiry": "2030-01-01T00:00:00Z"}},
                 "resources": {"thing:/": {"grant": ["READ"], "revoke": []}}},
        "FOREVER": {"subjects": {"nginx:alice": {"type": "t"}},
                    "resources": {"thing:/attributes": {"grant": ["READ"], "revoke": []}}}}});
    let enforcer = Enforcer::compile(&Policy::from_json("ns:p", &body).unwrap());
    let before = Timestamp::parse("2029-12-31T23:59:59Z").unwrap();
    let after = Timestamp::parse("2030-01-01T00:00:01Z").unwrap();
    let root = JsonPointer::root();
    assert!(enforcer.caller(&["nginx:alice"], before).has_permission(
        "thing",
        &root,
        Permission::Read
    ));
    let later = enforcer.caller(&["nginx:alice"], after);
    assert!(!later.has_permission("thing", &root, Permission::Read));
    assert!(later.has_permission("thing", &pointer("/attributes/x"), Permission::Read));
}

#[test]
fn merge_patches_need_write_on_every_leaf() {
    let body = json!({"entries": {"E": {
        "subjects": {"nginx:alice": {"type": "t"}},
        "resources": {"thing:/attributes": {"grant": ["WRITE"], "revoke": []},
                      "thing:/attributes/locked": {"grant": [], "revoke": ["WRITE"]},
                      "thing:/features/lamp/properties": {"grant": ["WRITE"], "revoke": []}}}}});
    let enforcer = Enforcer::compile(&Policy::from_json("ns:p", &body).unwrap());
    let alice = enforcer.caller(&["nginx:alice"], Timestamp::now());
    let root = JsonPointer::root();
    let cases = [
        (json!({"attributes": {"a": 1, "b": null}}), true),
        (json!({"attributes": {"locked": 1}}), false),
        (json!({"attributes": {"a": 1}, "features": {"lamp": {"properties": {"on": true}}}}), true),
        (json!({"features": {"lamp": {"definition": ["x"]}}}), false),
        (json!({"attributes": {"{{ /a.*/ }}": null}}), false),
        (json!({"features": {"lamp": {"properties": {"{{ /o.*/ }}": null}}}}), true),
        (json!({}), true),
        (json!({"policyId": "ns:q"}), false),
    ];
    for (patch, allowed) in cases {
        assert_eq!(alice.may_merge("thing", &root, &patch), allowed, "{patch}");
    }
    assert!(alice.may_merge("thing", &pointer("/features/lamp/properties"), &json!({"on": 1})));
    let bob = enforcer.caller(&["nginx:bob"], Timestamp::now());
    assert!(!bob.may_merge("thing", &root, &json!({})));
}

#[test]
fn default_policy_has_dittos_shape() {
    let creator = SubjectId::parse("nginx:alice").unwrap();
    let policy = Policy::default_for_thing("org.acme:lamp", creator).unwrap();
    assert_eq!(
        serde_json::to_string(&policy.to_json()).unwrap(),
        r#"{"policyId":"org.acme:lamp","entries":{"DEFAULT":{"subjects":{"nginx:alice":{"type":"generated"}},"resources":{"thing:/":{"grant":["READ","WRITE"],"revoke":[]},"policy:/":{"grant":["READ","WRITE"],"revoke":[]},"message:/":{"grant":["READ","WRITE"],"revoke":[]}},"importable":"implicit"}}}"#
    );
    let enforcer = Enforcer::compile(&policy);
    let alice = enforcer.caller(&["nginx:alice"], Timestamp::now());
    for resource_type in ["thing", "policy", "message"] {
        assert!(alice.has_permissions(
            resource_type,
            &JsonPointer::root(),
            &[Permission::Read, Permission::Write]
        ));
    }
}

fn owner_policy() -> Policy {
    let body = json!({"entries": {
        "OWNER": {"subjects": {"nginx:alice": {"type": "generated"}},
                  "resources": {"policy:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                "thing:/": {"grant": ["READ", "WRITE"], "revoke": []}}},
        "GUEST": {"subjects": {"nginx:bob": {"type": "generated"}},
                  "resources": {"thing:/": {"grant": ["READ"], "revoke": []}}}}});
    Policy::create("org.acme:p1", &body, &PolicyLimits::default(), Timestamp::now()).unwrap()
}

#[test]
fn policies_parse_and_print_in_dittos_order() {
    let body = json!({
        "entries": {"B": {"subjects": {}, "resources": {}}, "A": {}},
        "imports": {"org.acme:template": {"entries": ["EXPLICIT"]}},
        "_revision": 7, "unknown": true, "policyId": "org.acme:p1"
    });
    let mut policy = Policy::from_json("org.acme:p1", &body).unwrap();
    assert_eq!(
        serde_json::to_string(&policy.to_json()).unwrap(),
        r#"{"policyId":"org.acme:p1","imports":{"org.acme:template":{"entries":["EXPLICIT"]}},"entries":{"B":{"subjects":{},"resources":{},"importable":"implicit"},"A":{"subjects":{},"resources":{},"importable":"implicit"}}}"#
    );
    policy.housekeeping = Housekeeping {
        revision: 3,
        created: Timestamp::parse("2024-01-01T00:00:00Z"),
        modified: Timestamp::parse("2024-01-02T00:00:00.5Z"),
    };
    let all = policy.to_json_with_housekeeping();
    let keys: Vec<&String> = all.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["_revision", "_modified", "_created", "_namespace", "policyId", "imports", "entries"]
    );
    assert_eq!(all["_revision"], json!(3));
    assert_eq!(all["_modified"], json!("2024-01-02T00:00:00.500Z"));
    assert_eq!(all["_namespace"], json!("org.acme"));
}

#[test]
fn policy_parse_errors_carry_dittos_codes() {
    let cases = [
        ("org.acme:p1", json!({"policyId": "org.acme:other"}), "policies:id.notsettable"),
        ("org.acme:p1", json!({"policyId": 1}), "json.invalid"),
        ("no-colon", json!({}), "policies:id.invalid"),
        ("1acme:p", json!({}), "policies:id.invalid"),
        ("org.acme:a/b", json!({}), "policies:id.invalid"),
        ("org.acme:p1", json!([]), "json.invalid"),
        ("org.acme:p1", json!({"entries": []}), "json.invalid"),
        ("org.acme:p1", json!({"entries": {"a/b": {}}}), "policies:entry.invalid"),
        ("org.acme:p1", json!({"entries": {"imported-x": {}}}), "policies:label.invalid"),
        ("org.acme:p1", json!({"entries": {"L": 5}}), "json.invalid"),
        ("org.acme:p1", json!({"imports": {"bad": {}}}), "policies:id.invalid"),
        ("org.acme:p1", json!({"imports": []}), "json.invalid"),
    ];
    for (id, body, code) in cases {
        assert_eq!(Policy::from_json(id, &body).unwrap_err().error, code, "{id} {body}");
    }
    assert!(Policy::new(":no-namespace").is_ok());
    assert!(Policy::new("a.b-c_1:x:y").is_ok());
}

#[test]
fn a_policy_without_a_permanent_writer_is_refused() {
    let limits = PolicyLimits::default();
    let now = Timestamp::now();
    let no_writer = json!({"entries": {"R": {"subjects": {"nginx:a": {"type": "t"}},
        "resources": {"policy:/": {"grant": ["READ"], "revoke": []}}}}});
    let error = Policy::create("ns:p", &no_writer, &limits, now).unwrap_err();
    assert_eq!((error.status, error.error), (403, "policies:policy.modificationinvalid"));
    assert_eq!(
        error.description.as_deref(),
        Some(
            "It must contain at least one permanent Subject with permission(s) <[WRITE]> on resource <policy:/>!"
        )
    );
    // A writer on a path below policy:/ or with an expiry does not count,
    // nor one that another entry revokes WRITE from.
    let cases = [
        json!({"E": {"subjects": {"nginx:a": {"type": "t"}}, "resources": {"policy:/entries": {"grant": ["WRITE"], "revoke": []}}}}),
        json!({"E": {"subjects": {"nginx:a": {"type": "t", "expiry": "2999-01-01T00:00:00Z"}}, "resources": {"policy:/": {"grant": ["WRITE"], "revoke": []}}}}),
        json!({"E": {"subjects": {"nginx:a": {"type": "t"}}, "resources": {"policy:/": {"grant": ["WRITE"], "revoke": []}}},
               "F": {"subjects": {"nginx:a": {"type": "t"}}, "resources": {"policy:/": {"grant": [], "revoke": ["WRITE"]}}}}),
    ];
    for entries in cases {
        let error =
            Policy::create("ns:p", &json!({ "entries": entries }), &limits, now).unwrap_err();
        assert_eq!(error.error, "policies:policy.modificationinvalid", "{entries}");
    }
    // A policy with imports is not checked, as in Ditto.
    let imports = json!({"imports": {"ns:template": {}}});
    assert!(Policy::create("ns:p", &imports, &limits, now).is_ok());
}

#[test]
fn entry_writes_that_lock_out_are_refused_at_entry_level() {
    let limits = PolicyLimits::default();
    let now = Timestamp::now();
    let mut policy = owner_policy();
    let before = policy.clone();
    let owner = Label::parse("OWNER").unwrap();
    let alice = SubjectId::parse("nginx:alice").unwrap();
    let policy_root = ResourceKey::parse("policy:/").unwrap();
    let errors = [
        policy.delete_entry(&owner, &limits, now).unwrap_err(),
        policy.delete_subject(&owner, &alice, &limits, now).unwrap_err(),
        policy.delete_resource(&owner, &policy_root, &limits, now).unwrap_err(),
        policy
            .modify_resource(
                &owner,
                &policy_root,
                &json!({"grant": ["READ"], "revoke": []}),
                &limits,
                now,
            )
            .unwrap_err(),
        policy.modify_subjects(&owner, &json!({}), &limits, now).unwrap_err(),
        policy.modify_resources(&owner, &json!({}), &limits, now).unwrap_err(),
        policy.modify_entry(&owner, &json!({}), &limits, now).unwrap_err(),
    ];
    for error in errors {
        assert_eq!((error.status, error.error), (403, "policies:entry.modificationinvalid"));
        assert_eq!(
            error.message,
            "The PolicyEntry with Label 'OWNER' on the Policy with ID 'org.acme:p1' could not be modified as the resulting Policy would be invalid."
        );
    }
    let error = policy.modify_entries(&json!({}), &limits, now).unwrap_err();
    assert_eq!(error.error, "policies:policy.modificationinvalid");
    assert_eq!(policy, before, "a refused write changes nothing");
}

#[test]
fn sub_resources_answer_201_then_204_and_404_when_missing() {
    let limits = PolicyLimits::default();
    let now = Timestamp::now();
    let mut policy = owner_policy();
    let guest = Label::parse("GUEST").unwrap();
    let carol = SubjectId::parse("nginx:carol").unwrap();
    let subject = json!({"type": "generated"});
    assert_eq!(
        policy.modify_subject(&guest, &carol, &subject, &limits, now).unwrap().status(),
        201
    );
    assert_eq!(
        policy.modify_subject(&guest, &carol, &subject, &limits, now).unwrap().status(),
        204
    );
    assert_eq!(policy.subject(&guest, &carol).unwrap().to_json(), subject);

    let key = ResourceKey::from_url_path("/thing:/features/lamp").unwrap();
    let resource = json!({"grant": ["WRITE"], "revoke": []});
    assert_eq!(
        policy.modify_resource(&guest, &key, &resource, &limits, now).unwrap(),
        Written::Created
    );
    assert_eq!(
        policy.modify_resource(&guest, &key, &resource, &limits, now).unwrap(),
        Written::Modified
    );
    assert_eq!(policy.resource(&guest, &key).unwrap().to_json(), resource);

    let new = Label::parse("NEW").unwrap();
    assert_eq!(policy.modify_entry(&new, &json!({}), &limits, now).unwrap(), Written::Created);
    assert_eq!(
        policy.modify_entry(&new, &json!({"importable": "never"}), &limits, now).unwrap(),
        Written::Modified
    );
    assert_eq!(
        policy.modify_subjects(&new, &json!({"nginx:d": subject}), &limits, now).unwrap(),
        Written::Modified
    );
    assert_eq!(policy.modify_resources(&new, &json!({}), &limits, now).unwrap(), Written::Modified);
    let labels: Vec<&str> = policy.entries().map(|e| e.label.as_str()).collect();
    assert_eq!(labels, ["OWNER", "GUEST", "NEW"]);
    policy.delete_entry(&new, &limits, now).unwrap();

    policy.delete_subject(&guest, &carol, &limits, now).unwrap();
    policy.delete_resource(&guest, &key, &limits, now).unwrap();
    let missing = Label::parse("MISSING").unwrap();
    let cases = [
        (policy.subject(&guest, &carol).unwrap_err(), "policies:subject.notfound"),
        (
            policy.delete_subject(&guest, &carol, &limits, now).unwrap_err(),
            "policies:subject.notfound",
        ),
        (policy.resource(&guest, &key).unwrap_err(), "policies:resource.notfound"),
        (
            policy.delete_resource(&guest, &key, &limits, now).unwrap_err(),
            "policies:resource.notfound",
        ),
        (policy.entry(&missing).unwrap_err(), "policies:entry.notfound"),
        (policy.delete_entry(&missing, &limits, now).unwrap_err(), "policies:entry.notfound"),
        (
            policy.modify_subject(&missing, &carol, &subject, &limits, now).unwrap_err(),
            "policies:entry.notfound",
        ),
        (
            policy.modify_subjects(&missing, &json!({}), &limits, now).unwrap_err(),
            "policies:entry.notfound",
        ),
        (
            policy.modify_resource(&missing, &key, &resource, &limits, now).unwrap_err(),
            "policies:entry.notfound",
        ),
        (
            policy.modify_resources(&missing, &json!({}), &limits, now).unwrap_err(),
            "policies:entry.notfound",
        ),
    ];
    for (error, code) in cases {
        assert_eq!((error.status, error.error), (404, code));
    }
    assert_eq!(
        policy.resource(&guest, &key).unwrap_err().message,
        "The Resource 'thing:/features/lamp' of the PolicyEntry with Label 'GUEST' on the Policy with ID 'org.acme:p1' could not be found or requester had insufficient permissions to access it."
    );
    assert_eq!(policy, owner_policy());
}

#[test]
fn expiries_are_rounded_and_must_lie_ahead() {
    let limits = PolicyLimits::default();
    let now = Timestamp::parse("2030-01-01T10:00:00Z").unwrap();
    let mut policy = owner_policy();
    let guest = Label::parse("GUEST").unwrap();
    let carol = SubjectId::parse("nginx:carol").unwrap();
    let soon = json!({"type": "t", "expiry": "2030-01-01T10:20:00Z"});
    policy.modify_subject(&guest, &carol, &soon, &limits, now).unwrap();
    let stored = policy.subject(&guest, &carol).unwrap().expiry.unwrap();
    assert_eq!(stored.to_string(), "2030-01-01T11:00:00Z");

    let past = json!({"type": "t", "expiry": "2030-01-01T08:00:00Z"});
    let error = policy.modify_subject(&guest, &carol, &past, &limits, now).unwrap_err();
    assert_eq!(error.error, "policies:subjectexpiry.invalid");
    assert_eq!(error.message, "Subject expiry timestamp '2030-01-01T08:00:00Z' is not valid.");
    assert_eq!(
        error.description.as_deref(),
        Some("It must not be in the past, please adjust to a timestamp in the future.")
    );

    // Once carol has expired, other writes still go through, and the
    // store can drop her.
    let later = Timestamp::parse("2030-01-02T00:00:00Z").unwrap();
    let dave = SubjectId::parse("nginx:dave").unwrap();
    policy.modify_subject(&guest, &dave, &json!({"type": "t"}), &limits, later).unwrap();
    assert!(policy.remove_expired_subjects(later));
    assert!(policy.subject(&guest, &carol).is_err());
    assert!(!policy.remove_expired_subjects(later));
}

#[test]
fn policies_beyond_the_size_limit_are_refused() {
    let limits = PolicyLimits { max_bytes: 400, ..PolicyLimits::default() };
    let now = Timestamp::now();
    let mut policy = owner_policy();
    let guest = Label::parse("GUEST").unwrap();
    let big = SubjectId::parse(&format!("nginx:{}", "x".repeat(200))).unwrap();
    let error =
        policy.modify_subject(&guest, &big, &json!({"type": "t"}), &limits, now).unwrap_err();
    assert_eq!((error.status, error.error), (413, "policies:policy.toolarge"));
    assert!(
        error.message.ends_with("exceeds the maximal allowed Policy size of '0.391' kB."),
        "{}",
        error.message
    );
    assert_eq!(policy, owner_policy());
}

#[test]
fn import_commands_answer_as_dittos_strategies() {
    let limits = PolicyLimits::default();
    let now = Timestamp::now();
    let mut policy = owner_policy();
    let id = |n: usize| PolicyId::parse(&format!("ns:t{n}")).unwrap();
    assert_eq!(policy.imports_json(), json!({}));
    assert_eq!(policy.modify_import(&id(0), &json!({}), &limits, now).unwrap(), Written::Created);
    let listed = json!({"entries": ["A"]});
    assert_eq!(policy.modify_import(&id(0), &listed, &limits, now).unwrap(), Written::Modified);
    let entries = json!(["B"]);
    assert_eq!(
        policy.modify_import_entries(&id(0), &entries, &limits, now).unwrap(),
        Written::Modified
    );
    assert_eq!(policy.import(&id(0)).unwrap().entries_json(), json!(["B"]));

    let missing = policy.modify_import_entries(&id(1), &entries, &limits, now).unwrap_err();
    assert_eq!((missing.status, missing.error), (404, "policies:import.notfound"));
    assert_eq!(policy.delete_import(&id(1), &limits, now).unwrap_err().error, missing.error);
    let itself = PolicyId::parse(policy.policy_id()).unwrap();
    let error = policy.modify_import(&itself, &json!({}), &limits, now).unwrap_err();
    assert_eq!(error.error, "policies:import.invalid");

    // The eleventh import: named by the one added, or counted when all
    // imports are replaced, or named by the policy when it is put whole.
    for n in 1..IMPORTS_MAX {
        policy.modify_import(&id(n), &json!({}), &limits, now).unwrap();
    }
    let error = policy.modify_import(&id(99), &json!({}), &limits, now).unwrap_err();
    assert_eq!(error.error, "policies:imports.toolarge");
    assert_eq!(
        error.message,
        "The Imports of the Policy with ID 'ns:t99' could not be modified as they exceed the allowed number of '10'."
    );
    let eleven: Map<String, Value> =
        (0..=IMPORTS_MAX).map(|n| (id(n).to_string(), json!({}))).collect();
    let error = policy.modify_imports(&Value::Object(eleven.clone()), &limits, now).unwrap_err();
    assert_eq!(
        error.message,
        "The number of '11' policy imports exceeds the allowed maximum number of '10'."
    );
    let mut whole = policy.to_json();
    whole["imports"] = Value::Object(eleven);
    let error = policy.modify(&whole, &limits, now).unwrap_err();
    assert_eq!(error.error, "policies:imports.toolarge");
    assert!(error.message.starts_with(&format!("The Imports of the Policy with ID '{itself}'")));
}

#[test]
fn removing_imports_is_not_held_to_the_lock_out_rule() {
    // As Ditto's import strategies run no `PoliciesValidator`: without
    // its import, this policy has no writer left, and that is let be.
    let limits = PolicyLimits::default();
    let now = Timestamp::now();
    let body = json!({"imports": {"ns:template": {}}, "entries": {}});
    let mut policy = Policy::create("ns:p", &body, &limits, now).unwrap();
    let template = PolicyId::parse("ns:template").unwrap();
    policy.delete_import(&template, &limits, now).unwrap();
    assert_eq!(policy.to_json()["imports"], json!({}));
    let error = policy.modify_entries(&json!({}), &limits, now).unwrap_err();
    assert_eq!(error.error, "policies:policy.modificationinvalid");
}
