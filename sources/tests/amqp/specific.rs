//! What only RabbitMQ does: a message without a `message-id` dead-lettered at once (code
//! `NO_MESSAGE_ID`) and acknowledged; a broker killed with SIGKILL while the source holds
//! messages handed out (none handed out twice after the restart, a custody that came during
//! the outage acknowledged at the redelivery); a source started while the broker is down
//! says so and reads once it is up; the dead-letter publisher's returned letter
//! (`mandatory`, no queue bound) counted as not published until a queue is bound.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use lapin::ExchangeKind;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use rebound_runtime::durable::Durable;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::sources::conformance::SourceHarness;
use rebound_runtime::store::{DeadLetterFilter, SqliteStore, Store};
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;
use rebound_sources::amqp::{
    AmqpOptions, AmqpPublisher, AmqpSource, AmqpUrl, CustodyAt, NO_MESSAGE_ID, Published,
};

use super::harness::{QUEUE, RabbitHarness};

async fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn source(h: &RabbitHarness, durable: Option<Durable>) -> AmqpSource {
    AmqpSource::start(AmqpOptions::new(h.source_url()), durable).expect("the source starts")
}

/// Takes what the source hands out for `secs` or until `n` came.
async fn take(source: &mut AmqpSource, n: usize, secs: u64) -> Vec<Message> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while got.len() < n && tokio::time::Instant::now() < deadline {
        match source.next() {
            NextMessage::Ready(m) => got.push(m),
            NextMessage::Refused(m, f) => panic!("{} refused: {f:?}", m.id),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    got
}

struct Ok_;

impl Bolt for Ok_ {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_a_message_id_is_dead_lettered_at_once_and_acknowledged() {
    let h = RabbitHarness::start();
    h.publish("ORDER", None, "{\"n\":1}");
    h.run(async {
        h.publisher()
            .await
            .publish(None, &[("rebound-biz", "ORDER")], QUEUE, b"{\"n\":2}")
            .await;
    });
    h.publish("ORDER", None, "{\"n\":3}");
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        Default::default(),
    );
    let s = source(&h, Some(durable.clone()));
    let stats = s.stats();
    let mut b = TopologyBuilder::new("no-id");
    let s = std::sync::Mutex::new(Some(s));
    b.spout("s", 1, move |_| s.lock().unwrap().take().unwrap());
    b.bolt("ok", 1, |_| Ok_).shuffle("s");
    let running = b
        .build()
        .unwrap()
        .start(durable.seams(FixedPolicy::default()));
    until("three in custody", 60, || {
        stats.custody(CustodyAt::Acked) == 2 && stats.custody(CustodyAt::DeadLettered) == 1
    })
    .await;
    until("the queue empty", 60, || {
        h.server.queue_messages(QUEUE) == Some(0)
    })
    .await;
    let store2 = store.clone();
    let letters = tokio::task::spawn_blocking(move || {
        store2
            .dead_letters(&DeadLetterFilter::default())
            .unwrap()
            .items
    })
    .await
    .unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0].letter;
    assert_eq!(letter.failure.code, NO_MESSAGE_ID);
    assert!(
        letter
            .message
            .id
            .as_str()
            .starts_with("orders/no-message-id/"),
        "{}",
        letter.message.id
    );
    assert_eq!(&letter.message.payload[..], b"{\"n\":2}");
    assert_eq!(letter.message.retry.attempt, 0, "never delivered");
    running.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_while_messages_are_held_hands_none_out_twice() {
    let mut h = RabbitHarness::start();
    for i in 1..=5 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let mut s = source(&h, None);
    let stats = s.stats();
    let first = take(&mut s, 5, 30).await;
    assert_eq!(first.len(), 5);
    h.kill();
    until("the source sees the broker gone", 60, || {
        stats.unreachable_since().is_some()
    })
    .await;
    // Custody of two while the broker is down: owed, acknowledged when they come back.
    s.ack(&first[0].id);
    s.ack(&first[1].id);
    h.restart();
    // Delivered again (a broker killed with SIGKILL may not flag them `redelivered`: its
    // index writes the flag behind), the two owed acknowledged at once.
    until(
        "the five delivered again and the two owed acknowledged",
        90,
        || stats.received.load(Relaxed) >= 10 && h.unacked() == 3,
    )
    .await;
    assert!(
        take(&mut s, 1, 2).await.is_empty(),
        "nothing is handed out a second time"
    );
    for m in &first[2..] {
        s.ack(&m.id);
    }
    until("the queue empty", 60, || {
        h.server.queue_messages(QUEUE) == Some(0)
    })
    .await;
    assert_eq!(stats.unreachable_since(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_started_while_the_broker_is_down_reads_once_it_is_up() {
    let mut h = RabbitHarness::start();
    h.kill();
    let mut s = source(&h, None);
    let stats = s.stats();
    until("the source says the broker is unreachable", 60, || {
        stats.unreachable_since().is_some()
    })
    .await;
    h.restart();
    h.publish("ORDER", None, "{\"n\":1}");
    let got = take(&mut s, 1, 60).await;
    assert_eq!(got.len(), 1, "read once the broker is up");
    s.ack(&got[0].id);
    until("acknowledged", 30, || {
        h.server.queue_messages(QUEUE) == Some(0)
    })
    .await;
    assert_eq!(stats.unreachable_since(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_letter_returned_for_want_of_a_bound_queue_is_not_published_until_one_is_bound() {
    let h = RabbitHarness::start();
    let channel = h.publisher_channel().await;
    channel
        .exchange_declare(
            "dead".into(),
            ExchangeKind::Fanout,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let url = AmqpUrl::parse(&format!("{}?exchange=dead", h.server.url())).unwrap();
    let mut publisher = AmqpPublisher::new(url).unwrap();
    let headers = vec![("rebound-code".to_owned(), "PAY_FAILED".to_owned())];
    assert_eq!(
        publisher.publish("order-1", &headers, b"{\"n\":1}").await,
        Ok(Published::Unroutable)
    );
    channel
        .queue_declare(
            "dead-letters".into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
        .queue_bind(
            "dead-letters".into(),
            "dead".into(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        publisher.publish("order-1", &headers, b"{\"n\":1}").await,
        Ok(Published::Confirmed)
    );
    let got = channel
        .basic_get("dead-letters".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("the letter is in the bound queue");
    let p = &got.delivery.properties;
    assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("order-1"));
    assert_eq!(*p.delivery_mode(), Some(2), "persistent");
    let code = p
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("rebound-code").cloned());
    assert!(
        matches!(&code, Some(AMQPValue::LongString(s)) if s.as_bytes() == b"PAY_FAILED"),
        "{code:?}"
    );
    assert_eq!(&got.delivery.data[..], b"{\"n\":1}");
    assert!(
        channel
            .basic_get("dead-letters".into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
            .is_none(),
        "the returned attempt was not delivered: one letter in the queue"
    );
}
