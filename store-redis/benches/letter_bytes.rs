//! Bytes stored per dead letter, with its message's failure history: 1,000 letters whose
//! message failed 3 times (and, separately, 40 times, and none for comparison) before the
//! failure that ended it, each failure with 2 attrs and a ~40-byte message, each message with
//! a 200-byte payload. Beyond 32 failures a message keeps 32 (the first and the last 16).
//!
//! ```sh
//! cargo bench -p rebound-store-redis --bench letter_bytes
//! ```
//!
//! - **SQLite** (a `SqliteStore` in a temp directory, letters applied 100 to a commit as the
//!   batcher does): the file `rebound.db` after minus before, per letter, with the WAL
//!   checkpointed into it (`wal_checkpoint(TRUNCATE)`), and again after `VACUUM`; both count
//!   everything a letter costs (its row, its indexes, its fate row). "row" is the dead-letter
//!   table's own record (SQLite's `dbstat` payload: header and values, no page overhead, no
//!   index); "failures" is the length of the `failures` JSON text in it.
//! - **Redis** (a `TestServer` of its own): `MEMORY USAGE {NS}:dl:N SAMPLES 0` averaged over
//!   the letters (the letter's hash alone), and `used_memory` after minus before per letter
//!   (every key a letter writes: its hash, its fate, `dl:last:<id>`, its entry in `{NS}:dl`).
#![allow(missing_docs)]

use std::time::Duration;

use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{DB_FILE, DeadLetter, Message, SqliteStore, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord};
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};

const LETTERS: u64 = 1_000;
const BATCH: usize = 100;
const PAYLOAD: usize = 200;

fn version() -> Version {
    Version::from_hash(0x00c0_ffee_0000_0001)
}

/// Letter `n`, whose message failed `failures` times before the failure that ended it.
fn letter(n: u64, failures: u32) -> DeadLetter {
    let id = format!("order-{n:07}");
    let payload = format!("{{\"order\":\"{id}\",\"pad\":\"{}\"}}", "x".repeat(PAYLOAD));
    let payload = payload[..PAYLOAD].to_owned();
    let mut message = Message::new(id, "PAYMENT", payload).with_header("trace", format!("t-{n}"));
    let start = 1_800_000_000_000 + n * 1_000;
    message.retry.first_delivery = Some(Timestamp::from_millis(start));
    for attempt in 1..=failures {
        message.retry.failures.push(FailureRecord {
            attempt,
            at: Timestamp::from_millis(start + u64::from(attempt) * 2_000),
            code: "NET_TIMEOUT".into(),
            message: format!("upstream timed out after 5000 ms (#{attempt:03})"),
            attrs: [
                ("downstream".to_owned(), "payment-gateway".to_owned()),
                ("http_status".to_owned(), "504".to_owned()),
            ]
            .into(),
            rule: RuleRef::Rule("payment-net".into()),
            version: version(),
            delay: Some(Duration::from_millis(1_500)),
        });
    }
    message.retry.attempt = failures + 1;
    DeadLetter {
        message,
        failure: Failure::new("NET_TIMEOUT", "upstream timed out after 5000 ms (last)")
            .with_attr("downstream", "payment-gateway")
            .with_attr("http_status", "504"),
        label: Label::from("L1"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("payment-net".into()),
        version: version(),
        at: Timestamp::from_millis(start + u64::from(failures + 1) * 2_000),
    }
}

fn store_all(store: &dyn Store, failures: u32) {
    let letters: Vec<WriteOp> = (1..=LETTERS)
        .map(|n| WriteOp::DeadLetter(Box::new(letter(n, failures))))
        .collect();
    for batch in letters.chunks(BATCH) {
        store.apply(batch).expect("apply");
    }
}

struct SqliteBytes {
    checkpointed: f64,
    vacuumed: f64,
    row: f64,
    failures_json: f64,
}

/// The file's size in bytes, its WAL checkpointed into it first.
fn file_bytes(conn: &rusqlite::Connection) -> i64 {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    let size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    pages * size
}

fn sqlite(failures: u32) -> SqliteBytes {
    let dir = tempfile::tempdir().expect("temp dir");
    drop(SqliteStore::open(dir.path()).expect("open"));
    let path = dir.path().join(DB_FILE);
    let before = {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let checkpointed = file_bytes(&conn);
        conn.execute_batch("VACUUM").unwrap();
        (checkpointed, file_bytes(&conn))
    };
    {
        let store = SqliteStore::open(dir.path()).expect("open");
        store_all(&store, failures);
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let checkpointed = file_bytes(&conn);
    let row: i64 = conn
        .query_row(
            "SELECT sum(payload) FROM dbstat WHERE name = 'dead_letters'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let failures_json: f64 = conn
        .query_row(
            "SELECT avg(length(CAST(failures AS BLOB))) FROM dead_letters",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute_batch("VACUUM").unwrap();
    let vacuumed = file_bytes(&conn);
    let per = |bytes: i64| bytes as f64 / LETTERS as f64;
    SqliteBytes {
        checkpointed: per(checkpointed - before.0),
        vacuumed: per(vacuumed - before.1),
        row: per(row),
        failures_json,
    }
}

struct RedisBytes {
    hash: f64,
    used: f64,
    encoding: String,
}

fn used_memory(conn: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

fn redis(server: &TestServer, failures: u32) -> RedisBytes {
    let ns = format!("bytes-{failures}");
    let mut options = RedisOptions::new(server.url(), ns.as_str());
    options.response_timeout = Duration::from_secs(10);
    let store = RedisStore::connect(&options).expect("connect");
    let mut conn = server.client();
    // One letter first (the scripts loaded, the connection warm), then the namespace emptied:
    // the letters counted are 1..=LETTERS.
    store
        .apply(&[WriteOp::DeadLetter(Box::new(letter(0, failures)))])
        .expect("apply");
    let warm: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{ns}}}:*"))
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("DEL").arg(&warm).query(&mut conn).unwrap();
    let before = used_memory(&mut conn);
    store_all(&store, failures);
    let after = used_memory(&mut conn);
    let mut hash = 0i64;
    for n in 1..=LETTERS {
        let bytes: Option<i64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(store.keys().key(&format!("dl:{n}")))
            .arg("SAMPLES")
            .arg(0)
            .query(&mut conn)
            .unwrap();
        hash += bytes.unwrap_or_else(|| panic!("no dead letter {n}"));
    }
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(store.keys().key("dl:1"))
        .query(&mut conn)
        .unwrap();
    RedisBytes {
        hash: hash as f64 / LETTERS as f64,
        used: (after - before) as f64 / LETTERS as f64,
        encoding,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter or `--list` (cargo test --benches) runs nothing.
    if std::env::args().skip(1).any(|a| a != "--bench") {
        return;
    }
    let server = TestServer::start();
    println!(
        "bytes per dead letter, {LETTERS} letters, {PAYLOAD}-byte payload, 2 attrs and a ~40-byte \
         message per failure"
    );
    println!(
        "failures  sqlite file sqlite vacuum sqlite row failures json  redis hash redis used  (hash encoding)"
    );
    // 0: a letter without a history, for comparison.
    for failures in [0, 3, 40] {
        let s = sqlite(failures);
        let r = redis(&server, failures);
        println!(
            "{failures:>8}  {:>11.0} {:>13.0} {:>10.0} {:>13.0}  {:>10.0} {:>10.0}  {}",
            s.checkpointed, s.vacuumed, s.row, s.failures_json, r.hash, r.used, r.encoding
        );
    }
    println!(
        "sqlite file: rebound.db after - before (WAL checkpointed), per letter; sqlite vacuum: \
         the same after VACUUM; sqlite row: the dead_letters record (dbstat payload); failures \
         json: the failures JSON text in it; redis hash: MEMORY USAGE of {{NS}}:dl:N; redis used: \
         used_memory after - before, per letter"
    );
}
