"""AWS IoT Device Shadows on Ferry's twins (docs/twins.md, "Device
shadows"): AWS's own device SDK (`awsiotsdk`, its `IotShadowClient`)
connecting over TLS with a client certificate, as a device written for
AWS IoT would, for update/get/delete, the delta, the documents, a version
conflict and named shadows; paho-mqtt for the error codes and for what
another device may not see. Every test runs on SQLite and PostgreSQL
(the `twin_store` fixture)."""

from __future__ import annotations

import json
import queue
import re

import pytest
from awscrt import mqtt as crt_mqtt
from awsiot import iotshadow, mqtt_connection_builder
from cryptography import x509

import ipaddress
from helpers import MqttClient
from pki import Authority
from twins import Ditto

pytestmark = pytest.mark.ferry_only  # Ferry's [twins] shadow keys

TIMEOUT = 10.0
HOST = "127.0.0.1"
TEMPLATE = {"attributes": {"model": "ferry-sim"},
            "features": {"shadow": {"properties": {"firmware": "1.0"}}}}
MTLS = re.compile(r"listening on mqtts://(127\.0\.0\.1):(\d+)\S* listener=mtls\b")


class Certificates:
    """A CA, the server's certificate, and one client certificate per
    device: the certificate's CN is the device's user name."""

    def __init__(self, directory):
        ca = Authority(directory, "shadow-ca")
        self.ca = ca.issued.cert
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]
        self.server = ca.issue("server", "localhost", server=True, sans=names)
        self.device = {name: ca.issue(name, common_name) for name, common_name in
                       [("device-1", "device-1"), ("device-2", "device-2"),
                        ("device-3", "devices:device-3")]}


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return Certificates(tmp_path_factory.mktemp("shadow-pki"))


@pytest.fixture
def ferry(broker_factory, certificates, twin_store, tmp_path):
    template = tmp_path / "template.json"
    template.write_text(json.dumps(TEMPLATE))
    tls = {"cert_file": str(certificates.server.cert), "key_file": str(certificates.server.key),
           "client_ca_file": str(certificates.ca)}
    config = {
        "twins": {**twin_store, "shadows": True, "implicit_creation": True,
                  "implicit_template_file": str(template), "mqtt_own_thing": "username",
                  # the HTTP requests below act as a device or an app by subject
                  "pre_authenticated": True},
        "listener": [{"name": "mtls", "protocol": "mqtt", "bind": f"{HOST}:0", "tls": tls,
                      "allow_anonymous": False, "auth_methods": ["certificate"]}],
    }
    b = broker_factory(config, wait={"mtls": MTLS})
    b.certificates = certificates
    return b


def _http(b, subject: str) -> tuple[Ditto, dict]:
    return Ditto(f"http://{b.host}:{b.http_port}"), {"x-ditto-pre-authenticated": subject}


class SdkDevice:
    """A device on AWS's SDK: an mTLS connection and its shadow client,
    each subscribed event kept in a queue of its own."""

    def __init__(self, b, device: str):
        issued = b.certificates.device[device]
        self.connection = mqtt_connection_builder.mtls_from_path(
            endpoint="localhost", port=b.ports["mtls"], cert_filepath=str(issued.cert),
            pri_key_filepath=str(issued.key), ca_filepath=str(b.certificates.ca),
            client_id=f"sdk-{device}", clean_session=True, keep_alive_secs=30,
            enable_metrics_collection=False)
        self.connection.connect().result(TIMEOUT)
        self.shadow = iotshadow.IotShadowClient(self.connection)
        self.events: dict[str, queue.Queue] = {}

    def on(self, name: str, subscribe, request) -> None:
        events: queue.Queue = queue.Queue()
        self.events[name] = events
        future, _topic = subscribe(request=request, qos=crt_mqtt.QoS.AT_LEAST_ONCE,
                                   callback=events.put)
        future.result(TIMEOUT)

    def next(self, name: str):
        try:
            return self.events[name].get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no {name} within {TIMEOUT}s") from None

    def pending(self, name: str) -> int:
        return self.events[name].qsize()

    def close(self) -> None:
        if self.connection is not None:
            self.connection.disconnect().result(TIMEOUT)
            self.connection = None


@pytest.fixture
def sdk(ferry):
    devices = []

    def connect(device: str) -> SdkDevice:
        devices.append(SdkDevice(ferry, device))
        return devices[-1]

    yield connect
    for device in devices:
        device.close()


# (event, the shadow client's subscribe method, its request class); `{n}`
# is `named_` / `Named` for a named shadow, empty for the classic one.
EVENTS = [
    ("update/accepted", "update_{n}shadow_accepted", "Update{N}ShadowSubscriptionRequest"),
    ("update/rejected", "update_{n}shadow_rejected", "Update{N}ShadowSubscriptionRequest"),
    ("get/accepted", "get_{n}shadow_accepted", "Get{N}ShadowSubscriptionRequest"),
    ("get/rejected", "get_{n}shadow_rejected", "Get{N}ShadowSubscriptionRequest"),
    ("delete/accepted", "delete_{n}shadow_accepted", "Delete{N}ShadowSubscriptionRequest"),
    ("delete/rejected", "delete_{n}shadow_rejected", "Delete{N}ShadowSubscriptionRequest"),
    ("delta", "{n}shadow_delta_updated_events", "{N}ShadowDeltaUpdatedSubscriptionRequest"),
    ("documents", "{n}shadow_updated_events", "{N}ShadowUpdatedSubscriptionRequest"),
]


def _subscribe(device: SdkDevice, thing: str, shadow: str | None = None, prefix: str = ""):
    """Every event of one shadow, as `{prefix}{event}` in the device's queues."""
    n, big_n = ("named_", "Named") if shadow else ("", "")
    names = {"thing_name": thing, **({"shadow_name": shadow} if shadow else {})}
    for event, method, request in EVENTS:
        subscribe = getattr(device.shadow, "subscribe_to_" + method.format(n=n))
        device.on(prefix + event, subscribe,
                  getattr(iotshadow, request.format(N=big_n))(**names))


def _update(device: SdkDevice, thing: str, **kw) -> None:
    state = iotshadow.ShadowState(**{k: v for k, v in kw.items()
                                     if k in ("desired", "reported", "desired_is_nullable",
                                              "reported_is_nullable")})
    request = iotshadow.UpdateShadowRequest(thing_name=thing, state=state,
                                            client_token=kw.get("client_token"),
                                            version=kw.get("version"))
    device.shadow.publish_update_shadow(request, crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)


def test_classic_shadow_with_the_aws_sdk(ferry, sdk):
    device = sdk("device-1")
    _subscribe(device, "device-1")
    s = device.shadow

    s.publish_get_shadow(iotshadow.GetShadowRequest(thing_name="device-1", client_token="g0"),
                         crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)
    missing = device.next("get/rejected")
    assert (missing.code, missing.message, missing.client_token) == (404, "Thing not found", "g0")

    # The first update of an unknown device makes its thing from the template.
    _update(device, "device-1", reported={"temperature": 20, "on": False}, client_token="t1")
    accepted = device.next("update/accepted")
    assert accepted.client_token == "t1" and accepted.version == 1
    assert accepted.state.reported == {"temperature": 20, "on": False}
    assert isinstance(accepted.metadata.reported["temperature"]["timestamp"], int)
    documents = device.next("documents")
    assert documents.previous is None
    assert documents.current.version == 1
    assert documents.current.state.reported == {"firmware": "1.0", "temperature": 20, "on": False}

    # One state, two views: the thing, and its default policy for the device.
    ditto, as_device = _http(ferry, "nginx:device-1")
    thing = ditto.get("/things/devices:device-1", headers=as_device).json()
    assert thing["attributes"] == {"model": "ferry-sim"}
    assert thing["features"]["shadow"]["properties"]["temperature"] == 20
    policy = ditto.get("/policies/devices:device-1", headers=as_device)
    assert policy.status_code == 200 and "nginx:device-1" in policy.text
    assert ditto.get("/things/devices:device-1").status_code == 404, "nobody else reads it"

    # Desired set through Ditto's API is a delta for the device.
    put = ditto.put("/things/devices:device-1/features/shadow/desiredProperties/on", True,
                    headers=as_device)
    assert put.status_code == 201, put.text
    delta = device.next("delta")
    assert delta.state == {"on": True} and delta.version == 2
    assert isinstance(delta.metadata["on"]["timestamp"], int)
    http_delta = ditto.get("/things/devices:device-1/features/shadow/delta", headers=as_device)
    assert (http_delta.status_code, http_delta.json()) == (200, {"on": True})

    # A device that comes back learns the delta it missed when it
    # subscribes to it, without asking.
    device.close()
    device = sdk("device-1")
    _subscribe(device, "device-1")
    s = device.shadow
    missed = device.next("delta")
    assert missed.state == {"on": True} and missed.version == 2

    s.publish_get_shadow(iotshadow.GetShadowRequest(thing_name="device-1", client_token="g1"),
                         crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)
    got = device.next("get/accepted")
    assert got.client_token == "g1" and got.version == 2
    assert got.state.desired == {"on": True}
    assert got.state.reported == {"firmware": "1.0", "temperature": 20, "on": False}
    assert got.state.delta == {"on": True}
    assert set(got.metadata.reported) == {"firmware", "temperature", "on"}

    # A stale version is a conflict, the token echoed.
    _update(device, "device-1", desired={"on": False}, version=1, client_token="stale")
    conflict = device.next("update/rejected")
    assert (conflict.code, conflict.message, conflict.client_token) == \
        (409, "Version conflict", "stale")

    # The device catches up: reported on, desired cleared, at the right version.
    _update(device, "device-1", reported={"on": True}, desired=None, desired_is_nullable=True,
            version=2, client_token="t2")
    caught_up = device.next("update/accepted")
    assert caught_up.version == 3 and caught_up.client_token == "t2"
    documents = device.next("documents")
    assert documents.previous.version == 2 and documents.previous.state.desired == {"on": True}
    assert documents.current.version == 3 and documents.current.state.desired is None
    assert documents.current.state.reported["on"] is True
    assert ditto.get("/things/devices:device-1/features/shadow/delta",
                     headers=as_device).json() == {}

    s.publish_delete_shadow(iotshadow.DeleteShadowRequest(thing_name="device-1",
                                                          client_token="d1"),
                            crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)
    deleted = device.next("delete/accepted")
    assert deleted.version == 3 and deleted.client_token == "d1"
    s.publish_get_shadow(iotshadow.GetShadowRequest(thing_name="device-1"),
                         crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)
    gone = device.next("get/rejected")
    assert (gone.code, gone.message) == (404, "No shadow exists with name: 'device-1'")

    # A shadow made again continues the old version.
    _update(device, "device-1", reported={"on": True})
    assert device.next("update/accepted").version == 5
    # Desired and reported agreed since the catching up: no delta since.
    assert device.pending("delta") == 0


def test_named_shadows_with_the_aws_sdk(ferry, sdk):
    device = sdk("device-1")
    s = device.shadow
    thing, name = "device-1", "config"
    _subscribe(device, thing, name)
    _subscribe(device, thing, prefix="classic ")

    update = iotshadow.UpdateNamedShadowRequest(
        thing_name=thing, shadow_name=name, client_token="n1",
        state=iotshadow.ShadowState(desired={"rate": 5}, reported={"rate": 1}))
    s.publish_update_named_shadow(update, crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)
    accepted = device.next("update/accepted")
    assert accepted.client_token == "n1" and accepted.version == 1
    delta = device.next("delta")
    assert delta.state == {"rate": 5} and delta.version == 1
    documents = device.next("documents")
    assert documents.current.state.desired == {"rate": 5}

    def get_named():
        s.publish_get_named_shadow(
            iotshadow.GetNamedShadowRequest(thing_name=thing, shadow_name=name),
            crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)

    get_named()
    got = device.next("get/accepted")
    assert got.state.delta == {"rate": 5} and got.state.reported == {"rate": 1}

    # The classic shadow is another feature: the template's.
    s.publish_get_shadow(iotshadow.GetShadowRequest(thing_name=thing),
                         crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)
    classic = device.next("classic get/accepted")
    assert classic.state.reported == {"firmware": "1.0"} and classic.state.delta is None

    ditto, as_device = _http(ferry, "nginx:device-1")
    feature = ditto.get("/things/devices:device-1/features/config", headers=as_device).json()
    assert feature == {"properties": {"rate": 1}, "desiredProperties": {"rate": 5}}

    s.publish_delete_named_shadow(
        iotshadow.DeleteNamedShadowRequest(thing_name=thing, shadow_name=name),
        crt_mqtt.QoS.AT_LEAST_ONCE).result(TIMEOUT)
    assert device.next("delete/accepted").version == 1
    get_named()
    gone = device.next("get/rejected")
    assert (gone.code, gone.message) == (404, "No shadow exists with name: 'config'")
    assert ditto.get("/things/devices:device-1/features/config",
                     headers=as_device).status_code == 404


def _paho(b, device: str, client_id: str) -> MqttClient:
    issued = b.certificates.device[device]
    c = MqttClient(HOST, b.ports["mtls"], 5, client_id)
    b._clients.append(c)
    c.c.tls_set(ca_certs=str(b.certificates.ca), certfile=str(issued.cert),
                keyfile=str(issued.key))
    c.connect()
    return c


def _answer(c: MqttClient) -> tuple[str, dict]:
    message = c.get(TIMEOUT)
    return message.topic, json.loads(message.payload)


def test_error_codes_and_messages(ferry):
    c = _paho(ferry, "device-1", "paho-device-1")
    base = "$aws/things/device-1/shadow"
    c.subscribe(f"{base}/update/rejected", qos=1)
    c.subscribe(f"{base}/get/rejected", qos=1)

    def nested(levels: int):
        value = 0
        for level in range(levels):
            value = {f"l{level}": value}
        return value

    cases = [
        (b"{nope", 400, "Invalid JSON", None),
        (b"[]", 400, "Invalid JSON", None),
        (b"{}", 400, "Missing required node: state", None),
        (b'{"state": 1, "clientToken": "c0"}', 400, "State node must be an object", "c0"),
        (b'{"state": {"desired": 1}}', 400, "Desired node must be an object", None),
        (b'{"state": {"reported": "x"}}', 400, "Reported node must be an object", None),
        (b'{"state": {"delta": {}}, "clientToken": "c1"}', 400,
         "State contains an invalid node", "c1"),
        (b'{"state": {}, "version": "7", "clientToken": "c2"}', 400, "Invalid version", "c2"),
        (json.dumps({"state": {}, "clientToken": "x" * 65}).encode(), 400,
         "Invalid clientToken", None),
        (json.dumps({"state": {"desired": nested(7)}}).encode(), 400,
         "JSON contains too many levels of nesting; maximum is 6", None),
        (json.dumps({"state": {"reported": {"blob": "x" * 8200}}, "clientToken": "big"}).encode(),
         413, "The payload exceeds the maximum size allowed", "big"),
    ]
    for payload, code, message, token in cases:
        assert c.publish(f"{base}/update", payload, qos=1) == 0
        topic, answer = _answer(c)
        assert topic == f"{base}/update/rejected", payload
        assert (answer["code"], answer["message"], answer.get("clientToken")) == \
            (code, message, token), payload
        assert isinstance(answer["timestamp"], int)

    assert c.publish(f"{base}/get", b"{nope", qos=1) == 0
    topic, answer = _answer(c)
    assert (topic, answer["code"], answer["message"]) == \
        (f"{base}/get/rejected", 400, "Invalid JSON")

    # Refusals change nothing: the first valid update makes the thing.
    c.subscribe(f"{base}/update/accepted", qos=1)
    c.publish(f"{base}/update", json.dumps({"state": {"reported": {"x": 1}}}).encode(), qos=1)
    topic, accepted = _answer(c)
    assert topic == f"{base}/update/accepted" and accepted["version"] == 1
    # A topic under $aws/things that is no request is refused at the PUBACK.
    assert c.publish(f"{base}/update/accepted", b"{}", qos=1) == 0x90


def test_another_device_sees_nothing_of_a_shadow(ferry):
    one = _paho(ferry, "device-1", "paho-device-1")
    two = _paho(ferry, "device-2", "paho-device-2")
    base = "$aws/things/device-1/shadow"
    one.subscribe(f"{base}/update/+", qos=1)
    two.subscribe(f"{base}/#", qos=1)

    one.publish(f"{base}/update", json.dumps(
        {"state": {"desired": {"on": True}, "reported": {"on": False}}}).encode(), qos=1)
    topics = sorted(message.topic for message in one.get_n(3, TIMEOUT))
    assert topics == [f"{base}/update/{kind}" for kind in ("accepted", "delta", "documents")]

    # device-2 is held to its own thing: its update of device-1 is refused
    # to it alone, and that refusal is the first thing it receives.
    two.publish(f"{base}/update", b'{"state": {"desired": {"on": false}}}', qos=1)
    topic, answer = _answer(two)
    assert (topic, answer["code"], answer["message"]) == \
        (f"{base}/update/rejected", 403, "Forbidden")

    # device-1's own refusal reaches device-1 only: device-2's next message
    # is the answer to its next request.
    one.publish(f"{base}/update", b"{nope", qos=1)
    topic, answer = _answer(one)
    assert (topic, answer["code"]) == (f"{base}/update/rejected", 400)
    two.subscribe("$aws/things/device-2/shadow/get/rejected", qos=1)
    two.publish("$aws/things/device-2/shadow/get", b"", qos=1)
    topic, answer = _answer(two)
    assert (topic, answer["code"], answer["message"]) == \
        ("$aws/things/device-2/shadow/get/rejected", 404, "Thing not found")


def test_ditto_protocol_creates_a_devices_thing_implicitly(ferry):
    device = _paho(ferry, "device-3", "paho-device-3")
    device.subscribe("ditto/replies/paho-device-3", qos=1)
    command = {"topic": "devices/device-3/things/twin/commands/modify",
               "path": "/attributes/location", "value": "lab",
               "headers": {"correlation-id": "c-1"}}
    assert device.publish("ditto/in", json.dumps(command).encode(), qos=1) == 0
    _topic, response = _answer(device)
    assert response["status"] == 201, response
    ditto, as_device = _http(ferry, "nginx:devices:device-3")
    thing = ditto.get("/things/devices:device-3", headers=as_device).json()
    assert thing["attributes"] == {"model": "ferry-sim", "location": "lab"}
    assert thing["features"] == TEMPLATE["features"]


def test_delta_and_documents_reach_readers_of_the_feature_only(ferry):
    one = _paho(ferry, "device-1", "paho-device-1")
    classic, named = "$aws/things/device-1/shadow", "$aws/things/device-1/shadow/name/cfg"
    one.subscribe(f"{classic}/update/accepted", qos=1)
    one.subscribe(f"{named}/update/accepted", qos=1)

    def update(shadow: str, state: dict) -> None:
        one.publish(f"{shadow}/update", json.dumps({"state": state}).encode(), qos=1)
        assert _answer(one)[0] == f"{shadow}/update/accepted"

    update(classic, {"reported": {"x": 1}})
    # The device, owner of its thing's policy, lets device-2 read one shadow.
    ditto, as_device = _http(ferry, "nginx:device-1")
    entry = {"subjects": {"nginx:device-2": {"type": "app"}},
             "resources": {"thing:/features/cfg": {"grant": ["READ"], "revoke": []}}}
    r = ditto.put("/policies/devices:device-1/entries/watcher", entry, headers=as_device)
    assert r.status_code == 201, r.text

    two = _paho(ferry, "device-2", "paho-device-2")
    two.subscribe("$aws/things/device-1/shadow/#", qos=1)
    update(classic, {"desired": {"x": 2}})
    update(named, {"desired": {"rate": 5}})
    # Had the classic shadow's delta or documents reached device-2, they
    # would come before these.
    received = {message.topic: json.loads(message.payload) for message in two.get_n(2, TIMEOUT)}
    assert set(received) == {f"{named}/update/delta", f"{named}/update/documents"}
    assert received[f"{named}/update/delta"]["state"] == {"rate": 5}
