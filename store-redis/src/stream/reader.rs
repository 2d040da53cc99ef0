//! The reader task: the group made if missing, this consumer's own pending entries first, then
//! new ones in batches, and every half lease the entries idle past the lease taken over.

use std::time::Duration;

use rebound_engine::backoff::Doubling;
use rebound_runtime::durable::Durable;
use rebound_runtime::topology::{Message, MessageId};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{SourceStats, StreamOptions, entry};

/// Waits between attempts to reach a server that does not answer.
const RECONNECT: Doubling = Doubling::new(Duration::from_millis(100), Duration::from_secs(5));
/// How often the group's lag is asked for.
const LAG_EVERY: Duration = Duration::from_secs(2);

/// Which entries the next read asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// This consumer's own pending entries (a restart's), after `after`.
    Own { after: String },
    /// New entries (`>`).
    New,
}

/// Connects with a response bound above the blocking read's wait.
pub(super) async fn connect(
    client: &redis::Client,
    block: Duration,
    stats: &SourceStats,
    what: &str,
) -> Option<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
        .set_response_timeout(Some(block + Duration::from_secs(5)))
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(2));
    let mut failures = 0;
    loop {
        match ConnectionManager::new_with_config(client.clone(), config.clone()).await {
            Ok(conn) => return Some(conn),
            Err(e) => {
                failures += 1;
                stats.reachable(false);
                if failures == 1 || failures % 10 == 0 {
                    tracing::warn!(error = %super::url::redact(&e.to_string()), "the stream's server does not answer ({what}); trying again");
                }
                tokio::time::sleep(RECONNECT.after(failures)).await;
            }
        }
    }
}

pub(super) async fn run(
    client: redis::Client,
    options: StreamOptions,
    entries: mpsc::Sender<Message>,
    acks: super::acker::Acks,
    held: super::Held,
    durable: Option<Durable>,
    stats: Arc<SourceStats>,
) {
    let Some(mut conn) = connect(&client, options.block, &stats, "reader").await else {
        return;
    };
    let mut group_ready = false;
    let mut phase = Phase::Own { after: "0".into() };
    let mut next_claim = Instant::now();
    let mut claim_cursor = "0-0".to_owned();
    let mut next_lag = Instant::now();
    let mut next_touch = Instant::now() + options.lease / 2;
    let mut failures = 0;
    while !entries.is_closed() {
        let unacked = stats.unacked.load(Relaxed);
        let under_bound =
            usize::try_from(options.max_unacked.saturating_sub(unacked)).unwrap_or(usize::MAX);
        if under_bound == 0 {
            // This consumer holds its most unacknowledged entries (the topology is at its
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
        let read = async {
            if !group_ready {
                create_group(&mut conn, &options).await?;
                group_ready = true;
            }
            if Instant::now() >= next_touch {
                next_touch = Instant::now() + options.lease / 2;
                touch(&mut conn, &options, &held).await?;
            }
            if Instant::now() >= next_lag {
                next_lag = Instant::now() + LAG_EVERY;
                if let Some(lag) = lag(&mut conn, &options).await {
                    stats.lag.store(lag, Relaxed);
                }
            }
            let read = match &phase {
                Phase::Own { after } => {
                    let got = read_group(&mut conn, &options, after, room, None).await?;
                    match got.last() {
                        Some(last) => {
                            phase = Phase::Own {
                                after: last.id.clone(),
                            }
                        }
                        None => phase = Phase::New,
                    }
                    (got, true)
                }
                Phase::New if Instant::now() >= next_claim => {
                    next_claim = Instant::now() + options.lease / 2;
                    let (got, cursor) =
                        auto_claim(&mut conn, &options, &claim_cursor, room).await?;
                    claim_cursor = cursor;
                    (got, true)
                }
                Phase::New => {
                    let block = options
                        .block
                        .min(next_claim - Instant::now())
                        .min(next_touch - Instant::now());
                    (
                        read_group(&mut conn, &options, ">", room, Some(block)).await?,
                        false,
                    )
                }
            };
            Ok::<_, redis::RedisError>(read)
        };
        let (got, again) = match read.await {
            Ok(read) => {
                failures = 0;
                stats.reachable(true);
                read
            }
            Err(e) => {
                failures += 1;
                stats.reachable(false);
                if e.code() == Some("NOGROUP") {
                    group_ready = false;
                }
                if failures == 1 || failures % 10 == 0 {
                    tracing::warn!(stream = %options.url, error = %super::url::redact(&e.to_string()), "reading the stream failed; trying again");
                }
                tokio::time::sleep(RECONNECT.after(failures)).await;
                continue;
            }
        };
        // Entries deleted from the stream while pending come back without fields: nothing to
        // process, so they are acknowledged.
        stats.unacked.fetch_add(got.len() as u64, Relaxed);
        let (live, gone): (Vec<StreamId>, Vec<StreamId>) =
            got.into_iter().partition(|e| !e.map.is_empty());
        for e in gone {
            acks.send(e.id);
        }
        // An entry this consumer already holds (in flight, or on its way to the spout) is not
        // handed out again when a read of the pending entries names it.
        let live: Vec<StreamId> = {
            let held = held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            live.into_iter().filter(|e| !held.contains(&e.id)).collect()
        };
        let messages: Vec<Message> = live
            .iter()
            .map(|e| {
                entry::message(
                    &options.url.stream,
                    e,
                    &options.fields,
                    &options.default_biz,
                )
            })
            .collect();
        stats.received.fetch_add(messages.len() as u64, Relaxed);
        if again {
            stats.redelivered.fetch_add(messages.len() as u64, Relaxed);
        }
        let known = match (&durable, again) {
            (Some(durable), true) if !messages.is_empty() => known(durable, &messages).await,
            _ => Default::default(),
        };
        for message in messages {
            if known.contains(&message.id) {
                // Its custody ack was lost (a crash between the store's commit and the XACK):
                // acknowledged again, not processed again.
                if let Some(entry) = message.id.as_str().get(options.url.stream.len() + 1..) {
                    acks.send(entry.to_owned());
                }
                continue;
            }
            if let Some(entry) = message.id.as_str().get(options.url.stream.len() + 1..) {
                let mut held = held
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                held.insert(entry.to_owned());
            }
            if entries.send(message).await.is_err() {
                return;
            }
        }
    }
}

/// Which of `messages` the store already has custody of (an error is logged and taken as
/// none: the message is then processed, at least once).
async fn known(durable: &Durable, messages: &[Message]) -> std::collections::HashSet<MessageId> {
    let ids: Vec<MessageId> = messages.iter().map(|m| m.id.clone()).collect();
    let durable = durable.clone();
    match tokio::task::spawn_blocking(move || durable.known(&ids)).await {
        Ok(Ok(known)) => known,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not ask the store which redelivered entries it holds; they are processed again");
            Default::default()
        }
        Err(_) => Default::default(),
    }
}

/// Resets the idle time of the entries this consumer holds and that have been idle half a
/// lease (`XCLAIM … JUSTID` to itself), so that no other consumer takes over a message still
/// in flight here.
async fn touch(
    conn: &mut ConnectionManager,
    o: &StreamOptions,
    held: &super::Held,
) -> redis::RedisResult<()> {
    let ids: Vec<String> = {
        let held = held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.iter().cloned().collect()
    };
    for chunk in ids.chunks(500) {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg(&o.url.stream)
            .arg(&o.url.group)
            .arg(&o.consumer)
            .arg((o.lease / 2).as_millis() as u64)
            .arg(chunk)
            .arg("JUSTID")
            .query_async(conn)
            .await?;
    }
    Ok(())
}

/// `XGROUP CREATE … MKSTREAM`; a group that exists is left as it is.
async fn create_group(conn: &mut ConnectionManager, o: &StreamOptions) -> redis::RedisResult<()> {
    let made: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&o.url.stream)
        .arg(&o.url.group)
        .arg(o.url.start_id())
        .arg("MKSTREAM")
        .query_async(conn)
        .await;
    match made {
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
        other => other,
    }
}

/// `XREADGROUP GROUP G C COUNT n [BLOCK ms] STREAMS S id`.
async fn read_group(
    conn: &mut ConnectionManager,
    o: &StreamOptions,
    id: &str,
    count: usize,
    block: Option<Duration>,
) -> redis::RedisResult<Vec<StreamId>> {
    let mut cmd = redis::cmd("XREADGROUP");
    cmd.arg("GROUP")
        .arg(&o.url.group)
        .arg(&o.consumer)
        .arg("COUNT")
        .arg(count);
    if let Some(block) = block {
        cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
    }
    cmd.arg("STREAMS").arg(&o.url.stream).arg(id);
    let reply: Option<StreamReadReply> = cmd.query_async(conn).await?;
    Ok(reply
        .map(|r| r.keys.into_iter().flat_map(|k| k.ids).collect())
        .unwrap_or_default())
}

/// `XAUTOCLAIM S G C lease cursor COUNT n`: entries idle past the lease, now this consumer's.
async fn auto_claim(
    conn: &mut ConnectionManager,
    o: &StreamOptions,
    cursor: &str,
    count: usize,
) -> redis::RedisResult<(Vec<StreamId>, String)> {
    let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
        .arg(&o.url.stream)
        .arg(&o.url.group)
        .arg(&o.consumer)
        .arg(o.lease.as_millis() as u64)
        .arg(cursor)
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await?;
    Ok((reply.claimed, reply.next_stream_id))
}

/// The group's `lag` from `XINFO GROUPS` (Redis 7), if the server gives it.
async fn lag(conn: &mut ConnectionManager, o: &StreamOptions) -> Option<u64> {
    let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(&o.url.stream)
        .query_async(conn)
        .await
        .ok()?;
    let group = groups.into_iter().find(|g| {
        g.get("name").is_some_and(
            |n| matches!(n, redis::Value::BulkString(b) if b == o.url.group.as_bytes()),
        )
    })?;
    match group.get("lag")? {
        redis::Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}
