#!/usr/bin/env bash
# The bundled run with labels, history and alerts on, against the same run before them, in one
# session: `rebound run` of this tree (NEW) against the binary of commit 40d4440 (BASE, before
# dead-letter labels, the failure history and alerts), interleaved round by round.
#
#   cargo build --release && benches/ops.sh
#
# Variants, each with a fresh data directory and its own copy of the rules:
#   base    BASE run on the shipped rules/
#   plain   NEW run on the shipped rules/ (the failure history is always on: its cost alone)
#   full    NEW run on rules/ with its 50-labels.yaml replaced (every label the shipped rules dead-letter to,
#           L1 L2 L3, with `sla` and `expire: 30d`; `alert: oncall` on L1, the most letters)
#           and --config CFG whose receiver `oncall` is a local webhook this script starts
#           (answers 200 to every POST, counts the letters)
#   redrive (REDRIVE=1 only) full plus `redrive: { after: 1s, max: 1 }` on L3 (poison: the
#           redriven message fails again at once). Not the same work as base: each L3 letter
#           is replayed once, and the run waits for its redrives (on L1 it would double the
#           wall time: a redriven L1 message goes through its backoff again). Left out of the
#           default run.
#
# Environment: BASE (a rebound binary of 40d4440; default: built once with `git archive` into
# /tmp/rebound-base-40d4440 with its own target directory, reused after), REBOUND (NEW, default
# target/release/rebound), MESSAGES (50000), SCALE (100: --time-scale), ROUNDS (3), REDRIVE
# (0), KEEP (1 keeps the temp directory).
#
# Per measurement: the wall time of the process (start to exit, the final flush of alerts
# included) and its CPU time (user + sys, bash's `time`); acked/s = the --json report's acked /
# wall; us/ack = CPU µs / acked. The summary gives, per variant, the median over rounds of wall,
# acked/s and CPU, and each against base: the ratio of the medians and the median of each
# round's ratio. At the default SCALE the wall time is mostly waiting, not work (50,000 orders
# take about as long as 2,000: the run waits on its retries' backoff; it used about 0.8 s of
# CPU in 8 s here), so CPU is the sharper measure of cost; SCALE=1000 shrinks the waits. Above
# 1000 message timeouts start to fire and the runs no longer do the same work (compare the
# notes' dead-letter counts).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
REBOUND=${REBOUND:-$root/target/release/rebound}
BASE_COMMIT=40d4440
base_home=/tmp/rebound-base-$BASE_COMMIT
BASE=${BASE:-$base_home/target/release/rebound}
MESSAGES=${MESSAGES:-50000}
SCALE=${SCALE:-100}
ROUNDS=${ROUNDS:-3}
REDRIVE=${REDRIVE:-0}
[ -x "$REBOUND" ] || { echo "no $REBOUND: cargo build --release" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is not installed" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is not installed" >&2; exit 2; }
"$REBOUND" run --help | grep -q -- '--config' || { echo "$REBOUND run has no --config" >&2; exit 2; }

if [ ! -x "$BASE" ]; then
  echo "== building $BASE_COMMIT into $base_home (once)" >&2
  mkdir -p "$base_home/src"
  git -C "$root" archive "$BASE_COMMIT" | tar -x -C "$base_home/src"
  (cd "$base_home/src" && CARGO_TARGET_DIR="$base_home/target" cargo build --release --bin rebound)
fi
[ -x "$BASE" ] || { echo "no $BASE" >&2; exit 2; }

tmp=$(mktemp -d /tmp/rebound-ops.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The webhook: 200 to every POST; one line per request, the number of letters it carried.
cat >"$tmp/receiver.py" <<'EOF'
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
log = open(sys.argv[2], "a", buffering=1)
class Hook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try: n = len(json.loads(body)["dead_letters"])
        except Exception: n = -1
        log.write(f"{n}\n")
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hook).serve_forever()
EOF
: >"$tmp/alerts.log"
python3 "$tmp/receiver.py" "$port" "$tmp/alerts.log" &
receiver=$!
cleanup() {
  kill "$receiver" 2>/dev/null || true
  wait "$receiver" 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 50); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 0.1
done

# labels.yaml: the labels the shipped rules dead-letter to (rules/*.yaml: L1, L2, L3).
labels() {
  local redrive=$1
  echo "version: 1"
  echo "labels:"
  echo "  L1:"
  echo "    alert: oncall"
  echo "    sla: 1h"
  echo "    expire: 30d"
  echo "  L2:"
  echo "    sla: 15m"
  echo "    expire: 30d"
  echo "  L3:"
  echo "    sla: 2h"
  echo "    expire: 30d"
  if [ "$redrive" = 1 ]; then echo "    redrive: { after: 1s, max: 1 }"; fi
}
got=$(grep -ho 'dead_letter: *L[0-9]*' "$root"/rules/*.yaml | awk '{ print $2 }' | sort -u | tr '\n' ' ')
[ "$got" = "L1 L2 L3 " ] || echo "warning: the shipped rules dead-letter to $got, labels.yaml names L1 L2 L3" >&2
cat >"$tmp/config.yaml" <<EOF
receivers:
  oncall:
    webhook: http://127.0.0.1:$port/hook
EOF

alerts_seen() { awk '$1 > 0 { r++; n += $1 } END { printf "%d %d", r, n }' "$tmp/alerts.log"; }

# One measurement of a variant in round r: appends "variant round wall acked/s" to results.
measure() {
  local v=$1 r=$2 dir="$tmp/$1-$2" bin wall user sys cpu acked a0 a1 extra=()
  mkdir -p "$dir"
  cp -r "$root/rules" "$dir/rules"
  case "$v" in
    # The base binary knows no `labels:`, and plain is the same rules without them.
    base) bin=$BASE; rm -f "$dir/rules/50-labels.yaml" ;;
    plain) bin=$REBOUND; rm -f "$dir/rules/50-labels.yaml" ;;
    full) bin=$REBOUND; labels 0 >"$dir/rules/50-labels.yaml"; extra=(--config "$tmp/config.yaml") ;;
    redrive) bin=$REBOUND; labels 1 >"$dir/rules/50-labels.yaml"; extra=(--config "$tmp/config.yaml") ;;
  esac
  a0=$(alerts_seen)
  local TIMEFORMAT='%3R %3U %3S' times
  if ! times=$( { time "$bin" run --json --messages "$MESSAGES" --time-scale "$SCALE" \
    --data "$dir/data" --rules "$dir/rules" "${extra[@]}" >"$dir/out.json" 2>"$dir/err.log"; } 2>&1 ); then
    echo "$v round $r failed (KEEP=1 keeps $dir):" >&2
    tail -5 "$dir/err.log" >&2
    exit 1
  fi
  sleep 0.2 # the receiver's last lines
  a1=$(alerts_seen)
  read -r wall user sys <<<"$times"
  cpu=$(echo "$user + $sys" | bc -l)
  acked=$(jq -r '.acked' "$dir/out.json")
  local rps redrives=-
  rps=$(echo "$acked / $wall" | bc -l)
  # Redrives: the audit log's entries by operator `rebound` (NEW only).
  [ "$v" = base ] || redrives=$(python3 -c 'import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(c.execute("SELECT count(*) FROM audit_log WHERE operator = ?", ("rebound",)).fetchone()[0])' "$dir/data/rebound.db")
  printf "%-8s %5s %8.2f %10.0f %7.2f %7.0f  %s; alert posts %d, letters %d; redrives %s\n" \
    "$v" "$r" "$wall" "$rps" "$cpu" "$(echo "1000000 * $cpu / $acked" | bc -l)" \
    "$(jq -r '"acked \(.acked), dead \(.dead_lettered) \(.dead_letters_by_label | tostring), lost \(.lost), retries \(.retries), dups \(.duplicates)"' "$dir/out.json")" \
    $((${a1% *} - ${a0% *})) $((${a1#* } - ${a0#* })) "$redrives"
  echo "$v $r $wall $rps $cpu" >>"$tmp/results"
}

variants="base plain full"
[ "$REDRIVE" = 1 ] && variants="$variants redrive"
echo "== $MESSAGES orders, --time-scale $SCALE, $(nproc) cores, rounds $ROUNDS"
echo "   BASE $BASE ($BASE_COMMIT)"
echo "   NEW  $REBOUND ($(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- . ':!benches' || echo ', dirty'))"
printf "%-8s %5s %8s %10s %7s %7s  %s\n" variant round wall_s acked/s cpu_s "us/ack" notes
for r in $(seq "$ROUNDS"); do
  for v in $variants; do measure "$v" "$r"; done
done

echo
echo "== median over $ROUNDS round(s)"
printf "%-8s %8s %10s %9s %11s %7s %9s %11s\n" variant wall_s acked/s "vs base" "(per round)" cpu_s "vs base" "(per round)"
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
col() { awk -v v="$1" -v c="$2" '$1 == v { print $c }' "$tmp/results" | median; }
# The median over rounds of variant $1's column $2 over base's in the same round.
per_round() {
  awk -v v="$1" -v c="$2" '$1 == "base" { b[$2] = $c } $1 == v { x[$2] = $c }
    END { for (r in x) print x[r] / b[r] }' "$tmp/results" | median
}
base_rps=$(col base 4)
base_cpu=$(col base 5)
for v in $variants; do
  rps=$(col "$v" 4)
  cpu=$(col "$v" 5)
  printf "%-8s %8.2f %10.0f %9.3f %11.3f %7.2f %9.3f %11.3f\n" "$v" "$(col "$v" 3)" "$rps" \
    "$(echo "$rps / $base_rps" | bc -l)" "$(per_round "$v" 4)" \
    "$cpu" "$(echo "$cpu / $base_cpu" | bc -l)" "$(per_round "$v" 5)"
done
