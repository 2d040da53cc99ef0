//! [`SharedRetryQueue`]: a spout task's retry queue on a shared store. A retry it schedules
//! is written to the store's due set (through the journal) and fired by whichever node claims
//! it when it is due; what this task fires are the retries the node's claimer claimed for it.
//!
//! A retry due within the *hold* (the journal's `hold`, 10 ms by default) is the exception: it
//! is fired here, from memory, and never written, as a held retry of a store of one's own is
//! never written if its message settles within the hold. That is as safe: until the message
//! has a fate, a crash leaves it to its source to deliver again (or, for a delivery that came
//! from a claim, to the claim's row in the store, still in flight under this node's lease,
//! which the claimer keeps renewing), and nothing is written that could be claimed twice.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Journal;
use super::claimer::Claimer;
use super::queue::Inbox;
use crate::delays::Delays;
use crate::fate::{BoxFuture, RetryQueue};
use crate::store::{ScheduledRetry, WriteOp};
use crate::time::{TimeMap, TimeSource};
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
    /// Retries due within the hold, fired from here (by due time, then scheduling order).
    held: Delays,
    /// Retries of ordered keys, fired from here whenever due and never written (see
    /// [`RetryQueue::schedule_local`]): the key's later messages wait on this node.
    local: Delays,
    hold: Duration,
    /// The topology's time (the claimer reads the same).
    time: Arc<dyn TimeSource>,
}

impl std::fmt::Debug for SharedRetryQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRetryQueue")
            .field("ready", &self.ready.len())
            .field("held", &self.held.len())
            .finish_non_exhaustive()
    }
}

impl SharedRetryQueue {
    pub(crate) fn new(
        journal: Journal,
        map: TimeMap,
        claimer: Claimer,
        inbox: Arc<Inbox>,
        hold: Duration,
        time: Arc<dyn TimeSource>,
    ) -> SharedRetryQueue {
        SharedRetryQueue {
            journal,
            map,
            claimer,
            inbox,
            ready: VecDeque::new(),
            held: Delays::new(map),
            local: Delays::new(map),
            hold,
            time,
        }
    }
}

impl RetryQueue for SharedRetryQueue {
    fn schedule(&mut self, due: Instant, message: Message) {
        if due.saturating_duration_since(self.time.now()) <= self.hold {
            // Fired from here, never written (see the module docs); a claim it came from
            // stays held, its lease renewed.
            self.held.schedule(due, message);
            return;
        }
        // The retry is written under the claim its delivery came from (if any): the store
        // refuses it if the claim is no longer this node's.
        let claim = self.claimer.held().take(&message.id);
        let ts = self.map.due_timestamp(due);
        let retry = ScheduledRetry {
            message,
            due: ts,
            claim,
        };
        self.journal
            .write_behind_retained(retry, self.inbox.clone());
        self.claimer.nudge(due.max(self.time.now()));
    }

    /// Kept in memory whatever its delay, and never written: until the message has a fate, a
    /// crash (or a stop) leaves it to its source (its partition's position stays below it),
    /// whose next owner hands it out again before the key's later messages.
    fn schedule_local(&mut self, due: Instant, message: Message) {
        self.local.schedule(due, message);
    }

    fn pop_due(&mut self, now: Instant) -> Option<Message> {
        for fired in [&mut self.held, &mut self.local] {
            if let Some(message) = fired.pop_due(now) {
                return Some(message);
            }
        }
        if self.ready.is_empty() && self.inbox.len() > 0 {
            self.ready.extend(self.inbox.take());
        }
        self.ready.pop_front()
    }

    fn next_due(&self) -> Option<Instant> {
        if self.ready.is_empty() && self.inbox.len() == 0 {
            match (self.held.next_due(), self.local.next_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            Some(self.map.instant(crate::time::Timestamp::ZERO))
        }
    }

    fn len(&self) -> usize {
        self.ready.len() + self.inbox.len() + self.held.len() + self.local.len()
    }

    /// The task stops: retries still held in memory are written (as a store of one's own
    /// writes its held retries at a flush), then everything is committed. Retries of ordered
    /// keys are not: they are left to their source, as at a crash.
    fn flush(&mut self) -> BoxFuture<'_, ()> {
        for (due, message) in self.held.drain() {
            let claim = self.claimer.held().take(&message.id);
            self.journal.write_behind(WriteOp::Schedule(ScheduledRetry {
                message,
                due,
                claim,
            }));
        }
        Box::pin(self.journal.flush())
    }

    fn notifier(&self) -> Option<Arc<Notify>> {
        Some(self.inbox.notifier())
    }
}
