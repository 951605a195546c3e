"""Logs (issue 17): one info line per client connect (client id, user,
address, protocol, listener) and one per disconnect with its reason, and
no password, token or Authorization value anywhere in the log of a run
with password and JWT clients and Basic and bearer HTTP requests, in the
text and the JSON format."""

import base64
import json
import re
import time
import urllib.error
import urllib.request

import jwt
import pytest

import rawmqtt
from conftest import make_password_file

pytestmark = pytest.mark.ferry_only  # Ferry's [log] and its lines

PASSWORD = "correct-horse-battery-staple-7731"
WRONG = "not-the-password-0042"
SECRET = "a-shared-secret-of-at-least-32-bytes-for-the-log-test"


def http_get(b, path: str, authorization: str) -> int:
    request = urllib.request.Request(f"http://{b.host}:{b.http_port}{path}",
                                     headers={"Authorization": authorization})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def lines_about(lines: list[str], client_id: str, event: str, fmt: str) -> list[str]:
    """The lines of `event` ("client connected" / "client disconnected")
    for `client_id`."""
    if fmt == "json":
        found = []
        for line in lines:
            record = json.loads(line)
            fields = record["fields"]
            if fields["message"].startswith(event) and fields.get("client_id") == client_id:
                found.append(line)
        return found
    return [line for line in lines if f" {event}" in line
            and re.search(rf'client_id="?{re.escape(client_id)}"?(\s|$)', line)]


def field(line: str, name: str, fmt: str) -> str:
    if fmt == "json":
        return str(json.loads(line)["fields"][name])
    m = re.search(rf'\b{name}=("(?:[^"\\]|\\.)*"|\S+)', line)
    assert m, f"no {name} in {line}"
    return m.group(1).strip('"')


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_connects_disconnects_and_no_secrets(broker_factory, tmp_path, fmt):
    passwd = make_password_file(tmp_path / "passwd", {"alice": PASSWORD})
    secret = tmp_path / "jwt.secret"
    secret.write_text(SECRET + "\n")
    b = broker_factory({
        "log": {"format": fmt, "level": "info"},
        "auth": {"password_file": str(passwd), "allow_anonymous": False,
                 "jwt": {"secret_file": str(secret)}},
    })
    token = jwt.encode({"sub": "bob", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()

    # A password client that says DISCONNECT.
    r = b.raw(5)
    r.connect("log-pw", username="alice", password=PASSWORD.encode())
    r.disconnect()
    # A JWT client (MQTT 3.1.1) whose socket just closes.
    r = b.raw(4)
    r.connect("log-jwt", username="bob", password=token.encode())
    r.close()
    # A wrong password: refused, never connected.
    assert b.connack(5, "alice", WRONG) == 0x86
    # A client whose keep-alive runs out (1 s, × 1.5).
    r = b.raw(5)
    r.connect("log-idle", keepalive=1, username="alice", password=PASSWORD.encode())
    silent = r
    # A protocol error: a second CONNECT (0x82).
    r = b.raw(5)
    r.connect("log-bad", username="alice", password=PASSWORD.encode())
    r.send(rawmqtt.encode_connect("log-bad", username="alice", password=PASSWORD.encode()))
    r.read_until_closed()
    # A session taken over by a second connection of the same id.
    first = b.raw(5)
    first.connect("log-twice", username="alice", password=PASSWORD.encode())
    second = b.raw(5)
    second.connect("log-twice", username="alice", password=PASSWORD.encode())
    first.read_until_closed()
    # HTTP requests with Basic and bearer credentials, good and bad.
    assert http_get(b, "/api/2/things/org.test:one", f"Basic {basic}") in (200, 404)
    assert http_get(b, "/api/2/things/org.test:one", f"Bearer {token}") in (200, 403, 404)
    assert http_get(b, "/api/2/things/org.test:one",
                    "Basic " + base64.b64encode(f"alice:{WRONG}".encode()).decode()) == 401
    assert http_get(b, "/metrics", f"Bearer {token}") == 200

    b.wait_log(r"client disconnected.*keep.alive", timeout=10)
    silent.close()
    # Still connected at shutdown: told the server is going.
    r = b.raw(5)
    r.connect("log-last", username="alice", password=PASSWORD.encode())
    assert b.stop(close_clients=False) == 0

    lines = b.log_lines()
    if fmt == "json":
        for line in lines:
            json.loads(line)  # every line is one JSON object
    expected = {
        "log-pw": "client_disconnect",
        "log-jwt": "client_gone",
        "log-idle": "keep_alive_timeout",
        "log-bad": "protocol_error",
        "log-last": "server_shutdown",
    }
    for client_id, reason in expected.items():
        connected = lines_about(lines, client_id, "client connected", fmt)
        assert len(connected) == 1, f"{client_id}: {connected}"
        disconnected = lines_about(lines, client_id, "client disconnected", fmt)
        assert len(disconnected) == 1, f"{client_id}: {disconnected}"
        assert field(disconnected[0], "reason", fmt) == reason, disconnected[0]
        line = connected[0]
        assert field(line, "peer", fmt).startswith("127.0.0.1:")
        assert field(line, "listener", fmt).startswith("mqtt://")
        if fmt == "json":
            assert json.loads(line)["level"] == "INFO"
            assert json.loads(disconnected[0])["level"] == "INFO"
        else:
            assert " INFO " in line and " INFO " in disconnected[0]
    pw = lines_about(lines, "log-pw", "client connected", fmt)[0]
    assert field(pw, "user", fmt) == "alice" and field(pw, "protocol", fmt) == "5.0"
    jwt_line = lines_about(lines, "log-jwt", "client connected", fmt)[0]
    assert field(jwt_line, "user", fmt) == "bob" and field(jwt_line, "protocol", fmt) == "3.1.1"
    bad = lines_about(lines, "log-bad", "client disconnected", fmt)[0]
    assert field(bad, "reason_code", fmt) == "0x82"
    twice = lines_about(lines, "log-twice", "client connected", fmt)
    assert len(twice) == 2
    gone = lines_about(lines, "log-twice", "client disconnected", fmt)
    # The first connection taken over, the second still there at shutdown.
    assert [field(line, "reason", fmt) for line in gone] == ["taken_over", "server_shutdown"]
    assert any("bad user name, password or token" in line for line in lines)

    log = "\n".join(lines)
    for secret_text in (PASSWORD, WRONG, token, basic, SECRET, token.split(".")[2]):
        assert secret_text not in log, f"a secret in the log: {secret_text[:8]}…"


def test_per_module_levels(broker_factory):
    """`[log] level` takes tracing directives: the broker's crate at warn
    keeps its connect lines out while the rest of Ferry logs at info."""
    b = broker_factory({"log": {"level": "info,ferry_broker=warn"}})
    r = b.raw(5)
    r.connect("quiet-module")
    r.disconnect()
    assert b.stop() == 0
    lines = b.log_lines()
    assert any("listening on mqtt://" in line for line in lines), "ferry's own info lines"
    assert not any("client connected" in line or "client disconnected" in line
                   for line in lines), "ferry_broker's info lines are filtered"

    b = broker_factory({"log": {"level": "info"}})
    r = b.raw(5)
    r.connect("loud-module")
    b.wait_log(r"client connected.*loud-module")
