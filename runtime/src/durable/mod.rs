//! The durable seams: the failure seam of [`fate`](crate::fate) backed by the [`Store`].
//!
//! - [`Journal`]: one writer thread, one FIFO queue; the spout task queues writes and never
//!   waits on the disk.
//! - [`DurableRetryQueue`]: each spout task's retry queue, in memory and written behind. On a
//!   restart, [`Durable::recover`] loads every scheduled retry back with its due time and its
//!   retry metadata; the overdue ones are spread over `min(n / 1000, 60)` seconds in due order
//!   (`overdue.rs`).
//! - [`DurableDeadLetters`]: the dead-letter sink; the spout hears `dead_lettered(id)` only
//!   after the letter is committed.
//! - `DurableFates`: the acked fates, recorded by the spout task itself (a source never has
//!   to), queued to the journal, which decides whether each needs a write.
//! - [`SourcePosition`]: a source's committed low-water mark, and the messages above it that
//!   must not be delivered again after a restart ("one fate per message"). Acked fates at or
//!   below the committed position are not kept: the position is their record.
//!
//! [`Durable`] ties them together and makes the [`Seams`] a topology starts with; it is built
//! by a [`DurableBuilder`] (or [`Durable::new`] and [`Durable::shared`], its shorthands):
//!
//! ```no_run
//! # async fn demo(policy: rebound_runtime::fate::memory::FixedPolicy) -> Result<(), rebound_runtime::store::StoreError> {
//! use rebound_runtime::durable::{Durable, DurableOptions};
//! use rebound_runtime::store::SqliteStore;
//! use rebound_runtime::time::TokioTime;
//! use std::sync::Arc;
//!
//! let store = Arc::new(SqliteStore::open("rebound-data")?);
//! let durable = Durable::new(store, Arc::new(TokioTime::new()), DurableOptions::default());
//! let recovered = durable.recover()?; // scheduled retries from the last run
//! let position = durable.source_position("orders", |n| format!("order-{n}"), [])?;
//! let seams = durable.seams(policy);
//! // … build the topology; its spout hands out messages `with_offset(n)` and tells
//! // `position.settled(n)` from `ack` and `dead_lettered` …
//! # let _ = (recovered, position, seams); Ok(()) }
//! ```
//!
//! # The order of writes
//!
//! Everything goes through the one journal, in the order it happened: a retry's `Schedule`
//! before the fate that ends it, an acked fate (queued by the spout task before the spout hears
//! of it) before the source position that covers it. The store adds its own guard (first fate
//! wins; no retry is scheduled for a message with a fate), so even writes that raced would never
//! give a message two fates.
//!
//! One spout component per `Durable` (any parallelism): recovered retries and replays are
//! routed to its tasks by a hash of the message id.

mod builder;
mod claimer;
mod dead_letters;
mod give_up;
mod held;
mod held_acks;
pub mod journal;
mod journal_counters;
pub mod labels;
mod operator;
mod overdue;
mod prune;
mod queue;
mod shared_queue;
mod source;

pub use builder::DurableBuilder;
pub use claimer::{ClaimStats, HeldClaims, SharedOptions};
pub use dead_letters::DurableDeadLetters;
pub use give_up::JournalFailure;
pub use journal::{Journal, JournalOptions, JournalStats};
pub use operator::{RUNTIME_OPERATOR, killed};
pub use queue::{DurableRetryQueue, Inbox};
pub use shared_queue::SharedRetryQueue;
pub use source::SourcePosition;

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tokio::time::Instant;

use claimer::{Claimer, Inboxes};
use dead_letters::Observers;

use crate::fate::{
    AckedFates, CustodyNotices, DeadLetter, FailurePolicy, KeyNotice, KeyNotices, NoticeKind,
    RetryQueue, Seams,
};
use crate::store::{
    Applied, ClaimQueue, DeadLetterFilter, DeadLetterStatus, MAX_PAGE, Offset, OperatorAction,
    Result, ScheduledRetry, SourceName, Store, StoreError, StoredDeadLetter, WriteOp,
};
use crate::time::{TimeMap, TimeSource, Timestamp};
use crate::topology::{Message, MessageId, TaskInfo};

/// How the durable seams behave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurableOptions {
    /// Tuning for the journal (including which acked fates it records).
    pub journal: JournalOptions,
    /// [`Durable::recover`] also reads the open dead letters whose message has an ordering
    /// key, so that under `on_dead_letter: block` their keys stay blocked across a restart
    /// (default false: set it when the topology orders keys and blocks on dead letters).
    pub ordered_letters: bool,
}

struct Shared {
    store: Arc<dyn Store>,
    journal: Journal,
    time: Arc<dyn TimeSource>,
    map: TimeMap,
    /// The source whose committed position covers acked fates (set by
    /// [`Durable::source_position`]).
    source: OnceLock<SourceName>,
    /// How a message's offset names its source, when there are several positioned sources
    /// ([`DurableBuilder::offsets`]).
    offsets: Option<OffsetOf>,
    /// What [`Durable::recover`] loaded, with the due times the queues start with.
    restored: Mutex<Vec<(Timestamp, Message)>>,
    /// The open dead letters with a key [`Durable::recover`] found (`ordered_letters`).
    letters: Mutex<Vec<KeyNotice>>,
    ordered_letters: bool,
    inboxes: Inboxes,
    /// On a shared store: the node's claimer (see `claimer.rs`).
    claimer: Option<Claimer>,
    /// On a shared store: how soon a retry must be due to be fired from memory, unwritten.
    local_hold: std::time::Duration,
    /// Told of every dead letter once it is stored (see [`Durable::on_dead_letters`]).
    observers: Arc<Observers>,
}

/// What [`Durable::on_dead_letters`] calls with each batch of newly stored dead letters.
pub type DeadLetterObserver = Box<dyn Fn(&[DeadLetter]) + Send + Sync>;

pub use crate::store::OffsetOf;

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

/// FNV-1a of `text`: a stable hash, the same across runs and processes.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Which of `tasks` spout tasks owns message `id` (stable across runs).
fn partition(id: &str, tasks: usize) -> usize {
    (fnv1a(id) % tasks.max(1) as u64) as usize
}

impl Durable {
    /// A builder of durable seams over `store`, with `time` (use the topology's time source):
    /// every setting is given before the seams exist.
    pub fn builder(store: Arc<dyn Store>, time: Arc<dyn TimeSource>) -> DurableBuilder {
        DurableBuilder::new(store, time)
    }

    /// Durable seams over `store`, with `time` (use the topology's time source). Starts the
    /// journal thread. Short for [`Durable::builder`] with `options`.
    pub fn new(
        store: Arc<dyn Store>,
        time: Arc<dyn TimeSource>,
        options: DurableOptions,
    ) -> Durable {
        Durable::builder(store, time).options(options).build()
    }

    /// Durable seams over a shared store: several nodes share its retries, which this node's
    /// claimer claims when due (`claims`: the same store's claims). Starts the journal and
    /// the claimer threads. See `claimer.rs`. Short for [`Durable::builder`] with `options`
    /// and [`DurableBuilder::shared`].
    ///
    /// The journal's `hold` moves into the retry queues here: a retry due within it is fired
    /// from memory and never written (`shared_queue.rs`), and every other retry is written at
    /// once (a retry on a shared store fires only once written and claimed, so holding its
    /// write back would only delay it).
    pub fn shared(
        store: Arc<dyn Store>,
        claims: Arc<dyn ClaimQueue>,
        time: Arc<dyn TimeSource>,
        options: DurableOptions,
        shared: SharedOptions,
    ) -> Durable {
        Durable::builder(store, time)
            .options(options)
            .shared(claims, shared)
            .build()
    }

    /// True on a shared store (retries are claimed, not recovered).
    pub fn is_shared(&self) -> bool {
        self.shared.claimer.is_some()
    }

    /// The claimer's counters, on a shared store.
    pub fn claim_stats(&self) -> Option<ClaimStats> {
        self.shared.claimer.as_ref().map(Claimer::stats)
    }

    /// On a shared store, stops claiming new retries (a graceful stop): what this node holds
    /// keeps its lease until it settles; what it never claims, another node will.
    pub fn stop_claiming(&self) {
        if let Some(c) = &self.shared.claimer {
            c.pause();
        }
    }

    /// Loads every scheduled retry from the store, with its due time and metadata, for the
    /// retry queues [`Durable::seams`] makes, and tells the journal their rows exist. Retries
    /// that came due while the process was down are spread from now over `min(n / 1000, 60)`
    /// seconds, oldest due first (in memory only: see `overdue.rs`). Returns the ids (a source
    /// skips them: they are the queues' to deliver).
    ///
    /// Blocking: call it before the topology starts.
    pub fn recover(&self) -> Result<Vec<MessageId>> {
        let s = &self.shared;
        if s.claimer.is_some() {
            // The fleet's retries are claimed when due, by whichever node.
            return Ok(Vec::new());
        }
        let scheduled = s.store.scheduled()?;
        let mut restored = Vec::with_capacity(scheduled.len());
        for chunk in scheduled.chunks(512) {
            let ids: Vec<MessageId> = chunk.iter().map(|(id, _)| id.clone()).collect();
            for retry in s.store.retries(&ids)? {
                restored.push((retry.due, retry.message));
            }
        }
        let now = s.map.now_timestamp(s.time.now());
        let overdue = overdue::spread(&mut restored, now);
        if overdue > 0 {
            let spread_ms = overdue::spread_of(overdue).as_millis() as u64;
            tracing::info!(
                overdue,
                spread_ms,
                "retries overdue after the restart are spread"
            );
        }
        let ids: Vec<MessageId> = restored.iter().map(|(_, m)| m.id.clone()).collect();
        s.journal.known_rows(ids.clone());
        s.restored
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(restored);
        if s.ordered_letters {
            let letters = self.open_keyed_letters()?;
            s.letters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(letters);
        }
        Ok(ids)
    }

    /// The open dead letters whose message has a key, as notices for the queues.
    fn open_keyed_letters(&self) -> Result<Vec<KeyNotice>> {
        let mut filter = DeadLetterFilter {
            status: Some(DeadLetterStatus::Dead),
            limit: MAX_PAGE,
            ..DeadLetterFilter::default()
        };
        let mut out = Vec::new();
        loop {
            let page = self.shared.store.dead_letters(&filter)?;
            out.extend(
                page.items
                    .iter()
                    .filter_map(|d| KeyNotice::of(NoticeKind::DeadLettered, &d.letter.message)),
            );
            match page.next {
                Some(next) => filter.before = Some(next),
                None => break,
            }
        }
        // Oldest first, as they were dead-lettered.
        out.reverse();
        Ok(out)
    }

    /// Loads the committed position of `source` (see [`SourcePosition::load`]) and makes it
    /// the source whose position covers the acked fates of messages with an
    /// [`offset`](Message::offset). One positioned source per `Durable`.
    ///
    /// Blocking: call it before the topology starts.
    pub fn source_position(
        &self,
        source: &str,
        id_of: impl Fn(u64) -> String,
        owned: impl IntoIterator<Item = u64>,
    ) -> Result<SourcePosition> {
        let s = &self.shared;
        let position = SourcePosition::load(
            s.store.as_ref(),
            s.journal.clone(),
            s.time.clone(),
            source,
            id_of,
            owned,
            s.claimer.is_some(),
        )?;
        let name = SourceName::from(source);
        if s.source.set(name).is_err() && s.source.get() != Some(&name) && s.offsets.is_none() {
            tracing::warn!(
                source,
                "a second positioned source on one store: its acked fates are kept whole"
            );
        }
        Ok(position)
    }

    /// Seams deciding with `policy`, storing dead letters, retries and acked fates durably.
    /// Each spout task gets a [`DurableRetryQueue`] holding its share of what
    /// [`Durable::recover`] loaded.
    pub fn seams(&self, policy: impl FailurePolicy) -> Seams {
        let s = self.shared.clone();
        let held = s.claimer.as_ref().map(|c| c.held().clone());
        let sink = DurableDeadLetters::new(s.journal.clone(), held, s.observers.clone());
        let inboxes = s.inboxes.clone();
        let custody_inboxes = s.inboxes.clone();
        Seams::in_memory()
            .with_policy(policy)
            .with_dead_letters(sink)
            .with_acked_fates(DurableFates { shared: s.clone() })
            .with_time(TimeShare(s.time.clone()))
            // The task's inbox, made with its retry queue just before.
            .with_key_notices(move |info: &TaskInfo| {
                let inboxes = inboxes.lock().unwrap_or_else(PoisonError::into_inner);
                let inbox = inboxes.get(info.index)?.clone()?;
                Some(inbox as Arc<dyn KeyNotices>)
            })
            // The same inbox hears which of the task's messages the journal committed a
            // retry of: the store then has custody of them.
            .with_custody(move |info: &TaskInfo| {
                let inboxes = custody_inboxes
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let inbox = inboxes.get(info.index)?.clone()?;
                Some(inbox as Arc<dyn CustodyNotices>)
            })
            .with_retry_queues(move |info: &TaskInfo| -> Box<dyn RetryQueue> {
                let mine: Vec<(Timestamp, Message)> = {
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
                let letters: Vec<KeyNotice> = {
                    let mut all = s.letters.lock().unwrap_or_else(PoisonError::into_inner);
                    let (mine, rest) = std::mem::take(&mut *all)
                        .into_iter()
                        .partition(|n| partition(n.id.as_str(), info.parallelism) == info.index);
                    *all = rest;
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
                if let Some(claimer) = &s.claimer {
                    return Box::new(SharedRetryQueue::new(
                        s.journal.clone(),
                        s.map,
                        claimer.clone(),
                        inbox,
                        s.local_hold,
                        s.time.clone(),
                    ));
                }
                Box::new(DurableRetryQueue::new(
                    s.journal.clone(),
                    s.map,
                    inbox,
                    mine,
                    letters,
                ))
            })
    }

    /// Writes `release`'s decision log into the store, in the journal's batches
    /// ([`Journal::log_decisions`]).
    pub fn log_decisions(&self, release: &crate::release::Release) {
        self.journal().log_decisions(release.shared_log());
    }

    /// Calls `f` with every batch of dead letters once they are stored (the runtime's, and
    /// the operators' kills; not those whose message already had a fate). `f` runs on the
    /// storing task: it must not block (queue the work elsewhere). Each call adds an
    /// observer; every one is told, in the order they were added.
    pub fn on_dead_letters(&self, f: impl Fn(&[DeadLetter]) + Send + Sync + 'static) {
        self.shared.observers.add(Box::new(f));
    }

    fn announce(&self, letters: &[DeadLetter]) {
        self.shared.observers.tell(letters);
    }

    /// The time the durable layer stamps its records with.
    pub fn time(&self) -> &Arc<dyn TimeSource> {
        &self.shared.time
    }

    /// The journal (to flush it, or to queue other writes in order with the runtime's).
    pub fn journal(&self) -> &Journal {
        &self.shared.journal
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// Which of `ids` the store already has custody of: a retry row (its retry is scheduled)
    /// or a final fate. A broker source asks this of each batch it reads: a redelivered
    /// message it names lost only its custody ack (a crash between the store's commit and the
    /// broker's ack), so the source acknowledges it again and does not hand it out. (An acked
    /// fate the store does not keep, one a source position covers, is not named: a positioned
    /// source skips those itself.) Blocking: two reads of the store.
    pub fn known(&self, ids: &[MessageId]) -> Result<std::collections::HashSet<MessageId>> {
        let store = &self.shared.store;
        let mut known: std::collections::HashSet<MessageId> = store
            .retries(ids)?
            .into_iter()
            .map(|r| r.message.id)
            .collect();
        known.extend(store.known_fates(ids)?.into_iter().map(|(id, _)| id));
        Ok(known)
    }

    /// Replays a dead letter through the journal: the store marks it `replayed`, clears the
    /// message's fate and schedules it as a fresh delivery (audited), and the message goes into
    /// its spout task's live retry queue, due now. If no topology runs, it waits in the store
    /// and the next [`Durable::recover`] picks it up.
    ///
    /// Blocking (waits for the commit): call it from `spawn_blocking` in async code.
    pub fn replay(&self, id: &str, operator: &str, reason: &str) -> Result<ScheduledRetry> {
        let id = MessageId::from(id);
        let action = OperatorAction::new(id.clone(), operator, reason, self.shared.time.wall())?;
        self.replay_op(WriteOp::Replay(action), id)
    }

    /// Commits a replay or a redrive of `id`'s letter and hands the fresh delivery to its
    /// spout task's live queue.
    fn replay_op(&self, op: WriteOp, id: MessageId) -> Result<ScheduledRetry> {
        let s = &self.shared;
        let retry = self.act(op)?.into_replayed(&id)?;
        if s.claimer.is_some() {
            // Due now in the shared store: whichever node claims it first delivers it.
            return Ok(retry);
        }
        if let Some(inbox) = self.inbox_of(&id) {
            inbox.push(retry.message.clone());
        }
        Ok(retry)
    }

    /// The live queue's inbox of the spout task that owns `id`, if a topology runs on a store
    /// of its own.
    fn inbox_of(&self, id: &MessageId) -> Option<Arc<Inbox>> {
        let inboxes = self
            .shared
            .inboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match inboxes.len() {
            0 => None,
            n => inboxes[partition(id.as_str(), n)].clone(),
        }
    }

    /// Marks a dead letter `skipped` (handled), audited, through the journal, and tells the
    /// spout task that owns the message (a key it blocked goes on). Blocking.
    pub fn skip(&self, id: &str, operator: &str, reason: &str) -> Result<StoredDeadLetter> {
        let id = MessageId::from(id);
        let action = OperatorAction::new(id.clone(), operator, reason, self.shared.time.wall())?;
        let skipped = self.act(WriteOp::Skip(action))?.into_skipped(&id)?;
        self.skipped(&skipped);
        Ok(skipped)
    }

    /// Tells the live spout task that owns a skipped letter's message, if it has a key.
    fn skipped(&self, letter: &StoredDeadLetter) {
        let message = &letter.letter.message;
        if let Some(notice) = KeyNotice::of(NoticeKind::Skipped, message)
            && let Some(inbox) = self.inbox_of(&message.id)
        {
            inbox.notice(notice);
        }
    }

    /// Commits one operator action through the journal and returns the store's answer.
    fn act(&self, op: WriteOp) -> Result<Applied> {
        let mut applied = self.shared.journal.commit_blocking(vec![op])?;
        applied.pop().ok_or(StoreError::WriterClosed)
    }
}

/// The acked fates of a durable topology: each queued to the journal with the message's
/// source offset, when its source commits a position. The journal decides whether it needs a
/// write (see its module docs). Made by [`Durable::seams`].
struct DurableFates {
    shared: Arc<Shared>,
}

impl AckedFates for DurableFates {
    fn acked(&self, message: &Message, at: crate::time::Timestamp) {
        let s = &self.shared;
        if let Some(c) = &s.claimer {
            c.held().settle(&message.id);
        }
        let offset = match &s.offsets {
            Some(offset_of) => offset_of(message),
            None => message.offset.and_then(|n| {
                s.source.get().map(|&source| Offset {
                    source,
                    position: n.get(),
                })
            }),
        };
        s.journal.write_behind(WriteOp::Acked {
            id: message.id.clone(),
            at,
            offset,
        });
    }
}

/// The topology's time source, shared with the durable seams (so due times map consistently).
struct TimeShare(Arc<dyn TimeSource>);

impl TimeSource for TimeShare {
    fn now(&self) -> Instant {
        self.0.now()
    }
    fn wall(&self) -> crate::time::Timestamp {
        self.0.wall()
    }
}
