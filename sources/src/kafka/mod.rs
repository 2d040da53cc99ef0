//! The Kafka source (`sources.md`, "Sources"): a [`Spout`] over a consumer group member with
//! manual commits (`kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G[&offset=earliest|latest]`).
//!
//! Kafka has no per-message ack: per partition, the committed offset is the lowest offset
//! handed out and not yet in custody (or one past the highest read), and it moves as custody
//! moves (`marks.rs`), so a retry the store holds for an hour holds nothing back (Storm's
//! KafkaSpout held the partition until the final fate), and offsets never seen (compaction,
//! transaction markers) never stall it.
//!
//! One thread of its own does the broker's side (`reader.rs`): a librdkafka `BaseConsumer`
//! polled there, not rdkafka's `StreamConsumer` on tokio, because librdkafka serves the
//! rebalance and commit callbacks inside `poll`: on that one thread the marks, the revocation's
//! synchronous commit, the commit confirmations and the pausing are in one place, with no lock
//! held across a call to the broker but the revocation's own. The spout ([`KafkaSource`])
//! hands out what the reader polled and reports each message's custody (the first of
//! `retained`, `ack` and `dead_lettered`, once) back to it.
//!
//! - The group's partitions pause while the source holds `max_unacked` unacknowledged (from
//!   the committed offset to the highest read, summed over the assigned partitions) and
//!   resume below it.
//! - On revocation, what is in custody is committed synchronously before the partitions go;
//!   on assignment, reading starts at the committed offset, and a record the store already
//!   has custody of ([`Durable::known`], asked for every polled batch) is taken into custody
//!   at once, not handed out (one fate per message).
//! - A group without a committed offset reads from `earliest`; `offset=latest` opts out.
//!
//! A record's id is `TOPIC/PARTITION/OFFSET`; its biz comes from the header `rebound-biz`,
//! else [`KafkaOptions::default_biz`]; its key is the record key (an ordered key and a Kafka
//! partition agree); its payload is the value, and every other header is a header.
//!
//! [`SourceStats`] and [`CustodyAt`] are the framework's (`rebound_runtime::sources`): hand
//! [`KafkaOptions::stats`] to `/metrics` and `/readyz`. Its `unacked` is the range above, its
//! `lag` what the broker holds past the highest read, its custody latency from the spout's
//! report to the broker's confirmation of a commit that covers it.

mod committer;
mod mapping;
mod marks;
mod reader;
mod url;

pub use mapping::BIZ_HEADER;
pub use rebound_runtime::sources::{CustodyAt, SourceStats};
pub use url::{KafkaUrl, KafkaUrlError, StartAt};

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rebound_runtime::durable::Durable;
use rebound_runtime::topology::{Message, MessageId, NextMessage, Spout};

/// One past the highest offset read of each partition the source owns, as its reader last
/// saw it (shared: [`KafkaSource::read_through`]).
pub type ReadThrough = Arc<Mutex<BTreeMap<i32, i64>>>;

/// How a [`KafkaSource`] reads.
#[derive(Debug, Clone)]
pub struct KafkaOptions {
    /// The brokers, topic and group.
    pub url: KafkaUrl,
    /// Records polled at once, and asked about in the store at once (default 100).
    pub batch: usize,
    /// The most offsets this source holds unacknowledged at the broker: from each assigned
    /// partition's committed offset to its highest read, summed (default 1,100: the
    /// topology's default `max_spout_pending` plus one batch; at least 1).
    pub max_unacked: u64,
    /// How often a moved mark is committed (default 100 ms; sooner once a quarter of
    /// `max_unacked` waits for a commit).
    pub commit_every: Duration,
    /// The group's `session.timeout.ms` (default 10 s): a member that dies without leaving
    /// keeps its partitions this long.
    pub session_timeout: Duration,
    /// The biz of a record without a `rebound-biz` header (default `DEFAULT`).
    pub default_biz: String,
    /// Where the source counts what it does (shared: hand a clone to `/metrics`).
    pub stats: Arc<SourceStats>,
}

impl KafkaOptions {
    /// The defaults for `url`.
    pub fn new(url: KafkaUrl) -> KafkaOptions {
        KafkaOptions {
            url,
            batch: 100,
            max_unacked: 1_100,
            commit_every: Duration::from_millis(100),
            session_timeout: Duration::from_secs(10),
            default_biz: "DEFAULT".into(),
            stats: Arc::default(),
        }
    }
}

/// A [`Spout`] over a Kafka consumer group member (see the [module docs](self)). Start it with
/// [`KafkaSource::start`]; it needs no tokio runtime (its reader is a thread of its own).
pub struct KafkaSource {
    messages: mpsc::Receiver<Message>,
    custody: Option<mpsc::Sender<reader::Custody>>,
    /// Handed out and not yet in custody.
    unacked: HashSet<MessageId>,
    /// The length of `TOPIC/`, before each id's partition.
    prefix: usize,
    stats: Arc<SourceStats>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    read_through: ReadThrough,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("unacked", &self.unacked.len())
            .finish_non_exhaustive()
    }
}

impl KafkaSource {
    /// Starts reading (joining the group in the background). `durable`, when given, is asked
    /// which polled records the store already has custody of. An unreachable broker is
    /// retried for as long as it takes and shown in [`SourceStats`].
    pub fn start(options: KafkaOptions, durable: Option<Durable>) -> KafkaSource {
        let stats = options.stats.clone();
        // Room for four batches: the reader polls ahead while the spout drains (what it holds
        // unacknowledged is bounded by max_unacked, not by this).
        let (messages_tx, messages) = mpsc::sync_channel(4 * options.batch.max(1));
        let (custody, custody_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let prefix = options.url.topic.len() + 1;
        let read_through = ReadThrough::default();
        let reader = reader::Reader {
            read_through: read_through.clone(),
            options,
            durable,
            messages: messages_tx,
            custody: custody_rx,
            stop: stop.clone(),
        };
        let reader = std::thread::Builder::new()
            .name("kafka-source".into())
            .spawn(move || reader::run(reader))
            .expect("a thread for the Kafka source's reader");
        KafkaSource {
            messages,
            custody: Some(custody),
            unacked: HashSet::new(),
            prefix,
            stats,
            stop,
            reader: Some(reader),
            read_through,
        }
    }

    /// What the source did so far (shared: it keeps counting).
    pub fn stats(&self) -> Arc<SourceStats> {
        self.stats.clone()
    }

    /// One past the highest offset read of each partition it owns (shared: it keeps
    /// changing): with the group's committed offsets, what it holds unacknowledged.
    pub fn read_through(&self) -> ReadThrough {
        self.read_through.clone()
    }

    /// Reports `id`'s custody to the reader if nothing did before.
    fn custody(&mut self, id: &MessageId, at: CustodyAt) {
        if !self.unacked.remove(id) {
            return;
        }
        self.stats.count_custody(at);
        match mapping::parse_id(id.as_str(), self.prefix) {
            Some((partition, offset)) => {
                if let Some(custody) = &self.custody {
                    let _ = custody.send((partition, offset, Instant::now()));
                }
            }
            None => {
                tracing::error!(%id, "a message id this source handed out has no partition and offset")
            }
        }
    }
}

impl Drop for KafkaSource {
    /// Commits what is in custody and leaves the group before it returns (a new member of the
    /// group then starts at the marks); a broker that does not answer holds it about 4 s (the
    /// last commit waited on for 2 s, then librdkafka's close).
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        self.custody = None;
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Spout for KafkaSource {
    fn next(&mut self) -> NextMessage {
        match self.messages.try_recv() {
            Ok(message) => {
                self.unacked.insert(message.id.clone());
                NextMessage::Ready(message)
            }
            // A topic has no end; a reader that stopped leaves it idle.
            Err(_) => NextMessage::Idle,
        }
    }

    fn ack(&mut self, id: &MessageId) {
        self.custody(id, CustodyAt::Acked);
    }

    fn dead_lettered(&mut self, id: &MessageId) {
        self.custody(id, CustodyAt::DeadLettered);
    }

    fn retained(&mut self, id: &MessageId) {
        self.custody(id, CustodyAt::Retained);
    }
}
