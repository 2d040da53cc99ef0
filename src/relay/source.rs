//! The source a relay reads (`sources.md`, "Sources"): its URL ([`SourceUrl`], read by the
//! configuration) and what the `source:` section adds (`biz`, `biz_token`, `fields`), made
//! into the spout of the relay's topology.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::durable::Durable;
use rebound_runtime::sources::SourceStats;
use rebound_runtime::topology::Spout;
use rebound_sources::amqp::{AmqpOptions, AmqpSource};
use rebound_sources::jetstream::{JetStreamOptions, JetStreamSource};
#[cfg(feature = "kafka")]
use rebound_sources::kafka::{KafkaOptions, KafkaSource};
use rebound_store_redis::stream::{FieldNames, StreamOptions, StreamSource};
use rebound_store_redis::{RedisStore, StreamCustody};

pub use crate::config::{SourceUrl, SourceUrlError};

/// Everything a relay's source is made from.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// The broker, stream and group or consumer.
    pub url: SourceUrl,
    /// This node's name at the broker (a Redis consumer's name, a RabbitMQ consumer's tag
    /// `rebound-NAME`; JetStream's durable consumer is the URL's).
    pub consumer: String,
    /// The biz of a message that names none (`source.biz`, default `DEFAULT`).
    pub biz: String,
    /// JetStream: the subject token that names a message's biz (`source.biz_token`).
    pub biz_token: Option<NonZeroUsize>,
    /// Redis Streams: the entry fields of biz, key and payload (`source.fields`).
    pub fields: FieldNames,
    /// Redis Streams: how long another consumer's entry may idle before it is claimed
    /// (`--lease`).
    pub lease: Duration,
    /// The most messages held unacknowledged at the broker: the spout's pending bound plus
    /// one read batch.
    pub max_unacked: u64,
    /// Redis Streams: the shared store sends the custody acks of retries and dead letters
    /// ([`SourceSpec::ack_in_store`]), so the source does not.
    pub store_acks: bool,
    /// How long the store keeps a retried message's acked fate (`source.fates_keep`, default
    /// [`FATES_KEEP`]): a broker source commits no position that would prune it.
    pub fates_keep: Duration,
    /// Where the source counts what it does.
    pub stats: Arc<SourceStats>,
}

/// How long a retried message's acked fate is kept by default: far past a broker's
/// redelivery of a message whose custody ack was lost (JetStream's ack wait, a Redis
/// consumer's lease), so a fate the store forgot is never redelivered in practice.
pub const FATES_KEEP: Duration = Duration::from_secs(3600);

/// Messages per read.
const BATCH: usize = 100;

impl SourceSpec {
    /// The defaults for `url` read as `consumer`, for a spout of `max_spout_pending`.
    pub fn new(url: SourceUrl, consumer: impl Into<String>, max_spout_pending: usize) -> Self {
        SourceSpec {
            url,
            consumer: consumer.into(),
            biz: "DEFAULT".into(),
            biz_token: None,
            fields: FieldNames::default(),
            lease: Duration::from_secs(10),
            max_unacked: (max_spout_pending + BATCH) as u64,
            fates_keep: FATES_KEEP,
            store_acks: false,
            stats: Arc::default(),
        }
    }

    /// With a Redis stream on `store`'s server and database: has `store` acknowledge, in the
    /// script of each write that takes custody of a message (its first retry, its dead
    /// letter), the message's entry (`sources.md`: "the store write and the `XACK` in one
    /// script"), and says so (true). Any other source, or a stream elsewhere: false.
    pub fn ack_in_store(&self, store: &RedisStore) -> bool {
        let SourceUrl::RedisStream(url) = &self.url else {
            return false;
        };
        store.serves(&url.server)
            && store.ack_custody_of(StreamCustody {
                stream: url.stream.clone(),
                group: url.group.clone(),
            })
    }

    /// Starts the source (on the current tokio runtime), told by `durable` which redelivered
    /// messages it already has custody of.
    pub fn start(&self, durable: &Durable) -> Result<Box<dyn Spout>, SourceUrlError> {
        let durable = Some(durable.clone());
        match &self.url {
            SourceUrl::RedisStream(url) => {
                let mut options = StreamOptions::new(url.clone(), self.consumer.clone());
                options.batch = BATCH;
                options.max_unacked = self.max_unacked;
                options.lease = self.lease;
                options.fields = self.fields.clone();
                options.default_biz = self.biz.clone();
                options.stats = self.stats.clone();
                options.store_acks = self.store_acks;
                let source = StreamSource::start(options, durable)
                    .map_err(|e| SourceUrlError::new(e.to_string()))?;
                Ok(Box::new(source))
            }
            SourceUrl::JetStream(url) => {
                let mut options = JetStreamOptions::new(url.clone());
                options.batch = BATCH;
                options.max_unacked = self.max_unacked;
                options.biz_token = self.biz_token;
                options.default_biz = self.biz.clone();
                options.stats = self.stats.clone();
                let source = JetStreamSource::start(options, durable)
                    .map_err(|e| SourceUrlError::new(e.to_string()))?;
                Ok(Box::new(source))
            }
            SourceUrl::Amqp(url) => {
                let mut options = AmqpOptions::new(url.clone());
                options.consumer = self.consumer.clone();
                // The prefetch count: what the broker sends ahead is bounded by it alone.
                options.max_unacked = self.max_unacked;
                options.default_biz = self.biz.clone();
                options.stats = self.stats.clone();
                let source = AmqpSource::start(options, durable)
                    .map_err(|e| SourceUrlError::new(e.to_string()))?;
                Ok(Box::new(source))
            }
            #[cfg(feature = "kafka")]
            SourceUrl::Kafka(url) => {
                // The group is the URL's; every node of a fleet is a member of it.
                let mut options = KafkaOptions::new(url.clone());
                options.batch = BATCH;
                options.max_unacked = self.max_unacked;
                options.default_biz = self.biz.clone();
                options.stats = self.stats.clone();
                Ok(Box::new(KafkaSource::start(options, durable)))
            }
        }
    }
}
