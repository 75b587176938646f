#!/usr/bin/env bash
# The edge's unsaved cost under a flood: an origin with a data dir (saving every second)
# and an edge in front of it (--freshness 60s), 100k keys warmed in two windows (60s and
# 1h, as compare.sh's two-limit targets), then redis-benchmark -c 50 -P 16 of two-limit
# RL.LIMIT on random keys through the edge for SECONDS. Every 0.25 s it reads the edge's
# INFO: what it keeps for a kill -9 of the origin (replay_unsaved_cost, units) and what
# its bound dropped (replay_unsaved_dropped_cost). Prints, per run, the most kept, the
# units dropped, the decisions and the load average; the edge's warn lines are counted.
#
# Usage: bench/unsaved.sh [seconds] [runs]   (default 30 and 1)
# Env:   BENCH_BASE=REV  also build git revision REV and run its origin and edge, in turn
#                        with this tree's (e.g. BENCH_BASE=9a0611c: before the edge counted
#                        cached entries once)
# Ports 26380 and 26382 on 127.0.0.1; every process is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
runs=${2:-1}
keys=100000
limit=1000000000000 # never reached: every request is allowed and counted
window=60000
window2=3600000
P_ORIGIN=26380 P_EDGE=26382

# shellcheck source=bench/lib.sh
source bench/lib.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
prepare # redis-server and redis-benchmark installed, $work/ratchet built
bins=(ratchet)
base=${BENCH_BASE:-}
if [ -n "$base" ]; then
  git worktree add -q --detach "$work/base-tree" "$base"
  trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; git worktree remove --force "$work/base-tree"; rm -rf "$work"' EXIT
  (cd "$work/base-tree" && go build -o "$work/ratchet-base" ./cmd/ratchet)
  bins+=(ratchet-base)
fi

# flood BINARY TAG: one run; prints its line.
flood() {
  local bin=$work/$1 dir=$work/$2
  mkdir -p "$dir"
  "$bin" --listen 127.0.0.1:$P_ORIGIN --data-dir "$dir/origin" --cluster-secret bench --event-loops 1 \
    --metrics-listen "" --log-level warn >"$dir/origin.log" 2>&1 &
  local po=$!
  "$bin" --listen 127.0.0.1:$P_EDGE --role edge --origin 127.0.0.1:$P_ORIGIN --cluster-secret bench \
    --freshness 60s --event-loops 1 --metrics-listen "" --log-level warn >"$dir/edge.log" 2>&1 &
  local pe=$!
  waitport $P_ORIGIN
  waitport $P_EDGE
  awk -v k=$keys -v l=$limit -v w=$window -v w2=$window2 'BEGIN {
    for (i = 0; i < k; i++) {
      key = sprintf("key:%012d", i)
      printf "*4\r\n$8\r\nRL.LIMIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length(l), l, length(w), w
      printf "*4\r\n$8\r\nRL.LIMIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length(l), l, length(w2), w2
    }
  }' | redis-cli -p $P_EDGE --pipe >/dev/null
  (while sleep 0.25; do
    redis-cli -p $P_EDGE INFO ratchet | tr -d '\r' |
      awk -F: '/^(replay_unsaved_cost|replay_unsaved_dropped_cost|decisions_allowed):/ { printf "%s=%s ", $1, $2 } END { print "" }'
  done) >"$dir/samples.txt" 2>/dev/null &
  local ps=$!
  timeout "$secs" redis-benchmark -p $P_EDGE -c 50 -n 1000000000 -P 16 -r $keys --csv \
    RL.LIMIT key:__rand_int__ $limit $window $limit $window2 >/dev/null 2>&1 || true
  kill $ps
  wait $ps 2>/dev/null || true
  awk -v bin="$1" -v load="$(cut -d' ' -f1 /proc/loadavg)" -v warns="$(grep -c 'has not saved exceeds' "$dir/edge.log" || true)" '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      if (v["replay_unsaved_cost"] > most) most = v["replay_unsaved_cost"] }
    END { printf "%-12s most kept %8d units  dropped %8d units  decisions %9d  bound warnings %s  load %s\n",
      bin, most, v["replay_unsaved_dropped_cost"], v["decisions_allowed"], warns, load }' "$dir/samples.txt"
  kill $pe $po
  wait $pe $po 2>/dev/null || true
}

for r in $(seq "$runs"); do
  for b in "${bins[@]}"; do flood "$b" "$b-$r"; done
done
