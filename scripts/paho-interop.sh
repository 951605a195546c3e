#!/usr/bin/env bash
# Runs the Eclipse Paho interoperability suites (MQTT 3.1.1: client_test.py,
# MQTT 5.0: client_test5.py) against a freshly built Ferry, with the broker
# settings the suites expect: subscriptions to test/nosubscribe refused,
# maximum keep-alive 60 s.
#
# The suite is not part of this repository; pass a checkout of
# eclipse/paho.mqtt.testing:
#   bash scripts/paho-interop.sh /path/to/paho.mqtt.testing
set -euo pipefail
suite=${1:?usage: scripts/paho-interop.sh PATH_TO_PAHO_MQTT_TESTING}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p ferry

work=$(mktemp -d)
trap 'kill "$ferry" 2>/dev/null || true; wait "$ferry" 2>/dev/null || true; rm -rf "$work"' EXIT
cat > "$work/ferry.toml" <<'TOML'
[listeners]
ws = ""
http = ""
[broker]
deny_subscribe = ["test/nosubscribe"]
max_keep_alive_secs = 60
TOML
target/release/ferry serve --config "$work/ferry.toml" --mqtt 127.0.0.1:0 --data-dir "$work/data" 2>"$work/ferry.log" &
ferry=$!
until port=$(grep -o 'listening on mqtt://127.0.0.1:[0-9]*' "$work/ferry.log" | grep -o '[0-9]*$'); do
    kill -0 "$ferry" || { cat "$work/ferry.log"; exit 1; }
    sleep 0.1
done

cd "$suite/interoperability"
status=0
# client_test.py reads -p but then hands it on to unittest, which refuses
# it; so set its module globals the way its __main__ block would.
PORT=$port python3 - <<'PY' || status=1
import os, sys, unittest
sys.argv = ["client_test.py"]
import client_test as suite
suite.topics = ("TopicA", "TopicA/B", "Topic/C", "TopicA/C", "/TopicA")
suite.wildtopics = ("TopicA/+", "+/C", "#", "/#", "/+", "+/+", "TopicA/#")
suite.nosubscribe_topics = ("test/nosubscribe",)
suite.host, suite.port = "localhost", int(os.environ["PORT"])
unittest.main(module=suite, argv=sys.argv)
PY
python3 client_test5.py -p "$port" || status=1
exit $status
