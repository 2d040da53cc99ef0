//! The source suite's harness for Kafka: librdkafka's mock cluster ([`KafkaMock`], inside the
//! test process: no Kafka broker can be installed here), the topic `orders` of three
//! partitions, and the group `rebound`. Publishing goes through an idempotent producer with
//! `acks=all`, each record's delivery awaited.
//!
//! What the suite calls unacknowledged is, for Kafka, what a new member of the group would be
//! handed again: per partition, from the group's committed offset (asked of the broker; the
//! partition's low watermark while the group has none) to one past the highest offset the
//! suite's sources read (their own report, [`KafkaSource::read_through`]: the broker does not
//! track deliveries), summed.
//!
//! "Kill" takes the mock's brokers down (connections refused and closed) and "restart" brings
//! them up on the same ports: the log and the committed offsets live in the mock's memory, so
//! this is a broker restarted with its persistence on, never one that lost its disk. The mock
//! has no SASL listener, so the credentials case checks the one place a password could show:
//! a URL with one is refused, and neither the error nor anything else repeats it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{DeliveryResult, Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rebound_runtime::sources::conformance::{SourceHarness, SourceSpec};
use rebound_runtime::topology::Spout;
use rebound_sources::KafkaMock;
use rebound_sources::kafka::{KafkaOptions, KafkaSource, KafkaUrl, ReadThrough};

pub const TOPIC: &str = "orders";
pub const GROUP: &str = "rebound";
pub const PARTITIONS: i32 = 3;

/// Counts deliveries that failed.
#[derive(Default)]
pub struct Deliveries {
    failed: Mutex<Vec<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.lock().unwrap().push(e.to_string());
        }
    }
}

/// The test's own clients of the mock: a producer, and a consumer that only asks for offsets.
pub struct Clients {
    pub producer: ThreadedProducer<Deliveries>,
    pub offsets: BaseConsumer,
}

impl Clients {
    pub fn new(bootstrap: &str) -> Clients {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .create_with_context(Deliveries::default())
            .expect("the test's producer");
        // A group member that never subscribes: it reads the group's offsets, never joins.
        let offsets = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", GROUP)
            .set("enable.auto.commit", "false")
            .create()
            .expect("the test's offsets client");
        Clients { producer, offsets }
    }

    /// Produces one record and waits until the broker took it.
    pub fn publish(&self, topic: &str, biz: &str, key: Option<&str>, payload: &str) {
        let headers = OwnedHeaders::new().insert(Header {
            key: "rebound-biz",
            value: Some(biz),
        });
        let mut record = BaseRecord::<str, str>::to(topic)
            .payload(payload)
            .headers(headers);
        if let Some(key) = key {
            record = record.key(key);
        }
        self.producer
            .send(record)
            .map_err(|(e, _)| e)
            .expect("the record is queued");
        self.producer
            .flush(Duration::from_secs(30))
            .expect("the broker took the record");
        let failed = self.producer.context().failed.lock().unwrap().clone();
        assert!(failed.is_empty(), "deliveries failed: {failed:?}");
    }

    /// The group's committed offset of each partition (the low watermark where it has none);
    /// `None` while the broker does not answer.
    pub fn committed(&self, topic: &str, partitions: i32) -> Option<BTreeMap<i32, i64>> {
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let committed = self
            .offsets
            .committed_offsets(tpl, Duration::from_secs(5))
            .ok()?;
        let mut out = BTreeMap::new();
        for e in committed.elements_for_topic(topic) {
            let offset = match e.offset() {
                Offset::Offset(o) => o,
                _ => {
                    self.offsets
                        .fetch_watermarks(topic, e.partition(), Duration::from_secs(5))
                        .ok()?
                        .0
                }
            };
            out.insert(e.partition(), offset);
        }
        Some(out)
    }

    /// Each partition's high watermark (one past its last offset).
    pub fn high(&self, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
        (0..partitions)
            .map(|p| {
                let (_, high) = self
                    .offsets
                    .fetch_watermarks(topic, p, Duration::from_secs(10))
                    .expect("the watermarks");
                (p, high)
            })
            .collect()
    }
}

/// What the sources read and the group committed, summed over partitions.
pub fn unacked(read: &[ReadThrough], committed: &BTreeMap<i32, i64>) -> u64 {
    let mut through: BTreeMap<i32, i64> = BTreeMap::new();
    for r in read {
        for (&p, &next) in r.lock().unwrap().iter() {
            let e = through.entry(p).or_insert(next);
            *e = (*e).max(next);
        }
    }
    through
        .iter()
        .map(|(p, next)| u64::try_from(next - committed.get(p).copied().unwrap_or(0)).unwrap_or(0))
        .sum()
}

pub struct KafkaHarness {
    pub mock: KafkaMock,
    pub clients: Clients,
    read: Mutex<Vec<ReadThrough>>,
}

impl KafkaHarness {
    pub fn options(&self, topic: &str) -> KafkaOptions {
        let url = format!("kafka://{}/{topic}?group={GROUP}", self.mock.bootstrap());
        let mut o = KafkaOptions::new(KafkaUrl::parse(&url).expect("the URL parses"));
        o.session_timeout = Duration::from_secs(6);
        o
    }
}

impl SourceHarness for KafkaHarness {
    fn start() -> Self {
        let mock = KafkaMock::start(1);
        mock.create_topic(TOPIC, PARTITIONS);
        let clients = Clients::new(mock.bootstrap());
        KafkaHarness {
            mock,
            clients,
            read: Mutex::default(),
        }
    }

    fn source(&self, spec: SourceSpec) -> Box<dyn Spout> {
        let mut o = self.options(TOPIC);
        o.batch = spec.batch;
        o.max_unacked = spec.max_unacked;
        let source = KafkaSource::start(o, spec.durable);
        self.read.lock().unwrap().push(source.read_through());
        Box::new(source)
    }

    fn publish(&self, biz: &str, key: Option<&str>, payload: &str) {
        self.clients.publish(TOPIC, biz, key, payload);
    }

    fn unacked(&self) -> u64 {
        for _ in 0..20 {
            if let Some(committed) = self.clients.committed(TOPIC, PARTITIONS) {
                return unacked(&self.read.lock().unwrap(), &committed);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("the mock cluster does not say what the group committed");
    }

    fn kill(&mut self) {
        self.mock.kill();
    }

    fn restart(&mut self) {
        self.mock.restart();
    }

    /// A source dropped leaves the group at once (its consumer closes), so the next member is
    /// assigned its partitions at the next rebalance.
    fn redelivery_after(&self) -> Duration {
        Duration::ZERO
    }

    fn shown(&self) -> Option<(Vec<String>, String)> {
        let secret = "pa55-w0rd".to_owned();
        let url = format!("kafka://app:{secret}@127.0.0.1:1/{TOPIC}?group={GROUP}");
        let refused = KafkaUrl::parse(&url).unwrap_err();
        let also = KafkaUrl::parse(&format!("kafka://app:{secret}@127.0.0.1:1")).unwrap_err();
        let options = self.options(TOPIC);
        Some((
            vec![
                refused.to_string(),
                format!("{refused:?}"),
                also.to_string(),
                format!("{options:?}"),
            ],
            secret,
        ))
    }
}
