//! The cost of reliability: a three-stage topology (spout → parse → store) with acking on, 5%
//! store failures and retries on, against the same three stages on bare tokio channels with
//! no acking — in the same run, on a 2-worker tokio runtime.
//!
//! `cargo bench -p rebound-runtime --bench pipeline`
//!
//! Criterion times each variant; at the end the bench prints messages acked per second (for
//! the bare pipelines: messages that got through all three stages) and the ratios. Two bare
//! pipelines:
//!
//! - one channel send per message: the issue's baseline ("the same three stages on bare tokio
//!   channels with no acking"), which the ≥ 50% target is measured against;
//! - batches of up to 256, like the runtime's own channels: a reference, with no target. It
//!   shows what acking, retries and the pending table cost against code that also batches by
//!   hand (about three quarters of the throughput on the light stages).
//!
//! The cost of durability: the same topology at a 10% failure rate, with in-memory retries
//! against durable ones (the `durable` seams over SQLite: every retry written behind to the
//! store, its row dropped with the message's acked fate, dead letters committed before the
//! spout hears of them; `record_every_ack: false`, so only messages that were retried get an
//! acked fate). A third variant is a durable source, as the bundled pipeline's (what
//! `rebound run` does): every message has its offset (`Message::with_offset`), the spout keeps
//! the source's committed position (`Durable::source_position`, told `settled(n)` from `ack`
//! and `dead_lettered`), and every message gets an acked fate (`record_every_ack: true`)
//! unless the position already covers it: the position, one write per batch, is the record of
//! the acked fates at or below it. Timed until every message has its fate *and* the journal
//! has committed everything. `BENCH_DURABLE_ONLY=1` runs only this part.
//!
//! The journal holds a queued retry for 10 ms and never writes it if the message settles
//! meanwhile; this bench's retries wait 1 ms, so nearly all of them are settled in time (the
//! best case). `BENCH_HOLD_MS=0` writes nearly every retry and its fate (close to the worst
//! case, as for retries whose delays outlast the hold).
//!
//! Every variant runs on mimalloc, the allocator the `rebound` binary uses. With glibc's
//! malloc the topology spent a third of its CPU in the allocator's arena locks and ran at
//! less than half the speed; the bare pipelines, which allocate less, gained less.
//!
//! For a profiler,
//! `BENCH_ONLY=topology|bare-batched|bare-per-message|memory-10|durable-10|source-10` (the
//! last three: 10% failures, in-memory or durable retries, or a durable source) runs one variant
//! once (with `BENCH_WORK` and `BENCH_MESSAGES`) and skips the rest. `BENCH_DEBUG=1` prints,
//! for each durable run, when the topology went quiet, when the journal had committed
//! everything, and the journal's counters.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use rebound_runtime::durable::{Durable, DurableOptions, JournalOptions, SourcePosition};
use rebound_runtime::fate::Seams;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::SqliteStore;
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;
use tokio::sync::mpsc;

/// The `rebound` binary's allocator, so that the bench measures what users run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Messages per timed run (`BENCH_MESSAGES` overrides, e.g. for a profiler).
static MESSAGES: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
    std::env::var("BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
});
/// How long the journal holds a queued retry before writing it (`BENCH_HOLD_MS`; default: the
/// journal's own, 10 ms). With 0 a retry is written with the next batch unless its message
/// settles within the same batch: here about 93% of retries and their fates reach SQLite,
/// close to the worst case of retries whose delays outlast the hold.
static HOLD: std::sync::LazyLock<Option<Duration>> = std::sync::LazyLock::new(|| {
    std::env::var("BENCH_HOLD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
});

const PAYLOAD: &[u8] = br#"{"order":"A-1001","amount":1999,"currency":"EUR","items":3}"#;

// ---- the work of each stage, shared by both pipelines ----

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// What the parse stage does with the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// A checksum over the payload: almost no work, so the runtime's own cost dominates.
    Light,
    /// `serde_json` into a struct, as the bundled pipeline's parse bolt does.
    Json,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Order<'a> {
    order: &'a str,
    amount: i64,
    currency: &'a str,
    items: u32,
}

/// "Parse": the order number from the id, an amount from the payload.
fn parse(work: Work, id: &str, payload: &[u8]) -> (u64, i64) {
    let order = id.bytes().fold(0u64, |a, b| a * 10 + u64::from(b - b'0'));
    let amount = match work {
        Work::Light => {
            let sum = payload.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
            });
            (sum % 10_000) as i64
        }
        Work::Json => serde_json::from_slice::<Order<'_>>(payload).map_or(-1, |o| o.amount),
    };
    (order, amount)
}

/// "Store": an idempotent write into a table; fails for one in `fail_one_in` (order, attempt)
/// pairs (20: 5%).
fn store(table: &mut [i64], order: u64, amount: i64, attempt: i64, fail_one_in: u64) -> bool {
    if mix(order ^ (attempt as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).is_multiple_of(fail_one_in)
    {
        return false;
    }
    let slot = (mix(order) as usize) % table.len();
    table[slot] = amount;
    true
}

fn id_for(buf: &mut String, n: u64) -> Arc<str> {
    buf.clear();
    let _ = write!(buf, "{n}");
    Arc::from(buf.as_str())
}

// ---- the topology ----

/// The name of the durable source's position in the store.
const SOURCE: &str = "orders";

struct OrderSpout {
    next: u64,
    total: u64,
    biz: Arc<str>,
    payload: Bytes,
    buf: String,
    acked: Arc<AtomicU64>,
    /// A durable source's committed position: its messages carry their offsets.
    position: Option<SourcePosition>,
}

impl OrderSpout {
    /// A message got its fate: a durable source tells its position (the id is its offset).
    fn settled(&mut self, id: &MessageId) {
        if let Some(p) = &mut self.position {
            p.settled(id.as_str().parse().expect("ids are offsets"));
        }
    }
}

impl Spout for OrderSpout {
    fn next(&mut self) -> NextMessage {
        let n = loop {
            if self.next == self.total {
                return NextMessage::Exhausted;
            }
            self.next += 1;
            if !self
                .position
                .as_ref()
                .is_some_and(|p| p.should_skip(self.next))
            {
                break self.next;
            }
        };
        let id = id_for(&mut self.buf, n);
        let message = Message::new(id, self.biz.clone(), self.payload.clone());
        NextMessage::Ready(match &mut self.position {
            Some(p) => {
                p.handing_out(n);
                message.with_offset(n)
            }
            None => message,
        })
    }
    fn ack(&mut self, id: &MessageId) {
        // The spout task recorded the acked fate (through the durable seams) before this.
        self.settled(id);
        self.acked.fetch_add(1, Ordering::Relaxed);
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.settled(id);
    }
    fn close(&mut self) {
        if let Some(p) = &mut self.position {
            p.sync();
        }
    }
}

struct ParseBolt(Work);

impl Bolt for ParseBolt {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default();
        let payload = input.bytes("payload").map(|b| &b[..]).unwrap_or_default();
        let (order, amount) = parse(self.0, id, payload);
        let attempt = input.int("attempt").unwrap_or(1);
        out.emit((Value::Int(order as i64), amount, attempt));
        Ok(())
    }
}

struct StoreBolt {
    table: Vec<i64>,
    fail_one_in: u64,
}

impl Bolt for StoreBolt {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let v = input.values();
        let (order, amount, attempt) = (
            v[0].as_int().unwrap_or(0) as u64,
            v[1].as_int().unwrap_or(0),
            v[2].as_int().unwrap_or(1),
        );
        if store(&mut self.table, order, amount, attempt, self.fail_one_in) {
            Ok(())
        } else {
            Err(Failure::new("DB_LOCK_WAIT", "injected"))
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    if std::env::var("BENCH_RT").as_deref() == Ok("current") {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Where retries (and dead letters) go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retries {
    /// The in-memory seams.
    InMemory,
    /// The durable seams over SQLite; acked fates only for messages that were retried
    /// (`record_every_ack: false`), no offsets, no source position.
    Durable,
    /// A durable source: offsets, a committed source position, and an acked fate for every
    /// message its position does not cover yet (what `rebound run` does).
    DurableEveryAck,
}

/// One run of the topology (5% failures, in-memory retries); returns (acked, elapsed).
fn run_topology(rt: &tokio::runtime::Runtime, work: Work, max_pending: usize) -> (u64, Duration) {
    run_topology_with(rt, work, max_pending, 20, Retries::InMemory)
}

/// One run of the topology; returns (messages acked, elapsed). With durable retries the time
/// runs until the journal has committed everything.
fn run_topology_with(
    rt: &tokio::runtime::Runtime,
    work: Work,
    max_pending: usize,
    fail_one_in: u64,
    retries: Retries,
) -> (u64, Duration) {
    let dir = tempfile::tempdir().expect("temp dir");
    rt.block_on(async {
        let acked = Arc::new(AtomicU64::new(0));
        let durable = (retries != Retries::InMemory).then(|| {
            let store = SqliteStore::open(dir.path()).expect("store");
            Durable::new(
                Arc::new(store),
                Arc::new(TokioTime::new()),
                DurableOptions {
                    journal: JournalOptions {
                        record_every_ack: retries == Retries::DurableEveryAck,
                        hold: HOLD.unwrap_or(JournalOptions::default().hold),
                        ..JournalOptions::default()
                    },
                },
            )
        });
        let position = match (&durable, retries) {
            (Some(d), Retries::DurableEveryAck) => {
                d.recover().expect("recover");
                let p = d
                    .source_position(SOURCE, |n| n.to_string(), [])
                    .expect("source position");
                Some(p)
            }
            _ => None,
        };
        let position = std::sync::Mutex::new(position);
        let mut b = TopologyBuilder::new("bench");
        b.config(Config {
            max_spout_pending: max_pending,
            batch_size: std::env::var("BENCH_BATCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(Config::default().batch_size),
            ..Config::default()
        });
        let spout_acked = acked.clone();
        b.spout(SOURCE, 1, move |_| OrderSpout {
            next: 0,
            total: *MESSAGES,
            biz: Arc::from("ORDER"),
            payload: Bytes::from_static(PAYLOAD),
            buf: String::new(),
            acked: spout_acked.clone(),
            // One task, made once.
            position: position.lock().expect("position").take(),
        });
        b.bolt("parse", 1, move |_| ParseBolt(work))
            .output(["order", "amount", "attempt"])
            .shuffle(SOURCE);
        b.bolt("store", 1, move |_| StoreBolt {
            table: vec![0; 4096],
            fail_one_in,
        })
        .shuffle("parse");
        let topology = b.build().expect("valid topology");
        let policy = FixedPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(1),
            ..FixedPolicy::default()
        };
        let seams = match &durable {
            Some(d) => d.seams(policy),
            None => Seams::in_memory().with_policy(policy),
        };
        let start = Instant::now();
        let running = topology.start(seams);
        running.wait_quiescent().await;
        let q = start.elapsed();
        if let Some(d) = &durable {
            d.journal().flush().await;
            if std::env::var("BENCH_DEBUG").is_ok() {
                eprintln!(
                    "quiescent after {q:?}, journal flushed after {:?}: {:?}",
                    start.elapsed(),
                    d.journal().stats()
                );
            }
        }
        let elapsed = start.elapsed();
        running.shutdown(Duration::from_secs(5)).await;
        if let (Some(d), Retries::DurableEveryAck) = (&durable, retries) {
            // The spout synced its position when it stopped: everything is covered.
            d.journal().flush().await;
            let committed = d.store().position(SOURCE).expect("position");
            assert_eq!(
                committed,
                Some(*MESSAGES),
                "the source's position covers every message"
            );
        }
        (acked.load(Ordering::Relaxed), elapsed)
    })
}

// ---- the bare pipelines ----

struct Parsed {
    order: u64,
    amount: i64,
    attempt: i64,
}

fn new_message(buf: &mut String, n: u64, biz: &Arc<str>, payload: &Bytes) -> Message {
    Message::new(id_for(buf, n), biz.clone(), payload.clone())
}

/// Bare channels, one send per message; returns (messages through, elapsed).
fn run_bare_per_item(rt: &tokio::runtime::Runtime, work: Work) -> (u64, Duration) {
    rt.block_on(async {
        let start = Instant::now();
        let (tx1, mut rx1) = mpsc::channel::<Message>(1024);
        let (tx2, mut rx2) = mpsc::channel::<Parsed>(1024);
        tokio::spawn(async move {
            let (biz, payload, mut buf) = (
                Arc::from("ORDER"),
                Bytes::from_static(PAYLOAD),
                String::new(),
            );
            for n in 1..=*MESSAGES {
                if tx1
                    .send(new_message(&mut buf, n, &biz, &payload))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(m) = rx1.recv().await {
                let (order, amount) = parse(work, m.id.as_str(), &m.payload);
                let p = Parsed {
                    order,
                    amount,
                    attempt: 1,
                };
                if tx2.send(p).await.is_err() {
                    return;
                }
            }
        });
        let done = tokio::spawn(async move {
            let mut table = vec![0i64; 4096];
            let mut ok = 0u64;
            while let Some(p) = rx2.recv().await {
                if store(&mut table, p.order, p.amount, p.attempt, 20) {
                    ok += 1;
                }
            }
            ok
        });
        let ok = done.await.expect("store stage");
        (ok, start.elapsed())
    })
}

/// Bare channels carrying batches of up to 256, flushed whenever a stage has handled what it
/// had (the runtime's own batching); returns (messages through, elapsed).
fn run_bare_batched(rt: &tokio::runtime::Runtime, work: Work) -> (u64, Duration) {
    const BATCH: usize = 256;
    rt.block_on(async {
        let start = Instant::now();
        let (tx1, mut rx1) = mpsc::channel::<Vec<Message>>(64);
        let (tx2, mut rx2) = mpsc::channel::<Vec<Parsed>>(64);
        tokio::spawn(async move {
            let (biz, payload, mut buf) = (
                Arc::from("ORDER"),
                Bytes::from_static(PAYLOAD),
                String::new(),
            );
            let mut n = 0;
            while n < *MESSAGES {
                let mut batch = Vec::with_capacity(BATCH);
                while batch.len() < BATCH && n < *MESSAGES {
                    n += 1;
                    batch.push(new_message(&mut buf, n, &biz, &payload));
                }
                if tx1.send(batch).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(batch) = rx1.recv().await {
                let out: Vec<Parsed> = batch
                    .iter()
                    .map(|m| {
                        let (order, amount) = parse(work, m.id.as_str(), &m.payload);
                        Parsed {
                            order,
                            amount,
                            attempt: 1,
                        }
                    })
                    .collect();
                if tx2.send(out).await.is_err() {
                    return;
                }
            }
        });
        let done = tokio::spawn(async move {
            let mut table = vec![0i64; 4096];
            let mut ok = 0u64;
            while let Some(batch) = rx2.recv().await {
                for p in batch {
                    if store(&mut table, p.order, p.amount, p.attempt, 20) {
                        ok += 1;
                    }
                }
            }
            ok
        });
        let ok = done.await.expect("store stage");
        (ok, start.elapsed())
    })
}

// ---- measuring ----

fn per_second((through, elapsed): (u64, Duration)) -> f64 {
    through as f64 / elapsed.as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn criterion_benches(c: &mut Criterion, rt: &tokio::runtime::Runtime, max_pending: usize) {
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(*MESSAGES));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(6));
    for work in [Work::Light, Work::Json] {
        let name = format!("{work:?}").to_lowercase();
        g.bench_function(format!("{name}/topology_acking"), |b| {
            b.iter_custom(|n| (0..n).map(|_| run_topology(rt, work, max_pending).1).sum())
        });
        g.bench_function(format!("{name}/bare_batched"), |b| {
            b.iter_custom(|n| (0..n).map(|_| run_bare_batched(rt, work).1).sum())
        });
    }
    g.bench_function("light/bare_per_item", |b| {
        b.iter_custom(|n| (0..n).map(|_| run_bare_per_item(rt, Work::Light).1).sum())
    });
    g.finish();
}

fn criterion_durable(c: &mut Criterion, rt: &tokio::runtime::Runtime, max_pending: usize) {
    let mut g = c.benchmark_group("durable");
    g.throughput(Throughput::Elements(*MESSAGES));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(6));
    for (name, retries) in [
        ("json_10pct/in_memory_retries", Retries::InMemory),
        ("json_10pct/sqlite_retries", Retries::Durable),
        (
            "json_10pct/sqlite_retries_every_ack",
            Retries::DurableEveryAck,
        ),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|n| {
                (0..n)
                    .map(|_| run_topology_with(rt, Work::Json, max_pending, 10, retries).1)
                    .sum()
            })
        });
    }
    g.finish();
}

/// In-memory against durable retries at a 10% failure rate, json stages, in interleaved
/// rounds.
fn interleaved_durable(rt: &tokio::runtime::Runtime, max_pending: usize, rounds: usize) {
    let (mut mem, mut dur, mut every) = (vec![], vec![], vec![]);
    let (mut r_dur, mut r_every) = (vec![], vec![]);
    for _ in 0..rounds {
        let m = per_second(run_topology_with(
            rt,
            Work::Json,
            max_pending,
            10,
            Retries::InMemory,
        ));
        let d = per_second(run_topology_with(
            rt,
            Work::Json,
            max_pending,
            10,
            Retries::Durable,
        ));
        let e = per_second(run_topology_with(
            rt,
            Work::Json,
            max_pending,
            10,
            Retries::DurableEveryAck,
        ));
        r_dur.push(d / m);
        r_every.push(e / m);
        mem.push(m);
        dur.push(d);
        every.push(e);
    }
    println!(
        "\nDurable retries, json stages, 10% failures, {rounds} interleaved rounds of {} messages (medians), journal hold {:?}:",
        *MESSAGES,
        HOLD.unwrap_or(JournalOptions::default().hold)
    );
    println!("  {:>10.0} acked/s   in-memory retries", median(mem));
    println!(
        "  {:>10.0} acked/s   SQLite retries (durable seams, write-behind journal)",
        median(dur)
    );
    println!(
        "  {:>10.0} acked/s   a durable source: SQLite retries, offsets, committed position, every ack",
        median(every)
    );
    println!(
        "  ratio SQLite / in-memory:                 {:.2}   (target >= 0.75: costs at most 25%)",
        median(r_dur)
    );
    println!(
        "  ratio durable source / in-memory:         {:.2}   (target >= 0.75, issue 11)",
        median(r_every)
    );
}

/// For a profiler: runs the one variant `only` names, once, and prints its throughput.
fn run_only(rt: &tokio::runtime::Runtime, only: &str, work: Work, max_pending: usize) {
    let through = match only {
        "topology" => run_topology(rt, work, max_pending),
        "memory-10" => run_topology_with(rt, work, max_pending, 10, Retries::InMemory),
        "durable-10" => run_topology_with(rt, work, max_pending, 10, Retries::Durable),
        "source-10" => run_topology_with(rt, work, max_pending, 10, Retries::DurableEveryAck),
        "bare-batched" => run_bare_batched(rt, work),
        "bare-per-message" => run_bare_per_item(rt, work),
        other => panic!(
            "BENCH_ONLY={other}: expected topology, bare-batched, bare-per-message, memory-10, durable-10 or source-10"
        ),
    };
    println!("{only}: {:.0}/s", per_second(through));
}

/// The ratio, measured in interleaved rounds (topology, then both bare pipelines) so that a
/// change in the machine's load hits all of them alike.
fn interleaved(rt: &tokio::runtime::Runtime, work: Work, max_pending: usize, rounds: usize) {
    let (mut topo, mut batched, mut per_item) = (vec![], vec![], vec![]);
    let (mut vs_batched, mut vs_per_item) = (vec![], vec![]);
    for _ in 0..rounds {
        let t = per_second(run_topology(rt, work, max_pending));
        let b = per_second(run_bare_batched(rt, work));
        let p = per_second(run_bare_per_item(rt, work));
        vs_batched.push(t / b);
        vs_per_item.push(t / p);
        topo.push(t);
        batched.push(b);
        per_item.push(p);
    }
    println!(
        "\n{work:?} stages, {rounds} interleaved rounds of {} messages (medians):",
        *MESSAGES
    );
    println!(
        "  {:>10.0} acked/s   topology: acking, 5% store failures, retries (max_spout_pending {max_pending})",
        median(topo)
    );
    println!(
        "  {:>10.0} /s         bare tokio channels, batches of 256, no acking",
        median(batched)
    );
    println!(
        "  {:>10.0} /s         bare tokio channels, one send per message, no acking",
        median(per_item)
    );
    println!(
        "  ratio topology / bare per message: {:.2}   (target >= 0.50: the issue's baseline)",
        median(vs_per_item)
    );
    println!(
        "  ratio topology / bare batched:     {:.2}   (reference, no target: batched by hand)",
        median(vs_batched)
    );
}

fn main() {
    let rt = runtime();
    let max_pending: usize = std::env::var("BENCH_MAX_PENDING")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(Config::default().max_spout_pending);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let works = match std::env::var("BENCH_WORK").as_deref() {
        Ok("light") => vec![Work::Light],
        Ok("json") => vec![Work::Json],
        _ => vec![Work::Light, Work::Json],
    };
    if let Ok(only) = std::env::var("BENCH_ONLY") {
        // One variant, once, with the first work (light unless BENCH_WORK=json).
        return run_only(&rt, &only, works[0], max_pending);
    }
    let durable_only = std::env::var("BENCH_DURABLE_ONLY").is_ok();
    if std::env::var("BENCH_SKIP_CRITERION").is_err() {
        let mut c = Criterion::default().configure_from_args();
        if !durable_only {
            criterion_benches(&mut c, &rt, max_pending);
        }
        criterion_durable(&mut c, &rt, max_pending);
        c.final_summary();
    }
    interleaved_durable(&rt, max_pending, rounds);
    if durable_only {
        return;
    }
    for work in works {
        interleaved(&rt, work, max_pending, rounds);
    }
}
