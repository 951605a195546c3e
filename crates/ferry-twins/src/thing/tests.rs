//! Every resource under every operation, and every error on the way.

use super::*;
use crate::pointer::JsonPointer;
use crate::policy::Timestamp;
use serde_json::json;

fn at(n: i64) -> Timestamp {
    Timestamp::from_unix(1_700_000_000 + n, 123_456_000)
}

fn id() -> ThingId {
    ThingId::parse("org.acme:sensor-1").unwrap()
}

fn resource(path: &str) -> ThingResource {
    ThingResource::parse(path).unwrap().unwrap()
}

fn p(text: &str) -> JsonPointer {
    JsonPointer::parse(text).unwrap()
}

fn sample() -> Thing {
    let body = json!({
        "policyId": "org.acme:policy",
        "definition": "org.acme:sensor:1.0.0",
        "attributes": {"location": {"floor": 3}, "serial": "A1"},
        "features": {
            "temp": {
                "definition": ["org.acme:temp:1.0.0"],
                "properties": {"value": 19.5},
                "desiredProperties": {"value": 22.0},
            },
            "bare": {},
        },
    });
    Thing::create(ThingBody::for_put(&id(), &body).unwrap(), &at(0), &ThingLimits::default())
        .unwrap()
}

fn modify(thing: &mut Thing, path: &str, value: Value) -> Result<Written, DittoError> {
    thing.modify(&resource(path), &value, &at(1), &ThingLimits::default())
}

fn merge(thing: &mut Thing, path: &str, patch: Value) -> Result<(), DittoError> {
    thing.merge(&resource(path), &patch, &at(1), &ThingLimits::default())
}

fn error_code(result: Result<impl std::fmt::Debug, DittoError>) -> (u16, &'static str) {
    let error = result.unwrap_err();
    (error.status, error.error)
}

// --- creation -------------------------------------------------------------

#[test]
fn put_creates_at_revision_one_with_the_url_id() {
    let thing = sample();
    assert_eq!(thing.revision(), 1);
    assert_eq!(thing.created(), thing.modified());
    assert_eq!(thing.document()["thingId"], "org.acme:sensor-1");
    let keys: Vec<&str> = thing.document().keys().map(String::as_str).collect();
    assert_eq!(keys, ["thingId", "policyId", "definition", "attributes", "features"]);
}

#[test]
fn put_body_id_must_match_the_url() {
    ThingBody::for_put(&id(), &json!({"thingId": "org.acme:sensor-1"})).unwrap();
    let error = ThingBody::for_put(&id(), &json!({"thingId": "org.acme:other"})).unwrap_err();
    assert_eq!(error.error, "things:id.notsettable");
    assert_eq!(
        error.message,
        "The Thing ID in the request body is not equal to the Thing ID in the request URL."
    );
    assert_eq!(
        error_code(ThingBody::for_put(&id(), &json!({"thingId": 5}))),
        (400, "things:id.notsettable")
    );
    assert_eq!(error_code(ThingBody::for_put(&id(), &json!([1]))), (400, "json.invalid"));
}

#[test]
fn post_refuses_a_body_id_and_generates_one() {
    let error = ThingBody::for_post(None, &json!({"thingId": "a:b"})).unwrap_err();
    assert_eq!(error.error, "things:id.notsettable");
    assert_eq!(
        error.description.as_deref(),
        Some("To provide your own Thing ID use a PUT request instead.")
    );

    let body = ThingBody::for_post(None, &json!({"attributes": {"a": 1}})).unwrap();
    assert_eq!(body.thing_id().namespace(), "");
    assert_eq!(body.document()["thingId"], body.thing_id().as_str());
    let body = ThingBody::for_post(Some("org.acme"), &json!({})).unwrap();
    assert_eq!(body.thing_id().namespace(), "org.acme");
    assert_eq!(error_code(ThingBody::for_post(Some("1x"), &json!({}))), (400, "things:id.invalid"));
}

#[test]
fn inline_policies_are_exposed_for_the_caller() {
    let mut body =
        ThingBody::for_put(&id(), &json!({"_policy": {"entries": {}}, "attributes": {}})).unwrap();
    assert_eq!(body.inline_policy(), Some(json!({"entries": {}}).as_object().unwrap()));
    assert!(!body.document().contains_key("_policy"));
    assert_eq!(body.policy_id(), None);
    body.set_policy_id(&PolicyId::parse("org.acme:sensor-1").unwrap());
    let keys: Vec<&str> = body.document().keys().map(String::as_str).collect();
    assert_eq!(keys, ["thingId", "policyId", "attributes"]);

    let copy = ThingBody::for_put(&id(), &json!({"_copyPolicyFrom": "org.acme:template"})).unwrap();
    assert_eq!(copy.copy_policy_from(), Some("org.acme:template"));

    let error =
        ThingBody::for_put(&id(), &json!({"_policy": {}, "_copyPolicyFrom": "a:b"})).unwrap_err();
    assert_eq!(error.error, "things:policy.conflicting");
    assert_eq!(
        error.message,
        "The Thing with ID 'org.acme:sensor-1' could not be created as it contained an inline Policy as well as a policyID to copy."
    );
}

#[test]
fn creation_is_refused_above_the_size_limit() {
    let body =
        ThingBody::for_put(&id(), &json!({"attributes": {"blob": "x".repeat(200)}})).unwrap();
    let limits = ThingLimits { size_max_bytes: 100 };
    assert_eq!(error_code(Thing::create(body, &at(0), &limits)), (413, "things:thing.toolarge"));
}

// --- retrieve ---------------------------------------------------------------

#[test]
fn retrieves_every_resource() {
    let thing = sample();
    let cases = [
        ("/policyId", json!("org.acme:policy")),
        ("/definition", json!("org.acme:sensor:1.0.0")),
        ("/attributes", json!({"location": {"floor": 3}, "serial": "A1"})),
        ("/attributes/location/floor", json!(3)),
        ("/features/bare", json!({})),
        ("/features/temp/definition", json!(["org.acme:temp:1.0.0"])),
        ("/features/temp/properties", json!({"value": 19.5})),
        ("/features/temp/properties/value", json!(19.5)),
        ("/features/temp/desiredProperties", json!({"value": 22.0})),
        ("/features/temp/desiredProperties/value", json!(22.0)),
    ];
    for (path, expected) in cases {
        assert_eq!(thing.retrieve(&resource(path), None).unwrap(), expected, "{path}");
    }
    assert_eq!(
        thing.retrieve(&ThingResource::Thing, None).unwrap(),
        Value::Object(thing.document().clone())
    );
    assert_eq!(
        thing.retrieve(&ThingResource::Features, None).unwrap(),
        thing.document()["features"]
    );
}

#[test]
fn retrieve_answers_the_first_missing_level() {
    let thing = sample();
    let cases = [
        ("/attributes/nope", "things:attribute.notfound"),
        ("/features/nope", "things:feature.notfound"),
        ("/features/nope/properties", "things:feature.notfound"),
        ("/features/nope/properties/x", "things:feature.notfound"),
        ("/features/nope/definition", "things:feature.notfound"),
        ("/features/bare/definition", "things:feature.definition.notfound"),
        ("/features/bare/properties", "things:feature.properties.notfound"),
        ("/features/bare/properties/x", "things:feature.properties.notfound"),
        ("/features/temp/properties/x", "things:feature.property.notfound"),
        ("/features/bare/desiredProperties", "things:feature.desiredProperties.notfound"),
        ("/features/bare/desiredProperties/x", "things:feature.desiredProperties.notfound"),
        ("/features/temp/desiredProperties/x", "things:feature.desiredProperty.notfound"),
    ];
    for (path, code) in cases {
        assert_eq!(error_code(thing.retrieve(&resource(path), None)), (404, code), "{path}");
    }

    let empty = Thing::create(
        ThingBody::for_put(&id(), &json!({})).unwrap(),
        &at(0),
        &ThingLimits::default(),
    )
    .unwrap();
    let cases = [
        ("/policyId", "things:policyId.notfound"),
        ("/definition", "things:definition.notfound"),
        ("/attributes", "things:attributes.notfound"),
        ("/attributes/a", "things:attributes.notfound"),
        ("/features", "things:features.notfound"),
        ("/features/f", "things:feature.notfound"),
    ];
    for (path, code) in cases {
        assert_eq!(error_code(empty.retrieve(&resource(path), None)), (404, code), "{path}");
    }
}

#[test]
fn not_found_messages_read_as_dittos() {
    let thing = sample();
    let error = thing.retrieve(&resource("/attributes/a/b"), None).unwrap_err();
    assert_eq!(
        error.message,
        "The attribute with key '/a/b' on the thing with ID 'org.acme:sensor-1' could not be found or the requester had insufficient permissions to access it."
    );
    let error = thing.retrieve(&resource("/features/temp/properties/x/y"), None).unwrap_err();
    assert_eq!(
        error.message,
        "The Property with JSON Pointer '/x/y' of the Feature with ID 'temp' on the Thing with ID 'org.acme:sensor-1' does not exist or the requester had insufficient permissions to access it."
    );
    let error = thing.retrieve(&resource("/features/x"), None).unwrap_err();
    assert_eq!(
        error.description.as_deref(),
        Some("Check if the ID of the Thing and the ID of your requested Feature was correct and you have sufficient permissions.")
    );
}

#[test]
fn fields_select_housekeeping_and_document_alike() {
    let mut thing = sample();
    modify(&mut thing, "/attributes/serial", json!("B2")).unwrap();
    let selector = FieldSelector::parse("_revision,thingId,_modified,_created,_namespace").unwrap();
    assert_eq!(
        serde_json::to_string(&thing.to_json(Some(&selector), None)).unwrap(),
        format!(
            r#"{{"_revision":2,"thingId":"org.acme:sensor-1","_modified":"{}","_created":"{}","_namespace":"org.acme"}}"#,
            at(1),
            at(0)
        )
    );
    let selector = FieldSelector::parse("_metadata/attributes,_policy").unwrap();
    let policy = json!({"entries": {}});
    assert_eq!(
        thing.to_json(Some(&selector), Some(&policy)),
        json!({
            "_metadata": {"attributes": {
                "location": {"floor": {"_modified": at(0).to_string()}},
                "serial": {"_modified": at(1).to_string()},
            }},
            "_policy": {"entries": {}},
        })
    );
    let selector = FieldSelector::parse("features/*/properties/value,attributes/location").unwrap();
    assert_eq!(
        thing.retrieve(&ThingResource::Thing, Some(&selector)).unwrap(),
        json!({"features": {"temp": {"properties": {"value": 19.5}}}, "attributes": {"location": {"floor": 3}}})
    );
    let selector = FieldSelector::parse("*/definition").unwrap();
    assert_eq!(
        thing.retrieve(&ThingResource::Features, Some(&selector)).unwrap(),
        json!({"temp": {"definition": ["org.acme:temp:1.0.0"]}})
    );
    let selector = FieldSelector::parse("location").unwrap();
    assert_eq!(
        thing.retrieve(&resource("/attributes"), Some(&selector)).unwrap(),
        json!({"location": {"floor": 3}})
    );
    assert_eq!(
        thing.to_json(None, None),
        Value::Object(thing.document().clone()),
        "no housekeeping by default"
    );
}

// --- modify (PUT) -------------------------------------------------------------

#[test]
fn put_creates_or_modifies_each_resource() {
    let mut thing = sample();
    let cases = [
        ("/policyId", json!("org.acme:other"), false),
        ("/definition", json!("https://models.acme.org/sensor.tm.jsonld"), false),
        ("/attributes", json!({"a": 1}), false),
        ("/attributes/a", json!(2), false),
        ("/attributes/b/c", json!([1, 2]), true),
        ("/features", json!({"temp": {"properties": {"value": 1}}}), false),
        ("/features/temp", json!({"properties": {"value": 2}}), false),
        ("/features/lamp", json!({"properties": {"on": true}}), true),
        ("/features/lamp/definition", json!(["org.acme:lamp:1.0.0"]), true),
        ("/features/lamp/definition", json!(["org.acme:lamp:2.0.0"]), false),
        ("/features/lamp/properties", json!({"on": false}), false),
        ("/features/lamp/properties/color/r", json!(255), true),
        ("/features/lamp/properties/color/r", json!(0), false),
        ("/features/lamp/desiredProperties", json!({"on": true}), true),
        ("/features/lamp/desiredProperties/on", json!(false), false),
        ("/features/lamp/desiredProperties/level", json!(3), true),
    ];
    let mut revision = thing.revision();
    for (path, value, created) in cases {
        let written =
            modify(&mut thing, path, value.clone()).unwrap_or_else(|e| panic!("{path}: {e}"));
        let expected = if created { Written::Created(value.clone()) } else { Written::Modified };
        assert_eq!(written, expected, "{path}");
        assert_eq!(thing.retrieve(&resource(path), None).unwrap(), value, "{path}");
        revision += 1;
        assert_eq!(thing.revision(), revision);
        assert_eq!(thing.modified(), &at(1));
    }
    let lamp_keys: Vec<&str> = thing.document()["features"]["lamp"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        lamp_keys,
        ["definition", "properties", "desiredProperties"],
        "Ditto's order, whatever came first"
    );
}

#[test]
fn put_creates_top_level_resources_in_dittos_order() {
    let mut thing = Thing::create(
        ThingBody::for_put(&id(), &json!({})).unwrap(),
        &at(0),
        &ThingLimits::default(),
    )
    .unwrap();
    assert_eq!(modify(&mut thing, "/features", json!({})).unwrap(), Written::Created(json!({})));
    assert_eq!(modify(&mut thing, "/attributes", json!({})).unwrap(), Written::Created(json!({})));
    assert_eq!(
        modify(&mut thing, "/definition", json!("a:b:c")).unwrap(),
        Written::Created(json!("a:b:c"))
    );
    assert_eq!(
        modify(&mut thing, "/policyId", json!("a:p")).unwrap(),
        Written::Modified,
        "always 204"
    );
    let keys: Vec<&str> = thing.document().keys().map(String::as_str).collect();
    assert_eq!(keys, ["thingId", "policyId", "definition", "attributes", "features"]);
    assert_eq!(
        modify(&mut thing, "/attributes/x", json!(1)).unwrap(),
        Written::Created(json!(1)),
        "an attribute needs no attributes object to exist"
    );
}

#[test]
fn put_of_the_thing_replaces_it_and_keeps_its_policy() {
    let mut thing = sample();
    assert_eq!(
        modify(&mut thing, "/", json!({"attributes": {"x": 1}})).unwrap(),
        Written::Modified
    );
    assert_eq!(
        Value::Object(thing.document().clone()),
        json!({"thingId": "org.acme:sensor-1", "policyId": "org.acme:policy", "attributes": {"x": 1}})
    );
    assert_eq!(thing.created(), &at(0));
    assert_eq!(
        error_code(modify(&mut thing, "/", json!({"thingId": "a:b"}))),
        (400, "things:id.notsettable")
    );
}

#[test]
fn put_below_a_missing_feature_is_refused() {
    let mut thing = sample();
    for path in [
        "/features/nope/definition",
        "/features/nope/properties",
        "/features/nope/properties/a",
        "/features/nope/desiredProperties",
        "/features/nope/desiredProperties/a",
    ] {
        assert_eq!(
            error_code(modify(&mut thing, path, json!({}))),
            (404, "things:feature.notfound"),
            "{path}"
        );
    }
    assert_eq!(thing.revision(), 1, "refused writes count nothing");
}

#[test]
fn put_values_are_checked_per_resource() {
    let mut thing = sample();
    let cases = [
        ("/policyId", json!("nope"), "policies:id.invalid"),
        ("/policyId", json!(5), "policies:id.invalid"),
        ("/definition", json!("nope"), "things:definition.identifier.invalid"),
        ("/definition", json!(["a:b:c"]), "things:definition.identifier.invalid"),
        ("/attributes", json!([1]), "json.invalid"),
        ("/attributes", json!({"a/b": 1}), "json.key.invalid"),
        ("/attributes/a", json!({"x": {"\u{1}": 1}}), "json.key.invalid"),
        ("/features", json!({"f": 5}), "json.invalid"),
        ("/features/f", json!(5), "json.invalid"),
        ("/features/temp/definition", json!([]), "things:feature.definition.empty"),
        ("/features/temp/definition", json!([1]), "things:definition.identifier.invalid"),
        ("/features/temp/definition", json!(["x"]), "things:definition.identifier.invalid"),
        ("/features/temp/properties", json!("x"), "json.invalid"),
        ("/features/temp/properties/a", json!({"ä": 1}), "json.key.invalid"),
        ("/features/temp/desiredProperties", json!(null), "json.invalid"),
    ];
    for (path, value, code) in cases {
        assert_eq!(
            error_code(modify(&mut thing, path, value.clone())),
            (400, code),
            "{path} {value}"
        );
    }
    assert_eq!(thing, sample(), "refused writes change nothing");
}

#[test]
fn put_above_the_size_limit_changes_nothing() {
    let mut thing = sample();
    let before = thing.clone();
    let limits = ThingLimits { size_max_bytes: 400 };
    let error = thing
        .modify(&resource("/attributes/blob"), &json!("x".repeat(400)), &at(1), &limits)
        .unwrap_err();
    assert_eq!((error.status, error.error), (413, "things:thing.toolarge"));
    assert_eq!(thing, before);
}

// --- merge (PATCH) -------------------------------------------------------------

#[test]
fn merge_at_every_resource() {
    let mut thing = sample();
    merge(&mut thing, "/attributes", json!({"serial": null, "location": {"room": "b"}})).unwrap();
    assert_eq!(thing.document()["attributes"], json!({"location": {"floor": 3, "room": "b"}}));
    merge(&mut thing, "/attributes/location/floor", json!(4)).unwrap();
    merge(&mut thing, "/features/temp/properties", json!({"unit": "C"})).unwrap();
    merge(&mut thing, "/features/temp/properties/value", json!(null)).unwrap();
    merge(&mut thing, "/features/temp/desiredProperties/value", json!(23)).unwrap();
    merge(&mut thing, "/features/temp/definition", json!(["org.acme:temp:2.0.0"])).unwrap();
    merge(&mut thing, "/definition", json!("org.acme:sensor:2.0.0")).unwrap();
    merge(&mut thing, "/policyId", json!("org.acme:p2")).unwrap();
    merge(&mut thing, "/features", json!({"bare": null})).unwrap();
    assert_eq!(
        Value::Object(thing.document().clone()),
        json!({
            "thingId": "org.acme:sensor-1",
            "policyId": "org.acme:p2",
            "definition": "org.acme:sensor:2.0.0",
            "attributes": {"location": {"floor": 4, "room": "b"}},
            "features": {"temp": {
                "definition": ["org.acme:temp:2.0.0"],
                "properties": {"unit": "C"},
                "desiredProperties": {"value": 23},
            }},
        })
    );
    assert_eq!(thing.revision(), 10);
}

#[test]
fn merge_creates_what_is_missing_on_the_way() {
    let mut thing = Thing::create(
        ThingBody::for_put(&id(), &json!({})).unwrap(),
        &at(0),
        &ThingLimits::default(),
    )
    .unwrap();
    merge(&mut thing, "/features/lamp/properties/color/r", json!(255)).unwrap();
    merge(&mut thing, "/attributes/a/b", json!({"c": 1, "d": null})).unwrap();
    assert_eq!(
        Value::Object(thing.document().clone()),
        json!({
            "thingId": "org.acme:sensor-1",
            "attributes": {"a": {"b": {"c": 1}}},
            "features": {"lamp": {"properties": {"color": {"r": 255}}}},
        })
    );
}

#[test]
fn merge_of_the_whole_thing() {
    let mut thing = sample();
    merge(
        &mut thing,
        "/",
        json!({"thingId": "org.acme:sensor-1", "attributes": {"serial": "B"}, "_revision": 99, "_policy": {}}),
    )
    .unwrap();
    assert_eq!(thing.document()["attributes"]["serial"], "B");
    assert_eq!(thing.revision(), 2, "housekeeping in a patch is ignored");

    let cases = [
        (json!(null), "things:merge.invalid"),
        (json!([1]), "things:merge.invalid"),
        (json!({"thingId": null}), "things:id.notdeletable"),
        (json!({"thingId": "a:b"}), "things:id.notsettable"),
        (json!({"policyId": null}), "things:policyId.notdeletable"),
        (json!({"policyId": "bad"}), "policies:id.invalid"),
        (json!({"attributes": 5}), "json.invalid"),
        (json!({"features": {"f": {"definition": []}}}), "things:feature.definition.empty"),
        (json!({"attributes": {"{{ ~(~ }}": null}}), "things:merge.invalid"),
    ];
    for (patch, code) in cases {
        assert_eq!(error_code(merge(&mut thing, "/", patch.clone())), (400, code), "{patch}");
    }
    assert_eq!(
        error_code(merge(&mut thing, "/policyId", json!(null))),
        (400, "things:policyId.notdeletable")
    );
    assert_eq!(
        error_code(merge(&mut thing, "/attributes/x", json!({"a/b": 1}))),
        (400, "json.key.invalid")
    );
    let error = merge(&mut thing, "/", json!(null)).unwrap_err();
    assert_eq!(error.message, "The provided json value can not be applied at this resource");
}

#[test]
fn merge_with_regex_deletes() {
    let mut thing = sample();
    merge(&mut thing, "/attributes", json!({"2022-01": 1, "2022-02": 2, "2023-01": 3})).unwrap();
    merge(&mut thing, "/attributes", json!({"{{ ~2022-.*~ }}": null})).unwrap();
    let keys: Vec<&str> =
        thing.document()["attributes"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["location", "serial", "2023-01"]);
    assert!(!thing.metadata()["attributes"].as_object().unwrap().contains_key("2022-01"));
}

#[test]
fn merge_keeps_metadata_of_untouched_leaves() {
    let mut thing = sample();
    merge(&mut thing, "/attributes/location", json!({"room": "b"})).unwrap();
    let location = &thing.metadata()["attributes"]["location"];
    assert_eq!(location["floor"]["_modified"], at(0).to_string());
    assert_eq!(location["room"]["_modified"], at(1).to_string());
}

// --- delete -------------------------------------------------------------

#[test]
fn deletes_every_resource() {
    let mut thing = sample();
    for path in [
        "/attributes/location/floor",
        "/attributes",
        "/definition",
        "/features/temp/properties/value",
        "/features/temp/properties",
        "/features/temp/desiredProperties/value",
        "/features/temp/desiredProperties",
        "/features/temp/definition",
        "/features/temp",
        "/features",
    ] {
        assert_eq!(thing.delete(&resource(path), &at(1)).unwrap(), Deleted::Resource, "{path}");
        assert!(thing.retrieve(&resource(path), None).is_err(), "{path} is gone");
    }
    assert_eq!(
        Value::Object(thing.document().clone()),
        json!({"thingId": "org.acme:sensor-1", "policyId": "org.acme:policy"})
    );
    assert_eq!(thing.revision(), 11);
    assert!(!thing.metadata().contains_key("attributes"));
    assert_eq!(thing.delete(&ThingResource::Thing, &at(1)).unwrap(), Deleted::Thing);
}

#[test]
fn delete_answers_what_is_missing() {
    let mut thing = sample();
    let cases = [
        ("/policyId", 400, "things:policyId.notdeletable"),
        ("/attributes/nope", 404, "things:attribute.notfound"),
        ("/features/nope", 404, "things:feature.notfound"),
        ("/features/nope/properties/x", 404, "things:feature.notfound"),
        ("/features/bare/definition", 404, "things:feature.definition.notfound"),
        ("/features/bare/properties", 404, "things:feature.properties.notfound"),
        ("/features/bare/properties/x", 404, "things:feature.property.notfound"),
        ("/features/bare/desiredProperties", 404, "things:feature.desiredProperties.notfound"),
        ("/features/bare/desiredProperties/x", 404, "things:feature.desiredProperty.notfound"),
    ];
    for (path, status, code) in cases {
        assert_eq!(error_code(thing.delete(&resource(path), &at(1))), (status, code), "{path}");
    }
    let mut empty = Thing::create(
        ThingBody::for_put(&id(), &json!({})).unwrap(),
        &at(0),
        &ThingLimits::default(),
    )
    .unwrap();
    for (path, code) in [
        ("/definition", "things:definition.notfound"),
        ("/attributes", "things:attributes.notfound"),
        ("/attributes/a", "things:attribute.notfound"),
        ("/features", "things:features.notfound"),
    ] {
        assert_eq!(error_code(empty.delete(&resource(path), &at(1))), (404, code), "{path}");
    }
    assert_eq!(thing.revision(), 1);
}

// --- entity tags, storage ---------------------------------------------------

#[test]
fn entity_tags() {
    let mut thing = sample();
    assert_eq!(thing.entity_tag(&ThingResource::Thing).unwrap().as_str(), "\"rev:1\"");
    let before = thing.entity_tag(&resource("/attributes/location")).unwrap();
    assert!(before.as_str().starts_with("\"hash:"));
    modify(&mut thing, "/attributes/serial", json!("B")).unwrap();
    assert_eq!(
        thing.entity_tag(&resource("/attributes/location")),
        Some(before.clone()),
        "unchanged value"
    );
    modify(&mut thing, "/attributes/location/floor", json!(4)).unwrap();
    assert_ne!(thing.entity_tag(&resource("/attributes/location")), Some(before));
    assert_eq!(thing.entity_tag(&resource("/attributes/nope")), None);
    assert_eq!(thing.entity_tag(&ThingResource::Thing).unwrap().as_str(), "\"rev:3\"");
}

#[test]
fn stored_form_round_trips() {
    let mut thing = sample();
    merge(&mut thing, "/attributes/x", json!(1)).unwrap();
    let stored = thing.to_stored();
    assert_eq!(stored["_revision"], 2);
    assert_eq!(Thing::from_stored(&stored).unwrap(), thing);
    assert_eq!(error_code(Thing::from_stored(&json!({"thingId": "a:b"}))), (400, "json.invalid"));
}

#[test]
fn resource_pointers_lead_to_the_values() {
    let thing = sample();
    let document = Value::Object(thing.document().clone());
    for path in ["/attributes/location", "/features/temp/properties/value", "/policyId"] {
        assert_eq!(
            resource(path).pointer().get(&document),
            Some(&thing.retrieve(&resource(path), None).unwrap())
        );
    }
    assert_eq!(
        resource("/features/temp/properties/value").pointer(),
        p("/features/temp/properties/value")
    );
}
