"""The Ditto protocol over Ferry's own MQTT broker (docs/twins.md, "The
Ditto protocol over MQTT"): commands published under `ditto/`, answered
on the MQTT 5 response topic, the `reply-to` header or
`ditto/replies/{clientId}`, and twin events on
`ditto/things/{thingId}/twin/events/{action}`, each reader seeing only
what its policy lets it read. Real paho-mqtt clients (3.1.1 and 5.0) and
a real HTTP client, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest

from conftest import make_password_file
from helpers import expect_nothing
from twins import Ditto

pytestmark = pytest.mark.ferry_only

TID = "org.acme:lamp-1"
NS, NAME = TID.split(":")
CREATE = {"attributes": {"room": "kitchen"},
          "features": {"lamp": {"properties": {"on": False}}}}


def command(action: str, path: str = "/", value=None, thing: str = TID, **headers) -> bytes:
    ns, name = thing.split(":") if thing != "_" else ("_", "_")
    message = {"topic": f"{ns}/{name}/things/twin/commands/{action}",
               "headers": {"correlation-id": headers.pop("cid", str(uuid.uuid4())), **headers},
               "path": path}
    if value is not None:
        message["value"] = value
    return json.dumps(message).encode()


def answer(client) -> dict:
    return json.loads(client.get().payload)


def user_client(broker, user: str, password: str, version: int = 5, client_id: str = ""):
    c = broker.client(version=version, client_id=client_id or f"{user}-{uuid.uuid4().hex[:6]}",
                      connect=False)
    c.c.username_pw_set(user, password)
    c.connect()
    return c


def with_replies(client):
    """Subscribes `client` to its default replies topic."""
    client.subscribe(f"ditto/replies/{client.c._client_id.decode()}", qos=1)
    return client


def test_v5_commands_are_answered_on_the_response_topic_with_the_correlation_data(
        broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    c = b.client(version=5)
    c.subscribe("my/answers", qos=1)
    props = {"ResponseTopic": "my/answers", "CorrelationData": b"corr-1"}

    assert c.publish("ditto/in", command("create", "/", CREATE, cid="c-create"), qos=1,
                     props=props) == 0
    created = c.get()
    assert created.props.get("CorrelationData") == b"corr-1"
    assert created.props.get("ContentType") == "application/vnd.eclipse.ditto+json"
    body = json.loads(created.payload)
    assert body["topic"] == f"{NS}/{NAME}/things/twin/commands/create"
    assert body["headers"]["correlation-id"] == "c-create"
    assert body["status"] == 201 and body["value"]["thingId"] == TID

    c.publish("ditto/in", command("modify", "/features/lamp/properties/on", True, cid="m"),
              qos=1, props=props)
    modified = answer(c)
    assert (modified["status"], modified["path"]) == (204, "/features/lamp/properties/on")
    # A sub-resource's entity tag is the hash of its value, as Ditto's.
    assert modified["headers"]["etag"].startswith('"hash:') and "value" not in modified

    c.publish("ditto/in", command("modify", "/attributes/serial", "X1"), qos=1, props=props)
    assert answer(c)["status"] == 201

    c.publish("ditto/in", command("merge", "/attributes", {"room": None, "floor": 2}), qos=1,
              props=props)
    assert answer(c)["status"] == 204
    # The same merge again under `if-equal: skip` changes nothing: 412, no revision.
    c.publish("ditto/in", command("merge", "/attributes", {"floor": 2}, **{"if-equal": "skip"}),
              qos=1, props=props)
    skipped = answer(c)
    assert (skipped["status"], skipped["value"]["error"]) == (412, "things:precondition.failed")

    retrieve = json.loads(command("retrieve", "/"))
    retrieve["fields"] = "attributes,_revision"
    c.publish("ditto/in", json.dumps(retrieve).encode(), qos=1, props=props)
    got = answer(c)
    assert got["status"] == 200
    assert got["value"] == {"attributes": {"serial": "X1", "floor": 2}, "_revision": 4}

    c.publish("ditto/in", command("delete", "/attributes/floor"), qos=1, props=props)
    assert answer(c)["status"] == 204
    c.publish("ditto/in", command("delete", "/"), qos=1, props=props)
    assert answer(c)["status"] == 204
    c.publish("ditto/in", command("retrieve", "/", cid="gone"), qos=1, props=props)
    error = answer(c)
    assert error["topic"] == f"{NS}/{NAME}/things/twin/errors"
    assert error["status"] == 404 and error["value"]["error"] == "things:thing.notfound"
    assert error["headers"]["correlation-id"] == "gone"


def test_v311_answers_go_to_reply_to_or_the_clients_replies_topic(broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    c = with_replies(b.client(version=4, client_id="device-7"))
    c.publish("ditto/in", command("create", "/", CREATE), qos=1)
    first = c.get()
    assert first.topic == "ditto/replies/device-7"
    assert json.loads(first.payload)["status"] == 201

    c.subscribe("answers/device-7", qos=1)
    c.publish("ditto/in", command("retrieve", "/attributes/room", **{"reply-to": "answers/device-7"}),
              qos=1)
    second = c.get()
    assert second.topic == "answers/device-7"
    assert json.loads(second.payload)["value"] == "kitchen"

    # response-required=false: no answer to a success ...
    c.publish("ditto/in", command("modify", "/attributes/room", "hall",
                                  **{"response-required": False}), qos=1)
    expect_nothing(c)
    # ... but an error is always answered.
    c.publish("ditto/in", command("modify", "/attributes/room", "x", thing="org.acme:none",
                                  **{"response-required": False}), qos=1)
    assert answer(c)["value"]["error"] == "things:thing.notfound"


def test_what_is_not_a_command_is_answered_with_dittos_protocol_errors(broker_factory):
    b = broker_factory()
    c = with_replies(b.client(version=5, client_id="sloppy"))
    cases = [
        (b"not json", "unknown/unknown/things/twin/errors", "json.invalid"),
        (b'{"path":"/"}', "unknown/unknown/things/twin/errors", "json.field.missing"),
        (json.dumps({"topic": "org.acme/x/things/twin/orders/modify"}).encode(),
         "unknown/unknown/things/twin/errors", "protocoladapter:unknown.topicpath"),
        (command("modify", "/nowhere/x", 1), f"{NS}/{NAME}/things/twin/errors",
         "protocoladapter:unknown.path"),
        (command("modify", "/attributes/x"), f"{NS}/{NAME}/things/twin/errors",
         "json.field.missing"),
        (command("jump", "/"), f"{NS}/{NAME}/things/twin/errors",
         "protocoladapter:unknown.command"),
        (command("create", "/", {"thingId": "org.acme:other"}), f"{NS}/{NAME}/things/twin/errors",
         "things:id.notsettable"),
    ]
    for payload, topic, code in cases:
        # The publish itself is accepted: the answer says what was wrong.
        assert c.publish("ditto/in/whatever", payload, qos=1) == 0
        error = answer(c)
        assert (error["topic"], error["value"]["error"]) == (topic, code), payload
        assert error["status"] == 400 and error["path"] == "/"


def test_the_puback_comes_after_the_change_is_stored(broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    ditto = Ditto(f"http://{b.host}:{b.http_port}")
    c = b.client(version=5)
    assert c.publish("ditto/in", command("create", "/", CREATE, **{"response-required": False}),
                     qos=1) == 0
    # Acknowledged means committed: visible at once, and still there after
    # a crash right after the acknowledgement.
    assert ditto.get(f"/things/{TID}/attributes/room").json() == "kitchen"
    for n in range(20):
        assert c.publish("ditto/in", command("modify", "/attributes/n", n,
                                             **{"response-required": False}), qos=1) == 0
    b.restart(kill=True)
    ditto = Ditto(f"http://{b.host}:{b.http_port}")
    assert ditto.get(f"/things/{TID}/attributes/n").json() == 19
    assert ditto.get(f"/things/{TID}").headers["ETag"] == '"rev:21"'


def test_policies_over_mqtt(broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    c = with_replies(b.client(version=5, client_id="admin"))
    policy = {"entries": {"owner": {"subjects": {"nginx:ditto": {"type": "generated"}},
                                    "resources": {"policy:/": {"grant": ["READ", "WRITE"],
                                                               "revoke": []}}}}}

    def policy_command(action, path="/", value=None):
        message = {"topic": "org.acme/p1/policies/commands/" + action, "headers": {}, "path": path}
        if value is not None:
            message["value"] = value
        return json.dumps(message).encode()

    c.publish("ditto/in", policy_command("create", "/", policy), qos=1)
    created = answer(c)
    assert created["status"] == 201 and created["value"]["policyId"] == "org.acme:p1"
    c.publish("ditto/in", policy_command("create", "/", policy), qos=1)
    conflict = answer(c)
    assert conflict["topic"] == "org.acme/p1/policies/errors"
    assert (conflict["status"], conflict["value"]["error"]) == (409, "policies:policy.conflict")
    c.publish("ditto/in", policy_command("retrieve", "/entries/owner/subjects"), qos=1)
    assert answer(c)["value"] == {"nginx:ditto": {"type": "generated"}}
    c.publish("ditto/in", policy_command("delete"), qos=1)
    assert answer(c)["status"] == 204


def test_events_and_answers_reach_only_those_the_policy_lets_read(
        tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords",
                                   {"alice": "a", "bob": "b", "carol": "c"})
    b = broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})
    alice = with_replies(user_client(b, "alice", "a", client_id="alice-1"))
    bob = user_client(b, "bob", "b")
    carol = user_client(b, "carol", "c")
    for reader in (bob, carol):
        reader.subscribe("ditto/#", qos=1)
    policy = {"entries": {
        "owner": {"subjects": {"nginx:alice": {"type": "generated"}},
                  "resources": {"thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                "policy:/": {"grant": ["READ", "WRITE"], "revoke": []}}},
        "reader": {"subjects": {"nginx:bob": {"type": "generated"}},
                   "resources": {"thing:/attributes": {"grant": ["READ"], "revoke": []}}}}}
    alice.publish("ditto/in", command("create", "/", {**CREATE, "_policy": policy}), qos=1)
    assert answer(alice)["status"] == 201

    created = json.loads(bob.get().payload)
    assert created["topic"] == f"{NS}/{NAME}/things/twin/events/created"
    assert created["revision"] == 1
    assert created["value"] == {"thingId": TID, "attributes": {"room": "kitchen"}}

    alice.publish("ditto/in", command("modify", "/features/lamp/properties/on", True), qos=1)
    assert answer(alice)["status"] == 204
    alice.publish("ditto/in", command("modify", "/attributes/room", "hall"), qos=1)
    assert answer(alice)["status"] == 204
    event = bob.get()
    assert event.topic == f"ditto/things/{TID}/twin/events/modified"
    body = json.loads(event.payload)
    assert (body["path"], body["value"], body["revision"]) == ("/attributes/room", "hall", 3)
    # Bob saw neither the feature's change nor alice's answers; carol,
    # who may read nothing, saw nothing at all.
    expect_nothing(bob)
    expect_nothing(carol)

    # Bob may not write: refused with Ditto's error, on his own replies.
    with_replies(bob)
    bob.publish("ditto/in", command("modify", "/attributes/room", "x"), qos=1)
    refused = answer(bob)
    assert refused["status"] == 403
    assert refused["value"]["error"] == "things:attribute.notmodifiable"


def test_a_client_without_a_verified_user_is_nobody(tmp_path, broker_factory):
    passwords = make_password_file(tmp_path / "passwords", {"alice": "a"})
    b = broker_factory({"auth": {"password_file": str(passwords)}})
    anonymous = with_replies(b.client(version=5, client_id="anon"))
    anonymous.publish("ditto/in", command("create", "/", CREATE), qos=1)
    error = answer(anonymous)
    assert (error["status"], error["value"]["error"]) == (401, "gateway:authentication.failed")


def test_a_device_held_to_its_own_thing(broker_factory, twin_store):
    b = broker_factory({"twins": {**twin_store, "mqtt_own_thing": "client_id"}})
    device = with_replies(b.client(version=4, client_id=TID))
    device.publish("ditto/in", command("create", "/", CREATE), qos=1)
    assert answer(device)["status"] == 201
    device.publish("ditto/in", command("create", "/", CREATE, thing="org.acme:lamp-2"), qos=1)
    error = answer(device)
    assert error["topic"] == "org.acme/lamp-2/things/twin/errors"
    assert error["value"]["error"] == "connectivity:connection.id.enforcement.failed"
    assert error["status"] == 400


def test_a_bad_mqtt_prefix_names_the_key(broker_factory):
    with pytest.raises(RuntimeError, match=r"twins\.mqtt_prefix"):
        broker_factory({"twins": {"mqtt_prefix": "ditto/#"}})
