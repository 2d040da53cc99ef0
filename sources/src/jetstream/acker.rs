//! The acker task: custody acks as double acks (`+ACK`, and the server's answer awaited before
//! the message counts as acknowledged), a batch of them at once; `+WPI` (in progress) for
//! every held message whose last delivery or `+WPI` is half of `ack_wait` ago, so that the
//! server does not redeliver what Rebound still holds.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use futures_util::future::join_all;
use rebound_engine::backoff::Doubling;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::held::Held;
use super::{JetStreamUrl, SourceStats};

/// The most acks sent at once.
const MAX_BATCH: usize = 256;
/// Waits between attempts after a failed ack.
const RETRY: Doubling = Doubling::new(Duration::from_millis(50), Duration::from_secs(5));
/// The shortest wait between two looks for messages due a `+WPI`.
const MIN_PROGRESS_EVERY: Duration = Duration::from_millis(50);
/// How often the held messages are looked at, in parts of `ack_wait`: a message gets its
/// `+WPI` between half and five eighths of `ack_wait` after its delivery or last `+WPI`.
const PROGRESS_LOOKS_PER_ACK_WAIT: u32 = 8;
/// Failed attempts in a row after which acks still unsent once the source is gone are given
/// up on (about 10 s): the broker redelivers those messages, and a source started again finds
/// them in the store.
const GIVE_UP_AFTER_CLOSE: u32 = 8;

/// Acknowledges the stream sequences `acks` brings, until every sender is gone and all of
/// them are confirmed; meanwhile keeps the held messages in progress.
pub(super) async fn run(
    url: JetStreamUrl,
    mut acks: mpsc::UnboundedReceiver<(u64, std::time::Instant)>,
    held: Arc<Held>,
    stats: Arc<SourceStats>,
) {
    // Each with the moment its custody began.
    let mut batch: Vec<(u64, std::time::Instant)> = Vec::new();
    let mut open = true;
    let mut failures = 0u32;
    let mut next_try = Instant::now();
    let mut next_progress = Instant::now();
    loop {
        if !open && (batch.is_empty() || failures >= GIVE_UP_AFTER_CLOSE) {
            if !batch.is_empty() {
                tracing::warn!(source = %url, messages = batch.len(), "the source is gone and its broker does not take these acks; they will be redelivered");
            }
            return;
        }
        let retry_at = (!batch.is_empty()).then_some(next_try);
        tokio::select! {
            got = acks.recv(), if open && batch.len() < MAX_BATCH => match got {
                Some(seq) => {
                    batch.push(seq);
                    while batch.len() < MAX_BATCH {
                        match acks.try_recv() {
                            Ok(seq) => batch.push(seq),
                            Err(_) => break,
                        }
                    }
                }
                None => open = false,
            },
            _ = tokio::time::sleep_until(next_progress) => {
                next_progress = Instant::now()
                    + (held.ack_wait() / PROGRESS_LOOKS_PER_ACK_WAIT).max(MIN_PROGRESS_EVERY);
                progress(&held).await;
            }
            _ = sleep_until(retry_at), if retry_at.is_some() => {}
        }
        if batch.is_empty() || Instant::now() < next_try {
            continue;
        }
        let failed = ack(&batch, &held, &stats).await;
        if failed.is_empty() {
            failures = 0;
            next_try = Instant::now();
        } else {
            // Kept and sent again: the server holds them pending meanwhile (and a restart of
            // ours would be redelivered them, and find them in the store).
            failures += 1;
            stats.reachable(false);
            if failures == 1 || failures.is_multiple_of(10) {
                tracing::warn!(source = %url, messages = failed.len(), failures, "acknowledging messages failed; trying again");
            }
            next_try = Instant::now() + RETRY.after(failures);
        }
        batch = failed;
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Double-acks every held message of `batch` at once; returns those whose ack failed.
async fn ack(
    batch: &[(u64, std::time::Instant)],
    held: &Held,
    stats: &SourceStats,
) -> Vec<(u64, std::time::Instant)> {
    let handles: Vec<_> = batch
        .iter()
        // One no longer held was confirmed already (its sequence came twice).
        .filter_map(|&(seq, since)| held.acker(seq).map(|acker| (seq, since, acker)))
        .collect();
    let results = join_all(handles.iter().map(|(_, _, acker)| acker.double_ack())).await;
    let mut failed = Vec::new();
    let mut took = Vec::with_capacity(handles.len());
    for ((seq, since, _), result) in handles.iter().zip(results) {
        match result {
            Ok(()) => {
                held.release(*seq);
                stats.acked_at_broker.fetch_add(1, Relaxed);
                took.push(since.elapsed());
            }
            Err(e) => {
                tracing::debug!(seq, error = %e, "a double ack failed");
                failed.push((*seq, *since));
            }
        }
    }
    stats.observe_custody(took);
    if failed.len() < handles.len() {
        stats.reachable(true);
    }
    failed
}

/// Sends `+WPI` for the held messages due one. A lost one costs only a redelivery, which the
/// reader recognises, so none is retried.
async fn progress(held: &Held) {
    let due = held.progress_due();
    if due.is_empty() {
        return;
    }
    let sent = join_all(due.iter().map(|acker| acker.ack_with(AckKind::Progress))).await;
    let failed = sent.iter().filter(|r| r.is_err()).count();
    if failed > 0 {
        tracing::debug!(failed, "some +WPI could not be sent");
    }
}
