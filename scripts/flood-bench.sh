#!/usr/bin/env bash
# A flooding publisher next to well-behaved clients (docs/security.md,
# "Measured"): the latency of 10 p2p pairs at 2,000 msg/s QoS 1, alone,
# then beside 2 publishers sending QoS 0 as fast as they can, once with no
# limit and once with `max_publish_rate` set. Prints each run's latency line.
#
#   scripts/flood-bench.sh            # limit of 1000 msg/s per client
#   RATE_LIMIT=5000 scripts/flood-bench.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ferry=${FERRY_BIN:-$root/target/release/ferry}
port=${PORT:-18831}
limit=${RATE_LIMIT:-1000}
work=$(mktemp -d)
trap 'kill "${pid:-0}" "${flood:-0}" 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT

start() { # $1: max_publish_rate (0: none)
  printf '[broker]\nmax_publish_rate = %s\n' "$1" > "$work/ferry.toml"
  rm -rf "$work/data"
  "$ferry" serve --mqtt "127.0.0.1:$port" --ws "" --http "" \
    --data-dir "$work/data" --config "$work/ferry.toml" > "$work/log" 2>&1 &
  pid=$!
  until grep -q "listening on mqtt" "$work/log"; do sleep 0.1; done
}

stop() { kill "$pid"; wait "$pid" || true; }

victim() { # $1: label
  "$ferry" bench p2p --broker "mqtt://127.0.0.1:$port" --pairs 10 --rate 2000 \
    --duration 15 --qos 1 --broker-pid "$pid" --json "$work/victim.json" > /dev/null 2>&1
  python3 - "$1" "$work/victim.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
lat, ack = r["latency"], r["ack_latency"]
print(f"{sys.argv[1]:<45} delivered {r['delivery']['delivered_percent']:.1f}%"
      f"  latency p50 {lat['p50_us'] / 1000:.2f} ms p99 {lat['p99_us'] / 1000:.2f} ms"
      f"  PUBACK p50 {ack['p50_us'] / 1000:.2f} ms p99 {ack['p99_us'] / 1000:.2f} ms")
PY
}

flooder() {
  "$ferry" bench p2p --broker "mqtt://127.0.0.1:$port" --pairs 2 --rate 1000000 \
    --duration 25 --qos 0 > "$work/flood.out" 2>&1 &
  flood=$!
  sleep 3 # let the flood reach its pace before the victim starts measuring
}

start 0
victim "alone, no limit"
flooder
victim "beside a flood, no limit"
wait "$flood" || true
echo "the flood, unlimited:"; grep -E "^  received" "$work/flood.out" || true
stop

start "$limit"
flooder
victim "beside a flood, max_publish_rate = $limit"
wait "$flood" || true
echo "the flood, limited:"; grep -E "^  received" "$work/flood.out" || true
stop
