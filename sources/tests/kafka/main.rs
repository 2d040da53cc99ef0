//! The Kafka source against librdkafka's mock cluster, inside the test process (no Kafka
//! broker can be installed here; see `harness.rs` for what "kill" and "unacknowledged" mean
//! there): the source suite, every case of it, and what only Kafka does: an hour-long retry
//! never holds a partition's committed offset back; leaving the group commits what is in
//! custody; a source started while the broker is down says so and reads once it is up; a stop
//! while it is down ends, and what was not committed is read again.
//!
//! What the mock cannot host is not here, and docs/design.md says why: a revocation because
//! another member joins (the mock refuses commits while its group rebalances, a Kafka broker
//! takes them), and offsets with gaps (the mock never compacts, and writes no transaction
//! markers into its log: a transactional producer's records take every offset); the mark's
//! gaps are `marks.rs`'s unit tests.
//!
//! Every wait is on a condition with a generous deadline; nothing asserts on timings.

mod harness;

rebound_runtime::source_suite!(kafka_suite, harness::KafkaHarness);

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::{KafkaHarness, PARTITIONS, TOPIC};
use rebound_runtime::durable::Durable;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::sources::conformance::SourceHarness;
use rebound_runtime::store::SqliteStore;
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;
use rebound_sources::kafka::{CustodyAt, KafkaSource, SourceStats};

fn durable(dir: &std::path::Path) -> (Arc<SqliteStore>, Durable) {
    let store = Arc::new(SqliteStore::open(dir).expect("the SQLite store opens"));
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        Default::default(),
    );
    (store, durable)
}

/// Deliveries per message id.
type Seen = Arc<Mutex<BTreeMap<String, u32>>>;

/// Records every delivery; fails the first of each `SLOW` one (its retry then waits an hour).
struct Handler {
    seen: Seen,
}

impl Bolt for Handler {
    fn execute(&mut self, tuple: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = tuple.str("id").unwrap_or_default().to_owned();
        let biz = tuple.str("biz").unwrap_or_default().to_owned();
        let first = {
            let mut seen = self.seen.lock().unwrap();
            let n = seen.entry(id).or_insert(0);
            *n += 1;
            *n == 1
        };
        if biz == "SLOW" && first {
            return Err(Failure::new("LATER", "not yet"));
        }
        Ok(())
    }
}

fn topology(source: KafkaSource, seen: Seen) -> Topology {
    let source = Mutex::new(Some(source));
    let mut b = TopologyBuilder::new("kafka");
    b.spout("orders", 1, move |_| {
        source.lock().unwrap().take().expect("one spout task")
    });
    b.bolt("handler", 1, move |_| Handler { seen: seen.clone() })
        .shuffle("orders");
    b.build().unwrap()
}

fn hour_retries() -> FixedPolicy {
    FixedPolicy {
        base_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
        ..FixedPolicy::default()
    }
}

/// Waits until `done`, failing with `what` after `secs`.
async fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Takes `n` messages from `source` directly, acknowledging none.
async fn take(source: &mut KafkaSource, n: usize) -> Vec<Message> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while got.len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} read",
            got.len()
        );
        match source.next() {
            NextMessage::Ready(m) => got.push(m),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hour_long_retry_never_holds_the_committed_offset_back() {
    let h = KafkaHarness::start();
    for i in 1..=200 {
        let biz = if i % 10 == 0 { "SLOW" } else { "ORDER" };
        h.publish(biz, None, &format!("{{\"n\":{i}}}"));
    }
    let high = h.clients.high(TOPIC, PARTITIONS);
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = durable(dir.path());
    let seen = Seen::default();
    let source = KafkaSource::start(h.options(TOPIC), Some(durable.clone()));
    let stats: Arc<SourceStats> = source.stats();
    let running = topology(source, seen.clone()).start(durable.seams(hour_retries()));
    until("200 handled", 60, || seen.lock().unwrap().len() == 200).await;
    // The 20 SLOW ones wait an hour in the store, in custody: every partition's committed
    // offset reaches its end all the same.
    until("every partition committed to its end", 60, || {
        h.clients.committed(TOPIC, PARTITIONS).as_ref() == Some(&high)
    })
    .await;
    assert_eq!(stats.custody(CustodyAt::Retained), 20);
    assert_eq!(stats.custody(CustodyAt::Acked), 180);
    assert_eq!(stats.received.load(Relaxed), 200);
    until("the source sees its commits confirmed", 30, || {
        stats.unacked.load(Relaxed) == 0
    })
    .await;
    assert!(
        seen.lock().unwrap().values().all(|&n| n == 1),
        "each handled once"
    );
    let scheduled = tokio::task::spawn_blocking(move || {
        rebound_runtime::store::Store::scheduled(&*store).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(scheduled.len(), 20, "the retries wait in the store");
    until("the custody latency observed", 30, || {
        stats.acked_at_broker.load(Relaxed) == 200
    })
    .await;
    assert!(stats.custody_latency().quantile(0.5).is_some());
    running.shutdown(Duration::from_secs(5)).await;
}

/// The revocation when the member leaves (its consumer closes at stop) commits what is in
/// custody before the partitions go. (A revocation because another member joins cannot be
/// checked on the mock: while its group is rebalancing it answers every commit with
/// REBALANCE_IN_PROGRESS, where a Kafka broker takes commits until the rebalance completes;
/// the source then leaves those records to the store's custody, see docs/design.md.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_the_group_commits_what_is_in_custody_before_the_partitions_go() {
    let h = KafkaHarness::start();
    for i in 1..=30 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let high = h.clients.high(TOPIC, PARTITIONS);
    let low = h.clients.committed(TOPIC, PARTITIONS).unwrap();
    // No commit on the cadence (an hour) nor for the count (a quarter of a million): only the
    // one made as the member leaves.
    let mut o = h.options(TOPIC);
    o.commit_every = Duration::from_secs(3600);
    o.max_unacked = 1_000_000;
    let mut a = KafkaSource::start(o.clone(), None);
    let read = take(&mut a, 30).await;
    // The first three of each partition in custody, the rest not: each mark stops at 3.
    let offset =
        |m: &Message| -> i64 { m.id.as_str().rsplit('/').next().unwrap().parse().unwrap() };
    let (done, held): (Vec<Message>, Vec<Message>) = read.into_iter().partition(|m| offset(m) < 3);
    for m in &done {
        a.ack(&m.id);
    }
    until("the acks taken in", 30, || {
        a.stats().unacked.load(Relaxed) == 30
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.clients.committed(TOPIC, PARTITIONS).unwrap(),
        low,
        "nothing committed before the member leaves"
    );
    drop(a);
    let committed = h.clients.committed(TOPIC, PARTITIONS).unwrap();
    assert_eq!(
        committed,
        (0..PARTITIONS).map(|p| (p, 3)).collect::<BTreeMap<_, _>>(),
        "committed as it left, to the first offset not in custody"
    );
    // A new member is handed exactly the ten not in custody.
    let mut b = KafkaSource::start(o, None);
    let again = take(&mut b, held.len()).await;
    let mut again: Vec<String> = again.iter().map(|m| m.id.to_string()).collect();
    again.sort();
    let mut held: Vec<String> = held.iter().map(|m| m.id.to_string()).collect();
    held.sort();
    assert_eq!(again, held);
    assert!(
        high.values().all(|&h| h > 3),
        "each partition had more than three"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_started_while_the_broker_is_down_says_so_and_reads_once_it_is_up() {
    let h = KafkaHarness::start();
    for i in 1..=20 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    h.mock.kill();
    let mut source = KafkaSource::start(h.options(TOPIC), None);
    let stats = source.stats();
    until("the source says the broker does not answer", 60, || {
        stats.unreachable_since().is_some()
    })
    .await;
    assert!(
        matches!(source.next(), NextMessage::Idle),
        "nothing to read yet"
    );
    h.mock.restart();
    let read = take(&mut source, 20).await;
    for m in &read {
        source.ack(&m.id);
    }
    until("the broker answers again", 60, || {
        stats.unreachable_since().is_none()
    })
    .await;
    let high = h.clients.high(TOPIC, PARTITIONS);
    until("all committed", 60, || {
        h.clients.committed(TOPIC, PARTITIONS).as_ref() == Some(&high)
    })
    .await;
}

/// A stop while the broker is down ends (the last commit is waited on for a while, not for
/// ever), and a member started once it is back is handed again every record not committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_broker_is_down_ends_and_what_was_not_committed_is_read_again() {
    let h = KafkaHarness::start();
    for i in 1..=20 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let mut source = KafkaSource::start(h.options(TOPIC), None);
    let read = take(&mut source, 20).await;
    let mut ids: Vec<String> = read.iter().map(|m| m.id.to_string()).collect();
    ids.sort();
    // Half in custody, half not; then the broker goes, and the source stops.
    let (done, held) = ids.split_at(10);
    for id in done {
        source.ack(&MessageId::from(id.as_str()));
    }
    h.mock.kill();
    drop(source);
    h.mock.restart();
    let mut again = KafkaSource::start(h.options(TOPIC), None);
    let mut second: Vec<String> = Vec::new();
    until("every record not in custody read again", 60, || {
        while let NextMessage::Ready(m) = again.next() {
            second.push(m.id.to_string());
        }
        held.iter().all(|id| second.contains(id))
    })
    .await;
}
