//! The acker task: custody acks (`XACK`), batched, on a connection of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rebound_engine::backoff::Doubling;
use tokio::sync::mpsc;

use super::{SourceStats, StreamUrl, reader};

/// The most entry ids one `XACK` carries.
const MAX_BATCH: usize = 1_000;
/// Waits between attempts after a failed `XACK`.
const RETRY: Doubling = Doubling::new(Duration::from_millis(50), Duration::from_secs(5));

/// Where custody acks are queued for the acker, and how many it has sent.
#[derive(Debug, Clone)]
pub(super) struct Acks {
    tx: mpsc::UnboundedSender<(String, Instant)>,
    progress: Arc<Progress>,
}

#[derive(Debug, Default)]
pub(super) struct Progress {
    queued: AtomicU64,
    sent: AtomicU64,
}

impl Acks {
    /// A queue, and its receiving end for [`run`].
    pub(super) fn new() -> (
        Acks,
        mpsc::UnboundedReceiver<(String, Instant)>,
        Arc<Progress>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let progress = Arc::new(Progress::default());
        let acks = Acks {
            tx,
            progress: progress.clone(),
        };
        (acks, rx, progress)
    }

    /// Queues the ack of `entry` (its custody began now).
    pub(super) fn send(&self, entry: String) {
        self.progress.queued.fetch_add(1, Relaxed);
        if self.tx.send((entry, Instant::now())).is_err() {
            self.progress.queued.fetch_sub(1, Relaxed);
        }
    }

    /// Waits (blocking this thread) until every ack queued so far is confirmed by the server,
    /// at most `within`; how many are not.
    pub(super) fn wait_sent(&self, within: Duration) -> u64 {
        let target = self.progress.queued.load(Relaxed);
        let left = || target.saturating_sub(self.progress.sent.load(Relaxed));
        let until = Instant::now() + within;
        let wait = || {
            while left() > 0 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        // On a multi-threaded runtime the acker goes on on another thread meanwhile.
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        }
        left()
    }
}

/// Acknowledges what `acks` brings until every sender is gone and it is all sent.
pub(super) async fn run(
    client: redis::Client,
    url: StreamUrl,
    mut acks: mpsc::UnboundedReceiver<(String, Instant)>,
    progress: Arc<Progress>,
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
            let mut xack = redis::cmd("XACK");
            xack.arg(&url.stream).arg(&url.group);
            for (entry, _) in &batch {
                xack.arg(entry);
            }
            let acked: redis::RedisResult<u64> = xack.query_async(&mut conn).await;
            match acked {
                Ok(n) => {
                    stats.acked_at_broker.fetch_add(n, Relaxed);
                    stats.unacked.fetch_sub(batch.len() as u64, Relaxed);
                    progress.sent.fetch_add(batch.len() as u64, Relaxed);
                    stats.observe_custody(batch.iter().map(|(_, since)| since.elapsed()));
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
