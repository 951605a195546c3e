"""QoS 0/1/2 in both directions, the exact ack flows, and redelivery of
unacknowledged messages on session resumption."""

import pytest

import rawmqtt as R
from helpers import VERSIONS, expect_nothing, raw_collect_publishes

QOS = [pytest.param(q, id=f"qos{q}") for q in (0, 1, 2)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("pub_qos", QOS)
def test_qos_downgrade_to_subscription(broker, version, pub_qos):
    """A message is delivered with min(publish QoS, subscription QoS),
    payloads intact and in order."""
    subs = {}
    for sub_qos in (0, 1, 2):
        c = broker.client(version, f"q-sub{sub_qos}")
        assert c.subscribe("qos/t", qos=sub_qos) == [sub_qos]
        subs[sub_qos] = c
    pub = broker.client(version, "q-pub")
    payloads = [f"m{i}-q{pub_qos}".encode() for i in range(3)] + [b"", bytes(range(256))]
    for p in payloads:
        pub.publish("qos/t", p, qos=pub_qos)
    for sub_qos, c in subs.items():
        got = c.get_n(len(payloads))
        assert [m.payload for m in got] == payloads
        assert {m.qos for m in got} == {min(pub_qos, sub_qos)}
        assert not any(m.retain or m.dup for m in got)
        expect_nothing(c, 0.2)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("qos", [1, 2])
def test_ack_flows_on_the_wire(broker, version, qos):
    sub = broker.raw(version)
    sub.connect("flow-sub")
    assert sub.subscribe(("flow/t", 2)).reasons == [2]
    pub = broker.raw(version)
    pub.connect("flow-pub")

    # publisher side
    pub.send(R.encode_publish("flow/t", b"hello", qos=qos, pid=0x1234, version=version))
    if qos == 1:
        a = pub.expect(R.PUBACK)
        assert (a.pid, a.reason) == (0x1234, 0)
    else:
        rec = pub.expect(R.PUBREC)
        assert (rec.pid, rec.reason) == (0x1234, 0)
        pub.send(R.encode_pubrel(0x1234, version=version))
        comp = pub.expect(R.PUBCOMP)
        assert (comp.pid, comp.reason) == (0x1234, 0)

    # subscriber side
    p = sub.expect(R.PUBLISH)
    assert (p.topic, p.payload, p.qos, p.dup, p.retain) == (b"flow/t", b"hello", qos, False, False)
    assert p.pid and 1 <= p.pid <= 65535
    if qos == 1:
        sub.send(R.encode_puback(p.pid, version=version))
    else:
        sub.send(R.encode_pubrec(p.pid, version=version))
        rel = sub.expect(R.PUBREL)
        assert rel.pid == p.pid and rel.flags == 0x02 and rel.reason == 0
        sub.send(R.encode_pubcomp(p.pid, version=version))
    assert sub.collect(0.3) == []
    # the connection is still healthy
    sub.ping()
    pub.ping()


@pytest.mark.parametrize("version", VERSIONS)
def test_qos2_duplicate_publish_delivered_once(broker, version):
    sub = broker.client(version, "dup2-sub")
    sub.subscribe("dup2/t", qos=2)
    pub = broker.raw(version)
    pub.connect("dup2-pub")
    pub.send(R.encode_publish("dup2/t", b"once", qos=2, pid=7, version=version))
    assert pub.expect(R.PUBREC).pid == 7
    # the PUBREC "got lost": the client retransmits the PUBLISH with DUP
    pub.send(R.encode_publish("dup2/t", b"once", qos=2, pid=7, dup=True, version=version))
    assert pub.expect(R.PUBREC).pid == 7
    pub.send(R.encode_pubrel(7, version=version))
    assert pub.expect(R.PUBCOMP).pid == 7
    m = sub.get()
    assert (m.payload, m.qos) == (b"once", 2)
    expect_nothing(sub)


def _persistent(version):
    return {"SessionExpiryInterval": 300} if version == 5 else None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("qos", [1, 2])
def test_unacked_messages_redelivered_with_dup(broker, version, qos):
    sub = broker.raw(version)
    sub.connect("redeliver", clean=False, props=_persistent(version))
    sub.subscribe(("redeliver/t", qos))

    pub = broker.client(version, "redeliver-pub")
    payloads = [b"r1", b"r2", b"r3"]
    for p in payloads:
        pub.publish("redeliver/t", p, qos=qos)

    first = raw_collect_publishes(sub, 3)
    assert [p.payload for p in first] == payloads
    assert not any(p.dup for p in first)
    sub.abort()  # no acks, no DISCONNECT

    sub = broker.raw(version)
    ack = sub.connect("redeliver", clean=False, props=_persistent(version))
    assert ack.session_present is True
    again = raw_collect_publishes(sub, 3)
    assert [p.payload for p in again] == payloads
    assert [p.pid for p in again] == [p.pid for p in first], "original packet ids must be reused"
    assert all(p.dup for p in again), again
    assert all(p.qos == qos for p in again)
    for p in again:
        sub.ack(p)
    assert sub.collect(0.3) == []
    sub.disconnect()

    # everything acknowledged: nothing is redelivered any more
    sub = broker.raw(version)
    assert sub.connect("redeliver", clean=False, props=_persistent(version)).session_present
    assert sub.collect(0.5) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_qos2_pubrel_resent_after_reconnect(broker, version):
    sub = broker.raw(version)
    sub.connect("rel-resend", clean=False, props=_persistent(version))
    sub.subscribe(("rel/t", 2))
    pub = broker.client(version, "rel-pub")
    pub.publish("rel/t", b"x", qos=2)

    p = sub.expect(R.PUBLISH)
    sub.send(R.encode_pubrec(p.pid, version=version))
    assert sub.expect(R.PUBREL).pid == p.pid
    sub.abort()  # PUBCOMP never sent

    sub = broker.raw(version)
    assert sub.connect("rel-resend", clean=False, props=_persistent(version)).session_present
    rel = sub.expect(R.PUBREL)  # not the PUBLISH again: it was already received
    assert rel.pid == p.pid and rel.flags == 0x02
    sub.send(R.encode_pubcomp(p.pid, version=version))
    assert sub.collect(0.3) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_inbound_qos2_completes_across_reconnect(broker, version):
    """The broker keeps the publisher's QoS 2 state in its session: a PUBREL
    sent after reconnecting is completed, and the message is delivered once."""
    sub = broker.client(version, "in2-sub")
    sub.subscribe("in2/t", qos=2)
    pub = broker.raw(version)
    pub.connect("in2-pub", clean=False, props=_persistent(version))
    pub.send(R.encode_publish("in2/t", b"exactly once", qos=2, pid=99, version=version))
    assert pub.expect(R.PUBREC).pid == 99
    pub.abort()

    pub = broker.raw(version)
    assert pub.connect("in2-pub", clean=False, props=_persistent(version)).session_present
    pub.send(R.encode_pubrel(99, version=version))
    comp = pub.expect(R.PUBCOMP)
    assert comp.pid == 99 and comp.reason == 0
    assert sub.get().payload == b"exactly once"
    expect_nothing(sub)
