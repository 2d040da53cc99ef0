//! The durable seams: the failure seam of [`fate`](crate::fate) backed by the [`Store`].
//!
//! - [`Journal`]: one writer thread, one FIFO queue; the spout task queues writes and never
//!   waits on the disk.
//! - [`DurableRetryQueue`]: each spout task's retry queue, in memory and written behind. On a
//!   restart, [`Durable::recover`] loads every scheduled retry back with its due time (overdue
//!   ones fire at once) and its retry metadata.
//! - [`DurableDeadLetters`]: the dead-letter sink; the spout hears `dead_lettered(id)` only
//!   after the letter is committed.
//! - [`Fates`]: what a durable spout calls from `Spout::ack` to record the acked fate (and drop
//!   the message's retry row), batched through the journal.
//! - [`SourcePosition`]: a source's committed low-water mark, and the messages above it that
//!   must not be delivered again after a restart ("one fate per message").
//!
//! [`Durable`] ties them together and makes the [`Seams`] a topology starts with:
//!
//! ```no_run
//! # async fn demo(policy: rebound_runtime::fate::memory::FixedPolicy) -> Result<(), rebound_runtime::store::StoreError> {
//! use rebound_runtime::clock::WallClock;
//! use rebound_runtime::durable::{Durable, DurableOptions};
//! use rebound_runtime::store::SqliteStore;
//! use rebound_runtime::time_source::TokioTime;
//! use std::sync::Arc;
//!
//! let store = Arc::new(SqliteStore::open("rebound-data", Arc::new(WallClock::real()))?);
//! let durable = Durable::new(store, Arc::new(TokioTime::new()), DurableOptions::default());
//! let recovered = durable.recover()?; // scheduled retries from the last run
//! let seams = durable.seams(policy);
//! // … build the topology; its spout calls `durable.fates().acked(&id)` from `ack` …
//! # let _ = (recovered, seams); Ok(()) }
//! ```
//!
//! # The order of writes
//!
//! Everything goes through the one journal, in the order it happened: a retry's `Schedule`
//! before the fate that ends it, an acked fate before the source position that covers it. The
//! store adds its own guard (first fate wins; no retry is scheduled for a message with a fate),
//! so even writes that raced would never give a message two fates.
//!
//! One spout component per `Durable` (any parallelism): recovered retries and replays are
//! routed to its tasks by a hash of the message id.

pub mod convert;
mod dead_letters;
mod give_up;
mod held;
pub mod journal;
mod queue;
mod source;

pub use dead_letters::DurableDeadLetters;
pub use give_up::JournalFailure;
pub use journal::{Journal, JournalOptions, JournalStats};
pub use queue::{DurableRetryQueue, Inbox};
pub use source::SourcePosition;

use hashbrown::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use crate::fate::{FailurePolicy, RetryQueue, Seams};
use crate::store::{self, Result, ScheduledRetry, Store, StoredDeadLetter, WriteOp};
use crate::time_source::TimeSource;
use crate::topology::{Message, MessageId, TaskInfo};
use convert::{TimeMap, restored_message, store_id, wall_ms};

/// Ids of messages that may have a retry row in the store (scheduled, or redelivered and
/// waiting for their fate), and who wrote it. Shared by the queues, the sink and [`Fates`], so
/// an ack knows whether it has a row to drop.
#[derive(Clone, Debug, Default)]
pub(crate) struct RetryRows(Arc<Mutex<HashMap<MessageId, Row>>>);

/// Who wrote a message's retry row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Row {
    /// Only the journal, from a `Schedule` it may still hold (see [`Journal::retire`]).
    Journal,
    /// The store had it before: recovered from the last run, or written by a replay.
    Stored,
}

impl RetryRows {
    /// The message's retry row may exist; `row` says who wrote it (a stored row stays stored).
    pub(crate) fn insert(&self, id: &MessageId, row: Row) {
        let mut rows = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match rows.get_mut(id) {
            Some(known) => {
                if row == Row::Stored {
                    *known = Row::Stored;
                }
            }
            None => {
                rows.insert(id.clone(), row);
            }
        }
    }
    pub(crate) fn remove(&self, id: &MessageId) -> Option<Row> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }
}

/// How the durable seams behave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableOptions {
    /// Tuning for the journal.
    pub journal: JournalOptions,
    /// Record an acked fate for every message (true, the default: needed for "one fate per
    /// message" after a restart, and for reports from the store). When false, only messages
    /// that were retried get one (their retry row must go); the source's position is then the
    /// only record of the others.
    pub record_every_ack: bool,
}

impl Default for DurableOptions {
    fn default() -> Self {
        DurableOptions {
            journal: JournalOptions::default(),
            record_every_ack: true,
        }
    }
}

struct Shared {
    store: Arc<dyn Store>,
    journal: Journal,
    time: Arc<dyn TimeSource>,
    map: TimeMap,
    rows: RetryRows,
    record_every_ack: bool,
    restored: Mutex<Vec<(Instant, Message)>>,
    inboxes: Mutex<Vec<Option<Arc<Inbox>>>>,
}

/// The durable seams over one store. Cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct Durable {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("journal", &self.shared.journal)
            .finish_non_exhaustive()
    }
}

/// Which of `tasks` spout tasks owns message `id` (FNV-1a of the id: stable across runs).
fn partition(id: &str, tasks: usize) -> usize {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h % tasks.max(1) as u64) as usize
}

impl Durable {
    /// Durable seams over `store`, with `time` (use the topology's time source). Starts the
    /// journal thread.
    pub fn new(
        store: Arc<dyn Store>,
        time: Arc<dyn TimeSource>,
        options: DurableOptions,
    ) -> Durable {
        let journal = Journal::spawn(store.clone(), options.journal);
        let map = TimeMap::new(time.as_ref());
        Durable {
            shared: Arc::new(Shared {
                store,
                journal,
                time,
                map,
                rows: RetryRows::default(),
                record_every_ack: options.record_every_ack,
                restored: Mutex::new(Vec::new()),
                inboxes: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Loads every scheduled retry from the store, with its due time and metadata, for the
    /// retry queues [`Durable::seams`] makes. Retries due while the process was down are due at
    /// once. Returns the ids (a source skips them: they are the queues' to deliver).
    ///
    /// Blocking: call it before the topology starts.
    pub fn recover(&self) -> Result<Vec<MessageId>> {
        let s = &self.shared;
        let scheduled = s.store.scheduled()?;
        let mut restored = Vec::with_capacity(scheduled.len());
        for chunk in scheduled.chunks(512) {
            let ids: Vec<store::MessageId> = chunk.iter().map(|(id, _)| id.clone()).collect();
            for retry in s.store.retries(&ids)? {
                let message = restored_message(&retry);
                s.rows.insert(&message.id, Row::Stored);
                restored.push((s.map.instant(retry.due), message));
            }
        }
        let ids = restored.iter().map(|(_, m)| m.id.clone()).collect();
        s.restored
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(restored);
        Ok(ids)
    }

    /// Seams deciding with `policy`, storing dead letters and retries durably. Each spout task
    /// gets a [`DurableRetryQueue`] holding its share of what [`Durable::recover`] loaded.
    pub fn seams(&self, policy: impl FailurePolicy) -> Seams {
        let s = self.shared.clone();
        let sink = DurableDeadLetters::new(s.journal.clone(), s.rows.clone());
        Seams::in_memory()
            .with_policy(policy)
            .with_dead_letters(sink)
            .with_time(TimeShare(s.time.clone()))
            .with_retry_queues(move |info: &TaskInfo| -> Box<dyn RetryQueue> {
                let mine: Vec<(Instant, Message)> = {
                    let mut restored = s.restored.lock().unwrap_or_else(PoisonError::into_inner);
                    let (mine, rest) =
                        std::mem::take(&mut *restored)
                            .into_iter()
                            .partition(|(_, m)| {
                                partition(m.id.as_str(), info.parallelism) == info.index
                            });
                    *restored = rest;
                    mine
                };
                let inbox = Arc::new(Inbox::default());
                {
                    let mut inboxes = s.inboxes.lock().unwrap_or_else(PoisonError::into_inner);
                    if inboxes.len() < info.parallelism {
                        inboxes.resize(info.parallelism, None);
                    }
                    inboxes[info.index] = Some(inbox.clone());
                }
                Box::new(DurableRetryQueue::new(
                    s.journal.clone(),
                    s.map,
                    s.rows.clone(),
                    inbox,
                    mine,
                ))
            })
    }

    /// The recorder a durable spout calls from `ack`.
    pub fn fates(&self) -> Fates {
        Fates {
            journal: self.shared.journal.clone(),
            rows: self.shared.rows.clone(),
            time: self.shared.time.clone(),
            record_every_ack: self.shared.record_every_ack,
        }
    }

    /// The journal (to flush it, or to queue other writes in order with the runtime's).
    pub fn journal(&self) -> &Journal {
        &self.shared.journal
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// Replays a dead letter: the store marks it `replayed`, clears the message's fate and
    /// schedules it as a fresh delivery (audited), and the message goes into its spout task's
    /// live retry queue, due now. If no topology runs, it waits in the store and the next
    /// [`Durable::recover`] picks it up.
    ///
    /// Blocking (one store transaction).
    pub fn replay(&self, id: &str, operator: &str, reason: &str) -> Result<ScheduledRetry> {
        let s = &self.shared;
        let retry = s
            .store
            .replay(&store::MessageId(id.to_owned()), operator, reason)?;
        let message = restored_message(&retry);
        s.rows.insert(&message.id, Row::Stored);
        let inbox = {
            let inboxes = s.inboxes.lock().unwrap_or_else(PoisonError::into_inner);
            match inboxes.len() {
                0 => None,
                n => inboxes[partition(id, n)].clone(),
            }
        };
        if let Some(inbox) = inbox {
            inbox.push(message);
        }
        Ok(retry)
    }

    /// Marks a dead letter `skipped` (handled), audited. Blocking.
    pub fn skip(&self, id: &str, operator: &str, reason: &str) -> Result<StoredDeadLetter> {
        self.shared
            .store
            .skip(&store::MessageId(id.to_owned()), operator, reason)
    }
}

/// Records acked fates through the journal (batched; a crash before the commit only means the
/// message is delivered again, and the idempotent write absorbs it). Cheap to clone.
#[derive(Clone)]
pub struct Fates {
    journal: Journal,
    rows: RetryRows,
    time: Arc<dyn TimeSource>,
    record_every_ack: bool,
}

impl std::fmt::Debug for Fates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fates")
            .field("record_every_ack", &self.record_every_ack)
            .finish_non_exhaustive()
    }
}

impl Fates {
    /// The message was acked: queue its fate (and so drop its retry row). Never blocks.
    ///
    /// When acked fates are not recorded for every message, the fate of a retried message is
    /// written only to drop its retry row, so it is moot if the journal never wrote that row.
    pub fn acked(&self, id: &MessageId) {
        let row = self.rows.remove(id);
        if !self.record_every_ack && row.is_none() {
            return;
        }
        let at = crate::clock::Timestamp::from_millis(wall_ms(self.time.wall()));
        if self.record_every_ack || row == Some(Row::Stored) {
            self.journal.submit(WriteOp::Acked(store_id(id), at));
        } else {
            self.journal.retire(store_id(id), at);
        }
    }
}

/// The topology's time source, shared with the durable seams (so due times map consistently).
struct TimeShare(Arc<dyn TimeSource>);

impl TimeSource for TimeShare {
    fn now(&self) -> Instant {
        self.0.now()
    }
    fn wall(&self) -> std::time::SystemTime {
        self.0.wall()
    }
}
