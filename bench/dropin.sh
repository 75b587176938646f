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
# Then, at -P 16, every script beside redis-server running the same text, CPU per call: the
# known scripts Ratchet runs natively (redis_rate's allowN, rate-limiter-flexible,
# rate-limit-redis, limits' fixed window, ulule/limiter, Spring Cloud Gateway; texts from
# bench/scripttext) and two it runs on its interpreter: the NestJS throttler storages'
# script (bench/nestjs-throttler.lua, sent with EVAL as the libraries send it) and a
# sorted-set sliding log (bench/sliding-log.lua, EVALSHA). Each never limits. redis-benchmark draws each
# __rand_int__ on its own, so a two-key script's keys are two random keys. These run on a
# second ratchet without snapshots (--data-dir ""), as redis-server runs without them
# (--save ""): the keys of every script of a round add up (700,000 and more), and writing them
# all every second would be counted in Ratchet's CPU per call and not in Redis's.
#
# Usage: bench/dropin.sh [requests per run]   (default 200000)
# Env:   RATCHET_ORIGIN_FLAGS  flags of the ratchet origin (default "--event-loops 1", as
#                              redis-server serves clients from one thread)
#        BENCH_PIN=1           pin the servers to CPU 1 and redis-benchmark to CPU 0
#        BENCH_ROUNDS=N        run the targets N times in turn and print medians
#        DROPIN_SCRIPTS_ONLY=1 only the scripts at -P 16 (the second table)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
keys=100000
# shellcheck source=bench/lib.sh
source bench/lib.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
prepare # redis-server and redis-benchmark installed, $work/ratchet built

P_REDIS=16479 P_RATCHET=16480 P_SCRIPTS=16481
# shellcheck disable=SC2206
origin_flags=(${RATCHET_ORIGIN_FLAGS---event-loops 1})
srv=() cli=()
if [ "${BENCH_PIN:-0}" = 1 ]; then srv=(taskset -c 1) cli=(taskset -c 0); fi
"${srv[@]}" redis-server --port $P_REDIS --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pid_redis=$!
"${srv[@]}" "$work/ratchet" --listen 127.0.0.1:$P_RATCHET --data-dir "$work/data" --metrics-listen "" \
  --log-level warn "${origin_flags[@]}" &
pid_ratchet=$!
"${srv[@]}" "$work/ratchet" --listen 127.0.0.1:$P_SCRIPTS --data-dir "" --metrics-listen "" \
  --log-level warn "${origin_flags[@]}" &
pid_scripts=$!
waitport $P_REDIS
waitport $P_RATCHET
waitport $P_SCRIPTS
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
spaces=(rand hot)
[ "${DROPIN_SCRIPTS_ONLY:-0}" = 1 ] && spaces=()
for space in "${spaces[@]}"; do
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
for space in "${spaces[@]}"; do
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
for space in "${spaces[@]}"; do
  for pipe in 1 16; do
    l=${cpu[lua,$space,$pipe]:-}
    printf '%-6s %-4s %22s %22s\n' "$space" "$pipe" \
      "$(ratio "$l" "${cpu[native,$space,$pipe]:-}") ($(ratio "${rps[native,$space,$pipe]:-}" "${rps[lua,$space,$pipe]:-}"))" \
      "$(ratio "$l" "${cpu[throttle,$space,$pipe]:-}") ($(ratio "${rps[throttle,$space,$pipe]:-}" "${rps[lua,$space,$pipe]:-}"))"
  done
done

# The other scripts at -P 16: name, SHA1, how Ratchet runs it.
scripts=(allowN rlflexible rlredis limits ulule spring nestjs slidinglog)
declare -A sha=([allowN]=$want [rlflexible]=a1de965f42e177aa339706bd580f049065eca79a [rlredis]=81dbecea94d2d10514719b20ed51faf711529d9d
  [limits]=628bd136a573a06b346879695681af12ccef300f [ulule]=f74233f556d3f99c50b61169cf8aa8d5deb63fb2
  [spring]=0ad5736ed1c04aae6ec194376c784b89b8c08a7a [nestjs]=f1e0da9c495676ab6904eb80db1f2811d5347f58)
declare -A how=([allowN]=native [rlflexible]=native [rlredis]=native [limits]=native [ulule]=native [spring]=native
  [nestjs]=interpreted [slidinglog]=interpreted)
declare -A label=([allowN]="redis_rate allowN" [rlflexible]="rate-limiter-flexible" [rlredis]="rate-limit-redis"
  [limits]="limits fixed window" [ulule]="ulule/limiter incr" [spring]="Spring Cloud Gateway"
  [nestjs]="NestJS throttler (EVAL)" [slidinglog]="sorted-set sliding log")
for s in allowN rlflexible rlredis limits ulule spring; do
  go run ./bench/scripttext "${sha[$s]}" >"$work/$s.lua"
done
nest=$(<bench/nestjs-throttler.lua) # without a final newline, as the libraries send it
printf '%s' "$nest" >"$work/nestjs.lua"
cp bench/sliding-log.lua "$work/slidinglog.lua"
sha[slidinglog]=$(redis-cli -p $P_REDIS -x SCRIPT LOAD <"$work/slidinglog.lua")
for s in "${scripts[@]}"; do
  for p in $P_REDIS $P_SCRIPTS; do
    got=$(redis-cli -p "$p" -x SCRIPT LOAD <"$work/$s.lua")
    [ "$got" = "${sha[$s]}" ] || { echo "SCRIPT LOAD of $s on :$p answered '$got', want ${sha[$s]}" >&2; exit 1; }
  done
done
# script_cmd NAME SPACE: the command of one call into the caller's cmd array.
script_cmd() {
  local id=__rand_int__
  [ "$2" = hot ] && id=hot
  case $1 in
  allowN) cmd=(EVALSHA "${sha[$1]}" 1 "rate:$id" "${gcra[@]}" 1) ;;
  rlflexible) cmd=(EVALSHA "${sha[$1]}" 1 "rlflx:$id" 1 60 1000000000 60) ;;
  rlredis) cmd=(EVALSHA "${sha[$1]}" 1 "rl:$id" 0 60000) ;;
  limits) cmd=(EVALSHA "${sha[$1]}" 1 "LIMITS:LIMITER/$id/1000000000/1/minute" 60 1) ;;
  ulule) cmd=(EVALSHA "${sha[$1]}" 1 "limiter:$id" 1 60000) ;;
  spring) cmd=(EVALSHA "${sha[$1]}" 2 "request_rate_limiter.{$id}.tokens" "request_rate_limiter.{$id}.timestamp"
    1000000000 1000000000 "" 1) ;;
  nestjs) cmd=(EVAL "$nest" 2 "{$id:default}:hits" "{$id:default}:blocked" default 60000 1000000000 60000) ;;
  slidinglog) cmd=(EVALSHA "${sha[$1]}" 1 "log:$id" 1000000000 1000) ;;
  esac
}
starg=()
for s in "${scripts[@]}"; do starg+=("redis/$s" "ratchet/$s"); done
for space in rand hot; do
  for _ in $(seq "$rounds"); do
    for s in "${scripts[@]}"; do
      script_cmd "$s" "$space"
      all[redis/$s,$space,16]+="$(run $pid_redis $P_REDIS 16 $space "${cmd[@]}");"
      all[ratchet/$s,$space,16]+="$(run $pid_scripts $P_SCRIPTS 16 $space "${cmd[@]}");"
    done
  done
  medians "$space" 16 "${starg[@]}"
done
echo
echo "At -P 16, each script on redis-server and on a Ratchet without snapshots (--data-dir \"\"):"
echo "requests/s and server CPU per call (us);"
echo "ratio: redis's CPU per call over Ratchet's (target: 2.00 or more natively, 0.50 or more interpreted)"
printf '%-6s %-26s %-12s %12s %9s %12s %9s %7s %5s\n' keys script ratchet "redis req/s" "redis us" "ratchet req/s" "ratch us" ratio met
for space in rand hot; do
  for s in "${scripts[@]}"; do
    q=$(ratio "${cpu[redis/$s,$space,16]:-}" "${cpu[ratchet/$s,$space,16]:-}")
    goal=2
    [ "${how[$s]}" = interpreted ] && goal=0.5
    met=$(awk -v q="$q" -v g=$goal 'BEGIN { print (q != "-" && q + 0 >= g) ? "yes" : "no" }')
    printf '%-6s %-26s %-12s %12s %9s %12s %9s %7s %5s\n' "$space" "${label[$s]}" "${how[$s]}" \
      "${rps[redis/$s,$space,16]}" "${cpu[redis/$s,$space,16]}" "${rps[ratchet/$s,$space,16]}" "${cpu[ratchet/$s,$space,16]}" "$q" "$met"
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
