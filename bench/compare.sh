#!/usr/bin/env bash
# Ratchet beside Redis, one run, same machine, same redis-benchmark settings (-c 50):
#   redis INCR | redis EVALSHA of bench/sliding-window.lua | ratchet origin RL.LIMIT |
#   ratchet edge RL.LIMIT (with a live origin of its own, keys warmed first)
# The edge runs with --freshness 60s, so that warmed keys stay warm through the runs;
# a second edge with the default --freshness 1s shows what 100k keys that are each hit
# less than once a second cost: every such request reads the origin first (SPEC 5).
# at -P 1 and -P 16, on 100k random keys and on one hot key. Prints requests/s, p50 and
# p99 (ms) of each, and the ratios. Loopback only; every process is stopped on exit.
#
# Besides requests/s it prints the servers' CPU time per request (user+sys of the server
# process(es), from /proc): on 2 cores the single-threaded redis-benchmark is often the
# bottleneck at -P 1, and CPU per request then shows what each server would sustain.
#
# Usage: bench/compare.sh [requests per run]   (default 200000)
# Env:   RATCHET_ORIGIN_FLAGS  flags of the origins (default "--event-loops 1": clients
#                              are served from one event loop, as redis-server serves
#                              them from one thread, leaving a core to the load generator)
#        RATCHET_EDGE_FLAGS    extra flags of the edges (default "--event-loops 1", as the
#                              origins: an edge's loops would otherwise take both cores)
#        RATCHET_BENCH_EXTRA="--flag value ..."  extra flags for every ratchet process
#        BENCH_PIN=1       pin every server to CPU 1 and redis-benchmark to CPU 0 (taskset)
#        BENCH_TARGETS="origin edge"  run only these of: incr lua origin edge edge1s edgebase
#                          originbase origin2 edge2 edgebase2 (origin2/edge2: RL.LIMIT with
#                          two limits, the same one and a second of 1h on the same key,
#                          each all-or-nothing; edgebase2: the same on BENCH_BASE's edge)
#        BENCH_ROUNDS=N    run the targets N times in turn (default 1) and print, for every
#                          column, the median of the N runs: on a shared, noisy machine the
#                          rounds interleave so that a disturbance falls on all targets
#        BENCH_BASE=REV    also build git revision REV and run its edge (and origin) as the
#                          target "edgebase", beside this tree's: a before/after of one run
#                          (e.g. BENCH_BASE=581c304 BENCH_TARGETS="edge edgebase"); and its
#                          origin alone, started as this tree's, as the target "originbase"
#                          (BENCH_BASE=main BENCH_TARGETS="origin originbase")
# It takes /tmp/ratchet-bench.lock (flock), as the other bench scripts: two of them side by
# side would each measure the other's load.
set -euo pipefail
if [ -z "${COMPARE_LOCKED:-}" ]; then
  exec env COMPARE_LOCKED=1 flock /tmp/ratchet-bench.lock "$0" "$@"
fi
cd "$(dirname "$0")/.."
n=${1:-200000}
keys=100000
limit=1000000000000 # never reached: every request is allowed and counted
window=60000
window2=3600000 # the second window of the two-limit targets (origin2, edge2)

# shellcheck source=bench/lib.sh
source bench/lib.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
prepare # redis-server and redis-benchmark installed, $work/ratchet built

P_REDIS=16379 P_ORIGIN=16380 P_EDGE_ORIGIN=16381 P_EDGE=16382 P_EDGE1_ORIGIN=16383 P_EDGE1=16384
P_BASE_ORIGIN=16385 P_BASE=16386 P_BASE_PLAIN=16387
base=${BENCH_BASE:-}
if [ -n "$base" ]; then
  git worktree add -q --detach "$work/base-tree" "$base"
  trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; git worktree remove --force "$work/base-tree"; rm -rf "$work"' EXIT
  (cd "$work/base-tree" && go build -o "$work/ratchet-base" ./cmd/ratchet)
fi
# shellcheck disable=SC2206
extra=(${RATCHET_BENCH_EXTRA:-})
# shellcheck disable=SC2206
origin_flags=(${RATCHET_ORIGIN_FLAGS---event-loops 1})
# shellcheck disable=SC2206
edge_flags=(${RATCHET_EDGE_FLAGS---event-loops 1})
srv=() cli=()
if [ "${BENCH_PIN:-0}" = 1 ]; then srv=(taskset -c 1) cli=(taskset -c 0); fi
common=(--metrics-listen "" --log-level warn "${extra[@]}")
"${srv[@]}" redis-server --port $P_REDIS --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pid_redis=$!
"${srv[@]}" "$work/ratchet" --listen 127.0.0.1:$P_ORIGIN --data-dir "$work/origin" "${origin_flags[@]}" "${common[@]}" &
pid_origin=$!
# edge_origin BINARY PORT DIR: an origin that edges replay to, in the background ($! is its pid).
edge_origin() {
  "${srv[@]}" "$1" --listen "127.0.0.1:$2" --data-dir "$work/$3" --cluster-secret bench "${origin_flags[@]}" "${common[@]}" &
}
# edge BINARY PORT ORIGIN_PORT [FLAGS...]: an edge of that origin, in the background.
edge() {
  local bin=$1 port=$2 origin=$3
  shift 3
  "${srv[@]}" "$bin" --listen "127.0.0.1:$port" --role edge --origin "127.0.0.1:$origin" --cluster-secret bench \
    "$@" "${edge_flags[@]}" "${common[@]}" &
}
edge_origin "$work/ratchet" $P_EDGE_ORIGIN edge-origin
pid_edge_origin=$!
edge "$work/ratchet" $P_EDGE $P_EDGE_ORIGIN --freshness 60s
pid_edge=$!
edge_origin "$work/ratchet" $P_EDGE1_ORIGIN edge1-origin
pid_edge1_origin=$!
edge "$work/ratchet" $P_EDGE1 $P_EDGE1_ORIGIN
pid_edge1=$!
ports=($P_REDIS $P_ORIGIN $P_EDGE_ORIGIN $P_EDGE $P_EDGE1_ORIGIN $P_EDGE1)
if [ -n "$base" ]; then
  edge_origin "$work/ratchet-base" $P_BASE_ORIGIN base-origin
  pid_base_origin=$!
  edge "$work/ratchet-base" $P_BASE $P_BASE_ORIGIN --freshness 60s
  pid_base=$!
  "${srv[@]}" "$work/ratchet-base" --listen 127.0.0.1:$P_BASE_PLAIN --data-dir "$work/origin-base" "${origin_flags[@]}" "${common[@]}" &
  pid_base_plain=$!
  ports+=($P_BASE_ORIGIN $P_BASE $P_BASE_PLAIN)
fi
for p in "${ports[@]}"; do waitport "$p"; done
sha=$(redis-cli -p $P_REDIS SCRIPT LOAD "$(cat bench/sliding-window.lua)")

# Warm the edge: one request for each of the 100k keys redis-benchmark will draw
# (__rand_int__ is 12 zero-padded digits) and for the hot key, pipelined.
warm() {
  awk -v k=$keys -v l=$limit -v w=$window -v w2="$warm2" 'BEGIN {
    for (i = 0; i <= k; i++) {
      key = (i < k) ? sprintf("key:%012d", i) : "key:hot"
      printf "*4\r\n$8\r\nRL.LIMIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length(l), l, length(w), w
      if (w2 != "") # the second tuple of the key, for the two-limit targets
        printf "*4\r\n$8\r\nRL.LIMIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length(l), l, length(w2), w2
    }
  }' | redis-cli -p "$1" --pipe >/dev/null
}
# All at once, so that every edge's entries are as old: warmed one after the other, the
# first edge's entries were ~25 s older and more of them reached --freshness 60s during the
# runs (a read of the origin each: with BENCH_BASE=HEAD, 1,221 reads against 56, and
# 0.82x the requests/s of the same binary warmed last at -P 1).
warm2="" # the second window too, when a two-limit target runs
case " ${BENCH_TARGETS:-} " in *" edge2 "* | *" edgebase2 "*) warm2=$window2 ;; esac
warming=()
warm $P_EDGE & warming+=($!)
warm $P_EDGE1 & warming+=($!)
if [ -n "$base" ]; then warm $P_BASE & warming+=($!); fi
wait "${warming[@]}"

rounds=${BENCH_ROUNDS:-1}
declare -A rps p50 p99 cpu ccpu all
# shellcheck disable=SC2206
targets=(${BENCH_TARGETS:-incr lua origin edge edge1s})
for space in rand hot; do
  k="key:__rand_int__"
  [ "$space" = hot ] && k="key:hot"
  for pipe in 1 16; do
    for _ in $(seq "$rounds"); do
    for t in "${targets[@]}"; do
      case $t in
      incr) out=$(run $pid_redis $P_REDIS $pipe $space INCR "$k") ;;
      lua) out=$(run $pid_redis $P_REDIS $pipe $space EVALSHA "$sha" 1 "$k" $limit $window 1) ;;
      origin) out=$(run $pid_origin $P_ORIGIN $pipe $space RL.LIMIT "$k" $limit $window) ;;
      edge) out=$(run "$pid_edge $pid_edge_origin" $P_EDGE $pipe $space RL.LIMIT "$k" $limit $window) ;;
      edge1s) out=$(run "$pid_edge1 $pid_edge1_origin" $P_EDGE1 $pipe $space RL.LIMIT "$k" $limit $window) ;;
      edgebase) out=$(run "$pid_base $pid_base_origin" $P_BASE $pipe $space RL.LIMIT "$k" $limit $window) ;;
      originbase) out=$(run $pid_base_plain $P_BASE_PLAIN $pipe $space RL.LIMIT "$k" $limit $window) ;;
      origin2) out=$(run $pid_origin $P_ORIGIN $pipe $space RL.LIMIT "$k" $limit $window $limit $window2) ;;
      edge2) out=$(run "$pid_edge $pid_edge_origin" $P_EDGE $pipe $space RL.LIMIT "$k" $limit $window $limit $window2) ;;
      edgebase2) out=$(run "$pid_base $pid_base_origin" $P_BASE $pipe $space RL.LIMIT "$k" $limit $window $limit $window2) ;;
      esac
      all[$t,$space,$pipe]+="$out;"
    done
    done
    medians "$space" "$pipe" "${targets[@]}"
  done
done

echo "requests per run: $n; rounds: $rounds (medians); -c 50; $(nproc) cores; $(redis-server --version | cut -d' ' -f1-3); pinned: ${BENCH_PIN:-0}"
echo "origins: ${origin_flags[*]:-(defaults)}; edges: ${edge_flags[*]:-(defaults)}; data dirs on (snapshots every 1s)"
echo "server us/req: server CPU (user+sys) per request, the edge rows adding their origin's;"
echo "client us/req: redis-benchmark's CPU per request (near 1e6/rps: the load generator is the limit)"
printf '%-6s %-4s %-15s %12s %8s %8s %10s %10s\n' keys -P target "requests/s" "p50 ms" "p99 ms" "server us" "client us"
declare -A names=([incr]="redis INCR" [lua]="redis Lua" [origin]="ratchet origin" [edge]="ratchet edge" [edge1s]="edge fresh 1s"
  [edgebase]="edge ${base:0:9}" [originbase]="origin ${base:0:9}" [origin2]="origin 2 limits" [edge2]="edge 2 limits"
  [edgebase2]="edge ${base:0:7} 2")
for space in rand hot; do
  for pipe in 1 16; do
    for t in "${targets[@]}"; do
      printf '%-6s %-4s %-15s %12s %8s %8s %10s %10s\n' "$space" "$pipe" "${names[$t]}" "${rps[$t,$space,$pipe]}" \
        "${p50[$t,$space,$pipe]}" "${p99[$t,$space,$pipe]}" "${cpu[$t,$space,$pipe]}" "${ccpu[$t,$space,$pipe]}"
    done
  done
done
echo
echo "throughput ratios (requests/s), and in brackets CPU-per-request ratios (higher: ratchet cheaper)"
printf '%-6s %-4s %18s %18s %18s\n' keys -P "origin/INCR" "origin/Lua" "edge/origin"
for space in rand hot; do
  for pipe in 1 16; do
    o=${rps[origin,$space,$pipe]:-} oc=${cpu[origin,$space,$pipe]:-}
    printf '%-6s %-4s %18s %18s %18s\n' "$space" "$pipe" \
      "$(ratio "$o" "${rps[incr,$space,$pipe]:-}") ($(ratio "${cpu[incr,$space,$pipe]:-}" "$oc"))" \
      "$(ratio "$o" "${rps[lua,$space,$pipe]:-}") ($(ratio "${cpu[lua,$space,$pipe]:-}" "$oc"))" \
      "$(ratio "${rps[edge,$space,$pipe]:-}" "$o") ($(ratio "$oc" "${cpu[edge,$space,$pipe]:-}"))"
  done
done
if [ -n "${rps[origin2,rand,1]:-}${rps[edge2,rand,1]:-}" ]; then
  echo
  echo "two limits in one call against one: server CPU per request (two/one; the issue's bound is 1.6)"
  for space in rand hot; do
    for pipe in 1 16; do
      printf '%-6s %-4s origin %s  edge %s\n' "$space" "$pipe" \
        "$(ratio "${cpu[origin2,$space,$pipe]:-}" "${cpu[origin,$space,$pipe]:-}")" \
        "$(ratio "${cpu[edge2,$space,$pipe]:-}" "${cpu[edge,$space,$pipe]:-}")$(
          [ -z "${cpu[edgebase2,$space,$pipe]:-}" ] ||
            echo "  edge ${base:0:7} $(ratio "${cpu[edgebase2,$space,$pipe]:-}" "${cpu[edgebase,$space,$pipe]:-}")")"
    done
  done
fi
# newbase NEW BASE NAME: NEW's requests/s, p99 and CPU per request over BASE's, when BASE ran.
newbase() {
  [ -n "${rps[$2,rand,1]:-}" ] || return 0
  echo
  echo "this tree's $3 against ${base}'s: requests/s, p99 and server CPU per request (new/base)"
  for space in rand hot; do
    for pipe in 1 16; do
      printf '%-6s %-4s rps %s  p99 %s  cpu %s\n' "$space" "$pipe" \
        "$(ratio "${rps[$1,$space,$pipe]:-}" "${rps[$2,$space,$pipe]:-}")" \
        "$(ratio "${p99[$1,$space,$pipe]:-}" "${p99[$2,$space,$pipe]:-}")" \
        "$(ratio "${cpu[$1,$space,$pipe]:-}" "${cpu[$2,$space,$pipe]:-}")"
    done
  done
}
if [ -n "$base" ]; then
  newbase origin originbase origin
  newbase edge edgebase edge
  newbase edge2 edgebase2 "two-limit edge"
fi
echo
for p in $P_EDGE $P_EDGE1 ${base:+$P_BASE}; do
  echo "edge :$p after the runs: $(redis-cli -p $p INFO ratchet | tr -d '\r' |
    grep -E "origin_reads|handed_off|replay_retried|local_entries" | tr '\n' ' ')"
done
