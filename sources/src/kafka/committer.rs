//! The committer: a thread of its own per consumer that commits the marks the reader hands it,
//! synchronously, and takes the broker's answer back into the marks (librdkafka reports the
//! result of an asynchronous manual commit to no callback, and the reader must not block on a
//! broker's round trip). Marks handed over while a commit is under way are merged, the
//! highest of each partition kept, into the next commit. A failed commit is asked for again by
//! the reader at its next look, after a [`Doubling`] wait here.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rebound_engine::backoff::Doubling;

use super::marks::Commit;
use super::reader::{Context, count_confirmed, list};

/// Waits after a failed commit.
const RETRY: Doubling = Doubling::new(Duration::from_millis(50), Duration::from_secs(5));

/// The committer of one consumer.
pub(super) struct Committer {
    marks: Option<Sender<Commit>>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    pub(super) fn start(consumer: Arc<BaseConsumer<Context>>) -> Committer {
        let (marks, rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("kafka-commit".into())
            .spawn(move || {
                run(&consumer, rx);
                let _ = done_tx.send(());
            })
            .expect("a thread for the Kafka source's commits");
        Committer {
            marks: Some(marks),
            done,
            thread: Some(thread),
        }
    }

    /// Commits `marks` (soon: after the commit under way, if one is).
    pub(super) fn commit(&self, marks: Commit) {
        if let Some(tx) = &self.marks {
            let _ = tx.send(marks);
        }
    }

    /// Lets the committer finish what it was handed, waiting at most `wait` (a broker that does
    /// not answer leaves the last commit to the thread, which ends once librdkafka gives up).
    pub(super) fn close(mut self, wait: Duration) {
        self.marks = None;
        match self.done.recv_timeout(wait) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!(
                    "the last commit is still waiting for the broker; its records may be read again, and the store's custody skips them"
                );
            }
        }
    }
}

fn run(consumer: &BaseConsumer<Context>, marks: Receiver<Commit>) {
    let context = consumer.context().clone();
    let mut failures = 0u32;
    while let Ok(first) = marks.recv() {
        let mut want: BTreeMap<i32, i64> = BTreeMap::new();
        for (partition, offset) in first.into_iter().chain(marks.try_iter().flatten()) {
            let o = want.entry(partition).or_insert(offset);
            *o = (*o).max(offset);
        }
        let commit: Commit = want.into_iter().collect();
        let result = consumer.commit(&list(&context.topic, &commit), CommitMode::Sync);
        let mut shared = context
            .shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(()) => {
                failures = 0;
                for &(partition, offset) in &commit {
                    let took = shared.marks.confirmed(partition, offset);
                    count_confirmed(&context.stats, took);
                }
                context.stats.reachable(true);
            }
            Err(e) => {
                failures += 1;
                for &(partition, _) in &commit {
                    shared.marks.failed(partition);
                }
                drop(shared);
                context.stats.reachable(false);
                if failures == 1 || failures.is_multiple_of(20) {
                    tracing::warn!(source = %context.shown, error = %e, failures, "a commit failed; it is made again");
                }
                std::thread::sleep(RETRY.after(failures));
            }
        }
    }
}
