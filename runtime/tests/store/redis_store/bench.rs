//! A timing, not a test of behaviour (ignored by default): 10,000 retries scheduled in
//! batches of 500 ops, as the journal writes them, on SQLite and on Redis in the same run,
//! and then claimed from Redis 64 at a time, as a node's claimer takes them, on a server of its
//! own (`appendfsync always`, as the shared store needs), whose own count of the time it spent
//! in the scripts is printed beside. Run it with
//!
//! ```text
//! cargo test -p rebound-runtime --test store -- --ignored --nocapture ten_thousand
//! ```

use std::time::{Duration, Instant};

use rebound_runtime::store::*;

use rebound_runtime::store::redis::TestServer;

use super::connect;
use crate::conformance::records::*;

#[test]
#[ignore = "a timing: run it with --ignored --nocapture"]
fn ten_thousand_schedules_and_claims_timed_against_sqlite() {
    const N: u64 = 10_000;
    let ops: Vec<WriteOp> = (0..N)
        .map(|i| schedule(retry(&format!("bench-{i:05}"), 1_000 + i)))
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path()).unwrap();
    let started = Instant::now();
    for batch in ops.chunks(500) {
        sqlite.apply(batch).unwrap();
    }
    let on_sqlite = started.elapsed();

    let server = TestServer::start();
    let redis = connect(&server.url(), "bench");
    let trips = redis.round_trips();
    let started = Instant::now();
    for batch in ops.chunks(500) {
        redis.apply(batch).unwrap();
    }
    let on_redis = started.elapsed();
    let schedule_trips = redis.round_trips() - trips;

    let started = Instant::now();
    let mut claimed = 0;
    loop {
        let c = redis.claim("bench", 64, Duration::from_secs(60)).unwrap();
        if c.retries.is_empty() {
            break;
        }
        claimed += c.retries.len();
    }
    let claiming = started.elapsed();
    assert_eq!(claimed as u64, N);
    let stats: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client())
        .unwrap();
    let in_scripts = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|kv| kv.strip_prefix("usec=")))
        .and_then(|us| us.parse().ok())
        .map(Duration::from_micros)
        .expect("the server's time in EVALSHA");
    let ratio = on_redis.as_secs_f64() / on_sqlite.as_secs_f64();
    println!(
        "{N} schedules in batches of 500: SQLite {on_sqlite:?}, Redis {on_redis:?} \
         ({schedule_trips} round trips), Redis/SQLite {ratio:.2}; claimed 64 at a time in \
         {claiming:?} ({} claims); the server ran scripts for {in_scripts:?} of it all",
        N.div_ceil(64) + 1
    );
}
