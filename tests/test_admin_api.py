"""The admin REST API under /api/v1 (issue 17) against the real binary,
with real paho clients (3.1.1 and 5) connected: authentication (Basic,
Bearer JWT, the console's cookie login, the loopback rule), every
resource and filter, paging, acting on clients, sessions, retained
messages and endpoints, publishing, the live streams read as Server-Sent
Events, and an OpenAPI document validated and probed path by path."""

from __future__ import annotations

import base64
import json
import re
import time

import jwt
import pytest
import requests
from openapi_spec_validator import validate

from conftest import make_password_file, to_toml

pytestmark = pytest.mark.ferry_only  # Ferry's admin API

USERS = {"alice": "alice-pw", "oscar": "oscar-pw", "bob": "bob-pw", "dev": "dev-pw"}
SECRET = "a-shared-secret-of-at-least-32-bytes!"
ACL = """
[groups]
ops = ["oscar"]

[[rule]]
permission = "deny"
action = "publish"
topics = ["secret/#"]

[[rule]]
permission = "allow"
action = "all"
topics = ["#"]
"""
DEADLINE = 10.0


def until(check, what: str, timeout: float = DEADLINE):
    """Polls `check` until it returns something truthy, which it returns."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what} (last: {value!r})")
        time.sleep(0.05)


class Api:
    """requests against /api/v1 with one set of credentials (or none)."""

    def __init__(self, broker, auth=None, port=None):
        self.base = f"http://{broker.host}:{port or broker.http_port}/api/v1"
        self.session = requests.Session()
        if isinstance(auth, tuple):
            self.session.auth = auth
        elif isinstance(auth, str):
            self.session.headers["Authorization"] = f"Bearer {auth}"

    def get(self, path, **params):
        return self.session.get(self.base + path, params=params, timeout=10)

    def post(self, path, body=None, **params):
        return self.session.post(self.base + path, json=body, params=params, timeout=10)

    def delete(self, path, **params):
        return self.session.delete(self.base + path, params=params, timeout=10)

    def ok(self, path, **params):
        response = self.get(path, **params)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()


def error_of(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["status"] == status and body["error"] == code and body["message"], body
    return body


class Sse:
    """A Server-Sent Events reader on a `requests` stream: (event, data)
    pairs as EventSource dispatches them; comments are kept apart, since
    the topic stream's first one says its subscription is in place."""

    def __init__(self, api: Api, path: str, **params):
        self.response = api.session.get(api.base + path, params=params, stream=True,
                                        timeout=(5, 20))
        self.chunks = self.response.iter_content(chunk_size=None)
        self.buffer = b""
        self.comments: list[str] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.response.close()

    def _line(self) -> str:
        while b"\n" not in self.buffer:
            chunk = next(self.chunks, None)
            assert chunk is not None, "the stream ended"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def comment(self) -> str:
        while not self.comments:
            line = self._line()
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
        return self.comments.pop(0)

    def event(self) -> tuple[str, dict]:
        name, data = "message", []
        while True:
            line = self._line()
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                return name, json.loads("\n".join(data))


def rfc3339(text: str) -> float:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", text), text
    return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone


# ---------------------------------------------------------------- brokers
@pytest.fixture(scope="module")
def password_file(tmp_path_factory):
    return make_password_file(tmp_path_factory.mktemp("admin") / "passwd", USERS)


def guarded_config(password_file, tmp_path, admins=("alice",)) -> dict:
    acl = tmp_path / "acl.toml"
    acl.write_text(ACL)
    secret = tmp_path / "jwt.secret"
    secret.write_text(SECRET + "\n")
    return {
        "auth": {"password_file": str(password_file), "acl_file": str(acl),
                 "jwt": {"secret_file": str(secret)}},
        "admin": {"users": list(admins), "groups": ["ops", "jwt-ops"]},
        "listener": [{"name": "public", "protocol": "http", "bind": "0.0.0.0:0"}],
    }


@pytest.fixture
def guarded(broker_factory, password_file, tmp_path):
    """Users from a password file, alice an administrator by name and
    oscar by the ACL's group `ops`; bob and dev are not. A JWT key too,
    and a second HTTP listener bound beyond loopback."""
    wait = {"public": re.compile(r"listening on http://(0\.0\.0\.0):(\d+)")}
    return broker_factory(guarded_config(password_file, tmp_path), wait=wait)


def token(**claims) -> str:
    now = int(time.time())
    return jwt.encode({"iat": now, "exp": now + 600, **claims}, SECRET, algorithm="HS256")


def device(b, client_id, version=5, user="dev", props=None, **kw):
    c = b.client(version, client_id, connect=False, **kw)
    c.c.username_pw_set(user, USERS[user])
    assert c.connect(props).reason == 0
    return c


# ------------------------------------------------------------ authentication
def test_a_fresh_ferry_lets_loopback_in_as_anonymous(broker):
    api = Api(broker)
    assert api.ok("/me") == {"username": "anonymous"}
    info = api.ok("/info")
    assert info["version"] and info["uptime_seconds"] >= 0
    assert abs(rfc3339(info["started_at"]) - time.time()) < 60
    kinds = {(listener["kind"], listener["address"]) for listener in info["listeners"]}
    assert kinds == {("mqtt", f"127.0.0.1:{broker.port}"), ("ws", f"127.0.0.1:{broker.ws_port}"),
                     ("http", f"127.0.0.1:{broker.http_port}")}
    assert info["config"]["auth"]["password_file"] is None
    assert info["config"]["durability"]["enabled"] is True


def test_credentials_roles_and_the_loopback_rule(guarded, password_file):
    nobody = Api(guarded)
    response = nobody.get("/me")
    error_of(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"] == 'Basic realm="ferry"'
    error_of(Api(guarded, ("alice", "wrong")).get("/clients"), 401, "unauthorized")
    error_of(Api(guarded, ("bob", "bob-pw")).get("/clients"), 403, "forbidden")
    error_of(Api(guarded, ("bob", "bob-pw")).post("/reload"), 403, "forbidden")
    assert Api(guarded, ("alice", "alice-pw")).ok("/me") == {"username": "alice"}
    assert Api(guarded, ("oscar", "oscar-pw")).ok("/me") == {"username": "oscar"}, "by group"
    # the reload that existed before is behind the same layer now
    error_of(nobody.post("/reload"), 401, "unauthorized")
    reloaded = Api(guarded, ("alice", "alice-pw")).post("/reload")
    assert reloaded.status_code == 200 and reloaded.json()["loaded"]["users"] == 4
    # bearer tokens: by name, by the token's groups, or neither
    assert Api(guarded, token(sub="alice")).ok("/me") == {"username": "alice"}
    assert Api(guarded, token(sub="carol", groups=["jwt-ops"])).ok("/me") == {"username": "carol"}
    error_of(Api(guarded, token(sub="carol", groups=["other"])).get("/me"), 403, "forbidden")
    error_of(Api(guarded, "not.a.token").get("/me"), 401, "unauthorized")
    # the document and the login are open to anyone
    assert nobody.get("/openapi.json").status_code == 200
    # beyond loopback nothing comes in without credentials
    public = Api(guarded, port=guarded.ports["public"])
    error_of(public.get("/me"), 401, "unauthorized")
    assert Api(guarded, ("alice", "alice-pw"), port=guarded.ports["public"]).ok("/me")


def test_a_loopback_listener_with_credentials_configured_has_no_default(broker_factory,
                                                                         password_file):
    b = broker_factory({"auth": {"password_file": str(password_file)}})
    error_of(Api(b).get("/me"), 401, "unauthorized")
    # no [admin] users: nobody is an administrator
    error_of(Api(b, ("alice", "alice-pw")).get("/me"), 403, "forbidden")


def test_the_console_logs_in_with_a_cookie_and_out(guarded):
    api = Api(guarded)
    error_of(api.post("/login", {"username": "alice", "password": "nope"}), 401, "unauthorized")
    error_of(api.post("/login", {"username": "bob", "password": "bob-pw"}), 403, "forbidden")
    error_of(api.post("/login", {"user": "alice"}), 400, "bad_request")
    response = api.post("/login", {"username": "alice", "password": "alice-pw"})
    assert response.status_code == 200 and response.json() == {"username": "alice"}
    cookie = response.headers["Set-Cookie"]
    value = re.match(r"ferry_session=([0-9a-f]{64}); ", cookie)
    assert value, cookie
    attributes = {part.strip() for part in cookie.split(";")[1:]}
    assert attributes == {"HttpOnly", "SameSite=Strict", "Path=/"}, "no Secure without TLS"
    assert api.ok("/me") == {"username": "alice"}, "the session's cookie is sent back"
    assert api.ok("/clients")["meta"]["count"] == 0
    other = Api(guarded)
    other.session.cookies.set("ferry_session", "0" * 64)
    error_of(other.get("/me"), 401, "unauthorized")
    assert api.post("/logout").status_code == 204
    stale = Api(guarded)
    stale.session.cookies.set("ferry_session", value.group(1))
    error_of(stale.get("/me"), 401, "unauthorized")


def test_a_reload_ends_the_sessions_of_users_no_longer_administrators(broker_factory, tmp_path):
    users = tmp_path / "passwd"
    make_password_file(users, USERS)
    wait = {"public": re.compile(r"listening on http://(0\.0\.0\.0):(\d+)")}
    b = broker_factory(guarded_config(users, tmp_path), wait=wait)

    def logged_in(user):
        api = Api(b)
        assert api.post("/login", {"username": user, "password": USERS[user]}).status_code == 200
        assert api.ok("/me") == {"username": user}
        return api

    alice, oscar = logged_in("alice"), logged_in("oscar")
    # alice is no administrator any more (oscar still is, by his group)
    (b.workdir / "ferry.toml").write_text(to_toml(guarded_config(users, tmp_path, admins=[])))
    assert Api(b, ("alice", "alice-pw")).post("/reload").status_code == 200
    error_of(alice.get("/me"), 401, "unauthorized")
    error_of(Api(b, ("alice", "alice-pw")).get("/me"), 403, "forbidden")
    error_of(Api(b).post("/login", {"username": "alice", "password": "alice-pw"}), 403, "forbidden")
    assert oscar.ok("/me") == {"username": "oscar"}
    b.wait_log(r"console session ended: no longer an administrator")
    # oscar leaves the password file: his session ends with him
    users.unlink()
    make_password_file(users, {u: p for u, p in USERS.items() if u != "oscar"})
    assert oscar.post("/reload").status_code == 200
    error_of(oscar.get("/me"), 401, "unauthorized")
    b.wait_log(r"console session ended: no longer in the password file")


# ------------------------------------------------------------------- clients
def test_clients_with_their_figures_filters_and_pages(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    old = device(guarded, "dev-1", version=4)
    new = device(guarded, "dev-2", version=5)
    anon = guarded.client(5, "other-1")
    assert new.subscribe("a/#", qos=1) == [1]
    assert new.subscribe("b/+", qos=2, no_local=True) == [2]
    for n in range(3):
        assert old.publish(f"a/{n}", b"x" * 10, qos=1) == 0
    new.get_n(3)

    listed = api.ok("/clients")
    assert listed["meta"] == {"page": 1, "limit": 100, "count": 3}
    assert [c["client_id"] for c in listed["data"]] == ["dev-1", "dev-2", "other-1"]
    figures = until(lambda: [c for c in api.ok("/clients")["data"]
                             if c["client_id"] == "dev-1" and c["messages_in"] == 3],
                    "dev-1's three publishes counted")[0]
    assert figures["protocol"] == "3.1.1" and figures["username"] == "dev"
    assert figures["bytes_in"] > 3 * 10 and figures["bytes_out"] > 0
    assert figures["keep_alive"] == 60 and figures["clean_start"] is True
    assert abs(rfc3339(figures["connected_at"]) - time.time()) < 60
    assert figures["address"].startswith("127.0.0.1:") and figures["subscriptions"] == 0
    assert figures["listener"] == f"mqtt://127.0.0.1:0"
    receiver = until(lambda: [c for c in api.ok("/clients", client_id_prefix="dev-2")["data"]
                              if c["messages_out"] == 3 and c["inflight"] == 0],
                     "dev-2's three deliveries sent and acknowledged")[0]
    assert receiver["subscriptions"] == 2 and receiver["protocol"] == "5"
    assert receiver["queued"] == 0

    def ids(**params):
        return [c["client_id"] for c in api.ok("/clients", **params)["data"]]

    assert ids(client_id_prefix="dev-") == ["dev-1", "dev-2"]
    assert ids(username="dev") == ["dev-1", "dev-2"]
    assert ids(protocol="3.1.1") == ["dev-1"]
    assert ids(protocol="5") == ["dev-2", "other-1"]
    assert ids(address="127.0.0.1") == ["dev-1", "dev-2", "other-1"]
    assert ids(address=figures["address"]) == ["dev-1"]
    assert ids(address="10.") == []
    page = api.ok("/clients", page=2, limit=1)
    assert [c["client_id"] for c in page["data"]] == ["dev-2"]
    assert page["meta"] == {"page": 2, "limit": 1, "count": 3}
    assert api.ok("/clients", page=4, limit=1)["data"] == []
    error_of(api.get("/clients", limit=1001), 400, "bad_request")
    error_of(api.get("/clients", protocol="4"), 400, "bad_request")
    error_of(api.get("/clients", client_prefix="dev"), 400, "bad_request")

    one = api.ok("/clients/dev-2")
    assert one["client_id"] == "dev-2"
    assert one["subscriptions"] == [
        {"client_id": "dev-2", "filter": "a/#", "qos": 1, "no_local": False,
         "retain_as_published": False, "retain_handling": 0},
        {"client_id": "dev-2", "filter": "b/+", "qos": 2, "no_local": True,
         "retain_as_published": False, "retain_handling": 0},
    ]
    error_of(api.get("/clients/nobody"), 404, "client_not_found")
    assert anon and old


@pytest.mark.parametrize("version", [4, 5], ids=["v311", "v5"])
def test_disconnecting_a_client(guarded, version):
    api = Api(guarded, ("alice", "alice-pw"))
    victim = guarded.client(version, "victim")
    response = api.delete("/clients/victim", reason="maintenance window")
    assert response.status_code == 204, response.text
    reason = victim.wait_disconnected()
    if version == 5:
        assert reason == 0x98, "DISCONNECT Administrative action"
    guarded.wait_log(r"administrative action.*maintenance window")
    until(lambda: api.ok("/clients")["meta"]["count"] == 0, "the client gone from the list")
    error_of(api.delete("/clients/victim"), 404, "client_not_found")


# ------------------------------------------------------------------ sessions
def test_sessions_listed_looked_up_and_deleted_when_offline(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    keeper = device(guarded, "keep-1", clean=False, props={"SessionExpiryInterval": 300})
    assert keeper.subscribe("k/#", qos=1) == [1]
    keeper.disconnect()
    live = device(guarded, "live-1", version=4)
    assert live.publish("k/1", b"for the offline session", qos=1) == 0

    until(lambda: api.ok("/sessions/keep-1")["queued"] == 1, "the message queued for keep-1")
    assert api.ok("/sessions/keep-1") == {"client_id": "keep-1", "online": False,
                                          "expiry_interval": 300, "queued": 1, "subscriptions": 1}
    listed = api.ok("/sessions")
    assert [s["client_id"] for s in listed["data"]] == ["keep-1", "live-1"]
    assert listed["meta"]["count"] == 2
    assert [s["client_id"] for s in api.ok("/sessions", state="offline")["data"]] == ["keep-1"]
    assert [s["client_id"] for s in api.ok("/sessions", state="online")["data"]] == ["live-1"]
    assert [s["client_id"] for s in api.ok("/sessions", client_id_prefix="li")["data"]] == ["live-1"]
    assert api.ok("/sessions", limit=1, page=2)["data"][0]["client_id"] == "live-1"
    error_of(api.get("/sessions", state="asleep"), 400, "bad_request")

    error_of(api.delete("/sessions/live-1"), 409, "session_online")
    assert api.delete("/sessions/keep-1").status_code == 204
    error_of(api.get("/sessions/keep-1"), 404, "session_not_found")
    error_of(api.delete("/sessions/keep-1"), 404, "session_not_found")
    back = device(guarded, "keep-1", clean=False, props={"SessionExpiryInterval": 300})
    assert back.connack.session_present is False, "the session and its queue are gone"


def test_subscriptions_by_client_and_filter(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    one = device(guarded, "sub-1")
    two = device(guarded, "sub-2", version=4)
    assert one.subscribe("s/#", qos=1) == [1]
    assert one.subscribe("$share/g/jobs/+", qos=0) == [0]
    assert two.subscribe("s/#", qos=2) == [2]
    everything = api.ok("/subscriptions")
    assert [(s["client_id"], s["filter"], s["qos"]) for s in everything["data"]] == [
        ("sub-1", "$share/g/jobs/+", 0), ("sub-1", "s/#", 1), ("sub-2", "s/#", 2)]
    assert everything["meta"]["count"] == 3
    assert [s["client_id"] for s in api.ok("/subscriptions", filter="s/#")["data"]] == ["sub-1", "sub-2"]
    assert [s["filter"] for s in api.ok("/subscriptions", client_id="sub-2")["data"]] == ["s/#"]
    assert api.ok("/subscriptions", client_id="sub-1", filter="s/#")["meta"]["count"] == 1
    assert api.ok("/subscriptions", limit=2, page=2)["data"][0]["client_id"] == "sub-2"


# ------------------------------------------------------------------ retained
def test_retained_messages_listed_read_and_deleted_for_good(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    pub = device(guarded, "retainer")
    pub.publish("r/x/1", b"one", qos=1, retain=True,
                props={"ContentType": "text/plain", "UserProperty": [("k", "v")]})
    pub.publish("r/x/2", b"\xff\xfe", qos=0, retain=True)
    pub.publish("r/y", b"why", qos=1, retain=True)
    until(lambda: api.ok("/retained", filter="r/#")["meta"]["count"] == 3, "three retained")

    listed = api.ok("/retained", filter="r/x/#")
    assert [m["topic"] for m in listed["data"]] == ["r/x/1", "r/x/2"]
    first, binary = listed["data"]
    assert first["payload"] == "one" and base64.b64decode(first["payload_base64"]) == b"one"
    assert first["qos"] == 1 and first["retain"] is True and first["size"] == 3
    assert first["properties"] == {"content_type": "text/plain", "user_properties": {"k": "v"}}
    assert binary["payload"] is None and base64.b64decode(binary["payload_base64"]) == b"\xff\xfe"
    assert "properties" not in binary
    assert api.ok("/retained", filter="r/#", limit=1, page=3)["data"][0]["topic"] == "r/y"
    error_of(api.get("/retained", filter="r/#/x"), 400, "bad_request")

    assert api.ok("/retained/r/x/1")["payload"] == "one"
    assert api.delete("/retained/r/x/1").status_code == 204
    error_of(api.get("/retained/r/x/1"), 404, "retained_not_found")
    error_of(api.delete("/retained/r/x/1"), 404, "retained_not_found")
    reader = guarded.client(5, "reader")
    assert reader.subscribe("r/x/#", qos=1) == [1]
    assert reader.get().topic == "r/x/2", "only the other retained message is sent"

    guarded.restart()
    api = Api(guarded, ("alice", "alice-pw"))
    assert [m["topic"] for m in api.ok("/retained", filter="r/#")["data"]] == ["r/x/2", "r/y"], \
        "the delete is in the durable log"


# ------------------------------------------------------------------- publish
def test_publish_reaches_subscribers_at_each_qos_and_ignores_the_acl(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    v5 = device(guarded, "p-v5")
    v311 = device(guarded, "p-v311", version=4)
    assert v5.subscribe("secret/#", qos=2) == [2]
    assert v311.subscribe("secret/#", qos=2) == [2]
    # alice may not publish there over MQTT; the API is not under the ACL
    mqtt_alice = device(guarded, "alice-mqtt", user="alice")
    assert mqtt_alice.publish("secret/x", b"no", qos=1) == 0x87
    for qos in (0, 1, 2):
        body = {"topic": "secret/x", "payload": f"q{qos}", "qos": qos,
                "properties": {"content_type": "text/plain", "user_properties": {"from": "api"},
                               "message_expiry_interval": 60}}
        response = api.post("/publish", body)
        assert response.status_code == 200 and response.json() == {"delivered_to": 2}, response.text
        got = v5.get()
        assert (got.payload, got.qos) == (f"q{qos}".encode(), qos)
        assert got.props["ContentType"] == "text/plain"
        assert got.props["UserProperty"] == [("from", "api")]
        old = v311.get()
        assert (old.payload, old.qos) == (f"q{qos}".encode(), qos)
    binary = api.post("/publish", {"topic": "kept", "payload_base64": "AAE=", "retain": True})
    assert binary.json() == {"delivered_to": 0}
    assert api.ok("/retained/kept")["payload_base64"] == "AAE="
    for bad in [{"topic": "a/#", "payload": "x"}, {"topic": "a", "qos": 3},
                {"topic": "a", "payload": "x", "payload_base64": "eA=="},
                {"topic": "a", "payload_base64": "!!"}, {"topic": "a", "colour": "red"}, {}]:
        error_of(api.post("/publish", bad), 400, "bad_request")


# ------------------------------------------------------------------- streams
def test_the_topic_stream_shows_what_its_filter_matches(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    before = api.ok("/overview")["subscriptions"]
    pub = device(guarded, "streamed")
    with Sse(api, "/topics/stream", filter="s/#") as stream:
        assert stream.response.status_code == 200
        assert stream.response.headers["Content-Type"] == "text/event-stream"
        assert stream.comment() == 'subscribed to "s/#"'
        assert api.ok("/overview")["subscriptions"] == before + 1
        assert api.ok("/sessions")["meta"]["count"] == 1, "the stream's session is not listed"
        pub.publish("t/1", b"elsewhere", qos=1)
        pub.publish("s/1", b"hello", qos=1, retain=True)
        pub.publish("s/2", b"\x00", qos=0)
        name, first = stream.event()
        assert name == "message"
        assert (first["topic"], first["payload"], first["qos"], first["retain"]) == \
            ("s/1", "hello", 1, True)
        assert abs(rfc3339(first["time"]) - time.time()) < 60
        name, second = stream.event()
        assert (second["topic"], second["payload"], second["payload_base64"]) == ("s/2", "\x00", "AA==")
    until(lambda: api.ok("/overview")["subscriptions"] == before,
          "the in-broker subscription ended with the stream", timeout=20)
    error_of(api.get("/topics/stream"), 400, "bad_request")
    error_of(api.get("/topics/stream", filter="a/#/b"), 400, "bad_request")


def test_a_slow_topic_stream_loses_messages_and_says_how_many(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    pub = device(guarded, "flood")
    sent = 6000
    payload = b"p" * 4000
    with Sse(api, "/topics/stream", filter="flood/#") as stream:
        stream.comment()
        # 24 MB, more than the sockets between us hold, while nobody reads
        for n in range(sent):
            pub.c.publish("flood/x", payload, qos=0)
        # acknowledged once the broker has taken everything before it
        assert pub.publish("flood/sync", b"", qos=1) == 0
        received, dropped = 0, 0
        while received + dropped < sent + 1:
            name, data = stream.event()
            if name == "dropped":
                dropped += data["count"]
            else:
                received += 1
    assert dropped > 0, "the stream's buffer overflowed"
    assert received + dropped == sent + 1, (received, dropped)


def test_the_overview_and_its_stream(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    pub = device(guarded, "counted")
    sub = device(guarded, "counting", version=4)
    assert sub.subscribe("o/#", qos=1) == [1]
    snapshot = api.ok("/overview")
    assert snapshot["connections"] == 2 and snapshot["sessions_online"] == 2
    assert snapshot["subscriptions"] == 1 and set(snapshot["latency"]) == {"p50", "p90", "p99"}
    assert snapshot["disk_free_bytes"] > 0 and snapshot["log_bytes"] >= 0
    with Sse(api, "/overview/stream") as stream:
        name, first = stream.event()
        assert name == "overview" and set(first) == set(snapshot)
        for n in range(5):
            assert pub.publish("o/x", b"12345", qos=1) == 0
        sub.get_n(5)

        def moved():
            name, later = stream.event()
            return later if later["messages_in"] >= first["messages_in"] + 5 else None

        later = until(moved, "the counters moved")
        assert later["messages_out"] >= first["messages_out"] + 5
        assert later["bytes_in"] > first["bytes_in"]
        assert rfc3339(later["time"]) > rfc3339(first["time"])

        # Each event's latency is over the second before it: one of the
        # events since the first covers the five deliveries, and once
        # nothing more is delivered a second has no latency at all.
        def timed():
            name, event = stream.event()
            return event["latency"] if event["latency"]["p50"] is not None else None

        latency = later["latency"] if later["latency"]["p50"] is not None else until(timed, "a latency")
        assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] < 10, latency
        until(lambda: stream.event()[1]["latency"] == {"p50": None, "p90": None, "p99": None},
              "a quiet second")
    since_start = api.ok("/overview")["latency"]
    assert 0 < since_start["p50"] <= since_start["p99"] < 10, since_start


def test_streams_are_capped(guarded):
    api = Api(guarded, ("alice", "alice-pw"))
    streams = [Sse(api, "/overview/stream") for _ in range(64)]
    try:
        assert all(s.response.status_code == 200 for s in streams)
        error_of(api.get("/topics/stream", filter="#"), 503, "too_many_streams")
        streams.pop().response.close()
        until(lambda: (r := api.session.get(api.base + "/overview/stream", stream=True,
                                            timeout=5)).close() or r.status_code == 200,
              "a place freed by a closed stream")
    finally:
        for s in streams:
            s.response.close()


# ----------------------------------------------------------------- endpoints
def test_endpoint_pause_and_resume_with_a_topic_endpoint(broker_factory):
    b = broker_factory({"routes": {"copy": {"route": "FROM in/# INTO archive", "priority": 3}},
                        "endpoints": {"archive": {"type": "topic", "topic": "out/{topic}"}}})
    api = Api(b)
    assert api.ok("/routes")["data"] == [
        {"name": "copy", "route": "FROM in/# INTO archive", "filter": "in/#", "endpoint": "archive",
         "priority": 3, "ttl_seconds": 7200}]
    reader = b.client(5, "reader")
    assert reader.subscribe("out/#", qos=1) == [1]
    pub = b.client(4, "writer")

    def endpoint():
        [status] = api.ok("/endpoints")["data"]
        return status

    until(lambda: endpoint()["state"] == "connected", "the endpoint connected")
    assert endpoint()["type"] == "topic" and endpoint()["name"] == "archive"
    assert api.post("/endpoints/archive/pause").status_code == 204
    assert endpoint()["state"] == "paused"
    assert pub.publish("in/1", b"held", qos=1) == 0
    held = until(lambda: (e := endpoint())["queued_messages"] == 1 and e, "the message queued")
    assert held["queued_bytes"] > 0 and held["oldest_age_seconds"] >= 0 and held["sent"] == 0
    assert held["routed"] == 1 and held["dropped"] == {} and held["backoff_until"] is None
    assert api.post("/endpoints/archive/resume").status_code == 204
    got = reader.get()
    assert (got.topic, got.payload) == ("out/in/1", b"held")
    done = until(lambda: (e := endpoint())["sent"] == 1 and e["queued_messages"] == 0 and e,
                 "the message sent and off the queue")
    assert done["state"] == "connected"
    error_of(api.post("/endpoints/nowhere/pause"), 404, "endpoint_not_found")


# ------------------------------------------------------------------- OpenAPI
def test_the_openapi_document_is_valid_and_every_operation_answers(guarded):
    anonymous = Api(guarded)
    document = anonymous.ok("/openapi.json")
    validate(document)
    api = Api(guarded, ("alice", "alice-pw"))
    client = device(guarded, "probe")
    assert client.publish("probe/t", b"x", qos=1, retain=True) == 0x10, "no subscriber yet"
    values = {"client_id": "probe", "topic": "probe/t", "name": "nowhere"}
    probed = 0
    for path, item in document["paths"].items():
        assert path.startswith("/api/v1/")
        for method, operation in item.items():
            url = path[len("/api/v1"):]
            for name, value in values.items():
                url = url.replace("{" + name + "}", value)
            params = {"filter": "#"} if url == "/topics/stream" else {}
            body = None
            if url == "/publish":
                body = {"topic": "probe/t", "payload": "y"}
            if url == "/login":
                body = {"username": "alice", "password": "alice-pw"}
            response = api.session.request(method.upper(), api.base + url, json=body,
                                           params=params, stream=True, timeout=10)
            if response.status_code == 404:
                assert response.json()["error"] != "not_found", f"{method} {path} is not routed"
            response.close()
            documented = set(operation["responses"])
            assert str(response.status_code) in documented, (method, path, response.status_code)
            # without a session: a login's cookie would be sent back
            unauthenticated = requests.request(method.upper(), api.base + url, json=body,
                                               params=params, stream=True, timeout=10)
            unauthenticated.close()
            if operation.get("security") == []:
                assert unauthenticated.status_code != 401, (method, path)
            else:
                assert unauthenticated.status_code == 401, (method, path)
            probed += 1
    assert probed == 24
