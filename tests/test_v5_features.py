"""MQTT 5 features: topic aliases, flow control, packet size limits,
message expiry, request/response and forwarded properties."""

import time

import pytest

import rawmqtt as R
from helpers import expect_nothing, raw_collect_publishes


# ------------------------------------------------------------ topic aliases
def test_topic_alias_client_to_server(broker):
    sub = broker.client(5, "ta-sub")
    sub.subscribe("alias/#", qos=1)
    r = broker.raw(5)
    ack = r.connect("ta-pub")
    assert ack.props.get("TopicAliasMaximum", 0) >= 2
    r.publish("alias/one", b"1", qos=1, props={"TopicAlias": 1})
    r.publish("", b"2", qos=1, props={"TopicAlias": 1})
    r.publish("alias/two", b"3", qos=0, props={"TopicAlias": 2})
    r.publish("", b"4", qos=0, props={"TopicAlias": 2})
    r.publish("alias/three", b"5", qos=1, props={"TopicAlias": 1})  # re-map alias 1
    r.publish("", b"6", qos=1, props={"TopicAlias": 1})
    got = sub.get_n(6)
    assert [(m.topic, m.payload) for m in got] == [
        ("alias/one", b"1"), ("alias/one", b"2"), ("alias/two", b"3"), ("alias/two", b"4"),
        ("alias/three", b"5"), ("alias/three", b"6")]
    # the alias is not forwarded to a subscriber that did not ask for aliases
    assert not any("TopicAlias" in m.props for m in got)


ZERO_ALIAS_DIFFERS = pytest.mark.mosquitto_differs(
    "answers Topic Alias 0 with DISCONNECT 0x81 (Malformed Packet); the packet is well "
    "formed, the alias value is the violation")


@pytest.mark.parametrize("topic, alias", [
    pytest.param("alias/bad", 0, id="zero", marks=ZERO_ALIAS_DIFFERS),
    pytest.param("", 0, id="zero_without_topic", marks=ZERO_ALIAS_DIFFERS),
    pytest.param("alias/bad", 9, id="above_max"),
])
def test_topic_alias_invalid(broker_factory, topic, alias):
    # [MQTT-3.3.2-8] forbids 0, [MQTT-3.3.2-9] anything above the maximum;
    # both are Topic Alias invalid (0x94, section 3.3.2.3.4)
    b = broker_factory({"broker": {"topic_alias_maximum": 8}})
    r = b.raw(5)
    r.connect("ta-bad")
    r.send(R.encode_publish(topic, b"x", props={"TopicAlias": alias}))
    before = r.read_until_closed()
    reasons = [p.reason for p in before if p.type == R.DISCONNECT]
    assert reasons == [R.RC_TOPIC_ALIAS_INVALID], before


def test_topic_alias_unknown_alias_is_protocol_error(broker):
    r = broker.raw(5)
    r.connect("ta-unknown")
    r.send(R.encode_publish("", b"x", props={"TopicAlias": 3}))  # never established
    before = r.read_until_closed()
    assert [p.reason for p in before if p.type == R.DISCONNECT] == [R.RC_PROTOCOL_ERROR]


def test_topic_alias_server_to_client(broker):
    r = broker.raw(5)
    r.connect("ta-in", props={"TopicAliasMaximum": 2})
    r.subscribe(("in/#", 0))
    pub = broker.client(5, "ta-in-pub")
    sent = []
    for i in range(4):
        for t in ("in/a", "in/b", "in/c"):
            sent.append((t.encode(), f"{t}-{i}".encode()))
            pub.publish(t, f"{t}-{i}".encode())
    got = raw_collect_publishes(r, len(sent))
    # RawClient resolved any aliases; the topics must come out right either way
    assert [(p.topic, p.payload) for p in got] == sent
    for p in got:
        alias = p.props.get("TopicAlias")
        assert alias is None or 1 <= alias <= 2, p


def test_no_topic_alias_to_client_without_maximum(broker):
    r = broker.raw(5)
    r.connect("ta-none")  # TopicAliasMaximum absent = 0
    r.subscribe(("none/#", 0))
    pub = broker.client(5, "ta-none-pub")
    for i in range(3):
        pub.publish("none/t", b"%d" % i)
    got = raw_collect_publishes(r, 3)
    assert all("TopicAlias" not in p.props and p.topic == b"none/t" for p in got)


# --------------------------------------------------- enhanced authentication
# Ferry implements no authentication method (docs/security.md, "Not yet").
def test_connect_with_unsupported_authentication_method_is_refused(broker):
    # [MQTT-4.12.0-1]: the server MUST close the connection, after CONNACK
    # 0x8C or 0x87 if it likes; Mosquitto (no auth plugin) sends 0x8C.
    r = broker.raw(5)
    ack = r.connect("auth-method", props={"AuthenticationMethod": "SCRAM-SHA-1"},
                    expect_success=False)
    assert ack.reason == R.RC_BAD_AUTHENTICATION_METHOD, ack
    assert r.read_until_closed() == []


@pytest.mark.mosquitto_differs("closes the connection without a DISCONNECT")
def test_auth_packet_after_plain_connect_gets_disconnect_0x8c(broker):
    r = broker.raw(5)
    r.connect("auth-packet")
    mark = len(broker.log_lines())
    r.send(R.encode_auth(0x19, {"AuthenticationMethod": "SCRAM-SHA-1"}))
    before = r.read_until_closed()
    assert [p.reason for p in before if p.type == R.DISCONNECT] == \
        [R.RC_BAD_AUTHENTICATION_METHOD], before
    if broker.is_ferry:
        broker.wait_log(r"extended authentication is not supported.*reason_code=\"0x8C\"", since=mark)
        assert not [line for line in broker.log_lines()[mark:] if "failed to encode" in line]


# ------------------------------------------------------------- flow control
@pytest.mark.mosquitto_differs(
    "refills the window beyond the client's Receive Maximum after a PUBACK "
    "(5 unacknowledged with Receive Maximum 3)")
def test_client_receive_maximum(broker):
    r = broker.raw(5)
    r.connect("rm", props={"ReceiveMaximum": 3})
    r.subscribe(("rm/t", 1))
    pub = broker.client(5, "rm-pub")
    payloads = [b"%d" % i for i in range(10)]
    for p in payloads:
        pub.publish("rm/t", p, qos=1)

    window = raw_collect_publishes(r, 3)
    assert r.collect(0.5) == [], "more unacknowledged QoS 1 messages than Receive Maximum"
    r.ack(window[0])
    window += raw_collect_publishes(r, 1)
    assert r.collect(0.3) == []
    rest = []
    for p in window[1:]:
        r.ack(p)
    while len(window) + len(rest) < 10:
        batch = raw_collect_publishes(r, 1)
        rest += batch
        r.ack(batch[0])
    assert [p.payload for p in window + rest] == payloads, "order preserved"
    assert r.collect(0.3) == []


@pytest.mark.mosquitto_differs(
    "ignores max_inflight_messages for v5 clients and uses only their Receive Maximum")
def test_max_inflight_messages_config(broker_factory):
    b = broker_factory({"broker": {"max_inflight_messages": 2}})
    r = b.raw(5)
    r.connect("inflight", props={"ReceiveMaximum": 50})
    r.subscribe(("if/t", 1))
    pub = b.client(5, "if-pub")
    for i in range(6):
        pub.publish("if/t", b"%d" % i, qos=1)
    first = raw_collect_publishes(r, 2)
    assert r.collect(0.5) == []
    for p in first:
        r.ack(p)
    rest = raw_collect_publishes(r, 4, ack=True)
    assert [p.payload for p in first + rest] == [b"%d" % i for i in range(6)]


@pytest.mark.mosquitto_differs(
    "answers the excess PUBLISH with PUBREC 0x97 (Quota exceeded) and keeps the connection "
    "instead of DISCONNECT 0x93")
def test_server_receive_maximum_exceeded(broker_factory):
    """A client sending more unacknowledged QoS 2 PUBLISHes than the server's
    Receive Maximum gets DISCONNECT 0x93."""
    b = broker_factory({"broker": {"receive_maximum": 2}})
    r = b.raw(5)
    assert r.connect("rmx").props.get("ReceiveMaximum") == 2
    for pid in (1, 2, 3):  # never send PUBREL: all three stay in flight
        r.send(R.encode_publish("rmx/t", b"x", qos=2, pid=pid))
    before = r.read_until_closed()
    assert [p.reason for p in before if p.type == R.DISCONNECT] == [R.RC_RECEIVE_MAXIMUM_EXCEEDED]
    assert [p.pid for p in before if p.type == R.PUBREC] == [1, 2]


# ------------------------------------------------------- packet size limits
def test_client_maximum_packet_size(broker):
    r = broker.raw(5)
    r.connect("mps", props={"MaximumPacketSize": 128})
    r.subscribe(("mps/t", 1))
    pub = broker.client(5, "mps-pub")
    pub.publish("mps/t", b"L" * 200, qos=1)   # would be > 128 bytes on the wire
    pub.publish("mps/t", b"small", qos=1)
    pub.publish("mps/t", b"Q" * 1000, qos=0)
    pub.publish("mps/t", b"small2", qos=0)
    got = raw_collect_publishes(r, 2, ack=True)
    assert [p.payload for p in got] == [b"small", b"small2"]
    assert r.collect(0.3) == []
    r.ping()  # still connected


# ----------------------------------------------------------- message expiry
def test_message_expiry_in_offline_queue(broker):
    sub = broker.client(5, "mx-sub", clean=False, connect=False)
    sub.connect({"SessionExpiryInterval": 60})
    sub.subscribe("mx/t", qos=1)
    sub.disconnect()

    pub = broker.client(5, "mx-pub")
    pub.publish("mx/t", b"long", qos=1, props={"MessageExpiryInterval": 10})
    pub.publish("mx/t", b"short", qos=1, props={"MessageExpiryInterval": 1})
    pub.publish("mx/t", b"forever", qos=1)
    time.sleep(2.2)  # the feature is the passing of time

    sub = broker.client(5, "mx-sub", clean=False, connect=False)
    assert sub.connect({"SessionExpiryInterval": 60}).session_present
    got = sub.get_n(2)
    assert [m.payload for m in got] == [b"long", b"forever"]
    remaining = got[0].props.get("MessageExpiryInterval")
    assert remaining is not None and 5 <= remaining <= 9, \
        f"expiry interval not decremented by the time spent queued: {remaining}"
    assert "MessageExpiryInterval" not in got[1].props
    expect_nothing(sub)


def test_message_expiry_forwarded_live(broker):
    sub = broker.client(5, "mxl-sub")
    sub.subscribe("mxl/t", qos=1)
    pub = broker.client(5, "mxl-pub")
    pub.publish("mxl/t", b"x", qos=1, props={"MessageExpiryInterval": 30})
    m = sub.get()
    assert 29 <= m.props.get("MessageExpiryInterval", -1) <= 30


def test_retained_message_expires(broker):
    pub = broker.client(5, "mxr-pub")
    pub.publish("mxr/t", b"fleeting", qos=1, retain=True, props={"MessageExpiryInterval": 1})
    pub.publish("mxr/u", b"lasting", qos=1, retain=True, props={"MessageExpiryInterval": 30})
    time.sleep(2.2)
    s = broker.client(5, "mxr-sub")
    s.subscribe("mxr/#", qos=1)
    m = s.get()
    assert (m.topic, m.payload, m.retain) == ("mxr/u", b"lasting", True)
    assert m.props.get("MessageExpiryInterval", 99) <= 28
    expect_nothing(s)


# ------------------------------------------- request/response, properties
def test_request_response(broker):
    responder = broker.client(5, "rr-responder")
    responder.subscribe("rr/request", qos=1)
    requester = broker.client(5, "rr-requester")
    requester.subscribe("rr/response/42", qos=1)

    corr = b"\x00\xffcorr-\x01"
    requester.publish("rr/request", b"ping?", qos=1,
                      props={"ResponseTopic": "rr/response/42", "CorrelationData": corr})
    req = responder.get()
    assert req.payload == b"ping?"
    assert req.props.get("ResponseTopic") == "rr/response/42"
    assert req.props.get("CorrelationData") == corr

    responder.publish(req.props["ResponseTopic"], b"pong!", qos=1,
                      props={"CorrelationData": req.props["CorrelationData"]})
    resp = requester.get()
    assert (resp.topic, resp.payload) == ("rr/response/42", b"pong!")
    assert resp.props.get("CorrelationData") == corr


def test_user_properties_payload_format_content_type(broker):
    sub = broker.client(5, "up-sub")
    sub.subscribe("up/t", qos=1)
    pub = broker.client(5, "up-pub")
    ups = [("b", "2"), ("a", "1"), ("b", "3"), ("ünï", "cödé"), ("empty", "")]
    pub.publish("up/t", '{"k":"v"}'.encode(), qos=1,
                props={"UserProperty": ups, "PayloadFormatIndicator": 1,
                       "ContentType": "application/json"})
    m = sub.get()
    assert m.payload == b'{"k":"v"}'
    assert m.props.get("UserProperty") == ups, "user properties reordered or lost"
    assert m.props.get("PayloadFormatIndicator") == 1
    assert m.props.get("ContentType") == "application/json"


def test_v5_properties_dropped_for_v311_subscriber(broker):
    old = broker.client(4, "xv-old")
    old.subscribe("xv/t", qos=1)
    new = broker.client(5, "xv-new")
    new.subscribe("xv/t", qos=1)
    pub = broker.client(5, "xv-pub")
    pub.publish("xv/t", b"both", qos=1, props={"UserProperty": [("k", "v")],
                                                "ContentType": "text/plain"})
    assert old.get().payload == b"both"
    assert new.get().props.get("UserProperty") == [("k", "v")]
    # and the other way round
    old.publish("xv/t", b"from-311", qos=1)
    assert new.get().payload == b"from-311"
