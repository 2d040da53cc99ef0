//! [`Journal`]: the write-behind path from the runtime to the [`Store`].
//!
//! The spout task must never wait on a disk, yet everything it decides (a retry, an acked
//! fate, a source position) has to reach the store in order. The journal is one thread and
//! one FIFO channel:
//!
//! - [`Journal::write_behind`] queues a write and returns at once (fire and forget: the spout
//!   task's path);
//! - [`Journal::commit`] queues writes and waits until they are committed (the dead-letter path:
//!   `dead_lettered(id)` may only follow a commit; an operator's replay or skip);
//! - [`Journal::flush`] waits until everything queued before it is committed.
//!
//! **The journal thread is the one owner of what the store holds.** It alone knows which
//! messages have a retry row (written by it, recovered at start and told with
//! [`Journal::known_rows`], or written by a replay), and so which writes are moot: nobody else
//! keeps that fact, and nobody asks before writing.
//!
//! The thread takes whatever queued up while the previous commit ran (up to
//! [`JournalOptions::max_batch`] writes) and applies it as one transaction, so one fsync covers
//! a whole batch. Between batches the thread polls the channel every millisecond rather than
//! block on it, so that the spout tasks' writes never have to wake it (and so that what
//! arrives meanwhile commits together); it blocks only after 100 ms without writes.
//!
//! Writes keep their order: a position committed in a batch means every fate queued before it
//! is committed too. Within a batch, only the last position of each source is written
//! (positions only move forward, and the batch commits as a whole). Three kinds of write are
//! moot and never reach the store:
//!
//! - a queued retry (`Schedule`) is held back for [`JournalOptions::hold`] (10 ms by default;
//!   `durable/held.rs`), and if a later write of the same message (its next `Schedule`, its
//!   fate) arrives meanwhile, it is never written. Nobody waits on a queued retry's result,
//!   positions only cover messages with a fate, and a flush writes everything held;
//! - an acked fate of a message with no retry row, when [`JournalOptions::record_every_ack`]
//!   is off (the source's position is then the only record of it);
//! - an acked fate with an [`Offset`](crate::store::Offset) that its source's position covers
//!   ("acked compactly"; unless [`JournalOptions::write_every_ack`], which a shared store
//!   sets): the position is the record of everything at or below it. A fate
//!   above the committed position is held back for [`JournalOptions::ack_hold`] (1 s by
//!   default; `durable/held_acks.rs`), and is moot if a position of its source covers it
//!   meanwhile; if not, it is written, and the store prunes it when the position passes it.
//!   So a durable source costs a position per batch, not a write per message, and what a crash
//!   can cost is a redelivery of the last second's acked messages above the mark, never a
//!   loss.
//!
//! A batch that fails (disk full, database busy) is retried with backoff. After three failures
//! the batch is split: each waiting caller's writes go in their own transaction, and the caller
//! gets the error (the dead-letter writer then tries its batch again later); the fire-and-forget
//! writes are retried, each failure logged with its cause. A store that refuses every commit
//! for [`JournalOptions::give_up_after`] (30 s by default) makes the journal give up
//! (`durable/give_up.rs`): [`Journal::failed`] completes with the [`JournalFailure`],
//! nothing more is committed, and the process that runs it is expected to stop. What was
//! committed stays committed, and nothing dropped is lost: it never reached the store, so the
//! source position never moved past it.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use crate::time::Instant;

use tokio::sync::oneshot;

use tokio::sync::watch;

use super::give_up::{JournalFailure, Retrying};
use super::held::{CustodyTo, Held, Released};
use super::held_acks::HeldAcks;
use super::journal_counters::Counters;
pub use super::journal_counters::JournalStats;
use super::prune::FatePruner;
use crate::release::DecisionLog;
use crate::store::{Applied, MessageId, Result, ScheduledRetry, Store, StoreError, WriteOp};
use crate::time::Timestamp;

/// Tuning for the [`Journal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalOptions {
    /// The most writes in one transaction (default 4096).
    pub max_batch: usize,
    /// How long a queued retry is held back before it is written (default 10 ms; see the
    /// [module docs](self)). A flush, or the journal's end, writes held retries at once.
    pub hold: Duration,
    /// How long a store that refuses every commit is retried before the journal gives up
    /// (default 30 s; see [`Journal::failed`]).
    pub give_up_after: Duration,
    /// How long an acked fate above its source's committed position is held back, waiting
    /// for a position to cover it, before it is written (default 1 s; see the
    /// [module docs](self)). A flush, or the journal's end, writes held fates at once.
    pub ack_hold: Duration,
    /// The most acked fates held back; beyond it the oldest are written (default 262,144).
    pub max_held_acks: usize,
    /// Record an acked fate for every message (true, the default: needed for "one fate per
    /// message" after a restart, and for reports from the store). A fate its source's position
    /// covers is moot either way. When false, only messages with a retry row get one (the row
    /// must go); the source's position is then the only record of the others.
    pub record_every_ack: bool,
    /// Write every acked fate at once, even one its source's position covers (default false:
    /// such a fate is moot). A shared store sets it: another node may have left a retry row for
    /// the message (a claim of an earlier delivery), which only the fate's write drops, and
    /// which this journal does not know of. The store still prunes the fates a position
    /// covers, so they stay bounded.
    pub write_every_ack: bool,
    /// How long an acked fate without an offset is kept (`None`, the default: for ever). A
    /// broker source commits no position that would prune its retried messages' acked fates;
    /// with this set the journal prunes them (`durable/prune.rs`,
    /// [`WriteOp::PruneFates`]) once they are this much older than the newest it wrote, so
    /// the store keeps a window of them, not all. A redelivery after the window is a new
    /// delivery to the store.
    pub fates_keep: Option<Duration>,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            max_batch: 4096,
            hold: Duration::from_millis(10),
            give_up_after: Duration::from_secs(30),
            ack_hold: Duration::from_secs(1),
            max_held_acks: 262_144,
            record_every_ack: true,
            write_every_ack: false,
            fates_keep: None,
        }
    }
}

/// Who waits for a batch of writes to commit.
type Waiter = oneshot::Sender<Result<Vec<Applied>>>;

// Nearly every entry is an `Op`: boxing it would cost an allocation per write.
#[allow(clippy::large_enum_variant)]
enum Entry {
    Op(WriteOp),
    /// A retry's `Schedule`, whose commit `CustodyTo` hears of.
    Retain(ScheduledRetry, CustodyTo),
    Wait(Vec<WriteOp>, Waiter),
    Flush(oneshot::Sender<()>),
    Rows(Vec<MessageId>),
    /// The decision log whose entries each batch from now on takes along.
    Decisions(Arc<DecisionLog>),
}

struct Inner {
    tx: mpsc::Sender<Entry>,
    counters: Arc<Counters>,
    failed: watch::Receiver<Option<Arc<JournalFailure>>>,
}

/// The write-behind journal. Cheap to clone; the thread stops once every clone is dropped and
/// everything queued is committed. See the [module docs](self).
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Journal {
    /// Starts the journal thread over `store`.
    pub fn spawn(store: Arc<dyn Store>, options: JournalOptions) -> Journal {
        let (tx, rx) = mpsc::channel();
        let (failure_tx, failed) = watch::channel(None);
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        let options = JournalOptions {
            max_batch: options.max_batch.max(1),
            ..options
        };
        std::thread::Builder::new()
            .name("rebound-journal".into())
            .spawn(move || {
                if let Err(failure) = run(store.as_ref(), &rx, &options, &thread_counters) {
                    let _ = failure_tx.send(Some(Arc::new(failure)));
                    refuse_all(&rx, &thread_counters);
                }
            })
            .expect("spawning the journal thread");
        Journal {
            inner: Arc::new(Inner {
                tx,
                counters,
                failed,
            }),
        }
    }

    /// Queues `op` and returns at once (fire and forget); never blocks. It is committed in
    /// order with everything else queued, unless it is moot (see the [module docs](self)).
    pub fn write_behind(&self, op: WriteOp) {
        self.inner.counters.backlog.fetch_add(1, Relaxed);
        self.send(Entry::Op(op));
    }

    /// From now on each batch also writes what `log` holds (`WriteOp::LogDecisions`, bounded
    /// by its `keep`): the decisions ride in the commit of the writes they caused, and the
    /// last ones go with the journal's last batch. A later call replaces the log.
    pub fn log_decisions(&self, log: Arc<DecisionLog>) {
        self.send(Entry::Decisions(log));
    }

    /// Queues a retry's `Schedule` as [`write_behind`](Self::write_behind) does; once it is
    /// committed (or a later retry of the message that replaced it while held), `custody`
    /// hears that the store has the message.
    pub(crate) fn write_behind_retained(&self, retry: ScheduledRetry, custody: CustodyTo) {
        self.inner.counters.backlog.fetch_add(1, Relaxed);
        self.send(Entry::Retain(retry, custody));
    }

    /// Tells the journal that the store already holds retry rows for `ids` (recovered from the
    /// last run), so that their messages' fates drop them. Call before the topology starts.
    pub fn known_rows(&self, ids: Vec<MessageId>) {
        self.send(Entry::Rows(ids));
    }

    fn send(&self, entry: Entry) {
        if self.inner.tx.send(entry).is_err() {
            // Only if the thread died (it panicked): nothing can be written any more.
            tracing::error!("the journal thread has stopped; a write was not queued");
        }
    }

    /// Queues `ops` and waits until they are committed; returns one [`Applied`] per op.
    pub async fn commit(&self, ops: Vec<WriteOp>) -> Result<Vec<Applied>> {
        self.queue_waiting(ops)?
            .await
            .map_err(|_| StoreError::WriterClosed)?
    }

    /// [`Journal::commit`] for blocking code (an operator's action, run on a blocking thread).
    /// Must not be called from async code.
    pub fn commit_blocking(&self, ops: Vec<WriteOp>) -> Result<Vec<Applied>> {
        self.queue_waiting(ops)?
            .blocking_recv()
            .map_err(|_| StoreError::WriterClosed)?
    }

    fn queue_waiting(&self, ops: Vec<WriteOp>) -> Result<oneshot::Receiver<Result<Vec<Applied>>>> {
        let (done, committed) = oneshot::channel();
        if ops.is_empty() {
            // Nothing to commit: answered now (a batch of no ops is never written, so its
            // waiter would hear only that the writer is gone).
            let _ = done.send(Ok(Vec::new()));
            return Ok(committed);
        }
        self.inner.counters.backlog.fetch_add(ops.len(), Relaxed);
        self.inner
            .tx
            .send(Entry::Wait(ops, done))
            .map_err(|_| StoreError::WriterClosed)?;
        Ok(committed)
    }

    /// Waits until everything queued before this call is committed.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.inner.tx.send(Entry::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    /// Completes once the journal has given up on a store that refused every commit for
    /// [`JournalOptions::give_up_after`]; never, while it is healthy.
    pub async fn failed(&self) -> Arc<JournalFailure> {
        let mut failed = self.inner.failed.clone();
        // The borrow ends before any other await, so the future is Send.
        let failure = failed
            .wait_for(Option::is_some)
            .await
            .ok()
            .map(|f| f.clone());
        match failure {
            Some(failure) => failure.expect("waited for Some"),
            // The thread ended without failing (every clone was dropped): nothing to report.
            None => std::future::pending().await,
        }
    }

    /// The failure, if the journal has given up.
    pub fn failure(&self) -> Option<Arc<JournalFailure>> {
        self.inner.failed.borrow().clone()
    }

    /// Since when the store refuses the journal's commits, and the last cause, while it does
    /// (it is retried meanwhile; after [`JournalOptions::give_up_after`] the journal gives up
    /// and this stays). `None` while commits succeed: what a readiness probe asks.
    pub fn failing(&self) -> Option<(Timestamp, String)> {
        if !self.inner.counters.any_failing.load(Relaxed) {
            return None;
        }
        self.inner
            .counters
            .failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Writes waiting for the disk (see [`JournalStats::backlog`]): what a source paces
    /// itself by.
    pub fn backlog(&self) -> usize {
        self.inner.counters.backlog.load(Relaxed)
    }

    /// The journal's counters.
    pub fn stats(&self) -> JournalStats {
        let c = &self.inner.counters;
        JournalStats {
            committed: c.committed.load(Relaxed),
            transactions: c.transactions.load(Relaxed),
            failures: c.failures.load(Relaxed),
            moot: c.moot.load(Relaxed),
            backlog: c.backlog.load(Relaxed) as u64,
            stale: c.stale.load(Relaxed),
        }
    }
}

/// A batch being assembled: the ops in order, who waits for which range, and the positions.
struct Batch {
    /// When it was begun (the arrival time of what it holds back).
    now: Instant,
    ops: Vec<WriteOp>,
    loose: Vec<usize>,
    waiters: Vec<(std::ops::Range<usize>, Waiter)>,
    positions: BTreeMap<String, (u64, Timestamp)>,
    flushes: Vec<oneshot::Sender<()>>,
    /// The retries (by index in `ops`) whose commit their spout task hears of (custody).
    custody: Vec<(usize, CustodyTo)>,
    /// Writes in this batch (held retries count once they join one).
    counted: usize,
    /// Writes made moot while this batch was assembled.
    moot: usize,
    /// Acked fates held in this batch: they wait for a position, not for the disk, so they
    /// leave the backlog now.
    parked: usize,
    /// Held acked fates that left the hold in this batch (written or moot): counted above,
    /// but out of the backlog since they were held.
    unparked: usize,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            now: crate::time::now(),
            ops: Vec::new(),
            loose: Vec::new(),
            waiters: Vec::new(),
            positions: BTreeMap::new(),
            flushes: Vec::new(),
            custody: Vec::new(),
            counted: 0,
            moot: 0,
            parked: 0,
            unparked: 0,
        }
    }
}

/// What the journal thread knows between batches: the held retries and which messages have a
/// retry row (one owner: see the [module docs](self)), and the held acked fates with the
/// position each source has reached.
#[derive(Default)]
struct Ledger {
    held: Held,
    acks: HeldAcks,
    record_every_ack: bool,
    write_every_ack: bool,
    /// When to prune the acked fates without an offset (`fates_keep`).
    pruner: Option<FatePruner>,
    /// The decision log each batch drains (`Journal::log_decisions`).
    decisions: Option<Arc<DecisionLog>>,
}

impl Batch {
    /// Adds `entry`; a queued retry is held instead, and a write that replaces or drops a
    /// message's retry row settles what is known of it (a held retry becomes moot).
    fn add(&mut self, entry: Entry, ledger: &mut Ledger) {
        match entry {
            Entry::Op(WriteOp::Position {
                source,
                position,
                at,
            }) => {
                self.counted += 1;
                let p = self.positions.entry(source).or_insert((position, at));
                *p = (p.0.max(position), p.1.max(at));
            }
            Entry::Op(WriteOp::Schedule(retry)) => {
                self.moot += usize::from(ledger.held.hold_for(retry, self.now, None));
            }
            Entry::Retain(retry, custody) => {
                self.moot += usize::from(ledger.held.hold_for(retry, self.now, Some(custody)));
            }
            Entry::Op(op @ WriteOp::Acked { .. }) => {
                if let Some(pruner) = &mut ledger.pruner {
                    pruner.saw(&op);
                }
                let had_row = self.settle(&op, ledger);
                if had_row {
                    self.push_loose(op); // it drops the row: never moot
                } else if !ledger.record_every_ack {
                    self.moot += 1; // not needed: the source's position records it
                } else if ledger.write_every_ack {
                    self.push_loose(op); // a row of another node's may wait for it
                } else {
                    match ledger.acks.hold(op, self.now) {
                        Some(op) => self.push_loose(op), // no offset: nothing will cover it
                        // Held until a position covers it (moot) or its hold ends (written).
                        None => self.parked += 1,
                    }
                }
            }
            Entry::Op(op) => {
                self.settle(&op, ledger);
                self.push_loose(op);
            }
            Entry::Wait(ops, done) => {
                for op in &ops {
                    self.settle(op, ledger);
                }
                self.counted += ops.len();
                let start = self.ops.len();
                self.ops.extend(ops);
                self.waiters.push((start..self.ops.len(), done));
            }
            Entry::Flush(done) => self.flushes.push(done),
            Entry::Rows(ids) => {
                for id in &ids {
                    ledger.held.has_row(id);
                }
            }
            Entry::Decisions(log) => ledger.decisions = Some(log),
        }
    }

    /// Settles the retry row `op` replaces or drops; true if the store had one.
    fn settle(&mut self, op: &WriteOp, ledger: &mut Ledger) -> bool {
        let Some(id) = op.retry_row() else {
            return false;
        };
        let settled = ledger.held.settle(id);
        self.moot += usize::from(settled.moot);
        if let WriteOp::Schedule(_) | WriteOp::Replay(_) | WriteOp::Redrive(_) = op {
            // Written now, not held: it leaves a row.
            ledger.held.has_row(id);
        }
        settled.had_row
    }

    fn push_loose(&mut self, op: WriteOp) {
        self.counted += 1;
        self.loose.push(self.ops.len());
        self.ops.push(op);
    }

    /// Adds the journal's own prune, if one is due (it was never queued, so it is not in the
    /// backlog). The pruner has seen each acked fate as it was added.
    fn prune(&mut self, ledger: &mut Ledger) {
        if let Some(op) = ledger.pruner.as_mut().and_then(|p| p.due(self.now)) {
            self.loose.push(self.ops.len());
            self.ops.push(op);
        }
    }

    /// Adds the decisions logged since the last batch and written by the log's thread (with
    /// `all`, every decision logged). Never queued: not in the backlog.
    fn decisions(&mut self, ledger: &Ledger, all: bool) {
        let Some(log) = &ledger.decisions else {
            return;
        };
        for decisions in log.take_ready(all) {
            self.loose.push(self.ops.len());
            self.ops.push(WriteOp::LogDecisions {
                decisions,
                keep: log.options().keep,
            });
        }
    }

    /// Adds held retries, to be written now.
    fn release(&mut self, retries: Vec<Released>) {
        for Released { retry, custody } in retries {
            if let Some(custody) = custody {
                self.custody.push((self.ops.len(), custody));
            }
            self.push_loose(WriteOp::Schedule(retry));
        }
    }

    /// Tells each written retry's custody that its message is in the store's custody. `ops`
    /// are the batch's writes; `applied` answers them all, or (`loose_only`, after a split)
    /// only the loose ones, in their order.
    fn tell_custody(&mut self, ops: &[WriteOp], applied: &[Applied], loose_only: bool) {
        for (i, custody) in self.custody.drain(..) {
            let answer = if loose_only {
                self.loose
                    .binary_search(&i)
                    .ok()
                    .and_then(|at| applied.get(at))
            } else {
                applied.get(i)
            };
            if let (Some(Applied::Done), Some(WriteOp::Schedule(retry))) = (answer, ops.get(i)) {
                custody.retained([retry.message.id.clone()]);
            }
        }
    }

    /// Drops the held acked fates that this batch's positions cover (moot), then adds those
    /// whose hold is over (or, with `all`, every one), to be written now.
    fn settle_acks(&mut self, ledger: &mut Ledger, options: &JournalOptions, all: bool) {
        for (source, &(position, _)) in &self.positions {
            ledger.acks.cover(source, position);
        }
        let released = ledger
            .acks
            .release(self.now, options.ack_hold, options.max_held_acks, all);
        self.moot += released.moot;
        self.unparked += released.moot + released.write.len();
        for op in released.write {
            self.push_loose(op);
        }
    }

    fn position_ops(&self) -> impl Iterator<Item = WriteOp> + '_ {
        self.positions
            .iter()
            .map(|(source, &(position, at))| WriteOp::Position {
                source: source.clone(),
                position,
                at,
            })
    }
}

/// While writes keep coming, the thread looks for more this often instead of blocking on
/// the channel: a sender then never has to wake it (a futex call on the spout task's path
/// for every write), and the writes that queue up meanwhile commit together.
const POLL: Duration = Duration::from_millis(1);
/// After this long without a write, the thread blocks until the next one.
const PARK_AFTER: Duration = Duration::from_millis(100);
/// The journal thread: batches and commits until every sender is gone (`Ok`), or until the
/// store has refused commits for too long.
fn run(
    store: &dyn Store,
    rx: &mpsc::Receiver<Entry>,
    options: &JournalOptions,
    counters: &Counters,
) -> std::result::Result<(), JournalFailure> {
    let JournalOptions {
        max_batch,
        hold,
        record_every_ack,
        write_every_ack,
        ..
    } = *options;
    let mut idle = Duration::ZERO;
    let mut ledger = Ledger {
        record_every_ack,
        write_every_ack,
        pruner: options.fates_keep.map(FatePruner::new),
        ..Ledger::default()
    };
    let mut next: Option<Entry> = None;
    let mut closed = false;
    loop {
        if next.is_none() && !closed {
            match rx.try_recv() {
                Ok(entry) => next = Some(entry),
                Err(mpsc::TryRecvError::Disconnected) => closed = true,
                Err(mpsc::TryRecvError::Empty) => {}
            }
        }
        let now = crate::time::now();
        let over = |at: Instant, hold: Duration| now.saturating_duration_since(at) >= hold;
        let held_due = ledger.held.oldest().is_some_and(|at| over(at, hold))
            || ledger
                .acks
                .oldest()
                .is_some_and(|at| over(at, options.ack_hold));
        // Logged decisions the log's thread is writing keep the journal polling (not parked),
        // and its written pages are work: they reach the store without other writes.
        let log = ledger
            .decisions
            .as_deref()
            .map(DecisionLog::waiting)
            .unwrap_or_default();
        let holding = !ledger.held.is_empty() || !ledger.acks.is_empty() || log.pending;
        let work = next.is_some() || held_due || log.ready || (closed && holding);
        if !work {
            if closed {
                return Ok(());
            }
            if holding || idle < PARK_AFTER {
                std::thread::sleep(POLL);
                idle += POLL;
            } else {
                match rx.recv() {
                    Ok(entry) => next = Some(entry),
                    Err(_) => closed = true,
                }
            }
            continue;
        }
        idle = Duration::ZERO;
        let mut batch = Batch {
            now,
            ..Batch::default()
        };
        batch.release(ledger.held.due(now, hold));
        if let Some(entry) = next.take() {
            batch.add(entry, &mut ledger);
        }
        while !closed && batch.counted < max_batch {
            match rx.try_recv() {
                Ok(entry) => batch.add(entry, &mut ledger),
                Err(mpsc::TryRecvError::Disconnected) => closed = true,
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
        // A flush, or the end, writes everything held.
        let all = closed || !batch.flushes.is_empty();
        if all {
            batch.release(ledger.held.all());
        }
        batch.settle_acks(&mut ledger, options, all);
        batch.prune(&mut ledger);
        batch.decisions(&ledger, all);
        // Moot writes count as committed: what they would have written is already settled.
        let moot = batch.moot;
        counters.committed.fetch_add(moot as u64, Relaxed);
        counters.moot.fetch_add(moot as u64, Relaxed);
        commit(store, &mut batch, options.give_up_after, counters)?;
        let left = batch.counted + moot + batch.parked - batch.unparked;
        counters.backlog.fetch_sub(left, Relaxed);
        for done in batch.flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

/// After the journal gave up: every waiter hears that nothing was written, every flush is
/// answered (nothing more will be written), and every write is dropped, until the last
/// sender is gone.
fn refuse_all(rx: &mpsc::Receiver<Entry>, counters: &Counters) {
    while let Ok(entry) = rx.recv() {
        let writes = match entry {
            Entry::Op(_) | Entry::Retain(..) => 1,
            Entry::Rows(_) | Entry::Decisions(_) => 0,
            Entry::Wait(ops, done) => {
                let _ = done.send(Err(StoreError::WriterClosed));
                ops.len()
            }
            Entry::Flush(done) => {
                let _ = done.send(());
                0
            }
        };
        counters.backlog.fetch_sub(writes, Relaxed);
    }
}

fn commit(
    store: &dyn Store,
    batch: &mut Batch,
    give_up_after: Duration,
    counters: &Counters,
) -> std::result::Result<(), JournalFailure> {
    if batch.ops.is_empty() && batch.positions.is_empty() {
        return Ok(());
    }
    let mut ops = std::mem::take(&mut batch.ops);
    ops.extend(batch.position_ops());
    let mut retrying = Retrying::new(give_up_after);
    for _ in 0..3 {
        match store.apply(&ops) {
            Ok(applied) => {
                counters.committed(ops.len() as u64);
                count_stale(&applied, counters);
                batch.tell_custody(&ops, &applied, false);
                for (range, done) in batch.waiters.drain(..) {
                    let _ = done.send(Ok(applied[range].to_vec()));
                }
                return Ok(());
            }
            Err(e) => {
                counters.failed(&e);
                retrying.failed(&e, ops.len(), || store.location())?;
            }
        }
    }
    // Split: each waiter on its own (it gets the error and retries by itself), and the
    // fire-and-forget writes until they commit.
    for (range, done) in batch.waiters.drain(..) {
        let writes = range.len() as u64;
        let result = store.apply(&ops[range]);
        match &result {
            Ok(applied) => {
                counters.committed(writes);
                count_stale(applied, counters);
            }
            Err(e) => counters.failed(e),
        }
        let _ = done.send(result);
    }
    let mut loose: Vec<WriteOp> = batch.loose.iter().map(|&i| ops[i].clone()).collect();
    loose.extend(batch.position_ops());
    loop {
        match store.apply(&loose) {
            Ok(applied) => {
                counters.committed(loose.len() as u64);
                count_stale(&applied, counters);
                batch.tell_custody(&ops, &applied, true);
                return Ok(());
            }
            Err(e) => {
                counters.failed(&e);
                retrying.failed(&e, loose.len(), || store.location())?;
            }
        }
    }
}

/// Counts the writes a shared store refused as stale, and says which.
fn count_stale(applied: &[Applied], counters: &Counters) {
    let stale = applied
        .iter()
        .filter(|a| matches!(a, Applied::Stale))
        .count();
    if stale > 0 {
        counters.stale.fetch_add(stale as u64, Relaxed);
        tracing::warn!(
            stale,
            "the shared store refused writes under claims this node no longer holds (it stalled past their lease)"
        );
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
