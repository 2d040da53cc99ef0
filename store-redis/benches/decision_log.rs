//! The decision log at its default bound, 100,000 entries (`decisions.keep`), on both stores:
//! writing it (batches of 1,000, each trimmed to the bound in the same transaction, the log
//! already full, so every batch trims 1,000) and reading it back (`Store::decisions`: all of
//! it, the newest 1,000, and `since` the last tenth). The baselines in the same run: SQLite's
//! store for the same reads, and on Redis the bare `LRANGE` of the whole list in the store's
//! chunks, with no entry parsed (what the read costs beyond the server and the wire); and the
//! entries' JSON parsed from memory (the floor of both reads).
//! Each figure is the best of 5 rounds, on a `redis-server` of its own.
//!
//! ```sh
//! cargo bench -p rebound-store-redis --bench decision_log
//! ```
//!
//! Measured on the 2-core dev machine while other builds ran (load average about 6): the
//! whole log read in 493 ms on SQLite and 500 ms on Redis, of which the JSON parse alone is
//! 450 ms (the bare `LRANGE` of it 89 ms); the newest 1,000 in 2.4 and 3.0 ms; `since` the
//! last tenth 51 and 156 ms (Redis reads every entry's number and time to filter, parsing
//! only what passes); a batch of 1,000 logged and trimmed in 6.7 and 9.0 ms. A stream
//! (`XREVRANGE`, tried first) cost four times a list's `LRANGE` on the server and read the
//! whole log in 1.2 s.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use rebound_engine::release::{Arm, LoggedContext, LoggedDecision, Outcome};
use rebound_runtime::store::{DecisionFilter, DecisionPage, SqliteStore, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};

const KEEP: u64 = 100_000;
const BATCH: u64 = 1_000;
const ROUNDS: usize = 5;
const T0: u64 = 1_800_000_000_000;

/// Decision `n`: a retry of a payment with two attrs, a header and two signals (about 450
/// bytes of JSON), one every millisecond.
fn decision(n: u64) -> LoggedDecision {
    LoggedDecision {
        id: format!("order-{n:07}"),
        context: LoggedContext {
            biz: "PAYMENT".into(),
            code: "NET_TIMEOUT".into(),
            attempt: 2,
            redrives: 0,
            elapsed_ms: 3_000,
            retry_after_ms: None,
            last_delay_ms: 1_000,
            attrs: [
                ("downstream".into(), "payment-gateway".into()),
                ("http_status".into(), "504".into()),
            ]
            .into(),
            headers: [("trace".into(), format!("t-{n}"))].into(),
            now_ms: T0 + n,
            signals: [
                ("fail_rate".into(), 0.02),
                ("retry_queue_depth".into(), 130.0),
            ]
            .into(),
            seed: n.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        },
        outcome: Outcome {
            action: "retry".into(),
            delay_ms: Some(2_000),
            label: None,
            reason: None,
            rule: "payment-net".into(),
            version: "00c0ffee00000001".into(),
        },
        arm: Some(Arm::Stable),
    }
}

fn batch(from: u64) -> WriteOp {
    WriteOp::LogDecisions {
        decisions: DecisionPage::of(&(from..from + BATCH).map(decision).collect::<Vec<_>>())
            .expect("the bench's entries"),
        keep: KEEP,
    }
}

/// The best of `ROUNDS` runs of `f`.
fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        out = Some(v);
    }
    (best, out.expect("at least one round"))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Fills `store` to the bound, then times `ROUNDS` more batches (each trims) and the reads.
fn measure(name: &str, store: &dyn Store) {
    let mut next = 0;
    while next < KEEP {
        store.apply(&[batch(next)]).expect("apply");
        next += BATCH;
    }
    let (write, ()) = best(|| {
        store.apply(&[batch(next)]).expect("apply");
        next += BATCH;
    });
    let read = |filter: DecisionFilter| best(|| store.decisions(&filter).expect("read"));
    let (all, entries) = read(DecisionFilter::default());
    assert_eq!(
        entries.len() as u64,
        KEEP,
        "{name}: the log holds its bound"
    );
    assert_eq!(
        entries.last().map(|d| d.context.now_ms),
        Some(T0 + next - 1)
    );
    let (newest, some) = read(DecisionFilter {
        since: None,
        limit: Some(1_000),
    });
    assert_eq!(some.len(), 1_000);
    let since = Timestamp::from_millis(T0 + next - KEEP / 10);
    let (tenth, recent) = read(DecisionFilter {
        since: Some(since),
        limit: None,
    });
    assert_eq!(recent.len() as u64, KEEP / 10);
    println!(
        "{name:<8} write {BATCH} + trim {:>7.1} ms   read all {KEEP} {:>7.1} ms   newest 1000 {:>6.1} ms   since (last tenth) {:>6.1} ms",
        ms(write),
        ms(all),
        ms(newest),
        ms(tenth)
    );
}

/// The bare read of the whole list, newest first, in the store's chunks, nothing parsed.
fn bare_lrange(conn: &mut redis::Connection, key: &str) -> usize {
    const CHUNK: usize = 5_000;
    let mut from_end = 0;
    loop {
        let entries: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(key)
            .arg(-((from_end + CHUNK) as i64))
            .arg(-(from_end as i64) - 1)
            .query(conn)
            .expect("LRANGE");
        from_end += entries.len();
        if entries.len() < CHUNK {
            return from_end;
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter or `--list` (cargo test --benches) runs nothing.
    if std::env::args().skip(1).any(|a| a != "--bench") {
        return;
    }
    println!("the decision log at {KEEP} entries, best of {ROUNDS} rounds");
    // The floor both reads stand on: the entries' JSON parsed from memory, nothing read.
    let texts: Vec<String> = (0..KEEP)
        .map(|n| serde_json::to_string(&decision(n)).expect("json"))
        .collect();
    let (parse, parsed) = best(|| {
        let all: Vec<LoggedDecision> = texts
            .iter()
            .map(|t| serde_json::from_str(t).expect("parse"))
            .collect();
        std::hint::black_box(all).len()
    });
    assert_eq!(parsed as u64, KEEP);
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "parse    {KEEP} entries' JSON from memory ({} bytes each): {:>7.1} ms",
        bytes / texts.len(),
        ms(parse)
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = SqliteStore::open(dir.path()).expect("open");
    measure("sqlite", &sqlite);

    let server = TestServer::start();
    let mut options = RedisOptions::new(server.url(), "decision-log");
    options.response_timeout = Duration::from_secs(30);
    let redis = RedisStore::connect(&options).expect("connect");
    measure("redis", &redis);
    let key = redis.keys().decisions();
    let mut conn = server.client();
    let (bare, n) = best(|| bare_lrange(&mut conn, &key));
    assert_eq!(n as u64, KEEP);
    println!(
        "redis    bare LRANGE of all {KEEP}, not parsed: {:>7.1} ms",
        ms(bare)
    );
}
