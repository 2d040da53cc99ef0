//! What is particular to the SQLite store: the data directory and the file in it, WAL mode,
//! the schema version guard, and the files it refuses to adopt.

use rebound_runtime::store::schema::CURRENT_VERSION;
use rebound_runtime::store::*;

use rebound_runtime::store::conformance::records::{all_dead_letters, seed_dead_letters};

struct Fixture {
    dir: tempfile::TempDir,
    store: SqliteStore,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    Fixture { dir, store }
}

fn user_version(path: &std::path::Path) -> u32 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn data_dir_is_created_and_wal_mode_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested/rebound-data");
    let store = SqliteStore::open(&data).unwrap();
    assert_eq!(store.path(), data.join("rebound.db"));
    assert_eq!(
        store.location(),
        data.join("rebound.db").display().to_string()
    );
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(user_version(store.path()), CURRENT_VERSION);
}

#[test]
fn reopening_keeps_everything_and_migrates_nothing_twice() {
    let f = fixture();
    seed_dead_letters(&f.store);
    let before = all_dead_letters(&f.store);
    let path = f.store.path().to_owned();
    drop(f.store);
    let store = SqliteStore::open(f.dir.path()).unwrap();
    assert_eq!(
        store
            .dead_letters(&DeadLetterFilter::default())
            .unwrap()
            .items
            .len(),
        5
    );
    assert_eq!(all_dead_letters(&store), before);
    assert_eq!(user_version(&path), CURRENT_VERSION);
}

#[test]
fn database_from_a_newer_schema_version_is_refused_with_both_versions_and_the_file() {
    let f = fixture();
    let path = f.store.path().to_owned();
    drop(f.store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", CURRENT_VERSION + 98)
        .unwrap();
    drop(conn);

    let err = SqliteStore::open(f.dir.path()).unwrap_err();
    match &err {
        StoreError::NewerSchema {
            path: p,
            found,
            supported,
        } => {
            assert_eq!(p, &path);
            assert_eq!(*found, CURRENT_VERSION + 98);
            assert_eq!(*supported, CURRENT_VERSION);
        }
        other => panic!("expected NewerSchema, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(&format!("schema version {}", CURRENT_VERSION + 98)),
        "{text}"
    );
    assert!(text.contains(&format!("up to {CURRENT_VERSION}")), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    // Refusing changed nothing in the file.
    assert_eq!(user_version(&path), CURRENT_VERSION + 98);
}

#[test]
fn a_foreign_sqlite_file_is_refused_not_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("rebound.db")).unwrap();
    conn.execute_batch("CREATE TABLE customers (id INTEGER)")
        .unwrap();
    drop(conn);
    let err = SqliteStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::NotRebound { .. }), "{err}");
    assert!(err.to_string().contains("not a rebound database"));
}

/// The first schema, as a release that wrote version 1 left its files.
const SCHEMA_1: &str = r#"
    CREATE TABLE retries (
        message_id TEXT PRIMARY KEY NOT NULL, biz TEXT NOT NULL, payload BLOB NOT NULL,
        headers TEXT NOT NULL, due_ms INTEGER NOT NULL, attempt INTEGER NOT NULL,
        first_seen_ms INTEGER NOT NULL, last_code TEXT NOT NULL, last_message TEXT NOT NULL,
        last_delay_ms INTEGER NOT NULL, rule TEXT NOT NULL, rule_set_version TEXT NOT NULL
    );
    CREATE TABLE dead_letters (
        id INTEGER PRIMARY KEY, message_id TEXT NOT NULL, biz TEXT NOT NULL,
        payload BLOB NOT NULL, headers TEXT NOT NULL, label TEXT NOT NULL, reason TEXT NOT NULL,
        last_code TEXT NOT NULL, last_message TEXT NOT NULL, attempts INTEGER NOT NULL,
        first_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL, rule TEXT NOT NULL,
        rule_set_version TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'dead' CHECK (status IN ('dead', 'replayed', 'skipped'))
    );
    CREATE UNIQUE INDEX dead_letters_open ON dead_letters (message_id) WHERE status = 'dead';
    CREATE INDEX dead_letters_message ON dead_letters (message_id, id);
    CREATE INDEX dead_letters_label ON dead_letters (label, id);
    CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL,
        action TEXT NOT NULL CHECK (action IN ('replay', 'skip')), message_id TEXT NOT NULL,
        dead_letter_id INTEGER NOT NULL REFERENCES dead_letters (id),
        operator TEXT NOT NULL, reason TEXT NOT NULL
    );
    CREATE INDEX audit_log_message ON audit_log (message_id, id);
    CREATE TABLE fates (
        message_id TEXT PRIMARY KEY NOT NULL, fate INTEGER NOT NULL CHECK (fate IN (1, 2)),
        at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE positions (
        source TEXT PRIMARY KEY NOT NULL, position INTEGER NOT NULL, at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO retries VALUES ('r1', 'ORDER', x'7b7d', '{"trace":"t-r1"}', 5000, 2, 1000,
        'DB_LOCK_WAIT', 'lock wait', 2000, 'db-lock', '00112233aabbccdd');
    INSERT INTO dead_letters (message_id, biz, payload, headers, label, reason, last_code,
        last_message, attempts, first_ms, last_ms, rule, rule_set_version)
        VALUES ('d1', 'PAYMENT', x'7b7d', '{}', 'L2', 'max_retries', 'NET_TIMEOUT', 'timeout',
        6, 1000, 9000, 'defaults', '00112233aabbccdd');
    INSERT INTO fates VALUES ('d1', 2, 9000), ('a1', 1, 8000);
    INSERT INTO positions VALUES ('orders', 7, 8000);
    PRAGMA application_id = 0x52424e44;
    PRAGMA user_version = 1;
"#;

/// A file from the release before dead letters kept their attrs migrates to the current
/// schema on open, and every row it held reads back (with no attrs, offsets or fate offsets,
/// which that release did not write).
#[test]
fn a_schema_1_file_is_migrated_and_its_rows_read_back() {
    use rebound_runtime::fate::{GiveUpReason, RuleRef};
    let dir = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute_batch(SCHEMA_1).unwrap();
    drop(conn);

    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(user_version(store.path()), CURRENT_VERSION);
    let ts = rebound_runtime::time::Timestamp::from_millis;
    let id = MessageId::from;

    assert_eq!(store.scheduled().unwrap(), [(id("r1"), ts(5000))]);
    let retry = &store.retries(&[id("r1")]).unwrap()[0];
    assert_eq!(retry.message.offset, None);
    assert_eq!(retry.message.headers.get("trace"), Some("t-r1"));
    assert_eq!(retry.message.retry.attempt, 2);
    assert_eq!(retry.message.retry.first_delivery, Some(ts(1000)));
    let last = retry.message.retry.last_failure().unwrap();
    assert_eq!(
        (last.code.as_str(), last.rule.as_str()),
        ("DB_LOCK_WAIT", "db-lock")
    );
    assert_eq!(last.version.as_str(), "00112233aabbccdd");
    assert_eq!(last.delay, Some(std::time::Duration::from_millis(2000)));

    let letter = store.dead_letter(&id("d1")).unwrap().unwrap();
    assert_eq!(letter.status, DeadLetterStatus::Dead);
    assert!(letter.letter.failure.attrs.is_empty());
    assert_eq!(letter.letter.reason, GiveUpReason::MaxRetries);
    assert_eq!(letter.letter.rule, RuleRef::Defaults);
    assert_eq!(letter.letter.message.retry.attempt, 6);

    assert_eq!(
        store.known_fates(&[id("a1"), id("d1")]).unwrap(),
        [(id("a1"), Fate::Acked), (id("d1"), Fate::DeadLettered)]
    );
    assert_eq!(store.position("orders").unwrap(), Some(7));
    // An acked fate written without an offset is never pruned by a position.
    let at = ts(9500);
    store
        .apply(&[WriteOp::Position {
            source: "orders".into(),
            position: 100,
            at,
        }])
        .unwrap();
    assert_eq!(store.known_fates(&[id("a1")]).unwrap().len(), 1);
    // And the migrated file takes the new rows.
    let mut attrs = letter.letter.clone();
    attrs.message.id = id("d2");
    attrs
        .failure
        .attrs
        .insert("http_status".into(), "504".into());
    store
        .apply(&[WriteOp::DeadLetter(Box::new(attrs.clone()))])
        .unwrap();
    assert_eq!(store.dead_letter(&id("d2")).unwrap().unwrap().letter, attrs);
}
