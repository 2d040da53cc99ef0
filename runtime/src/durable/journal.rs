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
//! a whole batch. Writes keep their order: a position committed in a batch means every fate
//! queued before it is committed too. Within a batch, only the last position of each source is
//! written (positions only move forward, and the batch commits as a whole).
//!
//! A batch that fails (disk full, database busy) is retried with backoff. After three failures
//! the batch is split: each waiting caller's writes go in their own transaction, and the caller
//! gets the error (the dead-letter writer then tries its batch again later); the fire-and-forget
//! writes are retried until they commit, with an error logged each time. The journal stalls
//! rather than drop a write, because a dropped fate or retry is a message that could be lost.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::store::{Applied, Result, Store, StoreError, WriteOp};

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
                self.loose.push(self.ops.len());
                self.ops.push(op);
            }
            Entry::Wait(ops, done) => {
                self.counted += ops.len();
                let start = self.ops.len();
                self.ops.extend(ops);
                self.waiters.push((start..self.ops.len(), done));
            }
            Entry::Flush(done) => self.flushes.push(done),
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

fn run(store: &dyn Store, rx: mpsc::Receiver<Entry>, max_batch: usize, counters: &Counters) {
    while let Ok(first) = rx.recv() {
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
