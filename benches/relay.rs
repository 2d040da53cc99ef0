//! `rebound relay` on Redis Streams against a hand-written loop, in the same run (issue 27,
//! "Measured when done"). Not a criterion statistic: throughput runs of a real process.
//!
//! The bench starts a `redis-server` of its own and a no-op handler in-process (axum on
//! 127.0.0.1:0, answering 200 at once), then, interleaved for [`ROUNDS`] rounds:
//!
//! - **relay**: the binary cargo built for this profile (`rebound relay --source
//!   redis-stream://… --handler … --admin 127.0.0.1:0`, the repo's `rules/`, a fresh data
//!   directory) over a stream of N entries added (pipelined) before it starts; timed from the
//!   first request the handler sees (process start-up excluded) until the handler has answered
//!   N with 200 and the group's pending list is empty (`XPENDING`);
//! - **hand loop**: a tokio task of this process, the same crates: `XREADGROUP` (batch 100),
//!   one `POST` per message through `rebound::outbound::client(None)` with at most 64 in flight
//!   (a `Semaphore`, as the relay's default `handler.concurrency`), `XACK` per batch once its
//!   posts are answered; on a fresh stream of N, timed the same way.
//!
//! Then one relay run in which the handler answers every tenth message's first attempt with
//! 503 `{"code":"PAY_PROCESSING"}` (biz `PAYMENT`: the shipped rules retry it after 100 ms):
//! the rate, the handler latency p50/p99 read from the relay's `rebound_handler_seconds`
//! histogram in `/metrics`, and the round trips to Redis per message (`INFO commandstats`
//! before and after, without the bench's own `XPENDING` and `INFO`).
//!
//! With `BENCH_STEADY_SECS` > 0, a relay is fed at a steady rate (`BENCH_STEADY_RATE`,
//! default 2,000/s, the same 10% failing once) for that long, and its RSS (`VmRSS`) and the
//! size of its data directory are printed each minute.
//!
//! Every run prints the CPU seconds it cost (the relay process, `redis-server`, and this
//! process, which is the handler, and the hand loop in its runs): where the time goes.
//!
//! Measured on the 2-core dev machine (shared with other builds; `/proc/loadavg` is printed
//! with each run), 50,000 messages: relay 22,781/s and 23,814/s against the hand loop's
//! 30,400/s and 38,429/s (ratios 0.75 and 0.62; load 0.9 to 1.5); with 10% failing, 26,521/s,
//! handler latency p50 1.48 ms and p99 3.99 ms, 0.042 Redis round trips per message. The relay
//! spends about 50 µs of CPU per message where the loop spends about 24 µs; a `perf` profile of
//! the relay: reqwest and hyper with the kernel's loopback `writev` 56%, redis-rs 11%, the
//! journal writing an acked fate per message to SQLite (with its fsyncs) 11.5%, the handler
//! bolt's task 8%, the runtime's spout, acker and executors about 8%. The reader makes twice
//! the loop's `XREADGROUP` and `XACK` calls (partial batches read ahead, custody acks in
//! smaller groups). Steady at 2,000/s for 600 s (1.2 M messages, 10% failing once): RSS flat
//! at 49 to 54 MB; the data directory grows linearly, 8.8 MB at 1 minute to 52 MB at 10, about
//! 43 bytes per message (every acked fate stays in the `fates` table: a Redis stream source
//! writes no position that would prune them).
//!
//! ```sh
//! cargo bench --bench relay
//! BENCH_MESSAGES=100000 cargo bench --bench relay
//! BENCH_STEADY_SECS=600 cargo bench --bench relay     # the 10-minute RSS run
//! ```
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use tokio::sync::Semaphore;

const ROUNDS: usize = 2;
const BATCH: usize = 100;
const CONCURRENCY: usize = 64;
const GROUP: &str = "rebound";
const BIZ: &str = "PAYMENT";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// The handler: a no-op HTTP server in this process.

/// What the handler saw in the current run.
#[derive(Default)]
struct Seen {
    /// Answered 200.
    ok: AtomicU64,
    /// Answered 503.
    failed: AtomicU64,
    /// Fail every tenth message's first attempt.
    fail_tenth: AtomicBool,
    first: Mutex<Option<Instant>>,
}

impl Seen {
    fn reset(&self, fail_tenth: bool) {
        self.ok.store(0, Relaxed);
        self.failed.store(0, Relaxed);
        self.fail_tenth.store(fail_tenth, Relaxed);
        *self.first.lock().unwrap() = None;
    }

    fn first(&self) -> Option<Instant> {
        *self.first.lock().unwrap()
    }
}

/// The `n` of a payload `{"n":N}`.
fn payload_n(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = &text[text.find("\"n\":")? + 4..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

async fn answer(seen: &Seen, headers: HeaderMap, body: Bytes) -> (StatusCode, &'static str) {
    {
        let mut first = seen.first.lock().unwrap();
        if first.is_none() {
            *first = Some(Instant::now());
        }
    }
    if seen.fail_tenth.load(Relaxed) {
        let attempt = headers
            .get("rebound-attempt")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("1");
        if attempt == "1" && payload_n(&body).is_some_and(|n| n % 10 == 9) {
            seen.failed.fetch_add(1, Relaxed);
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"code":"PAY_PROCESSING","message":"still processing"}"#,
            );
        }
    }
    seen.ok.fetch_add(1, Relaxed);
    (StatusCode::OK, "")
}

/// Starts the handler on a runtime of its own (two workers); its URL.
fn start_handler(seen: Arc<Seen>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("handler")
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
                let seen = seen.clone();
                async move { answer(&seen, headers, body).await }
            });
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    format!("http://{addr}/orders")
}

// ---------------------------------------------------------------------------------------------
// Redis: the stream, the pending list, the server's own counts.

fn fill(server: &rebound_store_redis::TestServer, stream: &str, from: u64, n: u64) {
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in from..from + n {
        pipe.cmd("XADD")
            .arg(stream)
            .arg("*")
            .arg("biz")
            .arg(BIZ)
            .arg("payload")
            .arg(format!("{{\"n\":{i}}}"))
            .ignore();
        if (i - from) % 1000 == 999 || i + 1 == from + n {
            pipe.query::<()>(&mut c).unwrap();
            pipe = redis::pipe();
        }
    }
}

fn pending(c: &mut redis::Connection, stream: &str) -> u64 {
    type Summary = (
        u64,
        Option<String>,
        Option<String>,
        Option<Vec<(String, String)>>,
    );
    redis::cmd("XPENDING")
        .arg(stream)
        .arg(GROUP)
        .query::<Summary>(c)
        .map_or(u64::MAX, |s| s.0)
}

/// `INFO commandstats`: calls by command.
fn command_calls(c: &mut redis::Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, rest) = rest.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// The server's CPU seconds (user and system), from `INFO cpu`.
fn redis_cpu(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(c).unwrap();
    info.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k, "used_cpu_sys" | "used_cpu_user")
                .then(|| v.trim().parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// The round trips between two `INFO commandstats`, without the bench's own commands.
fn round_trips(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> (u64, String) {
    let mut total = 0;
    let mut each = Vec::new();
    for (name, calls) in after {
        if matches!(name.as_str(), "info" | "xpending" | "xadd") {
            continue;
        }
        let n = calls - before.get(name).copied().unwrap_or(0);
        if n > 0 {
            total += n;
            each.push(format!("{name} {n}"));
        }
    }
    (total, each.join(", "))
}

// ---------------------------------------------------------------------------------------------
// Processes: CPU and memory from /proc.

/// A process's user and system CPU seconds (`/proc/PID/stat`, at 100 ticks a second).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command: state is field 3, utime 14 and stime 15 (1-based over the line).
    (tick(11) + tick(12)) / 100.0
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// CPU seconds of the relay (if any), redis-server and this process.
#[derive(Clone, Copy, Default)]
struct Cpu {
    relay: f64,
    redis: f64,
    bench: f64,
}

impl Cpu {
    fn now(relay: Option<u32>, c: &mut redis::Connection) -> Cpu {
        Cpu {
            relay: relay.map_or(0.0, |p| cpu_seconds(&p.to_string())),
            redis: redis_cpu(c),
            bench: cpu_seconds("self"),
        }
    }

    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            relay: self.relay - before.relay,
            redis: self.redis - before.redis,
            bench: self.bench - before.bench,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The relay process.

struct Relay {
    child: Child,
    admin: String,
    data: tempfile::TempDir,
    stdout: Arc<Mutex<String>>,
}

impl Relay {
    fn start(redis_port: u16, stream: &str, handler: &str) -> Relay {
        let data = tempfile::tempdir().unwrap();
        let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rebound"))
            .arg("relay")
            .arg("--source")
            .arg(format!(
                "redis-stream://127.0.0.1:{redis_port}/{stream}?group={GROUP}"
            ))
            .args(["--handler", handler])
            .args(["--admin", "127.0.0.1:0"])
            .arg("--rules")
            .arg(&rules)
            .arg("--data")
            .arg(data.path())
            .env_remove("REBOUND_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the rebound binary starts");
        let stdout = Arc::new(Mutex::new(String::new()));
        for (pipe, sink) in [
            (
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
                Some(stdout.clone()),
            ),
            (Box::new(child.stderr.take().unwrap()), None),
        ] {
            std::thread::spawn(move || {
                let mut lines = BufReader::new(pipe);
                let mut line = String::new();
                while lines.read_line(&mut line).unwrap_or(0) > 0 {
                    match &sink {
                        Some(sink) => sink.lock().unwrap().push_str(&line),
                        None if line.contains("ERROR") || line.contains("WARN") => {
                            eprint!("relay: {line}")
                        }
                        None => {}
                    }
                    line.clear();
                }
            });
        }
        let end = Instant::now() + Duration::from_secs(60);
        let admin = loop {
            if let Some(line) = stdout
                .lock()
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("listening on "))
            {
                break format!("http://{}", line.trim());
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("relay exited ({status}) before listening");
            }
            assert!(Instant::now() < end, "relay did not print its address");
            std::thread::sleep(Duration::from_millis(10));
        };
        Relay {
            child,
            admin,
            data,
            stdout,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then the exit; what it printed on stdout (its report).
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > end {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(50));
        self.stdout.lock().unwrap().clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// The hand-written loop.

async fn hand_loop(redis_url: String, stream: String, n: u64, handler: String) {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg(GROUP)
        .arg("0")
        .query_async(&mut conn)
        .await;
    let http = rebound::outbound::client(None).unwrap();
    let url = reqwest::Url::parse(&handler).unwrap();
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let mut acks = tokio::task::JoinSet::new();
    let mut read = 0;
    while read < n {
        let reply: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg("hand")
            .arg("COUNT")
            .arg(BATCH)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(&stream)
            .arg(">")
            .query_async(&mut conn)
            .await
            .unwrap();
        let entries: Vec<_> = reply.keys.into_iter().flat_map(|k| k.ids).collect();
        read += entries.len() as u64;
        let mut posts = Vec::with_capacity(entries.len());
        let mut ids = Vec::with_capacity(entries.len());
        for e in entries {
            let permit = permits.clone().acquire_owned().await.unwrap();
            let payload: Vec<u8> = e.get("payload").unwrap_or_default();
            let biz: String = e.get("biz").unwrap_or_default();
            let id = format!("{stream}/{}", e.id);
            ids.push(e.id);
            let request = http
                .post(url.clone())
                .header("rebound-message-id", &id)
                .header("rebound-attempt", "1")
                .header("rebound-biz", biz)
                .header("idempotency-key", &id)
                .header("content-type", "application/octet-stream")
                .body(payload);
            posts.push(tokio::spawn(async move {
                let response = request.send().await.unwrap();
                let ok = response.status().is_success();
                let _ = response.bytes().await;
                drop(permit);
                ok
            }));
        }
        if ids.is_empty() {
            continue;
        }
        let (mut conn, stream) = (conn.clone(), stream.clone());
        acks.spawn(async move {
            for p in posts {
                assert!(p.await.unwrap(), "the no-op handler answers 200");
            }
            let _: u64 = redis::cmd("XACK")
                .arg(&stream)
                .arg(GROUP)
                .arg(&ids)
                .query_async(&mut conn)
                .await
                .unwrap();
        });
    }
    while acks.join_next().await.is_some() {}
}

// ---------------------------------------------------------------------------------------------
// One timed run.

struct Run {
    rate: f64,
    took: Duration,
    trips: u64,
    trips_each: String,
    cpu: Cpu,
}

/// Waits until the handler answered `n` with 200 and `stream`'s group holds nothing pending;
/// the time since the handler's first request.
fn wait_done(
    server: &rebound_store_redis::TestServer,
    seen: &Seen,
    stream: &str,
    n: u64,
) -> Duration {
    let mut c = server.client();
    let end = Instant::now() + Duration::from_secs(600);
    loop {
        assert!(Instant::now() < end, "{stream}: not done in 10 minutes");
        if seen.ok.load(Relaxed) >= n && pending(&mut c, stream) == 0 {
            let done = Instant::now();
            return done - seen.first().expect("the handler saw a request");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn relay_run(
    server: &rebound_store_redis::TestServer,
    seen: &Seen,
    handler: &str,
    stream: &str,
    n: u64,
    fail_tenth: bool,
) -> (Run, String, String) {
    fill(server, stream, 0, n);
    seen.reset(fail_tenth);
    let mut c = server.client();
    let calls = command_calls(&mut c);
    let relay = Relay::start(server.port(), stream, handler);
    let cpu = Cpu::now(Some(relay.pid()), &mut c);
    let took = wait_done(server, seen, stream, n);
    let cpu = Cpu::now(Some(relay.pid()), &mut c).since(cpu);
    let (trips, trips_each) = round_trips(&calls, &command_calls(&mut c));
    let metrics = reqwest::blocking::get(format!("{}/metrics", relay.admin))
        .and_then(|r| r.text())
        .unwrap_or_default();
    let report = relay.stop();
    let run = Run {
        rate: n as f64 / took.as_secs_f64(),
        took,
        trips,
        trips_each,
        cpu,
    };
    (run, metrics, report)
}

fn hand_run(
    rt: &tokio::runtime::Runtime,
    server: &rebound_store_redis::TestServer,
    seen: &Seen,
    handler: &str,
    stream: &str,
    n: u64,
) -> Run {
    fill(server, stream, 0, n);
    seen.reset(false);
    let mut c = server.client();
    let calls = command_calls(&mut c);
    let cpu = Cpu::now(None, &mut c);
    let task = rt.spawn(hand_loop(
        server.url(),
        stream.to_owned(),
        n,
        handler.to_owned(),
    ));
    let took = wait_done(server, seen, stream, n);
    rt.block_on(task).unwrap();
    let cpu = Cpu::now(None, &mut c).since(cpu);
    let (trips, trips_each) = round_trips(&calls, &command_calls(&mut c));
    Run {
        rate: n as f64 / took.as_secs_f64(),
        took,
        trips,
        trips_each,
        cpu,
    }
}

fn print_run(what: &str, run: &Run, n: u64) {
    println!(
        "  {what}: {n} in {:.3} s = {:.0}/s; Redis round trips {:.3}/message ({}); CPU s: relay {:.2}, redis {:.2}, bench process {:.2}",
        run.took.as_secs_f64(),
        run.rate,
        run.trips as f64 / n as f64,
        run.trips_each,
        run.cpu.relay,
        run.cpu.redis,
        run.cpu.bench,
    );
}

// ---------------------------------------------------------------------------------------------
// The histogram in /metrics.

/// `rebound_handler_seconds`' buckets: (upper bound, cumulative count).
fn buckets(metrics: &str) -> Vec<(f64, u64)> {
    metrics
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("rebound_handler_seconds_bucket{le=\"")?;
            let (le, rest) = rest.split_once("\"}")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, rest.trim().parse().ok()?))
        })
        .collect()
}

/// The `q` quantile of cumulative `buckets`, interpolated within its bucket as Prometheus's
/// `histogram_quantile` does.
fn quantile(buckets: &[(f64, u64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let (mut lower, mut below) = (0.0, 0);
    for &(le, count) in buckets {
        if count as f64 >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let within = (count - below).max(1) as f64;
            return Some(lower + (le - lower) * (rank - below as f64) / within);
        }
        (lower, below) = (le, count);
    }
    Some(lower)
}

// ---------------------------------------------------------------------------------------------

fn steady(server: &rebound_store_redis::TestServer, seen: &Seen, handler: &str, secs: u64) {
    let rate = env_u64("BENCH_STEADY_RATE", 2_000);
    let stream = "steady";
    fill(server, stream, 0, 1);
    seen.reset(true);
    let relay = Relay::start(server.port(), stream, handler);
    println!(
        "steady: {rate}/s for {secs} s (every tenth message fails once), relay pid {}, load {}",
        relay.pid(),
        load()
    );
    let start = Instant::now();
    let mut added = 1;
    let mut next_print = 60;
    let tick = Duration::from_millis(100);
    let mut c = server.client();
    while start.elapsed().as_secs() < secs {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64 + 1;
        if due > added {
            let mut pipe = redis::pipe();
            for i in added..due {
                pipe.cmd("XADD")
                    .arg(stream)
                    .arg("*")
                    .arg("biz")
                    .arg(BIZ)
                    .arg("payload")
                    .arg(format!("{{\"n\":{i}}}"))
                    .ignore();
            }
            pipe.query::<()>(&mut c).unwrap();
            added = due;
        }
        let elapsed = start.elapsed().as_secs();
        if elapsed >= next_print {
            println!(
                "  {:>4} s: RSS {} KiB, data directory {} KiB, added {added}, answered 200 {}, pending {}",
                elapsed,
                rss_kib(relay.pid()),
                dir_bytes(relay.data.path()) / 1024,
                seen.ok.load(Relaxed),
                pending(&mut c, stream),
            );
            next_print += 60;
        }
        std::thread::sleep(tick);
    }
    let end = Instant::now() + Duration::from_secs(30);
    while seen.ok.load(Relaxed) < added && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "  end ({} s): RSS {} KiB, data directory {} KiB, added {added}, answered 200 {}, pending {}, load {}",
        start.elapsed().as_secs(),
        rss_kib(relay.pid()),
        dir_bytes(relay.data.path()) / 1024,
        seen.ok.load(Relaxed),
        pending(&mut c, stream),
        load()
    );
    relay.stop();
}

fn main() {
    let n = env_u64("BENCH_MESSAGES", 50_000);
    // Installs ring as the process's rustls provider (this process's reqwest has none).
    rebound::outbound::client(None).expect("the outbound client builds");
    let server = rebound_store_redis::TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let seen = Arc::new(Seen::default());
    let handler = start_handler(seen.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "relay bench: {n} messages, batch {BATCH}, concurrency {CONCURRENCY}; {} cores, load {}",
        std::thread::available_parallelism().map_or(0, |p| p.get()),
        load()
    );

    let (mut relays, mut hands) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        println!("round {round}:");
        let (run, _, _) = relay_run(
            &server,
            &seen,
            &handler,
            &format!("relay-{round}"),
            n,
            false,
        );
        print_run("relay    ", &run, n);
        relays.push(run.rate);
        let run = hand_run(&rt, &server, &seen, &handler, &format!("hand-{round}"), n);
        print_run("hand loop", &run, n);
        hands.push(run.rate);
        println!("  ratio {:.2}", relays[round] / hands[round]);
    }
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "best: relay {:.0}/s, hand loop {:.0}/s, ratio {:.2} (target >= 0.8); relay absolute {:.0}/s (target >= 25,000/s); load {}",
        best(&relays),
        best(&hands),
        best(&relays) / best(&hands),
        best(&relays),
        load()
    );

    println!(
        "10% failing (503 PAY_PROCESSING on a tenth of first attempts, retried after 100 ms):"
    );
    let (run, metrics, report) = relay_run(&server, &seen, &handler, "failing", n, true);
    print_run("relay    ", &run, n);
    let b = buckets(&metrics);
    let ms = |q| quantile(&b, q).map_or("-".into(), |s| format!("{:.2} ms", s * 1000.0));
    println!(
        "  handler answered 200 {}, 503 {}; handler latency (rebound_handler_seconds) p50 {}, p99 {}; buckets (le s, cumulative): {}",
        seen.ok.load(Relaxed),
        seen.failed.load(Relaxed),
        ms(0.5),
        ms(0.99),
        b.iter()
            .take_while(|(_, c)| *c < b.last().map_or(0, |l| l.1))
            .chain(b.iter().find(|(_, c)| *c == b.last().map_or(0, |l| l.1)))
            .map(|(le, c)| format!("{le}:{c}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if let Some(line) = report
        .lines()
        .find(|l| l.contains("received") || l.contains("retried"))
    {
        println!("  relay's report: {}", line.trim());
    }

    let secs = env_u64("BENCH_STEADY_SECS", 0);
    if secs > 0 {
        steady(&server, &seen, &handler, secs);
    }
}
