//! [`SharedRetryQueue`]: a spout task's retry queue on a shared store. A retry it schedules
//! is written to the store's due set (through the journal) and fired by whichever node claims
//! it when it is due; what this task fires are the retries the node's claimer claimed for it.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Journal;
use super::claimer::Claimer;
use super::queue::Inbox;
use crate::fate::{BoxFuture, RetryQueue};
use crate::store::{ScheduledRetry, WriteOp};
use crate::time::TimeMap;
use crate::topology::Message;

/// A [`RetryQueue`] over a shared store's claims: a retry it schedules is written to the
/// store's due set and fired by whichever node claims it; it pops what this node's claimer
/// claimed for its task.
pub struct SharedRetryQueue {
    journal: Journal,
    map: TimeMap,
    claimer: Claimer,
    inbox: Arc<Inbox>,
    ready: VecDeque<Message>,
}

impl std::fmt::Debug for SharedRetryQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRetryQueue")
            .field("ready", &self.ready.len())
            .finish_non_exhaustive()
    }
}

impl SharedRetryQueue {
    pub(crate) fn new(
        journal: Journal,
        map: TimeMap,
        claimer: Claimer,
        inbox: Arc<Inbox>,
    ) -> SharedRetryQueue {
        SharedRetryQueue {
            journal,
            map,
            claimer,
            inbox,
            ready: VecDeque::new(),
        }
    }
}

impl RetryQueue for SharedRetryQueue {
    fn schedule(&mut self, due: Instant, message: Message) {
        // The retry is written under the claim its delivery came from (if any): the store
        // refuses it if the claim is no longer this node's.
        let claim = self.claimer.held().take(&message.id);
        let ts = self.map.due_timestamp(due);
        self.journal.write_behind(WriteOp::Schedule(ScheduledRetry {
            message,
            due: ts,
            claim,
        }));
        let wait = due.saturating_duration_since(Instant::now());
        self.claimer.nudge(std::time::Instant::now() + wait);
    }

    fn pop_due(&mut self, _now: Instant) -> Option<Message> {
        if self.ready.is_empty() && self.inbox.len() > 0 {
            self.ready.extend(self.inbox.take());
        }
        self.ready.pop_front()
    }

    fn next_due(&self) -> Option<Instant> {
        if self.ready.is_empty() && self.inbox.len() == 0 {
            None
        } else {
            Some(self.map.instant(crate::time::Timestamp::ZERO))
        }
    }

    fn len(&self) -> usize {
        self.ready.len() + self.inbox.len()
    }

    fn flush(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(self.journal.flush())
    }

    fn notifier(&self) -> Option<Arc<Notify>> {
        Some(self.inbox.notifier())
    }
}
