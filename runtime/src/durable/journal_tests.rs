//! Unit tests of the journal's batching, what it makes moot, and its commits.

use super::*;
use crate::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
use crate::store::{Fate, Offset, SqliteStore};
use crate::time::Timestamp;
use crate::topology::{Failure, FailureRecord, Message};

fn message(id: &str) -> Message {
    Message::new(id, "ORDER", "{}")
}

fn schedule(id: &str, attempt: u32) -> WriteOp {
    let mut message = message(id);
    message.retry.attempt = attempt;
    message.retry.first_delivery = Some(Timestamp::from_millis(1));
    message.retry.failures.push(FailureRecord {
        attempt,
        code: "DB_LOCK_WAIT".into(),
        message: "locked".into(),
        attrs: Default::default(),
        at: Timestamp::from_millis(900 * u64::from(attempt)),
        delay: Some(Duration::from_millis(100)),
        rule: RuleRef::Rule("db-lock".into()),
        version: "0123456789abcdef".parse().unwrap(),
    });
    WriteOp::Schedule(ScheduledRetry::new(
        message,
        Timestamp::from_millis(1_000 * u64::from(attempt)),
    ))
}

fn dead_letter(id: &str) -> WriteOp {
    let mut message = message(id);
    message.retry.attempt = 4;
    message.retry.first_delivery = Some(Timestamp::from_millis(1));
    WriteOp::DeadLetter(Box::new(DeadLetter {
        message,
        failure: Failure::new("DB_LOCK_WAIT", "locked"),
        label: Label::from("L1"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("db-lock".into()),
        version: Version::from_hash(0x0123_4567_89ab_cdef),
        at: Timestamp::from_millis(9),
    }))
}

fn acked(id: &str) -> WriteOp {
    WriteOp::Acked {
        id: MessageId::from(id),
        at: Timestamp::from_millis(5),
        offset: None,
    }
}

fn acked_at(id: &str, position: u64) -> WriteOp {
    WriteOp::Acked {
        id: MessageId::from(id),
        at: Timestamp::from_millis(5),
        offset: Some(Offset {
            source: "src".into(),
            position,
        }),
    }
}

fn position(position: u64) -> WriteOp {
    WriteOp::Position {
        source: "src".into(),
        position,
        at: Timestamp::from_millis(6),
    }
}

fn ledger() -> Ledger {
    Ledger {
        record_every_ack: true,
        ..Ledger::default()
    }
}

fn fate_of(store: &SqliteStore, id: &MessageId) -> Option<Fate> {
    let known = store.known_fates(std::slice::from_ref(id)).unwrap();
    known.first().map(|(_, fate)| *fate)
}

fn id(s: &str) -> MessageId {
    MessageId::from(s)
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
/// `c` retried and still waiting, `d` retried then acked.
fn mixed_batch() -> (Batch, Ledger, oneshot::Receiver<Result<Vec<Applied>>>) {
    let (done, committed) = oneshot::channel();
    let mut batch = Batch::default();
    let mut ledger = ledger();
    for op in [schedule("a", 1), schedule("b", 1), schedule("a", 2)] {
        batch.add(Entry::Op(op), &mut ledger);
    }
    batch.add(Entry::Wait(vec![dead_letter("b")], done), &mut ledger);
    for op in [schedule("c", 1), acked("a"), schedule("d", 1), acked("d")] {
        batch.add(Entry::Op(op), &mut ledger);
    }
    (batch, ledger, committed)
}

fn kinds(ops: &[WriteOp]) -> Vec<String> {
    ops.iter()
        .map(|op| match op {
            WriteOp::Schedule(s) => {
                format!("schedule {} #{}", s.message.id, s.message.retry.attempt)
            }
            WriteOp::DeadLetter(d) => format!("dead letter {}", d.id()),
            WriteOp::Acked { id, .. } => format!("acked {id}"),
            WriteOp::Position { position, .. } => format!("position {position}"),
            WriteOp::PruneFates { before } => format!("prune before {}", before.as_millis()),
            WriteOp::Replay(a) => format!("replay {}", a.id),
            WriteOp::Skip(a) => format!("skip {}", a.id),
            WriteOp::Redrive(a) => format!("redrive {}", a.id),
            WriteOp::Expire(a) => format!("expire {}", a.id),
            WriteOp::RetryNow(a) => format!("retry now {}", a.id),
            WriteOp::Audit(kind, a) => format!("audit {} {}", kind.as_str(), a.id),
            WriteOp::LogDecisions { decisions, keep } => {
                format!("log {} decisions, keep {keep}", decisions.len())
            }
        })
        .collect()
}

#[test]
fn a_held_retry_settled_before_it_is_written_is_never_written() {
    let (mut batch, mut ledger, _committed) = mixed_batch();
    assert_eq!(kinds(&batch.ops), ["dead letter b", "acked a", "acked d"]);
    assert_eq!(batch.loose, [1, 2]);
    assert_eq!(batch.waiters[0].0, 0..1);
    // a#1 (replaced), a#2, b and d (settled) are moot; c is still held.
    assert_eq!(batch.moot, 4);
    assert_eq!(ledger.held.len(), 1);
    batch.release(ledger.held.all());
    assert_eq!(
        kinds(&batch.ops),
        ["dead letter b", "acked a", "acked d", "schedule c #1"]
    );
    assert_eq!(batch.counted, 4);
}

#[test]
fn the_store_ends_as_if_every_write_had_been_applied() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let counters = Counters::default();
    let (mut batch, mut ledger, mut committed) = mixed_batch();
    batch.release(ledger.held.all());
    commit(&store, &mut batch, Duration::from_secs(30), &counters).unwrap();

    // The waiter hears about its own write, and only that.
    let applied = committed.try_recv().unwrap().unwrap();
    assert_eq!(applied, [Applied::Done]);
    assert_eq!(counters.committed.load(Relaxed), 4);

    assert_eq!(fate_of(&store, &id("a")), Some(Fate::Acked));
    assert_eq!(fate_of(&store, &id("b")), Some(Fate::DeadLettered));
    assert_eq!(fate_of(&store, &id("c")), None);
    assert_eq!(fate_of(&store, &id("d")), Some(Fate::Acked));
    assert_eq!(scheduled(&store), [id("c")]);
}

#[test]
fn a_later_schedule_replaces_the_held_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let mut batch = Batch::default();
    let mut ledger = ledger();
    for op in [schedule("a", 1), schedule("a", 2), schedule("a", 3)] {
        batch.add(Entry::Op(op), &mut ledger);
    }
    assert_eq!(batch.moot, 2);
    batch.release(ledger.held.all());
    commit(
        &store,
        &mut batch,
        Duration::from_secs(30),
        &Counters::default(),
    )
    .unwrap();
    let rows = store.retries(&[id("a")]).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].message.retry.attempt, 3);
}

#[tokio::test]
async fn a_flush_writes_the_retries_it_was_holding() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let journal = Journal::spawn(store.clone(), holding_until_a_flush());
    journal.write_behind(schedule("kept", 1));
    journal.write_behind(schedule("settled", 1));
    journal.write_behind(acked("settled"));
    journal.flush().await;
    assert_eq!(scheduled(&store), [id("kept")]);
    assert_eq!(fate_of(&store, &id("settled")), Some(Fate::Acked));
    let stats = journal.stats();
    assert_eq!(stats.committed, 3);
    assert_eq!(stats.backlog, 0);
}

#[test]
fn a_retry_written_on_a_callers_behalf_leaves_a_row_its_fate_drops() {
    let (done, _committed) = oneshot::channel();
    let mut batch = Batch::default();
    let mut ledger = Ledger::default(); // acked fates only to drop rows
    batch.add(Entry::Wait(vec![schedule("a", 1)], done), &mut ledger);
    batch.add(Entry::Op(acked("a")), &mut ledger);
    assert_eq!(kinds(&batch.ops), ["schedule a #1", "acked a"]);
    assert_eq!(batch.moot, 0);
}

#[tokio::test]
async fn without_every_ack_a_fate_is_written_only_to_drop_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let options = JournalOptions {
        record_every_ack: false,
        ..holding_until_a_flush()
    };
    let journal = Journal::spawn(store.clone(), options);
    // Settled while held: neither the retry nor its fate reaches the store.
    journal.write_behind(schedule("quick", 1));
    journal.write_behind(acked("quick"));
    // Written (the flush releases it), then acked: the fate drops the row.
    journal.write_behind(schedule("slow", 1));
    journal.flush().await;
    assert_eq!(store.scheduled().unwrap().len(), 1);
    journal.write_behind(acked("slow"));
    // Recovered at start: the journal is told, and the fate drops it too.
    journal.known_rows(vec![id("recovered")]);
    journal.write_behind(acked("recovered"));
    // Never retried: no row, no fate.
    journal.write_behind(acked("plain"));
    journal.flush().await;

    assert!(store.scheduled().unwrap().is_empty());
    assert_eq!(fate_of(&store, &id("quick")), None);
    assert_eq!(fate_of(&store, &id("slow")), Some(Fate::Acked));
    assert_eq!(fate_of(&store, &id("recovered")), Some(Fate::Acked));
    assert_eq!(fate_of(&store, &id("plain")), None);
    let stats = journal.stats();
    assert_eq!((stats.committed, stats.moot, stats.backlog), (6, 3, 0));
}

#[test]
fn an_acked_fate_is_held_until_its_sources_position_covers_it() {
    let options = JournalOptions::default();
    let mut batch = Batch::default();
    let mut ledger = ledger();
    for op in [
        acked_at("m1", 1),
        acked_at("m3", 3),
        position(2),
        acked_at("m2", 2),
        acked("elsewhere"), // no offset: nothing will cover it
    ] {
        batch.add(Entry::Op(op), &mut ledger);
    }
    assert_eq!(kinds(&batch.ops), ["acked elsewhere"]);
    assert_eq!(batch.moot, 0);
    batch.settle_acks(&mut ledger, &options, false);
    // m1 is covered and leaves the front; m3 is above the position, not due, and still held
    // (m2 behind it is covered, and leaves once it reaches the front).
    assert_eq!(kinds(&batch.ops), ["acked elsewhere"]);
    assert_eq!((batch.moot, batch.counted), (1, 2));
    assert!(!ledger.acks.is_empty());
    // Its hold over, m3 is written; m2 is moot.
    let mut later = Batch {
        now: batch.now + options.ack_hold,
        ..Batch::default()
    };
    later.settle_acks(&mut ledger, &options, false);
    assert_eq!(kinds(&later.ops), ["acked m3"]);
    assert_eq!(later.moot, 1);
    // A fate arriving after its position came is moot as soon as it reaches the front.
    let mut next = Batch::default();
    next.add(Entry::Op(acked_at("m1bis", 1)), &mut ledger);
    next.settle_acks(&mut ledger, &options, false);
    assert!(next.ops.is_empty() && ledger.acks.is_empty());
    assert_eq!(next.moot, 1);
}

#[tokio::test]
async fn a_flush_writes_the_acked_fates_no_position_covered() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let journal = Journal::spawn(store.clone(), JournalOptions::default());
    for p in 1..=5 {
        journal.write_behind(acked_at(&format!("m{p}"), p));
    }
    journal.write_behind(position(3));
    journal.flush().await;
    assert_eq!(store.position("src").unwrap(), Some(3));
    let ids: Vec<MessageId> = (1..=5).map(|p| id(&format!("m{p}"))).collect();
    let kept: Vec<String> = store
        .known_fates(&ids)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id.to_string())
        .collect();
    assert_eq!(kept, ["m4", "m5"], "the position records m1 to m3");
    let stats = journal.stats();
    assert_eq!((stats.committed, stats.moot, stats.backlog), (6, 3, 0));
}

#[tokio::test]
async fn a_held_acked_fate_waits_for_a_position_not_the_disk_so_it_is_not_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let options = JournalOptions {
        ack_hold: Duration::from_secs(3600),
        ..JournalOptions::default()
    };
    let journal = Journal::spawn(store.clone(), options);
    journal.write_behind(acked_at("m1", 1));
    // Taken from the queue and held: out of the backlog, neither written nor moot yet.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while journal.backlog() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the journal never took it"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let stats = journal.stats();
    assert_eq!((stats.committed, stats.moot), (0, 0));
    assert_eq!(fate_of(&store, &id("m1")), None);
    // A flush writes it: no position covered it.
    journal.flush().await;
    assert_eq!(fate_of(&store, &id("m1")), Some(Fate::Acked));
    let stats = journal.stats();
    assert_eq!((stats.committed, stats.moot, stats.backlog), (1, 0, 0));
}

#[test]
fn a_commit_of_no_ops_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let journal = Journal::spawn(store, JournalOptions::default());
    assert_eq!(journal.commit_blocking(Vec::new()).unwrap(), Vec::new());
}

#[tokio::test]
async fn with_fates_keep_the_acked_fates_without_an_offset_are_kept_for_a_window_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let options = JournalOptions {
        fates_keep: Some(Duration::from_secs(10)),
        ..JournalOptions::default()
    };
    let journal = Journal::spawn(store.clone(), options);
    let acked = |id: &str, at_s: u64, offset: Option<Offset>| WriteOp::Acked {
        id: MessageId::from(id),
        at: Timestamp::from_millis(at_s * 1_000),
        offset,
    };
    journal.write_behind(acked("early", 10, None));
    journal.write_behind(dead_letter("letter"));
    journal.flush().await;
    // 100 s later: the early fate is out of the window, and goes with the next batch.
    journal.write_behind(acked("later", 110, None));
    let positioned = Offset {
        source: "src".into(),
        position: 1,
    };
    journal.write_behind(acked("positioned", 10, Some(positioned)));
    journal.flush().await;
    // The pruner waits a tenth of the window (at least 1 s) between prunes: a write after
    // that carries it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while fate_of(&store, &id("early")).is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "early was never pruned"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        journal.write_behind(acked("tick", 111, None));
        journal.flush().await;
    }
    assert_eq!(fate_of(&store, &id("later")), Some(Fate::Acked));
    assert_eq!(fate_of(&store, &id("positioned")), Some(Fate::Acked));
    assert_eq!(fate_of(&store, &id("letter")), Some(Fate::DeadLettered));
    assert_eq!(
        journal.stats().backlog,
        0,
        "the journal's own prunes are not backlog"
    );
}
