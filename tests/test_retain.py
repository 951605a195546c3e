"""Retained messages."""

import pytest

import rawmqtt as R
from helpers import VERSIONS, expect_nothing


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_store_replace_delete(broker, version):
    pub = broker.client(version, "ret-pub")
    live = broker.client(version, "ret-live")
    live.subscribe("ret/#", qos=1)

    pub.publish("ret/a", b"r1", qos=1, retain=True)
    # live delivery to an existing subscription: RETAIN flag cleared
    m = live.get()
    assert (m.topic, m.payload, m.retain) == ("ret/a", b"r1", False)

    s1 = broker.client(version, "ret-s1")
    s1.subscribe("ret/a", qos=1)
    m = s1.get()
    assert (m.topic, m.payload, m.retain, m.qos) == ("ret/a", b"r1", True, 1)
    expect_nothing(s1, 0.2)

    # replaced
    pub.publish("ret/a", b"r2", qos=1, retain=True)
    s2 = broker.client(version, "ret-s2")
    s2.subscribe("ret/+", qos=0)
    m = s2.get()
    assert (m.topic, m.payload, m.retain, m.qos) == ("ret/a", b"r2", True, 0)
    expect_nothing(s2, 0.2)

    # deleted by an empty retained payload (which is itself delivered live,
    # but never stored)
    pub.publish("ret/a", b"", qos=1, retain=True)
    s3 = broker.client(version, "ret-s3")
    s3.subscribe("ret/#", qos=1)
    expect_nothing(s3)

    assert [m.payload for m in live.get_n(2)] == [b"r2", b""]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_retained_message_is_retained_before_the_log_stores_it(broker_factory, version):
    """A retained message waits up to a second here in the log's batch
    window. A client subscribing meanwhile (the publisher itself, right
    after its QoS 0 publish, as in Mosquitto's own suite) is not among its
    live deliveries, planned before it subscribed, so only the retained
    copy can reach it: it must be retained at once, not once stored. And
    it is stored all the same: it survives a restart."""
    b = broker_factory({"durability": {"fsync": "batch", "fsync_batch_ms": 1000}})
    c = b.client(version, "ret-early")
    c.publish("early/state", b"on", qos=0, retain=True)
    c.subscribe("early/state", qos=1)
    m = c.get()
    assert (m.topic, m.payload, m.retain) == ("early/state", b"on", True)

    c.publish("early/state", b"", qos=0, retain=True)
    c.publish("early/other", b"x", qos=0, retain=True)
    # Its SUBACK comes after its publishes are routed, so only their
    # retained copies can reach a later subscriber, not live ones.
    c.subscribe("early/barrier", qos=0)
    late = b.client(version, "ret-early-late")
    late.subscribe("early/#", qos=1)
    m = late.get()
    assert (m.topic, m.payload, m.retain) == ("early/other", b"x", True)
    expect_nothing(late, 0.2)

    b.restart(kill=False)
    after = b.client(version, "ret-early-after")
    after.subscribe("early/#", qos=1)
    m = after.get()
    assert (m.topic, m.payload, m.retain) == ("early/other", b"x", True)
    expect_nothing(after, 0.2)


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_wildcard_match_many(broker, version):
    pub = broker.client(version, "retw-pub")
    topics = {"rw/a/x": b"1", "rw/b/x": b"2", "rw/b/y": b"3", "rw/c/x/deep": b"4"}
    for t, p in topics.items():
        pub.publish(t, p, qos=1, retain=True)
    pub.publish("rw/a/nonretained", b"no", qos=1)

    s = broker.client(version, "retw-sub")
    s.subscribe("rw/+/x", qos=1)
    got = {m.topic: (m.payload, m.retain) for m in s.get_n(2)}
    assert got == {"rw/a/x": (b"1", True), "rw/b/x": (b"2", True)}
    expect_nothing(s, 0.3)


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_qos_is_min_of_both(broker, version):
    pub = broker.client(version, "retq-pub")
    pub.publish("retq/t", b"q2", qos=2, retain=True)
    for q in (0, 1, 2):
        s = broker.client(version, f"retq-{q}")
        s.subscribe("retq/t", qos=q)
        m = s.get()
        assert (m.payload, m.qos, m.retain) == (b"q2", q, True)


def test_v5_retain_handling(broker):
    pub = broker.client(5, "rh-pub")
    pub.publish("rh/t", b"kept", qos=1, retain=True)

    # 0: send retained messages at every subscribe
    s0 = broker.client(5, "rh0")
    s0.subscribe("rh/t", qos=1, retain_handling=0)
    assert s0.get().payload == b"kept"
    s0.subscribe("rh/t", qos=1, retain_handling=0)
    assert s0.get().payload == b"kept"

    # 1: only if the subscription did not exist yet
    s1 = broker.client(5, "rh1")
    s1.subscribe("rh/t", qos=1, retain_handling=1)
    m = s1.get()
    assert (m.payload, m.retain) == (b"kept", True)
    s1.subscribe("rh/t", qos=1, retain_handling=1)
    expect_nothing(s1)

    # 2: never
    s2 = broker.client(5, "rh2")
    s2.subscribe("rh/t", qos=1, retain_handling=2)
    expect_nothing(s2)
    # ... but live messages are delivered normally
    pub.publish("rh/t", b"live", qos=1)
    assert s2.get().payload == b"live"


def test_v5_retain_as_published(broker):
    rap = broker.client(5, "rap1")
    rap.subscribe("rap/t", qos=1, retain_as_published=True)
    norm = broker.client(5, "rap0")
    norm.subscribe("rap/t", qos=1, retain_as_published=False)
    pub = broker.client(5, "rap-pub")

    pub.publish("rap/t", b"retained", qos=1, retain=True)
    pub.publish("rap/t", b"plain", qos=1, retain=False)
    assert [(m.payload, m.retain) for m in rap.get_n(2)] == [(b"retained", True), (b"plain", False)]
    assert [(m.payload, m.retain) for m in norm.get_n(2)] == [(b"retained", False),
                                                              (b"plain", False)]


def test_v5_retain_unavailable(broker_factory):
    """retain_available = false: announced in CONNACK, and a retained PUBLISH
    is a protocol violation (DISCONNECT 0x9A). (v3.1.1 has no way to express
    this, and Ferry's contract does not say what happens there.)"""
    version = 5
    b = broker_factory({"broker": {"retain_available": False}})
    r = b.raw(version)
    ack = r.connect("noretain")
    assert ack.props.get("RetainAvailable") == 0
    r.send(R.encode_publish("nr/t", b"x", qos=1, retain=True, pid=1, version=version))
    before_close = r.read_until_closed()
    assert [p.reason for p in before_close if p.type == R.DISCONNECT] == \
        [R.RC_RETAIN_NOT_SUPPORTED], before_close
    # nothing was stored
    s = b.client(version, "noretain-sub")
    s.subscribe("nr/#")
    expect_nothing(s)
