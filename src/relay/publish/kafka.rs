//! Publishing to a Kafka topic (feature `kafka`): the payload as the value, the message id as
//! the key (a letter's partition is the same each time it is sent), the `rebound-*` headers;
//! an idempotent producer with `acks=all`, each letter's delivery report awaited. A letter
//! sent again after a report that did not come may reach the topic twice (at-least-once).

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rebound_runtime::store::DeadLetter;

use super::fields::letter_headers;

/// How long librdkafka tries one letter before it reports a failure (the worker then tries
/// it again, after its own wait).
const DELIVERY: Duration = Duration::from_secs(10);

/// A Kafka topic letters are published to.
pub(super) struct KafkaSink {
    producer: FutureProducer,
    topic: String,
}

impl KafkaSink {
    /// A producer of `brokers` (it connects in the background, and reconnects without end).
    pub(super) fn new(brokers: &str, topic: &str) -> Result<KafkaSink, String> {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("client.id", "rebound dead letters")
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", DELIVERY.as_millis().to_string())
            .set("linger.ms", "5")
            .create()
            .map_err(|e| format!("the Kafka producer could not be made: {e}"))?;
        Ok(KafkaSink {
            producer,
            topic: topic.to_owned(),
        })
    }

    /// Publishes `letter` and waits for its delivery report.
    pub(super) async fn send(&mut self, letter: &DeadLetter) -> Result<(), String> {
        let fields = letter_headers(letter);
        let mut headers = OwnedHeaders::new_with_capacity(fields.len());
        for (name, value) in &fields {
            headers = headers.insert(Header {
                key: name,
                value: Some(value.as_str()),
            });
        }
        let id = letter.id();
        let record = FutureRecord::to(&self.topic)
            .key(id.as_str())
            .payload(&letter.message.payload[..])
            .headers(headers);
        match self.producer.send(record, Duration::ZERO).await {
            Ok(_) => Ok(()),
            Err((e, _)) => Err(format!("not delivered: {e}")),
        }
    }
}
