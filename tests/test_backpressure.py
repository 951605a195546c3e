"""Back-pressure: a publisher faster than its subscriber is slowed down,
not answered with dropped messages; a subscriber that stops reading does
not stall publishers for ever."""

import socket
import subprocess
import threading

import pytest

from helpers import TIMEOUT

COUNT = 20_000


@pytest.mark.ferry_only
def test_fast_publisher_loses_nothing_to_a_subscriber_that_keeps_reading(broker_factory):
    # A queue bound far below the burst: without back-pressure the burst
    # would overflow it and most messages would be dropped.
    b = broker_factory({"broker": {"max_queued_messages": 100}})
    sub = subprocess.Popen(
        ["stdbuf", "-oL", "mosquitto_sub", "-h", b.host, "-p", str(b.port), "-t", "bp/#",
         "-q", "0", "-C", str(COUNT), "-W", "60", "-d", "-i", "bp-sub"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    subscribed = threading.Event()
    received = []

    def read():
        for line in sub.stdout:
            line = line.rstrip("\n")
            if "received SUBACK" in line:
                subscribed.set()
            elif line.isdigit():
                received.append(int(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert subscribed.wait(TIMEOUT), "mosquitto_sub never subscribed"
    lines = "".join(f"{i}\n" for i in range(COUNT))
    subprocess.run(["mosquitto_pub", "-h", b.host, "-p", str(b.port), "-t", "bp/t", "-q", "0",
                    "-l", "-i", "bp-pub"], input=lines, text=True, check=True, timeout=60)
    assert sub.wait(70) == 0, "mosquitto_sub did not receive every message"
    reader.join(5)
    assert received == list(range(COUNT)), (
        f"received {len(received)} of {COUNT} in order")


def test_subscriber_that_stops_reading_does_not_stall_publishers_for_ever(broker_factory):
    b = broker_factory({"broker": {"max_queued_messages": 100}})
    stuck = b.raw(5)
    stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect("bp-stuck")
    stuck.subscribe(("bp/flood", 0))
    # From here on `stuck` never reads: its socket and queue fill up.

    publisher = b.client(5, "bp-flood-pub")
    payload = b"x" * 1024
    for _ in range(20_000):
        publisher.publish("bp/flood", payload, qos=0)
    # The publisher waits for the stuck subscriber for a bounded time, then
    # goes on: its QoS 1 publish is acknowledged.
    publisher.publish("bp/after", b"done", qos=1, timeout=15)

    # Everyone else kept working all along.
    listener = b.client(5, "bp-listener")
    listener.subscribe("bp/other", qos=1)
    b.client(5, "bp-other-pub").publish("bp/other", b"hello", qos=1)
    assert listener.get().payload == b"hello"
