"""Server-Sent Events of twin changes (`GET /api/2/things` with
`Accept: text/event-stream`, as Ditto's gateway serves them) on the real
binary, read by a real SSE client, on SQLite and on PostgreSQL.

Where a test shows that an event is *not* sent, it makes a change the
stream does show afterwards and checks that this is the next event: the
feed keeps commit order, so nothing hidden came between."""

from __future__ import annotations

import pytest

from conftest import make_password_file
from twins import Ditto, EventStream

pytestmark = pytest.mark.ferry_only

TID = "org.eclipse.ditto:lamp-1"
T = f"/things/{TID}"


def _ditto(broker) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}")


def _entry(subject: str, *resources: str) -> dict:
    return {"subjects": {subject: {"type": "generated"}},
            "resources": {r: {"grant": ["READ", "WRITE"] if r == "thing:/" or r == "policy:/" else ["READ"],
                              "revoke": []} for r in resources}}


def test_create_modify_merge_delete_arrive_as_partial_things(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    with EventStream(ditto, "/things") as stream, \
            EventStream(ditto, "/things", {"fields": "thingId,_revision,_modified,_created"}) as meta:
        assert stream.response.status_code == 200
        assert stream.response.headers["Content-Type"] == "text/event-stream"
        thing = {"attributes": {"room": "kitchen"}, "features": {"lamp": {"properties": {"on": False}}}}
        assert ditto.put(T, thing).status_code == 201
        assert stream.next() == {"thingId": TID, "policyId": TID, **thing}
        created = meta.next()
        assert created["_revision"] == 1 and created["_created"] == created["_modified"]
        first_id = int(stream.last_id)

        assert ditto.put(f"{T}/features/lamp/properties/on", True).status_code == 204
        assert stream.next() == {"thingId": TID, "features": {"lamp": {"properties": {"on": True}}}}
        modified = meta.next()
        assert modified["_revision"] == 2 and set(modified) == {"thingId", "_revision", "_modified"}
        assert int(stream.last_id) > first_id

        # A merge shows its patch without the nulls that deleted something.
        r = ditto.patch(T, {"attributes": {"floor": 2, "room": None}})
        assert r.status_code == 204
        assert stream.next() == {"thingId": TID, "attributes": {"floor": 2}}
        assert meta.next()["_revision"] == 3

        # Deletions carry the thing's id alone.
        assert ditto.delete(f"{T}/attributes/floor").status_code == 204
        assert stream.next() == {"thingId": TID}
        assert ditto.delete(T).status_code == 204
        assert stream.next() == {"thingId": TID}
        assert [meta.next()["_revision"], meta.next()["_revision"]] == [4, 5]


def test_ids_namespaces_and_filter_select_events(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    a, b, c = "ns.one:a", "ns.one:b", "ns.two:c"
    for thing_id in (a, b, c):
        assert ditto.put(f"/things/{thing_id}", {"attributes": {"n": 0}}).status_code == 201
    with EventStream(ditto, "/things", {"ids": f"{a},{c}"}) as by_ids, \
            EventStream(ditto, "/things", {"namespaces": "ns.two"}) as by_namespace, \
            EventStream(ditto, "/things", {"filter": "gt(attributes/n,1)"}) as by_filter, \
            EventStream(ditto, f"/things/{b}") as one_thing:
        for thing_id, n in ((a, 1), (b, 2), (c, 3)):
            assert ditto.put(f"/things/{thing_id}/attributes/n", n).status_code == 204
        assert [by_ids.next(), by_ids.next()] == [
            {"thingId": a, "attributes": {"n": 1}}, {"thingId": c, "attributes": {"n": 3}}]
        assert by_namespace.next() == {"thingId": c, "attributes": {"n": 3}}
        assert [by_filter.next(), by_filter.next()] == [
            {"thingId": b, "attributes": {"n": 2}}, {"thingId": c, "attributes": {"n": 3}}]
        assert one_thing.next() == {"thingId": b, "attributes": {"n": 2}}
        # The filter sees the event's partial thing: a change elsewhere on
        # a thing whose n matches does not carry n, so it does not match.
        assert ditto.put(f"/things/{c}/attributes/other", True).status_code == 201
        assert ditto.put(f"/things/{c}/attributes/n", 9).status_code == 204
        assert by_filter.next() == {"thingId": c, "attributes": {"n": 9}}


def test_fields_extra_fields_and_a_things_sub_path(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    thing = {"attributes": {"location": "kitchen"},
             "features": {"lamp": {"properties": {"on": False, "level": 1}}}}
    assert ditto.put(T, thing).status_code == 201
    enriched = {"extraFields": "attributes/location",
                "filter": 'eq(attributes/location,"kitchen")'}
    with EventStream(ditto, "/things", {"fields": "attributes"}) as attributes_only, \
            EventStream(ditto, "/things", {"fields": "thingId,attributes"}) as with_id, \
            EventStream(ditto, "/things", enriched) as in_kitchen, \
            EventStream(ditto, f"{T}/features/lamp/properties") as properties, \
            EventStream(ditto, f"{T}/features/lamp/properties/level") as level:
        assert ditto.put(f"{T}/features/lamp/properties/on", True).status_code == 204
        # The extra field is the thing's as it is now, merged in, and the
        # filter reads it.
        assert in_kitchen.next() == {"thingId": TID, "attributes": {"location": "kitchen"},
                                     "features": {"lamp": {"properties": {"on": True}}}}
        assert properties.next() == {"on": True}
        assert with_id.next() == {"thingId": TID}
        assert ditto.put(f"{T}/features/lamp/properties/level", 7).status_code == 204
        assert level.next() == 7
        assert properties.next() == {"level": 7}
        assert in_kitchen.next()["features"] == {"lamp": {"properties": {"level": 7}}}

        # What the event carries wins over the extra field: it moved out of
        # the kitchen, and the filter no longer matches.
        assert ditto.put(f"{T}/attributes/location", "hall").status_code == 204
        assert ditto.put(f"{T}/features/lamp/properties/on", False).status_code == 204
        assert ditto.put(f"{T}/attributes/location", "kitchen").status_code == 204
        assert in_kitchen.next() == {"thingId": TID, "attributes": {"location": "kitchen"}}
        # `fields` selected nothing of the feature changes, so they were
        # dropped; the attribute's changes are the first events.
        assert attributes_only.next() == {"attributes": {"location": "hall"}}
        assert attributes_only.next() == {"attributes": {"location": "kitchen"}}


def test_a_partial_reader_sees_only_its_leaves(tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords", {"alice": "a-secret", "bob": "b-secret"})
    base = _ditto(broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store}))
    alice, bob = base.as_user("alice", "a-secret"), base.as_user("bob", "b-secret")
    policy = {"entries": {"OWNER": _entry("nginx:alice", "thing:/", "policy:/"),
                          "GUEST": _entry("nginx:bob", "thing:/attributes/public")}}
    with EventStream(bob, "/things") as stream:
        r = alice.put(T, {"_policy": policy, "attributes": {"public": 1, "secret": "s"},
                          "features": {"lamp": {"properties": {"on": False}}}})
        assert r.status_code == 201, r.text
        assert stream.next() == {"thingId": TID, "attributes": {"public": 1}}
        # Nothing bob may read changed: no event for bob, and none for a
        # thing bob may not read at all.
        assert alice.put(f"{T}/attributes/secret", "t").status_code == 204
        assert alice.put(f"{T}/features/lamp/properties/on", True).status_code == 204
        assert alice.patch(T, {"attributes": {"secret": "u"}}).status_code == 204
        assert alice.put("/things/org.eclipse.ditto:private", {"attributes": {"public": 1}}).status_code == 201
        # A change with parts of both shows bob his part.
        assert alice.patch(T, {"attributes": {"public": 2, "secret": "v"}}).status_code == 204
        assert stream.next() == {"thingId": TID, "attributes": {"public": 2}}
        assert alice.put(f"{T}/attributes", {"public": 3, "secret": "w"}).status_code == 204
        assert stream.next() == {"thingId": TID, "attributes": {"public": 3}}


def test_last_event_id_resumes_from_the_journal_across_a_restart(broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    ditto = _ditto(b)
    with EventStream(ditto, "/things") as stream:
        assert ditto.put(T, {"attributes": {"n": 0}}).status_code == 201
        assert stream.next() == {"thingId": TID, "policyId": TID, "attributes": {"n": 0}}
        seen = stream.last_id
    for n in (1, 2, 3):
        assert ditto.put(f"{T}/attributes/n", n).status_code == 204

    # A stream open at shutdown ends, so the server stops at once; the
    # journal is in the store, so the events outlive the process.
    open_stream = EventStream(ditto, "/things")
    b.restart()
    open_stream.wait_end()
    open_stream.close()
    ditto = _ditto(b)

    with EventStream(ditto, "/things", last_event_id=seen) as resumed:
        assert [resumed.next() for _ in range(3)] == [
            {"thingId": TID, "attributes": {"n": n}} for n in (1, 2, 3)]
        # Then the live events, without a replayed one twice.
        assert ditto.put(f"{T}/attributes/n", 4).status_code == 204
        assert resumed.next() == {"thingId": TID, "attributes": {"n": 4}}
        last = resumed.last_id
    # The resume honours the options too, and starts after the place given.
    with EventStream(ditto, "/things", {"filter": "eq(attributes/n,2)"}, last_event_id=seen) as again:
        assert again.next() == {"thingId": TID, "attributes": {"n": 2}}
        assert int(again.last_id) < int(last)


def test_events_hidden_from_a_resumed_stream_still_move_its_place(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    with EventStream(ditto, "/things") as stream:
        assert ditto.put(T, {"attributes": {"n": 0}}).status_code == 201
        stream.next()
        seen = stream.last_id
    for n in range(1, 4):
        assert ditto.put(f"{T}/attributes/n", n).status_code == 204
    # None of the replayed events matches; the place moves past them all.
    with EventStream(ditto, "/things", {"ids": "org.eclipse.ditto:other"},
                     last_event_id=seen) as quiet:
        assert quiet.next(timeout=3) is None and not quiet.ended
        assert int(quiet.last_id) == int(seen) + 3


def test_a_bad_filter_or_thing_id_is_refused_before_the_stream(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    bad = ditto.get("/things", params={"filter": "eq(attributes/n"},
                    headers={"Accept": "text/event-stream"})
    assert bad.status_code == 400 and bad.json()["error"] == "rql.expression.invalid", bad.text
    bad = ditto.get("/things", params={"ids": "no-namespace"}, headers={"Accept": "text/event-stream"})
    assert bad.status_code == 400 and bad.json()["error"] == "things:id.invalid", bad.text


def test_without_a_journal_events_have_no_place(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": {**twin_store, "event_retention": "0s"}}))
    with EventStream(ditto, "/things", last_event_id="1") as stream:
        assert ditto.put(T, {}).status_code == 201
        assert stream.next() == {"thingId": TID, "policyId": TID}
        assert stream.last_id == "1", "no id: the client keeps what it had"
