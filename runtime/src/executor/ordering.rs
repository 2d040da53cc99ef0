//! Ordered keys in one spout task (`docs/spec/runtime.md`, "Ordered keys").
//!
//! [`KeyLines`] keeps a *line* per key that has a message out: in flight, waiting for its
//! retry, or (under `on_dead_letter: block`) dead-lettered and waiting for an operator. That
//! message is the line's *holder*; the line keeps the key's later messages in the order they
//! came. A message of a key with a line is held; a key without one gets a line and its message
//! goes. When the holder has its fate (acked, or its dead letter stored under `continue`, or an
//! operator skipped its letter under `block`), the next held message becomes the holder and is
//! handed back to the task ([`KeyLines::pop_ready`]), ahead of any new message; the last one
//! takes the line away. A held retry or replay (not the holder) waits in the line like any
//! later message; the holder's own retry, or the replay of its letter, goes at once.
//!
//! Only holders ever leave their lines, so a tree's fate is always its line's holder's: the
//! tree keeps its line's [`LineKey`] in the pending table, and its fate finds the line with
//! it, without reading the key again. A holder that leaves the task (for the retry queue, or
//! as a dead letter) is named in its line by a 64-bit hash of its id, so that it is known when
//! it comes back (the acker's ids are 64 random bits too). Lines are found by a 64-bit hash of
//! the key: a message pays one short hash and a probe when it is delivered, a probe when its
//! tree ends, and no allocation, reference count or copy of its key. Two keys with the same
//! hash share a line, which orders them together: more waiting, never less order. The task
//! owns the lines like its pending table: nothing else touches them, so no lock.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::num::NonZeroU64;

use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use tokio::time::Instant;

use crate::fate::{KeyNotice, NoticeKind};
use crate::stats::{Histogram, Stats};
use crate::topology::{Key, Message, MessageId, OnDeadLetter, Ordered, OrderingConfig};

/// A line, by its key's hash: what a holder in flight keeps, so that its fate finds the line
/// without reading its key again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineKey(NonZeroU64);

impl LineKey {
    /// The line of a key's hash (never 0: see [`KeyLines::hash_key`]).
    fn of(key: u64) -> LineKey {
        LineKey(NonZeroU64::new(key).unwrap_or(NonZeroU64::MIN))
    }
}

struct Line {
    /// The key's hash.
    key: u64,
    /// The holder's id's hash while it is out of the task (waiting for its retry, or
    /// dead-lettered); `None` while it is in flight (or let go, about to be).
    away: Option<NonZeroU64>,
    /// The holder is dead-lettered and the key blocked until an operator replays or skips it.
    letter: bool,
    /// The later messages, from when each was held; made on the first one. Boxed: a line is a
    /// table slot, and most lines never hold anything (8 bytes here instead of 32).
    #[expect(
        clippy::box_collection,
        reason = "keeps the table's slots small; the queue is made only for a key that waits"
    )]
    held: Option<Box<VecDeque<(Message, Instant)>>>,
}

impl Line {
    fn new(key: u64, away: Option<NonZeroU64>) -> Line {
        Line {
            key,
            away,
            letter: false,
            held: None,
        }
    }

    fn has_held(&self) -> bool {
        self.held.as_ref().is_some_and(|h| !h.is_empty())
    }

    /// True while the key holds something back, or waits for an operator.
    fn blocks(&self) -> bool {
        self.letter || self.has_held()
    }
}

/// What [`KeyLines::admits`] says of a message whose key holds it back.
#[derive(Debug)]
pub(crate) struct Wait;

/// The ordered keys of one spout task. See the [module docs](self).
pub(crate) struct KeyLines {
    ordered: Ordered,
    block: bool,
    max_held: usize,
    hasher: DefaultHashBuilder,
    lines: HashTable<Line>,
    /// Messages in the lines' queues.
    held: usize,
    /// Lines that [`Line::blocks`].
    blocked: usize,
    /// Messages let go, to deliver next, in the order they were let go, with their line.
    ready: VecDeque<(Message, LineKey)>,
    /// How long each let-go message was held.
    waits: Histogram,
}

impl KeyLines {
    /// The lines for `config`, or `None` when nothing is ordered. `pending`: the task's
    /// `max_spout_pending`, about as many lines as there will be while no key waits.
    pub(crate) fn new(config: &OrderingConfig, pending: usize) -> Option<Box<KeyLines>> {
        if config.ordered.is_none() {
            return None;
        }
        Some(Box::new(KeyLines {
            ordered: config.ordered.clone(),
            block: config.on_dead_letter == OnDeadLetter::Block,
            max_held: config.max_held.max(1),
            hasher: DefaultHashBuilder::default(),
            // Room for four times the lines in flight: a line lives as long as its tree, and a
            // table that churns near its load limit rehashes away its tombstones again and
            // again (about twice the cost a message at the tighter fit, measured on its own).
            lines: HashTable::with_capacity(pending.saturating_mul(4).max(64)),
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

    /// The key's hash, never 0 (so that a [`LineKey`] fits a pending slot's 8 bytes).
    fn hash_key(&self, key: &Key) -> u64 {
        self.hasher.hash_one(key.as_str()).max(1)
    }

    fn hash_id(&self, id: &MessageId) -> NonZeroU64 {
        NonZeroU64::new(self.hasher.hash_one(id.as_str())).unwrap_or(NonZeroU64::MIN)
    }

    /// Whether a message about to be delivered (new from the spout, or out of the retry
    /// queue) may go now: `Ok` with its line if its key is ordered (the line is made if there
    /// was none, or it is its line's holder coming back), `Ok(None)` if not ordered. `Err`: it
    /// waits; [`KeyLines::hold`] it.
    pub(crate) fn admits(&mut self, m: &Message) -> Result<Option<LineKey>, Wait> {
        let Some(key) = self.key_of(m) else {
            return Ok(None);
        };
        let key = self.hash_key(key);
        let line_key = LineKey::of(key);
        let line = match self.lines.entry(key, |l| l.key == key, |l| l.key) {
            Entry::Vacant(v) => {
                v.insert(Line::new(key, None));
                return Ok(Some(line_key));
            }
            Entry::Occupied(o) => o.into_mut(),
        };
        let Some(away) = line.away else {
            return Err(Wait);
        };
        if away != NonZeroU64::new(self.hasher.hash_one(m.id.as_str())).unwrap_or(NonZeroU64::MIN) {
            return Err(Wait);
        }
        // Its own retry, or the replay of its letter: it holds the line again.
        let before = line.blocks();
        (line.away, line.letter) = (None, false);
        let after = line.blocks();
        self.count_blocked(before, after);
        Ok(Some(line_key))
    }

    /// Holds `m`, which [`KeyLines::admits`] did not let go, at the end of its key's line.
    pub(crate) fn hold(&mut self, m: Message, now: Instant) {
        let Some(key) = self.key_of(&m) else {
            return;
        };
        let key = self.hash_key(key);
        let Some(line) = self.lines.find_mut(key, |l| l.key == key) else {
            return;
        };
        let before = line.blocks();
        line.held.get_or_insert_default().push_back((m, now));
        self.held += 1;
        self.count_blocked(before, true);
    }

    /// The holder of `line`, `id`, in flight, goes to the retry queue: its line waits for it
    /// to come back.
    pub(crate) fn retrying(&mut self, LineKey(key): LineKey, id: &MessageId) {
        let (key, id) = (key.get(), self.hash_id(id));
        if let Some(line) = self.lines.find_mut(key, |l| l.key == key) {
            line.away = Some(id);
        }
    }

    /// The tree of `line`'s holder completed: the next held message of its key goes.
    pub(crate) fn acked(&mut self, LineKey(key): LineKey, now: Instant) {
        self.let_go(key.get(), |_| true, now);
    }

    /// The dead letter of `id` (with `key` and `biz`), a tree that ended in flight, is
    /// stored: the next message of its key goes, or under `block` the key waits for an
    /// operator.
    pub(crate) fn dead_lettered(&mut self, key: &Key, biz: &str, id: &MessageId, now: Instant) {
        if !self.ordered.covers(biz) {
            return;
        }
        let key = self.hash_key(key);
        if self.block {
            let id = self.hash_id(id);
            self.block_on(key, |_| true, id);
        } else {
            self.let_go(key, |_| true, now);
        }
    }

    /// Blocks `key`'s line on its holder's letter (`id`), if `holds` says it holds the line.
    fn block_on(&mut self, key: u64, holds: impl Fn(&Line) -> bool, id: NonZeroU64) {
        let Some(line) = self.lines.find_mut(key, |l| l.key == key) else {
            return;
        };
        if !holds(line) {
            return;
        }
        let before = line.blocks();
        line.letter = true;
        line.away = Some(id);
        self.count_blocked(before, true);
    }

    /// If `key`'s line passes `holds`, its holder is done with: the next held message holds
    /// the line and is let go, or the line goes.
    fn let_go(&mut self, key: u64, holds: impl Fn(&Line) -> bool, now: Instant) {
        let Ok(mut entry) = self.lines.find_entry(key, |l| l.key == key) else {
            return;
        };
        let line = entry.get_mut();
        if !holds(line) {
            return; // not the holder: nothing of the line hangs on it
        }
        let before = line.blocks();
        match line.held.as_mut().and_then(|h| h.pop_front()) {
            Some((next, since)) => {
                self.held -= 1;
                self.waits.observe(now.saturating_duration_since(since));
                (line.away, line.letter) = (None, false);
                self.ready.push_back((next, LineKey::of(key)));
                let after = line.blocks();
                self.count_blocked(before, after);
            }
            None => {
                entry.remove();
                self.count_blocked(before, false);
            }
        }
    }

    /// What the queue told of a message handled outside the task.
    pub(crate) fn notice(&mut self, n: KeyNotice, now: Instant) {
        if !self.ordered.covers(&n.biz) {
            return;
        }
        let (key, id) = (self.hash_key(&n.key), self.hash_id(&n.id));
        let away = move |l: &Line| l.away == Some(id);
        let known = self.lines.find(key, |l| l.key == key).is_some();
        match n.kind {
            // A recovered retry: the key's redelivered messages wait for it. A second one of
            // the same key waits in the line when it comes due.
            NoticeKind::Waiting if !known => {
                self.lines
                    .insert_unique(key, Line::new(key, Some(id)), |l| l.key);
            }
            NoticeKind::Waiting => {}
            // An operator killed the holder's retry.
            NoticeKind::DeadLettered if known && self.block => self.block_on(key, away, id),
            NoticeKind::DeadLettered if known => self.let_go(key, away, now),
            NoticeKind::DeadLettered => {
                if self.block {
                    // An open letter found at the start: the key stays blocked.
                    let mut line = Line::new(key, Some(id));
                    line.letter = true;
                    self.lines.insert_unique(key, line, |l| l.key);
                    self.count_blocked(false, true);
                }
            }
            NoticeKind::Skipped => self.let_go(key, move |l| l.letter && away(l), now),
        }
    }

    /// The next message let go, to deliver before any new one, with its line.
    pub(crate) fn pop_ready(&mut self) -> Option<(Message, LineKey)> {
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
        KeyLines::new(
            &OrderingConfig {
                ordered: Ordered::Biz(vec![Arc::from("ORDER")]),
                on_dead_letter: if block {
                    OnDeadLetter::Block
                } else {
                    OnDeadLetter::Continue
                },
                max_held: 2,
            },
            16,
        )
        .expect("ordering is on")
    }

    fn msg(id: &str, key: &str) -> Message {
        Message::new(id, "ORDER", "").with_key(key)
    }

    /// The line of `m`'s key (the test's keys are all ordered).
    fn line(l: &KeyLines, m: &Message) -> LineKey {
        LineKey::of(l.hash_key(m.key.as_ref().unwrap()))
    }

    /// `m`, in flight, fails and goes to the retry queue, then comes back due: admitted at once.
    fn retried(l: &mut KeyLines, m: Message, now: Instant) {
        l.retrying(line(l, &m), &m.id);
        assert!(l.admit(m, now).is_some(), "the holder's own retry goes");
    }

    fn acked(l: &mut KeyLines, id: &str, key: &str, now: Instant) {
        let line = line(l, &msg(id, key));
        l.acked(line, now);
    }

    fn dead(l: &mut KeyLines, id: &str, key: &str, now: Instant) {
        l.dead_lettered(&Key::from(key), "ORDER", &MessageId::from(id), now);
    }

    /// `m` offered for delivery: given back if it goes, else held.
    trait Offer {
        fn admit(&mut self, m: Message, now: Instant) -> Option<Message>;
    }
    impl Offer for KeyLines {
        fn admit(&mut self, m: Message, now: Instant) -> Option<Message> {
            if self.admits(&m).is_ok() {
                return Some(m);
            }
            self.hold(m, now);
            None
        }
    }

    fn ids(l: &mut KeyLines) -> Vec<String> {
        std::iter::from_fn(|| l.pop_ready())
            .map(|(m, _)| m.id.to_string())
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
        // a1's retry goes at once: it holds the line; a retry of another message waits.
        retried(&mut l, msg("a1", "A"), now);
        acked(&mut l, "a1", "A", now);
        assert_eq!(ids(&mut l), ["a2"]);
        dead(&mut l, "a2", "A", now);
        assert_eq!(ids(&mut l), ["a3"]);
        assert_eq!((l.held, l.blocked), (0, 0));
        l.retrying(line(&l, &msg("a3", "A")), &MessageId::from("a3"));
        assert!(l.admit(msg("a9", "A"), now).is_none(), "not the holder's");
        assert!(l.admit(msg("a3", "A"), now).is_some());
        acked(&mut l, "a3", "A", now);
        assert_eq!(ids(&mut l), ["a9"]);
        acked(&mut l, "a9", "A", now);
        acked(&mut l, "b1", "B", now);
        assert!(l.lines.is_empty());
    }

    #[test]
    fn a_trees_line_takes_eight_bytes_of_its_pending_slot() {
        assert_eq!(std::mem::size_of::<Option<LineKey>>(), 8);
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
        assert!(KeyLines::new(&OrderingConfig::default(), 16).is_none());
    }

    #[test]
    fn under_block_a_dead_letter_holds_its_key_until_a_skip_or_a_replay() {
        let mut l = lines(true);
        let now = Instant::now();
        assert!(l.admit(msg("a1", "A"), now).is_some());
        assert!(l.admit(msg("a2", "A"), now).is_none());
        dead(&mut l, "a1", "A", now);
        assert!(ids(&mut l).is_empty());
        assert_eq!(l.blocked, 1);
        // A skip of another letter changes nothing; the key's own lets a2 go.
        let skip = |id: &str| KeyNotice::of(NoticeKind::Skipped, &msg(id, "A")).unwrap();
        l.notice(skip("zz"), now);
        assert!(ids(&mut l).is_empty());
        l.notice(skip("a1"), now);
        assert_eq!(ids(&mut l), ["a2"]);
        // a2 dead-lettered too; its replay goes first, a3 after its fate.
        dead(&mut l, "a2", "A", now);
        assert!(l.admit(msg("a3", "A"), now).is_none());
        assert!(l.admit(msg("a2", "A"), now).is_some());
        assert_eq!(l.blocked, 1);
        acked(&mut l, "a2", "A", now);
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
        acked(&mut l, "a1", "A", now);
        assert_eq!(ids(&mut l), ["a2"]);
        // A killed retry is a dead letter for its line.
        l.retrying(line(&l, &msg("a2", "A")), &MessageId::from("a2"));
        l.notice(notice(NoticeKind::DeadLettered, "a2", "A"), now);
        assert_eq!(l.blocked, 2);
        l.notice(notice(NoticeKind::Skipped, "b1", "B"), now);
        assert_eq!(ids(&mut l), ["b2"]);
    }
}
