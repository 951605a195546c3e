"""A tiny hand-written MQTT 3.1.1 / 5.0 packet encoder/decoder and a raw
socket client, standard library only.

It exists so tests can control exactly what goes on the wire: withhold
acknowledgements, send malformed packets, observe DUP flags, topic aliases,
DISCONNECT reason codes and the moment a connection is closed.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Iterable

# --------------------------------------------------------------------------
# Packet types
# --------------------------------------------------------------------------
CONNECT = 1
CONNACK = 2
PUBLISH = 3
PUBACK = 4
PUBREC = 5
PUBREL = 6
PUBCOMP = 7
SUBSCRIBE = 8
SUBACK = 9
UNSUBSCRIBE = 10
UNSUBACK = 11
PINGREQ = 12
PINGRESP = 13
DISCONNECT = 14
AUTH = 15

PACKET_NAMES = {
    CONNECT: "CONNECT", CONNACK: "CONNACK", PUBLISH: "PUBLISH", PUBACK: "PUBACK",
    PUBREC: "PUBREC", PUBREL: "PUBREL", PUBCOMP: "PUBCOMP", SUBSCRIBE: "SUBSCRIBE",
    SUBACK: "SUBACK", UNSUBSCRIBE: "UNSUBSCRIBE", UNSUBACK: "UNSUBACK",
    PINGREQ: "PINGREQ", PINGRESP: "PINGRESP", DISCONNECT: "DISCONNECT", AUTH: "AUTH",
}

V311 = 4
V5 = 5

# Reason codes used by the tests (MQTT 5.0 section 2.4)
RC_SUCCESS = 0x00
RC_DISCONNECT_WITH_WILL = 0x04
RC_NO_SUBSCRIPTION_EXISTED = 0x11
RC_UNSPECIFIED = 0x80
RC_MALFORMED = 0x81
RC_PROTOCOL_ERROR = 0x82
RC_UNSUPPORTED_PROTOCOL_VERSION = 0x84
RC_BAD_AUTHENTICATION_METHOD = 0x8C
RC_SESSION_TAKEN_OVER = 0x8E
RC_TOPIC_NAME_INVALID = 0x90
RC_RECEIVE_MAXIMUM_EXCEEDED = 0x93
RC_TOPIC_ALIAS_INVALID = 0x94
RC_PACKET_TOO_LARGE = 0x95
RC_RETAIN_NOT_SUPPORTED = 0x9A

# --------------------------------------------------------------------------
# Primitive encoders
# --------------------------------------------------------------------------


def varint(n: int) -> bytes:
    """Variable Byte Integer (remaining length, property lengths, ...)."""
    if n < 0 or n > 268_435_455:
        raise ValueError("varint out of range")
    out = bytearray()
    while True:
        b = n % 128
        n //= 128
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    """Returns (value, new_pos). Raises ValueError on > 4 bytes or truncation."""
    mult = 1
    value = 0
    for i in range(4):
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value += (b & 0x7F) * mult
        if not b & 0x80:
            return value, pos
        mult *= 128
    raise ValueError("varint longer than 4 bytes")


def u16(n: int) -> bytes:
    return struct.pack("!H", n)


def u32(n: int) -> bytes:
    return struct.pack("!I", n)


def utf8(s: str | bytes) -> bytes:
    """UTF-8 string with 2-byte length prefix. bytes are sent verbatim
    (that is how tests send invalid UTF-8)."""
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return u16(len(b)) + b


def binary(b: bytes) -> bytes:
    return u16(len(b)) + bytes(b)


def packet(ptype: int, flags: int, body: bytes) -> bytes:
    """Fixed header + body."""
    return bytes([(ptype << 4) | (flags & 0x0F)]) + varint(len(body)) + body


# --------------------------------------------------------------------------
# Properties (MQTT 5.0 section 2.2.2.2)
# --------------------------------------------------------------------------
BYTE, U16, U32, VARINT, STR, BIN, PAIR = range(7)

PROPS: dict[str, tuple[int, int]] = {
    "PayloadFormatIndicator": (0x01, BYTE),
    "MessageExpiryInterval": (0x02, U32),
    "ContentType": (0x03, STR),
    "ResponseTopic": (0x08, STR),
    "CorrelationData": (0x09, BIN),
    "SubscriptionIdentifier": (0x0B, VARINT),
    "SessionExpiryInterval": (0x11, U32),
    "AssignedClientIdentifier": (0x12, STR),
    "ServerKeepAlive": (0x13, U16),
    "AuthenticationMethod": (0x15, STR),
    "AuthenticationData": (0x16, BIN),
    "RequestProblemInformation": (0x17, BYTE),
    "WillDelayInterval": (0x18, U32),
    "RequestResponseInformation": (0x19, BYTE),
    "ResponseInformation": (0x1A, STR),
    "ServerReference": (0x1C, STR),
    "ReasonString": (0x1F, STR),
    "ReceiveMaximum": (0x21, U16),
    "TopicAliasMaximum": (0x22, U16),
    "TopicAlias": (0x23, U16),
    "MaximumQoS": (0x24, BYTE),
    "RetainAvailable": (0x25, BYTE),
    "UserProperty": (0x26, PAIR),
    "MaximumPacketSize": (0x27, U32),
    "WildcardSubscriptionAvailable": (0x28, BYTE),
    "SubscriptionIdentifierAvailable": (0x29, BYTE),
    "SharedSubscriptionAvailable": (0x2A, BYTE),
}
PROP_BY_ID = {pid: (name, kind) for name, (pid, kind) in PROPS.items()}
# Properties that may legitimately occur more than once: decoded as lists.
MULTI = {"UserProperty", "SubscriptionIdentifier"}


def _encode_prop_value(kind: int, value) -> bytes:
    if kind == BYTE:
        return bytes([value])
    if kind == U16:
        return u16(value)
    if kind == U32:
        return u32(value)
    if kind == VARINT:
        return varint(value)
    if kind == STR:
        return utf8(value)
    if kind == BIN:
        return binary(value)
    if kind == PAIR:
        k, v = value
        return utf8(k) + utf8(v)
    raise ValueError(kind)


def encode_props(props=None) -> bytes:
    """props: dict (name -> value; UserProperty/SubscriptionIdentifier may be
    a list) or an iterable of (name, value) pairs kept in order.
    Returns property length varint + properties."""
    items: list[tuple[str, object]] = []
    if props:
        pairs = props.items() if isinstance(props, dict) else props
        for name, value in pairs:
            if name in MULTI and isinstance(value, list):
                items.extend((name, v) for v in value)
            else:
                items.append((name, value))
    body = bytearray()
    for name, value in items:
        pid, kind = PROPS[name]
        body += varint(pid) + _encode_prop_value(kind, value)
    return varint(len(body)) + bytes(body)


def decode_props(buf: bytes, pos: int) -> tuple[dict, int]:
    """Decodes a property block starting at pos (with its length prefix)."""
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if end > len(buf):
        raise ValueError("property block overruns packet")
    props: dict = {}
    while pos < end:
        pid, pos = decode_varint(buf, pos)
        if pid not in PROP_BY_ID:
            raise ValueError(f"unknown property id 0x{pid:02x}")
        name, kind = PROP_BY_ID[pid]
        if kind == BYTE:
            value = buf[pos]
            pos += 1
        elif kind == U16:
            value = struct.unpack_from("!H", buf, pos)[0]
            pos += 2
        elif kind == U32:
            value = struct.unpack_from("!I", buf, pos)[0]
            pos += 4
        elif kind == VARINT:
            value, pos = decode_varint(buf, pos)
        elif kind in (STR, BIN):
            n = struct.unpack_from("!H", buf, pos)[0]
            raw = bytes(buf[pos + 2:pos + 2 + n])
            pos += 2 + n
            value = raw.decode("utf-8") if kind == STR else raw
        else:  # PAIR
            n = struct.unpack_from("!H", buf, pos)[0]
            k = bytes(buf[pos + 2:pos + 2 + n]).decode("utf-8")
            pos += 2 + n
            n = struct.unpack_from("!H", buf, pos)[0]
            v = bytes(buf[pos + 2:pos + 2 + n]).decode("utf-8")
            pos += 2 + n
            value = (k, v)
        if name in MULTI:
            props.setdefault(name, []).append(value)
        else:
            props[name] = value
    return props, end


# --------------------------------------------------------------------------
# Packet encoders
# --------------------------------------------------------------------------


def sub_options(qos: int = 0, no_local: bool = False, retain_as_published: bool = False,
                retain_handling: int = 0) -> int:
    return (qos & 3) | (0x04 if no_local else 0) | (0x08 if retain_as_published else 0) | (
        (retain_handling & 3) << 4)


def encode_connect(client_id: str | bytes = "", version: int = V5, clean: bool = True,
                   keepalive: int = 60, props=None, will: dict | None = None,
                   username: str | None = None, password: bytes | None = None,
                   protocol_name: bytes = b"MQTT", protocol_level: int | None = None,
                   extra_flags: int = 0) -> bytes:
    """will = {"topic":..., "payload":..., "qos":0, "retain":False, "props":{...}}"""
    level = version if protocol_level is None else protocol_level
    flags = extra_flags
    if clean:
        flags |= 0x02
    if will is not None:
        flags |= 0x04 | ((will.get("qos", 0) & 3) << 3) | (0x20 if will.get("retain") else 0)
    if password is not None:
        flags |= 0x40
    if username is not None:
        flags |= 0x80
    body = bytearray(utf8(protocol_name) + bytes([level, flags]) + u16(keepalive))
    if version == V5:
        body += encode_props(props)
    body += utf8(client_id)
    if will is not None:
        if version == V5:
            body += encode_props(will.get("props"))
        body += utf8(will["topic"]) + binary(_b(will.get("payload", b"")))
    if username is not None:
        body += utf8(username)
    if password is not None:
        body += binary(password)
    return packet(CONNECT, 0, bytes(body))


def _b(payload) -> bytes:
    return payload.encode() if isinstance(payload, str) else bytes(payload)


def encode_publish(topic: str | bytes, payload=b"", qos: int = 0, retain: bool = False,
                   dup: bool = False, pid: int | None = None, props=None,
                   version: int = V5) -> bytes:
    flags = (0x08 if dup else 0) | ((qos & 3) << 1) | (0x01 if retain else 0)
    body = bytearray(utf8(topic))
    if qos > 0:
        if pid is None:
            raise ValueError("QoS > 0 needs a packet id")
        body += u16(pid)
    if version == V5:
        body += encode_props(props)
    body += _b(payload)
    return packet(PUBLISH, flags, bytes(body))


def _encode_ack(ptype: int, flags: int, pid: int, reason: int | None, props, version: int) -> bytes:
    body = u16(pid)
    if version == V5 and (reason is not None or props):
        body += bytes([reason or 0])
        if props:
            body += encode_props(props)
    return packet(ptype, flags, body)


def encode_puback(pid, reason=None, props=None, version=V5):
    return _encode_ack(PUBACK, 0, pid, reason, props, version)


def encode_pubrec(pid, reason=None, props=None, version=V5):
    return _encode_ack(PUBREC, 0, pid, reason, props, version)


def encode_pubrel(pid, reason=None, props=None, version=V5):
    return _encode_ack(PUBREL, 0x02, pid, reason, props, version)


def encode_pubcomp(pid, reason=None, props=None, version=V5):
    return _encode_ack(PUBCOMP, 0, pid, reason, props, version)


def encode_subscribe(pid: int, filters: Iterable[tuple[str | bytes, int]], props=None,
                     version: int = V5, flags: int = 0x02) -> bytes:
    """filters: (topic_filter, options byte). For v3.1.1 the options byte is
    just the requested QoS."""
    body = bytearray(u16(pid))
    if version == V5:
        body += encode_props(props)
    for f, opts in filters:
        body += utf8(f) + bytes([opts])
    return packet(SUBSCRIBE, flags, bytes(body))


def encode_unsubscribe(pid: int, filters: Iterable[str], props=None, version: int = V5) -> bytes:
    body = bytearray(u16(pid))
    if version == V5:
        body += encode_props(props)
    for f in filters:
        body += utf8(f)
    return packet(UNSUBSCRIBE, 0x02, bytes(body))


def encode_pingreq() -> bytes:
    return packet(PINGREQ, 0, b"")


def encode_disconnect(reason: int | None = None, props=None, version: int = V5) -> bytes:
    body = b""
    if version == V5 and (reason is not None or props):
        body = bytes([reason or 0])
        if props:
            body += encode_props(props)
    return packet(DISCONNECT, 0, body)


def encode_auth(reason: int = 0x00, props=None) -> bytes:
    """MQTT 5 AUTH (section 3.15): reason code and properties."""
    return packet(AUTH, 0, bytes([reason]) + encode_props(props))


# --------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------


@dataclass
class Packet:
    type: int
    flags: int
    body: bytes
    # parsed fields (filled according to type)
    pid: int | None = None
    reason: int | None = None
    reasons: list[int] = field(default_factory=list)
    props: dict = field(default_factory=dict)
    session_present: bool | None = None
    topic: bytes | None = None
    payload: bytes | None = None

    @property
    def name(self) -> str:
        return PACKET_NAMES.get(self.type, f"type{self.type}")

    @property
    def qos(self) -> int:
        return (self.flags >> 1) & 3

    @property
    def dup(self) -> bool:
        return bool(self.flags & 0x08)

    @property
    def retain(self) -> bool:
        return bool(self.flags & 0x01)

    def __repr__(self) -> str:
        extra = []
        for k in ("pid", "reason", "session_present", "topic", "payload"):
            v = getattr(self, k)
            if v is not None:
                extra.append(f"{k}={v!r}")
        if self.reasons:
            extra.append(f"reasons={[hex(r) for r in self.reasons]}")
        if self.props:
            extra.append(f"props={self.props!r}")
        if self.type == PUBLISH:
            extra.append(f"qos={self.qos} dup={self.dup} retain={self.retain}")
        return f"<{self.name} {' '.join(extra)}>"


def parse_body(ptype: int, flags: int, body: bytes, version: int) -> Packet:
    p = Packet(ptype, flags, body)
    v5 = version == V5
    if ptype == CONNACK:
        p.session_present = bool(body[0] & 0x01)
        p.reason = body[1]
        if v5 and len(body) > 2:
            p.props, _ = decode_props(body, 2)
    elif ptype == PUBLISH:
        n = struct.unpack_from("!H", body, 0)[0]
        p.topic = bytes(body[2:2 + n])
        pos = 2 + n
        if p.qos > 0:
            p.pid = struct.unpack_from("!H", body, pos)[0]
            pos += 2
        if v5:
            p.props, pos = decode_props(body, pos)
        p.payload = bytes(body[pos:])
    elif ptype in (PUBACK, PUBREC, PUBREL, PUBCOMP):
        p.pid = struct.unpack_from("!H", body, 0)[0]
        p.reason = 0
        if v5 and len(body) > 2:
            p.reason = body[2]
            if len(body) > 3:
                p.props, _ = decode_props(body, 3)
    elif ptype in (SUBACK, UNSUBACK):
        p.pid = struct.unpack_from("!H", body, 0)[0]
        pos = 2
        if v5:
            p.props, pos = decode_props(body, pos)
        p.reasons = list(body[pos:])
    elif ptype == DISCONNECT:
        p.reason = 0
        if v5 and len(body) >= 1:
            p.reason = body[0]
            if len(body) > 1:
                p.props, _ = decode_props(body, 1)
    elif ptype == AUTH:
        p.reason = body[0] if body else 0
    return p


class Closed(Exception):
    """The peer closed the connection."""


class RawClient:
    """A blocking raw-socket MQTT client that does nothing on its own:
    no automatic acks, no keep-alive pings."""

    def __init__(self, host: str, port: int, version: int = V5, timeout: float = 5.0):
        self.version = version
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pending: list[Packet] = []  # packets read while awaiting something else
        self.closed = False
        self._next_pid = 0
        # topic aliases the server established toward us (alias -> topic)
        self.server_aliases: dict[int, bytes] = {}

    # ------------------------------------------------------------------ io
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def next_pid(self) -> int:
        self._next_pid = self._next_pid % 65535 + 1
        return self._next_pid

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out waiting for data from the broker")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("timed out waiting for data from the broker") from None
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.closed = True
            raise Closed()
        self.buf += chunk

    def read_packet(self, timeout: float = 5.0) -> Packet:
        """Next packet. Raises Closed if the broker closed the connection
        (with no partial packet pending) and TimeoutError on timeout."""
        if self.pending:
            return self.pending.pop(0)
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 2:
                try:
                    length, pos = decode_varint(self.buf, 1)
                except ValueError as e:
                    if "truncated" not in str(e):
                        raise
                else:
                    if len(self.buf) >= pos + length:
                        first = self.buf[0]
                        body = bytes(self.buf[pos:pos + length])
                        del self.buf[:pos + length]
                        p = parse_body(first >> 4, first & 0x0F, body, self.version)
                        self._resolve_alias(p)
                        return p
            self._fill(deadline)

    def _resolve_alias(self, p: Packet) -> None:
        if p.type != PUBLISH or "TopicAlias" not in p.props:
            return
        alias = p.props["TopicAlias"]
        if p.topic:
            self.server_aliases[alias] = p.topic
        elif alias in self.server_aliases:
            p.topic = self.server_aliases[alias]
        else:
            raise AssertionError(f"broker used unknown topic alias {alias}")

    def expect(self, ptype: int, timeout: float = 5.0) -> Packet:
        try:
            p = self.read_packet(timeout)
        except Closed:
            raise AssertionError(f"connection closed while waiting for {PACKET_NAMES[ptype]}") from None
        assert p.type == ptype, f"expected {PACKET_NAMES[ptype]}, got {p!r}"
        return p

    def await_ack(self, ptype: int, pid: int, timeout: float = 5.0) -> Packet:
        """Waits for an ack of type ptype for pid; other packets that arrive
        meanwhile (e.g. PUBLISHes) are kept for later read_packet calls."""
        deadline = time.monotonic() + timeout
        stash: list[Packet] = []
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no {PACKET_NAMES[ptype]} for packet id {pid}")
                try:
                    p = self.read_packet(remaining)
                except TimeoutError:
                    continue
                except Closed:
                    raise AssertionError(
                        f"connection closed while waiting for {PACKET_NAMES[ptype]}") from None
                if p.type == ptype and p.pid == pid:
                    return p
                stash.append(p)
        finally:
            self.pending[0:0] = stash

    def read_until_closed(self, timeout: float = 5.0) -> list[Packet]:
        """Reads until the broker closes the connection; returns the packets
        received before the close. AssertionError if still open at timeout."""
        deadline = time.monotonic() + timeout
        got: list[Packet] = []
        while True:
            try:
                got.append(self.read_packet(max(0.0, deadline - time.monotonic())))
            except Closed:
                return got
            except TimeoutError:
                raise AssertionError(
                    f"broker did not close the connection within {timeout}s (got {got!r})") from None

    def collect(self, seconds: float) -> list[Packet]:
        """All packets arriving within `seconds` (a bounded negative wait)."""
        deadline = time.monotonic() + seconds
        got: list[Packet] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return got
            try:
                got.append(self.read_packet(remaining))
            except TimeoutError:
                return got

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        self.closed = True

    def abort(self) -> None:
        """Abnormal close: RST instead of FIN, no DISCONNECT."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    # ------------------------------------------------------------ helpers
    def connect(self, client_id: str | bytes = "", clean: bool = True, keepalive: int = 60,
                props=None, will=None, expect_success: bool = True, **kw) -> Packet:
        self.send(encode_connect(client_id, self.version, clean, keepalive, props, will, **kw))
        p = self.expect(CONNACK)
        if expect_success:
            assert p.reason == 0, f"CONNACK refused: {p!r}"
        return p

    def subscribe(self, *filters: tuple[str, int], props=None, expect_granted: bool = True) -> Packet:
        """filters: (filter, options) pairs; options = sub_options(...) or QoS."""
        pid = self.next_pid()
        self.send(encode_subscribe(pid, filters, props, self.version))
        p = self.await_ack(SUBACK, pid)
        if expect_granted:
            assert all(r < 0x80 for r in p.reasons), f"subscription refused: {p!r}"
        return p

    def publish(self, topic, payload=b"", qos: int = 0, retain: bool = False, props=None,
                dup: bool = False, pid: int | None = None, wait_ack: bool = True) -> int | None:
        """Publishes; for QoS 1/2 with wait_ack completes the handshake.
        Returns the packet id."""
        if qos and pid is None:
            pid = self.next_pid()
        self.send(encode_publish(topic, payload, qos, retain, dup, pid, props, self.version))
        if qos == 1 and wait_ack:
            a = self.await_ack(PUBACK, pid)
            assert a.reason < 0x80, f"PUBACK failure: {a!r}"
        elif qos == 2 and wait_ack:
            r = self.await_ack(PUBREC, pid)
            assert r.reason < 0x80, f"PUBREC failure: {r!r}"
            self.send(encode_pubrel(pid, version=self.version))
            self.await_ack(PUBCOMP, pid)
        return pid

    def ack(self, p: Packet) -> None:
        """Acknowledges an incoming PUBLISH (QoS 1: PUBACK; QoS 2: PUBREC,
        then waits for PUBREL and sends PUBCOMP)."""
        if p.qos == 1:
            self.send(encode_puback(p.pid, version=self.version))
        elif p.qos == 2:
            self.send(encode_pubrec(p.pid, version=self.version))
            self.await_ack(PUBREL, p.pid)
            self.send(encode_pubcomp(p.pid, version=self.version))

    def ping(self, timeout: float = 5.0) -> None:
        self.send(encode_pingreq())
        self.expect(PINGRESP, timeout)

    def disconnect(self, reason: int | None = None, props=None) -> None:
        self.send(encode_disconnect(reason, props, self.version))
        self.close()
