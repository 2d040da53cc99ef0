//! The connection and the durable pull consumer: connected in the background and reconnected
//! with [`Doubling`] waits, forever (an outage never ends the source); the consumer created if
//! missing (explicit acks, `max_deliver` unlimited, no `backoff`), and one that exists checked
//! for what Rebound needs.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::pull::Config;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::{ConnectOptions, Event};
use rebound_engine::backoff::Doubling;

use super::{Deliver, JetStreamOptions, SourceStats};

/// Waits between attempts to reach a server that does not answer.
pub(super) const RECONNECT: Doubling =
    Doubling::new(Duration::from_millis(100), Duration::from_secs(5));

/// A client that connects in the background, reconnects without end and tells `stats` when
/// the server goes and comes back. Fails only on a server address the client cannot take.
pub(super) async fn connect(
    options: &JetStreamOptions,
    stats: Arc<SourceStats>,
) -> Result<async_nats::Client, String> {
    let mut connect = ConnectOptions::new()
        .name(format!("rebound {}", options.url.consumer))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(2))
        .reconnect_delay_callback(|attempts| {
            RECONNECT.after(u32::try_from(attempts).unwrap_or(u32::MAX))
        })
        .event_callback(move |event| {
            let stats = stats.clone();
            async move {
                match event {
                    Event::Connected => stats.reachable(true),
                    Event::Disconnected | Event::ClientError(_) => stats.reachable(false),
                    _ => {}
                }
            }
        });
    if let Some((user, password)) = options.url.credentials() {
        connect = connect.user_and_password(user, password);
    }
    // The address carries no credentials (they go in the CONNECT), so the client's errors
    // cannot show them.
    connect
        .connect(options.url.server.as_str())
        .await
        .map_err(|e| e.to_string())
}

/// The configuration of a consumer created now.
pub(super) fn config(options: &JetStreamOptions) -> Config {
    Config {
        durable_name: Some(options.url.consumer.clone()),
        deliver_policy: match options.url.deliver {
            Deliver::All => DeliverPolicy::All,
            Deliver::New => DeliverPolicy::New,
        },
        ack_policy: AckPolicy::Explicit,
        ack_wait: options.ack_wait,
        // Rebound decides every retry: the broker neither gives up on a message nor spaces
        // its redeliveries.
        max_deliver: -1,
        backoff: Vec::new(),
        filter_subject: options.url.subject.clone().unwrap_or_default(),
        max_ack_pending: i64::try_from(options.max_unacked.max(1)).unwrap_or(i64::MAX),
        ..Config::default()
    }
}

/// The durable consumer, created if missing. An existing one is taken as it is; what would
/// break the contract is refused (acks that are not explicit), the rest warned of.
pub(super) async fn ensure(
    js: &async_nats::jetstream::Context,
    options: &JetStreamOptions,
) -> Result<PullConsumer, String> {
    let url = &options.url;
    let stream = js
        .get_stream_no_info(&url.stream)
        .await
        .map_err(|e| format!("the stream {} could not be looked up: {e}", url.stream))?;
    let consumer: PullConsumer = stream
        .get_or_create_consumer(&url.consumer, config(options))
        .await
        .map_err(|e| {
            format!(
                "the consumer {} of stream {} could not be found or created: {e}",
                url.consumer, url.stream
            )
        })?;
    let c = &consumer.cached_info().config;
    if c.ack_policy != AckPolicy::Explicit {
        return Err(format!(
            "the consumer {} of stream {} acknowledges {:?}, not explicitly: Rebound acknowledges \
             each message at custody (delete the consumer, or name another)",
            url.consumer, url.stream, c.ack_policy
        ));
    }
    if c.max_deliver > 0 || !c.backoff.is_empty() {
        tracing::warn!(source = %url, max_deliver = c.max_deliver, backoff = ?c.backoff,
            "the consumer limits or spaces redeliveries; Rebound decides retries itself and expects max_deliver -1 and no backoff");
    }
    if c.max_ack_pending > 0 && (c.max_ack_pending as u64) < options.max_unacked {
        tracing::warn!(source = %url, max_ack_pending = c.max_ack_pending, max_unacked = options.max_unacked,
            "the consumer's max_ack_pending is below the source's max_unacked; the server bounds the reads");
    }
    let filter = url.subject.clone().unwrap_or_default();
    if url.subject.is_some() && c.filter_subject != filter {
        tracing::warn!(source = %url, consumer_filter = %c.filter_subject,
            "the existing consumer filters another subject than the URL's; it is read as it is");
    }
    Ok(consumer)
}

/// What the consumer says is waiting for it (`num_pending`).
pub(super) async fn lag(consumer: &PullConsumer) -> Option<u64> {
    consumer.get_info().await.ok().map(|i| i.num_pending)
}
