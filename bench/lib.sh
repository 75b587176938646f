# Shared by the bench scripts (sourced): server CPU from /proc and one redis-benchmark run.
# The caller sets: n (requests per run), keys (random key space), work (a temp dir,
# removed by the caller's EXIT trap),
# cli (a command prefix for redis-benchmark, e.g. taskset; may be empty).

# prepare installs redis-server and redis-tools when missing, and builds $work/ratchet.
prepare() {
  if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
  go build -o "$work/ratchet" ./cmd/ratchet
}

tck=$(getconf CLK_TCK)
ticks() { # PID... -> user+sys clock ticks of those processes
  local sum=0 p
  for p in "$@"; do sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
  echo $sum
}
# run "PIDS" PORT PIPELINE KEYSPACE(rand|hot) COMMAND...
#   -> "rps p50 p99 server_cpu_us_per_request client_cpu_us_per_request"
run() {
  local pids=$1 port=$2 pipe=$3 space=$4; shift 4
  local r=() before out client
  [ "$space" = rand ] && r=(-r $keys)
  # shellcheck disable=SC2086
  before=$(ticks $pids)
  client=$( { TIMEFORMAT='%U %S'; time "${cli[@]}" redis-benchmark -p "$port" -c 50 -n "$n" -P "$pipe" "${r[@]}" --csv "$@" >"$work/out.csv"; } 2>&1 )
  # The fields counted from the end: the first, the command, may hold commas and newlines
  # (a script's text).
  out=$(tail -1 "$work/out.csv" | awk -F, '{ gsub(/"/, ""); print $(NF - 6), $(NF - 3), $(NF - 1) }')
  # shellcheck disable=SC2086
  echo "$out $(ticks $pids) $before $client" | awk -v n="$n" -v hz="$tck" \
    '{ printf "%s %s %s %.2f %.2f\n", $1, $2, $3, ($4 - $5) * 1e6 / hz / n, ($6 + $7) * 1e6 / n }'
}
# median VALUES... -> the middle value (the lower middle of an even count)
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# medians SPACE PIPE TARGET... -> for each target, the median of each column of the runs
# in the caller's all[target,space,pipe] ("rps p50 p99 cpu ccpu;" per run), into the
# caller's associative arrays rps, p50, p99, cpu and ccpu.
medians() {
  local space=$1 pipe=$2 t col v
  shift 2
  for t in "$@"; do
    for col in 1 2 3 4 5; do
      # shellcheck disable=SC2046
      v=$(median $(tr ';' '\n' <<<"${all[$t,$space,$pipe]}" | awk -v c=$col 'NF { print $c }'))
      case $col in
      1) rps[$t,$space,$pipe]=$v ;; 2) p50[$t,$space,$pipe]=$v ;; 3) p99[$t,$space,$pipe]=$v ;;
      4) cpu[$t,$space,$pipe]=$v ;; 5) ccpu[$t,$space,$pipe]=$v ;;
      esac
    done
  done
}
# ratio A B -> A/B with two decimals, "-" when B is 0 or missing
ratio() { echo "${1:-0} ${2:-0}" | awk '{ if ($2 > 0) printf "%.2f", $1 / $2; else printf "-" }'; }
# waitport PORT -> waits up to 10 s for PING to answer there
waitport() {
  for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "port $1 did not come up" >&2
  return 1
}
