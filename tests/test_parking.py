"""Idle connections park (issue 13): a plain-TCP connection with nothing to
do gives its task up and waits in its core's parking lot, and everything
that concerns it still reaches it there: input on its socket, messages for
its session, a takeover, its keep-alive running out, shutdown.

`ferry_clients_parked` says how many are parked; each step first waits for
the connections involved to be parked, so that what follows is handled by
a parked connection, not a running one."""

import time

import rawmqtt
from test_metrics import scrape, value, wait_for

SESSION_TAKEN_OVER = 0x8E
KEEP_ALIVE_TIMEOUT = 0x8D
SERVER_SHUTTING_DOWN = 0x8B


def all_parked(b, connected: int):
    return all_parked_but(b, connected, running=0)


def all_parked_but(b, connected: int, running: int = 1):
    return wait_for(b, lambda s: value(s, "ferry_clients_connected") == connected
                    and value(s, "ferry_clients_parked") == connected - running,
                    f"{connected - running} of {connected} connections parked")


def test_a_parked_connection_is_woken_by_everything_that_concerns_it(broker_factory):
    b = broker_factory({"broker": {"sys_interval_secs": 0}})
    sub = b.client(5, "park-sub")
    sub.subscribe("park/#", qos=1)
    pub = b.client(5, "park-pub")
    v3 = b.client(4, "park-v3")
    v3.subscribe("park/v3", qos=2)
    # Parked at once after the CONNACK, or by the sweeper a second after
    # their SUBSCRIBE.
    all_parked(b, 3)

    # Input on a parked socket, and a message for a parked session.
    for i in range(3):
        assert pub.publish("park/x", f"m{i}".encode(), qos=1) == 0
        assert sub.get().payload == f"m{i}".encode()
        all_parked(b, 3)
    assert pub.publish("park/v3", b"exactly once", qos=2) == 0
    got = v3.get()
    assert (got.payload, got.qos) == (b"exactly once", 2)
    all_parked(b, 3)

    # A takeover of a parked session: the old connection hears why.
    again = b.client(5, "park-sub")
    assert sub.wait_disconnected() == SESSION_TAKEN_OVER
    again.subscribe("park/#", qos=1)
    all_parked(b, 3)
    assert pub.publish("park/y", b"to the new one", qos=1) == 0
    assert again.get().payload == b"to the new one"

    # A parked client that stays silent past its keep-alive is cut off,
    # and its will goes out.
    silent = rawmqtt.RawClient(b.host, b.port, 5, timeout=5.0)
    silent.connect("park-silent", keepalive=1, will={"topic": "park/will", "payload": b"gone", "qos": 1})
    will = again.get(timeout=5.0)
    assert will.topic == "park/will" and will.payload == b"gone"
    closed = silent.read_until_closed()
    assert [p.reason for p in closed if p.name == "DISCONNECT"] == [KEEP_ALIVE_TIMEOUT]
    all_parked(b, 3)

    # Shutdown resumes every parked connection to say goodbye.
    started = time.monotonic()
    b.stop(close_clients=False)
    assert time.monotonic() - started < 5, "shutdown waited on parked connections"
    for client in (again, pub):
        assert client.wait_disconnected() == SERVER_SHUTTING_DOWN


def test_a_connection_half_way_through_a_packet_is_not_parked(broker_factory):
    b = broker_factory({"broker": {"sys_interval_secs": 0}})
    other = b.client(5, "park-other")
    other.subscribe("a/#", qos=0)
    half = rawmqtt.RawClient(b.host, b.port, 5, timeout=5.0)
    half.connect("park-half")
    # A PUBLISH header announcing 32 bytes, and 2 of them.
    half.send(b"\x30\x20\x00\x03")
    # The sweeper asks every connection silent for a second to park, four
    # times a second: over two seconds the half-read one keeps declining
    # while the other stays parked.
    watched_until = time.monotonic() + 2.0
    while time.monotonic() < watched_until:
        samples = scrape(b)
        assert value(samples, "ferry_clients_connected") == 2
        assert value(samples, "ferry_clients_parked") <= 1
    all_parked_but(b, 2)
    # The rest of the packet completes the one begun.
    half.send(b"a/b" + b"\x00" + b"y" * 26)
    got = other.get()
    assert (got.topic, got.payload) == ("a/b", b"y" * 26)
