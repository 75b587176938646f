#!/usr/bin/env bash
# A first look at speed: ratchet RL.LIMIT on random keys beside redis-server INCR on random
# keys, same machine, same redis-benchmark settings, one run. Loopback only.
# Usage: bench/first-look.sh [requests]   (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/ratchet" ./cmd/ratchet
"$work/ratchet" --listen 127.0.0.1:16380 --metrics-listen "" --data-dir "$work/data" 2>"$work/ratchet.log" &
redis-server --port 16379 --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
for p in 16379 16380; do
  for _ in $(seq 50); do redis-cli -p $p PING >/dev/null 2>&1 && break; sleep 0.1; done
done

rps() { # port pipeline command...
  local port=$1 pipe=$2; shift 2
  redis-benchmark -p "$port" -c 50 -n "$n" -P "$pipe" -r 100000 --csv "$@" | tail -1 | cut -d, -f2 | tr -d '"'
}
printf '%-8s %14s %14s %8s\n' pipeline "redis INCR" "ratchet RL" ratio
for pipe in 1 16; do
  r=$(rps 16379 $pipe INCR key:__rand_int__)
  q=$(rps 16380 $pipe RL.LIMIT key:__rand_int__ 100 60s)
  printf '%-8s %14s %14s %8.2f\n' "-P $pipe" "$r" "$q" "$(echo "$q / $r" | bc -l)"
done
