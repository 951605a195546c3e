"""Whether an http-push connection whose receiver is slower than the
modifies delivers every event (docs/benchmarks.md, "A slow receiver").

Starts a Ferry with THINGS things and an http-push connection (parallelism
1) sending every `modified` event to a receiver run here, which takes
DELAY seconds per request. Runs `ferry bench twins modify` for DURATION
seconds (far faster than the receiver), then waits until the receiver has
heard nothing for two seconds and reports how many distinct events
(topic, revision) it got of the modifies made, and the connection's
`dropped` and `missedEvents` figures.

    .venv/bin/python bench/twins_slow_receiver.py target/release/ferry
"""

import argparse
import http.server
import json
import shutil
import subprocess
import tempfile
import threading
import time

import requests

from twins_mqtt_connection import ready


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ferry")
    parser.add_argument("--things", type=int, default=1000)
    parser.add_argument("--duration", type=int, default=6)
    parser.add_argument("--delay", type=float, default=0.002)
    parser.add_argument("--http-port", type=int, default=18091)
    args = parser.parse_args()

    received = Received(args.delay)
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), received.handler())
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    data = tempfile.mkdtemp()
    url = f"http://127.0.0.1:{args.http_port}"
    ferry = subprocess.Popen([args.ferry, "serve", "--data-dir", data, "--mqtt", "", "--ws", "",
                              "--http", url.removeprefix("http://"), "--log-level", "warn"],
                             stderr=subprocess.DEVNULL)
    try:
        ready(lambda: requests.get(f"{url}/health").ok)
        bench = [args.ferry, "bench", "twins", "--url", url, "--things", str(args.things)]
        subprocess.run(bench[:3] + ["create"] + bench[3:] + ["--connections", "8"], check=True,
                       stdout=subprocess.DEVNULL)
        connection = {
            "connectionType": "http-push", "connectionStatus": "open",
            "uri": f"http://127.0.0.1:{receiver.server_address[1]}",
            "targets": [{"address": "POST:/events",
                         "topics": ["_/_/things/twin/events?filter=eq(topic:action,'modified')"],
                         "authorizationContext": ["nginx:ditto"]}],
            "specificConfig": {"parallelism": "1"},
        }
        stored = requests.put(f"{url}/api/2/connections/slow", json=connection)
        assert stored.status_code == 201, stored.text
        load = subprocess.run(bench[:3] + ["modify"] + bench[3:] +
                              ["--duration", str(args.duration), "--connections", "16"],
                              check=True, capture_output=True, text=True).stdout
        modifies = int(load.split(" requests")[0].split()[-1])
        loaded = time.monotonic()
        while received.quiet_for() < 2.0:
            time.sleep(0.5)
        drained = received.last - loaded
        metrics = requests.get(f"{url}/api/2/connections/slow/metrics").json()
        outbound = metrics["connectionMetrics"]["outbound"]
        print(f"{args.ferry}: {modifies} modifies, {len(received.events)} distinct events "
              f"received ({received.requests} requests), the last {drained:.0f} s after the load; "
              f"dropped {outbound['dropped']['success']['total']}, "
              f"missed {metrics['missedEvents']}")
    finally:
        ferry.terminate()
        ferry.wait(30)
        receiver.shutdown()
        shutil.rmtree(data, ignore_errors=True)


class Received:
    """What the receiver got: distinct events, requests, and when."""

    def __init__(self, delay: float):
        self.delay = delay
        self.events: set = set()
        self.requests = 0
        self.last = time.monotonic()

    def quiet_for(self) -> float:
        return time.monotonic() - self.last

    def handler(self):
        received = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (http.server's name)
                event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.events.add((event["topic"], event["revision"]))
                received.requests += 1
                received.last = time.monotonic()
                time.sleep(received.delay)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        return Handler


if __name__ == "__main__":
    main()
