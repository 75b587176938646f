#!/usr/bin/env bash
# The drop-in commands beside the script they replace, one run, same machine, same
# redis-benchmark settings (-c 50), at -P 1 and -P 16, on 100k random keys and one hot key:
#   redis EVALSHA of go-redis/redis_rate's allowN (the text the library sends, SHA1
#     f52a5b56..., printed by bench/scripttext) | ratchet EVALSHA of the same SHA1 (native) |
#   ratchet CL.THROTTLE (redis-cell's command, GCRA like allowN)
# Each is a GCRA of burst 1e9 and 1e7 requests per 60 s: never limited, every request
# writes its key. Prints requests/s, p50 and p99 (ms), and the servers' CPU time per
# request (user+sys from /proc): on 2 cores the single-threaded redis-benchmark is the
# bottleneck at -P 1, and CPU per request then shows what each server would sustain.
#
# Usage: bench/dropin.sh [requests per run]   (default 200000)
# Env:   RATCHET_ORIGIN_FLAGS  flags of the ratchet origin (default "--event-loops 1", as
#                              redis-server serves clients from one thread)
#        BENCH_PIN=1           pin the servers to CPU 1 and redis-benchmark to CPU 0
#        BENCH_ROUNDS=N        run the targets N times in turn and print medians
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
keys=100000
# shellcheck source=bench/lib.sh
source bench/lib.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
prepare # redis-server and redis-benchmark installed, $work/ratchet built

P_REDIS=16479 P_RATCHET=16480
# shellcheck disable=SC2206
origin_flags=(${RATCHET_ORIGIN_FLAGS---event-loops 1})
srv=() cli=()
if [ "${BENCH_PIN:-0}" = 1 ]; then srv=(taskset -c 1) cli=(taskset -c 0); fi
"${srv[@]}" redis-server --port $P_REDIS --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pid_redis=$!
"${srv[@]}" "$work/ratchet" --listen 127.0.0.1:$P_RATCHET --data-dir "$work/data" --metrics-listen "" \
  --log-level warn "${origin_flags[@]}" &
pid_ratchet=$!
waitport $P_REDIS
waitport $P_RATCHET
want=f52a5b566060d79fd321d695df55bc918339c4aa
go run ./bench/scripttext $want >"$work/allown.lua"
for p in $P_REDIS $P_RATCHET; do
  got=$(redis-cli -p $p -x SCRIPT LOAD <"$work/allown.lua")
  [ "$got" = $want ] || { echo "SCRIPT LOAD on :$p answered '$got', want $want" >&2; exit 1; }
done

gcra=(1000000000 10000000 60) # burst, rate, period (s): 6 us per request, 6000 s of burst: never limited
rounds=${BENCH_ROUNDS:-1}
declare -A all rps p50 p99 cpu ccpu
targets=(lua native throttle)
for space in rand hot; do
  k="rate:__rand_int__"
  [ "$space" = hot ] && k="rate:hot"
  for pipe in 1 16; do
    for _ in $(seq "$rounds"); do
      for t in "${targets[@]}"; do # allowN's state is a float, redis-cell's an integer: keys apart
        case $t in
        lua) out=$(run $pid_redis $P_REDIS $pipe $space EVALSHA $want 1 "$k" "${gcra[@]}" 1) ;;
        native) out=$(run $pid_ratchet $P_RATCHET $pipe $space EVALSHA $want 1 "$k" "${gcra[@]}" 1) ;;
        throttle) out=$(run $pid_ratchet $P_RATCHET $pipe $space CL.THROTTLE "cell:${k#rate:}" "${gcra[@]}" 1) ;;
        esac
        all[$t,$space,$pipe]+="$out;"
      done
    done
    medians "$space" "$pipe" "${targets[@]}"
  done
done

echo "requests per run: $n; rounds: $rounds (medians); -c 50; $(nproc) cores; $(redis-server --version | cut -d' ' -f1-3); pinned: ${BENCH_PIN:-0}"
echo "ratchet: ${origin_flags[*]:-(defaults)}, snapshots every 1s; GCRA burst ${gcra[0]}, ${gcra[1]} per ${gcra[2]} s"
printf '%-6s %-4s %-24s %12s %8s %8s %10s\n' keys -P target "requests/s" "p50 ms" "p99 ms" "server us"
declare -A names=([lua]="redis EVALSHA allowN" [native]="ratchet EVALSHA allowN" [throttle]="ratchet CL.THROTTLE")
for space in rand hot; do
  for pipe in 1 16; do
    for t in "${targets[@]}"; do
      printf '%-6s %-4s %-24s %12s %8s %8s %10s\n' "$space" "$pipe" "${names[$t]}" "${rps[$t,$space,$pipe]}" \
        "${p50[$t,$space,$pipe]}" "${p99[$t,$space,$pipe]}" "${cpu[$t,$space,$pipe]}"
    done
  done
done
echo
echo "CPU per request of redis running the script, over ratchet's (higher: ratchet cheaper); requests/s ratios in brackets"
printf '%-6s %-4s %22s %22s\n' keys -P "allowN native/Lua" "CL.THROTTLE/Lua"
for space in rand hot; do
  for pipe in 1 16; do
    l=${cpu[lua,$space,$pipe]:-}
    printf '%-6s %-4s %22s %22s\n' "$space" "$pipe" \
      "$(ratio "$l" "${cpu[native,$space,$pipe]:-}") ($(ratio "${rps[native,$space,$pipe]:-}" "${rps[lua,$space,$pipe]:-}"))" \
      "$(ratio "$l" "${cpu[throttle,$space,$pipe]:-}") ($(ratio "${rps[throttle,$space,$pipe]:-}" "${rps[lua,$space,$pipe]:-}"))"
  done
done
