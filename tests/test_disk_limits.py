"""Disk limits of the durable state (issue 4).

Past `[durability] max_disk_bytes` (or below `min_free_disk_bytes`) Ferry
refuses the messages that must be stored: MQTT 5 publishers get PUBACK/PUBREC
0x97 Quota exceeded, 3.1.1 publishers (whose acknowledgements carry no
reason) have their connection closed. Traffic that needs no storage keeps
flowing, and once consumers free space the broker takes messages again.
"""

import time

import pytest

import rawmqtt
from helpers import raw_collect_publishes

pytestmark = pytest.mark.ferry_only  # Ferry's durability and its config keys

SEGMENT = 1 << 20
CONFIG = {
    # fsync never: the limit, not the disk, is under test, and filling 4 MiB
    # one synced acknowledgement at a time would be slow.
    "durability": {"fsync": "never", "segment_bytes": SEGMENT, "max_disk_bytes": 4 * SEGMENT},
    "broker": {"max_queued_messages": 100_000, "sys_interval_secs": 1},
}
PAYLOAD = b"x" * 1024
QUOTA_EXCEEDED = 0x97
WINDOW = 50  # publishes in flight while filling, under the receive maximum


def offline_subscriber(broker, client_id: str) -> None:
    """A persistent session subscribed to disk/# that then goes offline, so
    every message on disk/# must be stored for it."""
    sub = broker.raw(5)
    sub.connect(client_id, clean=True, props={"SessionExpiryInterval": 3600})
    sub.subscribe(("disk/#", 1))
    sub.disconnect()


def fill_until_refused(pub: rawmqtt.RawClient, limit: int = 20_000) -> int:
    """Publishes 1 KiB QoS 1 messages, WINDOW at a time, until one is
    refused with 0x97; returns how many were taken before."""
    taken = 0
    while taken < limit:
        pids = [pub.publish("disk/data", PAYLOAD, qos=1, wait_ack=False) for _ in range(WINDOW)]
        reasons = [pub.await_ack(rawmqtt.PUBACK, pid).reason for pid in pids]
        for reason in reasons:
            if reason == QUOTA_EXCEEDED:
                return taken
            assert reason == 0, f"unexpected PUBACK reason {reason:#x}"
            taken += 1
    raise AssertionError(f"{limit} KiB taken under a {CONFIG['durability']['max_disk_bytes']}-byte cap")


def sys_value(broker, name: str, want, timeout: float = 5.0) -> str:
    """Waits until $SYS/broker/{name} satisfies want(value)."""
    watcher = broker.client(5)
    watcher.subscribe(f"$SYS/broker/{name}")
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = watcher.get(timeout=max(0.1, deadline - time.monotonic())).payload.decode()
        if want(seen):
            return seen
    raise AssertionError(f"$SYS/broker/{name} stayed {seen!r}")


def test_a_full_store_refuses_with_quota_exceeded_serves_the_rest_and_recovers(broker_factory):
    broker = broker_factory(CONFIG)
    offline_subscriber(broker, "disk-sub")
    pub = broker.raw(5)
    pub.connect("disk-pub")

    taken = fill_until_refused(pub)
    # 4 MiB of 1 KiB messages, less what the active segment and headers hold.
    assert 2_000 <= taken <= 4_200, taken
    sys_value(broker, "store/full", lambda v: v == "1")
    sys_value(broker, "store/refused", lambda v: int(v) >= 1)

    # What needs no storage still flows: a clean subscriber, QoS 0 and QoS 1.
    live = broker.raw(5)
    live.connect("disk-live")
    live.subscribe(("live/#", 1))
    pub.publish("live/a", b"still here", qos=1)
    pub.publish("live/b", b"and here", qos=0)
    assert [p.payload for p in raw_collect_publishes(live, 2, ack=True)] == [b"still here", b"and here"]

    # The offline subscriber drains what was stored; the space comes back.
    sub = broker.raw(5)
    connack = sub.connect("disk-sub", clean=False, props={"SessionExpiryInterval": 3600})
    assert connack.session_present
    drained = raw_collect_publishes(sub, taken, timeout=30, ack=True)
    assert len(drained) == taken
    deadline = time.monotonic() + 10
    while True:
        pid = pub.publish("disk/data", b"room again", qos=1, wait_ack=False)
        reason = pub.await_ack(rawmqtt.PUBACK, pid).reason
        if reason == 0:
            break
        assert reason == QUOTA_EXCEEDED, f"{reason:#x}"
        assert time.monotonic() < deadline, "the store never had room again after the drain"
        time.sleep(0.1)  # the snapshot that frees segments runs at most once a second
    assert raw_collect_publishes(sub, 1, ack=True)[0].payload == b"room again"
    sys_value(broker, "store/full", lambda v: v == "0")


def test_a_full_store_closes_a_v311_publisher_it_cannot_tell(broker_factory):
    broker = broker_factory(CONFIG)
    offline_subscriber(broker, "disk-sub")
    filler = broker.raw(5)
    filler.connect("disk-filler")
    fill_until_refused(filler)

    old = broker.raw(4)
    old.connect("disk-v311")
    pid = old.publish("disk/data", b"no room", qos=1, wait_ack=False)
    packets = old.read_until_closed()
    assert not any(p.type == rawmqtt.PUBACK and p.pid == pid for p in packets), packets
