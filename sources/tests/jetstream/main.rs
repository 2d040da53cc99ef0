//! The JetStream source against a `nats-server -js` of each test's own: the source suite
//! (every case of `sources.md`'s promises, through [`harness::NatsHarness`]), and what only
//! JetStream does: the messages held unacknowledged never above `max_unacked` even when the
//! consumer allows more; a message held past `ack_wait` is kept in progress (`+WPI`), not
//! redelivered; a source started while the server is down says so and reads once it is up.
//!
//! Every wait is on a condition with a generous deadline; nothing asserts on timings.

mod harness;

rebound_runtime::source_suite!(jetstream_suite, harness::NatsHarness);

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::{self, stream};
use rebound_runtime::durable::Durable;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::SqliteStore;
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;
use rebound_sources::NatsServer as TestServer;
use rebound_sources::jetstream::{
    CustodyAt, JetStreamOptions, JetStreamSource, JetStreamUrl, SourceStats,
};

const STREAM: &str = "ORDERS";
const CONSUMER: &str = "rebound";

/// The test's own connection to its server (it reconnects after a restart).
struct Broker {
    server: TestServer,
    js: jetstream::Context,
}

impl Broker {
    /// A server with the stream `ORDERS` on `orders.>`, in files.
    async fn start() -> Broker {
        let server = TestServer::start();
        let client = async_nats::ConnectOptions::new()
            .max_reconnects(None)
            .connect(server.addr())
            .await
            .expect("the test connects to its nats-server");
        let js = jetstream::new(client);
        js.create_stream(stream::Config {
            name: STREAM.into(),
            subjects: vec!["orders.>".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .expect("the stream is created");
        Broker { server, js }
    }

    /// Publishes `n` messages, each acknowledged by the server: every tenth on
    /// `orders.SLOW`, the others on `orders.ORDER`, with a `trace` header and the key of
    /// `Rebound-Key`.
    async fn publish(&self, n: usize) {
        for i in 1..=n {
            let biz = if i % 10 == 0 { "SLOW" } else { "ORDER" };
            let mut headers = HeaderMap::new();
            headers.insert("trace", format!("t-{i}").as_str());
            headers.insert("Rebound-Key", format!("order-{i}").as_str());
            self.js
                .publish_with_headers(
                    format!("orders.{biz}"),
                    headers,
                    format!("{{\"n\":{i}}}").into(),
                )
                .await
                .expect("published")
                .await
                .expect("the server acknowledged the publish");
        }
    }

    /// The consumer's `num_ack_pending`; `None` while the server does not say (the consumer
    /// is not made yet, or the server is restarting).
    async fn ack_pending(&self) -> Option<usize> {
        let stream = self.js.get_stream_no_info(STREAM).await.ok()?;
        stream
            .consumer_info(CONSUMER)
            .await
            .ok()
            .map(|i| i.num_ack_pending)
    }

    /// Makes the consumer as an operator might have, before any source: explicit acks, and a
    /// `max_ack_pending` far above what the source will hold, so that only the source bounds
    /// what is held.
    async fn make_consumer(&self, max_ack_pending: i64) {
        let stream = self.js.get_stream(STREAM).await.expect("the stream");
        stream
            .create_consumer(pull::Config {
                durable_name: Some(CONSUMER.into()),
                ack_policy: AckPolicy::Explicit,
                max_deliver: -1,
                max_ack_pending,
                ack_wait: Duration::from_secs(30),
                ..Default::default()
            })
            .await
            .expect("the consumer is made");
    }

    /// The consumer's delivery count so far (its `delivered.consumer_sequence`: every
    /// delivery and redelivery takes one).
    async fn deliveries(&self) -> Option<u64> {
        let stream = self.js.get_stream_no_info(STREAM).await.ok()?;
        stream
            .consumer_info(CONSUMER)
            .await
            .ok()
            .map(|i| i.delivered.consumer_sequence)
    }

    fn options(&self, ack_wait: Duration) -> JetStreamOptions {
        let url = format!(
            "nats://127.0.0.1:{}/{STREAM}?consumer={CONSUMER}&subject=orders.%3E",
            self.server.port()
        );
        let mut o = JetStreamOptions::new(JetStreamUrl::parse(&url).expect("the URL parses"));
        o.batch = 10;
        o.block = Duration::from_millis(100);
        o.ack_wait = ack_wait;
        o.biz_token = NonZeroUsize::new(2);
        o
    }
}

fn durable(dir: &std::path::Path) -> (Arc<SqliteStore>, Durable) {
    let store = Arc::new(SqliteStore::open(dir).expect("the SQLite store opens"));
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        Default::default(),
    );
    (store, durable)
}

/// Deliveries seen per message id, and the biz, key and payload of each.
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

/// The stats of the source the topology made, once it made it.
type StatsSlot = Arc<Mutex<Option<Arc<SourceStats>>>>;

fn topology(
    options: JetStreamOptions,
    durable: Option<Durable>,
    seen: Seen,
    pending: usize,
    work: Duration,
    stats: StatsSlot,
) -> Topology {
    let mut b = TopologyBuilder::new("jetstream");
    b.config(Config {
        max_spout_pending: pending,
        ..Config::default()
    });
    b.spout("orders", 1, move |_| {
        let source =
            JetStreamSource::start(options.clone(), durable.clone()).expect("the source starts");
        *stats.lock().unwrap() = Some(source.stats());
        source
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

/// Waits until `done`, failing with `what` after `secs`.
async fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the consumer's `num_ack_pending` is `n`.
async fn until_ack_pending(broker: &Broker, n: usize, secs: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let now = broker.ack_pending().await;
        if now == Some(n) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: num_ack_pending is {now:?}, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_held_unacknowledged_stay_within_max_unacked() {
    let broker = Broker::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (_store, durable) = durable(dir.path());
    // The server would let 10,000 be pending: the bound is the source's own.
    broker.make_consumer(10_000).await;
    broker.publish(400).await;
    let seen = Seen::default();
    let slot = StatsSlot::default();
    // 20 in flight at most, a fetch of 10, 2 ms of work each.
    let mut o = broker.options(Duration::from_secs(30));
    o.max_unacked = 20 + 10;
    let t = topology(
        o,
        Some(durable.clone()),
        seen.clone(),
        20,
        Duration::from_millis(2),
        slot.clone(),
    );
    let running = t.start(durable.seams(hour_retries()));
    let (mut most, mut most_lag) = (0, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while seen.lock().unwrap().len() < 400 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: 400 processed"
        );
        if let Some(n) = broker.ack_pending().await {
            most = most.max(n);
        }
        if let Some(stats) = slot.lock().unwrap().as_ref() {
            most_lag = most_lag.max(stats.lag.load(Relaxed));
        }
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
    assert!(most_lag > 0, "the source never said what is waiting");
    until_ack_pending(&broker, 0, 60).await;
    running.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_held_past_ack_wait_is_kept_in_progress_not_redelivered() {
    let broker = Broker::start().await;
    broker.publish(3).await;
    // +WPI goes out between 3 and 3.75 s after each delivery, well before the 6 s.
    let mut source = JetStreamSource::start(broker.options(Duration::from_secs(6)), None).unwrap();
    let held = take(&mut source, 3).await;
    until_ack_pending(&broker, 3, 30).await;
    // More than two ack_waits.
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert_eq!(
        broker.deliveries().await,
        Some(3),
        "nothing was redelivered"
    );
    assert_eq!(broker.ack_pending().await, Some(3));
    assert!(matches!(source.next(), NextMessage::Idle));
    let stats = source.stats();
    assert_eq!(stats.redelivered.load(Relaxed), 0);
    for m in &held {
        source.ack(&m.id);
    }
    until_ack_pending(&broker, 0, 30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_started_while_the_server_is_down_says_so_and_reads_once_it_is_up() {
    let mut broker = Broker::start().await;
    broker.publish(5).await;
    broker.server.kill();
    let mut source = JetStreamSource::start(broker.options(Duration::from_secs(30)), None).unwrap();
    let stats = source.stats();
    until("the source says the broker is unreachable", 30, || {
        stats.unreachable_since().is_some()
    })
    .await;
    assert!(matches!(source.next(), NextMessage::Idle));
    broker.server.restart();
    let got = take(&mut source, 5).await;
    assert_eq!(
        ids(&got),
        (1..=5)
            .map(|n| format!("{STREAM}/{n}"))
            .collect::<BTreeSet<_>>()
    );
    assert_eq!(stats.unreachable_since(), None);
    for m in &got {
        source.dead_lettered(&m.id);
    }
    until_ack_pending(&broker, 0, 30).await;
    assert_eq!(stats.custody(CustodyAt::DeadLettered), 5);
}

/// Takes `n` messages from a source directly, as a spout task would, acknowledging none.
async fn take(source: &mut JetStreamSource, n: usize) -> Vec<Message> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
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

fn ids(messages: &[Message]) -> BTreeSet<String> {
    messages.iter().map(|m| m.id.to_string()).collect()
}
