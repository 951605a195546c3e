"""Edge store-and-forward (issue 14): routes into an `mqtt` uplink, with
real upstreams -- a second Ferry and Mosquitto -- that go away (SIGKILL)
and come back, an edge that is itself killed -9 during the outage, TTLs,
disk caps and priorities. Every message the edge acknowledged must arrive
upstream, in order per publisher (redeliveries aside), none after its TTL.

Waiting is on what can be awaited: messages, log lines, `$SYS` figures.
The edge's backoff is capped at 200 ms so that it comes back quickly."""

import getpass
import queue
import re
import time

import pytest

from conftest import MOSQUITTO_BIN, Broker, free_port

pytestmark = pytest.mark.ferry_only

PAYLOAD = 1000  # bytes per message, as in the seed's experiment
FAST_BACKOFF = {"initial": "20ms", "max": "200ms"}


def _edge_config(upstream_port: int, routes: dict | None = None, **endpoint) -> dict:
    return {
        "broker": {"sys_interval_secs": 1},
        "routes": routes or {"telemetry": {"route": "FROM telemetry/# INTO cloud"}},
        "endpoints": {"cloud": {"type": "mqtt", "url": f"mqtt://127.0.0.1:{upstream_port}",
                                "client_id": "edge-1", "backoff": FAST_BACKOFF, **endpoint}},
    }


def _payload(publisher: str, n: int) -> bytes:
    head = f"{publisher}:{n:06d}:".encode()
    return head + b"x" * (PAYLOAD - len(head))


def _sequence(payload: bytes) -> tuple[str, int]:
    publisher, n, _ = payload.split(b":", 2)
    return publisher.decode(), int(n)


class Upstream:
    """A broker the edge forwards to, on a port that stays the same across
    its restarts, with one persistent subscriber collecting telemetry/#."""

    def __init__(self, broker: Broker, port: int):
        self.broker = broker
        self.port = port
        self.received: list[bytes] = []
        self.reader = None

    def subscribe(self):
        self.reader = self.broker.client(5, "cloud-reader", clean=False, connect=False)
        self.reader.connect({"SessionExpiryInterval": 3600})
        self.reader.subscribe("telemetry/#", qos=1)

    def reconnect(self):
        self.reader = self.broker.client(5, "cloud-reader", clean=False, connect=False)
        ack = self.reader.connect({"SessionExpiryInterval": 3600})
        assert ack.session_present, "the upstream kept its subscriber's session"

    def collect(self, expected: set[bytes], timeout: float = 20.0):
        """Receives until every payload of `expected` has arrived."""
        deadline = time.monotonic() + timeout
        while not expected <= set(self.received):
            left = deadline - time.monotonic()
            missing = len(expected - set(self.received))
            assert left > 0, f"{missing} acknowledged messages never arrived upstream"
            try:
                self.received.append(self.reader.messages.get(timeout=left).payload)
            except queue.Empty:
                pass

    def kill(self):
        self.broker.close_clients()
        self.broker.proc.kill()
        self.broker.proc.wait()

    def start(self):
        self.broker.start()


@pytest.fixture
def ferry_upstream(broker_factory):
    """A second Ferry, its MQTT port pinned so the edge finds it again."""
    port = free_port()
    b = broker_factory({"broker": {"sys_interval_secs": 1}})
    b.cmd[b.cmd.index("--mqtt") + 1] = f"127.0.0.1:{port}"
    b.restart()
    up = Upstream(b, port)
    up.subscribe()
    return up


@pytest.fixture
def mosquitto_upstream(tmp_path):
    """Debian's Mosquitto with persistence saved on every change, so that
    its subscriber's session survives SIGKILL as Ferry's does."""
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("\n".join([
        f"listener {port} 127.0.0.1", "allow_anonymous true", "log_dest stderr",
        "log_type all", "persistence true", f"persistence_location {tmp_path}/",
        "autosave_on_changes true", "autosave_interval 1", "max_queued_messages 0",
        # Run as root, Mosquitto would drop to its own user, which cannot
        # write its database in pytest's private directories.
        f"user {getpass.getuser()}", ""]))
    wait = {"ready": re.compile(r"mosquitto version \S+ running")}
    b = Broker("mosquitto", [MOSQUITTO_BIN, "-c", str(conf)], tmp_path, wait)
    b.port = port
    b.start()
    up = Upstream(b, port)
    up.subscribe()
    yield up
    if b.proc.poll() is None:
        b.proc.terminate()
        b.proc.wait(10)


def _publish(edge: Broker, publisher: str, numbers: range) -> set[bytes]:
    """Publishes at QoS 1, one in flight: returns what the edge acknowledged."""
    client = edge.client(5, publisher)
    acknowledged = set()
    for n in numbers:
        payload = _payload(publisher, n)
        assert client.publish("telemetry/" + publisher, payload, qos=1) == 0
        acknowledged.add(payload)
    return acknowledged


def _assert_in_order(received: list[bytes]):
    """Per publisher, each message arrives first after the one published
    before it; an older one arriving again is a redelivery, which
    at-least-once allows."""
    newest: dict[str, int] = {}
    for payload in received:
        publisher, n = _sequence(payload)
        expected = newest.get(publisher, -1) + 1
        if n >= expected:
            assert n == expected, f"{publisher}: message {n} arrived before {expected}"
            newest[publisher] = n


def _await_sys(b: Broker, topic: str, predicate, timeout: float = 10.0) -> str:
    """Waits until the `$SYS` topic's value satisfies predicate; returns it."""
    watcher = b.client(5, "sys-" + topic.replace("/", "-").replace(" ", "-"))
    watcher.subscribe(topic)
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = watcher.get(timeout=deadline - time.monotonic()).payload.decode()
        if predicate(value):
            return value
    raise AssertionError(f"{topic} stayed {value!r}")


def _sys(edge: Broker, name: str, predicate, timeout: float = 10.0) -> str:
    """Waits until `$SYS/broker/routes/cloud/{name}` satisfies predicate."""
    return _await_sys(edge, f"$SYS/broker/routes/cloud/{name}", predicate, timeout)


@pytest.mark.parametrize("upstream_kind", ["ferry_upstream", "mosquitto_upstream"])
def test_nothing_acknowledged_is_lost_through_an_outage_and_a_kill_9(request, broker_factory,
                                                                      upstream_kind):
    upstream = request.getfixturevalue(upstream_kind)
    edge = broker_factory(_edge_config(upstream.port))
    sent = _publish(edge, "p1", range(0, 100))
    upstream.collect(sent)

    upstream.kill()
    sent |= _publish(edge, "p1", range(100, 300))
    sent |= _publish(edge, "p2", range(0, 100))
    edge.restart(kill=True)
    sent |= _publish(edge, "p1", range(300, 400))
    upstream.start()
    upstream.reconnect()
    upstream.collect(sent)
    _assert_in_order(upstream.received)
    assert _sys(edge, "queued/messages", lambda v: v == "0") == "0"


def test_messages_past_their_ttl_are_dropped_not_sent(ferry_upstream, broker_factory):
    routes = {"keep": {"route": "FROM telemetry/keep INTO cloud"},
              "short": {"route": "FROM telemetry/short INTO cloud", "ttl": "1ms"}}
    edge = broker_factory(_edge_config(ferry_upstream.port, routes))
    ferry_upstream.kill()
    device = edge.client(5, "device")
    kept = set()
    for n in range(20):
        device.publish("telemetry/short", b"short-%d" % n, qos=1)
        payload = b"keep-%d" % n
        device.publish("telemetry/keep", payload, qos=1)
        kept.add(payload)
    ferry_upstream.start()
    ferry_upstream.reconnect()
    ferry_upstream.collect(kept)
    assert not [p for p in ferry_upstream.received if p.startswith(b"short")]
    assert _sys(edge, "dropped/ttl", lambda v: v == "20") == "20"


def _backlog(edge: Broker, topic: str, count: int, size: int = PAYLOAD) -> list[bytes]:
    """Publishes `count` messages at QoS 1 without waiting for each
    acknowledgement, then waits for all: returns their payloads, and the
    reason codes of their PUBACKs."""
    client = edge.client(5, "backlog-" + topic.replace("/", "-"))
    payloads = [b"%06d:" % n + b"x" * (size - 7) for n in range(count)]
    infos = [client.c.publish(topic, payload, qos=1) for payload in payloads]
    for info in infos:
        info.wait_for_publish(10)
    return payloads


def test_a_priority_0_message_overtakes_a_priority_9_backlog(ferry_upstream, broker_factory):
    routes = {"bulk": {"route": "FROM telemetry/bulk INTO cloud", "priority": 9},
              "alarm": {"route": "FROM telemetry/alarm INTO cloud", "priority": 0}}
    edge = broker_factory(_edge_config(ferry_upstream.port, routes, batch={"max_messages": 100}))
    ferry_upstream.kill()
    bulk = set(_backlog(edge, "telemetry/bulk", 3000, size=100))
    edge.client(5, "alarm").publish("telemetry/alarm", b"ALARM", qos=1)
    ferry_upstream.start()
    ferry_upstream.reconnect()
    ferry_upstream.collect(bulk | {b"ALARM"})
    assert ferry_upstream.received.index(b"ALARM") < 100, "the alarm came in the first batch"


def test_when_full_reject_refuses_publishes_with_0x97_and_keeps_what_it_took(ferry_upstream,
                                                                               broker_factory):
    edge = broker_factory(_edge_config(ferry_upstream.port, max_bytes="20KiB",
                                       when_full="reject"))
    ferry_upstream.kill()
    device = edge.client(5, "device")
    accepted, refused = [], 0
    for n in range(60):
        payload = _payload("p1", n)
        reason = device.publish("telemetry/p1", payload, qos=1)
        if reason == 0:
            assert refused == 0, "once full, it stays full while the upstream is away"
            accepted.append(payload)
        else:
            assert reason == 0x97
            refused += 1
    assert 10 <= len(accepted) < 60 and refused == 60 - len(accepted)
    assert _sys(edge, "queued/messages", lambda v: v == str(len(accepted))) == str(len(accepted))
    ferry_upstream.start()
    ferry_upstream.reconnect()
    ferry_upstream.collect(set(accepted))
    _assert_in_order(ferry_upstream.received)
    watcher = edge.client(5, "sys-refused")
    watcher.subscribe("$SYS/broker/routes/refused")
    assert watcher.get().payload == str(refused).encode()


def test_when_full_block_withholds_the_puback_until_the_endpoint_has_room(ferry_upstream,
                                                                          broker_factory):
    edge = broker_factory(_edge_config(ferry_upstream.port, max_bytes="20KiB",
                                       when_full="block", block_timeout="60s"))
    ferry_upstream.kill()
    device = edge.client(5, "device")
    sent = [_payload("p1", n) for n in range(40)]
    mids = [device.publish_nowait("telemetry/p1", payload) for payload in sent]
    _await_sys(edge, "$SYS/broker/routes/held", lambda v: v == "1")
    answered = [mid for mid in mids if device.acknowledged(mid) is not None]
    assert 10 <= len(answered) < 40, "the cap holds 10-20 of them; the rest wait unanswered"
    assert all(device.acknowledged(mid) == 0 for mid in answered)
    ferry_upstream.start()
    ferry_upstream.reconnect()
    assert [device.acknowledgement(mid, timeout=30) for mid in mids] == [0] * 40
    ferry_upstream.collect(set(sent))
    _assert_in_order(ferry_upstream.received)
    _await_sys(edge, "$SYS/broker/routes/refused", lambda v: v == "0")


@pytest.mark.parametrize("version", [5, 4])
def test_when_full_block_refuses_after_block_timeout(version, broker_factory):
    edge = broker_factory(_edge_config(free_port(), max_bytes="20KiB", when_full="block",
                                       block_timeout="1s"))
    device = edge.client(version, "device")
    mids = [device.publish_nowait("telemetry/p1", _payload("p1", n)) for n in range(40)]
    if version == 5:
        # Answers come in order: the held publish pauses everything after it.
        answers = []
        for mid in mids:
            answers.append(device.acknowledgement(mid, timeout=10))
            if answers[-1] != 0:
                break
        assert answers[-1] == 0x97 and len(answers) > 10, answers
    else:
        # 3.1.1 has no way to say no: the connection is closed instead.
        device.wait_disconnected(timeout=10)
    _await_sys(edge, "$SYS/broker/routes/refused", lambda v: int(v) >= 1)
    _await_sys(edge, "$SYS/broker/routes/held", lambda v: int(v) >= 1)


def test_when_full_drop_oldest_keeps_the_newest_and_counts_each_drop(ferry_upstream,
                                                                       broker_factory):
    edge = broker_factory(_edge_config(ferry_upstream.port, max_bytes="20KiB",
                                       when_full="drop_oldest"))
    ferry_upstream.kill()
    sent = [payload for payload in sorted(_publish(edge, "p1", range(60)), key=_sequence)]
    # Trimmed to the cap, and no further: 10-20 KiB of 1 KiB messages.
    _sys(edge, "queued/bytes", lambda v: 10 * 1024 < int(v) <= 20 * 1024)
    ferry_upstream.start()
    ferry_upstream.reconnect()
    first = ferry_upstream.reader.get().payload
    kept = sent[sent.index(first):]
    ferry_upstream.received.append(first)
    ferry_upstream.collect(set(kept))
    assert sorted(set(ferry_upstream.received), key=_sequence) == kept, "the newest, all of them"
    dropped = 60 - len(kept)
    assert _sys(edge, "dropped/cap", lambda v: v == str(dropped)) == str(dropped)


def test_metrics_show_the_queue_and_pass_promtool(broker_factory):
    """GET /metrics while the upstream is away: the queue by priority, what
    was routed, and an exposition promtool accepts."""
    import subprocess
    import urllib.request

    edge = broker_factory(_edge_config(free_port()))
    _publish(edge, "p1", range(3))
    with urllib.request.urlopen(f"http://{edge.host}:{edge.http_port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(samples['ferry_route_queued_messages{endpoint="cloud",priority="9"}']) == 3
    assert float(samples['ferry_route_routed_messages_total{endpoint="cloud"}']) == 3
    assert float(samples['ferry_route_endpoint_connected{endpoint="cloud"}']) == 0
    assert float(samples['ferry_route_queued_bytes{endpoint="cloud"}']) > 3 * PAYLOAD



def test_routes_purge_empties_a_queue_while_ferry_is_stopped(broker_factory):
    import subprocess

    from conftest import ferry_binary

    edge = broker_factory(_edge_config(free_port()))
    _publish(edge, "p1", range(5))
    assert edge.stop() == 0
    data_dir = edge.cmd[edge.cmd.index("--data-dir") + 1]

    def routes(*args: str) -> str:
        done = subprocess.run([str(ferry_binary()), "routes", *args, "--data-dir", data_dir],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = routes("list").splitlines()
    assert listed[1].split()[:2] == ["cloud", "5"], listed
    assert routes("purge", "cloud").strip() == 'endpoint "cloud": 5 messages purged'
    assert routes("list").splitlines()[1:] == []
    edge.start()
    assert _sys(edge, "queued/messages", lambda v: v == "0") == "0"


def test_a_removed_endpoint_keeps_its_queue_until_its_messages_expire(broker_factory):
    from conftest import to_toml
    from helpers import post_reload

    routes = {"short": {"route": "FROM telemetry/# INTO cloud", "ttl": "1ms"}}
    edge = broker_factory(_edge_config(free_port(), routes))
    _publish(edge, "p1", range(5))
    (edge.workdir / "ferry.toml").write_text(to_toml({"broker": {"sys_interval_secs": 1}}))
    status, body = post_reload(edge)
    assert status == 200 and body["loaded"]["endpoints"] == 0, body
    assert _sys(edge, "configured", lambda v: v == "0") == "0"
    assert _sys(edge, "dropped/ttl", lambda v: v == "5") == "5"
    assert _sys(edge, "queued/messages", lambda v: v == "0") == "0"


def test_commands_from_the_cloud_reach_local_devices(ferry_upstream, broker_factory):
    edge = broker_factory(_edge_config(
        ferry_upstream.port,
        subscribe=[{"remote": "commands/edge-1/#", "local": "commands/#", "qos": 1}]))
    device = edge.client(5, "valve-3")
    device.subscribe("commands/#", qos=1)
    # The uplink subscribes once connected; the edge's own telemetry
    # arriving upstream shows that it is.
    ferry_upstream.collect(_publish(edge, "p1", range(1)))
    operator = ferry_upstream.broker.client(5, "operator")
    operator.publish("commands/edge-1/valve/3", b"close", qos=1,
                     props={"UserProperty": [("by", "operator")]})
    m = device.get()
    assert (m.topic, m.payload, m.qos) == ("commands/valve/3", b"close", 1)
    assert ("by", "operator") in m.props["UserProperty"]


def test_max_rate_paces_the_drain_of_a_backlog(ferry_upstream, broker_factory):
    """500 messages at max_rate 1,000/s in batches of 50: after the first
    batch, each waits its share, so the drain takes at least 0.45 s (a
    lower bound only: a rate limit can only make it slower)."""
    edge = broker_factory(_edge_config(ferry_upstream.port, max_rate=1000,
                                       batch={"max_messages": 50}))
    ferry_upstream.kill()
    sent = set(_backlog(edge, "telemetry/bulk", 500, size=100))
    ferry_upstream.start()
    ferry_upstream.reconnect()
    first = ferry_upstream.reader.get(timeout=20).payload
    started = time.monotonic()
    ferry_upstream.received.append(first)
    ferry_upstream.collect(sent)
    assert time.monotonic() - started >= 0.45 - 0.05


ENVELOPE = "application/vnd.ferry.batch"


def test_batch_envelopes_go_up_as_one_publish_and_arrive_unpacked(ferry_upstream, broker_factory):
    """With envelope_topic, a batch crosses as few PUBLISH packets; the
    receiving Ferry delivers its messages one by one, in order, and never
    the envelope itself."""
    edge = broker_factory(_edge_config(ferry_upstream.port, envelope_topic="edge-1/batch"))
    ferry_upstream.kill()
    sent = _publish(edge, "p1", range(50))
    ferry_upstream.start()
    ferry_upstream.reconnect()
    ferry_upstream.collect(sent)
    _assert_in_order(ferry_upstream.received)
    # Since its restart the upstream received PUBLISH packets from the edge
    # alone: 50 messages of 1 KB fit one envelope.
    received = _await_sys(ferry_upstream.broker, "$SYS/broker/publish/messages/received",
                          lambda v: v != "0")
    assert received == "1"
    envelopes = ferry_upstream.broker.client(5, "envelope-watch-2")
    envelopes.subscribe("edge-1/#", qos=1)
    ferry_upstream.broker.client(5, "marker").publish("edge-1/marker", b"m", qos=1)
    assert envelopes.get().topic == "edge-1/marker", "the envelope itself is not delivered"


def test_an_envelope_from_any_client_is_unpacked_checked_and_acknowledged_whole(broker):
    import rawmqtt as R

    reader = broker.client(5, "reader")
    reader.subscribe("in/#", qos=1)
    inner = b"".join(R.encode_publish(f"in/{n}", b"m%d" % n, retain=False) for n in range(3))
    r = broker.raw(5)
    r.connect("packer")
    r.send(R.encode_publish("up/batch", inner, qos=1, pid=1, props={"ContentType": ENVELOPE}))
    assert r.await_ack(R.PUBACK, 1).reason == R.RC_SUCCESS
    got = reader.get_n(3)
    assert [(m.topic, m.payload, m.qos) for m in got] == [
        ("in/0", b"m0", 1), ("in/1", b"m1", 1), ("in/2", b"m2", 1)]

    r.send(R.encode_publish("up/batch", inner[:-1], qos=1, pid=2, props={"ContentType": ENVELOPE}))
    assert r.await_ack(R.PUBACK, 2).reason == 0x99, "cut short: refused whole"
    r.send(R.encode_publish("up/batch", R.encode_publish("in/x", b"q1", qos=1, pid=9), qos=1,
                            pid=3, props={"ContentType": ENVELOPE}))
    assert r.await_ack(R.PUBACK, 3).reason == 0x99, "messages inside are QoS 0"
    r.send(R.encode_publish("in/after", b"after", qos=1, pid=4))
    assert r.await_ack(R.PUBACK, 4).reason == R.RC_SUCCESS
    assert reader.get().payload == b"after", "nothing of the refused envelopes was published"
