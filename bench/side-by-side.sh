#!/usr/bin/env bash
# Runs the first side-by-side figures of docs/benchmarks.md: Ferry and
# Mosquitto on this machine, one after the other, measured by the same
# `ferry bench`. Until `ferry bench compare` exists, this is the recipe.
#
#   bash bench/side-by-side.sh > results.txt
#
# Mosquitto runs with its queue limits lifted: with the default
# max_queued_messages 1000 it drops most of these bursts at QoS 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p ferry >&2
B=target/release/ferry
ulimit -n 20000

work=$(mktemp -d)
printf 'listener 1897 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\nmax_inflight_messages 0\npersistence false\n' > "$work/mosquitto.conf"
$B serve --mqtt 127.0.0.1:1898 --ws "" --http "" --data-dir "$work/ferry" 2> "$work/ferry.log" &
ferry=$!
mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.log" 2>&1 &
mosquitto=$!
trap 'kill $ferry $mosquitto 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
until grep -q 'listening on mqtt://' "$work/ferry.log"; do sleep 0.1; done
until grep -q 'running' "$work/mosquitto.log"; do sleep 0.1; done

both() {
    echo "=== Ferry: $*"
    $B bench "$@" --broker mqtt://127.0.0.1:1898 --broker-pid $ferry
    echo "=== Mosquitto: $*"
    $B bench "$@" --broker mqtt://127.0.0.1:1897 --broker-pid $mosquitto
}
for qos in 0 1 2; do both pubsub --publishers 100 --messages 200000 --qos $qos; done
for qos in 0 1; do both fanout --publishers 5 --subscribers 1000 --messages 2000 --qos $qos; done
both p2p --pairs 100 --rate 10000 --duration 3 --qos 1
