//! The Redis Streams source against a `redis-server` of the test's own: every entry processed
//! once and acknowledged; a retry that waits an hour holds nothing at the broker; the entries
//! held unacknowledged never above the pending bound plus a read batch; a restarted consumer
//! reads its own pending entries first; a dead one's are taken over after the lease; an entry
//! the store already has custody of is acknowledged, not handed out again; the server killed
//! and restarted from its AOF loses nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_runtime::durable::Durable;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::{ScheduledRetry, SqliteStore, Store, WriteOp};
use rebound_runtime::time::{Timestamp, TokioTime};
use rebound_runtime::topology::*;
use rebound_store_redis::TestServer;
use rebound_store_redis::stream::{CustodyAt, StreamOptions, StreamSource, StreamUrl};

const STREAM: &str = "orders";
const GROUP: &str = "rebound";

fn options(server: &TestServer, consumer: &str) -> StreamOptions {
    let url = format!(
        "redis-stream://127.0.0.1:{}/{STREAM}?group={GROUP}",
        server.port()
    );
    let mut o = StreamOptions::new(StreamUrl::parse(&url).unwrap(), consumer);
    o.batch = 10;
    o.block = Duration::from_millis(100);
    o
}

fn add(server: &TestServer, n: usize) {
    let mut c = server.client();
    for i in 1..=n {
        let _: String = redis::cmd("XADD")
            .arg(STREAM)
            .arg("*")
            .arg("biz")
            .arg(if i % 10 == 0 { "SLOW" } else { "ORDER" })
            .arg("payload")
            .arg(format!("{{\"n\":{i}}}"))
            .arg("trace")
            .arg(format!("t-{i}"))
            .query(&mut c)
            .unwrap();
    }
}

/// Entries pending in the group (delivered, not acknowledged); none before the group exists.
fn pending(server: &TestServer) -> u64 {
    type Summary = (
        u64,
        Option<String>,
        Option<String>,
        Option<Vec<(String, String)>>,
    );
    let summary: redis::RedisResult<Summary> = redis::cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .query(&mut server.client());
    match summary {
        Ok(s) => s.0,
        Err(e) if e.code() == Some("NOGROUP") => 0,
        Err(e) => panic!("XPENDING: {e}"),
    }
}

fn durable(dir: &std::path::Path) -> (Arc<SqliteStore>, Durable) {
    let store = Arc::new(SqliteStore::open(dir).unwrap());
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        Default::default(),
    );
    (store, durable)
}

/// Deliveries seen per message id, and the biz and payload of each.
type Seen = Arc<Mutex<BTreeMap<String, (u32, String, String)>>>;

/// Records every delivery; fails the first of each `SLOW` one (its retry then waits an hour)
/// and sleeps `work` on each.
struct Handler {
    seen: Seen,
    work: Duration,
}

impl Bolt for Handler {
    fn execute(&mut self, tuple: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = tuple.str("id").unwrap_or_default().to_owned();
        let biz = tuple.str("biz").unwrap_or_default().to_owned();
        let payload = tuple
            .field("payload")
            .and_then(Value::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        let first = {
            let mut seen = self.seen.lock().unwrap();
            let e = seen.entry(id).or_insert((0, biz.clone(), payload));
            e.0 += 1;
            e.0 == 1
        };
        std::thread::sleep(self.work);
        if biz == "SLOW" && first {
            return Err(Failure::new("LATER", "not yet"));
        }
        Ok(())
    }
}

fn topology(
    options: StreamOptions,
    durable: Option<Durable>,
    seen: Seen,
    pending: usize,
    work: Duration,
) -> Topology {
    let mut b = TopologyBuilder::new("stream");
    b.config(Config {
        max_spout_pending: pending,
        ..Config::default()
    });
    b.spout("orders", 1, move |_| {
        StreamSource::start(options.clone(), durable.clone()).expect("the source starts")
    });
    b.bolt("handler", 1, move |_| Handler {
        seen: seen.clone(),
        work,
    })
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

async fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_is_processed_once_and_an_hour_long_retry_holds_nothing_at_the_broker() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = durable(dir.path());
    add(&server, 300);
    let seen = Seen::default();
    let t = topology(
        options(&server, "node-1"),
        Some(durable.clone()),
        seen.clone(),
        1000,
        Duration::ZERO,
    );
    let running = t.start(durable.seams(hour_retries()));
    until("300 entries processed", 30, || {
        seen.lock().unwrap().len() == 300
    })
    .await;
    until("nothing pending at the broker", 30, || {
        pending(&server) == 0
    })
    .await;
    {
        let seen = seen.lock().unwrap();
        assert!(
            seen.values().all(|(n, _, _)| *n == 1),
            "each processed once"
        );
        let (_, biz, payload) = &seen[&format!("{STREAM}/{}", first_entry_id(&server))];
        assert_eq!((biz.as_str(), payload.as_str()), ("ORDER", "{\"n\":1}"));
    }
    // The 30 SLOW ones wait an hour in the store, not at the broker.
    let ids: Vec<MessageId> = seen
        .lock()
        .unwrap()
        .keys()
        .map(|k| MessageId::from(k.as_str()))
        .collect();
    let rows = tokio::task::spawn_blocking(move || store.retries(&ids).unwrap())
        .await
        .unwrap();
    assert_eq!(rows.len(), 30);
    assert!(
        rows.iter()
            .all(|r| r.message.headers.get("trace").is_some())
    );
    running.shutdown(Duration::from_secs(5)).await;
}

fn first_entry_id(server: &TestServer) -> String {
    let range: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(STREAM)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query(&mut server.client())
        .unwrap();
    range[0].0.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entries_held_unacknowledged_stay_within_the_pending_bound_plus_a_batch() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (_store, durable) = durable(dir.path());
    add(&server, 400);
    let seen = Seen::default();
    // 20 in flight at most, a read batch of 10, 2 ms of work each.
    let mut o = options(&server, "node-1");
    o.max_unacked = 20 + 10;
    let t = topology(
        o,
        Some(durable.clone()),
        seen.clone(),
        20,
        Duration::from_millis(2),
    );
    let running = t.start(durable.seams(hour_retries()));
    let mut most = 0;
    while seen.lock().unwrap().len() < 400 {
        most = most.max(pending(&server));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        most > 0,
        "the test saw nothing pending: it measured nothing"
    );
    assert!(
        most <= 20 + 10,
        "{most} pending at the broker, above 20 + 10"
    );
    until("nothing pending", 30, || pending(&server) == 0).await;
    running.shutdown(Duration::from_secs(5)).await;
}

/// Takes `n` messages from a source directly, as a spout task would, acknowledging none.
async fn take(source: &mut StreamSource, n: usize) -> Vec<Message> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
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
async fn a_restarted_consumer_reads_its_own_pending_first_and_a_dead_one_s_are_taken_over() {
    let server = TestServer::start();
    add(&server, 10);
    let mut a = StreamSource::start(options(&server, "a"), None).unwrap();
    let first = take(&mut a, 10).await;
    drop(a); // a crash: nothing was acknowledged
    assert_eq!(pending(&server), 10);

    // The same consumer, restarted: its own pending entries come first, all of them.
    let mut a = StreamSource::start(options(&server, "a"), None).unwrap();
    let again = take(&mut a, 10).await;
    let ids = |ms: &[Message]| ms.iter().map(|m| m.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&first));
    assert_eq!(
        a.stats()
            .redelivered
            .load(std::sync::atomic::Ordering::Relaxed),
        10
    );
    for m in &again[..4] {
        a.ack(&m.id);
    }
    until("4 acknowledged", 10, || pending(&server) == 6).await;
    drop(a); // dies holding 6

    // Another consumer takes the dead one's 6 once they are idle past its lease.
    let mut o = options(&server, "b");
    o.lease = Duration::from_millis(300);
    let mut b = StreamSource::start(o, None).unwrap();
    let taken = take(&mut b, 6).await;
    assert_eq!(ids(&taken), ids(&first[4..]));
    for m in &taken {
        b.retained(&m.id);
        b.ack(&m.id); // after custody: not acknowledged twice
    }
    until("nothing pending", 10, || pending(&server) == 0).await;
    let stats = b.stats();
    assert_eq!(stats.custody(CustodyAt::Retained), 6);
    assert_eq!(stats.custody(CustodyAt::Acked), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_the_store_holds_is_acknowledged_again_and_not_handed_out() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = durable(dir.path());
    add(&server, 5);
    let mut a = StreamSource::start(options(&server, "a"), Some(durable.clone())).unwrap();
    let read = take(&mut a, 5).await;
    drop(a);
    // Before the crash the store committed the first retry of entries 1 and 2 and the dead
    // letter of entry 3 (their custody acks were lost with the process).
    let retry = |m: &Message| WriteOp::Schedule(ScheduledRetry::new(m.clone(), Timestamp::MAX));
    let letter = rebound_runtime::fate::DeadLetter {
        message: read[2].clone(),
        failure: Failure::new("POISON", "never"),
        label: "L3".into(),
        reason: rebound_runtime::fate::GiveUpReason::GiveUp,
        rule: rebound_runtime::fate::RuleRef::Rule("r".into()),
        version: FixedPolicy::version(),
        at: Timestamp::now(),
    };
    store
        .apply(&[
            retry(&read[0]),
            retry(&read[1]),
            WriteOp::DeadLetter(Box::new(letter)),
        ])
        .unwrap();

    let mut a = StreamSource::start(options(&server, "a"), Some(durable)).unwrap();
    let again = take(&mut a, 2).await;
    let ids: Vec<String> = again.iter().map(|m| m.id.to_string()).collect();
    assert_eq!(ids, [read[3].id.to_string(), read[4].id.to_string()]);
    until("the three in custody acknowledged", 10, || {
        pending(&server) == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        matches!(a.next(), NextMessage::Idle),
        "nothing else is handed out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_and_restarted_from_its_aof_loses_nothing() {
    let mut server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (_store, durable) = durable(dir.path());
    add(&server, 200);
    let seen = Seen::default();
    let t = topology(
        options(&server, "node-1"),
        Some(durable.clone()),
        seen.clone(),
        50,
        Duration::from_millis(3),
    );
    let running = t.start(durable.seams(hour_retries()));
    until("some processed", 30, || seen.lock().unwrap().len() >= 40).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart();
    until("200 processed", 60, || seen.lock().unwrap().len() == 200).await;
    until("nothing pending", 60, || pending(&server) == 0).await;
    // At least once: a delivery in flight at the kill may come again, never lost.
    assert_eq!(seen.lock().unwrap().len(), 200);
    running.shutdown(Duration::from_secs(5)).await;
}
