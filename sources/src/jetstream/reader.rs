//! The reader task: connects, makes the durable consumer if it is missing, and fetches in
//! batches, only when the spout's channel has room and the source holds fewer than
//! `max_unacked`. A message the broker delivers again that the store already has custody of
//! is acknowledged at once, not handed out; one this source still holds is not handed out a
//! second time.
//!
//! Delivered again means a delivery count above 1, or a stream sequence at or below the
//! highest this reader fetched before: nats-server 2.9 writes a consumer's state behind, so
//! one killed with SIGKILL may come back with its acks, even confirmed ones, or its delivered
//! pointer from a moment earlier, and deliver those messages again, some with a count of 1.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::consumer::PullConsumer;
use futures_util::StreamExt;
use rebound_runtime::durable::Durable;
use rebound_runtime::topology::{Message, MessageId};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::consumer::{self, RECONNECT};
use super::held::{Held, Inserted};
use super::mapping::{self, Mapping};
use super::{JetStreamOptions, SourceStats};

/// How often the consumer's lag is asked for.
const LAG_EVERY: Duration = Duration::from_secs(2);
/// How long a fetch may take past its own `expires` before it is ended: the server answers
/// at `expires`, but a pull request sent just before a reconnect is lost with the old
/// connection, and nothing would answer it.
const FETCH_SLACK: Duration = Duration::from_secs(2);
/// How long the first connection may take before the reader says so.
const PENDING_WARNING: Duration = Duration::from_secs(2);

/// One fetched message, mapped, with what the reader needs to place it.
struct Fetched {
    seq: u64,
    message: Message,
    redelivered: bool,
}

pub(super) async fn run(
    options: JetStreamOptions,
    entries: mpsc::Sender<Message>,
    acks: mpsc::UnboundedSender<(u64, std::time::Instant)>,
    held: Arc<Held>,
    durable: Option<Durable>,
    stats: Arc<SourceStats>,
) {
    let client = match consumer::connect(&options, stats.clone()).await {
        Ok(client) => client,
        Err(e) => {
            // Only an address the client cannot take (checked at start, so not expected).
            tracing::error!(source = %options.url, error = %e, "the source cannot connect; it reads nothing");
            return;
        }
    };
    let js = async_nats::jetstream::new(client.clone());
    let mapping = Mapping {
        stream: &options.url.stream,
        biz_token: options.biz_token,
        default_biz: &options.default_biz,
    };
    let mut consumer: Option<PullConsumer> = None;
    // The highest stream sequence fetched so far (see the module docs).
    let mut seen = 0u64;
    let mut next_lag = Instant::now();
    let mut failures = 0u32;
    let (started, mut said_pending) = (Instant::now(), false);
    while !entries.is_closed() {
        let under_bound =
            usize::try_from(options.max_unacked.max(1).saturating_sub(held.len() as u64))
                .unwrap_or(usize::MAX);
        if under_bound == 0 {
            // The source holds its most unacknowledged messages (the topology is at its
            // pending bound): custody acks free room.
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        if entries.capacity() < options.batch.max(1) {
            // The spout has not drained a batch yet: wait until it takes one more.
            match entries.reserve().await {
                Ok(permit) => drop(permit),
                Err(_) => return,
            }
            continue;
        }
        let room = options.batch.max(1).min(under_bound);
        match client.connection_state() {
            State::Connected => {}
            State::Pending => {
                // The first connection, under way (its failed attempts reach the stats through
                // the client's events).
                if !said_pending && started.elapsed() >= PENDING_WARNING {
                    said_pending = true;
                    tracing::warn!(source = %options.url, "the stream's server does not answer yet; trying on");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            State::Disconnected => {
                // Nothing is asked of a server that is not there: a pull request queued
                // meanwhile would reach it after the reconnect, for an inbox long gone.
                failures += 1;
                stats.reachable(false);
                if failures == 1 || failures.is_multiple_of(10) {
                    tracing::warn!(source = %options.url, failures, "the stream's server does not answer; waiting for the reconnect");
                }
                tokio::time::sleep(RECONNECT.after(failures).min(options.block)).await;
                continue;
            }
        }
        let (got, error) = match &consumer {
            Some(c) => {
                if Instant::now() >= next_lag {
                    next_lag = Instant::now() + LAG_EVERY;
                    if let Some(lag) = consumer::lag(c).await {
                        stats.lag.store(lag, Relaxed);
                    }
                }
                fetch(c, room, options.block).await
            }
            None => match consumer::ensure(&js, &options).await {
                Ok(c) => {
                    held.set_ack_wait(c.cached_info().config.ack_wait);
                    consumer = Some(c);
                    continue;
                }
                Err(e) => (Vec::new(), Some(e)),
            },
        };
        match error {
            None => {
                if client.connection_state() == State::Connected {
                    failures = 0;
                    stats.reachable(true);
                }
            }
            Some(e) => {
                // Looked up again after any failure (the consumer may be gone, or the server
                // restarted); what was fetched before the failure is still placed below.
                consumer = None;
                failures += 1;
                stats.reachable(false);
                if failures == 1 || failures.is_multiple_of(10) {
                    tracing::warn!(source = %options.url, error = %e, failures, "reading the stream failed; trying again");
                }
            }
        }
        let fetched: Vec<Fetched> = got
            .into_iter()
            .filter_map(|m| take(m, mapping, &held, &mut seen))
            .collect();
        if !place(fetched, &entries, &acks, durable.as_ref(), &stats).await {
            return;
        }
        if failures > 0 {
            tokio::time::sleep(RECONNECT.after(failures)).await;
        }
    }
}

/// Up to `room` messages, waiting at most `block` for the first; with the error that ended
/// the fetch early, if one did (the messages fetched before it are kept).
async fn fetch(
    consumer: &PullConsumer,
    room: usize,
    block: Duration,
) -> (Vec<async_nats::jetstream::Message>, Option<String>) {
    let mut got = Vec::new();
    let read = async {
        let mut batch = consumer
            .batch()
            .max_messages(room)
            .expires(block)
            .messages()
            .await
            .map_err(|e| format!("the fetch request failed: {e}"))?;
        while let Some(m) = batch.next().await {
            got.push(m.map_err(|e| format!("the fetch failed: {e}"))?);
        }
        Ok::<_, String>(())
    };
    let error = match tokio::time::timeout(block + FETCH_SLACK, read).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        // Not an error in itself: the connection's state says whether the server is there.
        Err(_) => None,
    };
    (got, error)
}

/// Holds `m` (with its ack handle) and maps it; `None` for one this source already holds (the
/// server redelivered it while it was held: it is not handed out twice) or one without
/// JetStream's ack subject. `seen` is the highest sequence fetched before.
fn take(
    m: async_nats::jetstream::Message,
    mapping: Mapping<'_>,
    held: &Held,
    seen: &mut u64,
) -> Option<Fetched> {
    let (seq, delivered) = match m.info() {
        Ok(info) => (info.stream_sequence, info.delivered),
        Err(e) => {
            tracing::warn!(subject = %m.subject, error = %e, "a fetched message has no JetStream ack subject; skipped");
            return None;
        }
    };
    let redelivered = delivered > 1 || seq <= *seen;
    *seen = (*seen).max(seq);
    let (m, acker) = m.split();
    if held.insert(seq, acker) == Inserted::Again {
        return None;
    }
    let message = mapping::message(mapping, seq, &m.subject, m.headers.as_ref(), m.payload);
    Some(Fetched {
        seq,
        message,
        redelivered,
    })
}

/// Hands out what was fetched, in stream order, but for redelivered messages the store already
/// has custody of: those are acknowledged again. False once the spout is gone.
async fn place(
    fetched: Vec<Fetched>,
    entries: &mpsc::Sender<Message>,
    acks: &mpsc::UnboundedSender<(u64, std::time::Instant)>,
    durable: Option<&Durable>,
    stats: &SourceStats,
) -> bool {
    if fetched.is_empty() {
        return true;
    }
    stats.received.fetch_add(fetched.len() as u64, Relaxed);
    let again: Vec<MessageId> = fetched
        .iter()
        .filter(|f| f.redelivered)
        .map(|f| f.message.id.clone())
        .collect();
    stats.redelivered.fetch_add(again.len() as u64, Relaxed);
    let known = match durable {
        Some(durable) if !again.is_empty() => known(durable, again).await,
        _ => HashSet::new(),
    };
    for f in fetched {
        if known.contains(&f.message.id) {
            // Its custody ack was lost (a crash between the store's commit and the ack, or a
            // server that lost the ack): acknowledged again, not processed again.
            let _ = acks.send((f.seq, std::time::Instant::now()));
            continue;
        }
        if entries.send(f.message).await.is_err() {
            return false;
        }
    }
    true
}

/// Which of `ids` the store already has custody of (an error is logged and taken as none: the
/// messages are then processed again, at least once).
async fn known(durable: &Durable, ids: Vec<MessageId>) -> HashSet<MessageId> {
    let durable = durable.clone();
    match tokio::task::spawn_blocking(move || durable.known(&ids)).await {
        Ok(Ok(known)) => known,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not ask the store which redelivered messages it holds; they are processed again");
            HashSet::new()
        }
        Err(_) => HashSet::new(),
    }
}
