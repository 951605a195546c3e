#!/usr/bin/env bash
# Edge store-and-forward (issue 14; docs/benchmarks.md, "Edge store-and-
# forward"): IotEdgePerf's experiment with the edge and the cloud on this
# machine. `ferry bench burst` publishes 1 KiB QoS 1 messages into an edge
# and receives them at the upstream the edge forwards to (--receive-from).
# The upstream is always a Ferry; every broker starts on an empty data dir.
#
#   bench/edge.sh                       # all three parts, a 1,000,000-message outage
#   BACKLOG=300000 bench/edge.sh        # a smaller outage, for a smaller disk
#   bench/edge.sh steady                # or: outage-ferry, outage-mosquitto
#   WINDOW=1000 bench/edge.sh outage-ferry   # QoS 1 window edge → upstream
#   ENVELOPE=1 bench/edge.sh outage-ferry    # each batch up in one PUBLISH
#
# steady            an edge Ferry with the route FROM bench/# INTO cloud, an
#                   `mqtt` endpoint to the upstream, fsync batch (the default):
#                   BURST messages at RATE/s, batch.max_messages 500 and 1.
# outage-ferry      the upstream is SIGKILLed as soon as the bench's receiver
#                   is subscribed there (a persistent session, so nothing is
#                   lost upstream); BACKLOG messages pile up at the edge; once
#                   all are acknowledged the edge is kill -9'd and restarted on
#                   its data dir; then the upstream returns and the edge drains.
# outage-mosquitto  the same with Mosquitto as the edge, bridging bench/# out
#                   at QoS 1 with persistence (autosave every second).
#
# Each run prints the bench's report; the last lines sum up what the
# document's tables hold. JSON and charts stay in OUT (default a temp dir).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ferry=${FERRY_BIN:-$root/target/release/ferry}
mosquitto=${MOSQUITTO_BIN:-/usr/sbin/mosquitto}
rate=${RATE:-20000}
burst=${BURST:-300000}
backlog=${BACKLOG:-1000000}
# Unacknowledged messages from edge to upstream: the upstream's Receive
# Maximum, the endpoint's max_inflight and Mosquitto's in-flight limit (100,
# Ferry's default for the first two). A drain cannot beat WINDOW messages
# per round trip, and a round trip to a durable upstream includes its fsync.
window=${WINDOW:-100}
# With ENVELOPE=1 the edge sends each batch as one batch envelope (on the
# topic bench-envelopes), which the upstream Ferry unpacks: the window then
# counts batches, not messages.
envelope=${ENVELOPE:+'envelope_topic = "bench-envelopes"'}
# Seconds between the burst's last message (as the bench's once-a-second
# progress line shows it) and the edge's kill -9: with 2 every PUBACK is
# in and Mosquitto has autosaved since; 0 kills it within a second of the
# last message, inside Mosquitto's autosave interval (and may beat the last
# PUBACK, which then fails the run: run it again).
kill_delay=${KILL_DELAY:-2}
up_port=${PORT:-18840}
edge_port=$((up_port + 1))
edge_http=$((up_port + 2))
work=$(mktemp -d)
out=${OUT:-$work/out}
mkdir -p "$out"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"' EXIT

wait_listening() { # $1: port, $2: seconds at most
  local deadline=$((SECONDS + $2))
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    ((SECONDS < deadline)) || { echo "nothing listens on $1 after $2 s" >&2; return 1; }
    sleep 0.01
  done
}

# The upstream: room in the bench receiver's session for a whole backlog,
# and the deeper online queue docs/benchmarks-durability.md uses, so that
# the upstream's durable path is not what limits a drain.
upstream_start() {
  cat > "$work/upstream.toml" <<EOF
data_dir = "$work/upstream"
[log]
level = "warn"
[listeners]
mqtt = "127.0.0.1:$up_port"
ws = ""
http = ""
[broker]
max_queued_messages = 100000000
max_queued_bytes = 0
online_queue_messages = 20000
receive_maximum = $window
EOF
  "$ferry" serve --config "$work/upstream.toml" >> "$work/upstream.log" 2>&1 &
  upstream=$!
  pids+=("$upstream")
  wait_listening "$up_port" 120
}

# $1: batch.max_messages. The backoff is capped at 1 s (default 60 s) so
# that a drain is measured from the upstream's return, not from the end of
# a minute's wait; Mosquitto gets `restart_timeout 1` likewise.
ferry_edge_start() {
  cat > "$work/edge.toml" <<EOF
data_dir = "$work/edge"
[log]
level = "info"
[listeners]
mqtt = "127.0.0.1:$edge_port"
ws = ""
http = "127.0.0.1:$edge_http"
[routes.bench]
route = "FROM bench/# INTO cloud"
[endpoints.cloud]
type = "mqtt"
url = "mqtt://127.0.0.1:$up_port"
batch = { max_messages = $1 }
backoff = { initial = "100ms", max = "1s" }
max_inflight = $window
$envelope
EOF
  "$ferry" serve --config "$work/edge.toml" >> "$work/edge.log" 2>&1 &
  edge=$!
  pids+=("$edge")
  wait_listening "$edge_port" 600
}

# Mosquitto's per-client queue (default 1,000 messages, which would drop
# nearly all of an outage's backlog) is lifted, and its in-flight window
# set to the `mqtt` endpoint's, so what is measured is its persistence, not
# its defaults.
mosquitto_edge_start() {
  mkdir -p "$work/mosquitto"
  cat > "$work/mosquitto.conf" <<EOF
listener $edge_port 127.0.0.1
allow_anonymous true
user $(id -un)
persistence true
persistence_location $work/mosquitto/
autosave_interval 1
max_queued_messages 0
max_inflight_messages $window
connection cloud
address 127.0.0.1:$up_port
topic bench/# out 1
restart_timeout 1
EOF
  "$mosquitto" -c "$work/mosquitto.conf" >> "$work/mosquitto.log" 2>&1 &
  edge=$!
  pids+=("$edge")
  wait_listening "$edge_port" 600
}

alive() { # $1: the bench, which may have failed
  kill -0 "$1" 2>/dev/null || { cat "$work/progress" >&2; exit 1; }
}

kill9() { kill -9 "$1"; wait "$1" 2>/dev/null || true; }

edge_queued() { # the Ferry edge's backlog, from its metrics
  curl -s "http://127.0.0.1:$edge_http/metrics" |
    awk '/^ferry_route_queued_messages\{/ {n += $2} END {print n + 0}'
}

bench() { # $1: name, $2...: more options
  local name=$1
  shift
  "$ferry" bench burst --broker "mqtt://127.0.0.1:$edge_port" \
    --receive-from "mqtt://127.0.0.1:$up_port" --qos 1 --payload-size 1024 \
    --target-rate "$rate" --json "$out/$name.json" --plots "$out/$name" "$@"
}

summary() { # $1: name
  python3 - "$1" "$out/$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
b, d = r["burst"], r["delivery"]
line = (f"{sys.argv[1]:<18} source {b['source_rate']:>8.0f} msg/s  upstream {b['delivery_rate']:>8.0f} msg/s"
        f"  last message {b['last_message_latency_ms'] / 1000:>7.2f} s  max backlog {b['max_backlog']:>8}"
        f"  sent {d['sent']}  lost {d['lost']}  duplicates {d['duplicates']}")
if r.get("broker"):
    line += f"  edge CPU {r['broker']['cpu_percent']:.0f}% of a core"

if "drain" in b:
    dr = b["drain"]
    line += (f"\n{'':<18} drain {dr['messages_per_second']:>8.0f} msg/s: {dr['messages']} messages in"
             f" {dr['seconds']:.2f} s after the upstream's return at {dr['upstream_back_seconds']:.2f} s")
print(line)
PY
}

steady() {
  for batch in 500 1; do
    rm -rf "$work/upstream" "$work/edge"
    upstream_start
    ferry_edge_start "$batch"
    bench "steady-batch-$batch" --burst-length "$burst" --broker-pid "$edge" -q
    summary "steady-batch-$batch" | tee -a "$out/summary.txt"
    kill "$edge" "$upstream"
    wait "$edge" "$upstream" 2>/dev/null || true
  done
}

# $1: ferry or mosquitto
outage() {
  local kind=$1 name="outage-$1"
  rm -rf "$work/upstream" "$work/edge" "$work/mosquitto"
  upstream_start
  "${kind}_edge_start" 500
  # The receiver's session at the upstream must outlive the upstream's
  # absence, and the run the time the edge takes to be kill -9'd and come
  # back after the burst.
  bench "$name" --burst-length "$backlog" --session-expiry 3600 --drain-timeout 120 \
    > "$out/$name.txt" 2> "$work/progress" &
  local bench_pid=$!
  pids+=("$bench_pid")
  # The bench connects its publishers to the edge only once its receiver
  # holds its subscription at the upstream: from then on the upstream may go.
  until ss -Htn state established "( dport = :$edge_port )" | grep -q .; do
    alive "$bench_pid"
    sleep 0.005
  done
  kill9 "$upstream"
  local outage_began=$SECONDS
  until grep -q " sent $backlog " "$work/progress"; do alive "$bench_pid"; sleep 0.2; done
  sleep "$kill_delay"
  tail -1 "$work/progress"
  [[ $kind == ferry ]] && echo "edge backlog before kill -9: $(edge_queued) messages"
  kill9 "$edge"
  local began
  began=$(date +%s.%N)
  "${kind}_edge_start" 500
  printf 'edge restarted: listening after %.2f s\n' "$(echo "$(date +%s.%N) - $began" | bc)"
  [[ $kind == ferry ]] && echo "edge backlog after restart: $(edge_queued) messages"
  echo "upstream away for $((SECONDS - outage_began)) s; back now"
  upstream_start
  wait "$bench_pid"
  cat "$out/$name.txt"
  [[ $kind == ferry ]] && echo "edge backlog at the end: $(edge_queued) messages"
  summary "$name" | tee -a "$out/summary.txt"
  kill "$edge" "$upstream"
  wait "$edge" "$upstream" 2>/dev/null || true
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); free disk $(df -h --output=avail "$work" | tail -1)"
echo "output: $out"
case ${1:-all} in
  steady) steady ;;
  outage-ferry) outage ferry ;;
  outage-mosquitto) outage mosquitto ;;
  all) steady; outage ferry; outage mosquitto ;;
  *) echo "usage: $0 [steady|outage-ferry|outage-mosquitto|all]" >&2; exit 2 ;;
esac
