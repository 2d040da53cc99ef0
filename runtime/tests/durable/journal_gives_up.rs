//! A store that refuses every commit: the journal retries it for its bound, then gives up
//! (`Journal::failed`), commits nothing more and answers every waiter; a shorter outage is
//! ridden out and nothing is lost.
//!
//! The store is made to refuse by another connection holding SQLite's exclusive lock, as a
//! second process on the file would.

use rebound_runtime::durable::{Journal, JournalOptions};
use rebound_runtime::store::{
    Fate, MessageId, SqliteOptions, SqliteStore, Store, Synchronous, WriteOp,
};
use rebound_runtime::time::Timestamp;
use std::sync::Arc;
use std::time::Duration;

fn store(dir: &std::path::Path) -> Arc<SqliteStore> {
    let options = SqliteOptions {
        synchronous: Synchronous::Normal,
        busy_timeout: Duration::from_millis(20),
    };
    Arc::new(SqliteStore::open_with(dir, options).unwrap())
}

/// Another connection that holds the write lock until dropped.
fn exclusive_lock(store: &SqliteStore) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    conn
}

fn acked(id: &str) -> WriteOp {
    WriteOp::Acked {
        id: MessageId::from(id),
        at: Timestamp::from_millis(7),
        offset: None,
    }
}

fn fate_of(store: &SqliteStore, id: &str) -> Option<Fate> {
    let fates = store.known_fates(&[MessageId::from(id)]).unwrap();
    fates.into_iter().next().map(|(_, fate)| fate)
}

fn journal(store: &Arc<SqliteStore>, give_up_after: Duration) -> Journal {
    let options = JournalOptions {
        give_up_after,
        ..JournalOptions::default()
    };
    Journal::spawn(store.clone(), options)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_refuses_every_commit_makes_the_journal_give_up_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let journal = journal(&store, Duration::from_millis(300));
    journal.write_behind(acked("before"));
    journal.flush().await;

    let lock = exclusive_lock(&store);
    journal.write_behind(acked("refused"));
    let failure = tokio::time::timeout(Duration::from_secs(30), journal.failed())
        .await
        .expect("the journal gives up within its bound");
    assert_eq!(failure.location, store.path().display().to_string());
    assert!(failure.cause.contains("locked"), "{failure}");
    assert!(failure.retried >= Duration::from_millis(300));
    assert!(journal.failure().is_some());

    // Nothing more is written, and nobody is left waiting.
    journal.write_behind(acked("after"));
    let waited = journal.commit(vec![acked("waited")]).await;
    assert!(waited.is_err(), "{waited:?}");
    journal.flush().await;
    drop(lock);
    // What was committed before stays committed; nothing after it was.
    assert_eq!(fate_of(&store, "before"), Some(Fate::Acked));
    for id in ["refused", "after", "waited"] {
        assert_eq!(fate_of(&store, id), None, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_shorter_than_the_bound_is_ridden_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let journal = journal(&store, Duration::from_secs(60));
    let lock = exclusive_lock(&store);
    journal.write_behind(acked("a"));
    // A waiter hears of a failed batch after three tries and tries again itself, as the
    // dead-letter writer does; the fire-and-forget write is retried by the journal.
    let writer = {
        let journal = journal.clone();
        tokio::spawn(async move {
            for _ in 0..500 {
                if journal.commit(vec![acked("b")]).await.is_ok() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            false
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(lock);
    assert!(writer.await.unwrap(), "the waiter's write commits");
    journal.flush().await;
    assert!(journal.failure().is_none());
    assert!(journal.stats().failures > 0, "{:?}", journal.stats());
    for id in ["a", "b"] {
        assert_eq!(fate_of(&store, id), Some(Fate::Acked), "{id}");
    }
}
