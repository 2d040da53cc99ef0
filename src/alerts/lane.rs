//! One receiver's lane: the task that owns its queue, batches its letters and delivers each
//! batch with retries, and its counts; once the receiver answers again after letters were
//! deferred, it sends those from the store (`backlog.rs`).

use super::backlog::{AlertBacklog, BacklogCursor, Deferral};
use super::webhook::{Attempt, Request};
use super::{AlertCounts, AlertOptions};
use crate::config::Receiver;
use rebound_engine::backoff::Doubling;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::{Instant, sleep_until};

/// A letter on a queue, with the bytes it takes there (its JSON's length).
pub(super) type Queued = (serde_json::Value, usize);

/// A receiver's state that `send` and its lane share: the counts, the bytes queued, and the
/// open deferral.
#[derive(Debug, Default)]
pub(super) struct LaneState {
    sent: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    deferred: AtomicU64,
    /// What the queue's letters take, in bytes of JSON.
    pub(super) queued_bytes: AtomicUsize,
    /// `Some` while letters are deferred: every new letter is, until the lane sends them.
    deferral: Mutex<Option<Deferral>>,
    /// Wakes an idle lane when a deferral begins.
    wake: Notify,
}

impl LaneState {
    pub(super) fn dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> AlertCounts {
        AlertCounts {
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            deferred: self.deferred.load(Ordering::Relaxed),
        }
    }

    /// The open deferral, if any.
    pub(super) fn deferral(&self) -> Option<Deferral> {
        *self.lock_deferral()
    }

    pub(super) fn lock_deferral(&self) -> std::sync::MutexGuard<'_, Option<Deferral>> {
        self.deferral.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Defers a letter dead-lettered at `at_ms`: it joins the open deferral or opens one.
    /// The caller holds the deferral's lock (`deferral`).
    pub(super) fn defer(&self, deferral: &mut Option<Deferral>, at_ms: u64) {
        self.deferred.fetch_add(1, Ordering::Relaxed);
        match deferral {
            Some(d) => d.add(at_ms),
            None => {
                *deferral = Some(Deferral::of(at_ms));
                self.wake.notify_one();
            }
        }
    }

    /// Puts back a window the lane could not send (its letters were counted when deferred).
    fn defer_again(&self, window: Deferral) {
        let mut deferral = self.lock_deferral();
        *deferral = Some(deferral.map_or(window, |d| d.merge(window)));
    }
}

/// What a batch that cannot be delivered in time becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnGiveUp {
    /// Counted as dropped (letters from the queue).
    Drop,
    /// Kept for later (letters read back from the store, which still has them).
    Keep,
}

/// What the lane waits for next.
enum Next {
    Batch(Vec<serde_json::Value>),
    /// A deferral began, or a catch-up is due again: look at the deferral.
    Woken,
    /// The queue is closed and empty.
    Closed,
}

/// The task of one receiver.
pub(super) struct Lane {
    pub(super) receiver: Receiver,
    pub(super) queue: mpsc::Receiver<Queued>,
    pub(super) state: Arc<LaneState>,
    pub(super) options: AlertOptions,
    /// `Some` once the dispatcher shuts down: the time by which everything must be done.
    pub(super) deadline: watch::Receiver<Option<Instant>>,
    /// Where deferred letters are read back from, once the integrator said.
    pub(super) backlog: Arc<OnceLock<Arc<dyn AlertBacklog>>>,
}

impl Lane {
    /// Batches and delivers until the queue is closed and empty (or the shutdown's deadline
    /// has passed, when what is left is counted as dropped). Whenever the queue is empty and
    /// letters were deferred, sends those from the store first.
    pub(super) async fn run(mut self) {
        let request = match Request::new(&self.receiver) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(receiver = %self.receiver.name, error = %e, "cannot send alerts to this receiver; its letters are dropped");
                None
            }
        };
        // After a catch-up that failed, the next is not tried before this.
        let mut catch_up_at: Option<Instant> = None;
        let backoff = Doubling::new(self.options.retry_first, self.options.retry_max);
        let mut failed_catch_ups = 0;
        loop {
            let due = catch_up_at.is_none_or(|at| Instant::now() >= at);
            if let Some(request) = &request
                && due
                && self.queue.is_empty()
                && self.stopping().is_none()
            {
                match self.catch_up(request).await {
                    None => {}
                    Some(true) => {
                        catch_up_at = None;
                        failed_catch_ups = 0;
                    }
                    Some(false) => {
                        failed_catch_ups += 1;
                        catch_up_at = Some(Instant::now() + backoff.after(failed_catch_ups));
                    }
                }
            }
            let retry_at = catch_up_at.filter(|_| self.state.deferral().is_some());
            match self.next_batch(retry_at).await {
                Next::Closed => break,
                Next::Woken => {}
                Next::Batch(batch) => match &request {
                    Some(request) => {
                        self.deliver(request, batch, OnGiveUp::Drop).await;
                    }
                    None => self.state.dropped(batch.len() as u64),
                },
            }
        }
    }

    /// The shutdown's deadline, if the dispatcher is shutting down.
    fn stopping(&self) -> Option<Instant> {
        *self.deadline.borrow()
    }

    /// The next batch: the first letter queued, and what follows it within `batch_wait` (at
    /// most `batch_max` in all); [`Next::Closed`] once the queue is closed and empty. Waiting
    /// for the first letter, a deferral that begins (or `retry_at`) wakes it. While shutting
    /// down, nothing is waited for but the first letter.
    async fn next_batch(&mut self, retry_at: Option<Instant>) -> Next {
        let first = tokio::select! {
            letter = self.queue.recv() => letter,
            () = self.state.wake.notified() => return Next::Woken,
            () = sleep_until(retry_at.unwrap_or_else(far_future)) => return Next::Woken,
        };
        let Some(first) = first else {
            return Next::Closed;
        };
        let mut batch = vec![self.taken(first)];
        let fill_by = Instant::now() + self.options.batch_wait;
        while batch.len() < self.options.batch_max {
            if self.stopping().is_some() {
                match self.queue.try_recv() {
                    Ok(letter) => batch.push(self.taken(letter)),
                    Err(_) => break,
                }
                continue;
            }
            tokio::select! {
                letter = self.queue.recv() => match letter {
                    Some(letter) => batch.push(self.taken(letter)),
                    None => break,
                },
                () = sleep_until(fill_by) => break,
                // The shutdown began: send what is there now.
                _ = self.deadline.changed() => {}
            }
        }
        Next::Batch(batch)
    }

    /// A letter off the queue: its bytes no longer count.
    fn taken(&self, (letter, bytes): Queued) -> serde_json::Value {
        self.state.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
        letter
    }

    /// Sends the deferred letters from the store, a page at a time, and lets new letters into
    /// the queue again. `None` if there was nothing to send; `Some(false)` if the store or
    /// the receiver failed (the window is deferred again, to be tried later).
    async fn catch_up(&mut self, request: &Request) -> Option<bool> {
        let backlog = self.backlog.get().cloned()?;
        let window = self.state.lock_deferral().take()?;
        tracing::info!(
            receiver = %self.receiver.name,
            letters = window.letters,
            "sending the alerts deferred while this receiver's queue was full, from the store"
        );
        let mut cursor: Option<BacklogCursor> = None;
        loop {
            if self.stopping().is_some() {
                self.state.defer_again(window);
                return Some(false);
            }
            let (source, name, limit) = (
                Arc::clone(&backlog),
                self.receiver.name.clone(),
                self.options.batch_max,
            );
            let read =
                tokio::task::spawn_blocking(move || source.page(&name, &window, cursor, limit))
                    .await
                    .unwrap_or_else(|e| Err(format!("the read panicked: {e}")));
            let page = match read {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(receiver = %self.receiver.name, error = %e, "cannot read the deferred alerts from the store; trying again later");
                    self.state.defer_again(window);
                    return Some(false);
                }
            };
            if !page.letters.is_empty()
                && !self.deliver(request, page.letters, OnGiveUp::Keep).await
            {
                self.state.defer_again(window);
                return Some(false);
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Some(true),
            }
        }
    }

    /// Delivers `batch`, retrying with backoff until it is answered 2xx or `give_up_after`
    /// (or the shutdown's deadline) has passed; whether it was delivered.
    async fn deliver(
        &mut self,
        request: &Request,
        batch: Vec<serde_json::Value>,
        on_give_up: OnGiveUp,
    ) -> bool {
        let n = batch.len() as u64;
        let body = request.body(batch);
        let give_up_at = Instant::now() + self.options.give_up_after;
        let backoff = Doubling::new(self.options.retry_first, self.options.retry_max);
        let mut failures = 0;
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
                attempt = request.post(body.clone(), within) => attempt,
                () = deadline_passes(&mut self.deadline) => {
                    Attempt::Failed("the shutdown's deadline passed while it waited for an answer".into())
                }
            };
            match attempt {
                Attempt::Delivered => {
                    self.state.sent.fetch_add(n, Ordering::Relaxed);
                    return true;
                }
                Attempt::Failed(why) => {
                    self.state.failed.fetch_add(1, Ordering::Relaxed);
                    failures += 1;
                    let retry_in = backoff.after(failures);
                    tracing::warn!(receiver = %self.receiver.name, letters = n, error = %why, ?retry_in, "an alert delivery failed");
                }
            }
            let wake = Instant::now() + backoff.after(failures);
            self.wait_until(wake.min(end)).await;
        }
        if on_give_up == OnGiveUp::Keep {
            return false;
        }
        tracing::warn!(receiver = %self.receiver.name, letters = n, "alerts given up: their receiver did not take them in time");
        self.state.dropped(n);
        if self.stopping().is_some_and(|d| Instant::now() >= d) {
            // Past the shutdown's deadline: nothing queued will be delivered either.
            let mut left = 0;
            while let Ok(letter) = self.queue.try_recv() {
                self.taken(letter);
                left += 1;
            }
            self.state.dropped(left);
        }
        false
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

/// A time no wait reaches (a day from now).
fn far_future() -> Instant {
    Instant::now() + std::time::Duration::from_secs(86_400)
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
