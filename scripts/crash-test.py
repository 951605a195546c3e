#!/usr/bin/env python3
"""Crash test for Ferry's durability: kill -9 the broker again and again
while it carries QoS 1 and QoS 2 traffic, then check that nothing it
acknowledged was lost or, for QoS 2, delivered twice.

The contract (issue 4): publishers send numbered QoS 1 and QoS 2 messages
to persistent-session subscribers (some connected, some offline) while the
broker is killed with SIGKILL at random moments and restarted on the same
data directory. Afterwards every message whose PUBACK/PUBREC the publisher
received has reached every subscriber, QoS 2 messages exactly once (for QoS
2 subscriptions), and the retained messages and subscriptions are intact.

Structure: one thread per MQTT client (`Publisher`, `Subscriber`), each
with its own raw socket from tests/rawmqtt.py and its own session state,
which survives reconnects the way a real client library keeps it. Beside
them run paho-mqtt clients (`PahoPublisher`, `PahoSubscriber`), the library
applications use, with its own session state: clean session 0 (3.1.1) or
clean start 0 after the first connect with a session expiry (5.0), its own
reconnect loop (about a second after a connection is lost, so their
sessions build a backlog while the raw publishers go on), outgoing QoS 2
messages resent as PUBLISH with DUP or as PUBREL after a reconnect, and
incoming QoS 2 messages held by packet id until their PUBREL, when they are
handed to the application (figure 4.3's method A). The main thread
(`CrashTest`) owns the broker process: it kills and restarts it, waits for
the clients to come back, then drains and checks. All the bookkeeping the
checks need lives in `Ledger`, behind one condition variable.

Usage:
  .venv/bin/python scripts/crash-test.py [--kills 20] [--seed S]
      [--fsync always|batch|never] [--ferry PATH] [--data-dir DIR] [--keep]
      [--rate MSGS_PER_S] [--paho-rate MSGS_PER_S] [--no-paho]

Exit status: 0 when every check passed, 1 when one failed (the lost or
duplicated message ids are printed), 2 on a usage error. The seed fixes the
kill times and the QoS mix; thread scheduling still varies between runs.
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import rawmqtt  # noqa: E402  (needs tests/ on sys.path)
from rawmqtt import (  # noqa: E402
    CONNACK, DISCONNECT, PUBACK, PUBCOMP, PUBLISH, PUBREC, PUBREL, SUBACK, V5, V311)

HOST = "127.0.0.1"
SESSION_EXPIRY = 3600
# Unacknowledged publishes per publisher: well under the broker's receive
# maximum (100), so a burst of retransmissions after a restart is never
# refused with 0x93.
WINDOW = 10
RETAINED = 3

STARTUP_TIMEOUT = 30.0  # recovery replays the log, give it time
CONNECT_TIMEOUT = 5.0
RECONNECT_TIMEOUT = 15.0  # all clients back after a restart
SETTLE_TIMEOUT = 20.0  # publishers' last in-flight messages acknowledged
DRAIN_TIMEOUT = 60.0  # overall bound on the final delivery wait ...
DRAIN_STALL = 5.0  # ... which also ends once nothing has arrived for this long
FINAL_TIMEOUT = 5.0  # the retained and subscription checks
SHUTDOWN_TIMEOUT = 10.0
POLL = 0.1  # socket read timeout: how often client threads look at their flags
SHOW = 20  # message ids printed per failure

DATA_FILTER = "crash/data/#"
FINAL_TOPIC = "crash/data/final"
FINAL_PAYLOAD = b"final"

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# (client id, protocol version); the topic is crash/data/p{index}
PUBLISHERS = [("crash-pub-0", V5), ("crash-pub-1", V311)]
# the same for paho-mqtt clients, numbered after the raw ones
PAHO_PUBLISHERS = [("crash-paho-pub-v5", V5), ("crash-paho-pub-v311", V311)]
# paho subscribers: (client id, protocol version), QoS 2, online during the kills
PAHO_SUBSCRIBERS = [("crash-paho-sub-v5-q2", V5), ("crash-paho-sub-v311-q2", V311)]
# paho's reconnect delay (min and max, seconds): its default minimum
PAHO_RECONNECT_DELAY = 1
# (client id, protocol version, subscription QoS, online during the kills)
SUBSCRIBERS = [
    ("crash-sub-online-v5-q2", V5, 2, True),
    ("crash-sub-online-v311-q2", V311, 2, True),
    ("crash-sub-online-v5-q1", V5, 1, True),
    ("crash-sub-offline-v5-q2", V5, 2, False),
    ("crash-sub-offline-v311-q2", V311, 2, False),
]

Key = tuple[int, int]  # (publisher index, sequence number)


def config_toml(fsync: str) -> str:
    return (
        "[broker]\n"
        "# The offline subscribers hold the whole run in their queues; the\n"
        "# default bound (1000, drop oldest) would drop messages by design,\n"
        "# which is not what this test is about.\n"
        "max_queued_messages = 1000000\n"
        "\n"
        "[durability]\n"
        f'fsync = "{fsync}"\n'
    )


def payload_of(key: Key, qos: int) -> bytes:
    return f"p{key[0]}:{key[1]}:q{qos}".encode()


def parse_payload(payload: bytes) -> tuple[Key, int]:
    """Inverse of payload_of; ValueError on anything else."""
    p, seq, q = payload.decode().split(":")
    if not (p.startswith("p") and q.startswith("q")):
        raise ValueError(payload)
    return (int(p[1:]), int(seq)), int(q[1:])


def show_keys(keys) -> str:
    """Message ids as ranges of consecutive sequence numbers (p0#5-9 p1#3),
    at most SHOW of them."""
    runs: list[list[int]] = []  # [publisher, first, last]
    for pub, seq in sorted(keys):
        if runs and runs[-1][0] == pub and runs[-1][2] == seq - 1:
            runs[-1][2] = seq
        else:
            runs.append([pub, seq, seq])
    shown = [f"p{p}#{a}" if a == b else f"p{p}#{a}-{b}" for p, a, b in runs[:SHOW]]
    more = f" ... (+{len(runs) - SHOW} more)" if len(runs) > SHOW else ""
    return " ".join(shown) + more


def show_counts(counts: dict[Key, int]) -> str:
    """Message ids with how often each arrived (p0#5x2), at most SHOW."""
    shown = [f"p{p}#{seq}x{counts[(p, seq)]}" for p, seq in sorted(counts)[:SHOW]]
    more = f" ... (+{len(counts) - SHOW} more)" if len(counts) > SHOW else ""
    return " ".join(shown) + more


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------
# the broker process
# --------------------------------------------------------------------------
class BrokerError(Exception):
    """The broker did not start, or did not stop cleanly."""


class Broker:
    """One ferry process at a time on a fixed port and data directory.

    `up` is clear from just before a kill until the restarted process
    listens, so a client that lost its connection knows to wait rather
    than hammer a closed port."""

    def __init__(self, binary: Path, port: int, data_dir: Path, config: Path):
        self.cmd = [str(binary), "serve", "--mqtt", f"{HOST}:{port}", "--ws", "", "--http", "",
                    "--data-dir", str(data_dir), "--config", str(config)]
        self.ready_re = re.compile(rf"listening on mqtt://{re.escape(HOST)}:{port}\b")
        self.proc: subprocess.Popen | None = None
        self.up = threading.Event()
        self.generation = 0  # how many times a process was started
        self._log: collections.deque[str] = collections.deque(maxlen=200)  # all processes
        self._log_lock = threading.Lock()

    def start(self) -> None:
        self.generation += 1
        self._remember(f"----- crash-test: start #{self.generation} -----")
        lines: list[str] = []  # this process's own output, for a startup failure
        ready = threading.Event()  # set on the listening line, or on EOF
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        threading.Thread(target=self._read_stderr, args=(self.proc, lines, ready),
                         daemon=True).start()
        ready.wait(STARTUP_TIMEOUT)
        if not any(self.ready_re.search(line) for line in lines):
            if self.proc.poll() is None:
                self.proc.kill()
                why = f"did not report listening within {STARTUP_TIMEOUT:.0f}s"
            else:
                why = f"exited with status {self.proc.returncode}"
            self.proc.wait()
            raise BrokerError(f"ferry start #{self.generation} {why}\n"
                              f"command: {' '.join(self.cmd)}\n" + "\n".join(lines[:10]))
        self.up.set()

    def _read_stderr(self, proc: subprocess.Popen, lines: list[str], ready: threading.Event):
        for raw in proc.stderr:
            line = ANSI.sub("", raw.decode("utf-8", "replace")).rstrip()
            lines.append(line)
            self._remember(line)
            if self.ready_re.search(line):
                ready.set()
        ready.set()

    def _remember(self, line: str) -> None:
        with self._log_lock:
            self._log.append(line)

    def log_tail(self, n: int) -> list[str]:
        with self._log_lock:
            return list(self._log)[-n:]

    def kill(self) -> None:
        self.up.clear()  # before the kill, so every client error it causes sees it clear
        self.proc.kill()
        self.proc.wait()

    def terminate(self) -> int:
        """SIGTERM; the exit status (raises BrokerError if it hangs)."""
        self.up.clear()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(SHUTDOWN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BrokerError(
                f"ferry did not exit within {SHUTDOWN_TIMEOUT:.0f}s of SIGTERM") from None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# --------------------------------------------------------------------------
# what happened
# --------------------------------------------------------------------------
class Ledger:
    """Shared record of what the publishers had acknowledged and what each
    subscriber's application received. `cond` guards everything here and
    in the clients' `received`/`generation` fields, and is notified when a
    client reconnects or a subscriber has nothing left to wait for."""

    def __init__(self):
        self.cond = threading.Condition()
        self.published: dict[Key, int] = {}  # key -> QoS it was published with
        self.acked: set[Key] = set()
        self.refused: dict[Key, int] = {}  # key -> failure reason code
        self.violations: list[str] = []  # protocol oddities seen by clients: reported at the end
        self.crashes: list[str] = []  # client threads that died: the run cannot go on
        self.last_delivery = time.monotonic()

    def violation(self, text: str) -> None:
        with self.cond:
            self.violations.append(text)

    def crash(self, text: str) -> None:
        with self.cond:
            self.crashes.append(text)
            self.cond.notify_all()


class Disconnected(Exception):
    """The connection is gone (broker killed, connection refused, ...)."""


@dataclass
class Outgoing:
    key: Key
    qos: int
    released: bool = False  # QoS 2: PUBREC received, PUBREL sent


class SessionThread(threading.Thread):
    """What every client thread of the test keeps: who it is, where the
    broker is, the shared ledger, and how its persistent session fared."""

    def __init__(self, client_id: str, version: int, broker: Broker, port: int, ledger: Ledger,
                 shutdown: threading.Event):
        super().__init__(name=client_id, daemon=True)
        self.client_id = client_id
        self.version = version
        self.broker = broker
        self.port = port
        self.ledger = ledger
        self.shutdown = shutdown
        self.has_session = False  # once a connect created the broker-side session
        self.generation = 0  # broker generation of the last successful connect
        self.connects = 0
        self.sessions_lost = 0  # reconnects that found no session (session present = 0)
        self.last_error = ""

    def count_delivery(self, topic: str, payload: bytes, dup: bool = False) -> None:
        """A subscriber's delivery: the final marker, or one more arrival of
        a message (`dup`: its PUBLISH had DUP set), which may complete the
        messages the test is waiting for."""
        if topic == FINAL_TOPIC and payload == FINAL_PAYLOAD:
            with self.ledger.cond:
                self.saw_final = True
                self.ledger.cond.notify_all()
            return
        try:
            key, _ = parse_payload(payload)
        except ValueError:
            self.ledger.violation(f"{self.label}: unexpected message {topic} {payload!r}")
            return
        with self.ledger.cond:
            self.retransmissions += int(dup)
            self.received[key] += 1
            self.ledger.last_delivery = time.monotonic()
            if self.outstanding:
                self.outstanding.discard(key)
                if not self.outstanding:
                    self.ledger.cond.notify_all()


class Client(SessionThread):
    """A client thread with a persistent session: it reconnects with clean
    start 0 whenever the connection is lost, until `finished()` or
    `shutdown`, then disconnects normally."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.conn: rawmqtt.RawClient | None = None

    @property
    def label(self) -> str:
        return f"{self.client_id} (MQTT {'5' if self.version == V5 else '3.1.1'})"

    # ----------------------------------------------------------- overridden
    def finished(self) -> bool:
        return False

    def resume(self, session_present: bool) -> None:
        """Called after every CONNACK."""

    def exchange(self) -> None:
        """Talks to the broker until finished(); raises Disconnected."""
        raise NotImplementedError

    # ------------------------------------------------------------ the loop
    def run(self) -> None:
        try:
            while not self.done():
                if not self.broker.up.wait(POLL):
                    continue
                try:
                    present = self.connect()
                    self.resume(present)
                    self.exchange()
                    self.send(rawmqtt.encode_disconnect(version=self.version))
                except Disconnected as e:
                    self.last_error = str(e)
                    # refused or dropped while the broker claims to be up:
                    # probably killed a moment ago, `up` clears very soon
                    self.shutdown.wait(0.05)
                finally:
                    self.close()
        except Exception:
            self.ledger.crash(f"{self.label} crashed:\n{traceback.format_exc()}")

    def done(self) -> bool:
        return self.finished() or self.shutdown.is_set()

    def connect(self) -> bool:
        """Connects; returns the CONNACK's session present flag."""
        # The first connect starts the session: clean start 1 in MQTT 5 (the
        # expiry interval keeps the session beyond the connection). A 3.1.1
        # clean session ends with its connection, so 3.1.1 clients always
        # use 0: the data directory starts empty, nothing stale can exist.
        clean = self.version == V5 and not self.has_session
        try:
            self.conn = rawmqtt.RawClient(HOST, self.port, self.version, CONNECT_TIMEOUT)
        except OSError as e:
            raise Disconnected(f"connect: {e}") from None
        props = {"SessionExpiryInterval": SESSION_EXPIRY} if self.version == V5 else None
        # keep-alive 0: a subscriber may legitimately sit idle for a while
        self.send(rawmqtt.encode_connect(self.client_id, self.version, clean, keepalive=0,
                                         props=props))
        ack = self.read(CONNECT_TIMEOUT)
        if ack is None:
            raise Disconnected("no CONNACK")
        if ack.type != CONNACK:
            raise Disconnected(f"expected CONNACK, got {ack!r}")
        if ack.reason != 0:
            raise Disconnected(f"CONNACK refused: 0x{ack.reason:02x}")
        if self.has_session and not ack.session_present:
            self.sessions_lost += 1
        self.has_session = True
        self.connects += 1
        with self.ledger.cond:
            # read after the CONNACK: at worst we claim a newer generation for
            # a connection that is about to drop, which only shortens a wait
            self.generation = self.broker.generation
            self.ledger.cond.notify_all()
        return ack.session_present

    def send(self, data: bytes) -> None:
        try:
            self.conn.sock.settimeout(CONNECT_TIMEOUT)
            self.conn.send(data)
        except OSError as e:
            raise Disconnected(f"send: {e!r}") from None

    def read(self, timeout: float) -> rawmqtt.Packet | None:
        """The next packet, or None if none came within timeout."""
        try:
            p = self.conn.read_packet(max(timeout, 0.001))
        except TimeoutError:  # before OSError: it is one
            return None
        except rawmqtt.Closed:
            raise Disconnected("connection closed by the broker") from None
        except OSError as e:
            raise Disconnected(f"read: {e!r}") from None
        if p.type == DISCONNECT:
            raise Disconnected(f"DISCONNECT from the broker, reason 0x{p.reason:02x}")
        return p

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def unexpected(self, p: rawmqtt.Packet) -> None:
        self.ledger.violation(f"{self.label}: unexpected packet {p!r}")


class Publisher(Client):
    """Sends numbered messages on crash/data/p{index}, QoS 1 or 2 at random,
    in bursts of WINDOW, about `rate` per second, until `stop_publishing` is
    set; then finishes what is in flight."""

    def __init__(self, index: int, client_id: str, version: int, rate: float, seed: int,
                 stop_publishing: threading.Event, **kw):
        super().__init__(client_id, version, **kw)
        self.index = index
        self.topic = f"crash/data/p{index}"
        self.interval = 1.0 / rate
        self.rng = random.Random(f"{seed}/{client_id}")
        self.stop_publishing = stop_publishing
        self.next_seq = 1
        self.next_at = 0.0  # monotonic time the next new message may go out
        self.next_pid = 0
        # the client half of the session: packet id -> message, in send order
        self.inflight: dict[int, Outgoing] = {}
        self.resent = 0

    def finished(self) -> bool:
        return self.stop_publishing.is_set() and not self.inflight

    def resume(self, session_present: bool) -> None:
        # [MQTT-4.4.0-1]: with the session still there, resend unacknowledged
        # PUBLISHes (same packet id, DUP=1) and PUBRELs, in their order.
        # Without it the broker has forgotten them: PUBLISHes go out again as
        # new, PUBRELs for messages it already took are moot.
        for pid, out in list(self.inflight.items()):
            if out.released:
                if session_present:
                    self.send(rawmqtt.encode_pubrel(pid, version=self.version))
                else:
                    del self.inflight[pid]
            else:
                self.resent += 1
                self.send(self.encode(pid, out, dup=session_present))

    def encode(self, pid: int, out: Outgoing, dup: bool) -> bytes:
        return rawmqtt.encode_publish(self.topic, payload_of(out.key, out.qos), out.qos,
                                      dup=dup, pid=pid, version=self.version)

    def allocate_pid(self) -> int:
        while True:
            self.next_pid = self.next_pid % 65535 + 1
            if self.next_pid not in self.inflight:
                return self.next_pid

    def exchange(self) -> None:
        while not self.done():
            now = time.monotonic()
            # A whole window at once, then a pause that keeps the average at
            # `rate`: a kill then often finds messages unacknowledged on both
            # sides, which is what retransmission and QoS 2 deduplication
            # need to be tested. A steady trickle is acknowledged so fast
            # that a kill almost never catches one in flight.
            idle = not self.stop_publishing.is_set() and not self.inflight
            if idle and now >= self.next_at:
                for _ in range(WINDOW):
                    self.publish_next()
                self.next_at = max(self.next_at + WINDOW * self.interval, now)
                continue
            p = self.read(min(self.next_at - now, POLL) if idle else POLL)
            if p is not None:
                self.handle(p)

    def publish_next(self) -> None:
        out = Outgoing((self.index, self.next_seq), self.rng.choice((1, 2)))
        self.next_seq += 1
        pid = self.allocate_pid()
        self.inflight[pid] = out
        with self.ledger.cond:
            self.ledger.published[out.key] = out.qos
        self.send(self.encode(pid, out, dup=False))

    def handle(self, p: rawmqtt.Packet) -> None:
        out = self.inflight.get(p.pid) if p.type in (PUBACK, PUBREC, PUBCOMP) else None
        if p.type == PUBACK:
            if out and out.qos == 1:
                del self.inflight[p.pid]
                self.settle(out.key, p.reason)
        elif p.type == PUBREC:
            if out and out.qos == 2 and not out.released:
                self.settle(out.key, p.reason)
                if p.reason >= 0x80:  # a failed PUBREC ends the exchange
                    del self.inflight[p.pid]
                    return
                out.released = True
            if out and out.released:  # also answers a repeated PUBREC
                self.send(rawmqtt.encode_pubrel(p.pid, version=self.version))
        elif p.type == PUBCOMP:
            if out and out.released:
                del self.inflight[p.pid]
        else:
            self.unexpected(p)
        # acks for packet ids we no longer hold (answers to retransmissions
        # that crossed the original answer) need nothing

    def settle(self, key: Key, reason: int) -> None:
        with self.ledger.cond:
            if reason < 0x80:
                self.ledger.acked.add(key)
            else:
                self.ledger.refused[key] = reason


class Subscriber(Client):
    """Acknowledges and records everything that arrives on crash/data/#.

    A QoS 2 message reaches the application when its PUBLISH first arrives
    (method B of the spec, figure 4.3); a PUBLISH whose packet id still
    awaits its PUBREL is the broker's retransmission, not a new message.
    Those packet ids are part of the client's session, so they survive
    reconnects."""

    def __init__(self, client_id: str, version: int, qos: int, online: bool, **kw):
        super().__init__(client_id, version, **kw)
        self.qos = qos
        self.online = online
        self.awaiting_pubrel: set[int] = set()
        self.retransmissions = 0  # QoS 2 PUBLISHes recognised as such
        # guarded by ledger.cond
        self.received: collections.Counter[Key] = collections.Counter()
        self.outstanding: set[Key] | None = None  # what the final drain still waits for
        self.saw_final = False

    def create_session(self) -> None:
        """Clean start, subscribe, disconnect normally: the session (and the
        subscription in it) is the broker's to keep from now on."""
        self.connect()
        try:
            pid = self.conn.next_pid()
            self.send(rawmqtt.encode_subscribe(pid, [(DATA_FILTER, self.qos)],
                                               version=self.version))
            ack = self.read(CONNECT_TIMEOUT)
            if ack is None or ack.type != SUBACK or ack.reasons != [self.qos]:
                raise RuntimeError(f"{self.label}: subscription not granted: {ack!r}")
            self.send(rawmqtt.encode_disconnect(version=self.version))
        finally:
            self.close()

    def resume(self, session_present: bool) -> None:
        if not session_present:
            # the broker has no session: no subscription, nothing in flight.
            # We do not subscribe again, so a lost subscription shows as such.
            self.awaiting_pubrel.clear()

    def exchange(self) -> None:
        while not self.done():
            p = self.read(POLL)
            if p is None:
                continue
            if p.type == PUBLISH:
                self.on_publish(p)
            elif p.type == PUBREL:
                self.awaiting_pubrel.discard(p.pid)
                self.send(rawmqtt.encode_pubcomp(p.pid, version=self.version))
            else:
                self.unexpected(p)

    def on_publish(self, p: rawmqtt.Packet) -> None:
        if p.qos == 2 and p.pid in self.awaiting_pubrel:
            if not p.dup:
                self.ledger.violation(f"{self.label}: QoS 2 PUBLISH reusing packet id {p.pid} "
                                      f"before its PUBREL, without DUP: {p!r}")
            self.retransmissions += 1
            self.send(rawmqtt.encode_pubrec(p.pid, version=self.version))
            return
        self.deliver(p)
        if p.qos == 1:
            self.send(rawmqtt.encode_puback(p.pid, version=self.version))
        elif p.qos == 2:
            self.awaiting_pubrel.add(p.pid)
            self.send(rawmqtt.encode_pubrec(p.pid, version=self.version))

    def deliver(self, p: rawmqtt.Packet) -> None:
        self.count_delivery(p.topic.decode(), p.payload)


# --------------------------------------------------------------------------
# paho-mqtt clients
# --------------------------------------------------------------------------
class PahoClient(SessionThread):
    """A paho-mqtt client with a persistent session, driven by paho's own
    network thread, which reconnects by itself (after PAHO_RECONNECT_DELAY)
    whenever the connection is lost. The paho client object lives as long
    as this thread: its session state (outgoing QoS 1/2 messages, incoming
    QoS 2 packet ids awaiting PUBREL) survives every reconnect, as in an
    application. The thread itself only publishes, or waits."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.connected = threading.Event()
        self.mqtt = self._make_client()

    @property
    def label(self) -> str:
        return f"{self.client_id} (paho, MQTT {'5' if self.version == V5 else '3.1.1'})"

    def _make_client(self):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion
        if self.version == V5:
            # clean start on the first connect only (paho's default), then
            # the session expiry keeps the session across kills
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id,
                            protocol=mqtt.MQTTv5)
        else:
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id,
                            protocol=mqtt.MQTTv311, clean_session=False)
        c.reconnect_delay_set(PAHO_RECONNECT_DELAY, PAHO_RECONNECT_DELAY)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        return c

    def _connect_properties(self):
        if self.version != V5:
            return None
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = SESSION_EXPIRY
        return props

    def start_network(self) -> None:
        """Connects in the background; paho retries until the broker is up.
        MQTT 5: clean start on the very first connect only, as for the raw
        clients; 3.1.1: clean session 0 always (set on the paho client)."""
        if self.version == V5:
            from paho.mqtt.client import MQTT_CLEAN_START_FIRST_ONLY
            # paho's own reconnects reuse this: "first only" is clean start
            # until a CONNACK, 0 from then on
            clean = False if self.has_session else MQTT_CLEAN_START_FIRST_ONLY
            self.mqtt.connect_async(HOST, self.port, keepalive=60, clean_start=clean,
                                    properties=self._connect_properties())
        else:
            self.mqtt.connect_async(HOST, self.port, keepalive=60)
        self.mqtt.loop_start()

    def stop_network(self) -> None:
        try:
            if self.connected.is_set():
                self.mqtt.disconnect()
        finally:
            self.mqtt.loop_stop()

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self.last_error = f"CONNACK refused: {reason_code}"
            return
        if self.has_session and not flags.session_present:
            self.sessions_lost += 1
        self.has_session = True
        self.connects += 1
        self.connected.set()
        with self.ledger.cond:
            self.generation = self.broker.generation
            self.ledger.cond.notify_all()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self.connected.clear()
        self.last_error = f"disconnected: {reason_code}"


class PahoPublisher(PahoClient):
    """Publishes numbered messages on crash/data/p{index}, QoS 1 or 2 at
    random, at a steady `rate` with at most WINDOW unacknowledged, through
    paho, which keeps them across reconnects (and takes new ones while
    disconnected, to send once connected). A message counts as acknowledged
    when paho reports it published: PUBACK, or PUBCOMP for QoS 2."""

    def __init__(self, index: int, client_id: str, version: int, rate: float, seed: int,
                 stop_publishing: threading.Event, **kw):
        super().__init__(client_id, version, **kw)
        self.index = index
        self.topic = f"crash/data/p{index}"
        self.interval = 1.0 / rate
        self.rng = random.Random(f"{seed}/{client_id}")
        self.stop_publishing = stop_publishing
        self.next_seq = 1
        self.inflight: dict[int, Outgoing] = {}  # paho's message id -> message
        # set by paho's thread: reason code of the PUBACK/PUBCOMP, by message id
        self.reasons: dict[int, int] = {}
        self.resent = 0  # messages unacknowledged when a connection was lost
        self.mqtt.on_publish = self._on_publish

    def finished(self) -> bool:
        return self.stop_publishing.is_set() and not self.inflight

    def _on_publish(self, client, userdata, mid, reason_code, properties) -> None:
        self.reasons[mid] = reason_code.value

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        super()._on_disconnect(client, userdata, flags, reason_code, properties)
        self.resent += len(self.inflight)

    def run(self) -> None:
        try:
            self.start_network()
            next_at = time.monotonic()
            while not self.finished() and not self.shutdown.is_set():
                self.settle_published()
                now = time.monotonic()
                if (not self.stop_publishing.is_set() and len(self.inflight) < WINDOW
                        and now >= next_at):
                    self.publish_next()
                    next_at = max(next_at + self.interval, now - 1.0)
                    continue
                time.sleep(0.002)
            self.stop_network()
        except Exception:
            self.ledger.crash(f"{self.label} crashed:\n{traceback.format_exc()}")

    def publish_next(self) -> None:
        out = Outgoing((self.index, self.next_seq), self.rng.choice((1, 2)))
        self.next_seq += 1
        with self.ledger.cond:
            self.ledger.published[out.key] = out.qos
        # while disconnected paho keeps the message and sends it once connected
        info = self.mqtt.publish(self.topic, payload_of(out.key, out.qos), qos=out.qos)
        self.inflight[info.mid] = out

    def settle_published(self) -> None:
        for mid in [mid for mid in self.inflight if mid in self.reasons]:
            out = self.inflight.pop(mid)
            reason = self.reasons.pop(mid)
            with self.ledger.cond:
                # A PUBCOMP ends the exchange whatever its code: 0x92 (id not
                # found) answers a PUBREL resent after the broker completed it.
                if out.qos == 2 or reason < 0x80:
                    self.ledger.acked.add(out.key)
                else:
                    self.ledger.refused[out.key] = reason


class PahoSubscriber(PahoClient):
    """Subscribes to crash/data/# at QoS 2 once, then stays connected (paho
    reconnecting it after each kill) and counts what paho hands over:
    a QoS 2 message when its PUBREL comes (paho keeps the message under its
    packet id until then, so a PUBLISH resent with DUP replaces it rather
    than being handed over twice)."""

    def __init__(self, client_id: str, version: int, **kw):
        super().__init__(client_id, version, **kw)
        self.qos = 2
        self.online = True
        self.retransmissions = 0  # messages whose last PUBLISH had DUP set
        # guarded by ledger.cond
        self.received: collections.Counter[Key] = collections.Counter()
        self.outstanding: set[Key] | None = None
        self.saw_final = False
        self.mqtt.on_message = self._on_message

    def create_session(self) -> None:
        """Connects, subscribes, disconnects normally: the session is the
        broker's to keep (and the paho client's, for its QoS 2 ids)."""
        subscribed = threading.Event()
        granted: list[int] = []

        def on_subscribe(client, userdata, mid, reason_codes, properties):
            granted.extend(code.value for code in reason_codes)
            subscribed.set()

        self.mqtt.on_subscribe = on_subscribe
        self.start_network()
        try:
            if not self.connected.wait(CONNECT_TIMEOUT):
                raise RuntimeError(f"{self.label}: no CONNACK: {self.last_error or '-'}")
            self.mqtt.subscribe(DATA_FILTER, qos=self.qos)
            if not subscribed.wait(CONNECT_TIMEOUT) or granted != [self.qos]:
                raise RuntimeError(f"{self.label}: subscription not granted: {granted}")
        finally:
            self.stop_network()
        self.connected.clear()

    def run(self) -> None:
        try:
            self.start_network()
            self.shutdown.wait()
            self.stop_network()
        except Exception:
            self.ledger.crash(f"{self.label} crashed:\n{traceback.format_exc()}")

    def _on_message(self, client, userdata, m) -> None:
        self.count_delivery(m.topic, m.payload, dup=m.dup)


# --------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------
@dataclass
class Settings:
    ferry: Path
    kills: int = 20
    seed: int | None = None  # None: a random one (printed)
    fsync: str = "batch"
    data_dir: Path | None = None  # None: a fresh temporary directory
    keep: bool = False  # keep the temporary directory
    rate: float = 500.0  # new messages per second per publisher
    paho: bool = True  # run the paho-mqtt clients beside the raw ones
    paho_rate: float = 200.0  # new messages per second per paho publisher
    out: object = None  # where progress goes (None: sys.stdout at run time)


@dataclass
class Result:
    seed: int
    counts: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    log_tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def __repr__(self) -> str:  # short, for pytest's assertion rewriting
        return f"<Result seed={self.seed} failures={len(self.failures)}>"

    def summary(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.counts.items()) + f" seed={self.seed}"

    def report(self) -> str:
        """Everything a failed run has to say."""
        lines = [f"crash test FAILED (replay with --seed {self.seed}):"]
        lines += [f"  - {f}" for f in self.failures]
        lines.append(self.summary())
        if self.log_tail:
            lines.append("last lines of ferry's stderr:")
            lines += [f"  | {line}" for line in self.log_tail]
        return "\n".join(lines)


def run(settings: Settings) -> Result:
    """The whole test; never raises for a broker misbehaving, it reports."""
    return CrashTest(settings).run()


class CrashTest:
    """One run: setup, kill rounds, finish (drain and checks). The main
    thread runs these phases; the clients run in their own threads."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.out = settings.out or sys.stdout
        seed = settings.seed if settings.seed is not None else random.randrange(2**32)
        self.rng = random.Random(seed)
        self.result = Result(seed)
        self.workdir = Path(tempfile.mkdtemp(prefix="ferry-crash-"))
        self.data_dir = settings.data_dir or self.workdir / "data"
        config = self.workdir / "ferry.toml"
        config.write_text(config_toml(settings.fsync))
        self.port = free_port()  # fixed for every restart
        self.broker = Broker(settings.ferry, self.port, self.data_dir, config)
        self.ledger = Ledger()
        self.shutdown = threading.Event()
        self.stop_publishing = threading.Event()
        common = dict(broker=self.broker, port=self.port, ledger=self.ledger,
                      shutdown=self.shutdown)
        self.publishers = [Publisher(i, cid, version, settings.rate, seed, self.stop_publishing,
                                     **common)
                           for i, (cid, version) in enumerate(PUBLISHERS)]
        self.subscribers = [Subscriber(cid, version, qos, online, **common)
                            for cid, version, qos, online in SUBSCRIBERS]
        if settings.paho:
            self.publishers += [
                PahoPublisher(len(PUBLISHERS) + i, cid, version, settings.paho_rate, seed,
                              self.stop_publishing, **common)
                for i, (cid, version) in enumerate(PAHO_PUBLISHERS)]
            self.subscribers += [PahoSubscriber(cid, version, **common)
                                 for cid, version in PAHO_SUBSCRIBERS]
        self.retained: dict[str, bytes] = {}
        self.kills = 0
        self.retained_ok: int | None = None
        self.subscribed: int | None = None

    def say(self, text: str) -> None:
        print(f"crash-test: {text}", file=self.out, flush=True)

    def fail(self, text: str) -> None:
        self.result.failures.append(text)

    def healthy(self) -> bool:
        return not self.result.failures and not self.ledger.crashes

    # -------------------------------------------------------------- phases
    def run(self) -> Result:
        s = self.settings
        self.say(f"seed={self.result.seed} kills={s.kills} fsync={s.fsync} ferry={s.ferry} "
                 f"data={self.data_dir}")
        try:
            self.setup()
            if self.healthy():
                self.kill_rounds()
            if self.healthy():
                self.finish()
            self.stop_clients()
            status = self.broker.terminate()
            if status != 0:
                self.fail(f"ferry exited with status {status} on SIGTERM (expected 0)")
        except BrokerError as e:
            self.fail(str(e))
        except Exception:
            self.fail(f"crash-test error:\n{traceback.format_exc()}")
        finally:
            self.shutdown.set()
            if self.broker.running():
                self.broker.proc.kill()
                self.broker.proc.wait()
            self.result.failures += self.ledger.crashes + self.ledger.violations[:SHOW]
            if len(self.ledger.violations) > SHOW:
                self.fail(f"... and {len(self.ledger.violations) - SHOW} more protocol violations")
            self.result.counts = self.counts()
            if self.result.failures:
                self.result.log_tail = self.broker.log_tail(40)
            if s.keep:
                self.say(f"kept {self.workdir}")
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return self.result

    def setup(self) -> None:
        """Retained messages and every subscriber's session, then traffic."""
        self.broker.start()
        self.publish_retained()
        for sub in self.subscribers:
            sub.create_session()
        online = self.publishers + [sub for sub in self.subscribers if sub.online]
        for c in online:
            c.start()
        self.wait_reconnected(online)

    def kill_rounds(self) -> None:
        running = self.publishers + [sub for sub in self.subscribers if sub.online]
        for n in range(1, self.settings.kills + 1):
            running_for = self.rng.uniform(0.2, 1.5)
            time.sleep(running_for)  # the random moment: traffic flows meanwhile
            if not self.healthy():
                return
            self.broker.kill()
            self.kills += 1
            killed = time.monotonic()
            self.broker.start()
            if not self.wait_reconnected(running):
                return
            with self.ledger.cond:
                published, acked = len(self.ledger.published), len(self.ledger.acked)
            self.say(f"kill {n}/{self.settings.kills} after {running_for:.2f}s, clients back in "
                     f"{time.monotonic() - killed:.2f}s; published={published} "
                     f"acknowledged={acked}")

    def finish(self) -> None:
        self.stop_publishing.set()
        self.settle_publishers()
        if not self.healthy():
            return
        offline = [sub for sub in self.subscribers if not sub.online]
        for sub in offline:
            sub.start()
        if not self.wait_reconnected(offline):
            return
        self.drain()
        # the final message also gives late duplicates time to show up
        self.subscribed = self.check_subscriptions()
        self.check_deliveries()
        self.retained_ok = self.check_retained()
        self.say("checked")

    def stop_clients(self) -> None:
        self.shutdown.set()  # the subscribers disconnect normally
        for c in self.publishers + self.subscribers:
            if c.is_alive():
                c.join(CONNECT_TIMEOUT)

    # ------------------------------------------------------------- helpers
    def publish_retained(self) -> None:
        """Before the first kill: RETAINED retained messages, each acknowledged."""
        c = rawmqtt.RawClient(HOST, self.port, V5, CONNECT_TIMEOUT)
        c.connect("crash-retainer", clean=True)
        for n in range(1, RETAINED + 1):
            topic, payload = f"crash/retained/{n}", f"retained {n}".encode()
            c.publish(topic, payload, qos=1, retain=True)  # returns on a successful PUBACK
            self.retained[topic] = payload
        c.disconnect()

    def wait_reconnected(self, clients: list[Client]) -> bool:
        """Waits until every client still running has connected to the
        current broker process."""
        generation = self.broker.generation
        ledger = self.ledger

        def lagging():
            return [c for c in clients if c.is_alive() and c.generation < generation]

        with ledger.cond:
            ledger.cond.wait_for(lambda: not lagging() or ledger.crashes, RECONNECT_TIMEOUT)
            late = lagging()
        for c in late:
            self.fail(f"{c.label} did not connect within {RECONNECT_TIMEOUT:.0f}s of broker "
                      f"start #{generation}; last error: {c.last_error or '-'}")
        return not late and not ledger.crashes

    def settle_publishers(self) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        for p in self.publishers:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.publishers:
            if p.is_alive():
                keys = [out.key for out in list(p.inflight.values())]
                self.fail(f"{p.label}: {len(keys)} messages still unacknowledged "
                          f"{SETTLE_TIMEOUT:.0f}s after publishing stopped: {show_keys(keys)}; "
                          f"last error: {p.last_error or '-'}")

    def drain(self) -> None:
        """Waits until every subscriber has every acknowledged message, or
        nothing arrived for DRAIN_STALL seconds, or DRAIN_TIMEOUT passed.
        What is still missing then is reported by check_deliveries."""
        ledger = self.ledger
        deadline = time.monotonic() + DRAIN_TIMEOUT
        with ledger.cond:
            ledger.last_delivery = time.monotonic()
            for sub in self.subscribers:
                sub.outstanding = ledger.acked - sub.received.keys()
            while any(sub.outstanding for sub in self.subscribers) and not ledger.crashes:
                until = min(deadline, ledger.last_delivery + DRAIN_STALL)
                if time.monotonic() >= until:
                    return
                ledger.cond.wait(until - time.monotonic())

    def check_deliveries(self) -> None:
        with self.ledger.cond:
            published = dict(self.ledger.published)
            acked = set(self.ledger.acked)
            refused = dict(self.ledger.refused)
            received = {sub.client_id: collections.Counter(sub.received)
                        for sub in self.subscribers}
        if refused:
            codes = ", ".join(sorted({f"0x{r:02x}" for r in refused.values()}))
            self.fail(f"the broker refused {len(refused)} publishes (reason codes {codes}): "
                      f"{show_keys(refused)}")
        for c in self.publishers + self.subscribers:
            if c.sessions_lost:
                self.fail(f"{c.label}: no session present on {c.sessions_lost} of "
                          f"{c.connects - 1} reconnects")
        for sub in self.subscribers:
            got = received[sub.client_id]
            lost = acked - got.keys()
            if lost:
                self.fail(f"{sub.label}, QoS {sub.qos} subscription, "
                          f"{'online' if sub.online else 'offline'}: {len(lost)} of {len(acked)} "
                          f"acknowledged messages never delivered: {show_keys(lost)}")
            if sub.qos == 2:
                dups = {k: n for k, n in got.items() if n > 1 and published.get(k) == 2}
                if dups:
                    self.fail(f"{sub.label}: {len(dups)} QoS 2 messages delivered more than "
                              f"once: {show_counts(dups)}")
            phantom = got.keys() - published.keys()
            if phantom:
                self.fail(f"{sub.label}: {len(phantom)} messages nobody published: "
                          f"{show_keys(phantom)}")

    def check_retained(self) -> int:
        """A fresh clean client must get every retained message; returns how
        many it got right."""
        c = rawmqtt.RawClient(HOST, self.port, V5, CONNECT_TIMEOUT)
        c.connect("crash-retained-check", clean=True)
        c.subscribe(("crash/retained/#", 1))
        got: dict[str, bytes] = {}
        deadline = time.monotonic() + FINAL_TIMEOUT
        while len(got) < len(self.retained):
            try:
                p = c.read_packet(deadline - time.monotonic())
            except TimeoutError:
                break
            if p.type == PUBLISH:
                c.ack(p)
                if p.retain:
                    got[p.topic.decode()] = p.payload
        c.disconnect()
        wrong = [f"{topic} expected {payload!r}, got {got.get(topic)!r}"
                 for topic, payload in self.retained.items() if got.get(topic) != payload]
        if wrong:
            self.fail(f"retained messages: {len(self.retained) - len(wrong)}/{len(self.retained)} "
                      f"intact: {'; '.join(wrong)}")
        return len(self.retained) - len(wrong)

    def check_subscriptions(self) -> int:
        """One more QoS 1 message on crash/data/: every subscriber must get
        it. Returns how many did."""
        c = rawmqtt.RawClient(HOST, self.port, V5, CONNECT_TIMEOUT)
        c.connect("crash-final", clean=True)
        c.publish(FINAL_TOPIC, FINAL_PAYLOAD, qos=1)
        c.disconnect()
        with self.ledger.cond:
            self.ledger.cond.wait_for(lambda: all(sub.saw_final for sub in self.subscribers),
                                      FINAL_TIMEOUT)
            missing = [sub.label for sub in self.subscribers if not sub.saw_final]
        if missing:
            self.fail(f"subscriptions: {len(missing)} subscribers did not receive a message "
                      f"published after the kills: {', '.join(missing)}")
        return len(self.subscribers) - len(missing)

    def counts(self) -> dict:
        with self.ledger.cond:
            published = dict(self.ledger.published)
            acked = set(self.ledger.acked)
            received = [(sub, collections.Counter(sub.received)) for sub in self.subscribers]
        qos2 = {k for k in acked if published[k] == 2}
        qos2_subs = [(sub, got) for sub, got in received if sub.qos == 2]
        delivered = sum(len(acked & got.keys()) for _, got in received)
        once = sum(1 for _, got in qos2_subs for k in qos2 if got[k] == 1)
        qos2_dups = sum(got[k] - 1 for _, got in qos2_subs for k in qos2 if got[k] > 1)
        qos1_dups = sum(n - 1 for sub, got in received for k, n in got.items()
                        if n > 1 and (sub.qos == 1 or published.get(k) == 1))
        unknown = "-"
        return {
            "kills": self.kills,
            "published": len(published),
            "acknowledged": len(acked),
            "resent": sum(p.resent for p in self.publishers),
            "qos2-retransmissions-seen": sum(sub.retransmissions for sub in self.subscribers),
            "delivered": f"{delivered}/{len(acked) * len(self.subscribers)}",
            "qos2-exactly-once": f"{once}/{len(qos2) * len(qos2_subs)}",
            "duplicates(qos2)": qos2_dups,
            "duplicates(qos1)": qos1_dups,
            "retained": f"{unknown if self.retained_ok is None else self.retained_ok}/{RETAINED}",
            "subscriptions": f"{unknown if self.subscribed is None else self.subscribed}"
                             f"/{len(self.subscribers)}",
        }


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Kill -9 Ferry repeatedly under QoS 1/2 traffic to persistent sessions; "
                    "check that nothing acknowledged is lost and QoS 2 is exactly once.")
    ap.add_argument("--ferry", type=Path, default=REPO / "target" / "release" / "ferry",
                    help="the ferry binary (default: target/release/ferry)")
    ap.add_argument("--kills", type=int, default=20,
                    help="how many times to kill the broker (default: 20)")
    ap.add_argument("--seed", type=int, help="seed for kill times and QoS mix (default: random)")
    ap.add_argument("--fsync", choices=("always", "batch", "never"), default="batch",
                    help="[durability] fsync policy (default: batch)")
    ap.add_argument("--data-dir", type=Path,
                    help="ferry's data directory; must be empty or absent (default: a fresh "
                         "temporary directory, removed at the end unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--rate", type=float, default=500.0,
                    help="new messages per second per publisher (default: 500)")
    ap.add_argument("--paho-rate", type=float, default=200.0,
                    help="new messages per second per paho-mqtt publisher (default: 200)")
    ap.add_argument("--no-paho", action="store_true",
                    help="run only the raw-socket clients, not the paho-mqtt ones")
    args = ap.parse_args(argv)
    if not args.ferry.is_file():
        ap.error(f"no ferry binary at {args.ferry} (cargo build --release -p ferry)")
    if args.kills < 0 or args.rate <= 0 or args.paho_rate <= 0:
        ap.error("--kills must be >= 0 and --rate and --paho-rate > 0")
    if args.data_dir and args.data_dir.exists() and any(args.data_dir.iterdir()):
        ap.error(f"--data-dir {args.data_dir} is not empty")

    result = run(Settings(ferry=args.ferry, kills=args.kills, seed=args.seed, fsync=args.fsync,
                          data_dir=args.data_dir, keep=args.keep, rate=args.rate,
                          paho=not args.no_paho, paho_rate=args.paho_rate))
    if result.ok:
        print(f"crash-test: OK {result.summary()}")
        return 0
    print(result.report())
    return 1


if __name__ == "__main__":
    sys.exit(main())
