//! One receiver's lane: the task that owns its queue, batches its letters and delivers each
//! batch with retries, and its counts.

use super::webhook::{Attempt, Client, Request};
use super::{AlertCounts, AlertOptions};
use crate::config::Receiver;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};

/// A receiver's counters, written by its lane (and by `send` for drops).
#[derive(Debug, Default)]
pub(super) struct Counts {
    sent: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
}

impl Counts {
    pub(super) fn dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> AlertCounts {
        AlertCounts {
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// The task of one receiver.
pub(super) struct Lane {
    pub(super) receiver: Receiver,
    pub(super) queue: mpsc::Receiver<serde_json::Value>,
    pub(super) counts: std::sync::Arc<Counts>,
    pub(super) options: AlertOptions,
    pub(super) client: Client,
    /// `Some` once the dispatcher shuts down: the time by which everything must be done.
    pub(super) deadline: watch::Receiver<Option<Instant>>,
}

impl Lane {
    /// Batches and delivers until the queue is closed and empty (or the shutdown's deadline
    /// has passed, when what is left is counted as dropped).
    pub(super) async fn run(mut self) {
        let request = match Request::new(&self.receiver) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(receiver = %self.receiver.name, error = %e, "cannot send alerts to this receiver; its letters are dropped");
                None
            }
        };
        while let Some(batch) = self.next_batch().await {
            match &request {
                Some(request) => self.deliver(request, batch).await,
                None => self.counts.dropped(batch.len() as u64),
            }
        }
    }

    /// The shutdown's deadline, if the dispatcher is shutting down.
    fn stopping(&self) -> Option<Instant> {
        *self.deadline.borrow()
    }

    /// The next batch: the first letter queued, and what follows it within `batch_wait` (at
    /// most `batch_max` in all). `None` once the queue is closed and empty. While shutting
    /// down, nothing is waited for but the first letter.
    async fn next_batch(&mut self) -> Option<Vec<serde_json::Value>> {
        let first = self.queue.recv().await?;
        let mut batch = vec![first];
        let fill_by = Instant::now() + self.options.batch_wait;
        while batch.len() < self.options.batch_max {
            if self.stopping().is_some() {
                match self.queue.try_recv() {
                    Ok(letter) => batch.push(letter),
                    Err(_) => break,
                }
                continue;
            }
            tokio::select! {
                letter = self.queue.recv() => match letter {
                    Some(letter) => batch.push(letter),
                    None => break,
                },
                () = sleep_until(fill_by) => break,
                // The shutdown began: send what is there now.
                _ = self.deadline.changed() => {}
            }
        }
        Some(batch)
    }

    /// Delivers `batch`, retrying with backoff until it is answered 2xx or `give_up_after`
    /// (or the shutdown's deadline) has passed.
    async fn deliver(&mut self, request: &Request, batch: Vec<serde_json::Value>) {
        let n = batch.len() as u64;
        let body = Request::body(batch);
        let give_up_at = Instant::now() + self.options.give_up_after;
        let mut backoff = self.options.retry_first;
        loop {
            let end = self.stopping().map_or(give_up_at, |d| d.min(give_up_at));
            let now = Instant::now();
            if now >= end {
                break;
            }
            let within = self.options.timeout.min(end - now);
            // A shutdown that begins while the receiver keeps this request waiting ends it
            // at the shutdown's deadline, not at the request's own timeout.
            let attempt = tokio::select! {
                attempt = self.client.post(request, body.clone(), within) => attempt,
                () = deadline_passes(&mut self.deadline) => {
                    Attempt::Failed("the shutdown's deadline passed while it waited for an answer".into())
                }
            };
            match attempt {
                Attempt::Delivered => {
                    self.counts.sent.fetch_add(n, Ordering::Relaxed);
                    return;
                }
                Attempt::Failed(why) => {
                    self.counts.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(receiver = %self.receiver.name, letters = n, error = %why, retry_in = ?backoff, "an alert delivery failed");
                }
            }
            let wake = Instant::now() + backoff;
            backoff = (backoff * 2).min(self.options.retry_max);
            self.wait_until(wake.min(end)).await;
        }
        tracing::warn!(receiver = %self.receiver.name, letters = n, "alerts given up: their receiver did not take them in time");
        self.counts.dropped(n);
        if self.stopping().is_some_and(|d| Instant::now() >= d) {
            // Past the shutdown's deadline: nothing queued will be delivered either.
            let mut left = 0;
            while self.queue.try_recv().is_ok() {
                left += 1;
            }
            self.counts.dropped(left);
        }
    }

    /// Sleeps until `at`, or until the shutdown's deadline if that comes first.
    async fn wait_until(&mut self, at: Instant) {
        loop {
            let until = self.stopping().map_or(at, |d| d.min(at));
            tokio::select! {
                () = sleep_until(until) => return,
                changed = self.deadline.changed() => {
                    if changed.is_err() {
                        // The dispatcher is gone; its queue closes too.
                        sleep_until(until).await;
                        return;
                    }
                }
            }
        }
    }
}

/// Completes once a shutdown has begun and its deadline has passed; never, while none begins.
async fn deadline_passes(deadline: &mut watch::Receiver<Option<Instant>>) {
    loop {
        let at = *deadline.borrow_and_update();
        match at {
            Some(at) => {
                sleep_until(at).await;
                return;
            }
            None => {
                if deadline.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}
