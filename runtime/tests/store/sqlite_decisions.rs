//! The decision log on SQLite: the table schema 6 adds to a schema 5 file (the rows it held
//! kept), and an entry that no longer parses skipped on read, the rest still read.

use rebound_runtime::store::conformance::records::{
    all_dead_letters, decision_log, log, logged, seed_dead_letters,
};
use rebound_runtime::store::schema::CURRENT_VERSION;
use rebound_runtime::store::*;

/// A file as schema 5 left it: this build's file without the decision log, at version 5.
fn schema_5_file(dir: &std::path::Path) {
    let store = SqliteStore::open(dir).unwrap();
    seed_dead_letters(&store);
    drop(store);
    let conn = rusqlite::Connection::open(dir.join(DB_FILE)).unwrap();
    conn.execute_batch("DROP TABLE decisions; PRAGMA user_version = 5;")
        .unwrap();
}

#[test]
fn a_schema_5_file_gains_the_decision_log_and_keeps_its_rows() {
    assert_eq!(CURRENT_VERSION, 6, "this case migrates 5 → 6");
    let dir = tempfile::tempdir().unwrap();
    schema_5_file(dir.path());
    let store = SqliteStore::open(dir.path()).unwrap();
    let version: u32 = rusqlite::Connection::open(store.path())
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 6);
    assert_eq!(all_dead_letters(&store).len(), 5, "the rows it held");
    assert!(decision_log(&store).is_empty());
    let entries = vec![logged("m1", 1_000), logged("m2", 1_001)];
    store.apply(&[log(entries.clone(), 10)]).unwrap();
    assert_eq!(decision_log(&store), entries);
}

#[test]
fn an_entry_that_does_not_parse_is_skipped_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    store.apply(&[log(vec![logged("m1", 1_000)], 10)]).unwrap();
    // An entry a build with another engine wrote, say.
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute(
        "INSERT INTO decisions (at_ms, entry) VALUES (1001, '{\"id\": 7}')",
        [],
    )
    .unwrap();
    drop(conn);
    store.apply(&[log(vec![logged("m3", 1_002)], 10)]).unwrap();
    assert_eq!(
        decision_log(&store),
        [logged("m1", 1_000), logged("m3", 1_002)]
    );
    // The bad entry is still in the log: the newest two are it and the last one.
    let only_newest = DecisionFilter {
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(
        store.decisions(&only_newest).unwrap(),
        [logged("m3", 1_002)]
    );
}
