"""The `http` endpoint (issue 14) through the real binary: routed messages
POSTed in batches to a real HTTP server (Python's http.server) that answers
as each test scripts it: 2xx delivered, 5xx sent again, other 4xx dropped
and counted."""

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.ferry_only


class Receiver:
    """An HTTP server on a free port: answers each POST with the next
    scripted status (200 once the script runs out) and keeps every request."""

    def __init__(self, statuses: list[int]):
        self.statuses = list(statuses)
        self.requests: queue.Queue = queue.Queue()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.requests.put((self.path, self.headers, body, status))  # case-insensitive
                answer = b'{"error": "scripted"}' if status >= 400 else b"{}"
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next(self, timeout: float = 10.0):
        return self.requests.get(timeout=timeout)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(request):
    r = Receiver(getattr(request, "param", []))
    yield r
    r.close()


def _edge(broker_factory, port: int):
    return broker_factory({
        "broker": {"sys_interval_secs": 1},
        "routes": {"telemetry": {"route": "FROM telemetry/# INTO ingest"}},
        "endpoints": {"ingest": {
            "type": "http", "url": f"http://127.0.0.1:{port}/v1/telemetry",
            "headers": {"X-Site": "plant-3"}, "bearer_token": "s3cret",
            "batch": {"max_messages": 50, "linger": "20ms"},
            "backoff": {"initial": "20ms", "max": "100ms"}}},
    })


def test_a_batch_is_one_post_of_a_json_array_with_headers_and_token(broker_factory, receiver):
    edge = _edge(broker_factory, receiver.port)
    device = edge.client(5, "device")
    device.publish("telemetry/t", b'{"t": 21.5}', qos=1,
                   props={"UserProperty": [("site", "plant-3")], "ContentType": "application/json"})
    path, headers, body, _ = receiver.next()
    assert path == "/v1/telemetry"
    assert headers["Authorization"] == "Bearer s3cret" and headers["X-Site"] == "plant-3"
    assert headers["Content-Type"].startswith("application/json")
    [message] = json.loads(body)
    assert message["topic"] == "telemetry/t" and message["payload"] == {"t": 21.5}
    assert message["qos"] == 1 and message["retain"] is False
    assert message["properties"]["user_properties"] == [["site", "plant-3"]]
    assert message["properties"]["content_type"] == "application/json"
    assert "s3cret" not in "\n".join(edge.log_lines())


@pytest.mark.parametrize("receiver", [[500, 503]], indirect=True)
def test_a_server_error_sends_the_same_batch_again(broker_factory, receiver):
    edge = _edge(broker_factory, receiver.port)
    edge.client(5, "device").publish("telemetry/t", b"1", qos=1)
    bodies = [receiver.next() for _ in range(3)]
    assert [status for *_, status in bodies] == [500, 503, 200]
    assert bodies[0][2] == bodies[1][2] == bodies[2][2], "the same batch each time"


@pytest.mark.parametrize("receiver", [[400]], indirect=True)
def test_a_client_error_drops_the_batch_and_counts_it(broker_factory, receiver):
    edge = _edge(broker_factory, receiver.port)
    device = edge.client(5, "device")
    device.publish("telemetry/t", b"refused", qos=1)
    assert receiver.next()[3] == 400
    device.publish("telemetry/t", b"taken", qos=1)
    _, _, body, status = receiver.next()
    assert status == 200 and [m["payload"] for m in json.loads(body)] == ["taken"]
    watcher = edge.client(5, "sys")
    watcher.subscribe("$SYS/broker/routes/ingest/dropped/http_400")
    assert watcher.get().payload == b"1"  # published only once there is a drop
