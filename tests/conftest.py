"""Fixtures for Ferry's integration tests.

`broker` / `broker_factory` start the ferry binary (or, with
FERRY_TEST_TARGET=mosquitto, /usr/sbin/mosquitto with an equivalent
configuration) on ephemeral ports and stop it with SIGTERM at teardown,
asserting a clean exit (status 0). `Broker.restart(kill=...)` stops one
(SIGTERM or SIGKILL) and starts it again on the same data directory.

Markers:
  ferry_only                -- exercises something Mosquitto does not have
                               (WebSocket path, HTTP, deny_subscribe, Ferry's
                               log lines/config keys); skipped only when
                               FERRY_TEST_TARGET=mosquitto.
  mosquitto_differs(reason) -- Mosquitto 2.0.11 deviates from the spec or
                               from Ferry's contract here; the test keeps
                               asserting the specified behaviour and is an
                               expected failure (strict) only in mosquitto
                               mode.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

import rawmqtt
from helpers import MqttClient

REPO = Path(__file__).resolve().parent.parent
TARGET = os.environ.get("FERRY_TEST_TARGET", "ferry").strip().lower() or "ferry"
if TARGET not in ("ferry", "mosquitto"):
    raise RuntimeError(f"FERRY_TEST_TARGET must be 'ferry' or 'mosquitto', not {TARGET!r}")
MOSQUITTO = TARGET == "mosquitto"
MOSQUITTO_BIN = os.environ.get("MOSQUITTO_BIN", "/usr/sbin/mosquitto")

STARTUP_TIMEOUT = 15.0
SHUTDOWN_TIMEOUT = 5.0
# Lines of a broker's log a failed test's report shows.
FAILURE_LOG_LINES = 60

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LISTEN_RE = {
    "mqtt": re.compile(r"listening on mqtt://([0-9A-Za-z.\[\]:]+?):(\d+)\b"),
    "ws": re.compile(r"listening on ws://([0-9A-Za-z.\[\]:]+?):(\d+)/mqtt"),
    "http": re.compile(r"listening on http://([0-9A-Za-z.\[\]:]+?):(\d+)\b"),
}


# --------------------------------------------------------------------------
# markers
# --------------------------------------------------------------------------
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "ferry_only: Ferry-specific feature; skipped when FERRY_TEST_TARGET=mosquitto")
    config.addinivalue_line(
        "markers",
        "mosquitto_differs(reason): Mosquitto 2.0.11 deviates here; strict xfail in mosquitto mode")


def pytest_collection_modifyitems(config, items):
    if not MOSQUITTO:
        return
    for item in items:
        if item.get_closest_marker("ferry_only"):
            item.add_marker(pytest.mark.skip(reason="ferry-only (FERRY_TEST_TARGET=mosquitto)"))
            continue
        m = item.get_closest_marker("mosquitto_differs")
        if m:
            reason = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.xfail(reason=f"Mosquitto 2.0.11: {reason}", strict=True))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries what its fixtures saw (a broker's
    log, Kafka's): a failure on CI can then be read, not only rerun."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for name, value in funcargs.items():
        if isinstance(value, Broker) and "broker_factory" in funcargs:
            continue  # the factory's context shows every broker it made
        describe = getattr(value, "failure_context", None)
        if callable(describe):
            try:
                report.sections.append((f"{name} at the failure", describe()))
            except Exception as error:  # a report must not fail on its context
                report.sections.append((f"{name} at the failure", f"unavailable: {error!r}"))


def pytest_report_header(config):
    if MOSQUITTO:
        return f"broker under test: mosquitto ({MOSQUITTO_BIN})"
    try:
        return f"broker under test: ferry ({ferry_binary()})"
    except RuntimeError as e:
        return f"broker under test: ferry (NOT FOUND: {e})"


# --------------------------------------------------------------------------
# locating / configuring the broker
# --------------------------------------------------------------------------
def ferry_binary() -> Path:
    env = os.environ.get("FERRY_BIN")
    if env:
        p = Path(env)
        if not p.is_file():
            raise RuntimeError(f"FERRY_BIN={env} does not exist")
        return p
    candidates = [REPO / "target" / "release" / "ferry", REPO / "target" / "debug" / "ferry"]
    existing = [c for c in candidates if c.is_file()]
    if not existing:
        raise RuntimeError("no ferry binary: run `cargo build --release -p ferry` or set FERRY_BIN")
    # the most recently built one wins (release preferred on a tie)
    return max(existing, key=lambda c: (c.stat().st_mtime, c == candidates[0]))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        esc = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{esc}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def to_toml(config: dict) -> str:
    """Minimal TOML writer: top-level scalars, then one [table] per dict
    value and one [[table]] per dict in a list of dicts, nested tables
    as [a.b]."""
    lines: list[str] = []

    def table(prefix: str, values: dict, header: str | None):
        if header is not None:
            lines.append("")
            lines.append(header)
        for k, v in values.items():
            if not isinstance(v, dict) and not _is_table_list(v):
                lines.append(f"{k} = {_toml_value(v)}")
        for k, v in values.items():
            name = f"{prefix}{k}"
            if isinstance(v, dict):
                table(f"{name}.", v, f"[{name}]")
            elif _is_table_list(v):
                for item in v:
                    table(f"{name}.", item, f"[[{name}]]")

    table("", config, None)
    return "\n".join(lines) + "\n"


def _is_table_list(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


# Ferry's defaults, mirrored into mosquitto's configuration so both brokers
# announce comparable limits.
FERRY_BROKER_DEFAULTS = {
    "max_keep_alive_secs": 65535,
    "max_packet_size_bytes": 1048576,
    "receive_maximum": 100,
    "max_inflight_messages": 100,
    "max_queued_messages": 1000,
    "topic_alias_maximum": 64,
    "retain_available": True,
    "sys_interval_secs": 10,
}


def mosquitto_conf(port: int, config: dict) -> str:
    b = dict(FERRY_BROKER_DEFAULTS)
    b.update(config.get("broker", {}))
    unsupported = {"deny_subscribe", "max_session_expiry_secs"} & set(config.get("broker", {}))
    if unsupported:
        raise RuntimeError(f"config keys {sorted(unsupported)} cannot be translated to mosquitto; "
                           "mark the test ferry_only")
    if b.get("queue_overflow", "drop_new") != "drop_new":
        # mosquitto always drops the new message when a queue is full
        raise RuntimeError("mosquitto only implements queue_overflow=drop_new; mark the test "
                           "ferry_only")
    lines = [
        "per_listener_settings false",
        "allow_anonymous true",
        "persistence false",
        "log_dest stderr",
        "log_type all",
        "connection_messages true",
        f"sys_interval {b['sys_interval_secs']}",
        # mosquitto refuses max_keepalive < 10 (tests needing less are
        # marked mosquitto_differs)
        f"max_keepalive {max(10, b['max_keep_alive_secs'])}",
        f"max_packet_size {b['max_packet_size_bytes']}",
        f"max_queued_messages {b['max_queued_messages']}",
        # mosquitto has one knob for both directions: it announces
        # max_inflight_messages as its Receive Maximum, so the server-side
        # receive_maximum is what we translate when it is set explicitly.
        f"max_inflight_messages "
        f"{config.get('broker', {}).get('receive_maximum', b['max_inflight_messages'])}",
        f"retain_available {'true' if b['retain_available'] else 'false'}",
        f"listener {port} 127.0.0.1",
        f"max_topic_alias {b['topic_alias_maximum']}",
    ]
    return "\n".join(lines) + "\n"


def free_port() -> int:
    """A port nobody listens on, below Linux's ephemeral range (32768-60999):
    one from that range can be taken by the local end of a client connection
    between this check and the broker's bind."""
    while True:
        port = random.randrange(20000, 32768)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


# --------------------------------------------------------------------------
# the broker process
# --------------------------------------------------------------------------
class Broker:
    host = "127.0.0.1"

    def __init__(self, kind: str, cmd: list[str], workdir: Path, wait_for: dict):
        self.kind = kind
        self.cmd = cmd
        self.workdir = workdir
        self.port: int | None = None
        self.ws_port: int | None = None
        self.http_port: int | None = None
        # ports of named listeners, from the `wait` regexes given to the factory
        self.ports: dict[str, int] = {}
        self._wait_for = wait_for  # name -> regex (ready when all matched)
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._clients: list = []
        self.returncode: int | None = None
        self.proc: subprocess.Popen | None = None
        self._drainer: threading.Thread | None = None
        # index in log_lines() of the first line of the current process (for
        # wait_log(since=...) after a restart)
        self.log_start = 0

    @property
    def is_ferry(self) -> bool:
        return self.kind == "ferry"

    # ------------------------------------------------------------- process
    def start(self) -> "Broker":
        """Starts the command and waits until the broker is ready. Also
        starts it again after stop() (same command, so the same data
        directory; ephemeral ports change, and self.port etc. follow)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                raise RuntimeError(f"{self.kind} is already running (pid {self.proc.pid})")
            self.proc.wait()
            if self._drainer is not None:
                # the last lines of the previous run, before this one's
                self._drainer.join(SHUTDOWN_TIMEOUT)
        attrs = {"mqtt": "port", "ws": "ws_port", "http": "http_port"}
        for name in self._wait_for:
            if name in attrs:
                setattr(self, attrs[name], None)
        self.returncode = None
        with self._cond:
            self.log_start = since = len(self._lines)
        self.proc = subprocess.Popen(self.cmd, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._drainer = threading.Thread(target=self._drain, args=(self.proc,), daemon=True)
        self._drainer.start()
        found: dict[str, re.Match] = {}

        def ready():
            for line in self._lines[since:]:
                for name, rx in self._wait_for.items():
                    if name not in found:
                        m = rx.search(line)
                        if m:
                            found[name] = m
            return len(found) == len(self._wait_for) or self.proc.poll() is not None

        deadline = time.monotonic() + STARTUP_TIMEOUT
        with self._cond:
            while not (ok := ready()) and time.monotonic() < deadline:
                self._cond.wait(0.1)  # woken by every new log line
        if len(found) != len(self._wait_for):
            if self.proc.poll() is not None:
                # It exited: what it wrote last may still be in the pipe,
                # which the drainer empties before it ends.
                self._drainer.join(STARTUP_TIMEOUT)
            lines = self.log_lines()[since:]  # this run's (the error, then any backtrace)
            if len(lines) > 50:
                lines = lines[:25] + [f"[... {len(lines) - 50} lines ...]"] + lines[-25:]
            log = "\n".join(lines)
            self.proc.kill()
            self.proc.wait()
            self.returncode = self.proc.returncode  # already reported: not again at teardown
            why = (f"exited with status {self.proc.returncode}" if ok else
                   f"did not report {sorted(set(self._wait_for) - set(found))} within "
                   f"{STARTUP_TIMEOUT}s")
            raise RuntimeError(f"{self.kind} {why}\ncommand: {self.cmd}\nstderr:\n{log}")
        for name, m in found.items():
            if name in attrs:
                setattr(self, attrs[name], int(m.group(2)))
            elif m.re.groups >= 2:  # a named listener's (host, port)
                self.ports[name] = int(m.group(2))
        return self

    def _drain(self, proc: subprocess.Popen):
        for raw in proc.stderr:
            line = ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")
            with self._cond:
                self._lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def log_lines(self) -> list[str]:
        """Everything the broker logged to stderr so far."""
        with self._cond:
            return list(self._lines)

    def failure_context(self) -> str:
        """What a failed test's report shows of this broker: its log's tail."""
        return "\n".join(self.log_lines()[-FAILURE_LOG_LINES:])

    def wait_log(self, pattern: str, since: int = 0, timeout: float = 5.0) -> str:
        """Waits for a log line (from index `since` on) matching regex pattern."""
        rx = re.compile(pattern, re.I)

        def match():
            for line in self._lines[since:]:
                if rx.search(line):
                    return line
            return None

        with self._cond:
            line = self._cond.wait_for(match, timeout)
        if not line:
            new = "\n".join(self._lines[since:])
            raise AssertionError(f"no log line matching /{pattern}/ within {timeout}s; "
                                 f"new lines:\n{new}")
        return line

    def stop(self, sig=signal.SIGTERM, timeout: float = SHUTDOWN_TIMEOUT,
             close_clients: bool = True) -> int:
        """Closes our clients (unless close_clients=False), signals the
        broker, returns its exit status (killing it and raising if it does
        not exit in time)."""
        if close_clients:
            self.close_clients()
        if self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self._wait_exit(sig, timeout)

    def _wait_exit(self, sig, timeout: float = SHUTDOWN_TIMEOUT) -> int:
        if self.returncode is not None:
            return self.returncode
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.returncode = self.proc.returncode
            raise AssertionError(f"{self.kind} did not exit within {timeout}s of {sig!r}")
        return self.returncode

    def restart(self, kill: bool = False) -> "Broker":
        """Stops the broker -- SIGKILL with kill=True, else SIGTERM, after
        which the exit status must be 0 -- and starts the same command again
        on the same data directory, waiting until it is ready (new ports).

        The broker goes away under its clients: they are not closed first,
        so none sends DISCONNECT. On SIGTERM they close their end once the
        broker has closed its own, as real clients do (paho by itself, raw
        clients here: the broker lingers up to 2 s for that). They are all
        dropped afterwards; connect new ones to the restarted broker."""
        sig = signal.SIGKILL if kill else signal.SIGTERM
        if self.returncode is None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            if not kill:
                for c in self._clients:
                    if isinstance(c, rawmqtt.RawClient) and not c.closed:
                        try:
                            c.read_until_closed(SHUTDOWN_TIMEOUT)
                        except Exception:
                            pass  # closing is all that matters here
                        c.close()
        rc = self._wait_exit(sig)
        self.close_clients()
        if not kill and rc != 0:
            tail = "\n".join(self.log_lines()[-20:])
            raise AssertionError(f"{self.kind} exited with status {rc} on SIGTERM; "
                                 f"log tail:\n{tail}")
        return self.start()

    # ------------------------------------------------------------- clients
    def close_clients(self) -> None:
        for c in self._clients:
            try:
                c.close()
            except Exception:
                pass
        self._clients.clear()

    def client(self, version: int = 5, client_id: str = "", clean: bool = True,
               keepalive: int = 60, connect: bool = True, props: dict | None = None,
               will: dict | None = None, transport: str = "tcp") -> MqttClient:
        """A paho client (v3.1.1 when version=4/311, else v5), connected
        unless connect=False. will = {"topic","payload","qos","retain","props"}."""
        version = 5 if version == 5 else 4
        port = self.ws_port if transport == "websockets" else self.port
        c = MqttClient(self.host, port, version, client_id, clean, keepalive, transport)
        self._clients.append(c)
        if will:
            c.will_set(will["topic"], will.get("payload", b""), will.get("qos", 0),
                       will.get("retain", False), will.get("props"))
        if connect:
            c.connect(props)
        return c

    def raw(self, version: int = 5, timeout: float = 5.0, port: int | None = None
            ) -> rawmqtt.RawClient:
        """An unconnected raw socket client (to another listener's `port`)."""
        r = rawmqtt.RawClient(self.host, port or self.port, 5 if version == 5 else 4, timeout)
        self._clients.append(r)
        return r

    def connack(self, version: int, username: str | None = None, password: str | None = None,
                port: int | None = None) -> int:
        """The CONNACK reason for a raw CONNECT with these credentials; a
        refused connection is read until the broker closes it."""
        r = self.raw(version, port=port)
        ack = r.connect(f"connack-{time.monotonic_ns()}", username=username,
                        password=None if password is None else password.encode(),
                        expect_success=False)
        if ack.reason != 0:
            r.read_until_closed()
        return ack.reason


def make_password_file(path: Path, users: dict[str, str]) -> Path:
    """A password file written by `ferry passwd`, one call per user."""
    for user, password in users.items():
        subprocess.run([str(ferry_binary()), "passwd", str(path), user],
                       input=f"{password}\n", text=True, check=True, capture_output=True)
    return path


def _ferry_cmd(workdir: Path, config: dict | None, ws: bool, http: bool, extra: list[str]):
    (workdir / "data").mkdir()
    cmd = [str(ferry_binary()), "serve",
           "--mqtt", "127.0.0.1:0",
           "--ws", "127.0.0.1:0" if ws else "",
           "--http", "127.0.0.1:0" if http else "",
           "--data-dir", str(workdir / "data")]
    if config is not None:
        cfg = workdir / "ferry.toml"
        cfg.write_text(to_toml(config))
        cmd += ["--config", str(cfg)]
    wait = {"mqtt": LISTEN_RE["mqtt"]}
    if ws:
        wait["ws"] = LISTEN_RE["ws"]
    if http:
        wait["http"] = LISTEN_RE["http"]
    return cmd + list(extra), wait


def _mosquitto_cmd(workdir: Path, config: dict | None):
    port = free_port()
    conf = workdir / "mosquitto.conf"
    conf.write_text(mosquitto_conf(port, config or {}))
    wait = {
        "listen": re.compile(rf"Opening ipv4 listen socket on port {port}\b"),
        "ready": re.compile(r"mosquitto version \S+ running"),
    }
    return [MOSQUITTO_BIN, "-c", str(conf)], wait, port


@pytest.fixture
def broker_factory(tmp_path_factory):
    """broker_factory(config: dict | None = None, ws=True, http=True,
    extra_args=(), kind=None) -> started Broker. config is the TOML document as a dict,
    e.g. {"broker": {"max_queued_messages": 5}}. All brokers are stopped at
    teardown and must exit with status 0."""
    brokers: list[Broker] = []

    def make(config: dict | None = None, ws: bool = True, http: bool = True,
             extra_args=(), kind: str | None = None, wait: dict | None = None) -> Broker:
        """kind="mosquitto" starts Mosquitto whatever the target (the
        reference broker of the differential tests)."""
        workdir = tmp_path_factory.mktemp("broker")
        if MOSQUITTO or kind == "mosquitto":
            cmd, wait, port = _mosquitto_cmd(workdir, config)
            b = Broker("mosquitto", cmd, workdir, wait)
            b.port = port
        else:
            cmd, wait_for = _ferry_cmd(workdir, config, ws, http, list(extra_args))
            b = Broker("ferry", cmd, workdir, {**wait_for, **(wait or {})})
        b.start()
        brokers.append(b)
        return b

    make.failure_context = lambda: "\n".join(
        f"--- {b.kind} {i}\n{b.failure_context()}" for i, b in enumerate(brokers))
    yield make

    errors = []
    for b in brokers:
        already = b.returncode is not None
        b.close_clients()
        try:
            rc = b.stop()
        except AssertionError as e:
            errors.append(str(e))
            continue
        if not already and rc != 0:
            tail = "\n".join(b.log_lines()[-20:])
            errors.append(f"{b.kind} exited with status {rc} on SIGTERM; log tail:\n{tail}")
    if errors:
        pytest.fail("\n".join(errors), pytrace=False)


@pytest.fixture
def broker(broker_factory) -> Broker:
    """A broker with the default configuration."""
    return broker_factory()


@pytest.fixture
def reference(broker_factory) -> Broker:
    """Mosquitto with the default configuration, for differential tests."""
    return broker_factory(kind="mosquitto")



# ------------------------------------------------------------------ twins
@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway PostgreSQL cluster for the whole run; each twin test
    on PostgreSQL gets a database of its own in it."""
    from twins import PostgresCluster

    cluster = PostgresCluster()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def twin_store(request) -> dict:
    """The `[twins]` table for each store: every twin test runs on both."""
    if request.param == "sqlite":
        return {"store": "sqlite"}
    return {"store": request.getfixturevalue("postgres_cluster").new_database()}
