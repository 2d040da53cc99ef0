//! `rebound relay` on Kafka, end to end (feature `kafka`): the real binary, librdkafka's mock
//! cluster inside this test process (no Kafka broker can be installed here; the relay reaches
//! the mock's loopback listeners like any broker), a handler of the test's own. Every record
//! ends acked by the handler or dead-lettered, each dead letter is also published to a Kafka
//! topic with its headers, and the group's committed offset reaches the end of every
//! partition (Kafka holds nothing for Rebound), retries that wait an hour included.

use std::collections::BTreeSet;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rebound_sources::KafkaMock;

use super::redis_stream::rules_dir;
use super::support::{Answer, HandlerServer, Relay, n_of, within};

const PARTITIONS: i32 = 3;

/// `n` records on `orders`, each with `rebound-biz: PAYMENT`, the key `order-N` and the value
/// `{"n":N}`, all delivered.
fn orders(mock: &KafkaMock, n: usize) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap())
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    for i in 0..n {
        let (key, value) = (format!("order-{i}"), format!("{{\"n\":{i}}}"));
        let headers = OwnedHeaders::new().insert(Header {
            key: "rebound-biz",
            value: Some("PAYMENT"),
        });
        producer
            .send(
                BaseRecord::to("orders")
                    .key(&key)
                    .payload(&value)
                    .headers(headers),
            )
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// A client of the mock that only asks (it never joins the group).
fn looker(mock: &KafkaMock) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap())
        .set("group.id", "rebound")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap()
}

/// Whether the group `rebound` committed every partition of `orders` to its end.
fn all_committed(c: &BaseConsumer) -> bool {
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition("orders", p);
    }
    let Ok(committed) = c.committed_offsets(tpl, Duration::from_secs(5)) else {
        return false;
    };
    committed.elements().iter().all(|e| {
        let high = c
            .fetch_watermarks("orders", e.partition(), Duration::from_secs(5))
            .map_or(-1, |(_, h)| h);
        e.offset() == Offset::Offset(high)
    })
}

/// The records on the `dead` topic so far: (key, headers as pairs, value).
type Letter = (String, Vec<(String, String)>, String);

fn letters(reader: &BaseConsumer, got: &mut Vec<Letter>) {
    while let Some(Ok(m)) = reader.poll(Duration::from_millis(100)) {
        let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), text(h.value)))
                    .collect()
            })
            .unwrap_or_default();
        got.push((text(m.key()), headers, text(m.payload())));
    }
}

#[test]
fn a_kafka_group_member_commits_past_every_fate_and_publishes_its_dead_letters() {
    let mock = KafkaMock::start(1);
    mock.create_topic("orders", PARTITIONS);
    mock.create_topic("dead", 1);
    orders(&mock, 40);
    // n % 10 == 3: declined (a dead letter at once); n % 10 == 5: slow (its retry waits an
    // hour); n % 10 == 7: processing on its first attempt (retried soon); the rest acked.
    let handler = HandlerServer::start(|r| match n_of(r) % 10 {
        3 => Answer::code(422, "PAY_FAILED"),
        5 => Answer::code(503, "SLOW"),
        7 if r.header("rebound-attempt") == "1" => Answer::code(503, "PAY_PROCESSING"),
        _ => Answer::ok(),
    });
    let (rules, data, dir) = (
        rules_dir(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let config = dir.path().join("relay.yaml");
    std::fs::write(
        &config,
        format!(
            "dead_letters:\n  publish: kafka://{}/dead\n",
            mock.bootstrap()
        ),
    )
    .unwrap();
    let url = format!("kafka://{}/orders?group=rebound", mock.bootstrap());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &[
            "--source",
            &url,
            "--handler",
            &handler.url(),
            "--config",
            &config.display().to_string(),
        ],
    );
    let looker = looker(&mock);
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap())
        .set("group.id", "test-reader")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("dead", 0, Offset::Beginning)
        .unwrap();
    reader.assign(&tpl).unwrap();
    let settled = |n: usize, code: u16| {
        handler
            .received()
            .iter()
            .filter(|r| r.status == code)
            .map(n_of)
            .collect::<BTreeSet<_>>()
            .len()
            == n
    };
    let mut dead = Vec::new();
    assert!(
        within(Duration::from_secs(60), || {
            letters(&reader, &mut dead);
            // 28 acked at once, 4 after their retry; 4 declined; 4 waiting an hour.
            settled(32, 200) && settled(4, 422) && dead.len() == 4 && all_committed(&looker)
        }),
        "{} letters published, committed to the end: {}\n{}",
        dead.len(),
        all_committed(&looker),
        relay.stderr()
    );
    let received = handler.received();
    assert!(
        received
            .iter()
            .all(|r| r.header("rebound-biz") == "PAYMENT")
    );
    assert!(
        received
            .iter()
            .all(|r| r.header("rebound-message-id").starts_with("orders/"))
    );
    assert!(
        received
            .iter()
            .all(|r| r.header("rebound-key") == format!("order-{}", n_of(r))),
        "the record key is the ordering key"
    );
    // The letters: the declined ones, with their headers, keyed by the message id.
    let declined: BTreeSet<String> = received
        .iter()
        .filter(|r| r.status == 422)
        .map(|r| r.header("rebound-message-id").to_owned())
        .collect();
    let keys: BTreeSet<String> = dead.iter().map(|(k, _, _)| k.clone()).collect();
    assert_eq!(keys, declined);
    for (key, headers, value) in &dead {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("rebound-id"), Some(key.as_str()));
        assert_eq!(header("rebound-code"), Some("PAY_FAILED"));
        assert_eq!(header("rebound-label"), Some("L3"));
        assert_eq!(header("rebound-biz"), Some("PAYMENT"));
        assert!(value.starts_with("{\"n\":"), "{value}");
    }
    let metrics = relay.get("/metrics");
    for line in [
        "rebound_source_received_total{source=\"orders\"} 40",
        "rebound_source_custody_total{source=\"orders\",at=\"dead_lettered\"} 4",
        "rebound_source_unacked{source=\"orders\"} 0",
        "rebound_dead_letters_published_total{result=\"published\"} 4",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    let (status, stdout, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
    assert!(stdout.contains("dead-lettered  4"), "{stdout}");
    assert!(
        stdout.contains("in custody     40 acknowledged to the broker"),
        "{stdout}"
    );
    assert!(
        stdout.contains("4 retries waiting in the store"),
        "{stdout}"
    );
}
