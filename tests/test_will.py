"""Will messages."""

import time

import pytest

import rawmqtt as R
from helpers import VERSIONS, expect_nothing

WILL_PROPS = {
    "ContentType": "text/plain",
    "PayloadFormatIndicator": 1,
    "UserProperty": [("why", "crash"), ("n", "1")],
    "ResponseTopic": "will/reply",
    "CorrelationData": b"\x00\x01\x02",
}


def _observer(broker, version, topic="will/#"):
    obs = broker.client(version, "will-obs")
    obs.subscribe(topic, qos=2)
    return obs


@pytest.mark.parametrize("version", VERSIONS)
def test_will_published_on_abnormal_disconnect(broker, version):
    obs = _observer(broker, version)
    r = broker.raw(version)
    will = {"topic": "will/t", "payload": b"abnormal", "qos": 1}
    if version == 5:
        will["props"] = WILL_PROPS
    r.connect("will-abn", will=will)
    r.abort()  # network failure, no DISCONNECT

    m = obs.get()
    assert (m.topic, m.payload, m.qos, m.retain) == ("will/t", b"abnormal", 1, False)
    if version == 5:
        assert m.props.get("ContentType") == "text/plain"
        assert m.props.get("PayloadFormatIndicator") == 1
        assert m.props.get("UserProperty") == [("why", "crash"), ("n", "1")]
        assert m.props.get("ResponseTopic") == "will/reply"
        assert m.props.get("CorrelationData") == b"\x00\x01\x02"
    expect_nothing(obs)


VIOLATIONS = {
    "second_connect": lambda v: R.encode_connect("will-err", v),
    "qos3_publish": lambda v: R.packet(R.PUBLISH, 0x06, R.utf8("will/x") + b"\x00\x01" +
                                       (b"\x00" if v == 5 else b"") + b"x"),
}


@pytest.mark.parametrize("violation", [
    pytest.param("second_connect", marks=pytest.mark.mosquitto_differs(
        "does not publish the will when it closes a connection for a second CONNECT")),
    "qos3_publish",
])
@pytest.mark.parametrize("version", VERSIONS)
def test_will_published_on_protocol_error_close(broker, version, violation):
    """The broker closing the connection because of a protocol violation is
    an abnormal disconnect too: the will is published."""
    obs = _observer(broker, version)
    r = broker.raw(version)
    r.connect("will-err", will={"topic": "will/err", "payload": b"violated", "qos": 0})
    r.send(VIOLATIONS[violation](version))
    r.read_until_closed()
    assert obs.get().payload == b"violated"


@pytest.mark.parametrize("version", VERSIONS)
def test_no_will_on_normal_disconnect(broker, version):
    obs = _observer(broker, version)
    r = broker.raw(version)
    r.connect("will-norm", will={"topic": "will/t", "payload": b"must not appear", "qos": 1})
    r.disconnect()
    expect_nothing(obs)
    # the broker really has processed that client: a will-less round trip works
    p = broker.client(version, "will-norm-pub")
    p.publish("will/after", b"after", qos=1)
    assert obs.get().payload == b"after"


def test_v5_disconnect_with_will_message(broker):
    obs = _observer(broker, 5)
    r = broker.raw(5)
    r.connect("will-04", will={"topic": "will/t", "payload": b"on purpose", "qos": 1})
    r.disconnect(reason=R.RC_DISCONNECT_WITH_WILL)
    m = obs.get()
    assert (m.topic, m.payload) == ("will/t", b"on purpose")


@pytest.mark.parametrize("version", VERSIONS)
def test_will_retained(broker, version):
    r = broker.raw(version)
    r.connect("will-ret", will={"topic": "will/ret", "payload": b"last words", "qos": 1,
                                "retain": True})
    obs = _observer(broker, version, "will/ret")  # subscribed before the will
    r.abort()
    assert obs.get().payload == b"last words"
    late = broker.client(version, "will-late")
    late.subscribe("will/ret", qos=1)
    m = late.get()
    assert (m.payload, m.retain) == (b"last words", True)


def test_v5_will_delay(broker):
    obs = _observer(broker, 5)
    r = broker.raw(5)
    r.connect("will-delay", props={"SessionExpiryInterval": 30},
              will={"topic": "will/t", "payload": b"delayed", "qos": 1,
                    "props": {"WillDelayInterval": 1}})
    r.abort()
    t0 = time.monotonic()
    expect_nothing(obs, 0.6)
    m = obs.get(timeout=4)
    assert m.payload == b"delayed"
    assert m.received_at - t0 >= 0.9, "will published before its delay interval"


def test_v5_will_delay_cancelled_by_reconnect(broker):
    obs = _observer(broker, 5)
    will = {"topic": "will/t", "payload": b"cancelled", "qos": 1,
            "props": {"WillDelayInterval": 1}}
    r = broker.raw(5)
    r.connect("will-cancel", props={"SessionExpiryInterval": 30}, will=will)
    r.abort()
    r2 = broker.raw(5)
    ack = r2.connect("will-cancel", clean=False, props={"SessionExpiryInterval": 30})
    assert ack.session_present is True
    expect_nothing(obs, 1.8)  # past the delay: the will must never come
    r2.ping()


@pytest.mark.mosquitto_differs(
    "with Session Expiry 0 it still waits for the Will Delay Interval instead of publishing "
    "when the session ends")
def test_v5_will_delay_longer_than_session(broker):
    """The will is published when the will delay elapses or the session
    ends, whichever comes first: session expiry 0 ends it at once."""
    obs = _observer(broker, 5)
    r = broker.raw(5)
    r.connect("will-sess", props={"SessionExpiryInterval": 0},
              will={"topic": "will/t", "payload": b"session over", "qos": 1,
                    "props": {"WillDelayInterval": 30}})
    r.abort()
    m = obs.get(timeout=3)
    assert m.payload == b"session over"


def test_v5_will_delay_session_expires_first(broker):
    obs = _observer(broker, 5)
    r = broker.raw(5)
    r.connect("will-sess2", props={"SessionExpiryInterval": 1},
              will={"topic": "will/t", "payload": b"expired", "qos": 1,
                    "props": {"WillDelayInterval": 30}})
    r.abort()
    m = obs.get(timeout=4)
    assert m.payload == b"expired"


@pytest.mark.parametrize("version", [
    pytest.param(4, id="v311"),
    pytest.param(5, id="v5", marks=pytest.mark.mosquitto_differs(
        "sends no will when a v5 session is resumed, though its will delay is 0")),
])
def test_a_resumed_session_sends_its_will_in_v5_only(broker, version):
    """A connection taking over a session that goes on: v5 sends the old
    connection's undelayed will (§3.1.4); 3.1.1 names no takeover among
    the will's occasions, and Mosquitto sends none, so neither does Ferry."""
    obs = _observer(broker, version)
    props = {"SessionExpiryInterval": 60} if version == 5 else None
    first = broker.raw(version)
    first.connect("will-resumed", clean=False, props=props,
                  will={"topic": "will/t", "payload": b"taken over", "qos": 1})
    second = broker.raw(version)
    assert second.connect("will-resumed", clean=False, props=props).session_present
    first.read_until_closed()
    if version == 5:
        assert obs.get().payload == b"taken over"
    else:
        expect_nothing(obs, 0.5)
