//! [`BatchWriter`]: group commit for single writes.
//!
//! The runtime produces writes one at a time (a retry here, an ack there) from many tasks,
//! but SQLite pays per *transaction* (with `synchronous=FULL`, one fsync each). The writer is
//! one thread that takes whatever has queued up while the previous commit ran, up to
//! `max_batch`, and applies it as one transaction. There is no timer: an idle writer commits a
//! lone write at once, a busy one batches more. Each caller's future completes only after its
//! write is committed, so "durably stored, now commit the source offset" holds.
//!
//! If a batch fails, its writes are retried one transaction each, so only the faulty write
//! reports the error.

use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot};

use super::{Applied, Result, Store, StoreError, WriteOp};

/// Tuning for [`BatchWriter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchWriterOptions {
    /// Most writes in one transaction.
    pub max_batch: usize,
    /// Writes that may wait in the queue before `write` waits too (backpressure).
    pub queue: usize,
}

impl Default for BatchWriterOptions {
    fn default() -> Self {
        BatchWriterOptions {
            max_batch: 1024,
            queue: 16 * 1024,
        }
    }
}

struct Request {
    op: WriteOp,
    done: oneshot::Sender<Result<Applied>>,
}

/// A writer thread that groups single writes into transactions. See the [module docs](self).
#[derive(Debug)]
pub struct BatchWriter {
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl BatchWriter {
    /// Starts the writer thread over `store`.
    pub fn spawn(store: Arc<dyn Store>, options: BatchWriterOptions) -> Self {
        let (tx, rx) = mpsc::channel(options.queue.max(1));
        let max_batch = options.max_batch.max(1);
        let thread = std::thread::Builder::new()
            .name("rebound-store-writer".into())
            .spawn(move || run(store.as_ref(), rx, max_batch))
            .expect("spawning the store writer thread");
        BatchWriter {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// Queues `op` and waits until it is committed.
    pub async fn write(&self, op: WriteOp) -> Result<Applied> {
        let (done, committed) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or(StoreError::WriterClosed)?;
        tx.send(Request { op, done })
            .await
            .map_err(|_| StoreError::WriterClosed)?;
        committed.await.map_err(|_| StoreError::WriterClosed)?
    }

    /// [`BatchWriter::write`] for threads outside the async runtime.
    pub fn write_blocking(&self, op: WriteOp) -> Result<Applied> {
        let (done, committed) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or(StoreError::WriterClosed)?;
        tx.blocking_send(Request { op, done })
            .map_err(|_| StoreError::WriterClosed)?;
        committed
            .blocking_recv()
            .map_err(|_| StoreError::WriterClosed)?
    }

    /// Stops accepting writes, commits what is queued, and waits for the thread (blocking).
    pub fn close(mut self) {
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            // A panic in the writer already failed its callers with WriterClosed.
            let _ = thread.join();
        }
    }
}

impl Drop for BatchWriter {
    fn drop(&mut self) {
        // Closing the channel lets the thread finish the queued writes and exit on its own;
        // joining here could block an async runtime.
        self.tx = None;
    }
}

fn run(store: &dyn Store, mut rx: mpsc::Receiver<Request>, max_batch: usize) {
    let mut ops = Vec::with_capacity(max_batch);
    let mut dones = Vec::with_capacity(max_batch);
    while let Some(first) = rx.blocking_recv() {
        ops.push(first.op);
        dones.push(first.done);
        while ops.len() < max_batch {
            match rx.try_recv() {
                Ok(r) => {
                    ops.push(r.op);
                    dones.push(r.done);
                }
                Err(_) => break,
            }
        }
        match store.apply(&ops) {
            Ok(applied) => {
                for (done, a) in dones.drain(..).zip(applied) {
                    // A caller that stopped waiting does not care.
                    let _ = done.send(Ok(a));
                }
            }
            Err(_) => {
                for (op, done) in ops.iter().zip(dones.drain(..)) {
                    let one = store
                        .apply(std::slice::from_ref(op))
                        .map(|mut a| a.pop().unwrap_or(Applied::Done));
                    let _ = done.send(one);
                }
            }
        }
        ops.clear();
    }
}
