#!/usr/bin/env bash
# The web console, measured in Debian's headless Chromium (the same chromium and chromedriver
# as tests/run/console), against the release binary's `rebound serve`:
#
#   cargo build --release --bin rebound --example fill_dead_letters && benches/console.sh
#
# Three servers, each on its own data directory and copy of the shipped rules, filled through
# the store API by examples/fill_dead_letters.rs before they start:
#   small   100 letters, --rate 0 (the pipeline hands out one order, then idles: the store
#           holds 100 letters and at most one more of its own)
#   big     100,000 letters, --rate 0
#   live    100 letters, --rate 20 (the pipeline at serve's default rate)
#
# 1. Page weight: every page opened once on `small` (and /ui/dead-letters on `big`) in a fresh
#    browser; from the browser's resource timing, the bytes of the page and its assets (HTML,
#    CSS, scripts, favicon, charts) and of the API answers it read to show itself (body
#    bytes as sent: the admin API does not compress).
# 2. Time to first render of /ui/dead-letters, `small` against `big`, interleaved, ROUNDS
#    loads each: from navigation start, when the first page of letters is in the DOM (a
#    MutationObserver installed before any page script, through chromedriver's CDP
#    passthrough), when the next frame after it runs (the rows painted), and the first
#    contentful paint (the page's shell, before any letter).
# 3. Latency of POST /v1/decide and GET /metrics, one request after the other on one
#    keep-alive connection for PHASE_S seconds, without the console and with a Chromium on /ui/
#    (it refreshes every 2 s: /v1/overview and /metrics), phases alternated LAT_ROUNDS times
#    on `live` and on `big` (where /metrics counts 100,000 open letters).
#
# Environment: REBOUND (default target/release/rebound), FILL (target/release/examples/
# fill_dead_letters), ROUNDS (15), LAT_ROUNDS (3), PHASE_S (10), KEEP (1 keeps the temp dir).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
REBOUND=${REBOUND:-$root/target/release/rebound}
FILL=${FILL:-$root/target/release/examples/fill_dead_letters}
ROUNDS=${ROUNDS:-15}
LAT_ROUNDS=${LAT_ROUNDS:-3}
PHASE_S=${PHASE_S:-10}
for f in "$REBOUND" "$FILL"; do
  [ -x "$f" ] || { echo "no $f: cargo build --release --bin rebound --example fill_dead_letters" >&2; exit 2; }
done
for f in /usr/bin/chromium /usr/bin/chromedriver; do
  [ -x "$f" ] || { echo "no $f: apt-get install -y chromium chromium-driver" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "python3 is not installed" >&2; exit 2; }

tmp=$(mktemp -d /tmp/rebound-console.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT

# Starts `rebound serve` NAME on a store of LETTERS letters at RATE orders/s; sets $base to
# its admin base URL.
serve() {
  local name=$1 letters=$2 rate=$3
  mkdir -p "$tmp/$name/rules"
  cp "$root"/rules/*.yaml "$tmp/$name/rules/"
  "$FILL" "$tmp/$name/data" "$letters" 2>>"$tmp/fill.log"
  "$REBOUND" serve --admin 127.0.0.1:0 --data "$tmp/$name/data" --rules "$tmp/$name/rules" \
    --rate "$rate" >"$tmp/$name/stdout" 2>"$tmp/$name/stderr" &
  pids+=($!)
  local addr=""
  for _ in $(seq 1 300); do
    addr=$(grep -o 'admin=[0-9.:]*' "$tmp/$name/stderr" | head -1 | cut -d= -f2 || true)
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || { echo "$name did not start:" >&2; cat "$tmp/$name/stderr" >&2; exit 1; }
  base="http://$addr"
}

serve small 100 0
small=$base
serve big 100000 0
big=$base
serve live 100 20
live=$base
cat "$tmp/fill.log" >&2
echo "small $small, big $big, live $live" >&2

python3 "$root/benches/console_measure.py" "$small" "$big" "$live" "$ROUNDS" "$LAT_ROUNDS" "$PHASE_S"
