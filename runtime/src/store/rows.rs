//! The runtime's records as SQLite rows, encoded and decoded in this one place: a retry row
//! holds a [`Message`] with its retry metadata, a dead-letter row a [`DeadLetter`]. Decoding
//! validates (a corrupt value is an error, never a panic).

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::time::Duration;

use rebound_engine::{GiveUpReason, Label, RuleRef, Version};

use super::{
    DeadLetter, DeadLetterId, DeadLetterStatus, Message, MessageId, Result, ScheduledRetry,
    StoreError, StoredDeadLetter,
};
use crate::time::Timestamp;
use crate::topology::{Failure, Headers, LastFailure, RetryMeta};

/// The columns of a retry row, in the order rows are written and read.
macro_rules! retry_columns {
    () => {
        "message_id, biz, payload, headers, due_ms, attempt, first_seen_ms, last_code, \
         last_message, last_delay_ms, rule, rule_set_version, offset"
    };
}
pub(super) use retry_columns;

/// The columns of a dead-letter row, in the order rows are read.
pub(super) const DEAD_LETTER_COLUMNS: &str = "id, status, message_id, biz, payload, headers, \
     label, reason, last_code, last_message, attempts, first_ms, last_ms, rule, \
     rule_set_version, attrs";

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
}

impl<'a> RetryRow<'a> {
    /// The row of `retry`. A message that never failed (a replay: attempt 0) has no last
    /// failure, so its failure columns are empty.
    pub(super) fn encode(retry: &'a ScheduledRetry) -> Result<RetryRow<'a>> {
        let m = &retry.message;
        let last = m.retry.last_failure.as_deref();
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
            last_delay: duration_to_sql("last_delay", last.map_or(Duration::ZERO, |l| l.delay))?,
            rule: last.map_or("", |l| l.rule.as_str()),
            version: last.map(|l| l.version.to_string()).unwrap_or_default(),
            offset: offset_to_sql(m.offset)?,
        })
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
        })
    }

    /// The message as it was scheduled. A replayed dead letter (attempt 0) comes back as a
    /// fresh delivery: no last failure, first delivery at the replay.
    pub(super) fn decode(self) -> Result<ScheduledRetry> {
        const T: &str = "retries";
        let due = ts_from_sql(T, "due_ms", self.due)?;
        let attempt =
            u32::try_from(self.attempt).map_err(|_| corrupt(T, "attempt", self.attempt))?;
        let delay = Duration::from_millis(
            u64::try_from(self.last_delay)
                .map_err(|_| corrupt(T, "last_delay_ms", self.last_delay))?,
        );
        let last_failure = if attempt > 0 {
            Some(Box::new(LastFailure {
                code: self.last_code,
                message: self.last_message,
                at: due.saturating_sub(delay),
                delay,
                rule: rule_from_sql(&self.rule),
                version: version_from_sql(T, &self.version)?,
            }))
        } else {
            None
        };
        Ok(ScheduledRetry {
            message: Message {
                id: MessageId::from(self.id),
                biz: self.biz.into(),
                payload: self.payload.into(),
                headers: headers_from_sql(T, &self.headers)?,
                offset: offset_from_sql(T, self.offset)?,
                retry: RetryMeta {
                    attempt,
                    first_delivery: Some(ts_from_sql(T, "first_seen_ms", self.first_seen)?),
                    last_failure,
                    claim: None,
                },
            },
            due,
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
        })
    }

    /// The letter as it was written. (The message's last *retried* failure is not kept: the
    /// failure that ended it is the letter's `failure`.)
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
                    retry: RetryMeta {
                        attempt: attempts,
                        first_delivery: Some(ts_from_sql(T, "first_ms", self.first)?),
                        last_failure: None,
                        claim: None,
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

// ---- values --------------------------------------------------------------------------------

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

fn out_of_range(what: &'static str, value: u128) -> StoreError {
    StoreError::OutOfRange {
        what,
        value,
        max: i64::MAX as u64,
    }
}

pub(super) fn ts_to_sql(what: &'static str, t: Timestamp) -> Result<i64> {
    i64::try_from(t.as_millis()).map_err(|_| out_of_range(what, t.as_millis().into()))
}

pub(super) fn ts_from_sql(table: &'static str, what: &'static str, ms: i64) -> Result<Timestamp> {
    u64::try_from(ms)
        .map(Timestamp::from_millis)
        .map_err(|_| corrupt(table, what, ms))
}

pub(super) fn duration_to_sql(what: &'static str, d: Duration) -> Result<i64> {
    i64::try_from(d.as_millis()).map_err(|_| out_of_range(what, d.as_millis()))
}

pub(super) fn position_to_sql(what: &'static str, p: u64) -> Result<i64> {
    i64::try_from(p).map_err(|_| out_of_range(what, p.into()))
}

fn offset_to_sql(offset: Option<NonZeroU64>) -> Result<Option<i64>> {
    offset
        .map(|o| position_to_sql("offset", o.get()))
        .transpose()
}

fn offset_from_sql(table: &'static str, offset: Option<i64>) -> Result<Option<NonZeroU64>> {
    offset
        .map(|o| {
            u64::try_from(o)
                .ok()
                .and_then(NonZeroU64::new)
                .ok_or_else(|| corrupt(table, "offset", o))
        })
        .transpose()
}

pub(super) fn headers_to_sql(h: &Headers) -> Result<String> {
    match h.as_map() {
        None => Ok("{}".to_owned()), // most messages; skips the serializer
        Some(map) => map_to_sql("headers", map),
    }
}

fn headers_from_sql(table: &'static str, json: &str) -> Result<Headers> {
    let map: BTreeMap<String, String> =
        serde_json::from_str(json).map_err(|e| corrupt(table, "headers", e))?;
    Ok(map.into_iter().collect())
}

pub(super) fn attrs_to_sql(attrs: &BTreeMap<String, String>) -> Result<String> {
    map_to_sql("attrs", attrs)
}

fn attrs_from_sql(table: &'static str, json: &str) -> Result<BTreeMap<String, String>> {
    serde_json::from_str(json).map_err(|e| corrupt(table, "attrs", e))
}

fn map_to_sql(what: &'static str, map: &BTreeMap<String, String>) -> Result<String> {
    if map.is_empty() {
        return Ok("{}".to_owned());
    }
    serde_json::to_string(map).map_err(|e| corrupt(what, what, format!("cannot encode: {e}")))
}

/// A rule as stored: its id, or `defaults`.
fn rule_from_sql(rule: &str) -> RuleRef {
    match rule {
        "defaults" => RuleRef::Defaults,
        id => RuleRef::Rule(id.into()),
    }
}

fn version_from_sql(table: &'static str, version: &str) -> Result<Version> {
    version
        .parse()
        .map_err(|e: String| corrupt(table, "rule_set_version", e))
}

fn reason_from_sql(table: &'static str, reason: &str) -> Result<GiveUpReason> {
    Ok(match reason {
        "give_up" => GiveUpReason::GiveUp,
        "max_retries" => GiveUpReason::MaxRetries,
        "max_elapsed" => GiveUpReason::MaxElapsed,
        "policy_error" => GiveUpReason::PolicyError,
        "crash_loop" => GiveUpReason::CrashLoop,
        other => return Err(corrupt(table, "reason", other)),
    })
}
