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
#[cfg(feature = "test-server")]
pub use test_server::NatsServer;
