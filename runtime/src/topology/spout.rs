//! The [`Spout`] trait: where messages come from, and where their fates are reported.

use super::message::{Message, MessageId};

/// What [`Spout::next`] found.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // returned by value once per message; boxing would allocate
pub enum NextMessage {
    /// A new message to deliver.
    Ready(Message),
    /// Nothing right now; the runtime asks again shortly (after `Config::spout_idle_wait`, or
    /// sooner when a fate arrives).
    Idle,
    /// The source is finished: no new messages will ever come. Retries of messages already
    /// delivered still flow, and fates are still reported.
    Exhausted,
    /// A message the source cannot hand out (a RabbitMQ message without a `message-id`, which
    /// has no stable id): the runtime dead-letters it at once, never delivering it, with this
    /// failure, reason [`GiveUpReason::Refused`](rebound_engine::GiveUpReason::Refused) and the
    /// label of the rule that matches the failure (`retry.attempt` stays 0). It counts under
    /// `max_spout_pending` until it is stored; then the spout hears
    /// [`Spout::dead_lettered`], its custody, as for any dead letter. Its ordering key, if
    /// any, holds no line.
    Refused(Message, crate::topology::Failure),
}

/// A source of messages.
///
/// The runtime calls `next` only when the task has room under `max_spout_pending` and the
/// retry mix wants a new message, so a spout never needs its own buffering or throttling.
/// Every message handed out gets exactly one final fate, and the spout is told it:
///
/// - [`Spout::ack`] once the whole tuple tree completed;
/// - [`Spout::dead_lettered`] once the dead letter is durably stored.
///
/// Only then may a durable source commit its position past the message. Failures in between
/// are the runtime's business: the message is retried from the runtime's retry queue, not
/// handed back to the spout.
///
/// **Custody.** On a durable store a message may pass into the runtime's custody before its
/// fate: [`Spout::retained`] is called once the store has committed the message's first retry,
/// with its payload. From then on the store is the message's only record, so a broker source
/// acknowledges its broker at the first of `retained`, `ack` and `dead_lettered`, once, and a
/// retry that waits an hour holds nothing at the broker. Without a durable store custody comes
/// only with the final fate (`retained` is never called).
///
/// Methods are called from one task at a time and must not block for long: the same task
/// also handles fates and retries.
pub trait Spout: Send + 'static {
    /// The next new message, if there is one now.
    fn next(&mut self) -> NextMessage;

    /// The message's tree completed: it is done.
    fn ack(&mut self, id: &MessageId);

    /// The message was given up on, and its dead letter is durably stored.
    fn dead_lettered(&mut self, id: &MessageId);

    /// The message's first retry is durably stored, with its payload: the runtime has custody
    /// of it, and a broker may forget it (see the trait's docs). `ack` or `dead_lettered` still
    /// follows, later. An id this spout does not hold (a replayed dead letter's retry) is to
    /// be ignored.
    fn retained(&mut self, id: &MessageId) {
        let _ = id;
    }

    /// Called once when the task stops (after a graceful drain, or at its timeout).
    fn close(&mut self) {}
}

/// A boxed spout is a spout (the executor runs the spouts a topology declared this way).
impl Spout for Box<dyn Spout> {
    fn next(&mut self) -> NextMessage {
        (**self).next()
    }
    fn ack(&mut self, id: &MessageId) {
        (**self).ack(id)
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        (**self).dead_lettered(id)
    }
    fn retained(&mut self, id: &MessageId) {
        (**self).retained(id)
    }
    fn close(&mut self) {
        (**self).close()
    }
}
