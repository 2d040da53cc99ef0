//! The Redis Streams source (`sources.md`, "Sources"): a [`Spout`] over a consumer group.
//!
//! Two tokio tasks own the connections (a blocking `XREADGROUP` would hold up anything else
//! on a multiplexed connection):
//!
//! - the **reader** (`reader.rs`) creates the group if it is missing, reads the node's own
//!   pending entries first, then new ones in batches (`XREADGROUP … BLOCK`), and every half
//!   lease takes over entries idle past the lease (`XAUTOCLAIM`: a dead consumer's). It reads
//!   only when the spout's channel has room, so the entries this consumer holds unacknowledged
//!   are at most the topology's `max_spout_pending` plus one read batch. A redelivered entry the
//!   store already has custody of ([`Durable::known`]) is acknowledged at once, not handed out;
//! - the **acker** (`acker.rs`) sends the custody acks (`XACK`), batched: one round trip for
//!   whatever queued up meanwhile.
//!
//! The spout itself ([`StreamSource`]) hands out what the reader read and acknowledges each
//! message at the first of `retained`, `ack` and `dead_lettered`, once.
//!
//! A message's id is `STREAM/ENTRY-ID`; `biz`, `key` and `payload` come from the entry's fields
//! of those names ([`FieldNames`]), every other field is a header. Credentials in the URL never
//! appear in a log line or an error.

mod acker;
mod entry;
mod reader;
mod url;

pub use entry::FieldNames;
pub use url::{StreamStart, StreamUrl, StreamUrlError};

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rebound_runtime::durable::Durable;
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Message, MessageId, NextMessage, Spout};
use tokio::sync::mpsc;

/// How a [`StreamSource`] reads.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// The stream, its server and group.
    pub url: StreamUrl,
    /// This consumer's name in the group (the node's name).
    pub consumer: String,
    /// Entries per read (default 100).
    pub batch: usize,
    /// The most entries this consumer holds unacknowledged at the broker: read, and not yet
    /// confirmed acknowledged (default 1,100: the topology's default `max_spout_pending` plus
    /// one batch). Set it to the spout's `max_spout_pending` plus `batch`.
    pub max_unacked: u64,
    /// An entry pending this long with another consumer is taken over (default 30 s).
    pub lease: Duration,
    /// How long one read waits for new entries (default 1 s).
    pub block: Duration,
    /// The entry fields a message's parts come from.
    pub fields: FieldNames,
    /// The biz of an entry without one (default `DEFAULT`).
    pub default_biz: String,
}

impl StreamOptions {
    /// The defaults for `url`, read as `consumer`.
    pub fn new(url: StreamUrl, consumer: impl Into<String>) -> StreamOptions {
        StreamOptions {
            url,
            consumer: consumer.into(),
            batch: 100,
            max_unacked: 1_100,
            lease: Duration::from_secs(30),
            block: Duration::from_secs(1),
            fields: FieldNames::default(),
            default_biz: "DEFAULT".into(),
        }
    }
}

/// Where a custody ack came from (`rebound_source_custody_total{at}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustodyAt {
    /// The message's first retry was stored.
    Retained,
    /// The message was acked.
    Acked,
    /// The message's dead letter was stored.
    DeadLettered,
}

/// What the source did, for `/metrics` and `/readyz`. Shared by the spout and its tasks.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Entries read and handed to the spout (or found already in custody).
    pub received: AtomicU64,
    /// Of those, entries read again: this consumer's pending ones at the start, or taken over
    /// from another, or already in the store's custody.
    pub redelivered: AtomicU64,
    /// Custody acks by where they came from: retained, acked, dead-lettered.
    pub custody: [AtomicU64; 3],
    /// Acks the broker confirmed (`XACK` answered).
    pub acked_at_broker: AtomicU64,
    /// Entries read and not yet confirmed acknowledged (`rebound_source_unacked`).
    pub unacked: AtomicU64,
    /// What the group says is waiting (`XINFO GROUPS` lag), when the server says.
    pub lag: AtomicU64,
    down: AtomicBool,
    since: Mutex<Option<Timestamp>>,
}

impl SourceStats {
    /// Custody acks from `at`.
    pub fn custody(&self, at: CustodyAt) -> u64 {
        self.custody[at as usize].load(Relaxed)
    }

    /// Since when the broker does not answer, if it does not.
    pub fn unreachable_since(&self) -> Option<Timestamp> {
        if !self.down.load(Relaxed) {
            return None;
        }
        *self.since.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn reachable(&self, up: bool) {
        let was_down = self.down.swap(!up, Relaxed);
        if was_down != up {
            return; // no change
        }
        let mut since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        *since = (!up).then(Timestamp::now);
    }
}

/// A [`Spout`] over a Redis Streams consumer group (see the [module docs](self)). Start it
/// with [`StreamSource::start`] inside a tokio runtime.
pub struct StreamSource {
    entries: mpsc::Receiver<Message>,
    acks: mpsc::UnboundedSender<String>,
    /// Handed out and not yet acknowledged at the broker.
    unacked: HashSet<MessageId>,
    prefix: usize,
    stats: Arc<SourceStats>,
}

impl std::fmt::Debug for StreamSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSource")
            .field("unacked", &self.unacked.len())
            .finish_non_exhaustive()
    }
}

impl StreamSource {
    /// Connects and starts reading. `durable`, when given, is asked which redelivered entries
    /// the store already has custody of. Fails only on a server that cannot be named (the URL);
    /// an unreachable one is retried with backoff and shown in [`SourceStats`].
    pub fn start(
        options: StreamOptions,
        durable: Option<Durable>,
    ) -> Result<StreamSource, StreamUrlError> {
        let client =
            redis::Client::open(options.url.server.as_str()).map_err(|e| StreamUrlError {
                shown: options.url.to_string(),
                why: url::redact(&e.to_string()),
            })?;
        let stats = Arc::new(SourceStats::default());
        let (entries_tx, entries) = mpsc::channel(options.batch.max(1));
        let (acks, acks_rx) = mpsc::unbounded_channel();
        let prefix = options.url.stream.len() + 1;
        tokio::spawn(acker::run(
            client.clone(),
            options.url.clone(),
            acks_rx,
            stats.clone(),
        ));
        tokio::spawn(reader::run(
            client,
            options,
            entries_tx,
            acks.clone(),
            durable,
            stats.clone(),
        ));
        Ok(StreamSource {
            entries,
            acks,
            unacked: HashSet::new(),
            prefix,
            stats,
        })
    }

    /// What the source did so far (shared: it keeps counting).
    pub fn stats(&self) -> Arc<SourceStats> {
        self.stats.clone()
    }

    /// Acknowledges `id` at the broker if nothing did before.
    fn custody(&mut self, id: &MessageId, at: CustodyAt) {
        if !self.unacked.remove(id) {
            return;
        }
        self.stats.custody[at as usize].fetch_add(1, Relaxed);
        if let Some(entry) = id.as_str().get(self.prefix..) {
            let _ = self.acks.send(entry.to_owned());
        }
    }
}

impl Spout for StreamSource {
    fn next(&mut self) -> NextMessage {
        match self.entries.try_recv() {
            Ok(message) => {
                self.unacked.insert(message.id.clone());
                NextMessage::Ready(message)
            }
            // A stream has no end; a reader that stopped (the topology stops) leaves it idle.
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
