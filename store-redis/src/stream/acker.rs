//! The acker task: custody acks (`XACK`), batched, on a connection of its own.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use rebound_engine::backoff::Doubling;
use tokio::sync::mpsc;

use super::{SourceStats, StreamUrl, reader};

/// The most entry ids one `XACK` carries.
const MAX_BATCH: usize = 1_000;
/// Waits between attempts after a failed `XACK`.
const RETRY: Doubling = Doubling::new(Duration::from_millis(50), Duration::from_secs(5));

/// Acknowledges what `acks` brings until every sender is gone and it is all sent.
pub(super) async fn run(
    client: redis::Client,
    url: StreamUrl,
    mut acks: mpsc::UnboundedReceiver<String>,
    stats: Arc<SourceStats>,
) {
    let Some(mut conn) = reader::connect(&client, Duration::ZERO, &stats, "acker").await else {
        return;
    };
    let mut batch = Vec::new();
    while let Some(first) = acks.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match acks.try_recv() {
                Ok(id) => batch.push(id),
                Err(_) => break,
            }
        }
        let mut failures = 0;
        loop {
            let acked: redis::RedisResult<u64> = redis::cmd("XACK")
                .arg(&url.stream)
                .arg(&url.group)
                .arg(&batch)
                .query_async(&mut conn)
                .await;
            match acked {
                Ok(n) => {
                    stats.acked_at_broker.fetch_add(n, Relaxed);
                    stats.unacked.fetch_sub(batch.len() as u64, Relaxed);
                    stats.reachable(true);
                    break;
                }
                Err(e) => {
                    // Kept and sent again: the server holds the entries pending meanwhile (a
                    // restart of ours would read them again and find them in the store).
                    failures += 1;
                    stats.reachable(false);
                    if failures == 1 || failures % 10 == 0 {
                        tracing::warn!(stream = %url, entries = batch.len(), error = %super::url::redact(&e.to_string()), "acknowledging entries failed; trying again");
                    }
                    tokio::time::sleep(RETRY.after(failures)).await;
                }
            }
        }
        batch.clear();
    }
}
