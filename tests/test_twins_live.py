"""Live messages, live commands and live events on the real binary, on
SQLite and on PostgreSQL: HTTP's inbox and outbox answered by devices on
WebSocket (websocket-client) and MQTT (paho-mqtt), timeouts, persistent
(qos=1) messages to a device that is away, and the policy on every
signal."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from conftest import make_password_file
from twins import Ditto
from twins_ws import DittoWs, envelope

pytestmark = pytest.mark.ferry_only

TID = "org.acme:lamp-1"
T = f"/things/{TID}"
LIVE = "org.acme/lamp-1/things/live"

USERS = {"alice": "a-secret", "dev": "d-secret", "eve": "e-secret", "mallory": "m-secret"}


def _grant(subject: str, resources: dict) -> dict:
    return {"subjects": {f"nginx:{subject}": {"type": "generated"}},
            "resources": {key: {"grant": grant, "revoke": []} for key, grant in resources.items()}}


POLICY = {"entries": {
    # The application: everything.
    "OWNER": _grant("alice", {"thing:/": ["READ", "WRITE"], "policy:/": ["READ", "WRITE"],
                              "message:/": ["READ", "WRITE"]}),
    # The device: reads its inbox and the thing, writes its outbox.
    "DEVICE": _grant("dev", {"message:/inbox": ["READ"], "message:/features": ["READ"],
                             "message:/outbox": ["WRITE"], "thing:/": ["READ", "WRITE"]}),
    # Another reader: one public subject and one attribute only.
    "EVE": _grant("eve", {"message:/inbox/messages/public": ["READ"],
                          "thing:/attributes/public": ["READ"]}),
    # May read the thing but not send messages.
    "MALLORY": _grant("mallory", {"thing:/": ["READ"], "message:/": ["READ"]}),
}}


def _start(tmp_path, broker_factory, twin_store, **twins):
    passwords = make_password_file(tmp_path / "passwords", USERS)
    broker = broker_factory({"auth": {"password_file": str(passwords)},
                             "twins": {**twin_store, **twins}})
    alice = _http(broker, "alice")
    assert alice.put(f"/policies/{TID}", POLICY).status_code == 201
    assert alice.put(T, {"policyId": TID, "attributes": {"public": 0}}).status_code == 201
    return broker, alice


def _http(broker, user: str) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}", user, USERS[user])


def _ws(broker, user: str) -> DittoWs:
    return DittoWs(broker, user, USERS[user])


def _in_background(call):
    """Runs a blocking HTTP call in a thread; returns a function awaiting
    its response."""
    result: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: result.put(call()), daemon=True).start()
    return lambda: result.get(timeout=30)


def _respond(request: dict, status: int, value=None, content_type="application/json") -> dict:
    headers = {"correlation-id": request["headers"]["correlation-id"],
               "content-type": content_type}
    answer = {"topic": request["topic"], "headers": headers, "path": request["path"],
              "status": status}
    if value is not None:
        answer["value"] = value
    return answer


class MqttDevice:
    """A paho MQTT 5 device: received publishes in a queue, every wait
    bounded."""

    def __init__(self, broker, user: str, client_id: str, clean: bool = True,
                 session_expiry: int = 0):
        self.received: queue.Queue = queue.Queue()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv5)
        self.client.username_pw_set(user, USERS[user])
        self.client.on_message = lambda _c, _u, message: self.received.put(message)
        connected = threading.Event()
        self.client.on_connect = lambda *_: connected.set()
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = session_expiry
        self.client.connect(broker.host, broker.port, clean_start=clean, properties=properties)
        self.client.loop_start()
        assert connected.wait(10)

    def subscribe(self, topic: str) -> None:
        done = threading.Event()
        self.client.on_subscribe = lambda *_: done.set()
        self.client.subscribe(topic, qos=1)
        assert done.wait(10)

    def publish(self, topic: str, message: dict) -> None:
        self.client.publish(topic, json.dumps(message), qos=1).wait_for_publish(10)

    def next(self):
        return self.received.get(timeout=15)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_a_claim_needs_no_write_on_messages_and_the_device_answers_it(
        tmp_path, broker_factory, twin_store):
    """Ditto's claim message: a caller without WRITE on the thing's
    messages (mallory) cannot send it a message, but may claim it; the
    device, which reads its inbox, gets the claim and answers it."""
    broker, _ = _start(tmp_path, broker_factory, twin_store)
    device = _ws(broker, "dev")
    device.control("START-SEND-MESSAGES")
    mallory = _http(broker, "mallory")
    refused = mallory.post(f"{T}/inbox/messages/claim", {"me": "mallory"})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"] == "messages:send.notallowed"

    answer = _in_background(lambda: mallory.post(f"{T}/inbox/claim", {"me": "mallory"},
                                                  headers={"correlation-id": "claim-1"}))
    request = device.recv()
    assert request["topic"] == f"{LIVE}/messages/claim"
    assert (request["path"], request["value"]) == ("/inbox/claim", {"me": "mallory"})
    assert request["headers"]["subject"] == "claim"
    device.send(_respond(request, 200, {"granted": False}))
    response = answer()
    assert response.status_code == 200, response.text
    assert response.json() == {"granted": False}
    # A claim is to an existing thing.
    missing = mallory.post("/things/org.acme:nothing/inbox/claim", {})
    assert missing.status_code == 404, missing.text


def test_http_message_answered_by_a_websocket_device(tmp_path, broker_factory, twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    device = _ws(broker, "dev")
    device.control("START-SEND-MESSAGES")

    answer = _in_background(lambda: alice.post(f"{T}/inbox/messages/ask/time", {"tz": "UTC"},
                                                headers={"correlation-id": "q-1"}))
    request = device.recv()
    assert request["topic"] == f"{LIVE}/messages/ask/time"
    assert request["path"] == "/inbox/messages/ask/time"
    assert request["value"] == {"tz": "UTC"}
    headers = request["headers"]
    assert headers["correlation-id"] == "q-1" and headers["content-type"] == "application/json"
    assert (headers["direction"], headers["subject"], headers["thing-id"]) == (
        "TO", "ask/time", TID)
    device.send(_respond(request, 201, "12:00", "text/plain"))
    response = answer()
    assert response.status_code == 201, response.text
    assert response.text == "12:00"
    assert response.headers["Content-Type"].startswith("text/plain")
    assert response.headers["correlation-id"] == "q-1"

    # A JSON answer, to a feature's inbox; a 204 has no body.
    answer = _in_background(lambda: alice.post(f"{T}/features/lamp/inbox/messages/toggle", None))
    request = device.recv()
    assert request["path"] == "/features/lamp/inbox/messages/toggle"
    assert request["headers"]["feature-id"] == "lamp" and "value" not in request
    device.send(_respond(request, 200, {"on": True}))
    response = answer()
    assert (response.status_code, response.json()) == (200, {"on": True})

    answer = _in_background(lambda: alice.post(f"{T}/inbox/messages/ping", None))
    device.send(_respond(device.recv(), 204, {"ignored": True}))
    assert answer().status_code == 204
    device.close()


def _ack(request: dict, label: str, status: int, value=None) -> dict:
    """A receiver's acknowledgement of a live message under `label`."""
    ns, name = request["topic"].split("/")[:2]
    ack = {"topic": f"{ns}/{name}/things/live/acks/{label}",
           "headers": {"correlation-id": request["headers"]["correlation-id"]},
           "path": "/", "status": status}
    if value is not None:
        ack["value"] = value
    return ack


def test_a_live_message_gathers_its_receivers_acknowledgements(tmp_path, broker_factory,
                                                               twin_store):
    """As Ditto's MessageCommandAckRequestSetter and aggregator: custom
    labels beside `live-response` (added when a response is required),
    the twin's labels dropped, 200 or 424 with each label's status."""
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    device = DittoWs(broker, "dev", USERS["dev"], query="?declared-acks=dev:received")
    device.control("START-SEND-MESSAGES")

    def ask(params: dict, payload=None):
        """Sends a message in the background: how to await its answer,
        and the request as the device got it."""
        answer = _in_background(lambda: alice.post(
            f"{T}/inbox/messages/ask", payload, params=params))
        return answer, device.recv()

    answer, request = ask({"requested-acks": "dev:received", "timeout": "5"}, {"q": 1})
    assert request["headers"]["requested-acks"] == ["dev:received", "live-response"]
    device.send(_ack(request, "dev:received", 204))
    device.send(_respond(request, 200, {"a": 1}))
    response = answer()
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dev:received"]["status"] == 204
    assert body["live-response"]["status"] == 200 and body["live-response"]["payload"] == {"a": 1}
    assert response.headers["correlation-id"] == request["headers"]["correlation-id"]

    # A failed acknowledgement fails the whole: 424, each label's status.
    answer, request = ask({"requested-acks": "dev:received"})
    device.send(_ack(request, "dev:received", 503, {"busy": True}))
    device.send(_respond(request, 200, {"a": 2}))
    response = answer()
    assert response.status_code == 424, response.text
    body = response.json()
    assert (body["dev:received"]["status"], body["dev:received"]["payload"]) == (503, {"busy": True})
    assert body["live-response"]["status"] == 200

    # No response required: only the acknowledgement is awaited, and a
    # success is 202.
    answer, request = ask({"requested-acks": "dev:received", "response-required": "false"})
    assert request["headers"]["requested-acks"] == ["dev:received"]
    device.send(_ack(request, "dev:received", 200))
    assert answer().status_code == 202

    # A label nobody acknowledges times out (408) within the aggregate;
    # the device's own response still counts.
    answer, request = ask({"requested-acks": "nobody:declared", "timeout": "1"})
    device.send(_respond(request, 200, {"a": 3}))
    response = answer()
    assert response.status_code == 424, response.text
    body = response.json()
    assert body["nobody:declared"]["status"] == 408
    assert body["nobody:declared"]["payload"]["error"] == "acknowledgement:request.timeout"
    assert body["live-response"]["status"] == 200

    # The twin's labels are dropped, and then, as Ditto's setter does, the
    # labels given are kept as they are: no live-response added, so the
    # one label's acknowledgement is the answer.
    answer, request = ask({"requested-acks": "dev:received,twin-persisted"})
    assert request["headers"]["requested-acks"] == ["dev:received"]
    device.send(_ack(request, "dev:received", 200, {"got": True}))
    response = answer()
    assert (response.status_code, response.json()) == (200, {"got": True})

    # Only the twin's labels: dropped, the plain response.
    answer, request = ask({"requested-acks": "twin-persisted"})
    assert request["headers"]["requested-acks"] == []
    device.send(_respond(request, 201, {"a": 4}))
    response = answer()
    assert (response.status_code, response.json()) == (201, {"a": 4})

    # Declarers that do not get the message, one not listening and one
    # listening without READ on the subject, answer for it at once with
    # weak acknowledgements.
    idle = DittoWs(broker, "alice", USERS["alice"], query="?declared-acks=app:seen")
    eve = DittoWs(broker, "eve", USERS["eve"], query="?declared-acks=eve:read")
    eve.control("START-SEND-MESSAGES")
    answer, request = ask({"requested-acks": "app:seen,eve:read", "timeout": "20"})
    device.send(_respond(request, 200, {"a": 6}))
    response = answer()
    assert response.status_code == 200, response.text  # a label timed out would be 408
    body = response.json()
    for label in ["app:seen", "eve:read"]:
        assert body[label]["status"] == 200
        assert body[label]["headers"]["ditto-weak-ack"] is True
    idle.close()
    eve.close()

    # Over the Ditto protocol the sender gets the aggregate as
    # `…/things/live/acks`.
    sender = _ws(broker, "alice")
    sender.send(envelope(f"{LIVE}/messages/ask", "/inbox/messages/ask", {"q": 5},
                         **{"correlation-id": "ws-1", "requested-acks": ["dev:received"]}))
    request = device.recv()
    device.send(_ack(request, "dev:received", 204))
    device.send(_respond(request, 200, {"a": 5}))
    acks = sender.recv()
    assert acks["topic"] == "org.acme/lamp-1/things/live/acks", acks
    assert (acks["status"], acks["headers"]["correlation-id"]) == (200, "ws-1")
    assert acks["value"]["dev:received"]["status"] == 204
    assert acks["value"]["live-response"]["payload"] == {"a": 5}
    sender.close()
    device.close()


def test_http_message_answered_by_an_mqtt_device(tmp_path, broker_factory, twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    device = MqttDevice(broker, "dev", "lamp-1")
    device.subscribe("ditto/things/+/live/messages/#")

    answer = _in_background(lambda: alice.post(f"{T}/inbox/messages/switch", {"on": True}))
    received = device.next()
    assert received.topic == f"ditto/things/{TID}/live/messages/switch"
    assert received.properties.MessageExpiryInterval == 10  # the call's timeout
    request = json.loads(received.payload)
    assert request["value"] == {"on": True}
    device.publish("ditto/in", _respond(request, 200, {"switched": True}))
    response = answer()
    assert (response.status_code, response.json()) == (200, {"switched": True})
    assert response.headers["correlation-id"] == request["headers"]["correlation-id"]

    # A device's error response is the HTTP error.
    answer = _in_background(lambda: alice.post(f"{T}/inbox/messages/switch", {"on": 2}))
    request = json.loads(device.next().payload)
    error = {"status": 400, "error": "lamp:value.invalid", "message": "on is a boolean"}
    device.publish("ditto/in", {"topic": "org.acme/lamp-1/things/live/errors", "path": "/",
                                "headers": {"correlation-id":
                                            request["headers"]["correlation-id"]},
                                "status": 400, "value": error})
    response = answer()
    assert (response.status_code, response.json()) == (400, error)
    device.close()


def test_no_answer_is_408_and_timeout_0_is_202(tmp_path, broker_factory, twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    device = _ws(broker, "dev")
    device.control("START-SEND-MESSAGES")

    response = alice.post(f"{T}/inbox/messages/ask", "?", params={"timeout": "1"})
    assert response.status_code == 408, response.text
    assert response.json()["error"] == "command.timeout"
    assert response.json()["message"] == "The Command reached the specified timeout of 1,000ms."
    late = device.recv()  # the device got it, and answers too late: dropped
    device.send(_respond(late, 200, "late"))

    response = alice.post(f"{T}/inbox/messages/fire", {"x": 1}, params={"timeout": "0"})
    assert response.status_code == 202 and response.text == ""
    fired = device.recv()
    assert fired["headers"]["response-required"] is False and fired["value"] == {"x": 1}

    too_long = alice.post(f"{T}/inbox/messages/ask", "?", params={"timeout": "61"})
    assert too_long.status_code == 400 and too_long.json()["error"] == "timeout.invalid"
    device.close()


def test_persistent_message_waits_for_an_offline_device(tmp_path, broker_factory, twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    device = MqttDevice(broker, "dev", "lamp-1", clean=True, session_expiry=3600)
    device.subscribe("ditto/things/+/live/messages/#")
    device.close()

    sent = alice.post(f"{T}/inbox/messages/firmware", {"v": 2},
                      params={"qos": "1", "ttl": "600"})
    assert sent.status_code == 202, sent.text
    correlation_id = sent.json()["correlationId"]
    assert sent.headers["correlation-id"] == correlation_id
    poll = f"{T}/inbox/messages/firmware"
    pending = alice.get(poll, params={"correlation-id": correlation_id})
    assert (pending.status_code, pending.json()["state"]) == (200, "pending")
    # Only its sender may poll it.
    assert _http(broker, "dev").get(poll, params={"correlation-id": correlation_id}) \
        .status_code == 404

    device = MqttDevice(broker, "dev", "lamp-1", clean=False, session_expiry=3600)
    received = device.next()
    assert received.topic == f"ditto/things/{TID}/live/messages/firmware"
    assert 0 < received.properties.MessageExpiryInterval <= 600
    request = json.loads(received.payload)
    assert request["headers"]["correlation-id"] == correlation_id
    device.publish("ditto/in", _respond(request, 200, {"installed": 2}))

    deadline = time.monotonic() + 10
    while True:  # the outcome is recorded beside the device's PUBACK
        outcome = alice.get(poll, params={"correlation-id": correlation_id}).json()
        if outcome["state"] != "pending" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert outcome["state"] == "answered", outcome
    assert (outcome["status"], outcome["value"]) == (200, {"installed": 2})
    unknown = alice.get(poll, params={"correlation-id": str(uuid.uuid4())})
    assert unknown.status_code == 404
    device.close()


def test_sending_needs_write_on_the_message_resource(tmp_path, broker_factory, twin_store):
    broker, _ = _start(tmp_path, broker_factory, twin_store)
    mallory = _http(broker, "mallory")
    refused = mallory.post(f"{T}/inbox/messages/ask", "?")
    assert refused.status_code == 403
    assert refused.json()["error"] == "messages:send.notallowed"
    assert refused.json()["message"] == \
        f"You are not allowed to send messages for the Thing with id '{TID}'!"
    # The device may write its outbox, not its inbox.
    dev = _http(broker, "dev")
    assert dev.post(f"{T}/inbox/messages/x", 1).status_code == 403
    assert dev.post(f"{T}/outbox/messages/x", 1, params={"timeout": "0"}).status_code == 202
    missing = _http(broker, "alice").post("/things/org.acme:nothing/inbox/messages/x", 1)
    assert (missing.status_code, missing.json()["error"]) == (404, "things:thing.notfound")

    # Over WebSocket too, with Ditto's error response.
    ws = _ws(broker, "mallory")
    ws.send(envelope(f"{LIVE}/messages/ask", "/inbox/messages/ask", "?",
                     **{"correlation-id": "m-1"}))
    error = ws.recv()
    assert (error["topic"], error["status"]) == (f"{LIVE}/errors", 403)
    assert error["value"]["error"] == "messages:send.notallowed"
    assert error["headers"]["correlation-id"] == "m-1"
    ws.close()


def test_a_receiver_without_read_does_not_get_the_message(tmp_path, broker_factory,
                                                          twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    eve = _ws(broker, "eve")
    eve.control("START-SEND-MESSAGES")
    eve_mqtt = MqttDevice(broker, "eve", "eve-1")
    eve_mqtt.subscribe("ditto/things/+/live/messages/#")
    device = _ws(broker, "dev")
    device.control("START-SEND-MESSAGES")

    for subject in ["secret", "public"]:
        sent = alice.session.post(f"{alice.base}{T}/inbox/messages/{subject}", data=subject,
                                  params={"timeout": "0"}, timeout=10,
                                  headers={"Content-Type": "text/plain"})
        assert sent.status_code == 202
    assert [device.recv()["value"], device.recv()["value"]] == ["secret", "public"]
    # Eve's first message is the one she may read.
    assert eve.recv()["value"] == "public"
    assert json.loads(eve_mqtt.next().payload)["value"] == "public"
    eve.close()
    eve_mqtt.close()
    device.close()


def test_live_commands_and_events_between_websocket_and_mqtt(tmp_path, broker_factory,
                                                             twin_store):
    broker, _ = _start(tmp_path, broker_factory, twin_store)
    app = _ws(broker, "alice")
    device = _ws(broker, "dev")
    device.control("START-SEND-LIVE-COMMANDS")

    # A live command from the app, answered by the device.
    app.send(envelope(f"{LIVE}/commands/modify", "/attributes/public", 7,
                      **{"correlation-id": "lc-1"}))
    command = device.recv()
    assert command["topic"] == f"{LIVE}/commands/modify" and command["value"] == 7
    device.send({"topic": command["topic"], "path": command["path"], "status": 204,
                 "headers": {"correlation-id": "lc-1"}})
    response = app.recv()
    assert (response["topic"], response["status"]) == (f"{LIVE}/commands/modify", 204)
    assert response["headers"]["correlation-id"] == "lc-1"

    # A live retrieve's answer is cut to what the sender may read.
    eve = _ws(broker, "eve")
    eve.send(envelope(f"{LIVE}/commands/retrieve", "/attributes", **{"correlation-id": "lc-2"}))
    command = device.recv()
    device.send({"topic": command["topic"], "path": command["path"], "status": 200,
                 "headers": {"correlation-id": "lc-2"}, "value": {"public": 1, "secret": 2}})
    assert eve.recv()["value"] == {"public": 1}

    # A live command without permission is Ditto's 403 of the resource.
    eve.send(envelope(f"{LIVE}/commands/modify", "/attributes/public", 1,
                      **{"correlation-id": "lc-3"}))
    refused = eve.recv()
    assert refused["status"] == 403
    assert refused["value"]["error"] == "things:attribute.notmodifiable"

    # Live events from an MQTT device reach the readers, cut to their view.
    app.control("START-SEND-LIVE-EVENTS")
    eve.control("START-SEND-LIVE-EVENTS")
    mqtt_device = MqttDevice(broker, "dev", "lamp-1")
    mqtt_device.publish("ditto/in", envelope(f"{LIVE}/events/modified", "/attributes",
                                             {"public": 3, "secret": 4}))
    assert app.recv()["value"] == {"public": 3, "secret": 4}
    seen = eve.recv()
    assert (seen["topic"], seen["value"]) == (f"{LIVE}/events/modified", {"public": 3})

    # A live message the MQTT device sends from its outbox reaches the app.
    app.control("START-SEND-MESSAGES")
    mqtt_device.publish("ditto/in", envelope(f"{LIVE}/messages/alarm", "/outbox/messages/alarm",
                                             "smoke", **{"response-required": False}))
    alarm = app.recv()
    assert (alarm["path"], alarm["value"]) == ("/outbox/messages/alarm", "smoke")

    # Live commands to an MQTT device, answered over MQTT.
    mqtt_device.subscribe("ditto/things/+/live/commands/#")
    app.send(envelope(f"{LIVE}/commands/delete", "/attributes/public",
                      **{"correlation-id": "lc-4"}))
    received = mqtt_device.next()
    assert received.topic == f"ditto/things/{TID}/live/commands/delete"
    mqtt_device.publish("ditto/in", {"topic": f"{LIVE}/commands/delete", "status": 204,
                                     "path": "/attributes/public",
                                     "headers": {"correlation-id": "lc-4"}})
    assert app.recv()["headers"]["correlation-id"] == "lc-4"
    mqtt_device.close()
    for ws in (app, device, eve):
        ws.close()


def test_http_live_commands_are_answered_by_the_device(tmp_path, broker_factory, twin_store):
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    device = _ws(broker, "dev")
    device.control("START-SEND-LIVE-COMMANDS")

    answer = _in_background(lambda: alice.put(f"{T}/attributes/public", 9,
                                              params={"channel": "live"}))
    command = device.recv()
    assert (command["topic"], command["path"], command["value"]) == (
        f"{LIVE}/commands/modify", "/attributes/public", 9)
    device.send({"topic": command["topic"], "path": command["path"], "status": 204,
                 "headers": {"correlation-id": command["headers"]["correlation-id"]}})
    assert answer().status_code == 204
    assert alice.get(f"{T}/attributes/public").json() == 0, "the twin is left alone"

    eve = _http(broker, "eve")
    answer = _in_background(lambda: eve.get(f"{T}/attributes", headers={"channel": "live"}))
    command = device.recv()
    assert command["topic"] == f"{LIVE}/commands/retrieve"
    device.send({"topic": command["topic"], "path": command["path"], "status": 200,
                 "headers": {"correlation-id": command["headers"]["correlation-id"]},
                 "value": {"public": 9, "secret": 1}})
    response = answer()
    assert (response.status_code, response.json()) == (200, {"public": 9})

    refused = eve.put(f"{T}/attributes/public", 1, params={"channel": "live"})
    assert (refused.status_code, refused.json()["error"]) == (
        403, "things:attribute.notmodifiable")
    timed_out = alice.delete(f"{T}/attributes/public", params={"channel": "live",
                                                               "timeout": "100ms"})
    assert (timed_out.status_code, timed_out.json()["error"]) == (408, "command.timeout")
    device.close()


def test_a_live_channel_condition_picks_the_device_or_the_twin(tmp_path, broker_factory,
                                                                twin_store):
    """Ditto's smart channel selection: a retrieve whose twin meets its
    `live-channel-condition` is answered by the device; the headers say
    which channel answered; `live-channel-timeout-strategy: use-twin`
    answers with the twin when the device is silent."""
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    assert alice.put(f"{T}/attributes/polled", True).status_code == 201
    device = _ws(broker, "dev")
    device.control("START-SEND-LIVE-COMMANDS")

    # Not met: the twin answers, and no command reaches the device.
    twin = alice.get(T, params={"live-channel-condition": "eq(attributes/polled,false)"})
    assert twin.status_code == 200, twin.text
    assert twin.json()["attributes"] == {"public": 0, "polled": True}
    assert (twin.headers["channel"], twin.headers["live-channel-condition-matched"]) == (
        "twin", "false")

    # Met: the device answers.
    answer = _in_background(lambda: alice.get(
        f"{T}/attributes/public", headers={"live-channel-condition": "eq(attributes/polled,true)",
                                           "correlation-id": "smart-1"}))
    command = device.recv()
    assert (command["topic"], command["path"]) == (f"{LIVE}/commands/retrieve",
                                                   "/attributes/public")
    assert command["headers"]["correlation-id"] == "smart-1"
    assert "live-channel-condition" not in command["headers"]
    device.send({"topic": command["topic"], "path": command["path"], "status": 200,
                 "headers": {"correlation-id": "smart-1"}, "value": 42})
    live = answer()
    assert (live.status_code, live.json()) == (200, 42)
    assert (live.headers["channel"], live.headers["live-channel-condition-matched"]) == (
        "live", "true")

    # Met, but the device is silent: 408, or the twin with use-twin.
    silent = {"live-channel-condition": "exists(attributes/polled)", "timeout": "200ms"}
    failed = alice.get(f"{T}/attributes/public", headers=silent)
    assert (failed.status_code, failed.json()["error"]) == (408, "command.timeout")
    assert failed.headers["channel"] == "live"
    device.recv()
    fallback = alice.get(f"{T}/attributes/public",
                         headers={**silent, "live-channel-timeout-strategy": "use-twin"})
    assert (fallback.status_code, fallback.json()) == (200, 0)
    assert (fallback.headers["channel"], fallback.headers["live-channel-condition-matched"]) == (
        "twin", "true")
    device.recv()

    # A live retrieve with a strategy reads the twin first, so it can fall back.
    fallback = alice.get(f"{T}/attributes/public", params={"channel": "live", "timeout": "200ms"},
                         headers={"live-channel-timeout-strategy": "use-twin"})
    assert (fallback.status_code, fallback.json(), fallback.headers["channel"]) == (
        200, 0, "twin")
    device.recv()

    # The condition is only a retrieve's, checked like `condition=`.
    refused = alice.put(f"{T}/attributes/public", 1,
                        params={"live-channel-condition": "exists(attributes/polled)"})
    assert (refused.status_code, refused.json()["error"]) == (
        400, "things:live.channelcondition.notallowed")
    bad = alice.get(T, params={"live-channel-timeout-strategy": "sometimes"})
    assert (bad.status_code, bad.json()["error"]) == (400, "header.invalid")
    eve = _http(broker, "eve")
    hidden = eve.get(f"{T}/attributes/public",
                     params={"live-channel-condition": "eq(attributes/polled,true)"})
    assert (hidden.status_code, hidden.json()["error"]) == (412, "things:condition.failed")
    device.close()


def test_a_live_channel_condition_over_the_ditto_protocol(tmp_path, broker_factory, twin_store):
    """The same selection for a twin retrieve sent over WebSocket: the
    device's live response, or the twin's, each marked."""
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    device = _ws(broker, "dev")
    device.control("START-SEND-LIVE-COMMANDS")
    app = _ws(broker, "alice")
    twin_topic = "org.acme/lamp-1/things/twin/commands/retrieve"

    app.send(envelope(twin_topic, "/attributes/public", **{
        "correlation-id": "s-1", "live-channel-condition": "eq(attributes/public,0)"}))
    command = device.recv()
    assert (command["topic"], command["path"]) == (f"{LIVE}/commands/retrieve",
                                                   "/attributes/public")
    assert "live-channel-condition" not in command["headers"]
    device.send({"topic": command["topic"], "path": command["path"], "status": 200,
                 "headers": {"correlation-id": "s-1"}, "value": 7})
    answer = app.recv()
    assert (answer["topic"], answer["status"], answer["value"]) == (
        f"{LIVE}/commands/retrieve", 200, 7)
    assert (answer["headers"]["channel"], answer["headers"]["live-channel-condition-matched"]) == (
        "live", "true")

    app.send(envelope(twin_topic, "/attributes/public", **{
        "correlation-id": "s-2", "live-channel-condition": "eq(attributes/public,1)"}))
    answer = app.recv()
    assert (answer["topic"], answer["value"]) == (twin_topic, 0)
    assert answer["headers"]["live-channel-condition-matched"] == "false"

    app.send(envelope(twin_topic, "/attributes/public", **{
        "correlation-id": "s-3", "live-channel-condition": "eq(attributes/public,0)",
        "live-channel-timeout-strategy": "use-twin", "timeout": "200ms"}))
    device.recv()
    answer = app.recv()
    assert (answer["topic"], answer["value"], answer["headers"]["channel"]) == (
        twin_topic, 0, "twin")

    app.send(envelope("org.acme/lamp-1/things/twin/commands/modify", "/attributes/public", 1, **{
        "correlation-id": "s-4", "live-channel-condition": "eq(attributes/public,0)"}))
    refused = app.recv()
    assert refused["value"]["error"] == "things:live.channelcondition.notallowed"
    for ws in (app, device):
        ws.close()


def test_twin_events_over_mqtt_keep_their_per_reader_views(tmp_path, broker_factory,
                                                           twin_store):
    """The MQTT publication path live signals share with twin events."""
    broker, alice = _start(tmp_path, broker_factory, twin_store)
    eve = MqttDevice(broker, "eve", "eve-1")
    eve.subscribe("ditto/things/+/twin/events/#")
    assert alice.put(f"{T}/attributes/secret", 1).status_code == 201
    assert alice.put(f"{T}/attributes", {"public": 2, "secret": 3}).status_code == 204
    received = eve.next()  # the first change is not hers to see
    assert received.topic == f"ditto/things/{TID}/twin/events/modified"
    assert json.loads(received.payload)["value"] == {"public": 2}
    eve.close()
