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


WRONG_ACKS = [
    pytest.param(1, R.encode_pubrec, id="pubrec-for-qos1"),
    pytest.param(1, R.encode_pubcomp, id="pubcomp-for-qos1"),
    pytest.param(2, R.encode_puback, id="puback-for-qos2"),
    pytest.param(2, R.encode_pubcomp, id="pubcomp-before-pubrec"),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("qos, wrong_ack", WRONG_ACKS)
def test_an_acknowledgement_of_the_wrong_kind_closes_and_loses_nothing(broker, version, qos,
                                                                        wrong_ack):
    """An ack that does not fit the delivery's QoS (MQTT 5 §4.13.2, 3.1.1
    §4.8) is a protocol error: the connection closes (v5: DISCONNECT
    0x82), and the message, which the client never acknowledged as it
    should, comes again with DUP on the next connection, as with
    Mosquitto. Taking such an ack as the end of the delivery lost it."""
    props = {"SessionExpiryInterval": 60} if version == 5 else None

    def connect():
        sub = broker.raw(version)
        sub.connect("wrong-ack-sub", clean=False, props=props)
        return sub

    sub = connect()
    sub.subscribe(("wrong-ack/t", qos))
    broker.client(version, "wrong-ack-pub").publish("wrong-ack/t", b"keep me", qos=qos)
    p = sub.expect(R.PUBLISH)
    assert (p.payload, p.qos, p.dup) == (b"keep me", qos, False)
    sub.send(wrong_ack(p.pid, version=version))
    before_close = sub.read_until_closed()
    said = [(q.type, q.reason) for q in before_close]
    if version == 5 and broker.is_ferry:
        assert said == [(R.DISCONNECT, R.RC_PROTOCOL_ERROR)]
    else:
        # 3.1.1 has no DISCONNECT from the server; Mosquitto's v5 sends none.
        assert said == []
    sub = connect()
    again = sub.expect(R.PUBLISH)
    assert (again.payload, again.qos, again.dup, again.pid) == (b"keep me", qos, True, p.pid)
    sub.ack(again)
    assert sub.collect(0.2) == []


@pytest.mark.mosquitto_differs(
    "answers a PUBREC for an unknown packet id with PUBREL 0x00, not 0x92 (not found)")
def test_a_failed_pubrec_for_an_unknown_packet_id_gets_no_pubrel(broker):
    """A PUBREC with a failure reason ends its exchange (MQTT 5 §4.3.3):
    there is nothing to release, whether the id is known or not."""
    r = broker.raw(5)
    r.connect("failed-pubrec")
    r.send(R.encode_pubrec(77, reason=0x80))
    r.send(R.encode_pingreq())
    assert r.read_packet().type == R.PINGRESP
    r.send(R.encode_pubrec(78))
    rel = r.expect(R.PUBREL)
    assert (rel.pid, rel.reason) == (78, 0x92)
