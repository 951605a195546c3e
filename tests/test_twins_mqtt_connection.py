"""Ditto's MQTT connections to a broker other than Ferry's own (a real
Mosquitto here): a source that subscribes to device topics and applies
each Ditto protocol message as a command, held to the device's own thing
by `{{ source:address }}` enforcement, with its answers on the reply
target; targets that publish twin events there; QoS 1 messages that wait
at the broker while Ferry is down; reconnecting after the broker goes
away. And a source on Ferry's own broker, which Ferry dials like any
other."""

from __future__ import annotations

import json
import queue
import re
import threading
import time

import pytest

from helpers import MqttClient
from pki import make_pki
from twins import Ditto

pytestmark = pytest.mark.ferry_only

TID = "org.acme:lamp-1"
OTHER = "org.acme:lamp-2"
LAMP = {"attributes": {"room": "kitchen"}, "features": {"lamp": {"properties": {"on": False}}}}


def eventually(check, timeout: float = 15.0):
    """Polls `check` until it returns something truthy: a connection's
    state and figures change on its own tasks, with nothing to wait on."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.05)
    return result


def _ditto(broker) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}")


def device_connection(uri: str, connection_type: str = "mqtt") -> dict:
    """Ditto's documented MQTT connection: devices publish commands on
    telemetry/<their thing id>, answers go to the command's reply-to, the
    twin's events to events/<thing id>, and live messages for a device to
    commands/<thing id>."""
    return {
        "name": "devices",
        "connectionType": connection_type,
        "connectionStatus": "open",
        "uri": uri,
        "sources": [{
            "addresses": ["telemetry/#"],
            "authorizationContext": ["nginx:ditto"],
            "qos": 1,
            "enforcement": {"input": "{{ source:address }}", "filters": ["telemetry/{{ thing:id }}"]},
            "replyTarget": {
                "enabled": True,
                "address": "{{ header:reply-to }}",
                "headerMapping": {"correlation-id": "{{ header:correlation-id }}"},
                "expectedResponseTypes": ["response", "error"],
            },
        }],
        "targets": [{
            "address": "events/{{ thing:id }}",
            "topics": ["_/_/things/twin/events"],
            "authorizationContext": ["nginx:ditto"],
            "qos": 1,
        }, {
            "address": "commands/{{ thing:id }}",
            "topics": ["_/_/things/live/messages"],
            "authorizationContext": ["nginx:ditto"],
            "qos": 1,
        }],
        "specificConfig": {"clientId": "ferry-devices"},
    }


def modify(thing: str, on: bool, correlation: str) -> bytes:
    namespace, name = thing.split(":")
    return json.dumps({
        "topic": f"{namespace}/{name}/things/twin/commands/modify",
        "headers": {"correlation-id": correlation, "reply-to": f"replies/{name}",
                    "response-required": True},
        "path": "/features/lamp/properties/on",
        "value": on,
    }).encode()


def lamp_on(ditto: Ditto, thing: str):
    return ditto.get(f"/things/{thing}/features/lamp/properties/on").json()


def live(ditto: Ditto, connection: str) -> str:
    return ditto.get(f"/connections/{connection}/status").json()["liveStatus"]


def inbound(ditto: Ditto, connection: str) -> tuple[int, int, int]:
    figures = ditto.get(f"/connections/{connection}/metrics").json()["connectionMetrics"]["inbound"]
    return (figures["consumed"]["success"]["total"], figures["mapped"]["success"]["total"],
            figures["mapped"]["failure"]["total"])


def connected(broker_factory, change=lambda connection: None):
    """Mosquitto, a Ferry with lamps 1 and 2, and the connection `devices`
    (as `change` leaves it) from the Ferry to the Mosquitto, once it is
    up."""
    mosquitto = broker_factory(kind="mosquitto")
    b = broker_factory()
    ditto = _ditto(b)
    for thing in (TID, OTHER):
        assert ditto.put(f"/things/{thing}", LAMP).status_code == 201
    connection = device_connection(f"tcp://127.0.0.1:{mosquitto.port}")
    change(connection)
    created = ditto.put("/connections/devices", connection)
    assert created.status_code == 201, created.text
    eventually(lambda: live(ditto, "devices") == "open")
    return mosquitto, b, ditto


def test_a_source_on_another_broker_applies_commands_and_answers_and_events_go_there(broker_factory):
    mosquitto, b, ditto = connected(broker_factory)

    device = mosquitto.client(version=4)
    device.subscribe("replies/#", qos=1)
    device.subscribe("events/#", qos=1)
    device.publish(f"telemetry/{TID}", modify(TID, True, "c-1"), qos=1)

    # The event and the answer go out side by side: in either order.
    got = {message.topic: json.loads(message.payload) for message in device.get_n(2)}
    answer = got["replies/lamp-1"]
    assert answer["topic"] == "org.acme/lamp-1/things/twin/commands/modify"
    assert (answer["status"], answer["headers"]["correlation-id"]) == (204, "c-1")
    event = got[f"events/{TID}"]
    assert event["topic"] == "org.acme/lamp-1/things/twin/events/modified"
    assert (event["path"], event["value"]) == ("/features/lamp/properties/on", True)
    assert lamp_on(ditto, TID) is True

    # lamp-1's topic is lamp-1's only: a command for lamp-2 on it is
    # refused, and the error goes to the reply target.
    device.publish(f"telemetry/{TID}", modify(OTHER, True, "c-2"), qos=1)
    error = json.loads(device.get().payload)
    assert error["status"] == 400
    assert error["value"]["error"] == "connectivity:connection.id.enforcement.failed"
    assert error["headers"]["correlation-id"] == "c-2"
    assert lamp_on(ditto, OTHER) is False
    eventually(lambda: inbound(ditto, "devices") == (2, 1, 1))


def test_commands_run_side_by_side_yet_each_things_in_the_order_sent(broker_factory):
    """The connection applies several messages at once, but one thing's
    commands one after another: two things' interleaved modifies land,
    and their events come out, in the order each thing's were sent."""
    mosquitto, b, ditto = connected(broker_factory)
    device = mosquitto.client(version=4)
    device.subscribe("events/#", qos=1)
    sent = 60
    for i in range(sent):
        thing = (TID, OTHER)[i % 2]
        namespace, name = thing.split(":")
        device.publish(f"telemetry/{thing}", json.dumps({
            "topic": f"{namespace}/{name}/things/twin/commands/modify",
            "headers": {"response-required": False},
            "path": "/features/lamp/properties/level",
            "value": i,
        }).encode(), qos=1)
    seen: dict[str, list] = {TID: [], OTHER: []}
    for message in device.get_n(sent):
        event = json.loads(message.payload)
        seen[message.topic.removeprefix("events/")].append((event["revision"], event["value"]))
    for thing, first in ((TID, 0), (OTHER, 1)):
        values = [value for _, value in seen[thing]]
        assert values == list(range(first, sent, 2)), (thing, seen[thing])
        revisions = [revision for revision, _ in seen[thing]]
        assert revisions == sorted(revisions), (thing, seen[thing])
        level = ditto.get(f"/things/{thing}/features/lamp/properties/level").json()
        assert level == sent - 2 + first
    eventually(lambda: inbound(ditto, "devices") == (sent, sent, 0))


def in_background(call):
    """Runs a blocking HTTP call in a thread; returns a function awaiting
    its response."""
    result: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: result.put(call()), daemon=True).start()
    return lambda: result.get(timeout=30)


def test_a_live_message_reaches_the_device_through_the_connection_and_its_answer_comes_back(
        broker_factory):
    def issuing(connection: dict) -> None:
        connection["targets"][1]["issuedAcknowledgementLabel"] = "{{connection:id}}:published"
    mosquitto, b, ditto = connected(broker_factory, issuing)
    device = mosquitto.client(version=4)
    device.subscribe("commands/#", qos=1)

    answer = in_background(lambda: ditto.post(f"/things/{TID}/inbox/messages/switch?timeout=10",
                                              {"on": True}, headers={"correlation-id": "m-1"}))
    message = device.get()
    assert message.topic == f"commands/{TID}"
    request = json.loads(message.payload)
    assert request["topic"] == "org.acme/lamp-1/things/live/messages/switch"
    assert (request["path"], request["value"]) == ("/inbox/messages/switch", {"on": True})
    assert request["headers"]["correlation-id"] == "m-1"
    response = {"topic": request["topic"], "path": "/outbox/messages/switch", "status": 200,
                "headers": {"correlation-id": "m-1", "content-type": "application/json"},
                "value": {"switched": True}}
    # lamp-2's topic cannot answer for lamp-1: refused, the call still waits.
    device.publish(f"telemetry/{OTHER}", json.dumps(response).encode(), qos=1)
    device.publish(f"telemetry/{TID}", json.dumps(response).encode(), qos=1)
    answered = answer()
    assert answered.status_code == 200, answered.text
    assert answered.json() == {"switched": True}
    eventually(lambda: inbound(ditto, "devices") == (2, 1, 1))

    # The live target acknowledges a message once the broker took it.
    taken = ditto.post(f"/things/{TID}/inbox/messages/switch", {"on": False},
                       params={"requested-acks": "devices:published",
                               "response-required": "false", "timeout": "10"})
    assert taken.status_code == 202, taken.text
    assert json.loads(device.get().payload)["headers"]["requested-acks"] == ["devices:published"]


def test_a_device_acknowledges_an_event_through_the_source(broker_factory):
    """A source's declaredAcks: the device that gets an event whose
    command requested one of them answers it through the source, on its
    own topic, as one label's message or several at once."""
    def declare(connection):
        connection["sources"][0]["declaredAcks"] = ["{{connection:id}}:applied"]
        connection["targets"][0]["topics"] = [
            "_/_/things/twin/events?filter=eq(topic:action,'modified')"]
    mosquitto, b, ditto = connected(broker_factory, declare)
    device = mosquitto.client(version=4)
    device.subscribe("events/#", qos=1)
    device.subscribe("replies/#", qos=1)
    asked = {"requested-acks": "twin-persisted,devices:applied", "timeout": "10s"}

    def acknowledge(topic: str, status: int | None, value, correlation_id: str):
        ack = {"topic": topic, "path": "/", "value": value,
               "headers": {"correlation-id": correlation_id, "reply-to": "replies/lamp-1"}}
        if status is not None:
            ack["status"] = status
        device.publish(f"telemetry/{TID}", json.dumps(ack).encode(), qos=1)

    answer = in_background(lambda: ditto.put(
        f"/things/{TID}/features/lamp/properties/on", True,
        headers={**asked, "correlation-id": "a-1"}))
    event = json.loads(device.get().payload)
    assert event["topic"] == "org.acme/lamp-1/things/twin/events/modified"
    assert event["headers"]["requested-acks"] == ["devices:applied"]
    assert event["headers"]["correlation-id"] == "a-1"
    acknowledge("org.acme/lamp-1/things/twin/acks/devices:applied", 200, {"applied": True}, "a-1")
    answered = answer()
    assert answered.status_code == 200, answered.text
    assert answered.json()["devices:applied"]["status"] == 200
    assert answered.json()["devices:applied"]["payload"] == {"applied": True}
    assert answered.json()["twin-persisted"]["status"] == 204

    # Several labels at once, Ditto's aggregated form: a failed one fails
    # the command's acknowledgements.
    answer = in_background(lambda: ditto.put(
        f"/things/{TID}/features/lamp/properties/on", False,
        headers={**asked, "correlation-id": "a-2"}))
    assert json.loads(device.get().payload)["headers"]["correlation-id"] == "a-2"
    acknowledge("org.acme/lamp-1/things/twin/acks", 200,
                {"devices:applied": {"status": 503, "payload": "relay stuck"}}, "a-2")
    answered = answer()
    assert answered.status_code == 424, answered.text
    assert answered.json()["devices:applied"]["status"] == 503
    assert answered.json()["devices:applied"]["payload"] == "relay stuck"

    # A label the source did not declare, or no status: refused, and the
    # error goes to the reply target.
    acknowledge("org.acme/lamp-1/things/twin/acks/devices:other", 200, None, "a-3")
    refused = json.loads(device.get().payload)
    assert refused["topic"] == "org.acme/lamp-1/things/twin/errors"
    assert refused["value"]["error"] == "acknowledgement:label.not.declared"
    acknowledge("org.acme/lamp-1/things/twin/acks/devices:applied", None, None, "a-4")
    assert json.loads(device.get().payload)["value"]["error"] == "json.field.missing"

    # An event no target sends never reaches the device: weakly
    # acknowledged, rather than 408 after the timeout.
    created = ditto.put(f"/things/{TID}/attributes/floor", 3,
                        headers={**asked, "correlation-id": "a-5"})
    assert created.status_code == 200, created.text
    assert created.json()["devices:applied"]["headers"]["ditto-weak-ack"] is True
    eventually(lambda: inbound(ditto, "devices") == (4, 2, 2))


def test_a_sources_commands_wait_for_the_acknowledgements_it_requests(broker_factory):
    """A source's acknowledgementRequests: each command read there also
    requests the labels listed, and its message counts as applied (at qos
    1: PUBACKed) only once they all succeeded. One that failed on the
    receiver's side (503) is tried again; one the receiver refused (400)
    is not."""
    def request(connection):
        source = connection["sources"][0]
        source["declaredAcks"] = ["{{connection:id}}:applied"]
        source["acknowledgementRequests"] = {"includes": ["{{connection:id}}:applied"]}
        connection["targets"][0]["topics"] = [
            "_/_/things/twin/events?filter=eq(topic:action,'modified')"]
    mosquitto, b, ditto = connected(broker_factory, request)
    device = mosquitto.client(version=4)
    device.subscribe(f"events/{TID}", qos=1)

    def acknowledge(event: dict, status: int):
        ack = {"topic": "org.acme/lamp-1/things/twin/acks/devices:applied", "path": "/",
               "status": status, "headers": {"correlation-id": event["headers"]["correlation-id"]}}
        device.publish(f"telemetry/{TID}", json.dumps(ack).encode(), qos=1)

    device.publish(f"telemetry/{TID}", modify(TID, True, "r-1"), qos=1)
    event = json.loads(device.get().payload)
    assert event["headers"]["requested-acks"] == ["devices:applied"]
    assert event["headers"]["correlation-id"] == "r-1"
    acknowledge(event, 200)
    eventually(lambda: inbound(ditto, "devices") == (2, 2, 0))

    # Failed on the receiver's side: the command is applied again, its
    # event sent again, and this time acknowledged.
    device.publish(f"telemetry/{TID}", modify(TID, False, "r-2"), qos=1)
    acknowledge(json.loads(device.get().payload), 503)
    again = json.loads(device.get().payload)
    assert again["headers"]["correlation-id"] == "r-2"
    acknowledge(again, 200)
    eventually(lambda: inbound(ditto, "devices") == (5, 5, 0))

    # Refused by the receiver: not tried again, counted as failed.
    device.publish(f"telemetry/{TID}", modify(TID, True, "r-3"), qos=1)
    acknowledge(json.loads(device.get().payload), 400)
    eventually(lambda: inbound(ditto, "devices") == (7, 6, 1))
    assert lamp_on(ditto, TID) is True


def test_a_sources_filter_decides_per_message_which_acknowledgements_it_requests(broker_factory):
    """Ditto's function expressions in a source: its
    acknowledgementRequests filter requests the labels only for messages
    that came at qos 1 (Ditto's `mqtt.qos` header), and its enforcement
    input is the thing id cut out of the topic it came on."""
    def request(connection):
        source = connection["sources"][0]
        source["declaredAcks"] = ["{{connection:id}}:applied"]
        source["acknowledgementRequests"] = {
            "includes": ["{{connection:id}}:applied"],
            "filter": "fn:filter(header:mqtt.qos,'ne','0')",
        }
        source["enforcement"] = {"input": "{{ source:address | fn:substring-after('/') }}",
                                 "filters": ["{{ thing:id }}"]}
        connection["targets"][0]["topics"] = [
            "_/_/things/twin/events?filter=eq(topic:action,'modified')"]
    mosquitto, b, ditto = connected(broker_factory, request)
    device = mosquitto.client(version=4)
    device.subscribe(f"events/{TID}", qos=1)

    device.publish(f"telemetry/{TID}", modify(TID, True, "at-most-once"), qos=0)
    event = json.loads(device.get().payload)
    assert event["value"] is True
    assert event["headers"]["requested-acks"] == [], event["headers"]
    eventually(lambda: inbound(ditto, "devices") == (1, 1, 0))

    device.publish(f"telemetry/{TID}", modify(TID, False, "at-least-once"), qos=1)
    event = json.loads(device.get().payload)
    assert event["headers"]["requested-acks"] == ["devices:applied"]
    ack = {"topic": "org.acme/lamp-1/things/twin/acks/devices:applied", "path": "/",
           "status": 200, "headers": {"correlation-id": "at-least-once"}}
    device.publish(f"telemetry/{TID}", json.dumps(ack).encode(), qos=1)
    eventually(lambda: inbound(ditto, "devices") == (3, 3, 0))

    # The enforcement compares the topic's thing id with the command's.
    device.publish(f"telemetry/{TID}", modify(OTHER, True, "not-mine"), qos=0)
    eventually(lambda: inbound(ditto, "devices") == (4, 3, 1))
    assert lamp_on(ditto, OTHER) is False


def test_a_source_serves_the_search_protocol_on_its_reply_target(broker_factory):
    """The search protocol through an MQTT connection, its events on the
    reply target the subscribe's `reply-to` names."""
    def unenforced(connection):
        del connection["sources"][0]["enforcement"]  # a search names no thing
    mosquitto, b, ditto = connected(broker_factory, unenforced)
    app = mosquitto.client(version=4)
    app.subscribe("replies/#", qos=1)

    def search(action: str, value: dict) -> None:
        message = {"topic": f"_/_/things/twin/search/{action}", "path": "/", "value": value,
                   "headers": {"reply-to": "replies/search", "correlation-id": action}}
        app.publish("telemetry/app", json.dumps(message).encode(), qos=1)

    search("subscribe", {"filter": 'eq(attributes/room,"kitchen")', "options": "sort(+thingId)"})
    created = json.loads(app.get().payload)
    assert created["topic"] == "_/_/things/twin/search/created", created
    search("request", {"subscriptionId": created["value"]["subscriptionId"], "demand": 1})
    page, complete = (json.loads(message.payload) for message in app.get_n(2))
    assert [item["thingId"] for item in page["value"]["items"]] == [TID, OTHER]
    assert complete["topic"] == "_/_/things/twin/search/complete", complete


def test_qos_1_commands_wait_at_the_broker_while_ferry_is_down(broker_factory):
    mosquitto, b, ditto = connected(broker_factory)

    # Ferry's session at Mosquitto persists (cleanSession false by
    # default): a command sent while Ferry is down waits there for it.
    b.stop()
    device = mosquitto.client(version=4)
    device.publish(f"telemetry/{TID}", modify(TID, True, "while-down"), qos=1)
    b.start()
    ditto = _ditto(b)
    eventually(lambda: lamp_on(ditto, TID) is True)
    eventually(lambda: inbound(ditto, "devices")[1] == 1)


def test_a_connection_reconnects_when_its_broker_comes_back(broker_factory):
    mosquitto, b, ditto = connected(broker_factory)

    mosquitto.stop()
    eventually(lambda: live(ditto, "devices") == "failed")
    details = ditto.get("/connections/devices/status").json()["clientStatus"][0]["statusDetails"]
    assert f"127.0.0.1:{mosquitto.port}" in details, details

    mosquitto.start()  # the same port: its configuration names it
    eventually(lambda: live(ditto, "devices") == "open", timeout=40)
    device = mosquitto.client(version=4)
    device.subscribe("replies/#", qos=1)
    device.publish(f"telemetry/{TID}", modify(TID, True, "after"), qos=1)
    assert json.loads(device.get().payload)["status"] == 204
    assert lamp_on(ditto, TID) is True


def test_a_source_on_ferrys_own_broker_and_mqtt_5_headers(broker_factory):
    b = broker_factory()
    ditto = _ditto(b)
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    connection = device_connection(f"tcp://127.0.0.1:{b.port}", connection_type="mqtt-5")
    # The reply topic from the MQTT 5 Response Topic, mapped to reply-to.
    connection["sources"][0]["replyTarget"]["address"] = "{{ header:reply-to }}"
    assert ditto.put("/connections/devices", connection).status_code == 201
    eventually(lambda: live(ditto, "devices") == "open")

    device = b.client(version=5)
    device.subscribe("answers/#", qos=1)
    command = json.loads(modify(TID, True, "c-5"))
    del command["headers"]["reply-to"]
    device.publish(f"telemetry/{TID}", json.dumps(command).encode(), qos=1,
                   props={"ResponseTopic": "answers/lamp-1"})
    reply = device.get()
    assert reply.topic == "answers/lamp-1"
    assert json.loads(reply.payload)["status"] == 204
    assert lamp_on(ditto, TID) is True


def test_a_targets_header_mapping_goes_to_another_broker_as_user_properties(broker_factory):
    def mapped(connection):
        connection["connectionType"] = "mqtt-5"
        connection["targets"][0]["headerMapping"] = {
            "thing": "{{ thing:id }}", "correlation": "{{ header:correlation-id }}"}
    mosquitto, b, ditto = connected(broker_factory, mapped)
    device = mosquitto.client(version=5)
    device.subscribe(f"events/{TID}", qos=1)
    device.publish(f"telemetry/{TID}", modify(TID, True, "c-mapped"), qos=1)
    event = device.get()
    assert json.loads(event.payload)["topic"] == "org.acme/lamp-1/things/twin/events/modified"
    assert sorted(event.props["UserProperty"]) == [("correlation", "c-mapped"), ("thing", TID)]


def test_an_ssl_connection_trusts_its_own_ca_and_presents_a_client_certificate(
        broker_factory, tmp_path):
    """Ditto's `ca` and client-cert `credentials`: the other broker (a second
    Ferry) has a certificate from a private CA and lets in only clients with
    a certificate from it. Without the credentials the connection fails."""
    pki = make_pki(tmp_path)
    mutual = {"cert_file": str(pki.server.cert), "key_file": str(pki.server.key),
              "client_ca_file": str(pki.ca)}
    remote = broker_factory(
        {"listener": [{"name": "mtls", "protocol": "mqtt", "bind": "127.0.0.1:0", "tls": mutual,
                       "allow_anonymous": False, "auth_methods": ["certificate"]}]},
        wait={"mtls": re.compile(r"listening on mqtts://(127\.0\.0\.1):(\d+)\S* listener=mtls\b")})
    b = broker_factory()
    ditto = _ditto(b)
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    connection = device_connection(f"ssl://127.0.0.1:{remote.ports['mtls']}")
    connection["ca"] = pki.ca.read_text()

    # The CA alone: the broker wants a client certificate, so no session.
    assert ditto.put("/connections/devices", connection).status_code == 201
    eventually(lambda: live(ditto, "devices") == "failed")

    connection["credentials"] = {"type": "client-cert", "cert": pki.device.cert.read_text(),
                                 "key": pki.device.key.read_text()}
    assert ditto.put("/connections/devices", connection).status_code == 204
    eventually(lambda: live(ditto, "devices") == "open")
    device = MqttClient("127.0.0.1", remote.ports["mtls"], 4, "device-2")
    remote._clients.append(device)
    device.c.tls_set(ca_certs=str(pki.ca), certfile=str(pki.other_device.cert),
                     keyfile=str(pki.other_device.key))
    assert device.connect().reason == 0
    device.subscribe("events/#", qos=1)
    device.publish(f"telemetry/{TID}", modify(TID, True, "c-tls"), qos=1)
    event = json.loads(device.get().payload)
    assert event["topic"] == "org.acme/lamp-1/things/twin/events/modified"
    assert lamp_on(ditto, TID) is True


@pytest.mark.parametrize("change, says", [
    ({"uri": "ws://127.0.0.1:1883"}, "tcp://"),
    ({"sources": [{"addresses": ["a/#/b"], "authorizationContext": ["nginx:ditto"]}]}, "topic filters"),
    ({"sources": [{"addresses": ["a/#"], "authorizationContext": ["nginx:ditto"], "qos": 2}]}, "qos"),
    ({"sources": [{"addresses": ["a/#"], "authorizationContext": ["nginx:ditto"],
                   "replyTarget": {"enabled": True}}]}, "address"),
    ({"specificConfig": {"keepAlive": "often"}}, "keepAlive"),
    ({"validateCertificates": False, "uri": "ssl://broker.example.com:8883"}, "validateCertificates"),
    ({"uri": "ssl://broker.example.com:8883", "credentials": {"type": "plain", "username": "u"}},
     "client-cert"),
    ({"uri": "ssl://broker.example.com:8883", "credentials": {"type": "client-cert", "cert": "x"}},
     "'key'"),
    ({"ca": "-----BEGIN CERTIFICATE-----"}, "ssl://"),
    ({"sources": [{"addresses": ["a/#"], "authorizationContext": ["nginx:ditto"],
                   "declaredAcks": ["other:applied"]}]}, "declaredAcks"),
    ({"targets": [{"address": "events/{{ thing:id }}", "topics": ["_/_/things/twin/events"],
                   "authorizationContext": ["nginx:ditto"],
                   "headerMapping": {"device": "{{ thing:name }}"}}]}, "needs an mqtt-5 connection"),
    ({"sources": [{"addresses": ["a/#"], "authorizationContext": ["nginx:ditto"],
                   "acknowledgementRequests": {"includes": ["twin-persisted"],
                                               "filter": "fn:filter(header:qos,'gt','0')"}}]},
     "'gt' in 'fn:filter(header:qos,'gt','0')' is not a filter test"),
    ({"sources": [{"addresses": ["a/#"], "authorizationContext": ["nginx:ditto"],
                   "acknowledgementRequests": {"filter": "header:qos | fn:lower()"}}]},
     "must start with a function"),
    ({"sources": [{"addresses": ["a/#"], "authorizationContext": ["nginx:ditto"],
                   "enforcement": {"input": "{{ source:address | fn:substringafter('/') }}",
                                   "filters": ["{{ thing:id }}"]}}]},
     "the function 'fn:substringafter' is not supported"),
    ({"sources": [{"addresses": ["a/#"], "authorizationContext": ["nginx:ditto"],
                   "acknowledgementRequests": {"includes": ["x"]}}]}, "'x' is not 3 to 165"),
])
def test_what_an_mqtt_connection_cannot_do_is_refused(broker_factory, change, says):
    b = broker_factory()
    connection = {**device_connection("tcp://broker.example.com:1883"), **change}
    answer = _ditto(b).put("/connections/bad", connection)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "connectivity:connection.configuration.invalid"
    assert says in answer.json()["message"], answer.json()["message"]
