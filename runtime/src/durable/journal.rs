//! [`Journal`]: the write-behind path from the runtime to the [`Store`].
//!
//! The spout task must never wait on a disk, yet everything it decides (a retry, an acked
//! fate, a source position) has to reach the store in order. The journal is one thread and
//! one FIFO channel:
//!
//! - [`Journal::submit`] queues a write and returns at once (the spout task's path);
//! - [`Journal::write`] queues writes and waits until they are committed (the dead-letter path:
//!   `dead_lettered(id)` may only follow a commit);
//! - [`Journal::flush`] waits until everything queued before it is committed.
//!
//! The thread takes whatever queued up while the previous commit ran (up to
//! [`JournalOptions::max_batch`] writes) and applies it as one transaction, so one fsync covers
//! a whole batch. Between batches the thread polls the channel every millisecond rather than
//! block on it, so that the spout tasks' writes never have to wake it (and so that what
//! arrives meanwhile commits together); it blocks only after 100 ms without writes. Writes keep their order: a position committed in a batch means every fate
//! queued before it is committed too. Within a batch, only the last position of each source is
//! written (positions only move forward, and the batch commits as a whole).
//!
//! A queued retry (`Schedule`) that a later write in the same batch replaces or removes (the
//! next `Schedule` of the message, its `Unschedule`, or its fate) is not written at all: the
//! batch commits as a whole, so the rows after it are the same, and nobody waits on a
//! queued retry's result. Under load most short retries are scheduled and settled within one
//! batch, and this halves what they cost the disk.
//!
//! A batch that fails (disk full, database busy) is retried with backoff. After three failures
//! the batch is split: each waiting caller's writes go in their own transaction, and the caller
//! gets the error (the dead-letter writer then tries its batch again later); the fire-and-forget
//! writes are retried until they commit, with an error logged each time. The journal stalls
//! rather than drop a write, because a dropped fate or retry is a message that could be lost.

use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::store::{Applied, MessageId, Result, Store, StoreError, WriteOp};

/// Tuning for the [`Journal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalOptions {
    /// The most writes in one transaction (default 4096).
    pub max_batch: usize,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions { max_batch: 4096 }
    }
}

/// Counters of the journal's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Writes committed.
    pub committed: u64,
    /// Transactions committed.
    pub transactions: u64,
    /// Failed attempts to commit a batch (each was retried).
    pub failures: u64,
    /// Queued retries not written because a later write in their batch settled them
    /// (counted in `committed` too).
    pub moot: u64,
    /// Writes queued and not yet committed.
    pub backlog: u64,
}

/// Who waits for a batch of writes to commit.
type Waiter = oneshot::Sender<Result<Vec<Applied>>>;

// Nearly every entry is an `Op`: boxing it would cost an allocation per write.
#[allow(clippy::large_enum_variant)]
enum Entry {
    Op(WriteOp),
    Wait(Vec<WriteOp>, Waiter),
    Flush(oneshot::Sender<()>),
}

#[derive(Default)]
struct Counters {
    committed: AtomicU64,
    transactions: AtomicU64,
    failures: AtomicU64,
    moot: AtomicU64,
    backlog: AtomicUsize,
}

struct Inner {
    tx: mpsc::Sender<Entry>,
    counters: Arc<Counters>,
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
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        let max_batch = options.max_batch.max(1);
        std::thread::Builder::new()
            .name("rebound-journal".into())
            .spawn(move || run(store.as_ref(), rx, max_batch, &thread_counters))
            .expect("spawning the journal thread");
        Journal {
            inner: Arc::new(Inner { tx, counters }),
        }
    }

    /// Queues `op`; never blocks. It is committed in order with everything else queued.
    pub fn submit(&self, op: WriteOp) {
        self.inner.counters.backlog.fetch_add(1, Relaxed);
        if self.inner.tx.send(Entry::Op(op)).is_err() {
            // Only if the thread died (it panicked): nothing can be written any more.
            tracing::error!("the journal thread has stopped; a write was not queued");
        }
    }

    /// Queues `ops` and waits until they are committed; returns one [`Applied`] per op.
    pub async fn write(&self, ops: Vec<WriteOp>) -> Result<Vec<Applied>> {
        let (done, committed) = oneshot::channel();
        self.inner.counters.backlog.fetch_add(ops.len(), Relaxed);
        self.inner
            .tx
            .send(Entry::Wait(ops, done))
            .map_err(|_| StoreError::WriterClosed)?;
        committed.await.map_err(|_| StoreError::WriterClosed)?
    }

    /// Waits until everything queued before this call is committed.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.inner.tx.send(Entry::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    /// Writes queued and not yet committed.
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
        }
    }
}

/// A batch being assembled: the ops in order, who waits for which range, and the positions.
#[derive(Default)]
struct Batch {
    ops: Vec<WriteOp>,
    loose: Vec<usize>,
    waiters: Vec<(std::ops::Range<usize>, Waiter)>,
    positions: BTreeMap<String, u64>,
    flushes: Vec<oneshot::Sender<()>>,
    counted: usize,
    /// The queued (`loose`) `Schedule` not yet superseded, per message: its index in `ops`.
    scheduled: HashMap<MessageId, usize>,
    /// Loose `Schedule`s a later write of the same message made moot.
    superseded: Vec<usize>,
}

/// The message whose retry row `op` writes or removes.
fn retry_row_of(op: &WriteOp) -> Option<&MessageId> {
    match op {
        WriteOp::Schedule(s) => Some(&s.message.id),
        WriteOp::Unschedule(id) | WriteOp::Acked(id, _) => Some(id),
        WriteOp::DeadLetter(d) => Some(&d.message.id),
        WriteOp::Position { .. } => None,
    }
}

impl Batch {
    fn add(&mut self, entry: Entry) {
        match entry {
            Entry::Op(WriteOp::Position { source, position }) => {
                self.counted += 1;
                let p = self.positions.entry(source).or_insert(position);
                *p = (*p).max(position);
            }
            Entry::Op(op) => {
                self.counted += 1;
                self.supersede(&op);
                if let WriteOp::Schedule(s) = &op {
                    self.scheduled.insert(s.message.id.clone(), self.ops.len());
                }
                self.loose.push(self.ops.len());
                self.ops.push(op);
            }
            Entry::Wait(ops, done) => {
                self.counted += ops.len();
                for op in &ops {
                    self.supersede(op);
                }
                let start = self.ops.len();
                self.ops.extend(ops);
                self.waiters.push((start..self.ops.len(), done));
            }
            Entry::Flush(done) => self.flushes.push(done),
        }
    }

    /// Marks the queued `Schedule` of `op`'s message, if any, as not to be written.
    fn supersede(&mut self, op: &WriteOp) {
        if let Some(i) = retry_row_of(op).and_then(|id| self.scheduled.remove(id)) {
            self.superseded.push(i);
        }
    }

    /// Drops the superseded writes from `ops`, moving the loose indices and the waiters'
    /// ranges to match (a superseded write is always loose, never inside a range).
    fn drop_superseded(&mut self) {
        if self.superseded.is_empty() {
            return;
        }
        let mut dropped = vec![false; self.ops.len()];
        for &i in &self.superseded {
            dropped[i] = true;
        }
        // `shift[i]`: how many writes before `i` are dropped.
        let mut shift = Vec::with_capacity(self.ops.len() + 1);
        let mut n = 0;
        for &d in &dropped {
            shift.push(n);
            n += usize::from(d);
        }
        shift.push(n);
        let mut i = 0;
        self.ops.retain(|_| {
            i += 1;
            !dropped[i - 1]
        });
        self.loose.retain(|&i| !dropped[i]);
        for i in &mut self.loose {
            *i -= shift[*i];
        }
        for (range, _) in &mut self.waiters {
            *range = range.start - shift[range.start]..range.end - shift[range.end];
        }
    }

    fn position_ops(&self) -> impl Iterator<Item = WriteOp> + '_ {
        self.positions
            .iter()
            .map(|(source, position)| WriteOp::Position {
                source: source.clone(),
                position: *position,
            })
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(10u64 << attempt.min(9)).min(Duration::from_secs(5))
}

/// While writes keep coming, the thread looks for more this often instead of blocking on
/// the channel: a sender then never has to wake it (a futex call on the spout task's path
/// for every write), and the writes that queue up meanwhile commit together.
const POLL: Duration = Duration::from_millis(1);
/// After this long without a write, the thread blocks until the next one.
const PARK_AFTER: Duration = Duration::from_millis(100);

fn run(store: &dyn Store, rx: mpsc::Receiver<Entry>, max_batch: usize, counters: &Counters) {
    let mut idle = Duration::ZERO;
    loop {
        let first = match rx.try_recv() {
            Ok(entry) => entry,
            Err(mpsc::TryRecvError::Disconnected) => return,
            Err(mpsc::TryRecvError::Empty) if idle < PARK_AFTER => {
                std::thread::sleep(POLL);
                idle += POLL;
                continue;
            }
            Err(mpsc::TryRecvError::Empty) => match rx.recv() {
                Ok(entry) => entry,
                Err(_) => return,
            },
        };
        idle = Duration::ZERO;
        let mut batch = Batch::default();
        batch.add(first);
        while batch.counted < max_batch {
            match rx.try_recv() {
                Ok(entry) => batch.add(entry),
                Err(_) => break,
            }
        }
        commit(store, &mut batch, counters);
        counters.backlog.fetch_sub(batch.counted, Relaxed);
        for done in batch.flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

fn commit(store: &dyn Store, batch: &mut Batch, counters: &Counters) {
    if batch.ops.is_empty() && batch.positions.is_empty() {
        return;
    }
    // Moot writes count as committed: what they would have written is already settled.
    let moot = batch.superseded.len() as u64;
    counters.committed.fetch_add(moot, Relaxed);
    counters.moot.fetch_add(moot, Relaxed);
    batch.drop_superseded();
    let mut ops = std::mem::take(&mut batch.ops);
    ops.extend(batch.position_ops());
    for attempt in 0..3 {
        match store.apply(&ops) {
            Ok(applied) => {
                counters.committed.fetch_add(ops.len() as u64, Relaxed);
                counters.transactions.fetch_add(1, Relaxed);
                for (range, done) in batch.waiters.drain(..) {
                    let _ = done.send(Ok(applied[range].to_vec()));
                }
                return;
            }
            Err(e) => {
                counters.failures.fetch_add(1, Relaxed);
                tracing::warn!(error = %e, writes = ops.len(), attempt, "journal commit failed; retrying");
                std::thread::sleep(backoff(attempt));
            }
        }
    }
    // Split: each waiter on its own (it gets the error and retries by itself), and the
    // fire-and-forget writes until they commit.
    for (range, done) in batch.waiters.drain(..) {
        let writes = range.len() as u64;
        let result = store.apply(&ops[range]);
        if result.is_ok() {
            counters.committed.fetch_add(writes, Relaxed);
            counters.transactions.fetch_add(1, Relaxed);
        }
        let _ = done.send(result);
    }
    let mut loose: Vec<WriteOp> = batch.loose.iter().map(|&i| ops[i].clone()).collect();
    loose.extend(batch.position_ops());
    let mut attempt = 3;
    loop {
        match store.apply(&loose) {
            Ok(_) => {
                counters.committed.fetch_add(loose.len() as u64, Relaxed);
                counters.transactions.fetch_add(1, Relaxed);
                return;
            }
            Err(e) => {
                counters.failures.fetch_add(1, Relaxed);
                tracing::error!(error = %e, writes = loose.len(), "journal cannot commit; retrying until it can (nothing is dropped)");
                std::thread::sleep(backoff(attempt));
                attempt += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Timestamp, WallClock};
    use crate::store::{
        DeadLetter, Fate, Message, RetryMeta, RuleId, RuleSetVersion, ScheduledRetry, SqliteStore,
    };

    fn message(id: &str) -> Message {
        Message {
            id: MessageId(id.into()),
            biz: "ORDER".into(),
            payload: b"{}".to_vec(),
            headers: Default::default(),
        }
    }

    fn schedule(id: &str, attempt: u32) -> WriteOp {
        WriteOp::Schedule(ScheduledRetry {
            message: message(id),
            due: Timestamp::from_millis(1_000 * u64::from(attempt)),
            meta: RetryMeta {
                attempt,
                first_seen: Timestamp::from_millis(1),
                last_code: "DB_LOCK_WAIT".into(),
                last_message: "locked".into(),
                last_delay: Duration::from_millis(100),
                rule: RuleId("db-lock".into()),
                rule_set_version: RuleSetVersion("0123456789abcdef".into()),
            },
        })
    }

    fn dead_letter(id: &str) -> WriteOp {
        WriteOp::DeadLetter(DeadLetter {
            message: message(id),
            label: "L1".into(),
            reason: "max_retries".into(),
            last_code: "DB_LOCK_WAIT".into(),
            last_message: "locked".into(),
            attempts: 4,
            first_time: Timestamp::from_millis(1),
            last_time: Timestamp::from_millis(9),
            rule: RuleId("db-lock".into()),
            rule_set_version: RuleSetVersion("0123456789abcdef".into()),
        })
    }

    fn acked(id: &str) -> WriteOp {
        WriteOp::Acked(MessageId(id.into()), Timestamp::from_millis(5))
    }

    fn id(s: &str) -> MessageId {
        MessageId(s.into())
    }

    /// One batch: `a` retried twice then acked, `b` retried then dead-lettered by a waiter,
    /// `c` retried and still waiting, `d` retried then unscheduled.
    fn mixed_batch() -> (Batch, oneshot::Receiver<Result<Vec<Applied>>>) {
        let (done, committed) = oneshot::channel();
        let mut batch = Batch::default();
        for op in [schedule("a", 1), schedule("b", 1), schedule("a", 2)] {
            batch.add(Entry::Op(op));
        }
        batch.add(Entry::Wait(vec![dead_letter("b")], done));
        for op in [
            schedule("c", 1),
            acked("a"),
            schedule("d", 1),
            WriteOp::Unschedule(id("d")),
        ] {
            batch.add(Entry::Op(op));
        }
        (batch, committed)
    }

    #[test]
    fn a_queued_retry_settled_in_the_same_batch_is_not_written() {
        let (mut batch, _committed) = mixed_batch();
        batch.drop_superseded();
        let kinds: Vec<String> = batch
            .ops
            .iter()
            .map(|op| match op {
                WriteOp::Schedule(s) => format!("schedule {} #{}", s.message.id, s.meta.attempt),
                WriteOp::DeadLetter(d) => format!("dead letter {}", d.message.id),
                WriteOp::Acked(id, _) => format!("acked {id}"),
                WriteOp::Unschedule(id) => format!("unschedule {id}"),
                WriteOp::Position { .. } => "position".into(),
            })
            .collect();
        assert_eq!(
            kinds,
            ["dead letter b", "schedule c #1", "acked a", "unschedule d"]
        );
        assert_eq!(batch.loose, [1, 2, 3]);
        assert_eq!(batch.waiters.len(), 1);
        assert_eq!(batch.waiters[0].0, 0..1);
    }

    #[test]
    fn the_store_ends_as_if_every_write_had_been_applied() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path(), Arc::new(WallClock::real())).unwrap();
        let counters = Counters::default();
        let (mut batch, mut committed) = mixed_batch();
        commit(&store, &mut batch, &counters);

        // The waiter hears about its own write, and only that.
        let applied = committed.try_recv().unwrap().unwrap();
        assert_eq!(applied, [Applied::Done]);
        // Every one of the eight writes counts as committed; four were moot.
        assert_eq!(counters.committed.load(Relaxed), 8);
        assert_eq!(counters.moot.load(Relaxed), 4);

        assert_eq!(store.fate_of(&id("a")).unwrap(), Some(Fate::Acked));
        assert_eq!(store.fate_of(&id("b")).unwrap(), Some(Fate::DeadLettered));
        assert_eq!(store.fate_of(&id("c")).unwrap(), None);
        assert_eq!(store.fate_of(&id("d")).unwrap(), None);
        let scheduled: Vec<MessageId> = store
            .scheduled()
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(scheduled, [id("c")]);
    }

    #[test]
    fn a_later_schedule_replaces_the_queued_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path(), Arc::new(WallClock::real())).unwrap();
        let mut batch = Batch::default();
        for op in [schedule("a", 1), schedule("a", 2), schedule("a", 3)] {
            batch.add(Entry::Op(op));
        }
        commit(&store, &mut batch, &Counters::default());
        let rows = store.retries(&[id("a")]).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].meta.attempt, 3);
    }
}
