"""Overload protection (issue 5): connection limits and rate, half-open
connections, packet and topic limits, root wildcards, subscriptions per
client, publish rate, slow consumers and the memory watermark. Each test
also checks that a well-behaved client kept working."""

import re
import resource
import selectors
import socket
import time

import pytest

import rawmqtt as R

pytestmark = pytest.mark.ferry_only  # Ferry's [broker] limit keys

CLOSED_BEFORE_CONNACK = "connection closed while waiting for CONNACK"


def leave(r):
    """DISCONNECT, then wait for the broker to close: only then is the
    connection's place given back (it is served on a core apart from the
    accept loop, which admits the next one)."""
    r.send(R.encode_disconnect(version=5))
    r.read_until_closed()
    r.close()


def sys_value(b, name, until=lambda value: True):
    """The value of $SYS/broker/<name> (published every second here) once
    `until` holds for it; the retained copy first, then each new one."""
    r = b.raw()
    r.connect(f"sys-{name.replace('/', '-')}-{time.monotonic_ns()}")
    r.subscribe((f"$SYS/broker/{name}", 0))
    deadline = time.monotonic() + 10
    while not until(value := int(r.expect(R.PUBLISH, timeout=5).payload)):
        assert time.monotonic() < deadline, f"$SYS/broker/{name} stayed {value}"
    leave(r)
    return value


def assert_refused(b, port=None):
    r = R.RawClient(b.host, port or b.port, 5)
    b._clients.append(r)
    with pytest.raises(AssertionError, match=CLOSED_BEFORE_CONNACK):
        r.connect("refused")


def test_connection_limits_of_broker_and_listener(broker_factory):
    b = broker_factory(
        {"broker": {"max_connections": 4, "sys_interval_secs": 1},
         "listener": [{"name": "small", "protocol": "mqtt", "bind": "127.0.0.1:0",
                       "max_connections": 1}]},
        ws=False, http=False,
        wait={"small": re.compile(r"listening on mqtt://(127\.0\.0\.1):(\d+) listener=small\b")})
    small = R.RawClient(b.host, b.ports["small"], 5)
    small.connect("small-1")
    assert_refused(b, b.ports["small"])
    clients = [b.raw() for _ in range(2)]
    for n, c in enumerate(clients):
        c.connect(f"main-{n}")
    # 3 open plus the one refusal being closed: the fourth place is free again
    fourth = b.raw()
    fourth.connect("main-2")
    assert_refused(b)
    for c in (small, *clients):
        c.ping()
    # a place given back is taken again
    leave(fourth)
    assert sys_value(b, "connections/refused", until=lambda n: n >= 2) == 2
    again = b.raw()
    again.connect("main-again")
    assert_refused(b)
    # refusals are logged, at most one line a second
    b.wait_log(r"connection refused: the listener's max_connections")


def test_places_closed_by_their_clients_are_taken_again_at_once(broker_factory):
    """A client that closes its connections (no DISCONNECT) and at once
    opens as many new ones gets them all, as from Mosquitto, which handles
    the closes it saw first (its 01-connect-max-connections): the closes are
    noticed on the cores while the accept loop admits the new ones."""
    b = broker_factory({"broker": {"max_connections": 10}}, ws=False, http=False)
    for round in range(5):
        clients = [b.raw() for _ in range(10)]
        for n, c in enumerate(clients):
            c.connect(f"full-{round}-{n}")
        assert_refused(b)
        for c in clients:
            c.close()
    assert len([b.raw().connect(f"last-{n}") for n in range(10)]) == 10
    assert_refused(b)


def test_new_connection_rate_is_limited(broker_factory):
    b = broker_factory({"broker": {"max_connection_rate": 5}}, ws=False, http=False)
    accepted = refused = 0
    for n in range(15):
        r = b.raw()
        try:
            r.connect(f"rate-{n}")
            accepted += 1
        except AssertionError:
            refused += 1
    # a burst of 5 is allowed, then 5 per second
    assert accepted >= 5 and refused >= 5, (accepted, refused)
    b.wait_log(r"connection refused: max_connection_rate")


def test_half_open_connections_are_closed_and_others_keep_working(broker_factory):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 10_000
    # the broker, started after this, inherits the raised limit too
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted + 1000), hard))
    count = min(wanted, hard - 500)
    try:
        b = broker_factory({"broker": {"connect_timeout_secs": 2}}, ws=False, http=False)
        worker = b.raw()
        worker.connect("worker")
        worker.subscribe(("work/#", 1))
        idle = []
        selector = selectors.DefaultSelector()
        for _ in range(count):
            s = socket.create_connection((b.host, b.port))
            s.setblocking(False)
            selector.register(s, selectors.EVENT_READ)
            idle.append(s)
        # the broker still serves a client while they sit there
        worker.publish("work/1", b"during", qos=1)
        assert worker.expect(R.PUBLISH).payload == b"during"
        open_sockets = set(idle)
        deadline = time.monotonic() + 30
        while open_sockets and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1):
                try:
                    data = key.fileobj.recv(16)
                except ConnectionResetError:
                    data = b""
                if data == b"":
                    selector.unregister(key.fileobj)
                    open_sockets.discard(key.fileobj)
        assert not open_sockets, f"{len(open_sockets)} of {count} idle sockets still open"
        worker.publish("work/2", b"after", qos=1)
        p = worker.expect(R.PUBLISH)
        worker.ack(p)
        assert p.payload == b"after"
    finally:
        for s in idle:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_packet_topic_and_subscription_limits(broker_factory):
    b = broker_factory({"broker": {"max_packet_size_bytes": 1024, "max_topic_levels": 4,
                                   "max_topic_bytes": 64, "min_wildcard_depth": 1,
                                   "max_subscriptions_per_client": 3}},
                       ws=False, http=False)
    bystander = b.raw()
    bystander.connect("bystander")

    v5 = b.raw(5)
    v5.connect("v5")
    deep, long = "a/b/c/d/e", "t/" + "x" * 70
    for topic in (deep, long):
        pid = v5.publish(topic, b"x", qos=1, wait_ack=False)
        assert v5.await_ack(R.PUBACK, pid).reason == 0x90  # Topic Name invalid
    b.wait_log(r"refused: PUBLISH beyond the topic limits")
    suback = v5.subscribe(("a/b/c/d/#", 1), ("#", 1), ("+/status", 1), ("site/#", 1),
                          ("site/+/x", 1), ("one/more", 1), ("too/many", 1),
                          expect_granted=False)
    # too deep, root wildcards, then the fourth filter is one too many
    assert suback.reasons == [0x8F, 0x87, 0x87, 1, 1, 1, 0x97]

    v3 = b.raw(4)
    v3.connect("v3")
    assert v3.subscribe(("#", 1), ("a/b/c/d/e", 1), expect_granted=False).reasons == [0x80, 0x80]
    v3.publish(deep, b"x", qos=0)
    v3.read_until_closed()  # 3.1.1 has no way to refuse a PUBLISH but closing

    big = b.raw(5)
    big.connect("big")
    big.publish("big", b"x" * 2048, qos=0)
    packets = big.read_until_closed()
    assert [p.reason for p in packets if p.type == R.DISCONNECT] == [0x95]
    huge = b.raw(5)
    huge.connect("huge-length")
    huge.send(b"\x30\xff\xff\xff\x7f")  # declares 256 MB
    packets = huge.read_until_closed()
    assert [p.reason for p in packets if p.type == R.DISCONNECT] == [0x95]
    bystander.ping()


def test_a_flooding_publisher_is_limited_and_others_are_not(broker_factory):
    b = broker_factory({"broker": {"max_publish_rate": 50, "sys_interval_secs": 1}},
                       ws=False, http=False)
    normal = b.raw()
    normal.connect("normal")
    normal.subscribe(("normal/#", 1))

    flood = b.raw(5)
    flood.connect("flood-v5")
    pids = [flood.publish("flood/x", b"x", qos=1, wait_ack=False) for _ in range(200)]
    reasons = [flood.await_ack(R.PUBACK, pid).reason for pid in pids]
    # a burst of 50 is taken, then 50 a second: most are refused, with
    # Quota exceeded (MQTT 5 keeps 0x96 for DISCONNECT)
    assert reasons.count(0x97) >= 100, reasons
    assert set(reasons) <= {0x10, 0x97}, reasons
    b.wait_log(r"publisher limited: max_publish_rate")

    slowed = b.raw(4)
    slowed.connect("flood-v311")
    slowed.subscribe(("flood/v311", 0))
    for n in range(120):
        slowed.publish("flood/v311", str(n).encode(), qos=0)
    # 3.1.1 has no refusal: nothing is dropped, the client is slowed down
    got = [int(slowed.expect(R.PUBLISH, timeout=10).payload) for _ in range(120)]
    assert got == list(range(120))
    assert sys_value(b, "publish/throttled", until=lambda n: n > 0) > 0

    normal.publish("normal/t", b"fine", qos=1)
    assert normal.expect(R.PUBLISH).payload == b"fine"


def test_publish_bandwidth_is_limited(broker_factory):
    b = broker_factory({"broker": {"max_publish_bytes_rate": 20_000}}, ws=False, http=False)
    c = b.raw(5)
    c.connect("bandwidth")
    pids = [c.publish("bw/x", b"x" * 1000, qos=1, wait_ack=False) for _ in range(100)]
    reasons = [c.await_ack(R.PUBACK, pid).reason for pid in pids]
    # a second's worth (20 KB) at once, then 20 KB a second: of ~100 KB sent
    # at once, most is refused
    assert reasons.count(0x97) >= 50, reasons
    assert set(reasons) <= {0x10, 0x97}, reasons
    b.wait_log(r"publisher limited: max_publish_bytes_rate")
    c.ping()


def test_a_slow_consumer_is_cut_off_and_memory_stays_bounded(broker_factory):
    b = broker_factory({"broker": {"slow_consumer_timeout_secs": 1, "write_buffer_bytes": 4096,
                                   "max_queued_messages": 100, "sys_interval_secs": 1}},
                       ws=False, http=False)
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect((b.host, b.port))
    slow.sendall(R.encode_connect("slow", R.V5))
    slow.sendall(R.encode_subscribe(1, [("flood/#", 0)], None, R.V5))
    # it never reads again
    bystander = b.raw()
    bystander.connect("bystander")

    def rss():
        with open(f"/proc/{b.proc.pid}/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status
                        if line.startswith("VmRSS:"))

    before = rss()
    publisher = b.raw()
    publisher.connect("publisher")
    payload = b"p" * 1024
    cut_off = r"slow consumer: write buffer full"
    # publish until the broker gives up on it: the kernel's socket buffers
    # take megabytes first, then the write buffer fills, and stays full for
    # slow_consumer_timeout_secs while messages keep coming
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for _ in range(100):
            publisher.publish("flood/data", payload, qos=0)
        publisher.ping()
        if any(re.search(cut_off, line) for line in b.log_lines()):
            break
    b.wait_log(cut_off)
    assert rss() - before < 32 * 1024 * 1024
    assert sys_value(b, "clients/slow_disconnected", until=lambda n: n > 0) == 1
    bystander.subscribe(("flood/#", 0))
    publisher.publish("flood/end", b"end", qos=0)
    assert bystander.expect(R.PUBLISH).payload == b"end"
    slow.close()


def test_above_the_memory_watermark_new_connections_are_refused(broker_factory):
    b = broker_factory({"broker": {"max_memory_bytes": 1}}, ws=False, http=False)
    b.wait_log(r"memory above max_memory_bytes")
    assert_refused(b)
    b.wait_log(r"connection refused: the memory watermark")
