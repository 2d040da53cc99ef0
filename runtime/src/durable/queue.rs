//! [`DurableRetryQueue`]: a spout task's retry queue, kept in a [`RetryScheduler`] in memory and
//! written behind to the store through the [`Journal`].

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Journal;
use crate::delays::Delays;
use crate::fate::{BoxFuture, CustodyNotices, KeyNotice, KeyNotices, NoticeKind, RetryQueue};
use crate::store::{ScheduledRetry, WriteOp};
use crate::time::{TimeMap, Timestamp};
use crate::topology::{Message, MessageId};

/// Messages put into a queue from outside its spout task (operators' replays), operators'
/// commands on the retries it holds, what the task's ordered keys must hear (an operator's
/// skip), and which of its messages the journal committed a first retry of (custody); the
/// task is woken through the [`Notify`], moves the messages into its scheduler, due
/// at once, carries out the commands and takes the notices.
#[derive(Debug, Default)]
pub struct Inbox {
    messages: Mutex<Vec<Message>>,
    commands: Mutex<Vec<(MessageId, Command, Reply)>>,
    len: AtomicUsize,
    notices: Mutex<Vec<KeyNotice>>,
    notices_len: AtomicUsize,
    retained: Mutex<Vec<MessageId>>,
    retained_len: AtomicUsize,
    notify: Arc<Notify>,
}

/// An operator's command on one scheduled retry, carried out by the spout task that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Make it due now (its attempt kept); answered with the message.
    Now,
    /// Take it out of the queue (to be dead-lettered); answered with the message.
    Take,
}

/// Where a command's answer goes: the message, or `None` if this queue does not hold it.
pub(crate) type Reply = std::sync::mpsc::SyncSender<Option<Message>>;

impl Inbox {
    /// Adds a message, to be delivered as soon as the spout task can, and wakes the task.
    pub fn push(&self, message: Message) {
        let mut messages = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        messages.push(message);
        // Counted under the lock, as `take` uncounts: the count never falls below what is
        // there (a take between the push and its count would wrap it below zero).
        self.len.fetch_add(1, Relaxed);
        drop(messages);
        self.notify.notify_one();
    }

    /// Asks the spout task to carry out `command` on `id`'s retry, and wakes it.
    pub(crate) fn command(&self, id: MessageId, command: Command, reply: Reply) {
        let mut commands = self.commands.lock().unwrap_or_else(PoisonError::into_inner);
        commands.push((id, command, reply));
        self.len.fetch_add(1, Relaxed);
        drop(commands);
        self.notify.notify_one();
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    /// Tells the spout task's ordered keys of `notice`, and wakes the task.
    pub(crate) fn notice(&self, notice: KeyNotice) {
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        notices.push(notice);
        self.notices_len.fetch_add(1, Relaxed);
        drop(notices);
        self.notify.notify_one();
    }

    /// Adds a notice from the spout task itself (its queue's): the task takes it on its next
    /// pass, so nothing is woken.
    fn note(&self, notice: KeyNotice) {
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        notices.push(notice);
        self.notices_len.fetch_add(1, Relaxed);
    }

    /// The journal committed the first retry of each of `ids` (the store has custody of
    /// them): the spout task tells its spout, woken for it.
    pub(crate) fn retained(&self, ids: impl IntoIterator<Item = MessageId>) {
        let mut retained = self.retained.lock().unwrap_or_else(PoisonError::into_inner);
        let before = retained.len();
        retained.extend(ids);
        self.retained_len
            .fetch_add(retained.len() - before, Relaxed);
        drop(retained);
        self.notify.notify_one();
    }

    pub(crate) fn notifier(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    pub(crate) fn take(&self) -> Vec<Message> {
        let mut messages = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        let taken = std::mem::take(&mut *messages);
        self.len.fetch_sub(taken.len(), Relaxed);
        taken
    }

    pub(crate) fn take_commands(&self) -> Vec<(MessageId, Command, Reply)> {
        let mut commands = self.commands.lock().unwrap_or_else(PoisonError::into_inner);
        let taken = std::mem::take(&mut *commands);
        self.len.fetch_sub(taken.len(), Relaxed);
        taken
    }
}

/// The task's custody notices: the messages whose first retry the journal committed.
impl CustodyNotices for Inbox {
    /// Moves the retained ids into `into` (no lock when there are none).
    fn take(&self, into: &mut Vec<MessageId>) {
        if self.retained_len.load(Relaxed) == 0 {
            return;
        }
        let mut retained = self.retained.lock().unwrap_or_else(PoisonError::into_inner);
        self.retained_len.fetch_sub(retained.len(), Relaxed);
        into.append(&mut retained);
    }
}

/// The task's key notices: the queue's own (recovered retries and letters, operators' kills)
/// and the operators' skips, in the order they came.
impl KeyNotices for Inbox {
    /// Moves the notices into `into` (no lock when there are none).
    fn take(&self, into: &mut Vec<KeyNotice>) {
        if self.notices_len.load(Relaxed) == 0 {
            return;
        }
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        self.notices_len.fetch_sub(notices.len(), Relaxed);
        into.append(&mut notices);
    }
}

/// A durable [`RetryQueue`]. The due order lives in memory (the runtime's delay queue, keyed by
/// the wall-clock due time, and the messages by id); every `schedule` is also queued to the
/// journal as a [`WriteOp::Schedule`], so nothing here waits on the disk. `flush` waits for the
/// journal.
///
/// The store keeps a retry's row until the message's fate is recorded, so a crash at any point
/// leaves it scheduled; after a restart, [`Durable::recover`](super::Durable::recover) hands the
/// rows back to the new queues with their due times and metadata.
pub struct DurableRetryQueue {
    delays: Delays,
    journal: Journal,
    /// Also where the queue tells the task's ordered keys of the recovered retries and letters
    /// with a key, and of the retries an operator killed.
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
    /// A queue holding `restored` (retries recovered from the store, already persisted, with
    /// the due times to fire them at), which writes new retries to `journal`. `letters`: the
    /// open dead letters with a key found at the start, for the task's ordered keys.
    pub(crate) fn new(
        journal: Journal,
        map: TimeMap,
        inbox: Arc<Inbox>,
        restored: Vec<(Timestamp, Message)>,
        letters: Vec<KeyNotice>,
    ) -> DurableRetryQueue {
        let mut queue = DurableRetryQueue {
            delays: Delays::new(map),
            journal,
            inbox,
        };
        for letter in letters {
            queue.inbox.note(letter);
        }
        for (due, message) in restored {
            if let Some(notice) = KeyNotice::of(NoticeKind::Waiting, &message) {
                queue.inbox.note(notice);
            }
            queue.delays.schedule_at(due, message);
        }
        queue
    }

    fn take_inbox(&mut self, now: Instant) {
        if self.inbox.len() == 0 {
            return;
        }
        // Due now, rounded down: the same `pop_due` hands them out.
        let now = self.delays.map().now_timestamp(now);
        for message in self.inbox.take() {
            self.delays.schedule_at(now, message);
        }
        for (id, command, reply) in self.inbox.take_commands() {
            let answer = match command {
                Command::Now => {
                    self.delays.reschedule(&id, now).cloned().inspect(|m| {
                        // The store's row is due now too, so a crash does not undo it.
                        self.journal
                            .write_behind(WriteOp::Schedule(ScheduledRetry::new(m.clone(), now)));
                    })
                }
                Command::Take => {
                    self.delays.cancel(&id).inspect(|m| {
                        // A dead letter for its key's line.
                        if let Some(notice) = KeyNotice::of(NoticeKind::DeadLettered, m) {
                            self.inbox.note(notice);
                        }
                    })
                }
            };
            // The asker may have given up waiting; the answer is then moot.
            let _ = reply.try_send(answer);
        }
    }
}

impl RetryQueue for DurableRetryQueue {
    fn schedule(&mut self, due: Instant, message: Message) {
        let ts = self.delays.map().due_timestamp(due);
        let retry = ScheduledRetry::new(message.clone(), ts);
        // Its commit gives the store custody of the message (the spout task tells its spout
        // once, for the first retry).
        self.journal
            .write_behind_retained(retry, self.inbox.clone());
        self.delays.schedule_at(ts, message);
    }

    fn pop_due(&mut self, now: Instant) -> Option<Message> {
        self.take_inbox(now);
        self.delays.pop_due(now)
    }

    fn next_due(&self) -> Option<Instant> {
        if self.inbox.len() > 0 {
            return Some(self.delays.map().instant(Timestamp::ZERO));
        }
        self.delays.next_due()
    }

    fn len(&self) -> usize {
        self.delays.len() + self.inbox.len()
    }

    fn flush(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(self.journal.flush())
    }

    fn notifier(&self) -> Option<Arc<Notify>> {
        Some(self.inbox.notify.clone())
    }
}
