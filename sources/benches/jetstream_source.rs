//! The JetStream source alone (a no-op bolt) against a hand-written consumer loop in the same
//! process and run, on a `nats-server -js` of its own: both fetch from a durable pull consumer
//! with async-nats in batches of 100 and acknowledge every message with a double ack (the ack
//! the server confirms, as custody needs). Rounds alternate, each on a fresh stream of 20,000
//! messages; the best round of each and their ratio are printed (the target: 0.8 or better).
//!
//! ```sh
//! cargo bench -p rebound-sources --bench jetstream_source
//! ```
//!
//! Measured on the 2-core dev machine (best of 3 rounds): source 50,246/s against the loop's
//! 60,120/s (0.84). With room for one batch, the reader slept 5 ms whenever the spout's
//! channel was full and fetched only what room was left: 8,270/s (0.14).
#![allow(missing_docs)]

#[allow(dead_code)] // the tests use all of it; the bench, not restart
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::{self, stream};
use futures_util::StreamExt;
use rebound_runtime::fate::Seams;
use rebound_runtime::topology::*;
use rebound_sources::NatsServer as TestServer;
use rebound_sources::jetstream::{JetStreamOptions, JetStreamSource, JetStreamUrl};

const MESSAGES: u64 = 20_000;
const BATCH: usize = 100;
const ROUNDS: usize = 3;

async fn fill(js: &jetstream::Context, stream_name: &str, n: u64) {
    js.create_stream(stream::Config {
        name: stream_name.into(),
        subjects: vec![format!("{stream_name}.>")],
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .unwrap();
    let mut acks = Vec::new();
    for i in 0..n {
        let ack = js
            .publish(
                format!("{stream_name}.ORDER"),
                format!("{{\"n\":{i}}}").into(),
            )
            .await
            .unwrap();
        acks.push(ack);
        if acks.len() == 1000 {
            for a in acks.drain(..) {
                a.await.unwrap();
            }
        }
    }
    for a in acks {
        a.await.unwrap();
    }
}

async fn hand_loop(js: &jetstream::Context, stream_name: &str, n: u64) -> Duration {
    let stream = js.get_stream(stream_name).await.unwrap();
    let consumer: async_nats::jetstream::consumer::Consumer<pull::Config> = stream
        .create_consumer(pull::Config {
            durable_name: Some("loop".into()),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .unwrap();
    let started = Instant::now();
    let mut done = 0;
    while done < n {
        let mut batch = consumer
            .fetch()
            .max_messages(BATCH)
            .messages()
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some(m) = batch.next().await {
            got.push(m.unwrap());
        }
        let acks = got.iter().map(|m| m.double_ack());
        for r in futures_util::future::join_all(acks).await {
            r.unwrap();
        }
        done += got.len() as u64;
    }
    started.elapsed()
}

struct Noop;

impl Bolt for Noop {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        Ok(())
    }
}

async fn source(server: &TestServer, stream_name: &str, n: u64) -> Duration {
    let url = format!(
        "nats://127.0.0.1:{}/{stream_name}?consumer=source",
        server.port()
    );
    let mut o = JetStreamOptions::new(JetStreamUrl::parse(&url).unwrap());
    o.batch = BATCH;
    o.max_unacked = 1_000 + BATCH as u64;
    let stats = o.stats.clone();
    let mut b = TopologyBuilder::new("bench");
    b.spout("s", 1, move |_| {
        JetStreamSource::start(o.clone(), None).unwrap()
    });
    b.bolt("noop", 1, |_| Noop).shuffle("s");
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
        "  custody ack, from the spout's ack to the server's confirmation: p50 {}, p99 {}",
        q(0.5),
        q(0.99)
    );
    took
}

fn per_s(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = TestServer::start();
    let client = async_nats::connect(server.addr()).await.unwrap();
    let js = jetstream::new(client);
    let (mut src, mut hand) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let s = format!("SRC{round}");
        fill(&js, &s, MESSAGES).await;
        src.push(per_s(MESSAGES, source(&server, &s, MESSAGES).await));
        let h = format!("LOOP{round}");
        fill(&js, &h, MESSAGES).await;
        hand.push(per_s(MESSAGES, hand_loop(&js, &h, MESSAGES).await));
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
}
