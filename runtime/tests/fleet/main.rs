//! The fleet's records on the shared store, through the public API of
//! [`RedisStore`](rebound_runtime::store::redis::RedisStore): nodes joining, heartbeating and
//! taken over; source partitions balanced by lease with fencing epochs; the bundled run's
//! parameters; the rule set of record, its history and its hints; the shared effect set.
//! Each test starts a `redis-server` of its own (never the machine's) and uses short leases.

mod effects;
mod nodes;
mod partitions;
mod run;

use std::time::{Duration, Instant};

use rebound_runtime::store::redis::{RedisOptions, RedisStore, TestServer};

/// A store on `server`, namespace `ns`.
fn store(server: &TestServer, ns: &str) -> RedisStore {
    RedisStore::connect(&RedisOptions::new(server.url(), ns)).expect("connect to the test server")
}

/// Polls `f` every 20 ms until it is true or `within` has passed; true if it became true.
fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
