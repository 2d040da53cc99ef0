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
//!   whatever queued up meanwhile. With the shared store on the stream's own server
//!   ([`StreamOptions::store_acks`], [`RedisStore::ack_custody_of`]), the store's script
//!   acknowledges an entry in the same call as the retry or dead letter that takes custody of
//!   it, so no crash can fall between the two; the acker then sends only the acks of messages
//!   acked on their first delivery (which write nothing to the store).
//!
//! [`RedisStore::ack_custody_of`]: crate::RedisStore::ack_custody_of
//!
//! The spout itself ([`StreamSource`]) hands out what the reader read and acknowledges each
//! message at the first of `retained`, `ack` and `dead_lettered`, once. The entries read and not
//! yet acknowledged are one set both sides share (`Held`): a message in flight longer than the
//! lease is kept this consumer's (the reader resets its idle time every half lease, `XCLAIM …
//! JUSTID`, as JetStream's `+WPI` does), and never handed out twice.
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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rebound_runtime::durable::Durable;
pub use rebound_runtime::sources::{CustodyAt, SourceStats};
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
    /// Where the source counts what it does (shared: hand a clone to `/metrics`).
    pub stats: Arc<SourceStats>,
    /// The store acknowledges the entries whose retry or dead letter it commits, in the same
    /// script (`--store redis` on the stream's server: [`RedisStore::ack_custody_of`]), so the
    /// source sends no `XACK` at `retained` or `dead_lettered`, only at `ack` (default false).
    ///
    /// [`RedisStore::ack_custody_of`]: crate::RedisStore::ack_custody_of
    pub store_acks: bool,
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
            stats: Arc::default(),
            store_acks: false,
        }
    }
}

/// The entry ids read and not yet acknowledged (handed to the spout, or on their way).
pub(crate) type Held = Arc<Mutex<HashSet<String>>>;

/// A [`Spout`] over a Redis Streams consumer group (see the [module docs](self)). Start it
/// with [`StreamSource::start`] inside a tokio runtime.
pub struct StreamSource {
    entries: mpsc::Receiver<Message>,
    acks: acker::Acks,
    /// Read and not yet acknowledged at the broker (shared with the reader).
    held: Held,
    prefix: usize,
    stream: StreamUrl,
    stats: Arc<SourceStats>,
    store_acks: bool,
}

impl std::fmt::Debug for StreamSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSource")
            .field("held", &self.held.lock().map_or(0, |h| h.len()))
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
        let stats = options.stats.clone();
        // Room for four batches: the reader reads ahead while the spout drains (what it may
        // hold unacknowledged is bounded by max_unacked, not by this).
        let (entries_tx, entries) = mpsc::channel(4 * options.batch.max(1));
        let (acks, acks_rx, progress) = acker::Acks::new();
        let prefix = options.url.stream.len() + 1;
        let stream = options.url.clone();
        let held = Held::default();
        let store_acks = options.store_acks;
        tokio::spawn(acker::run(
            client.clone(),
            options.url.clone(),
            acks_rx,
            progress,
            stats.clone(),
        ));
        tokio::spawn(reader::run(
            client,
            options,
            entries_tx,
            acks.clone(),
            held.clone(),
            durable,
            stats.clone(),
        ));
        Ok(StreamSource {
            entries,
            acks,
            held,
            prefix,
            stream,
            stats,
            store_acks,
        })
    }

    /// What the source did so far (shared: it keeps counting).
    pub fn stats(&self) -> Arc<SourceStats> {
        self.stats.clone()
    }

    /// Acknowledges `id` at the broker if nothing did before.
    fn custody(&mut self, id: &MessageId, at: CustodyAt) {
        let Some(entry) = id.as_str().get(self.prefix..) else {
            return;
        };
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if !held.remove(entry) {
            return; // acknowledged before, or not this source's
        }
        drop(held);
        self.stats.count_custody(at);
        // The store's script acknowledged it with the commit that took custody.
        if self.store_acks && at != CustodyAt::Acked {
            return;
        }
        self.acks.send(entry.to_owned());
    }
}

impl Spout for StreamSource {
    fn next(&mut self) -> NextMessage {
        match self.entries.try_recv() {
            Ok(message) => NextMessage::Ready(message),
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

    /// The task stops: the custody acks queued so far are sent before it goes (at most
    /// [`CLOSE_WAIT`]); what is not is delivered again by the broker, and recognised.
    fn close(&mut self) {
        let left = self.acks.wait_sent(CLOSE_WAIT);
        if left > 0 {
            tracing::warn!(stream = %self.stream, entries = left, "custody acks not confirmed at the stop: the server delivers those entries again");
        }
    }
}

/// How long a stop waits for the custody acks queued before it.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);
