//! [`Delays`]: messages waiting for their due time. The one delay queue of the runtime is
//! [`RetryScheduler`] (ids by due millisecond, with cancel and reschedule); `Delays` keeps the
//! messages beside it, by id, and converts the runtime's instants through a [`TimeMap`]. Every
//! retry queue holds its waiting messages here: the durable queue's, the shared queue's held
//! and ordered-key retries, and the in-memory queue's.

use hashbrown::HashMap;

use tokio::time::Instant;

use crate::scheduler::RetryScheduler;
use crate::time::{TimeMap, Timestamp};
use crate::topology::{Message, MessageId};

/// Messages by due time (earliest first, equal due times in the order they were scheduled),
/// each at most once: a message scheduled again under its id moves to its new due time.
#[derive(Debug)]
pub(crate) struct Delays {
    scheduler: RetryScheduler<MessageId>,
    messages: HashMap<MessageId, Message>,
    map: TimeMap,
}

impl Delays {
    /// Empty, reading instants through `map`.
    pub(crate) fn new(map: TimeMap) -> Delays {
        Delays {
            scheduler: RetryScheduler::new(),
            messages: HashMap::new(),
            map,
        }
    }

    /// How this queue maps instants to timestamps.
    pub(crate) fn map(&self) -> TimeMap {
        self.map
    }

    /// Schedules `message` at `due` (rounded up to the millisecond: never earlier).
    pub(crate) fn schedule(&mut self, due: Instant, message: Message) {
        self.schedule_at(self.map.due_timestamp(due), message);
    }

    /// Schedules `message` at the timestamp `due`.
    pub(crate) fn schedule_at(&mut self, due: Timestamp, message: Message) {
        self.scheduler.schedule(message.id.clone(), due);
        self.messages.insert(message.id.clone(), message);
    }

    /// The first message due at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Message> {
        self.pop_due_at(self.map.now_timestamp(now))
    }

    /// The first message due at or before the timestamp `now`.
    pub(crate) fn pop_due_at(&mut self, now: Timestamp) -> Option<Message> {
        // Checked first: the scheduler's pop allocates, and this is asked once per delivery.
        if self.scheduler.next_due_time()? > now {
            return None;
        }
        let expired = self.scheduler.pop_due(now)?;
        self.messages.remove(&expired.id)
    }

    /// When the first message is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.scheduler
            .next_due_time()
            .map(|ts| self.map.instant(ts))
    }

    /// Moves a waiting message to `due`; the message, if it was waiting.
    pub(crate) fn reschedule(&mut self, id: &MessageId, due: Timestamp) -> Option<&Message> {
        if !self.scheduler.reschedule(id, due) {
            return None;
        }
        self.messages.get(id)
    }

    /// Removes a waiting message; it never fires.
    pub(crate) fn cancel(&mut self, id: &MessageId) -> Option<Message> {
        self.scheduler.cancel(id)?;
        self.messages.remove(id)
    }

    /// Every waiting message with its due time, in due order; the queue is left empty.
    pub(crate) fn drain(&mut self) -> Vec<(Timestamp, Message)> {
        self.scheduler
            .drain_due(Timestamp::MAX, usize::MAX)
            .into_iter()
            .filter_map(|e| Some((e.due, self.messages.remove(&e.id)?)))
            .collect()
    }

    /// How many messages wait.
    pub(crate) fn len(&self) -> usize {
        self.scheduler.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{ManualTime, TimeSource};
    use std::time::Duration;

    fn delays() -> (Delays, Instant) {
        let time = ManualTime::new(Timestamp::from_millis(1_000_000));
        let map = TimeMap::new(&time);
        (Delays::new(map), TimeSource::now(&time))
    }

    #[test]
    fn earliest_first_equal_times_in_order_and_never_early() {
        let (mut d, t0) = delays();
        let at = |ms| t0 + Duration::from_millis(ms);
        d.schedule(at(20), Message::new("late", "B", ""));
        d.schedule(at(10), Message::new("a", "B", ""));
        d.schedule(at(10), Message::new("b", "B", ""));
        // Due at 10.4 ms: rounded up, it waits for 11.
        d.schedule(
            at(10) + Duration::from_micros(400),
            Message::new("c", "B", ""),
        );
        assert_eq!(d.len(), 4);
        assert!(d.pop_due(at(9)).is_none());
        let ids: Vec<_> = std::iter::from_fn(|| d.pop_due(at(10)))
            .map(|m| m.id.to_string())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(d.next_due(), Some(at(11)));
        assert_eq!(d.pop_due(at(11)).unwrap().id.as_str(), "c");
        assert_eq!(d.drain().len(), 1);
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn scheduled_again_moves_and_cancelled_never_fires() {
        let (mut d, t0) = delays();
        let at = |ms| t0 + Duration::from_millis(ms);
        d.schedule(at(5), Message::new("m", "B", "one"));
        d.schedule(at(50), Message::new("m", "B", "two"));
        d.schedule(at(7), Message::new("n", "B", ""));
        assert_eq!(d.len(), 2);
        assert_eq!(d.pop_due(at(10)).unwrap().id.as_str(), "n");
        assert!(d.pop_due(at(10)).is_none());
        assert!(d.cancel(&MessageId::from("m")).is_some());
        assert!(d.pop_due(at(100)).is_none());
    }
}
