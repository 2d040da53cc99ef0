//! `--store redis` on the stream's own server (`sources.md`, the Redis Streams row): the store
//! acknowledges an entry in the same script as the write that takes custody of it (a retry's
//! schedule, a dead letter), and the source sends no `XACK` of its own for those; a first
//! delivery's ack is still the source's.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use rebound_runtime::durable::{Durable, DurableOptions, SharedOptions};
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::sources::conformance::SourceHarness;
use rebound_runtime::store::Store;
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;
use rebound_store_redis::stream::{CustodyAt, StreamSource};
use rebound_store_redis::{RedisOptions, RedisStore, StreamCustody};

use super::harness::{GROUP, RedisHarness, STREAM};
use super::until;

/// Fails every delivery of an odd message (code `DOWN`); acks the even ones.
struct FailsOdd;

impl Bolt for FailsOdd {
    fn execute(&mut self, tuple: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let payload = tuple.field("payload").and_then(Value::as_bytes);
        let n: u64 = std::str::from_utf8(payload.map_or(&b""[..], |p| &p[..]))
            .ok()
            .and_then(|p| {
                p.trim_start_matches("{\"n\":")
                    .trim_end_matches('}')
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        if n % 2 == 1 {
            Err(Failure::new("DOWN", "the downstream is down"))
        } else {
            Ok(())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_acks_what_it_takes_custody_of_in_its_own_script() {
    let h = RedisHarness::start();
    for i in 1..=40 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let store =
        Arc::new(RedisStore::connect(&RedisOptions::new(h.server.url(), "acks")).expect("connect"));
    assert!(store.ack_custody_of(StreamCustody {
        stream: STREAM.into(),
        group: GROUP.into(),
    }));
    let durable = Durable::shared(
        store.clone(),
        store.clone(),
        Arc::new(TokioTime::new()),
        DurableOptions::default(),
        SharedOptions::new("node-1", Duration::from_secs(10)),
    );
    let mut options = h.options("node-1");
    options.batch = 10;
    options.store_acks = true;
    let stats = options.stats.clone();
    let source = StreamSource::start(options, Some(durable.clone())).unwrap();
    let source = std::sync::Mutex::new(Some(source));
    let mut b = TopologyBuilder::new("store-acks");
    b.spout("src", 1, move |_| source.lock().unwrap().take().unwrap());
    b.bolt("work", 1, |_| FailsOdd).shuffle("src");
    // Odd messages: the first retry waits an hour.
    let policy = FixedPolicy {
        max_attempts: 5,
        base_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
        ..FixedPolicy::default()
    };
    let running = b.build().unwrap().start(durable.seams(policy));
    until("20 acked and 20 retained", 30, || {
        stats.custody(CustodyAt::Acked) == 20 && stats.custody(CustodyAt::Retained) == 20
    })
    .await;
    until("the group holds nothing", 30, || h.unacked() == 0).await;
    // The source's acker confirmed only the 20 first-delivery acks: the 20 retained entries
    // were acknowledged by the store's script.
    until("20 acks confirmed by the source", 30, || {
        stats.acked_at_broker.load(Relaxed) == 20
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stats.acked_at_broker.load(Relaxed), 20);
    assert_eq!(
        store.scheduled().unwrap().len(),
        20,
        "20 retries wait in the store"
    );
    running.shutdown(Duration::from_secs(5)).await;
}
