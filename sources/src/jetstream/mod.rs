//! The NATS JetStream source (`sources.md`, "Sources"): a [`Spout`] over a durable pull
//! consumer with explicit acks.
//!
//! Two tokio tasks do the broker's side:
//!
//! - the **reader** (`reader.rs`) connects (in the background, reconnecting with backoff for
//!   as long as it takes), creates the durable consumer if it is missing (deliver policy `all`
//!   unless `deliver=new`, explicit acks, `max_deliver` unlimited, no `backoff`: Rebound
//!   decides retries; `ack_wait` from [`JetStreamOptions::ack_wait`]; `max_ack_pending` the
//!   source's `max_unacked`), and fetches in batches only when the spout's channel has room
//!   and the source holds fewer than `max_unacked` messages, so that what it holds
//!   unacknowledged at the broker stays within the topology's `max_spout_pending` plus one
//!   batch. A message delivered again (a delivery count above 1, or a stream sequence the
//!   reader fetched before: a server killed with SIGKILL may come back with its consumer's
//!   state from a moment earlier) that the store already has custody of ([`Durable::known`])
//!   is acknowledged at once, not handed out; one the source still holds is not handed out
//!   twice;
//! - the **acker** (`acker.rs`) sends the custody acks as double acks: `+ACK`, and the
//!   server's answer awaited before the message counts as acknowledged (a batch of them at
//!   once). It also sends `+WPI` (in progress) for every held message half of `ack_wait`
//!   after its delivery or last `+WPI`, so the server does not redeliver what Rebound still
//!   holds. Both share the held messages' ack handles (`held.rs`).
//!
//! The spout itself ([`JetStreamSource`]) hands out what the reader fetched and acknowledges
//! each message at the first of `retained`, `ack` and `dead_lettered`, once.
//!
//! A message's id is `STREAM/SEQ`, its stream sequence (the same on every redelivery); its
//! biz comes from the header `Rebound-Biz`, else the subject's token
//! [`JetStreamOptions::biz_token`], else [`JetStreamOptions::default_biz`]; its key from
//! `Rebound-Key`, else `Nats-Msg-Id`; its payload is the body, and every other header is a
//! header. Credentials in the URL never appear in a log line or an error.
//!
//! [`SourceStats`] and [`CustodyAt`] are the framework's (`rebound_runtime::sources`), shared
//! with every broker source: hand [`JetStreamOptions::stats`] to the product's `/metrics` and
//! `/readyz` (`TopologyJob::source`).

mod acker;
mod consumer;
mod held;
mod mapping;
mod reader;
mod url;

pub use mapping::{BIZ_HEADER, KEY_HEADER, MSG_ID_HEADER};
pub use rebound_runtime::sources::{CustodyAt, SourceStats};
pub use url::{Deliver, JetStreamUrl, JetStreamUrlError, decode as percent_decode};

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::durable::Durable;
use rebound_runtime::topology::{Message, MessageId, NextMessage, Spout};
use tokio::sync::mpsc;

/// How a [`JetStreamSource`] reads.
#[derive(Debug, Clone)]
pub struct JetStreamOptions {
    /// The server, stream and consumer.
    pub url: JetStreamUrl,
    /// Messages per fetch (default 100).
    pub batch: usize,
    /// The most messages this source holds unacknowledged at the broker: fetched, and not yet
    /// confirmed acknowledged (default 1,100: the topology's default `max_spout_pending` plus
    /// one batch; at least 1). Set it to the spout's `max_spout_pending` plus `batch`. A
    /// consumer created now gets it as its `max_ack_pending`.
    pub max_unacked: u64,
    /// The `ack_wait` of a consumer created now (default 30 s): a message neither acknowledged
    /// nor kept in progress this long is redelivered. The source sends `+WPI` for what it
    /// holds every half of the consumer's `ack_wait` (the one the server has).
    pub ack_wait: Duration,
    /// How long one fetch waits for messages (default 1 s).
    pub block: Duration,
    /// The subject's token (1-based) that names the biz of a message without a `Rebound-Biz`
    /// header (`source.biz_token`; 2 for `orders.PAYMENT`); `None` for none (the default).
    pub biz_token: Option<NonZeroUsize>,
    /// The biz of a message that names none (default `DEFAULT`).
    pub default_biz: String,
    /// Where the source counts what it does (shared: hand a clone to `/metrics`).
    pub stats: Arc<SourceStats>,
}

impl JetStreamOptions {
    /// The defaults for `url`.
    pub fn new(url: JetStreamUrl) -> JetStreamOptions {
        JetStreamOptions {
            url,
            batch: 100,
            max_unacked: 1_100,
            ack_wait: Duration::from_secs(30),
            block: Duration::from_secs(1),
            biz_token: None,
            default_biz: "DEFAULT".into(),
            stats: Arc::default(),
        }
    }
}

/// A [`Spout`] over a JetStream durable pull consumer (see the [module docs](self)). Start it
/// with [`JetStreamSource::start`] inside a tokio runtime.
pub struct JetStreamSource {
    messages: mpsc::Receiver<Message>,
    acks: mpsc::UnboundedSender<(u64, std::time::Instant)>,
    /// Handed out and not yet acknowledged at the broker.
    unacked: HashSet<MessageId>,
    /// The length of `STREAM/`, before each id's sequence.
    prefix: usize,
    stats: Arc<SourceStats>,
}

impl std::fmt::Debug for JetStreamSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamSource")
            .field("unacked", &self.unacked.len())
            .finish_non_exhaustive()
    }
}

impl JetStreamSource {
    /// Starts reading (connecting in the background). `durable`, when given, is asked which
    /// redelivered messages the store already has custody of. Fails only on a server the
    /// client cannot take as an address; an unreachable one is retried with backoff and shown
    /// in [`SourceStats`].
    pub fn start(
        options: JetStreamOptions,
        durable: Option<Durable>,
    ) -> Result<JetStreamSource, JetStreamUrlError> {
        async_nats::ServerAddr::from_str(&options.url.server).map_err(|e| JetStreamUrlError {
            shown: options.url.to_string(),
            why: format!("the server {} is not an address: {e}", options.url.server),
        })?;
        let stats = options.stats.clone();
        let held = Arc::new(held::Held::new(options.ack_wait, stats.clone()));
        // Room for four batches: the reader fetches ahead while the spout drains (what it may
        // hold unacknowledged is bounded by max_unacked, not by this).
        let (messages_tx, messages) = mpsc::channel(4 * options.batch.max(1));
        let (acks, acks_rx) = mpsc::unbounded_channel();
        let prefix = options.url.stream.len() + 1;
        tokio::spawn(acker::run(
            options.url.clone(),
            acks_rx,
            held.clone(),
            stats.clone(),
        ));
        tokio::spawn(reader::run(
            options,
            messages_tx,
            acks.clone(),
            held,
            durable,
            stats.clone(),
        ));
        Ok(JetStreamSource {
            messages,
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
        self.stats.count_custody(at);
        match id.as_str().get(self.prefix..).map(str::parse::<u64>) {
            Some(Ok(seq)) => {
                let _ = self.acks.send((seq, std::time::Instant::now()));
            }
            _ => tracing::error!(%id, "a message id this source handed out has no sequence"),
        }
    }
}

impl Spout for JetStreamSource {
    fn next(&mut self) -> NextMessage {
        match self.messages.try_recv() {
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
