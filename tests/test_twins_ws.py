"""Ditto's WebSocket (/ws/2) on the real binary with a real WebSocket
client (websocket-client), on SQLite and on PostgreSQL: the control
messages and their acknowledgements, twin commands with correlation ids,
errors, and twin events as each reader's policy lets it see them."""

from __future__ import annotations

import base64

import pytest
import websocket

from conftest import make_password_file
from twins import Ditto
from twins_ws import DittoWs, envelope

pytestmark = pytest.mark.ferry_only

TID = "org.acme:lamp-1"
TOPIC = "org.acme/lamp-1/things/twin"


def _start(tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords",
                                   {"alice": "a-secret", "bob": "b-secret"})
    return broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})


def _alice(broker) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")


def test_every_start_and_stop_is_acknowledged(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    for stream in ["EVENTS", "MESSAGES", "LIVE-COMMANDS", "LIVE-EVENTS", "POLICY-ANNOUNCEMENTS"]:
        ws.control(f"START-SEND-{stream}")
        ws.control(f"START-SEND-{stream}")  # again: acknowledged again, as Ditto
        ws.control(f"STOP-SEND-{stream}")
    ws.control("START-SEND-EVENTS?namespaces=org.acme,other&correlation-id=c1")
    ws.control("START-SEND-MESSAGES?namespaces=org.acme")
    ws.close()


def test_the_upgrade_is_authenticated_like_the_api(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        DittoWs(broker, "alice", "wrong")
    assert refused.value.status_code == 401
    token = base64.b64encode(b"alice:a-secret").decode()
    with pytest.raises(websocket.WebSocketBadStatusException) as anonymous:
        websocket.create_connection(f"ws://{broker.host}:{broker.http_port}/ws/2", timeout=10)
    assert anonymous.value.status_code == 401
    ok = websocket.create_connection(f"ws://{broker.host}:{broker.http_port}/ws/2",
                                     header=[f"Authorization: Basic {token}"], timeout=10)
    ok.close()


def test_commands_with_correlation_ids_and_errors(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    ws.send(envelope(f"{TOPIC}/commands/create", "/", {"attributes": {"on": False}},
                     **{"correlation-id": "c-create"}))
    created = ws.recv()
    assert created["topic"] == f"{TOPIC}/commands/create"
    assert created["status"] == 201 and created["headers"]["correlation-id"] == "c-create"
    assert created["value"]["thingId"] == TID

    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/on", True,
                     **{"correlation-id": "c-modify"}))
    modified = ws.recv()
    assert (modified["status"], modified["headers"]["correlation-id"]) == (204, "c-modify")

    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/x", 1,
                     **{"correlation-id": "quiet", "response-required": False}))
    ws.send(envelope(f"{TOPIC}/commands/retrieve", "/attributes",
                     **{"correlation-id": "c-retrieve"}))
    retrieved = ws.recv()  # nothing for the quiet one: this is the next frame
    assert retrieved["headers"]["correlation-id"] == "c-retrieve"
    assert retrieved["status"] == 200 and retrieved["value"] == {"on": True, "x": 1}

    ws.send(envelope("org.acme/missing/things/twin/commands/retrieve", "/",
                     **{"correlation-id": "c-missing"}))
    missing = ws.recv()
    assert missing["topic"] == "org.acme/missing/things/twin/errors"
    assert missing["status"] == 404 and missing["value"]["error"] == "things:thing.notfound"
    assert missing["headers"]["correlation-id"] == "c-missing"

    ws.send_text("{not json")
    broken = ws.recv()
    assert broken["topic"] == "unknown/unknown/things/twin/errors"
    assert broken["value"]["error"] == "json.invalid"

    bob = DittoWs(broker, "bob", "b-secret")
    bob.send(envelope(f"{TOPIC}/commands/retrieve", "/", **{"correlation-id": "c-bob"}))
    hidden = bob.recv()
    assert hidden["status"] == 404 and hidden["headers"]["correlation-id"] == "c-bob"
    ws.close()
    bob.close()


def test_events_show_each_reader_what_its_policy_lets_it_read(tmp_path, broker_factory,
                                                              twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = _alice(broker)
    policy = {"entries": {
        "OWNER": {"subjects": {"nginx:alice": {"type": "generated"}},
                  "resources": {"thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                "policy:/": {"grant": ["READ", "WRITE"], "revoke": []}}},
        "READER": {"subjects": {"nginx:bob": {"type": "generated"}},
                   "resources": {"thing:/attributes/public": {"grant": ["READ"], "revoke": []}}},
    }}
    assert alice.put(f"/policies/{TID}", policy).status_code == 201
    assert alice.put(f"/things/{TID}", {"policyId": TID}).status_code == 201

    owner = DittoWs(broker, "alice", "a-secret")
    owner.control("START-SEND-EVENTS")
    bob = DittoWs(broker, "bob", "b-secret")
    bob.control("START-SEND-EVENTS")

    assert alice.put(f"/things/{TID}/attributes", {"public": 1, "secret": 2}).status_code == 201
    seen = owner.recv()
    assert seen["topic"] == f"{TOPIC}/events/created" and seen["path"] == "/attributes"
    assert seen["value"] == {"public": 1, "secret": 2} and seen["revision"] == 2
    # The headers every Ditto event carries: nobody answers it, it asks no
    # acknowledgement, and its value is JSON, in protocol version 2.
    headers = seen["headers"]
    assert (headers["response-required"], headers["requested-acks"]) == (False, [])
    assert (headers["content-type"], headers["version"]) == ("application/json", 2)
    partial = bob.recv()
    assert partial["topic"] == f"{TOPIC}/events/created"
    assert partial["value"] == {"public": 1}

    # A change bob may not read at all reaches him not; the next he may
    # read is his next frame.
    assert alice.put(f"/things/{TID}/attributes/secret", 3).status_code == 204
    assert alice.put(f"/things/{TID}/attributes/public", 4).status_code == 204
    nxt = bob.recv()
    assert (nxt["path"], nxt["value"], nxt["revision"]) == ("/attributes/public", 4, 4)
    assert owner.recv()["path"] == "/attributes/secret"
    assert owner.recv()["path"] == "/attributes/public"

    # After STOP nothing comes; START again, and events come again.
    bob.control("STOP-SEND-EVENTS")
    assert alice.put(f"/things/{TID}/attributes/public", 5).status_code == 204
    bob.control("START-SEND-EVENTS")
    assert alice.put(f"/things/{TID}/attributes/public", 6).status_code == 204
    six = bob.recv()
    assert six["value"] == 6 and "correlation-id" not in six["headers"]

    # An event carries its command's correlation-id, as Ditto's do, over
    # HTTP and over the protocol alike.
    assert alice.put(f"/things/{TID}/attributes/public", 7,
                     headers={"correlation-id": "http-7"}).status_code == 204
    assert bob.recv()["headers"]["correlation-id"] == "http-7"
    owner.send(envelope(f"{TOPIC}/commands/modify", "/attributes/public", 8,
                        **{"correlation-id": "ws-8", "response-required": False}))
    assert bob.recv()["headers"]["correlation-id"] == "ws-8"
    # A merge's value is a JSON merge patch, and its event says so.
    assert alice.patch(f"/things/{TID}/attributes", {"public": 9}).status_code == 204
    merged = bob.recv()
    assert merged["topic"] == f"{TOPIC}/events/merged"
    assert merged["headers"]["content-type"] == "application/merge-patch+json"
    owner.close()
    bob.close()


def test_events_of_other_namespaces_are_left_out(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = _alice(broker)
    ws = DittoWs(broker, "alice", "a-secret")
    ws.control("START-SEND-EVENTS?namespaces=org.other")
    assert alice.put(f"/things/{TID}", {}).status_code == 201
    assert alice.put("/things/org.other:lamp-2", {}).status_code == 201
    event = ws.recv()
    assert event["topic"] == "org.other/lamp-2/things/twin/events/created"
    ws.close()


def test_events_filtered_by_rql_with_extra_fields(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = _alice(broker)
    assert alice.put(f"/things/{TID}", {"attributes": {"room": "hall", "on": False}}
                     ).status_code == 201
    ws = DittoWs(broker, "alice", "a-secret")
    # The filter sees the event's partial thing with its extra fields, as
    # Ditto's StreamingSession: the room comes from extraFields.
    ws.control("START-SEND-EVENTS?filter=and(eq(attributes/on,true),eq(attributes/room,%22hall%22))"
               "&extraFields=attributes/room")
    assert alice.put(f"/things/{TID}/attributes/on", False).status_code == 204
    assert alice.put(f"/things/{TID}/attributes/on", True).status_code == 204
    event = ws.recv()
    assert (event["path"], event["value"]) == ("/attributes/on", True)
    assert event["extra"] == {"attributes": {"room": "hall"}}
    ws.close()


def test_a_malformed_filter_is_refused_without_ack(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    ws.send_text("START-SEND-EVENTS?filter=eq(attributes/on&correlation-id=c-f")
    refused = ws.recv()
    assert refused["status"] == 400 and refused["headers"]["correlation-id"] == "c-f"
    assert refused["value"]["error"] == "rql.expression.invalid"
    ws.control("START-SEND-EVENTS")
    ws.close()


def test_a_malformed_control_message_closes_the_socket(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    ws.send_text("START-SEND-EVENTS?filter")
    opcode, frame = ws.ws.recv_data(control_frame=True)
    assert opcode == websocket.ABNF.OPCODE_CLOSE
    assert int.from_bytes(frame[:2], "big") == 1011
    ws.close()


def test_shutdown_closes_sessions_going_away(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    ws.control("START-SEND-EVENTS")
    assert broker.stop(close_clients=False) == 0
    opcode, frame = ws.ws.recv_data(control_frame=True)
    assert opcode == websocket.ABNF.OPCODE_CLOSE
    assert int.from_bytes(frame[:2], "big") == 1001
    ws.close()
