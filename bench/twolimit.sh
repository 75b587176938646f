#!/usr/bin/env bash
# One limit beside two on an edge, in long runs: an origin and an edge of its own (as
# compare.sh's "edge": --freshness 60s, --event-loops 1), 100k keys warmed in both windows,
# then RL.LIMIT key 1e12 60000 (one) and RL.LIMIT key 1e12 60000 1e12 3600000 (two) at
# -P 16 on random keys, back to back, twice; fresh processes for every binary. Prints the
# server CPU per request (user+sys from /proc) of the edge, of its origin and of both, and
# two/one of both (the issue's bound: 1.6). compare.sh's runs of 200,000 requests, on a
# loaded 2-core machine, did not tell 4a4c9a5's edge from its successor's on this row; a
# run here is 600,000 requests, after a pass of 200,000 two-limit requests that every
# run's entries have seen.
#
# Usage: bench/twolimit.sh [REV]   REV: also build git revision REV and alternate its
#                                  binary with this tree's, ROUNDS times
# Env:   N       requests per run (default 600000)
#        ROUNDS  rounds of (this tree, REV) (default 2)
# Ports 17381-17382, loopback only; run it under flock /tmp/ratchet-bench.lock as
# compare.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-600000}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/ratchet-tree" ./cmd/ratchet
bins=(tree)
if [ -n "${1:-}" ]; then
  git worktree add -q --detach "$work/base-tree" "$1"
  trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; git worktree remove --force "$work/base-tree"; rm -rf "$work"' EXIT
  (cd "$work/base-tree" && go build -o "$work/ratchet-base" ./cmd/ratchet)
  bins+=(base)
fi
one=(RL.LIMIT key:__rand_int__ 1000000000000 60000)
two=(RL.LIMIT key:__rand_int__ 1000000000000 60000 1000000000000 3600000)
tck=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
up() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
# measure NAME: origin and edge of $work/ratchet-NAME, warmed, then the runs.
measure() {
  local bin=$work/ratchet-$1 po pe mode be bo ae ao rps
  rm -rf "$work/data"
  "$bin" --listen 127.0.0.1:17381 --data-dir "$work/data" --cluster-secret bench --event-loops 1 \
    --metrics-listen "" --log-level error &
  po=$!
  "$bin" --listen 127.0.0.1:17382 --role edge --origin 127.0.0.1:17381 --cluster-secret bench \
    --freshness 60s --event-loops 1 --metrics-listen "" --log-level error &
  pe=$!
  up 17381 && up 17382
  awk -v k=100000 -v l=1000000000000 'BEGIN {
    for (i = 0; i < k; i++) {
      key = sprintf("key:%012d", i)
      for (w = 0; w < 2; w++) {
        win = w ? "3600000" : "60000"
        printf "*4\r\n$8\r\nRL.LIMIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length(l), l, length(win), win
      }
    }
  }' | redis-cli -p 17382 --pipe >/dev/null
  redis-benchmark -p 17382 -c 50 -n 200000 -P 16 -r 100000 "${two[@]}" >/dev/null
  for _ in 1 2; do
    for mode in one two; do
      be=$(ticks $pe) bo=$(ticks $po)
      if [ $mode = one ]; then set -- "${one[@]}"; else set -- "${two[@]}"; fi
      rps=$(redis-benchmark -p 17382 -c 50 -n "$n" -P 16 -r 100000 --csv "$@" | tail -1 | cut -d, -f2 | tr -d '"')
      ae=$(ticks $pe) ao=$(ticks $po)
      awk -v a="$ae" -v b="$be" -v c="$ao" -v d="$bo" -v h="$tck" -v n="$n" -v m=$mode -v t="$bin_name" -v r="$rps" \
        'BEGIN { printf "%-5s %-4s %9.0f req/s  edge %5.2f  origin %5.2f  both %5.2f us/req\n", t, m, r, (a-b)*1e6/h/n, (c-d)*1e6/h/n, (a-b+c-d)*1e6/h/n }'
    done
  done
  kill $pe $po
  wait $pe $po 2>/dev/null || true
}
echo "requests per run: $n; -P 16 -c 50, 100k random keys; $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "${ROUNDS:-2}"); do
  for bin_name in "${bins[@]}"; do
    measure "$bin_name" | awk '{ print } $2 == "one" { o = $(NF - 1) } $2 == "two" { printf "%-5s two/one %.2f\n", $1, $(NF - 1) / o }'
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
