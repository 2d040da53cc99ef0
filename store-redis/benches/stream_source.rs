//! The Redis Streams source alone (a no-op bolt) against a hand-written consumer loop in the
//! same process and run, on a `redis-server` of its own: both read with redis-rs's tokio
//! connection in batches of 100 and acknowledge every entry (`XREADGROUP` then `XACK`). Rounds
//! alternate, each on a fresh stream of 20,000 entries; the best round of each and their ratio
//! are printed (the target: the source at 0.8 of the loop or better).
//!
//! Then a run in which one message in ten fails once and its retry waits an hour (a durable
//! SQLite store): what the group still holds unacknowledged at the end (custody: nothing), and
//! the `XACK` round trips the source made per retried message (from the server's
//! `INFO commandstats`).
//!
//! ```sh
//! cargo bench -p rebound-store-redis --bench stream_source
//! BENCH_BATCH=500 cargo bench -p rebound-store-redis --bench stream_source   # both sides
//! ```
//!
//! Measured on the 2-core dev machine (best of 3 rounds): batch 100, source 156,004/s
//! against the loop's 194,638/s (0.80); batch 500, 191,589/s against 217,273/s (0.88). The
//! reader reads ahead up to four batches (within `max_unacked`); with room for one batch only
//! it waited 5 ms whenever the channel was full, and ran at 15,000/s (0.08).
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rebound_runtime::durable::Durable;
use rebound_runtime::fate::Seams;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::SqliteStore;
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;
use rebound_store_redis::TestServer;
use rebound_store_redis::stream::{CustodyAt, StreamOptions, StreamSource, StreamUrl};

const ENTRIES: u64 = 20_000;
const BATCH: usize = 100;

fn batch() -> usize {
    std::env::var("BENCH_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(BATCH)
}
const ROUNDS: usize = 3;
const GROUP: &str = "bench";

fn fill(server: &TestServer, stream: &str, n: u64) {
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..n {
        let biz = if i % 10 == 9 { "SLOW" } else { "ORDER" };
        pipe.cmd("XADD")
            .arg(stream)
            .arg("*")
            .arg("biz")
            .arg(biz)
            .arg("payload")
            .arg(format!("{{\"n\":{i}}}"))
            .ignore();
        if i % 1000 == 999 {
            pipe.query::<()>(&mut c).unwrap();
            pipe = redis::pipe();
        }
    }
    if !n.is_multiple_of(1000) {
        pipe.query::<()>(&mut c).unwrap();
    }
}

fn pending(server: &TestServer, stream: &str) -> u64 {
    type Summary = (
        u64,
        Option<String>,
        Option<String>,
        Option<Vec<(String, String)>>,
    );
    redis::cmd("XPENDING")
        .arg(stream)
        .arg(GROUP)
        .query::<Summary>(&mut server.client())
        .map_or(0, |s| s.0)
}

fn xack_calls(server: &TestServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_xack:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The hand-written loop: read a batch, acknowledge it, until `n` are read.
async fn hand_loop(server: &TestServer, stream: &str, n: u64) -> Duration {
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(GROUP)
        .arg("0")
        .query_async(&mut conn)
        .await;
    let started = Instant::now();
    let mut read = 0;
    while read < n {
        let reply: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg("loop")
            .arg("COUNT")
            .arg(batch())
            .arg("STREAMS")
            .arg(stream)
            .arg(">")
            .query_async(&mut conn)
            .await
            .unwrap();
        let ids: Vec<String> = reply
            .keys
            .into_iter()
            .flat_map(|k| k.ids)
            .map(|e| e.id)
            .collect();
        read += ids.len() as u64;
        if !ids.is_empty() {
            let _: u64 = redis::cmd("XACK")
                .arg(stream)
                .arg(GROUP)
                .arg(&ids)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }
    started.elapsed()
}

struct Noop(Arc<AtomicU64>);

impl Bolt for Noop {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        self.0.fetch_add(1, Relaxed);
        Ok(())
    }
}

/// Fails the first delivery of every `SLOW` message.
struct SlowFailsOnce;

impl Bolt for SlowFailsOnce {
    fn execute(&mut self, t: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        if t.str("biz") == Some("SLOW") && t.int("attempt") == Some(1) {
            return Err(Failure::new("LATER", "in an hour"));
        }
        Ok(())
    }
}

fn options(server: &TestServer, stream: &str) -> StreamOptions {
    let url = format!(
        "redis-stream://127.0.0.1:{}/{stream}?group={GROUP}",
        server.port()
    );
    let mut o = StreamOptions::new(StreamUrl::parse(&url).unwrap(), "node");
    o.batch = batch();
    o.max_unacked = std::env::var("BENCH_MAX_UNACKED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000 + BATCH as u64);
    o
}

/// The source through a topology with a no-op bolt, until every entry is acknowledged.
async fn source(server: &TestServer, stream: &str, n: u64) -> Duration {
    let done = Arc::new(AtomicU64::new(0));
    let o = options(server, stream);
    let stats = o.stats.clone();
    let mut b = TopologyBuilder::new("bench");
    b.spout("s", 1, move |_| {
        StreamSource::start(o.clone(), None).unwrap()
    });
    let d = done.clone();
    b.bolt("noop", 1, move |_| Noop(d.clone())).shuffle("s");
    let started = Instant::now();
    let running = b.build().unwrap().start(Seams::in_memory());
    while stats.acked_at_broker.load(Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    running.shutdown(Duration::from_secs(5)).await;
    took
}

fn per_s(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let (mut src, mut hand) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let s = format!("src-{round}");
        fill(&server, &s, ENTRIES);
        src.push(per_s(ENTRIES, source(&server, &s, ENTRIES).await));
        let h = format!("loop-{round}");
        fill(&server, &h, ENTRIES);
        hand.push(per_s(ENTRIES, hand_loop(&server, &h, ENTRIES).await));
        println!(
            "round {round}: source {:.0}/s, hand loop {:.0}/s",
            src[round], hand[round]
        );
    }
    let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!(
        "best: source {:.0}/s, hand loop {:.0}/s, ratio {:.2} (target 0.8 or better)",
        best(&src),
        best(&hand),
        best(&src) / best(&hand)
    );

    // Custody with hour-long retries: one message in ten fails once.
    let stream = "custody";
    fill(&server, stream, ENTRIES);
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let durable = Durable::new(store, Arc::new(TokioTime::new()), Default::default());
    let o = options(&server, stream);
    let stats = o.stats.clone();
    let d = durable.clone();
    let mut b = TopologyBuilder::new("custody");
    b.spout("s", 1, move |_| {
        StreamSource::start(o.clone(), Some(d.clone())).unwrap()
    });
    b.bolt("work", 1, |_| SlowFailsOnce).shuffle("s");
    let policy = FixedPolicy {
        base_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
        ..FixedPolicy::default()
    };
    let calls_before = xack_calls(&server);
    let running = b.build().unwrap().start(durable.seams(policy));
    let mut most = 0;
    while stats.acked_at_broker.load(Relaxed) < ENTRIES {
        most = most.max(pending(&server, stream));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let calls = xack_calls(&server) - calls_before;
    let retained = stats.custody(CustodyAt::Retained);
    println!(
        "custody: {retained} retried (retry in 1 h), {} acked; pending at the broker at the end {}, at most {most} during the run (bound {}); XACK round trips {calls} in all, {:.3} per retried message",
        stats.custody(CustodyAt::Acked),
        pending(&server, stream),
        1_000 + BATCH,
        calls as f64 / retained.max(1) as f64
    );
    let took = stats.custody_latency();
    let q = |q: f64| took.quantile(q).map_or("-".into(), |d| format!("{d:?}"));
    println!(
        "custody ack, from the spout hearing of the journal's commit to XACK's answer: p50 {}, p99 {} (SQLite store)",
        q(0.5),
        q(0.99)
    );
    running.shutdown(Duration::from_secs(5)).await;
}
