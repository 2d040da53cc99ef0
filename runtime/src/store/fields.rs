//! The runtime's records as named fields, for a store that keeps them outside SQLite (the shared
//! store on Redis, crate `rebound-store-redis`, keeps each record as a hash). The fields are
//! the SQLite columns, by name and order, holding the same values (`rows.rs` encodes them
//! once): integers in decimal, text as UTF-8, the payload as it is. So every store reads back
//! exactly what another would write, and none encodes a message or a letter of its own.

use super::rows::{DeadLetterRow, RawDeadLetter, RawRetry, RetryRow, corrupt};
use super::{DeadLetter, Result, ScheduledRetry, StoredDeadLetter};

pub use super::rows::replayed_delivery;

/// The names of the fields, each once (a retry row and a dead letter share most of them).
pub mod name {
    #![allow(missing_docs)]
    pub const MESSAGE_ID: &str = "message_id";
    pub const BIZ: &str = "biz";
    pub const PAYLOAD: &str = "payload";
    pub const HEADERS: &str = "headers";
    pub const DUE_MS: &str = "due_ms";
    pub const ATTEMPT: &str = "attempt";
    pub const FIRST_SEEN_MS: &str = "first_seen_ms";
    pub const LAST_CODE: &str = "last_code";
    pub const LAST_MESSAGE: &str = "last_message";
    pub const LAST_DELAY_MS: &str = "last_delay_ms";
    pub const RULE: &str = "rule";
    pub const RULE_SET_VERSION: &str = "rule_set_version";
    pub const OFFSET: &str = "offset";
    pub const FAILURES: &str = "failures";
    pub const REDRIVES: &str = "redrives";
    pub const ORDERING_KEY: &str = "ordering_key";
    pub const LABEL: &str = "label";
    pub const REASON: &str = "reason";
    pub const ATTEMPTS: &str = "attempts";
    pub const FIRST_MS: &str = "first_ms";
    pub const LAST_MS: &str = "last_ms";
    pub const ATTRS: &str = "attrs";
}

use name::*;

/// The fields of a retry row: the SQLite table's columns, in their order, one field each (a
/// retry without an offset has no `offset` field, one without a key no `ordering_key`).
pub const RETRY_FIELDS: [&str; 16] = [
    MESSAGE_ID,
    BIZ,
    PAYLOAD,
    HEADERS,
    DUE_MS,
    ATTEMPT,
    FIRST_SEEN_MS,
    LAST_CODE,
    LAST_MESSAGE,
    LAST_DELAY_MS,
    RULE,
    RULE_SET_VERSION,
    OFFSET,
    FAILURES,
    REDRIVES,
    ORDERING_KEY,
];

/// The fields of a dead letter: the SQLite table's columns but the row id (the store names the
/// letter by it) and the status (the store's to set); a message without a key has no
/// `ordering_key`.
pub const DEAD_LETTER_FIELDS: [&str; 17] = [
    MESSAGE_ID,
    BIZ,
    PAYLOAD,
    HEADERS,
    LABEL,
    REASON,
    LAST_CODE,
    LAST_MESSAGE,
    ATTEMPTS,
    FIRST_MS,
    LAST_MS,
    RULE,
    RULE_SET_VERSION,
    ATTRS,
    FAILURES,
    REDRIVES,
    ORDERING_KEY,
];

/// The message's content, encoded alike in a retry row and a dead letter: a replay on a shared
/// store copies these fields from the letter into the new retry row.
pub const MESSAGE_FIELDS: [&str; 3] = [BIZ, PAYLOAD, HEADERS];

/// The message's fields a replay copies when the letter has them (a message without a key
/// has no `ordering_key`).
pub const OPTIONAL_MESSAGE_FIELDS: [&str; 1] = [ORDERING_KEY];

/// The fields a retry row and a dead letter begin with, as written: the message's id and
/// content.
fn put_message(
    put: &mut impl FnMut(&'static str, &[u8]),
    id: &str,
    biz: &str,
    payload: &[u8],
    headers: &str,
) {
    put(MESSAGE_ID, id.as_bytes());
    put(BIZ, biz.as_bytes());
    put(PAYLOAD, payload);
    put(HEADERS, headers.as_bytes());
}

/// The fields a retry row and a dead letter end with, as written: the failures so far, the
/// redrives, and the ordering key if the message has one.
fn put_history(
    put: &mut impl FnMut(&'static str, &[u8]),
    failures: &str,
    redrives: u32,
    key: Option<&str>,
) {
    put(FAILURES, failures.as_bytes());
    put(REDRIVES, redrives.to_string().as_bytes());
    if let Some(k) = key {
        put(ORDERING_KEY, k.as_bytes());
    }
}

/// A retry row, encoded: its fields and their values, ready to write.
pub struct RetryFields<'a>(RetryRow<'a>);

impl<'a> RetryFields<'a> {
    /// The fields of `retry` (fails on a value the stores cannot hold).
    pub fn encode(retry: &'a ScheduledRetry) -> Result<RetryFields<'a>> {
        RetryRow::encode(retry).map(RetryFields)
    }

    /// The row as hash fields ([`RETRY_FIELDS`]), each handed to `put` with its value.
    pub fn for_each(&self, mut put: impl FnMut(&'static str, &[u8])) {
        let r = &self.0;
        put_message(&mut put, r.id, r.biz, r.payload, &r.headers);
        put(DUE_MS, r.due.to_string().as_bytes());
        put(ATTEMPT, r.attempt.to_string().as_bytes());
        put(FIRST_SEEN_MS, r.first_seen.to_string().as_bytes());
        put(LAST_CODE, r.last_code.as_bytes());
        put(LAST_MESSAGE, r.last_message.as_bytes());
        put(LAST_DELAY_MS, r.last_delay.to_string().as_bytes());
        put(RULE, r.rule.as_bytes());
        put(RULE_SET_VERSION, r.version.as_bytes());
        if let Some(o) = r.offset {
            put(OFFSET, o.to_string().as_bytes());
        }
        put_history(&mut put, &r.failures, r.redrives, r.key);
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
        let d = &self.0;
        put_message(&mut put, d.id, d.biz, d.payload, &d.headers);
        put(LABEL, d.label.as_bytes());
        put(REASON, d.reason.as_bytes());
        put(LAST_CODE, d.last_code.as_bytes());
        put(LAST_MESSAGE, d.last_message.as_bytes());
        put(ATTEMPTS, d.attempts.to_string().as_bytes());
        put(FIRST_MS, d.first.to_string().as_bytes());
        put(LAST_MS, d.last.to_string().as_bytes());
        put(RULE, d.rule.as_bytes());
        put(RULE_SET_VERSION, d.version.as_bytes());
        put(ATTRS, d.attrs.as_bytes());
        put_history(&mut put, &d.failures, d.redrives, d.key);
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

/// The fields a retry row and a dead letter end with, read back (see [`put_history`]).
struct History {
    failures: String,
    redrives: i64,
    key: Option<String>,
}

impl History {
    /// Reads them from `table`'s fields; rows written before the failures and redrives were
    /// kept have neither field.
    fn read<'f>(table: &'static str, get: &impl Fn(&str) -> Option<&'f [u8]>) -> Result<History> {
        let text = |name| text_field(table, name, get(name));
        let present = |name| get(name).is_some();
        Ok(History {
            failures: if present(FAILURES) {
                text(FAILURES)?
            } else {
                String::new()
            },
            redrives: if present(REDRIVES) {
                int_field(table, REDRIVES, get(REDRIVES))?
            } else {
                0
            },
            key: if present(ORDERING_KEY) {
                Some(text(ORDERING_KEY)?)
            } else {
                None
            },
        })
    }
}

/// The payload, present and taken as it is.
fn payload<'f>(table: &'static str, get: &impl Fn(&str) -> Option<&'f [u8]>) -> Result<Vec<u8>> {
    get(PAYLOAD)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| corrupt(table, PAYLOAD, "missing"))
}

impl RawRetry {
    /// A retry row from a shared store's hash fields ([`RETRY_FIELDS`]; `get` looks one up).
    pub(super) fn from_fields<'f>(get: impl Fn(&str) -> Option<&'f [u8]>) -> Result<Self> {
        const T: &str = "retries";
        let text = |name| text_field(T, name, get(name));
        let int = |name| int_field(T, name, get(name));
        let History {
            failures,
            redrives,
            key,
        } = History::read(T, &get)?;
        Ok(RawRetry {
            id: text(MESSAGE_ID)?,
            biz: text(BIZ)?,
            payload: payload(T, &get)?,
            headers: text(HEADERS)?,
            due: int(DUE_MS)?,
            attempt: int(ATTEMPT)?,
            first_seen: int(FIRST_SEEN_MS)?,
            last_code: text(LAST_CODE)?,
            last_message: text(LAST_MESSAGE)?,
            last_delay: int(LAST_DELAY_MS)?,
            rule: text(RULE)?,
            version: text(RULE_SET_VERSION)?,
            offset: get(OFFSET).map(|_| int(OFFSET)).transpose()?,
            failures,
            redrives,
            key,
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
        let History {
            failures,
            redrives,
            key,
        } = History::read(T, &get)?;
        Ok(RawDeadLetter {
            id,
            status: text("status")?,
            message_id: text(MESSAGE_ID)?,
            biz: text(BIZ)?,
            payload: payload(T, &get)?,
            headers: text(HEADERS)?,
            label: text(LABEL)?,
            reason: text(REASON)?,
            last_code: text(LAST_CODE)?,
            last_message: text(LAST_MESSAGE)?,
            attempts: int(ATTEMPTS)?,
            first: int(FIRST_MS)?,
            last: int(LAST_MS)?,
            rule: text(RULE)?,
            version: text(RULE_SET_VERSION)?,
            attrs: text(ATTRS)?,
            failures,
            redrives,
            key,
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
