//! The messages this source holds: delivered and not yet acknowledged, each with the
//! delivery tags that acknowledge it on the channel they came on. Owned by the session task
//! alone (no lock).
//!
//! A tag acknowledges only on its own channel: when the connection is lost, every tag held is
//! dead (the broker requeues those messages, flagged `redelivered`), and the message stays
//! held without one until the broker delivers it again on the new channel (its new tag is
//! taken, and it is not handed out a second time). One whose custody comes while it has no
//! live tag is *owed*: acknowledged as soon as the broker delivers it again.
//!
//! The same `message-id` delivered twice on one channel (a publisher that sent it twice) is
//! one message: both tags are acknowledged at its custody.

use std::collections::{HashMap, HashSet};

use rebound_runtime::topology::MessageId;

/// What [`Held::deliver`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Delivered {
    /// A message this source does not hold: it is held now.
    New,
    /// One it holds already (handed out, or waiting to be): its new tag is kept, and it is
    /// not handed out again.
    Again,
    /// One whose custody came while it had no live tag: the caller acknowledges it now.
    Owed,
}

#[derive(Debug, Default)]
pub(super) struct Held {
    /// Each held message's live tags (empty while the broker has to deliver it again).
    map: HashMap<MessageId, Vec<u64>>,
    /// Custody came, and no live tag to acknowledge with.
    owed: HashSet<MessageId>,
    /// Live tags in all (what the broker holds unacknowledged for this source).
    live: usize,
}

impl Held {
    /// How many tags the broker holds unacknowledged for this source.
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// The message `id` delivered with `tag` on the current channel.
    pub(super) fn deliver(&mut self, id: &MessageId, tag: u64) -> Delivered {
        if self.owed.remove(id) {
            return Delivered::Owed;
        }
        self.live += 1;
        match self.map.get_mut(id) {
            Some(tags) => {
                tags.push(tag);
                Delivered::Again
            }
            None => {
                self.map.insert(id.clone(), vec![tag]);
                Delivered::New
            }
        }
    }

    /// Holds `id` with `tag` whatever it held before (a message refused at once: its id is
    /// this delivery's own).
    pub(super) fn hold(&mut self, id: MessageId, tag: u64) {
        self.live += 1;
        self.map.entry(id).or_default().push(tag);
    }

    /// Custody of `id`: the tags to acknowledge it with (none if it has no live tag: then it
    /// is owed, or it was not held).
    pub(super) fn custody(&mut self, id: &MessageId) -> Vec<u64> {
        match self.map.remove(id) {
            Some(tags) if tags.is_empty() => {
                self.owed.insert(id.clone());
                tags
            }
            Some(tags) => {
                self.live -= tags.len();
                tags
            }
            None => Vec::new(),
        }
    }

    /// Whether `id` is held (handed out, or waiting to be).
    pub(super) fn contains(&self, id: &MessageId) -> bool {
        self.map.contains_key(id)
    }

    /// `id` came back and was acknowledged as the store's (not held): nothing is owed for it.
    pub(super) fn settled(&mut self, id: &MessageId) {
        self.owed.remove(id);
    }

    /// The channel is gone: every tag is dead.
    pub(super) fn channel_lost(&mut self) {
        for tags in self.map.values_mut() {
            tags.clear();
        }
        self.live = 0;
    }

    /// Acknowledging `tags` of `id` failed on a channel that is gone: owed instead.
    pub(super) fn ack_lost(&mut self, id: MessageId) {
        self.owed.insert(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_held_once_and_its_tags_follow_the_channel() {
        let mut h = Held::default();
        let a = MessageId::from("a");
        assert_eq!(h.deliver(&a, 1), Delivered::New);
        assert_eq!(h.deliver(&a, 2), Delivered::Again, "the same id twice");
        assert_eq!(h.live(), 2);
        assert_eq!(h.custody(&a), vec![1, 2], "both tags acknowledged");
        assert_eq!(h.live(), 0);
        assert_eq!(h.custody(&a), Vec::<u64>::new(), "once");

        // Lost with its channel before custody: redelivered, not handed out again.
        let b = MessageId::from("b");
        assert_eq!(h.deliver(&b, 3), Delivered::New);
        h.channel_lost();
        assert_eq!(h.live(), 0);
        assert_eq!(h.deliver(&b, 1), Delivered::Again);
        assert_eq!(h.custody(&b), vec![1]);

        // Custody while it has no live tag: owed, acknowledged when it comes back.
        let c = MessageId::from("c");
        assert_eq!(h.deliver(&c, 2), Delivered::New);
        h.channel_lost();
        assert!(h.custody(&c).is_empty());
        assert_eq!(h.deliver(&c, 1), Delivered::Owed);
        assert_eq!(h.live(), 0);
        assert_eq!(h.deliver(&c, 2), Delivered::New, "owed only once");
    }
}
