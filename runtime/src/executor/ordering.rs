//! Ordered keys in one spout task (`docs/spec/runtime.md`, "Ordered keys").
//!
//! [`KeyLines`] keeps a *line* per key that has a message out: in flight, waiting for its
//! retry, or (under `on_dead_letter: block`) dead-lettered and waiting for an operator. The
//! line names that message, its *holder*, and keeps the key's later messages in the order they
//! came. A message of a key with a line is held; a key without one gets a line and its message
//! goes. When the holder has its fate (acked, or its dead letter stored under `continue`, or an
//! operator skipped its letter under `block`), the next held message becomes the holder and is
//! handed back to the task ([`KeyLines::pop_ready`]), ahead of any new message; the last one
//! takes the line away. A held retry or replay (not the holder) waits in the line like any
//! later message; the holder's own retry, or the replay of its letter, goes at once.
//!
//! The task owns the lines like its pending table: nothing else touches them, so no lock. A
//! key whose messages never overlap costs one map insert and one remove per message, and no
//! allocation of its own (a line's queue allocates on its first held message).

use std::collections::VecDeque;

use hashbrown::HashMap;
use hashbrown::hash_map::Entry;
use tokio::time::Instant;

use crate::fate::{KeyNotice, NoticeKind};
use crate::stats::{Histogram, Stats};
use crate::topology::{Key, Message, MessageId, OnDeadLetter, Ordered, OrderingConfig};

/// `m` to deliver now, or `None` if its key holds it back (always `m` when nothing is ordered).
pub(crate) fn admit(
    lines: &mut Option<Box<KeyLines>>,
    m: Message,
    now: Instant,
) -> Option<Message> {
    match lines {
        None => Some(m),
        Some(lines) => lines.admit(m, now),
    }
}

/// How a line's holder ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Its tree completed.
    Acked,
    /// Its dead letter is stored.
    DeadLettered,
}

struct Line {
    holder: MessageId,
    /// The holder is dead-lettered and the key blocked until an operator replays or skips it.
    letter: bool,
    held: VecDeque<(Message, Instant)>,
}

impl Line {
    fn new(holder: MessageId) -> Line {
        Line {
            holder,
            letter: false,
            held: VecDeque::new(),
        }
    }

    /// True while the key holds something back, or waits for an operator.
    fn blocks(&self) -> bool {
        self.letter || !self.held.is_empty()
    }
}

/// The ordered keys of one spout task. See the [module docs](self).
pub(crate) struct KeyLines {
    ordered: Ordered,
    block: bool,
    max_held: usize,
    lines: HashMap<Key, Line>,
    /// Messages in the lines' queues.
    held: usize,
    /// Lines that [`Line::blocks`].
    blocked: usize,
    /// Messages let go, to deliver next, in the order they were let go.
    ready: VecDeque<Message>,
    /// How long each let-go message was held.
    waits: Histogram,
}

impl KeyLines {
    /// The lines for `config`, or `None` when nothing is ordered.
    pub(crate) fn new(config: &OrderingConfig) -> Option<Box<KeyLines>> {
        if config.ordered.is_none() {
            return None;
        }
        Some(Box::new(KeyLines {
            ordered: config.ordered.clone(),
            block: config.on_dead_letter == OnDeadLetter::Block,
            max_held: config.max_held.max(1),
            lines: HashMap::new(),
            held: 0,
            blocked: 0,
            ready: VecDeque::new(),
            waits: Histogram::default(),
        }))
    }

    /// The message's key, if its order is kept.
    pub(crate) fn key_of<'m>(&self, m: &'m Message) -> Option<&'m Key> {
        m.key.as_ref().filter(|_| self.ordered.covers(&m.biz))
    }

    /// A message about to be delivered (new from the spout, or out of the retry queue): given
    /// back to deliver now, or held (`None`).
    pub(crate) fn admit(&mut self, m: Message, now: Instant) -> Option<Message> {
        let Some(key) = self.key_of(&m) else {
            return Some(m);
        };
        let line = match self.lines.entry(key.clone()) {
            Entry::Vacant(v) => {
                v.insert(Line::new(m.id.clone()));
                return Some(m);
            }
            Entry::Occupied(o) => o.into_mut(),
        };
        let before = line.blocks();
        let admitted = if line.holder == m.id {
            // Its own retry, or the replay of its letter: it holds the line again.
            line.letter = false;
            Some(m)
        } else {
            line.held.push_back((m, now));
            self.held += 1;
            None
        };
        let after = line.blocks();
        self.count_blocked(before, after);
        admitted
    }

    /// `m` ended. If it holds its key's line, the next held message goes (or, for a dead
    /// letter under `block`, the key waits for an operator).
    pub(crate) fn ended(&mut self, m: &Message, how: Ended, now: Instant) {
        if let Some(key) = self.key_of(m) {
            self.end(key, &m.id, how, now);
        }
    }

    /// The message `id` with `key` ended (its biz need not be known: only a holder ends a line).
    pub(crate) fn ended_key(&mut self, key: &Key, id: &MessageId, how: Ended, now: Instant) {
        self.end(key, id, how, now);
    }

    fn end(&mut self, key: &Key, id: &MessageId, how: Ended, now: Instant) {
        let Some(line) = self.lines.get_mut(key) else {
            return;
        };
        if line.holder != *id {
            return; // not the holder: nothing of the line hangs on it
        }
        if how == Ended::DeadLettered && self.block {
            let before = line.blocks();
            line.letter = true;
            self.count_blocked(before, true);
            return;
        }
        self.let_go(key, now);
    }

    /// The holder of `key`'s line is done with: the next held message holds it and is let go,
    /// or the line goes.
    fn let_go(&mut self, key: &Key, now: Instant) {
        let Some(line) = self.lines.get_mut(key) else {
            return;
        };
        let before = line.blocks();
        line.letter = false;
        match line.held.pop_front() {
            Some((next, since)) => {
                self.held -= 1;
                self.waits.observe(now.saturating_duration_since(since));
                line.holder = next.id.clone();
                self.ready.push_back(next);
                let after = line.blocks();
                self.count_blocked(before, after);
            }
            None => {
                self.lines.remove(key);
                self.count_blocked(before, false);
            }
        }
    }

    /// What the queue told of a message handled outside the task.
    pub(crate) fn notice(&mut self, n: KeyNotice, now: Instant) {
        if !self.ordered.covers(&n.biz) {
            return;
        }
        match n.kind {
            NoticeKind::Waiting => {
                // A recovered retry: the key's redelivered messages wait for it. A second one
                // of the same key waits in the line when it comes due.
                self.lines.entry(n.key).or_insert_with(|| Line::new(n.id));
            }
            NoticeKind::DeadLettered => {
                if self.lines.contains_key(&n.key) {
                    self.end(&n.key, &n.id, Ended::DeadLettered, now);
                } else if self.block {
                    // An open letter found at the start: the key stays blocked.
                    let mut line = Line::new(n.id);
                    line.letter = true;
                    self.lines.insert(n.key, line);
                    self.count_blocked(false, true);
                }
            }
            NoticeKind::Skipped => {
                if self
                    .lines
                    .get(&n.key)
                    .is_some_and(|l| l.letter && l.holder == n.id)
                {
                    self.let_go(&n.key, now);
                }
            }
        }
    }

    /// The next message let go, to deliver before any new one.
    pub(crate) fn pop_ready(&mut self) -> Option<Message> {
        self.ready.pop_front()
    }

    /// True when no new message may be taken: `max_held` messages are held.
    pub(crate) fn full(&self) -> bool {
        self.held >= self.max_held
    }

    /// Messages held or let go and not yet delivered: work the task still has.
    pub(crate) fn waiting(&self) -> usize {
        self.held + self.ready.len()
    }

    /// Tells `stats` what changed since `published` (held messages, blocked keys; updated)
    /// and the waits of the messages let go; returns [`KeyLines::waiting`].
    pub(crate) fn publish(&mut self, stats: &Stats, published: &mut (usize, usize)) -> usize {
        let now = (self.held, self.blocked);
        if now != *published {
            stats.add_ordered(
                now.0 as i64 - published.0 as i64,
                now.1 as i64 - published.1 as i64,
            );
            *published = now;
        }
        stats.merge_ordered_wait(&mut self.waits);
        self.waiting()
    }

    fn count_blocked(&mut self, before: bool, after: bool) {
        match (before, after) {
            (false, true) => self.blocked += 1,
            (true, false) => self.blocked -= 1,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn lines(block: bool) -> Box<KeyLines> {
        KeyLines::new(&OrderingConfig {
            ordered: Ordered::Biz(vec![Arc::from("ORDER")]),
            on_dead_letter: if block {
                OnDeadLetter::Block
            } else {
                OnDeadLetter::Continue
            },
            max_held: 2,
        })
        .expect("ordering is on")
    }

    fn msg(id: &str, key: &str) -> Message {
        Message::new(id, "ORDER", "").with_key(key)
    }

    fn ids(l: &mut KeyLines) -> Vec<String> {
        std::iter::from_fn(|| l.pop_ready())
            .map(|m| m.id.to_string())
            .collect()
    }

    #[test]
    fn later_messages_of_a_key_wait_for_the_first_fate_in_source_order() {
        let mut l = lines(false);
        let now = Instant::now();
        assert!(l.admit(msg("a1", "A"), now).is_some());
        assert!(l.admit(msg("b1", "B"), now).is_some());
        assert!(l.admit(msg("a2", "A"), now).is_none());
        assert!(l.admit(msg("a3", "A"), now).is_none());
        assert!(l.full());
        assert_eq!((l.held, l.blocked), (2, 1));
        // a1's retry goes at once: it holds the line.
        assert!(l.admit(msg("a1", "A"), now).is_some());
        l.ended(&msg("a1", "A"), Ended::Acked, now);
        assert_eq!(ids(&mut l), ["a2"]);
        l.ended(&msg("a2", "A"), Ended::DeadLettered, now);
        assert_eq!(ids(&mut l), ["a3"]);
        assert_eq!((l.held, l.blocked), (0, 0));
        l.ended(&msg("a3", "A"), Ended::Acked, now);
        l.ended(&msg("b1", "B"), Ended::Acked, now);
        assert!(l.lines.is_empty());
    }

    #[test]
    fn messages_without_a_key_or_of_another_biz_never_wait() {
        let mut l = lines(false);
        let now = Instant::now();
        assert!(l.admit(msg("a1", "A"), now).is_some());
        assert!(l.admit(Message::new("x", "ORDER", ""), now).is_some());
        assert!(
            l.admit(Message::new("p", "PAYMENT", "").with_key("A"), now)
                .is_some()
        );
        assert_eq!(l.held, 0);
        assert!(KeyLines::new(&OrderingConfig::default()).is_none());
    }

    #[test]
    fn under_block_a_dead_letter_holds_its_key_until_a_skip_or_a_replay() {
        let mut l = lines(true);
        let now = Instant::now();
        assert!(l.admit(msg("a1", "A"), now).is_some());
        assert!(l.admit(msg("a2", "A"), now).is_none());
        l.ended(&msg("a1", "A"), Ended::DeadLettered, now);
        assert!(ids(&mut l).is_empty());
        assert_eq!(l.blocked, 1);
        // A skip of another letter changes nothing; the key's own lets a2 go.
        let skip = |id: &str| KeyNotice::of(NoticeKind::Skipped, &msg(id, "A")).unwrap();
        l.notice(skip("zz"), now);
        assert!(ids(&mut l).is_empty());
        l.notice(skip("a1"), now);
        assert_eq!(ids(&mut l), ["a2"]);
        // a2 dead-lettered too; its replay goes first, a3 after its fate.
        l.ended(&msg("a2", "A"), Ended::DeadLettered, now);
        assert!(l.admit(msg("a3", "A"), now).is_none());
        assert!(l.admit(msg("a2", "A"), now).is_some());
        assert_eq!(l.blocked, 1);
        l.ended(&msg("a2", "A"), Ended::Acked, now);
        assert_eq!(ids(&mut l), ["a3"]);
        assert_eq!(l.blocked, 0);
    }

    #[test]
    fn recovered_retries_and_letters_hold_their_keys() {
        let mut l = lines(true);
        let now = Instant::now();
        let notice = |kind, id, key| KeyNotice::of(kind, &msg(id, key)).unwrap();
        l.notice(notice(NoticeKind::Waiting, "a1", "A"), now);
        l.notice(notice(NoticeKind::DeadLettered, "b1", "B"), now);
        assert!(l.admit(msg("a2", "A"), now).is_none());
        assert!(l.admit(msg("b2", "B"), now).is_none());
        assert!(l.admit(msg("a1", "A"), now).is_some());
        l.ended(&msg("a1", "A"), Ended::Acked, now);
        assert_eq!(ids(&mut l), ["a2"]);
        // A killed retry is a dead letter for its line.
        l.notice(notice(NoticeKind::DeadLettered, "a2", "A"), now);
        assert_eq!(l.blocked, 2);
        l.notice(notice(NoticeKind::Skipped, "b1", "B"), now);
        assert_eq!(ids(&mut l), ["b2"]);
    }
}
