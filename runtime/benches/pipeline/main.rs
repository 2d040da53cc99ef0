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
//! has committed everything. A fourth is the shared store on Redis (`redis.rs`): the durable
//! seams over a `RedisStore` on a redis-server of the bench's own, one node, every retry
//! written to Redis and claimed back by the node's claimer, an acked fate for every message;
//! its rounds print the ratio Redis / SQLite and, from the server's `INFO commandstats`, round
//! trips and store operations per message. `BENCH_DURABLE_ONLY=1` runs only this part.
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
//! The cost of the decision log (`decisions.rs`): the durable source's run with its failures
//! decided by the rules, the log off against on, interleaved (target ≥ 0.95).
//! `BENCH_DECISIONS_ONLY=1` runs only this part.
//!
//! The cost of ordered keys (`ordered.rs`): ordering on against off, every key distinct, in
//! interleaved rounds (target ≥ 0.95), and the waits behind a key with 10% failures over 100
//! keys. `BENCH_ORDERED_ONLY=1` runs only this part.
//!
//! For a profiler,
//! `BENCH_ONLY=topology|bare-batched|bare-per-message|memory-10|durable-10|source-10|rules-10|rules-log-10|redis-10|redis-0|ordered|ordered-off`
//! (10% failures, in-memory, SQLite or Redis retries, or a durable source; `rules-10` and
//! `rules-log-10`: the durable source decided by the rules, the decision log off or on; `redis-0`: Redis
//! with no failures; `ordered`: every key distinct, ordering on, `ordered-off` the same off) runs one variant once (with `BENCH_WORK` and `BENCH_MESSAGES`) and skips the rest. `BENCH_DEBUG=1` prints,
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
mod bare;
mod decisions;
mod ordered;
mod redis;
mod topology;
mod work;

use bare::*;
use ordered::*;
use topology::*;
use work::*;

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
        ("json_10pct/redis_retries", Retries::Redis),
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

/// In-memory against durable retries (SQLite, a durable source on SQLite, the shared store on
/// Redis) at a 10% failure rate, json stages, in interleaved rounds; then one Redis run with no
/// failures, for what an acked message that never failed costs.
fn interleaved_durable(rt: &tokio::runtime::Runtime, max_pending: usize, rounds: usize) {
    let run = |retries| per_second(run_topology_with(rt, Work::Json, max_pending, 10, retries));
    let (mut mem, mut dur, mut every, mut red) = (vec![], vec![], vec![], vec![]);
    let (mut r_dur, mut r_every, mut r_red, mut r_red_every) = (vec![], vec![], vec![], vec![]);
    let mut counts = vec![];
    for _ in 0..rounds {
        let m = run(Retries::InMemory);
        let d = run(Retries::Durable);
        let e = run(Retries::DurableEveryAck);
        let r = run(Retries::Redis);
        counts.push(redis::last());
        r_dur.push(d / m);
        r_every.push(e / m);
        r_red.push(r / d);
        r_red_every.push(r / e);
        mem.push(m);
        dur.push(d);
        every.push(e);
        red.push(r);
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
        "  {:>10.0} acked/s   Redis retries (shared store, one node: every retry written and claimed back)",
        median(red)
    );
    println!(
        "  ratio SQLite / in-memory:                 {:.2}   (target >= 0.75: costs at most 25%)",
        median(r_dur)
    );
    println!(
        "  ratio durable source / in-memory:         {:.2}   (target >= 0.75, issue 11)",
        median(r_every)
    );
    println!(
        "  ratio Redis / SQLite:                     {:.2}   (target >= 0.5)",
        median(r_red)
    );
    println!(
        "  ratio Redis / durable source:             {:.2}   (reference: both record every ack)",
        median(r_red_every)
    );
    for (i, c) in counts.iter().enumerate() {
        println!("  Redis round {}: {}", i + 1, c.summary());
    }
    let r0 = per_second(run_topology_with(
        rt,
        Work::Json,
        max_pending,
        u64::MAX,
        Retries::Redis,
    ));
    let c0 = redis::last();
    println!(
        "  Redis, no failures: {r0:.0} acked/s; {:.4} round trips per acked message (target <= 0.01); {}",
        c0.round_trips as f64 / c0.acked.max(1) as f64,
        c0.summary()
    );
}

/// For a profiler: runs the one variant `only` names, once, and prints its throughput.
fn run_only(rt: &tokio::runtime::Runtime, only: &str, work: Work, max_pending: usize) {
    let through = match only {
        "topology" => run_topology(rt, work, max_pending),
        "memory-10" => run_topology_with(rt, work, max_pending, 10, Retries::InMemory),
        "durable-10" => run_topology_with(rt, work, max_pending, 10, Retries::Durable),
        "source-10" => run_topology_with(rt, work, max_pending, 10, Retries::DurableEveryAck),
        "rules-10" | "rules-log-10" => {
            // As source-10, decided by the rules, their decision log off or on (decisions.rs).
            let policy = if only == "rules-10" { 1 } else { 2 };
            decisions::POLICY.store(policy, Ordering::Relaxed);
            run_topology_with(rt, work, max_pending, 10, Retries::DurableEveryAck)
        }
        "redis-10" | "redis-0" => {
            let fail_one_in = if only == "redis-0" { u64::MAX } else { 10 };
            let through = run_topology_with(rt, work, max_pending, fail_one_in, Retries::Redis);
            println!("{only}: {}", redis::last().summary());
            through
        }
        "ordered" | "ordered-off" => {
            let ordered = if only == "ordered" {
                Ordered::All
            } else {
                Ordered::None
            };
            let max_held = OrderingConfig::default().max_held;
            run_keyed(rt, work, max_pending, 20, Keys::Distinct, ordered, max_held).0
        }
        "bare-batched" => run_bare_batched(rt, work),
        "bare-per-message" => run_bare_per_item(rt, work),
        other => panic!(
            "BENCH_ONLY={other}: expected topology, bare-batched, bare-per-message, memory-10, durable-10, source-10, rules-10, rules-log-10, redis-10, redis-0, ordered or ordered-off"
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
    if std::env::var("BENCH_ORDERED_ONLY").is_ok() {
        for work in works {
            interleaved_ordered(&rt, work, max_pending, rounds);
        }
        return;
    }
    if std::env::var("BENCH_DECISIONS_ONLY").is_ok() {
        return decisions::interleaved_decisions(&rt, max_pending, rounds);
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
    decisions::interleaved_decisions(&rt, max_pending, rounds);
    if durable_only {
        return;
    }
    for work in &works {
        interleaved(&rt, *work, max_pending, rounds);
    }
    for work in works {
        interleaved_ordered(&rt, work, max_pending, rounds);
    }
}
