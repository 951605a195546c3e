"""Prometheus metrics and readiness (issue 17): after a scripted workload
with real clients, the scraped counters equal the workload's counts
exactly; promtool accepts the exposition; /ready answers 200, and 503
naming the failed check; every expression of the Grafana dashboard names
only metrics that /metrics exposes, and promtool parses it."""

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import jwt
import pytest

import rawmqtt
from conftest import make_password_file

pytestmark = pytest.mark.ferry_only  # Ferry's /metrics and /ready

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "ferry.json"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def get(b, path: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://{b.host}:{b.http_port}{path}")
    if accept:
        request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"unparsable sample line: {line!r}"
        name, labels, value = m.groups()
        samples[(name, frozenset(LABEL.findall(labels or "")))] = float(value)
    return samples


# Every `reason` of ferry_disconnections_total (docs/metrics.md).
REASONS = ["client_gone", "truncated_packet", "connection_lost", "client_disconnect",
           "malformed_packet", "protocol_error", "keep_alive_timeout", "credentials_expired",
           "taken_over", "server_shutdown", "administrative_action"]


def scrape(b) -> dict[tuple[str, frozenset], float]:
    status, _, text = get(b, "/metrics")
    assert status == 200, text
    return parse(text)


def value(samples, name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} not exposed; have {sorted(k for k in samples if k[0] == name)}"
    return samples[key]


def listener_value(samples, name: str, **labels) -> float:
    """A sample of the test broker's MQTT listener (labelled by its
    configured address, mqtt://127.0.0.1:0)."""
    found = [v for (n, ls), v in samples.items() if n == name
             and dict(ls).get("listener", "").startswith("mqtt://")
             and all(dict(ls).get(k) == v2 for k, v2 in labels.items())]
    assert len(found) == 1, f"{name} of the MQTT listener: {found}"
    return found[0]


def wait_for(b, check, what: str, timeout: float = 5.0):
    """Scrapes until check(samples) holds; returns those samples."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(b)
        if check(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout}s; last scrape: "
                                 f"{ {k: v for k, v in samples.items() if k[0].startswith('ferry_')} }")
        time.sleep(0.05)


JWT_SECRET = "a-shared-secret-of-at-least-32-bytes-for-metrics"


@pytest.fixture
def metrics_broker(broker_factory, tmp_path):
    passwd = make_password_file(tmp_path / "passwd", {"alice": "wonderland"})
    secret = tmp_path / "jwt.secret"
    secret.write_text(JWT_SECRET + "\n")
    return broker_factory({
        "auth": {"password_file": str(passwd), "allow_anonymous": True,
                 "jwt": {"secret_file": str(secret)}},
        # No $SYS: its retained topics would move the retained count.
        "broker": {"sys_interval_secs": 0, "max_queued_messages": 5},
    })


def test_counters_equal_the_workload(metrics_broker):
    b = metrics_broker
    before = scrape(b)
    assert value(before, "ferry_retained_messages") == 0
    assert value(before, "ferry_subscriptions") == 0

    sub = b.client(5, "m-sub")
    sub.subscribe("m/#", qos=2)
    pub = b.client(4, "m-pub")
    sizes = {0: [3, 10], 1: [7, 1, 20], 2: [100]}
    for qos, payloads in sizes.items():
        for size in payloads:
            pub.publish(f"m/{qos}", b"x" * size, qos=qos)
    received = sub.get_n(sum(len(p) for p in sizes.values()))
    assert sorted(len(m.payload) for m in received) == sorted(s for p in sizes.values() for s in p)
    pub.publish("keep/this", b"retained", qos=1, retain=True)

    after = wait_for(b, lambda s: value(s, "ferry_messages_sent_total", qos="2")
                     - value(before, "ferry_messages_sent_total", qos="2") == 1,
                     "the QoS 2 delivery counted")
    for qos, payloads in sizes.items():
        q = str(qos)
        extra = 1 if qos == 1 else 0  # the retained publish
        delta = lambda name: value(after, name, qos=q) - value(before, name, qos=q)
        assert delta("ferry_messages_received_total") == len(payloads) + extra
        assert delta("ferry_payload_received_bytes_total") == sum(payloads) + 8 * extra
        assert delta("ferry_messages_sent_total") == len(payloads)
        assert delta("ferry_payload_sent_bytes_total") == sum(payloads)
    delivered = sum(len(p) for p in sizes.values())
    count = (value(after, "ferry_delivery_latency_seconds_count")
             - value(before, "ferry_delivery_latency_seconds_count"))
    assert count == delivered
    inf = value(after, "ferry_delivery_latency_seconds_bucket", le="+Inf")
    assert inf == value(after, "ferry_delivery_latency_seconds_count")
    # Delivered on the loopback within a second, every one.
    assert value(after, "ferry_delivery_latency_seconds_bucket", le="1.048576") == inf
    assert value(after, "ferry_delivery_latency_seconds_sum") > 0
    assert value(after, "ferry_retained_messages") == 1
    assert value(after, "ferry_subscriptions") == 1
    assert value(after, "ferry_clients_connected") == 2
    assert value(after, "ferry_sessions", state="online") == 2
    assert value(after, "ferry_network_received_bytes_total") > 0
    assert value(after, "ferry_network_sent_bytes_total") > 0
    assert listener_value(after, "ferry_connections") == 2
    assert listener_value(after, "ferry_connections_accepted_total") == 2
    assert value(after, "process_resident_memory_bytes") > 1 << 20
    assert value(after, "process_cpu_seconds_total") >= 0  # whole ticks: may still be 0
    assert abs(value(after, "process_start_time_seconds") - time.time()) < 300
    assert value(after, "ferry_store_segments") >= 1
    assert value(after, "ferry_store_disk_free_bytes") > 0


def test_drops_queues_refusals_and_sessions_are_counted(metrics_broker):
    b = metrics_broker
    before = scrape(b)

    # A persistent session offline with a queue of 5: 8 messages drop 3.
    away = b.client(5, "m-away", props={"SessionExpiryInterval": 3600})
    away.subscribe("q/#", qos=1)
    away.disconnect()
    wait_for(b, lambda s: value(s, "ferry_sessions", state="offline") == 1, "the session offline")
    pub = b.client(5, "m-pub2")
    for i in range(8):
        pub.publish("q/x", f"m{i}".encode(), qos=1)
    # A subscriber whose maximum packet size no delivery fits.
    small = b.client(5, "m-small", props={"MaximumPacketSize": 64})
    small.subscribe("big/#", qos=0)
    pub.publish("big/x", b"y" * 500, qos=1)
    # A wrong password and a token signed with another key: refused in
    # CONNACK, each counted under its method.
    assert b.connack(5, "alice", "not-the-password") == 0x86
    forged = jwt.encode({"sub": "mallory", "exp": int(time.time()) + 600},
                        "another-secret-of-at-least-32-bytes-long", algorithm="HS256")
    assert b.connack(5, None, forged) == 0x86

    after = wait_for(b, lambda s: value(s, "ferry_messages_dropped_total", reason="too_large")
                     - value(before, "ferry_messages_dropped_total", reason="too_large") == 1,
                     "the too large delivery dropped")
    delta = lambda name, **ls: value(after, name, **ls) - value(before, name, **ls)
    assert delta("ferry_messages_dropped_total", reason="queue_full") == 3
    assert value(after, "ferry_queued_messages") == 5
    assert value(after, "ferry_queued_bytes") == 5 * (len("q/x") + 2)
    assert value(after, "ferry_sessions", state="offline") == 1
    assert delta("ferry_authentication_failures_total", method="password") == 1
    assert delta("ferry_authentication_failures_total", method="jwt") == 1
    assert delta("ferry_authentication_failures_total", method="anonymous") == 0
    assert listener_value(after, "ferry_connections_refused_total", reason="connack") \
        - listener_value(before, "ferry_connections_refused_total", reason="connack") == 2


def test_refused_connections_are_counted_by_listener_and_reason(broker_factory):
    b = broker_factory({"broker": {"max_connections": 1, "sys_interval_secs": 0}})
    first = b.client(5, "m-first")
    refused = b.raw(5)
    assert refused.read_until_closed() == [], "closed at once, no CONNACK"
    samples = wait_for(b, lambda s: listener_value(
        s, "ferry_connections_refused_total", reason="max_connections") == 1,
        "the refusal counted")
    assert listener_value(samples, "ferry_connections_refused_total", reason="rate") == 0
    assert listener_value(samples, "ferry_connections_accepted_total") == 1
    assert listener_value(samples, "ferry_connections") == 1
    first.disconnect()
    wait_for(b, lambda s: listener_value(s, "ferry_connections") == 0
             and value(s, "ferry_clients_connected") == 0, "the connection gone")


def test_disconnections_are_counted_by_reason(metrics_broker):
    b = metrics_broker
    before = scrape(b)
    b.client(5, "m-bye").disconnect()
    b.client(4, "m-bye-311").disconnect()
    gone = b.raw(5)
    gone.connect("m-gone")
    gone.close()
    bad = b.raw(5)
    bad.connect("m-bad")
    bad.send(rawmqtt.encode_connect("m-bad"))  # a second CONNECT: 0x82
    bad.read_until_closed()
    first = b.raw(5)
    first.connect("m-twice")
    b.raw(5).connect("m-twice")
    first.read_until_closed()

    def counted(s):
        return sum(value(s, "ferry_disconnections_total", reason=r)
                   - value(before, "ferry_disconnections_total", reason=r)
                   for r in REASONS) == 5

    after = wait_for(b, counted, "five disconnections")
    delta = lambda reason: value(after, "ferry_disconnections_total", reason=reason) \
        - value(before, "ferry_disconnections_total", reason=reason)
    assert {r: delta(r) for r in REASONS if delta(r)} == {
        "client_disconnect": 2, "client_gone": 1, "protocol_error": 1, "taken_over": 1}


def test_the_exposition_passes_promtool_in_both_formats(metrics_broker):
    b = metrics_broker
    c = b.client(5, "m-promtool")
    c.subscribe("p/#", qos=1)
    c.publish("p/1", b"1", qos=1)
    c.get()
    status, content_type, text = get(b, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "# TYPE ferry_delivery_latency_seconds histogram" in text
    assert "# TYPE ferry_messages_received_total counter" in text
    status, content_type, openmetrics = get(b, "/metrics", "application/openmetrics-text")
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    assert openmetrics.endswith("# EOF\n")
    assert "# TYPE ferry_messages_received counter" in openmetrics


def test_ready_and_not_ready(broker_factory):
    ok = broker_factory()
    status, _, body = get(ok, "/ready")
    assert (status, json.loads(body)) == (200, {"status": "ready"})
    status, _, body = get(ok, "/health")
    assert status == 200

    # A free-space watermark no disk meets: alive, but not ready.
    full = broker_factory({"durability": {"min_free_disk_bytes": 1 << 62}})
    status, content_type, body = get(full, "/ready")
    assert status == 503 and content_type.startswith("application/json")
    answer = json.loads(body)
    assert answer["status"] == 503 and answer["error"] == "not_ready"
    assert "disk limit" in answer["message"], answer
    assert get(full, "/health")[0] == 200
    assert value(scrape(full), "ferry_store_full") == 1


def test_not_ready_while_the_log_directory_is_gone(broker_factory):
    """The probe writes in the log's directory: moved away (as a lost mount
    would leave it), no write can succeed, whoever the tests run as."""
    b = broker_factory()
    log_dir = b.workdir / "data" / "log"
    assert log_dir.is_dir()
    moved = log_dir.with_name("log-away")
    log_dir.rename(moved)
    try:
        status, _, body = get(b, "/ready")
        assert status == 503, body
        assert "durable log's directory is not writable" in json.loads(body)["message"]
    finally:
        moved.rename(log_dir)
    assert get(b, "/ready")[0] == 200


def dashboard_exprs() -> list[str]:
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "expr" and isinstance(v, str):
                    exprs.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(DASHBOARD.read_text()))
    return exprs


def test_the_dashboard_names_only_exposed_metrics(metrics_broker, tmp_path):
    b = metrics_broker
    exposed = {name for name, _ in scrape(b)}
    exprs = dashboard_exprs()
    assert len(exprs) >= 10, "the dashboard has its panels"
    used = set()
    for expr in exprs:
        names = set(re.findall(r"\b((?:ferry|process)_[a-z0-9_]+)\b", expr))
        assert names, f"an expression naming no Ferry metric: {expr}"
        missing = names - exposed
        assert not missing, f"{expr!r} names metrics /metrics does not expose: {missing}"
        used |= names
    assert "ferry_delivery_latency_seconds_bucket" in used
    # promtool parses each expression (as a recording rule), with
    # Grafana's variables as a plain range and a match-all.
    rules = tmp_path / "rules.yml"
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for i, expr in enumerate(exprs):
        plain = expr.replace("$__rate_interval", "1m").replace("$instance", ".*")
        lines += [f"      - record: dashboard:expr{i}", f"        expr: {json.dumps(plain)}"]
    rules.write_text("\n".join(lines) + "\n")
    check = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True,
                           text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
