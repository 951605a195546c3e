"""Offline queueing for persistent sessions and its bound."""

import pytest

from helpers import VERSIONS, expect_nothing


def _persistent_sub(b, version, cid, topic="q/t", qos=1):
    props = {"SessionExpiryInterval": 300} if version == 5 else None
    c = b.client(version, cid, clean=False, connect=False)
    ack = c.connect(props)
    if topic:
        c.subscribe(topic, qos=qos)
    return c, ack


@pytest.mark.parametrize("version", VERSIONS)
def test_offline_messages_queued_for_persistent_session(broker, version):
    s, _ = _persistent_sub(broker, version, "offline")
    s.subscribe("q/two", qos=2)
    s.disconnect()

    pub = broker.client(version, "offline-pub")
    sent = []
    for i in range(5):
        pub.publish("q/t", b"q1-%d" % i, qos=1)
        sent.append(("q/t", b"q1-%d" % i, 1))
        pub.publish("q/two", b"q2-%d" % i, qos=2)
        sent.append(("q/two", b"q2-%d" % i, 2))

    s, ack = _persistent_sub(broker, version, "offline", topic=None)
    assert ack.session_present is True
    got = [(m.topic, m.payload, m.qos) for m in s.get_n(len(sent))]
    # order is only guaranteed per topic (and QoS) [MQTT-4.6.0-6]
    for topic in ("q/t", "q/two"):
        assert [g for g in got if g[0] == topic] == [x for x in sent if x[0] == topic]
    expect_nothing(s)


@pytest.mark.ferry_only  # mosquitto has no queue_overflow=drop_oldest
@pytest.mark.parametrize("explicit", [True, False], ids=["explicit", "default_policy"])
def test_offline_queue_bound_drop_oldest(broker_factory, explicit):
    cfg = {"max_queued_messages": 5}
    if explicit:
        cfg["queue_overflow"] = "drop_oldest"
    b = broker_factory({"broker": cfg})
    s, _ = _persistent_sub(b, 5, "bounded")
    s.disconnect()
    pub = b.client(5, "bounded-pub")
    for i in range(1, 11):
        pub.publish("q/t", b"%d" % i, qos=1)

    s, ack = _persistent_sub(b, 5, "bounded", topic=None)
    assert ack.session_present
    assert [m.payload for m in s.get_n(5)] == [b"6", b"7", b"8", b"9", b"10"]
    expect_nothing(s)


@pytest.mark.parametrize("version", VERSIONS)
def test_offline_queue_bound_drop_new(broker_factory, version):
    b = broker_factory({"broker": {"max_queued_messages": 5, "queue_overflow": "drop_new"}})
    s, _ = _persistent_sub(b, version, "bounded-new")
    s.disconnect()
    pub = b.client(version, "bounded-new-pub")
    for i in range(1, 11):
        # a full queue is not the publisher's problem: it still gets its ack
        pub.publish("q/t", b"%d" % i, qos=1)

    s, ack = _persistent_sub(b, version, "bounded-new", topic=None)
    assert ack.session_present
    assert [m.payload for m in s.get_n(5)] == [b"1", b"2", b"3", b"4", b"5"]
    expect_nothing(s)
    # the session keeps working after the overflow
    pub.publish("q/t", b"after", qos=1)
    assert s.get().payload == b"after"


@pytest.mark.ferry_only  # mosquitto's default bound is 1,000 messages, in memory
def test_default_bound_keeps_an_offline_devices_backlog(broker):
    """Mosquitto's default (1,000, drop) loses the 1,001st message of a
    device offline for a few minutes; Ferry's default bound is 100,000
    messages / 256 MiB, since an offline session's messages wait on disk."""
    s, _ = _persistent_sub(broker, 5, "backlog")
    s.disconnect()
    pub = broker.client(5, "backlog-pub")
    count = 3000
    for i in range(count):
        pub.publish("q/t", b"%d" % i, qos=1)
    s, ack = _persistent_sub(broker, 5, "backlog", topic=None)
    assert ack.session_present
    assert [m.payload for m in s.get_n(count, timeout=30)] == [b"%d" % i for i in range(count)]
    expect_nothing(s)


@pytest.mark.ferry_only  # mosquitto bounds queues in bytes only with max_queued_bytes, no drop_oldest
@pytest.mark.parametrize("overflow, kept", [("drop_oldest", range(12, 21)), ("drop_new", range(1, 10))])
def test_offline_queue_bound_in_bytes(broker_factory, overflow, kept):
    # each message is 3 bytes of topic and 100 of payload: 9 fit in 1000
    b = broker_factory({"broker": {"max_queued_bytes": 1000, "queue_overflow": overflow}})
    s, _ = _persistent_sub(b, 5, "bytes")
    s.disconnect()
    pub = b.client(5, "bytes-pub")
    for i in range(1, 21):
        pub.publish("q/t", b"%03d" % i + b"." * 97, qos=1)
    s, ack = _persistent_sub(b, 5, "bytes", topic=None)
    assert ack.session_present
    assert [m.payload[:3] for m in s.get_n(len(kept))] == [b"%03d" % i for i in kept]
    expect_nothing(s)
