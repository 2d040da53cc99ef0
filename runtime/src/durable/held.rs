//! [`Held`]: the queued retries the journal holds back before writing them.
//!
//! A retry row lives from its `Schedule` until the message's fate (or its next `Schedule`)
//! replaces it. Short retries are often settled within milliseconds, so the journal holds each
//! queued `Schedule` for a moment: if a later write of the same message arrives meanwhile, the
//! held one is moot and never touches the disk. A held write is no less safe than one still
//! in the journal's queue: until the message has a fate its source delivers it again after a
//! crash.
//!
//! It also keeps the journal's one record of which messages have a retry row in the store (a
//! held retry released, a retry written for a waiting caller, a replay, a row recovered at
//! start), until a later write drops the row: an acked fate with no row to drop may then be
//! moot (see the journal's module docs).
//!
//! A held retry may name who hears of its commit (custody: the spout task's inbox); a held
//! retry replaced by the message's next one hands that on if the next one names nobody.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Instant;

use std::sync::Arc;

use hashbrown::{HashMap, HashSet};

use super::queue::Inbox;
use crate::store::{MessageId, ScheduledRetry};

/// Who hears that a retry was committed: the spout task whose message it is (its inbox).
pub(super) type CustodyTo = Arc<Inbox>;

/// A retry leaving the hold, to be written, with who hears of its commit.
#[derive(Debug)]
pub(super) struct Released {
    pub(super) retry: ScheduledRetry,
    pub(super) custody: Option<CustodyTo>,
}

/// Queued retries in arrival order, with the live one per message.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// Arrival order; an entry whose sequence number is no longer live is skipped.
    queue: VecDeque<(u64, Instant, ScheduledRetry)>,
    /// The live entry per message, and who hears of its commit.
    live: HashMap<MessageId, (u64, Option<CustodyTo>)>,
    next: u64,
    /// Messages whose retry row the store holds (no later write has dropped it).
    rows: HashSet<MessageId>,
}

/// What a write that drops a message's retry row found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settled {
    /// A held retry of the message was dropped: it is moot.
    pub(super) moot: bool,
    /// The store held a retry row of the message (so the write must drop it).
    pub(super) had_row: bool,
}

impl Held {
    /// Holds `retry`, received at `at`. Returns true if it replaced a held one (now moot).
    #[cfg(test)]
    pub(super) fn hold(&mut self, retry: ScheduledRetry, at: Instant) -> bool {
        self.hold_for(retry, at, None)
    }

    /// Holds `retry`, received at `at`, for `custody` to hear of its commit (or, when the
    /// retry that replaces it names nobody, of that one's). Returns true if it replaced a
    /// held one (now moot).
    pub(super) fn hold_for(
        &mut self,
        retry: ScheduledRetry,
        at: Instant,
        custody: Option<CustodyTo>,
    ) -> bool {
        let seq = self.next;
        self.next += 1;
        let replaced = self.live.remove(&retry.message.id);
        let was_held = replaced.is_some();
        let custody = custody.or(replaced.and_then(|(_, c)| c));
        self.live.insert(retry.message.id.clone(), (seq, custody));
        self.queue.push_back((seq, at, retry));
        was_held
    }

    /// A later write of `id` that replaces or drops its retry row arrived: drops its held
    /// retry, if any, and forgets its row.
    pub(super) fn settle(&mut self, id: &MessageId) -> Settled {
        Settled {
            moot: self.live.remove(id).is_some(),
            had_row: self.rows.remove(id),
        }
    }

    /// The store has (or is about to have) a retry row for `id`: a retry released from the
    /// hold or written for a caller, a replay, or a row recovered at start.
    pub(super) fn has_row(&mut self, id: &MessageId) {
        if !self.rows.contains(id) {
            self.rows.insert(id.clone());
        }
    }

    /// Held retries.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.live.len()
    }

    /// True if nothing is held.
    pub(super) fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// When the oldest held retry arrived.
    pub(super) fn oldest(&mut self) -> Option<Instant> {
        self.skip_dead();
        self.queue.front().map(|(_, at, _)| *at)
    }

    /// Takes the retries held at least `hold` by `now`, oldest first.
    pub(super) fn due(&mut self, now: Instant, hold: Duration) -> Vec<Released> {
        let mut out = Vec::new();
        while let Some(at) = self.oldest()
            && now.saturating_duration_since(at) >= hold
        {
            out.extend(self.pop_live());
        }
        out
    }

    /// Takes every held retry, oldest first.
    pub(super) fn all(&mut self) -> Vec<Released> {
        let mut out = Vec::with_capacity(self.live.len());
        while self.oldest().is_some() {
            out.extend(self.pop_live());
        }
        out
    }

    fn pop_live(&mut self) -> Option<Released> {
        let (seq, _, retry) = self.queue.pop_front()?;
        if self.live.get(&retry.message.id).map(|l| l.0) != Some(seq) {
            return None;
        }
        let (_, custody) = self.live.remove(&retry.message.id)?;
        self.has_row(&retry.message.id);
        Some(Released { retry, custody })
    }

    /// Drops replaced and settled entries from the front.
    fn skip_dead(&mut self) {
        while let Some((seq, _, retry)) = self.queue.front()
            && self.live.get(&retry.message.id).map(|l| l.0) != Some(*seq)
        {
            self.queue.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;
    use crate::topology::Message;

    fn retry(id: &str, attempt: u32) -> ScheduledRetry {
        let mut message = Message::new(id, "ORDER", "");
        message.retry.attempt = attempt;
        ScheduledRetry::new(message, Timestamp::from_millis(u64::from(attempt)))
    }

    fn ids(released: &[Released]) -> Vec<(String, u32)> {
        released
            .iter()
            .map(|r| {
                (
                    r.retry.message.id.to_string(),
                    r.retry.message.retry.attempt,
                )
            })
            .collect()
    }

    fn id(s: &str) -> MessageId {
        MessageId::from(s)
    }

    #[test]
    fn only_the_live_retries_come_out_oldest_first_once_due() {
        let t0 = crate::time::now();
        let ms = Duration::from_millis;
        let mut held = Held::default();
        assert!(!held.hold(retry("a", 1), t0));
        assert!(!held.hold(retry("b", 1), t0 + ms(1)));
        assert!(held.hold(retry("a", 2), t0 + ms(2))); // replaces a#1
        assert!(!held.hold(retry("c", 1), t0 + ms(3)));
        assert!(held.settle(&id("c")).moot);
        assert!(!held.settle(&id("c")).moot);
        assert_eq!(held.len(), 2);
        assert_eq!(held.oldest(), Some(t0 + ms(1))); // a#1 is dead
        assert_eq!(ids(&held.due(t0 + ms(11), ms(10))), [("b".into(), 1)]);
        assert_eq!(ids(&held.due(t0 + ms(11), ms(10))), []);
        assert_eq!(ids(&held.all()), [("a".into(), 2)]);
        assert!(held.is_empty());
        assert_eq!(held.oldest(), None);
    }

    #[test]
    fn it_remembers_the_rows_it_released_until_one_is_dropped() {
        let t0 = crate::time::now();
        let mut held = Held::default();
        held.hold(retry("a", 1), t0);
        held.hold(retry("b", 1), t0);
        let (a, b) = (id("a"), id("b"));
        let settled_b = held.settle(&b);
        assert_eq!((settled_b.moot, settled_b.had_row), (true, false));
        assert_eq!(ids(&held.all()), [("a".into(), 1)]);
        // a's next retry is held again: its released row is still in the store.
        held.hold(retry("a", 2), t0);
        let settled_a = held.settle(&a);
        assert_eq!((settled_a.moot, settled_a.had_row), (true, true));
        let again = held.settle(&a);
        assert_eq!((again.moot, again.had_row), (false, false));
    }

    #[test]
    fn a_replaced_retry_hands_its_custody_to_the_next_unless_that_names_its_own() {
        let t0 = crate::time::now();
        let (mine, theirs) = (CustodyTo::default(), CustodyTo::default());
        let mut held = Held::default();
        held.hold_for(retry("a", 1), t0, Some(mine.clone()));
        held.hold_for(retry("a", 2), t0, None);
        held.hold_for(retry("b", 1), t0, Some(mine.clone()));
        held.hold_for(retry("b", 2), t0, Some(theirs.clone()));
        let out = held.all();
        assert_eq!(ids(&out), [("a".into(), 2), ("b".into(), 2)]);
        assert!(Arc::ptr_eq(out[0].custody.as_ref().unwrap(), &mine));
        assert!(Arc::ptr_eq(out[1].custody.as_ref().unwrap(), &theirs));
        // A fate settles it: nobody hears of a commit that never comes.
        held.hold_for(retry("c", 1), t0, Some(mine));
        assert!(held.settle(&id("c")).moot);
        assert!(held.all().is_empty());
    }
}
