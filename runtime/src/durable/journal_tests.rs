//! Unit tests of the journal's batching and commits.

use super::*;
use crate::clock::{Timestamp, WallClock};
use crate::store::{
    DeadLetter, Fate, Message, RetryMeta, RuleId, RuleSetVersion, ScheduledRetry, SqliteStore,
};

fn message(id: &str) -> Message {
    Message {
        id: MessageId(id.into()),
        biz: "ORDER".into(),
        payload: b"{}".to_vec(),
        headers: Default::default(),
    }
}

fn schedule(id: &str, attempt: u32) -> WriteOp {
    WriteOp::Schedule(ScheduledRetry {
        message: message(id),
        due: Timestamp::from_millis(1_000 * u64::from(attempt)),
        meta: RetryMeta {
            attempt,
            first_seen: Timestamp::from_millis(1),
            last_code: "DB_LOCK_WAIT".into(),
            last_message: "locked".into(),
            last_delay: Duration::from_millis(100),
            rule: RuleId("db-lock".into()),
            rule_set_version: RuleSetVersion("0123456789abcdef".into()),
        },
    })
}

fn dead_letter(id: &str) -> WriteOp {
    WriteOp::DeadLetter(DeadLetter {
        message: message(id),
        label: "L1".into(),
        reason: "max_retries".into(),
        last_code: "DB_LOCK_WAIT".into(),
        last_message: "locked".into(),
        attempts: 4,
        first_time: Timestamp::from_millis(1),
        last_time: Timestamp::from_millis(9),
        rule: RuleId("db-lock".into()),
        rule_set_version: RuleSetVersion("0123456789abcdef".into()),
    })
}

fn acked(id: &str) -> WriteOp {
    WriteOp::Acked(MessageId(id.into()), Timestamp::from_millis(5))
}

fn id(s: &str) -> MessageId {
    MessageId(s.into())
}

/// The ids with a retry row, in due order.
fn scheduled(store: &SqliteStore) -> Vec<MessageId> {
    let rows = store.scheduled().unwrap();
    rows.into_iter().map(|(id, _)| id).collect()
}

/// Holds queued retries until a flush, so that what is moot does not depend on timing.
fn holding_until_a_flush() -> JournalOptions {
    JournalOptions {
        hold: Duration::from_secs(3600),
        ..JournalOptions::default()
    }
}

/// One batch: `a` retried twice then acked, `b` retried then dead-lettered by a waiter,
/// `c` retried and still waiting, `d` retried then unscheduled.
fn mixed_batch() -> (Batch, Held, oneshot::Receiver<Result<Vec<Applied>>>) {
    let (done, committed) = oneshot::channel();
    let mut batch = Batch::default();
    let mut held = Held::default();
    for op in [schedule("a", 1), schedule("b", 1), schedule("a", 2)] {
        batch.add(Entry::Op(op), &mut held);
    }
    batch.add(Entry::Wait(vec![dead_letter("b")], done), &mut held);
    for op in [
        schedule("c", 1),
        acked("a"),
        schedule("d", 1),
        WriteOp::Unschedule(id("d")),
    ] {
        batch.add(Entry::Op(op), &mut held);
    }
    (batch, held, committed)
}

fn kinds(ops: &[WriteOp]) -> Vec<String> {
    ops.iter()
        .map(|op| match op {
            WriteOp::Schedule(s) => format!("schedule {} #{}", s.message.id, s.meta.attempt),
            WriteOp::DeadLetter(d) => format!("dead letter {}", d.message.id),
            WriteOp::Acked(id, _) => format!("acked {id}"),
            WriteOp::Unschedule(id) => format!("unschedule {id}"),
            WriteOp::Position { .. } => "position".into(),
        })
        .collect()
}

#[test]
fn a_held_retry_settled_before_it_is_written_is_never_written() {
    let (mut batch, mut held, _committed) = mixed_batch();
    assert_eq!(
        kinds(&batch.ops),
        ["dead letter b", "acked a", "unschedule d"]
    );
    assert_eq!(batch.loose, [1, 2]);
    assert_eq!(batch.waiters[0].0, 0..1);
    // a#1 (replaced), a#2, b and d (settled) are moot; c is still held.
    assert_eq!(batch.moot, 4);
    assert_eq!(held.len(), 1);
    batch.release(held.all());
    assert_eq!(
        kinds(&batch.ops),
        ["dead letter b", "acked a", "unschedule d", "schedule c #1"]
    );
    assert_eq!(batch.counted, 4);
}

#[test]
fn the_store_ends_as_if_every_write_had_been_applied() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), Arc::new(WallClock::real())).unwrap();
    let counters = Counters::default();
    let (mut batch, mut held, mut committed) = mixed_batch();
    batch.release(held.all());
    commit(&store, &mut batch, Duration::from_secs(30), &counters).unwrap();

    // The waiter hears about its own write, and only that.
    let applied = committed.try_recv().unwrap().unwrap();
    assert_eq!(applied, [Applied::Done]);
    assert_eq!(counters.committed.load(Relaxed), 4);

    assert_eq!(store.fate_of(&id("a")).unwrap(), Some(Fate::Acked));
    assert_eq!(store.fate_of(&id("b")).unwrap(), Some(Fate::DeadLettered));
    assert_eq!(store.fate_of(&id("c")).unwrap(), None);
    assert_eq!(store.fate_of(&id("d")).unwrap(), None);
    assert_eq!(scheduled(&store), [id("c")]);
}

#[test]
fn a_later_schedule_replaces_the_held_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), Arc::new(WallClock::real())).unwrap();
    let mut batch = Batch::default();
    let mut held = Held::default();
    for op in [schedule("a", 1), schedule("a", 2), schedule("a", 3)] {
        batch.add(Entry::Op(op), &mut held);
    }
    assert_eq!(batch.moot, 2);
    batch.release(held.all());
    commit(
        &store,
        &mut batch,
        Duration::from_secs(30),
        &Counters::default(),
    )
    .unwrap();
    let rows = store.retries(&[id("a")]).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].meta.attempt, 3);
}

#[tokio::test]
async fn a_flush_writes_the_retries_it_was_holding() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path(), Arc::new(WallClock::real())).unwrap());
    let journal = Journal::spawn(store.clone(), holding_until_a_flush());
    journal.submit(schedule("kept", 1));
    journal.submit(schedule("settled", 1));
    journal.submit(acked("settled"));
    journal.flush().await;
    assert_eq!(scheduled(&store), [id("kept")]);
    assert_eq!(store.fate_of(&id("settled")).unwrap(), Some(Fate::Acked));
    let stats = journal.stats();
    assert_eq!(stats.committed, 3);
    assert_eq!(stats.backlog, 0);
}

#[test]
fn a_retry_written_on_a_callers_behalf_leaves_a_row_to_retire() {
    let (done, _committed) = oneshot::channel();
    let mut batch = Batch::default();
    let mut held = Held::default();
    batch.add(Entry::Wait(vec![schedule("a", 1)], done), &mut held);
    batch.add(Entry::Retire(acked("a")), &mut held);
    assert_eq!(kinds(&batch.ops), ["schedule a #1", "acked a"]);
    assert_eq!(batch.moot, 0);
}

#[tokio::test]
async fn a_retired_fate_is_written_only_if_the_journal_wrote_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path(), Arc::new(WallClock::real())).unwrap());
    let journal = Journal::spawn(store.clone(), holding_until_a_flush());
    // Settled while held: neither the retry nor its fate reaches the store.
    journal.submit(schedule("quick", 1));
    journal.retire(id("quick"), Timestamp::from_millis(5));
    // Written (the flush releases it), then retired: the fate drops the row.
    journal.submit(schedule("slow", 1));
    journal.flush().await;
    assert_eq!(store.scheduled().unwrap().len(), 1);
    journal.retire(id("slow"), Timestamp::from_millis(5));
    journal.flush().await;

    assert!(store.scheduled().unwrap().is_empty());
    assert_eq!(store.fate_of(&id("quick")).unwrap(), None);
    assert_eq!(store.fate_of(&id("slow")).unwrap(), Some(Fate::Acked));
    let stats = journal.stats();
    assert_eq!((stats.committed, stats.moot, stats.backlog), (4, 2, 0));
}
