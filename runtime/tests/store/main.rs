//! The store: the [`Store`](rebound_runtime::store::Store) contract as a conformance suite
//! (feature `conformance`, `runtime/conformance/`) run over SQLite, and what is particular to
//! SQLite (`sqlite.rs`: the file, its schema version, what it refuses to open). The shared
//! store on Redis runs the same suite in its own crate (`store-redis/tests/store/`).

mod sqlite;
mod sqlite_decisions;

use std::path::Path;

use rebound_runtime::store::{SqliteStore, Store};

fn open_sqlite(dir: &Path) -> Box<dyn Store> {
    Box::new(SqliteStore::open(dir).expect("open the SQLite store"))
}

// The suite over SQLite (Redis: `store-redis/tests/store/main.rs`).
rebound_runtime::conformance_suite!(sqlite_store, open_sqlite);
