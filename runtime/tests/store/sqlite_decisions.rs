//! The decision log on SQLite: a schema 6 file's log (a row per entry) becomes pages (its
//! entries kept, in order), and what no longer reads is skipped, the rest still read: an
//! entry that does not parse, a page that does not unpack.

use rebound_runtime::store::conformance::records::{
    all_dead_letters, decision_log, log, logged, seed_dead_letters,
};
use rebound_runtime::store::schema::CURRENT_VERSION;
use rebound_runtime::store::*;

/// A file as schema 6 left it, with `entries` in its log: this build's file with the
/// version 6 table in place of the pages.
fn schema_6_file(dir: &std::path::Path, entries: &[String]) {
    let store = SqliteStore::open(dir).unwrap();
    seed_dead_letters(&store);
    drop(store);
    let conn = rusqlite::Connection::open(dir.join(DB_FILE)).unwrap();
    conn.execute_batch(
        "DROP TABLE decision_pages;
         CREATE TABLE decisions (seq INTEGER PRIMARY KEY AUTOINCREMENT,
             at_ms INTEGER NOT NULL, entry TEXT NOT NULL);
         CREATE INDEX decisions_at ON decisions (at_ms);
         PRAGMA user_version = 6;",
    )
    .unwrap();
    for (i, entry) in entries.iter().enumerate() {
        conn.execute(
            "INSERT INTO decisions (at_ms, entry) VALUES (?1, ?2)",
            rusqlite::params![1_000 + i as i64, entry],
        )
        .unwrap();
    }
}

fn user_version(store: &SqliteStore) -> u32 {
    rusqlite::Connection::open(store.path())
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_schema_6_log_becomes_pages_and_keeps_its_entries_in_order() {
    assert_eq!(CURRENT_VERSION, 7, "this case migrates 6 → 7");
    let old = [
        logged("m1", 1_000),
        logged("m2", 1_001),
        logged("m3", 1_002),
    ];
    let texts: Vec<String> = old.iter().map(|d| decision_to_json(d).unwrap()).collect();
    let dir = tempfile::tempdir().unwrap();
    schema_6_file(dir.path(), &texts);
    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(user_version(&store), 7);
    assert_eq!(all_dead_letters(&store).len(), 5, "the rows it held");
    assert_eq!(decision_log(&store), old);
    // Appended after them, and trimmed across both kinds of page.
    store.apply(&[log(vec![logged("m4", 1_003)], 2)]).unwrap();
    assert_eq!(
        decision_log(&store),
        [logged("m3", 1_002), logged("m4", 1_003)]
    );
}

#[test]
fn an_entry_that_does_not_parse_is_skipped_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    store.apply(&[log(vec![logged("m1", 1_000)], 10)]).unwrap();
    // An entry a build with another engine wrote, say, in a page of its own as it is.
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute(
        "INSERT INTO decision_pages (first_ms, last_ms, count, through, floor, packing, entries)
         VALUES (1001, 1001, 1, 2, 0, 0, CAST('{\"id\": 7}' || char(10) AS BLOB))",
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

#[test]
fn a_page_that_does_not_unpack_is_skipped_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    store.apply(&[log(vec![logged("m1", 1_000)], 10)]).unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    // A page said to be compressed that is not, and one packed in a way this build lacks.
    conn.execute_batch(
        "INSERT INTO decision_pages (first_ms, last_ms, count, through, floor, packing, entries)
         VALUES (1001, 1001, 1, 2, 0, 1, X'FFFFFFFF00');
         INSERT INTO decision_pages (first_ms, last_ms, count, through, floor, packing, entries)
         VALUES (1001, 1001, 1, 3, 0, 9, X'00');",
    )
    .unwrap();
    drop(conn);
    store.apply(&[log(vec![logged("m4", 1_003)], 10)]).unwrap();
    assert_eq!(
        decision_log(&store),
        [logged("m1", 1_000), logged("m4", 1_003)]
    );
}

#[test]
fn the_stored_pages_are_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let entries: Vec<_> = (0..500)
        .map(|i| logged(&format!("m{i}"), 1_000 + i))
        .collect();
    let text: usize = entries
        .iter()
        .map(|d| decision_to_json(d).unwrap().len() + 1)
        .sum();
    store.apply(&[log(entries.clone(), 1_000)]).unwrap();
    let stored: i64 = rusqlite::Connection::open(store.path())
        .unwrap()
        .query_row("SELECT SUM(LENGTH(entries)) FROM decision_pages", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(
        (stored as usize) * 3 < text,
        "{stored} bytes stored for {text} of text"
    );
    assert_eq!(decision_log(&store), entries);
}
