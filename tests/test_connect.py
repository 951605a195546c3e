"""CONNECT/CONNACK, sessions, takeover and keep-alive."""

import time

import pytest

import rawmqtt as R
from helpers import VERSIONS, expect_nothing


# ---------------------------------------------------------------- CONNACK
def test_connack_v5_announces_configured_limits(broker_factory):
    b = broker_factory({"broker": {"receive_maximum": 20, "topic_alias_maximum": 8,
                                   "max_packet_size_bytes": 65536}})
    r = b.raw(5)
    ack = r.connect("limits", keepalive=30)
    assert ack.reason == 0
    assert ack.session_present is False
    assert ack.props.get("ReceiveMaximum") == 20
    assert ack.props.get("TopicAliasMaximum") == 8
    assert ack.props.get("MaximumPacketSize") == 65536
    # keepalive within the cap: no Server Keep Alive, or one equal to ours
    assert ack.props.get("ServerKeepAlive", 30) == 30
    # a non-empty client id is never replaced
    assert "AssignedClientIdentifier" not in ack.props


@pytest.mark.ferry_only
def test_connack_v5_default_limits(broker):
    ack = broker.raw(5).connect("defaults")
    assert ack.props.get("ReceiveMaximum") == 100
    assert ack.props.get("TopicAliasMaximum") == 64
    assert ack.props.get("MaximumPacketSize") == 1048576
    # retain is available by default: property absent or 1
    assert ack.props.get("RetainAvailable", 1) == 1


def test_v5_empty_client_id_gets_assigned_id(broker):
    r = broker.raw(5)
    ack = r.connect("", keepalive=30)
    assigned = ack.props.get("AssignedClientIdentifier")
    assert isinstance(assigned, str) and assigned, ack
    # a second anonymous client gets a different identifier
    ack2 = broker.raw(5).connect("")
    assert ack2.props.get("AssignedClientIdentifier") not in (None, "", assigned)
    # the first connection is still usable (its session was not taken over)
    r.ping()


def test_v311_empty_client_id(broker):
    # allowed with clean session ...
    ack = broker.raw(4).connect("", clean=True)
    assert ack.reason == 0 and ack.session_present is False
    # ... rejected with 0x02 "identifier rejected" without it [MQTT-3.1.3-8]
    r = broker.raw(4)
    ack = r.connect("", clean=False, expect_success=False)
    assert ack.reason == 0x02
    r.read_until_closed()


def test_v5_server_keep_alive_when_over_cap(broker_factory):
    b = broker_factory({"broker": {"max_keep_alive_secs": 10}})
    ack = b.raw(5).connect("ka", keepalive=60)
    assert ack.props.get("ServerKeepAlive") == 10
    ack = b.raw(5).connect("ka2", keepalive=0)  # 0 = no keep-alive: above any cap
    assert ack.props.get("ServerKeepAlive") == 10
    ack = b.raw(5).connect("ka3", keepalive=5)
    assert ack.props.get("ServerKeepAlive", 5) == 5


@pytest.mark.mosquitto_differs("max_keepalive cannot be configured below 10 s")
def test_v311_keep_alive_over_cap_is_accepted_and_cap_enforced(broker_factory):
    """v3.1.1 cannot be told a keep-alive: the broker accepts the client but
    drops it after 1.5x its own cap when it stays silent."""
    b = broker_factory({"broker": {"max_keep_alive_secs": 1}})
    r = b.raw(4)
    ack = r.connect("ka311", keepalive=60)
    assert ack.reason == 0
    t0 = time.monotonic()
    r.read_until_closed(timeout=5)
    assert time.monotonic() - t0 < 3.5, "silent v3.1.1 client not dropped at the broker's cap"


# --------------------------------------------------- clean start / session
def _connect_persistent(b, version, cid, clean=False, expiry=60):
    props = {"SessionExpiryInterval": expiry} if version == 5 and expiry else None
    c = b.client(version, cid, clean=clean, connect=False)
    ack = c.connect(props)
    return c, ack


@pytest.mark.parametrize("version", VERSIONS)
def test_clean_start_and_session_present(broker, version):
    pub = broker.client(version, "pub-sp")

    s, ack = _connect_persistent(broker, version, "sess-sp")
    assert ack.session_present is False  # nothing existed yet
    assert s.subscribe("sp/t", qos=1) == [1]
    s.disconnect()

    # resume: session present, subscription still there
    s, ack = _connect_persistent(broker, version, "sess-sp")
    assert ack.session_present is True
    pub.publish("sp/t", b"one", qos=1)
    m = s.get()
    assert (m.topic, m.payload, m.qos) == ("sp/t", b"one", 1)
    s.disconnect()

    # clean start discards the session
    s, ack = _connect_persistent(broker, version, "sess-sp", clean=True)
    assert ack.session_present is False
    pub.publish("sp/t", b"two", qos=1)
    expect_nothing(s)


def test_v5_session_expiry_zero_is_not_kept(broker):
    s, ack = _connect_persistent(broker, 5, "sess-exp0", expiry=0)
    s.subscribe("e0/t", qos=1)
    s.disconnect()
    s, ack = _connect_persistent(broker, 5, "sess-exp0", expiry=0)
    assert ack.session_present is False


def test_v5_session_expiry(broker):
    pub = broker.client(5, "pub-exp")
    s, _ = _connect_persistent(broker, 5, "sess-exp", expiry=1)
    s.subscribe("exp/t", qos=1)
    s.disconnect()

    # within the interval: session (and what was queued for it) kept
    pub.publish("exp/t", b"kept", qos=1)
    s, ack = _connect_persistent(broker, 5, "sess-exp", expiry=1)
    assert ack.session_present is True
    m = s.get()
    assert m.payload == b"kept"
    s.disconnect()

    # after the interval: gone
    time.sleep(2.2)  # the feature is the passing of time
    pub.publish("exp/t", b"late", qos=1)
    s, ack = _connect_persistent(broker, 5, "sess-exp", expiry=1)
    assert ack.session_present is False
    expect_nothing(s)


# ---------------------------------------------------------------- takeover
@pytest.mark.parametrize("version", [
    pytest.param(4, id="v311"),
    pytest.param(5, id="v5", marks=pytest.mark.mosquitto_differs(
        "closes the old v5 connection without sending DISCONNECT 0x8E")),
])
def test_session_takeover(broker, version):
    props = {"SessionExpiryInterval": 60} if version == 5 else None
    first = broker.raw(version)
    first.connect("dup-id", clean=False, props=props)
    first.subscribe(("take/t", 1))

    second = broker.client(version, "dup-id", clean=False, connect=False)
    ack = second.connect(props)
    assert ack.reason == 0

    before_close = first.read_until_closed()
    if version == 5:
        disconnects = [p for p in before_close if p.type == R.DISCONNECT]
        assert [p.reason for p in disconnects] == [R.RC_SESSION_TAKEN_OVER], before_close
    else:
        assert not [p for p in before_close if p.type != R.PUBLISH], before_close

    # the new connection works (and inherited the subscription: session present)
    assert ack.session_present is True
    pub = broker.client(version, "take-pub")
    pub.publish("take/t", b"to-second", qos=1)
    assert second.get().payload == b"to-second"
    assert not second.disconnected.is_set()


@pytest.mark.parametrize("version", VERSIONS)
def test_taking_over_a_session_that_ends_with_its_connection_starts_afresh(broker, version):
    """The first connection's session ends with it (3.1.1 Clean Session 1,
    v5 expiry 0): a connection taking it over without a clean start gets a
    new session, as with Mosquitto, not its subscriptions, and the first
    one's will is published."""
    obs = broker.client(version, "tk-clean-obs")
    obs.subscribe("tk-clean/#", qos=1)
    first = broker.raw(version)
    first.connect("tk-clean", clean=True,
                  will={"topic": "tk-clean/will", "payload": b"gone", "qos": 1})
    first.subscribe(("tk-clean/t", 1))

    props = {"SessionExpiryInterval": 60} if version == 5 else None
    second = broker.client(version, "tk-clean", clean=False, connect=False)
    ack = second.connect(props)
    assert (ack.reason, ack.session_present) == (0, False)
    first.read_until_closed()
    m = obs.get()
    assert (m.topic, m.payload) == ("tk-clean/will", b"gone")

    broker.client(version, "tk-clean-pub").publish("tk-clean/t", b"not for second", qos=1)
    assert obs.get().payload == b"not for second"
    expect_nothing(second, 0.3)


# --------------------------------------------------------------- keep-alive
@pytest.mark.mosquitto_differs(
    "checks keep-alives coarsely: a silent client with keep-alive 1 s is dropped after ~5 s, "
    "not within 1.5x the keep-alive")
@pytest.mark.parametrize("version", VERSIONS)
def test_keep_alive_timeout_publishes_will(broker, version):
    obs = broker.client(version, "ka-obs")
    obs.subscribe("ka/will", qos=1)

    r = broker.raw(version)
    r.connect("ka-silent", keepalive=1,
              will={"topic": "ka/will", "payload": b"silent client gone", "qos": 1})
    t0 = time.monotonic()  # last packet we sent
    r.read_until_closed(timeout=5)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed <= 2.5, f"dropped after {elapsed:.2f}s, expected ~1.5s"

    m = obs.get()
    assert (m.topic, m.payload, m.qos) == ("ka/will", b"silent client gone", 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_keep_alive_pings_keep_connection(broker, version):
    r = broker.raw(version)
    r.connect("ka-pinger", keepalive=1)
    for _ in range(5):  # 2.5 s, well past 1.5x keep-alive
        time.sleep(0.5)
        r.ping()
    r.subscribe(("ka/alive", 0))


@pytest.mark.ferry_only  # mosquitto has no max_session_expiry equivalent
def test_v5_session_expiry_capped_by_config(broker_factory):
    """max_session_expiry_secs caps what a client asks for; the broker tells
    the client the value it uses (CONNACK Session Expiry Interval)."""
    b = broker_factory({"broker": {"max_session_expiry_secs": 1}})
    s = b.client(5, "cap-exp", clean=False, connect=False)
    ack = s.connect({"SessionExpiryInterval": 3600})
    assert ack.props.get("SessionExpiryInterval") == 1
    s.subscribe("cap/t", qos=1)
    s.disconnect()
    time.sleep(2.2)  # the feature is the passing of time
    s = b.client(5, "cap-exp", clean=False, connect=False)
    assert s.connect({"SessionExpiryInterval": 3600}).session_present is False


@pytest.mark.parametrize("client_id, accepted", [("", False), ("a" * 23, True), ("a" * 200, True)])
def test_mqtt31_client_id_is_not_empty(broker, client_id, accepted):
    """3.1 asks for at most 23 characters; Mosquitto refuses only the empty
    id, and 3.1 devices with longer ids work with it."""
    r = broker.raw(4)
    r.send(R.encode_connect(client_id, version=4, protocol_name=b"MQIsdp", protocol_level=3))
    ack = r.expect(R.CONNACK)
    assert ack.reason == (0x00 if accepted else 0x02)


def test_mqtt31_reserves_no_flag_bits(broker):
    """3.1 reserved neither CONNECT's flag bit 0 nor the fixed header's
    flags (CONNECT's own included), and its clients set DUP on a PUBREL
    they retry: Mosquitto checks both from 3.1.1 on only, and so does
    Ferry."""
    r = broker.raw(4)
    connect = R.encode_connect("v31-flags", version=4, protocol_name=b"MQIsdp", protocol_level=3,
                               extra_flags=0x01)
    r.send(bytes([connect[0] | 0x04]) + connect[1:])  # a fixed-header flag, too
    assert r.expect(R.CONNACK).reason == 0
    r.publish("v31/flags", b"once", qos=2, pid=5, wait_ack=False)
    assert r.await_ack(R.PUBREC, 5).reason == 0
    r.send(R.packet(R.PUBREL, 0x0A, R.u16(5)))  # DUP | QoS 1, as 3.1 retries it
    assert r.await_ack(R.PUBCOMP, 5).pid == 5
    r.ping()


def test_mqtt31_connack_has_no_session_present_flag(broker):
    """3.1's CONNACK byte before the return code is reserved: a resumed
    3.1 session is acknowledged with 0 there, as Mosquitto does, and is
    resumed all the same."""
    def connect():
        r = broker.raw(4)
        r.send(R.encode_connect("v31-resume", version=4, clean=False,
                                protocol_name=b"MQIsdp", protocol_level=3))
        return r, r.expect(R.CONNACK)

    r, ack = connect()
    assert (ack.reason, ack.session_present) == (0, False)
    r.subscribe(("v31/t", 1))
    r.disconnect()
    broker.client(4, "v31-pub").publish("v31/t", b"while away", qos=1)
    r, ack = connect()
    assert (ack.reason, ack.session_present) == (0, False)
    assert r.expect(R.PUBLISH).payload == b"while away"


@pytest.mark.parametrize("version", VERSIONS)
def test_packets_sent_right_behind_connect_are_applied(broker, version):
    """A client may send packets before CONNACK arrives (MQTT 5 §3.1.4,
    3.1.1 §3.1.4): a SUBSCRIBE in the same segment as the CONNECT is
    answered without the client sending anything more."""
    r = broker.raw(version)
    r.send(R.encode_connect("pipelined", version)
           + R.encode_subscribe(1, [("pipe/#", 1)], None, version))
    assert r.expect(R.CONNACK).reason == 0
    assert r.expect(R.SUBACK).reasons == [1]
