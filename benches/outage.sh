#!/usr/bin/env bash
# The bundled run through a payment-gateway outage, with the shipped adaptive rules (heat,
# budget and breaker on) against the same rules without `budgets:` and `breakers:` (heat kept),
# interleaved round by round.
#
#   cargo build --release && benches/outage.sh
#
# Each run: rebound run --messages N --time-scale S --outage O --json --data FRESH --rules R
# --admin 127.0.0.1:0, with /metrics scraped every 100 ms (timestamps relative to the process
# start). From the samples of rebound_retries_fired_total (summed over rules) and
# rebound_messages_new_total:
#   outage_fired  retries fired from the outage start to 2 s (real) after its end; the outage
#                 runs from 2 s to 2 s + O in rules' time, i.e. 0.02 s to 0.22 s real at x100
#                 for --outage 20s, taken here relative to the process start (the counters are
#                 read at the samples nearest both ends; before the first sample they are 0)
#   peak_ratio    the largest fired/new over any 1 s window of samples (10 intervals), among
#                 windows where new > 0, and when (window start, s); a window that takes in
#                 the spout's last orders has few new and a high ratio, so peak1s_in is the
#                 same over windows that end before the last new order (0 if none does)
#   peak100ms     the largest fired/new of one 100 ms interval with new > 0
# Each sample also keeps rebound_budget_held_total (summed) and the breakers not closed
# (KEEP=1: $tmp/run-VARIANT-ROUND.json, samples as [t, fired, new, held, states]).
# and the report's totals (acked, dead_lettered, lost, retries, elapsed_s, breakers, budgets).
#
# Variants, each with a fresh data directory:
#   breaker  the shipped rules/
#   heat     a copy of rules/ whose 60-adaptive.yaml has no budgets: and breakers: sections
#
# Caveats seen on 2026-12-01 (2 shared cores): at 50,000 orders and x100 the spout may take
# every order before 0.3 s (250k/s), so the outage meets only retries in flight and both
# variants end alike (about 811 letters, 11,500 retries); and with the shipped rules the
# breaker often opens on the healthy gateway in the first 0.15 s (also without --outage), its
# held payment retries fill max_spout_pending, and the whole run is throttled to ~4-6k
# orders/s (elapsed 10-16 s against 8 s). Look at the samples (KEEP=1) before comparing.
#
# Environment: REBOUND (default target/release/rebound), MESSAGES (50000), SCALE (100),
# OUTAGE (20s), ROUNDS (2), KEEP (1 keeps the temp directory and the per-run samples).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
REBOUND=${REBOUND:-$root/target/release/rebound}
MESSAGES=${MESSAGES:-50000}
SCALE=${SCALE:-100}
OUTAGE=${OUTAGE:-20s}
ROUNDS=${ROUNDS:-2}
KEEP=${KEEP:-0}

tmp=$(mktemp -d /tmp/rebound-outage.XXXXXX)
if [[ $KEEP != 1 ]]; then trap 'rm -rf "$tmp"' EXIT; else echo "keeping $tmp" >&2; fi

cp -r "$root/rules" "$tmp/rules-breaker"
cp -r "$root/rules" "$tmp/rules-heat"
# Drop the budgets: and breakers: sections (each runs to the next top-level key or the end).
python3 - "$tmp/rules-heat/60-adaptive.yaml" <<'EOF'
import re, sys
p = sys.argv[1]
out, skip = [], False
for line in open(p):
    if re.match(r"^[A-Za-z_]+:", line):
        skip = line.split(":")[0] in ("budgets", "breakers")
    if not skip:
        out.append(line)
open(p, "w").write("".join(out))
EOF
grep -q '^heat:' "$tmp/rules-heat/60-adaptive.yaml"
! grep -qE '^(budgets|breakers):' "$tmp/rules-heat/60-adaptive.yaml"
"$REBOUND" check --rules "$tmp/rules-heat" >/dev/null

cat >"$tmp/one.py" <<'EOF'
# One run: starts rebound, scrapes /metrics every 100 ms, writes samples + report as JSON.
import json, re, subprocess, sys, threading, time, urllib.request
rebound, rules, data, messages, scale, outage, out = sys.argv[1:8]
cmd = [rebound, "run", "--messages", messages, "--time-scale", scale, "--outage", outage,
       "--json", "--data", data, "--rules", rules, "--admin", "127.0.0.1:0"]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
addr, stderr_lines, got = [None], [], threading.Event()
def read_err():
    for line in p.stderr:
        stderr_lines.append(line)
        m = re.search(r"http://[^\s/]+", line)
        if m and addr[0] is None:
            addr[0] = m.group(0)
            got.set()
    got.set()
threading.Thread(target=read_err, daemon=True).start()
stdout = []
threading.Thread(target=lambda: stdout.append(p.stdout.read()), daemon=True).start()
got.wait(30)
addr_at = time.monotonic() - t0
samples = []
def scrape():
    with urllib.request.urlopen(addr[0] + "/metrics", timeout=1) as r:
        text = r.read().decode()
    fired = new = held = 0.0
    open_keys = []
    for line in text.splitlines():
        if line.startswith("rebound_budget_held_total"):
            held += float(line.rsplit(" ", 1)[1])
        elif line.startswith("rebound_breaker_state") and line.endswith(" 1") \
                and 'state="closed"' not in line:
            open_keys.append(re.search(r'key="([^"]*)".*state="([^"]*)"', line).group(2))
        elif line.startswith("rebound_retries_fired_total"):
            fired += float(line.rsplit(" ", 1)[1])
        elif line.startswith("rebound_messages_new_total"):
            new += float(line.rsplit(" ", 1)[1])
    return fired, new, held, ",".join(open_keys)
nxt = time.monotonic()
while addr[0] and p.poll() is None:
    try:
        t = time.monotonic() - t0
        samples.append((t, *scrape()))
    except Exception:
        pass
    nxt += 0.1
    time.sleep(max(0.0, nxt - time.monotonic()))
p.wait()
end = time.monotonic() - t0
time.sleep(0.2)
json.dump({"rc": p.returncode, "addr_at": addr_at, "end": end, "samples": samples,
           "report": json.loads(stdout[0]) if stdout and stdout[0].strip() else None,
           "stderr": "".join(stderr_lines)[-4000:]}, open(out, "w"))
EOF

for r in $(seq 1 "$ROUNDS"); do
  for v in breaker heat; do
    echo "round $r: $v" >&2
    python3 "$tmp/one.py" "$REBOUND" "$tmp/rules-$v" "$tmp/data-$v-$r" "$MESSAGES" "$SCALE" \
      "$OUTAGE" "$tmp/run-$v-$r.json"
  done
done

python3 - "$tmp" "$ROUNDS" "$SCALE" "$OUTAGE" <<'EOF'
import json, re, sys
tmp, rounds, scale, outage = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
def secs(d):
    m = re.fullmatch(r"([\d.]+)(ms|s|m)", d)
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60}[m.group(2)]
o_from = 2 / scale  # --outage begins 2 s (rules' time) into the run
o_until = (2 + secs(outage)) / scale
w_end = o_until + 2
def at(samples, t, i):
    """The counter i at the sample nearest t (0 before the first sample)."""
    if not samples or t < samples[0][0] - 0.05:
        return 0.0
    return min(samples, key=lambda s: abs(s[0] - t))[i]
def summarize(d):
    s, rep = d["samples"], d["report"] or {}
    fired = at(s, w_end, 1) - at(s, o_from, 1)
    peak, peak_t, peak_in = 0.0, None, None
    peak_in = 0.0
    for a in range(len(s)):
        b = a + 10
        if b >= len(s):
            break
        df, dn = s[b][1] - s[a][1], s[b][2] - s[a][2]
        if dn > 0 and df / dn > peak:
            peak, peak_t = df / dn, s[a][0]
        if s[b][2] < s[-1][2] and dn > 0 and df / dn > peak_in:
            peak_in = df / dn
    # Per-100ms ratio, for the record: the largest interval ratio where new > 0.
    iv = [(s[k][0], s[k + 1][1] - s[k][1], s[k + 1][2] - s[k][2]) for k in range(len(s) - 1)]
    iv_peak = max((f / n for _, f, n in iv if n > 0), default=0)
    first_new = next((x[0] for x in s if x[2] > 0), None)
    last_new = next((x[0] for x in reversed(s) if x[2] < s[-1][2]), None) if s else None
    totals = {k: rep.get(k) for k in ("acked", "dead_lettered", "lost", "retries", "elapsed_s")}
    return dict(fired=fired, peak=peak, peak_t=peak_t, peak_in=peak_in, iv_peak=iv_peak,
                first_sample=s[0][0] if s else None, first_new=first_new, last_new=last_new,
                n=len(s), rc=d["rc"], totals=totals,
                breakers=rep.get("breakers"), budgets=rep.get("budgets"))
rows = []
for r in range(1, rounds + 1):
    for v in ("breaker", "heat"):
        d = json.load(open(f"{tmp}/run-{v}-{r}.json"))
        rows.append((v, r, summarize(d), d))
print(f"outage window (real s since process start): fired counted over [{o_from:.2f}, {w_end:.2f}]"
      f"; outage [{o_from:.2f}, {o_until:.2f}]")
h = ("variant", "rnd", "rc", "acked", "dead_let", "lost", "retries", "elapsed_s",
     "fired@outage", "peak1s", "at_s", "peak1s_in", "peak100ms", "1st_sample", "1st_new", "samples")
print(" ".join(f"{x:>12}" for x in h))
for v, r, m, _ in rows:
    t = m["totals"]
    cells = (v, r, m["rc"], t["acked"], t["dead_lettered"], t["lost"], t["retries"],
             t["elapsed_s"], int(m["fired"]), f"{m['peak']:.3f}",
             f"{m['peak_t']:.1f}" if m["peak_t"] is not None else "-", f"{m['peak_in']:.3f}",
             f"{m['iv_peak']:.3f}",
             f"{m['first_sample']:.2f}" if m["first_sample"] is not None else "-",
             f"{m['first_new']:.2f}" if m["first_new"] is not None else "-", m["n"])
    print(" ".join(f"{str(x):>12}" for x in cells))
print()
for v, r, m, _ in rows:
    print(f"{v} round {r}: breakers={json.dumps(m['breakers'])}")
    print(f"{v} round {r}: budgets={json.dumps(m['budgets'])}")
EOF
