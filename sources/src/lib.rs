//! rebound-sources: broker sources for Rebound's runtime (`docs/spec/sources.md`), each a
//! [`Spout`](rebound_runtime::topology::Spout) over a broker client that runs on tokio, behind
//! a cargo feature of its own. (The Redis Streams source lives in `rebound-store-redis`, so
//! that its custody write and its `XACK` can share one script.)
//!
//! Every source keeps the contract of `sources.md`, "Custody": it acknowledges its broker at
//! the first of `retained`, `ack` and `dead_lettered`, once; a redelivered message the store
//! already has custody of ([`Durable::known`](rebound_runtime::durable::Durable::known)) is
//! acknowledged again and not handed out; what it holds unacknowledged at the broker is
//! bounded; an outage is retried with backoff, shown in its stats, and never ends it.
//!
//! # Module map
//!
//! - [`jetstream`] (feature `jetstream`, on by default): the NATS JetStream source, a durable
//!   pull consumer (`nats://[USER:PASS@]HOST:PORT/STREAM?consumer=NAME[&subject=FILTER]`).
//!   - `url.rs`: [`JetStreamUrl`](jetstream::JetStreamUrl), parsed with errors that name what
//!     is wrong and never show the password;
//!   - `mapping.rs`: a JetStream message as a runtime `Message` (id, biz, key, headers);
//!   - `stats.rs`: [`SourceStats`](jetstream::SourceStats) and
//!     [`CustodyAt`](jetstream::CustodyAt), for `/metrics` and `/readyz`;
//!   - `held.rs`: the messages read and not yet confirmed acknowledged, with their ack handles;
//!   - `consumer.rs`: the connection and the durable consumer, created if missing;
//!   - `reader.rs`: the task that fetches in batches when there is room;
//!   - `acker.rs`: the task that sends custody acks (double acks) and `+WPI` for the held.
//! - [`amqp`] (feature `amqp`, on by default): the RabbitMQ source, `basic.consume` on a
//!   durable queue (`amqp://[USER:PASS@]HOST:PORT/[VHOST]?queue=Q`), and the publisher of dead
//!   letters to an exchange (`?exchange=E[&routing_key=K]`).
//!   - `url.rs`: [`AmqpUrl`](amqp::AmqpUrl), both forms, its target a queue or an exchange;
//!   - `mapping.rs`: a delivery as a runtime `Message` (the `message-id` as the id; one without
//!     gets an id of its own delivery, to be refused);
//!   - `held.rs`: the messages delivered and not yet acknowledged, with their delivery tags on
//!     the live channel, and the custody acks owed across a lost connection;
//!   - `session.rs`: the task that owns the connection: connects, `basic.qos`, consumes,
//!     places deliveries, sends the custody `basic.ack`s, reconnects;
//!   - `publish.rs`: [`AmqpPublisher`](amqp::AmqpPublisher), confirms and `mandatory`.
//! - `url_text.rs`: the percent-decoding and the credentials' redaction both URLs share.
//! - `test_server.rs`, `test_server_rabbit.rs` (feature `test-server`): a `nats-server -js`
//!   and a `rabbitmq-server` of a test's own (`NatsServer`, `RabbitServer`).
//! - `kafka` (feature `kafka`, off by default: librdkafka's C build): the Kafka source, a
//!   consumer group member with manual commits
//!   (`kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G[&offset=earliest|latest]`).
//!   - `url.rs`: `KafkaUrl` (a URL with credentials is refused, and not shown);
//!   - `mapping.rs`: a record as a runtime `Message` (id `TOPIC/PARTITION/OFFSET`, biz, key);
//!   - `marks.rs`: per partition, the offsets handed out and not in custody, the read position
//!     and the confirmed committed offset: the commit mark and the unacknowledged range;
//!   - `reader.rs`: the `BaseConsumer` polled on a thread of its own, its rebalance callbacks
//!     (the revocation's commit, the assignment's committed offsets), the pausing;
//!   - `committer.rs`: the thread that commits the marks synchronously and confirms them.
//! - `KafkaMock` (features `kafka` and `test-server`): librdkafka's mock cluster, owned by a
//!   thread of the test's own.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "amqp")]
pub mod amqp;
#[cfg(feature = "jetstream")]
pub mod jetstream;
#[cfg(feature = "kafka")]
pub mod kafka;
#[cfg(all(feature = "test-server", feature = "kafka"))]
mod kafka_mock;
#[cfg(all(feature = "test-server", feature = "kafka"))]
pub use kafka_mock::KafkaMock;
#[cfg(feature = "test-server")]
mod test_server;
#[cfg(any(feature = "jetstream", feature = "amqp"))]
mod url_text;
#[cfg(feature = "test-server")]
pub use test_server::NatsServer;
#[cfg(feature = "test-server")]
mod test_server_rabbit;
#[cfg(feature = "test-server")]
pub use test_server_rabbit::RabbitServer;
