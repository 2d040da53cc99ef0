//! The RabbitMQ source alone (a no-op bolt) against a hand-written lapin consumer in the same
//! process and run, on a `rabbitmq-server` of its own: both consume a durable queue of
//! persistent messages with `basic.qos` 1,100 and acknowledge every message with its own
//! `basic.ack` (custody acks one message at a time, in any order: never `multiple`), the loop
//! taking what has arrived and acknowledging it at once, concurrently, as the source's session
//! does. (A loop awaiting each ack before the next delivery made 38,782/s where the source made
//! 69,016/s.) Rounds
//! alternate, each on a fresh queue of 20,000 messages; the best round of each and their ratio
//! are printed (the target: 0.8 or better).
//!
//! Then the row's own measure: 10,000 messages through the source and a SQLite store, every
//! tenth failing once with a retry an hour away; the queue's unacknowledged count (the
//! broker's, sampled every 100 ms) stays within the pending bound (`max_spout_pending` 1,000,
//! prefetch 1,100) and ends at 0 while the 1,000 retries wait in the store.
//!
//! ```sh
//! cargo bench -p rebound-sources --bench amqp_source
//! ```
//!
//! Measured on the 2-core dev machine (best of 3 rounds; rounds vary by a third with the
//! machine's load): source 58,951/s against the loop's 68,349/s (0.86; an earlier run 72,318/s
//! against 66,407/s, 1.09). Hour-long retries: the queue's unacked at most 516 (bound 1,100),
//! 0 at the end with 1,000 retries in the store, 15,901 msgs/s through the SQLite store.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use rebound_runtime::durable::Durable;
use rebound_runtime::fate::Seams;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::{SqliteStore, Store};
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;
use rebound_sources::RabbitServer;
use rebound_sources::amqp::{AmqpOptions, AmqpSource, AmqpUrl};

const MESSAGES: u64 = 20_000;
const PREFETCH: u16 = 1_100;
const ROUNDS: usize = 3;

async fn channel(server: &RabbitServer) -> (Connection, Channel) {
    let c = Connection::connect(&server.url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    (c, ch)
}

async fn fill(server: &RabbitServer, queue: &str, n: u64) {
    let (_c, ch) = channel(server).await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let mut confirms = Vec::new();
    for i in 0..n {
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("m-{i}").into());
        let c = ch
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                format!("{{\"n\":{i}}}").as_bytes(),
                props,
            )
            .await
            .unwrap();
        confirms.push(c);
        if confirms.len() == 1000 {
            for c in confirms.drain(..) {
                c.await.unwrap();
            }
        }
    }
    for c in confirms {
        c.await.unwrap();
    }
}

async fn hand_loop(server: &RabbitServer, queue: &str, n: u64) -> Duration {
    let (_c, ch) = channel(server).await;
    ch.basic_qos(PREFETCH, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = ch
        .basic_consume(
            queue.into(),
            "loop".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let started = Instant::now();
    let mut done = 0;
    while done < n {
        // What is there now, acknowledged at once, each by its own tag (as the source does).
        let mut tags = vec![consumer.next().await.unwrap().unwrap().delivery_tag];
        while tags.len() < 256 {
            match consumer.next().now_or_never() {
                Some(Some(d)) => tags.push(d.unwrap().delivery_tag),
                _ => break,
            }
        }
        let acks = tags
            .iter()
            .map(|&tag| ch.basic_ack(tag, BasicAckOptions::default()));
        for r in futures_util::future::join_all(acks).await {
            r.unwrap();
        }
        done += tags.len() as u64;
    }
    started.elapsed()
}

struct Answering(fn(&Tuple) -> Result<(), Failure>);

impl Bolt for Answering {
    fn execute(&mut self, t: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        (self.0)(t)
    }
}

fn options(server: &RabbitServer, queue: &str, max_unacked: u64) -> AmqpOptions {
    let url = AmqpUrl::parse(&format!("{}?queue={queue}", server.url())).unwrap();
    let mut o = AmqpOptions::new(url);
    o.max_unacked = max_unacked;
    o
}

async fn source(server: &RabbitServer, queue: &str, n: u64) -> Duration {
    let o = options(server, queue, u64::from(PREFETCH));
    let stats = o.stats.clone();
    let mut b = TopologyBuilder::new("bench");
    b.spout("s", 1, move |_| AmqpSource::start(o.clone(), None).unwrap());
    b.bolt("noop", 1, |_| Answering(|_| Ok(()))).shuffle("s");
    let started = Instant::now();
    let running = b.build().unwrap().start(Seams::in_memory());
    while stats.acked_at_broker.load(Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    running.shutdown(Duration::from_secs(5)).await;
    let custody = stats.custody_latency();
    let q = |q: f64| custody.quantile(q).map_or("-".into(), |d| format!("{d:?}"));
    println!(
        "  custody ack, from the spout's ack to the basic.ack written: p50 {}, p99 {}",
        q(0.5),
        q(0.99)
    );
    took
}

/// Every tenth message fails its first delivery; its retry waits an hour in the store.
fn tenth_waits(t: &Tuple) -> Result<(), Failure> {
    let n: u64 = t
        .str("id")
        .and_then(|id| id.strip_prefix("m-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    if n.is_multiple_of(10) && t.int("attempt").unwrap_or(1) == 1 {
        return Err(Failure::new("LATER", "in an hour"));
    }
    Ok(())
}

async fn hour_long_retries(server: &RabbitServer) {
    const N: u64 = 10_000;
    const PENDING: usize = 1_000;
    fill(server, "retries", N).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        Default::default(),
    );
    let o = options(server, "retries", (PENDING + 100) as u64);
    let stats = o.stats.clone();
    let d = durable.clone();
    let mut b = TopologyBuilder::new("retries");
    b.config(Config {
        max_spout_pending: PENDING,
        ..Config::default()
    });
    b.spout("s", 1, move |_| {
        AmqpSource::start(o.clone(), Some(d.clone())).unwrap()
    });
    b.bolt("handler", 1, |_| Answering(tenth_waits))
        .shuffle("s");
    let policy = FixedPolicy {
        base_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
        ..FixedPolicy::default()
    };
    let started = Instant::now();
    let running = b.build().unwrap().start(durable.seams(policy));
    let mut most = 0;
    let mut last = (u64::MAX, u64::MAX);
    while started.elapsed() < Duration::from_secs(300) {
        if let Some(counts) = server.queue_counts("retries") {
            most = most.max(counts.0);
            last = counts;
        }
        if stats.acked_at_broker.load(Relaxed) >= N && last == (0, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    running.shutdown(Duration::from_secs(5)).await;
    let waiting = store.scheduled().unwrap().len();
    println!(
        "hour-long retries: {N} messages, every tenth retried in an hour: the queue's unacked \
         at most {most} (bound: max_spout_pending {PENDING}, prefetch {}), at the end {} \
         unacked and {} in the queue, {waiting} retries waiting in the store; {:.0} msgs/s",
        PENDING + 100,
        last.0,
        last.1,
        N as f64 / took.as_secs_f64()
    );
}

fn per_s(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = RabbitServer::start();
    let (mut src, mut hand) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let s = format!("src{round}");
        fill(&server, &s, MESSAGES).await;
        src.push(per_s(MESSAGES, source(&server, &s, MESSAGES).await));
        let h = format!("loop{round}");
        fill(&server, &h, MESSAGES).await;
        hand.push(per_s(MESSAGES, hand_loop(&server, &h, MESSAGES).await));
        println!(
            "round {round}: source {:.0}/s, hand loop {:.0}/s",
            src[round], hand[round]
        );
    }
    let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!(
        "best: source {:.0}/s, hand loop {:.0}/s, ratio {:.2} (target 0.8 or better)",
        best(&src),
        best(&hand),
        best(&src) / best(&hand)
    );
    hour_long_retries(&server).await;
}
