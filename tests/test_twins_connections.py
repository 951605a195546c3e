"""Ditto's connections (/api/2/connections) on the real binary: an
http-push connection as the Ditto benchmark configures it, pushing twin
events to a real HTTP server run by the test, with retries, READ rights,
figures, open/close, and persistence across kill -9."""

from __future__ import annotations

import http.server
import json
import queue
import subprocess
import threading
import time

import pytest
import requests
import websocket

from conftest import make_password_file
from twins import Ditto

pytestmark = pytest.mark.ferry_only

TID = "org.acme:lamp-1"
LAMP = {"attributes": {"room": "kitchen"}, "features": {"lamp": {"properties": {"on": False}}}}


class Receiver:
    """A real HTTP server that records each request and answers the
    statuses in `answers` first (a status; a status and a JSON body; or a
    status, a body and its content type), then 204."""

    def __init__(self):
        self.requests: queue.Queue = queue.Queue()
        self.answers: list[int | tuple[int, bytes]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                answer = receiver.answers.pop(0) if receiver.answers else 204
                answer = answer if isinstance(answer, tuple) else (answer, b"")
                status, reply, content_type = (answer + ("application/json",))[:3]
                headers = {name.lower(): value for name, value in self.headers.items()}
                receiver.requests.put((self.command, self.path, headers, body, status))
                self.send_response(status)
                if reply:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_PUT = do_POST  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next(self, timeout: float = 10.0):
        return self.requests.get(timeout=timeout)

    def nothing(self, within: float = 0.5) -> bool:
        try:
            self.requests.get(timeout=within)
            return False
        except queue.Empty:
            return True

    def close(self):
        self.server.shutdown()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def push_connection(port: int, subjects=("nginx:ditto",), status: str = "open",
                    address: str = "POST:/{{ thing:id }}") -> dict:
    """The Ditto benchmark's http-push connection (seeds/ditto-benchmark.txt)."""
    return {
        "name": "http-push-connection",
        "connectionType": "http-push",
        "connectionStatus": status,
        "uri": f"http://127.0.0.1:{port}",
        "sources": [],
        "targets": [{
            "address": address,
            "topics": ["_/_/things/twin/events?filter=eq(topic:action,'modified')"],
            "authorizationContext": list(subjects),
            "headerMapping": {},
        }],
        "clientCount": 1,
        "failoverEnabled": True,
        "validateCertificates": True,
        "processorPoolSize": 1,
        "specificConfig": {"parallelism": "1"},
        "tags": ["benchmark"],
    }


def eventually(check, timeout: float = 10.0):
    """Polls `check` until it returns something truthy: the figures of a
    request are counted once its answer is read, just after the receiver
    has recorded it."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)
    return result


def outbound(ditto: Ditto, connection: str) -> dict:
    return ditto.get(f"/connections/{connection}/metrics").json()["connectionMetrics"]["outbound"]


def _ditto(broker) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}")


def _error(response, status: int, code: str):
    assert response.status_code == status, response.text
    assert response.json()["error"] == code, response.text


def test_modified_events_are_pushed_to_the_receiver(broker_factory, receiver):
    ditto = _ditto(broker_factory())
    created = ditto.put("/connections/bench-push", push_connection(receiver.port))
    assert created.status_code == 201, created.text
    assert created.json()["id"] == "bench-push" and created.json()["tags"] == ["benchmark"]

    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201  # created: filtered out
    assert ditto.put(f"/things/{TID}/features/lamp/properties/on", True).status_code == 204
    method, path, headers, body, _ = receiver.next()
    assert (method, path) == ("POST", f"/{TID}")
    assert headers["content-type"] == "application/vnd.eclipse.ditto+json"
    event = json.loads(body)
    assert event["topic"] == "org.acme/lamp-1/things/twin/events/modified"
    assert (event["path"], event["value"], event["revision"]) == ("/features/lamp/properties/on",
                                                                  True, 2)
    assert receiver.nothing(), "the create event passed the filter"

    eventually(lambda: outbound(ditto, "bench-push")["published"]["success"]["total"] == 1)
    metrics = ditto.get("/connections/bench-push/metrics").json()
    assert metrics["connectionMetrics"]["outbound"]["published"]["failure"]["total"] == 0
    assert metrics["containsFailures"] is False
    status = ditto.get("/connections/bench-push/status").json()
    assert (status["connectionStatus"], status["liveStatus"]) == ("open", "open")

    # The same figures in Prometheus, per connection and target.
    text = requests.get(ditto.base.replace("/api/2", "/metrics"), timeout=10).text
    labels = 'connection="bench-push",target="POST:/{{ thing:id }}"'
    assert f"ferry_twin_connection_published_total{{{labels}}} 1" in text
    assert f"ferry_twin_connection_open{{{labels}}} 1" in text
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_failing_receiver_gets_the_event_again(broker_factory, receiver):
    ditto = _ditto(broker_factory())
    assert ditto.put("/connections/c", push_connection(receiver.port)).status_code == 201
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    receiver.answers = [503, 500]
    assert ditto.put(f"/things/{TID}/attributes/room", "hall").status_code == 204
    statuses = [receiver.next()[4] for _ in range(3)]
    assert statuses == [503, 500, 204]
    eventually(lambda: outbound(ditto, "c")["published"]["success"]["total"] == 1)
    # A refusal (4xx) is final: counted as failed, not sent again.
    receiver.answers = [400]
    assert ditto.put(f"/things/{TID}/attributes/room", "attic").status_code == 204
    assert receiver.next()[4] == 400
    eventually(lambda: outbound(ditto, "c")["published"]["failure"]["total"] == 1)
    assert receiver.nothing()
    metrics = ditto.get("/connections/c/metrics").json()
    assert metrics["containsFailures"] is True
    assert ditto.get("/connections/c/status").json()["liveStatus"] == "failed"


@pytest.mark.parametrize("kill", [True, False], ids=["kill-9", "sigterm"])
def test_events_not_yet_delivered_are_pushed_after_a_restart(broker_factory, receiver, kill):
    b = broker_factory()
    ditto = _ditto(b)
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    assert ditto.put("/connections/c", push_connection(receiver.port)).status_code == 201
    # The receiver is failing: Ferry is still trying the first event when
    # it stops, and the others wait behind it.
    receiver.answers = [503] * 1000
    rooms = [f"room-{n}" for n in range(20)]
    for room in rooms:
        assert ditto.put(f"/things/{TID}/attributes/room", room,
                         headers={"correlation-id": f"move-to-{room}"}).status_code == 204
    assert json.loads(receiver.next()[3])["value"] == rooms[0]

    b.restart(kill=kill)
    receiver.answers.clear()
    received = []
    while not received or received[-1][0] != rooms[-1]:
        _, _, _, body, status = receiver.next()
        if status == 204:
            event = json.loads(body)
            headers = event["headers"]
            received.append((event["value"], headers.get("correlation-id"),
                             headers.get("ditto-originator")))
    # At least once, in order: the first may come twice (it was on its way).
    # Read back from the journal, each still carries its command's
    # correlation id and originator, as Ditto's persisted events do.
    expected = [(room, f"move-to-{room}", "nginx:ditto") for room in rooms]
    assert list(dict.fromkeys(received)) == expected, received
    assert len(received) <= len(rooms) + 1, received
    ditto = _ditto(b)
    assert ditto.put(f"/things/{TID}/attributes/room", "live").status_code == 204
    assert json.loads(receiver.next()[3])["value"] == "live"
    assert receiver.nothing()


def test_the_authorization_context_reads_as_a_policy_allows(tmp_path, broker_factory, receiver):
    passwords = make_password_file(tmp_path / "passwords",
                                   {"ditto": "d-secret", "alice": "a-secret"})
    b = broker_factory({"auth": {"password_file": str(passwords)}})
    admin = _ditto(b).as_user("ditto", "d-secret")
    alice = _ditto(b).as_user("alice", "a-secret")
    _error(_ditto(b).get("/connections"), 401, "gateway:authentication.failed")
    _error(alice.get("/connections"), 403, "gateway:authentication.failed")
    # Events as alice may see them: her own thing, not the admin's.
    assert admin.put("/connections/as-alice",
                     push_connection(receiver.port, subjects=["nginx:alice"])).status_code == 201
    assert admin.put(f"/things/{TID}", LAMP).status_code == 201
    assert admin.put(f"/things/{TID}/attributes/room", "hall").status_code == 204
    assert alice.put("/things/org.acme:alices", LAMP).status_code == 201
    assert alice.put("/things/org.acme:alices/attributes/room", "den").status_code == 204
    _, path, _, body, _ = receiver.next()
    assert path == "/org.acme:alices" and json.loads(body)["value"] == "den"
    assert receiver.nothing()
    # Filtered: the two creates (by the topic filter), the admin's modify (by READ).
    eventually(lambda: ditto_target_metrics(admin, "as-alice")["filtered"]["success"]["total"] == 3)


def ditto_target_metrics(ditto: Ditto, connection: str) -> dict:
    metrics = ditto.get(f"/connections/{connection}/metrics").json()
    (address,) = metrics["targetMetrics"]["addressMetrics"].values()
    return address


def test_manage_close_open_delete_and_survive_kill_9(broker_factory, receiver):
    b = broker_factory()
    ditto = _ditto(b)
    posted = ditto.post("/connections", push_connection(receiver.port, status="closed"))
    assert posted.status_code == 201, posted.text
    cid = posted.json()["id"]
    assert posted.headers["Location"].endswith(f"/api/2/connections/{cid}")
    assert ditto.get("/connections", params={"ids-only": "true"}).json() == [cid]
    assert [c["id"] for c in ditto.get("/connections").json()] == [cid]
    assert ditto.get(f"/connections/{cid}/status").json()["liveStatus"] == "closed"

    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    assert ditto.put(f"/things/{TID}/attributes/room", "hall").status_code == 204
    assert receiver.nothing(), "a closed connection pushed"

    command = ditto.session.post(f"{ditto.base}/connections/{cid}/command",
                                 data="connectivity.commands:openConnection",
                                 headers={"Content-Type": "text/plain"}, timeout=10)
    assert command.status_code == 204, command.text
    assert ditto.get(f"/connections/{cid}").json()["connectionStatus"] == "open"

    b.restart(kill=True)
    ditto = _ditto(b)
    assert ditto.get(f"/connections/{cid}").json()["connectionStatus"] == "open"
    assert ditto.put(f"/things/{TID}/attributes/room", "attic").status_code == 204
    assert json.loads(receiver.next()[3])["value"] == "attic"
    # Settled once Ferry has the answer: the changed connection goes on
    # after it. (One changed while an event is on its way sends it again.)
    eventually(lambda: outbound(ditto, cid)["published"]["success"]["total"] == 1)

    changed = push_connection(receiver.port, address="PUT:/things/{{ thing:name }}/{{ topic:action }}")
    assert ditto.put(f"/connections/{cid}", changed).status_code == 204
    assert ditto.put(f"/things/{TID}/attributes/room", "cellar").status_code == 204
    method, path, _, _, _ = receiver.next()
    assert (method, path) == ("PUT", "/things/lamp-1/modified")

    assert ditto.delete(f"/connections/{cid}").status_code == 204
    _error(ditto.get(f"/connections/{cid}"), 404, "connectivity:connection.notfound")
    assert ditto.put(f"/things/{TID}/attributes/room", "roof").status_code == 204
    assert receiver.nothing(), "a deleted connection pushed"


def test_what_ferry_cannot_run_is_refused(broker_factory):
    ditto = _ditto(broker_factory())
    kafka = {**push_connection(1), "connectionType": "kafka", "uri": "tcp://kafka:9092"}
    _error(ditto.put("/connections/k", kafka), 400, "connectivity:connection.configuration.invalid")
    unknown = push_connection(1)
    unknown["targets"][0]["topics"] = ["_/_/policies/events"]
    _error(ditto.put("/connections/l", unknown), 400,
           "connectivity:connection.configuration.invalid")
    bad = push_connection(1, address="POST:/{{ jwt:sub }}")
    _error(ditto.put("/connections/b", bad), 400, "connectivity:connection.configuration.invalid")
    _error(ditto.put("/connections/a%20b", push_connection(1)), 400,
           "connectivity:connection.id.invalid")
    _error(ditto.get("/connections/none"), 404, "connectivity:connection.notfound")
    assert ditto.get("/connections").json() == []
    command = ditto.session.post(f"{ditto.base}/connections/none/command", data="bogus", timeout=10)
    _error(command, 400, "connectivity:connection.command.invalid")


def test_a_target_acknowledges_what_it_delivered(broker_factory, receiver):
    """issuedAcknowledgementLabel: the receiver's answer to each event a
    command requested the label for is that label's acknowledgement."""
    ditto = _ditto(broker_factory())
    connection = push_connection(receiver.port)
    connection["targets"][0]["issuedAcknowledgementLabel"] = "other:pushed"
    _error(ditto.put("/connections/acked", connection), 400,
           "connectivity:connection.configuration.invalid")
    connection["targets"][0]["issuedAcknowledgementLabel"] = "{{connection:id}}:pushed"
    assert ditto.put("/connections/acked", connection).status_code == 201
    asked = {"requested-acks": "twin-persisted,acked:pushed", "timeout": "10s",
             "correlation-id": "c-1"}

    receiver.answers = [(200, b'{"stored":true}')]
    answer = ditto.put(f"/things/{TID}", LAMP, headers=asked)
    # The create is not among the target's events: weakly acknowledged.
    assert answer.status_code == 200, answer.text
    assert answer.json()["acked:pushed"]["headers"]["ditto-weak-ack"] is True

    answer = ditto.put(f"/things/{TID}/features/lamp/properties/on", True,
                       headers={**asked, "correlation-id": "c-2"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["acked:pushed"] == {"status": 200, "payload": {"stored": True},
                                             "headers": {"correlation-id": "c-2"}}
    _, _, _, sent, _ = receiver.next()
    headers = json.loads(sent)["headers"]
    assert (headers["requested-acks"], headers["correlation-id"]) == (["acked:pushed"], "c-2")

    # A receiver that refuses the event fails the command's acknowledgements.
    receiver.answers = [(422, b'{"why":"no"}')]
    answer = ditto.put(f"/things/{TID}/features/lamp/properties/on", False,
                       headers={**asked, "correlation-id": "c-3"})
    assert answer.status_code == 424, answer.text
    assert answer.json()["acked:pushed"]["status"] == 422
    assert answer.json()["acked:pushed"]["payload"] == {"why": "no"}
    assert answer.json()["twin-persisted"]["status"] == 204

    # The label is the connection's: a WebSocket cannot take it meanwhile.
    second = websocket.create_connection(
        f"ws://{ditto.base.split('//')[1].split('/')[0]}/ws/2?declared-acks=acked:pushed",
        timeout=10)
    assert json.loads(second.recv())["value"]["error"] == "acknowledgement:label.not.unique"
    second.close()


def test_a_target_address_with_functions_shapes_or_withholds_what_it_sends(broker_factory,
                                                                          receiver):
    """Ditto's functions in a target address: the path is the thing's
    name in upper case, and only a lamp that is switched on is sent, the
    rest counted as dropped and what the target owes for it answered
    weakly."""
    ditto = _ditto(broker_factory())
    connection = push_connection(
        receiver.port,
        address="POST:/on/{{ thing:name | fn:upper() | fn:filter(topic:action, 'eq', 'modified') }}")
    connection["targets"][0]["topics"] = ["_/_/things/twin/events"]
    connection["targets"][0]["issuedAcknowledgementLabel"] = "{{connection:id}}:pushed"
    connection["targets"][0]["headerMapping"] = {
        "X-Thing": "{{ thing:namespace | fn:upper() }}", "x-correlation": "{{ header:correlation-id }}",
        "x-missing": "{{ header:nope }}", "content-type": "application/json"}
    assert ditto.put("/connections/shaped", connection).status_code == 201
    asked = {"requested-acks": "twin-persisted,shaped:pushed", "timeout": "10s"}

    created = ditto.put(f"/things/{TID}", LAMP, headers={**asked, "correlation-id": "c-1"})
    assert created.status_code == 200, created.text
    assert created.json()["shaped:pushed"]["headers"]["ditto-weak-ack"] is True
    eventually(lambda: outbound(ditto, "shaped")["dropped"]["success"]["total"] == 1)

    receiver.answers = [(200, b'{"stored":true}')]
    modified = ditto.put(f"/things/{TID}/features/lamp/properties/on", True,
                         headers={**asked, "correlation-id": "c-2"})
    assert modified.status_code == 200, modified.text
    assert modified.json()["shaped:pushed"]["payload"] == {"stored": True}
    method, path, headers, body, _ = receiver.next()
    assert (method, path) == ("POST", "/on/LAMP-1")
    assert (headers["x-thing"], headers["x-correlation"]) == ("ORG.ACME", "c-2")
    assert headers["content-type"] == "application/json", "the mapping sets it"
    assert "x-missing" not in headers
    assert json.loads(body)["value"] is True
    assert outbound(ditto, "shaped")["dropped"]["success"]["total"] == 1

    refused = push_connection(receiver.port, address="POST:/{{ thing:id | fn:upper }}")
    _error(ditto.put("/connections/refused", refused), 400,
           "connectivity:connection.configuration.invalid")
    refused = push_connection(receiver.port)
    refused["targets"][0]["headerMapping"] = {"content-length": "1"}
    _error(ditto.put("/connections/refused", refused), 400,
           "connectivity:connection.configuration.invalid")


def test_a_target_fills_dittos_connection_placeholders(tmp_path, broker_factory, receiver):
    """The placeholders Ditto offers every connection, in a target's
    address and headerMapping: the entity, the feature changed, who
    changed it (also the event's `ditto-originator`), the topic's levels,
    the resource and the time."""
    passwords = make_password_file(tmp_path / "passwords",
                                   {"ditto": "d-secret", "alice": "a-secret"})
    b = broker_factory({"auth": {"password_file": str(passwords)}})
    admin = _ditto(b).as_user("ditto", "d-secret")
    alice = _ditto(b).as_user("alice", "a-secret")
    connection = push_connection(
        receiver.port, subjects=["nginx:alice"],
        address="POST:/{{ entity:namespace }}/{{ entity:name }}/{{ feature:id }}/{{ topic:action-subject }}")
    connection["targets"][0]["headerMapping"] = {
        "x-originator": "{{ request:subjectId }}",
        "x-resource": "{{ resource:type }} {{ resource:path }}",
        "x-topic": "{{ topic:channel }} {{ topic:criterion }} {{ topic:subject | fn:default('-') }}",
        "x-at": "{{ time:now_epoch_millis }}"}
    assert admin.put("/connections/placed", connection).status_code == 201
    assert alice.put(f"/things/{TID}", LAMP).status_code == 201

    before = int(time.time() * 1000)
    assert alice.put(f"/things/{TID}/features/lamp/properties/on", True).status_code == 204
    method, path, headers, body, _ = receiver.next()
    assert (method, path) == ("POST", "/org.acme/lamp-1/lamp/modified")
    assert headers["x-originator"] == "nginx:alice"
    assert headers["x-resource"] == "thing /features/lamp/properties/on"
    assert headers["x-topic"] == "twin events -"
    assert before <= int(headers["x-at"]) <= int(time.time() * 1000)
    assert json.loads(body)["headers"]["ditto-originator"] == "nginx:alice"


def mqtt_connection(uri: str, **target) -> dict:
    """An mqtt connection publishing modified events on the broker at
    `uri` (Ferry's own: a loopback address and its MQTT port)."""
    return {
        "name": "events-to-mqtt",
        "connectionType": "mqtt-5",
        "connectionStatus": "open",
        "uri": uri,
        "sources": [],
        "targets": [{
            "address": "twin/{{ thing:namespace }}/{{ thing:name }}/{{ topic:action }}",
            "topics": ["_/_/things/twin/events?filter=eq(topic:action,'modified')"],
            "authorizationContext": ["nginx:ditto"],
            "qos": 1,
            **target,
        }],
    }


def test_an_mqtt_connection_publishes_events_on_ferrys_broker(broker_factory):
    b = broker_factory()
    ditto = _ditto(b)
    own = f"tcp://127.0.0.1:{b.port}"
    for uri in ["http://127.0.0.1:1883", "tcp://127.0.0.1:port"]:
        _error(ditto.put("/connections/to-mqtt", mqtt_connection(uri)), 400,
               "connectivity:connection.configuration.invalid")
    bad_qos = mqtt_connection(own, qos=3)
    _error(ditto.put("/connections/to-mqtt", bad_qos), 400,
           "connectivity:connection.configuration.invalid")
    connection = mqtt_connection(own, issuedAcknowledgementLabel="{{connection:id}}:published")
    assert ditto.put("/connections/to-mqtt", connection).status_code == 201

    subscriber = b.client(version=5)
    subscriber.subscribe("twin/#", qos=1)
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201  # created: filtered out
    answer = ditto.put(f"/things/{TID}/features/lamp/properties/on", True,
                       headers={"requested-acks": "twin-persisted,to-mqtt:published",
                                "timeout": "10s"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["to-mqtt:published"]["status"] == 204

    message = subscriber.get()
    assert message.topic == "twin/org.acme/lamp-1/modified"
    assert message.qos == 1
    assert message.props.get("ContentType") == "application/vnd.eclipse.ditto+json"
    event = json.loads(message.payload)
    assert event["topic"] == "org.acme/lamp-1/things/twin/events/modified"
    assert (event["path"], event["value"]) == ("/features/lamp/properties/on", True)
    assert event["headers"]["requested-acks"] == ["to-mqtt:published"]
    eventually(lambda: outbound(ditto, "to-mqtt")["published"]["success"]["total"] == 1)
    assert outbound(ditto, "to-mqtt")["filtered"]["success"]["total"] == 1


def publishing_live_messages(broker_factory):
    """A Ferry with lamp-1 and the connection `to-mqtt`, whose target
    publishes live messages on the Ferry's own broker (live/<name>) and
    acknowledges them as `to-mqtt:published`."""
    b = broker_factory()
    ditto = _ditto(b)
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    connection = mqtt_connection(f"tcp://127.0.0.1:{b.port}", address="live/{{ thing:name }}",
                                 topics=["_/_/things/live/messages"],
                                 issuedAcknowledgementLabel="{{connection:id}}:published",
                                 headerMapping={"subject": "{{ topic:subject }}",
                                                "device": "{{ thing:name | fn:upper() }}"})
    assert ditto.put("/connections/to-mqtt", connection).status_code == 201
    return b, ditto


def test_an_mqtt_target_on_ferrys_broker_acknowledges_the_live_messages_it_published(
        broker_factory):
    b, ditto = publishing_live_messages(broker_factory)
    device = b.client(version=5)
    device.subscribe("live/#", qos=1)

    taken = ditto.post(f"/things/{TID}/inbox/messages/switch", {"on": True},
                       params={"requested-acks": "to-mqtt:published",
                               "response-required": "false", "timeout": "10"})
    assert taken.status_code == 202, taken.text
    message = device.get()
    assert message.topic == "live/lamp-1"
    sent = json.loads(message.payload)["headers"]
    assert sent["requested-acks"] == ["to-mqtt:published"]
    assert sent["ditto-originator"] == "nginx:ditto", "stamped with who sent it"
    # The target's headerMapping, as MQTT 5 user properties.
    assert sorted(message.props["UserProperty"]) == [("device", "LAMP-1"), ("subject", "switch")]


def test_a_persistent_message_keeps_its_acknowledgements_in_its_outcome(broker_factory):
    """A qos=1 message may request acknowledgements: they settle within
    its TTL, and its outcome, polled by correlation id, holds them."""
    _, ditto = publishing_live_messages(broker_factory)

    def outcome(params: dict) -> dict:
        sent = ditto.post(f"/things/{TID}/inbox/messages/switch", {"on": True},
                          params={"qos": "1", "requested-acks": "to-mqtt:published", **params})
        assert sent.status_code == 202, sent.text
        poll = {"correlation-id": sent.json()["correlationId"]}
        return eventually(lambda: (lambda known: known if known["state"] != "pending" else None)(
            ditto.get(f"/things/{TID}/inbox/messages/switch", params=poll).json()))

    quiet = outcome({"response-required": "false"})
    assert (quiet["state"], quiet["status"]) == ("acknowledged", 200), quiet
    assert quiet["acknowledgements"]["to-mqtt:published"]["status"] == 204

    # A response required too: `live-response` is among them, and no
    # device answered within the TTL.
    unanswered = outcome({"ttl": "1"})
    assert (unanswered["state"], unanswered["status"]) == ("acknowledged", 424), unanswered
    acks = unanswered["acknowledgements"]
    assert (acks["to-mqtt:published"]["status"], acks["live-response"]["status"]) == (204, 408)


def live_connection(port: int, **target) -> dict:
    """An http-push connection whose target takes live messages."""
    connection = push_connection(port, address="POST:/devices/{{ thing:name }}")
    connection["targets"][0]["topics"] = ["_/_/things/live/messages"]
    connection["targets"][0].update(target)
    return connection


def in_background(call):
    """Runs a blocking HTTP call in a thread; returns a function awaiting
    its response."""
    result: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: result.put(call()), daemon=True).start()
    return lambda: result.get(timeout=30)


def test_a_live_response_target_answers_messages_with_the_http_answer(broker_factory, receiver):
    ditto = _ditto(broker_factory())
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    connection = live_connection(receiver.port, issuedAcknowledgementLabel="live-response")
    assert ditto.put("/connections/devices", connection).status_code == 201

    receiver.answers = [(200, b'{"on": true}')]
    answer = in_background(lambda: ditto.post(f"/things/{TID}/features/lamp/inbox/messages/toggle",
                                              {"to": "on"}, headers={"correlation-id": "t-1"}))
    method, path, headers, body, _ = receiver.next()
    assert (method, path) == ("POST", "/devices/lamp-1")
    assert headers["content-type"] == "application/vnd.eclipse.ditto+json"
    message = json.loads(body)
    assert message["topic"] == "org.acme/lamp-1/things/live/messages/toggle"
    assert message["path"] == "/features/lamp/inbox/messages/toggle"
    assert (message["value"], message["headers"]["correlation-id"]) == ({"to": "on"}, "t-1")
    response = answer()
    assert (response.status_code, response.json()) == (200, {"on": True})

    # Text stays text; a refusal is the response too, not tried again.
    receiver.answers = [(201, b"done", "text/plain"), (409, b'{"busy": 1}')]
    answer = in_background(lambda: ditto.post(f"/things/{TID}/inbox/messages/ping", "?"))
    response = answer()
    assert (response.status_code, response.text) == (201, "done")
    assert response.headers["Content-Type"].startswith("text/plain")
    answer = in_background(lambda: ditto.post(f"/things/{TID}/inbox/messages/ping", "?"))
    assert (answer().status_code, receiver.next()[4], receiver.next()[4]) == (409, 201, 409)
    assert receiver.nothing()
    outbound_figures = outbound(ditto, "devices")
    assert outbound_figures["dispatched"]["success"]["total"] == 3
    assert outbound_figures["published"]["failure"]["total"] == 1


def test_a_target_acknowledges_the_live_messages_it_delivered(broker_factory, receiver):
    """A live target's issuedAcknowledgementLabel: the receiver's answer to
    a message that requested the label is its acknowledgement; a target
    that does not get the message (another namespace) acknowledges it
    weakly at once."""
    ditto = _ditto(broker_factory())
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    devices = live_connection(receiver.port, issuedAcknowledgementLabel="{{connection:id}}:delivered")
    assert ditto.put("/connections/devices", devices).status_code == 201
    others = live_connection(receiver.port, issuedAcknowledgementLabel="{{connection:id}}:delivered")
    others["targets"][0]["topics"] = ["_/_/things/live/messages?namespaces=org.other"]
    assert ditto.put("/connections/others", others).status_code == 201

    def send(correlation_id: str):
        return in_background(lambda: ditto.post(
            f"/things/{TID}/inbox/messages/ask", {"q": 1},
            params={"requested-acks": "devices:delivered,others:delivered",
                    "response-required": "false", "timeout": "10"},
            headers={"correlation-id": correlation_id}))

    receiver.answers = [(200, b'{"ok": 1}')]
    answer = send("d-1")
    _, path, _, body, _ = receiver.next()
    assert path == "/devices/lamp-1"
    assert "devices:delivered" in json.loads(body)["headers"]["requested-acks"]
    assert answer().status_code == 202  # both succeeded, no response wanted

    receiver.answers = [(503, b'{"busy": true}')]
    answer = send("d-2")
    response = answer()
    assert response.status_code == 424, response.text
    # Statuses only, as Ditto minimizes the acknowledgements of a message
    # that wants no response; 200 from the target that did not get it (a
    # weak acknowledgement), where waiting for it would have been 408.
    statuses = {label: ack["status"] for label, ack in response.json().items()}
    assert statuses == {"devices:delivered": 503, "others:delivered": 200}
    receiver.next()
    assert receiver.nothing()  # a live signal is tried once


def test_only_a_ditto_protocol_answer_responds_without_live_response(broker_factory, receiver):
    ditto = _ditto(broker_factory())
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    assert ditto.put("/connections/devices", live_connection(receiver.port)).status_code == 201

    receiver.answers = [(200, b'{"on": true}')]
    timed_out = ditto.post(f"/things/{TID}/inbox/messages/ask", "?", params={"timeout": "1"})
    assert timed_out.status_code == 408, timed_out.text
    assert json.loads(receiver.next()[3])["topic"].endswith("/live/messages/ask")

    def ditto_answer(correlation_id: str) -> tuple:
        response = {"topic": "org.acme/lamp-1/things/live/messages/ask",
                    "headers": {"correlation-id": correlation_id, "content-type": "text/plain"},
                    "path": "/inbox/messages/ask", "value": "42", "status": 202}
        return (200, json.dumps(response).encode(), "application/vnd.eclipse.ditto+json")
    receiver.answers = [ditto_answer("a-1")]
    response = ditto.post(f"/things/{TID}/inbox/messages/ask", "?",
                          headers={"correlation-id": "a-1"})
    assert (response.status_code, response.text) == (202, "42")
    receiver.next()
    # A Ditto protocol answer for another call answers nothing.
    receiver.answers = [ditto_answer("someone-else")]
    response = ditto.post(f"/things/{TID}/inbox/messages/ask", "?",
                          headers={"correlation-id": "a-2"}, params={"timeout": "1"})
    assert response.status_code == 408, response.text
