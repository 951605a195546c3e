"""Malformed and protocol-violating input on raw sockets.

Every test asserts that
  * the offending connection is closed by the broker (recv returns b""),
  * the MQTT 5 DISCONNECT reason code, where one applies,
  * the broker logged at least one new stderr line about the problem
    (Ferry only: Mosquitto's log lines are not Ferry's contract),
  * a client connected before the offence still publishes and receives.
"""

import socket
import time

import pytest

import rawmqtt as R
from helpers import VERSIONS

# words one of which a log line "mentioning the problem" is expected to contain
PROBLEM = (r"malformed|invalid|protocol|violat|unexpected|reject|refus|error|bad|illegal|"
           r"unsupported|unknown|too (large|big|long)|exceed|utf|wildcard|reserved|truncat|eof|"
           r"incomplete|decode|pars|size|large|limit")


@pytest.fixture
def witness(broker):
    """A subscriber and a publisher, connected before the offence."""
    sub = broker.client(5, "witness-sub")
    sub.subscribe("witness/#", qos=1)
    pub = broker.client(4, "witness-pub")
    return pub, sub


class Offence:
    def __init__(self, broker, witness):
        self.broker = broker
        self.witness = witness
        self.mark = len(broker.log_lines())

    def check(self, log_pattern: str = PROBLEM):
        pub, sub = self.witness
        payload = f"still alive {time.monotonic()}".encode()
        pub.publish("witness/t", payload, qos=1)
        m = sub.get()
        assert (m.topic, m.payload) == ("witness/t", payload)
        fresh = self.broker.client(5, f"witness-new-{time.monotonic_ns()}")
        fresh.subscribe("witness/new", qos=0)
        if self.broker.is_ferry:
            self.broker.wait_log(log_pattern, since=self.mark, timeout=3)


@pytest.fixture
def offence(broker, witness):
    return Offence(broker, witness)


def disconnect_reasons(packets):
    return [p.reason for p in packets if p.type == R.DISCONNECT]


def assert_optional_reason(packets, allowed):
    """The broker SHOULD (not must) send a DISCONNECT first; if it does,
    the reason must be one of `allowed`."""
    reasons = disconnect_reasons(packets)
    assert len(reasons) <= 1 and set(reasons) <= set(allowed), packets
    assert not [p for p in packets if p.type not in (R.DISCONNECT,)], packets


# ------------------------------------------------------- before CONNECT
@pytest.mark.parametrize("garbage", [
    pytest.param(b"GET /mqtt HTTP/1.1\r\nHost: localhost\r\n\r\n", id="http_request"),
    pytest.param(b"\x00\x00\x00\x00\xde\xad\xbe\xef", id="zero_type"),
    pytest.param(b"\xff\x02\xff\xff", id="auth_type_bad_flags"),
])
def test_garbage_before_connect(broker, offence, garbage):
    r = broker.raw(5)
    r.send(garbage + R.encode_connect("after-garbage", 5))
    before = r.read_until_closed()
    assert not [p for p in before if p.type == R.CONNACK and p.reason == 0], before
    offence.check()


@pytest.mark.parametrize("first", [
    pytest.param(R.encode_pingreq(), id="pingreq"),
    pytest.param(R.encode_publish("a/b", b"x", version=4), id="publish"),
    pytest.param(R.encode_subscribe(1, [("a/#", 0)], version=4), id="subscribe"),
    pytest.param(R.encode_disconnect(version=4), id="disconnect"),
])
def test_first_packet_not_connect(broker, offence, first):
    r = broker.raw(4)
    r.send(first)
    assert r.read_until_closed() == []
    offence.check()


@pytest.mark.mosquitto_differs("2.0.11 answers 3.1.1's return code 1; 2.1 answers 0x84")
@pytest.mark.parametrize("level", [6, 0, 255])
def test_unsupported_protocol_level(broker, offence, level):
    # A level no version has may come from a client of a later version:
    # MQTT 5's CONNACK 0x84, as Mosquitto answers.
    r = broker.raw(4)
    r.send(R.encode_connect("level", 4, protocol_level=level))
    before = r.read_until_closed()
    assert len(before) == 1 and before[0].type == R.CONNACK, before
    assert before[0].body == b"\x00\x84\x00", "expected CONNACK 0x84 in MQTT 5's format"
    offence.check()


@pytest.mark.parametrize("name,level", [(b"MQTT", 3), (b"MQIsdp", 4)])
def test_protocol_name_of_another_level(broker, offence, name, level):
    # [MQTT-3.1.2-2]: a level the name does not go with gets return code 1.
    r = broker.raw(4)
    r.send(R.encode_connect("mixed", 4, protocol_name=name, protocol_level=level))
    before = r.read_until_closed()
    assert len(before) == 1 and before[0].type == R.CONNACK, before
    assert before[0].body == b"\x00\x01", "expected a v3-style CONNACK, return code 0x01"
    offence.check()


@pytest.mark.parametrize("name", [b"MQTX", b"hj", b""])
def test_not_an_mqtt_protocol_name(broker, offence, name):
    # [MQTT-3.1.2-1]: not MQTT at all, so nobody to answer.
    r = broker.raw(4)
    r.send(R.encode_connect("name", 4, protocol_name=name))
    assert r.read_until_closed() == []
    offence.check()


def _v5_connect_fault(case):
    """The raw CONNECT for one of V5_CONNECT_FAULTS' ids."""
    def body(props_block, rest):
        return (R.utf8(b"MQTT") + bytes([5, 0x02]) + R.u16(60) + props_block + rest)

    def connect(body_bytes, flags=0x02):
        b = bytearray(body_bytes)
        b[7] = flags
        return R.packet(R.CONNECT, 0, bytes(b))

    cid = R.utf8(b"x")
    return {
        "property-cut-short": connect(body(b"\x02\x23\x00", cid)),
        "unknown-property": connect(body(b"\x02\x04\x00", cid)),
        "property-not-allowed": connect(body(b"\x03\x23\x00\x01", cid)),
        "property-twice": connect(body(b"\x06\x21\x00\x01\x21\x00\x02", cid)),
        "receive-maximum-0": connect(body(b"\x03\x21\x00\x00", cid)),
        "client-id-not-utf8": connect(body(b"\x00", R.u16(3) + b"\xed\xa0\x80")),
        "will-payload-cut-short": connect(body(b"\x00", cid + b"\x00" + R.utf8(b"t")), 0x06),
        "will-topic-empty": connect(body(b"\x00", cid + b"\x00" + R.u16(0) + R.u16(0)), 0x06),
        "will-property-not-allowed": connect(
            body(b"\x00", cid + b"\x05\x11\x00\x00\x00\x01" + R.utf8(b"t") + R.u16(0)), 0x06),
        "will-topic-wildcard": connect(body(b"\x00", cid + b"\x00" + R.utf8(b"#") + R.u16(0)), 0x06),
        "trailing-bytes": connect(body(b"\x00", cid + b"\x09")),
        "user-name-cut-short": connect(body(b"\x00", cid + R.u16(5) + b"ab"), 0x82),
    }[case]


# Mosquitto answers these since its strict CONNECT checks (2.0.12 and
# 2.1, its CONNECT.json sequences); Debian's 2.0.11 closes without a word.
_SINCE_2_0_12 = pytest.mark.mosquitto_differs("2.0.11 predates the CONNACKs of 2.0.12 and 2.1")


@pytest.mark.parametrize("case,reason", [
    pytest.param(case, reason, marks=_SINCE_2_0_12) if reason else (case, reason)
    for case, reason in [
        ("property-cut-short", 0x81), ("unknown-property", 0x81),
        ("property-not-allowed", 0x82), ("property-twice", 0x82), ("receive-maximum-0", 0x82),
        ("client-id-not-utf8", 0x85), ("will-payload-cut-short", 0x81),
        ("will-topic-empty", 0x82), ("will-property-not-allowed", 0x82),
        ("will-topic-wildcard", None), ("trailing-bytes", 0x81), ("user-name-cut-short", None),
    ]
])
def test_a_faulty_v5_connect_is_answered_as_mosquitto_2_1_answers_it(broker, offence, case, reason):
    r = broker.raw(5)
    r.send(_v5_connect_fault(case))
    before = r.read_until_closed()
    if reason is None:
        assert before == [], before
    else:
        assert len(before) == 1 and before[0].type == R.CONNACK, before
        assert before[0].body[:2] == bytes([0, reason]), before[0].body
    offence.check()


@pytest.mark.parametrize("version", VERSIONS)
def test_connect_reserved_flag(broker, offence, version):
    r = broker.raw(version)
    r.send(R.encode_connect("reserved-flag", version, extra_flags=0x01))
    before = r.read_until_closed()
    assert not [p for p in before if p.type == R.CONNACK and p.reason == 0], before
    offence.check()


# ------------------------------------------------- on a live connection
@pytest.mark.parametrize("version", VERSIONS)
def test_second_connect(broker, offence, version):
    r = broker.raw(version)
    r.connect("twice")
    r.send(R.encode_connect("twice", version))
    assert_optional_reason(r.read_until_closed(), [R.RC_PROTOCOL_ERROR])
    offence.check()


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_packet_then_close(broker, offence, version):
    obs = broker.client(version, "trunc-obs")
    obs.subscribe("trunc/will", qos=1)
    r = broker.raw(version)
    r.connect("trunc", will={"topic": "trunc/will", "payload": b"truncated", "qos": 1})
    full = R.encode_publish("trunc/t", b"x" * 100, qos=1, pid=5, version=version)
    r.send(full[:12])
    r.sock.shutdown(socket.SHUT_WR)  # EOF in the middle of a packet
    assert r.read_until_closed() == []
    assert obs.get().payload == b"truncated", "an EOF mid-packet is an abnormal disconnect"
    offence.check()


@pytest.mark.parametrize("connected", [True, False], ids=["after_connect", "before_connect"])
@pytest.mark.parametrize("version", VERSIONS)
def test_remaining_length_five_bytes(broker, offence, version, connected):
    r = broker.raw(version)
    if connected:
        r.connect("varint5")
    r.send(b"\x30\xff\xff\xff\xff\x01" + b"\x00" * 16)
    before = r.read_until_closed()
    if connected:
        assert_optional_reason(before, [R.RC_MALFORMED])
    else:
        assert before == []
    offence.check()


@pytest.mark.parametrize("topic", ["w/#", "w/+/x", "#", "+"])
@pytest.mark.parametrize("version", [
    pytest.param(4, id="v311"),
    pytest.param(5, id="v5", marks=pytest.mark.mosquitto_differs(
        "sends DISCONNECT 0x82 (Protocol Error) instead of 0x90 (Topic Name invalid)")),
])
def test_publish_wildcard_topic(broker, offence, version, topic):
    sub = broker.client(version, "wild-sub")
    sub.subscribe("w/#", qos=1)
    r = broker.raw(version)
    r.connect("wild")
    r.send(R.encode_publish(topic, b"x", qos=1, pid=1, version=version))
    before = r.read_until_closed()
    if version == 5:
        assert disconnect_reasons(before) == [R.RC_TOPIC_NAME_INVALID], before
    assert not [p for p in before if p.type == R.PUBACK], "a wildcard PUBLISH was acknowledged"
    offence.check()
    assert sub.messages.empty(), "a wildcard PUBLISH was routed"


@pytest.mark.parametrize("version", VERSIONS)
def test_publish_empty_topic_without_alias(broker, offence, version):
    # MQTT 5 section 3.3.2.1: a Protocol Error (0x82), not Topic Name
    # invalid; 3.1.1 has no reason codes, and topics of at least 1 character
    r = broker.raw(version)
    r.connect("empty-topic")
    r.send(R.encode_publish("", b"x", qos=1, pid=1, version=version))
    before = r.read_until_closed()
    if version == 5:
        assert disconnect_reasons(before) == [R.RC_PROTOCOL_ERROR], before
    assert not [p for p in before if p.type != R.DISCONNECT], before
    offence.check()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("how", ["whole_packet", "header_only"])
def test_packet_larger_than_max_packet_size(broker_factory, version, how):
    b = broker_factory({"broker": {"max_packet_size_bytes": 1024}})
    off = Offence(b, (b.client(4, "big-wpub"), b.client(5, "big-wsub")))
    off.witness[1].subscribe("witness/#", qos=1)
    r = b.raw(version)
    ack = r.connect("big")
    if version == 5:
        assert ack.props.get("MaximumPacketSize") == 1024
    if how == "whole_packet":
        r.send(R.encode_publish("big/t", b"x" * 2000, qos=0, version=version))
    else:
        # announce 100 MB and send nothing more: must be refused from the
        # fixed header alone, without waiting for (or buffering) the body
        r.send(b"\x30" + R.varint(100_000_000) + b"\x00\x05big/t")
    t0 = time.monotonic()
    before = r.read_until_closed(timeout=3)
    assert time.monotonic() - t0 < 2
    if version == 5:
        assert disconnect_reasons(before) == [R.RC_PACKET_TOO_LARGE], before
    else:
        assert before == []
    off.check()


INVALID_UTF8 = [
    pytest.param(b"bad/\xff", id="0xff"),
    pytest.param(b"bad/\xc3", id="truncated_sequence"),
    pytest.param(b"bad/\xed\xa0\x80", id="surrogate"),
    pytest.param(b"bad/\xc0\xaf", id="overlong"),
    pytest.param(b"bad/\x00x", id="nul"),
]


@pytest.mark.parametrize("topic", INVALID_UTF8)
@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_utf8_topic(broker, offence, version, topic):
    r = broker.raw(version)
    r.connect("utf8")
    r.send(R.encode_publish(topic, b"x", qos=1, pid=1, version=version))
    before = r.read_until_closed()
    if version == 5:
        assert disconnect_reasons(before) == [R.RC_MALFORMED], before
    else:
        assert before == []
    offence.check()


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_utf8_subscription_filter(broker, offence, version):
    r = broker.raw(version)
    r.connect("utf8-sub")
    r.send(R.encode_subscribe(1, [(b"bad/\xff/#", 0)], version=version))
    before = r.read_until_closed()
    if version == 5:
        assert disconnect_reasons(before) == [R.RC_MALFORMED], before
    else:
        assert before == []
    offence.check()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("bad", ["fixed_header_flags", "options_reserved_bits", "qos3"])
def test_subscribe_reserved_bits(broker, offence, version, bad):
    r = broker.raw(version)
    r.connect("sub-reserved")
    if bad == "fixed_header_flags":
        pkt = R.encode_subscribe(1, [("ok/t", 1)], version=version, flags=0x00)
    elif bad == "options_reserved_bits":
        pkt = R.encode_subscribe(1, [("ok/t", 0xC1)], version=version)
    else:
        pkt = R.encode_subscribe(1, [("ok/t", 0x03)], version=version)
    r.send(pkt)
    before = r.read_until_closed()
    assert not [p for p in before if p.type == R.SUBACK], before
    assert_optional_reason(before, [R.RC_MALFORMED, R.RC_PROTOCOL_ERROR])
    offence.check()


@pytest.mark.parametrize("version", VERSIONS)
def test_publish_qos3(broker, offence, version):
    r = broker.raw(version)
    r.connect("qos3")
    r.send(R.packet(R.PUBLISH, 0x06, R.utf8("q3/t") + b"\x00\x01" +
                    (b"\x00" if version == 5 else b"") + b"x"))
    assert_optional_reason(r.read_until_closed(), [R.RC_MALFORMED])
    offence.check()


@pytest.mark.parametrize("version", VERSIONS)
def test_subscribe_without_filters(broker, offence, version):
    r = broker.raw(version)
    r.connect("sub-empty")
    r.send(R.encode_subscribe(1, [], version=version))
    before = r.read_until_closed()
    assert not [p for p in before if p.type == R.SUBACK], before
    assert_optional_reason(before, [R.RC_MALFORMED, R.RC_PROTOCOL_ERROR])
    offence.check()


@pytest.mark.mosquitto_differs("accepts a client's PUBLISH with one Subscription Identifier")
def test_a_client_publish_with_a_subscription_identifier(broker, offence):
    """Only the server's PUBLISH names subscriptions [MQTT-3.3.4-6]: from a
    client it is a Protocol Error."""
    r = broker.raw(5)
    r.connect("sub-id-publisher")
    r.send(R.encode_publish("witness/t", b"x", qos=1, pid=7,
                            props={"SubscriptionIdentifier": [1]}))
    assert disconnect_reasons(r.read_until_closed()) == [R.RC_PROTOCOL_ERROR]
    offence.check()


@pytest.mark.parametrize("limit", [2, 10])
def test_a_connack_larger_than_the_clients_maximum_packet_size_is_not_sent(broker, limit):
    """The server must not send a packet over the client's Maximum Packet
    Size [MQTT-3.1.2-24]; a CONNACK that cannot fit is not sent and the
    connection is closed, as Mosquitto does."""
    r = broker.raw(5)
    r.send(R.encode_connect("tiny-limit", props={"MaximumPacketSize": limit}))
    assert r.read_until_closed() == []


def test_a_disconnect_sheds_its_reason_string_to_fit_the_clients_maximum_packet_size(broker):
    """A reason string is left out when it would take a packet over the
    client's limit [MQTT-3.14.2-3]; the DISCONNECT still says why."""
    r = broker.raw(5)
    ack = r.connect("small-limit", props={"MaximumPacketSize": 20, "RequestProblemInformation": 1})
    assert ack.reason == 0
    r.send(bytes([0x00, 0x00]))  # the reserved packet type 0
    (disconnect,) = r.read_until_closed()
    assert disconnect.type == R.DISCONNECT and disconnect.reason == R.RC_PROTOCOL_ERROR
    assert "ReasonString" not in disconnect.props


def test_the_brokers_disconnect_is_its_reason_code_alone(broker):
    """As Mosquitto's: the bytes `E0 01 82`, the why in the broker's log."""
    r = broker.raw(5)
    assert r.connect("plain-disconnect").reason == 0
    r.send(bytes([0x00, 0x00]))  # the reserved packet type 0
    (disconnect,) = r.read_until_closed()
    assert (disconnect.type, disconnect.body) == (R.DISCONNECT, bytes([R.RC_PROTOCOL_ERROR]))


@pytest.mark.mosquitto_differs("never sends a reason string on DISCONNECT")
def test_a_client_that_asks_for_problem_information_is_told_why(broker):
    r = broker.raw(5)
    assert r.connect("asks-why", props={"RequestProblemInformation": 1}).reason == 0
    r.send(bytes([0x00, 0x00]))  # the reserved packet type 0
    (disconnect,) = r.read_until_closed()
    assert disconnect.type == R.DISCONNECT and disconnect.reason == R.RC_PROTOCOL_ERROR
    assert "packet type 0" in disconnect.props["ReasonString"]


_SILENT_IN_2_0_11 = pytest.mark.mosquitto_differs("2.0.11 closes without a DISCONNECT")


@pytest.mark.parametrize("packet,reason", [
    # A type only servers send: a protocol error before its body is read.
    pytest.param(bytes([0x90, 0x02, 0x00, 0x01]), R.RC_PROTOCOL_ERROR,
                 id="suback-cut-short", marks=_SILENT_IN_2_0_11),
    pytest.param(bytes([0x32, 0x09, 0x00, 0x01, 0x61, 0x00, 0x00, 0x00]) + b"pay",
                 R.RC_PROTOCOL_ERROR, id="publish-packet-id-0"),
    pytest.param(bytes([0x82, 0x06, 0x00, 0x00, 0x00, 0x01, 0x70, 0x00]), R.RC_MALFORMED,
                 id="subscribe-packet-id-0"),
    # Payload Format Indicator is a PUBLISH property.
    pytest.param(bytes([0x40, 0x06, 0x00, 0x01, 0x00, 0x02, 0x01, 0x01]), R.RC_PROTOCOL_ERROR,
                 id="puback-misplaced-property", marks=_SILENT_IN_2_0_11),
    # ... but malformed in a SUBSCRIBE.
    pytest.param(bytes([0x82, 0x09, 0x00, 0x01, 0x02, 0x01, 0x01, 0x00, 0x01, 0x70, 0x00]),
                 R.RC_MALFORMED, id="subscribe-misplaced-property"),
])
def test_reason_codes_as_mosquitto_gives_them(broker, offence, packet, reason):
    r = broker.raw(5)
    assert r.connect("codes").reason == 0
    r.send(packet)
    (disconnect,) = r.read_until_closed()
    assert (disconnect.type, disconnect.reason) == (R.DISCONNECT, reason)
    offence.check()


@pytest.mark.parametrize("packet", [
    pytest.param(bytes([0x40, 0x80, 0x80, 0x80, 0x80, 0x01]), id="remaining-length-of-5-bytes"),
    pytest.param(bytes([0xE0, 0x01, 0x01]), id="disconnect-with-an-unknown-reason"),
])
def test_faults_closed_without_a_disconnect(broker, offence, packet):
    """No packet to answer, or a client already leaving: closed silently."""
    r = broker.raw(5)
    assert r.connect("silent").reason == 0
    r.send(packet)
    assert r.read_until_closed() == []
    offence.check()
