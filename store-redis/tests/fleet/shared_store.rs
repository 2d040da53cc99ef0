//! The durable layer on a shared store (Redis, on a `redis-server` of the test's own): a
//! retry one node schedules is claimed and fired by another, every message ends with one
//! fate; a write under a claim that was reaped and claimed again is refused and counted; a
//! spout hears `retained` once the store holds a first retry.

use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::durable::{Durable, DurableOptions, Journal, JournalOptions, SharedOptions};
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::{ClaimQueue, Fate, MessageId, ScheduledRetry, Store, WriteOp};
use rebound_runtime::time::{Timestamp, TokioTime};
use rebound_runtime::topology::{
    Bolt, Emitter, Failure, Message, NextMessage, Spout, TopologyBuilder, Tuple,
};
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};

fn connect(server: &TestServer, ns: &str) -> Arc<RedisStore> {
    Arc::new(RedisStore::connect(&RedisOptions::new(server.url(), ns)).expect("connect"))
}

fn node(store: &Arc<RedisStore>, name: &str) -> Durable {
    let mut shared = SharedOptions::new(name, Duration::from_secs(2));
    shared.poll = Duration::from_millis(50);
    Durable::shared(
        store.clone(),
        store.clone(),
        Arc::new(TokioTime::new()),
        DurableOptions::default(),
        shared,
    )
}

/// Hands out `m-1…m-n`, then nothing (never exhausted: a node of a fleet keeps running).
struct Numbers {
    next: u64,
    n: u64,
}

impl Spout for Numbers {
    fn next(&mut self) -> NextMessage {
        if self.next == self.n {
            return NextMessage::Idle;
        }
        self.next += 1;
        NextMessage::Ready(Message::new(format!("m-{}", self.next), "ORDER", "x"))
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
}

/// Fails every first delivery.
struct FirstFails;

impl Bolt for FirstFails {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        match input.int("attempt") {
            Some(1) => Err(Failure::new("DB_LOCK_WAIT", "injected")),
            _ => Ok(()),
        }
    }
}

fn topology(n: u64) -> rebound_runtime::topology::Topology {
    let mut b = TopologyBuilder::new("t");
    b.spout("src", 1, move |_| Numbers { next: 0, n });
    b.bolt("work", 2, |_| FirstFails).shuffle("src");
    b.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_scheduled_on_one_node_is_fired_by_another() {
    let server = TestServer::start();
    let (store_a, store_b) = (connect(&server, "two"), connect(&server, "two"));
    let (a, b) = (node(&store_a, "a"), node(&store_b, "b"));
    // Node a schedules retries but never claims: only b can fire them.
    a.stop_claiming();
    let policy = || FixedPolicy {
        base_delay: Duration::from_millis(20),
        ..FixedPolicy::default()
    };
    let running_a = topology(200).start(a.seams(policy()));
    let running_b = topology(0).start(b.seams(policy()));

    let ids: Vec<MessageId> = (1..=200)
        .map(|i| MessageId::from(format!("m-{i}")))
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = store_a.clone();
        let ids = ids.clone();
        let acked = tokio::task::spawn_blocking(move || s.known_fates(&ids).unwrap())
            .await
            .unwrap()
            .iter()
            .filter(|(_, f)| *f == Fate::Acked)
            .count();
        if acked == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{acked} of 200 acked; a claimed {:?}, b claimed {:?}",
            a.claim_stats(),
            b.claim_stats()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        running_a.stats().retries,
        200,
        "every first delivery failed on a"
    );
    assert_eq!(a.claim_stats().unwrap().claimed, 0);
    assert_eq!(b.claim_stats().unwrap().claimed, 200, "b fired every retry");
    assert_eq!(running_b.stats().acked, 200);
    let s = store_a.clone();
    let depth = tokio::task::spawn_blocking(move || s.depth().unwrap())
        .await
        .unwrap();
    assert_eq!(depth, (0, 0), "nothing left due or in flight");
    running_a.shutdown(Duration::from_secs(5)).await;
    running_b.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_under_a_claim_reaped_and_claimed_again_is_refused_and_counted() {
    let server = TestServer::start();
    let store = connect(&server, "stale");
    let journal = Journal::spawn(store.clone(), JournalOptions::default());
    let message = Message::new("m-1", "ORDER", "x");
    let now = Timestamp::now();
    let s = store.clone();
    let (first, second) = tokio::task::spawn_blocking(move || {
        s.apply(&[WriteOp::Schedule(ScheduledRetry::new(message, now))])
            .unwrap();
        let first = s.claim("a", 10, Duration::from_millis(200)).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let reaped = s.reap("b", 10, 5, Duration::from_secs(10)).unwrap();
        assert_eq!(reaped.returned.len(), 1);
        let second = s.claim("b", 10, Duration::from_secs(10)).unwrap();
        (first, second)
    })
    .await
    .unwrap();
    assert_eq!(second.reclaims, 1, "claimed again after a reap");
    // Node a wakes up and writes the retry it decided under its old claim.
    let mut stale = first.retries[0].clone();
    stale.due = Timestamp::now() + Duration::from_secs(1);
    journal.write_behind(WriteOp::Schedule(stale));
    journal.flush().await;
    assert_eq!(journal.stats().stale, 1, "refused and counted");
    let s = store.clone();
    let depth = tokio::task::spawn_blocking(move || s.depth().unwrap())
        .await
        .unwrap();
    assert_eq!(depth, (0, 1), "the retry is still b's, in flight");
    // b's write under its own claim goes through.
    let mut fresh = second.retries[0].clone();
    fresh.due = Timestamp::now();
    journal.write_behind(WriteOp::Schedule(fresh));
    journal.flush().await;
    assert_eq!(journal.stats().stale, 1);
    let s = store.clone();
    let depth = tokio::task::spawn_blocking(move || s.depth().unwrap())
        .await
        .unwrap();
    assert_eq!(depth, (1, 0), "due again, b's retry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_due_within_the_hold_is_fired_from_memory_and_never_written() {
    let server = TestServer::start();
    let store = connect(&server, "held");
    let a = node(&store, "a");
    // Nobody claims: only a retry kept in memory can fire.
    a.stop_claiming();
    let policy = FixedPolicy {
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(1),
        ..FixedPolicy::default()
    };
    let running = topology(100).start(a.seams(policy));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while running.stats().acked < 100 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of 100 acked",
            running.stats().acked
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(running.stats().retries, 100);
    a.journal().flush().await;
    let mut redis = server.client();
    let rows: Vec<String> = ::redis::cmd("KEYS")
        .arg("{held}:r:*")
        .query(&mut redis)
        .unwrap();
    let due: u64 = ::redis::cmd("ZCARD")
        .arg("{held}:due")
        .query(&mut redis)
        .unwrap();
    assert!(
        rows.is_empty() && due == 0,
        "retries were written: {rows:?}"
    );
    running.shutdown(Duration::from_secs(5)).await;
}

/// Hands out `m-1…m-n`, then nothing; records the ids it is told are retained.
struct Retaining {
    next: u64,
    n: u64,
    retained: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Spout for Retaining {
    fn next(&mut self) -> NextMessage {
        if self.next == self.n {
            return NextMessage::Idle;
        }
        self.next += 1;
        NextMessage::Ready(Message::new(format!("m-{}", self.next), "ORDER", "x"))
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
    fn retained(&mut self, id: &MessageId) {
        self.retained.lock().unwrap().push(id.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spout_hears_retained_once_the_shared_store_holds_the_first_retry() {
    let server = TestServer::start();
    let store = connect(&server, "custody");
    let durable = node(&store, "a");
    let retained = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut b = TopologyBuilder::new("t");
    let told = retained.clone();
    b.spout("src", 1, move |_| Retaining {
        next: 0,
        n: 50,
        retained: told.clone(),
    });
    b.bolt("work", 1, |_| FirstFails).shuffle("src");
    // The first retry waits an hour: far past the hold, so it is written to the store.
    let policy = FixedPolicy {
        base_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
        ..FixedPolicy::default()
    };
    let running = b.build().unwrap().start(durable.seams(policy));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while retained.lock().unwrap().len() < 50 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            retained.lock()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut ids = retained.lock().unwrap().clone();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 50);
    assert_eq!(
        retained.lock().unwrap().len(),
        50,
        "each message retained once"
    );
    let ids: Vec<MessageId> = ids.iter().map(|i| MessageId::from(i.as_str())).collect();
    let s = store.clone();
    let rows = tokio::task::spawn_blocking(move || s.retries(&ids).unwrap())
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        50,
        "every retained message has its row in the store"
    );
    running.shutdown(Duration::from_secs(5)).await;
}
