"""Search over the Ditto protocol (`_/_/things/twin/search/…`) on the real
binary, on SQLite and PostgreSQL: a subscription's pages as the client
asks for them, its end, its errors, and what a caller's policy lets it
find, over a real WebSocket client and over MQTT with paho."""

from __future__ import annotations

import json

import pytest

from conftest import make_password_file
from twins import Ditto
from twins_ws import DittoWs, envelope

pytestmark = pytest.mark.ferry_only

SEARCH = "_/_/things/twin/search"


def _start(tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords",
                                   {"alice": "a-secret", "bob": "b-secret"})
    broker = broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})
    alice = Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")
    for n in range(6):
        assert alice.put(f"/things/org.acme:lamp-{n}",
                         {"attributes": {"n": n, "room": "hall"}}).status_code == 201
    assert alice.put("/things/org.other:lamp-9", {"attributes": {"n": 9}}).status_code == 201
    return broker, alice


def _subscribe(ws: DittoWs, value: dict, fields: str | None = None, **headers) -> str:
    message = envelope(f"{SEARCH}/subscribe", "/", value, **headers)
    if fields is not None:
        message["fields"] = fields
    ws.send(message)
    created = ws.recv()
    assert created["topic"] == f"{SEARCH}/created", created
    return created["value"]["subscriptionId"]


def _request(ws: DittoWs, subscription: str, demand, **headers) -> None:
    ws.send(envelope(f"{SEARCH}/request", "/",
                     {"subscriptionId": subscription, "demand": demand}, **headers))


def _ns(items: list) -> list:
    return [item["attributes"]["n"] for item in items]


def test_a_search_sends_the_pages_asked_for_then_completes(tmp_path, broker_factory, twin_store):
    broker, _ = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    ws.send(envelope(f"{SEARCH}/subscribe", "/", {
        "filter": "ge(attributes/n,1)", "options": "size(2),sort(-attributes/n)",
        "namespaces": ["org.acme"]}, **{"correlation-id": "s-1"}) | {"fields": "thingId,attributes/n"})
    created = ws.recv()
    assert created["topic"] == f"{SEARCH}/created"
    assert created["headers"]["correlation-id"] == "s-1"
    subscription = created["value"]["subscriptionId"]

    _request(ws, subscription, 1, **{"correlation-id": "r-1"})
    page = ws.recv()
    assert page["topic"] == f"{SEARCH}/next" and page["headers"]["correlation-id"] == "r-1"
    assert page["value"]["subscriptionId"] == subscription
    assert page["value"]["items"] == [
        {"thingId": "org.acme:lamp-5", "attributes": {"n": 5}},
        {"thingId": "org.acme:lamp-4", "attributes": {"n": 4}}]

    # More demand than pages: the rest, then the end.
    _request(ws, subscription, 10)
    assert _ns(ws.recv()["value"]["items"]) == [3, 2]
    assert _ns(ws.recv()["value"]["items"]) == [1]
    complete = ws.recv()
    assert complete["topic"] == f"{SEARCH}/complete"
    assert complete["value"] == {"subscriptionId": subscription}

    # An ended subscription refuses further requests.
    _request(ws, subscription, 1, **{"correlation-id": "late"})
    late = ws.recv()
    assert late["topic"] == f"{SEARCH}/failed" and late["headers"]["correlation-id"] == "late"
    assert late["value"]["subscriptionId"] == subscription
    assert late["value"]["error"]["error"] == "thing-search:subscription.protocol.error"

    # Without options: pages of 25 in thingId order, every namespace.
    everything = _subscribe(ws, {})
    _request(ws, everything, 1)
    page = ws.recv()["value"]["items"]
    assert [item["thingId"] for item in page] == [
        *(f"org.acme:lamp-{n}" for n in range(6)), "org.other:lamp-9"]
    assert ws.recv()["topic"] == f"{SEARCH}/complete"
    ws.close()


def test_a_cancelled_search_sends_nothing_more(tmp_path, broker_factory, twin_store):
    broker, _ = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    subscription = _subscribe(ws, {"options": "size(1)"})
    _request(ws, subscription, 1)
    assert len(ws.recv()["value"]["items"]) == 1
    ws.send(envelope(f"{SEARCH}/cancel", "/", {"subscriptionId": subscription}))
    _request(ws, subscription, 1)
    refused = ws.recv()  # no page came between: the next frame is the refusal
    assert refused["topic"] == f"{SEARCH}/failed"
    assert refused["value"]["error"]["message"] == (
        "This subscription is considered cancelled. No more messages are processed.")
    ws.close()


def test_search_errors_as_dittos(tmp_path, broker_factory, twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")

    # A bad filter is created, then failed with the error HTTP answers
    # (whose gateway wraps the filter in `and(…)`, so only the position
    # in the message differs).
    over_http = alice.get("/search/things", params={"filter": "eq(attributes/n"}).json()
    bad = _subscribe(ws, {"filter": "eq(attributes/n"}, **{"correlation-id": "bad"})
    failed = ws.recv()
    assert failed["topic"] == f"{SEARCH}/failed" and failed["headers"]["correlation-id"] == "bad"
    assert failed["value"]["subscriptionId"] == bad
    error = failed["value"]["error"]
    assert (error["status"], error["error"], error["description"]) == (
        over_http["status"], over_http["error"], over_http["description"])
    assert (error["status"], error["error"]) == (400, "rql.expression.invalid")

    too_big = _subscribe(ws, {"options": "size(201)"})
    error = ws.recv()["value"]["error"]
    assert (error["status"], error["error"]) == (400, "thing-search:search.option.invalid")
    assert too_big != bad

    # A demand of zero breaks reactive streams' rule 3.9.
    subscription = _subscribe(ws, {})
    _request(ws, subscription, 0)
    error = ws.recv()["value"]["error"]
    assert (error["status"], error["error"]) == (400, "thing-search:subscription.protocol.error")
    assert error["message"].startswith("Rule 3.9")

    _request(ws, "no-such-id", 1, **{"correlation-id": "nf"})
    missing = ws.recv()
    assert missing["topic"] == f"{SEARCH}/failed" and missing["headers"]["correlation-id"] == "nf"
    assert missing["value"]["error"] == {
        "status": 404, "error": "thing-search:subscription.not.found",
        "message": "No subscription with ID 'no-such-id' exists."}

    # A message that is not a search command is an error response.
    ws.send(envelope(f"{SEARCH}/request", "/", {"demand": 1}, **{"correlation-id": "m"}))
    no_id = ws.recv()
    assert no_id["topic"] == "_/_/things/twin/errors" and no_id["status"] == 400
    assert no_id["value"]["error"] == "json.field.missing"
    assert no_id["headers"]["correlation-id"] == "m"
    ws.send(envelope(f"{SEARCH}/next", "/", {"subscriptionId": subscription}))
    assert ws.recv()["value"]["error"] == "protocoladapter:unknown.topicpath"

    # Another session does not see this one's subscriptions.
    other = DittoWs(broker, "alice", "a-secret")
    mine = _subscribe(ws, {})
    _request(other, mine, 1)
    assert other.recv()["value"]["error"]["error"] == "thing-search:subscription.not.found"
    other.close()
    ws.close()


def test_a_search_finds_what_the_callers_policy_lets_it_read(tmp_path, broker_factory,
                                                               twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    bob = DittoWs(broker, "bob", "b-secret")
    nothing = _subscribe(bob, {})
    _request(bob, nothing, 1)
    assert bob.recv()["topic"] == f"{SEARCH}/complete"  # no page: bob may read no thing

    policy = alice.get("/policies/org.acme:lamp-3").json()
    policy["entries"]["BOB"] = {
        "subjects": {"nginx:bob": {"type": "generated"}},
        "resources": {"thing:/attributes/n": {"grant": ["READ"], "revoke": []}}}
    assert alice.put("/policies/org.acme:lamp-3", policy).status_code == 204
    readable = _subscribe(bob, {"filter": "exists(attributes/n)"})
    _request(bob, readable, 1)
    page = bob.recv()
    assert page["topic"] == f"{SEARCH}/next", page
    assert page["value"]["items"] == [{"thingId": "org.acme:lamp-3", "attributes": {"n": 3}}]
    assert bob.recv()["topic"] == f"{SEARCH}/complete"
    bob.close()


def test_a_search_over_mqtt_answers_where_the_subscribe_asked(tmp_path, broker_factory,
                                                              twin_store):
    broker, _ = _start(tmp_path, broker_factory, twin_store)
    client = broker.client(version=5, client_id="searcher", connect=False)
    client.c.username_pw_set("alice", "a-secret")
    client.connect()
    client.subscribe("my/search", qos=1)

    def send(action: str, value: dict, **headers) -> None:
        message = envelope(f"{SEARCH}/{action}", "/", value, **headers)
        assert client.publish("ditto/in", json.dumps(message).encode(), qos=1,
                              props={"ResponseTopic": "my/search"}) == 0

    def received() -> dict:
        return json.loads(client.get().payload)

    send("subscribe", {"filter": "lt(attributes/n,3)", "options": "size(2)",
                       "namespaces": ["org.acme"]}, **{"correlation-id": "s"})
    created = received()
    assert created["topic"] == f"{SEARCH}/created" and created["headers"]["correlation-id"] == "s"
    subscription = created["value"]["subscriptionId"]
    send("request", {"subscriptionId": subscription, "demand": 2})
    assert _ns(received()["value"]["items"]) == [0, 1]
    assert _ns(received()["value"]["items"]) == [2]
    assert received()["topic"] == f"{SEARCH}/complete"

    # Another client may not request from this one's subscription.
    other = broker.client(version=5, client_id="other", connect=False)
    other.c.username_pw_set("alice", "a-secret")
    other.connect()
    other.subscribe("ditto/replies/other", qos=1)
    send("subscribe", {})
    mine = received()["value"]["subscriptionId"]
    request = envelope(f"{SEARCH}/request", "/", {"subscriptionId": mine, "demand": 1})
    other.publish("ditto/in", json.dumps(request).encode(), qos=1)
    refused = json.loads(other.get().payload)
    assert refused["value"]["error"]["error"] == "thing-search:subscription.not.found"
