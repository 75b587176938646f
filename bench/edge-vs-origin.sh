#!/usr/bin/env bash
# Does an edge's RL.LIMIT on warm keys wait on the network? Throughput of an edge with a
# live origin beside a standalone origin, same machine, same redis-benchmark settings, one
# run. Loopback only. Usage: bench/edge-vs-origin.sh [requests] [keys]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
keys=${2:-1000}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/ratchet" ./cmd/ratchet
common=(--metrics-listen "" --log-level warn)
"$work/ratchet" --listen 127.0.0.1:16381 --data-dir "" --cluster-secret s "${common[@]}" &
"$work/ratchet" --listen 127.0.0.1:16382 --role edge --origin 127.0.0.1:16381 --cluster-secret s "${common[@]}" &
for p in 16381 16382; do
  for _ in $(seq 50); do redis-cli -p $p PING >/dev/null 2>&1 && break; sleep 0.1; done
done
rps() { # port pipeline
  redis-benchmark -p "$1" -c 50 -n "$n" -P "$2" -r "$keys" --csv RL.LIMIT "key:__rand_int__" 1000000 60s |
    tail -1 | cut -d, -f2 | tr -d '"'
}
# Warm the keys on the edge first (every key read once from the origin).
redis-benchmark -p 16382 -c 50 -n $((keys * 20)) -r "$keys" -q RL.LIMIT "key:__rand_int__" 1000000 60s >/dev/null
printf '%-8s %16s %16s %8s\n' pipeline "origin alone" "edge (warm)" ratio
for pipe in 1 16; do
  o=$(rps 16381 "$pipe")
  e=$(rps 16382 "$pipe")
  printf '%-8s %16s %16s %8.2f\n' "-P $pipe" "$o" "$e" "$(echo "$e / $o" | bc -l)"
done
echo "edge INFO:"
redis-cli -p 16382 INFO ratchet | grep -E "origin_reads|handed_off|replay_retried|local_entries"
