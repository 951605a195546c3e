"""How fast a twin MQTT connection applies what waits for it at the other
broker (docs/benchmarks.md, "An MQTT connection's backlog").

Starts Mosquitto (max_inflight_messages 20, no queue limit) and a Ferry
with THINGS things and a Ditto MQTT connection whose source reads
`telemetry/#` at QoS 1. Closes the connection (its persistent session at
Mosquitto keeps the subscription), lets DEVICES clients publish MESSAGES
QoS 1 `modify` commands of random things, opens the connection again and
times it from the PUT until every command is applied (the connection's
`mapped` figures).

    .venv/bin/python bench/twins_mqtt_connection.py target/release/ferry --messages 20000
"""

import argparse
import json
import random
import subprocess
import tempfile
import time

import paho.mqtt.client as mqtt
import requests


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ferry")
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--things", type=int, default=1000)
    parser.add_argument("--mosquitto-port", type=int, default=18830)
    parser.add_argument("--ferry-http-port", type=int, default=18090)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp()
    with open(f"{tmp}/mosquitto.conf", "w") as conf:
        conf.write(f"listener {args.mosquitto_port} 127.0.0.1\nallow_anonymous true\n"
                   "max_inflight_messages 20\nmax_queued_messages 0\n")
    mosquitto = subprocess.Popen(["mosquitto", "-c", f"{tmp}/mosquitto.conf"],
                                 stderr=subprocess.DEVNULL)
    http = f"127.0.0.1:{args.ferry_http_port}"
    ferry = subprocess.Popen([args.ferry, "serve", "--data-dir", f"{tmp}/data", "--mqtt", "",
                              "--ws", "", "--http", http, "--log-level", "warn"],
                             stderr=subprocess.DEVNULL)
    api = f"http://{http}/api/2"
    session = requests.Session()
    try:
        ready(lambda: session.get(f"http://{http}/health").ok)
        for i in range(args.things):
            body = {"features": {"lamp": {"properties": {"level": 0}}}}
            assert session.put(f"{api}/things/org.acme:lamp-{i}", json=body).status_code == 201
        connection = {
            "connectionType": "mqtt", "connectionStatus": "open",
            "uri": f"tcp://127.0.0.1:{args.mosquitto_port}",
            "sources": [{"addresses": ["telemetry/#"], "authorizationContext": ["nginx:ditto"],
                         "qos": 1}],
            "targets": [],
        }
        assert session.put(f"{api}/connections/devices", json=connection).status_code == 201
        status = f"{api}/connections/devices/status"
        ready(lambda: session.get(status).json()["liveStatus"] == "open")
        connection["connectionStatus"] = "closed"
        assert session.put(f"{api}/connections/devices", json=connection).status_code == 204

        devices = []
        for d in range(args.devices):
            device = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"device-{d}")
            device.max_inflight_messages_set(20)
            device.connect("127.0.0.1", args.mosquitto_port)
            device.loop_start()
            devices.append(device)
        published = []
        for k in range(args.messages):
            i = random.randrange(args.things)
            command = {"topic": f"org.acme/lamp-{i}/things/twin/commands/modify",
                       "headers": {"response-required": False},
                       "path": "/features/lamp/properties/level", "value": k}
            device = devices[k % args.devices]
            published.append(device.publish(f"telemetry/org.acme:lamp-{i}",
                                            json.dumps(command), qos=1))
        for info in published:
            info.wait_for_publish(60)

        connection["connectionStatus"] = "open"
        start = time.monotonic()
        assert session.put(f"{api}/connections/devices", json=connection).status_code == 204
        metrics = f"{api}/connections/devices/metrics"
        while True:
            mapped = session.get(metrics).json()["connectionMetrics"]["inbound"]["mapped"]
            done = mapped["success"]["total"] + mapped["failure"]["total"]
            if done >= args.messages:
                break
            time.sleep(0.02)
        took = time.monotonic() - start
        print(f"{args.messages} modifies through an MQTT connection in {took:.2f} s: "
              f"{args.messages / took:.0f}/s (failed {mapped['failure']['total']})")
    finally:
        ferry.terminate()
        mosquitto.terminate()
        ferry.wait()
        mosquitto.wait()


def ready(check, timeout=30.0):
    """Polls `check` (which may raise while a server starts) until true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise SystemExit("not ready in time")


if __name__ == "__main__":
    main()
