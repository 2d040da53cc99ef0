//! Ordered keys over the durable seams, across a restart: a retry recovered from the store
//! holds its key's redelivered messages back until its fate; under `on_dead_letter: block` an
//! open letter found at the start keeps its key blocked until an operator skips it
//! (`Durable::skip`), and a replayed letter goes before the key's held messages.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_runtime::durable::{Durable, DurableOptions};
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{ScheduledRetry, SqliteStore, Store, WriteOp};
use rebound_runtime::time::{TimeSource, TokioTime};
use rebound_runtime::topology::*;

/// Hands out its messages (id, key) in order, then says `Exhausted`.
struct Redelivered(Vec<(&'static str, &'static str)>);

impl Spout for Redelivered {
    fn next(&mut self) -> NextMessage {
        if self.0.is_empty() {
            return NextMessage::Exhausted;
        }
        let (id, key) = self.0.remove(0);
        NextMessage::Ready(Message::new(id, "ORDER", "").with_key(key))
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
}

/// Records every delivery, in order, and acks it.
struct Sink(Arc<Mutex<Vec<String>>>);

impl Bolt for Sink {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default().to_owned();
        self.0.lock().unwrap().push(id);
        Ok(())
    }
}

fn letter(id: &str, key: &str, at: rebound_runtime::time::Timestamp) -> DeadLetter {
    let mut message = Message::new(id, "ORDER", "").with_key(key);
    message.retry.attempt = 3;
    message.retry.first_delivery = Some(at);
    DeadLetter {
        message,
        failure: Failure::new("DB_LOCK_WAIT", "gave up"),
        label: Label::from("L1"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("db-lock".into()),
        version: Version::from_hash(1),
        at,
    }
}

/// Waits (up to 10 s) until `seen` holds every id of `ids`.
async fn until_delivered(seen: &Arc<Mutex<Vec<String>>>, ids: &[&str]) {
    for _ in 0..1000 {
        if ids
            .iter()
            .all(|id| seen.lock().unwrap().iter().any(|s| s == id))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{ids:?} not all delivered: {:?}", seen.lock().unwrap());
}

fn position(seen: &[String], id: &str) -> usize {
    seen.iter()
        .position(|s| s == id)
        .unwrap_or_else(|| panic!("{id} not delivered: {seen:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovered_retries_and_letters_hold_their_keys_until_their_fate_or_an_operator() {
    let dir = tempfile::tempdir().unwrap();
    let time = Arc::new(TokioTime::new());
    let now = time.wall();
    // What the last run left: a1's retry, due in 300 ms (key A), and open letters for b1 and c1
    // (keys B and C); a2, b2, c2 were held behind them and come again from the source.
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        let mut a1 = Message::new("a1", "ORDER", "").with_key("A");
        a1.retry.attempt = 1;
        a1.retry.first_delivery = Some(now);
        let delay = Duration::from_millis(300);
        a1.retry.failures.push(FailureRecord {
            attempt: 1,
            at: now,
            code: "DB_LOCK_WAIT".into(),
            message: "lock wait".into(),
            attrs: Default::default(),
            rule: RuleRef::Rule("db-lock".into()),
            version: Version::from_hash(1),
            delay: Some(delay),
        });
        let due = now + delay;
        store
            .apply(&[
                WriteOp::Schedule(ScheduledRetry::new(a1, due)),
                WriteOp::DeadLetter(Box::new(letter("b1", "B", now))),
                WriteOp::DeadLetter(Box::new(letter("c1", "C", now))),
            ])
            .unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let durable = Durable::new(
        store,
        time.clone(),
        DurableOptions {
            ordered_letters: true,
            ..DurableOptions::default()
        },
    );
    assert_eq!(durable.recover().unwrap().len(), 1);

    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut b = TopologyBuilder::new("ordered");
    b.config(Config {
        ordering: OrderingConfig {
            ordered: Ordered::All,
            on_dead_letter: OnDeadLetter::Block,
            ..OrderingConfig::default()
        },
        ..Config::default()
    });
    b.spout("src", 1, |_| {
        Redelivered(vec![("a2", "A"), ("b2", "B"), ("c2", "C"), ("d1", "D")])
    });
    let sink = seen.clone();
    b.bolt("sink", 1, move |_| Sink(sink.clone()))
        .shuffle("src");
    let running = b
        .build()
        .unwrap()
        .start(durable.seams(FixedPolicy::default()));

    until_delivered(&seen, &["a1", "a2", "d1"]).await;
    {
        let seen = seen.lock().unwrap();
        assert!(position(&seen, "a1") < position(&seen, "a2"), "{seen:?}");
        assert!(position(&seen, "d1") < position(&seen, "a2"), "{seen:?}");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !seen.lock().unwrap().iter().any(|s| s == "b2" || s == "c2"),
        "blocked keys stay blocked: {:?}",
        seen.lock().unwrap()
    );

    // The operator skips b1: b2 goes. A replay of c1 goes first, then c2.
    let d = durable.clone();
    tokio::task::spawn_blocking(move || {
        d.skip("b1", "alice", "handled by hand").unwrap();
        d.replay("c1", "alice", "the lock is gone").unwrap();
    })
    .await
    .unwrap();
    until_delivered(&seen, &["b2", "c1", "c2"]).await;
    {
        let seen = seen.lock().unwrap();
        assert!(position(&seen, "c1") < position(&seen, "c2"), "{seen:?}");
        assert_eq!(seen.len(), 6, "each once: {seen:?}");
    }
    tokio::time::timeout(Duration::from_secs(10), running.wait_quiescent())
        .await
        .expect("quiescent once every key let go");
    let stats = running.stats();
    assert_eq!((stats.ordered_held, stats.ordered_keys_blocked), (0, 0));
    running.shutdown(Duration::from_secs(5)).await;
}
