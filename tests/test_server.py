"""The ferry binary as a server: $SYS topics, WebSocket and HTTP listeners,
configuration, logging and signals."""

import json
import os
import re
import signal
import socket
import urllib.error
import urllib.request

import pytest

import rawmqtt as R
from helpers import VERSIONS, expect_nothing

SYS_TOPICS = [
    "$SYS/broker/version",
    "$SYS/broker/uptime",
    "$SYS/broker/clients/connected",
    "$SYS/broker/messages/received",
    "$SYS/broker/messages/sent",
    "$SYS/broker/bytes/received",
    "$SYS/broker/bytes/sent",
]
LEADING_INT = re.compile(rb"^\s*(\d+)")


def _int(payload: bytes) -> int:
    m = LEADING_INT.match(payload)
    assert m, f"expected a number, got {payload!r}"
    return int(m.group(1))


# -------------------------------------------------------------------- $SYS
@pytest.mark.parametrize("version", VERSIONS)
def test_sys_topics(broker_factory, version):
    b = broker_factory({"broker": {"sys_interval_secs": 1}})
    c = b.client(version, "sys-watch")
    c.subscribe("$SYS/broker/#", qos=0)
    latest = {}
    live_count = None
    for _ in range(500):
        m = c.get(timeout=4)
        latest[m.topic] = m
        if m.topic == "$SYS/broker/clients/connected" and not m.retain:
            live_count = m  # published after we connected (not a stale retained value)
        if live_count and not set(SYS_TOPICS) - set(latest):
            break
    assert not set(SYS_TOPICS) - set(latest), f"missing {set(SYS_TOPICS) - set(latest)}"

    assert latest["$SYS/broker/version"].payload.strip(), "empty version"
    assert _int(live_count.payload) >= 1
    for t in SYS_TOPICS[1:]:
        _int(latest[t].payload)


@pytest.mark.parametrize("version", VERSIONS)
def test_clients_may_not_publish_under_sys(broker_factory, version):
    """$SYS is the broker's own (MQTT §4.7.2): a client that could publish
    there would fake the figures everyone else reads. Refused as Mosquitto
    does, whatever the ACL says: v5 gets 0x87 (Not authorized), 3.1.1 its
    ack, and nobody the message. $SYS publications of the broker are off
    here, so whatever arrives came from the client."""
    b = broker_factory({"broker": {"sys_interval_secs": 0}})
    watcher = b.raw(version)
    watcher.connect("sys-watcher")
    watcher.subscribe(("$SYS/#", 1))
    liar = b.raw(version)
    liar.connect("sys-liar")
    for qos, topic in [(0, "$SYS/broker/uptime"), (1, "$SYS/broker/version"), (2, "$SYS")]:
        pid = liar.publish(topic, b"fake", qos=qos, retain=True, wait_ack=False)
        if qos:
            ack = liar.await_ack(R.PUBACK if qos == 1 else R.PUBREC, pid)
            assert ack.reason == (0x87 if version == 5 else 0x00)
            if qos == 2 and version != 5:
                liar.send(R.encode_pubrel(pid, version=version))
                liar.await_ack(R.PUBCOMP, pid)
    liar.ping()
    assert watcher.collect(0.3) == []
    late = b.raw(version)
    late.connect("sys-late")
    late.subscribe(("$SYS/#", 1))
    assert late.collect(0.3) == [], "a refused retained message was kept"


def test_sys_topics_are_retained_and_periodic(broker_factory):
    b = broker_factory({"broker": {"sys_interval_secs": 1}})
    first = b.client(5, "sys-first")
    first.subscribe("$SYS/broker/uptime", qos=0)
    m1 = first.get(timeout=3)
    # periodic: a fresh value within about one interval
    m2 = first.get(timeout=3)
    assert _int(m2.payload) >= _int(m1.payload)
    # retained: a late subscriber gets the last value at once
    late = b.client(5, "sys-late")
    late.subscribe("$SYS/broker/uptime", qos=0)
    m = late.get(timeout=0.9)
    if not m.retain:  # a periodic publish raced with the SUBSCRIBE
        m = late.get(timeout=0.9)
    assert m.retain is True


def test_sys_clients_connected_counts(broker_factory):
    b = broker_factory({"broker": {"sys_interval_secs": 1}})
    watch = b.client(5, "sys-count")
    extra = [b.client(4, f"sys-extra{i}") for i in range(3)]
    watch.subscribe("$SYS/broker/clients/connected", qos=0)
    # wait for a value that counts all four connections
    for _ in range(5):
        if _int(watch.get(timeout=3).payload) == 4:
            break
    else:
        raise AssertionError("clients/connected never reached 4")
    for c in extra:
        c.disconnect()
    for _ in range(5):
        if _int(watch.get(timeout=3).payload) == 1:
            break
    else:
        raise AssertionError("clients/connected never dropped back to 1")


def test_sys_interval_zero_disables(broker_factory):
    b = broker_factory({"broker": {"sys_interval_secs": 0}})
    c = b.client(5, "sys-off")
    c.subscribe("$SYS/#", qos=0)
    expect_nothing(c, 1.5)


# --------------------------------------------------------------- WebSocket
@pytest.mark.ferry_only
@pytest.mark.parametrize("version", VERSIONS)
def test_mqtt_over_websocket(broker, version):
    ws = broker.client(version, "ws-client", transport="websockets")
    tcp = broker.client(version, "tcp-client")
    ws.subscribe("ws/#", qos=1)
    tcp.subscribe("tcp/#", qos=1)
    # websocket -> tcp and tcp -> websocket, with a payload larger than a
    # single small frame
    big = bytes(range(256)) * 300
    ws.publish("tcp/x", big, qos=1)
    m = tcp.get()
    assert (m.topic, m.payload) == ("tcp/x", big)
    tcp.publish("ws/y", b"hello ws", qos=2)
    m = ws.get()
    assert (m.topic, m.payload, m.qos) == ("ws/y", b"hello ws", 1)


@pytest.mark.ferry_only
def test_websocket_wrong_path_rejected(broker):
    c = broker.client(5, "ws-wrong", transport="websockets", connect=False)
    c.c.ws_set_options(path="/not-mqtt")
    with pytest.raises(Exception):
        c.connect(timeout=3)


# -------------------------------------------------------------------- HTTP
@pytest.mark.ferry_only
def test_http_health(broker):
    url = f"http://{broker.host}:{broker.http_port}/health"
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers.get("Content-Type", "").startswith("application/json")
        assert json.loads(resp.read()) == {"status": "ok"}


@pytest.mark.ferry_only
@pytest.mark.parametrize("path, method, status, error", [
    ("/nope", "GET", 404, "not_found"),
    ("/health", "POST", 405, "method_not_allowed"),
])
def test_http_errors_are_json(broker, path, method, status, error):
    request = urllib.request.Request(f"http://{broker.host}:{broker.http_port}{path}", method=method, data=b"" if method == "POST" else None)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=5)
    assert e.value.code == status
    body = json.loads(e.value.read())
    assert body["status"] == status and body["error"] == error and path in body["message"], body


def _answer(sock: socket.socket, buffered: bytes) -> tuple[int, bytes]:
    """Reads one HTTP/1.1 answer with a Content-Length body; returns its
    status and whatever of the next answer arrived with it."""
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before the answer ended: {buffered!r}"
        buffered += chunk
    head, rest = buffered.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed inside the answer's body"
        rest += chunk
    return status, rest[length:]


@pytest.mark.ferry_only
@pytest.mark.parametrize("method, path, status", [
    ("GET", "/health", 200),
    ("GET", "/api/2/openapi.json", 200),
    ("DELETE", "/health", 405),
])
def test_a_body_the_handler_does_not_read_costs_neither_answer_nor_connection(broker, method, path, status):
    """A client may send the body after the head, in a write of its own
    (python-requests does). A server that answers without reading the body
    and closes has the body arrive at a closed socket: the kernel answers
    it with a reset, which can destroy the answer before the client reads
    it. Ferry reads such a body away and keeps the connection."""
    body = b'{"unread": true}'
    for _ in range(20):
        with socket.create_connection((broker.host, broker.http_port), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: ferry\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode())
            sock.sendall(body)
            answered, rest = _answer(sock, b"")
            assert answered == status
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: ferry\r\n\r\n")
            assert _answer(sock, rest)[0] == 200


# ----------------------------------------------------- config, logs, signals
@pytest.mark.ferry_only
def test_listener_lines_and_disabled_listeners(broker_factory):
    b = broker_factory(ws=False, http=False)
    log = "\n".join(b.log_lines())
    assert re.search(r"listening on mqtt://127\.0\.0\.1:\d+", log)
    assert "listening on ws://" not in log
    assert "listening on http://" not in log
    c = b.client(5, "only-mqtt")
    c.subscribe("x", qos=0)


@pytest.mark.ferry_only
def test_config_file_values_apply(broker_factory):
    b = broker_factory({
        "log": {"level": "debug", "format": "text"},
        "broker": {"receive_maximum": 7, "topic_alias_maximum": 3,
                   "max_packet_size_bytes": 4096, "max_keep_alive_secs": 30},
    })
    c = b.client(5, "cfg", keepalive=100)
    p = c.connack.props
    assert (p.get("ReceiveMaximum"), p.get("TopicAliasMaximum"), p.get("MaximumPacketSize"),
            p.get("ServerKeepAlive")) == (7, 3, 4096, 30)


@pytest.mark.ferry_only
def test_json_log_format(broker_factory):
    b = broker_factory({"log": {"format": "json", "level": "info"}})
    b.client(5, "json-log-client").publish("j/t", b"x", qos=1)
    lines = [l for l in b.log_lines() if l.strip()]
    assert lines
    for line in lines:
        assert isinstance(json.loads(line), dict), f"not a JSON object: {line!r}"


@pytest.mark.ferry_only
def test_invalid_config_fails_fast(tmp_path):
    import subprocess
    from conftest import ferry_binary
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[broker]\nqueue_overflow = "explode"\n')
    p = subprocess.run([str(ferry_binary()), "serve", "--config", str(cfg), "--mqtt",
                        "127.0.0.1:0", "--ws", "", "--http", "", "--data-dir",
                        str(tmp_path / "d")], capture_output=True, timeout=10)
    assert p.returncode != 0
    assert p.stderr.strip(), "no error message for an invalid config"


def _documented_refusal() -> str:
    """The error docs/security.md shows for `[listeners] mqtt = "0.0.0.0:1883"`
    in /etc/ferry/ferry.toml with no `[auth]`."""
    from conftest import REPO
    lines = (REPO / "docs" / "security.md").read_text().splitlines()
    found = [line for line in lines if line.startswith("Error: /etc/ferry/ferry.toml: key ")]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.ferry_only
def test_exposed_listener_without_authentication_refuses_to_start(tmp_path):
    """Issue 18: a listener beyond loopback that nobody could connect to is
    refused from the file and from the flags alike, with the error
    docs/security.md shows: the listener, and the keys that would fix it."""
    import os
    import subprocess
    from conftest import ferry_binary
    env = {k: v for k, v in os.environ.items() if "BACKTRACE" not in k}
    documented = _documented_refusal()
    cfg = tmp_path / "ferry.toml"
    cfg.write_text('[listeners]\nmqtt = "0.0.0.0:1883"\n')
    p = subprocess.run([str(ferry_binary()), "check-config", str(cfg)], capture_output=True,
                       text=True, timeout=10, env=env)
    assert p.returncode == 1
    assert p.stderr.splitlines()[0] == documented.replace("/etc/ferry/ferry.toml", str(cfg))
    # The same from the command line, with no file: refused before any
    # listener is bound (port 0, so that a regression binds nothing in use;
    # the timeout only bounds a broker that wrongly started).
    p = subprocess.run([str(ferry_binary()), "serve", "--mqtt", "0.0.0.0:0", "--ws", "",
                        "--http", "", "--data-dir", str(tmp_path / "data")],
                       capture_output=True, text=True, timeout=10, env=env)
    assert p.returncode == 1, p.stderr
    assert p.stderr.splitlines()[0] == documented.replace(
        "/etc/ferry/ferry.toml", "command line (no --config file)").replace(
        "0.0.0.0:1883", "0.0.0.0:0")
    assert "listening on" not in p.stderr


def _listen_backlog(port: int) -> int:
    """The backlog of the socket listening on 127.0.0.1:port: `ss` shows it
    as the Send-Q of a LISTEN socket."""
    import subprocess
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                         check=True, timeout=10).stdout.split()
    assert len(out) == 5 and out[0] == "LISTEN", out  # State Recv-Q Send-Q Local Peer
    return int(out[2])


@pytest.mark.ferry_only
@pytest.mark.parametrize("configured", [None, 77], ids=["system_maximum", "listen_backlog"])
def test_every_listener_has_the_listen_backlog(broker_factory, tmp_path, configured):
    """Issue 18: a reconnect storm must be queued, not dropped: every
    listener (MQTT, TLS, WebSocket, HTTP, HTTPS) listens with
    `listen_backlog`, by default the system's maximum."""
    from pki import make_pki
    pki = make_pki(tmp_path)
    tls = {"cert_file": str(pki.server.cert), "key_file": str(pki.server.key)}
    config = {"listener": [
        {"name": "tls", "protocol": "mqtt", "bind": "127.0.0.1:0", "tls": tls},
        {"name": "https", "protocol": "http", "bind": "127.0.0.1:0", "tls": tls},
    ]}
    if configured is not None:
        config["listen_backlog"] = configured
    b = broker_factory(config, wait={
        "tls": re.compile(r"listening on mqtts://(127\.0\.0\.1):(\d+) listener=tls\b"),
        "https": re.compile(r"listening on https://(127\.0\.0\.1):(\d+)")})
    with open("/proc/sys/net/core/somaxconn") as f:
        expected = configured or int(f.read())
    ports = {"mqtt": b.port, "ws": b.ws_port, "http": b.http_port, **b.ports}
    assert {name: _listen_backlog(port) for name, port in ports.items()} == \
        {name: expected for name in ports}


def _core_threads(pid: int) -> list[str]:
    names = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/comm") as f:
            names.append(f.read().strip())
    return sorted(n for n in names if n.startswith("ferry-core-"))


@pytest.mark.ferry_only
@pytest.mark.parametrize("configured", [None, 1, 3], ids=["per_cpu", "one", "three"])
def test_cores_sets_the_connection_threads(broker_factory, configured):
    """`cores` is how many threads serve connections; unset, one per CPU
    the process may run on. Each serves clients like any other."""
    b = broker_factory({} if configured is None else {"cores": configured})
    expected = configured or len(os.sched_getaffinity(0))
    assert _core_threads(b.proc.pid) == [f"ferry-core-{i}" for i in range(expected)]
    # More clients than threads, so every thread serves some.
    clients = [b.client(5, f"cores-{i}") for i in range(2 * expected)]
    clients[0].subscribe("cores/t", qos=1)
    for i, c in enumerate(clients[1:], 1):
        assert c.publish("cores/t", f"from {i}", qos=1) == 0
    got = {m.payload for m in clients[0].get_n(len(clients) - 1)}
    assert got == {f"from {i}".encode() for i in range(1, len(clients))}


@pytest.mark.ferry_only
def test_coalescing_cores_lose_and_reorder_nothing(broker_factory):
    """With `coalesce_us`, a core woken often naps before it waits for
    events: a stream of QoS 1 messages from clients spread over every
    core, which keeps the cores napping, still arrives whole and in each
    publisher's order."""
    b = broker_factory({"coalesce_us": 1000})
    sub = b.client(5, "coalesce-sub")
    sub.subscribe("coalesce/#", qos=1)
    publishers = [b.client(5, f"coalesce-pub-{i}") for i in range(4)]
    rounds = 50
    mids = [[p.publish_nowait(f"coalesce/{i}", f"{n}".encode()) for i, p in enumerate(publishers)]
            for n in range(rounds)]
    got = sub.get_n(rounds * len(publishers), timeout=20)
    for sent in mids:
        for p, mid in zip(publishers, sent):
            assert p.acknowledgement(mid) == 0
    for i in range(len(publishers)):
        seq = [int(m.payload) for m in got if m.topic == f"coalesce/{i}"]
        assert seq == list(range(rounds)), (i, seq)


@pytest.mark.ferry_only
@pytest.mark.parametrize("line, error", [
    ("listen_backlog = 0", "must be at least 1"),
    ("coalesce_us = 5000", "must be at most 1000 (µs)"),
], ids=["listen_backlog", "coalesce_us"])
def test_top_level_setting_errors_name_file_line_and_key(tmp_path, line, error):
    import subprocess
    from conftest import ferry_binary
    cfg = tmp_path / "ferry.toml"
    cfg.write_text(f'data_dir = "d"\n{line}\n')
    p = subprocess.run([str(ferry_binary()), "check-config", str(cfg)], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 1
    key = line.split(" ")[0]
    assert f"{cfg}:2: key `{key}`: {error}" in p.stderr, p.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_graceful_shutdown_with_clients(broker, sig):
    c = broker.client(5, "shutdown-victim")
    c.subscribe("s/#", qos=1)
    r = broker.raw(4)
    r.connect("shutdown-raw")
    assert broker.stop(sig, close_clients=False) == 0
    r.read_until_closed(timeout=2)
    c.wait_disconnected(timeout=2)
