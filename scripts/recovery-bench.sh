#!/usr/bin/env bash
# Recovery time and memory with a backlog (docs/durability.md, "Measured").
#
#   scripts/recovery-bench.sh 1000000      # 1 GB of 1 KiB messages queued
#   scripts/recovery-bench.sh 10000000     # 10 GB: needs that much free disk
#
# A persistent session subscribes to bench/# and goes offline; `ferry bench
# pubsub` publishes N 1 KiB QoS 1 messages, every one stored for it; the
# broker is killed with SIGKILL and started again twice (the first start
# replays the log tail and writes a snapshot, the second finds the
# snapshot). For each start it prints how long until the MQTT port accepts
# connections, the broker's RSS then, and its `durable state recovered` line.
set -euo pipefail

count=${1:?usage: recovery-bench.sh MESSAGES}
root=$(cd "$(dirname "$0")/.." && pwd)
ferry=${FERRY_BIN:-$root/target/release/ferry}
port=${PORT:-18830}
work=$(mktemp -d)
trap 'kill -9 "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT

# Room for the whole backlog in one session's queue.
printf '[broker]\nmax_queued_messages = 100000000\n' > "$work/ferry.toml"

start() {
  "$ferry" serve --mqtt "127.0.0.1:$port" --ws "" --http "" \
    --data-dir "$work/data" --config "$work/ferry.toml" > "$work/log" 2>&1 &
  pid=$!
}

wait_listening() {
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.005; done
}

start
wait_listening
# The offline subscriber: a persistent session (expiry 1 h) on bench/#.
mosquitto_sub -h 127.0.0.1 -p "$port" -V 5 -i offline -c -x 3600 -q 1 -t 'bench/#' -W 1 \
  > /dev/null 2>&1 || true
ulimit -n 20000
"$ferry" bench pubsub --broker "mqtt://127.0.0.1:$port" --publishers 100 \
  --messages "$count" --qos 1 --payload-size 1024 -q | grep -E 'published|delivered'
echo "log: $(du -sh "$work/data/log" | cut -f1)"

for run in "first start after kill -9" "second start after kill -9"; do
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  began=$(date +%s.%N)
  start
  wait_listening
  listening=$(date +%s.%N)
  rss=$(awk '/VmRSS/ {print $2 " " $3}' "/proc/$pid/status")
  printf '%s: listening after %.3f s, RSS %s\n' "$run" "$(echo "$listening - $began" | bc)" "$rss"
  grep -o 'durable state recovered.*' "$work/log"
done
