//! The session task: one connection and one channel at a time, owned by this task alone. It
//! connects (again and again, with [`Doubling`] waits, for as long as it takes: an outage never
//! ends the source), finds the queue (declares it durable if it is missing), sets `basic.qos`
//! to the source's `max_unacked` (per consumer), and consumes with manual acks. Deliveries are
//! placed as the module docs say; custody acks come from the spout and go out as `basic.ack`
//! on the channel the message came on.
//!
//! A lost connection kills every delivery tag: the held messages stay held, without a tag,
//! until the broker delivers them again (flagged `redelivered`) on the next channel.
//!
//! A broker killed with SIGKILL may come back without its last acks and without the
//! `redelivered` flag on what it had delivered (a classic queue writes both behind, to its
//! index), and deliver again, unflagged, messages whose custody the store already has. So after
//! a lost connection the store is asked about every delivery, flagged or not, until
//! [`AFTER_LOSS`] times `max_unacked` deliveries have passed (the messages such a broker can
//! give back come first, from the head of its queue), as the JetStream reader does for a
//! sequence it fetched before.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::join_all;
use futures_util::{FutureExt, StreamExt};
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties, Consumer};
use rebound_engine::backoff::Doubling;
use rebound_runtime::durable::Durable;
use rebound_runtime::topology::MessageId;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::held::{Delivered, Held};
use super::mapping::{self, Mapping};
use super::{AmqpOptions, Handed, SourceStats};

/// Waits between attempts to reach a broker that does not answer.
pub(super) const RECONNECT: Doubling =
    Doubling::new(Duration::from_millis(100), Duration::from_secs(5));
/// How often the queue's depth (its lag) is asked for.
const LAG_EVERY: Duration = Duration::from_secs(2);
/// After a lost connection, how many times `max_unacked` deliveries are checked against the
/// store whatever their `redelivered` flag (see the module docs).
const AFTER_LOSS: u64 = 2;
/// The most deliveries or custody acks taken in one turn.
const MAX_BATCH: usize = 256;

/// A custody ack the spout asked for: the message, and when its custody began.
pub(super) type Custody = (MessageId, std::time::Instant);

/// One delivery, mapped, with what placing it needs.
struct Got {
    tag: u64,
    message: rebound_runtime::topology::Message,
    has_id: bool,
    redelivered: bool,
}

pub(super) async fn run(
    options: AmqpOptions,
    handed: mpsc::UnboundedSender<Handed>,
    mut custody: mpsc::UnboundedReceiver<Custody>,
    durable: Option<Durable>,
    stats: Arc<SourceStats>,
) {
    let queue = options.url.queue().unwrap_or_default().to_owned();
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mapping = Mapping {
        queue: &queue,
        default_biz: &options.default_biz,
        run,
    };
    let mut held = Held::default();
    // Deliveries still to check against the store whatever their flag.
    let mut suspect = 0u64;
    let mut failures = 0u32;
    // Channels opened so far (a part of an id-less message's id).
    let mut channels = 0u64;
    loop {
        let session = match open(&options, &queue).await {
            Ok(session) => session,
            Err(e) => {
                failures += 1;
                stats.reachable(false);
                if failures == 1 || failures.is_multiple_of(10) {
                    tracing::warn!(source = %options.url, error = %e, failures, "the queue's broker cannot be used; trying again");
                }
                // Custody acks meanwhile: none can be sent, each is owed.
                let wait = tokio::time::sleep(RECONNECT.after(failures));
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        _ = &mut wait => break,
                        got = custody.recv() => match got {
                            Some((id, _)) => {
                                let _ = held.custody(&id);
                            }
                            None => return,
                        },
                    }
                }
                continue;
            }
        };
        channels += 1;
        stats.reachable(true);
        let Session {
            connection,
            channel,
            mut consumer,
        } = session;
        let mut next_lag = Instant::now();
        let lost = loop {
            tokio::select! {
                first = consumer.next() => {
                    let Some(first) = first else { break "the broker cancelled the consumer".to_owned() };
                    let mut batch = vec![first];
                    while batch.len() < MAX_BATCH {
                        match consumer.next().now_or_never() {
                            Some(Some(d)) => batch.push(d),
                            _ => break,
                        }
                    }
                    let mut got = Vec::with_capacity(batch.len());
                    let mut error = None;
                    for d in batch {
                        match d {
                            Ok(d) => {
                                let (message, has_id) = mapping::message(
                                    mapping,
                                    channels,
                                    d.delivery_tag,
                                    d.routing_key.as_str(),
                                    d.properties.message_id().as_ref().map(|s| s.as_str()),
                                    d.properties.headers().as_ref(),
                                    Bytes::from(d.data),
                                );
                                got.push(Got { tag: d.delivery_tag, message, has_id, redelivered: d.redelivered });
                            }
                            Err(e) => error = Some(e.to_string()),
                        }
                    }
                    if !place(got, &mut held, &channel, &handed, durable.as_ref(), &mut suspect, &stats).await {
                        close(&connection).await;
                        return;
                    }
                    if let Some(e) = error {
                        break e;
                    }
                }
                got = custody.recv() => match got {
                    Some(first) => {
                        let mut batch = vec![first];
                        while batch.len() < MAX_BATCH {
                            match custody.try_recv() {
                                Ok(c) => batch.push(c),
                                Err(_) => break,
                            }
                        }
                        if let Err(e) = ack(batch, &mut held, &channel, &stats).await {
                            break e;
                        }
                    }
                    None => {
                        // The spout is gone (the topology stopped, or the source was dropped):
                        // what it held unacknowledged goes back to the queue.
                        close(&connection).await;
                        return;
                    }
                },
                _ = tokio::time::sleep_until(next_lag) => {
                    next_lag = Instant::now() + LAG_EVERY;
                    match channel.queue_declare(queue.as_str().into(), QueueDeclareOptions { passive: true, ..Default::default() }, FieldTable::default()).await {
                        Ok(q) => stats.lag.store(u64::from(q.message_count()), Relaxed),
                        Err(e) => break format!("the queue could not be looked at: {e}"),
                    }
                }
            }
        };
        held.channel_lost();
        suspect = AFTER_LOSS.saturating_mul(options.max_unacked.max(1));
        stats.unacked.store(0, Relaxed);
        stats.reachable(false);
        failures = 1;
        tracing::warn!(source = %options.url, error = %lost, "the connection to the queue's broker is lost; reconnecting (what it held comes back redelivered)");
        close(&connection).await;
        tokio::time::sleep(RECONNECT.after(failures)).await;
    }
}

struct Session {
    connection: Connection,
    channel: Channel,
    consumer: Consumer,
}

/// A connection, a channel with `basic.qos` at `max_unacked`, the queue found (or declared
/// durable), and a consumer with manual acks on it.
async fn open(options: &AmqpOptions, queue: &str) -> Result<Session, String> {
    let properties = ConnectionProperties::default()
        .with_connection_name(format!("rebound {}", options.consumer).into());
    // The URI is built, not written: no text with the password is ever made.
    let connection = tokio::time::timeout(
        Duration::from_secs(10),
        Connection::connect_uri(options.url.uri(), properties),
    )
    .await
    .map_err(|_| "the broker did not answer within 10 s".to_owned())?
    .map_err(|e| format!("cannot connect: {e}"))?;
    let result = async {
        let mut channel = connection
            .create_channel()
            .await
            .map_err(|e| format!("cannot open a channel: {e}"))?;
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        if channel
            .queue_declare(queue.into(), passive, FieldTable::default())
            .await
            .is_err()
        {
            // Missing (the broker closed the channel): declared durable on a new one.
            channel = connection
                .create_channel()
                .await
                .map_err(|e| format!("cannot open a channel: {e}"))?;
            let durable = QueueDeclareOptions {
                durable: true,
                ..Default::default()
            };
            channel
                .queue_declare(queue.into(), durable, FieldTable::default())
                .await
                .map_err(|e| format!("the queue {queue} could not be found or declared: {e}"))?;
        }
        channel
            .basic_qos(prefetch(options.max_unacked), BasicQosOptions::default())
            .await
            .map_err(|e| format!("basic.qos was refused: {e}"))?;
        let consumer = channel
            .basic_consume(
                queue.into(),
                format!("rebound-{}", options.consumer).into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| format!("cannot consume the queue {queue}: {e}"))?;
        Ok::<_, String>((channel, consumer))
    }
    .await;
    match result {
        Ok((channel, consumer)) => Ok(Session {
            connection,
            channel,
            consumer,
        }),
        Err(e) => {
            close(&connection).await;
            Err(e)
        }
    }
}

/// `basic.qos`'s prefetch count for `max_unacked` (at least 1, at most 65,535: the field is
/// 16 bits).
pub(super) fn prefetch(max_unacked: u64) -> u16 {
    u16::try_from(max_unacked.max(1)).unwrap_or(u16::MAX)
}

async fn close(connection: &Connection) {
    let _ = tokio::time::timeout(
        Duration::from_secs(2),
        connection.close(200, "rebound source stopped".into()),
    )
    .await;
}

/// Places a batch of deliveries: an id-less one is refused; one owed or one the store already
/// has custody of is acknowledged at once; one held already is not handed out again; the rest
/// are held and handed out. False once the spout is gone.
async fn place(
    got: Vec<Got>,
    held: &mut Held,
    channel: &Channel,
    handed: &mpsc::UnboundedSender<Handed>,
    durable: Option<&Durable>,
    suspect: &mut u64,
    stats: &SourceStats,
) -> bool {
    if got.is_empty() {
        return true;
    }
    stats.received.fetch_add(got.len() as u64, Relaxed);
    let again: Vec<MessageId> = got
        .iter()
        .filter(|g| {
            let after_loss = *suspect > 0;
            *suspect = suspect.saturating_sub(1);
            (g.redelivered || after_loss) && g.has_id
        })
        .map(|g| g.message.id.clone())
        .collect();
    stats
        .redelivered
        .fetch_add(got.iter().filter(|g| g.redelivered).count() as u64, Relaxed);
    let known = match durable {
        Some(durable) if !again.is_empty() => known(durable, again).await,
        _ => HashSet::new(),
    };
    let mut ack_now = Vec::new();
    for g in got {
        if !g.has_id {
            held.hold(g.message.id.clone(), g.tag);
            if handed.send(Handed::Refused(g.message)).is_err() {
                return false;
            }
            continue;
        }
        if known.contains(&g.message.id) && !held.contains(&g.message.id) {
            // Its custody ack was lost (a crash between the store's commit and the ack, or a
            // broker that lost the ack): acknowledged again, not processed again.
            held.settled(&g.message.id);
            ack_now.push(g.tag);
            continue;
        }
        match held.deliver(&g.message.id, g.tag) {
            Delivered::New => {
                if handed.send(Handed::Ready(g.message)).is_err() {
                    return false;
                }
            }
            Delivered::Again => {}
            Delivered::Owed => ack_now.push(g.tag),
        }
    }
    stats.unacked.store(held.live() as u64, Relaxed);
    if !ack_now.is_empty() {
        let sent = join_all(
            ack_now
                .iter()
                .map(|&tag| channel.basic_ack(tag, BasicAckOptions::default())),
        )
        .await;
        let ok = sent.iter().filter(|r| r.is_ok()).count() as u64;
        stats.acked_at_broker.fetch_add(ok, Relaxed);
    }
    true
}

/// Sends the custody acks of `batch` (`basic.ack`, one per live tag). An error means the
/// channel is gone: the messages whose acks it lost are owed.
async fn ack(
    batch: Vec<Custody>,
    held: &mut Held,
    channel: &Channel,
    stats: &SourceStats,
) -> Result<(), String> {
    let mut sends = Vec::with_capacity(batch.len());
    for (id, since) in batch {
        let tags = held.custody(&id);
        if !tags.is_empty() {
            sends.push((id, since, tags));
        }
    }
    stats.unacked.store(held.live() as u64, Relaxed);
    let results = join_all(sends.iter().map(|(_, _, tags)| async move {
        for &tag in tags {
            channel
                .basic_ack(tag, BasicAckOptions::default())
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    }))
    .await;
    let mut took = Vec::with_capacity(sends.len());
    let mut error = None;
    for ((id, since, _), result) in sends.into_iter().zip(results) {
        match result {
            Ok(()) => {
                stats.acked_at_broker.fetch_add(1, Relaxed);
                took.push(since.elapsed());
            }
            Err(e) => {
                held.ack_lost(id);
                error = Some(e);
            }
        }
    }
    stats.observe_custody(took);
    match error {
        None => Ok(()),
        Some(e) => Err(format!("a basic.ack failed: {e}")),
    }
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
