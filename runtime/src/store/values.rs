//! The values inside a row, to and from what the stores hold: times, durations, positions and
//! offsets as integers; headers and attrs as JSON objects; a rule, a version, a give-up reason
//! as text; and the errors of a value that cannot be read back (`corrupt`).

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::time::Duration;

use rebound_engine::{GiveUpReason, RuleRef, Version};

use super::{Result, StoreError};
use crate::time::Timestamp;
use crate::topology::Headers;

/// [`StoreError::corrupt`], as the decoders here write it.
pub(super) fn corrupt(
    table: &'static str,
    what: &'static str,
    detail: impl std::fmt::Display,
) -> StoreError {
    StoreError::corrupt(table, what, detail)
}

pub(super) fn count_from_sql(table: &'static str, what: &'static str, n: i64) -> Result<u32> {
    u32::try_from(n).map_err(|_| corrupt(table, what, n))
}

pub(super) fn out_of_range(what: &'static str, value: u128) -> StoreError {
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

pub(super) fn offset_to_sql(offset: Option<NonZeroU64>) -> Result<Option<i64>> {
    offset
        .map(|o| position_to_sql("offset", o.get()))
        .transpose()
}

pub(super) fn offset_from_sql(
    table: &'static str,
    offset: Option<i64>,
) -> Result<Option<NonZeroU64>> {
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

pub(super) fn headers_from_sql(table: &'static str, json: &str) -> Result<Headers> {
    let map: BTreeMap<String, String> =
        serde_json::from_str(json).map_err(|e| corrupt(table, "headers", e))?;
    Ok(map.into_iter().collect())
}

pub(super) fn attrs_to_sql(attrs: &BTreeMap<String, String>) -> Result<String> {
    map_to_sql("attrs", attrs)
}

pub(super) fn attrs_from_sql(table: &'static str, json: &str) -> Result<BTreeMap<String, String>> {
    serde_json::from_str(json).map_err(|e| corrupt(table, "attrs", e))
}

pub(super) fn map_to_sql(what: &'static str, map: &BTreeMap<String, String>) -> Result<String> {
    if map.is_empty() {
        return Ok("{}".to_owned());
    }
    serde_json::to_string(map).map_err(|e| corrupt(what, what, format!("cannot encode: {e}")))
}

/// A rule as stored: its id, or `defaults`.
pub(super) fn rule_from_sql(rule: &str) -> RuleRef {
    match rule {
        "defaults" => RuleRef::Defaults,
        id => RuleRef::Rule(id.into()),
    }
}

pub(super) fn version_from_sql(table: &'static str, version: &str) -> Result<Version> {
    version
        .parse()
        .map_err(|e: rebound_engine::NotAVersion| corrupt(table, "rule_set_version", e))
}

pub(super) fn reason_from_sql(table: &'static str, reason: &str) -> Result<GiveUpReason> {
    Ok(match reason {
        "give_up" => GiveUpReason::GiveUp,
        "max_retries" => GiveUpReason::MaxRetries,
        "max_elapsed" => GiveUpReason::MaxElapsed,
        "policy_error" => GiveUpReason::PolicyError,
        "crash_loop" => GiveUpReason::CrashLoop,
        "killed" => GiveUpReason::Killed,
        "budget" => GiveUpReason::Budget,
        "refused" => GiveUpReason::Refused,
        other => return Err(corrupt(table, "reason", other)),
    })
}
