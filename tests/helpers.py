"""paho-mqtt (2.x) client wrapper and waiting helpers shared by the tests.

Everything that can be awaited is awaited with a timeout (Event/Queue/
Condition); the only fixed wait is `expect_nothing`, the bounded negative
check ("this must NOT arrive").
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

import pytest

import rawmqtt

TIMEOUT = 5.0  # default for anything that should happen "now"

# parametrisation over the two protocol versions (4 = MQTT 3.1.1, 5 = MQTT 5.0)
VERSIONS = [pytest.param(4, id="v311"), pytest.param(5, id="v5")]


@dataclass
class Msg:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    dup: bool
    props: dict = field(default_factory=dict)
    received_at: float = 0.0

    def __repr__(self) -> str:
        return (f"<Msg {self.topic!r} {self.payload[:40]!r} q{self.qos} r{int(self.retain)}"
                f"{' dup' if self.dup else ''} {self.props if self.props else ''}>")


@dataclass
class Connack:
    session_present: bool
    reason: int
    props: dict


def props_to_dict(p: Properties | None) -> dict:
    if p is None:
        return {}
    out = {}
    for name in p.names:
        attr = name.replace(" ", "")
        if hasattr(p, attr):
            v = getattr(p, attr)
            if attr == "UserProperty":
                v = [tuple(x) for x in v]
            if attr == "SubscriptionIdentifier" and not isinstance(v, list):
                v = [v]
            out[attr] = v
    return out


def make_props(packet_type: int, values: dict | None) -> Properties | None:
    if not values:
        return None
    p = Properties(packet_type)
    for k, v in values.items():
        setattr(p, k, v)
    return p


def expect_nothing(q: "queue.Queue | MqttClient", seconds: float = 0.5):
    """Asserts that nothing arrives on q (a queue or an MqttClient) within
    `seconds`. This is the only deliberate fixed wait in the suite."""
    if isinstance(q, MqttClient):
        q = q.messages
    try:
        item = q.get(timeout=seconds)
    except queue.Empty:
        return
    raise AssertionError(f"expected nothing, received {item!r}")


class MqttClient:
    """A paho client driven by its own network thread, never reconnecting by
    itself, with every operation synchronous (waits for its ack)."""

    def __init__(self, host: str, port: int, version: int = 5, client_id: str = "",
                 clean: bool = True, keepalive: int = 60, transport: str = "tcp",
                 ws_path: str = "/mqtt"):
        self.host, self.port, self.version = host, port, version
        self.clean, self.keepalive = clean, keepalive
        proto = mqtt.MQTTv5 if version == 5 else mqtt.MQTTv311
        self.c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=proto,
            clean_session=None if version == 5 else clean,
            transport=transport,
            reconnect_on_failure=False,
        )
        if transport == "websockets":
            self.c.ws_set_options(path=ws_path)
        self.messages: queue.Queue[Msg] = queue.Queue()
        self._cond = threading.Condition()
        self._connack: Connack | None = None
        self._subacks: dict[int, list[int]] = {}
        self._unsubacks: dict[int, list[int]] = {}
        self._pubacks: dict[int, int] = {}
        self.disconnected = threading.Event()
        self.disconnect_reason: int | None = None
        self.c.on_connect = self._on_connect
        self.c.on_message = self._on_message
        self.c.on_subscribe = self._on_subscribe
        self.c.on_unsubscribe = self._on_unsubscribe
        self.c.on_publish = self._on_publish
        self.c.on_disconnect = self._on_disconnect

    # ---------------------------------------------------------- callbacks
    def _on_connect(self, client, userdata, flags, reason_code, properties):
        with self._cond:
            self._connack = Connack(bool(flags.session_present), int(reason_code.value),
                                    props_to_dict(properties))
            self._cond.notify_all()

    def _on_message(self, client, userdata, m):
        self.messages.put(Msg(m.topic, bytes(m.payload), m.qos, bool(m.retain), bool(m.dup),
                              props_to_dict(getattr(m, "properties", None)), time.monotonic()))

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties):
        with self._cond:
            self._subacks[mid] = [int(r.value) for r in reason_codes]
            self._cond.notify_all()

    def _on_unsubscribe(self, client, userdata, mid, reason_codes, properties):
        with self._cond:
            if isinstance(reason_codes, list):
                self._unsubacks[mid] = [int(r.value) for r in reason_codes]
            else:
                self._unsubacks[mid] = [int(reason_codes.value)] if reason_codes is not None else []
            self._cond.notify_all()

    def _on_publish(self, client, userdata, mid, reason_code, properties):
        with self._cond:
            self._pubacks[mid] = int(reason_code.value) if reason_code is not None else 0
            self._cond.notify_all()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        self.disconnect_reason = int(reason_code.value) if reason_code is not None else None
        self.disconnected.set()

    def _wait(self, pred, timeout, what):
        with self._cond:
            if not self._cond.wait_for(pred, timeout):
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    # --------------------------------------------------------- operations
    def will_set(self, topic, payload=b"", qos=0, retain=False, props: dict | None = None):
        self.c.will_set(topic, payload, qos, retain, make_props(PacketTypes.WILLMESSAGE, props))

    def connect(self, props: dict | None = None, timeout: float = TIMEOUT,
                expect_success: bool = True) -> Connack:
        kw = {}
        if self.version == 5:
            kw["clean_start"] = self.clean
            kw["properties"] = make_props(PacketTypes.CONNECT, props)
        self.c.connect(self.host, self.port, self.keepalive, **kw)
        self.c.loop_start()
        self._wait(lambda: self._connack is not None or self.disconnected.is_set(), timeout,
                   "CONNACK")
        assert self._connack is not None, "connection closed before CONNACK"
        if expect_success:
            assert self._connack.reason == 0, f"connection refused: {self._connack}"
        return self._connack

    @property
    def connack(self) -> Connack | None:
        return self._connack

    def subscribe(self, topic: str, qos: int = 0, no_local: bool = False,
                  retain_as_published: bool = False, retain_handling: int = 0,
                  props: dict | None = None, timeout: float = TIMEOUT) -> list[int]:
        if self.version == 5:
            opts = SubscribeOptions(qos=qos, noLocal=no_local,
                                    retainAsPublished=retain_as_published,
                                    retainHandling=retain_handling)
            rc, mid = self.c.subscribe(topic, options=opts,
                                       properties=make_props(PacketTypes.SUBSCRIBE, props))
        else:
            rc, mid = self.c.subscribe(topic, qos)
        assert rc == mqtt.MQTT_ERR_SUCCESS, f"subscribe failed locally: {rc}"
        self._wait(lambda: mid in self._subacks, timeout, f"SUBACK for {topic}")
        return self._subacks[mid]

    def unsubscribe(self, topic, props: dict | None = None, timeout: float = TIMEOUT) -> list[int]:
        rc, mid = self.c.unsubscribe(topic, properties=make_props(PacketTypes.UNSUBSCRIBE, props))
        assert rc == mqtt.MQTT_ERR_SUCCESS, f"unsubscribe failed locally: {rc}"
        self._wait(lambda: mid in self._unsubacks, timeout, f"UNSUBACK for {topic}")
        return self._unsubacks[mid]

    def publish(self, topic: str, payload=b"", qos: int = 0, retain: bool = False,
                props: dict | None = None, timeout: float = TIMEOUT) -> int:
        """Publishes and waits until the QoS flow completes (PUBACK/PUBCOMP,
        or sent for QoS 0). Returns the v5 reason code of the ack (0 for
        v3.1.1 / QoS 0)."""
        info = self.c.publish(topic, payload, qos, retain,
                              make_props(PacketTypes.PUBLISH, props))
        assert info.rc == mqtt.MQTT_ERR_SUCCESS, f"publish failed locally: {info.rc}"
        mid = info.mid
        self._wait(lambda: mid in self._pubacks, timeout, f"publish completion on {topic}")
        return self._pubacks[mid]

    def publish_nowait(self, topic: str, payload=b"", qos: int = 1) -> int:
        """Publishes without waiting for its acknowledgement; returns the
        message id for `acknowledgement`."""
        info = self.c.publish(topic, payload, qos)
        assert info.rc == mqtt.MQTT_ERR_SUCCESS, f"publish failed locally: {info.rc}"
        return info.mid

    def acknowledged(self, mid: int) -> int | None:
        """The reason code the publish `mid` was answered with, or None if
        it has not been yet."""
        with self._cond:
            return self._pubacks.get(mid)

    def acknowledgement(self, mid: int, timeout: float = TIMEOUT) -> int:
        """Waits for the answer to the publish `mid`; returns its reason code."""
        self._wait(lambda: mid in self._pubacks, timeout, f"the answer to publish {mid}")
        return self._pubacks[mid]

    def get(self, timeout: float = TIMEOUT) -> Msg:
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message received within {timeout}s") from None

    def get_n(self, n: int, timeout: float = TIMEOUT) -> list[Msg]:
        deadline = time.monotonic() + timeout
        out = []
        for _ in range(n):
            try:
                out.append(self.messages.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"received {len(out)} of {n} messages within {timeout}s: "
                                     f"{out!r}") from None
        return out

    def wait_disconnected(self, timeout: float = TIMEOUT) -> int | None:
        assert self.disconnected.wait(timeout), f"not disconnected within {timeout}s"
        return self.disconnect_reason

    def disconnect(self, reason: int | None = None, props: dict | None = None,
                   timeout: float = TIMEOUT) -> None:
        if self.disconnected.is_set():
            return
        kw = {}
        if self.version == 5:
            if reason is not None:
                from paho.mqtt.reasoncodes import ReasonCode
                kw["reasoncode"] = ReasonCode(PacketTypes.DISCONNECT, identifier=reason)
            kw["properties"] = make_props(PacketTypes.DISCONNECT, props)
        self.c.disconnect(**kw)
        self.disconnected.wait(timeout)
        self.c.loop_stop()

    def close(self) -> None:
        """Teardown: polite disconnect if still connected; never raises."""
        try:
            if self._connack is not None and not self.disconnected.is_set():
                self.disconnect(timeout=2)
        except Exception:
            pass
        try:
            self.c.loop_stop()
        except Exception:
            pass
        try:
            self.c.socket() and self.c.socket().close()
        except Exception:
            pass


def raw_collect_publishes(raw: rawmqtt.RawClient, n: int, timeout: float = TIMEOUT,
                          ack: bool = False) -> list[rawmqtt.Packet]:
    """Reads packets until n PUBLISH packets arrived (others are ignored)."""
    deadline = time.monotonic() + timeout
    out = []
    while len(out) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"received {len(out)} of {n} PUBLISH packets: {out!r}")
        try:
            p = raw.read_packet(remaining)
        except TimeoutError:
            continue
        except rawmqtt.Closed:
            raise AssertionError(f"connection closed after {len(out)} of {n} PUBLISH: {out!r}")
        if p.type == rawmqtt.PUBLISH:
            out.append(p)
            if ack:
                raw.ack(p)
    return out


def post_reload(b, user: str | None = None, password: str | None = None):
    """POST /api/v1/reload on the broker's HTTP listener, as `user` (an
    `[admin]` user) when credentials are configured: (status, JSON body)."""
    request = urllib.request.Request(f"http://{b.host}:{b.http_port}/api/v1/reload",
                                     method="POST")
    if user is not None:
        import base64
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)
