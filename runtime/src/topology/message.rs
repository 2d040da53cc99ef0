//! What a spout produces: a [`Message`] with a stable id, its business type, payload, headers,
//! an optional ordering [`Key`], and the retry metadata that travels with it from delivery to
//! delivery.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use super::history::{FailureRecord, Failures};
use super::tuple::Headers;
use crate::time::Timestamp;
use bytes::Bytes;

/// A message's stable id, given by its source (an offset, an order number…).
///
/// It is how the spout is told the message's fate, and how a redelivery is recognised.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(Arc<str>);

impl MessageId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub(crate) fn shared(&self) -> Arc<str> {
        self.0.clone()
    }
}

impl From<&str> for MessageId {
    fn from(s: &str) -> Self {
        MessageId(s.into())
    }
}
impl From<String> for MessageId {
    fn from(s: String) -> Self {
        MessageId(s.into())
    }
}
impl From<Arc<str>> for MessageId {
    fn from(s: Arc<str>) -> Self {
        MessageId(s)
    }
}
impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}
impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A message's ordering key (an order id, an account…), given by its spout: when the topology
/// orders the message's biz (`Config::ordering`), a later message with the same key is held
/// back while an earlier one is in flight or waits for its retry. Cloning is cheap.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(Arc<str>);

impl Key {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub(crate) fn shared(&self) -> Arc<str> {
        self.0.clone()
    }
}

impl From<&str> for Key {
    fn from(s: &str) -> Self {
        Key(s.into())
    }
}
impl From<String> for Key {
    fn from(s: String) -> Self {
        Key(s.into())
    }
}
impl From<Arc<str>> for Key {
    fn from(s: Arc<str>) -> Self {
        Key(s)
    }
}
impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a message carries from one delivery to the next.
///
/// A spout hands out new messages with `RetryMeta::default()`; the runtime fills it in. A
/// source that restores a scheduled retry after a restart hands the message back with the
/// metadata it had. (Kept small — the last failure is boxed and absent until the first
/// retry — because a message is moved several times per delivery.)
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetryMeta {
    /// Deliveries so far. 0 until the first delivery; during delivery `n` it is `n`.
    pub attempt: u32,
    /// When the first delivery began (wall clock, so it survives a restart).
    pub first_delivery: Option<Timestamp>,
    /// Every failure so far, each with the retry decided for it (see [`Failures`]).
    pub failures: Failures,
    /// How many times the message was redriven from a dead letter by its label's `redrive`
    /// (kept across the redrive, which starts attempts and elapsed again).
    pub redrives: u32,
}

/// The fencing token of one claim of a due retry in a shared store: unique within a
/// namespace and increasing, so that a write under a claim that was reaped and claimed again
/// is told apart and refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimToken(NonZeroU64);

impl ClaimToken {
    /// The token `n` (tokens count from 1), or `None` for 0.
    pub fn new(n: u64) -> Option<ClaimToken> {
        NonZeroU64::new(n).map(ClaimToken)
    }

    /// The token as a number.
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl RetryMeta {
    /// The delay chosen after the last failure (zero before the first retry).
    pub fn last_delay(&self) -> Duration {
        self.last_failure()
            .and_then(|f| f.delay)
            .unwrap_or(Duration::ZERO)
    }

    /// The last failure and the retry decided for it; `None` before the first retry.
    pub fn last_failure(&self) -> Option<&FailureRecord> {
        self.failures.last()
    }
}

/// A message from a spout.
///
/// The spout owns its identity (`id`, from the source) and content; the runtime owns `retry`.
/// Cloning is cheap: the id, biz and payload are shared.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The stable id from the source.
    pub id: MessageId,
    /// The business type, e.g. `ORDER`; rules match on it.
    pub biz: Arc<str>,
    /// The payload.
    pub payload: Bytes,
    /// Headers from the source.
    pub headers: Headers,
    /// The message's position in its source (numbered from 1), for a source that commits a
    /// position: a durable store keeps the acked fate only until that position passes it.
    pub offset: Option<NonZeroU64>,
    /// The ordering key, if the source gives one (kept with the message in every store).
    pub key: Option<Key>,
    /// Retry metadata, carried across deliveries.
    pub retry: RetryMeta,
}

impl Message {
    /// A new message that has not been delivered yet.
    ///
    /// `biz` may be a `&str` or a shared `Arc<str>` (cloning one avoids an allocation per
    /// message).
    pub fn new(
        id: impl Into<MessageId>,
        biz: impl Into<Arc<str>>,
        payload: impl Into<Bytes>,
    ) -> Message {
        Message {
            id: id.into(),
            biz: biz.into(),
            payload: payload.into(),
            headers: Headers::new(),
            offset: None,
            key: None,
            retry: RetryMeta::default(),
        }
    }

    /// The same message with an ordering key.
    pub fn with_key(mut self, key: impl Into<Key>) -> Message {
        self.key = Some(key.into());
        self
    }

    /// The same message at position `offset` of its source (0 means none).
    pub fn with_offset(mut self, offset: u64) -> Message {
        self.offset = NonZeroU64::new(offset);
        self
    }

    /// The same message with a header set.
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Message {
        self.headers.insert(key, value);
        self
    }
}

/// The fields of the root tuple a spout emits for each delivery of a message: its `id`,
/// `biz`, `payload` (bytes) and `headers` (a map), its `attempt` (1 for the first delivery),
/// its ordering `key` (text, or null when it has none) and `first_delivery` (milliseconds since
/// the epoch, the wall clock's, the same on every retry).
pub const ROOT_FIELDS: [&str; 7] = [
    "id",
    "biz",
    "payload",
    "headers",
    "attempt",
    "key",
    "first_delivery",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_stays_small_to_move() {
        // Messages are moved several times per delivery (spout → pending map → retry queue):
        // two cache lines, the ordering key included.
        assert!(
            std::mem::size_of::<Message>() <= 128,
            "{}",
            std::mem::size_of::<Message>()
        );
    }
}
