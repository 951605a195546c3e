"""Ditto's things API (/api/2/things) on the real binary, with a real HTTP
client, on SQLite and on PostgreSQL (the `twin_store` fixture)."""

from __future__ import annotations

import threading

import pytest

from conftest import make_password_file
from twins import Ditto, EventStream

pytestmark = pytest.mark.ferry_only

TID = "org.eclipse.ditto:thing-1"
T = f"/things/{TID}"

LAMP = {
    "definition": "org.eclipse.ditto:lamp:1.0.0",
    "attributes": {"manufacturer": "ACME", "location": {"floor": 2, "room": "kitchen"}},
    "features": {
        "lamp": {"definition": ["org.eclipse.ditto:lamp-feature:1.0.0"],
                 "properties": {"on": False, "color": {"r": 0, "g": 0, "b": 0}},
                 "desiredProperties": {"on": True}},
        "meter": {"properties": {"watts": 7.5}},
    },
}


def _ditto(broker) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}")


def _owner(subject: str) -> dict:
    return {"subjects": {subject: {"type": "generated"}},
            "resources": {"thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
                          "policy:/": {"grant": ["READ", "WRITE"], "revoke": []}}}


def _users(tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords", {"alice": "a-secret", "bob": "b-secret"})
    b = broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})
    base = _ditto(b)
    return base.as_user("alice", "a-secret"), base.as_user("bob", "b-secret")


def _error(response, status: int, code: str):
    assert response.status_code == status, response.text
    assert response.json()["error"] == code, response.text
    assert response.json()["status"] == status


def test_create_with_default_policy_then_every_resource_by_method(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    created = ditto.put(T, LAMP)
    assert created.status_code == 201, created.text
    assert created.headers["Location"].endswith(f"/api/2/things/{TID}")
    assert created.headers["ETag"] == '"rev:1"'
    assert created.json()["thingId"] == TID and created.json()["policyId"] == TID
    policy = ditto.get(f"/policies/{TID}").json()
    assert policy["entries"]["DEFAULT"]["subjects"] == {"nginx:ditto": {"type": "generated"}}

    got = ditto.get(T)
    assert got.status_code == 200 and got.headers["ETag"] == '"rev:1"'
    assert list(got.json()) == ["thingId", "policyId", "definition", "attributes", "features"]
    assert ditto.get(f"{T}/policyId").json() == TID
    assert ditto.get(f"{T}/definition").json() == LAMP["definition"]
    assert ditto.get(f"{T}/attributes/location/floor").json() == 2
    assert ditto.get(f"{T}/features/lamp/properties/color").json() == {"r": 0, "g": 0, "b": 0}
    assert ditto.get(f"{T}/features/lamp/desiredProperties/on").json() is True
    assert ditto.get(f"{T}/features/lamp/definition").json() == LAMP["features"]["lamp"]["definition"]

    # PUT: 201 for what is new, 204 for what exists.
    for path, value in [("/attributes/serial", "X1"), ("/features/fan", {"properties": {"rpm": 0}}),
                        ("/features/fan/properties/mode", "auto"),
                        ("/features/fan/desiredProperties", {"rpm": 100}),
                        ("/features/fan/desiredProperties/mode", "eco"),
                        ("/features/fan/definition", ["a:b:1"])]:
        r = ditto.put(T + path, value)
        assert r.status_code == 201, (path, r.text)
        assert r.json() == value and r.headers["Location"].endswith(path)
        assert ditto.put(T + path, value).status_code == 204, path
    for path, value in [("/attributes", {"a": 1}), ("/features/meter/properties", {"watts": 1}),
                        ("/definition", "x:y:2"), ("/policyId", TID), ("", LAMP)]:
        r = ditto.put(T + path, value)
        assert r.status_code == 204, (path, r.text)
        assert "ETag" in r.headers
    assert ditto.get(T).headers["ETag"] == f'"rev:{2 + 12 + 4}"'

    # DELETE 204, then the resource's 404.
    for path, code in [("/features/lamp/desiredProperties/on", "things:feature.desiredProperty.notfound"),
                       ("/features/lamp/properties/color", "things:feature.property.notfound"),
                       ("/features/lamp/definition", "things:feature.definition.notfound"),
                       ("/features/lamp/properties", "things:feature.properties.notfound"),
                       ("/features/lamp", "things:feature.notfound"),
                       ("/attributes/location", "things:attribute.notfound"),
                       ("/attributes", "things:attributes.notfound"),
                       ("/definition", "things:definition.notfound"),
                       ("/features", "things:features.notfound")]:
        assert ditto.delete(T + path).status_code == 204, path
        _error(ditto.get(T + path), 404, code)
        _error(ditto.delete(T + path), 404, code)
    assert ditto.delete(T).status_code == 204
    _error(ditto.get(T), 404, "things:thing.notfound")
    _error(ditto.put(f"{T}/attributes/a", 1), 404, "things:thing.notfound")
    # The policy stays, as in Ditto.
    assert ditto.get(f"/policies/{TID}").status_code == 200


def test_unknown_paths_bad_ids_bad_json_media_types(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    assert ditto.put(T, {}).status_code == 201
    unknown = ditto.get(f"{T}/foo")
    assert unknown.status_code == 404 and unknown.text == "The requested resource could not be found."
    _error(ditto.get("/things/no-namespace-colon"), 400, "things:id.invalid")
    _error(ditto.put_raw(f"{T}/attributes", b"{not json"), 400, "json.invalid")
    _error(ditto.put(f"{T}/attributes//a", 1), 400, "json.pointer.invalid")
    _error(ditto.session.put(ditto.base + f"{T}/attributes/a", data="1",
                             headers={"Content-Type": "text/plain"}), 415, "mediatype.unsupported")
    _error(ditto.session.patch(ditto.base + f"{T}/attributes", json={"a": 1}), 415,
           "mediatype.unsupported")
    _error(ditto.post("/things", {"thingId": "a:b"}), 400, "things:id.notsettable")
    _error(ditto.put(T, {"thingId": "org.eclipse.ditto:other"}), 400, "things:id.notsettable")
    _error(ditto.delete(f"{T}/policyId"), 405, "gateway:method.notallowed")


def test_post_generates_an_id_in_the_namespace(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    r = ditto.post("/things?namespace=org.acme", {"attributes": {"a": 1}})
    assert r.status_code == 201, r.text
    thing_id = r.json()["thingId"]
    assert thing_id.startswith("org.acme:") and r.headers["Location"].endswith(f"/api/2/things/{thing_id}")
    assert ditto.get(f"/things/{thing_id}/attributes/a").json() == 1
    plain = ditto.post("/things", {})
    assert plain.status_code == 201 and plain.json()["thingId"].startswith(":")


def test_ids_lists_readable_things_in_order(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    for n in (1, 2, 3):
        assert ditto.put(f"/things/org.eclipse.ditto:t{n}", {"attributes": {"n": n}}).status_code == 201
    r = ditto.get("/things", params={"ids": "org.eclipse.ditto:t3,org.eclipse.ditto:missing,org.eclipse.ditto:t1",
                                     "fields": "thingId,attributes/n"})
    assert r.status_code == 200
    assert r.json() == [{"thingId": "org.eclipse.ditto:t3", "attributes": {"n": 3}},
                        {"thingId": "org.eclipse.ditto:t1", "attributes": {"n": 1}}]
    _error(ditto.get("/things", params={"ids": "bad"}), 400, "things:id.invalid")


def test_without_ids_the_list_is_a_search_of_everything_readable(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    for n in (3, 1, 2):
        assert ditto.put(f"/things/org.eclipse.ditto:t{n}", {"attributes": {"n": n}}).status_code == 201
    first = ditto.get("/things", params={"option": "size(2)", "fields": "thingId"})
    assert first.status_code == 200, first.text
    assert first.json() == [{"thingId": "org.eclipse.ditto:t1"}, {"thingId": "org.eclipse.ditto:t2"}]
    assert 'rel="canonical"' in first.headers["Link"]
    following = first.links["next"]["url"]
    rest = ditto.session.get(ditto.base[: -len("/api/2")] + following
                             if following.startswith("/") else following, timeout=10)
    assert rest.status_code == 200, rest.text
    assert [t["thingId"] for t in rest.json()] == ["org.eclipse.ditto:t3"]
    assert "next" not in rest.links


def test_fields_selection(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    assert ditto.put(T, LAMP).status_code == 201
    get = lambda path, fields: ditto.get(T + path, params={"fields": fields}).json()
    assert get("", "attributes/location/floor") == {"attributes": {"location": {"floor": 2}}}
    assert get("", "attributes(manufacturer,location/room)") == {
        "attributes": {"manufacturer": "ACME", "location": {"room": "kitchen"}}}
    assert get("", "features/*/properties/on") == {"features": {"lamp": {"properties": {"on": False}}}}
    assert get("", "_revision,thingId") == {"_revision": 1, "thingId": TID}
    assert get("/attributes", "location/floor") == {"location": {"floor": 2}}
    assert get("/features/lamp/properties", "color/r") == {"color": {"r": 0}}
    with_policy = get("", "thingId,_policy")
    assert with_policy["_policy"]["entries"]["DEFAULT"]["resources"]["thing:/"]["grant"] == ["READ", "WRITE"]


def test_merge_patch(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    assert ditto.put(T, LAMP).status_code == 201
    r = ditto.patch(T, {"attributes": {"manufacturer": None, "location": {"floor": 3}, "new": [1]},
                        "features": {"meter": None, "lamp": {"properties": {"on": True}}}})
    assert r.status_code == 204, r.text
    thing = ditto.get(T).json()
    assert thing["attributes"] == {"location": {"floor": 3, "room": "kitchen"}, "new": [1]}
    assert list(thing["features"]) == ["lamp"]
    assert thing["features"]["lamp"]["properties"] == {"on": True, "color": {"r": 0, "g": 0, "b": 0}}
    assert ditto.patch(f"{T}/attributes/location", {"room": None}).status_code == 204
    assert ditto.get(f"{T}/attributes/location").json() == {"floor": 3}
    assert ditto.patch(f"{T}/attributes/location", "flat").status_code == 204
    assert ditto.get(f"{T}/attributes/location").json() == "flat"
    assert ditto.patch(f"{T}/features/new/properties/x", 1).status_code == 204
    assert ditto.get(f"{T}/features/new").json() == {"properties": {"x": 1}}
    _error(ditto.patch(T, {"policyId": None}), 400, "things:policyId.notdeletable")
    _error(ditto.patch(f"/things/org.eclipse.ditto:none", {"attributes": {}}), 404, "things:thing.notfound")


def test_etags_and_conditional_headers(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    _error(ditto.put(T, {}, headers={"If-Match": "*"}), 412, "things:precondition.failed")
    assert ditto.put(T, {"attributes": {"a": 1}}, headers={"If-None-Match": "*"}).status_code == 201
    _error(ditto.put(T, {}, headers={"If-None-Match": "*"}), 412, "things:precondition.failed")
    assert ditto.put(T, {"attributes": {"a": 2}}, headers={"If-Match": '"rev:1"'}).status_code == 204
    stale = ditto.put(T, {}, headers={"If-Match": '"rev:1"'})
    _error(stale, 412, "things:precondition.failed")
    assert stale.headers["ETag"] == '"rev:2"'
    assert "'\"rev:2\"'" in stale.json()["message"]
    not_modified = ditto.get(T, headers={"If-None-Match": '"rev:2"'})
    assert not_modified.status_code == 304 and not_modified.headers["ETag"] == '"rev:2"'
    assert ditto.get(T, headers={"If-None-Match": '"rev:1"'}).status_code == 200
    _error(ditto.get(T, headers={"If-Match": '"rev:1"'}), 412, "things:precondition.failed")
    assert ditto.get(T, headers={"If-Match": '"rev:2", "rev:9"'}).status_code == 200

    attr = ditto.get(f"{T}/attributes/a")
    tag = attr.headers["ETag"]
    assert ditto.get(f"{T}/attributes/a", headers={"If-None-Match": tag}).status_code == 304
    assert ditto.put(f"{T}/attributes/a", 3, headers={"If-Match": tag}).status_code == 204
    _error(ditto.put(f"{T}/attributes/a", 4, headers={"If-Match": tag}), 412, "things:precondition.failed")
    # A sub-resource that does not exist yet: only If-None-Match: * creates it.
    _error(ditto.put(f"{T}/attributes/b", 1, headers={"If-Match": "*"}), 412, "things:precondition.failed")
    assert ditto.put(f"{T}/attributes/b", 1, headers={"If-None-Match": "*"}).status_code == 201
    # A read or delete of what is missing skips the check: plain 404.
    _error(ditto.get(f"{T}/attributes/zz", headers={"If-Match": "*"}), 404, "things:attribute.notfound")


def test_if_equal_skips_writes_that_change_nothing(broker_factory, twin_store):
    """Ditto 3.3's `if-equal` header: `skip` answers 412 to a write that
    would leave the resource as it is (no new revision, no event);
    `skip-minimizing-merge` also trims a merge to what it changes."""
    ditto = _ditto(broker_factory({"twins": twin_store}))
    skip = {"if-equal": "skip"}
    assert ditto.put(T, LAMP, headers=skip).status_code == 201  # a create is never skipped
    with EventStream(ditto, "/things", {"fields": "thingId,_revision,attributes,features"}) as events:
        # The same thing again, with its id and an inline field it may carry.
        r = ditto.put(T, {**LAMP, "thingId": TID, "policyId": TID, "_policy": {}}, headers=skip)
        _error(r, 412, "things:precondition.failed")
        assert r.json()["message"] == ("The previous value was equal to the new value and "
                                       "the 'if-equal' header was set to 'skip'.")
        _error(ditto.put(f"{T}/attributes/location", {"room": "kitchen", "floor": 2}, headers=skip),
               412, "things:precondition.failed")
        _error(ditto.patch(T, {"attributes": {"manufacturer": "ACME", "gone": None}}, headers=skip),
               412, "things:precondition.failed")
        _error(ditto.patch(f"{T}/features/meter/properties/watts", 7.5, headers=skip),
               412, "things:precondition.failed")
        assert ditto.get(T).headers["ETag"] == '"rev:1"'
        # Without the header (update, the default) the same write is made.
        assert ditto.put(f"{T}/attributes/manufacturer", "ACME").status_code == 204
        assert events.next()["_revision"] == 2
        # A write that changes something goes through under `skip`, whole.
        r = ditto.patch(T, {"attributes": {"manufacturer": "ACME", "serial": 7}}, headers=skip)
        assert r.status_code == 204, r.text
        assert events.next() == {"thingId": TID, "_revision": 3,
                                 "attributes": {"manufacturer": "ACME", "serial": 7}}
        # skip-minimizing-merge: the event carries only what changed.
        patch = {"attributes": {"manufacturer": "ACME", "serial": 8},
                 "features": {"meter": {"properties": {"watts": 7.5}}}}
        r = ditto.patch(T, patch, headers={"if-equal": "skip-minimizing-merge"})
        assert r.status_code == 204, r.text
        assert events.next() == {"thingId": TID, "_revision": 4, "attributes": {"serial": 8}}
    assert ditto.get(f"{T}/attributes").json() == {**LAMP["attributes"], "serial": 8}
    _error(ditto.put(f"{T}/attributes/x", 1, headers={"if-equal": "sometimes"}), 400, "header.invalid")


def test_condition(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    assert ditto.put(T, LAMP).status_code == 201
    assert ditto.get(T, params={"condition": "eq(attributes/manufacturer,\"ACME\")"}).status_code == 200
    _error(ditto.get(T, params={"condition": "eq(attributes/manufacturer,\"Other\")"}), 412,
           "things:condition.failed")
    _error(ditto.get(T, params={"condition": "eq(attributes/manufacturer"}), 400, "things:condition.invalid")
    r = ditto.put(f"{T}/attributes/x", 1, params={"condition": "gt(features/meter/properties/watts,5)"})
    assert r.status_code == 201
    _error(ditto.put(f"{T}/attributes/x", 2, headers={"condition": "lt(_revision,2)"}), 412,
           "things:condition.failed")
    assert ditto.get(f"{T}/attributes/x").json() == 1
    _error(ditto.delete(T, params={"condition": "eq(attributes/x,2)"}), 412, "things:condition.failed")


def test_response_required_false_and_accepted_parameters(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    r = ditto.put(T, {}, params={"response-required": "false", "timeout": "5s", "requested-acks": "twin-persisted"})
    assert r.status_code == 202 and r.text == ""
    assert ditto.get(T).status_code == 200


def test_a_second_user_with_a_partial_view(tmp_path, broker_factory, twin_store):
    alice, bob = _users(tmp_path, broker_factory, twin_store)
    policy = {"entries": {
        "OWNER": _owner("nginx:alice"),
        "GUEST": {"subjects": {"nginx:bob": {"type": "generated"}},
                  "resources": {"thing:/attributes": {"grant": ["READ"], "revoke": []},
                                "thing:/attributes/secret": {"grant": [], "revoke": ["READ"]},
                                "thing:/features/lamp/properties/on": {"grant": ["READ", "WRITE"], "revoke": []}}}}}
    body = dict(LAMP, _policy=policy)
    body["attributes"] = dict(LAMP["attributes"], secret="s3cr3t")
    created = alice.put(T, body)
    assert created.status_code == 201, created.text
    assert "_policy" not in created.json()

    seen = bob.get(T).json()
    assert seen == {"thingId": TID, "attributes": {"manufacturer": "ACME",
                                                  "location": {"floor": 2, "room": "kitchen"}},
                    "features": {"lamp": {"properties": {"on": False}}}}
    _error(bob.get(f"{T}/attributes/secret"), 404, "things:attribute.notfound")
    _error(bob.get(f"{T}/policyId"), 404, "things:policyId.notfound")
    _error(bob.put(f"{T}/attributes/a", 1), 403, "things:attribute.notmodifiable")
    _error(bob.put(f"{T}/features/lamp/properties/color", 1), 403, "things:feature.property.notmodifiable")
    _error(bob.put(f"{T}/features/lamp", {}), 403, "things:feature.notmodifiable")
    _error(bob.put(T, {}), 403, "things:thing.notmodifiable")
    _error(bob.delete(T), 403, "things:thing.notdeletable")
    _error(bob.delete(f"{T}/attributes"), 403, "things:attributes.notmodifiable")
    assert bob.put(f"{T}/features/lamp/properties/on", True).status_code == 204
    assert bob.patch(T, {"features": {"lamp": {"properties": {"on": False}}}}).status_code == 204
    _error(bob.patch(T, {"attributes": {"x": 1}}), 403, "things:thing.notmodifiable")
    # A condition on what bob may not read fails as Ditto's does.
    _error(bob.get(T, params={"condition": "eq(attributes/secret,\"s3cr3t\")"}), 412, "things:condition.failed")

    other = "org.eclipse.ditto:alice-only"
    assert alice.put(f"/things/{other}", {"attributes": {"a": 1}}).status_code == 201
    _error(bob.get(f"/things/{other}"), 404, "things:thing.notfound")
    _error(bob.put(f"/things/{other}/attributes/a", 2), 403, "things:attribute.notmodifiable")
    listed = bob.get("/things", params={"ids": f"{other},{TID}", "fields": "thingId"}).json()
    assert listed == [{"thingId": TID}]
    # Creating under a policy the caller may not read (Ditto retrieves it
    # with the caller's headers), or may read but not WRITE `thing:/` of.
    _error(bob.put("/things/org.eclipse.ditto:bobs", {"policyId": TID}), 404, "policies:policy.notfound")
    read_only = {"entries": {"OWNER": {"subjects": {"nginx:alice": {"type": "generated"}},
                                       "resources": {"thing:/": {"grant": ["READ"], "revoke": []},
                                                     "policy:/": {"grant": ["READ", "WRITE"], "revoke": []}}}}}
    assert alice.put("/policies/org.eclipse.ditto:ro", read_only).status_code == 201
    _error(alice.put("/things/org.eclipse.ditto:ro-thing", {"policyId": "org.eclipse.ditto:ro"}), 403,
           "things:thing.notmodifiable")
    _error(bob.put("/things/org.eclipse.ditto:bobs2", {"policyId": other}), 404, "policies:policy.notfound")
    _error(alice.put("/things/org.eclipse.ditto:t9", {"policyId": "org.eclipse.ditto:nope"}), 404,
           "policies:policy.notfound")


def test_inline_policy_rules_and_copy_policy_from(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    no_write = {"entries": {"R": {"subjects": {"nginx:ditto": {"type": "generated"}},
                                  "resources": {"thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                                "policy:/": {"grant": ["READ"], "revoke": []}}}}}
    r = ditto.put(T, {"_policy": no_write})
    _error(r, 400, "things:policy.invalid")
    _error(ditto.get(T), 404, "things:thing.notfound")
    assert ditto.get(f"/policies/{TID}").status_code == 404

    named = "org.eclipse.ditto:shared"
    r = ditto.put(T, {"policyId": named, "_policy": {"entries": {"OWNER": _owner("nginx:ditto")}}})
    assert r.status_code == 201, r.text
    assert r.json()["policyId"] == named
    assert ditto.get(f"/policies/{named}/entries/OWNER/subjects").json() == {"nginx:ditto": {"type": "generated"}}
    _error(ditto.put("/things/org.eclipse.ditto:x", {"_policy": {}, "_copyPolicyFrom": named}), 400,
           "things:policy.conflicting")

    copy = ditto.put("/things/org.eclipse.ditto:copy", {"_copyPolicyFrom": named})
    assert copy.status_code == 201, copy.text
    assert ditto.get("/policies/org.eclipse.ditto:copy").json()["entries"].keys() == {"OWNER"}
    ref = ditto.put("/things/org.eclipse.ditto:ref",
                    {"_copyPolicyFrom": f"{{{{ ref:things/{TID}/policyId }}}}"})
    assert ref.status_code == 201, ref.text
    assert ditto.get("/policies/org.eclipse.ditto:ref").json()["entries"].keys() == {"OWNER"}
    _error(ditto.put("/things/org.eclipse.ditto:y", {"_copyPolicyFrom": "org.eclipse.ditto:nope"}), 404,
           "policies:policy.notfound")
    # The default policy's id is taken already: the thing is not created.
    _error(ditto.put("/things/org.eclipse.ditto:copy2", {"_copyPolicyFrom": "org.eclipse.ditto:copy",
                                                         "policyId": named}), 400, "things:thing.notcreatable")
    # Existing policy: the thing only points at it.
    assert ditto.put("/things/org.eclipse.ditto:z", {"policyId": named}).status_code == 201


def test_size_limit(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    assert ditto.put(T, {}).status_code == 201
    _error(ditto.put(f"{T}/attributes/big", "x" * (110 * 1024)), 413, "things:thing.toolarge")
    _error(ditto.put("/things/org.eclipse.ditto:huge", {"attributes": {"b": "x" * (110 * 1024)}}), 413,
           "things:thing.toolarge")


def test_read_your_writes_and_concurrent_writers(broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    ditto = _ditto(b)
    assert ditto.put(T, {"attributes": {}}).status_code == 201
    for n in range(100):
        assert ditto.put(f"{T}/attributes/n", n).status_code in (201, 204)
        assert ditto.get(f"{T}/attributes/n").json() == n
    errors = []

    def writer(k: int):
        d = _ditto(b)
        for n in range(25):
            r = d.put(f"{T}/attributes/w{k}", n)
            if r.status_code not in (201, 204):
                errors.append(r.text)
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    assert ditto.get(T, params={"fields": "_revision"}).json() == {"_revision": 1 + 100 + 100}


def test_an_answered_put_survives_kill_9(broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    for n in range(20):
        assert _ditto(b).put(f"/things/org.eclipse.ditto:k{n}", {"attributes": {"n": n}}).status_code == 201
    assert _ditto(b).put("/things/org.eclipse.ditto:k0/attributes/n", 99).status_code == 204
    b.restart(kill=True)
    ditto = _ditto(b)
    for n in range(1, 20):
        assert ditto.get(f"/things/org.eclipse.ditto:k{n}/attributes/n").json() == n
    assert ditto.get("/things/org.eclipse.ditto:k0/attributes/n").json() == 99


def test_dittos_documentation_examples(broker_factory, twin_store):
    """basic-thing.md / httpapi-concepts.md examples, as written."""
    ditto = _ditto(broker_factory({"twins": twin_store}))
    thing = {
        "definition": "digitaltwin:DigitaltwinExample:1.0.0",
        "attributes": {"manufacturer": "ACME demo corp.", "location": "Berlin, main floor",
                       "serialno": "42", "model": "Speaking coffee machine"},
        "features": {
            "coffee-brewer": {"definition": ["com.acme:coffeebrewer:0.1.0"],
                              "properties": {"brewed-coffees": 0}},
            "water-tank": {"properties": {"configuration": {"smartMode": True, "brewingTemp": 87,
                                                            "tempToHold": 44, "timeoutSeconds": 6000},
                                          "status": {"waterAmount": 731, "temperature": 44}}}},
    }
    tid = "org.eclipse.ditto:fancy-car-11"
    assert ditto.put(f"/things/{tid}", thing).status_code == 201
    assert ditto.get(f"/things/{tid}/features/water-tank/properties/configuration/smartMode").json() is True
    assert ditto.put(f"/things/{tid}/features/coffee-brewer/properties/brewed-coffees", 42).status_code == 204
    r = ditto.get(f"/things/{tid}", params={"fields": "attributes/model,features/coffee-brewer/properties"})
    assert r.json() == {"attributes": {"model": "Speaking coffee machine"},
                        "features": {"coffee-brewer": {"properties": {"brewed-coffees": 42}}}}
    assert ditto.patch(f"/things/{tid}", {"attributes": {"serialno": None, "model": "v2"}}).status_code == 204
    assert ditto.get(f"/things/{tid}/attributes").json() == {
        "manufacturer": "ACME demo corp.", "location": "Berlin, main floor", "model": "v2"}
