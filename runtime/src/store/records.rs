//! What the store reads back: dead letters with their status, fates, pages, and the audit log.

use std::fmt;

use super::{DeadLetter, DeadLetterId, MessageId};
use crate::time::Timestamp;

/// Where a dead letter stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadLetterStatus {
    /// Waiting for an operator.
    Dead,
    /// Sent back into the topology as a fresh delivery.
    Replayed,
    /// Marked handled by an operator.
    Skipped,
}

impl DeadLetterStatus {
    /// The name stored and shown: `dead`, `replayed`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterStatus::Dead => "dead",
            DeadLetterStatus::Replayed => "replayed",
            DeadLetterStatus::Skipped => "skipped",
        }
    }

    /// Parses [`DeadLetterStatus::as_str`]'s names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "dead" => Some(DeadLetterStatus::Dead),
            "replayed" => Some(DeadLetterStatus::Replayed),
            "skipped" => Some(DeadLetterStatus::Skipped),
            _ => None,
        }
    }
}

impl fmt::Display for DeadLetterStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dead letter as stored: its id, status and content.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDeadLetter {
    /// Row id (the paging cursor).
    pub id: DeadLetterId,
    /// Current status.
    pub status: DeadLetterStatus,
    /// What was written.
    pub letter: DeadLetter,
}

/// The final fate of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// Its tuple tree completed.
    Acked,
    /// Its dead letter is stored.
    DeadLettered,
}

/// Filters and paging for [`Store::dead_letters`](super::Store::dead_letters). Newest first; all filters are optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterFilter {
    /// Exact label (`L1`).
    pub label: Option<String>,
    /// Exact biz.
    pub biz: Option<String>,
    /// Exact last code.
    pub code: Option<String>,
    /// Only this status.
    pub status: Option<DeadLetterStatus>,
    /// Dead-lettered at or after (on `last_time`).
    pub since: Option<Timestamp>,
    /// Dead-lettered before (on `last_time`).
    pub until: Option<Timestamp>,
    /// Paging cursor: only ids below this (pass the previous page's `next`).
    pub before: Option<DeadLetterId>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

/// The largest page [`Store::dead_letters`](super::Store::dead_letters) and [`Store::audit_log`](super::Store::audit_log) return.
pub const MAX_PAGE: usize = 1000;

impl Default for DeadLetterFilter {
    fn default() -> Self {
        DeadLetterFilter {
            label: None,
            biz: None,
            code: None,
            status: None,
            since: None,
            until: None,
            before: None,
            limit: 100,
        }
    }
}

/// One page of results, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T, C> {
    /// The items.
    pub items: Vec<T>,
    /// The cursor for the next (older) page, if there may be one.
    pub next: Option<C>,
}

impl<T, C> Page<T, C> {
    /// A page from up to `limit + 1` items read newest first: if there is one more than
    /// `limit`, it is dropped and the last kept item's cursor (`cursor_of`) is `next`.
    pub(crate) fn from_one_more(
        mut items: Vec<T>,
        limit: usize,
        cursor_of: impl Fn(&T) -> C,
    ) -> Page<T, C> {
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(cursor_of)
        } else {
            None
        };
        Page { items, next }
    }
}

/// What an operator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    /// Replayed a dead letter.
    Replay,
    /// Skipped (marked handled) a dead letter.
    Skip,
}

impl AuditAction {
    /// `replay` or `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Replay => "replay",
            AuditAction::Skip => "skip",
        }
    }
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Row id (the paging cursor).
    pub id: i64,
    /// When.
    pub at: Timestamp,
    /// What.
    pub action: AuditAction,
    /// Which message.
    pub message_id: MessageId,
    /// Which dead letter.
    pub dead_letter: DeadLetterId,
    /// Who (as given, trimmed).
    pub operator: String,
    /// Why (as given, trimmed).
    pub reason: String,
}

/// Filters and paging for [`Store::audit_log`](super::Store::audit_log). Newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this message.
    pub message_id: Option<MessageId>,
    /// Paging cursor: only ids below this.
    pub before: Option<i64>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl Default for AuditFilter {
    fn default() -> Self {
        AuditFilter {
            message_id: None,
            before: None,
            limit: 100,
        }
    }
}
