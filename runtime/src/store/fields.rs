//! The runtime's records as named fields, for a store that keeps them outside SQLite (the shared
//! store on Redis, crate `rebound-store-redis`, keeps each record as a hash). The fields are
//! the SQLite columns, by name and order, holding the same values (`rows.rs` encodes them
//! once): integers in decimal, text as UTF-8, the payload as it is. So every store reads back
//! exactly what another would write, and none encodes a message or a letter of its own.

use super::rows::{DeadLetterRow, RawDeadLetter, RawRetry, RetryRow, corrupt};
use super::{DeadLetter, Result, ScheduledRetry, StoredDeadLetter};

pub use super::rows::replayed_delivery;

/// The fields of a retry row: the SQLite table's columns, in their order, one field each (a
/// retry without an offset has no `offset` field, one without a key no `ordering_key`).
pub const RETRY_FIELDS: [&str; 16] = [
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

/// The fields of a dead letter: the SQLite table's columns but the row id (the store names the
/// letter by it) and the status (the store's to set); a message without a key has no
/// `ordering_key`.
pub const DEAD_LETTER_FIELDS: [&str; 17] = [
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
pub const MESSAGE_FIELDS: [&str; 3] = ["biz", "payload", "headers"];

/// The message's fields a replay copies when the letter has them (a message without a key
/// has no `ordering_key`).
pub const OPTIONAL_MESSAGE_FIELDS: [&str; 1] = ["ordering_key"];

/// A retry row, encoded: its fields and their values, ready to write.
pub struct RetryFields<'a>(RetryRow<'a>);

impl<'a> RetryFields<'a> {
    /// The fields of `retry` (fails on a value the stores cannot hold).
    pub fn encode(retry: &'a ScheduledRetry) -> Result<RetryFields<'a>> {
        RetryRow::encode(retry).map(RetryFields)
    }

    /// The row as hash fields ([`RETRY_FIELDS`]), each handed to `put` with its value.
    pub fn for_each(&self, mut put: impl FnMut(&'static str, &[u8])) {
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
        put(id, self.0.id.as_bytes());
        put(biz, self.0.biz.as_bytes());
        put(payload, self.0.payload);
        put(headers, self.0.headers.as_bytes());
        put(due, self.0.due.to_string().as_bytes());
        put(attempt, self.0.attempt.to_string().as_bytes());
        put(first_seen, self.0.first_seen.to_string().as_bytes());
        put(code, self.0.last_code.as_bytes());
        put(message, self.0.last_message.as_bytes());
        put(delay, self.0.last_delay.to_string().as_bytes());
        put(rule, self.0.rule.as_bytes());
        put(version, self.0.version.as_bytes());
        if let Some(o) = self.0.offset {
            put(offset, o.to_string().as_bytes());
        }
        put(failures, self.0.failures.as_bytes());
        put(redrives, self.0.redrives.to_string().as_bytes());
        if let Some(k) = self.0.key {
            put(key, k.as_bytes());
        }
    }
}

/// A dead letter, encoded: its fields and their values, ready to write.
pub struct DeadLetterFields<'a>(DeadLetterRow<'a>);

impl<'a> DeadLetterFields<'a> {
    /// The fields of `letter` (fails on a value the stores cannot hold).
    pub fn encode(letter: &'a DeadLetter) -> Result<DeadLetterFields<'a>> {
        DeadLetterRow::encode(letter).map(DeadLetterFields)
    }

    /// The row as hash fields ([`DEAD_LETTER_FIELDS`]), each handed to `put` with its value.
    pub fn for_each(&self, mut put: impl FnMut(&'static str, &[u8])) {
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
        put(id, self.0.id.as_bytes());
        put(biz, self.0.biz.as_bytes());
        put(payload, self.0.payload);
        put(headers, self.0.headers.as_bytes());
        put(label, self.0.label.as_bytes());
        put(reason, self.0.reason.as_bytes());
        put(code, self.0.last_code.as_bytes());
        put(message, self.0.last_message.as_bytes());
        put(attempts, self.0.attempts.to_string().as_bytes());
        put(first, self.0.first.to_string().as_bytes());
        put(last, self.0.last.to_string().as_bytes());
        put(rule, self.0.rule.as_bytes());
        put(version, self.0.version.as_bytes());
        put(attrs, self.0.attrs.as_bytes());
        put(failures, self.0.failures.as_bytes());
        put(redrives, self.0.redrives.to_string().as_bytes());
        if let Some(k) = self.0.key {
            put(key, k.as_bytes());
        }
    }
}

/// A retry read back from its fields ([`RETRY_FIELDS`]; `get` looks one up); a missing or
/// undecodable field is [`StoreError::Corrupt`](super::StoreError::Corrupt).
pub fn retry_from_fields<'f>(get: impl Fn(&str) -> Option<&'f [u8]>) -> Result<ScheduledRetry> {
    RawRetry::from_fields(get)?.decode()
}

/// Dead letter `id` read back from its fields ([`DEAD_LETTER_FIELDS`] and `status`; `get`
/// looks one up).
pub fn dead_letter_from_fields<'f>(
    id: i64,
    get: impl Fn(&str) -> Option<&'f [u8]>,
) -> Result<StoredDeadLetter> {
    RawDeadLetter::from_fields(id, get)?.decode()
}

/// A text field: present and UTF-8; `table` and `name` say where, in the error.
pub fn text_field(table: &'static str, name: &'static str, v: Option<&[u8]>) -> Result<String> {
    let v = v.ok_or_else(|| corrupt(table, name, "missing"))?;
    String::from_utf8(v.to_vec()).map_err(|e| corrupt(table, name, e))
}

/// An integer field: present and in decimal.
pub fn int_field(table: &'static str, name: &'static str, v: Option<&[u8]>) -> Result<i64> {
    let v = v.ok_or_else(|| corrupt(table, name, "missing"))?;
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| corrupt(table, name, String::from_utf8_lossy(v)))
}

impl RawRetry {
    /// A retry row from a shared store's hash fields ([`RETRY_FIELDS`]; `get` looks one up).
    pub(super) fn from_fields<'f>(get: impl Fn(&str) -> Option<&'f [u8]>) -> Result<Self> {
        const T: &str = "retries";
        let text = |name| text_field(T, name, get(name));
        let int = |name| int_field(T, name, get(name));
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
}

impl RawDeadLetter {
    /// Dead letter `id` from a shared store's hash fields ([`DEAD_LETTER_FIELDS`] and
    /// `status`; `get` looks one up).
    pub(super) fn from_fields<'f>(id: i64, get: impl Fn(&str) -> Option<&'f [u8]>) -> Result<Self> {
        const T: &str = "dead_letters";
        let text = |name| text_field(T, name, get(name));
        let int = |name| int_field(T, name, get(name));
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rows::{DEAD_LETTER_COLUMNS, retry_columns};

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
