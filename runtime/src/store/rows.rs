//! The runtime's records as rows, encoded and decoded in this one place: a retry row holds a
//! [`Message`] with its retry metadata, a dead-letter row a [`DeadLetter`]. SQLite binds a
//! row's values as columns; the shared store (feature `redis`) keeps the same values as hash
//! fields named like the columns (integers in decimal, text as UTF-8, the payload as it is), so
//! both stores read back exactly what the other would. Decoding validates (a corrupt value is
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

/// The fields of a retry row in a shared store: [`retry_columns`], one hash field each (a
/// retry without an offset has no `offset` field, one without a key no `ordering_key`).
#[cfg(feature = "redis")]
pub(super) const RETRY_FIELDS: [&str; 16] = [
    "message_id",
    "biz",
    "payload",
    "headers",
    "due_ms",
    "attempt",
    "first_seen_ms",
    "last_code",
    "last_message",
    "last_delay_ms",
    "rule",
    "rule_set_version",
    "offset",
    "failures",
    "redrives",
    "ordering_key",
];

/// The fields of a dead letter in a shared store: [`DEAD_LETTER_COLUMNS`] but the row id (the
/// letter's key holds it) and the status (the store's to set); a message without a key has no
/// `ordering_key`.
#[cfg(feature = "redis")]
pub(super) const DEAD_LETTER_FIELDS: [&str; 17] = [
    "message_id",
    "biz",
    "payload",
    "headers",
    "label",
    "reason",
    "last_code",
    "last_message",
    "attempts",
    "first_ms",
    "last_ms",
    "rule",
    "rule_set_version",
    "attrs",
    "failures",
    "redrives",
    "ordering_key",
];

/// The message's content, encoded alike in a retry row and a dead letter: a replay on a shared
/// store copies these fields from the letter into the new retry row.
#[cfg(feature = "redis")]
pub(super) const MESSAGE_FIELDS: [&str; 3] = ["biz", "payload", "headers"];

/// The message's fields a replay copies when the letter has them (a message without a key
/// has no `ordering_key`).
#[cfg(feature = "redis")]
pub(super) const OPTIONAL_MESSAGE_FIELDS: [&str; 1] = ["ordering_key"];

/// The fresh delivery a replay of `message`'s dead letter schedules: due at `at`, attempt 0,
/// no failures, first delivered at `at`; its redrives kept, one more for a `redrive`.
pub(super) fn replayed_delivery(
    mut message: Message,
    at: Timestamp,
    redrive: bool,
) -> ScheduledRetry {
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

    /// The row as hash fields ([`RETRY_FIELDS`]), each handed to `put` with its value.
    #[cfg(feature = "redis")]
    pub(super) fn for_each_field(&self, mut put: impl FnMut(&'static str, &[u8])) {
        let [
            id,
            biz,
            payload,
            headers,
            due,
            attempt,
            first_seen,
            code,
            message,
            delay,
            rule,
            version,
            offset,
            failures,
            redrives,
            key,
        ] = RETRY_FIELDS;
        put(id, self.id.as_bytes());
        put(biz, self.biz.as_bytes());
        put(payload, self.payload);
        put(headers, self.headers.as_bytes());
        put(due, self.due.to_string().as_bytes());
        put(attempt, self.attempt.to_string().as_bytes());
        put(first_seen, self.first_seen.to_string().as_bytes());
        put(code, self.last_code.as_bytes());
        put(message, self.last_message.as_bytes());
        put(delay, self.last_delay.to_string().as_bytes());
        put(rule, self.rule.as_bytes());
        put(version, self.version.as_bytes());
        if let Some(o) = self.offset {
            put(offset, o.to_string().as_bytes());
        }
        put(failures, self.failures.as_bytes());
        put(redrives, self.redrives.to_string().as_bytes());
        if let Some(k) = self.key {
            put(key, k.as_bytes());
        }
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

    /// The row as hash fields ([`DEAD_LETTER_FIELDS`]), each handed to `put` with its value.
    #[cfg(feature = "redis")]
    pub(super) fn for_each_field(&self, mut put: impl FnMut(&'static str, &[u8])) {
        let [
            id,
            biz,
            payload,
            headers,
            label,
            reason,
            code,
            message,
            attempts,
            first,
            last,
            rule,
            version,
            attrs,
            failures,
            redrives,
            key,
        ] = DEAD_LETTER_FIELDS;
        put(id, self.id.as_bytes());
        put(biz, self.biz.as_bytes());
        put(payload, self.payload);
        put(headers, self.headers.as_bytes());
        put(label, self.label.as_bytes());
        put(reason, self.reason.as_bytes());
        put(code, self.last_code.as_bytes());
        put(message, self.last_message.as_bytes());
        put(attempts, self.attempts.to_string().as_bytes());
        put(first, self.first.to_string().as_bytes());
        put(last, self.last.to_string().as_bytes());
        put(rule, self.rule.as_bytes());
        put(version, self.version.as_bytes());
        put(attrs, self.attrs.as_bytes());
        put(failures, self.failures.as_bytes());
        put(redrives, self.redrives.to_string().as_bytes());
        if let Some(k) = self.key {
            put(key, k.as_bytes());
        }
    }
}

/// A retry row as SQLite returns it, before validation.
pub(super) struct RawRetry {
    id: String,
    biz: String,
    payload: Vec<u8>,
    headers: String,
    due: i64,
    attempt: i64,
    first_seen: i64,
    last_code: String,
    last_message: String,
    last_delay: i64,
    rule: String,
    version: String,
    offset: Option<i64>,
    failures: String,
    redrives: i64,
    key: Option<String>,
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

    /// A retry row from a shared store's hash fields ([`RETRY_FIELDS`]; `get` looks one up).
    #[cfg(feature = "redis")]
    pub(super) fn from_fields<'f>(get: impl Fn(&str) -> Option<&'f [u8]>) -> Result<Self> {
        const T: &str = "retries";
        let text = |name| field_text(T, name, get(name));
        let int = |name| field_int(T, name, get(name));
        let [
            id,
            biz,
            payload,
            headers,
            due,
            attempt,
            first_seen,
            code,
            message,
            delay,
            rule,
            version,
            offset,
            failures,
            redrives,
            key,
        ] = RETRY_FIELDS;
        Ok(RawRetry {
            id: text(id)?,
            biz: text(biz)?,
            payload: get(payload)
                .ok_or_else(|| corrupt(T, payload, "missing"))?
                .to_vec(),
            headers: text(headers)?,
            due: int(due)?,
            attempt: int(attempt)?,
            first_seen: int(first_seen)?,
            last_code: text(code)?,
            last_message: text(message)?,
            last_delay: int(delay)?,
            rule: text(rule)?,
            version: text(version)?,
            offset: get(offset).map(|_| int(offset)).transpose()?,
            // Rows written before the failures were kept have neither field.
            failures: get(failures)
                .map(|_| text(failures))
                .transpose()?
                .unwrap_or_default(),
            redrives: get(redrives)
                .map(|_| int(redrives))
                .transpose()?
                .unwrap_or(0),
            key: get(key).map(|_| text(key)).transpose()?,
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
    id: i64,
    status: String,
    message_id: String,
    biz: String,
    payload: Vec<u8>,
    headers: String,
    label: String,
    reason: String,
    last_code: String,
    last_message: String,
    attempts: i64,
    first: i64,
    last: i64,
    rule: String,
    version: String,
    attrs: String,
    failures: String,
    redrives: i64,
    key: Option<String>,
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

    /// Dead letter `id` from a shared store's hash fields ([`DEAD_LETTER_FIELDS`] and
    /// `status`; `get` looks one up).
    #[cfg(feature = "redis")]
    pub(super) fn from_fields<'f>(id: i64, get: impl Fn(&str) -> Option<&'f [u8]>) -> Result<Self> {
        const T: &str = "dead_letters";
        let text = |name| field_text(T, name, get(name));
        let int = |name| field_int(T, name, get(name));
        let [
            message_id,
            biz,
            payload,
            headers,
            label,
            reason,
            code,
            message,
            attempts,
            first,
            last,
            rule,
            version,
            attrs,
            failures,
            redrives,
            key,
        ] = DEAD_LETTER_FIELDS;
        Ok(RawDeadLetter {
            id,
            status: text("status")?,
            message_id: text(message_id)?,
            biz: text(biz)?,
            payload: get(payload)
                .ok_or_else(|| corrupt(T, payload, "missing"))?
                .to_vec(),
            headers: text(headers)?,
            label: text(label)?,
            reason: text(reason)?,
            last_code: text(code)?,
            last_message: text(message)?,
            attempts: int(attempts)?,
            first: int(first)?,
            last: int(last)?,
            rule: text(rule)?,
            version: text(version)?,
            attrs: text(attrs)?,
            failures: get(failures)
                .map(|_| text(failures))
                .transpose()?
                .unwrap_or_default(),
            redrives: get(redrives)
                .map(|_| int(redrives))
                .transpose()?
                .unwrap_or(0),
            key: get(key).map(|_| text(key)).transpose()?,
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

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;

    /// The shared store's fields are the SQLite columns, by name and order.
    #[test]
    fn hash_fields_are_named_like_the_columns() {
        let columns: Vec<&str> = retry_columns!().split(", ").collect();
        assert_eq!(columns, RETRY_FIELDS);
        let columns: Vec<&str> = DEAD_LETTER_COLUMNS.split(", ").collect();
        assert_eq!(columns[..2], ["id", "status"]);
        assert_eq!(columns[2..], DEAD_LETTER_FIELDS);
        for field in MESSAGE_FIELDS.iter().chain(&OPTIONAL_MESSAGE_FIELDS) {
            assert!(RETRY_FIELDS.contains(field) && DEAD_LETTER_FIELDS.contains(field));
        }
    }
}
