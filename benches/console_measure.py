"""The measurements of benches/console.sh (read its header): page weight, time to first render
of /ui/dead-letters on 100 and on 100,000 letters, and the admin API's decide and /metrics
latency with and without a console open.

    python3 benches/console_measure.py SMALL BIG LIVE ROUNDS LAT_ROUNDS PHASE_S

SMALL, BIG and LIVE are admin base URLs (http://127.0.0.1:PORT). Only the standard library:
WebDriver is JSON over HTTP, spoken here to Debian's chromedriver as tests/run/console does.
"""

import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

# Installed before any page script: when the first page of letters is in the DOM, and the
# next frame after it.
WATCH = """
new MutationObserver((_, obs) => {
  if (!document.querySelector('#letters input.pick')) return;
  obs.disconnect();
  window.__shown = performance.now();
  requestAnimationFrame(() => { window.__painted = performance.now(); });
}).observe(document, { childList: true, subtree: true });
"""

# Each page: its path and what it shows once loaded (as in tests/run/console/pages.rs).
PAGES = [
    ("/ui/", "document.querySelector('#version .value')?.textContent.length > 0"),
    ("/ui/rules", "document.getElementById('editor')?.value.length > 0"),
    ("/ui/rules/history", "document.querySelector('#app table tbody tr td')"),
    ("/ui/paths", "document.querySelectorAll('#paths figure').length > 0"),
    ("/ui/dead-letters", "document.querySelectorAll('#letters input.pick').length > 0"),
    ("/ui/messages/fill-0000001", "document.getElementById('state')"),
    ("/ui/retries", "document.querySelector('#retries table')"),
    ("/ui/audit", "document.querySelector('#audit table')"),
    ("/ui/nodes", "document.getElementById('no-fleet')"),
]


class Browser:
    """chromedriver --port=0 and one headless Chromium session (a fresh profile)."""

    def __init__(self, width=1280, height=800):
        self.profile = tempfile.TemporaryDirectory()
        self.driver = subprocess.Popen(
            [CHROMEDRIVER, "--port=0", "--log-level=WARNING"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        port = None
        for line in self.driver.stdout:
            if "started successfully on port " in line:
                port = int(line.rsplit(" ", 1)[1].strip().rstrip("."))
                break
        if port is None:
            raise RuntimeError("chromedriver did not say its port")
        self.root = f"http://127.0.0.1:{port}"
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--no-first-run", f"--user-data-dir={self.profile.name}",
                f"--window-size={width},{height}"]
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}}
        self.session = self.root + "/session/" + self.call("POST", self.root + "/session", caps)["sessionId"]
        self.execute("return 0")

    def call(self, method, url, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as res:
            return json.load(res)["value"]

    def cmd(self, method, path, body=None):
        return self.call(method, self.session + path, body if body is not None or method == "GET" else {})

    def goto(self, url):
        self.cmd("POST", "/url", {"url": url})

    def execute(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def cdp(self, command, params):
        return self.cmd("POST", "/goog/cdp/execute", {"cmd": command, "params": params})

    def wait_js(self, condition, what, timeout=60):
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.execute(f"return !!({condition});"):
                return
            time.sleep(0.02)
        raise RuntimeError(f"waited {timeout} s for {what}")

    def quit(self):
        try:
            self.call("DELETE", self.session)
        finally:
            self.driver.kill()
            self.driver.wait()
            self.profile.cleanup()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def page_weight(base, pages):
    """Per page: bytes of the page and its assets, and of the API answers, on a first load."""
    rows = []
    for path, ready in pages:
        b = Browser()
        try:
            b.goto(base + path)
            b.wait_js(ready, path)
            if path == "/ui/paths":
                b.execute("document.querySelectorAll('#paths img').forEach((i) => i.loading = 'eager')")
                b.wait_js("[...document.querySelectorAll('#paths img')].every((i) => i.complete && i.naturalWidth > 0)",
                          "the charts")
            entries = b.execute("""
                return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
                  .map((e) => [e.name, e.transferSize, e.encodedBodySize]);""")
        finally:
            b.quit()
        static = api = 0
        n_static = n_api = 0
        wire = 0
        for name, transfer, body in entries:
            wire += transfer
            p = urllib.parse.urlparse(name).path
            if p.startswith("/ui/") or p.endswith(".svg"):
                static += body
                n_static += 1
            else:
                api += body
                n_api += 1
        rows.append((base, path, n_static, static, n_api, api, wire))
    return rows


def first_render(small, big, rounds):
    """Loads of /ui/dead-letters on each store, interleaved: ms from navigation start."""
    b = Browser()
    out = {small: [], big: []}
    try:
        b.cdp("Page.enable", {})
        b.cdp("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
        for r in range(rounds + 1):
            order = [small, big] if r % 2 == 0 else [big, small]
            for base in order:
                b.goto("about:blank")
                b.goto(base + "/ui/dead-letters")
                b.wait_js("window.__painted !== undefined", "the letters")
                m = b.execute("""
                    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
                    const api = performance.getEntriesByType('resource')
                      .find((e) => e.name.includes('/v1/dead-letters'));
                    return { shown: window.__shown, painted: window.__painted,
                             fcp: fcp ? fcp.startTime : null, api: api ? api.responseEnd : null,
                             rows: document.querySelectorAll('#letters input.pick').length,
                             total: document.getElementById('total').textContent };""")
                if r > 0:  # the first round warms both servers and the browser
                    out[base].append(m)
    finally:
        b.quit()
    return out


class Probe:
    """POST /v1/decide and GET /metrics in turn on one keep-alive connection."""

    def __init__(self, base):
        u = urllib.parse.urlparse(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        self.body = json.dumps({"biz": "PAYMENT", "code": "PAY_PROCESSING", "attempt": 1})

    def once(self, method, path, body=None):
        start = time.perf_counter()
        self.conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        res = self.conn.getresponse()
        res.read()
        took = time.perf_counter() - start
        if res.status != 200:
            raise RuntimeError(f"{method} {path}: {res.status}")
        return took * 1000

    def run(self, seconds):
        decide, metrics = [], []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            decide.append(self.once("POST", "/v1/decide", self.body))
            metrics.append(self.once("GET", "/metrics"))
        return decide, metrics


def latency(base, rounds, phase_s):
    """Alternating phases without and with a Chromium on /ui/: the latencies of each."""
    b = Browser()
    probe = Probe(base)
    res = {"without": ([], []), "with": ([], [])}
    try:
        for r in range(rounds):
            # without, with, with, without, …: neither phase always goes first.
            for phase in ("without", "with") if r % 2 == 0 else ("with", "without"):
                b.goto(base + "/ui/" if phase == "with" else "about:blank")
                if phase == "with":
                    b.wait_js(PAGES[0][1], "the overview")
                d, m = probe.run(phase_s)
                res[phase][0].extend(d)
                res[phase][1].extend(m)
    finally:
        b.quit()
    return res


def main():
    small, big, live, rounds, lat_rounds, phase_s = sys.argv[1:7]
    rounds, lat_rounds, phase_s = int(rounds), int(lat_rounds), float(phase_s)
    names = {small: "small (100)", big: "big (100,000)", live: "live (100, 20/s)"}

    print("== page weight (first load, fresh profile; bytes of bodies as sent, uncompressed)")
    print(f"{'store':<15} {'page':<28} {'files':>5} {'page+assets B':>13} {'api':>4} {'api B':>8} {'on the wire B':>13}")
    rows = page_weight(small, PAGES) + page_weight(big, [p for p in PAGES if p[0] == "/ui/dead-letters"])
    for base, path, n_static, static, n_api, api, wire in rows:
        print(f"{names[base]:<15} {path:<28} {n_static:>5} {static:>13,} {n_api:>4} {api:>8,} {wire:>13,}")

    # The overview's answer grows with the process's uptime, to 15 minutes of samples.
    with urllib.request.urlopen(live + "/v1/overview") as res:
        body = res.read()
    n = len(json.loads(body)["rates"])
    print(f"GET /v1/overview on live: {len(body):,} B with {n} samples; at 900 samples (15 min) "
          f"about {len(body) / n * 900:,.0f} B, fetched every 2 s by /ui/")

    print(f"\n== time to first render of /ui/dead-letters, {rounds} loads each, interleaved (ms from navigation start)")
    fr = first_render(small, big, rounds)
    print(f"{'store':<15} {'what':<34} {'median':>7} {'p10':>7} {'p90':>7} {'min':>7} {'max':>7}")
    for base in (small, big):
        ms = fr[base]
        for key, what in (("fcp", "first contentful paint (shell)"),
                          ("api", "GET /v1/dead-letters answered"),
                          ("shown", "first page of letters in the DOM"),
                          ("painted", "next frame (letters painted)")):
            xs = [m[key] for m in ms if m[key] is not None]
            if xs:
                print(f"{names[base]:<15} {what:<34} {statistics.median(xs):>7.1f} {pct(xs, 10):>7.1f} "
                      f"{pct(xs, 90):>7.1f} {min(xs):>7.1f} {max(xs):>7.1f}")
        print(f"{'':<15} rows shown: {ms[-1]['rows']}, {ms[-1]['total']}")
    # The same first page straight from the API, without a browser: what the server adds.
    probes = {base: Probe(base) for base in (small, big)}
    api = {small: [], big: []}
    for r in range(100):
        for base in (small, big) if r % 2 == 0 else (big, small):
            api[base].append(probes[base].once("GET", "/v1/dead-letters?limit=50"))
    for base in (small, big):
        xs = api[base]
        print(f"{names[base]:<15} {'the API alone (100 GETs, one conn.)':<34} {statistics.median(xs):>7.1f} "
              f"{pct(xs, 10):>7.1f} {pct(xs, 90):>7.1f} {min(xs):>7.1f} {max(xs):>7.1f}")
    s = statistics.median(m["painted"] for m in fr[small])
    bg = statistics.median(m["painted"] for m in fr[big])
    print(f"painted, big / small (medians): {bg / s:.2f}")

    print(f"\n== admin API latency without and with a console open on /ui/ "
          f"({lat_rounds} rounds of {phase_s:g} s per phase, alternated; ms)")
    print(f"{'server':<17} {'route':<16} {'console':<8} {'n':>6} {'median':>7} {'p90':>7} {'p99':>7} {'max':>7}")
    for base in (live, big):
        res = latency(base, lat_rounds, phase_s)
        for i, route in enumerate(("POST /v1/decide", "GET /metrics")):
            for phase in ("without", "with"):
                xs = res[phase][i]
                print(f"{names[base]:<17} {route:<16} {phase:<8} {len(xs):>6} {statistics.median(xs):>7.3f} "
                      f"{pct(xs, 90):>7.3f} {pct(xs, 99):>7.3f} {max(xs):>7.3f}")
            w = statistics.median(res["with"][i])
            wo = statistics.median(res["without"][i])
            print(f"{'':<17} {route:<16} median with / without: {w / wo:.2f}")


if __name__ == "__main__":
    main()
