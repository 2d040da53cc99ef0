//! The store: the [`Store`](rebound_runtime::store::Store) contract as a conformance suite
//! (`conformance/`), run over every implementation, what is particular to SQLite (`sqlite.rs`:
//! the file, its schema version, what it refuses to open) and to the shared store on Redis
//! (`redis_store/`: a model test against SQLite, the claims, races and lost replies).

#[macro_use]
mod conformance;
mod redis_store;
mod sqlite;

use std::path::Path;

use rebound_runtime::store::{SqliteStore, Store};

fn open_sqlite(dir: &Path) -> Box<dyn Store> {
    Box::new(SqliteStore::open(dir).expect("open the SQLite store"))
}

// One line per implementation.
conformance_suite!(sqlite_store, open_sqlite);
conformance_suite!(redis, redis_store::open);
