//! The runtime's records as rows, encoded and decoded in this one place: a retry row holds a
//! [`Message`] with its retry metadata, a dead-letter row a [`DeadLetter`]. SQLite binds a
//! row's values as columns; a store of named fields (`fields.rs`) keeps the same values under the
//! columns' names, so every store reads back exactly what another would. Decoding validates (a corrupt value is
//! an error, never a panic).

use std::collections::BTreeMap;
use std::time::Duration;

use rebound_engine::Label;

use super::failures::{failures_from_sql, failures_to_sql};
pub(super) use super::values::*;
use super::{
    DeadLetter, DeadLetterId, DeadLetterStatus, Message, MessageId, Result, ScheduledRetry,
    StoredDeadLetter,
};
use crate::time::Timestamp;
use crate::topology::{Failure, FailureRecord, Key, RetryMeta};

/// The columns of a retry row, in the order rows are written and read.
macro_rules! retry_columns {
    () => {
        "message_id, biz, payload, headers, due_ms, attempt, first_seen_ms, last_code, \
         last_message, last_delay_ms, rule, rule_set_version, offset, failures, redrives, \
         ordering_key"
    };
}
pub(super) use retry_columns;

/// The columns of a dead-letter row, in the order rows are read.
pub(super) const DEAD_LETTER_COLUMNS: &str = "id, status, message_id, biz, payload, headers, \
     label, reason, last_code, last_message, attempts, first_ms, last_ms, rule, \
     rule_set_version, attrs, failures, redrives, ordering_key";

/// The fresh delivery a replay of `message`'s dead letter schedules: due at `at`, attempt 0,
/// no failures, first delivered at `at`; its redrives kept, one more for a `redrive`.
pub fn replayed_delivery(mut message: Message, at: Timestamp, redrive: bool) -> ScheduledRetry {
    message.retry = RetryMeta {
        first_delivery: Some(at),
        redrives: message.retry.redrives + u32::from(redrive),
        ..RetryMeta::default()
    };
    ScheduledRetry::new(message, at)
}

/// A retry row's values, ready to bind in [`retry_columns`]'s order.
pub(super) struct RetryRow<'a> {
    pub(super) id: &'a str,
    pub(super) biz: &'a str,
    pub(super) payload: &'a [u8],
    pub(super) headers: String,
    pub(super) due: i64,
    pub(super) attempt: u32,
    pub(super) first_seen: i64,
    pub(super) last_code: &'a str,
    pub(super) last_message: &'a str,
    pub(super) last_delay: i64,
    pub(super) rule: &'a str,
    pub(super) version: String,
    pub(super) offset: Option<i64>,
    pub(super) failures: String,
    pub(super) redrives: u32,
    pub(super) key: Option<&'a str>,
}

impl<'a> RetryRow<'a> {
    /// The row of `retry`. A message that never failed (a replay: attempt 0) has no last
    /// failure, so its failure columns are empty.
    pub(super) fn encode(retry: &'a ScheduledRetry) -> Result<RetryRow<'a>> {
        let m = &retry.message;
        let last = m.retry.last_failure();
        Ok(RetryRow {
            id: m.id.as_str(),
            biz: &m.biz,
            payload: &m.payload,
            headers: headers_to_sql(&m.headers)?,
            due: ts_to_sql("due", retry.due)?,
            attempt: m.retry.attempt,
            first_seen: ts_to_sql("first_seen", m.retry.first_delivery.unwrap_or(retry.due))?,
            last_code: last.map_or("", |l| &l.code),
            last_message: last.map_or("", |l| &l.message),
            last_delay: duration_to_sql("last_delay", m.retry.last_delay())?,
            rule: last.map_or("", |l| l.rule.as_str()),
            version: last.map(|l| l.version.to_string()).unwrap_or_default(),
            offset: offset_to_sql(m.offset)?,
            failures: failures_to_sql(&m.retry.failures)?,
            redrives: m.retry.redrives,
            key: m.key.as_ref().map(Key::as_str),
        })
    }
}

/// A dead letter's values, ready to bind (SQLite) or to write as hash fields (a shared store).
pub(super) struct DeadLetterRow<'a> {
    pub(super) id: &'a str,
    pub(super) biz: &'a str,
    pub(super) payload: &'a [u8],
    pub(super) headers: String,
    pub(super) label: &'a str,
    pub(super) reason: &'static str,
    pub(super) last_code: &'a str,
    pub(super) last_message: &'a str,
    pub(super) attempts: u32,
    pub(super) first: i64,
    pub(super) last: i64,
    pub(super) rule: &'a str,
    pub(super) version: String,
    pub(super) attrs: String,
    pub(super) failures: String,
    pub(super) redrives: u32,
    pub(super) key: Option<&'a str>,
}

impl<'a> DeadLetterRow<'a> {
    /// The row of `dl`: its message (without the offset) with its failures before the last,
    /// the failure that ended it with its attrs, and the decision.
    pub(super) fn encode(dl: &'a DeadLetter) -> Result<DeadLetterRow<'a>> {
        let m = &dl.message;
        Ok(DeadLetterRow {
            id: m.id.as_str(),
            biz: &m.biz,
            payload: &m.payload,
            headers: headers_to_sql(&m.headers)?,
            label: dl.label.as_str(),
            reason: dl.reason.as_str(),
            last_code: &dl.failure.code,
            last_message: &dl.failure.message,
            attempts: m.retry.attempt,
            first: ts_to_sql("first_time", dl.first_at())?,
            last: ts_to_sql("last_time", dl.at)?,
            rule: dl.rule.as_str(),
            version: dl.version.to_string(),
            attrs: attrs_to_sql(&dl.failure.attrs)?,
            failures: failures_to_sql(&m.retry.failures)?,
            redrives: m.retry.redrives,
            key: m.key.as_ref().map(Key::as_str),
        })
    }
}

/// A retry row as SQLite returns it, before validation.
pub(super) struct RawRetry {
    pub(super) id: String,
    pub(super) biz: String,
    pub(super) payload: Vec<u8>,
    pub(super) headers: String,
    pub(super) due: i64,
    pub(super) attempt: i64,
    pub(super) first_seen: i64,
    pub(super) last_code: String,
    pub(super) last_message: String,
    pub(super) last_delay: i64,
    pub(super) rule: String,
    pub(super) version: String,
    pub(super) offset: Option<i64>,
    pub(super) failures: String,
    pub(super) redrives: i64,
    pub(super) key: Option<String>,
}

impl RawRetry {
    pub(super) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(RawRetry {
            id: r.get(0)?,
            biz: r.get(1)?,
            payload: r.get(2)?,
            headers: r.get(3)?,
            due: r.get(4)?,
            attempt: r.get(5)?,
            first_seen: r.get(6)?,
            last_code: r.get(7)?,
            last_message: r.get(8)?,
            last_delay: r.get(9)?,
            rule: r.get(10)?,
            version: r.get(11)?,
            offset: r.get(12)?,
            failures: r.get(13)?,
            redrives: r.get(14)?,
            key: r.get(15)?,
        })
    }

    /// The message as it was scheduled. A replayed dead letter (attempt 0) comes back as a
    /// fresh delivery: no failures, first delivery at the replay. A row written before the
    /// failures were kept gives its last failure alone.
    pub(super) fn decode(self) -> Result<ScheduledRetry> {
        const T: &str = "retries";
        let due = ts_from_sql(T, "due_ms", self.due)?;
        let attempt =
            u32::try_from(self.attempt).map_err(|_| corrupt(T, "attempt", self.attempt))?;
        let delay = Duration::from_millis(
            u64::try_from(self.last_delay)
                .map_err(|_| corrupt(T, "last_delay_ms", self.last_delay))?,
        );
        let mut failures = failures_from_sql(T, &self.failures)?;
        if failures.is_empty() && attempt > 0 {
            failures.push(FailureRecord {
                attempt,
                at: due.saturating_sub(delay),
                code: self.last_code,
                message: self.last_message,
                attrs: BTreeMap::new(),
                rule: rule_from_sql(&self.rule),
                version: version_from_sql(T, &self.version)?,
                delay: Some(delay),
            });
        }
        Ok(ScheduledRetry {
            message: Message {
                id: MessageId::from(self.id),
                biz: self.biz.into(),
                payload: self.payload.into(),
                headers: headers_from_sql(T, &self.headers)?,
                offset: offset_from_sql(T, self.offset)?,
                key: self.key.map(Key::from),
                retry: RetryMeta {
                    attempt,
                    first_delivery: Some(ts_from_sql(T, "first_seen_ms", self.first_seen)?),
                    failures,
                    redrives: count_from_sql(T, "redrives", self.redrives)?,
                },
            },
            due,
            claim: None,
        })
    }
}

/// A dead-letter row as SQLite returns it, before validation.
pub(super) struct RawDeadLetter {
    pub(super) id: i64,
    pub(super) status: String,
    pub(super) message_id: String,
    pub(super) biz: String,
    pub(super) payload: Vec<u8>,
    pub(super) headers: String,
    pub(super) label: String,
    pub(super) reason: String,
    pub(super) last_code: String,
    pub(super) last_message: String,
    pub(super) attempts: i64,
    pub(super) first: i64,
    pub(super) last: i64,
    pub(super) rule: String,
    pub(super) version: String,
    pub(super) attrs: String,
    pub(super) failures: String,
    pub(super) redrives: i64,
    pub(super) key: Option<String>,
}

impl RawDeadLetter {
    pub(super) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(RawDeadLetter {
            id: r.get(0)?,
            status: r.get(1)?,
            message_id: r.get(2)?,
            biz: r.get(3)?,
            payload: r.get(4)?,
            headers: r.get(5)?,
            label: r.get(6)?,
            reason: r.get(7)?,
            last_code: r.get(8)?,
            last_message: r.get(9)?,
            attempts: r.get(10)?,
            first: r.get(11)?,
            last: r.get(12)?,
            rule: r.get(13)?,
            version: r.get(14)?,
            attrs: r.get(15)?,
            failures: r.get(16)?,
            redrives: r.get(17)?,
            key: r.get(18)?,
        })
    }

    /// The letter as it was written: the message with its failures before the last, and the
    /// failure that ended it.
    pub(super) fn decode(self) -> Result<StoredDeadLetter> {
        const T: &str = "dead_letters";
        let status = DeadLetterStatus::parse(&self.status)
            .ok_or_else(|| corrupt(T, "status", &self.status))?;
        let attempts =
            u32::try_from(self.attempts).map_err(|_| corrupt(T, "attempts", self.attempts))?;
        Ok(StoredDeadLetter {
            id: DeadLetterId(self.id),
            status,
            letter: DeadLetter {
                message: Message {
                    id: MessageId::from(self.message_id),
                    biz: self.biz.into(),
                    payload: self.payload.into(),
                    headers: headers_from_sql(T, &self.headers)?,
                    offset: None,
                    key: self.key.map(Key::from),
                    retry: RetryMeta {
                        attempt: attempts,
                        first_delivery: Some(ts_from_sql(T, "first_ms", self.first)?),
                        failures: failures_from_sql(T, &self.failures)?,
                        redrives: count_from_sql(T, "redrives", self.redrives)?,
                    },
                },
                failure: Failure {
                    code: self.last_code,
                    retry_after: None,
                    attrs: attrs_from_sql(T, &self.attrs)?,
                    message: self.last_message,
                },
                label: Label::from(self.label.as_str()),
                reason: reason_from_sql(T, &self.reason)?,
                rule: rule_from_sql(&self.rule),
                version: version_from_sql(T, &self.version)?,
                at: ts_from_sql(T, "last_ms", self.last)?,
            },
        })
    }
}
