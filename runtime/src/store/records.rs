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
    /// Left open longer than its label's `expire`: kept, with its message and history, and
    /// still replayable or skippable; it only no longer counts as open.
    Expired,
}

impl DeadLetterStatus {
    /// The name stored and shown: `dead`, `replayed`, `skipped`, `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterStatus::Dead => "dead",
            DeadLetterStatus::Replayed => "replayed",
            DeadLetterStatus::Skipped => "skipped",
            DeadLetterStatus::Expired => "expired",
        }
    }

    /// True if an action may take a letter in this status: `dead`, and `expired` too when
    /// `or_expired` (an operator's replay or skip; not a redrive or an expiry).
    pub fn is_actionable(self, or_expired: bool) -> bool {
        match self {
            DeadLetterStatus::Dead => true,
            DeadLetterStatus::Expired => or_expired,
            DeadLetterStatus::Replayed | DeadLetterStatus::Skipped => false,
        }
    }

    /// Parses [`DeadLetterStatus::as_str`]'s names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "dead" => Some(DeadLetterStatus::Dead),
            "replayed" => Some(DeadLetterStatus::Replayed),
            "skipped" => Some(DeadLetterStatus::Skipped),
            "expired" => Some(DeadLetterStatus::Expired),
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
    /// Exact deciding rule (a rule id, or `defaults`).
    pub rule: Option<String>,
    /// Only this message's letters.
    pub message_id: Option<MessageId>,
    /// Only this status.
    pub status: Option<DeadLetterStatus>,
    /// Only open (`dead`) letters past their label's SLA: for each label that has one, the
    /// time before which its letters are overdue. A label not listed has no SLA, so none of
    /// its letters match.
    pub overdue: Option<Vec<(String, Timestamp)>>,
    /// A substring of the message id or of the last failure's message.
    pub q: Option<String>,
    /// Dead-lettered at or after (on `last_time`).
    pub since: Option<Timestamp>,
    /// Dead-lettered before (on `last_time`).
    pub until: Option<Timestamp>,
    /// Paging cursor: only ids below this (pass the previous page's `next`).
    pub before: Option<DeadLetterId>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl DeadLetterFilter {
    /// True if `d` passes every filter but the paging (`before`, `limit`).
    pub fn matches(&self, d: &StoredDeadLetter) -> bool {
        let l = &d.letter;
        self.label.as_deref().is_none_or(|v| l.label.as_str() == v)
            && self.biz.as_deref().is_none_or(|v| *l.message.biz == *v)
            && self.code.as_deref().is_none_or(|v| l.failure.code == v)
            && self.rule.as_deref().is_none_or(|v| l.rule.as_str() == v)
            && self.message_id.as_ref().is_none_or(|v| l.message.id == *v)
            && self.status.is_none_or(|v| d.status == v)
            && self.since.is_none_or(|v| l.at >= v)
            && self.until.is_none_or(|v| l.at < v)
            && self.overdue.as_ref().is_none_or(|slas| {
                d.status == DeadLetterStatus::Dead
                    && slas
                        .iter()
                        .any(|(label, cutoff)| l.label.as_str() == label && l.at < *cutoff)
            })
            && self
                .q
                .as_deref()
                .is_none_or(|q| l.message.id.as_str().contains(q) || l.failure.message.contains(q))
    }

    /// True if no filter is set (paging aside): a bulk action on it would act on everything.
    pub fn is_empty(&self) -> bool {
        let paging = DeadLetterFilter {
            before: self.before,
            limit: self.limit,
            ..DeadLetterFilter::default()
        };
        *self == paging
    }
}

/// Open letters of one label, for the gauges ([`Store::open_letters`](super::Store::open_letters)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenLetters {
    /// The label.
    pub label: String,
    /// How many are open (`dead`).
    pub open: u64,
    /// How many of them are older than the cutoff asked for this label (its SLA).
    pub overdue: u64,
    /// When the oldest open one was dead-lettered.
    pub oldest: Timestamp,
}

/// The largest page [`Store::dead_letters`](super::Store::dead_letters) and [`Store::audit_log`](super::Store::audit_log) return.
pub const MAX_PAGE: usize = 1000;

impl Default for DeadLetterFilter {
    fn default() -> Self {
        DeadLetterFilter {
            label: None,
            biz: None,
            code: None,
            rule: None,
            message_id: None,
            status: None,
            overdue: None,
            q: None,
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
    pub fn from_one_more(
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
    /// Marked a dead letter `expired` (the runtime, after its label's `expire`).
    Expire,
    /// Fired a scheduled retry now.
    RetryNow,
    /// Dead-lettered a scheduled retry (reason `killed`).
    Kill,
}

impl AuditAction {
    /// `replay`, `skip`, `expire`, `retry_now` or `kill`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Replay => "replay",
            AuditAction::Skip => "skip",
            AuditAction::Expire => "expire",
            AuditAction::RetryNow => "retry_now",
            AuditAction::Kill => "kill",
        }
    }

    /// Parses [`AuditAction::as_str`]'s names.
    pub fn parse(s: &str) -> Option<AuditAction> {
        [
            AuditAction::Replay,
            AuditAction::Skip,
            AuditAction::Expire,
            AuditAction::RetryNow,
            AuditAction::Kill,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
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
    /// Which dead letter (none for an action on a scheduled retry).
    pub dead_letter: Option<DeadLetterId>,
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
    /// Only this operator.
    pub operator: Option<String>,
    /// Only this action.
    pub action: Option<AuditAction>,
    /// At or after.
    pub since: Option<Timestamp>,
    /// Before.
    pub until: Option<Timestamp>,
    /// Paging cursor: only ids below this.
    pub before: Option<i64>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl Default for AuditFilter {
    fn default() -> Self {
        AuditFilter {
            message_id: None,
            operator: None,
            action: None,
            since: None,
            until: None,
            before: None,
            limit: 100,
        }
    }
}

impl AuditFilter {
    /// True if `e` passes every filter but the paging.
    pub fn matches(&self, e: &AuditEntry) -> bool {
        self.message_id.as_ref().is_none_or(|v| e.message_id == *v)
            && self.operator.as_deref().is_none_or(|v| e.operator == v)
            && self.action.is_none_or(|v| e.action == v)
            && self.since.is_none_or(|v| e.at >= v)
            && self.until.is_none_or(|v| e.at < v)
    }
}

/// Filters and paging for [`Store::scheduled_retries`](super::Store::scheduled_retries):
/// soonest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryFilter {
    /// Exact biz.
    pub biz: Option<String>,
    /// Exact last failure code.
    pub code: Option<String>,
    /// Exact rule that decided the retry.
    pub rule: Option<String>,
    /// Paging cursor: only retries after this one (pass the previous page's `next`).
    pub after: Option<RetryCursor>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl Default for RetryFilter {
    fn default() -> Self {
        RetryFilter {
            biz: None,
            code: None,
            rule: None,
            after: None,
            limit: 100,
        }
    }
}

impl RetryFilter {
    /// True if `r` passes every filter but the paging.
    pub fn matches(&self, r: &super::ScheduledRetry) -> bool {
        let m = &r.message;
        let last = m.retry.last_failure();
        self.biz.as_deref().is_none_or(|v| *m.biz == *v)
            && self
                .code
                .as_deref()
                .is_none_or(|v| last.is_some_and(|l| l.code == v))
            && self
                .rule
                .as_deref()
                .is_none_or(|v| last.is_some_and(|l| l.rule.as_str() == v))
    }
}

/// Where a page of scheduled retries ends: its last retry's due time and id. Shown as
/// `DUE_MS:ID`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RetryCursor {
    /// The due time.
    pub due: Timestamp,
    /// The message.
    pub id: MessageId,
}

impl fmt::Display for RetryCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.due.as_millis(), self.id)
    }
}

/// A text that is not a [`RetryCursor`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a cursor (DUE_MS:ID)")]
pub struct NotACursor(pub String);

impl std::str::FromStr for RetryCursor {
    type Err = NotACursor;
    fn from_str(s: &str) -> Result<Self, NotACursor> {
        let not = || NotACursor(s.to_owned());
        let (due, id) = s.split_once(':').ok_or_else(not)?;
        let due: u64 = due.parse().map_err(|_| not())?;
        Ok(RetryCursor {
            due: Timestamp::from_millis(due),
            id: MessageId::from(id),
        })
    }
}
