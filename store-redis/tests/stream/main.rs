//! The Redis Streams source against a `redis-server` of the test's own: the source suite
//! (`rebound_runtime::sources::conformance`, every case of `sources.md`'s promises) over
//! [`harness::RedisHarness`], and what only Redis Streams does: a restarted consumer reads its
//! own pending entries first, and a dead one's are taken over after the lease (`XAUTOCLAIM`).

mod harness;
mod store_acks;

use std::time::Duration;

use harness::RedisHarness;
use rebound_runtime::sources::conformance::SourceHarness;
use rebound_runtime::topology::*;
use rebound_store_redis::stream::{CustodyAt, StreamSource};

rebound_runtime::source_suite!(redis_streams, RedisHarness);

fn add(h: &RedisHarness, n: usize) {
    for i in 1..=n {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
}

fn options(h: &RedisHarness, consumer: &str) -> rebound_store_redis::stream::StreamOptions {
    let mut o = h.options(consumer);
    o.batch = 10;
    o
}

async fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let h = RedisHarness::start();
    add(&h, 10);
    let mut a = StreamSource::start(options(&h, "a"), None).unwrap();
    let first = take(&mut a, 10).await;
    drop(a); // a crash: nothing was acknowledged
    assert_eq!(h.unacked(), 10);

    // The same consumer, restarted: its own pending entries come first, all of them.
    let mut a = StreamSource::start(options(&h, "a"), None).unwrap();
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
    until("4 acknowledged", 10, || h.unacked() == 6).await;
    drop(a); // dies holding 6

    // Another consumer takes the dead one's 6 once they are idle past its lease.
    let mut o = options(&h, "b");
    o.lease = Duration::from_millis(300);
    let mut b = StreamSource::start(o, None).unwrap();
    let taken = take(&mut b, 6).await;
    assert_eq!(ids(&taken), ids(&first[4..]));
    for m in &taken {
        b.retained(&m.id);
        b.ack(&m.id); // after custody: not acknowledged twice
    }
    until("nothing pending", 10, || h.unacked() == 0).await;
    let stats = b.stats();
    assert_eq!(stats.custody(CustodyAt::Retained), 6);
    assert_eq!(stats.custody(CustodyAt::Acked), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_flight_past_the_lease_stays_with_its_consumer() {
    let h = RedisHarness::start();
    add(&h, 3);
    let lease = Duration::from_millis(300);
    let mut o = options(&h, "a");
    o.lease = lease;
    let mut a = StreamSource::start(o, None).unwrap();
    let held = take(&mut a, 3).await;
    // b looks for idle entries every half lease; a is alive and keeps its three.
    let mut o = options(&h, "b");
    o.lease = lease;
    let mut b = StreamSource::start(o, None).unwrap();
    let until = tokio::time::Instant::now() + lease * 6;
    while tokio::time::Instant::now() < until {
        assert!(
            matches!(b.next(), NextMessage::Idle),
            "b took over a message a still holds"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for m in &held {
        a.ack(&m.id);
    }
    until_done(&h).await;
}

async fn until_done(h: &RedisHarness) {
    until("nothing pending", 10, || h.unacked() == 0).await;
}
