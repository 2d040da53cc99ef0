//! Rows of the SQLite store and the values in them: decoding with validation (a corrupt value
//! is an error, never a panic) and encoding of timestamps, durations and headers.

use std::time::Duration;

use super::{
    DeadLetter, DeadLetterId, DeadLetterStatus, Headers, Message, MessageId, Result, RetryMeta,
    RuleId, RuleSetVersion, ScheduledRetry, StoreError, StoredDeadLetter,
};
use crate::clock::Timestamp;

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
        })
    }

    pub(super) fn decode(self) -> Result<ScheduledRetry> {
        const T: &str = "retries";
        Ok(ScheduledRetry {
            message: Message {
                id: MessageId(self.id),
                biz: self.biz,
                payload: self.payload,
                headers: headers_from_sql(T, &self.headers)?,
            },
            due: ts_from_sql(T, "due_ms", self.due)?,
            meta: RetryMeta {
                attempt: u32::try_from(self.attempt)
                    .map_err(|_| corrupt(T, "attempt", self.attempt))?,
                first_seen: ts_from_sql(T, "first_seen_ms", self.first_seen)?,
                last_code: self.last_code,
                last_message: self.last_message,
                last_delay: Duration::from_millis(
                    u64::try_from(self.last_delay)
                        .map_err(|_| corrupt(T, "last_delay_ms", self.last_delay))?,
                ),
                rule: RuleId(self.rule),
                rule_set_version: RuleSetVersion(self.version),
            },
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
        })
    }

    pub(super) fn decode(self) -> Result<StoredDeadLetter> {
        const T: &str = "dead_letters";
        let status = DeadLetterStatus::parse(&self.status)
            .ok_or_else(|| corrupt(T, "status", &self.status))?;
        Ok(StoredDeadLetter {
            id: DeadLetterId(self.id),
            status,
            letter: DeadLetter {
                message: Message {
                    id: MessageId(self.message_id),
                    biz: self.biz,
                    payload: self.payload,
                    headers: headers_from_sql(T, &self.headers)?,
                },
                label: self.label,
                reason: self.reason,
                last_code: self.last_code,
                last_message: self.last_message,
                attempts: u32::try_from(self.attempts)
                    .map_err(|_| corrupt(T, "attempts", self.attempts))?,
                first_time: ts_from_sql(T, "first_ms", self.first)?,
                last_time: ts_from_sql(T, "last_ms", self.last)?,
                rule: RuleId(self.rule),
                rule_set_version: RuleSetVersion(self.version),
            },
        })
    }
}

// ---- conversions ---------------------------------------------------------------------------

pub(super) fn required<'a>(field: &'static str, value: &'a str) -> Result<&'a str> {
    let value = value.trim();
    if value.is_empty() {
        Err(StoreError::Blank { field })
    } else {
        Ok(value)
    }
}

pub(super) fn corrupt(
    table: &'static str,
    what: &'static str,
    detail: impl std::fmt::Display,
) -> StoreError {
    StoreError::Corrupt {
        table,
        what,
        detail: detail.to_string(),
    }
}

pub(super) fn ts_to_sql(what: &'static str, t: Timestamp) -> Result<i64> {
    i64::try_from(t.as_millis()).map_err(|_| StoreError::OutOfRange {
        what,
        value: t.as_millis().into(),
        max: i64::MAX as u64,
    })
}

pub(super) fn ts_from_sql(table: &'static str, what: &'static str, ms: i64) -> Result<Timestamp> {
    u64::try_from(ms)
        .map(Timestamp::from_millis)
        .map_err(|_| corrupt(table, what, ms))
}

pub(super) fn duration_to_sql(what: &'static str, d: Duration) -> Result<i64> {
    i64::try_from(d.as_millis()).map_err(|_| StoreError::OutOfRange {
        what,
        value: d.as_millis(),
        max: i64::MAX as u64,
    })
}

pub(super) fn headers_to_sql(h: &Headers) -> Result<String> {
    if h.is_empty() {
        return Ok("{}".to_owned()); // most messages; skips the serializer
    }
    serde_json::to_string(h)
        .map_err(|e| corrupt("headers", "headers", format!("cannot encode: {e}")))
}

pub(super) fn headers_from_sql(table: &'static str, json: &str) -> Result<Headers> {
    serde_json::from_str(json).map_err(|e| corrupt(table, "headers", e))
}
