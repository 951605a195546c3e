"""Subscription semantics: no local, subscription identifiers, overlapping
and shared subscriptions, unsubscribe, $-topics, deny_subscribe."""

import pytest

import rawmqtt as R
from helpers import VERSIONS, expect_nothing, raw_collect_publishes


def test_v5_no_local(broker):
    me = broker.client(5, "nl-me")
    me.subscribe("nl/t", qos=1, no_local=True)
    me.subscribe("nl/echo", qos=1, no_local=False)
    other = broker.client(5, "nl-other")

    me.publish("nl/t", b"mine", qos=1)
    me.publish("nl/echo", b"echo", qos=1)
    other.publish("nl/t", b"theirs", qos=1)
    got = me.get_n(2)
    assert [(m.topic, m.payload) for m in got] == [("nl/echo", b"echo"), ("nl/t", b"theirs")]
    expect_nothing(me)


@pytest.mark.parametrize("version", VERSIONS)
def test_own_messages_delivered_without_no_local(broker, version):
    me = broker.client(version, "own")
    me.subscribe("own/t", qos=1)
    me.publish("own/t", b"self", qos=1)
    assert me.get().payload == b"self"


def test_v5_subscription_identifier_single(broker):
    s = broker.client(5, "sid1")
    s.subscribe("sid/+", qos=1, props={"SubscriptionIdentifier": 7})
    s.subscribe("other/#", qos=1)  # no identifier
    p = broker.client(5, "sid-pub")
    p.publish("sid/a", b"x", qos=1)
    p.publish("other/a", b"y", qos=1)
    m1, m2 = s.get_n(2)
    assert (m1.payload, m1.props.get("SubscriptionIdentifier")) == (b"x", [7])
    assert (m2.payload, m2.props.get("SubscriptionIdentifier")) == (b"y", None)


def test_v5_subscription_identifiers_overlapping(broker):
    s = broker.client(5, "sid-multi")
    s.subscribe("ov/+", qos=1, props={"SubscriptionIdentifier": 7})
    s.subscribe("ov/#", qos=1, props={"SubscriptionIdentifier": 300})  # 2-byte varint
    s.subscribe("ov/b", qos=1)  # overlapping, without identifier
    p = broker.client(5, "sid-pub")
    p.publish("ov/b", b"both", qos=1)

    copies = [s.get()]
    while True:  # the spec allows one copy per matching subscription
        try:
            copies.append(s.get(timeout=0.5))
        except AssertionError:
            break
    assert all(c.payload == b"both" for c in copies)
    ids = [c.props.get("SubscriptionIdentifier", []) for c in copies]
    if len(copies) == 1:
        assert sorted(ids[0]) == [7, 300]
    else:
        # one copy per subscription, each carrying its own identifier (if any)
        assert sorted(i for x in ids for i in x) == [7, 300]
        assert all(len(x) <= 1 for x in ids)


@pytest.mark.mosquitto_differs("delivers one copy per matching subscription")
@pytest.mark.parametrize("version", VERSIONS)
def test_overlapping_subscriptions_single_delivery_at_max_qos(broker, version):
    s = broker.client(version, "ovl")
    s.subscribe("ovl/+", qos=0)
    s.subscribe("ovl/#", qos=2)
    s.subscribe("ovl/b", qos=1)
    p = broker.client(version, "ovl-pub")
    p.publish("ovl/b", b"once", qos=2)
    m = s.get()
    assert (m.topic, m.payload, m.qos) == ("ovl/b", b"once", 2)
    expect_nothing(s)


def test_v5_shared_subscription_round_robin(broker):
    members = [broker.client(5, f"sh{i}") for i in range(3)]
    for m in members:
        assert m.subscribe("$share/g/sh/t", qos=1) == [1]
    plain = broker.client(5, "sh-plain")
    plain.subscribe("sh/t", qos=1)
    pub = broker.client(5, "sh-pub")

    payloads = [f"m{i}".encode() for i in range(9)]
    for p in payloads:
        pub.publish("sh/t", p, qos=1)

    # a normal subscription still gets everything
    assert [m.payload for m in plain.get_n(9)] == payloads
    got = {}
    for i, m in enumerate(members):
        msgs = m.get_n(3)
        assert all(x.topic == "sh/t" for x in msgs)
        got[i] = [x.payload for x in msgs]
    for m in members:
        expect_nothing(m, 0.3)
    everything = sorted(p for ps in got.values() for p in ps)
    assert everything == sorted(payloads), "each message exactly once across the group"
    # round robin: each member saw every third message, in order
    for ps in got.values():
        idx = [payloads.index(p) for p in ps]
        assert idx == sorted(idx)
        assert idx[1] - idx[0] == 3 and idx[2] - idx[1] == 3, got


def test_v5_shared_subscription_member_leaves(broker):
    a = broker.client(5, "shl-a")
    b = broker.client(5, "shl-b")
    for m in (a, b):
        m.subscribe("$share/grp/shl/t", qos=1)
    leaver = broker.raw(5)
    leaver.connect("shl-c", will={"topic": "shl/left", "payload": b"bye"})
    leaver.subscribe(("$share/grp/shl/t", 1))
    obs = broker.client(5, "shl-obs")
    obs.subscribe("shl/left", qos=1)
    pub = broker.client(5, "shl-pub")

    first = [f"a{i}".encode() for i in range(6)]
    for p in first:
        pub.publish("shl/t", p, qos=1)
    batch1 = [x.payload for x in a.get_n(2)] + [x.payload for x in b.get_n(2)]
    batch1 += [p.payload for p in raw_collect_publishes(leaver, 2, ack=True)]
    assert sorted(batch1) == sorted(first)

    # one member goes away (abruptly; its will tells us the broker noticed)
    leaver.abort()
    assert obs.get().payload == b"bye"

    second = [f"b{i}".encode() for i in range(6)]
    for p in second:
        pub.publish("shl/t", p, qos=1)
    rest = [x.payload for x in a.get_n(3)] + [x.payload for x in b.get_n(3)]
    assert sorted(rest) == sorted(second), "remaining members get every message exactly once"
    expect_nothing(a, 0.3)
    expect_nothing(b, 0.1)


def test_v5_shared_and_plain_same_client(broker):
    """A client with both a shared and a non-shared subscription on the
    same topic gets its plain copy every time; the group's copy goes to one
    member (possibly that same client) [MQTT-4.8.2]."""
    a = broker.client(5, "sp-a")
    a.subscribe("sp/t", qos=1)
    a.subscribe("$share/g/sp/t", qos=1)
    other = broker.client(5, "sp-b")
    other.subscribe("$share/g/sp/t", qos=1)
    pub = broker.client(5, "sp-pub")
    payloads = [f"{i}".encode() for i in range(4)]
    for p in payloads:
        pub.publish("sp/t", p, qos=1)

    def drain(c):
        out = []
        while True:
            try:
                out.append(c.get(timeout=0.5).payload)
            except AssertionError:
                return out

    got_a, got_other = drain(a), drain(other)
    assert set(payloads) <= set(got_a), "plain subscription missed messages"
    assert sorted(got_a + got_other) == sorted(payloads * 2), (got_a, got_other)


@pytest.mark.parametrize("version", VERSIONS)
def test_unsubscribe(broker, version):
    s = broker.client(version, "unsub")
    s.subscribe("un/a", qos=1)
    s.subscribe("un/b", qos=1)
    p = broker.client(version, "unsub-pub")
    p.publish("un/a", b"1", qos=1)
    assert s.get().payload == b"1"

    rcs = s.unsubscribe("un/a")
    if version == 5:
        assert rcs == [0x00]
    p.publish("un/a", b"2", qos=1)
    p.publish("un/b", b"3", qos=1)
    m = s.get()
    assert (m.topic, m.payload) == ("un/b", b"3")
    expect_nothing(s)


def test_v5_unsubscribe_unknown_filter(broker):
    r = broker.raw(5)
    r.connect("unsub-raw")
    r.subscribe(("known/t", 1))
    r.send(R.encode_unsubscribe(42, ["unknown/t", "known/t", "unknown/#"]))
    ack = r.expect(R.UNSUBACK)
    assert ack.pid == 42
    assert ack.reasons == [R.RC_NO_SUBSCRIPTION_EXISTED, 0x00, R.RC_NO_SUBSCRIPTION_EXISTED]


def test_v311_unsuback(broker):
    r = broker.raw(4)
    r.connect("unsub-311")
    r.send(R.encode_unsubscribe(43, ["never/subscribed"], version=4))
    ack = r.expect(R.UNSUBACK)
    assert ack.pid == 43 and ack.body == b"\x00\x2b"  # v3.1.1 UNSUBACK has no payload


@pytest.mark.parametrize("version", VERSIONS)
def test_dollar_topics_not_matched_by_wildcards(broker_factory, version):
    b = broker_factory({"broker": {"sys_interval_secs": 1}})
    hash_ = b.client(version, "dollar-hash")
    hash_.subscribe("#", qos=0)
    plus = b.client(version, "dollar-plus")
    plus.subscribe("+/broker/#", qos=0)
    plus.subscribe("+/+/uptime", qos=0)
    sys = b.client(version, "dollar-sys")
    sys.subscribe("$SYS/#", qos=0)

    m = sys.get(timeout=4)
    assert m.topic.startswith("$SYS/")
    # the wildcard subscribers see only normal topics
    p = b.client(version, "dollar-pub")
    p.publish("normal/broker/x", b"n", qos=1)
    assert [(x.topic) for x in plus.get_n(1)] == ["normal/broker/x"]
    got = hash_.get()
    assert got.topic == "normal/broker/x", f"'#' matched {got.topic}"
    expect_nothing(hash_, 1.2)  # past a $SYS publish period
    expect_nothing(plus, 0.1)


@pytest.mark.ferry_only
@pytest.mark.parametrize("version", VERSIONS)
def test_deny_subscribe(broker_factory, version):
    b = broker_factory({"broker": {"deny_subscribe": ["test/nosubscribe", "secret/#"]}})
    r = b.raw(version)
    r.connect("deny")
    pid = r.next_pid()
    r.send(R.encode_subscribe(pid, [("test/nosubscribe", 1), ("test/ok", 1), ("secret/#", 0)],
                              version=version))
    ack = r.expect(R.SUBACK)
    assert ack.pid == pid
    assert ack.reasons == [0x80, 0x01, 0x80]
    if version == 5:
        reason = ack.props.get("ReasonString", "")
        assert "test/nosubscribe" in reason and "secret/#" in reason, ack.props

    pub = b.client(version, "deny-pub")
    pub.publish("test/nosubscribe", b"no", qos=1)
    pub.publish("test/ok", b"yes", qos=1)
    got = [p for p in r.collect(0.5) if p.type == R.PUBLISH]
    assert [(p.topic, p.payload) for p in got] == [(b"test/ok", b"yes")]
    r.ack(got[0])
