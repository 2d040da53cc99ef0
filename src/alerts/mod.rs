//! The alert dispatcher: each dead letter whose label says `alert: RECEIVER` is sent to that
//! receiver's webhook (`docs/spec/operations.md`, "Dead-letter levels that act").
//!
//! The protocol, whole: [`AlertDispatcher::send`] puts a letter on its receiver's bounded
//! queue with `try_send`, so it never blocks, never awaits and never fails; a full queue or an
//! unknown receiver counts the letter as dropped. Each receiver has a task of its own (a
//! *lane*, `lane.rs`) that takes a batch off its queue (at most `batch_max` letters, waiting at
//! most `batch_wait` after the first) and `POST`s it as `{"dead_letters": [ … ]}` with the
//! receiver's headers (`webhook.rs`, over `http://` or `https://`), or to an Alertmanager as
//! its alerts, one per letter (`alertmanager.rs`). A delivery with no answer within `timeout`, or with a
//! status other than 2xx, is a failed attempt: the lane tries again after a backoff (from
//! `retry_first`, doubling, at most `retry_max`) until `give_up_after` has passed since the
//! batch's first attempt, and then counts its letters as dropped. While a lane retries, its
//! queue fills and overflows into `dropped`; other receivers' lanes go on undisturbed, so a
//! receiver that never answers holds back only itself.
//!
//! A queue is bounded twice, by letters (`queue_bound`) and by bytes (`queue_bytes`). Past
//! either bound a letter is *deferred*, not kept: once the integrator has said where the
//! store's letters are read back from ([`AlertDispatcher::read_back_from`]), the lane sends
//! the deferred letters from the store when its receiver answers again (`backlog.rs`);
//! without one, the letter is dropped.
//!
//! [`AlertDispatcher::shutdown`] closes the queues and gives the lanes a deadline: they send
//! what is queued without waiting for a batch to fill, and whatever is still undelivered at
//! the deadline is counted as dropped.
//!
//! The dispatcher knows nothing of the pipeline: the integrator calls `send` where a new dead
//! letter with an `alert:` label is announced, and exports [`AlertDispatcher::counts`] as
//! `rebound_alerts_total{receiver, result}` (`metrics::AlertMetrics` reads them).

pub mod alertmanager;
mod backlog;
mod lane;
mod webhook;

pub use backlog::{AlertBacklog, BacklogCursor, BacklogPage, Deferral, letter_time_ms};

use crate::config::Receivers;
use lane::{Lane, LaneState, Queued};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How alerts are batched, timed and bounded. [`AlertOptions::default`] gives the spec's
/// numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertOptions {
    /// Most letters in one request (100).
    pub batch_max: usize,
    /// Longest wait after a batch's first letter before it is sent (1 s).
    pub batch_wait: Duration,
    /// A request with no answer within this is a failed attempt (5 s).
    pub timeout: Duration,
    /// A batch still undelivered this long after its first attempt is dropped (1 h).
    pub give_up_after: Duration,
    /// Letters each receiver's queue holds; beyond it, letters are deferred (10,000).
    pub queue_bound: usize,
    /// Bytes of letters (their JSON) each receiver's queue holds; beyond it, letters are
    /// deferred (8 MiB).
    pub queue_bytes: usize,
    /// The wait before the first retry of a failed batch; it doubles with each failure (1 s).
    pub retry_first: Duration,
    /// The longest wait between two attempts (5 min).
    pub retry_max: Duration,
}

impl Default for AlertOptions {
    fn default() -> Self {
        AlertOptions {
            batch_max: 100,
            batch_wait: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
            give_up_after: Duration::from_secs(3600),
            queue_bound: 10_000,
            queue_bytes: 8 << 20,
            retry_first: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
        }
    }
}

/// What happened to one receiver's letters so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlertCounts {
    /// Letters delivered (in a request answered 2xx).
    pub sent: u64,
    /// Failed attempts (no answer in time, a connection error, or a status other than 2xx);
    /// a batch retried three times counts 3.
    pub failed: u64,
    /// Letters given up: sent to a receiver the configuration does not define, still
    /// undelivered after `give_up_after` (or at shutdown), or past the queue's bound when
    /// there is no store to read them back from.
    pub dropped: u64,
    /// Letters past the queue's bound, left in the store to be sent once the receiver
    /// answers again (those sent then count in `sent` too).
    pub deferred: u64,
}

/// Sends dead letters to their receivers' webhooks; cheap to clone (one shared state).
#[derive(Clone, Debug)]
pub struct AlertDispatcher {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Each defined receiver's counts and deferral, by name; fixed at start.
    counts: BTreeMap<String, Arc<LaneState>>,
    /// The receivers that asked for the payload (`include_payload`).
    with_payload: std::collections::BTreeSet<String>,
    /// Each receiver's queue; emptied by shutdown, after which sends are dropped.
    queues: RwLock<BTreeMap<String, mpsc::Sender<Queued>>>,
    /// Where deferred letters are read back from, once the integrator says.
    backlog: Arc<OnceLock<Arc<dyn AlertBacklog>>>,
    /// The bytes bound of each queue.
    queue_bytes: usize,
    /// Letters sent to receivers that are not defined, by the name asked for (at most
    /// [`MAX_UNKNOWN`] names; the rest under `other`, so the label values stay bounded).
    unknown: Mutex<BTreeMap<String, u64>>,
    /// The lanes' deadline: `None` while running, the shutdown's deadline after.
    deadline: watch::Sender<Option<tokio::time::Instant>>,
    lanes: Mutex<Vec<JoinHandle<()>>>,
}

/// How many unknown receiver names are counted apart.
const MAX_UNKNOWN: usize = 100;

impl AlertDispatcher {
    /// Starts one lane per receiver. Needs a tokio runtime (it spawns the lanes).
    pub fn start(receivers: &Receivers, options: AlertOptions) -> AlertDispatcher {
        let options = AlertOptions {
            batch_max: options.batch_max.max(1),
            queue_bound: options.queue_bound.max(1),
            ..options
        };
        let (deadline, _) = watch::channel(None);
        let backlog = Arc::new(OnceLock::new());
        let mut counts = BTreeMap::new();
        let mut queues = BTreeMap::new();
        let mut lanes = Vec::new();
        for receiver in receivers.iter() {
            let (tx, rx) = mpsc::channel(options.queue_bound);
            let count = Arc::new(LaneState::default());
            let lane = Lane {
                receiver: receiver.clone(),
                queue: rx,
                state: Arc::clone(&count),
                options: options.clone(),
                deadline: deadline.subscribe(),
                backlog: Arc::clone(&backlog),
            };
            lanes.push(tokio::spawn(lane.run()));
            counts.insert(receiver.name.clone(), count);
            queues.insert(receiver.name.clone(), tx);
        }
        AlertDispatcher {
            shared: Arc::new(Shared {
                counts,
                with_payload: receivers
                    .iter()
                    .filter(|r| r.include_payload)
                    .map(|r| r.name.clone())
                    .collect(),
                queues: RwLock::new(queues),
                unknown: Mutex::new(BTreeMap::new()),
                backlog,
                queue_bytes: options.queue_bytes.max(1),
                deadline,
                lanes: Mutex::new(lanes),
            }),
        }
    }

    /// From now on, letters past a queue's bound are deferred and read back from `backlog`
    /// once their receiver answers again (instead of dropped). Said once; later calls are
    /// ignored.
    pub fn read_back_from(&self, backlog: Arc<dyn AlertBacklog>) {
        let _ = self.shared.backlog.set(backlog);
    }

    /// Each receiver's open deferral: the letters waiting in the store to be sent.
    pub fn deferred(&self) -> Vec<(String, Deferral)> {
        self.shared
            .counts
            .iter()
            .filter_map(|(name, state)| Some((name.clone(), state.deferral()?)))
            .collect()
    }

    /// Queues `letter` (the dead letter as `GET /v1/dead-letters` shows it, without the
    /// payload) for `receiver`. Never blocks and never fails: an unknown receiver or a
    /// dispatcher that was shut down counts the letter as dropped; a letter past its queue's
    /// bounds (or one while letters are deferred) is deferred, or dropped when there is no
    /// store to read it back from.
    pub fn send(&self, receiver: &str, letter: serde_json::Value) {
        let Some(counts) = self.shared.counts.get(receiver) else {
            let mut unknown = self
                .shared
                .unknown
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let key = if unknown.contains_key(receiver) || unknown.len() < MAX_UNKNOWN {
                receiver
            } else {
                "other"
            };
            *unknown.entry(key.to_owned()).or_default() += 1;
            return;
        };
        let queues = self
            .shared
            .queues
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = queues.get(receiver) else {
            counts.dropped(1);
            return;
        };
        let mut deferral = counts.lock_deferral();
        let at = letter_time_ms(&letter);
        if deferral.is_some() {
            counts.defer(&mut deferral, at);
            return;
        }
        let bytes = letter.to_string().len();
        let before = counts.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        let room = before + bytes <= self.shared.queue_bytes || before == 0;
        let refused = if room {
            match tx.try_send((letter, bytes)) {
                Ok(()) => return,
                Err(e) => matches!(e, mpsc::error::TrySendError::Closed(_)),
            }
        } else {
            false
        };
        counts.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
        if refused || self.shared.backlog.get().is_none() {
            counts.dropped(1);
        } else {
            counts.defer(&mut deferral, at);
        }
    }

    /// Every receiver's counts, in name order: each defined receiver, then each unknown name
    /// letters were sent to (only `dropped`).
    pub fn counts(&self) -> Vec<(String, AlertCounts)> {
        let mut out: Vec<(String, AlertCounts)> = self
            .shared
            .counts
            .iter()
            .map(|(name, c)| (name.clone(), c.snapshot()))
            .collect();
        let unknown = self
            .shared
            .unknown
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (name, dropped) in unknown.iter() {
            if !self.shared.counts.contains_key(name) {
                out.push((
                    name.clone(),
                    AlertCounts {
                        dropped: *dropped,
                        ..AlertCounts::default()
                    },
                ));
            }
        }
        out
    }

    /// Stops taking letters and tries to deliver what is queued within `within`; what is
    /// still undelivered then is counted as dropped. Other clones of the dispatcher drop
    /// what they send from now on.
    pub async fn shutdown(self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        self.shared.deadline.send_replace(Some(deadline));
        // Closing the queues: each lane drains what is left, then ends.
        self.shared
            .queues
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let lanes = std::mem::take(
            &mut *self
                .shared
                .lanes
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        // The lanes count what they give up at the deadline; a moment more lets them.
        let grace = deadline + Duration::from_millis(100);
        for lane in lanes {
            let abort = lane.abort_handle();
            if tokio::time::timeout_at(grace, lane).await.is_err() {
                abort.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// The labels' `alert:` letters (see [`rebound_runtime::durable::labels::alerting`]) are sent
/// as the admin API lists them, without the payload (for a receiver with `include_payload`,
/// with `payload_base64`: at most [`PAYLOAD_AT_MOST`](crate::config::PAYLOAD_AT_MOST) bytes of
/// it, and `payload_truncated`), with their status.
impl rebound_runtime::durable::labels::AlertSink for AlertDispatcher {
    fn send(&self, receiver: &str, letter: &rebound_runtime::fate::DeadLetter) {
        let mut json = crate::json::letter_fields(letter, false);
        json.insert("status".into(), "dead".into());
        if self.shared.with_payload.contains(receiver) {
            use base64::Engine as _;
            let payload = &letter.message.payload;
            let shown = &payload[..payload.len().min(crate::config::PAYLOAD_AT_MOST)];
            let encoded = base64::engine::general_purpose::STANDARD.encode(shown);
            json.insert("payload_base64".into(), encoded.into());
            json.insert(
                "payload_truncated".into(),
                (shown.len() < payload.len()).into(),
            );
        }
        AlertDispatcher::send(self, receiver, serde_json::Value::Object(json));
    }
}
