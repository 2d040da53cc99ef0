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
