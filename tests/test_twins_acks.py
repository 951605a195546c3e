"""Acknowledgements of twin commands (`requested-acks`, `response-required`,
`timeout`) on the real binary, over HTTP (requests) and the Ditto protocol
on /ws/2 (websocket-client), as Ditto's gateway answers them: the plain
response for twin-persisted alone, the aggregated acknowledgements (200,
or 424 with each one's status) for more, 202 without a response, a label
nobody declared timing out with 408, and 400 for what Ditto refuses."""

from __future__ import annotations

import threading

import pytest
import websocket

from conftest import make_password_file
from twins import Ditto
from twins_ws import DittoWs, envelope

pytestmark = pytest.mark.ferry_only

TID = "org.acme:lamp-1"
TOPIC = "org.acme/lamp-1/things/twin"
LAMP = {"attributes": {"room": "hall"}}


@pytest.fixture
def ditto(broker_factory) -> Ditto:
    b = broker_factory()
    return Ditto(f"http://{b.host}:{b.http_port}")


def test_twin_persisted_alone_is_the_plain_response(ditto):
    created = ditto.put(f"/things/{TID}", LAMP, headers={"requested-acks": "twin-persisted"})
    assert created.status_code == 201, created.text
    assert created.json()["attributes"] == {"room": "hall"}
    modified = ditto.put(f"/things/{TID}/attributes/room", "attic",
                         params={"requested-acks": "twin-persisted", "timeout": "5s"})
    assert (modified.status_code, modified.text) == (204, "")


def test_several_labels_answer_the_aggregated_acknowledgements(ditto):
    created = ditto.put(f"/things/{TID}", LAMP,
                        headers={"requested-acks": "twin-persisted,search-persisted",
                                 "correlation-id": "c-1"})
    assert created.status_code == 200, created.text
    body = created.json()
    assert set(body) == {"twin-persisted", "search-persisted"}
    persisted = body["twin-persisted"]
    assert persisted["status"] == 201
    assert persisted["payload"]["thingId"] == TID
    assert persisted["headers"]["correlation-id"] == "c-1"
    assert persisted["headers"]["etag"] == '"rev:1"'
    assert persisted["headers"]["location"].endswith(f"/api/2/things/{TID}")
    assert body["search-persisted"] == {"status": 204, "headers": {"correlation-id": "c-1"}}
    # search-persisted means what it says: the search finds the change.
    found = ditto.get("/search/things", params={"filter": 'eq(attributes/room,"hall")'}).json()
    assert [item["thingId"] for item in found["items"]] == [TID]

    # One label other than twin-persisted: its own status and payload.
    alone = ditto.patch(f"/things/{TID}", {"attributes": {"room": "cellar"}},
                        params={"requested-acks": "search-persisted"})
    assert (alone.status_code, alone.text) == (204, "")


def test_a_label_nobody_declared_times_out_and_fails_the_whole(ditto):
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    answer = ditto.put(f"/things/{TID}/attributes/room", "attic",
                       headers={"requested-acks": "twin-persisted,my-app:processed",
                                "timeout": "300ms"})
    assert answer.status_code == 424, answer.text
    body = answer.json()
    assert body["twin-persisted"]["status"] == 204
    assert body["my-app:processed"]["status"] == 408
    assert body["my-app:processed"]["payload"] == {
        "status": 408,
        "error": "acknowledgement:request.timeout",
        "message": "The acknowledgement request reached the specified timeout of 300ms.",
        "description": "Try increasing the timeout and make sure that the requested "
                       "acknowledgement is sent back in time.",
    }
    # The change itself was committed: the acknowledgement is about the
    # subscriber, not the twin.
    assert ditto.get(f"/things/{TID}/attributes/room").json() == "attic"

    # Without a response, a failure still says which label failed, and no more.
    quiet = ditto.put(f"/things/{TID}/attributes/room", "roof",
                      headers={"requested-acks": "my-app:processed", "timeout": "200ms",
                               "response-required": "false"})
    assert quiet.status_code == 408, quiet.text
    assert quiet.text == ""


def test_no_response_is_202_and_what_ditto_refuses_is_400(ditto):
    accepted = ditto.put(f"/things/{TID}", LAMP,
                         headers={"requested-acks": "twin-persisted,search-persisted",
                                  "response-required": "false"})
    assert (accepted.status_code, accepted.text) == (202, "")
    assert ditto.get(f"/things/{TID}").status_code == 200
    fire = ditto.put(f"/things/{TID}/attributes/room", "attic", params={"timeout": "0"})
    assert fire.status_code == 202

    for headers, complaint in [
        ({"timeout": "0", "response-required": "true"}, "must not be zero"),
        ({"timeout": "0", "requested-acks": "twin-persisted"}, "must not be zero"),
        ({"requested-acks": "no"}, "requested-acks"),
        ({"requested-acks": "white space"}, "requested-acks"),
    ]:
        refused = ditto.put(f"/things/{TID}/attributes/room", "x", headers=headers)
        assert refused.status_code == 400, (headers, refused.text)
        assert refused.json()["error"] == "header.invalid"
        assert complaint in refused.json()["message"]
    assert ditto.get(f"/things/{TID}/attributes/room").json() == "attic"


def test_the_ditto_protocol_answers_acknowledgements(tmp_path, broker_factory):
    passwords = make_password_file(tmp_path / "passwords", {"alice": "a-secret"})
    broker = broker_factory({"auth": {"password_file": str(passwords)}})
    ws = DittoWs(broker, "alice", "a-secret")
    ws.send(envelope(f"{TOPIC}/commands/create", value=LAMP,
                     **{"correlation-id": "c-1",
                        "requested-acks": ["twin-persisted", "search-persisted"]}))
    acks = ws.recv()
    assert acks["topic"] == f"{TOPIC}/acks"
    assert (acks["path"], acks["status"]) == ("/", 200)
    assert acks["headers"]["correlation-id"] == "c-1"
    assert acks["value"]["twin-persisted"]["status"] == 201
    assert acks["value"]["twin-persisted"]["payload"]["thingId"] == TID
    assert acks["value"]["search-persisted"] == {"status": 204,
                                                 "headers": {"correlation-id": "c-1"}}

    # twin-persisted alone: the command's own response.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "attic",
                     **{"correlation-id": "c-2", "requested-acks": ["twin-persisted"]}))
    response = ws.recv()
    assert (response["topic"], response["status"]) == (f"{TOPIC}/commands/modify", 204)

    # A custom label nobody declared: 424 after the timeout.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "roof",
                     **{"correlation-id": "c-3", "timeout": "200ms",
                        "requested-acks": ["twin-persisted", "their:ack"]}))
    failed = ws.recv()
    assert (failed["topic"], failed["status"]) == (f"{TOPIC}/acks", 424)
    assert failed["value"]["their:ack"]["status"] == 408

    # An invalid label: the error, on the command's errors topic.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "x",
                     **{"correlation-id": "c-4", "requested-acks": ["x"]}))
    error = ws.recv()
    assert (error["topic"], error["status"]) == (f"{TOPIC}/errors", 400)
    assert error["value"]["error"] == "header.invalid"
    assert error["headers"]["correlation-id"] == "c-4"

    # No response required and all acknowledged: nothing comes back; the
    # next answer is the next command's.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "cellar",
                     **{"response-required": False,
                        "requested-acks": ["twin-persisted", "search-persisted"]}))
    ws.send(envelope(f"{TOPIC}/commands/retrieve", "/attributes/room",
                     **{"correlation-id": "c-5"}))
    answer = ws.recv()
    assert (answer["headers"]["correlation-id"], answer["value"]) == ("c-5", "cellar")
    ws.close()


# ------------------------------------------ subscribers' acknowledgements
def _alice_and_bob(tmp_path, broker_factory):
    passwords = make_password_file(tmp_path / "passwords",
                                   {"alice": "a-secret", "bob": "b-secret"})
    broker = broker_factory({"auth": {"password_file": str(passwords)}})
    alice = Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")
    return broker, alice


def test_a_websocket_that_declared_a_label_acknowledges_the_event(tmp_path, broker_factory):
    broker, alice = _alice_and_bob(tmp_path, broker_factory)
    assert alice.put(f"/things/{TID}", LAMP).status_code == 201
    subscriber = DittoWs(broker, "alice", "a-secret", query="?declared-acks=app:stored")
    subscriber.control("START-SEND-EVENTS")

    # The command waits on another WebSocket, its answer comes once the
    # subscriber acknowledged.
    commander = DittoWs(broker, "alice", "a-secret")
    commander.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "attic",
                            **{"correlation-id": "c-7", "timeout": "10s",
                               "requested-acks": ["twin-persisted", "app:stored"]}))
    event = subscriber.recv()
    assert event["topic"] == f"{TOPIC}/events/modified"
    assert event["headers"]["requested-acks"] == ["app:stored"]
    assert event["headers"]["correlation-id"] == "c-7"
    subscriber.send({"topic": f"{TOPIC}/acks/app:stored", "path": "/", "status": 200,
                     "value": {"copied": True}, "headers": {"correlation-id": "c-7"}})
    acks = commander.recv()
    assert (acks["topic"], acks["status"]) == (f"{TOPIC}/acks", 200)
    assert acks["value"]["app:stored"]["status"] == 200
    assert acks["value"]["app:stored"]["payload"] == {"copied": True}
    assert acks["value"]["twin-persisted"]["status"] == 204

    # Over HTTP, a failed acknowledgement fails the whole: 424.
    def answer_failing():
        event = subscriber.recv()
        subscriber.send({"topic": f"{TOPIC}/acks/app:stored", "path": "/", "status": 503,
                         "headers": {"correlation-id": event["headers"]["correlation-id"]}})
    acker = threading.Thread(target=answer_failing)
    acker.start()
    failed = alice.put(f"/things/{TID}/attributes/room", "roof",
                       headers={"requested-acks": "twin-persisted,app:stored", "timeout": "10s"})
    acker.join()
    assert failed.status_code == 424, failed.text
    assert failed.json()["app:stored"]["status"] == 503

    # A label the session did not declare is refused, to it.
    subscriber.send({"topic": f"{TOPIC}/acks/other:label", "path": "/", "status": 200,
                     "headers": {"correlation-id": "x"}})
    refused = subscriber.recv()
    assert refused["topic"] == f"{TOPIC}/errors"
    assert refused["value"]["error"] == "acknowledgement:label.not.declared"

    # The same session may request and acknowledge: its command does not
    # hold up its own events.
    subscriber.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "hall",
                             **{"correlation-id": "c-8", "timeout": "10s",
                                "requested-acks": ["app:stored"]}))
    event = subscriber.recv()
    assert event["headers"]["correlation-id"] == "c-8"
    subscriber.send({"topic": f"{TOPIC}/acks/app:stored", "path": "/", "status": 201,
                     "headers": {"correlation-id": "c-8"}})
    own = subscriber.recv()
    assert (own["topic"], own["status"]) == (f"{TOPIC}/acks", 201)
    subscriber.close()
    commander.close()


def test_a_declarer_that_does_not_get_the_event_acknowledges_weakly(tmp_path, broker_factory):
    broker, alice = _alice_and_bob(tmp_path, broker_factory)
    assert alice.put(f"/things/{TID}", LAMP).status_code == 201
    request = {"requested-acks": "twin-persisted,app:seen", "timeout": "30s"}

    # Declared, but not taking events: a weak acknowledgement at once,
    # long before the 30 s timeout.
    idle = DittoWs(broker, "alice", "a-secret", query="?declared-acks=app:seen")
    answer = alice.put(f"/things/{TID}/attributes/room", "attic", headers=request)
    assert answer.status_code == 200, answer.text
    weak = answer.json()["app:seen"]
    assert (weak["status"], weak["headers"]["ditto-weak-ack"]) == (200, True)

    # Taking events of another namespace only: the event is filtered out
    # for it, so again weakly acknowledged.
    idle.control("START-SEND-EVENTS?namespaces=other")
    answer = alice.put(f"/things/{TID}/attributes/room", "roof", headers=request)
    assert answer.status_code == 200, answer.text
    assert answer.json()["app:seen"]["headers"]["ditto-weak-ack"] is True

    # Bob may not read the thing: his session's label is acknowledged
    # weakly too, and he sees nothing of it.
    bob = DittoWs(broker, "bob", "b-secret", query="?declared-acks=app:read")
    bob.control("START-SEND-EVENTS")
    answer = alice.put(f"/things/{TID}/attributes/room", "cellar",
                       headers={"requested-acks": "twin-persisted,app:read", "timeout": "30s"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["app:read"]["headers"]["ditto-weak-ack"] is True

    # A label has one declarer: a second session claiming it is closed
    # after Ditto's error.
    second = DittoWs(broker, "alice", "a-secret", query="?declared-acks=app:read")
    error = second.recv()
    assert error["value"]["error"] == "acknowledgement:label.not.unique"
    assert error["status"] == 409
    opcode, data = second.ws.recv_data(control_frame=True)
    assert opcode == websocket.ABNF.OPCODE_CLOSE
    assert int.from_bytes(data[:2], "big") == 1008  # policy violation
    bob.close()
    idle.close()


def test_live_messages_with_labels_still_go_to_the_device(tmp_path, broker_factory):
    """A live message naming acknowledgement labels is a live signal, not a
    twin command: it reaches the device as before."""
    broker, alice = _alice_and_bob(tmp_path, broker_factory)
    assert alice.put(f"/things/{TID}", LAMP).status_code == 201
    device = DittoWs(broker, "alice", "a-secret")
    device.control("START-SEND-MESSAGES")
    sender = DittoWs(broker, "alice", "a-secret")
    sender.send({"topic": "org.acme/lamp-1/things/live/messages/ping", "path": "/inbox/messages/ping",
                 "value": "hi", "headers": {"correlation-id": "l-1", "response-required": False,
                                            "content-type": "text/plain",
                                            "requested-acks": ["app:seen"]}})
    message = device.recv()
    assert (message["topic"], message["value"]) == ("org.acme/lamp-1/things/live/messages/ping", "hi")
    device.close()
    sender.close()
