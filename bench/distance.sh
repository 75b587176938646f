#!/usr/bin/env bash
# Ratchet at a distance: what a network hop between the application and its limiter costs,
# and what an edge beside the application saves. One run, same machine, loopback only:
#
#   load generator ── edge ─────────┐
#        │                           ├── Toxiproxy (latency: RTT/2 each way) ── origin
#        └───────────────────────────┘                                     └── redis-server
#
# Targets: far redis (EVALSHA of bench/sliding-window.lua through the proxy), far origin
# (RL.LIMIT through the proxy) and near edge (RL.LIMIT on an edge whose --origin is the
# proxy). The load is bench/load: 50 connections with one request in flight each (as
# redis-benchmark -c 50 -P 1), every latency kept, so p50, p99 and p99.9 are exact.
# Key patterns:
#   hot   1000 random keys (each seen ~3 times a second) at a paced DIST_TAIL_RATE requests/s
#         over DIST_TAIL_WORKERS connections, as the tail below: latency at a load the
#         machine carries; every key sent once first (unmeasured); limit never reached
#   hotmax the same keys, DIST_SECONDS of requests as fast as the replies come over 50
#         connections: throughput, where latency is the load generator's queue
#   tail  20,000 random keys at a paced 3000 requests/s (200 connections, so that the far
#         targets keep the pace): a key comes back every ~6.7 s on average; every key sent
#         once first at the same pace (unmeasured), then DIST_TAIL_N requests; limit
#         never reached
#   cold  every request a key never seen before, with limits 10, 100 and 1000, DIST_SECONDS/2
#         of requests as fast as the replies come
# Per row: requests/s, p50, p99, p99.9 (ms), the share of requests slower than RTT/2 (those
# that crossed the hop, or stalled as long on this machine), the edge's origin reads and
# hand-offs per request and its failed origin calls (from its /metrics), the share of
# requests refused, server CPU per request (user+sys from /proc: redis-server, the origin,
# the edge plus its origin) and Toxiproxy's, then the ratios ratchet/redis.
#
# Usage: bench/distance.sh [rtt_ms]   (default 20)
# Env:   DIST_SECONDS=10       length of each hotmax row (half of it for the cold rows): long
#                              enough for the edge's entries to go stale (--freshness)
#        DIST_N=1000000        the most requests of each hot or cold row
#        DIST_TAIL_N=60000     requests of each tail row (20 s at DIST_TAIL_RATE)
#        DIST_TAIL_RATE=3000   DIST_TAIL_KEYS=20000   DIST_TAIL_WORKERS=200
#        DIST_PATTERNS="hot tail"  the rows to run (default: all, in the order above)
#        DIST_REDIS_BENCHMARK=N  then N requests of redis-benchmark on the hot keys, per target
#        RATCHET_ORIGIN_FLAGS, RATCHET_EDGE_FLAGS   extra flags (default: none, the
#                              defaults of the code: --freshness 1s, one event loop a core)
# Toxiproxy v2.12.0 is taken from $(go env GOPATH)/bin/server when that is it, else
# installed with `go install` into the run's temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
rtt=${1:-20}
if ! [[ $rtt =~ ^[0-9]+$ ]] || [ "$rtt" -lt 2 ]; then
  echo "usage: $0 [rtt_ms]   (an integer, at least 2)" >&2
  exit 2
fi
seconds=${DIST_SECONDS:-10}
n=${DIST_N:-1000000}
tail_n=${DIST_TAIL_N:-60000}
tail_rate=${DIST_TAIL_RATE:-3000}
tail_keys=${DIST_TAIL_KEYS:-20000}
tail_workers=${DIST_TAIL_WORKERS:-200}
hot_keys=1000
window=60000
toxiproxy_version=v2.12.0

# shellcheck source=bench/lib.sh
source bench/lib.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM # the EXIT trap stops everything; rows run in the background so
# that `wait` returns at once on a signal (bash runs a trap only after a foreground child)
prepare # redis-server installed, $work/ratchet built
go build -o "$work/load" ./bench/load
command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl >/dev/null; }

# toxiproxy: the pinned server, as `go install` puts it, copied to a clear name.
toxiproxy() {
  local bin
  bin="$(go env GOPATH)/bin/server"
  if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null |
    grep -qE "^\s+mod\s+github.com/Shopify/toxiproxy/v2\s+$toxiproxy_version\s"; then
    cp "$bin" "$work/toxiproxy-server"
    return
  fi
  GOBIN="$work/gobin" go install "github.com/Shopify/toxiproxy/v2/cmd/server@$toxiproxy_version"
  mv "$work/gobin/server" "$work/toxiproxy-server"
}
toxiproxy

# freeport: a loopback port nothing listens on, outside the ports the README test uses.
taken=" "
freeport() {
  local p
  while :; do
    p=$((20000 + RANDOM % 10000))
    case $taken in *" $p "*) continue ;; esac
    if [ -z "$(ss -Htln "sport = :$p")" ]; then
      taken+="$p "
      echo "$p"
      return
    fi
  done
}
P_TOXI=$(freeport) P_REDIS=$(freeport) P_ORIGIN=$(freeport) P_EDGE=$(freeport)
P_REDIS_FAR=$(freeport) P_ORIGIN_FAR=$(freeport) P_METRICS=$(freeport)

# shellcheck disable=SC2206
origin_flags=(${RATCHET_ORIGIN_FLAGS:-})
# shellcheck disable=SC2206
edge_flags=(${RATCHET_EDGE_FLAGS:-})
LOG_LEVEL=warn "$work/toxiproxy-server" -host 127.0.0.1 -port "$P_TOXI" >"$work/toxiproxy.log" 2>&1 &
pid_toxi=$!
redis-server --port "$P_REDIS" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pid_redis=$!
"$work/ratchet" --listen "127.0.0.1:$P_ORIGIN" --data-dir "$work/origin" --cluster-secret bench \
  --metrics-listen "" --log-level warn "${origin_flags[@]}" &
pid_origin=$!
waitport "$P_REDIS"
waitport "$P_ORIGIN"
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$P_TOXI/version" >/dev/null && break; sleep 0.1; done

api() { # METHOD PATH JSON
  curl -sf -X "$1" -H 'Content-Type: application/json' -d "$3" "http://127.0.0.1:$P_TOXI$2" >/dev/null
}
# farproxy NAME LISTEN UPSTREAM: a proxy with RTT/2 of latency on each direction (the
# latency toxic delays each chunk by that much after it arrived, so the two add up).
farproxy() {
  api POST /proxies "{\"name\":\"$1\",\"listen\":\"127.0.0.1:$2\",\"upstream\":\"127.0.0.1:$3\",\"enabled\":true}"
  api POST "/proxies/$1/toxics" "{\"name\":\"up\",\"type\":\"latency\",\"stream\":\"upstream\",\"attributes\":{\"latency\":$((rtt / 2))}}"
  api POST "/proxies/$1/toxics" "{\"name\":\"down\",\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":$((rtt - rtt / 2))}}"
}
farproxy redis "$P_REDIS_FAR" "$P_REDIS"
farproxy origin "$P_ORIGIN_FAR" "$P_ORIGIN"
"$work/ratchet" --listen "127.0.0.1:$P_EDGE" --role edge --origin "127.0.0.1:$P_ORIGIN_FAR" --cluster-secret bench \
  --metrics-listen "127.0.0.1:$P_METRICS" --log-level warn "${edge_flags[@]}" &
pid_edge=$!
waitport "$P_EDGE"

# The round trip through each proxy, measured with PINGs one after the other.
measured=()
for p in "$P_REDIS_FAR" "$P_ORIGIN_FAR"; do
  out=$("$work/load" -addr "127.0.0.1:$p" -ping 20)
  measured+=("$out")
  ping=${out#*rtt_p50=} ping=${ping%% *}
  if awk -v m="$ping" -v r="$rtt" 'BEGIN { exit !(m < r) }'; then
    echo "the proxy on :$p answers PING in $ping ms, under the $rtt ms asked for" >&2
    exit 1
  fi
done
sha=$(redis-cli -p "$P_REDIS" SCRIPT LOAD "$(cat bench/sliding-window.lua)")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

declare -A res
# row PATTERN TARGET LIMIT: one load run, its key=value line into res[PATTERN,TARGET].
row() {
  local pattern=$1 target=$2 limit=$3 args
  args=(-cross "$((rtt * 1000 / 2))us" -clk-tck "$tck" -proxy-pids "$pid_toxi"
    -limit "$limit" -window "$window" -prefix "$pattern:$target")
  case $pattern in
  hot) args+=(-keys "$hot_keys" -warm -n "$tail_n" -rate "$tail_rate" -workers "$tail_workers") ;;
  hotmax) args+=(-keys "$hot_keys" -warm -n "$n" -duration "${seconds}s") ;;
  tail) args+=(-keys "$tail_keys" -warm -n "$tail_n" -rate "$tail_rate" -workers "$tail_workers") ;;
  cold*) args+=(-keys 0 -n "$n" -duration "$((seconds * 500))ms") ;;
  esac
  case $target in
  lua) args+=(-addr "127.0.0.1:$P_REDIS_FAR" -cmd evalsha -sha "$sha" -pids "$pid_redis") ;;
  origin) args+=(-addr "127.0.0.1:$P_ORIGIN_FAR" -pids "$pid_origin") ;;
  edge) args+=(-addr "127.0.0.1:$P_EDGE" -pids "$pid_edge,$pid_origin" -metrics "http://127.0.0.1:$P_METRICS/metrics") ;;
  esac
  "$work/load" "${args[@]}" >"$work/row" &
  wait $!
  res[$pattern,$target]=$(cat "$work/row")
}
never=1000000000000 # a limit never reached: every request is allowed and counted
# shellcheck disable=SC2206
patterns=(${DIST_PATTERNS:-hot hotmax tail cold10 cold100 cold1000})
targets=(lua origin edge)
for pattern in "${patterns[@]}"; do
  limit=$never
  case $pattern in cold*) limit=${pattern#cold} ;; esac
  for t in "${targets[@]}"; do row "$pattern" "$t" "$limit"; done
done
# DIST_REDIS_BENCHMARK=N: then N requests of redis-benchmark -c 50 -P 1 on 1000 random keys
# per target (bench/lib.sh's run; the edge's keys once unmeasured first): the hot rows
# measured by another client.
rb=()
if [ -n "${DIST_REDIS_BENCHMARK:-}" ]; then
  n=$DIST_REDIS_BENCHMARK keys=$hot_keys cli=()
  rb+=("redis $(run "$pid_redis" "$P_REDIS_FAR" 1 rand EVALSHA "$sha" 1 "rb:lua:__rand_int__" $never $window 1)")
  rb+=("origin $(run "$pid_origin" "$P_ORIGIN_FAR" 1 rand RL.LIMIT "rb:origin:__rand_int__" $never $window)")
  run "$pid_edge $pid_origin" "$P_EDGE" 1 rand RL.LIMIT "rb:edge:__rand_int__" $never $window >/dev/null
  rb+=("edge $(run "$pid_edge $pid_origin" "$P_EDGE" 1 rand RL.LIMIT "rb:edge:__rand_int__" $never $window)")
fi

field() { # LINE NAME -> the value of NAME=
  local v=" $1"
  v=${v#* "$2"=}
  echo "${v%% *}"
}
echo "RTT asked: $rtt ms ($((rtt / 2)) ms upstream, $((rtt - rtt / 2)) ms downstream); PING through the redis proxy: ${measured[0]}; through the origin proxy: ${measured[1]} (ms)"
echo "$(date -u +%F) $(git rev-parse --short HEAD); $(nproc) cores, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; $(redis-server --version | cut -d' ' -f1-3); toxiproxy $toxiproxy_version"
echo "origin: ${origin_flags[*]:-(defaults)}; edge: ${edge_flags[*]:-(defaults)}; hot: $hot_keys keys at $tail_rate/s, $tail_n requests,"
echo "$tail_workers connections; hotmax: $hot_keys keys, $seconds s as fast as the replies come, 50 connections;"
echo "tail: $tail_keys keys at $tail_rate/s (a key every $(awk -v k="$tail_keys" -v r="$tail_rate" 'BEGIN { printf "%.1f", k / r }') s on average), $tail_n requests, $tail_workers connections; cold: $((seconds * 500)) ms, 50 connections"
echo "crossed: share of requests slower than RTT/2; reads, hand-offs: the edge's origin calls per request;"
echo "failed: the edge's origin calls that failed (most often past --origin-timeout; the origin is then in"
echo "backoff for a while); denied: requests refused (no limit here is reached: an edge refuses what its lease"
echo "does not cover while its origin is slow); errors: requests that got an error"
echo "server us: server CPU per request (redis-server; origin; edge + origin); proxy us: Toxiproxy's"
fmt='%-9s %-7s %10s %9s %9s %9s %8s %7s %9s %7s %7s %10s %9s %6s\n'
# shellcheck disable=SC2059
printf "$fmt" pattern target requests/s "p50 ms" "p99 ms" "p99.9 ms" crossed reads hand-offs failed denied "server us" "proxy us" errors
declare -A names=([lua]="redis" [origin]="origin" [edge]="edge")
for pattern in "${patterns[@]}"; do
  for t in "${targets[@]}"; do
    l=${res[$pattern,$t]}
    # shellcheck disable=SC2059
    printf "$fmt" "$pattern" "${names[$t]}" "$(field "$l" rps)" "$(field "$l" p50)" "$(field "$l" p99)" "$(field "$l" p999)" \
      "$(awk -v c="$(field "$l" crossed)" 'BEGIN { printf "%.1f%%", c * 100 }')" "$(field "$l" reads)" "$(field "$l" handoffs)" "$(field "$l" origin_errors)" \
      "$(awk -v d="$(field "$l" denied)" -v n="$(field "$l" requests)" 'BEGIN { printf "%.1f%%", d * 100 / n }')" \
      "$(field "$l" server_us)" "$(field "$l" proxy_us)" "$(field "$l" errors)"
  done
done
echo
echo "ratchet/redis: requests/s, p50, and server CPU per request (below 1: ratchet spends less)"
printf '%-9s %-7s %10s %8s %8s\n' pattern target requests/s p50 cpu
for pattern in "${patterns[@]}"; do
  lua=${res[$pattern,lua]}
  for t in origin edge; do
    l=${res[$pattern,$t]}
    printf '%-9s %-7s %10s %8s %8s\n' "$pattern" "$t" "$(ratio "$(field "$l" rps)" "$(field "$lua" rps)")" \
      "$(ratio "$(field "$l" p50)" "$(field "$lua" p50)")" "$(ratio "$(field "$l" server_us)" "$(field "$lua" server_us)")"
  done
done
if [ ${#rb[@]} -gt 0 ]; then
  echo
  echo "redis-benchmark -c 50 -P 1 -r $hot_keys -n $DIST_REDIS_BENCHMARK: requests/s, p50, p99 (ms), server us, client us"
  for line in "${rb[@]}"; do
    # shellcheck disable=SC2086 # the fields of the line
    printf '  %-7s %10s %9s %9s %10s %9s\n' $line
  done
fi
echo
echo "the edge's origin calls over the whole run, by kind: count, mean ms (read: cold, stale or strict;"
echo "decide: a hand-off; both on a request's path. replay: in the background)"
curl -sf "http://127.0.0.1:$P_METRICS/metrics" | awk '
  /^ratchet_origin_op_duration_seconds_(sum|count)\{/ {
    match($0, /kind="[a-z]+"/); k = substr($0, RSTART + 6, RLENGTH - 7)
    if ($0 ~ /_sum\{/) sum[k] += $NF; else cnt[k] += $NF
  }
  END { for (k in cnt) printf "  %-8s %8d %8.2f\n", k, cnt[k], cnt[k] ? sum[k] * 1000 / cnt[k] : 0 }' | sort
echo "edge after the runs: $(redis-cli -p "$P_EDGE" INFO ratchet | tr -d '\r' |
  grep -E "origin_reads|handed_off|replay_retried|strict_activations|local_entries" | tr '\n' ' ')"
