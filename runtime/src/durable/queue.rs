//! [`DurableRetryQueue`]: a spout task's retry queue, kept in a [`RetryScheduler`] in memory and
//! written behind to the store through the [`Journal`].

use hashbrown::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Journal;
use crate::fate::{BoxFuture, RetryQueue};
use crate::scheduler::RetryScheduler;
use crate::store::{ScheduledRetry, WriteOp};
use crate::time::{TimeMap, Timestamp};
use crate::topology::{Message, MessageId};

/// Messages put into a queue from outside its spout task (operators' replays); the task is
/// woken through the [`Notify`] and moves them into its scheduler, due at once.
#[derive(Debug, Default)]
pub struct Inbox {
    messages: Mutex<Vec<Message>>,
    len: AtomicUsize,
    notify: Arc<Notify>,
}

impl Inbox {
    /// Adds a message, to be delivered as soon as the spout task can, and wakes the task.
    pub fn push(&self, message: Message) {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(message);
        self.len.fetch_add(1, Relaxed);
        self.notify.notify_one();
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub(crate) fn notifier(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    pub(crate) fn take(&self) -> Vec<Message> {
        let taken =
            std::mem::take(&mut *self.messages.lock().unwrap_or_else(PoisonError::into_inner));
        self.len.fetch_sub(taken.len(), Relaxed);
        taken
    }
}

/// A durable [`RetryQueue`]. The due order lives in memory (a [`RetryScheduler`] keyed by the
/// wall-clock due time, and the messages by id); every `schedule` is also queued to the
/// journal as a [`WriteOp::Schedule`], so nothing here waits on the disk. `flush` waits for the
/// journal.
///
/// The store keeps a retry's row until the message's fate is recorded, so a crash at any point
/// leaves it scheduled; after a restart, [`Durable::recover`](super::Durable::recover) hands the
/// rows back to the new queues with their due times and metadata.
pub struct DurableRetryQueue {
    scheduler: RetryScheduler<MessageId>,
    messages: HashMap<MessageId, Message>,
    journal: Journal,
    map: TimeMap,
    inbox: Arc<Inbox>,
}

impl std::fmt::Debug for DurableRetryQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableRetryQueue")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl DurableRetryQueue {
    /// A queue holding `restored` (retries recovered from the store, already persisted), which
    /// writes new retries to `journal`.
    pub(crate) fn new(
        journal: Journal,
        map: TimeMap,
        inbox: Arc<Inbox>,
        restored: Vec<(Instant, Message)>,
    ) -> DurableRetryQueue {
        let mut queue = DurableRetryQueue {
            scheduler: RetryScheduler::new(),
            messages: HashMap::new(),
            journal,
            map,
            inbox,
        };
        for (due, message) in restored {
            let ts = queue.map.due_timestamp(due);
            queue.insert(ts, message);
        }
        queue
    }

    fn insert(&mut self, due: Timestamp, message: Message) {
        self.scheduler.schedule(message.id.clone(), due);
        self.messages.insert(message.id.clone(), message);
    }

    fn take_inbox(&mut self, now: Instant) {
        if self.inbox.len() == 0 {
            return;
        }
        // Due now, rounded down: the same `pop_due` hands them out.
        let now = self.map.now_timestamp(now);
        for message in self.inbox.take() {
            self.insert(now, message);
        }
    }
}

impl RetryQueue for DurableRetryQueue {
    fn schedule(&mut self, due: Instant, message: Message) {
        let ts = self.map.due_timestamp(due);
        self.journal
            .write_behind(WriteOp::Schedule(ScheduledRetry::new(message.clone(), ts)));
        self.scheduler.schedule(message.id.clone(), ts);
        self.messages.insert(message.id.clone(), message);
    }

    fn pop_due(&mut self, now: Instant) -> Option<Message> {
        self.take_inbox(now);
        let now = self.map.now_timestamp(now);
        // Checked first: the scheduler's pop allocates, and this is asked once per delivery.
        if self.scheduler.next_due_time()? > now {
            return None;
        }
        let expired = self.scheduler.pop_due(now)?;
        self.messages.remove(&expired.id)
    }

    fn next_due(&self) -> Option<Instant> {
        if self.inbox.len() > 0 {
            return Some(self.map.instant(Timestamp::ZERO));
        }
        self.scheduler
            .next_due_time()
            .map(|ts| self.map.instant(ts))
    }

    fn len(&self) -> usize {
        self.scheduler.len() + self.inbox.len()
    }

    fn flush(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(self.journal.flush())
    }

    fn notifier(&self) -> Option<Arc<Notify>> {
        Some(self.inbox.notify.clone())
    }
}
