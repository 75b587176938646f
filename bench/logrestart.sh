#!/usr/bin/env bash
# A restart with a large delta log: time from the start of an origin to its first RL.LIMIT
# answered, and the CPU it used until then, from a data dir of TUPLES tuples (user:<n>:api
# as bench/scale.sh fills them, a window of an hour) whose delta logs hold at least LOG_MB
# MB (the compactions made to fail meanwhile: a directory at snapshot.db.tmp, removed
# before the restarts, so the logs grow as when the paced compaction falls behind), RUNS
# times, each from a copy of the dir. With BASE_BIN, the same restarts of that binary too,
# alternating (e.g. main's, built beforehand), from the same files.
#
# Usage: bench/logrestart.sh [TUPLES] [LOG_MB] [RUNS]   (default: 10000000 250 3)
# Env:   BASE_BIN  another ratchet binary to compare
#        KEEP_DIR  keep the data dir there (and reuse it when it exists)
# Loopback only, port 17391; it takes /tmp/ratchet-bench.lock as the other bench scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LOGRESTART_LOCKED:-}" ]; then
  exec env LOGRESTART_LOCKED=1 flock /tmp/ratchet-bench.lock "$0" "$@"
fi
tuples=${1:-10000000} log_mb=${2:-250} runs=${3:-3}
P=17391 limit=1000000000000 window=3600000
# shellcheck source=bench/lib.sh
source bench/lib.sh
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
prepare # $work/ratchet built
data=${KEEP_DIR:-$work/data}
start() { "$1" --listen 127.0.0.1:$P --data-dir "$2" --max-memory 4GB --metrics-listen "" --log-level warn & }
logs() { cat "$1"/snapshot.db.log.* 2>/dev/null | wc -c; }

if [ ! -e "$data/snapshot.db" ]; then
  mkdir -p "$data"
  start "$work/ratchet" "$data" 2>"$work/gen.log" # the failed compactions logged there
  pid=$!
  waitport $P
  awk -v k="$tuples" -v l=$limit -v w=$window 'BEGIN { for (i = 0; i < k; i++) { key = sprintf("user:%012d:api", i)
    printf "*4\r\n$8\r\nRL.LIMIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length(l), l, length(w), w } }' |
    redis-cli -p $P --pipe >"$work/pipe.out"
  grep -q "errors: 0," "$work/pipe.out" || { cat "$work/pipe.out" >&2; exit 1; }
  # Once a compaction has written every tuple to the base, the next ones fail.
  until [ ! -e "$data/snapshot.db.tmp" ] && [ "$(logs "$data")" -lt $((4 << 20)) ]; do sleep 0.5; done
  mkdir -p "$data/snapshot.db.tmp/block"
  redis-benchmark -p $P -c 50 -P 32 -n 1000000000 -r "$tuples" -q RL.LIMIT "user:__rand_int__:api" $limit $window >/dev/null 2>&1 &
  rb=$!
  until [ "$(logs "$data")" -gt $((log_mb << 20)) ]; do sleep 0.5; done
  kill $rb
  sleep 2 # the last changes saved
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$data/snapshot.db.tmp" "$data/LOCK"
fi
echo "base $(stat -c %s "$data/snapshot.db") B, delta logs $(logs "$data") B"
bins=("$work/ratchet")
[ -n "${BASE_BIN:-}" ] && bins=("$BASE_BIN" "$work/ratchet")
for r in $(seq 1 "$runs"); do
  for b in "${bins[@]}"; do
    rm -rf "$work/run"
    cp -r "$data" "$work/run"
    t0=$(date +%s.%N)
    start "$b" "$work/run"
    pid=$!
    until redis-cli -p $P RL.LIMIT user:000000000000:api $limit $window COST 0 2>/dev/null | head -1 | grep -qE '^[01]$'; do sleep 0.01; done
    t1=$(date +%s.%N)
    used=$(ticks "$pid")
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    name=this
    [ "$b" = "${BASE_BIN:-}" ] && name=base
    awk -v b="$name" -v r="$r" -v a="$t0" -v z="$t1" -v c="$used" -v hz="$tck" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
      'BEGIN { printf "%s run %d: first decision %.2f s, CPU %.2f s, load %s\n", b, r, z - a, c / hz, l }'
  done
done
