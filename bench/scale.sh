#!/usr/bin/env bash
# The cost of many tuples: an origin beside redis-server running bench/sliding-window.lua
# on the same keys (user:<n>:api, n zero-padded to 12 digits as redis-benchmark's
# __rand_int__), at each size. For each size it prints:
#   - RSS (VmRSS) and INFO used_memory per tuple of the origin and of redis-server, once
#     every key was sent once (the origin's tuples, redis's keys: one cell / one key each
#     with the default window of an hour);
#   - the origin's snapshot: file size, and the duration of its last save;
#   - RL.LIMIT p99 (redis-benchmark -c 50 -P 32 on random keys of the store): idle (a twin
#     origin without --data-dir, so that no save runs), with saves (the origin itself: the
#     requests change cells, so it saves every --snapshot-interval while they run; its
#     runs alternate with the others', and then three run back to back, the last one's p99
#     printed too: a flood that does not stop, whose compactions have no quiet moment), and
#     on the first requests after a restart (one run from the first decision on: during
#     the background load when the origin listens before it has loaded, --load-wait; three
#     kill -9 restarts in a row, each measured so, their median printed with all three);
#   - kill -9 and restart, three times: time to the first RL.LIMIT answered, time to fully
#     loaded (INFO ratchet loading:0, or the first answer when the origin has no such
#     field), the slowest of three printed with all three, load time per cell, and RSS once
#     the first restart has loaded.
# Loopback only, fixed ports 16390-16392: it takes /tmp/ratchet-bench.lock (flock) so that
# it never runs beside another bench script that holds it. Every process is stopped on exit.
#
# Usage: bench/scale.sh [tuples...]   (default: 1000000 2000000; e.g. 5000000 10000000)
# Each p99 is the median of three runs (taken in turn where they can be).
# Env:   SCALE_WINDOW_MS       window of every request (default 3600000: one cell a tuple)
#        SCALE_MAX_MEMORY      the origins' --max-memory (default 4GB: room for 10M tuples;
#                              every other flag is the default)
#        SCALE_N               requests of each p99 run (default 400000)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SCALE_LOCKED:-}" ]; then
  exec env SCALE_LOCKED=1 flock /tmp/ratchet-bench.lock "$0" "$@"
fi
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 2000000)
window=${SCALE_WINDOW_MS:-3600000}
maxmem=${SCALE_MAX_MEMORY:-4GB}
n=${SCALE_N:-400000}
limit=1000000000000 # never reached: every request is allowed and counted

# shellcheck source=bench/lib.sh
source bench/lib.sh
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
prepare # redis-server and redis-benchmark installed, $work/ratchet built

P_REDIS=16390 P_ORIGIN=16391 P_TWIN=16392
common=(--max-memory "$maxmem" --metrics-listen "" --log-level warn)

rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }                           # PID -> bytes
info() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'; } # PORT SECTION FIELD
per() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", a / b }'; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# fill PORT COUNT CMD...: one request for each key user:<i>:api, pipelined; CMD's words
# follow the key (lua: EVALSHA sha 1 goes before it).
fill() {
  local port=$1 count=$2
  shift 2
  awk -v k="$count" -v pre="$*" -v l=$limit -v w="$window" 'BEGIN {
    lua = (pre ~ /^EVALSHA/)
    for (i = 0; i < k; i++) {
      key = sprintf("user:%012d:api", i)
      if (lua) {
        split(pre, p, " ")
        printf "*7\r\n$7\r\nEVALSHA\r\n$%d\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$1\r\n1\r\n", length(p[2]), p[2], length(key), key, length(l), l, length(w), w
      } else {
        printf "*4\r\n$8\r\nRL.LIMIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length(l), l, length(w), w
      }
    }
  }' | redis-cli -p "$port" --pipe >"$work/pipe.out"
  grep -q "errors: 0," "$work/pipe.out" || { cat "$work/pipe.out" >&2; return 1; }
}
# p99 PORT COUNT CMD...: redis-benchmark's p99 (ms) of CMD on random keys of the store
p99() {
  local port=$1 count=$2
  shift 2
  redis-benchmark -p "$port" -c 50 -P 32 -n "$n" -r "$count" --csv "$@" >"$work/bench.csv"
  tail -1 "$work/bench.csv" | awk -F, '{ gsub(/"/, ""); print $(NF - 1) }'
}
origin() { # PORT DIR: an origin in the background ($! is its pid)
  "$work/ratchet" --listen "127.0.0.1:$1" --data-dir "$2" "${common[@]}" &
}
# answers PORT: one RL.LIMIT decision comes back
answers() {
  redis-cli -p "$1" RL.LIMIT user:000000000000:api $limit "$window" COST 0 2>/dev/null | head -1 | grep -qE '^[01]$'
}

rows=()
for count in "${sizes[@]}"; do
  rm -rf "$work/origin"
  redis-server --port $P_REDIS --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
  pid_redis=$!
  origin $P_ORIGIN "$work/origin"
  pid_origin=$!
  origin $P_TWIN ""
  pid_twin=$!
  for p in $P_REDIS $P_ORIGIN $P_TWIN; do waitport $p; done
  base_redis=$(rss $pid_redis) base_origin=$(rss $pid_origin)
  sha=$(redis-cli -p $P_REDIS SCRIPT LOAD "$(cat bench/sliding-window.lua)")
  t=$(now)
  fill $P_REDIS "$count" EVALSHA "$sha"
  fill_redis=$(since "$t")
  t=$(now)
  fill $P_ORIGIN "$count" RL.LIMIT
  fill_origin=$(since "$t")
  fill $P_TWIN "$count" RL.LIMIT
  tuples=$(info $P_ORIGIN ratchet tuples) cells=$(info $P_ORIGIN ratchet cells)
  dbsize=$(redis-cli -p $P_REDIS DBSIZE)
  # Saves are incremental (persist/log.go): the first writes the whole file, the next ones
  # append the tuples changed since to the delta log beside it, rewritten into the file in
  # the background once the log holds a quarter of it. Let the fill's last be saved.
  sleep 3
  rss_redis=$(rss $pid_redis) rss_origin=$(rss $pid_origin)
  used_redis=$(info $P_REDIS memory used_memory) used_origin=$(info $P_ORIGIN memory used_memory)
  snap=$(stat -c %s "$work/origin/snapshot.db")
  logs=$(cat "$work"/origin/snapshot.db.log.* 2>/dev/null | wc -c || true) # no log at all: cat fails (pipefail)
  save_idle=$(info $P_ORIGIN ratchet snapshot_last_duration_ms)

  # Three rounds in turn, the median of each: a disturbance of the shared machine falls
  # on all three.
  r_redis=() r_idle=() r_save=()
  # The longest save while the requests change cells (INFO polled every 0.2 s).
  while :; do info $P_ORIGIN ratchet snapshot_last_duration_ms; sleep 0.2; done >"$work/saves" &
  poll=$!
  for _ in 1 2 3; do
    r_redis+=("$(p99 $P_REDIS "$count" EVALSHA "$sha" 1 "user:__rand_int__:api" $limit "$window" 1)")
    r_idle+=("$(p99 $P_TWIN "$count" RL.LIMIT "user:__rand_int__:api" $limit "$window")")
    r_save+=("$(p99 $P_ORIGIN "$count" RL.LIMIT "user:__rand_int__:api" $limit "$window")")
  done
  p99_redis=$(median "${r_redis[@]}") p99_idle=$(median "${r_idle[@]}") p99_save=$(median "${r_save[@]}")
  for _ in 1 2 3; do p99_flood=$(p99 $P_ORIGIN "$count" RL.LIMIT "user:__rand_int__:api" $limit "$window"); done
  kill $poll 2>/dev/null || true
  wait $poll 2>/dev/null || true
  save_busy=$(sort -n "$work/saves" | tail -1)
  { kill -9 $pid_twin && wait $pid_twin; } 2>/dev/null || true
  # The requests above changed cells: let the last of them be saved, then cut. (A quiet
  # compaction runs at full speed meanwhile: the logs when the requests stopped are printed
  # beside those at the kill.) Three kill -9 restarts, each measured from its first
  # decision: the p99 printed is their median (as every other p99 here), the first decision
  # and the load the slowest of the three; all three are printed. Each restart's own
  # requests changed cells, which are saved in the 3 s before the next kill.
  logs_stop=$(cat "$work"/origin/snapshot.db.log.* 2>/dev/null | wc -c || true)
  r_first=() r_loaded=() r_load=() r_loading=()
  for round in 1 2 3; do
    sleep 3
    [ "$round" = 1 ] && rss_before=$(rss $pid_origin)
    [ "$round" = 1 ] && logs_kill=$(cat "$work"/origin/snapshot.db.log.* 2>/dev/null | wc -c || true)
    { kill -9 $pid_origin && wait $pid_origin; } 2>/dev/null || true
    t=$(now)
    origin $P_ORIGIN "$work/origin"
    pid_origin=$!
    until answers $P_ORIGIN; do sleep 0.01; done
    r_first+=("$(since "$t")")
    r_loading+=("$(info $P_ORIGIN ratchet loading)") # 1: the rest loads in the background
    # When the load is over, polled beside the requests (not once they are done).
    { until [ "$(info $P_ORIGIN ratchet loading)" != 1 ]; do sleep 0.1; done; since "$t" >"$work/loaded"; } &
    poll=$!
    r_load+=("$(p99 $P_ORIGIN "$count" RL.LIMIT "user:__rand_int__:api" $limit "$window")")
    wait $poll
    r_loaded+=("$(cat "$work/loaded")")
    [ "$round" = 1 ] && { sleep 2; rss_after=$(rss $pid_origin); }
  done
  first=$(printf '%s\n' "${r_first[@]}" | sort -n | tail -1)
  loaded=$(printf '%s\n' "${r_loaded[@]}" | sort -n | tail -1)
  p99_load=$(median "${r_load[@]}")
  loading=$(printf '%s\n' "${r_loading[@]}" | sort -n | tail -1)
  { kill -9 $pid_origin $pid_redis && wait $pid_origin $pid_redis; } 2>/dev/null || true

  echo "== $count tuples (window ${window} ms): origin $tuples tuples / $cells cells, redis $dbsize keys"
  echo "fill (redis-cli --pipe): redis ${fill_redis} s, origin ${fill_origin} s"
  printf '%-22s %14s %14s %10s\n' "" "redis-server" "ratchet" "ratio"
  printf '%-22s %14s %14s %10s\n' "RSS B/tuple" "$(per "$rss_redis" "$count")" "$(per "$rss_origin" "$count")" "$(ratio "$rss_origin" "$rss_redis")"
  printf '%-22s %14s %14s %10s\n' "RSS-at-start B/tuple" "$(per $((rss_redis - base_redis)) "$count")" "$(per $((rss_origin - base_origin)) "$count")" \
    "$(ratio $((rss_origin - base_origin)) $((rss_redis - base_redis)))"
  printf '%-22s %14s %14s %10s\n' "used_memory B/tuple" "$(per "$used_redis" "$count")" "$(per "$used_origin" "$count")" "$(ratio "$used_origin" "$used_redis")"
  printf '%-22s %14s %14s\n' "p99 ms (idle)" "$p99_redis" "$p99_idle"
  echo "snapshot: $snap bytes ($(per "$snap" "$cells") B/cell) + delta log $logs bytes; last save ${save_idle} ms after the fill, the longest ${save_busy} ms under load"
  echo "RL.LIMIT p99 ms: idle $p99_idle, with saves every 1s $p99_save (the third of three runs back to back: $p99_flood), after a restart $p99_load (median of three: ${r_load[*]})" \
    "($([ "$loading" = 1 ] && echo "the background load going on at the first decision" || echo "loaded whole at the first decision"))"
  echo "restart (kill -9, the slowest of three): first decision ${first} s (${r_first[*]}), fully loaded ${loaded} s (${r_loaded[*]})" \
    "($(awk -v s="$loaded" -v c="$cells" 'BEGIN { printf "%.2f", s * 1e6 / c }') us/cell);" \
    "RSS $(per "$rss_before" "$count") B/tuple before the first kill, $(per "$rss_after" "$count") after its load;" \
    "delta log at the first kill $logs_kill bytes ($logs_stop when the requests stopped)"
  rows+=("$count $(per "$rss_redis" "$count") $(per "$rss_origin" "$count") $(ratio "$rss_origin" "$rss_redis") $save_busy $first $loaded $p99_idle $p99_save $p99_flood $p99_load")
done
echo
echo "summary: tuples | RSS B/tuple redis ratchet ratio | save ms | restart first s, loaded s | p99 ms idle save save-back-to-back restart"
printf '%s\n' "${rows[@]}"
