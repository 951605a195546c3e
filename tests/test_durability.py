"""Durability (issue 4): persistent sessions, their subscriptions and queued
messages, QoS 1/2 exchanges in both directions, retained messages and
delayed wills survive a restart of Ferry -- a graceful one (SIGTERM) and
a crash (SIGKILL) -- on the same data directory.

Every test here is Ferry-only: Mosquitto runs with persistence off in the
test configuration.
"""

import re
import subprocess
import time
from pathlib import Path

import pytest

import rawmqtt as R
from conftest import ferry_binary
from helpers import VERSIONS, expect_nothing, raw_collect_publishes

pytestmark = pytest.mark.ferry_only

# how the broker goes down between the two halves of a test
RESTARTS = [pytest.param(False, id="sigterm"), pytest.param(True, id="kill9")]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _session_props(version, expiry=300):
    """CONNECT properties of a persistent session (v3.1.1: clean session 0
    is all it takes)."""
    return {"SessionExpiryInterval": expiry} if version == 5 else None


def _persistent(b, version, cid, expiry=300):
    """A paho client on a persistent session (clean start 0): (client, CONNACK)."""
    c = b.client(version, cid, clean=False, connect=False)
    return c, c.connect(_session_props(version, expiry))


def _raw_persistent(b, version, cid, expiry=300):
    """A raw client on a persistent session (clean start 0): (client, CONNACK)."""
    r = b.raw(version)
    return r, r.connect(cid, clean=False, props=_session_props(version, expiry))


def _recovered(b) -> dict[str, int]:
    """The counts of this run's `durable state recovered` log line."""
    line = b.wait_log(r"durable state recovered", since=b.log_start, timeout=1)
    return {k: int(v) for k, v in re.findall(r"\b(\w+)=(\d+)\b", line)}


def _data_dir(b) -> str:
    return b.cmd[b.cmd.index("--data-dir") + 1]


# --------------------------------------------------------------------------
# retained messages
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kill", RESTARTS)
@pytest.mark.parametrize("version", VERSIONS)
def test_retained_messages_survive_restart(broker, version, kill):
    props = {"ContentType": "text/plain", "UserProperty": [("k", "v")],
             "MessageExpiryInterval": 600} if version == 5 else None
    pub = broker.client(version, "dur-ret-pub")
    pub.publish("dr/a", b"a-q0", qos=0, retain=True)
    pub.publish("dr/gone", b"cleared before the restart", qos=1, retain=True)
    pub.publish("dr/d", b"d-old", qos=0, retain=True)
    pub.publish("dr/b/c", b"bc-q1", qos=1, retain=True, props=props)
    pub.publish("dr/gone", b"", qos=1, retain=True)
    # QoS 1 last: its PUBACK comes once its record is stored, and the QoS 0
    # publishes before it on this connection were stored before it
    pub.publish("dr/d", b"d-new", qos=1, retain=True)

    broker.restart(kill=kill)
    assert _recovered(broker)["retained"] == 3

    s = broker.client(version, "dur-ret-sub")
    s.subscribe("dr/#", qos=1)
    got = {m.topic: m for m in s.get_n(3)}
    assert {t: (m.payload, m.qos, m.retain) for t, m in got.items()} == {
        "dr/a": (b"a-q0", 0, True),
        "dr/b/c": (b"bc-q1", 1, True),
        "dr/d": (b"d-new", 1, True),
    }
    expect_nothing(s, 0.3)  # dr/gone stays cleared
    if version == 5:
        m = got["dr/b/c"]
        assert m.props.get("ContentType") == "text/plain"
        assert m.props.get("UserProperty") == [("k", "v")]
        assert 0 < m.props.get("MessageExpiryInterval", 0) <= 600


@pytest.mark.parametrize("kill", RESTARTS)
def test_restart_again_with_nothing_new_stored(broker, kill):
    """Two restarts in a row with nothing stored in between: the second
    start finds its durable state exactly as the first one left it."""
    broker.client(5, "dur-again-pub").publish("da/t", b"kept", qos=1, retain=True)
    broker.restart(kill=kill)
    broker.restart(kill=kill)
    assert _recovered(broker)["retained"] == 1
    s = broker.client(5, "dur-again-sub")
    s.subscribe("da/t", qos=1)
    assert s.get().payload == b"kept"


# --------------------------------------------------------------------------
# sessions and their subscriptions
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kill", RESTARTS)
@pytest.mark.parametrize("version", VERSIONS)
def test_persistent_session_and_subscriptions_survive_restart(broker, version, kill):
    s, ack = _persistent(broker, version, "dur-sess")
    assert ack.session_present is False
    sub_props = {"SubscriptionIdentifier": 7} if version == 5 else None
    assert s.subscribe("ds/one/#", qos=1, props=sub_props) == [1]
    assert s.subscribe("ds/two", qos=2) == [2]
    assert s.subscribe("ds/zero", qos=0) == [0]
    s.disconnect()

    broker.restart(kill=kill)
    assert _recovered(broker)["sessions"] == 1

    s, ack = _persistent(broker, version, "dur-sess")
    assert ack.session_present is True
    pub = broker.client(version, "dur-sess-pub")
    for topic in ("ds/one/x", "ds/two", "ds/zero", "ds/other"):
        pub.publish(topic, topic.encode(), qos=2)
    got = {m.topic: m for m in s.get_n(3)}
    # each subscription with its granted QoS
    assert {t: (m.payload, m.qos) for t, m in got.items()} == {
        "ds/one/x": (b"ds/one/x", 1), "ds/two": (b"ds/two", 2), "ds/zero": (b"ds/zero", 0)}
    if version == 5:
        assert got["ds/one/x"].props.get("SubscriptionIdentifier") == [7]
        assert "SubscriptionIdentifier" not in got["ds/two"].props
    expect_nothing(s, 0.3)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_acknowledged_by_connack_survives_an_immediate_kill(broker, version):
    """CONNACK goes out once the new session's record is stored: a kill -9
    the moment it arrives cannot make the broker forget a session it told
    the client about (the next CONNECT would say session present 0)."""
    for i in range(3):
        _raw_persistent(broker, version, f"dur-quick-{i}")
    broker.restart(kill=True)
    assert _recovered(broker)["sessions"] == 3
    for i in range(3):
        _, ack = _raw_persistent(broker, version, f"dur-quick-{i}")
        assert ack.session_present, f"dur-quick-{i} forgotten"


# --------------------------------------------------------------------------
# offline queues
# --------------------------------------------------------------------------
def _queue_offline(b, version, qos, n, cid="dur-queue", topic="dq/t", payload=b"%d"):
    """A persistent subscriber goes offline; n numbered messages are
    published to it, each acknowledged (PUBACK / PUBCOMP). Returns the
    payloads in publish order."""
    s, _ = _persistent(b, version, cid)
    s.subscribe(topic, qos=qos)
    s.disconnect()
    pub = b.client(version, f"{cid}-pub")
    sent = [payload % i for i in range(n)]
    for p in sent:
        pub.publish(topic, p, qos=qos)  # returns once acknowledged
    return sent


def _drain_queue(b, version, sent, qos, cid="dur-queue", timeout=5.0):
    """The subscriber comes back (clean start 0) and gets every queued
    message, in order, at its QoS, once."""
    s, ack = _persistent(b, version, cid)
    assert ack.session_present is True
    got = s.get_n(len(sent), timeout)
    assert [m.payload for m in got] == sent
    assert {m.qos for m in got} == {qos}
    expect_nothing(s, 0.3)  # no duplicates (QoS 2: exactly once)
    return s


@pytest.mark.parametrize("kill", RESTARTS)
@pytest.mark.parametrize("qos", [1, 2], ids=["qos1", "qos2"])
@pytest.mark.parametrize("version", VERSIONS)
def test_queued_messages_survive_restart(broker, version, qos, kill):
    sent = _queue_offline(broker, version, qos, 20)
    broker.restart(kill=kill)
    assert _recovered(broker)["queued"] == len(sent)
    _drain_queue(broker, version, sent, qos)


@pytest.mark.parametrize("fsync", ["always", "batch", "never"])
def test_acknowledged_messages_survive_kill_under_each_fsync_policy(broker_factory, fsync):
    """kill -9 loses nothing flushed, whatever the policy (docs/durability.md)."""
    b = broker_factory({"durability": {"fsync": fsync}})
    sent = _queue_offline(b, 5, 1, 20)
    b.restart(kill=True)
    _drain_queue(b, 5, sent, 1)


def test_queue_recovered_from_snapshot_and_log_tail(broker_factory):
    """With 1 MiB segments, 2.5 MiB of queued messages take the log through
    snapshots while they wait: recovery starts from the newest snapshot,
    replays only the log after it, and still finds every message, including
    those stored before the snapshot."""
    b = broker_factory({"durability": {"segment_bytes": 1 << 20}})
    n = 40
    sent = _queue_offline(b, 5, 1, n, payload=b"%03d" + b"x" * (64 * 1024))
    b.restart(kill=True)
    counts = _recovered(b)
    assert counts["queued"] == n
    assert counts["replayed_records"] < n, counts
    _drain_queue(b, 5, sent, 1)


def test_completed_deliveries_not_resent_after_restart(broker):
    """What the subscriber acknowledged (PUBACK, PUBCOMP) stays delivered."""
    r, _ = _raw_persistent(broker, 5, "dur-done")
    r.subscribe(("dd/t", 2))
    pub = broker.client(5, "dur-done-pub")
    pub.publish("dd/t", b"q1", qos=1)
    pub.publish("dd/t", b"q2", qos=2)
    for expected in (b"q1", b"q2"):
        p = r.expect(R.PUBLISH)
        assert p.payload == expected
        r.ack(p)
    r.ping()  # the broker has read the acks
    r.disconnect()

    broker.restart()
    r, ack = _raw_persistent(broker, 5, "dur-done")
    assert ack.session_present is True
    assert r.collect(0.5) == []


# --------------------------------------------------------------------------
# in-flight outbound exchanges
# --------------------------------------------------------------------------
def _inflight_publish(b, version, cid, qos):
    """A raw persistent subscriber receives one message at `qos` (and does
    not acknowledge it). Returns (raw client, the PUBLISH)."""
    r, _ = _raw_persistent(b, version, cid)
    r.subscribe(("di/t", qos))
    pub = b.client(version, f"{cid}-pub")
    pub.publish("di/t", b"in flight", qos=qos)
    p = r.expect(R.PUBLISH)
    assert (p.topic, p.payload, p.qos, p.dup) == (b"di/t", b"in flight", qos, False)
    return r, p


@pytest.mark.parametrize("kill", RESTARTS)
@pytest.mark.parametrize("version", VERSIONS)
def test_unacknowledged_qos1_resent_after_restart(broker, version, kill):
    _, first = _inflight_publish(broker, version, "dur-infl1", 1)
    broker.restart(kill=kill)

    r, ack = _raw_persistent(broker, version, "dur-infl1")
    assert ack.session_present is True
    again = r.expect(R.PUBLISH)
    assert (again.topic, again.payload, again.qos, again.pid, again.dup) == \
        (b"di/t", b"in flight", 1, first.pid, True)
    r.send(R.encode_puback(again.pid, version=version))
    assert r.collect(0.3) == []


def test_a_shared_delivery_handed_to_another_member_survives_a_kill(broker):
    """A member of a shared subscription leaves with a message unacknowledged;
    it goes to another member, and that hand-off is stored: after a kill -9
    the new member gets it again and the old one does not."""
    a, _ = _raw_persistent(broker, 5, "dur-sh-a")
    a.subscribe(("$share/g/dsh/t", 1))
    broker.client(5, "dur-sh-pub").publish("dsh/t", b"handed", qos=1)
    assert a.expect(R.PUBLISH).payload == b"handed"  # and never acknowledged
    b, _ = _raw_persistent(broker, 5, "dur-sh-b")
    b.subscribe(("$share/g/dsh/t", 1))
    a.abort()
    first = b.expect(R.PUBLISH)
    assert first.payload == b"handed"  # not acknowledged either
    broker.restart(kill=True)

    b, ack = _raw_persistent(broker, 5, "dur-sh-b")
    assert ack.session_present
    again = b.expect(R.PUBLISH)
    assert (again.payload, again.dup) == (b"handed", True)
    b.send(R.encode_puback(again.pid, version=5))
    a, ack = _raw_persistent(broker, 5, "dur-sh-a")
    assert ack.session_present
    assert a.collect(0.3) == [], "the message stayed with the member it was handed to"


@pytest.mark.parametrize("kill", RESTARTS)
@pytest.mark.parametrize("version", VERSIONS)
def test_unreleased_qos2_pubrel_resent_after_restart(broker, version, kill):
    """Once PUBREL is out the message is the client's: after the restart the
    broker resends the PUBREL, never the PUBLISH."""
    r, first = _inflight_publish(broker, version, "dur-infl2", 2)
    r.send(R.encode_pubrec(first.pid, version=version))
    r.await_ack(R.PUBREL, first.pid)  # no PUBCOMP
    broker.restart(kill=kill)

    r, ack = _raw_persistent(broker, version, "dur-infl2")
    assert ack.session_present is True
    rel = r.expect(R.PUBREL)
    assert (rel.pid, rel.flags) == (first.pid, 0x02)
    r.send(R.encode_pubcomp(rel.pid, version=version))
    assert r.collect(0.3) == []


def test_a_completed_qos2_packet_id_is_not_reused_before_its_end_is_stored(broker_factory):
    """A restart starts a session's packet-id count again while deliveries
    stored before it still carry their ids, so a new message can get the id
    of an older one still queued; it then goes out right after the older
    one's PUBCOMP. If that PUBCOMP's `Delivered` record is not stored yet, a
    kill brings the older delivery back as released: the restarted broker
    sends its PUBREL, which releases the new message the client holds under
    the same id, and then resends that message, which the client takes as
    new -- delivered twice. The id must wait for the record. A 1 s batch
    window keeps the record unstored long enough to kill in the gap."""
    b = broker_factory({"durability": {"fsync": "batch", "fsync_batch_ms": 1000}})
    sub, _ = _raw_persistent(b, 5, "dur-reuse-sub")
    sub.subscribe(("dru/t", 2))
    sub.disconnect()  # offline: both messages wait in its queue
    b.client(5, "dur-reuse-pub").publish("dru/t", b"older", qos=2)
    b.restart(kill=True)
    b.client(5, "dur-reuse-pub").publish("dru/t", b"newer", qos=2)

    sub, _ = _raw_persistent(b, 5, "dur-reuse-sub")
    older = sub.expect(R.PUBLISH)
    assert (older.payload, older.dup) == (b"older", True)
    sub.ack(older)  # PUBREC, PUBREL, PUBCOMP
    newer = sub.expect(R.PUBLISH, timeout=5)
    assert newer.payload == b"newer"
    assert newer.pid == older.pid, "the restart started the count of packet ids again"
    sub.send(R.encode_pubrec(newer.pid, version=5))  # then nothing: a kill
    b.restart(kill=True)

    # a receiver holding `newer` under its packet id until PUBREL (method B)
    sub, ack = _raw_persistent(b, 5, "dur-reuse-sub")
    assert ack.session_present
    held, delivered = {newer.pid}, [b"newer"]
    while True:
        try:
            p = sub.read_packet(1.0)
        except TimeoutError:
            break
        if p.type == R.PUBLISH:
            if p.pid not in held:
                delivered.append(p.payload)
                held.add(p.pid)
            sub.send(R.encode_pubrec(p.pid, version=5))
        elif p.type == R.PUBREL:
            held.discard(p.pid)
            sub.send(R.encode_pubcomp(p.pid, version=5))
    assert delivered == [b"newer"], f"delivered {delivered}"


# --------------------------------------------------------------------------
# in-flight inbound QoS 2
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kill", RESTARTS)
@pytest.mark.parametrize("version", VERSIONS)
def test_qos2_inbound_exactly_once_across_restart(broker, version, kill):
    sub, _ = _persistent(broker, version, "dur-in2-sub")
    sub.subscribe("dx/t", qos=2)
    sub.disconnect()
    pid = 0x4242
    r, _ = _raw_persistent(broker, version, "dur-in2-pub")
    r.send(R.encode_publish("dx/t", b"once", qos=2, pid=pid, version=version))
    assert r.await_ack(R.PUBREC, pid).reason == R.RC_SUCCESS  # no PUBREL
    broker.restart(kill=kill)

    r, ack = _raw_persistent(broker, version, "dur-in2-pub")
    assert ack.session_present is True
    # the publisher cannot know the message arrived: it sends it again
    r.send(R.encode_publish("dx/t", b"once", qos=2, dup=True, pid=pid, version=version))
    assert r.await_ack(R.PUBREC, pid).reason == R.RC_SUCCESS
    r.send(R.encode_pubrel(pid, version=version))
    assert r.await_ack(R.PUBCOMP, pid).reason == R.RC_SUCCESS

    sub, ack = _persistent(broker, version, "dur-in2-sub")
    assert ack.session_present is True
    m = sub.get()
    assert (m.topic, m.payload, m.qos) == ("dx/t", b"once", 2)
    expect_nothing(sub)


def test_a_retransmitted_qos2_publish_is_acknowledged_only_once_its_id_is_stored(broker):
    """PUBREC to a PUBLISH sent again on a new connection waits for a record
    of its packet id: the original's may not be stored yet, and a client
    holding PUBREC sends only PUBREL after a crash. With nobody to store the
    message for, the id is stored by the retransmission alone, so a kill
    right after its PUBREC still knows the id (v5 PUBCOMP says so; 3.1.1's
    has no reason code)."""
    pid = 0x4343
    r, _ = _raw_persistent(broker, 5, "dur-re2-pub")
    r.send(R.encode_publish("dre/t", b"x", qos=2, pid=pid, version=5))
    assert r.await_ack(R.PUBREC, pid).reason == 0x10  # no matching subscribers
    r.close()
    r, ack = _raw_persistent(broker, 5, "dur-re2-pub")
    assert ack.session_present is True
    r.send(R.encode_publish("dre/t", b"x", qos=2, dup=True, pid=pid, version=5))
    assert r.await_ack(R.PUBREC, pid).reason == R.RC_SUCCESS
    broker.restart(kill=True)

    r, ack = _raw_persistent(broker, 5, "dur-re2-pub")
    assert ack.session_present is True
    r.send(R.encode_pubrel(pid, version=5))
    assert r.await_ack(R.PUBCOMP, pid).reason == R.RC_SUCCESS


# --------------------------------------------------------------------------
# clocks: session expiry and will delay
# --------------------------------------------------------------------------
def test_expired_session_gone_after_restart(broker):
    """A session whose expiry passes while the broker is down is gone when
    it comes back; one with a long expiry is still there."""
    expiry = 2
    short, _ = _persistent(broker, 5, "dur-exp-short", expiry=expiry)
    short.subscribe("de/t", qos=1)
    long_, _ = _persistent(broker, 5, "dur-exp-long", expiry=300)
    long_.subscribe("de/t", qos=1)
    short.disconnect()
    long_.disconnect()
    expired_at = time.monotonic() + expiry
    assert broker.stop() == 0
    # wall-clock time that has to pass while the broker is down
    time.sleep(max(0.0, expired_at + 0.3 - time.monotonic()))
    broker.start()
    # both were in the durable state (the short one expires as it is restored)
    assert _recovered(broker)["sessions"] == 2

    short, ack = _persistent(broker, 5, "dur-exp-short", expiry=expiry)
    assert ack.session_present is False
    long_, ack = _persistent(broker, 5, "dur-exp-long", expiry=300)
    assert ack.session_present is True
    broker.client(5, "dur-exp-pub").publish("de/t", b"after", qos=1)
    assert long_.get().payload == b"after"
    expect_nothing(short)  # its subscription went with it


def test_session_expiry_clock_runs_from_disconnect_across_restart(broker):
    """The expiry clock runs from the recorded disconnect, not from the
    restart: down for 1 s of a 2 s expiry, the session is gone 2 s after the
    disconnect (a clock restarted at startup would keep it 1 s longer)."""
    expiry, down = 2, 1.0
    c, _ = _persistent(broker, 5, "dur-exp-clock", expiry=expiry)
    c.subscribe("dc/t", qos=1)
    c.disconnect()
    disconnected = time.monotonic()
    assert broker.stop() == 0
    time.sleep(down)  # wall-clock time passing while the broker is down
    broker.start()
    time.sleep(max(0.0, disconnected + expiry + 0.4 - time.monotonic()))

    c, ack = _persistent(broker, 5, "dur-exp-clock", expiry=expiry)
    assert ack.session_present is False


def test_delayed_will_published_after_restart(broker_factory):
    """A will waiting out its delay when the broker stops is published after
    the restart, when what was left of the delay has passed."""
    delay, down = 2, 1.0
    b = broker_factory(extra_args=["--log-level", "debug"])
    r = b.raw(5)
    r.connect("dur-will", props={"SessionExpiryInterval": 60},
              will={"topic": "dw/t", "payload": b"late words", "qos": 1,
                    "props": {"WillDelayInterval": delay, "ContentType": "text/plain"}})
    r.abort()
    aborted = time.monotonic()
    b.wait_log(r"(connection lost|closed by peer).*dur-will")  # the delay runs
    assert b.stop() == 0
    time.sleep(down)  # wall-clock time passing while the broker is down
    b.start()
    started = time.monotonic()
    obs = b.client(5, "dur-will-obs")
    obs.subscribe("dw/t", qos=1)

    m = obs.get(timeout=6)
    assert (m.topic, m.payload, m.qos) == ("dw/t", b"late words", 1)
    assert m.props.get("ContentType") == "text/plain"
    assert m.received_at - aborted >= delay - 0.1, "will published before its delay"
    # what was left of the delay, not the whole delay again from the restart
    due = max(aborted + delay, started)
    assert m.received_at - due < 0.6, \
        f"will came {m.received_at - aborted:.2f}s after the disconnect ({delay}s delay, " \
        f"{started - aborted:.2f}s until the restart)"
    expect_nothing(obs)


# --------------------------------------------------------------------------
# the data directory
# --------------------------------------------------------------------------
def test_second_ferry_on_same_data_dir_refused(broker):
    pub = broker.client(5, "dur-lock-pub")
    pub.publish("dl/t", b"kept", qos=1, retain=True)

    second = subprocess.run(
        [str(ferry_binary()), "serve", "--data-dir", _data_dir(broker),
         "--mqtt", "127.0.0.1:0", "--ws", "", "--http", ""],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        timeout=15)  # killed if it ever ran that long
    err = second.stderr.decode("utf-8", "replace")
    assert second.returncode != 0, err
    assert "in use by another ferry process" in err

    # the first one is unharmed, and so is its durable state
    broker.restart()
    s = broker.client(5, "dur-lock-sub")
    s.subscribe("dl/t", qos=1)
    assert s.get().payload == b"kept"


@pytest.mark.parametrize("version", VERSIONS)
def test_durability_disabled_forgets_everything_on_restart(broker_factory, version):
    b = broker_factory({"durability": {"enabled": False}})
    s, _ = _persistent(b, version, "dur-off")
    s.subscribe("do/t", qos=1)
    s.disconnect()
    pub = b.client(version, "dur-off-pub")
    pub.publish("do/ret", b"retained", qos=1, retain=True)
    pub.publish("do/t", b"queued", qos=1)
    # until the restart, both are there (in memory)
    check = b.client(version, "dur-off-check")
    check.subscribe("do/ret", qos=1)
    assert check.get().payload == b"retained"

    b.restart()
    assert not any("durable state recovered" in line for line in b.log_lines()[b.log_start:])
    s, ack = _persistent(b, version, "dur-off")
    assert ack.session_present is False
    s.subscribe("do/#", qos=1)
    expect_nothing(s)  # neither the queued message nor the retained one
    assert not (Path(_data_dir(b)) / "log").exists(), "durability off wrote a log"


# --------------------------------------------------------------------------
# queues left in the log
# --------------------------------------------------------------------------
def test_a_long_offline_queue_drains_in_order_while_new_messages_arrive(broker_factory):
    """An offline persistent session's messages stay in the log and are read
    back in chunks as it drains. Messages published while it is still
    draining must come after the stored ones, not overtake them."""
    b = broker_factory({"broker": {"max_queued_messages": 10_000}})
    stored = 1_500  # several read-back chunks
    raw, _ = _raw_persistent(b, 5, "dur-long")
    raw.subscribe(("dl/#", 1))
    raw.disconnect()
    pub = b.raw(5)
    pub.connect("dur-long-pub")
    pids = [pub.publish("dl/t", b"old %d" % i, qos=1, wait_ack=False) for i in range(stored)]
    for pid in pids:
        assert pub.await_ack(R.PUBACK, pid).reason == 0

    sub, connack = _raw_persistent(b, 5, "dur-long")
    assert connack.session_present
    got = [p.payload for p in raw_collect_publishes(sub, 100, timeout=10, ack=True)]
    for i in range(50):
        pub.publish("dl/t", b"new %d" % i, qos=1)
    rest = raw_collect_publishes(sub, stored + 50 - len(got), timeout=10, ack=True)
    got += [p.payload for p in rest]
    assert got == [b"old %d" % i for i in range(stored)] + [b"new %d" % i for i in range(50)]


def test_a_message_sent_after_a_stored_ones_ack_is_delivered_after_it(broker):
    """A retained message is stored before it is acknowledged; the next
    message of the same publisher (QoS 0, not stored) is routed as soon as
    it arrives. Its PUBACK must not reach the publisher before the stored
    message is queued for subscribers, or the next message overtakes it
    (the acknowledgements of a batch used to go out before its deliveries
    were queued)."""
    sub = broker.raw()
    sub.connect("order-sub")
    sub.subscribe(("order/t", 0))
    pub = broker.raw()
    pub.connect("order-pub")
    rounds = 200
    for i in range(rounds):
        pub.publish("order/t", b"stored-%d" % i, qos=1, retain=True)
        pub.publish("order/t", b"direct-%d" % i, qos=0)
    got = [p.payload for p in raw_collect_publishes(sub, 2 * rounds)]
    expected = [x for i in range(rounds) for x in (b"stored-%d" % i, b"direct-%d" % i)]
    assert got == expected
