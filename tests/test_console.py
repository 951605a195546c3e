"""The web console (issue 17): its embedded assets as the binary serves
them, and the console itself in Debian's chromium, driven by
playwright-core (tests/browser/console.test.mjs) against a real ferry with
real paho clients: what the browser does, these clients feel."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
import requests

from conftest import REPO, make_password_file
from helpers import expect_nothing

pytestmark = pytest.mark.ferry_only  # Ferry's console

BROWSER_DIR = REPO / "tests" / "browser"
# Kept after the run (and gitignored): the screenshots are looked at.
SCREENSHOTS = BROWSER_DIR / "screenshots"
CHROMIUM = "/usr/bin/chromium"
# The whole browser part of one test stays under the per-test timeout.
BROWSER_TIMEOUT = int(os.environ.get("CONSOLE_BROWSER_TIMEOUT", "50"))
USER, PASSWORD = "alice", "wonderland-7"


def _base(b) -> str:
    return f"http://127.0.0.1:{b.http_port}"


def test_the_console_is_served_with_its_policy_and_types(broker_factory):
    b = broker_factory()
    base = _base(b)
    index = requests.get(base + "/", timeout=10)
    assert index.status_code == 200
    assert index.headers["content-type"] == "text/html; charset=utf-8"
    assert index.text == (REPO / "console" / "dist" / "index.html").read_text()
    csp = index.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "unsafe" not in csp
    assert index.headers["cache-control"] == "no-cache"
    assert index.headers["x-content-type-options"] == "nosniff"
    for name, kind in [("app.js", "text/javascript; charset=utf-8"),
                       ("app.css", "text/css; charset=utf-8"), ("favicon.svg", "image/svg+xml")]:
        r = requests.get(f"{base}/console/{name}", timeout=10)
        assert r.status_code == 200, name
        assert r.headers["content-type"] == kind
        assert r.content == (REPO / "console" / "dist" / name).read_bytes()
        again = requests.get(f"{base}/console/{name}", timeout=10,
                             headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
    # Unknown paths stay JSON errors, in the API and beside the console.
    for path in ["/api/v1/no-such-thing", "/console/nope.js", "/elsewhere"]:
        r = requests.get(base + path, timeout=10)
        assert r.status_code == 404, path
        assert r.json()["status"] == 404 and r.json()["error"] == "not_found"


def test_a_console_login_is_its_user_on_the_twin_api(broker_factory, tmp_path):
    passwords = make_password_file(tmp_path / "passwd", {USER: PASSWORD})
    b = broker_factory({"auth": {"password_file": str(passwords)}, "admin": {"users": [USER]}})
    base = _base(b)
    thing = "org.example:session-1"
    r = requests.put(f"{base}/api/2/things/{thing}", json={"attributes": {"a": 1}},
                     auth=(USER, PASSWORD), timeout=10)
    assert r.status_code == 201, r.text
    browser = requests.Session()
    assert browser.get(f"{base}/api/2/things/{thing}", timeout=10).status_code == 401
    r = browser.post(f"{base}/api/v1/login", json={"username": USER, "password": PASSWORD},
                     timeout=10)
    assert r.status_code == 200, r.text
    # The default policy names the creator, nginx:alice: the cookie is alice there too.
    r = browser.get(f"{base}/api/2/things/{thing}", timeout=10)
    assert r.status_code == 200 and r.json()["attributes"] == {"a": 1}
    assert browser.post(f"{base}/api/v1/logout", timeout=10).status_code in (200, 204)
    assert browser.get(f"{base}/api/2/things/{thing}", timeout=10).status_code == 401


def test_no_password_dialog_for_the_consoles_requests(broker_factory, tmp_path):
    passwords = make_password_file(tmp_path / "passwd", {USER: PASSWORD})
    b = broker_factory({"auth": {"password_file": str(passwords)}, "admin": {"users": [USER]}})
    base = _base(b)
    for path in ["/api/v1/me", "/api/v1/overview/stream", "/api/2/things"]:
        # curl and other clients are challenged, as the admin API's contract says...
        r = requests.get(base + path, timeout=10)
        assert r.status_code == 401 and r.headers["www-authenticate"] == 'Basic realm="ferry"'
        # ...a browser's script is not: the challenge would open the browser's own dialog.
        r = requests.get(base + path, timeout=10, headers={"Sec-Fetch-Mode": "cors"})
        assert r.status_code == 401 and "www-authenticate" not in r.headers, path
        r = requests.get(base + path, timeout=10, headers={"Sec-Fetch-Mode": "navigate"})
        assert r.headers["www-authenticate"] == 'Basic realm="ferry"'


def _browser(env: dict[str, str]) -> None:
    """Runs the browser script with `env`; its output is printed (pytest
    shows it on failure, -s always) and its exit status asserted."""
    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} is missing: apt-get install chromium " \
        "(scripts/test.sh does)"
    assert (BROWSER_DIR / "node_modules" / "playwright-core").is_dir(), \
        "tests/browser/node_modules is missing: run `npm ci` there (scripts/test.sh does)"
    full = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1", "CHROMIUM": CHROMIUM,
            "CONSOLE_SCREENSHOTS": str(SCREENSHOTS), **env}
    run = subprocess.run(["node", "--test", "--test-reporter=spec", "console.test.mjs"],
                         cwd=BROWSER_DIR, env=full, capture_output=True, text=True,
                         timeout=BROWSER_TIMEOUT)
    print(run.stdout)
    print(run.stderr)
    assert run.returncode == 0, f"the browser tests failed (exit {run.returncode}):\n" \
        f"{run.stdout[-6000:]}\n{run.stderr[-3000:]}"


class Ticker:
    """A paho client publishing `explore/tick` ten times a second while the
    browser runs, and subscribed to it: the overview's rates and latency
    and the topic explorer need traffic."""

    def __init__(self, client):
        self.client = client
        client.subscribe("explore/tick", qos=0)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        n = 0
        while not self.stop.wait(0.1):
            n += 1
            self.client.publish("explore/tick", f"tick-{n}".encode(), qos=0)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)


def test_the_console_in_a_browser(broker_factory, tmp_path):
    passwords = make_password_file(tmp_path / "passwd", {USER: PASSWORD, "bob": "builder-3"})
    b = broker_factory({
        "auth": {"password_file": str(passwords), "allow_anonymous": True},
        "admin": {"users": [USER]},
        "endpoints": {"mirror": {"type": "topic", "topic": "mirror/{topic}"}},
        "routes": {"copy": {"route": "FROM sensors/# INTO mirror"}},
    })
    base = _base(b)
    auth = (USER, PASSWORD)

    ticker = b.client(5, "console-ticker")
    subscriber = b.client(5, "console-subscriber")
    subscriber.subscribe("console/in", qos=1)
    victim = b.client(5, "console-victim-01")
    offline = b.client(5, "console-offline", clean=False, connect=False)
    offline.connect({"SessionExpiryInterval": 3600})
    offline.subscribe("offline/#", qos=1)
    offline.disconnect()
    retained_payload = "21.5 °C"
    ticker.publish("console/retained/a", retained_payload.encode(), qos=1, retain=True)
    thing_id = "org.example:console-1"
    attributes = {"site": "plant-3", "floor": 2}
    r = requests.put(f"{base}/api/2/things/{thing_id}", json={"attributes": attributes},
                     auth=auth, timeout=10)
    assert r.status_code == 201, r.text

    with Ticker(ticker):
        _browser({
            "FERRY_URL": base, "CONSOLE_MODE": "login",
            "FERRY_USER": USER, "FERRY_PASSWORD": PASSWORD,
            "EXPECT_CONNECTIONS": "3",
            "DISCONNECT_CLIENT": "console-victim-01", "OFFLINE_CLIENT": "console-offline",
            "RETAINED_TOPIC": "console/retained/a", "RETAINED_PAYLOAD": retained_payload,
            "EXPLORE_FILTER": "explore/#", "EXPLORE_PAYLOAD_PREFIX": "tick-",
            "SUBSCRIBER_CLIENT": "console-subscriber", "SUBSCRIBER_FILTER": "console/in",
            "PUBLISH_TOPIC": "console/in", "PUBLISH_PAYLOAD": "from the console",
            "ENDPOINT_NAME": "mirror",
            "THING_ID": thing_id, "THING_ATTRIBUTES": json.dumps(attributes),
        })

    # What the browser did, as the MQTT clients and the API see it.
    assert victim.wait_disconnected() == 0x98  # Administrative action
    assert subscriber.get().payload == b"from the console"
    late = b.client(5, "console-late")
    late.subscribe("console/retained/#", qos=1)
    expect_nothing(late)
    r = requests.get(f"{base}/api/v1/sessions/console-offline", auth=auth, timeout=10)
    assert r.status_code == 404, r.text
    endpoints = requests.get(f"{base}/api/v1/endpoints", auth=auth, timeout=10).json()
    rows = endpoints["data"] if isinstance(endpoints, dict) else endpoints
    assert [e["state"] for e in rows if e["name"] == "mirror"] == ["paused"]


def test_the_console_on_loopback_with_no_users(broker_factory):
    b = broker_factory()
    b.client(5, "console-only-client")
    _browser({"FERRY_URL": _base(b), "CONSOLE_MODE": "anonymous", "EXPECT_CONNECTIONS": "1"})
