#!/usr/bin/env bash
# The fleet on one machine: `rebound run` on 1, 2 and 3 nodes sharing one Redis, against the
# single-process SQLite run, in the same session; and the server's own ceiling
# (redis-benchmark). Starts and stops a redis-server of its own on a free port in a temp
# directory (appendonly yes, appendfsync always, no RDB, noeviction): never the machine's
# shared Redis.
#
#   cargo build --release && benches/fleet.sh
#
# Environment: REBOUND (default target/release/rebound), MESSAGES (50000), SCALES ("100
# 1000": --time-scale values), NODES ("1 2 3"), ROUNDS (1: each measurement that many times,
# interleaved), CEILING (1: run redis-benchmark first; 0 skips it), KEEP (1 keeps the temp
# directory).
#
# Per measurement: a fresh namespace; CONFIG RESETSTAT and INFO cpu before; the N nodes
# started at once (`rebound run --json --messages M --store redis://… --namespace NS --node nI
# --data DIR --rules COPY --time-scale S`), each with its own data and rules directory; the
# wall time of the whole fleet (all N exited). Aggregate acked/s = acked / wall. Redis CPU =
# used_cpu_user + used_cpu_sys after minus before; "scripts" = EVALSHA + EVAL calls, "cmds" =
# every other command the server ran (the scripts' own commands included).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
REBOUND=${REBOUND:-$root/target/release/rebound}
MESSAGES=${MESSAGES:-50000}
SCALES=${SCALES:-"100 1000"}
NODES=${NODES:-"1 2 3"}
ROUNDS=${ROUNDS:-1}
CEILING=${CEILING:-1}
[ -x "$REBOUND" ] || { echo "no $REBOUND: cargo build --release" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "redis-server is not installed" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is not installed" >&2; exit 2; }

tmp=$(mktemp -d /tmp/rebound-fleet.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp" --appendonly yes --appendfsync always \
  --save '' --maxmemory-policy noeviction --logfile redis.log --daemonize no &
server=$!
cleanup() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"

info_field() { cli info "$1" | tr -d '\r' | awk -F: -v k="$2" '$1 == k { print $2 }'; }
redis_cpu() { cli info cpu | tr -d '\r' | awk -F: '$1 == "used_cpu_user" || $1 == "used_cpu_sys" { s += $2 } END { printf "%.3f", s }'; }
# "scripts cmds": script calls, and every other command (without the INFO/CONFIG of this script).
commandstats() {
  cli info commandstats | tr -d '\r' | awk -F'[:=,]' '
    /^cmdstat_/ { name = substr($1, 9); calls = $3
      if (name == "evalsha" || name == "eval") s += calls
      else if (name != "info" && name != "config|resetstat") c += calls }
    END { printf "%d %d", s, c }'
}
now() { date +%s.%N; }

if [ "$CEILING" = 1 ]; then
  echo "== the server's ceiling (redis-benchmark, appendfsync always, this machine)"
  redis-benchmark -p "$port" -q -n 200000 -t set,lpush,zadd -P 16 2>/dev/null | tr '\r' '\n' | grep -v '^ *$' | grep -v 'rps=' || true
  redis-benchmark -p "$port" -q -n 200000 -t set -P 1 -c 50 2>/dev/null | tr '\r' '\n' | grep -v 'rps=' | sed 's/^/(50 clients, no pipelining) /' | grep -v '^(50 clients, no pipelining) *$' || true
  # The shared store's apply.lua with 500 acked fates a call (as the journal sends them).
  sha=$(cli script load "$(cat "$root/store-redis/src/scripts/apply.lua")")
  args=()
  for i in $(seq 500); do args+=(A "m$i-__rand_int__" '' ''); done
  cli config resetstat >/dev/null
  for clients in 1 4; do
    cli config resetstat >/dev/null
    out=$(redis-benchmark -p "$port" -q -n 1000 -c "$clients" -r 100000000 EVALSHA "$sha" 1 '{ceiling}:' "${args[@]}" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1)
    rps=$(echo "$out" | grep -o '[0-9.]* requests per second' | cut -d' ' -f1)
    usec=$(cli info commandstats | tr -d '\r' | awk -F'[:=,]' '$1 == "cmdstat_evalsha" { printf "%.2f", $5 / $3 / 500 }')
    echo "apply.lua, 500 acked fates a call, $clients client(s): $rps calls/s = $(echo "$rps * 500" | bc | cut -d. -f1) fates/s; ${usec} µs/fate in the script"
  done
  cli flushall >/dev/null
fi

# One measurement: N nodes (0: the single-process SQLite run) at time scale S. Prints a row.
measure() {
  local n=$1 scale=$2 ns dir start end wall acked cpu0 cpu1 st
  ns="fleet-$n-$(echo "$scale" | tr . _)-$RANDOM$RANDOM"
  dir="$tmp/$ns"
  mkdir -p "$dir"
  if [ "$n" = 0 ]; then
    cp -r "$root/rules" "$dir/rules"
    start=$(now)
    "$REBOUND" run --json --messages "$MESSAGES" --time-scale "$scale" --data "$dir/data" \
      --rules "$dir/rules" >"$dir/out.json" 2>"$dir/err.log"
    end=$(now)
    wall=$(echo "$end - $start" | bc -l)
    acked=$(jq -r '.acked' "$dir/out.json")
    printf "%-7s %6s %8.2f %10.0f %8s %6s %8s %8s  %s\n" sqlite "$scale" "$wall" \
      "$(echo "$acked / $wall" | bc -l)" - - - - "$(jq -r '"acked \(.acked), dead \(.dead_lettered), lost \(.lost), retries \(.retries), dups \(.duplicates)"' "$dir/out.json")"
    return
  fi
  cli config resetstat >/dev/null
  cpu0=$(redis_cpu)
  start=$(now)
  local pids=()
  for i in $(seq "$n"); do
    mkdir -p "$dir/n$i"
    cp -r "$root/rules" "$dir/n$i/rules"
    "$REBOUND" run --json --messages "$MESSAGES" --time-scale "$scale" --store "$url" \
      --namespace "$ns" --node "n$i" --data "$dir/n$i/data" --rules "$dir/n$i/rules" \
      >"$dir/n$i/out.json" 2>"$dir/n$i/err.log" &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  end=$(now)
  cpu1=$(redis_cpu)
  st=$(commandstats)
  if [ "$failed" = 1 ]; then
    echo "a node failed (see $dir/n*/err.log; KEEP=1 keeps them)" >&2
    tail -3 "$dir"/n*/err.log >&2
  fi
  wall=$(echo "$end - $start" | bc -l)
  acked=$(jq -r '.acked' "$dir/n1/out.json")
  local cpu
  cpu=$(echo "$cpu1 - $cpu0" | bc -l)
  printf "%-7s %6s %8.2f %10.0f %8.2f %5.0f%% %8s %8s  %s\n" "redis$n" "$scale" "$wall" \
    "$(echo "$acked / $wall" | bc -l)" "$cpu" "$(echo "100 * $cpu / $wall" | bc -l)" \
    ${st% *} ${st#* } "$(jq -r '"acked \(.acked), dead \(.dead_lettered), lost \(.lost), retries \(.retries), dups \(.duplicates), sessions \(.sessions)"' "$dir/n1/out.json")"
}

echo
echo "== $MESSAGES orders, $(nproc) cores, redis-server $(info_field server redis_version), rounds $ROUNDS"
printf "%-7s %6s %8s %10s %8s %6s %8s %8s  %s\n" store scale wall_s acked/s redis_s cpu% scripts cmds notes
for scale in $SCALES; do
  for _ in $(seq "$ROUNDS"); do
    measure 0 "$scale"
    for n in $NODES; do measure "$n" "$scale"; done
  done
done
