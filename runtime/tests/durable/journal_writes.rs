//! The journal as a writer: order kept across batches, a flush waits for the commit, concurrent
//! callers share transactions and a refused write fails only its own caller.

use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::durable::{Journal, JournalOptions};
use rebound_runtime::store::{
    Applied, Fate, ScheduledRetry, SqliteStore, Store, StoreError, WriteOp,
};
use rebound_runtime::time::{TimeSource, Timestamp, TokioTime};
use rebound_runtime::topology::*;

use crate::durable_seams::{failed, fate_of};

#[tokio::test]
async fn the_journal_keeps_order_and_flush_waits_for_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let journal = Journal::spawn(
        store.clone(),
        JournalOptions {
            max_batch: 7,
            ..JournalOptions::default()
        },
    );
    let time = TokioTime::new();
    // A retry, then its ack, then a position: in this order across many small batches.
    for n in 1..=200u64 {
        let mut m = Message::new(format!("m-{n}"), "ORDER", "x");
        m.retry.attempt = 1;
        m.retry.first_delivery = Some(time.wall());
        let due = Timestamp::from_millis(1);
        journal.write_behind(WriteOp::Schedule(ScheduledRetry::new(m, due)));
        journal.write_behind(WriteOp::Acked {
            id: MessageId::from(format!("m-{n}")),
            at: Timestamp::from_millis(2),
            offset: None,
        });
        journal.write_behind(WriteOp::Position {
            source: "src".into(),
            position: n,
            at: Timestamp::from_millis(3),
        });
    }
    journal.flush().await;
    assert_eq!(journal.backlog(), 0);
    assert!(
        store.scheduled().unwrap().is_empty(),
        "every ack came after its retry"
    );
    assert_eq!(store.position("src").unwrap(), Some(200));
    // Positions are coalesced per transaction; everything else counts one for one (a held
    // retry its ack made moot counts as committed: what it would have written is settled).
    let stats = journal.stats();
    assert!(
        stats.committed >= 400 && stats.committed <= 400 + stats.transactions,
        "{stats:?}"
    );
}

/// Formerly the store's group-commit writer (`BatchWriter`, deleted): the journal's
/// wait-for-commit path. Concurrent callers share transactions; a caller whose write the store
/// refuses gets the error alone (the journal splits a failing batch by caller), and every
/// other caller's write is committed once its future completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_commits_concurrent_writes_and_isolates_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let journal = Journal::spawn(store.clone(), JournalOptions::default());
    let retry = |i: u64| {
        let mut m = failed(&format!("m{i:03}"), 1, Duration::from_millis(10));
        m.retry.failures.last_mut().unwrap().at = Timestamp::from_millis(990 + i);
        ScheduledRetry::new(m, Timestamp::from_millis(1_000 + i))
    };
    let mut tasks = Vec::new();
    for i in 0..500 {
        let journal = journal.clone();
        tasks.push(tokio::spawn(async move {
            journal.commit(vec![WriteOp::Schedule(retry(i))]).await
        }));
    }
    let bad = journal
        .commit(vec![WriteOp::Position {
            source: "s".into(),
            position: u64::MAX,
            at: Timestamp::from_millis(1),
        }])
        .await;
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), [Applied::Done]);
    }
    assert!(matches!(bad, Err(StoreError::OutOfRange { .. })), "{bad:?}");
    // Every write is durable once its future completed.
    assert_eq!(store.scheduled().unwrap().len(), 500);
    assert_eq!(
        store.retries(&[MessageId::from("m007")]).unwrap(),
        [retry(7)]
    );
    assert_eq!(store.position("s").unwrap(), None);
    let acked = journal
        .commit(vec![WriteOp::Acked {
            id: MessageId::from("m000"),
            at: Timestamp::from_millis(5),
            offset: None,
        }])
        .await
        .unwrap();
    assert_eq!(acked, [Applied::Done]);
    assert_eq!(fate_of(&store, "m000"), Some(Fate::Acked));
    assert_eq!(store.scheduled().unwrap().len(), 499);
    assert!(journal.failure().is_none());
}
