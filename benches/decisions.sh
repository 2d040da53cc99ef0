#!/usr/bin/env bash
# The decision log's cost (release.md, issue 30): the default `rebound run` with the log on
# (every decision recorded: `decisions.sample: 100%`, the default) against the same run with
# it off (`decisions.sample: 0%`), interleaved round by round, each with a fresh data
# directory.
#
#   cargo build --release && benches/decisions.sh
#
# Per run: the wall time and the CPU time (user + sys) of the process, and from its --json
# report the acked and the decisions logged (rows of the decisions table). The summary: the
# median of each over the rounds, and on / off (target: within 5%).
#
# Environment: REBOUND (default target/release/rebound), MESSAGES (50000), SCALE (100),
# ROUNDS (5), KEEP (1 keeps the temp directory).
set -euo pipefail
cd "$(dirname "$0")/.."
REBOUND=${REBOUND:-target/release/rebound}
MESSAGES=${MESSAGES:-50000}
SCALE=${SCALE:-100}
ROUNDS=${ROUNDS:-5}
command -v sqlite3 >/dev/null || { echo "decisions.sh needs sqlite3" >&2; exit 2; }
[ -x "$REBOUND" ] || { echo "no $REBOUND: cargo build --release first" >&2; exit 2; }
TMP=$(mktemp -d)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT
printf 'decisions:\n  sample: 100%%\n' >"$TMP/on.yaml"
printf 'decisions:\n  sample: 0%%\n' >"$TMP/off.yaml"
declare -A WALL CPU
for round in $(seq "$ROUNDS"); do
  for variant in on off; do
    data="$TMP/$variant-$round"
    start=$(date +%s.%N)
    ( time -p "$REBOUND" run --messages "$MESSAGES" --time-scale "$SCALE" --data "$data" \
        --config "$TMP/$variant.yaml" --json >"$TMP/$variant-$round.json" 2>/dev/null ) 2>"$TMP/time"
    end=$(date +%s.%N)
    wall=$(echo "$end - $start" | bc -l)
    cpu=$(awk '/^user/{u=$2} /^sys/{s=$2} END{print u+s}' "$TMP/time")
    logged=$(sqlite3 "$data/rebound.db" "select count(*) from decisions")
    WALL[$variant]+="$wall "
    CPU[$variant]+="$cpu "
    printf 'round %d %-3s wall %6.2f s  cpu %6.2f s  decisions logged %s\n' "$round" "$variant" "$wall" "$cpu" "$logged"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
won=$(echo "${WALL[on]}" | median); woff=$(echo "${WALL[off]}" | median)
con=$(echo "${CPU[on]}" | median); coff=$(echo "${CPU[off]}" | median)
printf 'median wall: on %.2f s, off %.2f s, on/off %.3f\n' "$won" "$woff" "$(echo "$won / $woff" | bc -l)"
printf 'median cpu:  on %.2f s, off %.2f s, on/off %.3f (target: within 5%%)\n' "$con" "$coff" "$(echo "$con / $coff" | bc -l)"
