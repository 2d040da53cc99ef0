//! Custody (`runtime.md`, "Custody"): a spout hears `retained` once the store has committed a
//! message's first retry with its payload, and not before; once per message, even when its
//! first retries fail again within the journal's hold and are never written; never for a
//! message whose fate came first; never without a durable store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_runtime::fate::Seams;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::Store;
use rebound_runtime::topology::*;

use super::durable_seams::open;

/// What a spout was told, in order: (call, id).
type Calls = Arc<Mutex<Vec<(&'static str, String)>>>;

/// Hands out `n` messages, then `Exhausted`; records every call it hears.
struct Source {
    next: u64,
    n: u64,
    calls: Calls,
}

impl Spout for Source {
    fn next(&mut self) -> NextMessage {
        if self.next == self.n {
            return NextMessage::Exhausted;
        }
        self.next += 1;
        NextMessage::Ready(Message::new(format!("m-{}", self.next), "ORDER", "body"))
    }
    fn ack(&mut self, id: &MessageId) {
        self.calls.lock().unwrap().push(("ack", id.to_string()));
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.calls
            .lock()
            .unwrap()
            .push(("dead_lettered", id.to_string()));
    }
    fn retained(&mut self, id: &MessageId) {
        self.calls
            .lock()
            .unwrap()
            .push(("retained", id.to_string()));
    }
}

/// Fails every delivery of a message before its `succeed_at`-th (never, for `u32::MAX`).
struct FailsUntil {
    succeed_at: u32,
}

impl Bolt for FailsUntil {
    fn execute(&mut self, tuple: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let attempt = tuple.field("attempt").and_then(Value::as_int).unwrap_or(1);
        if attempt < i64::from(self.succeed_at) {
            Err(Failure::new("DOWN", "the downstream is down"))
        } else {
            Ok(())
        }
    }
}

fn topology(n: u64, succeed_at: u32, calls: Calls) -> Topology {
    let mut b = TopologyBuilder::new("custody");
    b.spout("src", 1, move |_| Source {
        next: 0,
        n,
        calls: calls.clone(),
    });
    b.bolt("work", 1, move |_| FailsUntil { succeed_at })
        .shuffle("src");
    b.build().unwrap()
}

fn policy(base_delay: Duration, max_attempts: u32) -> FixedPolicy {
    FixedPolicy {
        max_attempts,
        base_delay,
        max_delay: Duration::from_secs(3600),
        ..FixedPolicy::default()
    }
}

/// How many times each call named each id.
fn counts(calls: &Calls, call: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (c, id) in calls.lock().unwrap().iter() {
        if *c == call {
            *counts.entry(id.clone()).or_default() += 1;
        }
    }
    counts
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_comes_once_the_first_retry_is_committed_and_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open(dir.path());
    // Another connection holds the write lock: the journal's commit has to wait for it.
    let blocker = rusqlite::Connection::open(store.path()).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();

    let calls = Calls::default();
    // Every delivery fails; the first retry waits an hour.
    let t = topology(20, u32::MAX, calls.clone());
    let running = t.start(durable.seams(policy(Duration::from_secs(3600), 5)));
    until("20 failures decided", || {
        running.stats().failures_by_code.get("DOWN") == Some(&20)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        calls.lock().unwrap().is_empty(),
        "told retained before the retries were committed: {:?}",
        calls.lock().unwrap()
    );

    blocker.execute_batch("ROLLBACK").unwrap();
    until("20 messages retained", || {
        counts(&calls, "retained").len() == 20
    })
    .await;
    for id in counts(&calls, "retained").keys() {
        // Committed, with its payload, by the time the spout heard of it.
        let rows = store.retries(&[MessageId::from(id.as_str())]).unwrap();
        assert_eq!(rows.len(), 1, "{id} has its retry row");
        assert_eq!(&rows[0].message.payload[..], b"body");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(counts(&calls, "retained").values().all(|&n| n == 1));
    assert!(counts(&calls, "ack").is_empty() && counts(&calls, "dead_lettered").is_empty());
    running.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_failing_again_within_the_hold_give_custody_once_when_one_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open(dir.path());
    let calls = Calls::default();
    // Retries after 2, 4, 8, 16 … ms: the first ones come due and fail again while the journal
    // still holds their schedule (10 ms), so they are never written; a later one is.
    let t = topology(30, u32::MAX, calls.clone());
    let running = t.start(durable.seams(policy(Duration::from_millis(2), 40)));
    until("30 messages retained", || {
        counts(&calls, "retained").len() == 30
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(counts(&calls, "retained").values().all(|&n| n == 1));
    let ids: Vec<MessageId> = (1..=30)
        .map(|i| MessageId::from(format!("m-{i}")))
        .collect();
    assert_eq!(store.retries(&ids).unwrap().len(), 30);
    running.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fate_before_any_commit_means_no_retained_and_memory_never_retains() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, durable) = open(dir.path());
    let calls = Calls::default();
    // The second delivery, 1 ms after the first, succeeds: its ack moots the held schedule.
    let t = topology(50, 2, calls.clone());
    let running = t.start(durable.seams(policy(Duration::from_millis(1), 5)));
    until("50 acked", || counts(&calls, "ack").len() == 50).await;
    running.wait_quiescent().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A message may have been retained before its ack (a slow pass); never after, never twice.
    let calls_in_order = calls.lock().unwrap().clone();
    for (i, (call, id)) in calls_in_order.iter().enumerate() {
        if *call == "retained" {
            assert!(
                !calls_in_order[..i]
                    .iter()
                    .any(|(c, x)| x == id && *c != "retained"),
                "{id} retained after its fate"
            );
        }
    }
    assert!(counts(&calls, "retained").values().all(|&n| n == 1));
    running.shutdown(Duration::from_secs(5)).await;

    let calls = Calls::default();
    let t = topology(10, 3, calls.clone());
    let running = t.start(Seams::in_memory().with_policy(policy(Duration::from_millis(50), 5)));
    until("10 acked in memory", || counts(&calls, "ack").len() == 10).await;
    assert!(
        counts(&calls, "retained").is_empty(),
        "no store, no custody before a fate"
    );
    running.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_can_tell_which_redelivered_ids_the_store_has_custody_of() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, durable) = open(dir.path());
    let calls = Calls::default();
    // m-1 … m-4: their first retry waits an hour; m-5 … m-8 are dead-lettered at once.
    let t = topology(4, u32::MAX, calls.clone());
    let running = t.start(durable.seams(policy(Duration::from_secs(3600), 5)));
    until("4 retained", || counts(&calls, "retained").len() == 4).await;
    running.shutdown(Duration::from_secs(5)).await;
    let t = topology(8, u32::MAX, calls.clone());
    let running = t.start(durable.seams(policy(Duration::from_secs(3600), 1)));
    until("4 more dead-lettered", || {
        counts(&calls, "dead_lettered").len() >= 4
    })
    .await;
    running.shutdown(Duration::from_secs(5)).await;

    let ids: Vec<MessageId> = (1..=9).map(|i| MessageId::from(format!("m-{i}"))).collect();
    let known = tokio::task::spawn_blocking(move || durable.known(&ids).unwrap())
        .await
        .unwrap();
    let mut known: Vec<String> = known.into_iter().map(|id| id.to_string()).collect();
    known.sort();
    // m-9 was never read; everything else is in the store's custody.
    assert_eq!(known, (1..=8).map(|i| format!("m-{i}")).collect::<Vec<_>>());
}

/// Refuses every third message (as a RabbitMQ source refuses one without a `message-id`),
/// hands out the others; records every call it hears.
struct Refuses {
    inner: Source,
}

impl Spout for Refuses {
    fn next(&mut self) -> NextMessage {
        match self.inner.next() {
            NextMessage::Ready(m) if self.inner.next.is_multiple_of(3) => {
                let m = m.with_key("k");
                NextMessage::Refused(m, Failure::new("NO_MESSAGE_ID", "no message-id"))
            }
            next => next,
        }
    }
    fn ack(&mut self, id: &MessageId) {
        self.inner.ack(id)
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.inner.dead_lettered(id)
    }
    fn retained(&mut self, id: &MessageId) {
        self.inner.retained(id)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_message_is_dead_lettered_at_once_never_delivered_and_its_spout_told() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open(dir.path());
    let calls = Calls::default();
    let delivered = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut b = TopologyBuilder::new("refused");
    let spout_calls = calls.clone();
    b.spout("src", 1, move |_| Refuses {
        inner: Source {
            next: 0,
            n: 30,
            calls: spout_calls.clone(),
        },
    });
    let seen = delivered.clone();
    b.bolt("work", 1, move |_| Records(seen.clone()))
        .shuffle("src");
    // A policy that would retry everything: a refused message is never retried.
    let running = b
        .build()
        .unwrap()
        .start(durable.seams(policy(Duration::from_millis(1), 5)));
    until("20 acked and 10 dead-lettered", || {
        counts(&calls, "ack").len() == 20 && counts(&calls, "dead_lettered").len() == 10
    })
    .await;
    running.wait_quiescent().await;
    let refused: Vec<String> = (1..=30)
        .filter(|i: &u64| i.is_multiple_of(3))
        .map(|i| format!("m-{i}"))
        .collect();
    let told: Vec<String> = counts(&calls, "dead_lettered").into_keys().collect();
    let mut sorted = refused.clone();
    sorted.sort();
    assert_eq!(
        told, sorted,
        "the spout hears dead_lettered for each refused message"
    );
    assert!(counts(&calls, "dead_lettered").values().all(|&n| n == 1));
    assert!(counts(&calls, "retained").is_empty());
    let delivered = delivered.lock().unwrap().clone();
    assert_eq!(
        delivered.len(),
        20,
        "only the others are delivered: {delivered:?}"
    );
    assert!(delivered.iter().all(|id| !refused.contains(id)));
    for id in &refused {
        let letter = store
            .dead_letter(&MessageId::from(id.as_str()))
            .unwrap()
            .unwrap_or_else(|| panic!("{id} is stored as a dead letter"));
        assert_eq!(letter.letter.failure.code, "NO_MESSAGE_ID");
        assert_eq!(letter.letter.reason.as_str(), "refused");
        assert_eq!(letter.letter.message.retry.attempt, 0, "never delivered");
        assert_eq!(&letter.letter.message.payload[..], b"body", "kept whole");
    }
    let stats = running.stats();
    assert_eq!(stats.failures_by_code.get("NO_MESSAGE_ID"), Some(&10));
    running.shutdown(Duration::from_secs(5)).await;
}

/// Acks every tuple, recording its message id.
struct Records(Arc<Mutex<Vec<String>>>);

impl Bolt for Records {
    fn execute(&mut self, tuple: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = tuple.field("id").and_then(Value::as_str).unwrap_or("?");
        self.0.lock().unwrap().push(id.to_string());
        Ok(())
    }
}

/// Hands out `m-1 … m-n`, every fifth with a payload of 2 KiB, the others small.
struct SomeLarge {
    inner: Source,
}

impl Spout for SomeLarge {
    fn next(&mut self) -> NextMessage {
        match self.inner.next() {
            NextMessage::Ready(mut m) if self.inner.next.is_multiple_of(5) => {
                m.payload = vec![b'x'; 2048].into();
                NextMessage::Ready(m)
            }
            next => next,
        }
    }
    fn ack(&mut self, id: &MessageId) {
        self.inner.ack(id)
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.inner.dead_lettered(id)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_above_max_payload_is_a_dead_letter_never_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open(dir.path());
    let calls = Calls::default();
    let delivered = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut b = TopologyBuilder::new("large");
    b.config(Config {
        max_payload: 1024,
        ..Config::default()
    });
    let spout_calls = calls.clone();
    b.spout("src", 1, move |_| SomeLarge {
        inner: Source {
            next: 0,
            n: 20,
            calls: spout_calls.clone(),
        },
    });
    let seen = delivered.clone();
    b.bolt("work", 1, move |_| Records(seen.clone()))
        .shuffle("src");
    let running = b
        .build()
        .unwrap()
        .start(durable.seams(policy(Duration::from_millis(1), 5)));
    until("16 acked and 4 dead-lettered", || {
        counts(&calls, "ack").len() == 16 && counts(&calls, "dead_lettered").len() == 4
    })
    .await;
    assert_eq!(delivered.lock().unwrap().len(), 16);
    for i in [5, 10, 15, 20] {
        let letter = store
            .dead_letter(&MessageId::from(format!("m-{i}")))
            .unwrap()
            .unwrap_or_else(|| panic!("m-{i} is a dead letter"));
        assert_eq!(letter.letter.failure.code, codes::PAYLOAD_TOO_LARGE);
        assert!(
            letter
                .letter
                .failure
                .message
                .contains("2048 bytes, above max_payload (1024"),
            "{}",
            letter.letter.failure.message
        );
        assert_eq!(letter.letter.message.payload.len(), 2048, "kept whole");
    }
    running.shutdown(Duration::from_secs(5)).await;
}
