//! The SQLite store as its users see it: recovery into the scheduler, dead-letter listing,
//! replay and skip with the audit log, one fate per message, source positions, the schema
//! version guard, and the group-commit writer.

use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::clock::{Clock, ManualClock, SharedClock, Timestamp};
use rebound_runtime::scheduler::RetryScheduler;
use rebound_runtime::store::schema::CURRENT_VERSION;
use rebound_runtime::store::*;

fn ms(t: u64) -> Timestamp {
    Timestamp::from_millis(t)
}

struct Fixture {
    dir: tempfile::TempDir,
    clock: ManualClock,
    store: SqliteStore,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(ms(1_000_000));
    let store = SqliteStore::open(dir.path(), Arc::new(clock.clone())).unwrap();
    Fixture { dir, clock, store }
}

fn message(id: &str, biz: &str) -> Message {
    Message {
        id: MessageId(id.into()),
        biz: biz.into(),
        payload: format!("{{\"order\":\"{id}\"}}").into_bytes(),
        headers: [("trace".to_string(), format!("t-{id}"))].into(),
    }
}

fn retry(id: &str, due: u64) -> ScheduledRetry {
    ScheduledRetry {
        message: message(id, "ORDER"),
        due: ms(due),
        meta: RetryMeta {
            attempt: 2,
            first_seen: ms(500_000),
            last_code: "DB_LOCK_WAIT".into(),
            last_message: "lock wait".into(),
            last_delay: Duration::from_millis(2_000),
            rule: RuleId("db-lock".into()),
            rule_set_version: RuleSetVersion("v1".into()),
        },
    }
}

fn letter(id: &str, biz: &str, label: &str, code: &str, at: u64) -> DeadLetter {
    DeadLetter {
        message: message(id, biz),
        label: label.into(),
        reason: "max_retries".into(),
        last_code: code.into(),
        last_message: format!("{code} again"),
        attempts: 4,
        first_time: ms(at.saturating_sub(100)),
        last_time: ms(at),
        rule: RuleId("some-rule".into()),
        rule_set_version: RuleSetVersion("v1".into()),
    }
}

fn mid(s: &str) -> MessageId {
    MessageId(s.into())
}

// ---- recovery --------------------------------------------------------------------------

#[test]
fn recovery_restores_every_retry_with_its_original_due_time_and_overdue_ones_fire_at_once() {
    let f = fixture();
    f.store
        .schedule_retries(&[
            retry("a", 1_000_500),
            retry("b", 2_000_000),
            retry("c", 1_000_100),
        ])
        .unwrap();
    let written = f.store.retries(&[mid("a")]).unwrap();
    drop(f.store);

    // Restart later: "a" and "c" came due while the process was down.
    f.clock.set(ms(1_500_000));
    let clock: SharedClock = Arc::new(f.clock.clone());
    let store = SqliteStore::open(f.dir.path(), clock.clone()).unwrap();
    let mut scheduler = RetryScheduler::new(clock);
    assert_eq!(recover(&store, &mut scheduler).unwrap(), 3);

    let due: Vec<_> = scheduler.drain_due(f.clock.now(), 100);
    let due: Vec<_> = due.iter().map(|e| (e.id.0.as_str(), e.due)).collect();
    assert_eq!(due, [("c", ms(1_000_100)), ("a", ms(1_000_500))]);
    assert_eq!(scheduler.due_of("b"), Some(ms(2_000_000)));
    // The payload and metadata come back byte for byte.
    assert_eq!(store.retries(&[mid("a")]).unwrap(), written);
}

#[tokio::test(start_paused = true)]
async fn recovered_overdue_retry_is_returned_by_next_due_without_waiting() {
    let f = fixture();
    f.store.schedule_retries(&[retry("x", 10)]).unwrap();
    let clock: SharedClock = Arc::new(f.clock.clone());
    let mut scheduler = RetryScheduler::new(clock);
    recover(&f.store, &mut scheduler).unwrap();
    let e = tokio::time::timeout(Duration::from_secs(1), scheduler.next_due())
        .await
        .expect("an overdue retry fires at once");
    assert_eq!((e.id, e.due), (mid("x"), ms(10)));
}

#[test]
fn retry_row_lives_until_the_fate_is_recorded() {
    let f = fixture();
    f.store
        .schedule_retries(&[retry("a", 5), retry("b", 6)])
        .unwrap();
    // Rescheduling replaces, never duplicates.
    f.store.schedule_retries(&[retry("a", 7)]).unwrap();
    assert_eq!(
        f.store.scheduled().unwrap(),
        [(mid("b"), ms(6)), (mid("a"), ms(7))]
    );
    f.store.record_acked(&[mid("a")], ms(8)).unwrap();
    f.store
        .record_dead_letters(&[letter("b", "ORDER", "L1", "X", 9)])
        .unwrap();
    assert!(f.store.scheduled().unwrap().is_empty());
}

// ---- one fate per message ----------------------------------------------------------------

#[test]
fn first_fate_wins_and_a_second_fate_is_reported_not_written() {
    let f = fixture();
    assert_eq!(
        f.store.record_acked(&[mid("m1")], ms(1)).unwrap(),
        [Applied::Done]
    );
    let applied = f
        .store
        .record_dead_letters(&[
            letter("m1", "ORDER", "L1", "X", 2),
            letter("m2", "ORDER", "L1", "X", 2),
        ])
        .unwrap();
    assert_eq!(
        applied,
        [Applied::FateAlreadyKnown(Fate::Acked), Applied::Done]
    );
    assert!(
        f.store.dead_letter(&mid("m1")).unwrap().is_none(),
        "never both"
    );
    assert_eq!(
        f.store.record_acked(&[mid("m2")], ms(3)).unwrap(),
        [Applied::FateAlreadyKnown(Fate::DeadLettered)]
    );
    let fates = f
        .store
        .known_fates(&[mid("m1"), mid("m2"), mid("m3")])
        .unwrap();
    assert_eq!(
        fates,
        [(mid("m1"), Fate::Acked), (mid("m2"), Fate::DeadLettered)]
    );
    assert_eq!(f.store.fate_of(&mid("m3")).unwrap(), None);
    // Nor can a message with a fate be scheduled again (it could end with a second fate).
    assert_eq!(
        f.store
            .schedule_retries(&[retry("m1", 5), retry("m3", 5)])
            .unwrap(),
        [Applied::FateAlreadyKnown(Fate::Acked), Applied::Done]
    );
    assert_eq!(f.store.scheduled().unwrap(), [(mid("m3"), ms(5))]);
}

#[test]
fn pruning_forgets_old_acks_but_keeps_dead_letter_fates() {
    let f = fixture();
    f.store
        .record_acked(&[mid("old"), mid("older")], ms(10))
        .unwrap();
    f.store.record_acked(&[mid("new")], ms(20)).unwrap();
    f.store
        .record_dead_letters(&[letter("dead", "ORDER", "L1", "X", 5)])
        .unwrap();
    assert_eq!(f.store.prune_acked(ms(15)).unwrap(), 2);
    let fates = f
        .store
        .known_fates(&[mid("old"), mid("new"), mid("dead")])
        .unwrap();
    assert_eq!(
        fates,
        [(mid("new"), Fate::Acked), (mid("dead"), Fate::DeadLettered)]
    );
}

#[test]
fn apply_runs_mixed_ops_in_order_in_one_transaction() {
    let f = fixture();
    let ops = [
        WriteOp::Schedule(retry("a", 50)),
        WriteOp::Unschedule(mid("a")),
        WriteOp::Schedule(retry("a", 60)),
        WriteOp::Schedule(retry("b", 70)),
        WriteOp::Acked(mid("b"), ms(71)),
        WriteOp::Position {
            source: "orders".into(),
            position: 42,
        },
    ];
    let applied = f.store.apply(&ops).unwrap();
    assert!(applied.iter().all(|a| *a == Applied::Done));
    assert_eq!(f.store.scheduled().unwrap(), [(mid("a"), ms(60))]);
    assert_eq!(f.store.position("orders").unwrap(), Some(42));

    // A failing op rolls the whole batch back.
    let bad = [
        WriteOp::Schedule(retry("c", 80)),
        WriteOp::Position {
            source: "orders".into(),
            position: u64::MAX,
        },
    ];
    let err = f.store.apply(&bad).unwrap_err();
    assert!(matches!(err, StoreError::OutOfRange { .. }), "{err}");
    assert_eq!(f.store.scheduled().unwrap(), [(mid("a"), ms(60))]);
    assert_eq!(f.store.position("orders").unwrap(), Some(42));
}

#[test]
fn positions_are_kept_per_source() {
    let f = fixture();
    assert_eq!(f.store.position("orders").unwrap(), None);
    f.store.commit_position("orders", 10).unwrap();
    f.store.commit_position("orders", 11).unwrap();
    f.store.commit_position("payments", 3).unwrap();
    assert_eq!(f.store.position("orders").unwrap(), Some(11));
    assert_eq!(f.store.position("payments").unwrap(), Some(3));
}

// ---- dead letters ------------------------------------------------------------------------

fn seed_dead_letters(store: &SqliteStore) {
    store
        .record_dead_letters(&[
            letter("o1", "ORDER", "L1", "BAD_JSON", 100),
            letter("o2", "ORDER", "L2", "DB_LOCK_WAIT", 200),
            letter("p1", "PAYMENT", "L1", "PAY_PROCESSING", 300),
            letter("p2", "PAYMENT", "L3", "BAD_JSON", 400),
            letter("i1", "INVENTORY", "L1", "BAD_JSON", 500),
        ])
        .unwrap();
}

fn ids(page: &Page<StoredDeadLetter, DeadLetterId>) -> Vec<&str> {
    page.items
        .iter()
        .map(|d| d.letter.message.id.0.as_str())
        .collect()
}

#[test]
fn dead_letters_filter_by_label_biz_code_and_time_newest_first() {
    let f = fixture();
    seed_dead_letters(&f.store);
    let all = f.store.dead_letters(&DeadLetterFilter::default()).unwrap();
    assert_eq!(ids(&all), ["i1", "p2", "p1", "o2", "o1"]);
    assert_eq!(all.next, None);

    let by = |filter: DeadLetterFilter| f.store.dead_letters(&filter).unwrap();
    let l1 = by(DeadLetterFilter {
        label: Some("L1".into()),
        ..Default::default()
    });
    assert_eq!(ids(&l1), ["i1", "p1", "o1"]);
    let payment_bad_json = by(DeadLetterFilter {
        biz: Some("PAYMENT".into()),
        code: Some("BAD_JSON".into()),
        ..Default::default()
    });
    assert_eq!(ids(&payment_bad_json), ["p2"]);
    let window = by(DeadLetterFilter {
        since: Some(ms(200)),
        until: Some(ms(400)),
        ..Default::default()
    });
    assert_eq!(ids(&window), ["p1", "o2"]);

    // Every field comes back as written.
    let o2 = &window.items[1];
    assert_eq!(o2.letter, letter("o2", "ORDER", "L2", "DB_LOCK_WAIT", 200));
    assert_eq!(o2.status, DeadLetterStatus::Dead);
}

#[test]
fn dead_letters_page_with_a_cursor() {
    let f = fixture();
    seed_dead_letters(&f.store);
    let mut filter = DeadLetterFilter {
        limit: 2,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = f.store.dead_letters(&filter).unwrap();
        seen.extend(ids(&page).into_iter().map(String::from));
        match page.next {
            Some(cursor) => filter.before = Some(cursor),
            None => break,
        }
    }
    assert_eq!(seen, ["i1", "p2", "p1", "o2", "o1"]);
}

#[test]
fn replay_makes_a_fresh_delivery_keeps_history_and_is_audited() {
    let f = fixture();
    seed_dead_letters(&f.store);
    f.clock.set(ms(2_000_000));
    let fresh = f
        .store
        .replay(&mid("p1"), "  alice ", " gateway fixed ")
        .unwrap();
    assert_eq!(fresh.message, message("p1", "PAYMENT"));
    assert_eq!(fresh.due, ms(2_000_000));
    assert_eq!(fresh.meta.attempt, 0);
    assert_eq!(fresh.meta.first_seen, ms(2_000_000));
    // It is scheduled (so a restart would still deliver it) and no longer has a fate.
    assert_eq!(f.store.scheduled().unwrap(), [(mid("p1"), ms(2_000_000))]);
    assert_eq!(f.store.fate_of(&mid("p1")).unwrap(), None);
    let dl = f.store.dead_letter(&mid("p1")).unwrap().unwrap();
    assert_eq!(dl.status, DeadLetterStatus::Replayed);
    assert_eq!(
        dl.letter,
        letter("p1", "PAYMENT", "L1", "PAY_PROCESSING", 300)
    );

    let audit = f.store.audit_log(&AuditFilter::default()).unwrap();
    assert_eq!(audit.items.len(), 1);
    let entry = &audit.items[0];
    assert_eq!(entry.action, AuditAction::Replay);
    assert_eq!(entry.message_id, mid("p1"));
    assert_eq!(entry.dead_letter, dl.id);
    assert_eq!(
        (entry.operator.as_str(), entry.reason.as_str()),
        ("alice", "gateway fixed")
    );
    assert_eq!(entry.at, ms(2_000_000));

    // A second replay has nothing to replay.
    let err = f.store.replay(&mid("p1"), "alice", "again").unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AlreadyHandled {
                status: DeadLetterStatus::Replayed,
                ..
            }
        ),
        "{err}"
    );

    // The new delivery fails again: a second dead letter, the first one kept as history.
    f.store
        .record_dead_letters(&[letter("p1", "PAYMENT", "L2", "NET_TIMEOUT", 2_000_100)])
        .unwrap();
    let history = f
        .store
        .dead_letters(&DeadLetterFilter {
            biz: Some("PAYMENT".into()),
            ..Default::default()
        })
        .unwrap();
    let statuses: Vec<_> = history
        .items
        .iter()
        .filter(|d| d.letter.message.id == mid("p1"))
        .map(|d| d.status)
        .collect();
    assert_eq!(
        statuses,
        [DeadLetterStatus::Dead, DeadLetterStatus::Replayed]
    );
    assert_eq!(
        f.store.fate_of(&mid("p1")).unwrap(),
        Some(Fate::DeadLettered)
    );
}

#[test]
fn replayed_message_acked_afterwards_takes_the_new_fate() {
    let f = fixture();
    seed_dead_letters(&f.store);
    f.store
        .replay(&mid("o1"), "bob", "retry after deploy")
        .unwrap();
    assert_eq!(
        f.store.record_acked(&[mid("o1")], ms(9)).unwrap(),
        [Applied::Done]
    );
    assert_eq!(f.store.fate_of(&mid("o1")).unwrap(), Some(Fate::Acked));
    assert!(f.store.scheduled().unwrap().is_empty());
}

#[test]
fn skip_marks_handled_keeps_the_fate_and_is_audited() {
    let f = fixture();
    seed_dead_letters(&f.store);
    let skipped = f
        .store
        .skip(&mid("o2"), "carol", "duplicate order")
        .unwrap();
    assert_eq!(skipped.status, DeadLetterStatus::Skipped);
    assert_eq!(
        f.store.fate_of(&mid("o2")).unwrap(),
        Some(Fate::DeadLettered)
    );
    let open = f
        .store
        .dead_letters(&DeadLetterFilter {
            status: Some(DeadLetterStatus::Dead),
            ..Default::default()
        })
        .unwrap();
    assert!(!ids(&open).contains(&"o2"));
    let audit = f
        .store
        .audit_log(&AuditFilter {
            message_id: Some(mid("o2")),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(audit.items.len(), 1);
    assert_eq!(audit.items[0].action, AuditAction::Skip);
    assert_eq!(audit.items[0].operator, "carol");
    let err = f
        .store
        .replay(&mid("o2"), "carol", "changed my mind")
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::AlreadyHandled {
            status: DeadLetterStatus::Skipped,
            ..
        }
    ));
}

#[test]
fn blank_operator_or_reason_is_refused_and_changes_nothing() {
    let f = fixture();
    seed_dead_letters(&f.store);
    for (operator, reason, field) in [
        ("", "because", "operator"),
        ("   ", "because", "operator"),
        ("dave", "", "reason"),
        ("dave", "\t\n", "reason"),
    ] {
        let err = f.store.replay(&mid("o1"), operator, reason).unwrap_err();
        assert!(
            matches!(err, StoreError::Blank { field: f } if f == field),
            "{err}"
        );
        assert!(err.to_string().contains(field));
        let err = f.store.skip(&mid("o1"), operator, reason).unwrap_err();
        assert!(
            matches!(err, StoreError::Blank { field: f } if f == field),
            "{err}"
        );
    }
    assert_eq!(
        f.store.dead_letter(&mid("o1")).unwrap().unwrap().status,
        DeadLetterStatus::Dead
    );
    assert!(
        f.store
            .audit_log(&AuditFilter::default())
            .unwrap()
            .items
            .is_empty()
    );
    assert!(f.store.scheduled().unwrap().is_empty());
}

#[test]
fn unknown_dead_letter_is_a_clear_not_found() {
    let f = fixture();
    let err = f.store.replay(&mid("nope"), "erin", "why not").unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(ref id) if *id == mid("nope")));
    assert_eq!(err.to_string(), "no dead letter for message nope");
    let err = f.store.skip(&mid("nope"), "erin", "why not").unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(_)));
}

#[test]
fn audit_log_pages_newest_first() {
    let f = fixture();
    seed_dead_letters(&f.store);
    for id in ["o1", "o2", "p1"] {
        f.store.skip(&mid(id), "ops", "noise").unwrap();
    }
    let first = f
        .store
        .audit_log(&AuditFilter {
            limit: 2,
            ..Default::default()
        })
        .unwrap();
    let order: Vec<_> = first.items.iter().map(|e| e.message_id.0.clone()).collect();
    assert_eq!(order, ["p1", "o2"]);
    let second = f
        .store
        .audit_log(&AuditFilter {
            before: first.next,
            limit: 2,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(second.items.len(), 1);
    assert_eq!(second.items[0].message_id, mid("o1"));
    assert_eq!(second.next, None);
}

// ---- the file and its schema -------------------------------------------------------------

#[test]
fn data_dir_is_created_and_wal_mode_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested/rebound-data");
    let clock: SharedClock = Arc::new(ManualClock::new(ms(0)));
    let store = SqliteStore::open(&data, clock).unwrap();
    assert_eq!(store.path(), data.join("rebound.db"));
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, CURRENT_VERSION);
}

#[test]
fn reopening_keeps_everything_and_migrates_nothing_twice() {
    let f = fixture();
    seed_dead_letters(&f.store);
    drop(f.store);
    let store = SqliteStore::open(f.dir.path(), Arc::new(f.clock.clone())).unwrap();
    assert_eq!(
        store
            .dead_letters(&DeadLetterFilter::default())
            .unwrap()
            .items
            .len(),
        5
    );
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

    let err = SqliteStore::open(f.dir.path(), Arc::new(f.clock.clone())).unwrap_err();
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
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, CURRENT_VERSION + 98);
}

#[test]
fn a_foreign_sqlite_file_is_refused_not_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("rebound.db")).unwrap();
    conn.execute_batch("CREATE TABLE customers (id INTEGER)")
        .unwrap();
    drop(conn);
    let err = SqliteStore::open(dir.path(), Arc::new(ManualClock::new(ms(0)))).unwrap_err();
    assert!(matches!(err, StoreError::NotRebound { .. }), "{err}");
    assert!(err.to_string().contains("not a rebound database"));
}

// ---- the group-commit writer -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_writer_commits_concurrent_writes_and_isolates_a_bad_one() {
    let f = fixture();
    let store: Arc<dyn Store> = Arc::new(f.store);
    let writer = Arc::new(BatchWriter::spawn(
        store.clone(),
        BatchWriterOptions::default(),
    ));
    let mut tasks = Vec::new();
    for i in 0..500 {
        let writer = writer.clone();
        tasks.push(tokio::spawn(async move {
            writer
                .write(WriteOp::Schedule(retry(&format!("m{i:03}"), 1_000 + i)))
                .await
        }));
    }
    let bad = writer
        .write(WriteOp::Position {
            source: "s".into(),
            position: u64::MAX,
        })
        .await;
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), Applied::Done);
    }
    assert!(matches!(bad, Err(StoreError::OutOfRange { .. })));
    // Every write is durable once its future completed.
    assert_eq!(store.scheduled().unwrap().len(), 500);
    let acked = writer
        .write(WriteOp::Acked(mid("m000"), ms(5)))
        .await
        .unwrap();
    assert_eq!(acked, Applied::Done);
    assert_eq!(store.fate_of(&mid("m000")).unwrap(), Some(Fate::Acked));
    assert_eq!(store.scheduled().unwrap().len(), 499);
}
