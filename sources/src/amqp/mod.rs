//! The RabbitMQ source (`sources.md`, "Sources", the RabbitMQ row): a [`Spout`] over
//! `basic.consume` on a durable queue, with manual acks, and a publisher of dead letters to an
//! exchange ([`AmqpPublisher`]).
//!
//! One tokio task, the **session** (`session.rs`), owns the connection and its channel: it
//! connects in the background (reconnecting with backoff for as long as it takes: an outage is
//! shown in [`SourceStats`] and never ends the source), looks the queue up (and declares it
//! durable if it is missing), sets `basic.qos` to [`AmqpOptions::max_unacked`] for its
//! consumer, so that what the broker holds unacknowledged for this source never exceeds it,
//! and consumes. Each delivery is placed:
//!
//! - one without a `message-id` is refused ([`NextMessage::Refused`], code
//!   [`NO_MESSAGE_ID`]): the runtime dead-letters it at once, undelivered, and its `basic.ack`
//!   follows `dead_lettered`;
//! - a redelivered one (the `redelivered` flag, counted) that the store already has custody of
//!   ([`Durable::known`]) is acknowledged at once, not handed out; one the source still holds
//!   (handed out, its channel lost since, and the broker giving it back) is not handed out
//!   twice: its new delivery tag is kept for its custody ack (`held.rs`);
//! - the rest are handed out.
//!
//! The spout itself ([`AmqpSource`]) acknowledges each message at the first of `retained`,
//! `ack` and `dead_lettered`, once: the session sends the `basic.ack` on the channel the
//! message came on. AMQP 0-9-1 has no answer to a `basic.ack`: custody counts as
//! acknowledged once it is written to the connection. Should the connection die before the
//! broker read it, the broker delivers the message again, flagged `redelivered`, and the store
//! knows it.
//!
//! A message's id is its `message-id` property; its biz the header `rebound-biz`, else the
//! routing key, else [`AmqpOptions::default_biz`]; its key the header `rebound-key`; its payload
//! the body; every other header a header. Credentials in the URL never appear in a log line or
//! an error.

mod held;
mod mapping;
mod publish;
mod session;
mod url;

pub use mapping::{BIZ_HEADER, KEY_HEADER, NO_MESSAGE_ID};
pub use publish::{AmqpPublisher, Published};
pub use rebound_runtime::sources::{CustodyAt, SourceStats};
pub use url::{AmqpTarget, AmqpUrl, AmqpUrlError};

use std::collections::HashSet;
use std::sync::Arc;

use rebound_runtime::durable::Durable;
use rebound_runtime::topology::{Failure, Message, MessageId, NextMessage, Spout};
use tokio::sync::mpsc;

/// How an [`AmqpSource`] reads.
#[derive(Debug, Clone)]
pub struct AmqpOptions {
    /// The broker, virtual host and queue (an `?queue=Q` URL).
    pub url: AmqpUrl,
    /// The consumer's name (the node's): its consumer tag is `rebound-NAME`, and its
    /// connection is named after it in the broker's listings.
    pub consumer: String,
    /// The most messages the broker holds delivered and unacknowledged for this source: its
    /// `basic.qos` prefetch count (default 1,100: the topology's default `max_spout_pending`
    /// plus a hundred; at least 1, at most 65,535). Set it to the spout's `max_spout_pending`
    /// plus a little.
    pub max_unacked: u64,
    /// The biz of a message that names none and has no routing key (default `DEFAULT`).
    pub default_biz: String,
    /// Where the source counts what it does (shared: hand a clone to `/metrics`).
    pub stats: Arc<SourceStats>,
}

impl AmqpOptions {
    /// The defaults for `url`.
    pub fn new(url: AmqpUrl) -> AmqpOptions {
        AmqpOptions {
            url,
            consumer: "rebound".into(),
            max_unacked: 1_100,
            default_biz: "DEFAULT".into(),
            stats: Arc::default(),
        }
    }
}

/// What the session hands the spout.
#[derive(Debug)]
enum Handed {
    /// A message to deliver.
    Ready(Message),
    /// A message without a `message-id`, to dead-letter at once.
    Refused(Message),
}

/// A [`Spout`] over a RabbitMQ queue (see the [module docs](self)). Start it with
/// [`AmqpSource::start`] inside a tokio runtime.
pub struct AmqpSource {
    handed: mpsc::UnboundedReceiver<Handed>,
    custody: mpsc::UnboundedSender<session::Custody>,
    /// Handed out and not yet acknowledged at the broker.
    unacked: HashSet<MessageId>,
    stats: Arc<SourceStats>,
}

impl std::fmt::Debug for AmqpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpSource")
            .field("unacked", &self.unacked.len())
            .finish_non_exhaustive()
    }
}

impl AmqpSource {
    /// Starts reading (connecting in the background). `durable`, when given, is asked which
    /// redelivered messages the store already has custody of. Fails only on a URL that names
    /// an exchange, not a queue; an unreachable broker is retried with backoff and shown in
    /// [`SourceStats`].
    pub fn start(
        options: AmqpOptions,
        durable: Option<Durable>,
    ) -> Result<AmqpSource, AmqpUrlError> {
        if options.url.queue().is_none() {
            return Err(AmqpUrlError {
                shown: options.url.to_string(),
                why: "a source reads a queue (?queue=Q), not an exchange".into(),
            });
        }
        if options.max_unacked > u64::from(u16::MAX) {
            tracing::warn!(source = %options.url, max_unacked = options.max_unacked,
                "basic.qos takes at most 65535; the source holds at most that many");
        }
        let stats = options.stats.clone();
        // Unbounded: the broker sends at most `max_unacked` unacknowledged deliveries.
        let (handed_tx, handed) = mpsc::unbounded_channel();
        let (custody, custody_rx) = mpsc::unbounded_channel();
        tokio::spawn(session::run(
            options,
            handed_tx,
            custody_rx,
            durable,
            stats.clone(),
        ));
        Ok(AmqpSource {
            handed,
            custody,
            unacked: HashSet::new(),
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
        let _ = self.custody.send((id.clone(), std::time::Instant::now()));
    }
}

impl Spout for AmqpSource {
    fn next(&mut self) -> NextMessage {
        match self.handed.try_recv() {
            Ok(Handed::Ready(message)) => {
                self.unacked.insert(message.id.clone());
                NextMessage::Ready(message)
            }
            Ok(Handed::Refused(message)) => {
                self.unacked.insert(message.id.clone());
                let failure = Failure::new(
                    NO_MESSAGE_ID,
                    "the message has no message-id property: without a stable id it cannot be \
                     retried or recognised when redelivered",
                );
                NextMessage::Refused(message, failure)
            }
            // A queue has no end; a session that stopped leaves it idle.
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
