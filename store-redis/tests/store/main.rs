//! The shared store on Redis as a [`Store`]: the runtime's conformance suite (the same cases as
//! SQLite's, `rebound_runtime::store::conformance`) over a namespace per directory on one
//! redis-server of this test binary; then what is particular to it: a model test against
//! SQLite, the claims, a claim race across processes, and lost replies (the timing against
//! SQLite is the pipeline bench's: `runtime/benches/pipeline/redis.rs`).
//!
//! Every case uses a `redis-server` started by [`TestServer`] (never the machine's own
//! Redis) and a namespace of its own. A missing `redis-server` fails the cases, naming it.

use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rebound_runtime::store::Store;
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};

// The conformance suite, one line: the same cases as SQLite's.
rebound_runtime::conformance_suite!(redis, open);

mod batches;
mod claim_race;
mod claims;
mod decision_log;
mod lost_replies;
mod model;
mod positions;
mod proxy;

/// The one redis-server of this test binary; its cases keep apart by namespace.
pub fn server() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(TestServer::start)
}

/// A store on `url` in namespace `ns`.
pub fn connect(url: &str, ns: &str) -> RedisStore {
    let mut options = RedisOptions::new(url, ns);
    options.response_timeout = Duration::from_secs(10);
    RedisStore::connect(&options).unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// A namespace no other case uses: `<what>-<n>`.
pub fn fresh_namespace(what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{what}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A store on this binary's server in a fresh namespace.
pub fn fresh_store(what: &str) -> RedisStore {
    connect(&server().url(), &fresh_namespace(what))
}

/// The conformance suite's factory: the directory names the namespace, so opening the same
/// directory again gives back the same data.
pub fn open(dir: &Path) -> Box<dyn Store> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .expect("a directory with a name");
    Box::new(connect(&server().url(), &format!("conformance-{name}")))
}
