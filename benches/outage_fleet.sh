#!/usr/bin/env bash
# The bundled run through a payment-gateway outage on a shared Redis, on 1 node and on N nodes
# (same orders, same outage, same shipped rules), to see the fleet-wide adaptive state at work
# (operations.md, "One fleet, one budget"; issue 29).
#
#   cargo build --release && benches/outage_fleet.sh
#
# Starts a redis-server of its own (appendonly yes, appendfsync always) in a temp directory on
# a free port. Each variant runs `rebound run --store redis://… --namespace NS --node nK
# --messages N --time-scale S --outage O --json --admin 127.0.0.1:0` on every node at once,
# scrapes every node's /metrics every 100 ms, and sums over the nodes:
#   outage_fired  rebound_retries_fired_total from the outage's start to 2 s (real) after its
#                 end (the outage runs from 2 s to 2 s + O in rules' time)
#   peak1s        the largest fired/new over any 1 s window of samples with new > 0
#   opened_s      when each node first showed a breaker (not the fuse) open, s since start,
#                 and the spread between the first and the last node
#   retries       the run's report (the fleet's whole run)
#
# Environment: REBOUND (default target/release/rebound), NODES (3), MESSAGES (20000), SCALE
# (10), OUTAGE (300s), KEEP (1 keeps the temp directory), TRACE (a directory: writes each
# variant's samples, one line per 100 ms with every node's fired, new and gateway breaker
# state, to TRACE/N.tsv, and every node's report to TRACE/N-nK.json).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
REBOUND=${REBOUND:-$root/target/release/rebound}
NODES=${NODES:-3}
MESSAGES=${MESSAGES:-20000}
SCALE=${SCALE:-10}
OUTAGE=${OUTAGE:-300s}
KEEP=${KEEP:-0}

tmp=$(mktemp -d /tmp/rebound-outage-fleet.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp" --appendonly yes --appendfsync always \
  --save "" --daemonize no --logfile "$tmp/redis.log" &
redis_pid=$!
cleanup() {
  kill "$redis_pid" 2>/dev/null || true
  if [[ $KEEP != 1 ]]; then rm -rf "$tmp"; else echo "keeping $tmp" >&2; fi
}
trap cleanup EXIT
for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

python3 - "$REBOUND" "$root/rules" "redis://127.0.0.1:$port" "$NODES" "$MESSAGES" "$SCALE" \
  "$OUTAGE" "${TRACE:-}" <<'EOF'
import json, os, re, subprocess, sys, threading, time, urllib.request
rebound, rules, url, nodes, messages, scale, outage, trace = sys.argv[1:9]
nodes, scale = int(nodes), float(scale)

def secs(d):
    m = re.fullmatch(r"([\d.]+)(ms|s|m)", d)
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60}[m.group(2)]

def scrape(addr):
    with urllib.request.urlopen(addr + "/metrics", timeout=1) as r:
        text = r.read().decode()
    fired = new = 0.0
    opened = False
    state = "-"
    for line in text.splitlines():
        if line.startswith("rebound_retries_fired_total"):
            fired += float(line.rsplit(" ", 1)[1])
        elif line.startswith("rebound_messages_new_total"):
            new += float(line.rsplit(" ", 1)[1])
        elif line.startswith("rebound_breaker_state") and line.endswith(" 1") \
                and 'state="open"' in line and 'breaker="fuse"' not in line:
            opened = True
        if line.startswith("rebound_breaker_state") and line.endswith(" 1") \
                and 'breaker="fuse"' not in line:
            state = re.search(r'state="(\w+)"', line).group(1)[0]
    return fired, new, opened, state

def run(n, ns):
    t0 = time.monotonic()
    procs, addrs, outs = [], [None] * n, [None] * n
    for k in range(n):
        cmd = [rebound, "run", "--store", url, "--namespace", ns, "--node", f"n{k}",
               "--messages", messages, "--time-scale", str(scale), "--outage", outage,
               "--json", "--rules", rules, "--admin", "127.0.0.1:0"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        def err(p=p, k=k):
            for line in p.stderr:
                m = re.search(r"http://[^\s/]+", line)
                if m and addrs[k] is None:
                    addrs[k] = m.group(0)
        def out(p=p, k=k):
            outs[k] = p.stdout.read()
        threading.Thread(target=err, daemon=True).start()
        threading.Thread(target=out, daemon=True).start()
    samples, opened_at = [], [None] * n
    last = [(0.0, 0.0)] * n
    states = ["-"] * n
    rows = []
    nxt = time.monotonic()
    while any(p.poll() is None for p in procs):
        t = time.monotonic() - t0
        for k, a in enumerate(addrs):
            if a is None or procs[k].poll() is not None:
                continue
            try:
                f, nw, op, st = scrape(a)
            except Exception:
                continue
            last[k] = (f, nw)
            states[k] = st
            if op and opened_at[k] is None:
                opened_at[k] = t
        samples.append((t, sum(x[0] for x in last), sum(x[1] for x in last)))
        rows.append("\t".join([f"{t:.2f}"] + [f"{int(f)} {int(nw)} {st}" for (f, nw), st in zip(last, states)]))
        nxt += 0.1
        time.sleep(max(0.0, nxt - time.monotonic()))
    for p in procs:
        p.wait()
    time.sleep(0.2)
    report = json.loads(outs[0]) if outs[0] and outs[0].strip() else {}
    if trace:
        os.makedirs(trace, exist_ok=True)
        with open(os.path.join(trace, f"{n}.tsv"), "w") as w:
            w.write("\n".join(rows) + "\n")
        for k, o in enumerate(outs):
            with open(os.path.join(trace, f"{n}-n{k}.json"), "w") as w:
                w.write(o or "")
    o_from, o_until = 2 / scale, (2 + secs(outage)) / scale
    def at(t):
        if not samples or t < samples[0][0]:
            return 0.0
        return min(samples, key=lambda s: abs(s[0] - t))[1]
    peak = 0.0
    for a in range(len(samples) - 10):
        b = a + 10
        df, dn = samples[b][1] - samples[a][1], samples[b][2] - samples[a][2]
        if dn > 0:
            peak = max(peak, df / dn)
    opened = [x for x in opened_at if x is not None]
    return dict(nodes=n, outage_fired=int(at(o_until + 2) - at(o_from)), peak1s=round(peak, 3),
                opened_s=[None if x is None else round(x, 2) for x in opened_at],
                opened_spread_s=round(max(opened) - min(opened), 2) if opened else None,
                retries=report.get("retries"), lost=report.get("lost"),
                acked=report.get("acked"), elapsed_s=report.get("elapsed_s"),
                rc=[p.returncode for p in procs])

one = run(1, "outage-one")
many = run(nodes, "outage-many")
for r in (one, many):
    print(json.dumps(r))
if one["outage_fired"]:
    print(f"outage_fired ratio {nodes} nodes / 1 node: {many['outage_fired'] / one['outage_fired']:.2f}")
EOF
